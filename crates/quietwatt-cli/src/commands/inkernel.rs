//! `--mechanism ebpf|perf-ring` for `record` and `run`: the kernel samples the energy
//! events and quietwatt drains them at `--drain-hz` (see the library's
//! `quietwatt::inkernel`). The choice itself is the library's
//! (`quietwatt::source::choose::open`; `record` reaches it through
//! `quietwatt-recording`, `run` through [`open`]); what is left here is the
//! in-kernel arguments and their words.

use crate::emulated::Environment;
use crate::exit::Failure;
use quietwatt::inkernel::{self, DEFAULT_DRAIN_HZ};
use quietwatt::source::choose::{self, Choice, ChooseError, MechanismRequest};
use quietwatt::{FreqArg, Hertz, Mechanism, Selection, Source};

/// The in-kernel mechanisms' options.
#[derive(clap::Args, Debug, Clone)]
pub struct InKernelArgs {
    /// ebpf, perf-ring: how often user space drains the kernel's ring buffer, in
    /// wake-ups a second (a ring far behind also wakes it early).
    #[arg(long, value_name = "HZ", default_value_t = DEFAULT_DRAIN_HZ)]
    pub drain_hz: f64,
    /// For tests and benchmarks on machines without RAPL: read software counters of
    /// CPU 0 (cpu-clock as "package", task-clock as "core", nanoseconds counted as
    /// nanojoules) through the chosen mechanism instead of the RAPL events.
    #[arg(long, hide = true)]
    pub stand_in_events: bool,
}

/// Opens `mechanism` (the best polled one when `None`) through the library's one
/// choice (`quietwatt::source::choose::open`): ebpf and perf-ring at `freq`
/// (fixed) drained at `--drain-hz`. Where the kernel refuses perf-ring's group,
/// says so and polls the same events. The counters' own error is kept
/// (`Ok(Err)`), for the fallback to judge; a request that cannot be is a
/// failure.
pub fn open(
    env: &Environment,
    mechanism: Option<Mechanism>,
    args: &InKernelArgs,
    freq: FreqArg,
    selection: &Selection,
) -> Result<Result<Box<dyn Source>, quietwatt::SourceError>, Failure> {
    let request = MechanismRequest::from(mechanism);
    let mut choice = Choice::new(request);
    choice.selection = selection.clone();
    choice.stand_in_events = args.stand_in_events;
    if request.in_kernel() {
        choice.kernel_rate = match freq {
            FreqArg::Fixed(f) => Some(f),
            FreqArg::Auto => None,
        };
        choice.drain = drain(args.drain_hz)?;
    }
    let chosen = match choose::open(&env.root, &choice) {
        Ok(c) => c,
        Err(ChooseError::Source(e)) => return Ok(Err(e)),
        Err(e) => return Err(choose_failure(e)),
    };
    if let (Some(m), Some(reason)) = (mechanism, &chosen.fallback) {
        warn_fallback(m, reason);
    }
    Ok(Ok(chosen.source))
}

/// The warning of an in-kernel mechanism the kernel refused.
pub fn warn_fallback(m: Mechanism, reason: &str) {
    eprintln!(
        "quietwatt: warning: {m}: {reason}; polling the same events through the perf mechanism instead (see `quietwatt doctor`)"
    );
}

/// `--drain-hz` as a rate.
fn drain(hz: f64) -> Result<Hertz, Failure> {
    Hertz::new(hz).map_err(|_| drain_failure(hz))
}

/// An invalid `--drain-hz`, and the fix.
pub fn drain_failure(hz: f64) -> Failure {
    Failure::usage(format!(
        "invalid --drain-hz {hz}: give a number of hertz from 0.001 to 100000"
    ))
}

/// Why the mechanism could not open, in the flags' words.
pub fn choose_failure(e: ChooseError) -> Failure {
    match e {
        ChooseError::Source(e) => e.into(),
        ChooseError::NeedsFixedRate { mechanism } => Failure::usage(format!(
            "--freq auto is not available with --mechanism {mechanism}: the kernel samples at a fixed rate; give --freq HZ"
        )),
        ChooseError::StandInNeedsPerf => Failure::usage(
            "--stand-in-events reads perf software counters: use it with --mechanism perf, ebpf or perf-ring",
        ),
        e => Failure::usage(format!("--stand-in-events: {e}")),
    }
}

/// The in-kernel default of `run`: the point of sampling in the kernel is a high
/// rate at a low cost.
pub const DEFAULT_RUN_HZ: f64 = inkernel::DEFAULT_FREQ_HZ;
