//! The model as a [`Source`]: counters that advance as the model predicts
//! from the busy CPUs, read like any mechanism's, labelled an estimate.

use crate::busy::{BusyClock, NS_PER_TICK};
use crate::model::PowerModel;
use crate::EstimateError;
use quietwatt_core::counter::Wrap;
use quietwatt_core::domain::{Domain, DomainId, Socket};
use quietwatt_core::units::EnergyUnit;
use quietwatt_sources::{Channel, Estimated, Mechanism, Selection, Source};
use quietwatt_sys::clock::monotonic_ns;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// An estimating source: each channel's energy, µJ since it was opened, is
/// `idle_w × wall + per_busy_cpu_w × busy CPU time`, from `/proc/stat`.
#[derive(Debug)]
pub struct EstimateSource {
    clock: BusyClock,
    channels: Vec<Channel>,
    /// Per channel: idle µW, µW per busy CPU.
    lines: Vec<(f64, f64)>,
    opened_ns: u64,
    estimated: Estimated,
    notes: Vec<String>,
}

impl EstimateSource {
    /// The model `model` (from `origin`, for the reports), estimating the
    /// domains `selection` names among those it models (on socket 0: the
    /// machine as one package), from `stat` (`/proc/stat`).
    pub fn open(
        model: &PowerModel,
        origin: &str,
        selection: &Selection,
        stat: &Path,
    ) -> Result<EstimateSource, EstimateError> {
        let now = monotonic_ns();
        let clock = BusyClock::open(stat, now).map_err(|source| EstimateError::Stat {
            path: stat.to_path_buf(),
            source,
        })?;
        let mut modelled = Vec::new();
        for d in &model.domains {
            let domain: Domain = d.domain.parse().map_err(|_| EstimateError::Corrupt {
                path: PathBuf::from(origin),
                why: format!("unknown domain {:?}", d.domain),
            })?;
            modelled.push((
                DomainId {
                    socket: Socket(0),
                    die: None,
                    domain,
                },
                d,
            ));
        }
        let kept = selection
            .apply(modelled, |(id, _)| *id)
            .map_err(EstimateError::Selection)?;
        let channels: Vec<Channel> = kept
            .iter()
            .map(|(id, _)| Channel {
                id: *id,
                unit: EnergyUnit::Microjoule,
                wrap: Wrap::Modulus(u64::MAX),
                origin: PathBuf::from(origin),
                limit: None,
            })
            .collect();
        let lines = kept
            .iter()
            .map(|(_, d)| (d.idle_w * 1e6, d.per_busy_cpu_w * 1e6))
            .collect();
        let estimated = Estimated::new(
            origin.to_string(),
            model.cpu.to_string(),
            model.inputs.clone(),
            kept.iter().map(|(_, d)| d.error_w).collect(),
            model.blind_to.clone(),
        );
        let notes = vec![format!(
            "ESTIMATED, not measured: the power model {origin} ({}, for {}), from the busy CPUs in {}; each figure's uncertainty holds the model's stated error ({}); it cannot see {}",
            model.origin.describe(),
            model.cpu,
            stat.display(),
            kept.iter()
                .map(|(id, d)| format!("{} ± {:.2} W", id.domain.name(), d.error_w))
                .collect::<Vec<_>>()
                .join(", "),
            model.blind_to.join(", ")
        )];
        Ok(EstimateSource {
            clock,
            channels,
            lines,
            opened_ns: now,
            estimated,
            notes,
        })
    }
}

impl Source for EstimateSource {
    fn mechanism(&self) -> Mechanism {
        Mechanism::Estimate
    }

    fn channels(&self) -> &[Channel] {
        &self.channels
    }

    fn read(&mut self, out: &mut [u64]) -> quietwatt_sources::Result<()> {
        let now = monotonic_ns();
        let busy = self
            .clock
            .busy_ns(now)
            .map_err(|source| quietwatt_sources::Error::Io {
                path: self.clock.path().to_path_buf(),
                source,
            })? as f64
            * 1e-9;
        let wall = now.saturating_sub(self.opened_ns) as f64 * 1e-9;
        for (o, (idle_uw, per_uw)) in out.iter_mut().zip(&self.lines) {
            *o = (idle_uw * wall + per_uw * busy).max(0.0) as u64;
        }
        Ok(())
    }

    fn notes(&self) -> &[String] {
        &self.notes
    }

    /// `/proc/stat` counts in ticks: the busy time read may run a tick ahead
    /// of the truth at each end.
    fn update_interval(&self) -> Option<Duration> {
        Some(Duration::from_nanos(NS_PER_TICK))
    }

    fn estimate(&self) -> Option<&Estimated> {
        Some(&self.estimated)
    }
}
