//! A session's result: [`EnergyReport`] with typed handles beside it, serialized
//! to the same JSON as `quietwatt run --json`.

use super::samples::SampleStats;
use crate::domain::{Domain, DomainId};
use crate::kernel_figures::KernelFigures;
use crate::meter::{DomainEnergy, EnergyReport};
use crate::overhead::Overhead;
use crate::source::Mechanism;
use crate::units::Joules;
use serde::Serialize;
use std::time::Duration;

/// Energy over a session, a snapshot of one, or a window of one.
///
/// The figures are [`EnergyReport`]'s, flattened into the same JSON object that
/// `quietwatt run --json` prints (`duration_s`, `total_energy_j`,
/// `total_uncertainty_j`, `total_rule`, `mechanism`, `domains[]`, `counter_events`,
/// `warnings`), so that tools reading one read the other. The typed fields
/// ([`Report::mechanism`], [`Report::channels`]) are for Rust callers and are not
/// serialized twice.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
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
    /// What sampling cost: present in the final report of a session with a rate
    /// (its sampler thread's CPU time, wake-ups, lateness and missed deadlines);
    /// absent without a rate, where the cost is the start and stop reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<Overhead>,
    /// The sample buffer at the end of a session with a rate: its bound, the rows
    /// handed out, and those dropped with their energy (`kept` is what
    /// [`crate::Session::stop_with_samples`] returned).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<SampleStats>,
    /// What the kernel side of an in-kernel mechanism (ebpf, perf-ring) did over
    /// the session: the samples it took and dropped, the drains and the sampler's
    /// wake-ups a second; present in the final report of such a session (as
    /// `kernel` in `quietwatt run --json`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelFigures>,
    /// When the first and the last reading the figures span were taken
    /// (CLOCK_MONOTONIC ns): what events on the same clock (a context switch's
    /// slice, a profile's sample) are placed against.
    #[serde(skip)]
    pub span_ns: Option<(u64, u64)>,
}

impl Report {
    /// Time between the first and the last reading.
    pub fn duration(&self) -> Duration {
        Duration::try_from_secs_f64(self.energy.duration_s).unwrap_or_default()
    }

    /// The total without double counting (see [`EnergyReport::total_rule`]);
    /// `None` when nothing selected can be totalled.
    pub fn total(&self) -> Option<Joules> {
        self.energy.total_energy_j
    }

    /// ± bound on [`Report::total`].
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
    pub fn warnings(&self) -> &[crate::Warning] {
        &self.energy.warnings
    }
}
