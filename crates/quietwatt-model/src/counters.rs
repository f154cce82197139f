//! perf software counters on one task (a thread, a child process), as opposed to the
//! system-wide per-CPU counters of [`quietwatt_events`]: a model counts the events of
//! the scenario it runs, and `run --model` those of the command it measures.

use crate::error::{Error, Result};
use perf_event_open_sys::bindings::{
    perf_event_attr, PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_OP_READ,
    PERF_COUNT_HW_CACHE_RESULT_MISS, PERF_COUNT_SW_CONTEXT_SWITCHES, PERF_COUNT_SW_PAGE_FAULTS_MAJ,
    PERF_COUNT_SW_PAGE_FAULTS_MIN, PERF_TYPE_HW_CACHE, PERF_TYPE_SOFTWARE,
};
use quietwatt::source::perf::read_count;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

/// A perf software event a model counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SoftwareEvent {
    /// `PERF_COUNT_SW_PAGE_FAULTS_MIN` (`minor-faults`): faults served without I/O.
    MinorFaults,
    /// `PERF_COUNT_SW_PAGE_FAULTS_MAJ` (`major-faults`): faults that waited for I/O.
    MajorFaults,
    /// `PERF_COUNT_SW_CONTEXT_SWITCHES` (`context-switches`).
    ContextSwitches,
}

impl SoftwareEvent {
    /// Every event, in report order.
    pub const ALL: [SoftwareEvent; 3] = [
        SoftwareEvent::MinorFaults,
        SoftwareEvent::MajorFaults,
        SoftwareEvent::ContextSwitches,
    ];

    /// perf's name for it.
    pub fn name(self) -> &'static str {
        match self {
            SoftwareEvent::MinorFaults => "minor-faults",
            SoftwareEvent::MajorFaults => "major-faults",
            SoftwareEvent::ContextSwitches => "context-switches",
        }
    }

    fn config(self) -> u64 {
        (match self {
            SoftwareEvent::MinorFaults => PERF_COUNT_SW_PAGE_FAULTS_MIN,
            SoftwareEvent::MajorFaults => PERF_COUNT_SW_PAGE_FAULTS_MAJ,
            SoftwareEvent::ContextSwitches => PERF_COUNT_SW_CONTEXT_SWITCHES,
        }) as u64
    }
}

impl fmt::Display for SoftwareEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which task a counter follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// The calling thread only.
    ThisThread,
    /// The thread or process with this id (a child, a sibling thread).
    Id(i32),
    /// The tasks that the calling thread creates from now on and that then `exec`:
    /// the counter is opened disabled with `inherit` and `enable_on_exec`, so the
    /// calling thread and threads it starts without exec count nothing, and a child
    /// it spawns counts from its `exec` on, children included (how `perf stat -- CMD`
    /// counts a command). Read after the children have exited.
    ExecedChildren,
}

/// One counting perf event on one task (any CPU).
#[derive(Debug)]
pub struct TaskCounter {
    fd: OwnedFd,
    event: SoftwareEvent,
}

impl TaskCounter {
    /// Opens `event` on `task`. Counts kernel and user alike where permitted, else
    /// (perf_event_paranoid 2 without CAP_PERFMON) user mode only: faults and
    /// switches of a user task are counted either way.
    pub fn open(event: SoftwareEvent, task: Task) -> Result<TaskCounter> {
        let pid = match task {
            Task::ThisThread | Task::ExecedChildren => 0,
            Task::Id(p) => p,
        };
        let open = |exclude_kernel: bool| {
            let mut attr = perf_event_attr {
                type_: PERF_TYPE_SOFTWARE,
                size: std::mem::size_of::<perf_event_attr>() as u32,
                config: event.config(),
                ..Default::default()
            };
            if exclude_kernel {
                attr.set_exclude_kernel(1);
                attr.set_exclude_hv(1);
            }
            if task == Task::ExecedChildren {
                attr.set_disabled(1);
                attr.set_inherit(1);
                attr.set_enable_on_exec(1);
            }
            open_attr(&mut attr, pid)
        };
        let fd = open(false)
            .or_else(|e| match e.raw_os_error() {
                Some(libc::EACCES | libc::EPERM) => open(true),
                _ => Err(e),
            })
            .map_err(|source| Error::Scenario {
                what: format!(
                    "open the perf software counter {} on {}{}",
                    event,
                    match task {
                        Task::ThisThread => "this thread".to_string(),
                        Task::Id(p) => format!("task {p}"),
                        Task::ExecedChildren => "the command's processes".to_string(),
                    },
                    if source.raw_os_error() == Some(libc::EACCES) {
                        " (run as root or set kernel.perf_event_paranoid <= 2)"
                    } else {
                        ""
                    }
                ),
                source,
            })?;
        Ok(TaskCounter { fd, event })
    }

    /// The event counted.
    pub fn event(&self) -> SoftwareEvent {
        self.event
    }

    /// The count so far (with [`Task::ExecedChildren`], of the children that exited).
    pub fn read(&self) -> Result<u64> {
        read_count(self.fd.as_fd()).map_err(|source| Error::Scenario {
            what: format!("read the perf counter {}", self.event),
            source,
        })
    }
}

fn open_attr(attr: &mut perf_event_attr, pid: i32) -> io::Result<OwnedFd> {
    quietwatt_sys::perf::open_task_event(attr, pid)
}

/// Whether the dTLB read-miss hardware cache event opens on this thread: the TLB
/// dimension of paper 003 needs it. `Err` says why not (a VM without a virtual PMU
/// answers ENOENT or EOPNOTSUPP).
pub fn dtlb_misses_countable() -> std::result::Result<(), String> {
    let mut attr = perf_event_attr {
        type_: PERF_TYPE_HW_CACHE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: PERF_COUNT_HW_CACHE_DTLB as u64
            | (PERF_COUNT_HW_CACHE_OP_READ as u64) << 8
            | (PERF_COUNT_HW_CACHE_RESULT_MISS as u64) << 16,
        ..Default::default()
    };
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    match open_attr(&mut attr, 0) {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "the dTLB read-miss hardware event does not open here ({e}): no hardware counters (a VM without a virtual PMU?)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_threads_faults_are_counted() {
        let c = TaskCounter::open(SoftwareEvent::MinorFaults, Task::ThisThread).unwrap();
        let before = c.read().unwrap();
        // 64 fresh pages touched once each: at least 64 faults (the allocator may
        // hand back pages already mapped, so touch a fresh mapping).
        let page = crate::page_size();
        let b = crate::scenario::Buffer::map(64, page).unwrap();
        b.touch();
        let after = c.read().unwrap();
        assert!(after - before >= 64, "{}", after - before);
    }
}
