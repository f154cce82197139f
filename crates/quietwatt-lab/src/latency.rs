//! What one reading costs: the latency of each primitive a RAPL reader is built
//! from (paper 002, Table III; paper 000's rdtsc-timed rdmsr, proc read and
//! syscall), as a distribution rather than a mean.
//!
//! Each call is timed on its own between two serialized time-stamp counter reads
//! (`lfence; rdtsc; lfence`, so that neither the call's instructions nor the
//! timer's drift across the boundary), converted to nanoseconds with the TSC
//! frequency calibrated against `CLOCK_MONOTONIC` over ~50 ms. Elsewhere than on
//! x86_64 `clock_gettime(CLOCK_MONOTONIC)` is the timer. Every figure includes the
//! timer's own cost, which the `rdtsc` row measures (the floor); `net` subtracts it.
//!
//! The thread is pinned to one CPU, so that "same CPU" and "other CPU" mean what
//! they say: a perf or MSR read of another CPU's counter costs an inter-processor
//! interrupt.
//!
//! Rows that cannot be measured here say why rather than vanish. Rows that do not
//! read RAPL say so in their label: the software event `cpu-clock` stands in for a
//! RAPL perf event where the machine has none (the read path in the kernel is the
//! same `perf_event_read`), a sysfs file stands in for `energy_uj`, and a root that
//! is an emulator (FUSE) is labelled "emulated (FUSE)": its latency is the
//! emulator's, not the kernel's.

use quietwatt::root::SysRoot;
use quietwatt::source::{msr, perf, powercap, Selection};
use quietwatt_stats::quantile_sorted;
use quietwatt_stats::rng::XorShift;
use serde::Serialize;
use std::fs::File;
use std::hint::black_box;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

/// Calls timed per primitive unless told otherwise.
pub const DEFAULT_ITERATIONS: usize = 10_000;
/// Bootstrap resamples for the interval of the median.
pub const DEFAULT_BOOTSTRAP: usize = 1_000;
/// The bootstrap's seed: fixed, so that a report can be reproduced from its samples.
pub const DEFAULT_SEED: u64 = 0x5157_4154_5400_0006;
/// How long the TSC is compared with `CLOCK_MONOTONIC`.
pub const CALIBRATION: Duration = Duration::from_millis(50);

/// `statfs` magic of a FUSE mount (linux/magic.h).
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// Files read by the "sysfs pread" stand-in, first that opens: small kernel-made
/// text files, as `energy_uj` is.
const SYSFS_STAND_INS: [&str; 3] = [
    "/sys/devices/system/cpu/cpu0/cpuidle/state0/usage",
    "/sys/devices/system/cpu/online",
    "/proc/self/stat",
];

/// How to run the latency benchmark.
#[derive(Debug, Clone)]
pub struct LatencyConfig {
    /// Calls timed per primitive.
    pub iterations: usize,
    /// Untimed calls before them (caches, page faults, the first IPI).
    pub warmup: usize,
    /// Bootstrap resamples for the median's interval.
    pub bootstrap: usize,
    /// The bootstrap's seed.
    pub seed: u64,
    /// Where RAPL is looked for (powercap, MSR and perf rows).
    pub root: SysRoot,
    /// The CPU to pin to; `None`: the first CPU this process may run on.
    pub cpu: Option<usize>,
}

impl Default for LatencyConfig {
    fn default() -> Self {
        LatencyConfig {
            iterations: DEFAULT_ITERATIONS,
            warmup: 200,
            bootstrap: DEFAULT_BOOTSTRAP,
            seed: DEFAULT_SEED,
            root: SysRoot::default(),
            cpu: None,
        }
    }
}

/// Why the benchmark could not run at all (a row that cannot be measured is not
/// an error: it is a row saying why).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LatencyError {
    /// A setting that cannot work.
    #[error("invalid setting: {0}")]
    Config(String),
    /// The measuring thread could not be started or pinned.
    #[error("cannot {what}: {source}")]
    Thread {
        /// What was attempted.
        what: String,
        /// What the kernel said.
        source: io::Error,
    },
}

/// The timer that was used.
#[derive(Debug, Clone, Serialize)]
pub struct TimerInfo {
    /// `rdtsc` (serialized with lfence) or `clock_gettime`.
    pub kind: &'static str,
    /// TSC frequency in GHz (ticks per nanosecond); `None` for `clock_gettime`.
    pub tsc_ghz: Option<f64>,
    /// Whether the CPU says its TSC runs at a constant rate through sleep states
    /// and frequency changes (CPUID 0x80000007 EDX bit 8); `None` off x86_64.
    pub tsc_invariant: Option<bool>,
}

/// A latency distribution, in nanoseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Distribution {
    /// Calls timed.
    pub n: usize,
    /// Calls that returned an error (timed all the same).
    pub errors: usize,
    /// Median.
    pub median_ns: f64,
    /// Lower bound of the 95 % percentile-bootstrap interval of the median.
    pub ci_low_ns: f64,
    /// Upper bound of that interval.
    pub ci_high_ns: f64,
    /// 99th percentile.
    pub p99_ns: f64,
    /// Fastest call.
    pub min_ns: f64,
    /// Mean (pulled up by the rare slow call: interrupts, preemption).
    pub mean_ns: f64,
    /// Median minus the timer floor's median (the `rdtsc` row); `None` for the
    /// floor itself.
    pub net_median_ns: Option<f64>,
}

/// One primitive measured (or why it could not be).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// What is timed: `cpuid`, `perf read`, `powercap pread`, ...
    pub primitive: String,
    /// On what: a domain, a CPU, a file.
    pub target: String,
    /// What the figure is not, when it is not a real RAPL read of this machine
    /// (`stand-in: ...`, `emulated (FUSE)`); `None` for the real thing.
    pub label: Option<String>,
    /// The distribution; `None` when not measured.
    pub latency: Option<Distribution>,
    /// Why it was not measured.
    pub unavailable: Option<String>,
}

/// Every primitive's latency on this machine.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyReport {
    /// The timer.
    pub timer: TimerInfo,
    /// The CPU the measuring thread was pinned to.
    pub cpu: usize,
    /// The CPU used for "other CPU" rows, if any.
    pub other_cpu: Option<usize>,
    /// Calls timed per primitive.
    pub iterations: usize,
    /// Bootstrap resamples.
    pub bootstrap: usize,
    /// Bootstrap seed.
    pub seed: u64,
    /// The RAPL root.
    pub root: String,
    /// The rows, in the order of the table.
    pub rows: Vec<Row>,
}

// ---------------------------------------------------------------------------
// The timer.

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn ticks() -> u64 {
    use core::arch::x86_64::{_mm_lfence, _rdtsc};
    // SAFETY: lfence (SSE2) and rdtsc exist on every x86_64 CPU; neither touches
    // memory. (Newer compilers treat them as safe: hence the allow.)
    #[allow(unused_unsafe)]
    unsafe {
        _mm_lfence();
        let t = _rdtsc();
        _mm_lfence();
        t
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn ticks() -> u64 {
    quietwatt::ticker::monotonic_ns()
}

#[cfg(target_arch = "x86_64")]
fn cpuid(leaf: u32) -> core::arch::x86_64::CpuidResult {
    // SAFETY: cpuid exists on every x86_64 CPU and has no effect on memory.
    #[allow(unused_unsafe)]
    unsafe {
        core::arch::x86_64::__cpuid(leaf)
    }
}

/// Ticks per nanosecond, and the timer's description.
fn calibrate() -> (f64, TimerInfo) {
    #[cfg(target_arch = "x86_64")]
    {
        // A (tsc, monotonic) pair read as close together as possible: the tightest
        // of a few tries, the TSC taken in the middle of the clock read.
        let pair = || {
            let mut best = (u64::MAX, 0u64, 0u64);
            for _ in 0..16 {
                let a = ticks();
                let ns = quietwatt::ticker::monotonic_ns();
                let b = ticks();
                if b.wrapping_sub(a) < best.0 {
                    best = (b.wrapping_sub(a), a + (b.wrapping_sub(a)) / 2, ns);
                }
            }
            (best.1, best.2)
        };
        let (t0, n0) = pair();
        std::thread::sleep(CALIBRATION);
        let (t1, n1) = pair();
        let per_ns = t1.wrapping_sub(t0) as f64 / n1.saturating_sub(n0).max(1) as f64;
        let invariant =
            cpuid(0x8000_0000).eax >= 0x8000_0007 && cpuid(0x8000_0007).edx & (1 << 8) != 0;
        (
            per_ns,
            TimerInfo {
                kind: "rdtsc",
                tsc_ghz: Some(per_ns),
                tsc_invariant: Some(invariant),
            },
        )
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        (
            1.0,
            TimerInfo {
                kind: "clock_gettime",
                tsc_ghz: None,
                tsc_invariant: None,
            },
        )
    }
}

// ---------------------------------------------------------------------------
// Sampling and statistics.

/// The median of `v` (reordered in place); `v` must not be empty.
fn median_in_place(v: &mut [f64]) -> f64 {
    let n = v.len();
    let mid = n / 2;
    let (lower, m, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
    let m = *m;
    if n % 2 == 1 {
        m
    } else {
        // The largest of the lower half is the other middle value.
        let lo = lower.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo + m) / 2.0
    }
}

/// The 95 % percentile-bootstrap interval of the median of `samples`.
pub fn bootstrap_median_ci(samples: &[f64], resamples: usize, seed: u64) -> Option<(f64, f64)> {
    if samples.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = XorShift::new(seed);
    let mut scratch = vec![0.0; samples.len()];
    let mut medians = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for s in &mut scratch {
            *s = samples[rng.below(samples.len())];
        }
        medians.push(median_in_place(&mut scratch));
    }
    medians.sort_by(f64::total_cmp);
    Some((
        quantile_sorted(&medians, 0.025)?,
        quantile_sorted(&medians, 0.975)?,
    ))
}

/// Summarises latencies in nanoseconds; `None` when there are none.
pub fn summarize(ns: &[f64], errors: usize, resamples: usize, seed: u64) -> Option<Distribution> {
    let mut sorted = ns.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = quantile_sorted(&sorted, 0.5)?;
    let (lo, hi) = bootstrap_median_ci(ns, resamples, seed).unwrap_or((median, median));
    Some(Distribution {
        n: ns.len(),
        errors,
        median_ns: median,
        ci_low_ns: lo,
        ci_high_ns: hi,
        p99_ns: quantile_sorted(&sorted, 0.99)?,
        min_ns: sorted[0],
        mean_ns: ns.iter().sum::<f64>() / ns.len() as f64,
        net_median_ns: None,
    })
}

/// Runs the measurement: holds the timer and the settings.
struct Bench {
    per_ns: f64,
    iterations: usize,
    warmup: usize,
    bootstrap: usize,
    seed: u64,
    floor_ns: Option<f64>,
    rows: Vec<Row>,
}

impl Bench {
    /// Times `op` `iterations` times after `warmup` untimed calls. `op` returns
    /// whether it succeeded; it is tried once first, and a first failure makes the
    /// row unavailable with that error.
    fn time<T>(
        &mut self,
        primitive: &str,
        target: &str,
        label: Option<String>,
        mut op: impl FnMut() -> io::Result<T>,
    ) {
        if let Err(e) = op() {
            self.unavailable(primitive, target, label, e.to_string());
            return;
        }
        for _ in 0..self.warmup {
            let _ = black_box(op());
        }
        let mut raw = Vec::with_capacity(self.iterations);
        let mut errors = 0;
        for _ in 0..self.iterations {
            let t0 = ticks();
            let r = black_box(op());
            let t1 = ticks();
            errors += usize::from(r.is_err());
            raw.push(t1.wrapping_sub(t0));
        }
        let ns: Vec<f64> = raw.iter().map(|&t| t as f64 / self.per_ns).collect();
        // Each row its own stream, so that adding a row leaves the others' intervals.
        let seed = self.seed ^ (self.rows.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut d = summarize(&ns, errors, self.bootstrap, seed);
        if let Some(d) = d.as_mut() {
            match self.floor_ns {
                Some(f) => d.net_median_ns = Some(d.median_ns - f),
                None => self.floor_ns = Some(d.median_ns),
            }
        }
        self.rows.push(Row {
            primitive: primitive.into(),
            target: target.into(),
            label,
            latency: d,
            unavailable: None,
        });
    }

    fn unavailable(&mut self, primitive: &str, target: &str, label: Option<String>, why: String) {
        self.rows.push(Row {
            primitive: primitive.into(),
            target: target.into(),
            label,
            latency: None,
            unavailable: Some(why),
        });
    }
}

// ---------------------------------------------------------------------------
// CPUs.

fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => vec![0],
    }
}

fn pin(cpu: usize) -> io::Result<()> {
    quietwatt_sys::thread::pin_to_cpu(cpu)
}

/// `None` for the kernel's own files; a label when they come from elsewhere.
fn root_label(root: &SysRoot, path: &Path) -> Option<String> {
    if root.is_system() {
        return None;
    }
    // f_type is i64 on x86_64 glibc but narrower elsewhere: hence the cast.
    #[allow(clippy::unnecessary_cast)]
    let fuse = rustix::fs::statfs(path)
        .map(|s| s.f_type as i64 == FUSE_SUPER_MAGIC)
        .unwrap_or(false);
    Some(if fuse {
        "emulated (FUSE)".to_string()
    } else {
        format!("files under {} (not the kernel's)", root.dir().display())
    })
}

// ---------------------------------------------------------------------------
// The primitives.

/// Measures every primitive (see the module documentation) on a thread of its own,
/// pinned to `config.cpu`.
pub fn run(config: &LatencyConfig) -> Result<LatencyReport, LatencyError> {
    if config.iterations == 0 {
        return Err(LatencyError::Config(
            "the iteration count must be at least 1".into(),
        ));
    }
    let allowed = allowed_cpus();
    let cpu = match config.cpu {
        Some(c) if !allowed.contains(&c) => {
            return Err(LatencyError::Config(format!(
                "CPU {c} is not one this process may run on (allowed: {allowed:?})"
            )))
        }
        Some(c) => c,
        None => allowed.first().copied().unwrap_or(0),
    };
    let other = allowed.iter().copied().find(|&c| c != cpu);
    let config = config.clone();
    std::thread::Builder::new()
        .name("quietwatt-latency".into())
        .spawn(move || measure(&config, cpu, other))
        .map_err(|source| LatencyError::Thread {
            what: "start the measuring thread".into(),
            source,
        })?
        .join()
        .map_err(|_| LatencyError::Thread {
            what: "finish the measuring thread".into(),
            source: io::Error::other("it panicked"),
        })?
}

fn measure(
    config: &LatencyConfig,
    cpu: usize,
    other: Option<usize>,
) -> Result<LatencyReport, LatencyError> {
    pin(cpu).map_err(|source| LatencyError::Thread {
        what: format!("pin the measuring thread to CPU {cpu}"),
        source,
    })?;
    let (per_ns, timer) = calibrate();
    let mut b = Bench {
        per_ns,
        iterations: config.iterations,
        warmup: config.warmup,
        bootstrap: config.bootstrap,
        seed: config.seed,
        floor_ns: None,
        rows: Vec::new(),
    };

    // The timer alone: the floor under every other figure.
    b.time("rdtsc", "timer floor (two serialized reads)", None, || {
        Ok(())
    });
    #[cfg(target_arch = "x86_64")]
    b.time(
        "cpuid",
        "leaf 0 (a VM exit under a hypervisor)",
        None,
        || Ok(cpuid(0).eax),
    );
    #[cfg(not(target_arch = "x86_64"))]
    b.unavailable("cpuid", "", None, "not an x86_64 CPU".into());
    b.time("getppid", "a bare system call", None, || {
        // SAFETY: getppid takes no argument and cannot fail.
        Ok(unsafe { libc::syscall(libc::SYS_getppid) })
    });
    b.time(
        "clock_gettime",
        "CLOCK_MONOTONIC (vDSO, no kernel entry)",
        None,
        || {
            Ok(rustix::time::clock_gettime(
                rustix::time::ClockId::Monotonic,
            ))
        },
    );
    sysfs_stand_in(&mut b);
    powercap_rows(&mut b, &config.root);
    perf_stand_in(&mut b, cpu, other);
    perf_rows(&mut b, &config.root, cpu, other);
    msr_rows(&mut b, &config.root, cpu);
    estimate_rows(&mut b, &config.root);
    b.unavailable(
        "bpf map lookup",
        "",
        None,
        "not timed here: the ebpf mechanism reads its map in the kernel, not per read from user space (`record -m ebpf` reports its cost)".into(),
    );
    Ok(LatencyReport {
        timer,
        cpu,
        other_cpu: other,
        iterations: config.iterations,
        bootstrap: config.bootstrap,
        seed: config.seed,
        root: config.root.dir().display().to_string(),
        rows: b.rows,
    })
}

fn pread_small(file: &File) -> io::Result<usize> {
    let mut buf = [0u8; 32];
    file.read_at(&mut buf, 0)
}

fn sysfs_stand_in(b: &mut Bench) {
    // Always the real kernel's sysfs: this row is the kernel's cost of a small
    // attribute read, whatever --root says.
    match SYSFS_STAND_INS
        .iter()
        .find_map(|p| File::open(p).ok().map(|f| (p, f)))
    {
        Some((path, file)) => b.time(
            "sysfs pread",
            path,
            Some("stand-in: a kernel text attribute like energy_uj, not RAPL".into()),
            || pread_small(&file),
        ),
        None => b.unavailable(
            "sysfs pread",
            "",
            Some("stand-in".into()),
            format!("none of {SYSFS_STAND_INS:?} opens"),
        ),
    }
}

fn powercap_rows(b: &mut Bench, root: &SysRoot) {
    match powercap::discover(root) {
        Ok((zones, _)) => {
            for z in zones {
                let path = z.dir.join("energy_uj");
                let target = format!("{} ({})", z.id, z.entry);
                match File::open(&path) {
                    Ok(file) => {
                        let label = root_label(root, &path);
                        b.time("powercap pread", &target, label, || pread_small(&file));
                    }
                    Err(e) => b.unavailable(
                        "powercap pread",
                        &target,
                        None,
                        quietwatt::error::Error::io(&path, e).to_string(),
                    ),
                }
            }
        }
        Err(e) => b.unavailable("powercap pread", "", None, e.to_string()),
    }
}

/// A read of the estimate where nothing can measure: a TDP guess from the
/// busy CPUs (`/proc/stat`), and a model that also weighs them by their
/// frequency (cpufreq under `root`, read every 10 ms at most: in the p99,
/// rarely in the median).
fn estimate_rows(b: &mut Bench, root: &SysRoot) {
    use quietwatt::estimate::inputs::Input;
    use quietwatt::estimate::model::{blind_to, Term};
    use quietwatt::estimate::{guess, CpuIdentity, EstimateSource};
    use quietwatt::source::Source;
    let cpu = CpuIdentity::parse("", 1);
    let busy = guess::tdp(&cpu, 100.0);
    let mut freq = busy.clone();
    freq.simpler = vec![busy.fit.clone()];
    let names = [Input::BusyCpus, Input::BusyCpuGhz];
    freq.fit.inputs = names.iter().map(|i| i.name().to_string()).collect();
    freq.fit.blind_to = blind_to(&names);
    freq.fit.domains[0].terms.push(Term {
        input: Input::BusyCpuGhz.name().into(),
        w_per_unit: 1.0,
    });
    let stat = Path::new("/proc/stat");
    let sys = root.dir().join("sys");
    for (model, target) in [
        (&busy, "busy CPUs (/proc/stat)".to_string()),
        (
            &freq,
            format!("busy CPUs × frequency ({}/…/cpufreq)", sys.display()),
        ),
    ] {
        match EstimateSource::open(model, "bench", &Selection::default(), stat, &sys) {
            Ok(mut s) if s.estimate().is_some_and(|e| e.inputs == model.fit.inputs) => {
                let mut out = vec![0u64; s.channels().len()];
                b.time("estimate read", &target, None, || {
                    s.read(&mut out).map_err(io::Error::other)
                });
            }
            Ok(s) => b.unavailable(
                "estimate read",
                &target,
                None,
                s.notes().last().cloned().unwrap_or_default(),
            ),
            Err(e) => b.unavailable("estimate read", &target, None, e.to_string()),
        }
    }
}

fn perf_read_rows(
    b: &mut Bench,
    what: &str,
    label: Option<String>,
    open: impl Fn(usize) -> io::Result<OwnedFd>,
    cpu: usize,
    other: Option<usize>,
) {
    for (which, event_cpu) in [("same CPU", Some(cpu)), ("other CPU", other)] {
        let target = match event_cpu {
            Some(c) => format!("{what}, event on CPU {c} ({which}, reader on CPU {cpu})"),
            None => format!("{what} ({which})"),
        };
        let Some(event_cpu) = event_cpu else {
            b.unavailable(
                "perf read",
                &target,
                label.clone(),
                "this process may run on one CPU only".into(),
            );
            continue;
        };
        match open(event_cpu) {
            Ok(fd) => b.time("perf read", &target, label.clone(), || {
                perf::read_count(fd.as_fd())
            }),
            Err(e) => b.unavailable(
                "perf read",
                &target,
                label.clone(),
                format!("perf_event_open: {e}; {}", perf::permission_fix()),
            ),
        }
    }
}

fn perf_stand_in(b: &mut Bench, cpu: usize, other: Option<usize>) {
    use perf_event_open_sys::bindings::{PERF_COUNT_SW_CPU_CLOCK, PERF_TYPE_SOFTWARE};
    perf_read_rows(
        b,
        "cpu-clock",
        Some("stand-in: software event cpu-clock, same read path as a RAPL event; not RAPL".into()),
        |c| perf::open_counting_event(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK as u64, c as u32),
        cpu,
        other,
    );
}

/// The first spec of each domain (by `id`) that discovery `found`; none, after a
/// row of `primitive` on `target` saying why, when it failed.
fn one_per_domain<S, D: PartialEq, N, E: std::fmt::Display>(
    b: &mut Bench,
    primitive: &str,
    target: &str,
    found: Result<(Vec<S>, N), E>,
    id: impl Fn(&S) -> D,
) -> Vec<S> {
    let specs = match found {
        Ok((specs, _notes)) => specs,
        Err(e) => {
            b.unavailable(primitive, target, None, e.to_string());
            return Vec::new();
        }
    };
    let mut seen = Vec::new();
    let mut first = Vec::new();
    for s in specs {
        let d = id(&s);
        if !seen.contains(&d) {
            seen.push(d);
            first.push(s);
        }
    }
    first
}

fn perf_rows(b: &mut Bench, root: &SysRoot, cpu: usize, other: Option<usize>) {
    // Opening the source checks what discovery alone does not: that the PMU is the
    // real kernel's and the events open.
    if let Err(e) = perf::PerfEvents::open(root, &Selection::all()) {
        b.unavailable("perf read", "RAPL events", None, e.to_string());
        return;
    }
    // One row pair per domain: the per-core events of a socket cost the same.
    for s in one_per_domain(b, "perf read", "RAPL events", perf::discover(root), |s| {
        s.id
    }) {
        // A RAPL event is bound to the CPU its PMU lists, so it is the reader that
        // moves: onto the event's CPU ("same CPU"), then onto another one.
        let event_cpu = s.cpu as usize;
        let far = if event_cpu == cpu { other } else { Some(cpu) };
        if pin(event_cpu).is_err() {
            b.unavailable(
                "perf read",
                &s.id.to_string(),
                None,
                format!("cannot run on the event's CPU {event_cpu}"),
            );
            continue;
        }
        let (pmu_type, config) = (s.pmu_type, s.config);
        let target = format!("{} (CPU {event_cpu})", s.id);
        match perf::open_counting_event(pmu_type, config, s.cpu) {
            Ok(fd) => {
                b.time("perf read", &format!("{target}, same CPU"), None, || {
                    perf::read_count(fd.as_fd())
                });
                match far {
                    Some(f) if pin(f).is_ok() => b.time(
                        "perf read",
                        &format!("{target}, reader on CPU {f} (other CPU)"),
                        None,
                        || perf::read_count(fd.as_fd()),
                    ),
                    _ => b.unavailable(
                        "perf read",
                        &format!("{target}, other CPU"),
                        None,
                        "this process may run on one CPU only".into(),
                    ),
                }
            }
            Err(e) => b.unavailable("perf read", &target, None, e.to_string()),
        }
        let _ = pin(cpu);
    }
}

fn msr_rows(b: &mut Bench, root: &SysRoot, b_cpu: usize) {
    for s in one_per_domain(b, "msr pread", "", msr::discover(root), |s| s.id) {
        let path = root.path(format!("/dev/cpu/{}/msr", s.cpu));
        let target = format!("{} (CPU {}, register {:#x})", s.id, s.cpu, s.register);
        let label = root_label(root, &path);
        // The msr driver runs rdmsr on the device's CPU: read from there, as a
        // sampler pinned beside its counters would.
        let _ = pin(s.cpu as usize);
        match File::open(&path) {
            Ok(file) => {
                let register = s.register;
                b.time("msr pread", &target, label, || {
                    let mut buf = [0u8; 8];
                    file.read_at(&mut buf, register)
                });
            }
            Err(e) => b.unavailable(
                "msr pread",
                &target,
                label,
                quietwatt::error::Error::io(&path, e).to_string(),
            ),
        }
    }
    let _ = pin(b_cpu);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_interval_holds_the_median_and_tightens_with_n() {
        let mut r = XorShift::new(1);
        let small: Vec<f64> = (0..101).map(|_| r.unit()).collect();
        let big: Vec<f64> = (0..10_001).map(|_| r.unit()).collect();
        let d_small = summarize(&small, 0, 400, 9).unwrap();
        let d_big = summarize(&big, 0, 400, 9).unwrap();
        for d in [&d_small, &d_big] {
            assert!(
                d.ci_low_ns <= d.median_ns && d.median_ns <= d.ci_high_ns,
                "{d:?}"
            );
        }
        assert!(
            d_big.ci_high_ns - d_big.ci_low_ns < d_small.ci_high_ns - d_small.ci_low_ns,
            "{d_small:?} {d_big:?}"
        );
        // Same seed, same interval.
        let again = summarize(&small, 0, 400, 9).unwrap();
        assert_eq!(
            (again.ci_low_ns, again.ci_high_ns),
            (d_small.ci_low_ns, d_small.ci_high_ns)
        );
    }

    #[test]
    fn median_in_place_handles_even_and_odd() {
        assert_eq!(median_in_place(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median_in_place(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median_in_place(&mut [5.0]), 5.0);
    }
}
