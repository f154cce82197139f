//! One profile, end to end: the energy counters read at 1 kHz by the engine
//! ([`quietwatt::Session`]) while the [`Profiler`] samples call stacks on the same
//! clock, then each package interval's energy split among the stacks sampled in
//! it ([`split_energy`]). [`run_profile`] is what `quietwatt profile` runs.
//!
//! - **The workload**: a command spawned from the calling thread and followed
//!   from its `exec` with its threads and children ([`Workload::Command`],
//!   [`Target::Spawned`]), or every task on every CPU for a while
//!   ([`Workload::SystemWide`], [`Target::System`]).
//! - **The energy intervals**: each row of the session (the energy of each
//!   channel since the previous reading) gives one [`EnergyInterval`] per
//!   package, its channels (a package split by die has several) added. Joules
//!   become integer µJ by rounding each package's *cumulative* energy and taking
//!   differences, not by rounding each row: the intervals add up to the rounded
//!   total, so the stacks' µJ plus the unattributed µJ equal the measured package
//!   energy exactly ([`ProfileOutcome::package_uj`]).
//! - **DRAM is not split.** Its energy is reported beside the package's
//!   ([`ProfileOutcome::dram_uj`]), in the same µJ, but given to no stack: what a
//!   stack costs in DRAM depends on its memory traffic, which CPU time or cycles do
//!   not weigh (a memory-bound loop and a register-bound one of equal CPU time
//!   would get equal DRAM energy). Splitting it needs a weight of its own (LLC
//!   misses): not done.
//! - **Idle**: the energy before the command's `exec` and after its exit, and of
//!   intervals in which no sample fell on a package, is unattributed
//!   ([`StackEnergy::unattributed`]); with [`ProfileRun::idle`] a configured or
//!   fitted idle power is set apart as attribution does (see [`crate::split`]).

use crate::error::ProfileError;
use crate::sampler::{Counts, EventChoice, Options, Profiler, Target};
use crate::split::{split_energy, EnergyInterval, IntervalSplit, StackEnergy};
use crate::stack::{StackSample, StackTable};
use quietwatt::command::ChildEvent;
use quietwatt::{
    Domain, Hertz, Measurement, Mechanism, SampleRow, Session, SessionConfig, SysRoot,
};
use quietwatt_attribution::IdlePower;
use std::collections::{BTreeMap, HashSet};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The energy sampling rate of a profile: 1 kHz, the rate the intervals must
/// have to be finer than a function's run.
pub const ENERGY_HZ: f64 = 1000.0;

/// How often the rings and the energy rows are drained while the workload runs:
/// a 64-page ring holds about a quarter of a second of deep stacks at 1 kHz.
const DRAIN_EVERY: Duration = Duration::from_millis(20);

/// What to profile.
#[derive(Debug)]
pub enum Workload {
    /// A command, spawned by [`run_profile`] from the calling thread (which must
    /// spawn nothing else meanwhile: see [`Target::Spawned`]).
    Command(Command),
    /// Every task on every CPU, for this long (or until the stop flag rises).
    SystemWide {
        /// How long.
        duration: Duration,
    },
    /// A running process (its threads, and those and the processes they start
    /// afterwards: [`Target::Process`]) until [`Hooks::stop`] rises: how a
    /// program profiles itself (Python's `quietwatt.profile()`). Its own
    /// profiling threads (the drain, the energy sampler) are sampled too: what
    /// profiling costs, shown as it is.
    Process {
        /// Its pid.
        pid: i32,
    },
}

/// How to profile: where the energy is read, how often stacks are sampled.
#[derive(Debug, Clone)]
pub struct ProfileRun {
    /// Where `/sys`, `/dev` and `/proc` are looked up for the energy counters and
    /// the topology (an emulator's mount in tests). The stacks are always this
    /// machine's.
    pub root: SysRoot,
    /// The mechanism to read (`None`: the best polled one that works).
    pub mechanism: Option<Mechanism>,
    /// The energy counters' reading rate.
    pub energy_hz: Hertz,
    /// The sampler's options; its target is set from the [`Workload`].
    pub sampler: Options,
    /// The idle power set apart before the split.
    pub idle: IdlePower,
}

impl ProfileRun {
    /// The real machine, the best mechanism, 1 kHz energy, stacks at about 1 kHz
    /// (kernel and user, cycles where available), no idle power set apart.
    pub fn new(root: SysRoot) -> ProfileRun {
        ProfileRun {
            root,
            mechanism: None,
            energy_hz: Hertz::clamped(ENERGY_HZ),
            sampler: Options::new(Target::Spawned),
            idle: IdlePower::None,
        }
    }
}

/// What the caller hears while the profile runs.
pub struct Hooks<'a> {
    /// The command's start (its pid, to forward signals to it) and its end (before
    /// it is reaped).
    pub child: &'a mut dyn FnMut(ChildEvent),
    /// Each process seen for the first time in the samples, while the profile
    /// runs: the moment to read what it maps (for names of its frames).
    pub process_seen: &'a mut dyn FnMut(u32),
    /// Raised (by a signal handler): a system-wide profile ends early. A command
    /// runs to its end (signal it instead).
    pub stop: Option<&'a AtomicBool>,
    /// Called once the stacks are being sampled (the command spawned, the
    /// events enabled): a caller profiling its own process starts its work then.
    pub ready: &'a mut dyn FnMut(),
}

impl std::fmt::Debug for Hooks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks").finish_non_exhaustive()
    }
}

/// Why a profile could not be taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The energy side: no mechanism, no permission, a counter that broke.
    #[error(transparent)]
    Energy(#[from] quietwatt::Error),
    /// The stack side: perf_event_open refused (with its fix), a ring that
    /// cannot be mapped.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// The command could not be started.
    #[error("{program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The CPUs' packages could not be read under the root.
    #[error("cannot read which package each CPU belongs to: {0}")]
    Topology(String),
    /// The energy side measured no package.
    #[error("the {mechanism} counters have no package domain: there is no energy to split")]
    NoPackage {
        /// The mechanism read.
        mechanism: Mechanism,
    },
}

/// A finished profile.
#[derive(Debug)]
pub struct ProfileOutcome {
    /// The event sampled and why.
    pub event: EventChoice,
    /// Stack samples per second per CPU asked for.
    pub frequency_hz: u64,
    /// Samples, lost samples, throttling.
    pub counts: Counts,
    /// The mechanism the energy was read through.
    pub mechanism: Mechanism,
    /// The engine's energy report of the whole profile (every domain: DRAM,
    /// core, psys beside the package).
    pub measurement: Measurement,
    /// Every distinct stack.
    pub table: StackTable,
    /// Every sample, in time order.
    pub samples: Vec<StackSample>,
    /// Each package's energy intervals, as split.
    pub intervals: Vec<EnergyInterval>,
    /// The energy per stack, the unattributed part, the idle part.
    pub energy: StackEnergy,
    /// Each interval's split, in the order of `intervals` (the timeline:
    /// [`crate::timeline`]).
    pub splits: Vec<IntervalSplit>,
    /// Each CPU's package, as the split used it.
    pub cpu_package: Vec<Option<u32>>,
    /// Each package's measured energy, µJ: the sum of its intervals.
    pub package_uj: BTreeMap<u32, u64>,
    /// Each package's DRAM energy, µJ, not split (empty without a DRAM domain).
    pub dram_uj: BTreeMap<u32, u64>,
    /// Energy rows the session's buffer dropped before they were drained: their
    /// energy is in no interval (0 unless the machine stalled this thread).
    pub rows_dropped: u64,
    /// The command's exit status (`None` system-wide).
    pub status: Option<ExitStatus>,
    /// How long the profile ran.
    pub wall: Duration,
    /// The sampled processes' executable mappings, kept past their exit: what
    /// [`crate::Symbols`] names the frames from.
    pub maps: crate::MapTable,
    /// The modules whose call chains look cut: built without frame pointers
    /// ([`crate::chains`]), judged while the mappings were at hand.
    pub cut_chains: Vec<crate::CutChains>,
}

impl ProfileOutcome {
    /// Names the stacks from the mappings the sampler kept (taking them: the
    /// returned [`crate::Symbols`] names any further frame, as `--record`'s
    /// samples need), once for every output.
    pub fn name_stacks(
        &mut self,
        options: crate::SymbolOptions,
    ) -> (crate::NamedStacks, crate::Symbols) {
        let mut symbols = crate::Symbols::new(std::mem::take(&mut self.maps), options);
        let named = crate::NamedStacks::new(&self.table, &self.energy, &mut symbols, true);
        (named, symbols)
    }

    /// Writes `named` to `path` as `format`, whole or not at all, with the title,
    /// the subtitle (what `what` profiled, `emulated`) and, for pprof, the
    /// start and the duration: what `quietwatt profile -o` and Python's
    /// `quietwatt.profile(path)` write.
    pub fn write(
        &self,
        path: &std::path::Path,
        format: crate::Format,
        named: &crate::NamedStacks,
        what: &str,
        emulated: bool,
        started: std::time::SystemTime,
    ) -> std::io::Result<()> {
        let (title, subtitle) = (self.title(), self.subtitle(what, emulated));
        let header = crate::PprofHeader {
            start: started,
            duration: self.wall,
            comments: vec![title.clone(), subtitle.clone()],
        };
        crate::output::write_output(path, format, named, &title, &subtitle, &header)
    }

    /// The flame graph's title: the total and how it was measured and sampled.
    pub fn title(&self) -> String {
        format!(
            "energy: {:.3} J package ({}), {} @ {} Hz",
            self.package_total_uj() as f64 / 1e6,
            self.mechanism,
            self.event.event.name(),
            self.frequency_hz
        )
    }

    /// What the flame graph says under its title: `what` was profiled, what was
    /// attributed, DRAM beside, and `EMULATED RAPL` when the counters were the
    /// emulator's.
    pub fn subtitle(&self, what: &str, emulated: bool) -> String {
        let joules = |uj: u64| format!("{:.6}", uj as f64 / 1e6);
        let un = self.energy.unattributed.total_uj();
        let mut s = format!(
            "{what}; {} J attributed, {} J unattributed",
            joules(self.energy.accounted_uj() - un),
            joules(un)
        );
        if let Some(d) = self.dram_total_uj() {
            s.push_str(&format!("; DRAM {} J (not split)", joules(d)));
        }
        if emulated {
            s.push_str("; EMULATED RAPL");
        }
        s
    }

    /// The measured package energy, all packages, µJ.
    pub fn package_total_uj(&self) -> u64 {
        self.package_uj.values().sum()
    }

    /// The DRAM energy, all packages, µJ (`None` without a DRAM domain).
    pub fn dram_total_uj(&self) -> Option<u64> {
        (!self.dram_uj.is_empty()).then(|| self.dram_uj.values().sum())
    }
}

/// Runs `workload` under the energy session and the profiler, and splits the
/// energy among the stacks (see the module's documentation).
pub fn run_profile(
    run: &ProfileRun,
    workload: Workload,
    hooks: &mut Hooks<'_>,
) -> Result<ProfileOutcome, RunError> {
    let cpu_package = quietwatt_attribution::cpu_sockets(&run.root)
        .map_err(|e| RunError::Topology(e.to_string()))?;
    let mut config = SessionConfig::default()
        .root(run.root.clone())
        .rate(run.energy_hz);
    config = config.mechanism(run.mechanism);
    // Started before the profiler opens: its sampler thread must not inherit the
    // events of a spawned command's profile.
    let session = Session::start(config)?;
    let mechanism = session.mechanism();
    let channels = session.channels().to_vec();
    if !channels.iter().any(|c| c.domain == Domain::Package) {
        return Err(RunError::NoPackage { mechanism });
    }
    let target = match workload {
        Workload::Command(_) => Target::Spawned,
        Workload::SystemWide { .. } => Target::System,
        Workload::Process { pid } => Target::Process { pid },
    };
    let mut profiler = Profiler::open(Options {
        target,
        ..run.sampler
    })?;
    let mut table = StackTable::new();
    let mut samples = Vec::new();
    let mut rows: Vec<SampleRow> = Vec::new();
    let mut seen = HashSet::new();
    let mut drain = |profiler: &mut Profiler,
                     table: &mut StackTable,
                     samples: &mut Vec<StackSample>,
                     rows: &mut Vec<SampleRow>| {
        let from = samples.len();
        profiler.drain(table, samples);
        for s in &samples[from..] {
            if seen.insert(s.pid) {
                (hooks.process_seen)(s.pid);
            }
        }
        rows.extend(session.drain_samples());
    };
    let started = Instant::now();
    let status = match workload {
        Workload::Command(mut cmd) => {
            let program = cmd.get_program().to_string_lossy().into_owned();
            let mut child = cmd
                .spawn()
                .map_err(|source| RunError::Spawn { program, source })?;
            (hooks.child)(ChildEvent::Spawned(child.id()));
            (hooks.ready)();
            while !exited(child.id()) {
                std::thread::sleep(DRAIN_EVERY);
                drain(&mut profiler, &mut table, &mut samples, &mut rows);
            }
            (hooks.child)(ChildEvent::Exited);
            let status = child.wait().map_err(|source| RunError::Spawn {
                program: cmd.get_program().to_string_lossy().into_owned(),
                source,
            })?;
            Some(status)
        }
        Workload::SystemWide { .. } | Workload::Process { .. } => {
            profiler.start()?;
            (hooks.ready)();
            // A process is profiled until the stop flag rises (without one: a
            // day, the longest an unbounded profile is worth keeping in memory).
            let end = started
                + match workload {
                    Workload::SystemWide { duration } => duration,
                    _ => Duration::from_secs(86_400),
                };
            let stopped = || hooks.stop.is_some_and(|s| s.load(Ordering::Relaxed));
            loop {
                let now = Instant::now();
                if now >= end || stopped() {
                    break;
                }
                std::thread::sleep(DRAIN_EVERY.min(end - now));
                drain(&mut profiler, &mut table, &mut samples, &mut rows);
            }
            None
        }
    };
    profiler.stop()?;
    drain(&mut profiler, &mut table, &mut samples, &mut rows);
    let maps = profiler.take_maps();
    let wall = started.elapsed();
    let (measurement, last) = session.stop_with_samples()?;
    rows.extend(last);
    samples.sort_by_key(|s| s.time_ns);
    let rows_dropped = measurement.samples.as_ref().map_or(0, |s| s.dropped);
    let sockets = |d: Domain| -> Vec<Option<u32>> {
        channels
            .iter()
            .map(|c| (c.domain == d).then_some(c.socket.0))
            .collect()
    };
    let (intervals, package_uj) = to_intervals(&rows, &sockets(Domain::Package));
    let (_, dram_uj) = to_intervals(&rows, &sockets(Domain::Dram));
    let (splits, energy) = split_energy(&intervals, &samples, &cpu_package, run.idle);
    let cut_chains = crate::chains::cut_chains(&table, &samples, &maps);
    Ok(ProfileOutcome {
        event: profiler.event().clone(),
        frequency_hz: profiler.options().frequency_hz,
        counts: profiler.counts(),
        mechanism,
        measurement,
        table,
        samples,
        intervals,
        energy,
        splits,
        cpu_package,
        package_uj,
        dram_uj,
        rows_dropped,
        status,
        wall,
        maps,
        cut_chains,
    })
}

/// Whether process `pid` (a child) has exited, without reaping it: its pid stays
/// its own until `wait`, so a signal forwarded meanwhile reaches no other process.
fn exited(pid: u32) -> bool {
    // SAFETY: waitid writes into the zeroed siginfo_t it is given; WNOWAIT leaves
    // the child waitable.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        // An error (ECHILD: reaped elsewhere) ends the wait too.
        r != 0 || info.si_pid() != 0
    }
}

/// The rows' energy per package as intervals in µJ: `socket_of[channel]` names
/// the package a channel counts toward (`None`: not this domain). Each package's
/// cumulative joules are rounded to µJ and differenced, so a package's intervals
/// add up to its rounded total exactly. Returns the intervals (by time, then
/// package) and each package's total.
pub fn to_intervals(
    rows: &[SampleRow],
    socket_of: &[Option<u32>],
) -> (Vec<EnergyInterval>, BTreeMap<u32, u64>) {
    let mut cum_j: BTreeMap<u32, f64> = BTreeMap::new();
    let mut cum_uj: BTreeMap<u32, u64> = BTreeMap::new();
    for s in socket_of.iter().flatten() {
        cum_j.insert(*s, 0.0);
        cum_uj.insert(*s, 0);
    }
    let mut out = Vec::with_capacity(rows.len() * cum_j.len());
    let mut row_j: BTreeMap<u32, f64> = BTreeMap::new();
    for r in rows {
        row_j.clear();
        for (e, s) in r.energy_j.iter().zip(socket_of) {
            if let Some(s) = s {
                // A counter's energy is never negative; a NaN would poison the sum.
                let j = if e.0.is_finite() { e.0.max(0.0) } else { 0.0 };
                *row_j.entry(*s).or_default() += j;
            }
        }
        for (&package, j) in &row_j {
            let total = cum_j.entry(package).or_default();
            *total += j;
            let uj = (*total * 1e6).round() as u64;
            let prev = cum_uj.entry(package).or_default();
            // The cumulative sum never decreases, nor its rounding.
            let energy_uj = uj.saturating_sub(*prev);
            *prev = (*prev).max(uj);
            out.push(EnergyInterval {
                package,
                start_ns: r.t_ns.saturating_sub(r.interval_ns),
                end_ns: r.t_ns,
                energy_uj,
            });
        }
    }
    (out, cum_uj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietwatt::Joules;

    fn row(t_ns: u64, j: &[f64]) -> SampleRow {
        SampleRow {
            t_ns,
            interval_ns: 1_000_000,
            missed: 0,
            energy_j: j.iter().map(|&e| Joules(e)).collect(),
        }
    }

    #[test]
    fn rows_become_intervals_that_add_up_to_the_rounded_total_per_package() {
        // Two dies of package 0, package 1, and a DRAM channel left out: each row's
        // 0.4 µJ would round to 0 each time; cumulated, the total is kept.
        let rows: Vec<SampleRow> = (1..=10)
            .map(|k| row(k * 1_000_000, &[0.000_000_2, 0.000_000_2, 0.001_000_3, 9.0]))
            .collect();
        let (iv, totals) = to_intervals(&rows, &[Some(0), Some(0), Some(1), None]);
        assert_eq!(iv.len(), 20);
        assert_eq!(totals[&0], 4);
        assert_eq!(totals[&1], 10_003);
        for p in [0, 1] {
            let sum: u64 = iv
                .iter()
                .filter(|i| i.package == p)
                .map(|i| i.energy_uj)
                .sum();
            assert_eq!(sum, totals[&p]);
        }
        assert_eq!((iv[0].start_ns, iv[0].end_ns), (0, 1_000_000));
    }
}
