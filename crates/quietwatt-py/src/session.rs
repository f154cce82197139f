//! [`quietwatt::Session`] for Python: started from keyword arguments, its reports
//! as JSON text, its samples as flat lists.

use crate::errors::{bad_argument, IntoPy};
use pyo3::prelude::*;
use quietwatt::source::Source;
use quietwatt::{Domain, Hertz, Measurement, Mechanism, Selection, SessionConfig, SysRoot};
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError, RwLock};

/// What a reused source is kept under: root, mechanism asked for, domains asked for.
type Key = (String, Option<String>, Option<Vec<String>>);

/// Counters opened by an earlier `measure()` and kept for the next one at the same
/// root, mechanism and domains: discovering them (zone names, units, ranges,
/// quirks, about 130 file operations) costs more than the two readings.
static KEPT: LazyLock<Mutex<HashMap<Key, Box<dyn Source>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn kept() -> std::sync::MutexGuard<'static, HashMap<Key, Box<dyn Source>>> {
    KEPT.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Closes the counters kept for reuse under `root` (an emulator about to be
/// unmounted): open files would keep its mount busy, so that the unmount would
/// only detach it, and its FUSE thread and descriptors would stay for good.
pub fn forget_under(root: &str) {
    let root = std::path::Path::new(root);
    kept().retain(|k, _| !std::path::Path::new(&k.0).starts_with(root));
}

/// `mechanism=` parsed, or `BadArgument` saying which names exist.
pub fn parse_mechanism(py: Python<'_>, name: &str) -> PyResult<Mechanism> {
    name.parse().map_err(|e| bad_argument(py, format!("{e}")))
}

/// `domains=` (already a list of names) as a selection; an unknown or empty one is
/// a `BadArgument` naming the domains that exist.
pub fn selection(py: Python<'_>, names: &[String]) -> PyResult<Selection> {
    let d = names
        .iter()
        .map(|n| n.parse::<Domain>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad_argument(py, format!("{e}")))?;
    if d.is_empty() {
        return Err(bad_argument(
            py,
            "domains= is empty: name at least one (package, core, uncore, dram, psys), or leave it out for all",
        ));
    }
    Ok(Selection::only(d))
}

/// The configuration from the Python arguments (already defaulted on the Python
/// side: `root` is never empty here).
pub fn config(
    py: Python<'_>,
    root: &str,
    mechanism: Option<&str>,
    domains: Option<Vec<String>>,
    freq: Option<f64>,
    samples_kept: Option<usize>,
) -> PyResult<SessionConfig> {
    // QUIETWATT_POWER_MODEL: where nothing can measure, the model's estimate
    // (labelled: mechanism "estimate", "estimated": true).
    let mut c = SessionConfig::default()
        .root(SysRoot::new(root))
        .power_model(quietwatt::fallback::ModelChoice::from_env());
    if let Some(m) = mechanism {
        c = c.mechanism(parse_mechanism(py, m)?);
    }
    if let Some(names) = domains {
        c = c.domains(selection(py, &names)?);
    }
    if let Some(f) = freq {
        let hz = Hertz::new(f).map_err(|e| bad_argument(py, format!("freq={f}: {e}")))?;
        c = c.rate(hz);
    }
    if let Some(n) = samples_kept {
        c = c.samples_kept(n);
    }
    Ok(c)
}

/// Samples as Python receives them: `(t_ns, interval_ns, missed, energy_j)`,
/// `energy_j` row after row with one value per channel.
pub type Columns = (Vec<u64>, Vec<u64>, Vec<u64>, Vec<f64>);

fn columns(rows: Vec<quietwatt::SampleRow>, channels: usize) -> Columns {
    let mut c: Columns = (
        Vec::with_capacity(rows.len()),
        Vec::with_capacity(rows.len()),
        Vec::with_capacity(rows.len()),
        Vec::with_capacity(rows.len() * channels),
    );
    for r in rows {
        c.0.push(r.t_ns);
        c.1.push(r.interval_ns);
        c.2.push(r.missed);
        c.3.extend(r.energy_j.iter().map(|j| j.0));
    }
    c
}

/// A report as JSON: the [`Measurement`] that `quietwatt run --json`
/// ([`quietwatt::document::RunDocument`]) flattens, so the keys they share are
/// one type's; a region has no command's fields (exit code, rate) and no stamp.
fn json(r: &Measurement) -> String {
    // A report is numbers and strings: serializing it cannot fail.
    serde_json::to_string(r).unwrap_or_default()
}

/// A measurement in progress (`quietwatt.Monitor` and `quietwatt.measure` wrap it).
#[pyclass(module = "quietwatt._quietwatt", frozen)]
pub struct Session {
    // Snapshots and windows read under the shared lock, concurrently from any
    // Python thread; `stop` takes the session out under the exclusive one.
    inner: RwLock<Option<quietwatt::Session>>,
    /// Where its source goes back to when it stops, for a reused one.
    reuse: Option<Key>,
    /// The first and last reading of the final report (CLOCK_MONOTONIC ns).
    span: Mutex<Option<(u64, u64)>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").finish_non_exhaustive()
    }
}

impl Session {
    /// Runs `f` on the running session with the GIL released; its error as the
    /// Python exception, or `BadArgument` once the session is stopped.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&quietwatt::Session) -> quietwatt::Result<T> + Send,
    ) -> PyResult<T> {
        let out = py.detach(|| {
            let guard = self.inner.read().unwrap_or_else(PoisonError::into_inner);
            guard.as_ref().map(f)
        });
        match out {
            Some(r) => r.py(py),
            None => Err(bad_argument(
                py,
                "this measurement is stopped: start a new one",
            )),
        }
    }
}

#[pymethods]
impl Session {
    /// Opens the counters and takes the first reading; with `freq`, starts the
    /// sampler thread (the GIL is released while it samples). With `reuse` (and no
    /// `freq`), the counters opened by an earlier reused session at the same root,
    /// mechanism and domains are read again instead of discovered anew. With
    /// `socket`, through the local reader service listening there (never reused).
    #[new]
    #[pyo3(signature = (root, mechanism=None, domains=None, freq=None, samples_kept=None, reuse=false, socket=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        root: &str,
        mechanism: Option<&str>,
        domains: Option<Vec<String>>,
        freq: Option<f64>,
        samples_kept: Option<usize>,
        reuse: bool,
        socket: Option<std::path::PathBuf>,
    ) -> PyResult<Session> {
        let key: Option<Key> = (reuse && freq.is_none() && socket.is_none()).then(|| {
            (
                root.to_string(),
                mechanism.map(str::to_string),
                domains.clone(),
            )
        });
        let c = config(py, root, mechanism, domains, freq, samples_kept)?.socket(socket);
        let s = py
            .detach(|| {
                let cached = key.as_ref().and_then(|k| kept().remove(k));
                match cached {
                    // Counters that no longer read (a module reloaded, a CPU gone)
                    // are discovered anew.
                    Some(source) => quietwatt::Session::start_on(source, c.clone())
                        .or_else(|_| quietwatt::Session::start(c)),
                    None => quietwatt::Session::start(c),
                }
            })
            .py(py)?;
        Ok(Session {
            inner: RwLock::new(Some(s)),
            reuse: key,
            span: Mutex::new(None),
        })
    }

    /// The mechanism read (`powercap`, `perf`, `msr`; `socket` through the
    /// local reader service).
    #[getter]
    fn mechanism(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with(py, |s| Ok(s.mechanism().name()))
    }

    /// `(socket, die or None, domain)` of each counter, in the order of the samples.
    #[getter]
    fn channels(&self, py: Python<'_>) -> PyResult<Vec<(u32, Option<u32>, &'static str)>> {
        self.with(py, |s| {
            Ok(s.channels()
                .iter()
                .map(|c| (c.socket.0, c.die, c.domain.name()))
                .collect())
        })
    }

    /// The sampling rate in Hz, or None without a sampler thread.
    #[getter]
    fn freq(&self, py: Python<'_>) -> PyResult<Option<f64>> {
        self.with(py, |s| Ok(s.rate().map(quietwatt::Hertz::hz)))
    }

    /// The energy so far, as JSON, without stopping.
    fn snapshot(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |s| s.snapshot().map(|r| json(&r)))
    }

    /// Opens the named window now.
    fn begin_window(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let name = name.to_string();
        self.with(py, move |s| s.begin_window(&name))
    }

    /// Closes the named window; its energy as JSON.
    fn end_window(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        let name = name.to_string();
        self.with(py, move |s| s.end_window(&name).map(|r| json(&r)))
    }

    /// The samples taken since the last drain, handed over and forgotten
    /// ([`Columns`]).
    fn drain_samples(&self, py: Python<'_>) -> PyResult<Columns> {
        self.with(py, |s| Ok(columns(s.drain_samples(), s.channels().len())))
    }

    /// The sample buffer's bound and what it dropped, as JSON (None without a
    /// sampler thread).
    fn sample_stats(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.with(py, |s| {
            Ok(s.sample_stats()
                .map(|st| serde_json::to_string(&st).unwrap_or_default()))
        })
    }

    /// Why the sampler thread stopped early, if it did.
    fn sampling_error(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.with(py, |s| Ok(s.sampling_error()))
    }

    /// The first and last reading of the final report (CLOCK_MONOTONIC ns), once
    /// stopped: what a share's context switches are placed against.
    #[getter]
    fn span(&self) -> Option<(u64, u64)> {
        *self.span.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the session still runs.
    #[getter]
    fn running(&self) -> bool {
        self.inner.read().map(|g| g.is_some()).unwrap_or(false)
    }

    /// Stops (joining the sampler thread): the final report as JSON, and the
    /// samples not drained yet ([`Columns`]).
    fn stop(&self, py: Python<'_>) -> PyResult<(String, Columns)> {
        let taken = py.detach(|| {
            self.inner
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
        });
        let Some(s) = taken else {
            return Err(bad_argument(py, "this measurement is already stopped"));
        };
        let channels = s.channels().len();
        let keep_span = |r: &Measurement| {
            *self.span.lock().unwrap_or_else(PoisonError::into_inner) = r.span_ns;
        };
        if let Some(key) = &self.reuse {
            let (report, source) = py.detach(|| s.stop_reusable()).py(py)?;
            if let Some(source) = source {
                kept().insert(key.clone(), source);
            }
            keep_span(&report);
            return Ok((json(&report), columns(Vec::new(), channels)));
        }
        let (report, rows) = py.detach(|| s.stop_with_samples()).py(py)?;
        keep_span(&report);
        Ok((json(&report), columns(rows, channels)))
    }
}
