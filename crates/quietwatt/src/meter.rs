//! A source and its counters: each sample turns raw readings into corrected
//! per-domain deltas, and the totals stay integers until they are reported.

use crate::counter::{period_may_hide_wraps, Counter};
use crate::domain::{total_members, total_rule, DomainId};
use crate::error::{Error, Result};
use crate::source::{Channel, Mechanism, Source};
use crate::units::{Joules, Watts};
use serde::Serialize;
use std::time::Duration;

/// CLOCK_MONOTONIC in nanoseconds: the clock of perf samples and tracepoints.
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Reads a [`Source`] and accumulates its counters.
pub struct Meter {
    source: Box<dyn Source>,
    counters: Vec<Counter>,
    raw: Vec<u64>,
    deltas: Vec<u64>,
    first_ns: Option<u64>,
    last_ns: u64,
    /// When each counter last moved: a counter that stops is a frozen register or a
    /// dead driver, and must not pass silently as "no energy".
    last_change_ns: Vec<u64>,
}

/// A counter that does not move for this long is reported (RAPL updates every ~1 ms).
pub const STALE_AFTER: Duration = Duration::from_millis(500);

impl Meter {
    /// A meter over `source`; nothing is read until [`Meter::sample`].
    pub fn new(source: Box<dyn Source>) -> Meter {
        let counters = source
            .channels()
            .iter()
            .map(|c| Counter::new(c.wrap, c.unit))
            .collect();
        let n = source.channels().len();
        Meter {
            source,
            counters,
            raw: vec![0; n],
            deltas: vec![0; n],
            first_ns: None,
            last_ns: 0,
            last_change_ns: vec![0; n],
        }
    }

    /// The mechanism read.
    pub fn mechanism(&self) -> Mechanism {
        self.source.mechanism()
    }

    /// The channels, in the order of every slice this meter returns.
    pub fn channels(&self) -> &[Channel] {
        self.source.channels()
    }

    /// The CPU of each counter read per sample ([`Source::read_cpus`]).
    pub fn read_cpus(&self) -> Vec<u32> {
        self.source.read_cpus()
    }

    /// What the source left out or wants known (duplicate zones, one-core AMD zones).
    pub fn notes(&self) -> &[String] {
        self.source.notes()
    }

    /// Reads every counter once; returns the timestamp (CLOCK_MONOTONIC ns, taken just
    /// before the reads) and the raw steps each counter advanced since the previous
    /// sample (all zero on the first). Allocates nothing.
    pub fn sample(&mut self) -> Result<(u64, &[u64])> {
        let t = monotonic_ns();
        self.source.read(&mut self.raw)?;
        self.account(t)
    }

    /// Like [`Meter::sample`] with readings taken elsewhere at `t_ns` (CLOCK_MONOTONIC):
    /// the in-kernel mechanisms read the counters in the kernel and hand them over in
    /// batches, and go through the same wrap correction and bookkeeping. `raw` has one
    /// value per channel. Allocates nothing.
    pub fn feed(&mut self, t_ns: u64, raw: &[u64]) -> Result<&[u64]> {
        let n = self.raw.len().min(raw.len());
        self.raw[..n].copy_from_slice(&raw[..n]);
        self.account(t_ns).map(|(_, d)| d)
    }

    /// Corrects and accumulates the readings in `self.raw`, taken at `t`.
    fn account(&mut self, t: u64) -> Result<(u64, &[u64])> {
        for (i, (c, &raw)) in self.counters.iter_mut().zip(&self.raw).enumerate() {
            self.deltas[i] = c.update(raw).map_err(|e| Error::CorruptCounter {
                path: self.source.channels()[i].origin.clone(),
                value: e.value,
                modulus: e.modulus,
            })?;
            if self.deltas[i] != 0 || self.first_ns.is_none() {
                self.last_change_ns[i] = t;
            }
        }
        self.first_ns.get_or_insert(t);
        self.last_ns = t;
        Ok((t, &self.deltas))
    }

    /// Like [`Meter::sample`], with each delta converted to joules into `out`.
    pub fn sample_joules(&mut self, out: &mut [Joules]) -> Result<u64> {
        let (t, _) = self.sample()?;
        for ((o, c), &d) in out.iter_mut().zip(&self.counters).zip(&self.deltas) {
            *o = c.joules(d);
        }
        Ok(t)
    }

    /// Converts `steps` of channel `i` to joules.
    pub fn joules(&self, i: usize, steps: u64) -> Joules {
        self.counters[i].joules(steps)
    }

    /// Time between the first and the last sample.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.last_ns - self.first_ns.unwrap_or(self.last_ns))
    }

    /// Wraps seen so far, per channel.
    pub fn wraps(&self) -> Vec<u64> {
        self.counters.iter().map(Counter::wraps).collect()
    }

    /// One warning per channel whose counter could wrap twice within `period` at the
    /// domain's maximum plausible power, so that energy would be lost unseen.
    pub fn wrap_warnings(&self, period: Duration) -> Vec<String> {
        self.channels()
            .iter()
            .filter_map(|c| {
                let p = c.id.domain.max_plausible_power();
                period_may_hide_wraps(c.wrap, c.unit, p, period).then(|| {
                    format!(
                        "{}: its counter can wrap in {:.3} s at {} ({} range); a sampling period of {:.3} s could hide a wrap: raise --freq",
                        c.id,
                        c.wrap.period_at(c.unit, p).as_secs_f64(),
                        p,
                        c.wrap.range(c.unit),
                        period.as_secs_f64()
                    )
                })
            })
            .collect()
    }

    /// The longest sampling period at which no counter can wrap twice unseen, with a
    /// factor 2 of margin for late wake-ups: half the shortest time any counter takes
    /// to turn once at its domain's maximum plausible power. `None` without channels.
    pub fn max_safe_period(&self) -> Option<Duration> {
        self.channels()
            .iter()
            .map(|c| c.wrap.period_at(c.unit, c.id.domain.max_plausible_power()) / 2)
            .min()
    }

    /// Raw totals per channel since the first sample (integer steps, exact).
    pub fn total_steps(&self) -> Vec<u128> {
        self.counters.iter().map(Counter::total_steps).collect()
    }

    /// Energy per channel since the first sample, and the total without double counting.
    pub fn report(&self) -> EnergyReport {
        let elapsed = self.elapsed();
        let ids: Vec<DomainId> = self.channels().iter().map(|c| c.id).collect();
        let domains: Vec<DomainEnergy> = self
            .counters
            .iter()
            .zip(&ids)
            .map(|(c, id)| DomainEnergy {
                socket: id.socket.0,
                die: id.die,
                domain: id.domain.name(),
                energy_j: c.total(),
                mean_power_w: c.total().per(elapsed),
                wraps: c.wraps(),
            })
            .collect();
        let total: Joules = total_members(&ids)
            .into_iter()
            .map(|i| domains[i].energy_j)
            .sum();
        let warnings = self
            .channels()
            .iter()
            .zip(&self.last_change_ns)
            .filter_map(|(c, &changed)| {
                let still = Duration::from_nanos(self.last_ns.saturating_sub(changed));
                (still >= STALE_AFTER).then(|| {
                    format!(
                        "{} ({}): the counter did not advance during the last {:.3} s: a frozen counter, or a domain drawing no power",
                        c.id,
                        c.origin.display(),
                        still.as_secs_f64()
                    )
                })
            })
            .collect();
        EnergyReport {
            mechanism: self.mechanism().name(),
            duration_s: elapsed.as_secs_f64(),
            domains,
            total_energy_j: total,
            total_power_w: total.per(elapsed),
            total_rule: total_rule(&ids),
            warnings,
        }
    }
}

/// The energy of each domain over a measurement.
#[derive(Debug, Clone, Serialize)]
pub struct DomainEnergy {
    /// The package.
    pub socket: u32,
    /// The die, on multi-die parts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub die: Option<u32>,
    /// The domain name (`package`, `core`, `uncore`, `dram`, `psys`).
    pub domain: &'static str,
    /// Energy in joules.
    pub energy_j: Joules,
    /// Mean power in watts.
    pub mean_power_w: Watts,
    /// How many times the counter wrapped (corrected).
    pub wraps: u64,
}

/// A measurement's result.
#[derive(Debug, Clone, Serialize)]
pub struct EnergyReport {
    /// The mechanism read.
    pub mechanism: &'static str,
    /// Seconds between the first and last reading.
    pub duration_s: f64,
    /// Per-domain energy.
    pub domains: Vec<DomainEnergy>,
    /// The total, counting each joule once (see `total_rule`).
    pub total_energy_j: Joules,
    /// Mean total power.
    pub total_power_w: Watts,
    /// What the total adds up.
    pub total_rule: &'static str,
    /// Things that make a figure doubtful (a counter that stopped moving).
    pub warnings: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::Wrap;
    use crate::domain::Domain;
    use crate::units::EnergyUnit;
    use std::path::PathBuf;

    /// A source replaying scripted raw values.
    struct Scripted {
        channels: Vec<Channel>,
        values: Vec<Vec<u64>>,
        next: usize,
    }

    impl Source for Scripted {
        fn mechanism(&self) -> Mechanism {
            Mechanism::Powercap
        }
        fn channels(&self) -> &[Channel] {
            &self.channels
        }
        fn read(&mut self, out: &mut [u64]) -> Result<()> {
            out.copy_from_slice(&self.values[self.next]);
            self.next += 1;
            Ok(())
        }
    }

    fn channel(socket: u32, domain: Domain, modulus: u64) -> Channel {
        Channel {
            id: DomainId::new(socket, domain),
            unit: EnergyUnit::Microjoule,
            wrap: Wrap::Modulus(modulus),
            origin: PathBuf::from(format!("/fake/{socket}/{domain}")),
        }
    }

    #[test]
    fn report_corrects_wraps_and_totals_packages_plus_dram_only() {
        let m = 1_000_000;
        let src = Scripted {
            channels: vec![
                channel(0, Domain::Package, m),
                channel(0, Domain::Core, m),
                channel(0, Domain::Dram, m),
            ],
            values: vec![vec![900_000, 100, 0], vec![100_000, 600_100, 250_000]],
            next: 0,
        };
        let mut meter = Meter::new(Box::new(src));
        meter.sample().unwrap();
        let (_, d) = meter.sample().unwrap();
        assert_eq!(d, &[200_000, 600_000, 250_000]);
        let r = meter.report();
        assert_eq!(r.domains[0].energy_j, Joules(0.2));
        assert_eq!(r.domains[0].wraps, 1);
        // core is inside package: the total is package + dram.
        assert!((r.total_energy_j.0 - 0.45).abs() < 1e-12);
        assert_eq!(r.total_rule, "package + dram");
    }

    #[test]
    fn a_reading_beyond_the_range_is_an_error_naming_the_counter() {
        let src = Scripted {
            channels: vec![channel(1, Domain::Package, 1000)],
            values: vec![vec![10], vec![5000]],
            next: 0,
        };
        let mut meter = Meter::new(Box::new(src));
        meter.sample().unwrap();
        let err = meter.sample().unwrap_err().to_string();
        assert!(
            err.contains("/fake/1/package") && err.contains("5000"),
            "{err}"
        );
    }

    #[test]
    fn a_period_that_could_hide_a_wrap_is_warned_about() {
        let src = Scripted {
            channels: vec![channel(0, Domain::Package, 1_000_001)],
            values: vec![],
            next: 0,
        };
        let meter = Meter::new(Box::new(src));
        // 1 J range at 500 W wraps every 2 ms.
        assert!(meter.wrap_warnings(Duration::from_millis(1)).is_empty());
        let w = meter.wrap_warnings(Duration::from_millis(10));
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("raise --freq"), "{}", w[0]);
    }
}
