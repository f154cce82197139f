//! The data of repeated runs, shared by `run -r`, `compare` and their exports: one
//! run's figures ([`RunResult`]), a command's summaries ([`Summaries`]) and how
//! they are printed.

use quietwatt_stats::repeat::Summary;

/// One measured run.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The command's exit code (128 + signal).
    pub exit_code: i32,
    /// Seconds measured.
    pub duration_s: f64,
    /// The total and its bound, where the domains can be totalled.
    pub total: Option<(f64, f64)>,
    /// Each domain's energy and bound, in the meter's order.
    pub domains: Vec<(u32, &'static str, f64, f64)>,
}

impl RunResult {
    /// The run as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "exit_code": self.exit_code,
            "duration_s": self.duration_s,
            "total_energy_j": self.total.map(|t| t.0),
            "total_uncertainty_j": self.total.map(|t| t.1),
            "domains": self.domains.iter().map(|(s, d, e, u)| serde_json::json!({
                "socket": s, "domain": d, "energy_j": e, "uncertainty_j": u,
            })).collect::<Vec<_>>(),
        })
    }
}

/// The summaries of a set of runs of one command.
pub struct Summaries {
    /// The total's energy (`None` when the domains cannot be totalled).
    pub energy: Option<Summary>,
    /// The duration.
    pub duration: Option<Summary>,
    /// Each domain's energy.
    pub domains: Vec<(u32, &'static str, Option<Summary>)>,
}

impl Summaries {
    /// Summarises `runs` (all of one command).
    pub fn new(runs: &[RunResult]) -> Summaries {
        let totals: Option<Vec<(f64, f64)>> = runs.iter().map(|r| r.total).collect();
        let energy = totals.and_then(|t| {
            let (v, u): (Vec<f64>, Vec<f64>) = t.into_iter().unzip();
            Summary::new(&v, &u)
        });
        let durations: Vec<f64> = runs.iter().map(|r| r.duration_s).collect();
        let duration = Summary::new(&durations, &vec![0.0; durations.len()]);
        let domains = runs
            .first()
            .map(|r| {
                (0..r.domains.len())
                    .map(|i| {
                        let (s, d, _, _) = r.domains[i];
                        let v: Vec<f64> = runs.iter().map(|r| r.domains[i].2).collect();
                        let u: Vec<f64> = runs.iter().map(|r| r.domains[i].3).collect();
                        (s, d, Summary::new(&v, &u))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Summaries {
            energy,
            duration,
            domains,
        }
    }

    /// As JSON: `energy_j`, `duration_s`, `domains`.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "energy_j": self.energy,
            "duration_s": self.duration,
            "domains": self.domains.iter().map(|(s, d, e)| serde_json::json!({
                "socket": s, "domain": d, "energy_j": e,
            })).collect::<Vec<_>>(),
        })
    }

    /// The table's rows, on stderr.
    pub fn print(&self) {
        eprintln!(
            "  {:>6}  {:<10} {:>24} {:>26} {:>24}",
            "socket", "domain", "mean ± std", "95 % CI of the mean", "min … max"
        );
        for (s, d, e) in &self.domains {
            row(&s.to_string(), d, "J", e.as_ref());
        }
        row("", "total", "J", self.energy.as_ref());
        row("", "time", "s", self.duration.as_ref());
    }
}

fn row(socket: &str, name: &str, unit: &str, s: Option<&Summary>) {
    match s {
        Some(s) => eprintln!(
            "  {socket:>6}  {name:<10} {:>24} {:>26} {:>24}",
            format!("{:.4} ± {:.4} {unit}", s.mean, s.std),
            format!("[{:.4}, {:.4}] {unit}", s.ci[0], s.ci[1]),
            format!("{:.4} … {:.4} {unit}", s.min, s.max),
        ),
        None => eprintln!("  {socket:>6}  {name:<10} {:>24}", "-"),
    }
}

/// The hyperfine-style warning about outlying runs, if any.
pub fn outlier_warning(what: &str, s: &Summaries) {
    let n = s.energy.as_ref().map_or(0, |e| e.outliers);
    if n > 0 {
        eprintln!(
            "quietwatt: warning: {what}: {n} run(s) outside Tukey's far-out fences (q1 - 3 IQR, \
             q3 + 3 IQR): other programs or a cold start may have disturbed them; \
             --warmup or a quieter machine may help"
        );
    }
}
