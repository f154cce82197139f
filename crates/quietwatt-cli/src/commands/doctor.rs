//! `quietwatt doctor`: does each mechanism work here, and if not, the fix.

use crate::emulated::Environment;
use crate::exit::{Failure, NO_RAPL};
use quietwatt::doctor::diagnose;
use quietwatt::source::Mechanism;
use std::process::ExitCode;

/// Arguments of `doctor`.
#[derive(clap::Args)]
pub struct Args {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Diagnose this mechanism only (default: every one).
    #[arg(short, long)]
    mechanism: Option<Mechanism>,
}

/// Diagnoses every mechanism (or the one asked for); fails (exit 69) when none of
/// them can measure.
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    let mut d = diagnose(&env.root);
    if let Some(m) = args.mechanism {
        d.retain(|x| x.mechanism == m);
    }
    let any = d.iter().any(|d| d.works);
    if args.json {
        let doc = quietwatt::source::listing::DoctorDocument::new(
            env.root.dir(),
            env.is_emulated(),
            d.clone(),
        );
        let out = quietwatt::document::Document::stamped(&doc);
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        // One fix shared by every failing mechanism (a VM without RAPL) is said
        // once, below them, not once per mechanism.
        let fixes: Vec<&str> = d.iter().filter_map(|x| x.fix.as_deref()).collect();
        let shared = (fixes.len() > 1 && fixes.iter().all(|f| *f == fixes[0])).then(|| fixes[0]);
        for x in &d {
            println!(
                "{} {:<10} {}",
                if x.works { "[ ok ]" } else { "[fail]" },
                x.mechanism.name(),
                x.finding
            );
            if let Some(fix) = x.fix.as_deref().filter(|_| shared.is_none()) {
                println!("       {:<10} fix: {fix}", "");
            }
        }
        if let Some(fix) = shared {
            println!();
            println!("fix, for every mechanism above: {fix}");
        }
        println!();
        match (any, args.mechanism) {
            (true, None) => println!("quietwatt can measure here."),
            (true, Some(m)) => println!("quietwatt can measure here through {}.", m.name()),
            (false, None) => println!(
                "quietwatt cannot measure here: no mechanism works (see the fixes above; `quietwatt --emulate on ...` tries quietwatt against its built-in emulator)."
            ),
            (false, Some(m)) => println!(
                "quietwatt cannot measure here through {} (see the fix above; `quietwatt doctor` checks the others).",
                m.name()
            ),
        }
    }
    if any {
        Ok(ExitCode::SUCCESS)
    } else {
        Err(Failure::new(NO_RAPL, ""))
    }
}
