//! C-state entries and exits from the `power:cpu_idle` tracepoint (fields `u32 state`,
//! `u32 cpu_id`; `state` is `PWR_EVENT_EXIT` = 4294967295 on exit).
//!
//! **perf counting.** One counting event per CPU and per idle state, each with a
//! tracepoint filter `state == N` set by `PERF_EVENT_IOC_SET_FILTER`, plus one for
//! the exits: the kernel counts entries per state and nothing reaches user space
//! until the counter is read. Counting gives entries, not time: residency per state
//! comes from cpuidle's `time` (sysfs) or from the BPF program, which timestamps
//! each entry and exit in the kernel.
//!
//! **Blind spots.** On the project's VM (kernel 6.18, haltpoll) perf and ftrace see
//! `power:cpu_idle` on CPU 0 but not on CPU 1, while a BPF tracepoint program sees
//! it on both. quietwatt does not assume either way: the summary compares each
//! CPU's count with its cpuidle `usage` and names the CPUs a mechanism is blind on.
//!
//! **No cpuidle driver** (many cloud VMs): the kernel's own idle loop still fires
//! the tracepoint, with state 0 when it polls and 1 when it halts
//! (`default_idle_call`). Those two states are counted; with no `usage` to compare
//! against, the summary compares perf's count with the BPF program's.

use super::cpuidle::CpuidleStates;
use super::tracepoint::{find_id, open_tracepoint, PWR_EVENT_EXIT};
use super::{Channel, Event, Result};

/// Entry counters per state and an exit counter, per CPU, through perf. Without
/// tracefs or the tracepoint this returns no channel and a note (the cpuidle
/// counters still work); a refused open of an existing tracepoint is an error.
pub fn open_perf(
    cpus: &[u32],
    cpuidle: &CpuidleStates,
    notes: &mut Vec<String>,
) -> Result<Vec<Channel>> {
    let id = match find_id("power", "cpu_idle", notes) {
        Ok(id) => id,
        Err(e) => {
            notes.push(format!("power:cpu_idle is not counted through perf: {e}"));
            return Ok(Vec::new());
        }
    };
    let mut out = Vec::new();
    for &cpu in cpus {
        // Without a cpuidle driver the kernel's idle loop still fires the tracepoint
        // (states 0 and 1): count those, or every entry would go unseen.
        for index in cpuidle.traced_indices(cpu) {
            let filter = format!("state == {index}");
            let fd = open_tracepoint(id, cpu, Some(&filter), "power:cpu_idle")?;
            out.push(Channel::perf(
                cpu,
                Event::IdleEnter(index),
                format!("perf tracepoint power:cpu_idle (id {id}) [{filter}] cpu {cpu}"),
                fd,
            ));
        }
        let filter = format!("state == {PWR_EVENT_EXIT}");
        let fd = open_tracepoint(id, cpu, Some(&filter), "power:cpu_idle")?;
        out.push(Channel::perf(
            cpu,
            Event::IdleExit,
            format!("perf tracepoint power:cpu_idle (id {id}) [{filter}] cpu {cpu}"),
            fd,
        ));
    }
    Ok(out)
}

pub use super::bpf_idle::BpfIdle;
