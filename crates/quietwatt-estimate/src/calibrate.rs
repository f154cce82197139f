//! `quietwatt calibrate`: a sweep of built-in loads, at the frequencies the
//! governor allows, measured with quietwatt's own mechanisms, and the models
//! fitted on it: one on every input this machine could read, and simpler ones
//! for machines that read fewer.

use crate::fit::{fit, Unfit};
use crate::governor::FreqControl;
use crate::inputs::{Input, InputClock, ALL};
use crate::model::{blind_to, CpuIdentity, DomainModel, Fit, Origin, PowerModel, SCHEMA};
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
    /// Where cpufreq is (`/sys`): the frequencies read and set.
    pub sys: PathBuf,
    /// At most this many of the frequencies the governor allows, each swept
    /// in turn (0: the governor's own choice only).
    pub frequencies: usize,
    /// Left to settle before each level is measured.
    pub settle: Duration,
    /// The kernels swept (each on 1 … `max_busy` CPUs): the model's error
    /// then covers how differently they draw at the same busy CPUs.
    pub kernels: Vec<Kernel>,
}

impl Plan {
    /// Every level from idle to all `cpus` busy, at three of the allowed
    /// frequencies, 2 s each, twice.
    pub fn new(cpus: usize) -> Plan {
        Plan {
            per_level: Duration::from_secs(2),
            repeats: 2,
            max_busy: cpus,
            stat: PathBuf::from("/proc/stat"),
            cpuinfo: PathBuf::from("/proc/cpuinfo"),
            sys: PathBuf::from("/sys"),
            frequencies: 3,
            settle: Duration::from_millis(200),
            kernels: vec![Kernel::Compute, Kernel::Memory],
        }
    }

    /// The levels of one sweep at `frequencies` (kHz; none: the governor's
    /// choice): idle, then at each frequency each kernel on 1 … `max_busy`
    /// CPUs.
    pub fn levels(&self, frequencies: &[u64]) -> Vec<Level> {
        let at: Vec<Option<u64>> = if frequencies.is_empty() {
            vec![None]
        } else {
            frequencies.iter().copied().map(Some).collect()
        };
        let mut v = vec![Level {
            kernel: Kernel::Idle,
            spinners: 0,
            khz: None,
        }];
        for &khz in &at {
            for &kernel in &self.kernels {
                v.extend((1..=self.max_busy).map(|spinners| Level {
                    kernel,
                    spinners,
                    khz,
                }));
            }
        }
        v
    }
}

/// One load level of a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    /// What runs.
    pub kernel: Kernel,
    /// On how many threads.
    pub spinners: usize,
    /// The highest frequency allowed, kHz (`None`: as the governor left it).
    pub khz: Option<u64>,
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
    /// What ran, where.
    pub level: Level,
    /// Each input's mean over the level ([`ALL`]'s order; 0 where not read).
    pub inputs: [f64; 4],
    /// Each domain's mean power measured, W.
    pub watts: Vec<(&'static str, f64)>,
}

impl Point {
    /// The busy CPUs `/proc/stat` saw, on average.
    pub fn busy_cpus(&self) -> f64 {
        self.inputs[Input::BusyCpus.index()]
    }
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

/// What the sweep is told before its first level.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Start {
    /// The levels to measure, all repeats.
    pub levels: usize,
    /// The frequencies swept, kHz (empty: the governor's choice).
    pub frequencies: Vec<u64>,
    /// Inputs that cannot be read or set here, and why.
    pub missing: Vec<String>,
}

/// The sweep's listener: its start, then each point.
pub trait Progress {
    /// Before the first level.
    fn start(&mut self, start: &Start);
    /// After each level: the point, its place (from 1) and the count.
    fn point(&mut self, point: &Point, index: usize, of: usize);
}

/// Runs the sweep: at each level, `measure` measures the counters for the
/// span it is given (the engine's session, in `quietwatt calibrate`) while
/// its CPUs spin, and the inputs are read over the same span. Where the
/// frequency limits can be set, each frequency is swept in turn, and they are
/// restored at the end, on error and when `stop` is raised (then
/// [`EstimateError::Interrupted`], between levels). Fits the models. They
/// carry the mechanism that measured, and `emulated` (the counters are
/// quietwatt's emulator's, as the caller knows).
pub fn calibrate(
    plan: &Plan,
    emulated: bool,
    stop: &AtomicBool,
    measure: &mut dyn FnMut(Duration) -> Result<Measured, String>,
    progress: &mut dyn Progress,
) -> Result<PowerModel, EstimateError> {
    let stat_error = |source| EstimateError::Stat {
        path: plan.stat.clone(),
        source,
    };
    // One clock for the whole sweep: each level is the difference of two
    // samples.
    let mut clock =
        InputClock::open(&plan.stat, &plan.sys, &ALL, monotonic_ns()).map_err(stat_error)?;
    // One line per reason (the PMU's two counts share theirs).
    let mut missing: Vec<String> = Vec::new();
    let mut reasons: Vec<(Vec<&str>, &str)> = Vec::new();
    for (i, why) in clock.missing() {
        match reasons.iter_mut().find(|(_, w)| *w == why.as_str()) {
            Some((names, _)) => names.push(i.name()),
            None => reasons.push((vec![i.name()], why)),
        }
    }
    missing.extend(
        reasons
            .iter()
            .map(|(names, why)| format!("{}: {why}", names.join(", "))),
    );
    let control = if plan.frequencies == 0 || !clock.reads(Input::BusyCpuGhz) {
        None
    } else {
        FreqControl::open(&plan.sys, &clock.cpu_numbers())
            .map_err(|why| missing.push(format!("setting the frequency: {why}")))
            .ok()
    };
    let frequencies = control
        .as_ref()
        .map_or_else(Vec::new, |c| c.pick(plan.frequencies));
    let levels = plan.levels(&frequencies);
    let of = plan.repeats.max(1) * levels.len();
    progress.start(&Start {
        levels: of,
        frequencies: frequencies.clone(),
        missing: missing.clone(),
    });
    let mut points = Vec::with_capacity(of);
    let mut mechanism = String::new();
    for _ in 0..plan.repeats.max(1) {
        for &level in &levels {
            if stop.load(Ordering::Relaxed) {
                return Err(EstimateError::Interrupted {
                    measured: points.len(),
                });
            }
            if let (Some(c), Some(khz)) = (&control, level.khz) {
                c.set(khz).map_err(EstimateError::Governor)?;
            }
            let spin = Spinners::start(level.kernel, level.spinners);
            std::thread::sleep(plan.settle);
            let t0 = monotonic_ns();
            let before = *clock.sample(t0).map_err(stat_error)?;
            let m = measure(plan.per_level).map_err(EstimateError::Measure)?;
            let t1 = monotonic_ns();
            let after = *clock.sample(t1).map_err(stat_error)?;
            drop(spin);
            mechanism = m.mechanism;
            let d = m.duration_s.max(1e-9);
            // Over the clock's own span (the session's is a little shorter):
            // the inputs' means, whatever the spans' ends.
            let span = t1.saturating_sub(t0).max(1) as f64 * 1e-9;
            let inputs = std::array::from_fn(|k| (after[k] - before[k]) / span);
            let p = Point {
                level,
                inputs,
                watts: m.energy_j.iter().map(|(n, j)| (*n, j / d)).collect(),
            };
            points.push(p.clone());
            progress.point(&p, points.len(), of);
        }
    }
    drop(control);
    // Half a CPU between the lightest and the heaviest level at least: less is
    // a machine others keep busy, whose points would fit noise.
    let lo = points
        .iter()
        .map(Point::busy_cpus)
        .fold(f64::INFINITY, f64::min);
    let hi = points.iter().map(Point::busy_cpus).fold(0.0, f64::max);
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
    let (fits, left_out) = fit_all(&points, |i| clock.reads(i))?;
    let mut fits = fits.into_iter();
    let main = fits
        .next()
        .expect("fit_all gives the busy CPUs' fit at least");
    missing.extend(left_out);
    Ok(PowerModel {
        schema: SCHEMA.into(),
        cpu: CpuIdentity::parse(&cpuinfo, u32::try_from(clock.cpus()).unwrap_or(u32::MAX)),
        fit: main,
        origin: Origin::Calibrated {
            mechanism,
            emulated,
            seconds_per_level: plan.per_level.as_secs_f64(),
            created_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        },
        simpler: fits.collect(),
        left_out: missing,
    })
}

/// The input sets tried, richest first: frequency or cycles for how fast the
/// busy CPUs ran, instructions for what they did.
const CANDIDATES: &[&[Input]] = &[
    &[Input::BusyCpus, Input::BusyCpuGhz, Input::Instructions],
    &[Input::BusyCpus, Input::Cycles, Input::Instructions],
    &[Input::BusyCpus, Input::BusyCpuGhz],
    &[Input::BusyCpus, Input::Instructions],
    &[Input::BusyCpus],
];

/// Each candidate input set that `reads` allows, fitted on every domain
/// measured; an input that moved in step with the others is dropped, and
/// said. Distinct fits, most inputs first, the busy CPUs' last; and what was
/// dropped.
fn fit_all(
    points: &[Point],
    reads: impl Fn(Input) -> bool,
) -> Result<(Vec<Fit>, Vec<String>), EstimateError> {
    let mut fits: Vec<Fit> = Vec::new();
    let mut dropped = Vec::new();
    for candidate in CANDIDATES {
        let mut inputs: Vec<Input> = candidate.to_vec();
        if !inputs.iter().all(|i| reads(*i)) {
            continue;
        }
        let domains = loop {
            match fit_domains(points, &inputs) {
                Ok(d) => break d,
                Err((_, Unfit::NotIdentifiable { index })) if index > 0 => {
                    let gone = inputs.remove(index);
                    let why = format!(
                        "{}: never varied apart from {} during the sweep, so its effect cannot be told from theirs",
                        gone.name(),
                        inputs.iter().map(|i| i.name()).collect::<Vec<_>>().join(" and ")
                    );
                    if !dropped.contains(&why) {
                        dropped.push(why);
                    }
                }
                Err((_, Unfit::TooFewPoints { points, needed })) if inputs.len() > 1 => {
                    let why = format!(
                        "{}: {points} points, where a fit on {} inputs needs {needed} (more CPUs to load, or --repeats)",
                        inputs[1..].iter().map(|i| i.name()).collect::<Vec<_>>().join(", "),
                        inputs.len()
                    );
                    if !dropped.contains(&why) {
                        dropped.push(why);
                    }
                    inputs.truncate(1);
                }
                Err((domain, why)) => {
                    return Err(EstimateError::Fit {
                        domain: domain.into(),
                        why: match why {
                            Unfit::TooFewPoints { points, needed } => format!(
                                "{points} points: at least {needed} are needed (more CPUs to load, or --repeats)"
                            ),
                            Unfit::NotIdentifiable { .. } => format!(
                                "the busy CPUs never changed ({:?}): at two loads or more are needed",
                                points.iter().map(|p| (p.busy_cpus() * 100.0).round() / 100.0).collect::<Vec<_>>()
                            ),
                        },
                    })
                }
            }
        };
        let names: Vec<String> = inputs.iter().map(|i| i.name().to_string()).collect();
        if domains.is_empty() {
            return Err(EstimateError::Fit {
                domain: "package".into(),
                why: "the counters opened measure neither package nor dram".into(),
            });
        }
        if fits.iter().all(|f| f.inputs != names) {
            fits.push(Fit {
                inputs: names,
                domains,
                blind_to: blind_to(&inputs),
            });
        }
    }
    // Most inputs first; among equals, the candidates' order.
    fits.sort_by_key(|f| std::cmp::Reverse(f.inputs.len()));
    Ok((fits, dropped))
}

/// Each measured domain's plane on `inputs`; the domain and why where one
/// cannot be fitted.
fn fit_domains(
    points: &[Point],
    inputs: &[Input],
) -> Result<Vec<DomainModel>, (&'static str, Unfit)> {
    let mut domains = Vec::new();
    for name in ["package", "dram"] {
        let (x, y): (Vec<Vec<f64>>, Vec<f64>) = points
            .iter()
            .filter_map(|p| {
                let w = p.watts.iter().find(|(n, _)| *n == name)?.1;
                Some((inputs.iter().map(|i| p.inputs[i.index()]).collect(), w))
            })
            .unzip();
        if y.is_empty() {
            continue;
        }
        let f = fit(&x, &y).map_err(|e| (name, e))?;
        domains.push(DomainModel::from_fit(name, inputs, &f, y.len()));
    }
    Ok(domains)
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

    fn l(kernel: Kernel, spinners: usize, khz: Option<u64>) -> Level {
        Level {
            kernel,
            spinners,
            khz,
        }
    }

    #[test]
    fn a_sweep_is_idle_then_each_kernel_on_one_to_n_cpus_at_each_frequency() {
        let plan = Plan::new(2);
        assert_eq!(
            plan.levels(&[]),
            vec![
                l(Kernel::Idle, 0, None),
                l(Kernel::Compute, 1, None),
                l(Kernel::Compute, 2, None),
                l(Kernel::Memory, 1, None),
                l(Kernel::Memory, 2, None),
            ]
        );
        let at = plan.levels(&[3_000_000, 1_500_000]);
        assert_eq!(at.len(), 9);
        assert_eq!(at[5], l(Kernel::Compute, 1, Some(1_500_000)));
    }

    struct Quiet;
    impl Progress for Quiet {
        fn start(&mut self, _: &Start) {}
        fn point(&mut self, _: &Point, _: usize, _: usize) {}
    }

    fn point(busy: f64, ghz: f64, ginstr: f64, watts: f64) -> Point {
        Point {
            level: l(Kernel::Compute, 1, None),
            inputs: [busy, busy * ghz, ginstr, busy * ghz],
            watts: vec![("package", watts)],
        }
    }

    fn points(frequencies: &[f64]) -> Vec<Point> {
        let mut pts = vec![point(0.0, 0.0, 0.0, 10.0), point(0.0, 0.0, 0.0, 10.0)];
        for busy in [1.0, 2.0] {
            for &ghz in frequencies {
                for ipc in [0.5, 2.0] {
                    let gi = busy * ghz * ipc;
                    pts.push(point(
                        busy,
                        ghz,
                        gi,
                        10.0 + 2.0 * busy + busy * ghz + 0.5 * gi,
                    ));
                }
            }
        }
        pts
    }

    /// Points from a machine whose power follows frequency and instructions:
    /// the richest fit recovers both, and the fits on fewer inputs are kept
    /// for machines that read fewer, each with its own (larger) error.
    #[test]
    fn every_readable_input_set_is_fitted() {
        let pts = points(&[1.5, 2.2, 3.0]);
        let (fits, dropped) = fit_all(&pts, |_| true).unwrap();
        let names: Vec<&[String]> = fits.iter().map(|f| f.inputs.as_slice()).collect();
        assert_eq!(
            names,
            [
                &["busy_cpus", "busy_cpu_ghz", "instructions_gps"][..],
                &["busy_cpus", "cycles_gps", "instructions_gps"][..],
                &["busy_cpus", "busy_cpu_ghz"][..],
                &["busy_cpus", "instructions_gps"][..],
                &["busy_cpus"][..],
            ]
        );
        assert!(dropped.is_empty(), "{dropped:?}");
        let p = &fits[0].domains[0];
        assert!((p.coef(Input::BusyCpuGhz) - 1.0).abs() < 1e-6, "{p:?}");
        assert!((p.coef(Input::Instructions) - 0.5).abs() < 1e-6, "{p:?}");
        assert!((p.coef(Input::BusyCpus) - 2.0).abs() < 1e-6, "{p:?}");
        assert!(p.error_w < 1e-6);
        // Fewer inputs, a worse fit, and an error that says so.
        assert!(fits[4].domains[0].error_w > 0.5, "{:?}", fits[4]);
        // Without the PMU, the frequency's fit leads.
        let (fits, _) =
            fit_all(&pts, |i| matches!(i, Input::BusyCpus | Input::BusyCpuGhz)).unwrap();
        assert_eq!(fits[0].inputs, ["busy_cpus", "busy_cpu_ghz"]);
        assert_eq!(fits.len(), 2);
    }

    /// At one frequency, busy × GHz moves in step with the busy CPUs: it is
    /// dropped, and the model says why.
    #[test]
    fn an_input_that_never_varied_apart_is_dropped_and_said() {
        let (fits, dropped) = fit_all(&points(&[2.2]), |_| true).unwrap();
        let names: Vec<&[String]> = fits.iter().map(|f| f.inputs.as_slice()).collect();
        assert_eq!(
            names,
            [&["busy_cpus", "instructions_gps"][..], &["busy_cpus"][..]]
        );
        assert!(
            dropped
                .iter()
                .any(|d| d.starts_with("busy_cpu_ghz: never varied apart from busy_cpus")),
            "{dropped:?}"
        );
    }

    /// A signal between levels stops the sweep, and the frequency limits it
    /// set are put back.
    #[test]
    fn a_stopped_sweep_restores_the_frequency_limits() {
        let dir = tempfile::tempdir().unwrap();
        let stat = dir.path().join("stat");
        std::fs::write(&stat, "cpu0 1 0 1 0 0 0 0 0 0 0\n").unwrap();
        let sys = dir.path().join("sys");
        let d = crate::inputs::cpufreq_dir(&sys, 0);
        std::fs::create_dir_all(&d).unwrap();
        for (f, v) in [
            ("scaling_available_frequencies", "3000000 1500000 \n"),
            ("scaling_cur_freq", "2800000\n"),
            ("scaling_min_freq", "2000000\n"),
            ("scaling_max_freq", "2800000\n"),
        ] {
            std::fs::write(d.join(f), v).unwrap();
        }
        let mut plan = Plan::new(1);
        (plan.stat, plan.sys) = (stat, sys);
        (plan.per_level, plan.settle, plan.repeats) = (Duration::from_millis(5), Duration::ZERO, 1);
        let stop = AtomicBool::new(false);
        let mut calls = 0;
        let mut measure = |d: Duration| {
            calls += 1;
            if calls == 2 {
                // The second level runs at the highest frequency set.
                let max = std::fs::read_to_string(
                    crate::inputs::cpufreq_dir(&plan.sys, 0).join("scaling_max_freq"),
                );
                assert_eq!(max.unwrap(), "3000000\n");
                stop.store(true, Ordering::Relaxed);
            }
            Ok(Measured::new(
                "powercap".into(),
                d.as_secs_f64(),
                vec![("package", 0.1)],
            ))
        };
        let e = calibrate(&plan, false, &stop, &mut measure, &mut Quiet).unwrap_err();
        assert!(
            matches!(e, EstimateError::Interrupted { measured: 2 }),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(d.join("scaling_max_freq")).unwrap(),
            "2800000\n"
        );
        assert_eq!(
            std::fs::read_to_string(d.join("scaling_min_freq")).unwrap(),
            "2000000\n"
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
        plan.sys = dir.path().to_path_buf();
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
        let e = calibrate(
            &plan,
            false,
            &AtomicBool::new(false),
            &mut measure,
            &mut Quiet,
        )
        .unwrap_err();
        assert!(matches!(e, EstimateError::NoLoadRange { .. }), "{e}");
        assert!(
            e.to_string().contains("calibrate on an idle machine"),
            "{e}"
        );
    }
}
