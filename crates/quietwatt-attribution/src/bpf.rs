//! The accounting program (`src/bpf/attribution.bpf.c`) loaded and read: closed
//! slices from its ring buffer, what runs now from its mapped per-CPU slots.
//!
//! Reading costs no syscall: the ring and the slots are shared memory. The program
//! runs on every context switch of the machine; its cost is the kernel's
//! `run_time_ns` for it ([`Tracker::cost`], with BPF statistics on).

use crate::error::{AttributionError, Result};
use crate::timeline::{Running, Slice, Timeline};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use quietwatt_sys::ring::{BpfRing, Mapping};
use std::fmt;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

quietwatt_sys::bpf_skeleton!("attribution");

use skel::AttributionSkelBuilder;

/// The ring's size per possible CPU: 2 MiB hold 32 768 records of 56 bytes (+8 of
/// header), half a second (the writer's default flush period, when the ring is
/// drained) of 65 000 switches a second to a task other than idle on that CPU
/// (a switch away from the idle task writes no record).
pub const RING_BYTES_PER_CPU: usize = 2 << 20;
/// The ring's smallest and largest size (a power of two in between).
pub const RING_BYTES_RANGE: (usize, usize) = (8 << 20, 256 << 20);
/// `struct qw_slice`.
const SLICE_BYTES: usize = 56;
/// `struct qw_running`.
const RUNNING_BYTES: usize = 40;

fn err(what: &str, e: impl fmt::Display) -> AttributionError {
    AttributionError::Bpf(format!("{what}: {e}"))
}

/// The program's cost as the kernel measured it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cost {
    /// Runs (context switches seen) while statistics were on.
    pub runs: u64,
    /// Time spent in the program over those runs, ns.
    pub run_time_ns: u64,
}

impl Cost {
    /// Mean ns per context switch (0 when none was seen).
    pub fn per_switch_ns(&self) -> f64 {
        if self.runs == 0 {
            0.0
        } else {
            self.run_time_ns as f64 / self.runs as f64
        }
    }
}

/// The accounting program, attached to `sched_switch`.
pub struct Tracker {
    _link: libbpf_rs::Link,
    _fork_link: Option<libbpf_rs::Link>,
    prog_fd: OwnedFd,
    _stats: Option<OwnedFd>,
    ring: BpfRing,
    _ring_fd: OwnedFd,
    running: Mapping,
    _running_fd: OwnedFd,
    dropped: MapHandle,
    ncpus: usize,
    slices: u64,
}

impl fmt::Debug for Tracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracker")
            .field("ncpus", &self.ncpus)
            .field("slices", &self.slices)
            .finish()
    }
}

impl Tracker {
    /// Loads and attaches the program (root, or CAP_BPF + CAP_PERFMON; a kernel
    /// with BTF), and makes every CPU switch once so that what runs on each is known
    /// from the start, even on a CPU that would not switch for a long time.
    pub fn open() -> Result<Tracker> {
        Tracker::open_with(true)
    }

    /// [`Tracker::open`], with or without the kernel's BPF run-time statistics
    /// (which cost two clock reads per run; without them [`Tracker::cost`] is
    /// `None`).
    pub fn open_with(stats: bool) -> Result<Tracker> {
        Ok(Tracker::open_inner(stats, None)?.0)
    }

    /// [`Tracker::open`], and follows the processes that `root` (a process id)
    /// and its descendants start from now on, as the kernel forks them: a command's
    /// process tree where no cgroup can be made for it.
    pub fn open_following(root: u32) -> Result<(Tracker, Descendants)> {
        let (t, d) = Tracker::open_inner(true, Some(root))?;
        let d = d.ok_or_else(|| err("follow forks", "no tree map"))?;
        Ok((t, d))
    }

    fn open_inner(stats: bool, follow: Option<u32>) -> Result<(Tracker, Option<Descendants>)> {
        let ncpus =
            libbpf_rs::num_possible_cpus().map_err(|e| err("count the possible CPUs", e))?;
        let mut storage = MaybeUninit::uninit();
        let mut open = AttributionSkelBuilder::default()
            .open(&mut storage)
            .map_err(|e| err("open the BPF object", e))?;
        open.maps
            .running
            .set_max_entries(ncpus as u32)
            .map_err(|e| err("size the per-CPU slots", e))?;
        let ring_bytes = (ncpus * RING_BYTES_PER_CPU)
            .next_power_of_two()
            .clamp(RING_BYTES_RANGE.0, RING_BYTES_RANGE.1);
        open.maps
            .slices
            .set_max_entries(ring_bytes as u32)
            .map_err(|e| err("size the ring", e))?;
        if follow.is_some() {
            open.maps
                .tree
                .set_max_entries(crate::tree::FOLLOWED)
                .map_err(|e| err("size the process tree", e))?;
        } else {
            // Not loaded at all: no fork costs anything when nobody follows one.
            open.progs.qw_attr_fork.set_autoload(false);
        }
        let skel = open.load().map_err(|e| {
            err(
                "load the accounting program (root or CAP_BPF+CAP_PERFMON, and a kernel \
                 with BTF, /sys/kernel/btf/vmlinux, are needed)",
                e,
            )
        })?;
        // Run-time statistics (CAP_SYS_ADMIN): the program's own cost, reported.
        let stats = if stats {
            // SAFETY: a plain syscall wrapper returning a new descriptor or -errno.
            unsafe {
                libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME)
            }
        } else {
            -1
        };
        // SAFETY: the kernel just returned this descriptor and nothing else owns it.
        let stats = (stats >= 0).then(|| unsafe { OwnedFd::from_raw_fd(stats) });
        let link = skel
            .progs
            .qw_attr_switch
            .attach()
            .map_err(|e| err("attach tp_btf/sched_switch", e))?;
        let prog_fd = skel
            .progs
            .qw_attr_switch
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| err("keep the program's descriptor", e))?;
        let ring_fd = skel
            .maps
            .slices
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| err("duplicate the ring's descriptor", e))?;
        let ring = BpfRing::new(ring_fd.as_fd(), ring_bytes)
            .map_err(|e| err(&format!("map the {ring_bytes}-byte ring"), e))?;
        let running_fd = skel
            .maps
            .running
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| err("duplicate the slots' descriptor", e))?;
        let page = quietwatt_sys::ring::page_size();
        let len = (ncpus * RUNNING_BYTES).div_ceil(page) * page;
        let running = Mapping::new(running_fd.as_fd(), len, 0, libc::PROT_READ)
            .map_err(|e| err("map the per-CPU slots", e))?;
        let dropped =
            MapHandle::try_from(&skel.maps.dropped).map_err(|e| err("keep the dropped map", e))?;
        let (fork_link, descendants) = match follow {
            None => (None, None),
            Some(root) => {
                let map = MapHandle::try_from(&skel.maps.tree)
                    .map_err(|e| err("keep the process tree", e))?;
                // The root first, then the hook: nothing it forks is missed.
                map.update(&root.to_ne_bytes(), &0u32.to_ne_bytes(), MapFlags::ANY)
                    .map_err(|e| err("put the root in the process tree", e))?;
                let link = skel
                    .progs
                    .qw_attr_fork
                    .attach()
                    .map_err(|e| err("attach tp_btf/sched_process_fork", e))?;
                (Some(link), Some(Descendants { map, root }))
            }
        };
        let t = Tracker {
            _link: link,
            _fork_link: fork_link,
            prog_fd,
            _stats: stats,
            ring,
            _ring_fd: ring_fd,
            running,
            _running_fd: running_fd,
            dropped,
            ncpus,
            slices: 0,
        };
        kick_every_cpu(ncpus);
        Ok((t, descendants))
    }

    /// Reads what runs on each CPU into `timeline`, then hands it every closed slice
    /// the program reported since the last call (in this order: a switch in between
    /// then shows as a closed slice, never as a gap). No syscall, no allocation
    /// beyond the timeline's own growth.
    pub fn drain(&mut self, timeline: &mut Timeline) {
        for cpu in 0..self.ncpus {
            if let Some(r) = self.read_running(cpu) {
                timeline.set_running(cpu as u32, r);
            }
        }
        let mut slices = 0;
        self.ring.consume(&mut |rec: &[u8]| {
            if let Some((idle, s)) = parse_slice(rec) {
                if let Some(idle) = idle {
                    timeline.push(idle);
                    slices += 1;
                }
                timeline.push(s);
                slices += 1;
            }
        });
        self.slices += slices;
    }

    /// One CPU's slot, read consistently (retried while the program writes it);
    /// `None` when it keeps changing or is out of the mapping.
    fn read_running(&self, cpu: usize) -> Option<Running> {
        let base = cpu * RUNNING_BYTES;
        let w = |i: usize| self.running.word(base + 8 * i);
        let (seq, start, cgid, idle_from, tgid) = (w(0)?, w(1)?, w(2)?, w(3)?, w(4)?);
        for _ in 0..8 {
            let s0 = seq.load(Ordering::Acquire);
            if s0 % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let r = Running {
                start_ns: start.load(Ordering::Relaxed),
                cgid: cgid.load(Ordering::Relaxed),
                idle_from_ns: idle_from.load(Ordering::Relaxed),
                tgid: {
                    let b = tgid.load(Ordering::Relaxed).to_ne_bytes();
                    u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
                },
            };
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) == s0 {
                return Some(r);
            }
        }
        None
    }

    /// Slices handed over so far (the idle task's included).
    pub fn slices(&self) -> u64 {
        self.slices
    }

    /// Slices the ring had no room for (their time counts as unseen).
    pub fn dropped(&self) -> u64 {
        self.dropped
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .ok()
            .flatten()
            .and_then(|v| v.get(..8).and_then(|b| b.try_into().ok()))
            .map_or(0, u64::from_ne_bytes)
    }

    /// The program's runs and run time so far (`None` without BPF statistics,
    /// which need CAP_SYS_ADMIN).
    pub fn cost(&self) -> Option<Cost> {
        self._stats.as_ref()?;
        // SAFETY: bpf_prog_info is plain old data; all-zero is a valid value to ask with.
        let mut info: libbpf_rs::libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of_val(&info) as u32;
        // SAFETY: the kernel writes at most `len` bytes into `info`, which lives for the call.
        let r = unsafe {
            libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(
                self.prog_fd.as_raw_fd(),
                &mut info,
                &mut len,
            )
        };
        (r == 0).then_some(Cost {
            runs: info.run_cnt,
            run_time_ns: info.run_time_ns,
        })
    }
}

/// The processes a root started, and those they started, as the kernel forked
/// them ([`Tracker::open_following`]); readable after the tracker is gone.
pub struct Descendants {
    map: MapHandle,
    root: u32,
}

impl fmt::Debug for Descendants {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Descendants")
            .field("root", &self.root)
            .finish()
    }
}

impl Descendants {
    /// `pid` and every process descended from it since the tracker opened (those
    /// that have exited included), given that `pid` is the root or descends from
    /// it; `pid` alone when it started nothing that was followed.
    pub fn of(&self, pid: u32) -> Vec<u32> {
        let parent_of: Vec<(u32, u32)> = self
            .map
            .keys()
            .filter_map(|k| {
                let child = u32::from_ne_bytes(k.get(..4)?.try_into().ok()?);
                let v = self.map.lookup(&k, MapFlags::ANY).ok()??;
                Some((child, u32::from_ne_bytes(v.get(..4)?.try_into().ok()?)))
            })
            .collect();
        crate::tree::descendants(pid, &parent_of)
    }

    /// Whether the tree filled its map: processes started after that are missing.
    pub fn full(&self) -> bool {
        self.map.keys().count() >= crate::tree::FOLLOWED as usize
    }
}

/// One record: the idle task's slice before the task's, when it had one, and the
/// task's.
fn parse_slice(rec: &[u8]) -> Option<(Option<Slice>, Slice)> {
    if rec.len() < SLICE_BYTES {
        return None;
    }
    let u64_at = |o: usize| {
        rec.get(o..o + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_ne_bytes)
    };
    let u32_at = |o: usize| {
        rec.get(o..o + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_ne_bytes)
    };
    let s = Slice {
        start_ns: u64_at(0)?,
        end_ns: u64_at(8)?,
        cgid: u64_at(16)?,
        tgid: u32_at(32)?,
        cpu: u32_at(36)?,
        comm: rec.get(40..56)?.try_into().ok()?,
    };
    let idle_from = u64_at(24)?;
    let idle = (idle_from != 0 && idle_from < s.start_ns).then_some(Slice {
        start_ns: idle_from,
        end_ns: s.start_ns,
        cgid: 0,
        tgid: 0,
        cpu: s.cpu,
        comm: [0; 16],
    });
    Some((idle, s))
}

/// Runs a short-lived thread pinned to each CPU in turn, which sleeps once there:
/// each CPU switches to it and back, so its slot names what runs on it from now
/// (a lone busy loop or an idle CPU might not switch for seconds otherwise).
fn kick_every_cpu(ncpus: usize) {
    let handles: Vec<_> = (0..ncpus)
        .map(|cpu| {
            std::thread::spawn(move || {
                if quietwatt_sys::thread::pin_to_cpu(cpu).is_ok() {
                    std::thread::sleep(std::time::Duration::from_micros(50));
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
}
