//! `quietwatt doctor`: does each mechanism work here, and if not, the fix.

use crate::emulated::Environment;
use crate::exit::{Failure, NO_RAPL};
use quietwatt::doctor::diagnose;
use std::process::ExitCode;

/// Arguments of `doctor`.
#[derive(clap::Args)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Diagnoses every mechanism; fails (exit 69) when none can measure.
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    let d = diagnose(&env.root);
    let any = d.iter().any(|d| d.works);
    if args.json {
        let out = serde_json::json!({"root": env.root.dir(), "emulated": env.is_emulated(), "can_measure": any, "mechanisms": d});
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        for x in &d {
            println!(
                "{} {:<10} {}",
                if x.works { "[ ok ]" } else { "[fail]" },
                x.mechanism.name(),
                x.finding
            );
            if let Some(fix) = &x.fix {
                println!("       {:<10} fix: {fix}", "");
            }
        }
        println!();
        if any {
            println!("quietwatt can measure here.");
        } else {
            println!("quietwatt cannot measure here: no mechanism works (see the fixes above).");
        }
    }
    if any {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Failure::new(NO_RAPL, ""))
    }
}
