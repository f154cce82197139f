//! A package power that follows what really runs on this machine: the known truth
//! behind attribution tests.
//!
//! With [`LoadFollowing`] in the power profile, each package draws
//! `idle_w + per_cpu_w × (number of its CPUs busy)`, where "busy" is read from the
//! real machine's `/proc/stat` (not the emulated one): a CPU's busy time is the
//! wall time since the mount less what `/proc/stat` counts as its `idle` and
//! `iowait`. The emulated package energy is then exactly
//! `idle_w × t + per_cpu_w × Σ busy`, so a test knows each process's true dynamic
//! energy: `per_cpu_w ×` its CPU time (`/proc/PID/schedstat`), and each cgroup's
//! (`cpu.stat` `usage_usec`).
//!
//! Why idle rather than the busy fields: with the tick-based accounting most
//! kernels use, `user` and `system` are sampled at each tick (statistical), while
//! `idle` on a tickless kernel is the measured time spent idle. `/proc/stat` prints
//! it in USER_HZ (10 ms) units, so the busy time the model sees may run ahead of the
//! truth by at most one USER_HZ period per CPU at any instant; the error does not
//! accumulate (the busy time is clamped to never decrease and never exceed wall time).
//!
//! Real CPU `c` belongs to emulated socket `c / cpus_per_socket`; CPUs beyond the
//! emulated ones are ignored. Emulate as many CPUs as the machine has for the
//! emulated topology to match the real one.
//!
//! `/proc/stat` is read when a counter is read at an emulated time later than the
//! last one seen, so two reads at the same counter time agree, and the values are
//! kept (one entry per change) so that a fault step in the past still finds the
//! energy of its time.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

/// Femtojoules per (µW × ns).
const FJ_PER_UW_NS: u128 = 1;
/// Nanoseconds per USER_HZ tick (`/proc/stat` is always in USER_HZ = 100).
const NS_PER_TICK: u64 = 10_000_000;
/// At most this many past values are kept (one per change of the busy time, at
/// most 100 per second per CPU): about an hour at full rate on a small machine.
const HISTORY: usize = 1 << 20;

/// A load-following package power: `idle_w` plus `per_cpu_w` per busy CPU.
///
/// Set it in [`crate::PowerProfile::follow`] (text form `follow=IDLE:PER_CPU` in a
/// power specification, e.g. `follow=10:5`). The package's configured watts are
/// then unused; core, uncore, DRAM and psys keep their constant power, and a
/// [`crate::Trace`] scales the idle part only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadFollowing {
    /// The package's power when none of its CPUs runs anything, watts.
    pub idle_w: f64,
    /// What each busy CPU adds, watts.
    pub per_cpu_w: f64,
    /// Where to read the per-CPU times; `None`: the real `/proc/stat`. Tests give a
    /// file they write.
    #[serde(default)]
    pub stat_path: Option<PathBuf>,
}

impl LoadFollowing {
    /// `idle_w` plus `per_cpu_w` per busy CPU, read from `/proc/stat`.
    pub fn new(idle_w: f64, per_cpu_w: f64) -> LoadFollowing {
        LoadFollowing {
            idle_w,
            per_cpu_w,
            stat_path: None,
        }
    }

    /// Checks the numbers: both finite, 0 to 10000 W.
    pub fn check(&self) -> std::result::Result<(), String> {
        for (name, v) in [("idle", self.idle_w), ("per-CPU", self.per_cpu_w)] {
            if !(v.is_finite() && (0.0..=10_000.0).contains(&v)) {
                return Err(format!("load-following {name} power {v} W (0 to 10000)"));
            }
        }
        Ok(())
    }

    /// Parses `IDLE:PER_CPU` (watts, an optional `W` after each).
    pub fn parse(text: &str) -> std::result::Result<LoadFollowing, String> {
        let (idle, per) = text
            .split_once(':')
            .ok_or_else(|| format!("'{text}' is not IDLE:PER_CPU (e.g. 10:5)"))?;
        let num = |s: &str| {
            s.trim()
                .trim_end_matches(['W', 'w'])
                .parse::<f64>()
                .map_err(|_| format!("'{s}' is not a number of watts"))
        };
        let f = LoadFollowing::new(num(idle)?, num(per)?);
        f.check()?;
        Ok(f)
    }
}

/// Per-CPU (idle + iowait) ticks from `/proc/stat` text, by CPU number.
pub(crate) fn idle_ticks(stat: &str) -> Vec<(u32, u64)> {
    let mut out = Vec::new();
    for line in stat.lines() {
        let mut f = line.split_ascii_whitespace();
        let Some(cpu) = f.next().and_then(|n| n.strip_prefix("cpu")) else {
            continue;
        };
        let Ok(cpu) = cpu.parse::<u32>() else {
            continue; // the "cpu" total line
        };
        let v: Vec<u64> = f.take(5).filter_map(|x| x.parse().ok()).collect();
        if v.len() == 5 {
            out.push((cpu, v[3] + v[4]));
        }
    }
    out
}

#[derive(Debug)]
struct State {
    /// The latest counter time seen, ns since the mount (quantized).
    last_ns: u64,
    /// Busy ns per real CPU since the mount, as of `last_ns`.
    busy_ns: Vec<u64>,
    /// (time since the mount, busy ns per socket) at each change, in time order.
    history: Vec<(u64, Vec<u64>)>,
}

/// The load-following part of the truth: busy time per socket over time.
#[derive(Debug)]
pub(crate) struct Follower {
    pub per_cpu_uw: u64,
    stat_path: PathBuf,
    cpus_per_socket: u32,
    sockets: u32,
    /// (idle + iowait) ticks per real CPU at the mount.
    base_ticks: Vec<u64>,
    state: Mutex<State>,
}

impl Follower {
    /// Reads the baseline now (the mount).
    pub fn new(f: &LoadFollowing, sockets: u32, cpus_per_socket: u32) -> Follower {
        let stat_path = f
            .stat_path
            .clone()
            .unwrap_or_else(|| PathBuf::from("/proc/stat"));
        let cpus = (sockets * cpus_per_socket) as usize;
        let mut base_ticks = vec![0u64; cpus];
        for (c, t) in read_idle(&stat_path) {
            if let Some(b) = base_ticks.get_mut(c as usize) {
                *b = t;
            }
        }
        Follower {
            per_cpu_uw: (f.per_cpu_w * 1e6).round() as u64,
            stat_path,
            cpus_per_socket,
            sockets,
            base_ticks,
            state: Mutex::new(State {
                last_ns: 0,
                busy_ns: vec![0; cpus],
                history: vec![(0, vec![0; sockets as usize])],
            }),
        }
    }

    /// Busy ns of `socket`'s CPUs from the mount to `at_ns` (wall time since the
    /// mount, quantized to the counter's updates).
    pub fn busy_ns(&self, socket: u32, at_ns: u64) -> u64 {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if at_ns > st.last_ns {
            self.update(&mut st, at_ns);
        }
        // The latest entry at or before `at_ns`.
        let i = st.history.partition_point(|(t, _)| *t <= at_ns);
        st.history
            .get(i.saturating_sub(1))
            .and_then(|(_, v)| v.get(socket as usize).copied())
            .unwrap_or(0)
    }

    /// The dynamic energy of `socket` by `at_ns`, femtojoules.
    pub fn dynamic_fj(&self, socket: u32, at_ns: u64) -> u128 {
        u128::from(self.per_cpu_uw) * u128::from(self.busy_ns(socket, at_ns)) * FJ_PER_UW_NS
    }

    fn update(&self, st: &mut State, at_ns: u64) {
        st.last_ns = at_ns;
        for (c, ticks) in read_idle(&self.stat_path) {
            let c = c as usize;
            let (Some(base), Some(busy)) = (self.base_ticks.get(c), st.busy_ns.get_mut(c)) else {
                continue;
            };
            let idle = ticks.saturating_sub(*base).saturating_mul(NS_PER_TICK);
            // Never backwards (idle is printed in whole ticks), never above wall time.
            *busy = (*busy).max(at_ns.saturating_sub(idle)).min(at_ns);
        }
        let mut per_socket = vec![0u64; self.sockets as usize];
        for (c, b) in st.busy_ns.iter().enumerate() {
            if let Some(s) = per_socket.get_mut(c / self.cpus_per_socket.max(1) as usize) {
                *s += b;
            }
        }
        if st.history.last().is_some_and(|(_, v)| *v != per_socket) {
            if st.history.len() >= HISTORY {
                st.history.remove(1);
            }
            st.history.push((at_ns, per_socket));
        }
    }
}

fn read_idle(path: &std::path::Path) -> Vec<(u32, u64)> {
    // An unreadable file counts as no change: the package stays at its idle power.
    std::fs::read_to_string(path)
        .map(|s| idle_ticks(&s))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(idle: &[u64]) -> String {
        let mut s = String::from("cpu  1 2 3 4 5 6 7 8 9 10\n");
        for (c, i) in idle.iter().enumerate() {
            s += &format!("cpu{c} 100 0 50 {i} 3 0 1 0 0 0\n");
        }
        s + "intr 1 2 3\n"
    }

    #[test]
    fn parses_idle_and_iowait_per_cpu() {
        assert_eq!(idle_ticks(&stat(&[10, 20])), vec![(0, 13), (1, 23)]);
        assert!(idle_ticks("garbage\ncpuX 1 2\ncpu3 1 2\n").is_empty());
    }

    #[test]
    fn busy_is_wall_less_idle_per_socket_monotone_and_at_most_wall() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stat");
        std::fs::write(&path, stat(&[0, 0, 0, 0])).unwrap();
        let f = LoadFollowing {
            stat_path: Some(path.clone()),
            ..LoadFollowing::new(10.0, 5.0)
        };
        let fol = Follower::new(&f, 2, 2);
        // 1 s later: cpu0 idle 100 ticks (1 s: idle), cpu1 idle 50 (busy 0.5 s),
        // cpu2 idle 0 (busy 1 s), cpu3 idle 100.
        std::fs::write(&path, stat(&[100, 50, 0, 100])).unwrap();
        assert_eq!(fol.busy_ns(0, 1_000_000_000), 500_000_000);
        assert_eq!(fol.busy_ns(1, 1_000_000_000), 1_000_000_000);
        // 5 W × 0.5 s.
        assert_eq!(fol.dynamic_fj(0, 1_000_000_000), 2_500_000_000_000_000);
        // A past time finds the value of its time.
        assert_eq!(fol.busy_ns(0, 999_999_999), 0);
        // Idle printed ahead of wall time (tick rounding) neither lowers nor overshoots.
        std::fs::write(&path, stat(&[130, 80, 10, 130])).unwrap();
        // cpu1's idle says 0.4 s busy, below the 0.5 s already counted: it stays.
        assert_eq!(fol.busy_ns(0, 1_200_000_000), 500_000_000);
        assert_eq!(fol.busy_ns(1, 1_200_000_000), 1_100_000_000);
        // cpu0 reported more idle than wall time: its busy stays 0.
        let st = fol.state.lock().unwrap();
        assert_eq!(st.busy_ns[0], 0);
    }

    #[test]
    fn parse_and_check() {
        let f = LoadFollowing::parse("10W:5").unwrap();
        assert_eq!((f.idle_w, f.per_cpu_w), (10.0, 5.0));
        assert!(LoadFollowing::parse("10").is_err());
        assert!(LoadFollowing::parse("x:5").is_err());
        assert!(LoadFollowing::parse("-1:5").is_err());
    }
}
