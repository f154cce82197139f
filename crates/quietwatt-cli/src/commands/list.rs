//! `quietwatt list`: what can be measured here, through what.

use crate::emulated::Environment;
use crate::exit::Failure;
use quietwatt::source::{probe_all, Mechanism, LIVENESS_WINDOW};
use std::process::ExitCode;

/// Arguments of `list`.
#[derive(clap::Args)]
pub struct Args {
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// List this mechanism only (default: every one).
    #[arg(short, long)]
    mechanism: Option<Mechanism>,
}

/// Lists mechanisms and their domains.
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    let mut probes = probe_all(&env.root);
    if let Some(m) = args.mechanism {
        probes.retain(|p| p.mechanism == m);
    }
    let frozen = format!(
        "but none of its counters changed in {} ms: they are not backed by RAPL hardware (every figure would be 0 J)",
        LIVENESS_WINDOW.as_millis()
    );
    if args.json {
        let doc = quietwatt::source::listing::ListDocument::new(
            env.root.dir(),
            env.is_emulated(),
            &probes,
        );
        let out = quietwatt::document::Document::stamped(&doc);
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        return Ok(ExitCode::SUCCESS);
    }
    for p in &probes {
        match &p.result {
            Ok(ch) => {
                println!(
                    "{:<10} available, {} domain(s){}",
                    p.mechanism.name(),
                    ch.len(),
                    if p.moves == Some(false) {
                        format!("; {frozen}")
                    } else {
                        String::new()
                    }
                );
                println!(
                    "    {:<6} {:<8} {:<22} {:>14} {:>26}  origin",
                    "socket", "domain", "unit", "range (J)", "wraps after (at max W)"
                );
                for c in ch {
                    let p_max = c.id.domain.max_plausible_power();
                    println!(
                        "    {:<6} {:<8} {:<22} {:>14.3} {:>14.1} s ({:>4.0} W)  {}",
                        c.id.socket.0,
                        c.id.domain.name(),
                        c.unit.to_string(),
                        c.wrap.range(c.unit).0,
                        c.wrap.period_at(c.unit, p_max).as_secs_f64(),
                        p_max.0,
                        c.origin.display()
                    );
                }
                for n in &p.notes {
                    println!("    note: {n}");
                }
            }
            Err(e) => println!("{:<10} unavailable: {e}", p.mechanism.name()),
        }
    }
    Ok(ExitCode::SUCCESS)
}
