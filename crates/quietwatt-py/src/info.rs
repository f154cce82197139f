//! What this machine offers: the diagnosis of every mechanism and the domains each
//! reads, as JSON for `quietwatt.doctor()` and `quietwatt.domains()`.

use crate::errors::{bad_argument, to_py};
use pyo3::prelude::*;
use quietwatt::source::{probe, probe_all, Probe};
use quietwatt::{Mechanism, SysRoot};
use serde::Serialize;
use std::path::Path;

/// `quietwatt doctor --json`'s verdicts: one object per mechanism with `works`,
/// `finding` and, when it does not work, `fix`.
#[pyfunction]
pub fn doctor_json(py: Python<'_>, root: &str) -> String {
    let root = SysRoot::new(root);
    let d = py.detach(|| quietwatt::doctor::diagnose(&root));
    serde_json::to_string(&d).unwrap_or_default()
}

/// One counter a mechanism reads.
#[derive(Serialize)]
struct DomainRow {
    mechanism: &'static str,
    socket: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    die: Option<u32>,
    domain: &'static str,
    /// Joules per raw counter step.
    unit_j: f64,
    /// Where it is read (a file, a register, a perf event).
    origin: String,
    /// Whether the mechanism's counters moved while probed.
    moves: Option<bool>,
}

/// The counters of each mechanism that opens under `root` (or of `mechanism`
/// alone, which then must open: its error is raised).
#[pyfunction]
#[pyo3(signature = (root, mechanism=None))]
pub fn domains_json(py: Python<'_>, root: &str, mechanism: Option<&str>) -> PyResult<String> {
    let root = SysRoot::new(root);
    let probes: Vec<Probe> = match mechanism {
        Some(m) => {
            let m: Mechanism = m.parse().map_err(|e| bad_argument(py, format!("{e}")))?;
            let p = py.detach(|| probe(&root, m));
            if let Err(e) = p.result {
                return Err(to_py(py, e.into()));
            }
            vec![p]
        }
        None => py.detach(|| probe_all(&root)),
    };
    let rows: Vec<DomainRow> = probes
        .iter()
        .filter_map(|p| p.result.as_ref().ok().map(|c| (p, c)))
        .flat_map(|(p, channels)| {
            channels.iter().map(move |c| DomainRow {
                mechanism: p.mechanism.name(),
                socket: c.id.socket.0,
                die: c.id.die,
                domain: c.id.domain.name(),
                unit_j: c.unit.joules_per_step(),
                origin: c.origin.display().to_string(),
                moves: p.moves,
            })
        })
        .collect();
    Ok(serde_json::to_string(&rows).unwrap_or_default())
}

/// Whether any mechanism can measure under `root`: it opens and its counters move.
#[pyfunction]
pub fn can_measure(py: Python<'_>, root: &str) -> bool {
    let root = SysRoot::new(root);
    py.detach(|| probe_all(&root).iter().any(Probe::measures))
}

/// Whether `root` is where a quietwatt emulator is mounted.
#[pyfunction]
pub fn is_emulator(root: &str) -> bool {
    quietwatt_emulator::serves(Path::new(root))
}
