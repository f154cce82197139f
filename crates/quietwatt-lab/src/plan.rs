//! The plan of an overhead experiment (paper 002, Section V-A): what runs (workloads
//! and monitors, each either a Rust value the lab runs itself or a command the
//! caller builds), the combinations of workload × monitor × frequency, and the
//! seeded, interleaved schedule of their repetitions.

use crate::workload::{self, Kind};
use quietwatt::source::Mechanism;
use quietwatt::ticker::Hertz;
use quietwatt_stats::rng::XorShift;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

/// Seed of the round shuffles unless told otherwise.
pub const DEFAULT_SEED: u64 = 0x0002_2024;

/// Why an experiment could not go on (a failed run is not one: it is a row).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExperimentError {
    /// The plan cannot be run.
    #[error("invalid plan: {0}")]
    Plan(String),
    /// The results file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the kernel said.
        source: io::Error,
    },
    /// The results file is not one this version writes.
    #[error("{path}: {why}; give another output directory or remove the file to start over")]
    Incompatible {
        /// The file.
        path: PathBuf,
        /// What does not match.
        why: String,
    },
}

pub(crate) fn io_err(path: &Path) -> impl Fn(io::Error) -> ExperimentError + '_ {
    move |source| ExperimentError::Io {
        path: path.to_path_buf(),
        source,
    }
}

// ---------------------------------------------------------------------------
// What runs.

/// Builds the [`Command`] of one run, afresh each time: a `Command` is neither
/// `Clone` nor comparable, and the lab runs the same workload or monitor many
/// times. The caller writes the closure, so the lab knows nothing of the program
/// it starts (quietwatt's own command line included: the CLI builds that).
/// `A` is what the command depends on: nothing for a workload, the sampling
/// frequency in hertz for a monitor.
pub struct CommandFactory<A = ()> {
    make: Arc<dyn Fn(A) -> Command + Send + Sync>,
}

impl<A> CommandFactory<A> {
    /// A factory calling `make` for each run.
    pub fn new(make: impl Fn(A) -> Command + Send + Sync + 'static) -> CommandFactory<A> {
        CommandFactory {
            make: Arc::new(make),
        }
    }

    /// The command of one run.
    pub fn build(&self, arg: A) -> Command {
        (self.make)(arg)
    }
}

impl<A> Clone for CommandFactory<A> {
    fn clone(&self) -> Self {
        CommandFactory {
            make: Arc::clone(&self.make),
        }
    }
}

impl<A> fmt::Debug for CommandFactory<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CommandFactory(..)")
    }
}

/// Two factories are equal when they are the same closure (clones of one): a
/// closure cannot be compared otherwise, and a plan compares monitors only to
/// find duplicates and the baseline.
impl<A> PartialEq for CommandFactory<A> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.make, &other.make)
    }
}

/// What a workload is: always a child process, so that its CPU time, exit and
/// output are its own and a monitor in this process watches it from outside.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadCommand {
    /// A command the caller builds (a built-in kernel: the CLI's own executable).
    /// Its time is the `solve_s` of a JSON line it prints, else its wall time,
    /// unless `solve_time_required`: then a missing `solve_s` fails the run (a
    /// built-in kernel always prints one, so its absence means it went wrong).
    Process {
        /// Builds the command of each run.
        make: CommandFactory,
        /// Whether a run without a printed `solve_s` failed.
        solve_time_required: bool,
    },
    /// A shell command (`sh -c`); its time is the `solve_s` of a JSON line it
    /// prints, else its wall time.
    Shell(String),
}

/// A named workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Its name in results: `ep:20000:t2`, or the user's.
    pub label: String,
    /// What runs.
    pub command: WorkloadCommand,
}

impl Workload {
    /// A built-in kernel, named `KIND:SIZE:tTHREADS`, run by the command `make`
    /// builds (which must run `spec` and print its solve time as JSON: the CLI
    /// runs its own `bench workload`); a run that prints none failed.
    pub fn builtin(spec: &workload::Spec, make: CommandFactory) -> Workload {
        Workload {
            label: format!("{}:{}:t{}", spec.kind, spec.size, spec.threads),
            command: WorkloadCommand::Process {
                make,
                solve_time_required: true,
            },
        }
    }

    /// A command the caller builds, named `label`; its time is the `solve_s` of a
    /// JSON line it prints, else its wall time.
    pub fn process(label: impl Into<String>, make: CommandFactory) -> Workload {
        Workload {
            label: label.into(),
            command: WorkloadCommand::Process {
                make,
                solve_time_required: false,
            },
        }
    }

    /// A shell command (`sh -c`), named `label`.
    pub fn shell(label: impl Into<String>, command: impl Into<String>) -> Workload {
        Workload {
            label: label.into(),
            command: WorkloadCommand::Shell(command.into()),
        }
    }
}

/// What a quietwatt monitor reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuietwattSource {
    /// A RAPL mechanism under the root (real or emulated).
    Mechanism(Mechanism),
    /// The software event `cpu-clock` through the perf mechanism's code, one event
    /// per package: the cost of perf reads where no RAPL PMU exists. Not energy.
    PerfStandIn,
    /// One pread of a sysfs file per channel ([`crate::bench::StandIn`]): the cost
    /// of powercap reads where no RAPL exists. Not energy.
    PreadStandIn,
}

impl QuietwattSource {
    /// The name after `quietwatt:`.
    pub fn name(self) -> &'static str {
        match self {
            QuietwattSource::Mechanism(m) => m.name(),
            QuietwattSource::PerfStandIn => "perf-stand-in",
            QuietwattSource::PreadStandIn => "pread-stand-in",
        }
    }
}

/// What watches a workload.
#[derive(Debug, Clone, PartialEq)]
pub enum Monitor {
    /// Nothing: the baseline.
    None,
    /// quietwatt's own sampling engine, in this process, around the workload.
    Quietwatt(QuietwattSource),
    /// Another tool: a shell command started before the workload and stopped
    /// (SIGINT to its process group, SIGKILL after a grace period) after it.
    /// `{hz}`, `{interval_ms}` and `{interval_s}` are replaced by the frequency.
    Shell {
        /// Its name in results.
        name: String,
        /// The command.
        command: String,
    },
    /// Another process, built by the caller for each run from the frequency
    /// (hertz), started and stopped as [`Monitor::Shell`] is. This is how a
    /// monitor runs in its own process as other tools do, quietwatt included:
    /// the CLI builds its own command line, which the lab does not know.
    Command {
        /// Its name in results.
        name: String,
        /// Builds its command for a frequency.
        make: CommandFactory<f64>,
    },
}

impl Monitor {
    /// Its name in results: `none`, `quietwatt:powercap`, or the command's name.
    pub fn label(&self) -> String {
        match self {
            Monitor::None => "none".into(),
            Monitor::Quietwatt(s) => format!("quietwatt:{}", s.name()),
            Monitor::Shell { name, .. } | Monitor::Command { name, .. } => name.clone(),
        }
    }

    /// Parses `none`, `quietwatt:MECH` (powercap, perf, msr, perf-stand-in,
    /// pread-stand-in) or `NAME=COMMAND`.
    pub fn parse(s: &str) -> Result<Monitor, String> {
        let s = s.trim();
        if s == "none" {
            return Ok(Monitor::None);
        }
        if let Some((name, command)) = s.split_once('=') {
            let name = name.trim();
            if name.is_empty() || command.trim().is_empty() || name.contains(',') {
                return Err(format!(
                    "monitor '{s}': give NAME=COMMAND with a name without commas"
                ));
            }
            return Ok(Monitor::Shell {
                name: name.into(),
                command: command.trim().into(),
            });
        }
        if let Some(m) = s.strip_prefix("quietwatt:") {
            return Ok(Monitor::Quietwatt(match m {
                "perf-stand-in" => QuietwattSource::PerfStandIn,
                "pread-stand-in" => QuietwattSource::PreadStandIn,
                other => {
                    QuietwattSource::Mechanism(other.parse().map_err(|e| {
                        format!("monitor '{s}': {e}, perf-stand-in or pread-stand-in")
                    })?)
                }
            }));
        }
        Err(format!(
            "monitor '{s}': expected none, quietwatt:MECHANISM or NAME=COMMAND"
        ))
    }
}

/// A combination: a workload and a monitor at a frequency (`None` for the baseline).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Combo {
    /// Index into [`Plan::workloads`].
    pub workload: usize,
    /// Index into [`Plan::monitors`].
    pub monitor: usize,
    /// Sampling frequency; `None` for the baseline.
    pub freq: Option<f64>,
}

/// One run in the schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slot {
    /// Position in the whole schedule, from 0.
    pub seq: usize,
    /// The round, from 0.
    pub round: usize,
    /// What runs.
    pub combo: Combo,
    /// Repetition number of this combination, from 0.
    pub rep: usize,
}

/// Workloads × monitors × frequencies × repetitions.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The workloads.
    pub workloads: Vec<Workload>,
    /// The monitors; the baseline `none` is always among them (added if absent).
    pub monitors: Vec<Monitor>,
    /// Sampling frequencies of every monitor but the baseline, in hertz.
    pub freqs: Vec<f64>,
    /// Repetitions of each combination.
    pub reps: usize,
    /// Repetitions of a combination run back to back in a round (the paper: 3).
    pub per_round: usize,
    /// Seed of the shuffles.
    pub seed: u64,
}

impl Plan {
    /// A plan, checked: at least one workload, frequencies in quietwatt's range,
    /// at least one repetition; the baseline monitor is added first if absent.
    pub fn new(
        workloads: Vec<Workload>,
        mut monitors: Vec<Monitor>,
        freqs: Vec<f64>,
        reps: usize,
        per_round: usize,
        seed: u64,
    ) -> Result<Plan, ExperimentError> {
        if workloads.is_empty() {
            return Err(ExperimentError::Plan("no workload".into()));
        }
        if reps == 0 || per_round == 0 {
            return Err(ExperimentError::Plan(
                "repetitions and repetitions per round must be at least 1".into(),
            ));
        }
        let mut labels: Vec<&str> = workloads.iter().map(|w| w.label.as_str()).collect();
        labels.sort_unstable();
        if labels.windows(2).any(|w| w[0] == w[1]) {
            return Err(ExperimentError::Plan(
                "two workloads have the same name".into(),
            ));
        }
        if !monitors.contains(&Monitor::None) {
            monitors.insert(0, Monitor::None);
        }
        let mut mlabels: Vec<String> = monitors.iter().map(Monitor::label).collect();
        mlabels.sort_unstable();
        if mlabels.windows(2).any(|w| w[0] == w[1]) {
            return Err(ExperimentError::Plan(
                "two monitors have the same name".into(),
            ));
        }
        let others = monitors.iter().any(|m| *m != Monitor::None);
        if others && freqs.is_empty() {
            return Err(ExperimentError::Plan(
                "monitors other than none need at least one frequency".into(),
            ));
        }
        for &f in &freqs {
            Hertz::new(f).map_err(|_| {
                ExperimentError::Plan(format!(
                    "frequency {f}: give a number of hertz from 0.001 to 100000"
                ))
            })?;
        }
        Ok(Plan {
            workloads,
            monitors,
            freqs,
            reps,
            per_round,
            seed,
        })
    }

    /// Every combination, baseline first for each workload.
    pub fn combos(&self) -> Vec<Combo> {
        let mut out = Vec::new();
        for w in 0..self.workloads.len() {
            for (m, mon) in self.monitors.iter().enumerate() {
                if *mon == Monitor::None {
                    out.push(Combo {
                        workload: w,
                        monitor: m,
                        freq: None,
                    });
                } else {
                    for &f in &self.freqs {
                        out.push(Combo {
                            workload: w,
                            monitor: m,
                            freq: Some(f),
                        });
                    }
                }
            }
        }
        out
    }

    /// Rounds needed for every repetition.
    pub fn rounds(&self) -> usize {
        self.reps.div_ceil(self.per_round)
    }

    /// The whole schedule: round after round, every combination in a freshly
    /// shuffled order, `per_round` repetitions of each in turn.
    pub fn schedule(&self) -> Vec<Slot> {
        let combos = self.combos();
        let mut rng = XorShift::new(self.seed);
        let mut out = Vec::with_capacity(combos.len() * self.reps);
        for round in 0..self.rounds() {
            let mut order: Vec<usize> = (0..combos.len()).collect();
            // Fisher-Yates.
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
            for &c in &order {
                for k in 0..self.per_round {
                    let rep = round * self.per_round + k;
                    if rep < self.reps {
                        out.push(Slot {
                            seq: out.len(),
                            round,
                            combo: combos[c],
                            rep,
                        });
                    }
                }
            }
        }
        out
    }

    /// The identity of a slot's row in the CSV: workload, monitor, frequency, rep.
    pub fn key(&self, slot: &Slot) -> RunKey {
        RunKey {
            workload: self.workloads[slot.combo.workload].label.clone(),
            monitor: self.monitors[slot.combo.monitor].label(),
            freq_hz: freq_text(slot.combo.freq),
            rep: slot.rep,
        }
    }
}

/// The frequency as written in the CSV: `0` for the baseline.
pub(crate) fn freq_text(f: Option<f64>) -> String {
    format!("{}", f.unwrap_or(0.0))
}

/// What identifies a run across restarts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunKey {
    /// Workload label.
    pub workload: String,
    /// Monitor label.
    pub monitor: String,
    /// Frequency as written (`0` for the baseline).
    pub freq_hz: String,
    /// Repetition.
    pub rep: usize,
}

/// A built-in workload's kernel, size and threads from `KIND[:SIZE]` (the
/// kind's default size when none is given); the caller builds the command that
/// runs it ([`Workload::builtin`]).
pub fn parse_builtin(s: &str, threads: usize) -> Result<workload::Spec, String> {
    let (kind, size) = match s.split_once(':') {
        Some((k, n)) => (
            k,
            Some(
                n.parse::<u64>()
                    .map_err(|_| format!("workload '{s}': size '{n}' is not a whole number"))?,
            ),
        ),
        None => (s, None),
    };
    let kind: Kind = kind
        .parse()
        .map_err(|e: workload::UnknownKind| e.to_string())?;
    Ok(workload::Spec {
        kind,
        size: size.unwrap_or(kind.default_size()),
        threads,
    })
}

/// A plan for the lab's unit tests: two built-in workloads (whose command the
/// tests never run), one monitor at two frequencies.
#[cfg(test)]
pub(crate) fn test_plan(reps: usize, per_round: usize) -> Plan {
    let spec = |kind: Kind, size| workload::Spec {
        kind,
        size,
        threads: 1,
    };
    let never = CommandFactory::new(|()| Command::new("false"));
    Plan::new(
        vec![
            Workload::builtin(&spec(Kind::Ep, 10), never.clone()),
            Workload::builtin(&spec(Kind::Idle, 1), never),
        ],
        vec![Monitor::Quietwatt(QuietwattSource::PerfStandIn)],
        vec![10.0, 100.0],
        reps,
        per_round,
        7,
    )
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(reps: usize, per_round: usize) -> Plan {
        test_plan(reps, per_round)
    }

    #[test]
    fn the_schedule_is_every_combination_round_after_round() {
        let p = plan(3, 1);
        // Per workload: the baseline and one monitor at two frequencies.
        assert_eq!(p.combos().len(), 2 * (1 + 2));
        let s = p.schedule();
        assert_eq!(s.len(), 6 * 3);
        for (i, slot) in s.iter().enumerate() {
            assert_eq!(slot.seq, i);
            // Round r holds exactly repetition r of every combination.
            assert_eq!(slot.round, i / 6);
            assert_eq!(slot.rep, slot.round);
        }
        // Shuffled differently from one round to the next (7 is a seed that does).
        let order = |r: usize| -> Vec<Combo> {
            s.iter().filter(|x| x.round == r).map(|x| x.combo).collect()
        };
        assert_ne!(order(0), order(1));
        // The same seed gives the same schedule: what a resume relies on.
        assert_eq!(s, plan(3, 1).schedule());
        // Three per round, as the paper: a round holds reps 0..3 of each, back to back.
        let s3 = plan(5, 3).schedule();
        assert_eq!(s3.len(), 6 * 5);
        assert_eq!(s3.iter().filter(|x| x.round == 1).count(), 6 * 2);
        assert_eq!(
            s3[..3].iter().map(|x| x.rep).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
    }

    #[test]
    fn monitors_parse_and_the_baseline_is_always_there() {
        assert_eq!(Monitor::parse("none"), Ok(Monitor::None));
        assert_eq!(
            Monitor::parse("quietwatt:powercap"),
            Ok(Monitor::Quietwatt(QuietwattSource::Mechanism(
                Mechanism::Powercap
            )))
        );
        assert_eq!(
            Monitor::parse("perf-stat=perf stat -I {interval_ms} -a"),
            Ok(Monitor::Shell {
                name: "perf-stat".into(),
                command: "perf stat -I {interval_ms} -a".into()
            })
        );
        assert!(Monitor::parse("quietwatt:nope").is_err());
        assert!(Monitor::parse("=cmd").is_err());
        assert!(Monitor::parse("what").is_err());
        let p = plan(1, 1);
        assert_eq!(p.monitors[0], Monitor::None);
        assert!(Plan::new(vec![], vec![], vec![], 1, 1, 0).is_err());
        assert!(Plan::new(p.workloads.clone(), vec![], vec![], 0, 1, 0).is_err());
        assert!(Plan::new(
            p.workloads.clone(),
            vec![Monitor::Quietwatt(QuietwattSource::PerfStandIn)],
            vec![],
            1,
            1,
            0
        )
        .is_err());
        assert!(parse_builtin("ep:12", 2).is_ok());
        assert!(parse_builtin("ep:x", 2).is_err());
        assert!(parse_builtin("bt", 2).is_err());
    }
}
