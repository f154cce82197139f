//! The one result type of a measurement: [`Measurement`], what a
//! [`crate::Session`] returns and what a [`crate::record::Recording`] and a
//! [`crate::command::MeasuredCommand`] hold beside what is theirs alone. Its
//! figures are [`EnergyReport`]'s; its JSON is the common part of
//! `quietwatt run --json` ([`crate::document::RunDocument`] flattens it) and the
//! report Python receives.

use crate::domain::{Domain, DomainId};
use crate::kernel_figures::KernelFigures;
use crate::meter::{DomainEnergy, EnergyReport, Meter};
use crate::overhead::Overhead;
use crate::source::Mechanism;
use crate::units::Joules;
use crate::warning::Warning;
use serde::Serialize;
use std::time::Duration;

/// Energy over a measurement: a session (or a snapshot or window of one), a
/// recording, a measured command.
///
/// The figures are [`EnergyReport`]'s, flattened into the same JSON object that
/// `quietwatt run --json` prints (`duration_s`, `total_energy_j`,
/// `total_uncertainty_j`, `total_rule`, `mechanism`, `domains[]`, `counter_events`,
/// `warnings`, `overhead`, `kernel`): `run --json` is this object with the
/// command's fields beside it, so the two cannot drift. The typed fields
/// ([`Measurement::mechanism`], [`Measurement::channels`],
/// [`Measurement::span_ns`]) are for Rust callers and are not serialized twice.
/// Every warning, the engine's and the kernel side's included, is in
/// `energy.warnings` ([`Measurement::warnings`]).
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    /// The mechanism read.
    #[serde(skip)]
    pub mechanism: Mechanism,
    /// Which counter each entry of `energy.domains` is, in the same order.
    #[serde(skip)]
    pub channels: Vec<DomainId>,
    /// The window's name, for a report of [`crate::Session::end_window`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// Per-domain energy with its uncertainty, the total and its rule, counter
    /// events and warnings.
    #[serde(flatten)]
    pub energy: EnergyReport,
    /// What sampling cost (the sampler thread's CPU time, wake-ups, lateness and
    /// missed deadlines; a recording's writer too): present for a recording, a
    /// measured command and the final report of a session with a rate; absent for
    /// a session without a rate, where the cost is the start and stop reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<Overhead>,
    /// A session's sample buffer, at the end of a session with a rate: its bound,
    /// the rows handed out, and those dropped with their energy (`kept` is what
    /// [`crate::Session::stop_with_samples`] returned). A recording's samples are
    /// in its output ([`crate::record::Recording::samples`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<SampleStats>,
    /// What the kernel side of an in-kernel mechanism (ebpf, perf-ring) did over
    /// the measurement: the samples it took and dropped, the drains and the
    /// sampler's wake-ups a second; present at the end of such a measurement (as
    /// `kernel` in `quietwatt run --json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelFigures>,
    /// When the first and the last reading the figures span were taken
    /// (CLOCK_MONOTONIC ns): what events on the same clock (a context switch's
    /// slice, a profile's sample) are placed against.
    #[serde(skip)]
    pub span_ns: Option<(u64, u64)>,
    /// The reader service the counters were read through, and what it granted
    /// (`"via"`); absent where they were read here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<crate::source::Via>,
    /// The model whose estimate the figures are, and its stated error;
    /// serialised as `"estimated": true` and `"estimate"`, both absent for a
    /// measurement.
    #[serde(flatten)]
    pub estimate: EstimateFields,
}

impl Measurement {
    /// The figures of `meter` so far, with its mechanism, channels and span:
    /// no cost, kernel figures or session fields yet.
    pub fn of(meter: &Meter) -> Measurement {
        Measurement {
            mechanism: meter.mechanism(),
            channels: meter.channels().iter().map(|c| c.id).collect(),
            window: None,
            energy: meter.report(),
            overhead: None,
            samples: None,
            kernel: None,
            span_ns: meter
                .first_reading_ns()
                .map(|first| (first, first + meter.elapsed().as_nanos() as u64)),
            via: meter.via().cloned(),
            estimate: EstimateFields(meter.estimate().cloned()),
        }
    }

    /// Adds the kernel side's figures, and their warnings to the others.
    pub(crate) fn set_kernel(&mut self, kernel: Option<KernelFigures>) {
        if let Some(k) = &kernel {
            self.energy
                .warnings
                .extend(k.warnings().into_iter().map(Warning::kernel_side));
        }
        self.kernel = kernel;
    }

    /// Time between the first and the last reading.
    pub fn duration(&self) -> Duration {
        Duration::try_from_secs_f64(self.energy.duration_s).unwrap_or_default()
    }

    /// The total without double counting (see [`EnergyReport::total_rule`]);
    /// `None` when nothing selected can be totalled.
    pub fn total(&self) -> Option<Joules> {
        self.energy.total_energy_j
    }

    /// ± bound on [`Measurement::total`].
    pub fn total_uncertainty(&self) -> Option<Joules> {
        self.energy.total_uncertainty_j
    }

    /// Each counter's typed identity with its figures.
    pub fn domains(&self) -> impl Iterator<Item = (DomainId, &DomainEnergy)> + '_ {
        self.channels.iter().copied().zip(&self.energy.domains)
    }

    /// The figures of one domain on one socket (the first die's on multi-die parts).
    pub fn domain(&self, socket: u32, domain: Domain) -> Option<&DomainEnergy> {
        self.domains()
            .find(|(id, _)| id.socket.0 == socket && id.domain == domain)
            .map(|(_, d)| d)
    }

    /// Things that make a figure doubtful.
    pub fn warnings(&self) -> &[Warning] {
        &self.energy.warnings
    }
}

/// A session's sample buffer: what it holds and what it had to let go.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SampleStats {
    /// Rows the buffer holds at most.
    pub capacity: usize,
    /// Rows held now.
    pub kept: usize,
    /// Rows handed out by [`crate::Session::drain_samples`] so far.
    pub drained: u64,
    /// The oldest rows overwritten because the buffer was full and nobody drained it.
    pub dropped: u64,
    /// The energy of the dropped rows per channel: the reports still count it, so
    /// the rows kept, the rows drained and this add up to the session's energy.
    pub dropped_energy_j: Vec<Joules>,
    /// Readings the sampler could not hand over because nobody read the session
    /// while the ring between them was full: each went into the next row, whose
    /// energy and interval cover it (rows coarser, energy whole). 0 unless the
    /// session's lock was held for a long time.
    pub merged: u64,
}

/// A measurement's power model, where its figures are an estimate: in the
/// JSON, `"estimated": true` beside `"estimate"` (the model), nothing for a
/// measurement. The flag is derived, never stored apart from the model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EstimateFields(pub Option<crate::source::Estimated>);

impl EstimateFields {
    /// Whether the figures are an estimate.
    pub fn estimated(&self) -> bool {
        self.0.is_some()
    }
}

impl Serialize for EstimateFields {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        if let Some(e) = &self.0 {
            map.serialize_entry("estimated", &true)?;
            map.serialize_entry("estimate", e)?;
        }
        map.end()
    }
}
