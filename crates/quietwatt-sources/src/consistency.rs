//! The mechanisms checked against each other: every mechanism that opens here reads
//! the same domains over the same interval, and each domain gets the energy each
//! mechanism measured and how far they disagree.
//!
//! All sources are read back to back at the start and again, in the same order, at
//! the end, so each mechanism's window has the same length, shifted by the time one
//! round of reads takes. That shift, and RAPL's own ~1 ms update cadence at each end
//! of the window, bound how closely two honest mechanisms can agree over a short
//! interval: each domain carries that bound ([`DomainAgreement::timing_uncertainty`])
//! so a disagreement within it is not mistaken for a bug.
//!
//! Expected differences, reported as notes where they apply:
//! - powercap's fixed DRAM unit on server parts is 15.3 µJ where perf and the MSR
//!   mechanism use 2^-16 J: DRAM reads ~0.27 % higher through powercap
//!   ([`crate::quirks`]).
//! - powercap's AMD `core` zone reads one core's counter; perf and MSR sum them all.

use crate::cpuinfo::{CpuInfo, Vendor};
use crate::error::{Error, Result};
use crate::quirks::{quirks_for, Quirk};
use crate::root::SysRoot;
use crate::{open, Channel, Mechanism, Selection, Source};
use quietwatt_core::counter::Counter;
use quietwatt_core::domain::{Domain, DomainId};
use quietwatt_core::units::Joules;
use serde::Serialize;
use std::time::{Duration, Instant};

/// The energy one mechanism measured for a domain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reading {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// Energy over the interval.
    pub energy_j: Joules,
}

/// One domain, as every mechanism that has it saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainAgreement {
    /// The domain.
    pub id: DomainId,
    /// One reading per mechanism that has the domain, in preference order.
    pub readings: Vec<Reading>,
    /// `(max - min) / mean` of the readings; absent with fewer than two readings or
    /// no energy at all.
    pub relative_disagreement: Option<f64>,
    /// The relative disagreement that timing alone can explain: the skew between the
    /// mechanisms' reads at both ends of the window plus one RAPL update period at
    /// each end, over the window. Absent with fewer than two readings.
    pub timing_uncertainty: Option<f64>,
}

/// How often RAPL counters advance (RAPL-FACTS: about every millisecond).
const RAPL_UPDATE_PERIOD: Duration = Duration::from_millis(1);

/// The result of a cross-check.
#[derive(Debug, Clone, Serialize)]
pub struct CrossCheck {
    /// Seconds between the first and the last round of reads.
    pub interval_s: f64,
    /// The mechanisms that were read.
    pub mechanisms: Vec<Mechanism>,
    /// The mechanisms that could not be opened, and why.
    pub unavailable: Vec<(Mechanism, String)>,
    /// Per domain, what each mechanism measured.
    pub domains: Vec<DomainAgreement>,
    /// Differences to expect on this machine, and why.
    pub notes: Vec<String>,
}

/// `(max - min) / mean`, the relative spread of some readings of one quantity.
pub fn relative_disagreement(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let max = values.iter().copied().fold(f64::MIN, f64::max);
    let min = values.iter().copied().fold(f64::MAX, f64::min);
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    (mean > 0.0).then(|| (max - min) / mean)
}

/// Opens every mechanism that works under `root` on `selection`, reads them all over
/// `interval`, and compares them per domain.
pub fn cross_check(
    root: &SysRoot,
    selection: &Selection,
    interval: Duration,
) -> Result<CrossCheck> {
    let mut sources: Vec<Box<dyn Source>> = Vec::new();
    let mut unavailable = Vec::new();
    let mut first_err = None;
    for m in Mechanism::ALL {
        match open(root, Some(m), selection) {
            Ok(s) => sources.push(s),
            Err(e) => {
                unavailable.push((m, e.to_string()));
                // As `open` does: a mechanism that is merely absent explains less
                // than one that exists and failed.
                let absent = matches!(e, Error::MechanismUnavailable { .. });
                if first_err.is_none() && !absent {
                    first_err = Some(e);
                }
            }
        }
    }
    if sources.is_empty() {
        return Err(first_err.unwrap_or_else(|| Error::NoDomains {
            mechanism: "any mechanism",
            root: root.dir().to_path_buf(),
            why: "no mechanism could open a RAPL counter".into(),
        }));
    }
    let started = Instant::now();
    let domains = compare_sources(&mut sources, interval)?;
    let mut notes = expected_differences(root, &domains);
    if sources.len() < 2 {
        notes.push(format!(
            "only {} could be opened: nothing to compare it with",
            sources[0].mechanism()
        ));
    }
    Ok(CrossCheck {
        interval_s: started.elapsed().as_secs_f64(),
        mechanisms: sources.iter().map(|s| s.mechanism()).collect(),
        unavailable,
        domains,
        notes,
    })
}

/// Reads already-opened sources at the start and after `interval`, and compares
/// the energy each measured per domain.
pub fn compare_sources(
    sources: &mut [Box<dyn Source>],
    interval: Duration,
) -> Result<Vec<DomainAgreement>> {
    let mut counters: Vec<Vec<Counter>> = sources
        .iter()
        .map(|s| s.channels().iter().map(Channel::counter).collect())
        .collect();
    let mut bufs: Vec<Vec<u64>> = sources
        .iter()
        .map(|s| vec![0; s.channels().len()])
        .collect();
    // When each source's read call began and ended, per round: a source reads its
    // channels one after another anywhere inside that span (a FUSE or sysfs read
    // of several files can take milliseconds on a loaded machine).
    let epoch = Instant::now();
    let mut read_at = [
        vec![ReadSpan::default(); sources.len()],
        vec![ReadSpan::default(); sources.len()],
    ];
    for (round, at) in read_at.iter_mut().enumerate() {
        if round == 1 {
            std::thread::sleep(interval);
        }
        for ((s, buf), at) in sources.iter_mut().zip(bufs.iter_mut()).zip(at.iter_mut()) {
            let start = epoch.elapsed();
            s.read(buf)?;
            *at = ReadSpan {
                start,
                end: epoch.elapsed(),
            };
        }
        for (((s, cs), buf), t) in sources
            .iter()
            .zip(counters.iter_mut())
            .zip(&bufs)
            .zip(at.iter())
        {
            for ((c, &raw), ch) in cs.iter_mut().zip(buf).zip(s.channels()) {
                c.update(raw, t.mid().as_nanos() as u64)
                    .map_err(|e| Error::CorruptCounter {
                        path: ch.origin.clone(),
                        value: e.value,
                        modulus: e.modulus,
                    })?;
            }
        }
    }

    let mut ids: Vec<DomainId> = sources
        .iter()
        .flat_map(|s| s.channels().iter().map(|c| c.id))
        .collect();
    ids.sort();
    ids.dedup();
    Ok(ids
        .into_iter()
        .map(|id| {
            let readings: Vec<Reading> = sources
                .iter()
                .zip(&counters)
                .filter(|(s, _)| s.channels().iter().any(|c| c.id == id))
                .map(|(s, cs)| Reading {
                    mechanism: s.mechanism(),
                    energy_j: s
                        .channels()
                        .iter()
                        .zip(cs)
                        .filter(|(c, _)| c.id == id)
                        .map(|(_, c)| c.total())
                        .sum(),
                })
                .collect();
            let values: Vec<f64> = readings.iter().map(|r| r.energy_j.0).collect();
            let having: Vec<usize> = (0..sources.len())
                .filter(|&i| sources[i].channels().iter().any(|c| c.id == id))
                .collect();
            DomainAgreement {
                id,
                relative_disagreement: relative_disagreement(&values),
                timing_uncertainty: (having.len() > 1)
                    .then(|| timing_uncertainty(&read_at, &having)),
                readings,
            }
        })
        .collect())
}

/// When one source's read call began and ended, from the comparison's epoch.
#[derive(Debug, Clone, Copy, Default)]
struct ReadSpan {
    start: Duration,
    end: Duration,
}

impl ReadSpan {
    fn mid(&self) -> Duration {
        (self.start + self.end) / 2
    }
}

/// The relative error that the timing of the reads allows between the sources
/// `having` a domain: at each end, the span from the first of their read calls
/// beginning to the last ending (any two channels were read within it), plus one
/// RAPL update period, over the shortest of their windows.
fn timing_uncertainty(read_at: &[Vec<ReadSpan>; 2], having: &[usize]) -> f64 {
    let spread = |at: &[ReadSpan]| {
        let first = having
            .iter()
            .map(|&i| at[i].start)
            .min()
            .unwrap_or_default();
        let last = having.iter().map(|&i| at[i].end).max().unwrap_or_default();
        last.saturating_sub(first)
    };
    let window = having
        .iter()
        .map(|&i| read_at[1][i].mid().saturating_sub(read_at[0][i].mid()))
        .min()
        .unwrap_or_default();
    let slack = spread(&read_at[0]) + spread(&read_at[1]) + 2 * RAPL_UPDATE_PERIOD;
    if window.is_zero() {
        f64::INFINITY
    } else {
        slack.as_secs_f64() / window.as_secs_f64()
    }
}

/// Known reasons for the mechanisms to differ on this machine.
fn expected_differences(root: &SysRoot, domains: &[DomainAgreement]) -> Vec<String> {
    let Ok(cpu) = CpuInfo::read(root) else {
        return Vec::new();
    };
    let with_powercap = |d: Domain| {
        domains.iter().any(|a| {
            a.id.domain == d
                && a.readings.len() > 1
                && a.readings
                    .iter()
                    .any(|r| r.mechanism == Mechanism::Powercap)
        })
    };
    let mut notes = Vec::new();
    if let Some(q) = quirks_for(&cpu).find(|q| q.quirk == Quirk::FixedDramUnit) {
        if with_powercap(Domain::Dram) && q.powercap_applies() {
            notes.push(
                "dram: powercap uses a fixed 15.3 uJ unit on this CPU, perf and msr the exact 2^-16 J: \
                 expect powercap ~0.27 % higher"
                    .into(),
            );
        } else if with_powercap(Domain::Dram) {
            notes.push(format!(
                "dram: on {} the kernel's powercap driver converts DRAM with the unit register while \
                 perf (and quietwatt's msr) use the fixed 2^-16 J the hardware counts in: \
                 powercap's dram is wrong by 2^(16 - ESU); trust perf or msr",
                q.model_name
            ));
        }
    }
    if with_powercap(Domain::Core) && cpu.vendor != Vendor::Intel {
        notes.push(
            "core: powercap's AMD core zone reads one core's counter, perf and msr sum every core: \
             expect powercap far lower"
                .into(),
        );
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::{EventSpec, PerfEvents};
    use quietwatt_core::counter::Wrap;
    use quietwatt_core::units::EnergyUnit;
    use std::path::PathBuf;

    /// A source replaying fixed readings.
    struct Scripted {
        mechanism: Mechanism,
        channels: Vec<Channel>,
        reads: Vec<Vec<u64>>,
        next: usize,
    }

    impl Source for Scripted {
        fn mechanism(&self) -> Mechanism {
            self.mechanism
        }
        fn channels(&self) -> &[Channel] {
            &self.channels
        }
        fn read(&mut self, out: &mut [u64]) -> Result<()> {
            out.copy_from_slice(&self.reads[self.next]);
            self.next += 1;
            Ok(())
        }
    }

    fn channel(id: DomainId, unit: EnergyUnit, wrap: Wrap) -> Channel {
        Channel {
            id,
            unit,
            wrap,
            origin: PathBuf::from("test"),
            limit: None,
        }
    }

    #[test]
    fn disagreement_is_spread_over_mean() {
        assert_eq!(relative_disagreement(&[1.0]), None);
        assert_eq!(relative_disagreement(&[0.0, 0.0]), None);
        assert_eq!(relative_disagreement(&[2.0, 2.0]), Some(0.0));
        let d = relative_disagreement(&[1.0, 1.02, 0.99]).unwrap();
        assert!((d - 0.03 / (3.01 / 3.0)).abs() < 1e-12, "{d}");
    }

    #[test]
    fn each_domain_gets_every_mechanism_reading_with_units_and_wraps_applied() {
        let pkg = DomainId::new(0, Domain::Package);
        let dram = DomainId::new(0, Domain::Dram);
        let powercap = Scripted {
            mechanism: Mechanism::Powercap,
            channels: vec![channel(
                pkg,
                EnergyUnit::Microjoule,
                Wrap::Modulus(10_000_000),
            )],
            // Wraps: 9_500_000 -> 500_000 is 1_000_000 uJ = 1 J.
            reads: vec![vec![9_500_000], vec![500_000]],
            next: 0,
        };
        let msr = Scripted {
            mechanism: Mechanism::Msr,
            channels: vec![
                channel(pkg, EnergyUnit::PowerOfTwo(16), Wrap::Modulus(1 << 32)),
                channel(dram, EnergyUnit::PowerOfTwo(16), Wrap::Modulus(1 << 32)),
            ],
            // 1.015625 J = 66560 steps of 2^-16 J; dram 0.5 J.
            reads: vec![vec![100, 7], vec![100 + 66_560, 7 + 32_768]],
            next: 0,
        };
        let mut sources: Vec<Box<dyn Source>> = vec![Box::new(powercap), Box::new(msr)];
        let got = compare_sources(&mut sources, Duration::ZERO).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].id, pkg);
        assert_eq!(
            got[0].readings,
            vec![
                Reading {
                    mechanism: Mechanism::Powercap,
                    energy_j: Joules(1.0)
                },
                Reading {
                    mechanism: Mechanism::Msr,
                    energy_j: Joules(1.015625)
                },
            ]
        );
        let d = got[0].relative_disagreement.unwrap();
        assert!((d - 0.015625 / 1.0078125).abs() < 1e-12, "{d}");
        // Only one mechanism has dram: nothing to compare.
        assert_eq!(got[1].readings.len(), 1);
        assert_eq!(got[1].readings[0].energy_j, Joules(0.5));
        assert_eq!(got[1].relative_disagreement, None);
    }

    #[test]
    fn two_real_perf_sources_over_cpu_clock_agree() {
        use perf_event_open_sys::bindings::{PERF_COUNT_SW_CPU_CLOCK, PERF_TYPE_SOFTWARE};
        let spec = || {
            EventSpec::new(
                DomainId::new(0, Domain::Package),
                PERF_TYPE_SOFTWARE,
                PERF_COUNT_SW_CPU_CLOCK as u64,
                0,
                EnergyUnit::Scale(1e-9),
            )
        };
        let mut sources: Vec<Box<dyn Source>> = vec![
            Box::new(PerfEvents::from_specs(vec![spec()]).unwrap()),
            Box::new(PerfEvents::from_specs(vec![spec()]).unwrap()),
        ];
        let got = compare_sources(&mut sources, Duration::from_millis(100)).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].readings.len(), 2);
        // cpu-clock counts ns; the 1e-9 scale makes the "energy" the window in seconds.
        let secs = got[0].readings[0].energy_j.0;
        assert!(secs > 0.09 && secs < 0.5, "{secs}");
        // Both windows have the same length, shifted by one read: they differ by
        // no more than the skew of the reads, which the timing bound measures (a
        // stalled vCPU between the two reads stretches it; it happened in CI).
        let d = got[0].relative_disagreement.unwrap();
        let timing = got[0].timing_uncertainty.unwrap();
        assert!(d <= timing, "{d} > {timing}");
    }

    #[test]
    fn timing_uncertainty_is_read_skew_plus_two_updates_over_the_window() {
        let ms = Duration::from_millis;
        let at = |t: u64| ReadSpan {
            start: ms(t),
            end: ms(t),
        };
        // Source 0 read at 0 and 1000 ms, source 1 at 2 and 1003 ms, source 2 far away.
        let mut read_at = [
            vec![at(0), at(2), at(500)],
            vec![at(1000), at(1003), at(900)],
        ];
        // Skews 2 + 3 ms, plus 2 x 1 ms, over the shorter window (1000 ms).
        let u = timing_uncertainty(&read_at, &[0, 1]);
        assert!((u - 0.007).abs() < 1e-12, "{u}");
        // Only the sources having the domain count.
        let u = timing_uncertainty(&read_at, &[0, 2]);
        assert!((u - (0.5 + 0.1 + 0.002) / 0.4).abs() < 1e-12, "{u}");
        // A read call that takes 5 ms (its files read one by one, the vCPU stalled)
        // may have read its last channel 5 ms after its first: the bound grows by it.
        read_at[1][1] = ReadSpan {
            start: ms(1001),
            end: ms(1006),
        };
        let u = timing_uncertainty(&read_at, &[0, 1]);
        assert!((u - (0.002 + 0.006 + 0.002) / 1.0).abs() < 1e-12, "{u}");
    }

    #[test]
    fn an_empty_root_reports_why_nothing_opened() {
        let dir = tempfile::tempdir().unwrap();
        let err =
            cross_check(&SysRoot::new(dir.path()), &Selection::all(), Duration::ZERO).unwrap_err();
        assert!(matches!(
            err,
            Error::MechanismUnavailable { .. } | Error::NoDomains { .. } | Error::Io { .. }
        ));
    }
}
