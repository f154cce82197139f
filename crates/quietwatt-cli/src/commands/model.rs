//! `quietwatt model pagefault|ctxswitch|wakeup|all`: energy models of OS events by
//! paper 003's method, written to a JSON file as the runs finish; `model validate`:
//! the model checked on a built-in application it was not fitted on.

use crate::emulated::Environment;
use crate::exit::{Failure, OUTPUT};
use quietwatt::{source, Selection};
use quietwatt_model::file::{EnergySource, FamilyModel, Model};
use quietwatt_model::sweep::{Planned, Progress, DEFAULT_SEED};
use quietwatt_model::{self as model, ctxswitch, scenario, validate, EnergyProbe, Family};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Arguments of `model`.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

/// What to model.
#[derive(clap::Subcommand)]
enum What {
    /// Page faults: NPF, ODPA and COW swept over pages per execution.
    #[command(after_help = crate::help::MODEL_PAGEFAULT)]
    Pagefault(PagefaultArgs),
    /// Context switches: a pipe ping-pong on one CPU against a no-switch baseline.
    #[command(after_help = crate::help::MODEL_CTXSWITCH)]
    Ctxswitch(CtxswitchArgs),
    /// Wake-ups of an idle CPU (the caller/callee experiment of `bench wakeup`).
    #[command(after_help = crate::help::MODEL_WAKEUP)]
    Wakeup(WakeupArgs),
    /// The three families, one after the other, into one file.
    #[command(after_help = crate::help::MODEL_ALL)]
    All(AllArgs),
    /// Checks a model on a built-in application it was not fitted on (a box blur over
    /// an image) run with pre-touched, fresh and forked-copy output buffers:
    /// predicted against measured cost, error |E - M| / M.
    #[command(after_help = crate::help::MODEL_VALIDATE)]
    Validate(ValidateArgs),
}

/// Options every family's sweep takes.
#[derive(clap::Args)]
struct CommonArgs {
    /// The model file, rewritten after every run (Ctrl-C keeps what is done).
    #[arg(short, long, default_value = "quietwatt-model.json")]
    output: PathBuf,
    /// Rounds: each (scenario, count) pair runs once per round, in a shuffled order.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    rounds: u32,
    /// Counts per execution to sweep, comma-separated (pages, switches or wake-ups)
    /// [default: per family]
    #[arg(long, value_delimiter = ',')]
    counts: Vec<u64>,
    /// Executions per measured run [default: enough for the shortest run to last
    /// --min-run-ms, so that the energy source's resolution (1 ms for RAPL) is small
    /// against a run]
    #[arg(long)]
    batch: Option<u32>,
    /// Shortest run when the batch is chosen automatically, in milliseconds.
    #[arg(long, default_value_t = 50)]
    min_run_ms: u64,
    /// Seed of the shuffles.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
}

/// Options of `model pagefault`.
#[derive(clap::Args)]
struct PagefaultArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Most memory the page-fault buffers of one run may take, in MiB (a fault
    /// costs more when a run touches much more memory than the programs it will
    /// price: see docs/energy-models.md).
    #[arg(long, default_value_t = 256)]
    max_mib: u64,
}

/// Options of `model ctxswitch`.
#[derive(clap::Args)]
struct CtxswitchArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// CPU of the context-switch ping-pong (both threads).
    #[arg(long, default_value_t = 0)]
    cpu: u32,
}

/// Options of `model wakeup`.
#[derive(clap::Args)]
struct WakeupArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// CPU of the caller (the waker).
    #[arg(long, default_value_t = 0)]
    cpu: u32,
    /// CPU of the woken thread.
    #[arg(long, default_value_t = 1)]
    callee_cpu: u32,
}

/// Options of `model all`: every family's.
#[derive(clap::Args)]
struct AllArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Most memory the page-fault buffers of one run may take, in MiB.
    #[arg(long, default_value_t = 256)]
    max_mib: u64,
    /// CPU of the context-switch ping-pong (both threads) and of the wake-up caller.
    #[arg(long, default_value_t = 0)]
    cpu: u32,
    /// CPU of the woken thread in the wake-up family.
    #[arg(long, default_value_t = 1)]
    callee_cpu: u32,
}

/// Everything a sweep needs: a family's options, the others at their defaults.
struct SweepArgs {
    output: PathBuf,
    rounds: u32,
    counts: Vec<u64>,
    batch: Option<u32>,
    min_run_ms: u64,
    max_mib: u64,
    cpu: u32,
    callee_cpu: u32,
    seed: u64,
}

impl SweepArgs {
    fn new(c: CommonArgs, max_mib: u64, cpu: u32, callee_cpu: u32) -> SweepArgs {
        SweepArgs {
            output: c.output,
            rounds: c.rounds,
            counts: c.counts,
            batch: c.batch,
            min_run_ms: c.min_run_ms,
            max_mib,
            cpu,
            callee_cpu,
            seed: c.seed,
        }
    }
}

/// Options of `model validate`.
#[derive(clap::Args)]
struct ValidateArgs {
    /// The model file (from `quietwatt model pagefault` or `all`). Long form only:
    /// `-m` is `--mechanism` everywhere.
    #[arg(long)]
    model: PathBuf,
    /// Image side in pixels (one byte per pixel).
    #[arg(long, default_value_t = 2048)]
    size: usize,
    /// Repetitions of each variant, interleaved.
    #[arg(long, default_value_t = 10)]
    reps: u32,
    /// Print one JSON object on stdout instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs the chosen subcommand.
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    match args.what {
        What::Pagefault(a) => sweep(
            env,
            &[Family::Pagefault],
            SweepArgs::new(a.common, a.max_mib, 0, 1),
        ),
        What::Ctxswitch(a) => sweep(
            env,
            &[Family::Ctxswitch],
            SweepArgs::new(a.common, 256, a.cpu, 1),
        ),
        What::Wakeup(a) => sweep(
            env,
            &[Family::Wakeup],
            SweepArgs::new(a.common, 256, a.cpu, a.callee_cpu),
        ),
        What::All(a) => sweep(
            env,
            &Family::ALL,
            SweepArgs::new(a.common, a.max_mib, a.cpu, a.callee_cpu),
        ),
        What::Validate(a) => validate_cmd(env, a),
    }
}

/// The energy probe of this environment, and the sentence that says what it is.
fn probe(env: &Environment) -> (EnergyProbe, String) {
    match source::open(&env.root, None, &Selection::all()) {
        Ok(s) => {
            let mech = s.mechanism().name();
            let p = EnergyProbe::new(Some(s));
            let line = if env.is_emulated() {
                format!("energy: EMULATED ({mech} from quietwatt's RAPL emulator: a constant power profile, so the energy model is that power times the time model, NOT this machine's energy)")
            } else {
                format!("energy: {mech} (this machine's RAPL)")
            };
            (p, line)
        }
        Err(e) => (
            EnergyProbe::new(None),
            format!("energy: none ({e}); time model only (add --emulate auto to try the built-in emulator)"),
        ),
    }
}

fn hms(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

fn plan(family: Family, a: &SweepArgs) -> Result<Vec<Planned>, Failure> {
    let counts = |default: &[u64]| {
        if a.counts.is_empty() {
            default.to_vec()
        } else {
            a.counts.clone()
        }
    };
    let min_run = Duration::from_millis(a.min_run_ms);
    let p = match family {
        Family::Pagefault => scenario::plan(
            &counts(&scenario::DEFAULT_COUNTS),
            a.batch,
            min_run,
            a.max_mib.saturating_mul(1 << 20),
        ),
        Family::Ctxswitch => ctxswitch::plan(
            &counts(&ctxswitch::DEFAULT_COUNTS),
            a.batch,
            min_run,
            a.cpu as usize,
        ),
        Family::Wakeup => Ok(model::wakeup::plan(
            &counts(&model::wakeup::DEFAULT_COUNTS),
            a.cpu,
            a.callee_cpu,
            model::wakeup::DEFAULT_WINDOW,
        )),
    };
    p.map_err(Failure::from)
}

fn sweep(env: &Environment, families: &[Family], a: SweepArgs) -> Result<ExitCode, Failure> {
    if a.counts.len() == 1 || a.counts.contains(&0) {
        return Err(Failure::usage(
            "--counts needs at least two different counts above 0: a slope needs a sweep",
        ));
    }
    let (mut probe, energy_line) = probe(env);
    let mut m = Model::new(
        &env.root,
        EnergySource {
            mechanism: probe.mechanism().map(str::to_string),
            emulated: probe.measures() && env.is_emulated(),
            channels: probe.channels(),
            total_members: probe.total_members().to_vec(),
        },
    );
    eprintln!("quietwatt: model: {energy_line}");
    eprintln!(
        "quietwatt: model: TLB dimension: {}",
        if m.tlb.available {
            "dTLB misses countable, stride sweep not implemented".to_string()
        } else {
            m.tlb.note.clone()
        }
    );
    let path = a.output.clone();
    let mut save = |m: &Model| m.save(&path);
    let tty = std::io::stderr().is_terminal();
    crate::signals::install();
    let mut interrupted = false;
    let mut plots = super::PlotFiles::default();
    for &family in families {
        eprintln!("quietwatt: model {}: calibrating...", family.name());
        let p = plan(family, &a)?;
        let runs: usize = p.iter().map(|x| x.counts.len()).sum::<usize>() * a.rounds as usize;
        eprintln!(
            "quietwatt: model {}: {} scenario(s) ({}) x {} count(s) x {} rounds = {} runs; writing {}",
            family.name(),
            p.len(),
            p.iter()
                .map(|x| format!("{} batch {}", x.scenario.spec().name, x.batch))
                .collect::<Vec<_>>()
                .join(", "),
            p.first().map_or(0, |x| x.counts.len()),
            a.rounds,
            runs,
            a.output.display()
        );
        let mut progress = |p: &Progress| {
            let line = format!(
                "[{:>4}/{}] {}  elapsed {}  ETA {}",
                p.done,
                p.total,
                p.last,
                hms(p.elapsed),
                hms(p.eta)
            );
            if tty {
                eprint!("\r\x1b[2K{line}");
            } else if p.done % 10 == 0 || p.done == p.total {
                eprintln!("{line}");
            }
        };
        interrupted = model::measure(
            &mut m,
            family,
            p,
            a.rounds as usize,
            a.seed,
            &mut probe,
            &crate::signals::STOP,
            &mut save,
            &mut progress,
        )
        .map_err(|e| match e {
            // The sweep only writes the model file: its failure is the output's.
            quietwatt_model::Error::ModelFile { .. } => Failure::new(OUTPUT, e.to_string()),
            e => Failure::from(e),
        })?;
        if tty {
            eprintln!();
        }
        if let Some(f) = m.family(family) {
            print_family(&m, f);
            write_plot(&a.output, f, &mut plots);
        }
        if interrupted {
            eprintln!(
                "quietwatt: interrupted: the runs done are in {} and the fits above use them",
                a.output.display()
            );
            break;
        }
    }
    eprintln!("quietwatt: model written to {}", a.output.display());
    Ok(if interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// Writes the family's time regression beside the model file (`model.json` →
/// `model.pagefault.svg`, and `model.pagefault.png` beside it); a plot that cannot
/// be written is a warning, since the model itself is saved.
fn write_plot(
    output: &std::path::Path,
    f: &quietwatt_model::file::FamilyModel,
    plots: &mut super::PlotFiles,
) {
    let Some(svg) = quietwatt_model::plot::time_svg(f) else {
        return;
    };
    let path = output.with_extension(format!("{}.svg", f.family.name()));
    match plots.write(&svg, &path) {
        Ok(written) => eprintln!("quietwatt: plot of the time fits written to {written}"),
        Err(e) => eprintln!(
            "quietwatt: warning: cannot write the plot {} ({e}); the model file has the data: free space or choose another --output directory to get the plot",
            path.display()
        ),
    }
}

/// `1.234 us [1.1, 1.3]`, scaled to a readable unit.
fn si(v: f64, ci: [f64; 2], unit: &str) -> String {
    let scale = [(1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n")]
        .into_iter()
        .find(|(s, _)| v.abs() >= *s)
        .unwrap_or((1e-9, "n"));
    format!(
        "{:.3} {}{unit} [{:.3}, {:.3}]",
        v / scale.0,
        scale.1,
        ci[0] / scale.0,
        ci[1] / scale.0
    )
}

/// `text`, followed by `: not significant` when the 95 % interval `ci` contains 0.
fn with_verdict(text: String, ci: [f64; 2]) -> String {
    if quietwatt_stats::excludes(ci, 0.0) {
        text
    } else {
        format!("{text}: not significant")
    }
}

fn print_family(m: &Model, f: &FamilyModel) {
    println!();
    println!(
        "Model of {} ({} runs{}; {}; energy: {}):",
        f.family.name(),
        f.runs.len(),
        if f.complete { "" } else { ", INCOMPLETE" },
        m.kernel.release,
        match (&m.energy.mechanism, m.energy.emulated) {
            (Some(mech), true) => format!("EMULATED through {mech}"),
            (Some(mech), false) => mech.clone(),
            (None, _) => "none".into(),
        }
    );
    println!();
    println!(
        "  {:<10} {:>6} {:>10}  {:<36} {:>7}  {:<36} {:>7}",
        "scenario",
        "batch",
        "events/n",
        "time per event (slope, 95% CI)",
        "R2",
        "energy per event (total)",
        "R2"
    );
    for fit in &f.fits {
        let batch = f
            .scenarios
            .iter()
            .find(|s| s.spec.name == fit.scenario)
            .map_or(0, |s| s.batch);
        let (e, r2e) = match &fit.total_energy {
            Some(t) => (si(t.slope, t.slope_ci, "J"), format!("{:.4}", t.r2)),
            None => ("-".into(), "-".into()),
        };
        println!(
            "  {:<10} {:>6} {:>10.4}  {:<36} {:>7.4}  {:<36} {:>7}",
            fit.scenario,
            batch,
            fit.events_per_count,
            si(fit.time.slope, fit.time.slope_ci, "s"),
            fit.time.r2,
            e,
            r2e
        );
    }
    println!();
    for c in &f.costs {
        println!(
            "  cost of one {} event ({}{}): time {}{}",
            c.scenario,
            c.counted,
            c.baseline
                .as_ref()
                .map_or(String::new(), |b| format!(", less the {b} baseline")),
            with_verdict(si(c.seconds_per_event, c.seconds_ci, "s"), c.seconds_ci),
            match (c.total_joules_per_event, c.total_joules_ci) {
                (Some(j), Some(ci)) => format!(
                    ", energy {}{}",
                    with_verdict(si(j, ci, "J"), ci),
                    if m.energy.emulated { " EMULATED" } else { "" }
                ),
                _ => String::new(),
            }
        );
    }
    if m.energy.emulated && !f.costs.is_empty() {
        println!(
            "  note: the energy is EMULATED: the emulator draws a constant power, so an event's true energy of its own is 0 J; the energy per event above is that power times the wall-clock time the event adds to a run{}",
            if f.family == Family::Wakeup {
                " (none here: a wake-up run lasts a fixed time, so the true value is 0 J/event)"
            } else {
                ""
            }
        );
    }
    for n in &f.notes {
        println!("  note: {n}");
    }
}

fn validate_cmd(env: &Environment, a: ValidateArgs) -> Result<ExitCode, Failure> {
    let m = Model::load(&a.model).map_err(Failure::from)?;
    let (mut probe, energy_line) = probe(env);
    eprintln!("quietwatt: model validate: {energy_line}");
    let r = validate::run(&m, a.size, a.reps, &mut probe).map_err(Failure::from)?;
    // The plot goes beside the model file: `model.json` → `model.validation.svg`/.png.
    let svg = validate::plot_svg(&r);
    let path = a.model.with_extension("validation.svg");
    match super::PlotFiles::default().write(&svg, &path) {
        Ok(written) => eprintln!("quietwatt: plot of the validation written to {written}"),
        Err(e) => eprintln!(
            "quietwatt: warning: cannot write the plot {} ({e}); the figures are below: free space or move the model file to a writable directory to get the plot",
            path.display()
        ),
    }
    if a.json {
        let v = crate::schema::stamped(&r, "model-validate");
        println!("{}", serde_json::to_string(&v).unwrap_or_default());
    } else {
        print!("{}", validate::table(&r));
    }
    Ok(ExitCode::SUCCESS)
}
