//! The exporter: the samplers it opens, the refresh that
//! turns their snapshots and the collectors' families into an [`Exposition`], and
//! the loop that publishes one every `min_interval`.

use crate::collector::{Collector, ProcessCollector};
use crate::config::{Error, ExporterConfig, Notice};
use crate::exposition::{DomainSeries, Exposition};
use crate::server::Server;
use crate::slots::{open_slots, Opener, Plan, Slot};
use quietwatt::{Domain, DomainId, Hertz, Mechanism};
use std::time::{Duration, Instant};

/// The samplers, the collectors and the totals since the exporter started.
///
/// It is not `Send` (a collector may hold what cannot leave its thread, such as
/// BPF objects): open it on the thread that refreshes it, as `serve` does on its
/// main thread.
pub struct Exporter {
    opener: Opener,
    slots: Vec<Slot>,
    /// Each collector and the slot whose samples it reads.
    collectors: Vec<(Box<dyn Collector>, Option<usize>)>,
    samples: u64,
    missed: u64,
    notify: Box<dyn FnMut(Notice)>,
    /// Why no counter can be read, and when that was last tried: see
    /// [`Exporter::unavailable`].
    unavailable: Option<(String, Instant)>,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("collectors", &self.collectors.len())
            .field("samples", &self.samples)
            .field("missed", &self.missed)
            .finish_non_exhaustive()
    }
}

impl Exporter {
    /// Chooses the mechanism and opens the samplers; `notify` hears what the
    /// exporter has to say, now and at each refresh. The exporter's own
    /// [`ProcessCollector`] is registered first.
    pub fn open(
        config: ExporterConfig,
        mut notify: Box<dyn FnMut(Notice)>,
    ) -> Result<Exporter, Error> {
        let mut opener = Opener {
            plan: Plan::Polled(Mechanism::Perf),
            freq: config.freq,
            kept: kept_rows(&config),
            config,
        };
        let slots = open_slots(&mut opener, &mut *notify)?;
        Ok(Exporter {
            opener,
            slots,
            collectors: vec![(Box::new(ProcessCollector), None)],
            samples: 0,
            missed: 0,
            notify,
            unavailable: None,
        })
    }

    /// An exporter of a machine where no counter can be read (`reason`: why, as
    /// [`Exporter::open`] failed): it serves no energy, `quietwatt_up{reason}` 0
    /// ([`Exposition::unavailable`]) and its collectors' families (the process's
    /// own, and any registered that read no domain), and tries to open the
    /// counters again every [`ExporterConfig::retry`] (a module loaded later, a
    /// permission granted), serving them from then on
    /// ([`Notice::DomainBack`]). What a fleet's node without RAPL needs: a
    /// daemon that keeps answering and says why, rather than one that exits and
    /// is restarted in a loop.
    pub fn unavailable(
        config: ExporterConfig,
        reason: String,
        notify: Box<dyn FnMut(Notice)>,
    ) -> Exporter {
        let freq = config.freq;
        Exporter {
            opener: Opener {
                plan: Plan::Polled(Mechanism::Perf),
                freq,
                kept: kept_rows(&config),
                config,
            },
            slots: Vec::new(),
            collectors: vec![(Box::new(ProcessCollector), None)],
            samples: 0,
            missed: 0,
            notify,
            unavailable: Some((first_line(&reason), Instant::now())),
        }
    }

    /// Why no counter is read, while none can be (see [`Exporter::unavailable`]).
    pub fn unavailable_reason(&self) -> Option<&str> {
        self.unavailable.as_ref().map(|(r, _)| r.as_str())
    }

    /// Adds a collector, asked after those registered before it (its families
    /// follow theirs). One whose [`Collector::samples_of`] domain is not read is
    /// refused ([`Error::NotRead`]).
    pub fn register(&mut self, collector: Box<dyn Collector>) -> Result<(), Error> {
        let slot = match collector.samples_of() {
            Some(d) => Some(self.slot_reading(d).ok_or(Error::NotRead(d))?),
            None => None,
        };
        self.collectors.push((collector, slot));
        Ok(())
    }

    fn slot_reading(&self, d: Domain) -> Option<usize> {
        self.slots.iter().position(|s| s.domains.contains(&d))
    }

    /// The channels of the session that reads `domain` (the order of a
    /// [`quietwatt::session::SampleRow`]'s energies that a collector reading its
    /// samples gets), if it is read.
    pub fn channels_reading(&self, domain: Domain) -> Option<Vec<DomainId>> {
        Some(self.slots[self.slot_reading(domain)?].channels())
    }

    /// How the counters are read.
    pub fn plan(&self) -> Plan {
        self.opener.plan
    }

    /// The rate each counter is read at (raised from the configured one where a
    /// counter could wrap twice between reads).
    pub fn freq(&self) -> Hertz {
        self.opener.freq
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &ExporterConfig {
        &self.opener.config
    }

    /// The domains of each session, in order: one per domain when polled, all of
    /// them in one when sampled in the kernel.
    pub fn sessions(&self) -> Vec<Vec<Domain>> {
        self.slots.iter().map(|s| s.domains.clone()).collect()
    }

    /// Readings taken so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Drains every session and builds the exposition: a session whose sampler
    /// failed is stopped and its domains marked down (their energy kept), and
    /// opened again after [`ExporterConfig::retry`], counting on from where it
    /// stopped; each
    /// collector gets its samples, then is asked for its families, and one that
    /// fails is dropped.
    pub fn refresh(&mut self) -> Exposition {
        self.retry_unavailable();
        let mut domains = Vec::new();
        let others_served = self.slots.len() > 1;
        let retry = self.opener.config.retry;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if slot.session.is_none() && slot.failed_at.is_some_and(|t| t.elapsed() >= retry) {
                match self.opener.open(&slot.selection, &mut *self.notify) {
                    Ok(s) if s.channels().len() == slot.continuity.channels() => {
                        slot.continuity.restart();
                        (self.notify)(Notice::DomainBack {
                            domains: slot.domains.clone(),
                        });
                        slot.session = Some(s);
                        slot.failed_at = None;
                    }
                    _ => slot.failed_at = Some(Instant::now()),
                }
            }
            if let Some(session) = &slot.session {
                for row in session.drain_samples() {
                    self.samples += 1;
                    self.missed += row.missed;
                    for (c, at) in &mut self.collectors {
                        if *at == Some(i) {
                            c.sample(&row);
                        }
                    }
                }
                if let Ok(report) = session.snapshot() {
                    slot.continuity.reading(DomainSeries::of_report(&report));
                }
                if let Some(error) = session.sampling_error() {
                    (self.notify)(Notice::DomainFailed {
                        domains: slot.domains.clone(),
                        error,
                        others_served,
                        retry,
                    });
                    slot.failed_at = Some(Instant::now());
                }
            }
            if slot.failed_at.is_some() {
                if let Some(s) = slot.session.take() {
                    let _ = s.stop();
                }
            }
            domains.extend(slot.continuity.last(slot.session.is_some()));
        }
        let mut families = Vec::new();
        let notify = &mut self.notify;
        self.collectors.retain_mut(|(c, _)| {
            let before = families.len();
            match c.collect(&mut families) {
                Ok(()) => true,
                Err(error) => {
                    // The energy goes on without it, and without its half-written
                    // families.
                    families.truncate(before);
                    notify(Notice::CollectorFailed {
                        collector: c.name().to_string(),
                        error,
                    });
                    false
                }
            }
        });
        let c = &self.opener.config;
        Exposition {
            domains,
            samples: self.samples,
            missed_deadlines: self.missed,
            version: c.version.clone(),
            resolution_j: c.resolution.0,
            families,
            emulated: c.emulated,
            unavailable: self.unavailable.as_ref().map(|(r, _)| r.clone()),
        }
    }

    /// While no counter can be read: tries again once [`ExporterConfig::retry`]
    /// has passed since the last try.
    fn retry_unavailable(&mut self) {
        let Some((_, tried)) = &self.unavailable else {
            return;
        };
        if tried.elapsed() < self.opener.config.retry {
            return;
        }
        match open_slots(&mut self.opener, &mut *self.notify) {
            Ok(slots) => {
                let domains = slots.iter().flat_map(|s| s.domains.clone()).collect();
                self.slots = slots;
                self.unavailable = None;
                (self.notify)(Notice::DomainBack { domains });
            }
            Err(e) => self.unavailable = Some((first_line(&e.to_string()), Instant::now())),
        }
    }

    /// Publishes a refresh to `server` every `min_interval` until `wait` says to
    /// stop. `wait(d)` sleeps up to `d` (less when asked to stop) and returns
    /// whether to stop: the exporter's thread wakes once per refresh.
    pub fn run(&mut self, server: &Server, wait: &mut dyn FnMut(Duration) -> bool) {
        let mut pace = Pacer::new(Instant::now(), self.opener.config.min_interval);
        loop {
            match pace.until(Instant::now()) {
                Some(d) if wait(d) => return,
                Some(_) => {}
                None => server.publish(self.refresh()),
            }
        }
    }

    /// Stops every sampler (joining its thread).
    pub fn stop(mut self) {
        for s in &mut self.slots {
            if let Some(session) = s.session.take() {
                let _ = session.stop();
            }
        }
    }
}

/// A deadline every period from a start; one missed is not made up (a late
/// refresh is not followed by a burst of them).
#[derive(Debug)]
pub(crate) struct Pacer {
    period: Duration,
    next: Instant,
}

impl Pacer {
    /// The first deadline one `period` after `start`.
    pub(crate) fn new(start: Instant, period: Duration) -> Pacer {
        Pacer {
            period,
            next: start + period,
        }
    }

    /// The time left at `now` until the deadline; `None` when it has come,
    /// and the deadline moves one period on (or a period after `now`, when
    /// that is already past).
    pub(crate) fn until(&mut self, now: Instant) -> Option<Duration> {
        if now < self.next {
            return Some(self.next - now);
        }
        self.next += self.period;
        if self.next < now {
            self.next = now + self.period;
        }
        None
    }
}

/// Enough rows for two refreshes and a drain: drained every refresh, a
/// session's buffer never drops.
fn kept_rows(config: &ExporterConfig) -> usize {
    (config.freq.hz() * (config.min_interval + config.drain.period()).as_secs_f64() * 2.0).ceil()
        as usize
        + 16
}

/// A reason fit for a label value: its first line.
pub(crate) fn first_line(reason: &str) -> String {
    reason.lines().next().unwrap_or_default().trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pacer_keeps_its_period_and_skips_what_was_missed() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut p = Pacer::new(t0, ms(100));
        assert_eq!(p.until(t0 + ms(40)), Some(ms(60)));
        assert_eq!(p.until(t0 + ms(100)), None);
        // On time: the next deadline is a period after the last, not after now.
        assert_eq!(p.until(t0 + ms(130)), Some(ms(70)));
        // Three periods late: one refresh, then a period from now.
        assert_eq!(p.until(t0 + ms(500)), None);
        assert_eq!(p.until(t0 + ms(500)), Some(ms(100)));
    }
}
