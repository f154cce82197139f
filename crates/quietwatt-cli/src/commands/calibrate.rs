//! `quietwatt calibrate`: fits a power model on this machine's RAPL for
//! machines of the same CPU that have none (the `quietwatt-estimate` crate's
//! sweep); the flags, the progress and the summary.

use super::parse_duration;
use crate::emulated::Environment;
use crate::exit::{Failure, MEASUREMENT, NO_RAPL, OUTPUT};
use quietwatt::estimate::calibrate::{calibrate, Measured, Plan, Point, Progress, Start};
use quietwatt::estimate::inputs::Input;
use quietwatt::estimate::EstimateError;
use quietwatt::{Session, SessionConfig};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Arguments of `calibrate`.
#[derive(clap::Args)]
pub struct Args {
    /// Where to write the model (JSON, schema quietwatt.power-model/2).
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
    /// Sweep at most this many of the frequencies the governor allows (set
    /// through cpufreq's scaling_max_freq, restored after; root); 0: leave
    /// the frequency to the governor.
    #[arg(long, value_name = "N", default_value_t = 3)]
    frequencies: usize,
}

/// The sweep's progress on stderr.
struct Said;

impl Progress for Said {
    fn start(&mut self, s: &Start) {
        let at = if s.frequencies.is_empty() {
            "at the governor's frequency".to_string()
        } else {
            format!(
                "at {} GHz",
                s.frequencies
                    .iter()
                    .map(|k| format!("{:.2}", *k as f64 * 1e-6))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        eprintln!("quietwatt: {} levels {at}", s.levels);
        for m in &s.missing {
            eprintln!("quietwatt: not an input here: {m}");
        }
    }

    fn point(&mut self, p: &Point, i: usize, of: usize) {
        eprintln!(
            "quietwatt: [{i}/{of}] {} on {} thread(s){}: {:.2} CPUs busy{}, {}",
            p.level.kernel.name(),
            p.level.spinners,
            p.level.khz.map_or(String::new(), |k| format!(
                " at ≤ {:.2} GHz",
                k as f64 * 1e-6
            )),
            p.busy_cpus(),
            if p.inputs[Input::Instructions.index()] > 0.0 {
                format!(
                    ", {:.2} G instructions/s",
                    p.inputs[Input::Instructions.index()]
                )
            } else {
                String::new()
            },
            p.watts
                .iter()
                .map(|(d, w)| format!("{d} {w:.2} W"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

/// Sweeps, fits, writes the model, prints its fits and errors.
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    let mut plan = Plan::new(args.max_busy.unwrap_or(cpus));
    plan.per_level = args.per_level;
    plan.repeats = args.repeats.max(1);
    plan.frequencies = args.frequencies;
    plan.sys = env.root.dir().join("sys");
    if plan.per_level < Duration::from_millis(200) {
        return Err(Failure::usage(
            "--per-level below 200 ms measures the load's start, not its power: give 1s or more",
        ));
    }
    // Checked before minutes of sweeping.
    super::exports::checked(&[], &[("-o", Some(args.output.as_path()))])?;
    // Ctrl-C stops between levels, and the frequency limits are put back.
    crate::signals::install();
    let config = SessionConfig::default()
        .root(env.root.clone())
        .mechanism(args.mechanism);
    eprintln!(
        "quietwatt: calibrating: {:.1} s per level (idle, then a compute-bound and a memory-bound kernel on 1 to {} CPUs, {} times){}",
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
        let end = std::time::Instant::now() + span;
        while std::time::Instant::now() < end && !crate::signals::STOP.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50).min(end - std::time::Instant::now()));
        }
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
    let model = calibrate(
        &plan,
        env.is_emulated(),
        &crate::signals::STOP,
        &mut measure,
        &mut Said,
    )
    .map_err(|e| {
        let code = match &e {
            EstimateError::Measure(_) | EstimateError::Stat { .. } => NO_RAPL,
            EstimateError::Write { .. } => OUTPUT,
            EstimateError::Interrupted { .. } => crate::signals::stopped_status(),
            _ => MEASUREMENT,
        };
        Failure::new(code, e.to_string())
    })?;
    model
        .save(&args.output)
        .map_err(|e| Failure::new(OUTPUT, e.to_string()))?;
    println!("Power model of {} ({} CPUs):", model.cpu, model.cpu.cpus);
    for (k, fit) in std::iter::once(&model.fit)
        .chain(&model.simpler)
        .enumerate()
    {
        let inputs: Vec<Input> = fit.inputs().collect();
        println!(
            "  {} {}:",
            if k == 0 {
                "from"
            } else {
                "where fewer can be read, from"
            },
            inputs
                .iter()
                .map(|i| i.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mut head = format!("    {:<8} {:>9}", "domain", "idle (W)");
        for i in &inputs {
            head += &format!(" {:>22}", format!("W per {}", i.unit()));
        }
        println!("{head} {:>12}", "± error (W)");
        for d in &fit.domains {
            let mut row = format!("    {:<8} {:>9.3}", d.domain, d.idle_w);
            for i in &inputs {
                row += &format!(" {:>22.4}", d.coef(*i));
            }
            println!("{row} {:>12.3}", d.error_w);
        }
    }
    for l in &model.left_out {
        println!("  left out: {l}");
    }
    println!(
        "error: the larger of 2 × the leave-one-out RMSE and the worst leave-one-out residual, over {} points; written to {}",
        model.fit.domains[0].points,
        args.output.display()
    );
    Ok(ExitCode::SUCCESS)
}
