//! OS events on the energy timeline: C-state entries, wake-ups without IPI, context
//! switches, CPU migrations, page faults, and the cpuidle residency counters.
//!
//! **Counted in the kernel.** Every event is a counter that the kernel keeps and
//! quietwatt reads: perf software events and perf tracepoint events opened system-wide
//! per CPU (`pid = -1, cpu = N`, counting, read with one `read()`), and the cpuidle
//! `usage`/`time` files (one `pread` each). Nothing is streamed one event at a time,
//! so the cost per tick is one syscall per counter however many events happen.
//!
//! **One clock.** The [`recorder`] thread reads every counter at its own low rate and
//! stamps each read with CLOCK_MONOTONIC ([`quietwatt::ticker::monotonic_ns`]), the clock
//! of the energy samples, into its own CSV next to the energy file. The energy
//! sampler is untouched: its loop does not grow by the number of CPUs × events.
//!
//! **What sees what.** Which mechanism sees `power:cpu_idle` on which CPU is a fact
//! about the machine, not an assumption: [`summary`] compares every CPU's
//! tracepoint count with its cpuidle `usage` and says where one is blind (on the
//! project's VM perf counts CPU 0 and sees nothing on CPU 1).
//!
//! Modules: [`faults`], [`sched`] and [`cstate`] open the perf counters of each group,
//! [`cpuidle`] reads sysfs, [`tracepoint`] finds tracepoint ids in tracefs,
//! [`recorder`] is the thread and its CSV, [`summary`] the end-of-run report,
//! [`wakeup`] the caller/callee experiment of paper 004 (Listing 1),
//! [`power_profile`] the energy around a wake-up, [`bpf_idle`] and [`full_trace`]
//! the BPF programs (feature `bpf`), [`trace`] a recording read back and
//! converted to the Chrome/Perfetto JSON trace format, and [`exporter`] the
//! idle states and wake-ups as a collector of `quietwatt-exporter`.
//!
//! This crate sits above the engine (`quietwatt`): it takes the energy's clock,
//! sinks and statistics from there, and its system calls from `quietwatt-sys`.
//!
//! # Example
//!
//! The context switches and migrations of every CPU, counted by the kernel over a
//! few milliseconds (needs `perf_event_paranoid` <= 0 or CAP_PERFMON):
//!
//! ```
//! use quietwatt::SysRoot;
//! use quietwatt_events::{EventCounters, Groups};
//!
//! let groups: Groups = "sched".parse().expect("a known group");
//! match EventCounters::open(groups, &SysRoot::default(), None) {
//!     Ok(mut counters) => {
//!         let mut before = vec![0; counters.channels().len()];
//!         counters.read(&mut before).expect("a read");
//!         std::thread::sleep(std::time::Duration::from_millis(5));
//!         let mut after = before.clone();
//!         counters.read(&mut after).expect("a read");
//!         for ((c, a), b) in counters.channels().iter().zip(&after).zip(&before) {
//!             println!("CPU {} {}: {}", c.cpu, c.label, a - b);
//!         }
//!     }
//!     Err(e) => eprintln!("{e}"),
//! }
//! ```
#![deny(missing_docs)]

// The two BPF programs need the `bpf` feature; without it, stand-ins of the same
// names whose `open` reports the feature off (their types are uninhabited).
#[cfg_attr(not(feature = "bpf"), path = "bpf_idle_off.rs")]
pub mod bpf_idle;
pub mod cpuidle;
pub mod cstate;
pub mod exporter;
pub mod faults;
#[cfg_attr(not(feature = "bpf"), path = "full_trace_off.rs")]
pub mod full_trace;
pub mod power_profile;
pub mod recorder;
pub mod sched;
pub mod summary;
pub mod trace;
pub mod tracepoint;
pub mod wakeup;

pub use cpuidle::{CpuidleState, CpuidleStates};
pub use recorder::{EventLog, EventRecorder, EventTotals};
pub use summary::EventSummary;

use quietwatt::root::SysRoot;
use quietwatt_sys::perf::read_count;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::str::FromStr;

/// What can go wrong while opening or reading event counters.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EventsError {
    /// `--events` named a group that does not exist.
    #[error("unknown event group '{0}': expected a comma-separated list of cstate, faults, sched (or all)")]
    UnknownGroup(String),
    /// No tracefs to find a tracepoint's id in.
    #[error("no tracefs: {why}")]
    NoTracefs {
        /// What was tried, and the fix.
        why: String,
    },
    /// A tracepoint this kernel does not have (or that tracefs does not list).
    #[error("tracepoint {name} not found at {path}: {source}")]
    NoTracepoint {
        /// `sys:event`.
        name: String,
        /// The `id` file looked for.
        path: PathBuf,
        /// What the kernel said.
        source: io::Error,
    },
    /// perf_event_open refused a counter.
    #[error("cannot count {event} on CPU {cpu}: {source}; {fix}")]
    Open {
        /// The event.
        event: String,
        /// The CPU.
        cpu: u32,
        /// What the kernel said.
        source: io::Error,
        /// What to do about it.
        fix: &'static str,
    },
    /// A sysfs file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the kernel said.
        source: io::Error,
    },
    /// A sysfs counter held something other than a number.
    #[error("{path}: expected a decimal counter, read {content:?}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What it held.
        content: String,
    },
    /// A counter could not be read during the recording.
    #[error("reading {what} failed during the recording: {source}")]
    Read {
        /// The counter.
        what: String,
        /// What the kernel said.
        source: io::Error,
    },
    /// The recorder thread could not be set up or its output written.
    #[error("events recorder: cannot {what}: {source}")]
    Recorder {
        /// What was attempted.
        what: String,
        /// What the kernel said.
        source: io::Error,
    },
    /// A BPF program or map could not be used.
    #[error("BPF: {0}")]
    Bpf(String),
}

/// Shorthand for results of this module.
pub type Result<T, E = EventsError> = std::result::Result<T, E>;

/// A group of events asked for with `--events`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Groups {
    /// `cstate`: `power:cpu_idle` entries per state and exits, cpuidle usage and time.
    pub cstate: bool,
    /// `faults`: minor and major page faults.
    pub faults: bool,
    /// `sched`: context switches, CPU migrations, `sched:sched_wake_idle_without_ipi`.
    pub sched: bool,
}

impl Groups {
    /// Every group.
    pub fn all() -> Groups {
        Groups {
            cstate: true,
            faults: true,
            sched: true,
        }
    }

    /// Whether no group is selected.
    pub fn is_empty(&self) -> bool {
        !(self.cstate || self.faults || self.sched)
    }
}

impl FromStr for Groups {
    type Err = EventsError;
    fn from_str(s: &str) -> Result<Groups> {
        let mut g = Groups::default();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match part.to_ascii_lowercase().as_str() {
                "cstate" | "cstates" | "idle" => g.cstate = true,
                "faults" | "fault" | "page-faults" => g.faults = true,
                "sched" => g.sched = true,
                "all" => g = Groups::all(),
                _ => return Err(EventsError::UnknownGroup(part.to_string())),
            }
        }
        if g.is_empty() {
            return Err(EventsError::UnknownGroup(s.to_string()));
        }
        Ok(g)
    }
}

impl fmt::Display for Groups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = [
            (self.cstate, "cstate"),
            (self.faults, "faults"),
            (self.sched, "sched"),
        ]
        .into_iter()
        .filter_map(|(on, n)| on.then_some(n))
        .collect();
        f.write_str(&names.join(","))
    }
}

/// One counted event (per CPU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Event {
    /// `PERF_COUNT_SW_PAGE_FAULTS_MIN`: faults served without I/O.
    PageFaultsMin,
    /// `PERF_COUNT_SW_PAGE_FAULTS_MAJ`: faults that waited for I/O.
    PageFaultsMaj,
    /// `PERF_COUNT_SW_CONTEXT_SWITCHES`.
    ContextSwitches,
    /// `PERF_COUNT_SW_CPU_MIGRATIONS`.
    CpuMigrations,
    /// `sched:sched_wake_idle_without_ipi`, counted on the CPU that woke the other
    /// (the tracepoint fires in the waker; its `cpu` field names the target).
    WakeIdleWithoutIpi,
    /// `power:cpu_idle` with `state == N`: entries into idle state N (perf counting
    /// with a tracepoint filter).
    IdleEnter(u32),
    /// `power:cpu_idle` with `state == 4294967295` (`PWR_EVENT_EXIT`): idle exits.
    IdleExit,
    /// cpuidle `stateN/usage`: entries into state N, counted by cpuidle itself.
    CpuidleUsage(u32),
    /// cpuidle `stateN/time`: microseconds spent in state N.
    CpuidleTimeUs(u32),
    /// Entries into state N counted by the BPF program on `power:cpu_idle`.
    BpfIdleEnter(u32),
    /// Nanoseconds spent in state N measured by the BPF program (entry to exit).
    BpfIdleNs(u32),
}

impl Event {
    /// The unit of the `count` column for this event.
    pub fn unit(&self) -> &'static str {
        match self {
            Event::CpuidleTimeUs(_) => "us",
            Event::BpfIdleNs(_) => "ns",
            _ => "events",
        }
    }

    /// The idle state this event is about, if any.
    pub fn state(&self) -> Option<u32> {
        match *self {
            Event::IdleEnter(s)
            | Event::CpuidleUsage(s)
            | Event::CpuidleTimeUs(s)
            | Event::BpfIdleEnter(s)
            | Event::BpfIdleNs(s) => Some(s),
            _ => None,
        }
    }

    /// Parses a name written by [`fmt::Display`] (the `event` column of the CSV).
    pub fn parse(name: &str) -> Option<Event> {
        let (base, state) = match name.split_once(".state") {
            Some((b, s)) => (b, Some(s.parse::<u32>().ok()?)),
            None => (name, None),
        };
        Some(match (base, state) {
            ("page_faults_min", None) => Event::PageFaultsMin,
            ("page_faults_maj", None) => Event::PageFaultsMaj,
            ("context_switches", None) => Event::ContextSwitches,
            ("cpu_migrations", None) => Event::CpuMigrations,
            ("wake_idle_without_ipi", None) => Event::WakeIdleWithoutIpi,
            ("cpu_idle_exit", None) => Event::IdleExit,
            ("cpu_idle_enter", Some(s)) => Event::IdleEnter(s),
            ("cpuidle_usage", Some(s)) => Event::CpuidleUsage(s),
            ("cpuidle_time_us", Some(s)) => Event::CpuidleTimeUs(s),
            ("bpf_idle_enter", Some(s)) => Event::BpfIdleEnter(s),
            ("bpf_idle_ns", Some(s)) => Event::BpfIdleNs(s),
            _ => return None,
        })
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::PageFaultsMin => f.write_str("page_faults_min"),
            Event::PageFaultsMaj => f.write_str("page_faults_maj"),
            Event::ContextSwitches => f.write_str("context_switches"),
            Event::CpuMigrations => f.write_str("cpu_migrations"),
            Event::WakeIdleWithoutIpi => f.write_str("wake_idle_without_ipi"),
            Event::IdleEnter(s) => write!(f, "cpu_idle_enter.state{s}"),
            Event::IdleExit => f.write_str("cpu_idle_exit"),
            Event::CpuidleUsage(s) => write!(f, "cpuidle_usage.state{s}"),
            Event::CpuidleTimeUs(s) => write!(f, "cpuidle_time_us.state{s}"),
            Event::BpfIdleEnter(s) => write!(f, "bpf_idle_enter.state{s}"),
            Event::BpfIdleNs(s) => write!(f, "bpf_idle_ns.state{s}"),
        }
    }
}

/// How a channel's value is read.
#[derive(Debug)]
pub(crate) enum Reader {
    /// A perf counting event: one `read()` of 8 bytes.
    Perf(OwnedFd),
    /// A sysfs decimal counter: one `pread` at offset 0.
    Sysfs(File),
    /// Slot of the BPF map snapshot taken once per read of the set.
    #[cfg_attr(not(feature = "bpf"), allow(dead_code))]
    Bpf(usize),
}

/// One counter: an event on a CPU.
#[derive(Debug)]
pub struct Channel {
    /// The CPU counted.
    pub cpu: u32,
    /// What is counted.
    pub event: Event,
    /// The event's name as written in the CSV (`cpu_idle_enter.state1`), built once.
    pub label: String,
    /// What is read, for errors and the CSV's metadata.
    pub origin: String,
    pub(crate) reader: Reader,
}

impl Channel {
    pub(crate) fn perf(cpu: u32, event: Event, origin: String, fd: OwnedFd) -> Channel {
        Channel {
            cpu,
            label: event.to_string(),
            event,
            origin,
            reader: Reader::Perf(fd),
        }
    }

    pub(crate) fn sysfs(cpu: u32, event: Event, path: PathBuf) -> Result<Channel> {
        let file = File::open(&path).map_err(|source| EventsError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(Channel {
            cpu,
            label: event.to_string(),
            event,
            origin: path.display().to_string(),
            reader: Reader::Sysfs(file),
        })
    }
}

/// Reads a decimal counter file with one `pread` into a stack buffer (no allocation).
pub(crate) fn pread_u64(file: &File) -> io::Result<u64> {
    let mut buf = [0u8; 32];
    let n = rustix::io::pread(file.as_fd(), &mut buf[..], 0).map_err(io::Error::from)?;
    parse_decimal(&buf[..n]).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidData))
}

/// Parses ASCII digits up to the first non-digit (the kernel ends with a newline).
pub(crate) fn parse_decimal(b: &[u8]) -> Option<u64> {
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    b[..digits].iter().try_fold(0u64, |acc, &c| {
        acc.checked_mul(10)?.checked_add((c - b'0') as u64)
    })
}

/// Every counter asked for, opened on every online CPU, read together.
#[derive(Debug)]
pub struct EventCounters {
    channels: Vec<Channel>,
    /// The cpuidle states of each CPU (for names in the summary and the CSV header).
    pub cpuidle: CpuidleStates,
    /// What was left out or found along the way, for the user.
    pub notes: Vec<String>,
    bpf: Option<cstate::BpfIdle>,
    bpf_snapshot: Vec<u64>,
    /// The full trace, when asked for: drained into the events file on every read.
    pub(crate) trace: Option<full_trace::FullTrace>,
}

impl EventCounters {
    /// Opens the counters of `groups` on `cpus` (every online CPU of this machine when
    /// `None`). cpuidle is read under `root` (falling back to `/` when an emulator's
    /// root lacks it: the emulator serves RAPL only); perf and tracefs are always
    /// this machine's kernel's.
    pub fn open(groups: Groups, root: &SysRoot, cpus: Option<&[u32]>) -> Result<EventCounters> {
        let mut notes = Vec::new();
        let cpus: Vec<u32> = match cpus {
            Some(c) => c.to_vec(),
            None => online_cpus()?,
        };
        let mut channels = Vec::new();
        if groups.faults {
            channels.extend(faults::open(&cpus)?);
        }
        if groups.sched {
            channels.extend(sched::open(&cpus, &mut notes)?);
        }
        let cpuidle = CpuidleStates::read(root, &cpus, &mut notes)?;
        let mut bpf = None;
        if groups.cstate {
            channels.extend(cstate::open_perf(&cpus, &cpuidle, &mut notes)?);
            channels.extend(cpuidle.channels()?);
            match cstate::BpfIdle::open(&cpus, &cpuidle) {
                Ok((b, chans)) => {
                    notes.push(b.describe());
                    channels.extend(chans);
                    bpf = Some(b);
                }
                Err(e) => notes.push(format!(
                    "power:cpu_idle through BPF is not available ({e}); C-state entries come from perf counting and cpuidle sysfs only"
                )),
            }
        }
        let slots = bpf.as_ref().map_or(0, bpf_idle::BpfIdle::slots);
        Ok(EventCounters {
            channels,
            cpuidle,
            notes,
            bpf,
            bpf_snapshot: vec![0; slots],
            trace: None,
        })
    }

    /// A set of already opened channels (tests, custom selections).
    pub fn from_channels(channels: Vec<Channel>, cpuidle: CpuidleStates) -> EventCounters {
        EventCounters {
            channels,
            cpuidle,
            notes: Vec::new(),
            bpf: None,
            bpf_snapshot: Vec::new(),
            trace: None,
        }
    }

    /// Also records every event of `groups` one by one (see [`full_trace`]) on the
    /// CPUs counted, with a ring of `ring_bytes`; the rows go to the events file as
    /// `trace:` rows beside the counters'.
    pub fn enable_full_trace(&mut self, groups: Groups, ring_bytes: usize) -> Result<()> {
        let mut cpus: Vec<u32> = self.channels.iter().map(|c| c.cpu).collect();
        cpus.sort_unstable();
        cpus.dedup();
        let t = full_trace::FullTrace::open(groups, &cpus, ring_bytes)?;
        self.notes.push(t.describe().to_string());
        self.trace = Some(t);
        Ok(())
    }

    /// Whether a full trace is recorded.
    pub fn full_trace(&self) -> bool {
        self.trace.is_some()
    }

    /// The counters, in the order [`EventCounters::read`] fills.
    pub fn channels(&self) -> &[Channel] {
        &self.channels
    }

    /// Reads every counter's cumulative value into `out` (one per channel). Allocates
    /// nothing: one syscall per counter, plus one map lookup per CPU for BPF.
    pub fn read(&mut self, out: &mut [u64]) -> Result<()> {
        if let Some(b) = &self.bpf {
            b.snapshot(&mut self.bpf_snapshot)
                .map_err(|source| EventsError::Read {
                    what: "the BPF cpu_idle map".into(),
                    source,
                })?;
        }
        for (c, o) in self.channels.iter().zip(out.iter_mut()) {
            let r = match &c.reader {
                Reader::Perf(fd) => read_count(fd.as_fd()),
                Reader::Sysfs(f) => pread_u64(f),
                Reader::Bpf(slot) => Ok(self.bpf_snapshot.get(*slot).copied().unwrap_or(0)),
            };
            *o = r.map_err(|source| EventsError::Read {
                what: format!("{} on CPU {} ({})", c.label, c.cpu, c.origin),
                source,
            })?;
        }
        Ok(())
    }
}

/// This machine's online CPUs. Always the system's, whatever the root: the counters
/// are this kernel's, and an emulator's root describes another machine's topology.
pub fn online_cpus() -> Result<Vec<u32>> {
    let p = SysRoot::default().path("/sys/devices/system/cpu/online");
    let text = std::fs::read_to_string(&p).map_err(|source| EventsError::Io {
        path: p.clone(),
        source,
    })?;
    quietwatt::topology::parse_cpu_list(&text).ok_or(EventsError::Parse {
        path: p,
        content: text,
    })
}

/// The advice for a perf_event_open error on a system-wide counter.
pub(crate) fn open_fix(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "system-wide counters need root or CAP_PERFMON (or kernel.perf_event_paranoid <= 0)"
        }
        Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EOPNOTSUPP) => {
            "this kernel does not provide the event (CONFIG_PERF_EVENTS, CONFIG_TRACEPOINTS)"
        }
        Some(libc::EMFILE) | Some(libc::ENFILE) => {
            "too many open files: raise `ulimit -n` (one descriptor per event per CPU)"
        }
        Some(libc::EINVAL) => "the kernel refused the event's attributes or filter",
        _ => "see perf_event_open(2)",
    }
}

/// Prefix of the `event` column for events recorded one by one (a full trace).
pub const TRACED: &str = "trace:";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_parse_and_print() {
        let g: Groups = "cstate,faults".parse().unwrap();
        assert!(g.cstate && g.faults && !g.sched);
        assert_eq!(g.to_string(), "cstate,faults");
        assert_eq!("all".parse::<Groups>().unwrap(), Groups::all());
        assert!(matches!(
            "cstate,disk".parse::<Groups>(),
            Err(EventsError::UnknownGroup(n)) if n == "disk"
        ));
        assert!(",".parse::<Groups>().is_err());
    }

    #[test]
    fn event_names_round_trip() {
        for e in [
            Event::PageFaultsMin,
            Event::PageFaultsMaj,
            Event::ContextSwitches,
            Event::CpuMigrations,
            Event::WakeIdleWithoutIpi,
            Event::IdleEnter(3),
            Event::IdleExit,
            Event::CpuidleUsage(1),
            Event::CpuidleTimeUs(0),
            Event::BpfIdleEnter(2),
            Event::BpfIdleNs(1),
        ] {
            assert_eq!(Event::parse(&e.to_string()), Some(e), "{e}");
        }
        assert_eq!(Event::parse("cpu_idle_enter"), None);
        assert_eq!(Event::parse("cpuidle_usage.statex"), None);
        assert_eq!(Event::parse("energy"), None);
    }

    #[test]
    fn decimal_counters_parse_without_allocating() {
        assert_eq!(parse_decimal(b"508097\n"), Some(508097));
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"\n"), None);
        assert_eq!(parse_decimal(b"99999999999999999999999"), None);
    }
}
