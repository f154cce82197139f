//! `power:cpu_idle` seen by a BPF program (`src/bpf/cpu_idle.bpf.c`): entries and
//! nanoseconds per CPU per idle state, counted in the kernel into a map that user
//! space reads with plain loads (the map is `BPF_F_MMAPABLE` and mapped once).
//!
//! **Why.** On the project's VM perf and ftrace see the tracepoint on CPU 0 only;
//! BPF programs attached to it see every CPU. The program is compiled by the
//! crate's build script (`build.rs`, every `src/bpf/*.bpf.c`) and embedded.
//!
//! **Which attach point.** The object carries one handler under three attach types;
//! [`BpfIdle::open`] loads them one at a time in [`AttachKind::ORDER`] and keeps the
//! first that loads and attaches, remembering why the others failed. Loading or
//! attaching says nothing about *seeing*: whether a mechanism sees a CPU's idle
//! periods is judged against cpuidle's `usage` in the summary.
//!
//! **Cost per read.** None in syscalls: the snapshot is a few loads per CPU from
//! the mapped map. Residency includes the idle period in progress (read as
//! "ns so far + now − entered", retried when the program closed it meanwhile).

use super::cpuidle::CpuidleStates;
use super::{Channel, Event, EventsError, Reader, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use quietwatt::ticker::monotonic_ns;
use std::fmt;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

quietwatt_sys::bpf_skeleton!("cpu_idle");

use skel::CpuIdleSkelBuilder;

/// States the program counts one by one (`QW_IDLE_STATES` in the program).
pub const STATES: usize = 10;

/// One CPU's counters as the program lays them out (`struct qw_idle_cpu`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct IdleCpu {
    entries: [u64; STATES],
    ns: [u64; STATES],
    exits: u64,
    other: u64,
    enter_ns: u64,
    state: u64,
}

/// How the program is attached to `power:cpu_idle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachKind {
    /// `tp_btf/cpu_idle`: BTF-typed raw tracepoint.
    TpBtf,
    /// `raw_tracepoint/cpu_idle`.
    RawTracepoint,
    /// `tracepoint/power/cpu_idle`: the classic tracepoint (the perf path).
    Tracepoint,
}

impl AttachKind {
    /// The order [`BpfIdle::open`] tries them in: cheapest and most direct first.
    pub const ORDER: [AttachKind; 3] = [
        AttachKind::TpBtf,
        AttachKind::RawTracepoint,
        AttachKind::Tracepoint,
    ];

    /// The section name, as in the program.
    pub fn name(self) -> &'static str {
        match self {
            AttachKind::TpBtf => "tp_btf/cpu_idle",
            AttachKind::RawTracepoint => "raw_tracepoint/cpu_idle",
            AttachKind::Tracepoint => "tracepoint/power/cpu_idle",
        }
    }
}

impl fmt::Display for AttachKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The loaded program, its map mapped read-only, and what each slot of a snapshot
/// holds.
pub struct BpfIdle {
    kind: AttachKind,
    _link: libbpf_rs::Link,
    _map: OwnedFd,
    base: *const IdleCpu,
    len: usize,
    ncpus: usize,
    /// `(cpu, state, is_ns)` per snapshot slot.
    slots: Vec<(u32, u32, bool)>,
    /// Why the attach kinds tried before `kind` failed.
    pub failed: Vec<(AttachKind, String)>,
}

// SAFETY: `base` points into a read-only shared mapping owned by this value (unmapped
// in Drop); reading it from another thread is as safe as from this one.
unsafe impl Send for BpfIdle {}

impl fmt::Debug for BpfIdle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BpfIdle")
            .field("kind", &self.kind)
            .field("ncpus", &self.ncpus)
            .field("slots", &self.slots.len())
            .field("failed", &self.failed)
            .finish()
    }
}

impl Drop for BpfIdle {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping made in `load`, unmapped once.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

fn err(what: &str, e: impl fmt::Display) -> EventsError {
    EventsError::Bpf(format!("{what}: {e}"))
}

impl BpfIdle {
    /// Loads the first attach kind that works (see [`AttachKind::ORDER`]) and returns
    /// it with an entry and a time channel per CPU and state of `cpuidle` (states
    /// 0 and 1 for a CPU without cpuidle).
    pub fn open(cpus: &[u32], cpuidle: &CpuidleStates) -> Result<(BpfIdle, Vec<Channel>)> {
        let mut failed = Vec::new();
        for kind in AttachKind::ORDER {
            match BpfIdle::open_kind(kind, cpus, cpuidle) {
                Ok((mut b, chans)) => {
                    b.failed = failed;
                    return Ok((b, chans));
                }
                Err(e) => failed.push((kind, e.to_string())),
            }
        }
        let why: Vec<String> = failed.iter().map(|(k, e)| format!("{k}: {e}")).collect();
        Err(EventsError::Bpf(format!(
            "no attach point works ({})",
            why.join("; ")
        )))
    }

    /// Loads the program with one attach kind only.
    pub fn open_kind(
        kind: AttachKind,
        cpus: &[u32],
        cpuidle: &CpuidleStates,
    ) -> Result<(BpfIdle, Vec<Channel>)> {
        let ncpus = libbpf_rs::num_possible_cpus()
            .map_err(|e| err("count the possible CPUs", e))?
            .max(cpus.iter().map(|&c| c as usize + 1).max().unwrap_or(1));
        let mut storage = MaybeUninit::uninit();
        let mut open = CpuIdleSkelBuilder::default()
            .open(&mut storage)
            .map_err(|e| err("open the BPF object", e))?;
        open.progs
            .qw_idle_btf
            .set_autoload(kind == AttachKind::TpBtf);
        open.progs
            .qw_idle_raw
            .set_autoload(kind == AttachKind::RawTracepoint);
        open.progs
            .qw_idle_tp
            .set_autoload(kind == AttachKind::Tracepoint);
        open.maps
            .idle
            .set_max_entries(ncpus as u32)
            .map_err(|e| err("size the idle map", e))?;
        let skel = open.load().map_err(|e| {
            err(
                &format!("load {kind} (root or CAP_BPF+CAP_PERFMON needed)"),
                e,
            )
        })?;
        let prog = match kind {
            AttachKind::TpBtf => &skel.progs.qw_idle_btf,
            AttachKind::RawTracepoint => &skel.progs.qw_idle_raw,
            AttachKind::Tracepoint => &skel.progs.qw_idle_tp,
        };
        let link = prog
            .attach()
            .map_err(|e| err(&format!("attach {kind}"), e))?;
        // The link keeps the program, the program keeps the map: the skeleton can go.
        let map = skel
            .maps
            .idle
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| err("duplicate the map's descriptor", e))?;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
        let len = (ncpus * std::mem::size_of::<IdleCpu>()).div_ceil(page) * page;
        // SAFETY: a read-only shared mapping of a BPF_F_MMAPABLE array of `ncpus`
        // values of the program's struct layout; checked for failure below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                map.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(err("map the idle map", std::io::Error::last_os_error()));
        }
        let mut slots = Vec::new();
        let mut chans = Vec::new();
        for &cpu in cpus {
            let states = cpuidle.traced_indices(cpu);
            for s in states.into_iter().filter(|&s| (s as usize) < STATES) {
                for (is_ns, event) in [(false, Event::BpfIdleEnter(s)), (true, Event::BpfIdleNs(s))]
                {
                    chans.push(Channel {
                        cpu,
                        label: event.to_string(),
                        event,
                        origin: format!("bpf {kind} map idle[cpu {cpu}]"),
                        reader: Reader::Bpf(slots.len()),
                    });
                    slots.push((cpu, s, is_ns));
                }
            }
        }
        Ok((
            BpfIdle {
                kind,
                _link: link,
                _map: map,
                base: base as *const IdleCpu,
                len,
                ncpus,
                slots,
                failed: Vec::new(),
            },
            chans,
        ))
    }

    /// The attach kind in use.
    pub fn kind(&self) -> AttachKind {
        self.kind
    }

    /// Values one [`BpfIdle::snapshot`] fills.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    fn field(&self, cpu: usize, f: impl Fn(*const IdleCpu) -> *const u64) -> u64 {
        if cpu >= self.ncpus {
            return 0;
        }
        // SAFETY: cpu < ncpus, so the element lies inside the mapping; the program
        // writes these u64s with single aligned stores, which a volatile aligned load
        // reads whole on every 64-bit target.
        unsafe { std::ptr::read_volatile(f(self.base.add(cpu))) }
    }

    /// Copies every slot's current value into `out`. No syscall, no allocation.
    pub fn snapshot(&self, out: &mut [u64]) -> std::io::Result<()> {
        for (&(cpu, s, is_ns), o) in self.slots.iter().zip(out.iter_mut()) {
            let (c, i) = (cpu as usize, s as usize);
            // SAFETY (closures): pointer arithmetic within one IdleCpu, i < STATES.
            if !is_ns {
                *o = self.field(c, |p| unsafe {
                    (&raw const (*p).entries).cast::<u64>().add(i)
                });
                continue;
            }
            let ns =
                |b: &BpfIdle| b.field(c, |p| unsafe { (&raw const (*p).ns).cast::<u64>().add(i) });
            let before = ns(self);
            let entered = self.field(c, |p| unsafe { &raw const (*p).enter_ns });
            let state = self.field(c, |p| unsafe { &raw const (*p).state });
            let after = ns(self);
            // The period in progress counts so far, unless the program closed it
            // between the loads (then `after` already holds it).
            let running = if before == after && entered != 0 && state == s as u64 {
                monotonic_ns().saturating_sub(entered)
            } else {
                0
            };
            *o = after + running;
        }
        Ok(())
    }

    /// Idle entries of `cpu` so far, over every state (the program's counts, a few
    /// loads, no syscall).
    pub fn entries(&self, cpu: u32) -> u64 {
        let c = cpu as usize;
        // SAFETY (closures): pointer arithmetic within one IdleCpu, i < STATES.
        (0..STATES)
            .map(|i| {
                self.field(c, |p| unsafe {
                    (&raw const (*p).entries).cast::<u64>().add(i)
                })
            })
            .sum::<u64>()
            + self.field(c, |p| unsafe { &raw const (*p).other })
    }

    /// The idle state `cpu` is in right now by the tracepoint (entered and not yet
    /// exited), or `None` when it is running. A few loads, no syscall.
    pub fn idle_state(&self, cpu: u32) -> Option<u32> {
        let c = cpu as usize;
        // SAFETY (closures): pointer arithmetic within one IdleCpu.
        let entered = self.field(c, |p| unsafe { &raw const (*p).enter_ns });
        let state = self.field(c, |p| unsafe { &raw const (*p).state });
        (entered != 0).then_some(state as u32)
    }

    /// One line for the notes: which attach point is used, and why the others failed.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "power:cpu_idle is also counted by a BPF program on {}",
            self.kind
        );
        for (k, e) in &self.failed {
            s.push_str(&format!("; {k} failed: {e}"));
        }
        s
    }
}
