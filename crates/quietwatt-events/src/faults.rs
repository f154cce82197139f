//! Page faults, counted per CPU by the kernel's software events.
//!
//! `PERF_COUNT_SW_PAGE_FAULTS_MIN` counts faults served from memory (first touch of
//! an anonymous page, a page already in the page cache), `_MAJ` those that waited
//! for I/O. A system-wide event on CPU N counts every task's faults while it runs
//! on N, kernel and user alike (no `exclude_*` bit), which is what the energy of
//! the CPU pays for (paper 003 models that energy per fault).

use super::{open_fix, Channel, Event, EventsError, Result};
use perf_event_open_sys::bindings::{
    PERF_COUNT_SW_PAGE_FAULTS_MAJ, PERF_COUNT_SW_PAGE_FAULTS_MIN, PERF_TYPE_SOFTWARE,
};
use quietwatt_sys::perf::open_counting_event;

/// The minor and major fault counters of each CPU.
pub fn open(cpus: &[u32]) -> Result<Vec<Channel>> {
    let mut out = Vec::with_capacity(cpus.len() * 2);
    for &cpu in cpus {
        for (event, config) in [
            (Event::PageFaultsMin, PERF_COUNT_SW_PAGE_FAULTS_MIN),
            (Event::PageFaultsMaj, PERF_COUNT_SW_PAGE_FAULTS_MAJ),
        ] {
            out.push(software(cpu, event, config as u64)?);
        }
    }
    Ok(out)
}

/// A system-wide software counter on `cpu`.
pub(crate) fn software(cpu: u32, event: Event, config: u64) -> Result<Channel> {
    let fd = open_counting_event(PERF_TYPE_SOFTWARE, config, cpu).map_err(|source| {
        EventsError::Open {
            event: event.to_string(),
            cpu,
            fix: open_fix(&source),
            source,
        }
    })?;
    Ok(Channel::perf(
        cpu,
        event,
        format!("perf software config {config} cpu {cpu}"),
        fd,
    ))
}
