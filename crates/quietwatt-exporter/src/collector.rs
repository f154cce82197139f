//! The open side of the exporter: a [`Collector`] contributes metric families at
//! each refresh, beside the energy the exporter reads itself.
//!
//! As prometheus-client's `Collector` is asked to encode its metrics at each
//! scrape, a [`Collector`] is asked for its families; but here at each refresh
//! (every `min_interval`, on the exporter's thread), not at each scrape, so that a
//! scraper never makes a collector read anything and every scrape between two
//! refreshes shows the same figures. A collector may also read the samples of the
//! session that reads one domain ([`Collector::samples_of`]): what a split of the
//! package energy needs.
//!
//! The crates above the exporter implement it: `quietwatt_events::exporter` (each
//! CPU's idle states and wake-ups), `quietwatt_attribution::exporter` (the package
//! energy split among processes or cgroups). [`ProcessCollector`] is the
//! exporter's own (what the exporting process costs).

use crate::exposition::{Family, Kind, Unit, Value};
use quietwatt::session::SampleRow;
use quietwatt::Domain;

/// Why a collector could not give its families; the exporter then stops asking it
/// (it says so through [`crate::Notice::CollectorFailed`]) and goes on without it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CollectError(pub String);

/// Something that contributes metric families to every refresh.
///
/// Counters a collector exports must never decrease while the exporter runs
/// (Prometheus's `rate()` takes a decrease for a restart); a collector that starts
/// counting again keeps its own base.
pub trait Collector {
    /// A short name, for messages (`events`, `attribution`).
    fn name(&self) -> &str;

    /// The domain whose session's samples [`Collector::sample`] gets, if any.
    /// [`crate::Exporter::register`] refuses a collector whose domain is not read.
    fn samples_of(&self) -> Option<Domain> {
        None
    }

    /// One sample of the session reading [`Collector::samples_of`]'s domain, in
    /// order, before the refresh's [`Collector::collect`]. The row's energies are in
    /// the order of that session's channels ([`crate::Exporter::channels_reading`]).
    fn sample(&mut self, _row: &SampleRow) {}

    /// Appends this refresh's families to `out`.
    fn collect(&mut self, out: &mut Vec<Family>) -> Result<(), CollectError>;
}

/// What the exporting process costs: its CPU seconds (user and system) and the
/// times it slept and was woken (voluntary context switches), every thread's;
/// and the standard `process_*` families every Prometheus client library
/// exports (CPU, memory, file descriptors, start time), so that dashboards and
/// alerts made for any exporter work on this one.
#[derive(Debug, Default)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn name(&self) -> &str {
        "process"
    }

    fn collect(&mut self, out: &mut Vec<Family>) -> Result<(), CollectError> {
        // Without getrusage the families are left out, as before: no error.
        let Some(u) = quietwatt_sys::usage::process_usage() else {
            return Ok(());
        };
        let mut cpu = Family::new(
            "quietwatt_cpu_seconds",
            Kind::Counter,
            Some(Unit::Seconds),
            "CPU time of the exporter process, user and system: what measuring costs.",
        );
        cpu.push(none(), Value::Seconds(u.cpu_ns as f64 / 1e9));
        let mut wakeups = Family::new(
            "quietwatt_wakeups",
            Kind::Counter,
            None,
            "Times the exporter process slept and was woken (voluntary context switches).",
        );
        wakeups.push(none(), Value::Count(u.voluntary_switches));
        out.extend([cpu, wakeups]);
        out.extend(standard(
            u.cpu_ns,
            quietwatt_sys::usage::ProcessFigures::current(),
        ));
        Ok(())
    }
}

/// The standard process families (the Prometheus client libraries' "process
/// metrics"): CPU seconds always, the rest where `/proc/self` was read.
fn standard(cpu_ns: u64, figures: Option<quietwatt_sys::usage::ProcessFigures>) -> Vec<Family> {
    let family = |name: &'static str, kind, unit, help: &'static str, value| {
        let mut f = Family::new(name, kind, unit, help);
        f.push(none(), value);
        f
    };
    let mut out = vec![family(
        "process_cpu_seconds",
        Kind::Counter,
        Some(Unit::Seconds),
        "Total user and system CPU time spent in seconds.",
        Value::Seconds(cpu_ns as f64 / 1e9),
    )];
    let Some(p) = figures else {
        return out;
    };
    out.extend([
        family(
            "process_resident_memory_bytes",
            Kind::Gauge,
            Some(Unit::Bytes),
            "Resident memory size in bytes.",
            Value::Count(p.resident_bytes),
        ),
        family(
            "process_virtual_memory_bytes",
            Kind::Gauge,
            Some(Unit::Bytes),
            "Virtual memory size in bytes.",
            Value::Count(p.virtual_bytes),
        ),
        family(
            "process_open_fds",
            Kind::Gauge,
            None,
            "Number of open file descriptors.",
            Value::Count(p.open_fds),
        ),
        family(
            "process_max_fds",
            Kind::Gauge,
            None,
            "Maximum number of open file descriptors.",
            Value::Count(p.max_fds),
        ),
        family(
            "process_start_time_seconds",
            Kind::Gauge,
            Some(Unit::Seconds),
            "Start time of the process since unix epoch in seconds.",
            Value::Seconds(p.start_time_us as f64 / 1e6),
        ),
    ]);
    out
}

/// No labels.
fn none() -> [(&'static str, String); 0] {
    []
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_counts_its_cpu_time_and_wakeups() {
        let mut out = Vec::new();
        ProcessCollector.collect(&mut out).unwrap();
        let names: Vec<&str> = out.iter().map(|f| f.name.as_ref()).collect();
        assert_eq!(
            names,
            [
                "quietwatt_cpu_seconds",
                "quietwatt_wakeups",
                "process_cpu_seconds",
                "process_resident_memory_bytes",
                "process_virtual_memory_bytes",
                "process_open_fds",
                "process_max_fds",
                "process_start_time_seconds"
            ]
        );
        assert!(matches!(out[0].samples[0].value, Value::Seconds(s) if s > 0.0));
        // The standard family counts the same CPU time as quietwatt's own.
        assert!(matches!(out[2].samples[0].value, Value::Seconds(s) if s > 0.0));
        assert!(matches!(out[3].samples[0].value, Value::Count(b) if b > 0));
    }

    #[test]
    fn without_proc_only_the_cpu_time_is_exported() {
        let names: Vec<_> = standard(1_500_000_000, None)
            .into_iter()
            .map(|f| f.name)
            .collect();
        assert_eq!(names, ["process_cpu_seconds"]);
    }
}
