//! In-kernel sampling: the kernel reads the energy counters at the sampling rate and
//! queues the readings; user space drains the queue a few times a second at most.
//!
//! Two mechanisms, both a [`Mode::Buffered`](crate::Mode::Buffered)
//! [`Source`] ([`KernelSource`]) that the same engine as polling drives (the
//! `quietwatt` crate's recordings and sessions):
//! - [`Mechanism::Ebpf`] ([`ebpf`]): a BPF program on a cpu-clock perf event (paper
//!   002, section III-F) reads the energy events with `bpf_perf_event_read_value`
//!   and writes `(time, values)` records to a BPF ring buffer.
//! - [`Mechanism::PerfRing`] ([`perf_ring`]): the lo2s technique (paper 004) without
//!   BPF: a cpu-clock sampling leader with the energy events as group members; each
//!   overflow copies the whole group's counts into the leader's mmap ring.
//!
//! Both sample one CPU per RAPL scope (the PMU's cpumask CPU): the kernel only reads
//! a CPU-wide event on its own CPU (`perf_event_read_local`, and a group is
//! scheduled on one CPU). The sampler thread drains the rings on its timer (1 Hz
//! by default, `--drain-hz`) instead of reading at each tick; the readings go
//! through the engine's same meter (same 64-bit wrap correction), records, ring,
//! writer and sinks, and the same self-accounting, plus what the kernel side can
//! tell ([`KernelCounts`], and the engine's `KernelFigures`: samples taken, ring
//! drops, the BPF program's run time).
//!
//! Nothing is lost silently: a sample the kernel could not queue (full ring) is
//! counted as missed, and since every reading is a counter the next record's deltas
//! hold its energy. The recording starts and ends with a user-space read of the very
//! same perf events, so the energy covers exactly the recording.
//!
//! The code is the same whatever the events: the tests (and `--stand-in-events` on
//! the command line) run it on machines without RAPL with software counters
//! (`stand_in_specs`, with the `testing` feature) in place of the energy events.
//!
//! The ebpf mechanism needs the `bpf` cargo feature (libbpf, and clang at build
//! time); without it [`open`] answers [`Error::FeatureDisabled`] for
//! [`Mechanism::Ebpf`]. perf-ring needs no BPF and is always built.
//!
//! Whether the kernel accepts a RAPL event in a software-led group (it does, through
//! `move_group`, since the RAPL PMU does not look at the group) is worked out from
//! the kernel sources in `docs/in-kernel-sampling.md`; [`perf_ring`] still detects a
//! refusal at open time and [`open`] then falls back to polling the same events.

#[cfg(feature = "bpf")]
pub mod ebpf;
pub mod perf_ring;
mod source;

pub use source::{KernelSide, KernelSource};

use crate::error::{Error, Result};
use crate::perf::{self, EventSpec, PerfEvents};
use crate::root::SysRoot;
use crate::{Channel, Mechanism, Selection, Source};
use quietwatt_core::domain::{Domain, DomainId};
use quietwatt_core::units::EnergyUnit;
use quietwatt_core::Hertz;
use serde::Serialize;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

/// The most events one sampling CPU reads per sample (`QW_MAX_DOMAINS` in
/// `src/bpf/sampler.bpf.c`): 5 RAPL domains with room for stand-ins and new PMUs.
pub const MAX_DOMAINS: usize = 16;

/// The default sampling rate of the in-kernel mechanisms: the point of sampling in
/// the kernel is a high rate at a low cost.
pub const DEFAULT_FREQ_HZ: f64 = 1000.0;

/// The default drain rate: one user-space wake-up a second.
pub const DEFAULT_DRAIN_HZ: f64 = 1.0;

/// How many drain periods of samples a kernel ring holds: the drain wakes at half
/// full, so one late drain (a loaded machine) loses nothing.
pub const RING_PERIODS: f64 = 4.0;

/// One reading the kernel took, as a mechanism hands it to the engine.
#[derive(Debug, Clone, Copy)]
pub struct KernelSample<'a> {
    /// Which group (sampling CPU) took it, an index into the sampler's groups.
    pub group: usize,
    /// CLOCK_MONOTONIC nanoseconds of the reading.
    pub t_ns: u64,
    /// Samples of this group the kernel could not queue just before this one.
    pub lost_before: u64,
    /// The raw 64-bit counts, in the group's event order.
    pub values: &'a [u64],
    /// Bit `i` set: `values[i]` could not be read and is not a reading.
    pub failed: u32,
}

/// What the kernel side counted, for the self-accounting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct KernelCounts {
    /// Samples the kernel took (BPF program runs; perf: received + lost).
    pub taken: u64,
    /// Samples lost because the kernel ring was full.
    pub dropped: u64,
    /// Event reads that failed in the kernel.
    pub read_errors: u64,
    /// perf throttled the sampling event (`PERF_RECORD_THROTTLE`; the rate exceeds
    /// `kernel.perf_event_max_sample_rate` or its CPU-time budget).
    pub throttled: u64,
    /// Nanoseconds the BPF program ran (with BPF run-time statistics enabled).
    pub prog_run_ns: Option<u64>,
    /// Times the BPF program ran while statistics were enabled.
    pub prog_runs: Option<u64>,
}

/// A mechanism whose samples are taken in the kernel and drained in batches;
/// [`KernelSource`] makes it a buffered [`Source`].
pub trait KernelSampler: Send {
    /// Which mechanism this is.
    fn mechanism(&self) -> Mechanism;
    /// The events it samples, as both mechanisms hold them.
    fn events(&self) -> &SampledEvents;
    /// The channels, in the order every reading of the counters fills.
    fn channels(&self) -> &[Channel] {
        &self.events().plan.channels
    }
    /// For each group, the channel each of its events adds to (in event order).
    fn group_channels(&self) -> &[Vec<usize>] {
        &self.events().group_channels
    }
    /// The sampling rate asked of the kernel.
    fn freq(&self) -> Hertz {
        self.events().freq
    }
    /// Things found while opening that are not errors.
    fn notes(&self) -> &[String] {
        &self.events().plan.notes
    }
    /// Starts the kernel sampling.
    fn start(&mut self) -> Result<()>;
    /// Stops it: once this returns, no sample is added to the rings.
    fn stop(&mut self) -> Result<()>;
    /// Reads every event now, from user space, into `out` (one value per event of
    /// every group, groups in order): the same counters the kernel samples, so the
    /// priming and final readings of a recording are consistent with its samples.
    fn read_events(&mut self, out: &mut [u64]) -> Result<()> {
        self.events().read(out)
    }
    /// Events over all groups (the length [`KernelSampler::read_events`] fills).
    fn event_count(&self) -> usize {
        self.events().members.len()
    }
    /// Descriptors that become readable when a ring passes its watermark.
    fn wake_fds(&self) -> Vec<BorrowedFd<'_>>;
    /// Hands every queued sample to `f`, in time order across groups. Allocates
    /// nothing.
    fn drain(&mut self, f: &mut dyn FnMut(&KernelSample<'_>)) -> Result<()>;
    /// Bytes queued in the rings now (for tests and the watermark).
    fn pending_bytes(&self) -> u64;
    /// The kernel side's counts so far (reads the BPF maps: not for the hot path).
    fn kernel_counts(&self) -> KernelCounts;
}

/// The events an in-kernel sampler samples, whatever the mechanism: the plan they
/// were opened by, the channel each group's events add to, the sampling rate, and
/// the events' descriptors in plan order (read from user space at the start and
/// the end of a recording).
#[derive(Debug)]
pub struct SampledEvents {
    plan: Plan,
    group_channels: Vec<Vec<usize>>,
    freq: Hertz,
    members: Vec<OwnedFd>,
}

impl SampledEvents {
    /// The events of `plan`, opened as `members` (in plan order), sampled at `freq`.
    pub(crate) fn new(plan: Plan, freq: Hertz, members: Vec<OwnedFd>) -> SampledEvents {
        SampledEvents {
            group_channels: plan.group_channels(),
            plan,
            freq,
            members,
        }
    }

    /// The plan they were opened by.
    pub(crate) fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Reads every event into `out`, in plan order.
    fn read(&self, out: &mut [u64]) -> Result<()> {
        for ((o, fd), spec) in out
            .iter_mut()
            .zip(&self.members)
            .zip(self.plan.groups.iter().flat_map(|g| &g.events))
        {
            *o = perf::read_count(fd.as_fd()).map_err(|e| Error::Vanished {
                path: spec.origin.clone(),
                source: e,
            })?;
        }
        Ok(())
    }
}

/// Where the BPF object lives while a sampler uses it: the generated skeleton
/// borrows it, so it outlives the sampler ([`KernelSource`] keeps both).
#[derive(Default)]
pub(crate) struct Storage(#[cfg(feature = "bpf")] pub(crate) ebpf::ObjectStorage);

/// What [`open`] gives: the in-kernel source, or the same events polled from user
/// space when the kernel refused the in-kernel arrangement (and why).
pub enum Opened {
    /// The mechanism asked for.
    InKernel(KernelSource),
    /// perf polling of the same events, with the reason the in-kernel form was refused.
    Fallback {
        /// The polling source.
        source: Box<dyn Source>,
        /// Why the kernel refused, for a warning.
        reason: String,
    },
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Opened::InKernel(source) => f.debug_tuple("InKernel").field(source).finish(),
            Opened::Fallback { reason, .. } => f
                .debug_struct("Fallback")
                .field("reason", reason)
                .finish_non_exhaustive(),
        }
    }
}

/// Opens `mechanism` (ebpf or perf-ring) on the RAPL perf events under `root`,
/// sampling at `freq` and sized for draining at `drain`.
pub fn open(
    root: &SysRoot,
    mechanism: Mechanism,
    selection: &Selection,
    freq: Hertz,
    drain: Hertz,
) -> Result<Opened> {
    let (specs, notes) = perf::discover(root).map_err(|e| rename(e, mechanism))?;
    perf::check_real_kernel_has(root).map_err(|e| rename(e, mechanism))?;
    let specs = selection.apply(specs, |s| s.id)?;
    let mut plan = Plan::new(mechanism, specs)?;
    plan.notes = notes;
    open_plan(plan, freq, drain)
}

/// Like [`open`] on explicit events (any PMU, software events included): the tests
/// and `--stand-in-events` use it with the stand-ins (`stand_in_specs`).
pub fn open_specs(
    mechanism: Mechanism,
    specs: Vec<EventSpec>,
    freq: Hertz,
    drain: Hertz,
) -> Result<Opened> {
    open_plan(Plan::new(mechanism, specs)?, freq, drain)
}

/// Opens `mechanism` as a [`Source`] at the default rates: the in-kernel source,
/// or where the kernel refuses perf-ring's group, the same events polled.
pub(crate) fn open_source(
    root: &SysRoot,
    mechanism: Mechanism,
    selection: &Selection,
) -> Result<Box<dyn Source>> {
    let hz = Hertz::clamped;
    Ok(
        match open(
            root,
            mechanism,
            selection,
            hz(DEFAULT_FREQ_HZ),
            hz(DEFAULT_DRAIN_HZ),
        )? {
            Opened::InKernel(s) => Box::new(s),
            Opened::Fallback { source, .. } => source,
        },
    )
}

fn open_plan(mut plan: Plan, freq: Hertz, drain: Hertz) -> Result<Opened> {
    let max_rate = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()
        .and_then(|s| s.trim().parse::<f64>().ok());
    if let Some(n) = max_rate.and_then(|m| throttle_note(plan.mechanism, m, freq)) {
        plan.notes.push(n);
    }
    let stand_in = EventSpec::all_stand_ins(plan.groups.iter().flat_map(|g| &g.events));
    match plan.mechanism {
        #[cfg(feature = "bpf")]
        Mechanism::Ebpf => {
            let (keep, storage) = source::storage();
            let sampler = ebpf::EbpfSampler::open(&mut storage.0, plan, freq, drain)?;
            Ok(Opened::InKernel(KernelSource::new(
                Box::new(sampler),
                keep,
                drain,
                stand_in,
            )))
        }
        #[cfg(not(feature = "bpf"))]
        Mechanism::Ebpf => {
            let _ = drain;
            Err(Error::FeatureDisabled {
                mechanism: Mechanism::Ebpf.name(),
                feature: "bpf",
            })
        }
        Mechanism::PerfRing => {
            let specs: Vec<EventSpec> = plan.groups.iter().flat_map(|g| g.events.clone()).collect();
            match perf_ring::PerfRingSampler::open(plan, freq, drain) {
                Ok(s) => Ok(Opened::InKernel(KernelSource::new(
                    Box::new(s),
                    source::Keep::nothing(),
                    drain,
                    stand_in,
                ))),
                Err(perf_ring::OpenError::GroupRefused(why)) => Ok(Opened::Fallback {
                    source: Box::new(PerfEvents::from_specs(specs)?),
                    reason: why,
                }),
                Err(perf_ring::OpenError::Other(e)) => Err(e),
            }
        }
        other => Err(Error::MechanismUnavailable {
            mechanism: other.name(),
            why: "not an in-kernel mechanism: it is read by the polling sampler".into(),
        }),
    }
}

/// What probing an in-kernel mechanism found: its channels, and notes (including
/// why perf-ring would fall back to polling).
pub fn probe(root: &SysRoot, mechanism: Mechanism) -> (Result<Vec<Channel>>, Vec<String>) {
    let opened = open(
        root,
        mechanism,
        &Selection::all(),
        Hertz::clamped(10.0),
        Hertz::clamped(DEFAULT_DRAIN_HZ),
    );
    match opened {
        Ok(Opened::InKernel(mut s)) => {
            let mut buf = vec![0u64; s.channels().len()];
            let r = s.read(&mut buf).map(|()| s.channels().to_vec());
            (r, s.notes().to_vec())
        }
        Ok(Opened::Fallback { source, reason }) => (
            Err(Error::MechanismUnavailable {
                mechanism: mechanism.name(),
                why: format!(
                    "{reason}; the perf-ring mechanism falls back to polling the same events ({} channel(s))",
                    source.channels().len()
                ),
            }),
            Vec::new(),
        ),
        Err(e) => (Err(e), Vec::new()),
    }
}

/// Software counters standing in for the energy events on `cpu`: `cpu-clock` as
/// the package and `task-clock` as the core (nanoseconds, reported as "joules" of
/// 1e-9). They exercise exactly the code the RAPL events go through, on any machine.
/// With the `testing` feature (test stand-ins are not energy: they are kept out of
/// the default API).
#[cfg(any(test, feature = "testing"))]
pub fn stand_in_specs(cpu: u32) -> Vec<EventSpec> {
    stand_ins(cpu)
}

/// [`check_machinery`]'s events, whatever the features.
fn stand_ins(cpu: u32) -> Vec<EventSpec> {
    use perf_event_open_sys::bindings::{
        PERF_COUNT_SW_CPU_CLOCK, PERF_COUNT_SW_TASK_CLOCK, PERF_TYPE_SOFTWARE,
    };
    let spec = |domain, config: u32, name: &str| {
        let mut s = EventSpec::new(
            DomainId::new(0, domain),
            PERF_TYPE_SOFTWARE,
            config as u64,
            cpu,
            EnergyUnit::Scale(1e-9),
        );
        s.origin = PathBuf::from(format!("software/{name}@cpu{cpu} (stand-in)"));
        s
    };
    vec![
        spec(Domain::Package, PERF_COUNT_SW_CPU_CLOCK, "cpu-clock"),
        spec(Domain::Core, PERF_COUNT_SW_TASK_CLOCK, "task-clock"),
    ]
}

/// The events of one sampling CPU (and, for perf-ring, one PMU: the kernel groups
/// events of one hardware PMU only).
#[derive(Debug, Clone)]
pub(crate) struct Group {
    /// The CPU the group samples on.
    pub cpu: u32,
    /// Its events, in the order of every reading.
    pub events: Vec<EventSpec>,
    /// The channel each event adds to.
    pub channels: Vec<usize>,
}

/// The events to open, grouped by sampling CPU, and the channels they add up to.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    pub mechanism: Mechanism,
    pub channels: Vec<Channel>,
    pub groups: Vec<Group>,
    pub notes: Vec<String>,
}

impl Plan {
    /// Groups `specs` by CPU (and by PMU for perf-ring); specs sharing a
    /// [`DomainId`] are summed into one channel (AMD's per-core events), so they
    /// must share a unit.
    pub(crate) fn new(mechanism: Mechanism, specs: Vec<EventSpec>) -> Result<Plan> {
        let unavailable = |why: String| Error::MechanismUnavailable {
            mechanism: mechanism.name(),
            why,
        };
        if specs.is_empty() {
            return Err(unavailable("no event to sample".into()));
        }
        let mut channels: Vec<Channel> = Vec::new();
        let mut groups: Vec<Group> = Vec::new();
        let split_by_pmu = mechanism == Mechanism::PerfRing;
        for spec in specs {
            let slot = perf::summed_channel(&mut channels, &spec).map_err(unavailable)?;
            let gi = groups.iter().position(|g| {
                g.cpu == spec.cpu && (!split_by_pmu || g.events[0].pmu_type == spec.pmu_type)
            });
            let g = match gi {
                Some(i) => &mut groups[i],
                None => {
                    groups.push(Group {
                        cpu: spec.cpu,
                        events: Vec::new(),
                        channels: Vec::new(),
                    });
                    let last = groups.len() - 1;
                    &mut groups[last]
                }
            };
            if g.events.len() == MAX_DOMAINS {
                return Err(unavailable(format!(
                    "more than {MAX_DOMAINS} events on CPU {}: one sample holds at most {MAX_DOMAINS}; select fewer domains",
                    spec.cpu
                )));
            }
            g.events.push(spec);
            g.channels.push(slot);
        }
        Ok(Plan {
            mechanism,
            channels,
            groups,
            notes: Vec::new(),
        })
    }

    /// Events over all groups.
    pub(crate) fn event_count(&self) -> usize {
        self.groups.iter().map(|g| g.events.len()).sum()
    }

    /// The channel each group's events add to.
    pub(crate) fn group_channels(&self) -> Vec<Vec<usize>> {
        self.groups.iter().map(|g| g.channels.clone()).collect()
    }
}

/// Bytes of ring needed for `periods` drain periods of `record`-byte samples from
/// `groups` CPUs at `freq`, drained at `drain`: a power of two, at least `min`.
pub(crate) fn ring_bytes(
    freq: Hertz,
    drain: Hertz,
    groups: usize,
    record: usize,
    min: usize,
) -> usize {
    let per_drain = freq.hz() / drain.hz();
    let want = (per_drain * RING_PERIODS * groups.max(1) as f64 * record as f64).ceil();
    // 1 GiB is far beyond any sane rate; it only bounds a silly --drain-hz.
    let want = want.clamp(min as f64, (1u64 << 30) as f64) as usize;
    want.next_power_of_two()
}

/// A perf discovery or open error told in the in-kernel mechanism's name.
pub(crate) fn rename(e: Error, mechanism: Mechanism) -> Error {
    match e {
        Error::MechanismUnavailable { why, .. } => Error::MechanismUnavailable {
            mechanism: mechanism.name(),
            why,
        },
        Error::NoDomains { root, why, .. } => Error::NoDomains {
            mechanism: mechanism.name(),
            root,
            why,
        },
        other => other,
    }
}

/// A note when perf may throttle the sampling clock of an idle CPU: perf counts a
/// sampling event's overflows between two scheduler ticks and stops the event past
/// `perf_event_max_sample_rate / HZ` of them (`__perf_event_account_interrupt`); an
/// idle CPU stops its tick (NOHZ), so after that many samples of idleness the clock
/// pauses until the CPU wakes. HZ is 100 to 1000: at `freq` that is after
/// `max_rate / (HZ * freq)` seconds, at worst `max_rate / (1000 * freq)`.
fn throttle_note(mechanism: Mechanism, max_rate: f64, freq: Hertz) -> Option<String> {
    let worst_s = max_rate / (1000.0 * freq.hz());
    if worst_s >= 10.0 {
        return None;
    }
    let loss = match mechanism {
        Mechanism::PerfRing => "the samples and, since Linux 6.16 (which throttles whole groups), the energy of the pause are missing",
        _ => "samples are missing but the energy stays complete",
    };
    Some(format!(
        "kernel.perf_event_max_sample_rate is {max_rate}: on an idle CPU (no scheduler tick) perf pauses a {} Hz sampling clock \
         after {:.1} to {:.1} s without a tick, until the CPU wakes ({loss}); \
         `sudo sysctl kernel.perf_event_max_sample_rate={}` avoids it",
        freq.hz(),
        worst_s,
        worst_s * 10.0,
        ((freq.hz() * 10_000.0).max(max_rate)).ceil() as u64
    ))
}

/// The sampling period of `freq` in whole nanoseconds (cpu-clock's unit), at least
/// the kernel's 10 µs floor for hrtimer-based software events.
pub fn period_ns(freq: Hertz) -> u64 {
    ((1e9 / freq.hz()).round() as u64).max(10_000)
}

/// The fix when the kernel refuses a BPF or system-wide perf operation.
pub fn bpf_permission_fix() -> String {
    format!(
        "the ebpf mechanism needs CAP_BPF and CAP_PERFMON (Linux 5.8+; CAP_SYS_ADMIN before), or root: \
         `sudo setcap cap_bpf,cap_perfmon=ep $(which quietwatt)`; {}",
        perf::permission_fix()
    )
}

pub(crate) use quietwatt_sys::perf::{
    enable as perf_enable, event_id as perf_id, open_cpu_event as perf_open,
};

/// A cpu-clock sampling event on `cpu` firing every `period_ns`, opened disabled:
/// the clock of both in-kernel mechanisms. CLOCK_MONOTONIC timestamps, like every
/// user-space timestamp of quietwatt.
pub(crate) fn cpu_clock_attr(period_ns: u64) -> perf_event_open_sys::bindings::perf_event_attr {
    use perf_event_open_sys::bindings::{
        perf_event_attr, PERF_COUNT_SW_CPU_CLOCK, PERF_TYPE_SOFTWARE,
    };
    let mut attr = perf_event_attr {
        type_: PERF_TYPE_SOFTWARE,
        config: PERF_COUNT_SW_CPU_CLOCK as u64,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = period_ns;
    attr.set_disabled(1);
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr
}

/// Whether `mechanism`'s in-kernel machinery works on this kernel whatever the
/// energy events: it is opened on the stand-ins of CPU 0 (loaded, attached,
/// read once, never started). For `doctor` on machines without RAPL.
pub fn check_machinery(mechanism: Mechanism) -> Result<()> {
    let opened = open_specs(
        mechanism,
        stand_ins(0),
        Hertz::clamped(10.0),
        Hertz::clamped(DEFAULT_DRAIN_HZ),
    );
    match opened {
        Ok(Opened::InKernel(mut s)) => {
            let mut buf = vec![0u64; s.channels().len()];
            s.read(&mut buf)
        }
        Ok(Opened::Fallback { reason, .. }) => Err(Error::MechanismUnavailable {
            mechanism: mechanism.name(),
            why: reason,
        }),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietwatt_core::counter::Wrap;

    fn spec(socket: u32, domain: Domain, pmu: u32, cpu: u32) -> EventSpec {
        EventSpec::new(
            DomainId::new(socket, domain),
            pmu,
            2,
            cpu,
            EnergyUnit::PowerOfTwo(32),
        )
    }

    #[test]
    fn events_are_grouped_by_cpu_and_for_perf_ring_by_pmu_too() {
        // AMD: package on CPU 0 (power, type 11); per-core energy on CPUs 0 and 2
        // (power_core, type 12), summed into one core channel.
        let specs = vec![
            spec(0, Domain::Package, 11, 0),
            spec(0, Domain::Core, 12, 0),
            spec(0, Domain::Core, 12, 2),
        ];
        let ebpf = Plan::new(Mechanism::Ebpf, specs.clone()).unwrap();
        assert_eq!(ebpf.channels.len(), 2);
        let g: Vec<(u32, Vec<usize>)> = ebpf
            .groups
            .iter()
            .map(|g| (g.cpu, g.channels.clone()))
            .collect();
        assert_eq!(g, vec![(0, vec![0, 1]), (2, vec![1])]);
        assert_eq!(ebpf.event_count(), 3);
        // A group holds one hardware PMU's events only.
        let ring = Plan::new(Mechanism::PerfRing, specs).unwrap();
        let g: Vec<(u32, Vec<usize>)> = ring
            .groups
            .iter()
            .map(|g| (g.cpu, g.channels.clone()))
            .collect();
        assert_eq!(g, vec![(0, vec![0]), (0, vec![1]), (2, vec![1])]);
        assert!(ring.channels.iter().all(|c| c.wrap == Wrap::PERF));
    }

    #[test]
    fn plans_refuse_mixed_units_and_more_events_than_a_sample_holds() {
        let mut other = spec(0, Domain::Package, 23, 1);
        other.unit = EnergyUnit::PowerOfTwo(16);
        let e = Plan::new(
            Mechanism::Ebpf,
            vec![spec(0, Domain::Package, 23, 0), other],
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("different units"), "{e}");
        let many: Vec<EventSpec> = (0..=MAX_DOMAINS as u32)
            .map(|i| spec(i, Domain::Package, 23, 0))
            .collect();
        let e = Plan::new(Mechanism::Ebpf, many).err().unwrap().to_string();
        assert!(e.contains("more than 16 events on CPU 0"), "{e}");
        assert!(Plan::new(Mechanism::PerfRing, Vec::new()).is_err());
    }

    #[test]
    fn rings_hold_several_drain_periods_in_a_power_of_two() {
        let hz = Hertz::clamped;
        // 1 kHz drained at 1 Hz, 168-byte records: 4 x 1000 x 168 = 672 000 -> 1 MiB.
        assert_eq!(ring_bytes(hz(1000.0), hz(1.0), 1, 168, 65536), 1 << 20);
        // Two CPUs: twice as much.
        assert_eq!(ring_bytes(hz(1000.0), hz(1.0), 2, 168, 65536), 2 << 20);
        // Never below the floor, always a power of two.
        assert_eq!(ring_bytes(hz(10.0), hz(1.0), 1, 168, 65536), 65536);
        assert!(ring_bytes(hz(777.0), hz(3.0), 1, 100, 4096).is_power_of_two());
        assert_eq!(period_ns(hz(1000.0)), 1_000_000);
        // cpu-clock's hrtimer does not fire faster than every 10 us.
        assert_eq!(period_ns(hz(1e6_f64.min(100_000.0))), 10_000);
    }

    #[test]
    fn a_low_sample_rate_limit_is_noted_with_the_sysctl() {
        let hz = Hertz::clamped;
        let n = throttle_note(Mechanism::Ebpf, 100_000.0, hz(1000.0)).unwrap();
        assert!(
            n.contains("0.1 to 1.0 s") && n.contains("perf_event_max_sample_rate=10000000"),
            "{n}"
        );
        assert!(n.contains("energy stays complete"), "{n}");
        let n = throttle_note(Mechanism::PerfRing, 100_000.0, hz(1000.0)).unwrap();
        assert!(n.contains("6.16"), "{n}");
        // A limit that allows 10 s of tickless idle at this rate: nothing to say.
        assert!(throttle_note(Mechanism::Ebpf, 10_000_000.0, hz(1000.0)).is_none());
        assert!(throttle_note(Mechanism::Ebpf, 100_000.0, hz(10.0)).is_none());
    }

    // Without the feature, asking for ebpf is an error that names it, not a missing
    // symbol: before any event is opened or any BPF is tried.
    #[cfg(not(feature = "bpf"))]
    #[test]
    fn without_the_bpf_feature_ebpf_opens_to_a_feature_disabled_error() {
        let hz = Hertz::clamped;
        let e = open_specs(Mechanism::Ebpf, stand_in_specs(0), hz(10.0), hz(1.0))
            .err()
            .expect("no ebpf without the bpf feature");
        assert!(
            matches!(
                e,
                Error::FeatureDisabled {
                    mechanism: "ebpf",
                    feature: "bpf"
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("`bpf` feature"), "{e}");
        let e = check_machinery(Mechanism::Ebpf).unwrap_err();
        assert!(matches!(e, Error::FeatureDisabled { .. }), "{e:?}");
    }

    #[test]
    fn stand_ins_are_software_counters_in_nanoseconds() {
        let s = stand_in_specs(3);
        assert_eq!(s.len(), 2);
        assert!(s
            .iter()
            .all(|e| e.cpu == 3 && e.unit == EnergyUnit::Scale(1e-9)));
        assert_eq!(s[0].id.domain, Domain::Package);
        assert!(s[0].origin.to_string_lossy().contains("stand-in"));
    }
}
