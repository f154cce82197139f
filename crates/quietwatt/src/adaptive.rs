//! An adaptive sampling rate: fast when the machine works, slow when it idles
//! (paper 002, Fig. 11-13: sampling at 1 kHz raises an idle server's power, so
//! sampling fast only when something happens saves most of the cost).
//!
//! The load is the busy fraction of all CPUs from the first line of `/proc/stat`,
//! read with one `pread` into a buffer kept from the start (no allocation: it runs
//! in the sampler thread). The rate rises at once when the load rises, and falls
//! only after the load has stayed lower for a hold time, so a burst is not missed
//! and a short pause does not drop the rate. It never falls below the rate at which
//! a counter could wrap unseen.

use crate::error::{Error, Result, SourceError};
use crate::overhead::process_cpu_ns;
use crate::root::SysRoot;
use crate::ticker::Hertz;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::Duration;

/// Default lowest rate of `--freq auto`: an idle machine is woken at most 10 times
/// a second by quietwatt (the target), counting the writer's two wake-ups a
/// second and leaving room for the last one of a flush interval.
pub const DEFAULT_MIN_HZ: f64 = 5.0;
/// Default highest rate of `--freq auto`.
pub const DEFAULT_MAX_HZ: f64 = 1000.0;
/// How long the load must stay lower before the rate falls.
pub const DEFAULT_HOLD: Duration = Duration::from_secs(2);
/// Shortest time between two reads of `/proc/stat` (it changes every 10 ms per CPU
/// at USER_HZ = 100, and generating it costs tens of microseconds).
pub const DEFAULT_PROBE_EVERY: Duration = Duration::from_millis(50);

/// Load at or below which the lowest rate is enough.
const IDLE_LOAD: f64 = 0.05;
/// Load at or above which the highest rate is used.
const BUSY_LOAD: f64 = 0.50;
/// Rates between the bounds, on a geometric ladder: few distinct rates, so a load
/// that wobbles does not re-arm the timer at every probe.
const STEPS: u32 = 8;

/// Cumulative CPU time of the whole machine, in USER_HZ ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Time not idle (user, nice, system, irq, softirq, steal).
    pub busy: u64,
    /// All time (busy + idle + iowait).
    pub total: u64,
}

impl CpuTimes {
    /// Parses the first line of `/proc/stat`:
    /// `cpu  user nice system idle iowait irq softirq steal guest guest_nice`.
    /// guest and guest_nice are already inside user and nice, so they are not added.
    /// Allocates nothing.
    pub fn parse(text: &[u8]) -> Option<CpuTimes> {
        let line = text.split(|&b| b == b'\n').next()?;
        let rest = line.strip_prefix(b"cpu ")?;
        let mut fields = [0u64; 8];
        let mut n = 0;
        for word in rest.split(|&b| b == b' ').filter(|w| !w.is_empty()) {
            if n == fields.len() {
                break;
            }
            fields[n] = word.iter().try_fold(0u64, |acc, &b| {
                b.is_ascii_digit()
                    .then(|| acc.checked_mul(10)?.checked_add((b - b'0') as u64))
                    .flatten()
            })?;
            n += 1;
        }
        // Kernels before 2.6.11 lack steal; older ones iowait too: 4 fields at least.
        if n < 4 {
            return None;
        }
        let [user, nice, system, idle, iowait, irq, softirq, steal] = fields;
        let busy = user + nice + system + irq + softirq + steal;
        Some(CpuTimes {
            busy,
            total: busy + idle + iowait,
        })
    }

    /// The busy fraction between `earlier` and `self`, in [0, 1]; `None` when no tick
    /// passed (the counters move every 10 ms).
    pub fn load_since(self, earlier: CpuTimes) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total)?;
        if total == 0 {
            return None;
        }
        let busy = self.busy.saturating_sub(earlier.busy);
        Some((busy as f64 / total as f64).clamp(0.0, 1.0))
    }
}

/// Reads the machine's load from `/proc/stat` under a root, without allocating.
#[derive(Debug)]
pub struct LoadProbe {
    file: File,
    path: PathBuf,
    buf: [u8; 512],
    prev: Option<CpuTimes>,
    /// USER_HZ ticks per second, when quietwatt's own CPU time is left out of the load.
    exclude_self: Option<f64>,
    prev_self_ns: u64,
}

impl LoadProbe {
    /// Opens `/proc/stat` under `root` and reads it once. With `exclude_self`, this
    /// process's own CPU time is taken out of the busy time: otherwise sampling fast
    /// makes load that keeps the rate fast (only right when the file is this
    /// machine's, not a test's synthetic one).
    pub fn open(root: &SysRoot, exclude_self: bool) -> Result<LoadProbe> {
        let path = root.path("/proc/stat");
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        let hz = quietwatt_sys::clock::clock_ticks_per_second() as f64;
        let mut p = LoadProbe {
            file,
            path,
            buf: [0; 512],
            prev: None,
            exclude_self: exclude_self.then_some(hz),
            prev_self_ns: process_cpu_ns(),
        };
        // A file being rewritten (a test's synthetic one) can read torn once: retry
        // briefly before calling its content wrong.
        for _ in 0..5 {
            p.prev = p.read();
            if p.prev.is_some() {
                return Ok(p);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Err(SourceError::Parse {
            path: p.path.clone(),
            content: String::from_utf8_lossy(&p.buf[..64]).into_owned(),
            expected: "a first line `cpu  user nice system idle ...`",
        }
        .into())
    }

    fn read(&mut self) -> Option<CpuTimes> {
        let n = self.file.read_at(&mut self.buf, 0).ok()?;
        CpuTimes::parse(&self.buf[..n])
    }

    /// The load since the previous call; `None` when no tick passed or the read failed.
    pub fn sample(&mut self) -> Option<f64> {
        let now = self.read()?;
        let prev = self.prev?;
        if let Some(hz) = self.exclude_self {
            let own_ns = process_cpu_ns();
            let own_ticks = (own_ns.saturating_sub(self.prev_self_ns) as f64 * hz / 1e9) as u64;
            let busy = now.busy.saturating_sub(prev.busy);
            // Whatever this process used is not the machine's load (at most all of it).
            let adjusted = CpuTimes {
                busy: prev.busy + busy.saturating_sub(own_ticks),
                total: now.total,
            };
            let load = adjusted.load_since(prev);
            if load.is_some() {
                self.prev_self_ns = own_ns;
                self.prev = Some(now);
            }
            return load;
        }
        let load = now.load_since(prev);
        if load.is_some() {
            self.prev = Some(now);
        }
        load
    }
}

/// The rate decision: a load in, a rate out.
#[derive(Debug, Clone)]
pub struct RatePolicy {
    min: f64,
    max: f64,
    hold_ns: u64,
    current: f64,
    /// Since when no load has asked for more than `current`, and the sum and count
    /// of the loads seen since.
    falling: Option<(u64, f64, u32)>,
}

impl RatePolicy {
    /// A policy between `min` and `max` that starts at `max` (nothing is known of the
    /// load yet, and a fast start misses nothing). `floor` is the lowest rate that
    /// keeps every counter's wraps visible: it overrides `min` (and `max` if needed).
    pub fn new(min: Hertz, max: Hertz, hold: Duration, floor: Option<Hertz>) -> RatePolicy {
        let floor = floor.map_or(0.0, Hertz::hz);
        let min = min.hz().max(floor);
        let max = max.hz().max(min);
        RatePolicy {
            min,
            max,
            hold_ns: hold.as_nanos() as u64,
            current: max,
            falling: None,
        }
    }

    /// The rate in force.
    pub fn current(&self) -> Hertz {
        hz(self.current)
    }

    /// The lowest rate this policy can choose (after the wrap floor).
    pub fn min(&self) -> Hertz {
        hz(self.min)
    }

    /// The highest rate this policy can choose.
    pub fn max(&self) -> Hertz {
        hz(self.max)
    }

    /// The rate a load asks for: the lowest at idle, the highest from half load,
    /// geometric steps between.
    pub fn target(&self, load: f64) -> f64 {
        let x = ((load - IDLE_LOAD) / (BUSY_LOAD - IDLE_LOAD)).clamp(0.0, 1.0);
        let step = (x * STEPS as f64).ceil();
        let r = self.min * (self.max / self.min).powf(step / STEPS as f64);
        // Whole hertz when the rate allows it, so the data says 178 Hz, not 177.8279.
        let r = if r >= 10.0 {
            r.round()
        } else {
            (r * 10.0).round() / 10.0
        };
        r.clamp(self.min, self.max)
    }

    /// Feeds one load measurement taken at `now_ns`; returns the new rate when it
    /// changes. Up at once; down only after a hold without any load asking for more,
    /// to the rate the hold's mean load asks for (a mean, because one 20-50 ms load
    /// reading is a handful of 10 ms ticks: noisy).
    pub fn update(&mut self, load: f64, now_ns: u64) -> Option<Hertz> {
        let target = self.target(load);
        if target > self.current {
            self.falling = None;
            self.current = target;
            return Some(hz(target));
        }
        let (since, sum, n) = self.falling.get_or_insert((now_ns, 0.0, 0));
        *sum += load;
        *n += 1;
        if now_ns.saturating_sub(*since) < self.hold_ns {
            return None;
        }
        let mean_load = *sum / *n as f64;
        let mean = self.target(mean_load);
        self.falling = None;
        if mean < self.current {
            self.current = mean;
            return Some(hz(mean));
        }
        None
    }
}

fn hz(v: f64) -> Hertz {
    Hertz::clamped(v)
}

/// The load probe and the policy, paced so that `/proc/stat` is read at most once per
/// `probe_every` whatever the sampling rate.
#[derive(Debug)]
pub struct Adaptive {
    probe: LoadProbe,
    policy: RatePolicy,
    probe_every_ns: u64,
    last_probe_ns: u64,
}

impl Adaptive {
    /// An adaptive rate over `probe`.
    pub fn new(probe: LoadProbe, policy: RatePolicy, probe_every: Duration) -> Adaptive {
        Adaptive {
            probe,
            policy,
            probe_every_ns: probe_every.as_nanos() as u64,
            last_probe_ns: 0,
        }
    }

    /// The rate to start at.
    pub fn current(&self) -> Hertz {
        self.policy.current()
    }

    /// The policy.
    pub fn policy(&self) -> &RatePolicy {
        &self.policy
    }

    /// Called after each sample at `now_ns`; returns a new rate when it changes.
    /// At most one `pread` of `/proc/stat`, no allocation.
    #[inline]
    pub fn tick(&mut self, now_ns: u64) -> Option<Hertz> {
        if now_ns.saturating_sub(self.last_probe_ns) < self.probe_every_ns {
            return None;
        }
        self.last_probe_ns = now_ns;
        let load = self.probe.sample()?;
        self.policy.update(load, now_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn stat(user: u64, idle: u64) -> String {
        format!(
            "cpu  {user} 0 0 {idle} 0 0 0 0 0 0\ncpu0 {user} 0 0 {idle} 0 0 0 0 0 0\nintr 1 2 3\n"
        )
    }

    fn policy() -> RatePolicy {
        RatePolicy::new(
            Hertz::new(10.0).unwrap(),
            Hertz::new(1000.0).unwrap(),
            Duration::from_secs(1),
            None,
        )
    }

    #[test]
    fn proc_stat_first_line_gives_busy_and_total() {
        let real = b"cpu  25874 3 7155 1406063 1470 1 67 134 7 0\ncpu0 1 2 3 4\n";
        let t = CpuTimes::parse(real).unwrap();
        assert_eq!(t.busy, 25874 + 3 + 7155 + 1 + 67 + 134);
        assert_eq!(t.total, t.busy + 1406063 + 1470);
        assert_eq!(CpuTimes::parse(b"cpu0 1 2 3 4\n"), None);
        assert_eq!(CpuTimes::parse(b"cpu  1 2 x 4\n"), None);
        assert_eq!(CpuTimes::parse(b"cpu  1 2\n"), None);
        let a = CpuTimes::parse(stat(100, 900).as_bytes()).unwrap();
        let b = CpuTimes::parse(stat(130, 910).as_bytes()).unwrap();
        assert_eq!(b.load_since(a), Some(0.75));
        assert_eq!(a.load_since(a), None);
    }

    #[test]
    fn the_rate_rises_at_the_first_measurement_of_a_load_step() {
        let mut p = policy();
        // Idle for the hold time: down to the floor.
        assert_eq!(p.update(0.0, 0), None);
        assert_eq!(p.update(0.0, 1000 * MS).map(Hertz::hz), Some(10.0));
        // A load step: the very next update goes to the top, no hold.
        assert_eq!(p.update(0.9, 1010 * MS).map(Hertz::hz), Some(1000.0));
        // A moderate load asks for a rate in between.
        let mid = p.target(0.25);
        assert!(mid > 10.0 && mid < 1000.0, "{mid}");
    }

    #[test]
    fn the_rate_falls_only_after_the_hold_to_what_the_mean_load_asks() {
        let mut p = policy();
        assert_eq!(p.current().hz(), 1000.0);
        assert_eq!(p.update(0.0, 0), None);
        assert_eq!(p.update(0.3, 500 * MS), None);
        assert_eq!(p.update(0.0, 999 * MS), None);
        // The hold is over: the rate falls to what the mean load (0.1) asks for.
        let r = p.update(0.0, 1000 * MS).unwrap().hz();
        assert_eq!(r, p.target(0.075));
        assert!(r > 10.0 && r < p.target(0.3), "{r}");
        // A load above the current rate cancels a fall in progress and rises at once.
        p.update(0.0, 1100 * MS);
        assert_eq!(p.update(1.0, 1200 * MS).map(Hertz::hz), Some(1000.0));
        assert_eq!(p.update(0.0, 1300 * MS), None);
        assert_eq!(p.update(0.0, 2299 * MS), None);
        assert_eq!(p.update(0.0, 2300 * MS).map(Hertz::hz), Some(10.0));
    }

    #[test]
    fn the_wrap_bound_caps_the_period() {
        // A counter that could wrap in 40 ms at full power needs at least 25 Hz.
        let p = RatePolicy::new(
            Hertz::new(10.0).unwrap(),
            Hertz::new(1000.0).unwrap(),
            Duration::ZERO,
            Some(Hertz::new(25.0).unwrap()),
        );
        assert_eq!(p.min().hz(), 25.0);
        assert!((0..=10).all(|i| p.target(i as f64 / 10.0) >= 25.0));
        let mut p = p;
        assert_eq!(p.update(0.0, 1).map(Hertz::hz), Some(25.0));
        // A floor above the maximum raises the maximum too.
        let q = RatePolicy::new(
            Hertz::new(10.0).unwrap(),
            Hertz::new(20.0).unwrap(),
            Duration::ZERO,
            Some(Hertz::new(50.0).unwrap()),
        );
        assert_eq!((q.min().hz(), q.max().hz()), (50.0, 50.0));
    }

    #[test]
    fn the_probe_reads_proc_stat_under_the_root_and_paces_itself() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        let path = dir.path().join("proc/stat");
        std::fs::write(&path, stat(0, 1000)).unwrap();
        let probe = LoadProbe::open(&SysRoot::new(dir.path()), false).unwrap();
        let mut a = Adaptive::new(probe, policy(), Duration::from_millis(20));
        assert_eq!(a.current().hz(), 1000.0);
        // Idle snapshots for longer than the hold: the rate falls to 10 Hz.
        let mut t = 0;
        let mut changes = Vec::new();
        for i in 1..=60u64 {
            t = i * 20 * MS;
            std::fs::write(&path, stat(0, 1000 + i * 4)).unwrap();
            changes.extend(a.tick(t).map(Hertz::hz));
        }
        assert_eq!(changes, vec![10.0]);
        // A load step between two ticks at 10 Hz: the next tick (100 ms later) rises.
        std::fs::write(&path, stat(40, 1240)).unwrap();
        assert_eq!(a.tick(t + 100 * MS).map(Hertz::hz), Some(1000.0));
        // Too soon after a probe: nothing is read.
        std::fs::write(&path, "garbage").unwrap();
        assert_eq!(a.tick(t + 105 * MS), None);
    }
}
