//! What this machine offers: the diagnosis of every mechanism and the domains each
//! reads, as JSON for `quietwatt.doctor()` and `quietwatt.domains()`.

use crate::errors::{bad_argument, to_py};
use pyo3::prelude::*;
use quietwatt::source::listing::ListDocument;
use quietwatt::source::{probe, probe_all, Probe};
use quietwatt::{Selection, SysRoot};
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
            let m = crate::session::parse_mechanism(py, m)?;
            let p = py.detach(|| probe(&root, m));
            if let Err(e) = p.result {
                return Err(to_py(py, e.into()));
            }
            vec![p]
        }
        None => py.detach(|| probe_all(&root)),
    };
    // The rows of `quietwatt list --json`'s typed document, one per counter.
    let listed = ListDocument::new(root.dir(), false, &probes);
    let rows: Vec<DomainRow> = listed
        .mechanisms
        .iter()
        .filter_map(|m| m.domains.as_ref().map(|d| (m, d)))
        .flat_map(|(m, domains)| {
            domains.iter().map(move |c| DomainRow {
                mechanism: m.mechanism.name(),
                socket: c.socket.0,
                die: c.die,
                domain: c.domain.name(),
                unit_j: c.unit_j,
                origin: c.origin.display().to_string(),
                moves: m.counters_move.flatten(),
            })
        })
        .collect();
    Ok(serde_json::to_string(&rows).unwrap_or_default())
}

/// Whether any mechanism can measure under `root`: it opens and its counters
/// move; or, where none can, the local reader service (`$QUIETWATT_SOCKET`,
/// `/run/quietwatt/reader.sock`) lets this user read (what a session falls
/// back to, so `emulate="auto"` measures through it rather than emulating).
#[pyfunction]
pub fn can_measure(py: Python<'_>, root: &str) -> bool {
    let root = SysRoot::new(root);
    py.detach(|| {
        probe_all(&root).iter().any(Probe::measures)
            || quietwatt::reader::discovered(&Selection::all(), Default::default())
                .is_some_and(|s| s.is_ok())
    })
}

/// Whether `root` is where a quietwatt emulator is mounted.
#[pyfunction]
pub fn is_emulator(root: &str) -> bool {
    quietwatt_emulator::serves(Path::new(root))
}

/// The statistics of `quietwatt compare` on two sets of runs: each set's values
/// (one per run, e.g. joules) and their `±` measurement bounds. Returns JSON:
/// `a` and `b` summaries (mean, interval, spread, outliers), Welch's test, the
/// ratio `b / a` with its interval, the rank test with the Hodges-Lehmann shift,
/// the verdict and, with `gate_pct`, the gate's outcome (`pass`, `regression`,
/// `inconclusive`), exactly as the CLI computes them (`quietwatt_compare::Compared`, over
/// `quietwatt_stats::repeat`), and `ratio_std` (the `±` of hyperfine's summary line).
#[pyfunction]
#[pyo3(signature = (a, a_bounds, b, b_bounds, gate_pct=None))]
pub fn compare_json(
    py: Python<'_>,
    a: Vec<f64>,
    a_bounds: Vec<f64>,
    b: Vec<f64>,
    b_bounds: Vec<f64>,
    gate_pct: Option<f64>,
) -> PyResult<String> {
    use quietwatt_compare::{CommandSummary, Compared, Run};
    use quietwatt_stats::repeat::Summary;
    let summary = |name: &str, v: &[f64], bounds: &[f64]| {
        Summary::new(v, bounds).ok_or_else(|| {
            bad_argument(
                py,
                format!(
                    "{name}: {} value(s) and {} bound(s): give one finite value and one bound per run, at least one run",
                    v.len(),
                    bounds.len()
                ),
            )
        })
    };
    let (sa, sb) = (summary("a", &a, &a_bounds)?, summary("b", &b, &b_bounds)?);
    if let Some(p) = gate_pct.filter(|p| !(p.is_finite() && *p >= 0.0)) {
        return Err(bad_argument(
            py,
            format!("gate_pct={p}: expected a percentage ≥ 0"),
        ));
    }
    // The comparison of quietwatt-compare, as `quietwatt compare` computes it:
    // each value one run's total.
    let runs = |v: &[f64], bounds: &[f64]| -> Vec<Run> {
        v.iter()
            .zip(bounds)
            .map(|(&e, &u)| Run {
                exit_code: 0,
                duration_s: 0.0,
                total_energy_j: Some(e),
                total_uncertainty_j: Some(u),
                domains: Vec::new(),
                warnings: Vec::new(),
            })
            .collect()
    };
    let c = Compared::new(
        &CommandSummary::new("a", &runs(&a, &a_bounds)),
        &CommandSummary::new("b", &runs(&b, &b_bounds)),
        1,
        0,
        gate_pct,
    );
    Ok(serde_json::json!({
        "a": sa,
        "b": sb,
        "welch": c.welch,
        "ratio": c.energy_ratio,
        "ratio_std": c.energy_ratio_std,
        "rank_test": c.rank_test,
        "verdict": c.verdict.words(),
        "gate": c.gate,
        "gate_pct": gate_pct,
    })
    .to_string())
}
