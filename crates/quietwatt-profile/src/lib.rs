//! Where in the code the energy went: call stacks sampled with perf_event on the
//! energy samples' clock (CLOCK_MONOTONIC), each package interval's energy split
//! among the stacks sampled in it, in integer µJ with nothing lost, written as
//! folded stacks.
//!
//! The first phase of `quietwatt profile` (issue 25): the library only.
//!
//! - [`sampler`]: the perf_event sampler ([`Profiler`]): per CPU, system-wide or
//!   following a process tree; `cycles` where a PMU counts them, `cpu-clock`
//!   otherwise ([`EventChoice`] says which and why); frame-pointer call chains,
//!   user and kernel; lost samples counted ([`Counts`]).
//! - [`stack`]: stacks and their table ([`Stack`], [`StackId`], [`StackTable`]),
//!   the samples ([`StackSample`]).
//! - [`split`]: energy per stack, conserved exactly on every interval
//!   ([`split_energy`]), the model and its limits.
//! - [`folded`]: folded stacks with µJ counts, frames named through the
//!   [`Symbolizer`] seam ([`Addresses`], [`Modules`]).
//! - [`symbols`]: function names with blazesym ([`Symbols`]): ELF and DWARF
//!   (`file:line` on request), demangled Rust and C++, the kernel's kallsyms, JIT
//!   perf maps; from the mappings the sampler kept ([`MapTable`]), so a command
//!   that has exited is still named; unnamed frames keep module and offset.
//! - [`chains`]: whether the profiled code keeps frame pointers ([`cut_chains`]).
//! - [`error`]: typed errors; a refused `perf_event_open` names its fix.
//! - [`profile`]: one profile end to end ([`run_profile`]): the engine's 1 kHz
//!   energy session and the profiler around a command or the whole machine, the
//!   rows turned into exact µJ intervals, the split; DRAM reported, not split.
//! - [`output`]: the outputs ([`NamedStacks`]): folded stacks, an energy flame
//!   graph (SVG, inferno), the top functions by self energy.
//! - [`interval`]: each function's 95 % energy interval ([`energy_range`]):
//!   the sampling uncertainty (Wilson) widened by the measured energy's bound.
//! - [`pprof`]: pprof's gzipped `profile.proto` ([`write_pprof`]), sample types
//!   `energy/microjoules` and `samples/count`, for `go tool pprof`, Pyroscope
//!   and speedscope.
//!
//! - [`timeline`]: the profile as a timeline for `quietwatt trace`
//!   ([`write_energy_csv`], [`write_stacks_csv`]): the package intervals in
//!   `record`'s CSV format, each stack sample with its µJ beside them.
//!
//! # Example
//!
//! The split and the output need no kernel: two stacks sampled in one package's
//! 1 ms interval of 1000 µJ, weighted 3:1 by their periods.
//!
//! ```
//! use quietwatt_attribution::IdlePower;
//! use quietwatt_profile::{split_energy, write_folded, Addresses, EnergyInterval, Stack, StackSample, StackTable};
//!
//! let mut table = StackTable::new();
//! let hot = table.intern(&Stack { pid: 7, kernel: vec![], user: vec![0x1010, 0x1000] });
//! let cold = table.intern(&Stack { pid: 7, kernel: vec![], user: vec![0x2000] });
//! let at = |time_ns, period, stack| StackSample { time_ns, pid: 7, tid: 7, cpu: 0, period, stack };
//! let samples = [at(400_000, 750_000, hot), at(900_000, 250_000, cold)];
//! let energy = [EnergyInterval { package: 0, start_ns: 0, end_ns: 1_000_000, energy_uj: 1_000 }];
//! let (per_interval, total) = split_energy(&energy, &samples, &[Some(0)], IdlePower::None);
//! assert_eq!(per_interval[0].accounted_uj(), 1_000);
//! assert_eq!(total.stacks[&hot].total_uj(), 750);
//!
//! let mut folded = Vec::new();
//! write_folded(&mut folded, &table, &total, &mut Addresses, true).unwrap();
//! assert_eq!(
//!     String::from_utf8(folded).unwrap(),
//!     "[unknown] 0x1000;[unknown] 0x1010 750\n[unknown] 0x2000 250\n"
//! );
//! ```
//!
//! Sampling a command from its start (root, CAP_PERFMON, or
//! `perf_event_paranoid` <= 1 for kernel stacks):
//!
//! ```no_run
//! use quietwatt_profile::{Options, Profiler, StackTable, Target};
//!
//! // Opened before the spawn: the command inherits the events at its fork and
//! // they start at its exec.
//! let mut profiler = Profiler::open(Options::new(Target::Spawned))?;
//! println!("sampling {} ({})", profiler.event().event.name(), profiler.event().reason);
//! let mut child = std::process::Command::new("gzip").arg("-9k").arg("big.tar").spawn().unwrap();
//! let (mut table, mut samples) = (StackTable::new(), Vec::new());
//! while child.try_wait().unwrap().is_none() {
//!     std::thread::sleep(std::time::Duration::from_millis(10));
//!     profiler.drain(&mut table, &mut samples);
//! }
//! profiler.stop()?;
//! profiler.drain(&mut table, &mut samples);
//! println!("{} samples, {} lost", samples.len(), profiler.counts().lost);
//! # Ok::<(), quietwatt_profile::ProfileError>(())
//! ```
#![deny(missing_docs)]

pub mod chains;
pub mod document;
pub mod error;
pub mod folded;
pub mod interval;
pub mod output;
pub mod pprof;
pub mod profile;
pub mod sampler;
pub mod split;
pub mod stack;
pub mod symbols;
pub mod timeline;

pub use chains::{cut_chains, CutChains};
pub use document::{ProfileDocument, TopFunction};
pub use error::{perf_event_paranoid, ProfileError, Result};
pub use folded::{write_folded, Addresses, Modules, Symbolizer};
pub use interval::{energy_range, wilson, EnergyRange};
pub use output::{Format, FunctionEnergy, NamedStacks};
pub use pprof::{write_pprof, PprofHeader};
pub use profile::{run_profile, Hooks, ProfileOutcome, ProfileRun, RunError, Workload};
/// The idle power a profile sets apart ([`ProfileRun::idle`]), attribution's.
pub use quietwatt_attribution::IdlePower;
pub use sampler::{Counts, EventChoice, EventRequest, Options, Profiler, SampledEvent, Target};
pub use split::{split_energy, EnergyInterval, IntervalSplit, StackEnergy, StackPart, StackTotal};
pub use stack::{Stack, StackId, StackSample, StackTable};
pub use symbols::{MapTable, Mapping, SymbolCounts, SymbolOptions, Symbols};
pub use timeline::{sample_energy, stacks_path, write_energy_csv, write_stacks_csv};
