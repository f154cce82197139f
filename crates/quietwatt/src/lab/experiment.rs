//! Overhead experiments by the protocol of paper 002 (Section V-A): a plan of
//! workloads × monitors × frequencies × repetitions, run in interleaved rounds,
//! recorded run by run to a CSV file that survives an interruption, then analysed
//! with [`stats`] into the table of the paper's Appendix A.
//!
//! **The plan.** A combination is a workload, a monitor and a sampling frequency;
//! the baseline (monitor `none`) has no frequency and is one combination per
//! workload (the paper's "frequency 0"). Repetitions are spread over time as in the
//! paper's Fig. 6: each round runs `per_round` repetitions of every combination in
//! turn, in an order shuffled anew each round (seeded, so that a resumed plan
//! replays the same schedule), so that a disturbance at one moment (another user, a
//! thermal event) falls on several combinations instead of spoiling one.
//!
//! **A run.** The monitor starts, then the workload runs as a child process; the
//! workload's figure is the solve time it reports itself (a built-in workload
//! prints it; any command that prints a JSON line with `solve_s` does too), else
//! its wall time. Recorded per run: workload time, wall time and CPU time of the
//! workload, monitor CPU time and context switches (the sampler's own accounting
//! for a quietwatt monitor; `wait4` rusage for a command), energy when a RAPL
//! source opens (two reads around the run, separate from the monitor), and the
//! idle fraction of `/proc/stat` and the C-state residency of `cpuidle` over the
//! run (always of the real kernel: they describe this machine's CPUs whatever
//! `--root` says).
//!
//! **The file.** One CSV row per run, appended and flushed as soon as the run ends;
//! on a restart the rows present are skipped (a half-written last line from a kill
//! is cut off first), so an interrupted plan resumes where it stopped. Failed runs
//! (a monitor that does not start, a workload that fails) are rows too, with
//! their error, and are not retried.

use crate::lab::stats::{self, Comparison, StatsError};
use crate::lab::workload::{self, Kind};
use crate::meter::Meter;
use crate::record::EngineConfig;
use crate::rng::XorShift;
use crate::root::SysRoot;
use crate::sampler::Rate;
use crate::source::{self, Mechanism, Selection, Source};
use crate::ticker::Hertz;
use serde::Serialize;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Seed of the round shuffles unless told otherwise.
pub const DEFAULT_SEED: u64 = 0x0002_2024;

/// Why an experiment could not go on (a failed run is not one: it is a row).
#[derive(Debug, thiserror::Error)]
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

fn io_err(path: &Path) -> impl Fn(io::Error) -> ExperimentError + '_ {
    move |source| ExperimentError::Io {
        path: path.to_path_buf(),
        source,
    }
}

// ---------------------------------------------------------------------------
// What runs.

/// What a workload is.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadCommand {
    /// A built-in kernel, run as `quietwatt bench workload KIND --json` in a child.
    Builtin(workload::Spec),
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
    /// A built-in workload, named `KIND:SIZE:tTHREADS`.
    pub fn builtin(spec: workload::Spec) -> Workload {
        Workload {
            label: format!("{}:{}:t{}", spec.kind, spec.size, spec.threads),
            command: WorkloadCommand::Builtin(spec),
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
}

impl Monitor {
    /// Its name in results: `none`, `quietwatt:powercap`, or the command's name.
    pub fn label(&self) -> String {
        match self {
            Monitor::None => "none".into(),
            Monitor::Quietwatt(s) => format!("quietwatt:{}", s.name()),
            Monitor::Shell { name, .. } => name.clone(),
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
                    "frequency {f}: give a number of hertz above 0 and at most 100000"
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
fn freq_text(f: Option<f64>) -> String {
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

// ---------------------------------------------------------------------------
// What a run records.

/// The measurements of one run (everything but its identity).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Measurement {
    /// Whether the run went through (a failed run keeps what it has, and `error`).
    pub ok: bool,
    /// The workload's own time (solve time), seconds.
    pub workload_s: Option<f64>,
    /// Wall time of the workload process, seconds.
    pub wall_s: Option<f64>,
    /// CPU time (user + system) of the workload process, seconds.
    pub workload_cpu_s: Option<f64>,
    /// CPU time of the monitor over the run, seconds.
    pub monitor_cpu_s: Option<f64>,
    /// The monitor's voluntary context switches (its wake-ups).
    pub monitor_wakeups: Option<u64>,
    /// The monitor's involuntary context switches.
    pub monitor_involuntary: Option<u64>,
    /// Samples a quietwatt monitor took.
    pub monitor_samples: Option<u64>,
    /// Deadlines a quietwatt monitor missed.
    pub monitor_missed: Option<u64>,
    /// Energy over the run (total of the domains, each joule once), joules.
    pub energy_j: Option<f64>,
    /// Seconds between the two energy reads (a little longer than the workload:
    /// they bracket the monitor's start and stop too).
    pub energy_s: Option<f64>,
    /// Fraction of CPU time idle (idle + iowait of `/proc/stat`) over the run.
    pub proc_idle_frac: Option<f64>,
    /// Residency per C-state over the run as `NAME=fraction;...` (`cpuidle`).
    pub cstates: Option<String>,
    /// Wall-clock start, seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// Why the run failed, with the monitor's or workload's stderr.
    pub error: Option<String>,
}

/// One row of the results.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// Position in the schedule.
    pub seq: usize,
    /// Round.
    pub round: usize,
    /// Identity.
    pub key: RunKey,
    /// Measurements.
    pub m: Measurement,
}

/// The CSV header, in column order.
pub const CSV_COLUMNS: [&str; 21] = [
    "seq",
    "round",
    "workload",
    "monitor",
    "freq_hz",
    "rep",
    "status",
    "workload_s",
    "wall_s",
    "workload_cpu_s",
    "monitor_cpu_s",
    "monitor_wakeups",
    "monitor_involuntary",
    "monitor_samples",
    "monitor_missed",
    "energy_j",
    "energy_s",
    "proc_idle_frac",
    "cstates",
    "started_unix_s",
    "error",
];

fn opt<T: fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map(|x| x.to_string()).unwrap_or_default()
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl RunRecord {
    /// The record as one CSV line (with its newline).
    pub fn to_csv(&self) -> String {
        let m = &self.m;
        let fields = [
            self.seq.to_string(),
            self.round.to_string(),
            self.key.workload.clone(),
            self.key.monitor.clone(),
            self.key.freq_hz.clone(),
            self.key.rep.to_string(),
            if m.ok { "ok" } else { "failed" }.to_string(),
            opt(&m.workload_s),
            opt(&m.wall_s),
            opt(&m.workload_cpu_s),
            opt(&m.monitor_cpu_s),
            opt(&m.monitor_wakeups),
            opt(&m.monitor_involuntary),
            opt(&m.monitor_samples),
            opt(&m.monitor_missed),
            opt(&m.energy_j),
            opt(&m.energy_s),
            opt(&m.proc_idle_frac),
            opt(&m.cstates),
            m.started_unix_s.to_string(),
            // One line per run: the error's own newlines would survive quoting, but
            // a line-oriented reader (grep, tail) is happier without them.
            m.error
                .as_deref()
                .unwrap_or("")
                .replace(['\n', '\r'], " | "),
        ];
        let mut line = fields
            .iter()
            .map(|f| csv_field(f))
            .collect::<Vec<_>>()
            .join(",");
        line.push('\n');
        line
    }

    /// Parses a row written by [`RunRecord::to_csv`] (already split into fields).
    pub fn from_fields(f: &[String]) -> Result<RunRecord, String> {
        if f.len() != CSV_COLUMNS.len() {
            return Err(format!(
                "{} fields, expected {}",
                f.len(),
                CSV_COLUMNS.len()
            ));
        }
        fn num<T: std::str::FromStr>(s: &str, col: &str) -> Result<T, String> {
            s.parse()
                .map_err(|_| format!("{col}: '{s}' is not a number"))
        }
        fn optn<T: std::str::FromStr>(s: &str, col: &str) -> Result<Option<T>, String> {
            if s.is_empty() {
                Ok(None)
            } else {
                num(s, col).map(Some)
            }
        }
        let ok = match f[6].as_str() {
            "ok" => true,
            "failed" => false,
            other => return Err(format!("status: '{other}' is neither ok nor failed")),
        };
        Ok(RunRecord {
            seq: num(&f[0], "seq")?,
            round: num(&f[1], "round")?,
            key: RunKey {
                workload: f[2].clone(),
                monitor: f[3].clone(),
                freq_hz: f[4].clone(),
                rep: num(&f[5], "rep")?,
            },
            m: Measurement {
                ok,
                workload_s: optn(&f[7], "workload_s")?,
                wall_s: optn(&f[8], "wall_s")?,
                workload_cpu_s: optn(&f[9], "workload_cpu_s")?,
                monitor_cpu_s: optn(&f[10], "monitor_cpu_s")?,
                monitor_wakeups: optn(&f[11], "monitor_wakeups")?,
                monitor_involuntary: optn(&f[12], "monitor_involuntary")?,
                monitor_samples: optn(&f[13], "monitor_samples")?,
                monitor_missed: optn(&f[14], "monitor_missed")?,
                energy_j: optn(&f[15], "energy_j")?,
                energy_s: optn(&f[16], "energy_s")?,
                proc_idle_frac: optn(&f[17], "proc_idle_frac")?,
                cstates: (!f[18].is_empty()).then(|| f[18].clone()),
                started_unix_s: num(&f[19], "started_unix_s")?,
                error: (!f[20].is_empty()).then(|| f[20].clone()),
            },
        })
    }
}

/// Splits CSV text into records of fields (RFC 4180: quoted fields may hold
/// commas, doubled quotes and newlines). Returns the records and the byte length
/// of the complete lines: a last line without its newline is left out.
pub fn parse_csv(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut records = Vec::new();
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut complete = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if quoted {
            match c {
                '"' if matches!(chars.peek(), Some((_, '"'))) => {
                    field.push('"');
                    chars.next();
                }
                '"' => quoted = false,
                c => field.push(c),
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            ',' => fields.push(std::mem::take(&mut field)),
            '\r' => {}
            '\n' => {
                fields.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut fields));
                complete = i + 1;
            }
            c => field.push(c),
        }
    }
    (records, complete)
}

// ---------------------------------------------------------------------------
// The results file.

/// The CSV file of an experiment, opened for appending.
#[derive(Debug)]
pub struct Results {
    path: PathBuf,
    file: File,
    /// Every row in the file, in file order.
    pub records: Vec<RunRecord>,
}

impl Results {
    /// Opens `path`, creating it with its header, or reads the rows already there
    /// (cutting off a last line left half-written by a kill).
    pub fn open(path: &Path) -> Result<Results, ExperimentError> {
        let err = io_err(path);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(&err)?;
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(|e| {
            if e.kind() == io::ErrorKind::InvalidData {
                ExperimentError::Incompatible {
                    path: path.to_path_buf(),
                    why: "not a text file".into(),
                }
            } else {
                err(e)
            }
        })?;
        let header = CSV_COLUMNS.join(",");
        if text.is_empty() {
            file.write_all(format!("{header}\n").as_bytes())
                .and_then(|()| file.flush())
                .map_err(&err)?;
            return Ok(Results {
                path: path.to_path_buf(),
                file,
                records: Vec::new(),
            });
        }
        let (rows, complete) = parse_csv(&text);
        if complete < text.len() {
            // A kill in the middle of a write: the partial row is not a run.
            file.set_len(complete as u64).map_err(&err)?;
            file.seek(SeekFrom::End(0)).map_err(&err)?;
        }
        let Some(first) = rows.first() else {
            return Err(ExperimentError::Incompatible {
                path: path.to_path_buf(),
                why: "no complete header line".into(),
            });
        };
        if first.join(",") != header {
            return Err(ExperimentError::Incompatible {
                path: path.to_path_buf(),
                why: format!("its header is not quietwatt's ({header})"),
            });
        }
        let mut records = Vec::with_capacity(rows.len());
        for (i, r) in rows[1..].iter().enumerate() {
            records.push(RunRecord::from_fields(r).map_err(|why| {
                ExperimentError::Incompatible {
                    path: path.to_path_buf(),
                    why: format!("row {}: {why}", i + 2),
                }
            })?);
        }
        Ok(Results {
            path: path.to_path_buf(),
            file,
            records,
        })
    }

    /// Appends a row and hands it to the kernel at once, so that a kill loses at
    /// most the run in progress.
    pub fn append(&mut self, r: RunRecord) -> Result<(), ExperimentError> {
        self.file
            .write_all(r.to_csv().as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(io_err(&self.path))?;
        self.records.push(r);
        Ok(())
    }

    /// Whether a run with this identity is already in the file.
    pub fn has(&self, key: &RunKey) -> bool {
        self.records.iter().any(|r| &r.key == key)
    }
}

// ---------------------------------------------------------------------------
// Running a plan.

/// Runs one slot of a plan.
pub trait Executor {
    /// Runs `slot` and measures it; a failure is a [`Measurement`] with `ok: false`.
    fn run(&mut self, plan: &Plan, slot: &Slot) -> Measurement;
}

/// Where a plan stands, after each run.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Runs done in this session.
    pub done: usize,
    /// Runs to do in this session (found in the file: skipped).
    pub todo: usize,
    /// Runs skipped because the file had them.
    pub skipped: usize,
    /// The run just finished.
    pub last: RunKey,
    /// Whether it went through.
    pub last_ok: bool,
    /// Time since this session started.
    pub elapsed: Duration,
    /// Estimated time to the end (mean run time so far × runs left).
    pub eta: Duration,
}

/// How a session of [`execute`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Executed {
    /// Runs done and written now.
    pub done: usize,
    /// Runs found in the file and skipped.
    pub skipped: usize,
    /// Whether `stop` ended the session before the plan's end.
    pub interrupted: bool,
}

/// Runs every slot of `plan` not yet in `results`, appending each row as it ends,
/// and calling `progress` after each. When `stop` is raised (Ctrl-C), the run in
/// progress is not written (a run cut short is not a measurement, and a written
/// row would never be retried) and the session ends; a rerun resumes there.
pub fn execute(
    plan: &Plan,
    results: &mut Results,
    executor: &mut dyn Executor,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Executed, ExperimentError> {
    let schedule = plan.schedule();
    let todo: Vec<&Slot> = schedule
        .iter()
        .filter(|s| !results.has(&plan.key(s)))
        .collect();
    let skipped = schedule.len() - todo.len();
    let start = Instant::now();
    for (i, slot) in todo.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            return Ok(Executed {
                done: i,
                skipped,
                interrupted: true,
            });
        }
        let m = executor.run(plan, slot);
        if stop.load(Ordering::Relaxed) {
            return Ok(Executed {
                done: i,
                skipped,
                interrupted: true,
            });
        }
        let key = plan.key(slot);
        let ok = m.ok;
        results.append(RunRecord {
            seq: slot.seq,
            round: slot.round,
            key: key.clone(),
            m,
        })?;
        let elapsed = start.elapsed();
        let done = i + 1;
        progress(&Progress {
            done,
            todo: todo.len(),
            skipped,
            last: key,
            last_ok: ok,
            elapsed,
            eta: elapsed.mul_f64((todo.len() - done) as f64 / done as f64),
        });
    }
    Ok(Executed {
        done: todo.len(),
        skipped,
        interrupted: false,
    })
}

/// Runs plans for real: workloads as child processes, monitors around them.
#[derive(Debug, Clone)]
pub struct ProcessExecutor {
    /// The `quietwatt` executable, for built-in workloads.
    pub exe: PathBuf,
    /// Where RAPL sources are opened (monitors and the energy of each run).
    pub root: SysRoot,
    /// How long a command monitor gets to start before the workload; one that has
    /// exited by then failed.
    pub settle: Duration,
    /// How long a command monitor gets to exit after SIGINT before SIGKILL.
    pub grace: Duration,
}

impl ProcessExecutor {
    /// An executor with a 200 ms settle time and a 2 s grace period.
    pub fn new(exe: PathBuf, root: SysRoot) -> ProcessExecutor {
        ProcessExecutor {
            exe,
            root,
            settle: Duration::from_millis(200),
            grace: Duration::from_secs(2),
        }
    }
}

/// The workload's command, its stdout and stderr going to files (a pipe would
/// block a chatty workload while nobody reads it).
struct WorkloadProcess {
    cmd: Command,
    /// A built-in workload always prints its solve time: its absence is a failure.
    builtin: bool,
    out: tempfile_lite::Temp,
    err: tempfile_lite::Temp,
}

/// Temporary files without a dependency: created under the system's temporary
/// directory, removed on drop.
mod tempfile_lite {
    use std::fs::File;
    use std::io;
    use std::path::PathBuf;

    /// A temporary file.
    pub struct Temp {
        pub path: PathBuf,
        pub file: File,
    }

    impl Temp {
        pub fn new(tag: &str) -> io::Result<Temp> {
            use std::sync::atomic::{AtomicU64, Ordering};
            static N: AtomicU64 = AtomicU64::new(0);
            let path = std::env::temp_dir().join(format!(
                "quietwatt-lab-{}-{}-{tag}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let file = File::options()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)?;
            Ok(Temp { path, file })
        }

        /// The last `max` bytes, as text.
        pub fn tail(&self, max: u64) -> String {
            let text = std::fs::read(&self.path).unwrap_or_default();
            let from = text.len().saturating_sub(max as usize);
            String::from_utf8_lossy(&text[from..]).trim().to_string()
        }

        pub fn text(&self) -> String {
            String::from_utf8_lossy(&std::fs::read(&self.path).unwrap_or_default()).into_owned()
        }
    }

    impl Drop for Temp {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// CPU time (s), voluntary and involuntary switches of an rusage.
fn rusage_figures(ru: &libc::rusage) -> (f64, u64, u64) {
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        tv(ru.ru_utime) + tv(ru.ru_stime),
        ru.ru_nvcsw as u64,
        ru.ru_nivcsw as u64,
    )
}

fn children_rusage() -> libc::rusage {
    // SAFETY: getrusage writes only the zeroed struct it is given.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru
    }
}

/// `wait4(pid)`: the exit status and rusage of a child (and of the children it
/// waited for). `block = false` returns `None` while it runs.
fn wait4(pid: i32, block: bool) -> io::Result<Option<(i32, libc::rusage)>> {
    loop {
        let mut status = 0;
        // SAFETY: wait4 writes the two out-values we pass, which live for the call.
        let (r, ru) = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            let r = libc::wait4(
                pid,
                &mut status,
                if block { 0 } else { libc::WNOHANG },
                &mut ru,
            );
            (r, ru)
        };
        if r == pid {
            return Ok(Some((status, ru)));
        }
        if r == 0 {
            return Ok(None);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn status_text(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exit code {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("status {status}")
    }
}

/// Aggregate CPU jiffies: (idle + iowait, total), from the first line of `/proc/stat`.
fn proc_stat() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    // guest and guest_nice are already inside user and nice.
    let total: u64 = v.iter().take(8).sum();
    Some((idle, total))
}

/// Time in each C-state summed over CPUs, microseconds, by state name.
fn cpuidle_times() -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    let Ok(cpus) = std::fs::read_dir("/sys/devices/system/cpu") else {
        return out;
    };
    for cpu in cpus.flatten() {
        let name = cpu.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with("cpu") || !name[3..].chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let Ok(states) = std::fs::read_dir(cpu.path().join("cpuidle")) else {
            continue;
        };
        for st in states.flatten() {
            let p = st.path();
            let (Ok(n), Ok(t)) = (
                std::fs::read_to_string(p.join("name")),
                std::fs::read_to_string(p.join("time")),
            ) else {
                continue;
            };
            let Ok(t) = t.trim().parse::<u64>() else {
                continue;
            };
            let n = n.trim().to_string();
            match out.iter_mut().find(|(k, _)| *k == n) {
                Some((_, v)) => *v += t,
                None => out.push((n, t)),
            }
        }
    }
    out
}

/// The idle figures at one moment.
struct IdleSnapshot {
    stat: Option<(u64, u64)>,
    cstates: Vec<(String, u64)>,
    at: Instant,
}

impl IdleSnapshot {
    fn now() -> IdleSnapshot {
        IdleSnapshot {
            stat: proc_stat(),
            cstates: cpuidle_times(),
            at: Instant::now(),
        }
    }

    /// (idle fraction, `NAME=residency;...`) since `self`.
    fn since(&self) -> (Option<f64>, Option<String>) {
        let now = IdleSnapshot::now();
        let frac = match (self.stat, now.stat) {
            (Some((i0, t0)), Some((i1, t1))) if t1 > t0 => {
                Some(i1.saturating_sub(i0) as f64 / (t1 - t0) as f64)
            }
            _ => None,
        };
        let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let wall_us = now.at.duration_since(self.at).as_secs_f64() * 1e6 * ncpu;
        let cs: Vec<String> = now
            .cstates
            .iter()
            .filter_map(|(n, t1)| {
                let t0 = self.cstates.iter().find(|(k, _)| k == n)?.1;
                Some(format!(
                    "{n}={:.4}",
                    t1.saturating_sub(t0) as f64 / wall_us.max(1.0)
                ))
            })
            .collect();
        (frac, (!cs.is_empty()).then(|| cs.join(";")))
    }
}

/// The solve time a workload printed: `solve_s` of the last JSON line having one.
fn reported_solve_s(stdout: &str) -> Option<f64> {
    stdout.lines().rev().find_map(|l| {
        serde_json::from_str::<serde_json::Value>(l.trim())
            .ok()?
            .get("solve_s")?
            .as_f64()
    })
}

impl ProcessExecutor {
    fn workload_process(&self, w: &Workload) -> io::Result<WorkloadProcess> {
        let mut cmd = match &w.command {
            WorkloadCommand::Builtin(spec) => {
                let mut c = Command::new(&self.exe);
                c.args(["bench", "workload", spec.kind.name(), "--json"])
                    .arg("--size")
                    .arg(spec.size.to_string())
                    .arg("--threads")
                    .arg(spec.threads.to_string());
                c
            }
            WorkloadCommand::Shell(s) => {
                let mut c = Command::new("sh");
                c.arg("-c").arg(s);
                c
            }
        };
        let out = tempfile_lite::Temp::new("stdout")?;
        let err = tempfile_lite::Temp::new("stderr")?;
        cmd.stdin(Stdio::null())
            .stdout(out.file.try_clone()?)
            .stderr(err.file.try_clone()?);
        Ok(WorkloadProcess {
            cmd,
            builtin: matches!(w.command, WorkloadCommand::Builtin(_)),
            out,
            err,
        })
    }

    /// Fills the workload's figures from its exit (`ok: false` and the error when it
    /// failed).
    fn finish_workload(
        &self,
        m: &mut Measurement,
        wp: &WorkloadProcess,
        status: Option<i32>,
        wall: Duration,
        cpu_s: f64,
    ) {
        m.wall_s = Some(wall.as_secs_f64());
        m.workload_cpu_s = Some(cpu_s);
        let failed = match status {
            Some(s) if libc::WIFEXITED(s) && libc::WEXITSTATUS(s) == 0 => None,
            Some(s) => Some(status_text(s)),
            None => Some("could not be waited for".into()),
        };
        if let Some(why) = failed {
            m.ok = false;
            m.error = Some(format!("workload failed ({why}): {}", wp.err.tail(2000)));
            return;
        }
        m.workload_s = match reported_solve_s(&wp.out.text()) {
            Some(s) => Some(s),
            None => match wp.builtin {
                true => {
                    m.ok = false;
                    m.error = Some(format!(
                        "the workload printed no solve time: {}",
                        wp.out.tail(500)
                    ));
                    None
                }
                false => Some(wall.as_secs_f64()),
            },
        };
    }

    /// Runs the workload without a monitor in this process: spawn, wait, account.
    fn run_plain(&self, m: &mut Measurement, wp: &mut WorkloadProcess) {
        let before = children_rusage();
        let t0 = Instant::now();
        let child = match wp.cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                m.ok = false;
                m.error = Some(format!("cannot start the workload: {e}"));
                return;
            }
        };
        let r = wait4(child.id() as i32, true);
        let wall = t0.elapsed();
        let (status, cpu) = match r {
            Ok(Some((s, ru))) => (Some(s), rusage_figures(&ru).0),
            _ => {
                let after = children_rusage();
                (None, rusage_figures(&after).0 - rusage_figures(&before).0)
            }
        };
        self.finish_workload(m, wp, status, wall, cpu);
    }

    fn run_quietwatt(
        &self,
        m: &mut Measurement,
        wp: &mut WorkloadProcess,
        src: QuietwattSource,
        freq: f64,
    ) {
        let source = match open_monitor_source(&self.root, src) {
            Ok(s) => s,
            Err(e) => {
                m.ok = false;
                m.error = Some(format!("the monitor cannot open its source: {e}"));
                return;
            }
        };
        let Ok(hz) = Hertz::new(freq) else {
            m.ok = false;
            m.error = Some(format!("invalid frequency {freq}"));
            return;
        };
        let mut meter = Meter::new(source);
        let mut config = EngineConfig::new(Rate::Fixed(hz));
        config.root = self.root.clone();
        let before = children_rusage();
        let t0 = Instant::now();
        // The engine's own command measurement: sampling starts before the spawn and
        // ends at the exit (pidfd), as `quietwatt run` does.
        match crate::command::measure(&mut meter, &mut wp.cmd, &config) {
            Ok(mc) => {
                let wall = t0.elapsed();
                let cpu = rusage_figures(&children_rusage()).0 - rusage_figures(&before).0;
                let o = &mc.overhead;
                let both = o.sampler.plus(o.writer);
                m.monitor_cpu_s = Some(both.cpu_ns as f64 / 1e9);
                m.monitor_wakeups = Some(both.voluntary_switches);
                m.monitor_involuntary = Some(both.involuntary_switches);
                m.monitor_samples = Some(o.samples);
                m.monitor_missed = Some(o.missed_deadlines);
                self.finish_workload(m, wp, Some(mc.status.into_raw()), wall, cpu);
                if let Some(e) = mc.error {
                    m.ok = false;
                    m.error = Some(format!("the monitor failed during the run: {e}"));
                }
            }
            Err(e) => {
                m.ok = false;
                m.error = Some(format!("the monitor failed: {e}"));
            }
        }
    }

    fn run_shell_monitor(
        &self,
        m: &mut Measurement,
        wp: &mut WorkloadProcess,
        command: &str,
        freq: f64,
    ) {
        let command = command
            .replace("{hz}", &freq.to_string())
            .replace("{interval_ms}", &(1000.0 / freq).to_string())
            .replace("{interval_s}", &(1.0 / freq).to_string());
        let err = match tempfile_lite::Temp::new("monitor") {
            Ok(t) => t,
            Err(e) => {
                m.ok = false;
                m.error = Some(format!(
                    "cannot create a file for the monitor's stderr: {e}"
                ));
                return;
            }
        };
        let spawned = err.file.try_clone().and_then(|f| {
            Command::new("sh")
                .arg("-c")
                .arg(&command)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(f)
                // Its own process group: the stop signal reaches what `sh` started.
                .process_group(0)
                .spawn()
        });
        let pid = match spawned {
            Ok(c) => c.id() as i32,
            Err(e) => {
                m.ok = false;
                m.error = Some(format!("cannot start the monitor '{command}': {e}"));
                return;
            }
        };
        std::thread::sleep(self.settle);
        if let Ok(Some((status, _))) = wait4(pid, false) {
            m.ok = false;
            m.error = Some(format!(
                "the monitor '{command}' exited before the workload started ({}): {}",
                status_text(status),
                err.tail(2000)
            ));
            return;
        }
        self.run_plain(m, wp);
        // Still running? A monitor that ended on its own did not watch the whole run.
        let early = wait4(pid, false);
        let (status, ru, ended_early) = match early {
            Ok(Some((s, ru))) => (s, ru, true),
            _ => {
                // SAFETY: kill only sends a signal to the group we created.
                unsafe { libc::kill(-pid, libc::SIGINT) };
                let deadline = Instant::now() + self.grace;
                let mut got = None;
                while Instant::now() < deadline {
                    if let Ok(Some(x)) = wait4(pid, false) {
                        got = Some(x);
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                let (s, ru) = match got {
                    Some(x) => x,
                    None => {
                        // SAFETY: as above.
                        unsafe { libc::kill(-pid, libc::SIGKILL) };
                        match wait4(pid, true) {
                            Ok(Some(x)) => x,
                            _ => (0, children_rusage()),
                        }
                    }
                };
                (s, ru, false)
            }
        };
        // The group's other members (a tool `sh` forked) get the same end.
        // SAFETY: as above; the group may already be empty (ESRCH is fine).
        unsafe { libc::kill(-pid, libc::SIGKILL) };
        let (cpu, vol, invol) = rusage_figures(&ru);
        m.monitor_cpu_s = Some(cpu);
        m.monitor_wakeups = Some(vol);
        m.monitor_involuntary = Some(invol);
        if ended_early && m.ok {
            m.ok = false;
            m.error = Some(format!(
                "the monitor '{command}' exited during the run ({}): {}",
                status_text(status),
                err.tail(2000)
            ));
        }
    }
}

/// Opens what a quietwatt monitor reads.
pub fn open_monitor_source(root: &SysRoot, src: QuietwattSource) -> crate::Result<Box<dyn Source>> {
    match src {
        QuietwattSource::Mechanism(m) => source::open(root, Some(m), &Selection::all()),
        QuietwattSource::PerfStandIn => {
            use crate::domain::{Domain, DomainId};
            use crate::source::perf::{EventSpec, PerfEvents};
            use crate::units::EnergyUnit;
            use perf_event_open_sys::bindings::{PERF_COUNT_SW_CPU_CLOCK, PERF_TYPE_SOFTWARE};
            // One event per package, on its first CPU, as the RAPL PMU lists them
            // (software events exist on every Linux: the real kernel's topology).
            let topo = crate::topology::Topology::read(&SysRoot::default())?;
            let specs = topo
                .packages()
                .into_iter()
                .filter_map(|p| {
                    let cpu = topo.first_cpu(p)?;
                    Some(EventSpec::new(
                        DomainId::new(p.0, Domain::Package),
                        PERF_TYPE_SOFTWARE,
                        PERF_COUNT_SW_CPU_CLOCK as u64,
                        cpu,
                        EnergyUnit::Microjoule,
                    ))
                })
                .collect();
            Ok(Box::new(PerfEvents::from_specs(specs)?))
        }
        QuietwattSource::PreadStandIn => Ok(Box::new(crate::bench::StandIn::open(
            &SysRoot::default(),
            2,
        )?)),
    }
}

/// Energy of everything the machine's RAPL sees over a run: two reads of the best
/// source, around it (`None` where no source opens).
fn energy_meter(root: &SysRoot) -> Option<Meter> {
    let mut meter = Meter::new(source::open(root, None, &Selection::all()).ok()?);
    meter.sample().ok()?;
    Some(meter)
}

impl Executor for ProcessExecutor {
    fn run(&mut self, plan: &Plan, slot: &Slot) -> Measurement {
        let mut m = Measurement {
            ok: true,
            started_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            ..Measurement::default()
        };
        let workload = &plan.workloads[slot.combo.workload];
        let mut wp = match self.workload_process(workload) {
            Ok(w) => w,
            Err(e) => {
                m.ok = false;
                m.error = Some(format!("cannot prepare the workload's files: {e}"));
                return m;
            }
        };
        let mut energy = energy_meter(&self.root);
        let idle = IdleSnapshot::now();
        match (&plan.monitors[slot.combo.monitor], slot.combo.freq) {
            (Monitor::None, _) | (_, None) => self.run_plain(&mut m, &mut wp),
            (Monitor::Quietwatt(src), Some(f)) => self.run_quietwatt(&mut m, &mut wp, *src, f),
            (Monitor::Shell { command, .. }, Some(f)) => {
                self.run_shell_monitor(&mut m, &mut wp, command, f)
            }
        }
        let (frac, cstates) = idle.since();
        m.proc_idle_frac = frac;
        m.cstates = cstates;
        if let Some(meter) = energy.as_mut() {
            if meter.sample().is_ok() {
                let report = meter.report();
                m.energy_j = report.total_energy_j.map(|j| j.0);
                m.energy_s = Some(report.duration_s);
            }
        }
        m
    }
}

// ---------------------------------------------------------------------------
// Analysis.

/// One line of the statistics table: a combination against its workload's baseline.
#[derive(Debug, Clone)]
pub struct ReportRow {
    /// Workload label.
    pub workload: String,
    /// Monitor label.
    pub monitor: String,
    /// Frequency, hertz.
    pub freq_hz: f64,
    /// Failed runs of this combination (left out).
    pub failed: usize,
    /// The comparison of workload times with the baseline's.
    pub comparison: Comparison,
    /// Holm-adjusted p-value over the whole table.
    pub adjusted_p: Option<f64>,
    /// Median monitor CPU time per run, seconds.
    pub monitor_cpu_s: Option<f64>,
    /// Median monitor wake-ups per run.
    pub monitor_wakeups: Option<f64>,
}

/// A figure of a run that the analysis compares with the baseline's.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// What it is, for table titles: `workload time`.
    pub name: &'static str,
    /// Its unit, for column heads: `s`.
    pub unit: &'static str,
    /// Reads it from a run (`None`: not measured there).
    pub get: fn(&Measurement) -> Option<f64>,
}

/// The workload's own time: the paper's running time (Appendix A).
pub const WORKLOAD_TIME: Metric = Metric {
    name: "workload time",
    unit: "s",
    get: |m| m.workload_s,
};

/// The busy fraction of the CPUs over the run, `1 - idle` of `/proc/stat`: what a
/// monitor takes from an idle machine (the C0 share of paper 002, Fig. 12).
pub const BUSY_FRACTION: Metric = Metric {
    name: "busy CPU fraction (1 - /proc/stat idle)",
    unit: "fraction",
    get: |m| m.proc_idle_frac.map(|i| 1.0 - i),
};

/// Mean power over the run from the energy read around it (paper 002, Appendix B).
pub const POWER: Metric = Metric {
    name: "mean power",
    unit: "W",
    get: |m| match (m.energy_j, m.energy_s) {
        (Some(e), Some(t)) if t > 0.0 => Some(e / t),
        _ => None,
    },
};

/// Whether a workload label names the built-in idle workload.
pub fn is_idle(label: &str) -> bool {
    label.starts_with("idle:")
}

/// [`analyze_metric`] of [`WORKLOAD_TIME`] over every workload.
pub fn analyze(records: &[RunRecord]) -> Vec<ReportRow> {
    analyze_metric(records, &WORKLOAD_TIME, |_| true)
}

/// The statistics of a results file: for each monitored combination of the
/// workloads `keep` accepts, `metric` against the same workload's baseline
/// (one-sided, "the monitor raises it": slower, busier, more power),
/// with Holm's adjustment over every test of the table (the paper adjusts over its
/// whole table: an adjusted p of 0.22 from a raw p below 0.01 needs more than 5
/// tests in the family). Baseline runs of a workload are compared with nothing.
pub fn analyze_metric(
    records: &[RunRecord],
    metric: &Metric,
    keep: impl Fn(&str) -> bool,
) -> Vec<ReportRow> {
    // Combinations in order of first appearance in the file, by workload.
    let mut keys: Vec<(String, String, String)> = Vec::new();
    for r in records {
        let k = (
            r.key.workload.clone(),
            r.key.monitor.clone(),
            r.key.freq_hz.clone(),
        );
        if !keys.contains(&k) && keep(&k.0) {
            keys.push(k);
        }
    }
    let workloads: Vec<String> = {
        let mut w: Vec<String> = Vec::new();
        for (a, _, _) in &keys {
            if !w.contains(a) {
                w.push(a.clone());
            }
        }
        w
    };
    let times = |w: &str, mon: &str, f: &str| -> (Vec<f64>, usize) {
        let rs: Vec<&RunRecord> = records
            .iter()
            .filter(|r| r.key.workload == w && r.key.monitor == mon && r.key.freq_hz == f)
            .collect();
        let ok: Vec<f64> = rs
            .iter()
            .filter(|r| r.m.ok)
            .filter_map(|r| (metric.get)(&r.m))
            .collect();
        let failed = rs.iter().filter(|r| !r.m.ok).count();
        (ok, failed)
    };
    let med = |v: Vec<f64>| stats::median(&v);
    let mut rows = Vec::new();
    for w in &workloads {
        let (base, _) = times(w, "none", "0");
        let mut mine: Vec<&(String, String, String)> = keys
            .iter()
            .filter(|(a, m, _)| a == w && m != "none")
            .collect();
        // Monitor by first appearance, frequency ascending.
        mine.sort_by(|a, b| {
            let pos = |m: &str| keys.iter().position(|k| k.1 == m).unwrap_or(0);
            pos(&a.1).cmp(&pos(&b.1)).then(
                a.2.parse::<f64>()
                    .unwrap_or(0.0)
                    .total_cmp(&b.2.parse::<f64>().unwrap_or(0.0)),
            )
        });
        for (_, mon, f) in mine {
            let (x, failed) = times(w, mon, f);
            let of = |get: fn(&Measurement) -> Option<f64>| {
                med(records
                    .iter()
                    .filter(|r| {
                        r.m.ok
                            && r.key.workload == *w
                            && r.key.monitor == *mon
                            && r.key.freq_hz == *f
                    })
                    .filter_map(|r| get(&r.m))
                    .collect())
            };
            rows.push(ReportRow {
                workload: w.clone(),
                monitor: mon.clone(),
                freq_hz: f.parse().unwrap_or(0.0),
                failed,
                comparison: stats::compare(&x, &base),
                adjusted_p: None,
                monitor_cpu_s: of(|m| m.monitor_cpu_s),
                monitor_wakeups: of(|m| m.monitor_wakeups.map(|v| v as f64)),
            });
        }
    }
    let tested: Vec<(usize, f64)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.comparison.test.as_ref().ok().map(|t| (i, t.p_value)))
        .collect();
    let ps: Vec<f64> = tested.iter().map(|&(_, p)| p).collect();
    if let Ok(adj) = stats::holm(&ps) {
        for (&(i, _), a) in tested.iter().zip(adj) {
            rows[i].adjusted_p = Some(a);
        }
    }
    rows
}

fn fmt_p(p: f64) -> String {
    if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

/// The Appendix A table of `rows` (one metric), in Markdown.
pub fn table_markdown(rows: &[ReportRow], metric: &Metric) -> String {
    let mut s = String::new();
    s.push_str(&format!("| workload | monitor | freq (Hz) | runs (kept / baseline) | median ({u}) | p-value | adj. p | shift ({u}) [95 % CI] | relative % [95 % CI] | monitor CPU (ms) | wake-ups |\n", u = metric.unit));
    s.push_str("|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|\n");
    for r in rows {
        let c = &r.comparison;
        let (p, adj) = match (&c.test, r.adjusted_p) {
            (Ok(t), Some(a)) => (fmt_p(t.p_value), fmt_p(a)),
            (Ok(t), None) => (fmt_p(t.p_value), "-".into()),
            (Err(e), _) => (e.to_string(), "-".into()),
        };
        let shift = match &c.shift {
            Ok(sh) => format!("{:+.4} [{:+.4}, {:+.4}]", sh.estimate, sh.lower, sh.upper),
            Err(StatsError::TooFewSamples { .. }) => "-".into(),
            Err(e) => e.to_string(),
        };
        let pct = match (c.overhead_pct, c.overhead_ci_pct) {
            (Some(p), Some((lo, hi))) => format!("{p:+.2} [{lo:+.2}, {hi:+.2}]"),
            (Some(p), None) => format!("{p:+.2}"),
            _ => "-".into(),
        };
        s.push_str(&format!(
            "| {} | {} | {} | {} / {}{} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.workload,
            r.monitor,
            r.freq_hz,
            c.n_x,
            c.n_y,
            if r.failed > 0 {
                format!(" ({} failed)", r.failed)
            } else {
                String::new()
            },
            c.median_x.map(|m| format!("{m:.4}")).unwrap_or("-".into()),
            p,
            adj,
            shift,
            pct,
            r.monitor_cpu_s
                .map(|v| format!("{:.2}", v * 1e3))
                .unwrap_or("-".into()),
            r.monitor_wakeups
                .map(|v| format!("{v:.0}"))
                .unwrap_or("-".into()),
        ));
    }
    s
}

/// The table of paper 002's Appendix A, in Markdown, with the protocol above it.
pub fn markdown(rows: &[ReportRow], records: &[RunRecord]) -> String {
    let mut s = String::new();
    let ok = records.iter().filter(|r| r.m.ok).count();
    s.push_str(&format!(
        "Runs: {} ({} ok, {} failed). Outliers: outside [q1 - 3 IQR, q3 + 3 IQR] per combination, dropped. \
Test: one-sided Wilcoxon rank-sum (Mann-Whitney U; alternative: the monitored workload is slower), \
exact without ties when a group has 8 runs or fewer, else normal approximation with tie and continuity correction; \
{}. \
Shift: Hodges-Lehmann estimate of (monitored - baseline) workload time with its 95 % distribution-free interval; \
overhead: the shift over the baseline median.\n\n",
        records.len(),
        ok,
        records.len() - ok,
        match rows.iter().filter(|r| r.comparison.test.is_ok()).count() {
            0 => "no test could be made, so no p-value is adjusted".to_string(),
            1 => "one test, so its p-value needs no adjustment (Holm-Bonferroni over one test leaves it unchanged)".to_string(),
            n => format!("p-values adjusted by Holm-Bonferroni over the {n} tests of the table"),
        }
    ));
    s.push_str(&table_markdown(rows, &WORKLOAD_TIME));
    let baselines: Vec<String> = {
        let mut b: Vec<String> = Vec::new();
        for r in records.iter().filter(|r| r.key.monitor == "none") {
            if !b.contains(&r.key.workload) {
                b.push(r.key.workload.clone());
            }
        }
        b
    };
    s.push('\n');
    for w in baselines {
        let v: Vec<f64> = records
            .iter()
            .filter(|r| r.m.ok && r.key.workload == w && r.key.monitor == "none")
            .filter_map(|r| r.m.workload_s)
            .collect();
        s.push_str(&format!(
            "Baseline {w}: {} runs, median {} s.\n",
            v.len(),
            stats::median(&v)
                .map(|m| format!("{m:.4}"))
                .unwrap_or("-".into())
        ));
    }
    let failed: Vec<&RunRecord> = records.iter().filter(|r| !r.m.ok).collect();
    if !failed.is_empty() {
        s.push_str("\nFailed runs:\n\n");
        for r in failed.iter().take(20) {
            s.push_str(&format!(
                "- {} / {} @ {} Hz, rep {}: {}\n",
                r.key.workload,
                r.key.monitor,
                r.key.freq_hz,
                r.key.rep,
                r.m.error.as_deref().unwrap_or("(no message)")
            ));
        }
        if failed.len() > 20 {
            s.push_str(&format!("- ... and {} more\n", failed.len() - 20));
        }
    }
    s
}

/// The idle part of a report (paper 002, Appendix B and Fig. 11 to 13): for the
/// built-in idle workloads, the busy CPU fraction and, where energy was read, the
/// mean power, each against the baseline by the same test (alternative: the
/// monitor raises it), Holm-adjusted within its table. `None` without idle runs.
pub fn idle_markdown(records: &[RunRecord]) -> Option<String> {
    if !records.iter().any(|r| is_idle(&r.key.workload)) {
        return None;
    }
    let mut s = String::new();
    for metric in [BUSY_FRACTION, POWER] {
        let has = records
            .iter()
            .any(|r| is_idle(&r.key.workload) && (metric.get)(&r.m).is_some());
        if !has {
            s.push_str(&format!(
                "No {} in the idle runs (no energy source opened, or no /proc/stat).\n\n",
                metric.name
            ));
            continue;
        }
        let rows = analyze_metric(records, &metric, is_idle);
        s.push_str(&format!(
            "Idle runs, {} ({}):\n\n",
            metric.name, metric.unit
        ));
        s.push_str(&table_markdown(&rows, &metric));
        s.push('\n');
    }
    Some(s)
}

/// The medians per frequency of one metric, per monitor, for one workload, with
/// the baseline's median.
fn by_frequency(
    records: &[RunRecord],
    workload: &str,
    get: impl Fn(&Measurement) -> Option<f64>,
) -> (Vec<crate::lab::plot::Line>, Option<f64>) {
    let mut monitors: Vec<String> = Vec::new();
    for r in records.iter().filter(|r| r.key.workload == workload) {
        if r.key.monitor != "none" && !monitors.contains(&r.key.monitor) {
            monitors.push(r.key.monitor.clone());
        }
    }
    let values = |mon: &str, f: &str| -> Vec<f64> {
        records
            .iter()
            .filter(|r| {
                r.m.ok && r.key.workload == workload && r.key.monitor == mon && r.key.freq_hz == f
            })
            .filter_map(|r| get(&r.m))
            .collect()
    };
    let lines = monitors
        .iter()
        .map(|mon| {
            let mut freqs: Vec<&str> = Vec::new();
            for r in records
                .iter()
                .filter(|r| r.key.workload == workload && &r.key.monitor == mon)
            {
                if !freqs.contains(&r.key.freq_hz.as_str()) {
                    freqs.push(&r.key.freq_hz);
                }
            }
            crate::lab::plot::Line {
                label: mon.clone(),
                points: freqs
                    .iter()
                    .filter_map(|f| Some((f.parse().ok()?, stats::median(&values(mon, f))?)))
                    .collect(),
            }
        })
        .collect();
    (lines, stats::median(&values("none", "0")))
}

/// The C-state residencies of a run, by state name.
fn cstate_values(m: &Measurement) -> Vec<(String, f64)> {
    m.cstates
        .as_deref()
        .unwrap_or("")
        .split(';')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// Plots of the idle workloads against the sampling frequency (paper 002, Fig. 11
/// to 13): busy CPU fraction, C-state residency (one line per monitor and state),
/// and mean power where energy was read. Returns (file stem, SVG).
pub fn idle_plots(records: &[RunRecord]) -> Vec<(String, String)> {
    use crate::lab::plot::lines_svg;
    let mut workloads: Vec<String> = Vec::new();
    for r in records.iter().filter(|r| is_idle(&r.key.workload)) {
        if !workloads.contains(&r.key.workload) {
            workloads.push(r.key.workload.clone());
        }
    }
    let mut out = Vec::new();
    for w in workloads {
        let slug = file_slug(&w);
        for (stem, metric) in [("busy", BUSY_FRACTION), ("power", POWER)] {
            let (lines, base) = by_frequency(records, &w, metric.get);
            if lines.iter().all(|l| l.points.is_empty()) {
                continue;
            }
            let refs: Vec<(String, f64)> = base
                .map(|b| ("none (baseline)".to_string(), b))
                .into_iter()
                .collect();
            out.push((
                format!("{stem}-{slug}"),
                lines_svg(
                    &format!("{w}: {} against sampling frequency", metric.name),
                    "sampling frequency (Hz)",
                    &format!("median {} ({})", metric.name, metric.unit),
                    &lines,
                    &refs,
                ),
            ));
        }
        let mut states: Vec<String> = Vec::new();
        for r in records.iter().filter(|r| r.key.workload == w) {
            for (k, _) in cstate_values(&r.m) {
                if !states.contains(&k) {
                    states.push(k);
                }
            }
        }
        let mut lines = Vec::new();
        let mut refs = Vec::new();
        for st in &states {
            let get = |m: &Measurement| {
                cstate_values(m)
                    .into_iter()
                    .find(|(k, _)| k == st)
                    .map(|(_, v)| v)
            };
            let (ls, base) = by_frequency(records, &w, get);
            for mut l in ls {
                l.label = format!("{} {st}", l.label);
                lines.push(l);
            }
            if let Some(b) = base {
                refs.push((format!("none {st}"), b));
            }
        }
        if lines.iter().any(|l| !l.points.is_empty()) {
            out.push((
                format!("cstates-{slug}"),
                lines_svg(
                    &format!("{w}: C-state residency against sampling frequency"),
                    "sampling frequency (Hz)",
                    "median residency (fraction of CPU time)",
                    &lines,
                    &refs,
                ),
            ));
        }
    }
    out
}

/// A file name from a label: letters, digits, `-`, `_` and `.` kept, the rest `_`.
pub fn file_slug(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One box plot per workload of its run times: the baseline first, then each
/// monitor at each frequency in the order of [`analyze`] (paper 002, Fig. 7 and
/// 8). Returns (workload label, SVG document).
pub fn boxplots(records: &[RunRecord]) -> Vec<(String, String)> {
    let rows = analyze(records);
    let mut workloads: Vec<String> = Vec::new();
    for r in records {
        if !workloads.contains(&r.key.workload) {
            workloads.push(r.key.workload.clone());
        }
    }
    let times = |w: &str, mon: &str, f: &str| -> Vec<f64> {
        records
            .iter()
            .filter(|r| r.m.ok && r.key.workload == w && r.key.monitor == mon && r.key.freq_hz == f)
            .filter_map(|r| r.m.workload_s)
            .collect()
    };
    workloads
        .into_iter()
        .map(|w| {
            let mut series = vec![crate::lab::plot::Series {
                label: "none (baseline)".into(),
                values: times(&w, "none", "0"),
            }];
            for r in rows.iter().filter(|r| r.workload == w) {
                series.push(crate::lab::plot::Series {
                    label: format!("{} {} Hz", r.monitor, r.freq_hz),
                    values: times(&w, &r.monitor, &freq_text(Some(r.freq_hz))),
                });
            }
            let svg = crate::lab::plot::boxplot_svg(
                &format!("{w}: run time per monitor and frequency"),
                "workload time (s)",
                &series,
            );
            (w, svg)
        })
        .collect()
}

/// A built-in workload for the plan from `KIND[:SIZE]`.
pub fn parse_builtin(s: &str, threads: usize) -> Result<Workload, String> {
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
    Ok(Workload::builtin(workload::Spec {
        kind,
        size: size.unwrap_or(kind.default_size()),
        threads,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_without_tests_says_none_was_made() {
        let md = markdown(&[], &[]);
        assert!(md.contains("no test could be made"), "{md}");
        assert!(!md.contains("over the 0 tests"), "{md}");
    }

    fn plan(reps: usize, per_round: usize) -> Plan {
        Plan::new(
            vec![
                Workload::builtin(workload::Spec {
                    kind: Kind::Ep,
                    size: 10,
                    threads: 1,
                }),
                Workload::builtin(workload::Spec {
                    kind: Kind::Idle,
                    size: 1,
                    threads: 1,
                }),
            ],
            vec![Monitor::Quietwatt(QuietwattSource::PerfStandIn)],
            vec![10.0, 100.0],
            reps,
            per_round,
            7,
        )
        .unwrap()
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

    #[test]
    fn csv_rows_round_trip_with_awkward_text() {
        let r = RunRecord {
            seq: 3,
            round: 1,
            key: RunKey {
                workload: "my, \"odd\" workload".into(),
                monitor: "none".into(),
                freq_hz: "0".into(),
                rep: 2,
            },
            m: Measurement {
                ok: false,
                workload_s: Some(1.25),
                monitor_wakeups: Some(7),
                cstates: Some("C1=0.5;C2=0.25".into()),
                started_unix_s: 1.5,
                error: Some("line one\nline two, with comma".into()),
                ..Measurement::default()
            },
        };
        let line = r.to_csv();
        assert_eq!(line.matches('\n').count(), 1, "{line}");
        let (rows, complete) = parse_csv(&line);
        assert_eq!(complete, line.len());
        let back = RunRecord::from_fields(&rows[0]).unwrap();
        let mut want = r.clone();
        want.m.error = Some("line one | line two, with comma".into());
        assert_eq!(back, want);
        // A half-written line is not a row.
        let (rows, complete) = parse_csv(&format!("{line}4,1,ep"));
        assert_eq!((rows.len(), complete), (1, line.len()));
    }

    /// An executor that records what it was asked and fails one combination.
    struct Fake {
        calls: Vec<RunKey>,
    }

    impl Executor for Fake {
        fn run(&mut self, plan: &Plan, slot: &Slot) -> Measurement {
            let key = plan.key(slot);
            self.calls.push(key.clone());
            let base = if key.workload.starts_with("ep") {
                1.0
            } else {
                0.1
            };
            let slower = if key.monitor == "none" { 0.0 } else { 0.01 };
            Measurement {
                ok: true,
                workload_s: Some(base + slower + slot.rep as f64 * 1e-4),
                ..Measurement::default()
            }
        }
    }

    #[test]
    fn a_plan_resumes_after_an_interruption_and_runs_each_slot_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.csv");
        let p = plan(5, 1);
        let total = p.schedule().len();
        // First session: 7 runs, then "killed" (the file is cut in the middle of
        // the 8th line).
        {
            let mut res = Results::open(&path).unwrap();
            let mut fake = Fake { calls: vec![] };
            execute(
                &p,
                &mut res,
                &mut fake,
                &AtomicBool::new(false),
                &mut |_| {},
            )
            .unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let cut: usize = text.match_indices('\n').nth(7).unwrap().0 + 1;
        std::fs::write(&path, format!("{}8,0,ep:10", &text[..cut])).unwrap();
        let mut res = Results::open(&path).unwrap();
        assert_eq!(res.records.len(), 7);
        let mut fake = Fake { calls: vec![] };
        let mut last = None;
        let ex = execute(
            &p,
            &mut res,
            &mut fake,
            &AtomicBool::new(false),
            &mut |pr| last = Some(pr.clone()),
        )
        .unwrap();
        assert_eq!((ex.done, ex.skipped, ex.interrupted), (total - 7, 7, false));
        assert_eq!(fake.calls.len(), total - 7);
        let last = last.unwrap();
        assert_eq!(
            (last.done, last.todo, last.skipped),
            (total - 7, total - 7, 7)
        );
        assert_eq!(last.eta, Duration::ZERO);
        // Every slot exactly once in the file, which parses whole again.
        let res = Results::open(&path).unwrap();
        let mut keys: Vec<RunKey> = res.records.iter().map(|r| r.key.clone()).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), total);
        assert_eq!(res.records.len(), total);
        // A third session has nothing to do.
        let mut res = Results::open(&path).unwrap();
        let mut fake = Fake { calls: vec![] };
        let ex = execute(
            &p,
            &mut res,
            &mut fake,
            &AtomicBool::new(false),
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(ex.done, 0);
        // The analysis: one row per monitored combination, a clear slowdown found.
        let rows = analyze(&res.records);
        assert_eq!(rows.len(), 4);
        for r in &rows {
            let t = r.comparison.test.as_ref().unwrap();
            assert!(t.p_value < 0.01, "{r:?}");
            assert!(r.adjusted_p.unwrap() >= t.p_value);
            assert!(r.comparison.overhead_pct.unwrap() > 0.0);
        }
        let md = markdown(&rows, &res.records);
        assert!(
            md.contains("| ep:10:t1 | quietwatt:perf-stand-in | 10 |"),
            "{md}"
        );
        let plots = boxplots(&res.records);
        assert_eq!(plots.len(), 2);
        for (_, svg) in &plots {
            assert_eq!(svg.matches("<g class=\"series\"").count(), 3, "{svg}");
            assert!(svg.contains("data-label=\"quietwatt:perf-stand-in 100 Hz\" data-n=\"5\""));
        }
    }

    /// Raises the stop flag during its third run, as Ctrl-C would.
    struct Interrupted<'a> {
        calls: usize,
        stop: &'a AtomicBool,
    }

    impl Executor for Interrupted<'_> {
        fn run(&mut self, _: &Plan, _: &Slot) -> Measurement {
            self.calls += 1;
            if self.calls == 3 {
                self.stop.store(true, Ordering::Relaxed);
            }
            Measurement {
                ok: true,
                workload_s: Some(1.0),
                ..Measurement::default()
            }
        }
    }

    #[test]
    fn a_stop_keeps_finished_runs_and_drops_the_one_cut_short() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.csv");
        let p = plan(2, 1);
        let stop = AtomicBool::new(false);
        let mut res = Results::open(&path).unwrap();
        let mut ex = Interrupted {
            calls: 0,
            stop: &stop,
        };
        let e = execute(&p, &mut res, &mut ex, &stop, &mut |_| {}).unwrap();
        assert_eq!((e.done, e.interrupted), (2, true));
        assert_eq!(Results::open(&path).unwrap().records.len(), 2);
    }

    #[test]
    fn idle_runs_get_their_own_tables_and_plots() {
        let mk = |mon: &str, f: &str, rep: usize, idle: f64, energy: Option<f64>| RunRecord {
            seq: rep,
            round: rep,
            key: RunKey {
                workload: "idle:10:t1".into(),
                monitor: mon.into(),
                freq_hz: f.into(),
                rep,
            },
            m: Measurement {
                ok: true,
                workload_s: Some(0.01),
                wall_s: Some(0.02),
                energy_j: energy,
                energy_s: energy.map(|_| 0.02),
                proc_idle_frac: Some(idle),
                cstates: Some(format!("C1={:.3};C6={:.3}", 1.0 - idle, idle)),
                ..Measurement::default()
            },
        };
        let mut recs = Vec::new();
        for i in 0..5 {
            let e = i as f64 * 1e-4;
            recs.push(mk("none", "0", i, 0.98 - e, None));
            recs.push(mk("m", "10", i, 0.97 - e, None));
            recs.push(mk("m", "1000", i, 0.90 - e, None));
        }
        let md = idle_markdown(&recs).expect("idle runs");
        assert!(md.contains("busy CPU fraction"), "{md}");
        assert!(md.contains("No mean power"), "{md}");
        assert!(md.contains("| idle:10:t1 | m | 1000 | 5 / 5 |"), "{md}");
        let plots = idle_plots(&recs);
        let names: Vec<&str> = plots.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["busy-idle_10_t1", "cstates-idle_10_t1"]);
        assert!(
            plots[1].1.contains("data-label=\"m C6\" data-n=\"2\""),
            "{}",
            plots[1].1
        );
        assert!(idle_markdown(&recs[..0]).is_none());
    }

    #[test]
    fn a_foreign_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.csv");
        std::fs::write(&path, "a,b\n1,2\n").unwrap();
        assert!(matches!(
            Results::open(&path),
            Err(ExperimentError::Incompatible { .. })
        ));
    }

    #[test]
    fn too_few_runs_say_so_in_the_table() {
        let mk = |mon: &str, f: &str, rep: usize, t: f64| RunRecord {
            seq: rep,
            round: rep,
            key: RunKey {
                workload: "w".into(),
                monitor: mon.into(),
                freq_hz: f.into(),
                rep,
            },
            m: Measurement {
                ok: true,
                workload_s: Some(t),
                ..Measurement::default()
            },
        };
        let recs: Vec<RunRecord> = (0..3)
            .flat_map(|i| [mk("none", "0", i, 1.0 + i as f64), mk("m", "10", i, 2.0)])
            .collect();
        let rows = analyze(&recs);
        assert_eq!(rows.len(), 1);
        let md = markdown(&rows, &recs);
        assert!(md.contains("too few samples"), "{md}");
        assert!(!md.contains("NaN"), "{md}");
    }
}
