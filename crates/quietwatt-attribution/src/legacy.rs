//! The attributing sink as it was before the transform stage, kept only for the
//! exporter (`serve --attribute`) until it feeds the [`Attribution`] transform
//! directly, as `top` does: then this file goes. Nothing else uses it.
//!
//! It runs the same transform and long-format rows; its totals are shared through a
//! mutex that is brought up to date at [`AttributionSink::settle`] and
//! [`Sink::finish`], the per-entity totals moved into it (so that a reader that
//! takes them out sees what was used since it last did).

use crate::model::IdlePower;
use crate::names::Names;
use crate::sink::{LongFormat, LongFormatSink};
use crate::splitter::Totals;
use crate::timeline::{By, Entity};
use crate::transform::{Attribution, SliceSource};
use quietwatt::domain::DomainId;
use quietwatt::sink::{Metadata, Sample, Sink};
use quietwatt::source::Channel;
use quietwatt::transform::{Transform, Transformed};
use std::io::{self, Write};
use std::sync::{Arc, Mutex};

/// The attribution and its long-format rows as one sink, with its totals shared
/// (the exporter's; see the module's documentation: new code uses
/// [`crate::Attributed`] or [`Attribution`]).
pub struct AttributionSink<W: Write + Send> {
    inner: Transformed<Attribution, LongFormatSink<W>>,
    names: Names,
    shared: Arc<Mutex<Totals>>,
}

impl<W: Write + Send> AttributionSink<W> {
    /// Attributes by `by` with `idle` set apart; `cpu_socket[cpu]` is each CPU's
    /// package (socket number), as the topology under the measured root says.
    pub fn new(
        out: W,
        format: LongFormat,
        by: By,
        idle: IdlePower,
        cpu_socket: Vec<Option<u32>>,
        source: Box<dyn SliceSource>,
        names: Names,
    ) -> AttributionSink<W> {
        AttributionSink {
            inner: Transformed::new(
                Attribution::new(by, idle, cpu_socket, source),
                LongFormatSink::new(out, format, names),
            ),
            names: Names::new(),
            shared: Arc::new(Mutex::new(Totals::default())),
        }
    }

    /// The totals, brought up to date at each settle and at the end.
    pub fn totals(&self) -> Arc<Mutex<Totals>> {
        Arc::clone(&self.shared)
    }

    /// Lays out the split for samples of `channels`, without writing a header.
    pub fn set_channels(&mut self, channels: &[DomainId]) {
        self.inner.transform_mut().begin(channels);
    }

    /// Brings the shared totals up to now (the kernel's lost slices, the fitted
    /// idle power, and the per-entity totals since the last settle).
    pub fn settle(&mut self) {
        let a = self.inner.transform_mut();
        a.settle();
        let entities = a.take_entities();
        let now = a.totals();
        let mut t = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        for (e, v) in &entities {
            *t.entities.entry(*e).or_default() += v;
        }
        t.unattributed = now.unattributed;
        t.energy_uj = now.energy_uj;
        t.idle_uj = now.idle_uj;
        t.dram_uj = now.dram_uj;
        t.intervals = now.intervals;
        t.unbalanced = now.unbalanced;
        t.dropped_slices = now.dropped_slices;
        t.fitted_idle.clone_from(&now.fitted_idle);
    }

    /// An entity's readable name ([`Attribution::name_of`]).
    pub fn name_of(&mut self, e: Entity) -> String {
        self.inner.transform().name_of(&mut self.names, e)
    }
}

impl<W: Write + Send> Sink for AttributionSink<W> {
    fn begin(&mut self, meta: &Metadata, channels: &[Channel]) -> io::Result<()> {
        self.inner.begin(meta, channels)
    }
    fn sample(&mut self, sample: &Sample<'_>) -> io::Result<()> {
        self.inner.sample(sample)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
    fn finish(&mut self) -> io::Result<()> {
        let r = self.inner.finish();
        self.settle();
        r
    }
}
