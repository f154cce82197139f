//! `--mechanism ebpf`: the BPF program `src/bpf/sampler.bpf.c` on a cpu-clock perf
//! event reads the energy events in the kernel and queues `(time, values)` records in
//! a BPF ring buffer (paper 002, section III-F).
//!
//! **Set-up, per sampling CPU.** One counting perf event per energy event (exactly
//! as the polling `perf` mechanism opens them: CPU-wide, counting, no exclude bit)
//! goes into the `events` PERF_EVENT_ARRAY at consecutive indices; the `groups` map
//! tells the program, for its CPU, how many events to read and from which index. A
//! cpu-clock event on that CPU, sampling every 1/freq s, runs the program. The
//! number of events is data: any count up to [`MAX_DOMAINS`] per CPU, no recompiling.
//!
//! **Draining.** Records are submitted without a wake-up (`BPF_RB_NO_WAKEUP`); the
//! engine reads the ring on its own timer, and the program forces a wake-up only when
//! the ring passes half full. The ring holds [`RING_PERIODS`](super::RING_PERIODS)
//! drain periods. A record the full ring refused is counted (`stats.dropped`) and
//! shows as a gap in the per-CPU sequence number, which the engine reports as missed.
//!
//! **Cost.** With BPF run-time statistics on (`BPF_ENABLE_STATS`, needs
//! CAP_SYS_ADMIN; quietwatt turns them on for the life of the sampler when it may),
//! the program's own run time is read back from the kernel (`run_time_ns`): the
//! kernel side of the price, which no user-space clock sees (paper 002 could not
//! measure it, Table III).
//!
//! **Privileges.** CAP_BPF and CAP_PERFMON (or root); the error says so.

use super::{
    bpf_permission_fix, cpu_clock_attr, perf_enable, perf_open, period_ns, rename, ring_bytes,
    KernelCounts, KernelSample, KernelSampler, Plan, SampledEvents, MAX_DOMAINS,
};
use crate::error::{Error, Result};
use crate::perf::open_counting_event;
use crate::Mechanism;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use quietwatt_core::Hertz;
use quietwatt_sys::ring::BpfRing;
use std::cell::RefCell;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

quietwatt_sys::bpf_skeleton!("sampler");

use skel::{types, SamplerSkel, SamplerSkelBuilder};

/// The record the program writes (`struct qw_sample`). The program is the source of
/// truth; [`EbpfSampler::drain`] refuses records of any other size.
#[repr(C)]
#[derive(Clone, Copy)]
struct RawSample {
    t_ns: u64,
    seq: u64,
    cpu: u32,
    n: u32,
    failed: u32,
    pad: u32,
    values: [u64; MAX_DOMAINS],
}

/// Bytes one record takes in the ring: the record and its 8-byte header.
const RECORD_BYTES: usize = std::mem::size_of::<RawSample>() + 8;

/// Where the BPF object lives while the skeleton borrows it.
pub(crate) struct ObjectStorage(MaybeUninit<OpenObject>);

impl Default for ObjectStorage {
    fn default() -> Self {
        ObjectStorage(MaybeUninit::uninit())
    }
}

thread_local! {
    /// libbpf's messages on this thread since the last [`take_libbpf_log`]: the
    /// verifier's log when a load fails.
    static LIBBPF_LOG: RefCell<String> = const { RefCell::new(String::new()) };
}

fn libbpf_print(_level: libbpf_rs::PrintLevel, msg: String) {
    LIBBPF_LOG.with(|l| {
        let mut l = l.borrow_mut();
        // A verifier log can be long: keep the end, which says what failed.
        if l.len() > 16 * 1024 {
            let cut = l.len() - 8 * 1024;
            let cut = (cut..l.len())
                .find(|&i| l.is_char_boundary(i))
                .unwrap_or(l.len());
            l.drain(..cut);
        }
        l.push_str(&msg);
    });
}

/// Routes libbpf's messages to [`LIBBPF_LOG`] instead of stderr (once per process).
fn capture_libbpf_log() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, libbpf_print)));
    });
    LIBBPF_LOG.with(|l| l.borrow_mut().clear());
}

fn take_libbpf_log() -> String {
    LIBBPF_LOG.with(|l| std::mem::take(&mut *l.borrow_mut()))
}

/// A libbpf failure while `what`, with the fix when it is a permission problem.
fn bpf_error(what: &str, e: libbpf_rs::Error) -> Error {
    let log = take_libbpf_log();
    if e.kind() == libbpf_rs::ErrorKind::PermissionDenied {
        return Error::Permission {
            path: PathBuf::from(format!("bpf(): {what}")),
            fix: bpf_permission_fix(),
        };
    }
    let log = log.trim();
    Error::MechanismUnavailable {
        mechanism: Mechanism::Ebpf.name(),
        why: if log.is_empty() {
            format!("{what}: {e}")
        } else {
            format!("{what}: {e}; libbpf said: {log}")
        },
    }
}

fn io_error(what: String, e: io::Error) -> Error {
    if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
        return Error::Permission {
            path: PathBuf::from(what),
            fix: bpf_permission_fix(),
        };
    }
    Error::KernelSampling {
        cpu: None,
        detail: what,
        source: e,
    }
}

/// The BPF sampler, loaded and attached (sampling starts at [`KernelSampler::start`]).
pub struct EbpfSampler<'obj> {
    // Field order is drop order: detach the program before closing its events.
    // Held, never read: dropping a link detaches the program and closes its clock
    // event (libbpf owns the event's descriptor once attached).
    _links: Vec<libbpf_rs::Link>,
    /// The clock events' descriptors, owned by `_links`.
    leaders: Vec<RawFd>,
    ring: BpfRing,
    ring_fd: OwnedFd,
    skel: SamplerSkel<'obj>,
    events: SampledEvents,
    stats_fd: Option<OwnedFd>,
    /// Group index of each CPU id (usize::MAX: none).
    group_of_cpu: Vec<usize>,
    last_seq: Vec<Option<u64>>,
    /// Kernel counts when sampling started: [`KernelSampler::kernel_counts`] reports
    /// the recording only.
    at_start: KernelCounts,
    bad_records: u64,
}

impl std::fmt::Debug for EbpfSampler<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EbpfSampler")
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

impl<'obj> EbpfSampler<'obj> {
    /// Opens the events of `plan`, loads the program with its maps sized for them and
    /// for draining at `drain`, and attaches it to a cpu-clock event at `freq` on each
    /// sampling CPU (disabled until [`KernelSampler::start`]).
    pub(crate) fn open(
        storage: &'obj mut ObjectStorage,
        mut plan: Plan,
        freq: Hertz,
        drain: Hertz,
    ) -> Result<EbpfSampler<'obj>> {
        capture_libbpf_log();
        // The members: the same counting events as the polling perf mechanism.
        let mut members = Vec::with_capacity(plan.event_count());
        for g in &plan.groups {
            for spec in &g.events {
                let fd = open_counting_event(spec.pmu_type, spec.config, spec.cpu).map_err(
                    |e| match e.raw_os_error() {
                        Some(libc::EACCES | libc::EPERM) => Error::Permission {
                            path: spec.origin.clone(),
                            fix: bpf_permission_fix(),
                        },
                        _ => rename(crate::perf::open_error(spec, e), Mechanism::Ebpf),
                    },
                )?;
                members.push(fd);
            }
        }

        let max_cpu = plan.groups.iter().map(|g| g.cpu).max().unwrap_or(0) as usize;
        let ncpus = libbpf_rs::num_possible_cpus().unwrap_or(0).max(max_cpu + 1);
        let ring_size = ring_bytes(
            freq,
            drain,
            plan.groups.len(),
            RECORD_BYTES,
            16 * quietwatt_sys::ring::page_size(),
        );

        let mut open = SamplerSkelBuilder::default()
            .open(&mut storage.0)
            .map_err(|e| bpf_error("open the BPF object", e))?;
        let set = |m: &mut libbpf_rs::OpenMapMut<'_>, n: usize, what: &str| {
            let n = u32::try_from(n).map_err(|_| Error::MechanismUnavailable {
                mechanism: Mechanism::Ebpf.name(),
                why: format!("{what}: {n} entries do not fit a BPF map"),
            })?;
            m.set_max_entries(n).map_err(|e| bpf_error(what, e))
        };
        set(&mut open.maps.events, members.len(), "size the events map")?;
        set(&mut open.maps.groups, ncpus, "size the groups map")?;
        set(&mut open.maps.samples, ring_size, "size the ring buffer")?;
        let skel = open
            .load()
            .map_err(|e| bpf_error("load the BPF sampler (verifier)", e))?;

        // Fill the maps: each CPU's events at consecutive indices.
        let mut group_of_cpu = vec![usize::MAX; ncpus];
        let mut base = 0usize;
        for (gi, g) in plan.groups.iter().enumerate() {
            for (i, fd) in members[base..base + g.events.len()].iter().enumerate() {
                let key = ((base + i) as u32).to_ne_bytes();
                let val = fd.as_raw_fd().to_ne_bytes();
                skel.maps
                    .events
                    .update(&key, &val, MapFlags::ANY)
                    .map_err(|e| bpf_error("put an event in the events map", e))?;
            }
            let group = types::qw_group {
                n: g.events.len() as u32,
                base: base as u32,
                // Wake user space early at half full: the other half absorbs a late drain.
                wake_at: (ring_size / 2) as u64,
            };
            // SAFETY: qw_group is a plain #[repr(C)] struct of integers (generated
            // from the program's BTF); viewing it as bytes reads initialised memory.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    (&group as *const types::qw_group).cast::<u8>(),
                    std::mem::size_of::<types::qw_group>(),
                )
            };
            skel.maps
                .groups
                .update(&g.cpu.to_ne_bytes(), bytes, MapFlags::ANY)
                .map_err(|e| bpf_error("describe a CPU in the groups map", e))?;
            group_of_cpu[g.cpu as usize] = gi;
            base += g.events.len();
        }

        // The clock: one cpu-clock sampling event per CPU, the program attached, then
        // disabled again (libbpf enables an event when it attaches) until start().
        let mut leaders = Vec::with_capacity(plan.groups.len());
        let mut links = Vec::with_capacity(plan.groups.len());
        for g in &plan.groups {
            let mut attr = cpu_clock_attr(period_ns(freq));
            let fd = perf_open(&mut attr, g.cpu, None).map_err(|e| {
                io_error(
                    format!("open a cpu-clock sampling event on CPU {}", g.cpu),
                    e,
                )
            })?;
            let link = skel
                .progs
                .qw_sample
                .attach_perf_event(fd.as_raw_fd())
                .map_err(|e| {
                    bpf_error(&format!("attach the program to CPU {}'s clock", g.cpu), e)
                })?;
            // From here the link closes the event (libbpf's bpf_link_perf_detach).
            let raw = fd.into_raw_fd();
            links.push(link);
            leaders.push(raw);
            // SAFETY: `raw` stays open while its link (just pushed) lives.
            perf_enable(unsafe { BorrowedFd::borrow_raw(raw) }, false)
                .map_err(|e| io_error(format!("pause the clock of CPU {}", g.cpu), e))?;
        }

        let ring_fd = skel
            .maps
            .samples
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| io_error("duplicate the ring buffer's descriptor".into(), e))?;
        let ring = BpfRing::new(ring_fd.as_fd(), ring_size)
            .map_err(|e| io_error(format!("map the {ring_size}-byte ring buffer"), e))?;

        // Run-time statistics: the program's own cost. Needs CAP_SYS_ADMIN; without
        // it the kernel side's run time is simply not reported.
        // SAFETY: a plain syscall wrapper returning a new descriptor or -errno.
        let stats = unsafe {
            libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME)
        };
        let stats_fd = if stats >= 0 {
            // SAFETY: the kernel just returned this descriptor and nothing else owns it.
            Some(unsafe { OwnedFd::from_raw_fd(stats) })
        } else {
            plan.notes.push(
                "BPF run-time statistics are unavailable (they need CAP_SYS_ADMIN): the program's own CPU time is not reported"
                    .into(),
            );
            None
        };
        let log = take_libbpf_log();
        if !log.trim().is_empty() {
            plan.notes.push(format!("libbpf: {}", log.trim()));
        }

        let n = plan.groups.len();
        Ok(EbpfSampler {
            _links: links,
            leaders,
            ring,
            ring_fd,
            skel,
            events: SampledEvents::new(plan, freq, members),
            stats_fd,
            group_of_cpu,
            last_seq: vec![None; n],
            at_start: KernelCounts::default(),
            bad_records: 0,
        })
    }

    /// Enables or disables every clock event.
    fn clocks(&self, on: bool) -> Result<()> {
        for (&raw, g) in self.leaders.iter().zip(&self.events.plan().groups) {
            // SAFETY: the descriptor stays open while its link in `_links` lives,
            // which is as long as `self`.
            let fd = unsafe { BorrowedFd::borrow_raw(raw) };
            perf_enable(fd, on).map_err(|e| {
                let verb = if on { "start" } else { "stop" };
                io_error(format!("{verb} the clock of CPU {}", g.cpu), e)
            })?;
        }
        Ok(())
    }

    /// Sums the per-CPU counters of the `stats` map and reads the program's run time.
    fn read_counts(&self) -> KernelCounts {
        let mut c = KernelCounts::default();
        if let Ok(Some(per_cpu)) = self
            .skel
            .maps
            .stats
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        {
            for v in per_cpu {
                if v.len() >= std::mem::size_of::<types::qw_stats>() {
                    // SAFETY: the kernel filled at least size_of::<qw_stats>() bytes of
                    // plain integers; read_unaligned makes no alignment assumption.
                    let s: types::qw_stats = unsafe { std::ptr::read_unaligned(v.as_ptr().cast()) };
                    c.taken += s.taken;
                    c.dropped += s.dropped;
                    c.read_errors += s.read_errors;
                }
            }
        }
        if self.stats_fd.is_some() {
            if let Some((ns, runs)) = prog_run_time(self.skel.progs.qw_sample.as_fd()) {
                c.prog_run_ns = Some(ns);
                c.prog_runs = Some(runs);
            }
        }
        c
    }
}

/// `run_time_ns` and `run_cnt` of a loaded program (kept while BPF statistics are on).
fn prog_run_time(fd: BorrowedFd<'_>) -> Option<(u64, u64)> {
    // SAFETY: bpf_prog_info is plain old data; all-zero is a valid value to ask with.
    let mut info: libbpf_rs::libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: the kernel writes at most `len` bytes into `info`, which lives for the call.
    let r = unsafe {
        libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len)
    };
    (r == 0).then_some((info.run_time_ns, info.run_cnt))
}

impl KernelSampler for EbpfSampler<'_> {
    fn mechanism(&self) -> Mechanism {
        Mechanism::Ebpf
    }

    fn events(&self) -> &SampledEvents {
        &self.events
    }

    fn start(&mut self) -> Result<()> {
        // Samples taken between attaching and now are not part of the recording.
        self.ring.consume(&mut |_| {});
        self.last_seq.iter_mut().for_each(|s| *s = None);
        self.at_start = self.read_counts();
        self.clocks(true)
    }

    fn stop(&mut self) -> Result<()> {
        // DISABLE runs on the event's CPU with interrupts off, where the program runs
        // from the clock's interrupt: when it returns, no run is in flight there.
        self.clocks(false)
    }

    fn wake_fds(&self) -> Vec<BorrowedFd<'_>> {
        vec![self.ring_fd.as_fd()]
    }

    fn drain(&mut self, f: &mut dyn FnMut(&KernelSample<'_>)) -> Result<()> {
        let group_of_cpu = &self.group_of_cpu;
        let last_seq = &mut self.last_seq;
        let bad = &mut self.bad_records;
        self.ring.consume(&mut |bytes| {
            if bytes.len() != std::mem::size_of::<RawSample>() {
                *bad += 1;
                return;
            }
            // SAFETY: exactly size_of::<RawSample>() bytes of plain integers, written
            // by the program; read_unaligned makes no alignment assumption.
            let s: RawSample = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
            let Some(&group) = group_of_cpu.get(s.cpu as usize) else {
                *bad += 1;
                return;
            };
            if group == usize::MAX {
                *bad += 1;
                return;
            }
            let lost = match last_seq[group] {
                Some(prev) if s.seq > prev => s.seq - prev - 1,
                _ => 0,
            };
            last_seq[group] = Some(s.seq);
            let n = (s.n as usize).min(MAX_DOMAINS);
            f(&KernelSample {
                group,
                t_ns: s.t_ns,
                lost_before: lost,
                values: &s.values[..n],
                failed: s.failed,
            });
        });
        if self.bad_records > 0 {
            return Err(Error::MechanismUnavailable {
                mechanism: Mechanism::Ebpf.name(),
                why: format!(
                    "{} ring record(s) of an unexpected size or CPU: the BPF object and this build of quietwatt disagree",
                    self.bad_records
                ),
            });
        }
        Ok(())
    }

    fn pending_bytes(&self) -> u64 {
        self.ring.pending()
    }

    fn kernel_counts(&self) -> KernelCounts {
        let now = self.read_counts();
        let a = self.at_start;
        let sub = |x: Option<u64>, y: Option<u64>| match (x, y) {
            (Some(x), Some(y)) => Some(x.saturating_sub(y)),
            (x, _) => x,
        };
        KernelCounts {
            taken: now.taken.saturating_sub(a.taken),
            dropped: now.dropped.saturating_sub(a.dropped),
            read_errors: now.read_errors.saturating_sub(a.read_errors),
            throttled: 0,
            prog_run_ns: sub(now.prog_run_ns, a.prog_run_ns),
            prog_runs: sub(now.prog_runs, a.prog_runs),
        }
    }
}
