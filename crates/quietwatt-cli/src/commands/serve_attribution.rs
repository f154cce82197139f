//! `serve --attribute`: the package energy split among cgroups or processes at
//! each context switch (quietwatt-attribution), exported as counters of bounded
//! number: the entities that used the most lately, and `other`.
//!
//! The split runs on the main thread at each refresh, over the samples the package's
//! session took since the last one (the accounting program's slices wait in the
//! kernel's ring meanwhile). The totals per entity are taken out of the split at
//! each refresh and added to a [`Bounded`] set, so memory follows the entities
//! active lately, not every process that ever ran.

use super::attribute::{splitter, tracker, ByArg};
use crate::emulated::Environment;
use crate::exit::Failure;
use quietwatt::export::prometheus::{AttributedSeries, AttributionFigures};
use quietwatt::session::SampleRow;
use quietwatt::sink::{Sample, Sink};
use quietwatt::DomainId;
use quietwatt_attribution::{
    AttributionSink, Bounded, By, Entity, EntityTotal, IdlePower, LongFormat, Totals,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long "lately" lasts: an entity's energy counts half as much for choosing the
/// exported set after this long.
const HALF_LIFE: Duration = Duration::from_secs(30);

/// The split and the exported counters.
pub struct ServeAttribution {
    sink: AttributionSink<std::io::Sink>,
    totals: Arc<Mutex<Totals>>,
    by: By,
    bounded: Bounded,
    freq_hz: f64,
    /// Whether an idle power (configured or fitted) sets the idle part apart.
    idle_split: bool,
}

impl ServeAttribution {
    /// Loads the accounting program and lays the split out for samples of
    /// `channels` (the session's that reads the package); at most `top`
    /// entities get series of their own, the set chosen over refreshes `refresh`
    /// apart.
    pub fn open(
        env: &Environment,
        by: ByArg,
        idle: IdlePower,
        top: usize,
        channels: &[DomainId],
        freq_hz: f64,
        refresh: Duration,
    ) -> Result<ServeAttribution, Failure> {
        let by = By::from(by);
        let what = "--attribute";
        let mut sink = splitter(
            env,
            by,
            idle,
            std::io::sink(),
            LongFormat::Csv,
            what,
            tracker(what)?,
        )?;
        sink.set_channels(channels);
        let half_life = HALF_LIFE.as_secs_f64() / refresh.as_secs_f64().max(1e-3);
        Ok(ServeAttribution {
            idle_split: !matches!(idle, IdlePower::None),
            totals: sink.totals(),
            sink,
            by,
            bounded: Bounded::new(top, half_life),
            freq_hz,
        })
    }

    /// Splits one sample of the package's session.
    pub fn feed(&mut self, row: &SampleRow) {
        let sample = Sample {
            t_ns: row.t_ns,
            interval_ns: row.interval_ns,
            missed: u32::try_from(row.missed).unwrap_or(u32::MAX),
            merged: 0,
            freq_hz: self.freq_hz,
            marks: Default::default(),
            energy: &row.energy_j,
        };
        // The output is io::sink: the split cannot fail to be written.
        let _ = self.sink.sample(&sample);
    }

    /// The counters since the exporter started, for the exposition.
    pub fn figures(&mut self) -> AttributionFigures {
        self.sink.settle();
        let (deltas, unattributed, dropped) = {
            let mut t = self.totals.lock().unwrap_or_else(|e| e.into_inner());
            (
                std::mem::take(&mut t.entities),
                t.unattributed,
                t.dropped_slices,
            )
        };
        self.bounded.update(&deltas);
        let j = |uj: u64| uj as f64 / 1e6;
        let series = |id: String, name: String, t: &EntityTotal| AttributedSeries {
            id,
            name,
            dynamic_j: j(t.dynamic_uj),
            idle_j: j(t.idle_uj),
            cpu_seconds: t.cpu_ns as f64 / 1e9,
        };
        let mut out: Vec<AttributedSeries> = Vec::new();
        for (e, t) in self.bounded.members() {
            let id = match e {
                Entity::Process(p) => p.to_string(),
                Entity::Cgroup(c) => c.to_string(),
            };
            out.push(series(id, self.sink.name_of(*e), t));
        }
        out.push(series("other".into(), "other".into(), self.bounded.other()));
        AttributionFigures {
            by: self.by.name(),
            series: out,
            unattributed_dynamic_j: j(unattributed.dynamic_uj),
            unattributed_idle_j: j(unattributed.idle_uj),
            dropped_slices: dropped,
            idle_split: self.idle_split,
        }
    }
}
