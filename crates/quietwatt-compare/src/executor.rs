//! Running one command once: the [`Executor`] trait, the real [`MeterExecutor`]
//! and the [`MockExecutor`] that the scheduler's tests use instead of processes.

use quietwatt::command::{self, ChildEvent};
use quietwatt::{source, EngineConfig, Mechanism, Meter, Selection, SysRoot};
use serde::Serialize;
use std::process::{Command, Stdio};

/// One domain's energy in one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainRun {
    /// The package.
    pub socket: u32,
    /// The domain's name (`package`, `dram`, ...).
    pub domain: String,
    /// Energy, joules.
    pub energy_j: f64,
    /// Its `±` bound, joules.
    pub uncertainty_j: f64,
}

/// One measured run of one command.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Run {
    /// The command's exit code (128 + the signal that ended it).
    pub exit_code: i32,
    /// Seconds measured.
    pub duration_s: f64,
    /// The total, joules, where the domains can be totalled.
    pub total_energy_j: Option<f64>,
    /// The total's `±` bound, joules.
    pub total_uncertainty_j: Option<f64>,
    /// Each domain's energy, in the meter's order.
    pub domains: Vec<DomainRun>,
    /// What the measurement warned about (the caller words them); not exported.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

impl Run {
    /// The total with its bound, where both are known.
    pub fn total(&self) -> Option<(f64, f64)> {
        self.total_energy_j.zip(self.total_uncertainty_j)
    }
}

/// Runs command number `command` of a comparison once. The scheduler decides
/// which command runs when; an executor only runs it.
pub trait Executor {
    /// What can go wrong running a command (not its non-zero exit, which is in
    /// the [`Run`] or the returned code).
    type Error;

    /// Runs the command once, unmeasured (a warm-up); its exit code.
    fn warm_up(&mut self, command: usize) -> Result<i32, Self::Error>;

    /// Runs the command once, measured.
    fn measure(&mut self, command: usize) -> Result<Run, Self::Error>;
}

/// A command line to spawn: the program, its arguments, and whether its output
/// is discarded (as hyperfine does by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Send its stdout and stderr to /dev/null.
    pub quiet: bool,
}

impl Invocation {
    /// `shell -c string`.
    pub fn shell(shell: &str, string: &str, quiet: bool) -> Invocation {
        Invocation {
            program: shell.to_string(),
            args: vec!["-c".to_string(), string.to_string()],
            quiet,
        }
    }

    pub(crate) fn command(&self) -> Command {
        let mut c = Command::new(&self.program);
        c.args(&self.args);
        if self.quiet {
            c.stdout(Stdio::null()).stderr(Stdio::null());
        }
        c
    }
}

/// What can go wrong in [`MeterExecutor`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExecError {
    /// The counters could not be opened, or the command not spawned.
    #[error(transparent)]
    Engine(#[from] quietwatt::Error),
    /// A reading failed mid-run: the run's figures are partial.
    #[error("a run's measurement stopped early: {0}")]
    Stopped(quietwatt::Error),
    /// A profiled run (`compare --profile`) failed: no energy, perf_event
    /// refused (with its fix), the command not started.
    #[error("{0}")]
    Profile(String),
    /// The scheduler asked for a command the executor was not given.
    #[error("no command #{}: the executor was given fewer", .0 + 1)]
    NoCommand(usize),
    /// The command run before each run (`--prepare`) failed.
    #[error("'{command}' exited with code {code}")]
    Prepare {
        /// The prepare command's words.
        command: String,
        /// Its exit code.
        code: i32,
    },
}

/// The real executor: each run on a fresh meter (the same mechanism, domains and
/// rate for all), through the engine's `command::measure_watched`; warm-ups and
/// the prepare command through `command::spawn_and_wait`.
pub struct MeterExecutor<'w> {
    root: SysRoot,
    mechanism: Option<Mechanism>,
    selection: Selection,
    config: EngineConfig,
    commands: Vec<Invocation>,
    prepare: Option<(String, Invocation)>,
    power_model: Option<quietwatt::fallback::ModelChoice>,
    watch: Box<dyn FnMut(ChildEvent) + 'w>,
}

impl std::fmt::Debug for MeterExecutor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MeterExecutor")
            .field("root", &self.root)
            .field("mechanism", &self.mechanism)
            .field("selection", &self.selection)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<'w> MeterExecutor<'w> {
    /// An executor of `commands` measured through `mechanism`'s counters of
    /// `selection` under `root`, at `config`'s rate (settled by the caller: see
    /// [`quietwatt::safe_rate`]). `watch` sees each spawned child (to forward
    /// signals to it).
    pub fn new(
        root: SysRoot,
        mechanism: Option<Mechanism>,
        selection: Selection,
        config: EngineConfig,
        commands: Vec<Invocation>,
        watch: impl FnMut(ChildEvent) + 'w,
    ) -> MeterExecutor<'w> {
        MeterExecutor {
            root,
            mechanism,
            selection,
            config,
            commands,
            prepare: None,
            power_model: None,
            watch: Box::new(watch),
        }
    }

    /// Where nothing can measure, each run estimated by this power model
    /// ([`quietwatt::fallback::instead`]).
    pub fn with_power_model(mut self, model: Option<quietwatt::fallback::ModelChoice>) -> Self {
        self.power_model = model;
        self
    }

    /// Runs `shell -c prepare` (output discarded) before every run, warm-ups too.
    pub fn with_prepare(mut self, shell: &str, prepare: Option<&str>) -> Self {
        self.prepare = prepare.map(|p| (p.to_string(), Invocation::shell(shell, p, true)));
        self
    }

    fn prepare(&mut self) -> Result<(), ExecError> {
        let Some((words, p)) = &self.prepare else {
            return Ok(());
        };
        let status = command::spawn_and_wait(&mut p.command(), &mut *self.watch)?;
        match exit_code(status) {
            0 => Ok(()),
            code => Err(ExecError::Prepare {
                command: words.clone(),
                code,
            }),
        }
    }

    fn invocation(&self, i: usize) -> Result<&Invocation, ExecError> {
        self.commands.get(i).ok_or(ExecError::NoCommand(i))
    }
}

impl Executor for MeterExecutor<'_> {
    type Error = ExecError;

    fn warm_up(&mut self, i: usize) -> Result<i32, ExecError> {
        self.prepare()?;
        let mut c = self.invocation(i)?.command();
        Ok(exit_code(command::spawn_and_wait(
            &mut c,
            &mut *self.watch,
        )?))
    }

    fn measure(&mut self, i: usize) -> Result<Run, ExecError> {
        self.prepare()?;
        let mut c = self.invocation(i)?.command();
        let source = match source::open(&self.root, self.mechanism, &self.selection) {
            Ok(s) => s,
            // Refused here, nothing named: the local reader service, if there is
            // one (quietwatt::reader), a connection per run; else the power
            // model's estimate, if one is given.
            Err(e) if self.mechanism.is_none() => {
                let want = quietwatt::reader::Want {
                    interval: match self.config.rate {
                        quietwatt::Rate::Fixed(f) => Some(f.period()),
                        quietwatt::Rate::Auto { .. } => None,
                    },
                    resolution_uj: None,
                };
                match quietwatt::fallback::instead(
                    &e,
                    &self.selection,
                    want,
                    self.power_model.as_ref(),
                    &self.root,
                ) {
                    Some(Ok(s)) => s,
                    Some(Err(e)) => return Err(quietwatt::Error::from(e).into()),
                    None => return Err(quietwatt::Error::from(e).into()),
                }
            }
            Err(e) => return Err(quietwatt::Error::from(e).into()),
        };
        let mut meter = Meter::new(source);
        let m = command::measure_watched(&mut meter, &mut c, &self.config, &mut *self.watch)?;
        if let Some(e) = m.error {
            return Err(ExecError::Stopped(e));
        }
        Ok(Run::of_energy(exit_code(m.status), &m.measurement.energy))
    }
}

impl Run {
    /// A run that exited with `exit_code`, its figures `r`.
    pub fn of_energy(exit_code: i32, r: &quietwatt::meter::EnergyReport) -> Run {
        Run {
            exit_code,
            duration_s: r.duration_s,
            total_energy_j: r
                .total_energy_j
                .zip(r.total_uncertainty_j)
                .map(|(e, _)| e.0),
            total_uncertainty_j: r
                .total_energy_j
                .zip(r.total_uncertainty_j)
                .map(|(_, u)| u.0),
            domains: r
                .domains
                .iter()
                .map(|d| DomainRun {
                    socket: d.socket,
                    domain: d.domain.to_string(),
                    energy_j: d.energy_j.0,
                    uncertainty_j: d.uncertainty_j.0,
                })
                .collect(),
            warnings: r.warnings.iter().map(ToString::to_string).collect(),
        }
    }
}

/// A process's exit code, or 128 + the signal that ended it (the engine's).
pub use quietwatt::command::exit_code;

/// One scripted run of a [`MockExecutor`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scripted {
    /// Energy, joules.
    pub energy_j: f64,
    /// Its bound, joules.
    pub uncertainty_j: f64,
    /// Seconds.
    pub duration_s: f64,
    /// Exit code.
    pub exit_code: i32,
}

impl Scripted {
    /// A successful run of `energy_j` (bound 0.001 J) in `duration_s`.
    pub fn ok(energy_j: f64, duration_s: f64) -> Scripted {
        Scripted {
            energy_j,
            uncertainty_j: 0.001,
            duration_s,
            exit_code: 0,
        }
    }
}

/// An executor with no process: each command's runs come from its script, in
/// order (cycling when the script is shorter than the runs), as one `package`
/// domain. It logs every call, so that a test can see the order the scheduler
/// chose and which runs were warm-ups.
#[derive(Debug, Clone, Default)]
pub struct MockExecutor {
    scripts: Vec<Vec<Scripted>>,
    next: Vec<usize>,
    /// Every call, in order: `(warm-up?, command)`.
    pub calls: Vec<(bool, usize)>,
}

impl MockExecutor {
    /// An executor whose command `i` measures `scripts[i]`'s runs in turn.
    pub fn new(scripts: Vec<Vec<Scripted>>) -> MockExecutor {
        let next = vec![0; scripts.len()];
        MockExecutor {
            scripts,
            next,
            calls: Vec::new(),
        }
    }

    fn take(&mut self, i: usize) -> Result<Scripted, MockError> {
        let script = self
            .scripts
            .get(i)
            .filter(|s| !s.is_empty())
            .ok_or(MockError(i))?;
        let s = script[self.next[i] % script.len()];
        self.next[i] += 1;
        Ok(s)
    }
}

/// A [`MockExecutor`] asked for a command it has no script for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no script for command #{}", .0 + 1)]
pub struct MockError(pub usize);

impl Executor for MockExecutor {
    type Error = MockError;

    fn warm_up(&mut self, i: usize) -> Result<i32, MockError> {
        self.calls.push((true, i));
        // A warm-up consumes no scripted run: the measured runs are the script's.
        let script = self
            .scripts
            .get(i)
            .filter(|s| !s.is_empty())
            .ok_or(MockError(i))?;
        Ok(script[0].exit_code)
    }

    fn measure(&mut self, i: usize) -> Result<Run, MockError> {
        self.calls.push((false, i));
        let s = self.take(i)?;
        Ok(Run {
            exit_code: s.exit_code,
            duration_s: s.duration_s,
            total_energy_j: Some(s.energy_j),
            total_uncertainty_j: Some(s.uncertainty_j),
            domains: vec![DomainRun {
                socket: 0,
                domain: "package".to_string(),
                energy_j: s.energy_j,
                uncertainty_j: s.uncertainty_j,
            }],
            warnings: Vec::new(),
        })
    }
}
