//! `quietwatt calibrate`: a sweep of built-in loads measured with quietwatt's
//! own mechanisms, and the model fitted on it.

use crate::busy::BusyClock;
use crate::fit::fit;
use crate::model::{blind_to, CpuIdentity, DomainModel, Origin, PowerModel, BUSY_CPUS, SCHEMA};
use crate::EstimateError;
use quietwatt_sys::clock::monotonic_ns;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The least range of busy CPUs a sweep must span to be fitted.
pub const MIN_LOAD_RANGE: f64 = 0.5;

/// What to sweep.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Plan {
    /// How long each load level is measured.
    pub per_level: Duration,
    /// How many times the whole sweep is repeated (at least 1; the points of
    /// every repeat are fitted together, and left out one at a time for the
    /// error).
    pub repeats: usize,
    /// The most CPUs kept busy: the levels are 0, 1, ... this many.
    pub max_busy: usize,
    /// Where the busy CPUs are read (`/proc/stat`).
    pub stat: PathBuf,
    /// Where the CPU is named (`/proc/cpuinfo`).
    pub cpuinfo: PathBuf,
    /// Left to settle before each level is measured.
    pub settle: Duration,
    /// The kernels swept (each on 1 … `max_busy` CPUs): the model's error
    /// then covers how differently they draw at the same busy CPUs.
    pub kernels: Vec<Kernel>,
}

impl Plan {
    /// Every level from idle to all `cpus` busy, 2 s each, twice.
    pub fn new(cpus: usize) -> Plan {
        Plan {
            per_level: Duration::from_secs(2),
            repeats: 2,
            max_busy: cpus,
            stat: PathBuf::from("/proc/stat"),
            cpuinfo: PathBuf::from("/proc/cpuinfo"),
            settle: Duration::from_millis(200),
            kernels: vec![Kernel::Compute, Kernel::Memory],
        }
    }

    /// The levels of one sweep: idle, then each kernel on 1 … `max_busy`
    /// CPUs.
    pub fn levels(&self) -> Vec<(Kernel, usize)> {
        let mut v = vec![(Kernel::Idle, 0)];
        for &k in &self.kernels {
            v.extend((1..=self.max_busy).map(|n| (k, n)));
        }
        v
    }
}

/// What keeps the CPUs of a level busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Kernel {
    /// Nothing: the idle level.
    Idle,
    /// Integer and floating-point arithmetic in registers: the core's power
    /// at work, little memory traffic.
    Compute,
    /// A walk over 64 MiB per thread, one write per cache line: memory-bound,
    /// DRAM's power at work, the cores mostly stalled.
    Memory,
}

impl Kernel {
    /// Its name in the progress and the docs.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Idle => "idle",
            Kernel::Compute => "compute",
            Kernel::Memory => "memory",
        }
    }
}

/// One measured level.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Point {
    /// What ran.
    pub kernel: Kernel,
    /// On how many threads.
    pub spinners: usize,
    /// The busy CPUs `/proc/stat` saw, on average.
    pub busy_cpus: f64,
    /// Each domain's mean power measured, W.
    pub watts: Vec<(&'static str, f64)>,
}

/// What measuring one level gave: the mechanism, the span, and each
/// domain's energy (every socket's package or DRAM summed: the machine as one).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Measured {
    /// The mechanism that measured (`powercap`, `perf`...).
    pub mechanism: String,
    /// How long, s.
    pub duration_s: f64,
    /// `(domain, joules)`, for `package` and `dram` where measured.
    pub energy_j: Vec<(&'static str, f64)>,
}

impl Measured {
    /// A measurement of `duration_s` by `mechanism`.
    pub fn new(mechanism: String, duration_s: f64, energy_j: Vec<(&'static str, f64)>) -> Measured {
        Measured {
            mechanism,
            duration_s,
            energy_j,
        }
    }
}

/// Runs the sweep: at each level, `measure` measures the counters for the
/// span it is given (the engine's session, in `quietwatt calibrate`) while
/// this many CPUs spin, and the busy CPUs are read over the same span;
/// `progress` hears of each point (`index`, `of`). Fits the model. It carries
/// the mechanism that measured, and `emulated` (the counters are quietwatt's
/// emulator's, as the caller knows).
pub fn calibrate(
    plan: &Plan,
    emulated: bool,
    measure: &mut dyn FnMut(Duration) -> Result<Measured, String>,
    progress: &mut dyn FnMut(&Point, usize, usize),
) -> Result<PowerModel, EstimateError> {
    let levels = plan.levels();
    let of = plan.repeats.max(1) * levels.len();
    let mut points = Vec::with_capacity(of);
    let mut mechanism = String::new();
    let stat_error = |source| EstimateError::Stat {
        path: plan.stat.clone(),
        source,
    };
    for _ in 0..plan.repeats.max(1) {
        for &(kernel, spinners) in &levels {
            let spin = Spinners::start(kernel, spinners);
            std::thread::sleep(plan.settle);
            let t0 = monotonic_ns();
            let mut clock = BusyClock::open(&plan.stat, t0).map_err(stat_error)?;
            let m = measure(plan.per_level).map_err(EstimateError::Measure)?;
            let t1 = monotonic_ns();
            let busy = clock.busy_ns(t1).map_err(stat_error)?;
            drop(spin);
            mechanism = m.mechanism;
            let d = m.duration_s.max(1e-9);
            let p = Point {
                kernel,
                spinners,
                // Over the clock's own span (the session's is a little
                // shorter): the mean busy CPUs, whatever the spans' ends.
                busy_cpus: busy as f64 / t1.saturating_sub(t0).max(1) as f64,
                watts: m.energy_j.iter().map(|(n, j)| (*n, j / d)).collect(),
            };
            points.push(p.clone());
            progress(&p, points.len(), of);
        }
    }
    // Half a CPU between the lightest and the heaviest level at least: less is
    // a machine others keep busy, whose points would fit noise.
    let lo = points
        .iter()
        .map(|p| p.busy_cpus)
        .fold(f64::INFINITY, f64::min);
    let hi = points.iter().map(|p| p.busy_cpus).fold(0.0, f64::max);
    if hi - lo < MIN_LOAD_RANGE {
        return Err(EstimateError::NoLoadRange {
            lo,
            hi,
            spinners: plan.max_busy,
        });
    }
    let cpuinfo = std::fs::read_to_string(&plan.cpuinfo).map_err(|source| EstimateError::Stat {
        path: plan.cpuinfo.clone(),
        source,
    })?;
    let cpus = BusyClock::open(&plan.stat, 0)
        .map_err(|source| EstimateError::Stat {
            path: plan.stat.clone(),
            source,
        })?
        .cpus();
    let mut domains = Vec::new();
    for name in ["package", "dram"] {
        let xy: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|p| {
                p.watts
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, w)| (p.busy_cpus, *w))
            })
            .collect();
        if xy.is_empty() {
            continue;
        }
        let line = fit(&xy).ok_or_else(|| EstimateError::Fit {
            domain: name.into(),
            why: format!(
                "{} points over busy CPUs {:?}: at least three, at two loads or more, are needed (more CPUs to load, or --repeats)",
                xy.len(),
                xy.iter().map(|p| (p.0 * 100.0).round() / 100.0).collect::<Vec<_>>()
            ),
        })?;
        domains.push(DomainModel::from_line(name, &line, xy.len()));
    }
    if domains.is_empty() {
        return Err(EstimateError::Fit {
            domain: "package".into(),
            why: "the counters opened measure neither package nor dram".into(),
        });
    }
    Ok(PowerModel {
        schema: SCHEMA.into(),
        cpu: CpuIdentity::parse(&cpuinfo, u32::try_from(cpus).unwrap_or(u32::MAX)),
        inputs: vec![BUSY_CPUS.into()],
        domains,
        origin: Origin::Calibrated {
            mechanism,
            emulated,
            seconds_per_level: plan.per_level.as_secs_f64(),
            created_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        },
        blind_to: blind_to(),
    })
}

/// Threads that keep CPUs busy until dropped.
struct Spinners {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Spinners {
    fn start(kernel: Kernel, n: usize) -> Spinners {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || match kernel {
                    Kernel::Idle => {}
                    Kernel::Compute => compute(&stop),
                    Kernel::Memory => memory(&stop),
                })
            })
            .collect();
        Spinners { stop, threads }
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Arithmetic until `stop` (not a PAUSE loop: that instruction exists to
/// draw little, and would calibrate a busy CPU too low).
fn compute(stop: &AtomicBool) {
    let (mut x, mut y) = (0x9E37_79B9_7F4A_7C15_u64, 1.000_001_f64);
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..4096 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            y = (y * 1.000_000_1 + 1e-9).sqrt() + 0.5;
        }
        std::hint::black_box((x, y));
    }
}

/// Bytes each memory thread walks: far beyond any cache.
const MEMORY_BYTES: usize = 64 << 20;

/// One write per cache line over [`MEMORY_BYTES`], again and again, until
/// `stop`.
fn memory(stop: &AtomicBool) {
    let mut buf = vec![0u64; MEMORY_BYTES / 8];
    while !stop.load(Ordering::Relaxed) {
        for i in (0..buf.len()).step_by(8) {
            buf[i] = buf[i].wrapping_add(1);
        }
        std::hint::black_box(&mut buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_is_idle_then_each_kernel_on_one_to_n_cpus() {
        let plan = Plan::new(2);
        assert_eq!(
            plan.levels(),
            vec![
                (Kernel::Idle, 0),
                (Kernel::Compute, 1),
                (Kernel::Compute, 2),
                (Kernel::Memory, 1),
                (Kernel::Memory, 2),
            ]
        );
    }

    #[test]
    fn a_sweep_whose_load_never_changed_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("stat");
        // Every CPU busy throughout: /proc/stat's idle never moves.
        std::fs::write(
            &stat,
            "cpu0 1 0 1 0 0 0 0 0 0 0\ncpu1 1 0 1 0 0 0 0 0 0 0\n",
        )
        .unwrap();
        let mut plan = Plan::new(1);
        plan.stat = stat;
        plan.per_level = Duration::from_millis(20);
        plan.settle = Duration::ZERO;
        plan.repeats = 1;
        let mut measure = |d: Duration| {
            std::thread::sleep(d);
            Ok(Measured::new(
                "powercap".into(),
                d.as_secs_f64(),
                vec![("package", 0.4 * d.as_secs_f64())],
            ))
        };
        let e = calibrate(&plan, false, &mut measure, &mut |_, _, _| {}).unwrap_err();
        assert!(matches!(e, EstimateError::NoLoadRange { .. }), "{e}");
        assert!(
            e.to_string().contains("calibrate on an idle machine"),
            "{e}"
        );
    }
}
