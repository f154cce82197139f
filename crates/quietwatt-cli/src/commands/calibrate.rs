//! `quietwatt calibrate`: fits a power model on this machine's RAPL for
//! machines of the same CPU that have none (the `quietwatt-estimate` crate's
//! sweep); the flags, the progress and the summary.

use super::parse_duration;
use crate::emulated::Environment;
use crate::exit::{Failure, MEASUREMENT, NO_RAPL, OUTPUT};
use quietwatt::estimate::calibrate::{calibrate, Measured, Plan};
use quietwatt::estimate::EstimateError;
use quietwatt::{Session, SessionConfig};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `calibrate`.
#[derive(clap::Args)]
pub struct Args {
    /// Where to write the model (JSON, schema quietwatt.power-model/1).
    #[arg(short, long, value_name = "FILE")]
    output: PathBuf,
    /// Mechanism to measure with (default: the best that works here).
    #[arg(short, long)]
    mechanism: Option<quietwatt::Mechanism>,
    /// How long each load level is measured.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    per_level: Duration,
    /// How many times the sweep is repeated (its points fitted together).
    #[arg(long, default_value_t = 2)]
    repeats: usize,
    /// The most CPUs kept busy [default: every CPU].
    #[arg(long, value_name = "N")]
    max_busy: Option<usize>,
}

/// Sweeps, fits, writes the model, prints its lines and errors.
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let mut plan = Plan::new(args.max_busy.unwrap_or(cpus));
    plan.per_level = args.per_level;
    plan.repeats = args.repeats.max(1);
    if plan.per_level < Duration::from_millis(200) {
        return Err(Failure::usage(
            "--per-level below 200 ms measures the load's start, not its power: give 1s or more",
        ));
    }
    // Checked before minutes of sweeping.
    super::exports::checked(&[], &[("-o", Some(args.output.as_path()))])?;
    let config = SessionConfig::default()
        .root(env.root.clone())
        .mechanism(args.mechanism);
    let of = plan.repeats * plan.levels().len();
    eprintln!(
        "quietwatt: calibrating: {of} levels of {:.1} s (idle, then a compute-bound and a memory-bound kernel on 1 to {} CPUs, {} times){}",
        plan.per_level.as_secs_f64(),
        plan.max_busy,
        plan.repeats,
        if env.is_emulated() {
            "; against quietwatt's EMULATED RAPL: the model describes the emulator, not this machine"
        } else {
            ""
        }
    );
    // Each level: a session of the engine over the span, every socket's package
    // and DRAM summed (the machine as one package).
    let mut measure = |span: Duration| -> Result<Measured, String> {
        let session = Session::start(config.clone()).map_err(|e| e.to_string())?;
        std::thread::sleep(span);
        let m = session.stop().map_err(|e| e.to_string())?;
        let mut energy: Vec<(&'static str, f64)> = Vec::new();
        for d in m
            .energy
            .domains
            .iter()
            .filter(|d| matches!(d.domain, "package" | "dram"))
        {
            match energy.iter_mut().find(|(n, _)| *n == d.domain) {
                Some((_, j)) => *j += d.energy_j.0,
                None => energy.push((d.domain, d.energy_j.0)),
            }
        }
        Ok(Measured::new(
            m.mechanism.name().to_string(),
            m.energy.duration_s,
            energy,
        ))
    };
    let model = calibrate(&plan, env.is_emulated(), &mut measure, &mut |p, i, of| {
        eprintln!(
            "quietwatt: [{i}/{of}] {} on {} thread(s): {:.2} CPUs busy, {}",
            p.kernel.name(),
            p.spinners,
            p.busy_cpus,
            p.watts
                .iter()
                .map(|(d, w)| format!("{d} {w:.2} W"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    })
    .map_err(|e| {
        let code = match &e {
            EstimateError::Measure(_) | EstimateError::Stat { .. } => NO_RAPL,
            EstimateError::Write { .. } => OUTPUT,
            _ => MEASUREMENT,
        };
        Failure::new(code, e.to_string())
    })?;
    model
        .save(&args.output)
        .map_err(|e| Failure::new(OUTPUT, e.to_string()))?;
    println!(
        "Power model of {} ({} CPUs), from busy CPUs:",
        model.cpu, model.cpu.cpus
    );
    println!(
        "  {:<8} {:>10} {:>16} {:>14}",
        "domain", "idle (W)", "per busy CPU (W)", "± error (W)"
    );
    for d in &model.domains {
        println!(
            "  {:<8} {:>10.3} {:>16.3} {:>14.3}",
            d.domain, d.idle_w, d.per_busy_cpu_w, d.error_w
        );
    }
    println!(
        "error: the larger of 2 × the leave-one-out RMSE and the worst leave-one-out residual, over {} points; written to {}",
        model.domains[0].points,
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
