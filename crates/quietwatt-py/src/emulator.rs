//! [`quietwatt_emulator::Emulator`] for Python: mounted in a directory of its own,
//! with its ground truth and what it served, so that Python code is tested the way
//! quietwatt tests itself.

use crate::errors::{bad_argument, raise};
use pyo3::prelude::*;
use quietwatt::Domain;
use quietwatt_emulator::{EmulatorConfig, Fault, Mechanism, Trace, Vendor};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// A mounted emulator and the temporary directory it is mounted at.
struct Mounted {
    emulator: quietwatt_emulator::Emulator,
    _dir: Option<tempfile::TempDir>,
}

impl Mounted {
    /// Unmounts after closing the counters kept open under it for reuse (they
    /// would keep the mount busy: each emulated block left 5 descriptors and 2
    /// threads, and its close waited 2 s for a FUSE thread that never ended).
    fn unmount(self) -> quietwatt_emulator::Result<()> {
        crate::session::forget_under(&self.emulator.dir().display().to_string());
        self.emulator.unmount()
    }
}

/// A RAPL machine served over FUSE (`quietwatt.Emulator` wraps it).
#[pyclass(module = "quietwatt._quietwatt", frozen)]
pub struct Emulator {
    inner: Mutex<Option<Mounted>>,
    root: String,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

fn domain(py: Python<'_>, name: &str) -> PyResult<Domain> {
    name.parse().map_err(|e| bad_argument(py, format!("{e}")))
}

fn emulator_error(py: Python<'_>, e: quietwatt_emulator::Error) -> PyErr {
    let class = match e {
        quietwatt_emulator::Error::Mount { .. } | quietwatt_emulator::Error::Unmount { .. } => {
            "EmulatorError"
        }
        _ => "BadArgument",
    };
    raise(py, class, e.to_string())
}

impl Emulator {
    fn with<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&quietwatt_emulator::Emulator) -> PyResult<T>,
    ) -> PyResult<T> {
        let guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match guard.as_ref() {
            Some(m) => f(&m.emulator),
            None => Err(bad_argument(
                py,
                "this emulator is unmounted: mount a new quietwatt.Emulator",
            )),
        }
    }
}

#[pymethods]
impl Emulator {
    /// Mounts an emulator (see `quietwatt.Emulator` for the arguments).
    #[new]
    #[pyo3(signature = (
        vendor="intel", model=None, family=None, sockets=1, cpus_per_socket=None,
        watts=None, psys=false, dram=true, counter_bits=32, update_interval_s=None,
        start_offset_s=0.0, trace=None, faults=Vec::new(), dir=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        vendor: &str,
        model: Option<u32>,
        family: Option<u32>,
        sockets: u32,
        cpus_per_socket: Option<u32>,
        watts: Option<&str>,
        psys: bool,
        dram: bool,
        counter_bits: u8,
        update_interval_s: Option<f64>,
        start_offset_s: f64,
        trace: Option<Vec<(f64, f64)>>,
        faults: Vec<String>,
        dir: Option<&str>,
    ) -> PyResult<Emulator> {
        let mut c = match vendor.to_ascii_lowercase().as_str() {
            "intel" => EmulatorConfig::intel(model.unwrap_or(0x9E)),
            "amd" => EmulatorConfig::amd(),
            other => {
                return Err(bad_argument(
                    py,
                    format!("vendor='{other}': expected 'intel' or 'amd'"),
                ))
            }
        };
        match (&mut c.vendor, model, family) {
            (Vendor::Intel { family: f, .. }, _, Some(x)) => *f = x,
            (
                Vendor::Amd {
                    family: f,
                    model: m,
                },
                model,
                family,
            ) => {
                if let Some(x) = family {
                    *f = x;
                }
                if let Some(x) = model {
                    *m = x;
                }
            }
            _ => {}
        }
        if sockets == 0 {
            return Err(bad_argument(
                py,
                "sockets=0: an emulated machine has at least one package",
            ));
        }
        c = c.with_sockets(sockets);
        if let Some(n) = cpus_per_socket {
            c = c.with_cpus_per_socket(n);
        }
        if psys {
            c = c.with_psys();
        }
        c.domains.dram &= dram;
        c = c.with_counter_bits(counter_bits);
        if let Some(s) = update_interval_s {
            let d = Duration::try_from_secs_f64(s)
                .ok()
                .filter(|d| !d.is_zero() && *d <= Duration::from_secs(3600));
            let Some(d) = d else {
                return Err(bad_argument(
                    py,
                    format!(
                        "update_interval_s={s}: give a positive number of seconds, at most 3600"
                    ),
                ));
            };
            c = c.with_update_interval(d);
        }
        let Ok(offset) = Duration::try_from_secs_f64(start_offset_s) else {
            return Err(bad_argument(
                py,
                format!("start_offset_s={start_offset_s}: give seconds of uptime, 0 or more"),
            ));
        };
        c.start_offset = offset;
        if let Some(spec) = watts {
            c = c.with_power(spec).map_err(|e| emulator_error(py, e))?;
        }
        if let Some(points) = trace {
            // Validated as the CLI's `--trace` file is (times increasing, scales >= 0).
            let text: String = points.iter().map(|(t, k)| format!("{t},{k}\n")).collect();
            c.power.trace = Some(Trace::parse(&text, "trace=").map_err(|e| emulator_error(py, e))?);
        }
        for f in &faults {
            let fault: Fault = f
                .parse()
                .map_err(|e: quietwatt_emulator::Error| emulator_error(py, e))?;
            c = c.with_fault(fault);
        }
        let tmp = match dir {
            Some(_) => None,
            None => Some(
                tempfile::Builder::new()
                    .prefix("quietwatt-emulator-")
                    .tempdir()
                    .map_err(|e| {
                        raise(
                            py,
                            "EmulatorError",
                            format!("cannot create a directory for the emulator: {e}"),
                        )
                    })?,
            ),
        };
        let at = match (&tmp, dir) {
            (Some(t), _) => t.path().to_path_buf(),
            (None, Some(d)) => d.into(),
            (None, None) => unreachable!("a directory is made when none is given"),
        };
        let emulator = py
            .detach(|| quietwatt_emulator::Emulator::mount(&at, c))
            .map_err(|e| emulator_error(py, e))?;
        let root = emulator.dir().display().to_string();
        Ok(Emulator {
            inner: Mutex::new(Some(Mounted {
                emulator,
                _dir: tmp,
            })),
            root,
        })
    }

    /// The directory to measure under (`root=`).
    #[getter]
    fn root(&self) -> &str {
        &self.root
    }

    /// Whether it is still mounted.
    #[getter]
    fn mounted(&self) -> bool {
        self.inner
            .lock()
            .map(|g| g.as_ref().is_some_and(|m| m.emulator.is_mounted()))
            .unwrap_or(false)
    }

    /// Seconds since the mount.
    #[getter]
    fn elapsed_s(&self, py: Python<'_>) -> PyResult<f64> {
        self.with(py, |e| Ok(e.elapsed().as_secs_f64()))
    }

    /// The configuration served, as JSON.
    fn config_json(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |e| {
            Ok(serde_json::to_string(e.config()).unwrap_or_default())
        })
    }

    /// The watts the configuration draws in (socket, domain).
    fn watts(&self, py: Python<'_>, domain_name: &str, socket: u32) -> PyResult<f64> {
        let d = domain(py, domain_name)?;
        self.with(py, |e| Ok(e.config().watts(socket, d).unwrap_or(0.0)))
    }

    /// The exact energy (J) the domain has drawn since the mount.
    fn truth(&self, py: Python<'_>, domain_name: &str, socket: u32) -> PyResult<f64> {
        let d = domain(py, domain_name)?;
        self.with(py, |e| Ok(e.truth(socket, d).0))
    }

    /// What the domain's counter served between its first and last read since the
    /// last `reset_served`, as JSON (`first_j`, `last_j`, `first_t_s`, ...), through
    /// `mechanism` (`powercap`, `msr`) or any; None before any read.
    #[pyo3(signature = (domain_name, socket, mechanism=None))]
    fn served_json(
        &self,
        py: Python<'_>,
        domain_name: &str,
        socket: u32,
        mechanism: Option<&str>,
    ) -> PyResult<Option<String>> {
        let d = domain(py, domain_name)?;
        let m = match mechanism {
            None => None,
            Some("powercap") => Some(Mechanism::Powercap),
            Some("msr") => Some(Mechanism::Msr),
            Some(other) => {
                return Err(bad_argument(
                    py,
                    format!("mechanism='{other}': the emulator serves 'powercap' and 'msr'"),
                ))
            }
        };
        self.with(py, |e| {
            let s = match m {
                Some(m) => e.served(m, socket, d),
                None => e.served_any(socket, d),
            };
            Ok(s.map(|s| serde_json::to_string(&s).unwrap_or_default()))
        })
    }

    /// Forgets what was served so far.
    fn reset_served(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |e| {
            e.reset_served();
            Ok(())
        })
    }

    /// Injects a fault (the text of `quietwatt emulate --fault`).
    fn inject(&self, py: Python<'_>, fault: &str) -> PyResult<()> {
        let f: Fault = fault
            .parse()
            .map_err(|e: quietwatt_emulator::Error| emulator_error(py, e))?;
        self.with(py, |e| e.inject(f).map_err(|err| emulator_error(py, err)))
    }

    /// Unmounts and removes the directory it made; the FUSE thread is joined. Safe
    /// to call twice.
    fn unmount(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(m) = taken {
            py.detach(|| m.unmount())
                .map_err(|e| emulator_error(py, e))?;
        }
        Ok(())
    }
}

impl Drop for Emulator {
    /// An emulator Python collects without `unmount()` closes what is kept open
    /// under it first, as `unmount()` does.
    fn drop(&mut self) {
        let taken = take_inner(&mut self.inner);
        if let Some(m) = taken {
            let _ = m.unmount();
        }
    }
}

/// The built-in emulator behind `emulate="on"`/`"auto"`: the default machine,
/// served by a child process ([`quietwatt_emulator::ChildEmulator`]), so that
/// however this process ends (SIGKILL included) the child sees it gone and
/// unmounts: no dead mount is left behind.
#[pyclass(module = "quietwatt._quietwatt", frozen)]
pub struct BuiltInEmulator {
    inner: Mutex<Option<(quietwatt_emulator::ChildEmulator, tempfile::TempDir)>>,
    root: String,
}

impl std::fmt::Debug for BuiltInEmulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltInEmulator")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl BuiltInEmulator {
    fn close(
        taken: Option<(quietwatt_emulator::ChildEmulator, tempfile::TempDir)>,
    ) -> quietwatt_emulator::Result<()> {
        let Some((child, dir)) = taken else {
            return Ok(());
        };
        crate::session::forget_under(&child.dir().display().to_string());
        let r = child.unmount();
        drop(dir);
        r
    }
}

#[pymethods]
impl BuiltInEmulator {
    /// Mounts the default emulated machine in a temporary directory.
    #[new]
    fn new(py: Python<'_>) -> PyResult<BuiltInEmulator> {
        let dir = tempfile::Builder::new()
            .prefix("quietwatt-emulator-")
            .tempdir()
            .map_err(|e| {
                raise(
                    py,
                    "EmulatorError",
                    format!("cannot create a directory for the emulator: {e}"),
                )
            })?;
        let child = py
            .detach(|| {
                quietwatt_emulator::ChildEmulator::mount(dir.path(), EmulatorConfig::default())
            })
            .map_err(|e| raise(py, "EmulatorError", e.to_string()))?;
        let root = child.dir().display().to_string();
        Ok(BuiltInEmulator {
            inner: Mutex::new(Some((child, dir))),
            root,
        })
    }

    /// The directory to measure under.
    #[getter]
    fn root(&self) -> &str {
        &self.root
    }

    /// Closes what is kept open under it, tells the child to unmount and waits
    /// for it (milliseconds). Safe to call twice.
    fn unmount(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        py.detach(|| BuiltInEmulator::close(taken))
            .map_err(|e| emulator_error(py, e))
    }
}

impl Drop for BuiltInEmulator {
    fn drop(&mut self) {
        let taken = take_inner(&mut self.inner);
        let _ = BuiltInEmulator::close(taken);
    }
}

/// What a dropped emulator still holds, taken out even from a poisoned lock: a
/// panic elsewhere must not leave a mount behind.
fn take_inner<T>(inner: &mut std::sync::Mutex<Option<T>>) -> Option<T> {
    inner.get_mut().unwrap_or_else(|p| p.into_inner()).take()
}
