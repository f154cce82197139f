//! How a command's repeated runs are printed, for `run -r` and `compare`: the
//! table of its summaries and hyperfine's warning about outlying runs. The figures
//! are `quietwatt-compare`'s typed result.

use quietwatt_compare::CommandSummary;
use quietwatt_stats::repeat::Summary;

/// The table's rows, on stderr.
pub fn print_table(s: &CommandSummary) {
    eprintln!(
        "  {:>6}  {:<10} {:>24} {:>26} {:>24}",
        "socket", "domain", "mean ± std", "95 % CI of the mean", "min … max"
    );
    for d in &s.domains {
        row(&d.socket.to_string(), &d.domain, "J", d.energy_j.as_ref());
    }
    row("", "total", "J", s.energy_j.as_ref());
    row("", "time", "s", s.duration_s.as_ref());
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
pub fn outlier_warning(what: &str, s: &CommandSummary) {
    let n = s.energy_j.as_ref().map_or(0, |e| e.outliers);
    if n > 0 {
        eprintln!(
            "quietwatt: warning: {what}: {n} run(s) outside Tukey's far-out fences (q1 - 3 IQR, \
             q3 + 3 IQR): other programs or a cold start may have disturbed them; \
             --warmup or a quieter machine may help"
        );
    }
}
