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
//! With emulated CPU frequencies ([`crate::CpuFreq`], `--cpufreq`) a third
//! coefficient, `per_ghz_w`, makes each busy CPU draw `per_cpu_w + per_ghz_w × f`,
//! `f` its `scaling_cur_freq` in GHz: the dynamic energy of a package is
//! `Σ over its CPUs ∫ (per_cpu_w + per_ghz_w × f_cpu(t)) d busy_cpu(t)`, exact in
//! integers. Each advance of a CPU's busy time is charged at the frequency in force
//! since the previous one, and a write that changes a frequency first brings the
//! totals up to its time, so busy time before the write is charged at the old
//! frequency (to the counter's update interval).
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

/// A load-following package power: `idle_w` plus, per busy CPU, `per_cpu_w` and
/// `per_ghz_w` per GHz of its frequency.
///
/// Set it in [`crate::PowerProfile::follow`] (text form
/// `follow=IDLE:PER_CPU[:PER_GHZ]` in a power specification, e.g. `follow=10:5` or
/// `follow=10:2:1`). The package's configured watts are then unused; core, uncore,
/// DRAM and psys keep their constant power, and a [`crate::Trace`] scales the idle
/// part only. A nonzero `per_ghz_w` needs emulated frequencies
/// ([`crate::EmulatorConfig::cpufreq`]): the configuration is refused without.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadFollowing {
    /// The package's power when none of its CPUs runs anything, watts.
    pub idle_w: f64,
    /// What each busy CPU adds whatever its frequency, watts.
    pub per_cpu_w: f64,
    /// What each busy CPU adds per GHz of its `scaling_cur_freq`, watts per GHz.
    #[serde(default)]
    pub per_ghz_w: f64,
    /// Where to read the per-CPU times; `None`: the real `/proc/stat`. Tests give a
    /// file they write.
    #[serde(default)]
    pub stat_path: Option<PathBuf>,
}

impl LoadFollowing {
    /// `idle_w` plus `per_cpu_w` per busy CPU, read from `/proc/stat` (no
    /// frequency term).
    pub fn new(idle_w: f64, per_cpu_w: f64) -> LoadFollowing {
        LoadFollowing {
            idle_w,
            per_cpu_w,
            per_ghz_w: 0.0,
            stat_path: None,
        }
    }

    /// Checks the numbers: all finite, 0 to 10000 W (per GHz).
    pub fn check(&self) -> std::result::Result<(), String> {
        for (name, v) in [
            ("idle", self.idle_w),
            ("per-CPU", self.per_cpu_w),
            ("per-GHz", self.per_ghz_w),
        ] {
            if !(v.is_finite() && (0.0..=10_000.0).contains(&v)) {
                return Err(format!("load-following {name} power {v} W (0 to 10000)"));
            }
        }
        Ok(())
    }

    /// Parses `IDLE:PER_CPU[:PER_GHZ]` (watts, an optional `W` after each).
    pub fn parse(text: &str) -> std::result::Result<LoadFollowing, String> {
        let parts: Vec<&str> = text.split(':').collect();
        if !(2..=3).contains(&parts.len()) {
            return Err(format!(
                "'{text}' is not IDLE:PER_CPU[:PER_GHZ] (e.g. 10:5 or 10:2:1)"
            ));
        }
        let num = |s: &str| {
            s.trim()
                .trim_end_matches(['W', 'w'])
                .parse::<f64>()
                .map_err(|_| format!("'{s}' is not a number of watts"))
        };
        let mut f = LoadFollowing::new(num(parts[0])?, num(parts[1])?);
        if let Some(g) = parts.get(2) {
            f.per_ghz_w = num(g)?;
        }
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

/// One socket's load-following totals at some time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SocketLoad {
    /// Busy ns of its CPUs since the mount.
    busy_ns: u64,
    /// Its dynamic energy since the mount, zeptojoules (µW × ns × 10⁻⁶, exact for
    /// the per-GHz term: µW/GHz × kHz × ns).
    dynamic_zj: u128,
}

#[derive(Debug)]
struct State {
    /// The latest counter time seen, ns since the mount (quantized).
    last_ns: u64,
    /// Busy ns per real CPU since the mount, as of `last_ns`.
    busy_ns: Vec<u64>,
    /// Per socket, as of `last_ns`.
    sockets: Vec<SocketLoad>,
    /// (time since the mount, per socket) at each change, in time order.
    history: Vec<(u64, Vec<SocketLoad>)>,
}

/// Zeptojoules per femtojoule.
const ZJ_PER_FJ: u128 = 1_000_000;
/// Zeptojoules per (µW × ns).
const ZJ_PER_UW_NS: u128 = ZJ_PER_FJ * FJ_PER_UW_NS;

/// The load-following part of the truth: busy time and dynamic energy per socket
/// over time.
#[derive(Debug)]
pub(crate) struct Follower {
    per_cpu_uw: u64,
    /// µW per GHz of a busy CPU's frequency.
    per_ghz_uw: u64,
    stat_path: PathBuf,
    cpus_per_socket: u32,
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
        let zero = vec![SocketLoad::default(); sockets as usize];
        Follower {
            per_cpu_uw: (f.per_cpu_w * 1e6).round() as u64,
            per_ghz_uw: (f.per_ghz_w * 1e6).round() as u64,
            stat_path,
            cpus_per_socket,
            base_ticks,
            state: Mutex::new(State {
                last_ns: 0,
                busy_ns: vec![0; cpus],
                sockets: zero.clone(),
                history: vec![(0, zero)],
            }),
        }
    }

    /// `socket`'s totals at `at_ns` (wall time since the mount, quantized to the
    /// counter's updates); a time later than any seen first reads `/proc/stat`,
    /// charging the busy time since at `khz` (each CPU's frequency until now).
    fn at(&self, socket: u32, at_ns: u64, khz: &[u64]) -> SocketLoad {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if at_ns > st.last_ns {
            self.update(&mut st, at_ns, khz);
        }
        // The latest entry at or before `at_ns`.
        let i = st.history.partition_point(|(t, _)| *t <= at_ns);
        st.history
            .get(i.saturating_sub(1))
            .and_then(|(_, v)| v.get(socket as usize).copied())
            .unwrap_or_default()
    }

    /// Busy ns of `socket`'s CPUs from the mount to `at_ns`; `khz` as in
    /// [`Follower::dynamic_fj`].
    pub fn busy_ns(&self, socket: u32, at_ns: u64, khz: &[u64]) -> u64 {
        self.at(socket, at_ns, khz).busy_ns
    }

    /// The dynamic energy of `socket` by `at_ns`, femtojoules; `khz` is each real
    /// CPU's frequency (kHz) since the last time seen (empty, or short: 0).
    pub fn dynamic_fj(&self, socket: u32, at_ns: u64, khz: &[u64]) -> u128 {
        self.at(socket, at_ns, khz).dynamic_zj / ZJ_PER_FJ
    }

    /// Brings the totals up to `at_ns` with the frequencies in force until then:
    /// called before a frequency changes, so that the busy time before the change
    /// is charged at the old one.
    pub fn advance(&self, at_ns: u64, khz: &[u64]) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if at_ns > st.last_ns {
            self.update(&mut st, at_ns, khz);
        }
    }

    fn update(&self, st: &mut State, at_ns: u64, khz: &[u64]) {
        st.last_ns = at_ns;
        let per = self.cpus_per_socket.max(1) as usize;
        for (c, ticks) in read_idle(&self.stat_path) {
            let c = c as usize;
            let (Some(base), Some(busy)) = (self.base_ticks.get(c), st.busy_ns.get_mut(c)) else {
                continue;
            };
            let idle = ticks.saturating_sub(*base).saturating_mul(NS_PER_TICK);
            // Never backwards (idle is printed in whole ticks), never above wall time.
            let now = (*busy).max(at_ns.saturating_sub(idle)).min(at_ns);
            let delta = now - *busy;
            *busy = now;
            if let Some(s) = st.sockets.get_mut(c / per) {
                // Each busy ns draws per_cpu + per_ghz × f: in zJ, µW × ns × 10⁶
                // plus (µW/GHz) × kHz × ns.
                let f = u128::from(khz.get(c).copied().unwrap_or(0));
                let zj =
                    u128::from(self.per_cpu_uw) * ZJ_PER_UW_NS + u128::from(self.per_ghz_uw) * f;
                s.busy_ns += delta;
                s.dynamic_zj += u128::from(delta) * zj;
            }
        }
        if st.history.last().is_some_and(|(_, v)| *v != st.sockets) {
            if st.history.len() >= HISTORY {
                st.history.remove(1);
            }
            st.history.push((at_ns, st.sockets.clone()));
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
        assert_eq!(fol.busy_ns(0, 1_000_000_000, &[]), 500_000_000);
        assert_eq!(fol.busy_ns(1, 1_000_000_000, &[]), 1_000_000_000);
        // 5 W × 0.5 s.
        assert_eq!(fol.dynamic_fj(0, 1_000_000_000, &[]), 2_500_000_000_000_000);
        // A past time finds the value of its time.
        assert_eq!(fol.busy_ns(0, 999_999_999, &[]), 0);
        // Idle printed ahead of wall time (tick rounding) neither lowers nor overshoots.
        std::fs::write(&path, stat(&[130, 80, 10, 130])).unwrap();
        // cpu1's idle says 0.4 s busy, below the 0.5 s already counted: it stays.
        assert_eq!(fol.busy_ns(0, 1_200_000_000, &[]), 500_000_000);
        assert_eq!(fol.busy_ns(1, 1_200_000_000, &[]), 1_100_000_000);
        // cpu0 reported more idle than wall time: its busy stays 0.
        let st = fol.state.lock().unwrap();
        assert_eq!(st.busy_ns[0], 0);
    }

    /// A frequency change mid-way: the busy time before it is charged at the old
    /// frequency, after it at the new one, and the energy is the integral to the
    /// femtojoule.
    #[test]
    fn dynamic_energy_integrates_each_cpus_frequency() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stat");
        std::fs::write(&path, stat(&[0, 0, 0, 0])).unwrap();
        let f = LoadFollowing {
            per_ghz_w: 1.0,
            stat_path: Some(path.clone()),
            ..LoadFollowing::new(10.0, 2.0)
        };
        let fol = Follower::new(&f, 2, 2);
        let (fast, slow) = (3_000_000, 1_500_000);
        // 0 to 1 s at 3 GHz: cpu0 busy 0.5 s, cpu1 1 s, cpu2 0.25 s, cpu3 idle.
        std::fs::write(&path, stat(&[50, 0, 75, 100])).unwrap();
        fol.advance(1_000_000_000, &[fast, fast, fast, fast]);
        // cpu1 and cpu2 drop to 1.5 GHz; 1 to 3 s: cpu0 busy 1 s, cpu1 2 s, cpu2 2 s.
        std::fs::write(&path, stat(&[150, 0, 75, 300])).unwrap();
        let khz = [fast, slow, slow, fast];
        let j = |s, t| fol.dynamic_fj(s, t, &khz) as f64 / 1e15;
        // Socket 0: cpu0 (0.5 + 1) s × (2 + 3) W, cpu1 1 s × 5 W + 2 s × 3.5 W.
        assert_eq!(j(0, 3_000_000_000), 7.5 + 5.0 + 7.0);
        // Socket 1: cpu2 0.25 s × 5 W + 2 s × 3.5 W; cpu3 never busy.
        assert_eq!(j(1, 3_000_000_000), 1.25 + 7.0);
        assert_eq!(fol.busy_ns(0, 3_000_000_000, &khz), 4_500_000_000);
        // The past keeps the value of its time.
        assert_eq!(j(0, 2_999_999_999), 2.5 + 5.0);
    }

    #[test]
    fn parse_and_check() {
        let f = LoadFollowing::parse("10W:5").unwrap();
        assert_eq!((f.idle_w, f.per_cpu_w, f.per_ghz_w), (10.0, 5.0, 0.0));
        let f = LoadFollowing::parse("10:2:1.5W").unwrap();
        assert_eq!((f.idle_w, f.per_cpu_w, f.per_ghz_w), (10.0, 2.0, 1.5));
        for bad in [
            "10", "x:5", "-1:5", "10:2:x", "10:2:-1", "10:2:1:1", "10:2:inf",
        ] {
            assert!(LoadFollowing::parse(bad).is_err(), "{bad} accepted");
        }
    }
}
