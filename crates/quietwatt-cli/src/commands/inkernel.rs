//! `--mechanism ebpf|perf-ring` for `record` and `run`: the kernel samples the energy
//! events and quietwatt drains them at `--drain-hz` (see the library's
//! `quietwatt::inkernel`). `record` and `run` open every source through [`open`] and
//! drive it through the same engine; what is left here is the in-kernel arguments
//! and the words for a buffered source.

use crate::emulated::Environment;
use crate::exit::Failure;
use quietwatt::inkernel::{self, DEFAULT_DRAIN_HZ};
use quietwatt::source::perf::PerfEvents;
use quietwatt::source::Mode;
use quietwatt::{source, FreqArg, Hertz, Mechanism, Metadata, Selection, Source};

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

/// Opens `mechanism` (the best polled one when `None`): the polled ones as
/// `source::open` does, ebpf and perf-ring at `freq` (fixed) drained at
/// `--drain-hz`. Where the kernel refuses perf-ring's group, says so and polls the
/// same events.
pub fn open(
    env: &Environment,
    mechanism: Option<Mechanism>,
    args: &InKernelArgs,
    freq: FreqArg,
    selection: &Selection,
) -> Result<Box<dyn Source>, Failure> {
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
            return Ok(Box::new(s));
        }
        return Ok(source::open(&env.root, mechanism, selection)?);
    }
    let m = mechanism.unwrap_or(Mechanism::Ebpf);
    let freq = fixed(m, freq)?;
    let drain = Hertz::new(args.drain_hz).map_err(|_| {
        Failure::usage(format!(
            "invalid --drain-hz {}: give a number of hertz from 0.001 to 100000",
            args.drain_hz
        ))
    })?;
    let opened = if args.stand_in_events {
        inkernel::open_specs(m, inkernel::stand_in_specs(0), freq, drain)?
    } else {
        inkernel::open(&env.root, m, selection, freq, drain)?
    };
    Ok(match opened {
        inkernel::Opened::InKernel(s) => Box::new(s),
        inkernel::Opened::Fallback { source, reason } => {
            eprintln!(
                "quietwatt: warning: {m}: {reason}; polling the same events through the perf mechanism instead (see `quietwatt doctor`)"
            );
            source
        }
    })
}

/// The in-kernel lines of a recording's metadata.
pub fn push_meta(meta: &mut Metadata, mode: Mode, args: &InKernelArgs) {
    if let Mode::Buffered { drain, .. } = mode {
        meta.push("drain_hz", drain.hz().to_string());
        if args.stand_in_events {
            meta.push("stand_in_events", "cpu-clock,task-clock@cpu0".to_string());
        }
    }
}

/// The in-kernel default of `run`: the point of sampling in the kernel is a high
/// rate at a low cost.
pub const DEFAULT_RUN_HZ: f64 = inkernel::DEFAULT_FREQ_HZ;

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
