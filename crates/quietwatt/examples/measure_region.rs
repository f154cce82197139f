//! Measures a closure that busy-loops for one second and prints its energy as one
//! JSON object, in the shape of `quietwatt run --json` (`duration_s`,
//! `total_energy_j`, `total_uncertainty_j`, `total_rule`, `mechanism`, `domains`).
//!
//! The counters are looked up under `QUIETWATT_ROOT` (an emulator's mount point,
//! e.g. one that `quietwatt emulate` mounts) or `/`. Without RAPL it exits with
//! status 1 and the library's error on stderr.
//!
//! ```text
//! QUIETWATT_ROOT=/tmp/rapl cargo run -p quietwatt --example measure_region
//! ```

use quietwatt::SessionConfig;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Spins on this thread for `d`; returns the iterations, so that the loop is not
/// optimized away.
fn busy_for(d: Duration) -> u64 {
    let end = Instant::now() + d;
    let mut n = 0u64;
    while Instant::now() < end {
        n = std::hint::black_box(n.wrapping_add(1));
    }
    n
}

fn main() -> ExitCode {
    match quietwatt::measure(SessionConfig::from_env(), || {
        busy_for(Duration::from_secs(1))
    }) {
        Ok((_, report)) => {
            match serde_json::to_string(&report) {
                Ok(json) => println!("{json}"),
                Err(e) => {
                    eprintln!("error: cannot write the report as JSON: {e}");
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
