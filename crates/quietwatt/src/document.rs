//! The typed JSON documents of a measurement: [`RunDocument`] (`run --json`: a
//! [`Measurement`], which is the report Python receives, with the command's
//! fields beside it), [`UnmeasuredRun`] (`run --json` where nothing can
//! measure) and [`RecordDocument`] (`record --json`). The stamp itself
//! ([`Document`], [`Stamped`], [`VERSION`]) is `quietwatt-core`'s, re-exported
//! here; `docs/json.md` lists every kind and the crate that owns it.

pub use quietwatt_core::document::*;

use crate::kernel_figures::KernelFigures;
use crate::measurement::Measurement;
use crate::meter::EnergyReport;
use crate::overhead::Overhead;
use crate::sampler::Rate;
use serde::Serialize;

/// The rate as numbers: `freq_hz` for a fixed rate, `freq_auto: {min_hz, max_hz}`
/// for `--freq auto`, where no single rate applies.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct RateFields {
    /// The fixed rate, in Hz.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freq_hz: Option<f64>,
    /// The bounds of an adaptive rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freq_auto: Option<AutoRate>,
}

/// The bounds of `--freq auto`, in Hz.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct AutoRate {
    /// The rate when idle.
    pub min_hz: f64,
    /// The rate under load.
    pub max_hz: f64,
}

impl From<&Rate> for RateFields {
    fn from(rate: &Rate) -> Self {
        match rate {
            Rate::Fixed(f) => RateFields {
                freq_hz: Some(f.hz()),
                freq_auto: None,
            },
            Rate::Auto { min, max } => RateFields {
                freq_hz: None,
                freq_auto: Some(AutoRate {
                    min_hz: min.hz(),
                    max_hz: max.hz(),
                }),
            },
        }
    }
}

/// `quietwatt run --json` of a measured command (`docs/schemas/run.schema.json`):
/// the [`Measurement`] flattened (the same object Python's reports are), then how
/// the command ended. `X` is what a caller adds beside (the CLI: a model's
/// estimate, a share); `()` adds nothing.
#[derive(Debug, Clone, Serialize)]
pub struct RunDocument<X = ()> {
    /// Per-domain energy, the total and its rule, counter events and every
    /// warning; what measuring cost (`overhead`); what the kernel side of an
    /// in-kernel mechanism did (`kernel`).
    #[serde(flatten)]
    pub measurement: Measurement,
    /// The command's exit code, or 128 + the signal that killed it.
    pub exit_code: i32,
    /// Whether the counters were the emulator's.
    pub emulated: bool,
    /// The sampling rate.
    #[serde(flatten)]
    pub rate: RateFields,
    /// A reading that failed mid-way: the figures cover up to the last good sample.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the mechanism left out or wants known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
    /// The caller's additions.
    #[serde(flatten)]
    pub extra: X,
}

impl RunDocument {
    /// The document of a measured command: `m`'s measurement, ended with
    /// `exit_code`, sampled at `rate`.
    pub fn new(
        m: &crate::command::MeasuredCommand,
        exit_code: i32,
        emulated: bool,
        rate: &Rate,
    ) -> Self {
        RunDocument {
            measurement: m.measurement.clone(),
            exit_code,
            emulated,
            rate: rate.into(),
            error: m.error.as_ref().map(ToString::to_string),
            notes: None,
            extra: (),
        }
    }

    /// The same document with `extra` beside its fields.
    pub fn with<Y: Serialize>(self, extra: Y) -> RunDocument<Y> {
        RunDocument {
            measurement: self.measurement,
            exit_code: self.exit_code,
            emulated: self.emulated,
            rate: self.rate,
            error: self.error,
            notes: self.notes,
            extra,
        }
    }
}

impl<X: Serialize> Document for RunDocument<X> {
    const KIND: &'static str = "run";
}

/// `quietwatt run --json` where no mechanism can measure: the command ran, its
/// energy is not supported, and why.
#[derive(Debug, Clone, Serialize)]
pub struct UnmeasuredRun {
    /// Always `false`.
    pub energy_supported: bool,
    /// Why nothing could measure.
    pub reason: String,
    /// The command's exit code.
    pub exit_code: i32,
    /// The command's wall time, in seconds.
    pub duration_s: f64,
    /// Always `false`: the emulator always measures.
    pub emulated: bool,
    /// Always empty.
    pub domains: [(); 0],
    /// Always `null`.
    pub total_energy_j: Option<f64>,
}

impl UnmeasuredRun {
    /// A command that ran for `duration_s` and ended with `exit_code`, unmeasured
    /// for `reason`.
    pub fn new(reason: String, exit_code: i32, duration_s: f64) -> Self {
        UnmeasuredRun {
            energy_supported: false,
            reason,
            exit_code,
            duration_s,
            emulated: false,
            domains: [],
            total_energy_j: None,
        }
    }
}

impl Document for UnmeasuredRun {
    const KIND: &'static str = "run";
}

/// What a recording file cut short holds, against the whole measurement.
#[derive(Debug, Clone, Serialize)]
pub struct OutputHolds {
    /// The time the file covers, in seconds.
    pub duration_s: f64,
    /// The samples taken.
    pub samples: u64,
    /// Each domain's energy in the file.
    pub domains: Vec<HeldDomain>,
}

/// One domain's energy in a file cut short.
#[derive(Debug, Clone, Serialize)]
pub struct HeldDomain {
    /// Its socket.
    pub socket: u32,
    /// Its domain.
    pub domain: &'static str,
    /// Its energy in the file, in joules.
    pub energy_j: f64,
}

/// `quietwatt record --json` (`docs/schemas/record.schema.json`): the report's
/// figures flattened, then the output, the rate and what recording cost. `X` is
/// what a caller adds beside (the CLI: events, attribution).
#[derive(Debug, Clone, Serialize)]
pub struct RecordDocument<X = ()> {
    /// Per-domain energy, the total and its rule, counter events and warnings.
    #[serde(flatten)]
    pub report: EnergyReport,
    /// The output path.
    pub output: String,
    /// The output format's name.
    pub format: String,
    /// Whether the counters were the emulator's.
    pub emulated: bool,
    /// The rate in words (kept for readers of version 1).
    pub freq: String,
    /// The same as numbers.
    #[serde(flatten)]
    pub rate: RateFields,
    /// The samples taken.
    pub samples: u64,
    /// What recording cost.
    pub overhead: Overhead,
    /// Why the recording stopped early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What a file cut short holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_holds: Option<OutputHolds>,
    /// What the mechanism left out or wants known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
    /// The command's exit code, where a command was recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// What the kernel side of an in-kernel mechanism did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelFigures>,
    /// The reader service the counters were read through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<crate::source::Via>,
    /// The model whose estimate the figures are (`"estimated": true` and
    /// `"estimate"`), where they are one.
    #[serde(flatten)]
    pub estimate: crate::measurement::EstimateFields,
    /// The caller's additions.
    #[serde(flatten)]
    pub extra: X,
}

impl RecordDocument {
    /// The document of `rec`, written to `output` as `format`, sampled at `rate`;
    /// `error` is why it stopped early. A file cut short adds `output_holds`.
    pub fn new(
        rec: &crate::record::Recording,
        output: String,
        format: &str,
        emulated: bool,
        rate: &Rate,
        error: Option<String>,
    ) -> Self {
        let m = &rec.measurement;
        let output_holds = rec.output_short.as_ref().map(|o| OutputHolds {
            duration_s: o.duration.as_secs_f64(),
            samples: rec.samples,
            domains: m
                .energy
                .domains
                .iter()
                .zip(&o.energy)
                .map(|(d, e)| HeldDomain {
                    socket: d.socket,
                    domain: d.domain,
                    energy_j: e.0,
                })
                .collect(),
        });
        RecordDocument {
            report: m.energy.clone(),
            output,
            format: format.to_string(),
            emulated,
            freq: rate.to_string(),
            rate: rate.into(),
            samples: rec.samples,
            // A recording's measurement always has its cost.
            overhead: m.overhead.clone().unwrap_or_default(),
            error,
            output_holds,
            notes: None,
            exit_code: None,
            kernel: m.kernel.clone(),
            via: m.via.clone(),
            estimate: m.estimate.clone(),
            extra: (),
        }
    }

    /// The same document with `extra` beside its fields.
    pub fn with<Y: Serialize>(self, extra: Y) -> RecordDocument<Y> {
        RecordDocument {
            report: self.report,
            output: self.output,
            format: self.format,
            emulated: self.emulated,
            freq: self.freq,
            rate: self.rate,
            samples: self.samples,
            overhead: self.overhead,
            error: self.error,
            output_holds: self.output_holds,
            notes: self.notes,
            exit_code: self.exit_code,
            kernel: self.kernel,
            via: self.via,
            estimate: self.estimate,
            extra,
        }
    }
}

impl<X: Serialize> Document for RecordDocument<X> {
    const KIND: &'static str = "record";
}
