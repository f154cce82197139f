//! What every export writes from the one [`Comparison`]: the Markdown table with
//! the verdicts, the CSV of runs, hyperfine's summary line, and the line printed
//! after each run. The JSON is the [`Comparison`] itself (`serde`).

use crate::executor::Run;
use crate::result::{Compared, Comparison};
use quietwatt::sink::csv::field;
use quietwatt_stats::repeat::{GateOutcome, Verdict};
use std::fmt::Write as _;

/// The line after each measured run, the same for `run -r` and `compare`:
/// `run 2/10: 4.8012 ± 0.0010 J in 0.2003 s`, with `of #2 'CMD'` when more than
/// one command is compared, and the exit code when it is not 0.
pub fn run_line(commands: &[String], command: usize, round: u32, runs: u32, run: &Run) -> String {
    let of = match commands.get(command) {
        Some(c) if commands.len() > 1 => format!(" of #{} '{c}'", command + 1),
        _ => String::new(),
    };
    format!(
        "run {round}/{runs}{of}: {} in {:.4} s{}",
        run.total()
            .map_or("-".into(), |(e, u)| format!("{e:.4} ± {u:.4} J")),
        run.duration_s,
        if run.exit_code != 0 {
            format!(" (exit code {})", run.exit_code)
        } else {
            String::new()
        }
    )
}

/// Hyperfine's summary line, by energy, for one comparison: `'B' used 1.94 ±
/// 0.04 × the energy of 'A' [1.90, 1.98] (95 % CI)`; `None` without a ratio.
pub fn summary_line(c: &Comparison, compared: &Compared) -> Option<String> {
    let r = compared.energy_ratio.as_ref()?;
    let name = |i: usize| c.commands.get(i).map_or("?", |s| s.command.as_str());
    Some(format!(
        "'{}' used {:.2} ± {:.2} × the energy of '{}' [{:.2}, {:.2}] ({:.0} % CI)",
        name(compared.command),
        r.estimate,
        compared.energy_ratio_std.unwrap_or(0.0),
        name(compared.reference),
        r.ci[0],
        r.ci[1],
        r.confidence * 100.0
    ))
}

/// Every comparison's [`summary_line`].
pub fn summary_lines(c: &Comparison) -> Vec<String> {
    c.comparisons
        .iter()
        .filter_map(|x| summary_line(c, x))
        .collect()
}

/// A verdict in a table's words.
fn verdict_words(v: Verdict) -> &'static str {
    v.words()
}

/// The gate's outcome in words.
pub fn gate_words(o: GateOutcome) -> &'static str {
    match o {
        GateOutcome::Pass => "pass",
        GateOutcome::Regression => "regression",
        _ => "inconclusive",
    }
}

/// A Markdown table in hyperfine's shape, by energy: mean ± standard deviation,
/// the 95 % interval, min … max, time, each command relative to the reference and
/// the verdict; then the summary lines and, with a gate, the gate's verdict.
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::from(
        "| Command | Energy [J] | 95 % CI [J] | Min … Max [J] | Time [s] | Relative (energy) | Verdict |\n\
         |:---|---:|---:|---:|---:|---:|:---|\n",
    );
    for (i, s) in c.commands.iter().enumerate() {
        let (mean, ci, range) =
            s.energy_j
                .as_ref()
                .map_or(("-".to_string(), "-".to_string(), "-".to_string()), |e| {
                    (
                        format!("{:.4} ± {:.4}", e.mean, e.std),
                        format!("[{:.4}, {:.4}]", e.ci[0], e.ci[1]),
                        format!("{:.4} … {:.4}", e.min, e.max),
                    )
                });
        let time = s
            .duration_s
            .as_ref()
            .map_or("-".to_string(), |d| format!("{:.4} ± {:.4}", d.mean, d.std));
        let against = c.against_reference(i);
        let (rel, verdict) = if i == c.reference {
            ("1.00 (reference)".to_string(), String::new())
        } else {
            (
                against
                    .and_then(|x| x.energy_ratio.as_ref())
                    .map_or("-".to_string(), |r| {
                        format!("{:.3} [{:.3}, {:.3}]", r.estimate, r.ci[0], r.ci[1])
                    }),
                against.map_or("-".to_string(), |x| {
                    let mut v = verdict_words(x.verdict).to_string();
                    if let Some(g) = x.gate {
                        let _ = write!(v, "; gate: {}", gate_words(g));
                    }
                    v
                }),
            )
        };
        let _ = writeln!(
            out,
            "| `{}` | {mean} | {ci} | {range} | {time} | {rel} | {verdict} |",
            s.command.replace('|', "\\|").replace('`', "'"),
        );
    }
    let lines = summary_lines(c);
    if !lines.is_empty() || c.gate.is_some() {
        out.push('\n');
    }
    for l in lines {
        let _ = writeln!(out, "{}  ", l.replace('|', "\\|"));
    }
    if let Some(g) = &c.gate {
        let _ = writeln!(
            out,
            "Gate (no command more than {} % above the reference): **{}**{}",
            g.fail_if_more_than_pct,
            gate_words(g.outcome()),
            if g.outcome() == GateOutcome::Inconclusive && g.pass_inconclusive {
                " (passed: --pass-inconclusive)"
            } else {
                ""
            }
        );
    }
    out
}

/// One row per run: `command,run,exit_code,duration_s,total_energy_j,
/// total_uncertainty_j`, then `S/DOMAIN_energy_j`, `S/DOMAIN_uncertainty_j` of each
/// domain (pandas: `pd.read_csv(FILE)`).
pub fn csv(c: &Comparison) -> String {
    let domains: Vec<(u32, &str)> = c
        .commands
        .iter()
        .find_map(|s| s.per_run.first())
        .map(|r| {
            r.domains
                .iter()
                .map(|d| (d.socket, d.domain.as_str()))
                .collect()
        })
        .unwrap_or_default();
    let mut out =
        String::from("command,run,exit_code,duration_s,total_energy_j,total_uncertainty_j");
    for (s, d) in &domains {
        let _ = write!(out, ",{s}/{d}_energy_j,{s}/{d}_uncertainty_j");
    }
    out.push('\n');
    for s in &c.commands {
        for (i, r) in s.per_run.iter().enumerate() {
            let (e, u) = r.total().map_or((String::new(), String::new()), |(e, u)| {
                (format!("{e:.9}"), format!("{u:.9}"))
            });
            let _ = write!(
                out,
                "{},{},{},{:.9},{e},{u}",
                field(&s.command),
                i + 1,
                r.exit_code,
                r.duration_s
            );
            for d in &r.domains {
                let _ = write!(out, ",{:.9},{:.9}", d.energy_j, d.uncertainty_j);
            }
            out.push('\n');
        }
    }
    out
}
