//! The full trace (`record --events ... --full-trace`): every C-state entry and exit,
//! context switch and page fault as one row, stamped in the kernel, for the slices
//! and instants of a trace viewer (`trace:` rows, see [`TRACED`]).
//!
//! **How.** A BPF program (`src/bpf/event_trace.bpf.c`) attached to the
//! `power:cpu_idle` and `sched:sched_switch` raw tracepoints and to a period-1
//! software fault event per CPU (minor and major) writes a 24-byte record per event
//! into a BPF ring buffer. The events thread drains it on its own clock
//! ([`FullTrace::drain`], at `--events-freq`): records are submitted without a
//! wake-up, so the trace adds no user-space wake-up per event.
//!
//! **Cost.** Unlike the counters, this is one ring record per event: use it for
//! short windows. A full ring drops records in the kernel; they are counted
//! ([`FullTrace::dropped`]) and reported, never silent.
//!
//! **Timestamps** are `bpf_ktime_get_ns`, CLOCK_MONOTONIC: the clock of the energy
//! file and of every other events row.

use super::TRACED;
use super::{Event, EventsError, Groups, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use perf_event_open_sys::bindings::{
    perf_event_attr, PERF_COUNT_SW_PAGE_FAULTS_MAJ, PERF_COUNT_SW_PAGE_FAULTS_MIN,
    PERF_TYPE_SOFTWARE,
};
use quietwatt_sys::perf::open_cpu_event as perf_open;
use quietwatt_sys::ring::BpfRing;
use std::fmt;
use std::io::Write;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, IntoRawFd, OwnedFd};

quietwatt_sys::bpf_skeleton!("event_trace");

use skel::EventTraceSkelBuilder;

/// The default size of the ring: 8 MiB holds 262 144 records, 2.6 M events/s at
/// the default 10 Hz drain.
pub const DEFAULT_RING_BYTES: usize = 8 << 20;

/// `QW_TRACE_*` in the program.
const IDLE: u32 = 1;
const SWITCH: u32 = 2;
const FAULT_MIN: u32 = 3;
const FAULT_MAJ: u32 = 4;
/// `PWR_EVENT_EXIT`: the state of an idle exit.
const IDLE_EXIT: u64 = 0xffff_ffff;
/// `struct qw_trace_rec`.
const RECORD_BYTES: usize = 24;

/// One traced event, decoded from its ring record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TracedEvent {
    /// CLOCK_MONOTONIC ns, taken in the kernel.
    pub t_ns: u64,
    /// The CPU the event happened on (the idling CPU for C-states).
    pub cpu: u32,
    /// What happened, named as the counted events are.
    pub event: Event,
    /// The pid running (the one leaving, for a context switch); 0 for C-states.
    pub pid: u32,
}

/// Decodes a `struct qw_trace_rec`; `None` for a record of another size or kind.
pub fn decode(rec: &[u8]) -> Option<TracedEvent> {
    if rec.len() != RECORD_BYTES {
        return None;
    }
    let u64_at = |o: usize| rec[o..o + 8].try_into().ok().map(u64::from_ne_bytes);
    let u32_at = |o: usize| rec[o..o + 4].try_into().ok().map(u32::from_ne_bytes);
    let (t_ns, cpu, kind, arg) = (u64_at(0)?, u32_at(8)?, u32_at(12)?, u64_at(16)?);
    let (event, pid) = match kind {
        IDLE if arg == IDLE_EXIT => (Event::IdleExit, 0),
        IDLE => (Event::IdleEnter(u32::try_from(arg).ok()?), 0),
        SWITCH => (Event::ContextSwitches, arg as u32),
        FAULT_MIN => (Event::PageFaultsMin, arg as u32),
        FAULT_MAJ => (Event::PageFaultsMaj, arg as u32),
        _ => return None,
    };
    Some(TracedEvent {
        t_ns,
        cpu,
        event,
        pid,
    })
}

/// The loaded program, its attachments and its ring.
pub struct FullTrace {
    _links: Vec<libbpf_rs::Link>,
    dropped_map: MapHandle,
    ring: BpfRing,
    _ring_fd: OwnedFd,
    /// Records handed over so far.
    traced: u64,
    /// Records that were not events quietwatt knows (never expected; counted).
    unknown: u64,
    /// What is traced, for the notes.
    what: String,
}

impl fmt::Debug for FullTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FullTrace")
            .field("what", &self.what)
            .field("traced", &self.traced)
            .finish()
    }
}

fn err(what: &str, e: impl fmt::Display) -> EventsError {
    EventsError::Bpf(format!("{what}: {e}"))
}

/// A period-1 software event on `cpu`: its overflow runs the attached program on
/// every event. Opened disabled; libbpf enables it when it attaches.
fn every_event(config: u32, cpu: u32) -> std::io::Result<OwnedFd> {
    let mut attr = perf_event_attr {
        type_: PERF_TYPE_SOFTWARE,
        config: u64::from(config),
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = 1;
    attr.set_disabled(1);
    perf_open(&mut attr, cpu, None)
}

impl FullTrace {
    /// Loads the program with the attach points of `groups` (cstate: cpu_idle;
    /// sched: sched_switch; faults: the fault events of every CPU in `cpus`) and a
    /// ring of `ring_bytes` (rounded up to a power of two of at least a page).
    pub fn open(groups: Groups, cpus: &[u32], ring_bytes: usize) -> Result<FullTrace> {
        let page = quietwatt_sys::ring::page_size();
        let ring_bytes = ring_bytes.max(page).next_power_of_two();
        let ring_len = u32::try_from(ring_bytes)
            .map_err(|_| err("size the ring", format!("{ring_bytes} bytes is too large")))?;
        let mut storage = MaybeUninit::uninit();
        let mut open = EventTraceSkelBuilder::default()
            .open(&mut storage)
            .map_err(|e| err("open the trace program", e))?;
        open.progs.qw_trace_idle.set_autoload(groups.cstate);
        open.progs.qw_trace_switch.set_autoload(groups.sched);
        open.progs.qw_trace_fault_min.set_autoload(groups.faults);
        open.progs.qw_trace_fault_maj.set_autoload(groups.faults);
        open.maps
            .trace
            .set_max_entries(ring_len)
            .map_err(|e| err("size the trace ring", e))?;
        let skel = open.load().map_err(|e| {
            err(
                "load the trace program (root or CAP_BPF+CAP_PERFMON needed)",
                e,
            )
        })?;
        let mut links = Vec::new();
        let mut what = Vec::new();
        for (on, prog, sys, name) in [
            (
                groups.cstate,
                &skel.progs.qw_trace_idle,
                "power",
                "cpu_idle",
            ),
            (
                groups.sched,
                &skel.progs.qw_trace_switch,
                "sched",
                "sched_switch",
            ),
        ] {
            if on {
                let link = prog
                    .attach()
                    .map_err(|e| err(&format!("attach raw_tracepoint/{name}"), e))?;
                links.push(link);
                what.push(format!("{sys}:{name} (raw tracepoint)"));
            }
        }
        if groups.faults {
            for &cpu in cpus {
                for (config, prog, name) in [
                    (
                        PERF_COUNT_SW_PAGE_FAULTS_MIN,
                        &skel.progs.qw_trace_fault_min,
                        "minor",
                    ),
                    (
                        PERF_COUNT_SW_PAGE_FAULTS_MAJ,
                        &skel.progs.qw_trace_fault_maj,
                        "major",
                    ),
                ] {
                    let fd = every_event(config, cpu).map_err(|e| {
                        err(&format!("open the {name} fault event of CPU {cpu}"), e)
                    })?;
                    let link = prog.attach_perf_event(fd.as_raw_fd()).map_err(|e| {
                        err(&format!("attach to the {name} fault event of CPU {cpu}"), e)
                    })?;
                    // The link closes the event when it goes (bpf_link_perf_detach).
                    let _ = fd.into_raw_fd();
                    links.push(link);
                }
            }
            what.push(format!(
                "minor and major page faults (period-1 software events on {} CPUs)",
                cpus.len()
            ));
        }
        let ring_fd = skel
            .maps
            .trace
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| err("duplicate the ring's descriptor", e))?;
        let ring = BpfRing::new(ring_fd.as_fd(), ring_bytes)
            .map_err(|e| err(&format!("map the {ring_bytes}-byte trace ring"), e))?;
        let dropped_map =
            MapHandle::try_from(&skel.maps.dropped).map_err(|e| err("keep the dropped map", e))?;
        Ok(FullTrace {
            _links: links,
            dropped_map,
            ring,
            _ring_fd: ring_fd,
            traced: 0,
            unknown: 0,
            what: format!(
                "full trace of {} into a {} MiB BPF ring, drained by the events thread",
                what.join(", "),
                ring_bytes >> 20
            ),
        })
    }

    /// Appends a `timestamp_ns,cpu,trace:<event>,1` row per traced event so far to
    /// `out` (the events CSV's format), oldest first; the ring is read in place, no
    /// syscall. Returns the rows written.
    pub fn drain(&mut self, out: &mut Vec<u8>) -> u64 {
        let (mut n, mut unknown) = (0, 0);
        self.ring.consume(&mut |rec| match decode(rec) {
            Some(e) => {
                n += 1;
                // Into a Vec: cannot fail.
                let _ = writeln!(out, "{},{},{TRACED}{},1", e.t_ns, e.cpu, e.event);
            }
            None => unknown += 1,
        });
        self.traced += n;
        self.unknown += unknown;
        n
    }

    /// Events handed over so far.
    pub fn traced(&self) -> u64 {
        self.traced
    }

    /// Events the kernel could not record because the ring was full (one map
    /// lookup: a syscall, for the end of a recording).
    pub fn dropped(&self) -> Result<u64> {
        let value = self
            .dropped_map
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(|e| err("read the trace's dropped count", e))?;
        value
            .and_then(|v| v.get(..8).and_then(|b| b.try_into().ok()))
            .map(u64::from_ne_bytes)
            .ok_or_else(|| err("read the trace's dropped count", "no 8-byte value"))
    }

    /// One line for the notes: what is traced.
    pub fn describe(&self) -> &str {
        &self.what
    }

    /// Records of a kind quietwatt does not know (0 unless program and reader
    /// disagree).
    pub fn unknown(&self) -> u64 {
        self.unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(t: u64, cpu: u32, kind: u32, arg: u64) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&t.to_ne_bytes());
        v.extend_from_slice(&cpu.to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(&arg.to_ne_bytes());
        v
    }

    #[test]
    fn records_decode_into_the_events_the_exporter_draws() {
        let e = decode(&rec(5, 1, IDLE, 2)).unwrap();
        assert_eq!((e.t_ns, e.cpu, e.event), (5, 1, Event::IdleEnter(2)));
        assert_eq!(
            decode(&rec(6, 1, IDLE, IDLE_EXIT)).unwrap().event,
            Event::IdleExit
        );
        let s = decode(&rec(7, 0, SWITCH, 42)).unwrap();
        assert_eq!((s.event, s.pid), (Event::ContextSwitches, 42));
        assert_eq!(
            decode(&rec(8, 0, FAULT_MIN, 1)).unwrap().event,
            Event::PageFaultsMin
        );
        assert_eq!(
            decode(&rec(9, 0, FAULT_MAJ, 1)).unwrap().event,
            Event::PageFaultsMaj
        );
        assert_eq!(decode(&rec(9, 0, 99, 1)), None, "an unknown kind");
        assert_eq!(decode(&rec(9, 0, SWITCH, 1)[..20]), None, "a short record");
        // The row's event parses back to the same event (the exporter relies on it).
        for ev in [Event::IdleEnter(3), Event::IdleExit, Event::PageFaultsMaj] {
            assert_eq!(Event::parse(&ev.to_string()), Some(ev));
        }
    }
}
