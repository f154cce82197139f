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
        let v: Vec<serde_json::Value> = probes
            .iter()
            .map(|p| match &p.result {
                Ok(ch) => serde_json::json!({
                    "mechanism": p.mechanism,
                    "available": true,
                    "counters_move": p.moves,
                    "domains": ch.iter().map(|c| serde_json::json!({
                        "socket": c.id.socket,
                        "die": c.id.die,
                        "domain": c.id.domain,
                        "unit_j": c.unit.joules_per_step(),
                        "range_j": c.wrap.range(c.unit).0,
                        "wrap_period_s_at_max_power": c.wrap.period_at(c.unit, c.id.domain.max_plausible_power()).as_secs_f64(),
                        "max_power_assumed_w": c.id.domain.max_plausible_power().0,
                        "origin": c.origin,
                    })).collect::<Vec<_>>(),
                    "notes": p.notes,
                }),
                Err(e) => serde_json::json!({
                    "mechanism": p.mechanism,
                    "available": false,
                    "why": e.to_string(),
                }),
            })
            .collect();
        let mut out = serde_json::json!({
            "root": env.root.dir(),
            "emulated": env.is_emulated(),
            "mechanisms": v,
        });
        crate::schema::stamp(&mut out, "list");
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
