//! `quietwatt.profile()`: this process's call stacks sampled while a block runs,
//! each package interval's energy split among them, by the same library as
//! `quietwatt profile` (`quietwatt_profile::run_profile` with
//! `Workload::Process`). It returns `profile --json`'s document and writes the
//! same files.

use crate::errors::{bad_argument, raise, to_py};
use crate::session::parse_mechanism;
use pyo3::prelude::*;
use quietwatt::document::Document;
use quietwatt::SysRoot;
use quietwatt_profile::{
    Format, Hooks, IdlePower, NamedStacks, Options, ProfileDocument, ProfileError, ProfileOutcome,
    ProfileRun, RunError, SymbolOptions, Target, Workload,
};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::SystemTime;

/// How many functions the document lists.
const TOP: usize = 20;

/// The profile's thread: the outcome and its stacks named there (the
/// symbolizer stays on the thread that made it).
type Running = JoinHandle<Result<(ProfileOutcome, NamedStacks), RunError>>;

/// A profile of this process that is running (between `__enter__` and
/// `__exit__`).
#[pyclass(module = "quietwatt._quietwatt", frozen)]
pub struct Profiler {
    stop: Arc<AtomicBool>,
    running: Mutex<Option<Running>>,
    started: SystemTime,
    emulated: bool,
    output: Option<(PathBuf, Format)>,
}

impl std::fmt::Debug for Profiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profiler").finish_non_exhaustive()
    }
}

#[pymethods]
impl Profiler {
    /// Starts sampling this process's stacks (every thread, and those started
    /// later) and its package energy at 1 kHz under `root`; returns once the
    /// stacks are being sampled, or raises why they cannot be.
    #[new]
    #[pyo3(signature = (root, freq=997, mechanism=None, idle_watts=None, output=None, format=None, lines=false, kernel=true, emulated=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        root: &str,
        freq: u64,
        mechanism: Option<&str>,
        idle_watts: Option<&str>,
        output: Option<PathBuf>,
        format: Option<&str>,
        lines: bool,
        kernel: bool,
        emulated: bool,
    ) -> PyResult<Profiler> {
        if !(1..=100_000).contains(&freq) {
            return Err(bad_argument(
                py,
                format!("freq={freq}: give stack samples a second per CPU from 1 to 100000"),
            ));
        }
        let output = match output {
            None => None,
            Some(path) => {
                let format = match format {
                    Some(f) => Format::from_name(f).ok_or_else(|| {
                        bad_argument(py, format!("format={f:?}: give 'svg', 'folded' or 'pprof'"))
                    })?,
                    None => Format::from_path(&path).ok_or_else(|| {
                        bad_argument(
                            py,
                            format!(
                                "{}: name it .svg, .folded or .pb.gz, or give format=",
                                path.display()
                            ),
                        )
                    })?,
                };
                let dir = match path.parent() {
                    Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
                    _ => PathBuf::from("."),
                };
                if !dir.is_dir() {
                    return Err(raise(
                        py,
                        "OutputError",
                        format!(
                            "{}: {} is not a directory: choose a writable path before profiling",
                            path.display(),
                            dir.display()
                        ),
                    ));
                }
                Some((path, format))
            }
        };
        let mut run = ProfileRun::new(SysRoot::new(root));
        if let Some(m) = mechanism {
            run.mechanism = Some(parse_mechanism(py, m)?);
        }
        if let Some(w) = idle_watts {
            run.idle =
                IdlePower::parse(w).map_err(|e| bad_argument(py, format!("idle_watts={e}")))?;
        }
        let pid = std::process::id() as i32;
        run.sampler = Options {
            frequency_hz: freq,
            kernel,
            ..Options::new(Target::Process { pid })
        };
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::channel::<()>();
        let flag = Arc::clone(&stop);
        let running = std::thread::Builder::new()
            .name("qw-profile".into())
            .spawn(move || {
                let mut ready = move || {
                    let _ = ready_tx.send(());
                };
                let mut hooks = Hooks {
                    child: &mut |_| {},
                    process_seen: &mut |_| {},
                    stop: Some(&flag),
                    ready: &mut ready,
                };
                let mut outcome =
                    quietwatt_profile::run_profile(&run, Workload::Process { pid }, &mut hooks)?;
                let (named, _) = outcome.name_stacks(SymbolOptions {
                    lines,
                    ..SymbolOptions::default()
                });
                Ok((outcome, named))
            })
            .map_err(|e| {
                raise(
                    py,
                    "MeasurementError",
                    format!("cannot start the profile's thread: {e}"),
                )
            })?;
        // Sampling before the block runs; an open that fails ends the thread.
        let started = py.detach(move || ready_rx.recv().is_ok());
        if !started {
            let result = running
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
            return Err(match result {
                Err(e) => run_error(py, e),
                Ok(_) => raise(
                    py,
                    "MeasurementError",
                    "the profile ended before it started".into(),
                ),
            });
        }
        Ok(Profiler {
            stop,
            running: Mutex::new(Some(running)),
            started: SystemTime::now(),
            emulated,
            output,
        })
    }

    /// Stops the profile, writes the file if one was asked for, and returns
    /// `profile --json`'s document as JSON text.
    fn stop(&self, py: Python<'_>) -> PyResult<String> {
        self.stop.store(true, Ordering::Release);
        let running = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or_else(|| bad_argument(py, "this profile was stopped already"))?;
        let (outcome, named) = py
            .detach(|| running.join())
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
            .map_err(|e| run_error(py, e))?;
        let what = format!("Python process {}", std::process::id());
        let (path, format) = match &self.output {
            Some((p, f)) => (p.display().to_string(), *f),
            None => (String::new(), Format::Folded),
        };
        if let Some((p, f)) = &self.output {
            outcome
                .write(p, *f, &named, &what, self.emulated, self.started)
                .map_err(|e| {
                    let why = quietwatt_profile::output::why_not_written(p, &e);
                    raise(
                        py,
                        "OutputError",
                        format!("cannot write {}: {why}", p.display()),
                    )
                })?;
        }
        let doc = ProfileDocument::new(&outcome, &named, TOP, self.emulated, path, format);
        Ok(serde_json::to_string(&doc.stamped()).unwrap_or_default())
    }
}

/// A profile's error as the exception a Python caller catches: a refused
/// perf_event_open keeps its fix (the sysctl, CAP_PERFMON).
fn run_error(py: Python<'_>, e: RunError) -> PyErr {
    match e {
        RunError::Energy(e) => to_py(py, e),
        RunError::Profile(e @ ProfileError::Permission { .. }) => {
            raise(py, "PermissionDenied", e.to_string())
        }
        RunError::NoPackage { .. } => raise(py, "NoRapl", e.to_string()),
        e => raise(py, "MeasurementError", e.to_string()),
    }
}
