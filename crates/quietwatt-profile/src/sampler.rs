//! Call-stack sampling with perf_event: one sampling event per CPU, system-wide
//! or following a process tree, each with its own mmap ring
//! ([`quietwatt_sys::ring::PerfRing`]), drained by the caller.
//!
//! Each event samples `cycles` where a hardware PMU counts them, `cpu-clock` (a
//! software hrtimer event) otherwise: which one ran, and why, is
//! [`Profiler::event`]. It samples at a frequency (`freq`), asks for
//! `PERF_SAMPLE_TID | TIME | CPU | PERIOD | CALLCHAIN` stamped on CLOCK_MONOTONIC
//! (`use_clockid`, the energy samples' clock), user and (unless excluded) kernel
//! frame-pointer call chains. A process is followed with `inherit` (its threads and
//! the children it forks after the events are opened), one event per CPU: the
//! kernel maps no ring of an inherited event of "any CPU".
//!
//! **Nothing is lost silently.** A ring mapped read-write is never overwritten:
//! when it is full the kernel counts what it could not write and reports it in a
//! `PERF_RECORD_LOST`; [`Counts::lost`] is the sum of those counts and
//! [`Counts::lost_records`] how many such records came.
//!
//! **Mappings outlive the process.** Every event also asks for the executable
//! mappings and forks of the tasks it follows (`mmap`, `mmap2`, `task`: as perf's
//! tracking event; each is written once, into the ring of the CPU it happened
//! on): [`Profiler::maps`] keeps them per process, so a command that has exited
//! can still be named ([`crate::symbols`]). Processes that ran before the
//! profile (a [`Target::Process`], every task of [`Target::System`]) have their
//! `/proc/PID/maps` read when the events open, or on their first sample.

use crate::error::{open_error, perf_event_paranoid, ProfileError, Result};
use crate::stack::{parse_sample, Stack, StackSample, StackTable};
use crate::symbols::MapTable;
use perf_event_open_sys::bindings::{
    perf_event_attr, PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_SW_CPU_CLOCK, PERF_RECORD_FORK,
    PERF_RECORD_LOST, PERF_RECORD_MMAP, PERF_RECORD_MMAP2, PERF_RECORD_SAMPLE,
    PERF_RECORD_THROTTLE, PERF_RECORD_UNTHROTTLE, PERF_SAMPLE_CALLCHAIN, PERF_SAMPLE_CPU,
    PERF_SAMPLE_PERIOD, PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE,
};
use quietwatt_sys::ring::PerfRing;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

/// What to sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Every task on every online CPU (`perf record -a`).
    System,
    /// A running process: its threads listed in `/proc/PID/task` when the events
    /// are opened, and the threads and processes they start afterwards
    /// (`inherit`). A thread started while the events are being opened can be
    /// missed (as with `perf record -p`): to follow a command from its start, use
    /// [`Target::Spawned`].
    Process {
        /// Its pid.
        pid: i32,
    },
    /// The commands the calling thread spawns after [`Profiler::open`] (`fork`
    /// then `exec`), their threads and children, from their `exec` on: the events
    /// are opened on the calling thread, disabled, with `inherit` and
    /// `enable_on_exec`, so a spawned child inherits them and they start at its
    /// `exec` (how `perf record -- CMD` follows a command from its first
    /// instruction). The calling thread itself and threads it starts without
    /// `exec` are not sampled; [`Profiler::start`] enables nothing (the `exec`
    /// does). Spawn only the command to profile from this thread while it is open.
    Spawned,
}

/// The event that drives the sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampledEvent {
    /// Hardware CPU cycles: the period of a sample is cycles.
    Cycles,
    /// The software cpu-clock (an hrtimer): the period of a sample is ns of CPU time.
    CpuClock,
}

impl SampledEvent {
    /// Its name as perf says it.
    pub fn name(self) -> &'static str {
        match self {
            SampledEvent::Cycles => "cycles",
            SampledEvent::CpuClock => "cpu-clock",
        }
    }
}

/// Which event to ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EventRequest {
    /// Cycles where the PMU has them, cpu-clock otherwise.
    #[default]
    Auto,
    /// This one only.
    Only(SampledEvent),
}

/// The event the profiler uses and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventChoice {
    /// The event sampled.
    pub event: SampledEvent,
    /// Why this one: asked for, or why cycles could not be used.
    pub reason: String,
}

/// How to profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// What to sample.
    pub target: Target,
    /// Samples per second per CPU (perf's `-F`): `freq` and `sample_freq`.
    pub frequency_hz: u64,
    /// Kernel call chains too (a process profile without them needs only
    /// `perf_event_paranoid` 2).
    pub kernel: bool,
    /// Which event.
    pub event: EventRequest,
    /// Data pages of each CPU's ring, a power of two.
    pub ring_pages: usize,
}

impl Options {
    /// About 1 kHz, kernel and user stacks, cycles where available, 64 pages (256
    /// KiB) per CPU: about a quarter of a second of samples with deep stacks.
    pub fn new(target: Target) -> Options {
        Options {
            target,
            // Prime, near 1 kHz: not in lockstep with 1 kHz timers (the energy
            // sampler's among them), which would bias what the samples see.
            frequency_hz: 997,
            kernel: true,
            event: EventRequest::Auto,
            ring_pages: 64,
        }
    }
}

/// What the rings held besides the samples, so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Samples drained.
    pub samples: u64,
    /// Samples the kernel could not write (a full ring): the sum of the
    /// `PERF_RECORD_LOST` counts. The kernel writes that record at its next write
    /// into the ring once there is room: samples lost after the last write of a
    /// profile are never reported, so drain often enough that the ring never fills.
    pub lost: u64,
    /// `PERF_RECORD_LOST` records.
    pub lost_records: u64,
    /// `PERF_RECORD_THROTTLE` records: the kernel lowered the rate.
    pub throttled: u64,
    /// Sample records too short for what they say they hold (skipped).
    pub malformed: u64,
    /// `PERF_RECORD_MMAP2` (or `MMAP`) records: executable mappings reported.
    pub mappings: u64,
}

/// The signature of `perf_event_open(attr, pid, cpu)`: the real one, or a test's.
pub(crate) type OpenFn<'a> = dyn FnMut(&mut perf_event_attr, i32, i32) -> io::Result<OwnedFd> + 'a;

/// A running (or ready) profile: its events and rings.
#[derive(Debug)]
pub struct Profiler {
    // Unmap the rings before closing their events.
    rings: Vec<PerfRing>,
    fds: Vec<OwnedFd>,
    cpus: Vec<u32>,
    event: EventChoice,
    options: Options,
    counts: Counts,
    buf: Vec<u8>,
    stack: Stack,
    maps: MapTable,
}

impl Profiler {
    /// Opens one event per online CPU, disabled until [`Profiler::start`].
    pub fn open(options: Options) -> Result<Profiler> {
        Profiler::open_with(options, &mut |attr, pid, cpu| {
            quietwatt_sys::perf::open_event(attr, pid, cpu, None)
        })
    }

    /// [`Profiler::open`] through `open` instead of the system call: the seam
    /// the tests force a refusal through.
    pub(crate) fn open_with(options: Options, open: &mut OpenFn<'_>) -> Result<Profiler> {
        let cpus = online_cpus()?;
        let (pid, system_wide) = match options.target {
            Target::System => (-1, true),
            Target::Process { pid } => (pid, false),
            Target::Spawned => (0, false),
        };
        // inherit follows only the tasks created after the open: a process's
        // threads that exist already get events of their own (as `perf record -p`).
        let tasks = match options.target {
            Target::Process { pid } => threads(pid),
            Target::System => vec![-1],
            Target::Spawned => vec![0],
        };
        let paranoid = perf_event_paranoid();
        let what = |e: SampledEvent, cpu: u32| match options.target {
            Target::System => format!("{} sampling on CPU {cpu} (system-wide)", e.name()),
            Target::Process { pid } => {
                format!("{} sampling of process {pid} on CPU {cpu}", e.name())
            }
            Target::Spawned => format!(
                "{} sampling of the commands this thread spawns, on CPU {cpu}",
                e.name()
            ),
        };
        let err = |e: SampledEvent, cpu: u32, source: io::Error| {
            open_error(
                what(e, cpu),
                source,
                system_wide,
                options.kernel,
                (pid > 0).then_some(pid),
                paranoid,
            )
        };
        let (first_task, first_cpu) = (tasks[0], cpus[0]);
        let mut probe =
            |e: SampledEvent| open(&mut attr(e, &options), first_task, first_cpu as i32);
        let (event, reason, first_fd) = match options.event {
            EventRequest::Only(e) => {
                let fd = probe(e).map_err(|s| err(e, first_cpu, s))?;
                (e, "asked for".to_string(), fd)
            }
            EventRequest::Auto => match probe(SampledEvent::Cycles) {
                Ok(fd) => (
                    SampledEvent::Cycles,
                    "a hardware PMU counts cycles".to_string(),
                    fd,
                ),
                // No PMU (a VM without one: ENOENT), or one that cannot sample it.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ENOENT | libc::ENODEV | libc::EOPNOTSUPP | libc::EINVAL)
                    ) =>
                {
                    let c = SampledEvent::CpuClock;
                    let fd = probe(c).map_err(|s| err(c, first_cpu, s))?;
                    (
                        c,
                        format!("cycles cannot be sampled here ({e}): no hardware PMU"),
                        fd,
                    )
                }
                Err(e) => return Err(err(SampledEvent::Cycles, first_cpu, e)),
            },
        };
        let mut fds: Vec<OwnedFd> = Vec::with_capacity(cpus.len() * tasks.len());
        let mut rings = Vec::with_capacity(cpus.len());
        let mut first_fd = Some(first_fd);
        for &cpu in &cpus {
            // Every event of a CPU writes into the ring of its first.
            let ring_fd = fds.len();
            for &task in &tasks {
                let fd = match first_fd.take() {
                    Some(fd) => fd,
                    None => match open(&mut attr(event, &options), task, cpu as i32) {
                        Ok(fd) => fd,
                        // A thread that exited since it was listed.
                        Err(e) if e.raw_os_error() == Some(libc::ESRCH) && task != pid => continue,
                        Err(e) => return Err(err(event, cpu, e)),
                    },
                };
                if let Some(to) = fds.get(ring_fd) {
                    quietwatt_sys::perf::set_output(fd.as_fd(), to.as_fd()).map_err(|source| {
                        ProfileError::Sys {
                            what: format!("send thread {task}'s samples to CPU {cpu}'s ring"),
                            source,
                        }
                    })?;
                }
                fds.push(fd);
                if fds.len() == ring_fd + 1 {
                    rings.push(map_ring(&fds[ring_fd], cpu, options.ring_pages, paranoid)?);
                }
            }
        }
        let mut maps = MapTable::new();
        if let Target::Process { pid } = options.target {
            maps.snapshot(pid as u32);
        }
        Ok(Profiler {
            maps,
            rings,
            fds,
            cpus,
            event: EventChoice { event, reason },
            options,
            counts: Counts::default(),
            buf: Vec::new(),
            stack: Stack {
                pid: 0,
                kernel: Vec::new(),
                user: Vec::new(),
            },
        })
    }

    /// The event sampled and why.
    pub fn event(&self) -> &EventChoice {
        &self.event
    }

    /// How it was opened.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The CPUs with an event.
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }

    /// What the rings held so far besides the samples.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The processes' mappings so far (reported, forked, or read from
    /// `/proc/PID/maps`): what names their frames after they exit.
    pub fn maps(&self) -> &MapTable {
        &self.maps
    }

    /// Takes the mappings, leaving none (drain first, for the last records).
    pub fn take_maps(&mut self) -> MapTable {
        std::mem::take(&mut self.maps)
    }

    /// Starts sampling on every CPU (for [`Target::Spawned`], nothing: the
    /// command's `exec` starts it, and enabling would sample the calling thread).
    pub fn start(&self) -> Result<()> {
        if self.options.target == Target::Spawned {
            return Ok(());
        }
        self.enable(true)
    }

    /// Stops sampling on every CPU (drain afterwards for the last samples).
    pub fn stop(&self) -> Result<()> {
        self.enable(false)
    }

    fn enable(&self, on: bool) -> Result<()> {
        for fd in &self.fds {
            quietwatt_sys::perf::enable(fd.as_fd(), on).map_err(|source| ProfileError::Sys {
                what: format!("{} sampling", if on { "start" } else { "stop" }),
                source,
            })?;
        }
        Ok(())
    }

    /// Moves every record the kernel has written out of the rings: samples into
    /// `out` (their stacks into `table`), lost and throttle records into
    /// [`Profiler::counts`]. Returns the samples added. Each ring's records come in
    /// time order; rings are drained one after the other (sort `out` by time to
    /// merge them).
    pub fn drain(&mut self, table: &mut StackTable, out: &mut Vec<StackSample>) -> usize {
        let before = out.len();
        for ring in &self.rings {
            let head = ring.head();
            let mut pos = ring.tail();
            while pos < head {
                let (kind, size) = ring.read_record(pos, &mut self.buf);
                match kind {
                    PERF_RECORD_SAMPLE => match parse_sample(&self.buf, &mut self.stack) {
                        Some(h) => {
                            self.counts.samples += 1;
                            // A task that ran before the profile: its mappings
                            // were never reported, /proc has them while it runs.
                            if self.options.target != Target::Spawned
                                && !self.maps.snapshotted(h.pid)
                            {
                                self.maps.snapshot(h.pid);
                            }
                            let stack = table.intern(&self.stack);
                            out.push(StackSample {
                                time_ns: h.time_ns,
                                pid: h.pid,
                                tid: h.tid,
                                cpu: h.cpu,
                                period: h.period,
                                stack,
                            });
                        }
                        None => self.counts.malformed += 1,
                    },
                    // struct { header; u64 id; u64 lost; sample_id }.
                    PERF_RECORD_LOST => {
                        self.counts.lost_records += 1;
                        if let Some(b) = self.buf.get(8..16) {
                            let mut n = [0u8; 8];
                            n.copy_from_slice(b);
                            self.counts.lost += u64::from_ne_bytes(n);
                        }
                    }
                    PERF_RECORD_MMAP | PERF_RECORD_MMAP2 => {
                        if let Some(m) = parse_mmap(kind, &self.buf) {
                            self.counts.mappings += 1;
                            self.maps.insert(m.pid, m.start, m.len, m.pgoff, m.path);
                        }
                    }
                    // struct { header; u32 pid, ppid, tid, ptid; u64 time }: a new
                    // process (not a thread) starts with its parent's mappings.
                    PERF_RECORD_FORK => {
                        if let (Some(pid), Some(ppid)) =
                            (u32_at(&self.buf, 0), u32_at(&self.buf, 4))
                        {
                            self.maps.fork(ppid, pid);
                        }
                    }
                    PERF_RECORD_THROTTLE => self.counts.throttled += 1,
                    PERF_RECORD_UNTHROTTLE => {}
                    _ => {}
                }
                pos = pos.saturating_add(size).min(head);
            }
            ring.release(pos);
        }
        out.len() - before
    }
}

/// A mapping record's fields.
#[derive(Debug, PartialEq, Eq)]
struct MmapRecord<'a> {
    pid: u32,
    start: u64,
    len: u64,
    pgoff: u64,
    path: &'a str,
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// A `PERF_RECORD_MMAP` or `MMAP2` body (include/uapi/linux/perf_event.h): `u32
/// pid, tid; u64 addr, len, pgoff;` then for MMAP2 `u32 maj, min; u64 ino,
/// ino_generation` (or a build id in the same 24 bytes) `; u32 prot, flags;`,
/// then the file name, NUL-terminated and padded to 8 bytes. `None` when short.
fn parse_mmap(kind: u32, b: &[u8]) -> Option<MmapRecord<'_>> {
    let name_at = if kind == PERF_RECORD_MMAP2 { 64 } else { 32 };
    let name = b.get(name_at..)?;
    let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
    Some(MmapRecord {
        pid: u32_at(b, 0)?,
        start: u64_at(b, 8)?,
        len: u64_at(b, 16)?,
        pgoff: u64_at(b, 24)?,
        path: std::str::from_utf8(name).ok()?,
    })
}

/// Maps the ring of CPU `cpu`'s first event.
fn map_ring(fd: &OwnedFd, cpu: u32, pages: usize, paranoid: Option<i32>) -> Result<PerfRing> {
    PerfRing::new(fd.as_fd(), pages).map_err(|e| {
        let what = format!(
            "map the {} KiB perf ring of CPU {cpu}",
            pages * quietwatt_sys::ring::page_size() / 1024
        );
        match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => ProfileError::Permission {
                what,
                paranoid,
                fix: "the rings exceed kernel.perf_event_mlock_kb for this user: run as root, \
                      raise it (`sudo sysctl kernel.perf_event_mlock_kb=4096`) or use fewer ring pages"
                    .to_string(),
                source: e,
            },
            _ => ProfileError::Sys { what, source: e },
        }
    })
}

/// The threads of `pid` (`/proc/PID/task`), `pid` first; `pid` alone where they
/// cannot be listed (its open then says why).
fn threads(pid: i32) -> Vec<i32> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .filter(|&t| t != pid)
                .collect()
        })
        .unwrap_or_default();
    tids.sort_unstable();
    tids.insert(0, pid);
    tids
}

/// The attributes of one sampling event of `e`, disabled.
fn attr(e: SampledEvent, o: &Options) -> perf_event_attr {
    let (type_, config) = match e {
        SampledEvent::Cycles => (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES as u64),
        SampledEvent::CpuClock => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK as u64),
    };
    let mut a = perf_event_attr {
        type_,
        config,
        sample_type: (PERF_SAMPLE_TID
            | PERF_SAMPLE_TIME
            | PERF_SAMPLE_CPU
            | PERF_SAMPLE_PERIOD
            | PERF_SAMPLE_CALLCHAIN) as u64,
        ..Default::default()
    };
    a.__bindgen_anon_1.sample_freq = o.frequency_hz.max(1);
    a.set_freq(1);
    a.set_disabled(1);
    a.set_use_clockid(1);
    a.clockid = libc::CLOCK_MONOTONIC;
    a.set_exclude_kernel(u64::from(!o.kernel));
    a.set_exclude_hv(1);
    a.set_inherit(u64::from(o.target != Target::System));
    a.set_enable_on_exec(u64::from(o.target == Target::Spawned));
    // Executable mappings (as MMAP2, with the file offset) and forks: what names
    // the frames once the process is gone.
    a.set_mmap(1);
    a.set_mmap2(1);
    a.set_task(1);
    a
}

/// The online CPUs, from `/sys/devices/system/cpu/online` ("0-3,5").
fn online_cpus() -> Result<Vec<u32>> {
    let path = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Sys {
        what: format!("read {path}"),
        source,
    })?;
    parse_cpu_list(&text).ok_or_else(|| ProfileError::Sys {
        what: format!("parse {path} ({:?})", text.trim()),
        source: io::Error::from(io::ErrorKind::InvalidData),
    })
}

/// A kernel CPU list ("0-3,5"); `None` when malformed or empty.
fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if b < a {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().ok()?),
        }
    }
    (!cpus.is_empty()).then_some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_are_read_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("0-3,5\n"), Some(vec![0, 1, 2, 3, 5]));
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn the_attributes_ask_for_stacks_on_the_monotonic_clock_at_a_frequency() {
        let o = Options::new(Target::Process { pid: 1 });
        let a = attr(SampledEvent::CpuClock, &o);
        assert_eq!(
            (a.type_, a.config),
            (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK as u64)
        );
        assert_eq!(a.freq(), 1);
        // SAFETY-free read of a plain integer union field written above.
        assert_eq!(unsafe { a.__bindgen_anon_1.sample_freq }, 997);
        assert_eq!((a.use_clockid(), a.clockid), (1, libc::CLOCK_MONOTONIC));
        assert_eq!((a.inherit(), a.disabled(), a.exclude_kernel()), (1, 1, 0));
        assert_ne!(a.sample_type & PERF_SAMPLE_CALLCHAIN as u64, 0);
        assert_eq!((a.mmap(), a.mmap2(), a.task()), (1, 1, 1));
        let c = attr(SampledEvent::CpuClock, &Options::new(Target::Spawned));
        assert_eq!((c.inherit(), c.enable_on_exec(), c.disabled()), (1, 1, 1));
        let s = attr(
            SampledEvent::Cycles,
            &Options {
                kernel: false,
                ..Options::new(Target::System)
            },
        );
        assert_eq!(
            (s.type_, s.inherit(), s.exclude_kernel()),
            (PERF_TYPE_HARDWARE, 0, 1)
        );
    }

    #[test]
    fn mapping_records_give_the_file_and_its_offset() {
        let mut b = Vec::new();
        for v in [42u32, 43] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        for v in [0x5555_0000u64, 0x2000, 0x1000, 0, 0, 0] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        for v in [5u32, 2] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(b"/usr/bin/spin\0\0\0");
        let want = MmapRecord {
            pid: 42,
            start: 0x5555_0000,
            len: 0x2000,
            pgoff: 0x1000,
            path: "/usr/bin/spin",
        };
        assert_eq!(parse_mmap(PERF_RECORD_MMAP2, &b), Some(want));
        assert!(parse_mmap(PERF_RECORD_MMAP2, &b[..40]).is_none());
        // The first version: the name right after pgoff.
        let mut v1 = b[..32].to_vec();
        v1.extend_from_slice(b"[vdso]\0\0");
        assert_eq!(parse_mmap(PERF_RECORD_MMAP, &v1).unwrap().path, "[vdso]");
    }

    /// A refusal forced through the open seam: the error is typed and names the
    /// sysctl and CAP_PERFMON; a missing PMU falls back to cpu-clock instead.
    #[test]
    fn a_refused_open_is_a_permission_error_that_names_the_fix() {
        let mut refuse = |_: &mut perf_event_attr, _: i32, _: i32| -> io::Result<OwnedFd> {
            Err(io::Error::from_raw_os_error(libc::EACCES))
        };
        let e = Profiler::open_with(Options::new(Target::System), &mut refuse).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, ProfileError::Permission { .. }), "{e:?}");
        assert!(msg.contains("system-wide"), "{msg}");
        assert!(msg.contains("sysctl kernel.perf_event_paranoid=0"), "{msg}");
        assert!(msg.contains("CAP_PERFMON"), "{msg}");

        // No PMU for cycles; cpu-clock refused: the refusal is cpu-clock's.
        let mut no_pmu = |a: &mut perf_event_attr, _: i32, _: i32| -> io::Result<OwnedFd> {
            let errno = if a.type_ == PERF_TYPE_HARDWARE {
                libc::ENOENT
            } else {
                libc::EPERM
            };
            Err(io::Error::from_raw_os_error(errno))
        };
        let e = Profiler::open_with(Options::new(Target::Process { pid: 42 }), &mut no_pmu)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cpu-clock sampling of process 42"), "{e}");
        assert!(
            e.contains("perf_event_paranoid=1"),
            "kernel stacks need 1: {e}"
        );
    }
}
