//! The model as a [`Source`]: counters that advance as the model predicts
//! from the inputs this machine reads, read like any mechanism's, labelled an
//! estimate.

use crate::busy::NS_PER_TICK;
use crate::inputs::{Input, InputClock, ALL};
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
/// `idle_w × wall + Σ coefficient × the input's integral` (busy CPU time from
/// `/proc/stat`, and where the fit has them, busy CPU-GHz time, instructions,
/// cycles).
#[derive(Debug)]
pub struct EstimateSource {
    clock: InputClock,
    channels: Vec<Channel>,
    /// Per channel: idle µW, and µW per unit of each input ([`ALL`]'s order;
    /// 0 where the fit has none).
    lines: Vec<(f64, [f64; 4])>,
    opened_ns: u64,
    estimated: Estimated,
    notes: Vec<String>,
}

impl EstimateSource {
    /// The model `model` (from `origin`, for the reports), estimating the
    /// domains `selection` names among those it models (on socket 0: the
    /// machine as one package), with its richest fit whose inputs this
    /// machine reads: the busy CPUs from `stat` (`/proc/stat`), the
    /// frequency from `sys` (`/sys`), the PMU's counts.
    pub fn open(
        model: &PowerModel,
        origin: &str,
        selection: &Selection,
        stat: &Path,
        sys: &Path,
    ) -> Result<EstimateSource, EstimateError> {
        let now = monotonic_ns();
        let clock = InputClock::open(stat, sys, &model.all_inputs(), now).map_err(|source| {
            EstimateError::Stat {
                path: stat.to_path_buf(),
                source,
            }
        })?;
        let (fit, unread) =
            model
                .choose(|i| clock.reads(i))
                .ok_or_else(|| EstimateError::Corrupt {
                    path: PathBuf::from(origin),
                    why: "no fit on the busy CPUs alone".into(),
                })?;
        let mut modelled = Vec::new();
        for d in &fit.domains {
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
            .map(|(_, d)| (d.idle_w * 1e6, ALL.map(|i| d.coef(i) * 1e6)))
            .collect();
        let estimated = Estimated::new(
            origin.to_string(),
            model.cpu.to_string(),
            fit.inputs.clone(),
            kept.iter().map(|(_, d)| d.error_w).collect(),
            fit.blind_to.clone(),
        );
        let from = fit
            .inputs()
            .map(|i| match i {
                Input::BusyCpus => format!("the busy CPUs in {}", stat.display()),
                Input::BusyCpuGhz => "their frequency (cpufreq)".to_string(),
                Input::Instructions => "instructions (PMU)".to_string(),
                Input::Cycles => "cycles (PMU)".to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ");
        let mut notes = vec![format!(
            "ESTIMATED, not measured: the power model {origin} ({}, for {}), from {from}; each figure's uncertainty holds the model's stated error ({}); it cannot see {}",
            model.origin.describe(),
            model.cpu,
            kept.iter()
                .map(|(id, d)| format!("{} ± {:.2} W", id.domain.name(), d.error_w))
                .collect::<Vec<_>>()
                .join(", "),
            fit.blind_to.join(", ")
        )];
        let packages = packages(sys);
        if packages > 1 {
            notes.push(format!(
                "this machine has {packages} packages, estimated as one: socket 0's figures are the whole machine's (the model was fitted on every socket's energy summed)"
            ));
        }
        // One note per reason (the PMU's two counts share theirs).
        let mut unused: Vec<(Vec<&str>, &str)> = Vec::new();
        for i in unread {
            let why = clock
                .missing()
                .iter()
                .find(|(m, _)| *m == i)
                .map_or("not read", |(_, w)| w.as_str());
            match unused.iter_mut().find(|(_, w)| *w == why) {
                Some((names, _)) => names.push(i.name()),
                None => unused.push((vec![i.name()], why)),
            }
        }
        for (names, why) in unused {
            notes.push(format!(
                "the model's fit on {} is not used: {why}; its simpler fit's error is stated instead",
                names.join(" and ")
            ));
        }
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

/// The distinct `physical_package_id`s of the CPUs under `sys` (0 where
/// the topology cannot be read).
fn packages(sys: &Path) -> usize {
    let Ok(dir) = std::fs::read_dir(sys.join("devices/system/cpu")) else {
        return 0;
    };
    let mut ids: Vec<String> = dir
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("cpu"))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("topology/physical_package_id")).ok())
        .map(|s| s.trim().to_string())
        .collect();
    ids.sort();
    ids.dedup();
    ids.len()
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
        let totals = match self.clock.sample(now) {
            Ok(t) => *t,
            Err(source) => {
                return Err(quietwatt_sources::Error::Io {
                    path: self.clock.stat_path().to_path_buf(),
                    source,
                })
            }
        };
        let wall = now.saturating_sub(self.opened_ns) as f64 * 1e-9;
        for (o, (idle_uw, per_uw)) in out.iter_mut().zip(&self.lines) {
            let dynamic: f64 = per_uw.iter().zip(&totals).map(|(c, t)| c * t).sum();
            *o = (idle_uw * wall + dynamic).max(0.0) as u64;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packages_are_counted_from_the_topology() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(packages(dir.path()), 0);
        for (cpu, pkg) in [(0, 0), (1, 0), (2, 1), (3, 1)] {
            let t = dir
                .path()
                .join(format!("devices/system/cpu/cpu{cpu}/topology"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("physical_package_id"), format!("{pkg}\n")).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("devices/system/cpu/cpufreq")).unwrap();
        assert_eq!(packages(dir.path()), 2);
    }
}
