//! `quietwatt.measure(share=...)`: this process's (or its cgroup's) share of the
//! package energy of a block, from the attribution crate's accounting program
//! ([`quietwatt_attribution::BlockShare`]).

use crate::errors::{bad_argument, raise};
use pyo3::prelude::*;
use std::sync::{Mutex, PoisonError};

/// The share being measured over a block.
#[pyclass(module = "quietwatt._quietwatt", frozen)]
pub struct Share {
    #[cfg(feature = "share")]
    inner: Mutex<Option<quietwatt_attribution::BlockShare>>,
    #[cfg(not(feature = "share"))]
    inner: Mutex<Option<()>>,
}

impl std::fmt::Debug for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Share").finish_non_exhaustive()
    }
}

fn unavailable(py: Python<'_>, why: String) -> PyErr {
    raise(py, "ShareUnavailable", why)
}

#[pymethods]
impl Share {
    /// Starts following `scope` (`process` or `cgroup`) of this process; `root` is
    /// where the energy is read. Raises `ShareUnavailable` with the reason where the
    /// accounting program cannot run.
    #[new]
    #[pyo3(signature = (root, scope, idle_watts=None))]
    fn new(py: Python<'_>, root: &str, scope: &str, idle_watts: Option<f64>) -> PyResult<Share> {
        let pid = std::process::id();
        #[cfg(feature = "share")]
        {
            use quietwatt_attribution::{BlockShare, IdlePower, Whose};
            let whose = match scope {
                "process" => Whose::Process(pid),
                "cgroup" => Whose::CgroupOf(pid),
                other => return Err(bad_scope(py, other)),
            };
            let idle = match idle_watts {
                None => IdlePower::None,
                Some(w) if w.is_finite() && w >= 0.0 => IdlePower::Configured(w),
                Some(w) => {
                    return Err(bad_argument(
                        py,
                        format!("idle_watts={w}: give the package's idle power in watts (≥ 0), or leave it out"),
                    ))
                }
            };
            let root = quietwatt::SysRoot::new(root);
            let share = py
                .detach(|| BlockShare::start(&root, whose, idle))
                .map_err(|e| {
                    unavailable(
                        py,
                        format!(
                            "share='{scope}': {e}; the share needs root (or CAP_BPF and CAP_PERFMON) and a kernel with BTF (/sys/kernel/btf/vmlinux); the machine's figures need neither: leave share out"
                        ),
                    )
                })?;
            Ok(Share {
                inner: Mutex::new(Some(share)),
            })
        }
        #[cfg(not(feature = "share"))]
        {
            let _ = (root, idle_watts, pid);
            match scope {
                "process" | "cgroup" => Err(unavailable(
                    py,
                    "this build of quietwatt has no in-kernel accounting (built without its `share` feature): install it with `pip install .` from the repository".into(),
                )),
                other => Err(bad_scope(py, other)),
            }
        }
    }

    /// The share of the block whose report (`run --json`'s shape) is `report_json`,
    /// read between `t0_ns` and `t1_ns` (CLOCK_MONOTONIC), as JSON.
    fn finish(
        &self,
        py: Python<'_>,
        report_json: &str,
        t0_ns: u64,
        t1_ns: u64,
    ) -> PyResult<String> {
        let taken = self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(share) = taken else {
            return Err(bad_argument(py, "this share is already finished"));
        };
        #[cfg(feature = "share")]
        {
            let (channels, energy) = domains(report_json)
                .ok_or_else(|| bad_argument(py, "the report holds no domains to split"))?;
            let r = py.detach(|| share.finish(&channels, &energy, t0_ns, t1_ns));
            Ok(serde_json::to_string(&r).unwrap_or_default())
        }
        #[cfg(not(feature = "share"))]
        {
            let _ = (share, report_json, t0_ns, t1_ns);
            Err(unavailable(
                py,
                "no in-kernel accounting in this build".into(),
            ))
        }
    }
}

fn bad_scope(py: Python<'_>, scope: &str) -> PyErr {
    let why = if scope == "thread" {
        "the accounting program charges a thread's CPU time to its process: use share='process' (this process, all its threads)".to_string()
    } else {
        format!("share='{scope}': expected 'process' or 'cgroup' (or leave it out for the machine's figures alone)")
    };
    bad_argument(py, why)
}

/// The channels and energies of a `run --json` report's `domains`.
#[cfg(feature = "share")]
fn domains(report_json: &str) -> Option<(Vec<quietwatt::DomainId>, Vec<quietwatt::Joules>)> {
    let v: serde_json::Value = serde_json::from_str(report_json).ok()?;
    let mut channels = Vec::new();
    let mut energy = Vec::new();
    for d in v["domains"].as_array()? {
        let domain: quietwatt::Domain = d["domain"].as_str()?.parse().ok()?;
        let mut id = quietwatt::DomainId::new(d["socket"].as_u64()? as u32, domain);
        id.die = d["die"].as_u64().map(|x| x as u32);
        channels.push(id);
        energy.push(quietwatt::Joules(d["energy_j"].as_f64()?));
    }
    (!channels.is_empty()).then_some((channels, energy))
}
