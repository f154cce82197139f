//! How the exporter reads the counters: the mechanism it chooses, the sessions
//! it opens (one per domain when polled, so that a counter that vanishes ends its
//! own session only; one for every domain when the kernel samples them), and each
//! session's counters kept monotone across a failure and a reopening.

use crate::config::{Error, ExporterConfig, Notice};
use crate::exposition::DomainSeries;
use quietwatt::inkernel::{self, Opened};
use quietwatt::source::perf::{EventSpec, PerfEvents};
use quietwatt::source::Mode;
use quietwatt::{Domain, DomainId, Hertz, Mechanism, Meter, Selection, Session, SessionConfig};
use std::time::{Duration, Instant};

/// How the counters are read.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Plan {
    /// One polled session per domain, each read at the exporter's rate.
    Polled(Mechanism),
    /// One session for every domain, sampled in the kernel and collected every
    /// drain period.
    Buffered {
        /// ebpf or perf-ring.
        mechanism: Mechanism,
        /// How often the kernel's readings are collected.
        drain: Hertz,
    },
    /// Nothing can measure: one session of the configured power model's
    /// estimate for every domain ([`ExporterConfig::power_model`]).
    Estimated,
}

impl Plan {
    /// The mechanism read.
    pub fn mechanism(self) -> Mechanism {
        match self {
            Plan::Polled(m) | Plan::Buffered { mechanism: m, .. } => m,
            Plan::Estimated => Mechanism::Estimate,
        }
    }
}

/// Opens the session of a slot, the first time and after a failure.
pub(crate) struct Opener {
    pub(crate) config: ExporterConfig,
    pub(crate) plan: Plan,
    /// The rate, raised from the configured one where a counter could wrap twice
    /// between reads.
    pub(crate) freq: Hertz,
    /// Rows each session keeps between two refreshes.
    pub(crate) kept: usize,
}

impl Opener {
    /// A session over the domains of `sel` as the plan says. perf-ring's group
    /// refused by the kernel gives a polled session of the same events (said in a
    /// [`Notice::Fallback`]).
    pub(crate) fn open(
        &self,
        sel: &Selection,
        notify: &mut dyn FnMut(Notice),
    ) -> quietwatt::Result<Session> {
        let c = &self.config;
        let config = SessionConfig::default()
            .root(c.root.clone())
            .rate(self.freq)
            .drain(c.drain)
            .samples_kept(self.kept);
        let stand_ins = || stand_ins(sel);
        match self.plan {
            Plan::Polled(_) if c.stand_in => {
                let source = PerfEvents::from_specs(stand_ins()?)?;
                Session::start_on(Box::new(source), config)
            }
            Plan::Polled(m) => Session::start(config.mechanism(m).domains(sel.clone())),
            Plan::Estimated => {
                let Some(model) = &c.power_model else {
                    return Err(quietwatt::SourceError::MechanismUnavailable {
                        mechanism: "estimate",
                        why: "no power model configured".into(),
                    }
                    .into());
                };
                let source = quietwatt::estimate::open_model(
                    model,
                    sel,
                    std::path::Path::new("/proc"),
                    &c.root.dir().join("sys"),
                )
                .map_err(quietwatt::SourceError::from)?;
                Session::start_on(Box::new(source), config)
            }
            Plan::Buffered { mechanism: m, .. } => {
                let opened = if c.stand_in {
                    inkernel::open_specs(m, stand_ins()?, self.freq, c.drain)?
                } else {
                    inkernel::open(&c.root, m, sel, self.freq, c.drain)?
                };
                match opened {
                    Opened::InKernel(s) => Session::start_on(Box::new(s), config),
                    Opened::Fallback { source, reason } => {
                        notify(Notice::Fallback {
                            mechanism: m,
                            reason,
                        });
                        Session::start_on(source, config)
                    }
                }
            }
        }
    }
}

/// The stand-in counters of CPU 0 that `sel` selects (feature `testing`).
#[cfg(feature = "testing")]
fn stand_ins(sel: &Selection) -> Result<Vec<EventSpec>, quietwatt::SourceError> {
    sel.apply(inkernel::stand_in_specs(0), |s| s.id)
}

/// Without the feature `testing` there are no stand-ins to read.
#[cfg(not(feature = "testing"))]
fn stand_ins(_: &Selection) -> Result<Vec<EventSpec>, quietwatt::SourceError> {
    Err(quietwatt::SourceError::FeatureDisabled {
        mechanism: "stand-in",
        feature: "testing",
    })
}

/// `freq`, raised when a counter could wrap twice in a period longer than `safe`
/// (said in a [`Notice::RateRaised`]).
fn wrap_safe(freq: Hertz, safe: Option<Duration>, notify: &mut dyn FnMut(Notice)) -> Hertz {
    // The workspace's one rule; serve only words the raise.
    let settled = quietwatt::safe_rate::safe_rate(freq, safe);
    if settled.raised {
        notify(Notice::RateRaised {
            from: freq,
            to: settled.rate,
        });
    }
    settled.rate
}

/// Each domain once, in order.
fn domains_of(ids: impl Iterator<Item = Domain>) -> Vec<Domain> {
    let mut domains: Vec<Domain> = Vec::new();
    for d in ids {
        if !domains.contains(&d) {
            domains.push(d);
        }
    }
    domains
}

/// Chooses how to read and opens the slots: the configured mechanism when given;
/// otherwise the best polled mechanism that measures here (as `source::open`
/// chooses it, counters that never move refused) and, when that is perf, the
/// in-kernel mechanisms on the same events first: ebpf (whose energy stays whole
/// when perf throttles an idle CPU's clock), then perf-ring.
pub(crate) fn open_slots(
    opener: &mut Opener,
    notify: &mut dyn FnMut(Notice),
) -> Result<Vec<Slot>, Error> {
    let config = opener.config.clone();
    let sel = config.domains.clone();
    if config.stand_in
        && !matches!(
            config.mechanism,
            Some(Mechanism::Perf | Mechanism::Ebpf | Mechanism::PerfRing)
        )
    {
        return Err(Error::StandInNeedsPerf);
    }
    let mut probe: Option<Box<dyn quietwatt::Source>> = None;
    let in_kernel: &[Mechanism] = match config.mechanism {
        Some(m @ (Mechanism::Ebpf | Mechanism::PerfRing)) => &[m][..],
        Some(_) => &[],
        None => {
            let p = match quietwatt::source::open(&config.root, None, &sel) {
                Ok(p) => p,
                // Nothing measures here: the power model's estimate, one
                // session for every domain (reading /proc/stat costs little).
                Err(e)
                    if config.power_model.is_some() && quietwatt::reader::refused_locally(&e) =>
                {
                    opener.plan = Plan::Estimated;
                    let session = opener.open(&sel, notify)?;
                    let domains = domains_of(session.channels().iter().map(|c| c.domain));
                    return Ok(vec![Slot::new(sel, domains, session)]);
                }
                Err(e) => return Err(e.into()),
            };
            let perf = p.mechanism() == Mechanism::Perf;
            if !perf {
                notify(Notice::PollingNotPerf(p.mechanism()));
            }
            probe = Some(p);
            if perf {
                &[Mechanism::Ebpf, Mechanism::PerfRing]
            } else {
                &[]
            }
        }
    };
    let mut polled = config
        .mechanism
        .filter(|m| !matches!(m, Mechanism::Ebpf | Mechanism::PerfRing));
    let mut refused = Vec::new();
    for &m in in_kernel {
        opener.plan = Plan::Buffered {
            mechanism: m,
            drain: config.drain,
        };
        let session = match opener.open(&sel, notify) {
            Ok(s) => s,
            Err(e) if config.mechanism.is_some() => return Err(e.into()),
            Err(e) => {
                refused.push((m, e.to_string()));
                continue;
            }
        };
        if session.mode() == Mode::Polled {
            // perf-ring's group refused here: the same events polled, one session
            // per domain as for perf.
            let _ = session.stop();
            polled = Some(Mechanism::Perf);
            probe = None;
            break;
        }
        let freq = wrap_safe(opener.freq, session.safe_period(), notify);
        let session = if freq == opener.freq {
            session
        } else {
            let _ = session.stop();
            opener.freq = freq;
            opener.open(&sel, notify)?
        };
        let domains = domains_of(session.channels().iter().map(|c| c.domain));
        return Ok(vec![Slot::new(sel, domains, session)]);
    }
    if !refused.is_empty() {
        notify(Notice::InKernelRefused(refused));
    }
    // One opening to learn the mechanism, the domains and how fast a counter can
    // wrap; then one session per domain on that mechanism.
    let probe = match probe {
        Some(p) => p,
        None if config.stand_in => Box::new(PerfEvents::from_specs(stand_ins(&sel)?)?),
        None => quietwatt::source::open(&config.root, polled, &sel)?,
    };
    opener.plan = Plan::Polled(probe.mechanism());
    let domains = domains_of(probe.channels().iter().map(|c| c.id.domain));
    opener.freq = wrap_safe(opener.freq, Meter::new(probe).max_safe_period(), notify);
    domains
        .into_iter()
        .map(|d| {
            let only = Selection::only(vec![d]);
            let session = opener.open(&only, notify)?;
            Ok(Slot::new(only, vec![d], session))
        })
        .collect()
}

/// The series of one session's counters as exported: the energy and counts of
/// its earlier sessions (before a failure) added to the current one's, so that an
/// exported counter never goes back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Continuity {
    /// Per channel: energy (joules), resets and ambiguous decreases of the
    /// sessions before this one.
    base: Vec<(f64, u64, u64)>,
    /// The last series published (kept, marked down, after a failure).
    last: Vec<DomainSeries>,
}

impl Continuity {
    /// Counting from zero over `channels` counters.
    pub fn new(channels: usize) -> Continuity {
        Continuity {
            base: vec![(0.0, 0, 0); channels],
            last: Vec::new(),
        }
    }

    /// The current session's series (a snapshot's, [`DomainSeries::of_report`]):
    /// the earlier sessions' energy and resets added, kept as the last.
    pub fn reading(&mut self, mut series: Vec<DomainSeries>) {
        for (s, (e, r, a)) in series.iter_mut().zip(&self.base) {
            s.energy_j += e;
            s.resets += r;
            s.ambiguous += a;
        }
        self.last = series;
    }

    /// A new session of the same counters starts from zero: each counter goes on
    /// from its last exported value (the energy between the failure and now is
    /// lost), and the gap counts as a reset.
    pub fn restart(&mut self) {
        for (b, l) in self.base.iter_mut().zip(&self.last) {
            *b = (l.energy_j, l.resets + 1, l.ambiguous);
        }
    }

    /// How many counters it follows.
    pub fn channels(&self) -> usize {
        self.base.len()
    }

    /// The last series, `up` or marked down.
    pub fn last(&self, up: bool) -> impl Iterator<Item = DomainSeries> + '_ {
        self.last.iter().cloned().map(move |mut s| {
            s.up = up;
            s
        })
    }
}

/// One session's domains and what they have exported so far.
pub(crate) struct Slot {
    /// What the session reads: one domain when polled, all of them when buffered.
    pub(crate) selection: Selection,
    /// Its domains, for messages.
    pub(crate) domains: Vec<Domain>,
    pub(crate) session: Option<Session>,
    pub(crate) continuity: Continuity,
    pub(crate) failed_at: Option<Instant>,
}

impl Slot {
    fn new(selection: Selection, domains: Vec<Domain>, session: Session) -> Slot {
        Slot {
            selection,
            domains,
            continuity: Continuity::new(session.channels().len()),
            session: Some(session),
            failed_at: None,
        }
    }

    /// The channels its session reads (none while it is down).
    pub(crate) fn channels(&self) -> Vec<DomainId> {
        self.session
            .as_ref()
            .map(|s| s.channels().to_vec())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(energy_j: f64, resets: u64, ambiguous: u64) -> DomainSeries {
        DomainSeries {
            socket: 0,
            die: None,
            domain: "package",
            mechanism: "powercap",
            energy_j,
            resets,
            ambiguous,
            up: true,
        }
    }

    #[test]
    fn a_restarted_counter_goes_on_from_its_last_value_with_one_more_reset() {
        let mut c = Continuity::new(1);
        c.reading(vec![series(5.0, 0, 0)]);
        c.reading(vec![series(7.5, 1, 2)]);
        assert_eq!(c.last(false).next().unwrap().energy_j, 7.5);
        assert!(!c.last(false).next().unwrap().up);
        c.restart();
        // The new session counts from zero again.
        c.reading(vec![series(0.25, 0, 1)]);
        let s = c.last(true).next().unwrap();
        // A restart is a reset; the ambiguous decreases go on from their count.
        assert_eq!(
            (s.energy_j, s.resets, s.ambiguous, s.up),
            (7.75, 2, 3, true)
        );
        // Two failures in a row without a reading in between still never go back.
        c.restart();
        c.restart();
        c.reading(vec![series(0.0, 0, 0)]);
        let s = c.last(true).next().unwrap();
        assert_eq!((s.energy_j, s.resets, s.ambiguous), (7.75, 3, 3));
    }
}
