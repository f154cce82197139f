//! `--mechanism ebpf|perf-ring` for `record` and `run`: the kernel samples the energy
//! events and quietwatt drains them at `--drain-hz` (see the library's
//! `quietwatt::inkernel`). `record` and `run` call [`open`] where they open a
//! source, and hand over to [`record`] or [`run`] when it gives an in-kernel sampler.

use super::events::RecordEventsArgs;
use super::{rate_words, SamplerArgs};
use crate::emulated::Environment;
use crate::exit::{Failure, MEASUREMENT};
use crate::signals::{install, STOP};
use quietwatt::inkernel::{self, InKernelConfig, KernelSampler, Storage, DEFAULT_DRAIN_HZ};
use quietwatt::sink::OutputFile;
use quietwatt::source::perf::PerfEvents;
use quietwatt::{source, Format, FreqArg, Hertz, Mechanism, Metadata, Rate, Selection, Source};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

/// The in-kernel mechanisms' options.
#[derive(clap::Args, Debug, Clone)]
pub struct InKernelArgs {
    /// ebpf, perf-ring: how often user space drains the kernel's ring buffer, in
    /// wake-ups a second (a ring far behind also wakes it early).
    #[arg(long, value_name = "HZ", default_value_t = DEFAULT_DRAIN_HZ)]
    drain_hz: f64,
    /// For tests and benchmarks on machines without RAPL: read software counters of
    /// CPU 0 (cpu-clock as "package", task-clock as "core", nanoseconds counted as
    /// nanojoules) through the chosen mechanism instead of the RAPL events.
    #[arg(long, hide = true)]
    stand_in_events: bool,
}

/// What [`open`] found for the chosen mechanism.
pub enum Opened<'s> {
    /// A source for the polling sampler (every mechanism but ebpf and perf-ring, and
    /// perf-ring where the kernel refuses its group).
    Polling(Box<dyn Source>),
    /// An in-kernel sampler.
    InKernel(Box<dyn KernelSampler + 's>),
}

/// The in-kernel rate: a fixed `--freq` (`auto` needs a sampler that changes its
/// own period; the in-kernel clocks are set once).
fn fixed(mechanism: Mechanism, freq: FreqArg) -> Result<Hertz, Failure> {
    match freq {
        FreqArg::Fixed(f) => Ok(f),
        FreqArg::Auto => Err(Failure::usage(format!(
            "--freq auto is not available with --mechanism {mechanism}: the kernel samples at a fixed rate; give --freq HZ"
        ))),
    }
}

/// Opens `mechanism` as the polling sampler needs it, or as an in-kernel sampler
/// (ebpf, perf-ring) at `freq`, borrowing `storage` for the BPF object. Where the
/// kernel refuses perf-ring's group, says so and polls the same events.
pub fn open<'s>(
    storage: &'s mut Storage,
    env: &Environment,
    mechanism: Option<Mechanism>,
    args: &InKernelArgs,
    freq: FreqArg,
    selection: &Selection,
) -> Result<Opened<'s>, Failure> {
    let in_kernel = matches!(mechanism, Some(Mechanism::Ebpf | Mechanism::PerfRing));
    if !in_kernel {
        if args.stand_in_events {
            if mechanism != Some(Mechanism::Perf) {
                return Err(Failure::usage(
                    "--stand-in-events reads perf software counters: use it with --mechanism perf, ebpf or perf-ring",
                ));
            }
            // The polling twin of the in-kernel stand-ins, for side-by-side figures.
            let s = PerfEvents::from_specs(inkernel::stand_in_specs(0))?;
            return Ok(Opened::Polling(Box::new(s)));
        }
        return Ok(Opened::Polling(source::open(
            &env.root, mechanism, selection,
        )?));
    }
    let m = mechanism.unwrap_or(Mechanism::Ebpf);
    let freq = fixed(m, freq)?;
    let drain = Hertz::new(args.drain_hz).map_err(|_| {
        Failure::usage(format!(
            "invalid --drain-hz {}: give a number of hertz above 0 and at most 100000",
            args.drain_hz
        ))
    })?;
    let opened = if args.stand_in_events {
        inkernel::open_specs(storage, m, inkernel::stand_in_specs(0), freq, drain)?
    } else {
        inkernel::open(storage, &env.root, m, selection, freq, drain)?
    };
    Ok(match opened {
        inkernel::Opened::InKernel(s) => {
            for n in s.notes() {
                eprintln!("quietwatt: note: {n}");
            }
            Opened::InKernel(s)
        }
        inkernel::Opened::Fallback { source, reason } => {
            eprintln!(
                "quietwatt: warning: {m}: {reason}; polling the same events through the perf mechanism instead (see `quietwatt doctor`)"
            );
            Opened::Polling(source)
        }
    })
}

/// What `record` passes on for an in-kernel recording.
pub struct RecordArgs<'a> {
    /// `-o`.
    pub output: &'a Path,
    /// `--format`.
    pub format: Format,
    /// The output, already created.
    pub file: OutputFile,
    /// `--freq`.
    pub freq: FreqArg,
    /// `--cpu`, `--rt`.
    pub sampler: &'a SamplerArgs,
    /// `--duration`.
    pub duration: Option<Duration>,
    /// `--json`.
    pub json: bool,
    /// `--events`, `--trace`.
    pub events: &'a RecordEventsArgs,
    /// `--drain-hz`.
    pub in_kernel: &'a InKernelArgs,
}

/// The in-kernel configuration for these options.
fn config(
    env: &Environment,
    s: &dyn KernelSampler,
    sampler: &SamplerArgs,
    args: &InKernelArgs,
) -> Result<InKernelConfig, Failure> {
    // --cpu and --rt as the polling sampler reads them; they apply to the drain thread.
    let engine = sampler.config(FreqArg::Fixed(s.freq()), &env.root)?;
    let mut c = InKernelConfig::new(Hertz::clamped(args.drain_hz));
    c.cpu = engine.cpu;
    c.realtime = engine.realtime;
    Ok(c)
}

/// `record` through an in-kernel sampler.
pub fn record(
    env: &Environment,
    mut sampler: Box<dyn KernelSampler + '_>,
    a: RecordArgs<'_>,
) -> Result<ExitCode, Failure> {
    let mut c = config(env, sampler.as_ref(), a.sampler, a.in_kernel)?;
    c.duration = a.duration;
    let rate = Rate::Fixed(fixed(sampler.mechanism(), a.freq)?);
    let mut meta = Metadata::new(sampler.mechanism().name(), &rate, &env.root);
    meta.push("emulated", env.is_emulated().to_string());
    meta.push("root", env.root.dir().display().to_string());
    meta.push("drain_hz", c.drain.hz().to_string());
    if a.in_kernel.stand_in_events {
        meta.push("stand_in_events", "cpu-clock,task-clock@cpu0".to_string());
    }
    let mut sink = a.format.sink(a.file);
    let events = super::events::start(env, a.events, a.output, &meta)?;
    install();
    eprintln!(
        "quietwatt: recording {} domain(s) sampled in the kernel ({}) at {}, drained at {} Hz, to {} ({}){}",
        sampler.channels().len(),
        sampler.mechanism(),
        rate_words(&rate),
        c.drain.hz(),
        a.output.display(),
        a.format,
        if a.duration.is_none() { " until Ctrl-C" } else { "" }
    );
    let r = inkernel::record(sampler.as_mut(), sink.as_mut(), a.output, &meta, &c, &STOP)?;
    let rec = &r.recording;
    let events = super::events::stop(events, a.events, a.output, &rec.report, env)?;
    for w in &rec.warnings {
        eprintln!("quietwatt: warning: {w}");
    }
    if a.json {
        let mut v = super::record::summary_json(rec, a.output, a.format, env.is_emulated(), &rate);
        v["kernel"] = serde_json::to_value(&r.kernel).unwrap_or_default();
        events.add_json(&mut v);
        println!("{}", serde_json::to_string(&v).unwrap_or_default());
    } else {
        super::run::print_report(
            &a.output.display().to_string(),
            &rec.report,
            &rate,
            env.is_emulated(),
        );
        eprintln!(
            "  {} samples written, {} lost in the kernel (their energy is in the next sample)",
            rec.samples, rec.missed_deadlines
        );
        eprintln!("{}", rec.overhead);
        eprintln!("{}", r.kernel);
        events.print();
    }
    match &rec.error {
        None => events.error().map_or(Ok(ExitCode::SUCCESS), Err),
        Some(e) => Err(super::record::failure(e, rec.samples)),
    }
}

/// The in-kernel default of `run`: the point of sampling in the kernel is a high
/// rate at a low cost.
pub const DEFAULT_RUN_HZ: f64 = 1000.0;

/// What `run` passes on for an in-kernel measurement.
pub struct RunArgs<'a> {
    /// `--cpu`, `--rt`.
    pub sampler: &'a SamplerArgs,
    /// `--json`.
    pub json: bool,
    /// The command and its arguments.
    pub command: &'a [String],
    /// `--drain-hz`.
    pub in_kernel: &'a InKernelArgs,
}

/// `run` through an in-kernel sampler.
pub fn run(
    env: &Environment,
    mut sampler: Box<dyn KernelSampler + '_>,
    a: RunArgs<'_>,
) -> Result<ExitCode, Failure> {
    let c = config(env, sampler.as_ref(), a.sampler, a.in_kernel)?;
    let rate = Rate::Fixed(sampler.freq());
    let Some((program, rest)) = a.command.split_first() else {
        return Err(Failure::usage("no command to run"));
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest);
    install();
    let r = inkernel::measure_watched(
        sampler.as_mut(),
        &mut cmd,
        &c,
        &mut crate::signals::forward_to_command,
    )?;
    let m = &r.measured;
    let exit_code = super::run::exit_code(m.status);
    for w in &m.warnings {
        eprintln!("quietwatt: warning: {w}");
    }
    if a.json {
        let rate = Rate::Fixed(sampler.freq());
        let mut v = super::run::summary_json(m, exit_code, env.is_emulated(), &rate);
        v["kernel"] = serde_json::to_value(&r.kernel).unwrap_or_default();
        println!("{}", serde_json::to_string(&v).unwrap_or_default());
    } else {
        super::run::print_report(&a.command.join(" "), &m.report, &rate, env.is_emulated());
        eprintln!("{}", m.overhead);
        eprintln!("{}", r.kernel);
    }
    if let Some(e) = &m.error {
        return Err(Failure::new(
            MEASUREMENT,
            format!("the measurement stopped early: {e}; the figures above cover only the time before it"),
        ));
    }
    Ok(ExitCode::from(exit_code.clamp(0, 255) as u8))
}
