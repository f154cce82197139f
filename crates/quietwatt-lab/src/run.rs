//! Running a plan: [`execute`] walks the schedule, skips the runs the results
//! file has, and appends each new run as it ends; an [`Executor`] runs one slot.
//! [`ProcessExecutor`] is the real one: the workload as a child process, the
//! monitor around it (quietwatt's engine in this process, or another process the
//! caller described), energy and idleness read around both.
//!
//! The lab runs only what it is given: a [`QuietwattSource`] it opens through the
//! library, or a command the caller built. It never starts quietwatt's own
//! executable by its command line: the CLI knows that, and hands it over as a
//! command.

use crate::os::{children_rusage, rusage_figures, status_text, wait4, IdleSnapshot};
use crate::plan::{
    ExperimentError, Monitor, Plan, QuietwattSource, RunKey, Slot, Workload, WorkloadCommand,
};
use crate::results::{Measurement, Results, RunRecord};
use quietwatt::meter::Meter;
use quietwatt::record::EngineConfig;
use quietwatt::root::SysRoot;
use quietwatt::sampler::Rate;
use quietwatt::source::{self, Selection, Source};
use quietwatt::ticker::Hertz;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

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
    pub fn new(root: SysRoot) -> ProcessExecutor {
        ProcessExecutor {
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
    /// Whether a run without a printed solve time failed.
    solve_time_required: bool,
    out: Captured,
    err: Captured,
}

/// What a child writes to one of its outputs, kept in an anonymous temporary
/// file (gone with the last descriptor, so that a killed lab leaves nothing).
struct Captured {
    file: File,
}

impl Captured {
    fn new() -> io::Result<Captured> {
        Ok(Captured {
            file: tempfile::tempfile()?,
        })
    }

    /// A descriptor of the file for the child's output.
    fn for_child(&self) -> io::Result<File> {
        self.file.try_clone()
    }

    /// Everything written (empty when it cannot be read: the text only completes
    /// a message).
    fn bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        // The child's descriptor shares the file offset: read from the start.
        let mut f = &self.file;
        let _ = f
            .seek(SeekFrom::Start(0))
            .and_then(|_| f.read_to_end(&mut bytes));
        bytes
    }

    /// Everything written, as text.
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes()).into_owned()
    }

    /// The last `max` bytes, as trimmed text.
    fn tail(&self, max: usize) -> String {
        let bytes = self.bytes();
        let from = bytes.len().saturating_sub(max);
        String::from_utf8_lossy(&bytes[from..]).trim().to_string()
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
        let (mut cmd, solve_time_required) = match &w.command {
            WorkloadCommand::Process {
                make,
                solve_time_required,
            } => (make.build(()), *solve_time_required),
            WorkloadCommand::Shell(s) => (shell(s), false),
        };
        let out = Captured::new()?;
        let err = Captured::new()?;
        cmd.stdin(Stdio::null())
            .stdout(out.for_child()?)
            .stderr(err.for_child()?);
        Ok(WorkloadProcess {
            cmd,
            solve_time_required,
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
            None => match wp.solve_time_required {
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
        match quietwatt::command::measure(&mut meter, &mut wp.cmd, &config) {
            Ok(mc) => {
                let wall = t0.elapsed();
                let cpu = rusage_figures(&children_rusage()).0 - rusage_figures(&before).0;
                let o = mc.measurement.overhead.clone().unwrap_or_default();
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

    /// Runs the workload under a monitor in its own process: `cmd` (described by
    /// `command` in messages) starts, gets `settle` to fail, watches the workload,
    /// then gets SIGINT and `grace` to exit before SIGKILL. Its stdin and stdout
    /// are /dev/null and its stderr is kept for the message of a failure, whatever
    /// the caller set: the lab needs them so.
    fn run_command_monitor(
        &self,
        m: &mut Measurement,
        wp: &mut WorkloadProcess,
        mut cmd: Command,
        command: &str,
    ) {
        let err = match Captured::new() {
            Ok(t) => t,
            Err(e) => {
                m.ok = false;
                m.error = Some(format!(
                    "cannot create a file for the monitor's stderr: {e}"
                ));
                return;
            }
        };
        let spawned = err.for_child().and_then(|f| {
            cmd.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(f)
                // Its own process group: the stop signal reaches what it started
                // (what `sh` forked, for a shell monitor).
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
pub fn open_monitor_source(
    root: &SysRoot,
    src: QuietwattSource,
) -> quietwatt::Result<Box<dyn Source>> {
    match src {
        QuietwattSource::Mechanism(m) => Ok(source::open(root, Some(m), &Selection::all())?),
        QuietwattSource::PerfStandIn => {
            use perf_event_open_sys::bindings::{PERF_COUNT_SW_CPU_CLOCK, PERF_TYPE_SOFTWARE};
            use quietwatt::domain::{Domain, DomainId};
            use quietwatt::source::perf::{EventSpec, PerfEvents};
            use quietwatt::units::EnergyUnit;
            // One event per package, on its first CPU, as the RAPL PMU lists them
            // (software events exist on every Linux: the real kernel's topology).
            let topo = quietwatt::topology::Topology::read(&SysRoot::default())?;
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
                let command = with_frequency(command, f);
                self.run_command_monitor(&mut m, &mut wp, shell(&command), &command);
            }
            (Monitor::Command { make, .. }, Some(f)) => {
                let cmd = make.build(f);
                let command = command_line(&cmd);
                self.run_command_monitor(&mut m, &mut wp, cmd, &command);
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

/// `sh -c COMMAND`.
fn shell(command: &str) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c").arg(command);
    c
}

/// A shell monitor's command with `{hz}`, `{interval_ms}` and `{interval_s}`
/// replaced by the frequency.
fn with_frequency(command: &str, freq: f64) -> String {
    command
        .replace("{hz}", &freq.to_string())
        .replace("{interval_ms}", &(1000.0 / freq).to_string())
        .replace("{interval_s}", &(1.0 / freq).to_string())
}

/// A command as a person would type it, for messages: the program and its
/// arguments, separated by spaces.
fn command_line(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{test_plan as plan, CommandFactory};

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

    /// `sh -c SCRIPT` as a workload factory.
    fn sh(script: &'static str) -> CommandFactory {
        CommandFactory::new(move |()| shell(script))
    }

    /// Runs every slot of a one-repetition plan of `workloads` × `monitor` at
    /// 10 Hz for real, monitored runs only.
    fn run_monitored(workloads: Vec<Workload>, monitor: Monitor) -> Vec<(RunKey, Measurement)> {
        let plan = Plan::new(workloads, vec![monitor], vec![10.0], 1, 1, 1).unwrap();
        let mut ex = ProcessExecutor::new(SysRoot::default());
        // Long enough for a process to start; a monitor that dies at once has died
        // by then. Nothing below depends on how fast the machine is.
        ex.settle = Duration::from_millis(50);
        plan.schedule()
            .iter()
            .filter(|s| s.combo.freq.is_some())
            .map(|s| (plan.key(s), ex.run(&plan, s)))
            .collect()
    }

    #[test]
    fn a_command_monitor_is_built_for_its_frequency_and_watches_a_command_workload() {
        use std::sync::{Arc, Mutex};
        let asked = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&asked);
        let monitor = Monitor::Command {
            name: "sleeper".into(),
            make: CommandFactory::new(move |hz| {
                seen.lock().unwrap().push(hz);
                let mut c = Command::new("sleep");
                c.arg("30");
                c
            }),
        };
        let runs = run_monitored(
            vec![
                Workload::process("reports", sh(r#"echo '{"solve_s": 0.25}'"#)),
                Workload::process("silent", sh("true")),
                Workload::builtin(
                    &crate::workload::Spec {
                        kind: crate::workload::Kind::Idle,
                        size: 1,
                        threads: 1,
                    },
                    sh("true"),
                ),
            ],
            monitor,
        );
        assert_eq!(*asked.lock().unwrap(), vec![10.0; 3]);
        let of = |w: &str| &runs.iter().find(|(k, _)| k.workload == w).unwrap().1;
        let m = of("reports");
        assert!(m.ok, "{m:?}");
        assert_eq!(m.workload_s, Some(0.25));
        // The monitor was stopped by SIGINT after the workload: its figures are kept.
        assert!(
            m.monitor_cpu_s.is_some() && m.monitor_wakeups.is_some(),
            "{m:?}"
        );
        // A command that prints no solve time is timed by its wall time...
        let m = of("silent");
        assert!(m.ok, "{m:?}");
        assert_eq!(m.workload_s, m.wall_s);
        // ...but a built-in kernel that prints none went wrong.
        let m = of("idle:1:t1");
        assert!(!m.ok, "{m:?}");
        assert!(
            m.error
                .as_deref()
                .unwrap_or("")
                .contains("printed no solve time"),
            "{m:?}"
        );
    }

    #[test]
    fn a_command_monitor_that_dies_at_once_fails_the_run_with_its_words() {
        let monitor = Monitor::Command {
            name: "broken".into(),
            make: CommandFactory::new(|_| {
                let mut c = Command::new("sh");
                c.args(["-c", "echo no such device >&2; exit 3"]);
                c
            }),
        };
        let runs = run_monitored(vec![Workload::process("w", sh("true"))], monitor);
        let m = &runs[0].1;
        assert!(!m.ok, "{m:?}");
        let e = m.error.as_deref().unwrap_or("");
        assert!(
            e.contains("'sh -c echo no such device >&2; exit 3' exited before the workload started (exit code 3): no such device"),
            "{e}"
        );
    }
}
