//! `quietwatt check`: every mechanism that works here reads the same domains over
//! the same interval; domains where they disagree are flagged.

use super::selection;
use crate::emulated::Environment;
use crate::exit::{Failure, MEASUREMENT};
use quietwatt::source::consistency::cross_check;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `check`.
#[derive(clap::Args)]
pub struct Args {
    /// Domains to compare, comma-separated (default: all).
    #[arg(short, long)]
    domains: Option<String>,
    /// Time between the two rounds of reads: seconds, or with a unit (500ms).
    #[arg(long, default_value = "1", value_parser = super::parse_duration)]
    interval: Duration,
    /// Flag a domain when its readings spread more than this percentage of their mean
    /// (and more than the timing of the reads can explain).
    #[arg(long, default_value_t = 1.0)]
    tolerance: f64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Compares the mechanisms; exits 1 when a domain disagrees beyond the tolerance.
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    if !(args.tolerance.is_finite() && args.tolerance > 0.0) {
        return Err(Failure::usage(
            "--tolerance must be a positive percentage, e.g. 1",
        ));
    }
    let check = cross_check(&env.root, &selection(&args.domains)?, args.interval)?;
    let flagged: Vec<String> = check
        .domains
        .iter()
        .filter(|d| {
            d.relative_disagreement.is_some_and(|r| {
                r * 100.0 > args.tolerance && r > d.timing_uncertainty.unwrap_or(0.0)
            })
        })
        .map(|d| d.id.to_string())
        .collect();
    if args.json {
        let mut v = crate::schema::stamped(&check, "check");
        v["emulated"] = env.is_emulated().into();
        v["tolerance_percent"] = args.tolerance.into();
        v["flagged"] = flagged.clone().into();
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        println!(
            "Energy over {:.3} s, per mechanism (J); spread = (max - min) / mean, \
             timing = the spread the timing of the reads can explain",
            check.interval_s
        );
        for d in &check.domains {
            let readings: Vec<String> = d
                .readings
                .iter()
                .map(|r| format!("{} {:.6}", r.mechanism, r.energy_j.0))
                .collect();
            let spread = d
                .relative_disagreement
                .map_or("-".to_string(), |r| format!("{:.3} %", r * 100.0));
            let timing = d
                .timing_uncertainty
                .map_or(String::new(), |r| format!(" (timing {:.3} %)", r * 100.0));
            let flag = if flagged.contains(&d.id.to_string()) {
                "  DISAGREE"
            } else {
                ""
            };
            println!(
                "  {:<12} {:<50} spread {spread}{timing}{flag}",
                d.id.to_string(),
                readings.join(", ")
            );
        }
        for (m, why) in &check.unavailable {
            println!("  not compared: {m}: {why}");
        }
        for n in &check.notes {
            println!("  note: {n}");
        }
        let blurred = check
            .domains
            .iter()
            .filter_map(|d| d.timing_uncertainty)
            .fold(0.0, f64::max);
        if blurred * 100.0 > args.tolerance {
            println!(
                "  note: over {:.3} s the timing of the reads alone allows {:.2} % of spread, more than \
                 --tolerance {} %: a longer --interval separates real disagreements from timing",
                check.interval_s,
                blurred * 100.0,
                args.tolerance
            );
        }
    }
    if flagged.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Failure::new(
            MEASUREMENT,
            format!(
                "the mechanisms disagree by more than {} % on {} (see the notes for differences the kernel is known to make)",
                args.tolerance,
                flagged.join(", ")
            ),
        ))
    }
}
