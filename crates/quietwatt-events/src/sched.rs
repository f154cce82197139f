//! Scheduler events: context switches and CPU migrations (software events) and
//! wake-ups that needed no IPI (`sched:sched_wake_idle_without_ipi`).
//!
//! The wake-up tracepoint fires when a CPU wakes an idle CPU that is *polling* its
//! need-resched flag (the `POLL` state, an architecture's mwait idle, or the idle
//! loop before it halts): setting the flag is enough and no interrupt is sent. It
//! fires on the waker's CPU; the count per CPU is therefore "wake-ups this CPU did
//! without an IPI". A CPU that idles by halting (`haltpoll idle`, HLT) needs an IPI,
//! so on a VM whose cpuidle never uses `POLL` this counter stays low (6/s on the
//! project's VM against ~1400 context switches/s): that is the finding, not a fault.

use super::faults::software;
use super::tracepoint::{find_id, open_tracepoint};
use super::{Channel, Event, Result};
use perf_event_open_sys::bindings::{PERF_COUNT_SW_CONTEXT_SWITCHES, PERF_COUNT_SW_CPU_MIGRATIONS};

/// Context switches, migrations and wake-ups without IPI on each CPU. A kernel
/// without the tracepoint (or without tracefs) loses only that counter, with a note.
pub fn open(cpus: &[u32], notes: &mut Vec<String>) -> Result<Vec<Channel>> {
    let mut out = Vec::with_capacity(cpus.len() * 3);
    for &cpu in cpus {
        out.push(software(
            cpu,
            Event::ContextSwitches,
            PERF_COUNT_SW_CONTEXT_SWITCHES as u64,
        )?);
        out.push(software(
            cpu,
            Event::CpuMigrations,
            PERF_COUNT_SW_CPU_MIGRATIONS as u64,
        )?);
    }
    let id = match find_id("sched", "sched_wake_idle_without_ipi", notes) {
        Ok(id) => id,
        Err(e) => {
            notes.push(format!("wake-ups without IPI are not counted: {e}"));
            return Ok(out);
        }
    };
    for &cpu in cpus {
        let fd = open_tracepoint(id, cpu, None, "sched:sched_wake_idle_without_ipi")?;
        out.push(Channel::perf(
            cpu,
            Event::WakeIdleWithoutIpi,
            format!("perf tracepoint sched:sched_wake_idle_without_ipi (id {id}) cpu {cpu}"),
            fd,
        ));
    }
    Ok(out)
}
