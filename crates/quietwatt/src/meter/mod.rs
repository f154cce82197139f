//! A source and its counters: each sample turns raw readings into corrected
//! per-domain deltas, and the totals stay integers until they are reported.

use crate::counter::{period_may_hide_wraps, Counter, Marks, Step, StepKind, Wrap};
use crate::domain::{total_members_live, total_rule_of, Domain, DomainId};
use crate::error::{Error, Result, SourceError};
use crate::source::{Channel, Estimated, Mechanism, Mode, Reading, Source, Via};
use crate::units::Joules;
use crate::warning::{Warning, WarningKind};
use std::time::Duration;

pub use crate::ticker::monotonic_ns;
pub use report::{CounterEventReport, DomainEnergy, EnergyReport, FinerTotal};

mod report;
use report::domain_energy;
mod subdomain;
use subdomain::Pending;

/// Reads a [`Source`] and accumulates its counters; or, built from the channels
/// alone ([`Meter::for_channels`], [`Meter::like`]), accumulates readings taken
/// elsewhere ([`Meter::feed`]).
pub struct Meter {
    reads: Reads,
    /// Everything but the source, apart so that a buffered source's drain can feed
    /// each of its readings in while it is borrowed ([`Meter::drain`]).
    t: Tally,
}

impl std::fmt::Debug for Meter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meter")
            .field("channels", &self.channels())
            .finish_non_exhaustive()
    }
}

/// Where a meter's readings come from.
enum Reads {
    /// A source the meter reads itself.
    Source(Box<dyn Source>),
    /// Nothing: the readings are fed in. What was read, for the reports: a session
    /// reads its counters once per reading and feeds the same values to its own
    /// meter and to each window's.
    Fed {
        mechanism: Mechanism,
        label: &'static str,
        channels: Vec<Channel>,
        notes: Vec<String>,
        via: Option<Box<Via>>,
        estimate: Option<Box<Estimated>>,
    },
}

/// The counters of a meter and what their readings did.
struct Tally {
    counters: Vec<Counter>,
    /// Each channel's origin, for errors.
    origins: Vec<std::path::PathBuf>,
    raw: Vec<u64>,
    deltas: Vec<u64>,
    kinds: Vec<StepKind>,
    marks: Marks,
    first_ns: Option<u64>,
    last_ns: u64,
    /// When each counter last moved: a counter that stops is a frozen register or a
    /// dead driver, and must not pass silently as "no energy".
    last_change_ns: Vec<u64>,
    /// Resets, backward steps and jumps, in order; preallocated so that recording one
    /// allocates nothing, and counted beyond its capacity.
    events: Vec<CounterEvent>,
    events_dropped: u64,
    /// For a core or uncore channel, the index of its package's channel.
    parents: Vec<Option<usize>>,
    /// Each channel's previous raw reading (the last step's `from`).
    from: Vec<u64>,
    /// What a subdomain counted beyond its package and is held back until the
    /// next reading ([`Tally::check_subdomains`]).
    pending: Vec<Pending>,
    /// How long a reading may lag the truth at least ([`Source::update_interval`]:
    /// the reader service's interval and the age of its readings), beyond what
    /// the counters' standing still shows.
    update_floor: Duration,
    /// Each channel's stated model error, W, where the figures are an estimate
    /// ([`Source::estimate`]); empty for a measurement.
    model_w: Vec<f64>,
}

impl Tally {
    /// Nothing accounted yet, for `channels`.
    fn new(channels: &[Channel]) -> Tally {
        let n = channels.len();
        Tally {
            counters: channels.iter().map(Channel::counter).collect(),
            origins: channels.iter().map(|c| c.origin.clone()).collect(),
            raw: vec![0; n],
            deltas: vec![0; n],
            kinds: vec![StepKind::First; n],
            marks: Marks::default(),
            first_ns: None,
            last_ns: 0,
            last_change_ns: vec![0; n],
            events: Vec::with_capacity(EVENTS_KEPT),
            events_dropped: 0,
            parents: channels
                .iter()
                .map(|c| {
                    let parent = c.id.domain.parent()?;
                    channels.iter().position(|p| {
                        p.id.domain == parent && p.id.socket == c.id.socket && p.id.die == c.id.die
                    })
                })
                .collect(),
            from: vec![0; n],
            pending: vec![Pending::default(); n],
            update_floor: Duration::ZERO,
            model_w: Vec::new(),
        }
    }

    /// Keeps `e` if there is room (preallocated), counts it otherwise.
    fn record(&mut self, e: CounterEvent) {
        if self.events.len() < self.events.capacity() {
            self.events.push(e);
        } else {
            self.events_dropped += 1;
        }
    }

    /// Corrects and accumulates the readings in `self.raw`, taken at `t`.
    fn account(&mut self, t: u64) -> Result<()> {
        self.marks = Marks::default();
        for (i, (c, &raw)) in self.counters.iter_mut().zip(&self.raw).enumerate() {
            let step = c.update(raw, t).map_err(|e| SourceError::CorruptCounter {
                path: self.origins[i].clone(),
                value: e.value,
                modulus: e.modulus,
            })?;
            self.deltas[i] = step.steps;
            self.kinds[i] = step.kind;
            self.from[i] = step.from;
            if step.kind.is_anomaly() {
                self.marks.set(i, step.kind);
                let e = CounterEvent {
                    channel: i,
                    t_ns: t,
                    step,
                };
                if self.events.len() < self.events.capacity() {
                    self.events.push(e);
                } else {
                    self.events_dropped += 1;
                }
            }
            if step.steps != 0 || self.first_ns.is_none() {
                self.last_change_ns[i] = t;
            }
        }
        let dt = match self.first_ns {
            Some(_) => t.saturating_sub(self.last_ns),
            None => 0,
        };
        self.check_subdomains(t, dt);
        self.first_ns.get_or_insert(t);
        self.last_ns = t;
        Ok(())
    }
}

/// What [`Meter::drain`] hands each reading to: its time (CLOCK_MONOTONIC ns), its
/// corrected deltas, its marks, and the readings the kernel lost just before it.
pub type Drained<'a> = dyn FnMut(u64, &[u64], Marks, u64) + 'a;

/// A counter that does not move for this long is reported (RAPL updates every ~1 ms).
pub const STALE_AFTER: Duration = Duration::from_millis(500);

/// How often RAPL updates its counters when nothing better is known: "updated every
/// ~1msec" (Intel SDM vol. 3B, 15.10.3). A counter seen to update less often (a run
/// read faster than it updates) gets the interval observed.
pub const UPDATE_INTERVAL: Duration = Duration::from_millis(1);

/// The longest update interval a counter standing still is taken to reveal.
pub const LONGEST_UPDATE: Duration = Duration::from_millis(250);

/// How many counter events (resets, steps back, jumps) a meter keeps in detail.
const EVENTS_KEPT: usize = 256;

/// Above this share of its figure, an uncertainty is said to dominate it.
const DOMINATED: f64 = 0.05;

/// A reset, backward step or implausible jump of one counter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CounterEvent {
    /// The channel's index.
    pub channel: usize,
    /// When it was read (CLOCK_MONOTONIC ns).
    pub t_ns: u64,
    /// The reading's outcome.
    pub step: Step,
}

impl Meter {
    /// A meter over `source`; nothing is read until [`Meter::sample`].
    pub fn new(source: Box<dyn Source>) -> Meter {
        let mut t = Tally::new(source.channels());
        t.update_floor = source.update_interval().unwrap_or_default();
        t.model_w = model_errors(&*source);
        Meter {
            reads: Reads::Source(source),
            t,
        }
    }

    /// A meter over counters read elsewhere: `channels` of `mechanism` (their
    /// units, ranges and plausible powers, as a source describes them) and the
    /// source's `notes` for the reports. It is given readings with
    /// [`Meter::feed`]; [`Meter::sample`] fails with [`Error::NothingToRead`].
    pub fn for_channels(mechanism: Mechanism, channels: Vec<Channel>, notes: Vec<String>) -> Meter {
        Meter {
            t: Tally::new(&channels),
            reads: Reads::Fed {
                mechanism,
                label: mechanism.name(),
                channels,
                notes,
                via: None,
                estimate: None,
            },
        }
    }

    /// A meter over the channels of `source` (its mechanism, label, channels and
    /// notes), without the source: it is given the readings that whoever owns
    /// `source` takes ([`Meter::for_channels`]).
    pub fn describing(source: &dyn Source) -> Meter {
        let channels = source.channels().to_vec();
        let mut t = Tally::new(&channels);
        t.update_floor = source.update_interval().unwrap_or_default();
        t.model_w = model_errors(source);
        Meter {
            t,
            reads: Reads::Fed {
                mechanism: source.mechanism(),
                label: source.label(),
                channels,
                notes: source.notes().to_vec(),
                via: source.via().cloned().map(Box::new),
                estimate: source.estimate().cloned().map(Box::new),
            },
        }
    }

    /// A fresh meter over the same channels as this one, with nothing accounted
    /// and no source ([`Meter::for_channels`]): a window over readings that this
    /// meter is given too.
    pub fn like(&self) -> Meter {
        let channels = self.channels().to_vec();
        let mut t = Tally::new(&channels);
        t.update_floor = self.t.update_floor;
        t.model_w = self.t.model_w.clone();
        Meter {
            t,
            reads: Reads::Fed {
                mechanism: self.mechanism(),
                label: self.label(),
                channels,
                notes: self.notes().to_vec(),
                via: self.via().cloned().map(Box::new),
                estimate: self.estimate().cloned().map(Box::new),
            },
        }
    }

    /// How the source's readings come: polled or buffered ([`Source::mode`]);
    /// [`Mode::Polled`] for a meter without a source (it is fed a reading at a
    /// time).
    pub fn mode(&self) -> Mode {
        match &self.reads {
            Reads::Source(s) => s.mode(),
            Reads::Fed { .. } => Mode::Polled,
        }
    }

    /// Starts a buffered source's kernel sampling ([`Source::start`]); nothing to
    /// start without a source.
    pub fn start(&mut self) -> Result<()> {
        match &mut self.reads {
            Reads::Source(s) => Ok(s.start()?),
            Reads::Fed { .. } => Ok(()),
        }
    }

    /// What a buffered source's kernel side did ([`Source::kernel_side`]).
    pub fn kernel_side(&self) -> Option<crate::source::inkernel::KernelSide> {
        match &self.reads {
            Reads::Source(s) => s.kernel_side(),
            Reads::Fed { .. } => None,
        }
    }

    /// Drains a buffered source ([`Source::drain`]): each reading goes through the
    /// same correction as [`Meter::sample`], and `f` gets its time, its deltas, its
    /// marks and the readings lost just before it. Stops at the first reading that
    /// cannot be accounted (a corrupt counter) and returns its error. Allocates
    /// nothing. A meter without a source has nothing queued.
    pub fn drain(&mut self, last: bool, f: &mut Drained<'_>) -> Result<()> {
        let Meter { reads, t } = self;
        let Reads::Source(source) = reads else {
            return Ok(());
        };
        let mut failed = None;
        let drained = source.drain(last, &mut |r: &Reading<'_>| {
            if failed.is_some() {
                return;
            }
            let n = t.raw.len().min(r.raw.len());
            t.raw[..n].copy_from_slice(&r.raw[..n]);
            match t.account(r.t_ns) {
                Ok(()) => f(r.t_ns, &t.deltas, t.marks, r.lost),
                Err(e) => failed = Some(e),
            }
        });
        match failed {
            Some(e) => Err(e),
            None => Ok(drained?),
        }
    }

    /// The mechanism read (for a stand-in, the one it costs the same as).
    pub fn mechanism(&self) -> Mechanism {
        match &self.reads {
            Reads::Source(s) => s.mechanism(),
            Reads::Fed { mechanism, .. } => *mechanism,
        }
    }

    /// What reports and metadata call the source ([`Source::label`]).
    pub fn label(&self) -> &'static str {
        match &self.reads {
            Reads::Source(s) => s.label(),
            Reads::Fed { label, .. } => label,
        }
    }

    /// The channels, in the order of every slice this meter returns.
    pub fn channels(&self) -> &[Channel] {
        match &self.reads {
            Reads::Source(s) => s.channels(),
            Reads::Fed { channels, .. } => channels,
        }
    }

    /// The CPU of each counter read per sample ([`Source::read_cpus`]); none
    /// without a source.
    pub fn read_cpus(&self) -> Vec<u32> {
        match &self.reads {
            Reads::Source(s) => s.read_cpus(),
            Reads::Fed { .. } => Vec::new(),
        }
    }

    /// What the source left out or wants known (duplicate zones, one-core AMD zones).
    pub fn notes(&self) -> &[String] {
        match &self.reads {
            Reads::Source(s) => s.notes(),
            Reads::Fed { notes, .. } => notes,
        }
    }

    /// The process that reads the counters on this one's behalf, if any
    /// ([`Source::via`]).
    pub fn via(&self) -> Option<&Via> {
        match &self.reads {
            Reads::Source(s) => s.via(),
            Reads::Fed { via, .. } => via.as_deref(),
        }
    }

    /// The model whose estimate the figures are, if they are not measured
    /// ([`Source::estimate`]).
    pub fn estimate(&self) -> Option<&Estimated> {
        match &self.reads {
            Reads::Source(s) => s.estimate(),
            Reads::Fed { estimate, .. } => estimate.as_deref(),
        }
    }

    /// Reads every counter once; returns the timestamp (CLOCK_MONOTONIC ns, taken just
    /// before the reads) and the raw steps each counter advanced since the previous
    /// sample (all zero on the first). Allocates nothing. [`Error::NothingToRead`]
    /// for a meter without a source.
    pub fn sample(&mut self) -> Result<(u64, &[u64])> {
        let t = monotonic_ns();
        self.read_raw()?;
        self.account(t)
    }

    /// Reads the source into the raw buffer.
    fn read_raw(&mut self) -> Result<()> {
        let Meter { reads, t } = self;
        match reads {
            Reads::Source(s) => Ok(s.read(&mut t.raw)?),
            Reads::Fed { mechanism, .. } => Err(Error::NothingToRead {
                mechanism: mechanism.name(),
            }),
        }
    }

    /// Like [`Meter::sample`], with the [`Marks`] of the sample: the channels whose
    /// energy is not the full interval's. Allocates nothing.
    pub fn sample_marked(&mut self) -> Result<(u64, &[u64], Marks)> {
        let t = monotonic_ns();
        self.read_raw()?;
        self.account(t)?;
        Ok((t, &self.t.deltas, self.t.marks))
    }

    /// [`Meter::sample_marked`] under a retry policy: a read that fails with a
    /// retryable error is tried again within the tick, and a tick whose tries all
    /// failed is skipped (`Ok(None)`: nothing accounted, the next sample spans it).
    /// Allocates nothing.
    pub(crate) fn sample_marked_retrying(
        &mut self,
        retrier: &mut crate::retry::Retrier,
        counts: &mut crate::overhead::SamplerCounts,
    ) -> Result<Option<(u64, &[u64], Marks)>> {
        use crate::retry::Tick;
        let t = match retrier.read(counts, || self.read_raw()) {
            Tick::Read(t) => t,
            Tick::Skipped => return Ok(None),
            Tick::Failed(e) => return Err(e),
        };
        self.account(t)?;
        Ok(Some((t, &self.t.deltas, self.t.marks)))
    }

    /// Like [`Meter::sample`] with readings taken elsewhere at `t_ns` (CLOCK_MONOTONIC):
    /// the in-kernel mechanisms read the counters in the kernel and hand them over in
    /// batches, and go through the same wrap correction and bookkeeping. `raw` has one
    /// value per channel. Allocates nothing.
    pub fn feed(&mut self, t_ns: u64, raw: &[u64]) -> Result<&[u64]> {
        let n = self.t.raw.len().min(raw.len());
        self.t.raw[..n].copy_from_slice(&raw[..n]);
        self.account(t_ns).map(|(_, d)| d)
    }

    /// Corrects and accumulates the readings in `self.t.raw`, taken at `t`.
    fn account(&mut self, t: u64) -> Result<(u64, &[u64])> {
        self.t.account(t)?;
        Ok((t, &self.t.deltas))
    }

    /// What the last sample's reading did to each counter (a wrap, a reset, ...), in
    /// channel order: recordings mark the rows whose energy is not fully known.
    pub fn kinds(&self) -> &[StepKind] {
        &self.t.kinds
    }

    /// The channels of the last sample whose energy is not the full interval's (a
    /// reset, step back or jump).
    pub fn marks(&self) -> Marks {
        self.t.marks
    }

    /// The last sample's steps and marks, as [`Meter::sample_marked`] returned them:
    /// the sampling loop reads and pushes in two steps.
    #[inline]
    pub(crate) fn last_step(&self) -> (&[u64], Marks) {
        (&self.t.deltas, self.t.marks)
    }

    /// Like [`Meter::sample`], with each delta converted to joules into `out`.
    pub fn sample_joules(&mut self, out: &mut [Joules]) -> Result<u64> {
        let (t, _) = self.sample()?;
        for ((o, c), &d) in out.iter_mut().zip(&self.t.counters).zip(&self.t.deltas) {
            *o = c.joules(d);
        }
        Ok(t)
    }

    /// Converts `steps` of channel `i` to joules.
    pub fn joules(&self, i: usize, steps: u64) -> Joules {
        self.t.counters[i].joules(steps)
    }

    /// When the first reading was taken (CLOCK_MONOTONIC ns), if one was.
    pub fn first_reading_ns(&self) -> Option<u64> {
        self.t.first_ns
    }

    /// Time between the first and the last sample.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.t.last_ns - self.t.first_ns.unwrap_or(self.t.last_ns))
    }

    /// Wraps seen so far, per channel.
    pub fn wraps(&self) -> Vec<u64> {
        self.t.counters.iter().map(Counter::wraps).collect()
    }

    /// Resets, backward steps and jumps seen so far (the first 256).
    pub fn events(&self) -> &[CounterEvent] {
        &self.t.events
    }

    /// One warning per channel whose counter could wrap twice within `period` at the
    /// domain's maximum plausible power, so that energy would be lost unseen. perf
    /// counts are limited by one turn of the 32-bit hardware counter between two reads
    /// (`arch/x86/events/rapl.c` sign-extends a larger difference; the TPMI PMU does
    /// not correct a wrap at all), not by their 64 bits.
    pub fn wrap_warnings(&self, period: Duration) -> Vec<String> {
        self.channels()
            .iter()
            .filter_map(|c| {
                let p = c.plausible_power();
                period_may_hide_wraps(c.wrap, c.unit, p, period).then(|| {
                    format!(
                        "{}: its counter can wrap in {} at {} ({} range{}); a sampling period of {} could hide a wrap",
                        c.id,
                        human_duration(c.wrap.period_at(c.unit, p)),
                        p,
                        c.wrap.range(c.unit),
                        if matches!(c.wrap, Wrap::Perf { .. }) { " of the 32-bit hardware counter behind the perf count" } else { "" },
                        human_duration(period)
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
            .map(|c| c.wrap.period_at(c.unit, c.plausible_power()) / 2)
            .min()
    }

    /// Raw totals per channel since the first sample (integer steps, exact).
    pub fn total_steps(&self) -> Vec<u128> {
        self.t.counters.iter().map(Counter::total_steps).collect()
    }

    /// Energy per channel since the first sample, with its uncertainty, and the total
    /// without double counting.
    pub fn report(&self) -> EnergyReport {
        let elapsed = self.elapsed();
        let ids: Vec<DomainId> = self.channels().iter().map(|c| c.id).collect();
        let mut warnings = Vec::new();
        let domains: Vec<DomainEnergy> = self
            .t
            .counters
            .iter()
            .zip(&ids)
            .enumerate()
            .map(|(i, (c, id))| {
                let model_w = self.t.model_w.get(i).copied().unwrap_or(0.0);
                domain_energy(c, *id, elapsed, self.t.update_floor, model_w)
            })
            .collect();
        let moved: Vec<bool> = self
            .t
            .counters
            .iter()
            .map(|c| c.total_steps() > 0)
            .collect();

        // psys: one platform counter, on the package that reads it.
        let psys: Vec<usize> = indices(&ids, |d| d == Domain::Psys);
        let live_psys: Vec<usize> = psys.iter().copied().filter(|&i| moved[i]).collect();
        let dead_psys: Vec<usize> = psys.iter().copied().filter(|&i| !moved[i]).collect();
        if !psys.is_empty() && live_psys.is_empty() {
            warnings.push(Warning::new(WarningKind::Total, format!(
                "psys ({}) did not move during the run: it is disabled by the firmware, or read on a package that is not the one that reports it; it is left out of the total",
                names(&ids, &dead_psys)
            )));
        } else if !dead_psys.is_empty() {
            warnings.push(Warning::new(WarningKind::Total, format!(
                "psys reads 0 on {}: only one package reports psys (as on Sapphire and Emerald Rapids); {} is the one",
                names(&ids, &dead_psys),
                names(&ids, &live_psys[..1])
            )));
        }
        if live_psys.len() > 1 {
            warnings.push(Warning::new(
                WarningKind::Total,
                format!(
                    "psys moved on {}: a platform has one psys; only {} is counted in the total",
                    names(&ids, &live_psys),
                    ids[live_psys[0]]
                ),
            ));
        }
        let members = total_members_live(&ids, &moved);
        let total = members_total(&domains, &members, elapsed);
        let rule = total_rule_of(&ids, &members);

        // psys in whole joules (Sapphire Rapids) can be coarser than the run needs.
        let finer_total = match members.as_slice() {
            [p] if ids[*p].domain == Domain::Psys => {
                let rest: Vec<usize> = total_members_live(
                    &ids,
                    &moved
                        .iter()
                        .zip(&ids)
                        .map(|(&m, id)| m && id.domain != Domain::Psys)
                        .collect::<Vec<_>>(),
                );
                let finer = members_total(&domains, &rest, elapsed);
                match (total.as_ref(), finer) {
                    (Some(t), Some(f))
                        if t.uncertainty_j.0 > 2.0 * f.uncertainty_j.0
                            && t.uncertainty_j.0 > DOMINATED * t.energy_j.0 / 5.0 =>
                    {
                        warnings.push(Warning::new(WarningKind::Resolution, format!(
                            "psys moves in coarse steps here (about every {:.1} ms, {:.3} J a step): the total {:.6} ± {:.6} J is coarse for this run; {} = {:.6} ± {:.6} J is finer but leaves out the rest of the platform",
                            domains[*p].update_interval_s * 1e3,
                            domains[*p]
                                .quantum_j
                                .0
                                .max(domains[*p].mean_power_w.0 * domains[*p].update_interval_s),
                            t.energy_j.0,
                            t.uncertainty_j.0,
                            total_rule_of(&ids, &rest),
                            f.energy_j.0,
                            f.uncertainty_j.0
                        )));
                        Some(FinerTotal {
                            rule: total_rule_of(&ids, &rest),
                            energy_j: f.energy_j,
                            uncertainty_j: f.uncertainty_j,
                        })
                    }
                    _ => None,
                }
            }
            _ => None,
        };

        // A domain inside package that exceeds it is a counter that lies.
        for (i, id) in ids.iter().enumerate() {
            let Some(parent) = id.domain.parent() else {
                continue;
            };
            let Some(p) = ids
                .iter()
                .position(|o| o.domain == parent && o.socket == id.socket && o.die == id.die)
            else {
                continue;
            };
            let (c, pk) = (&domains[i], &domains[p]);
            if c.energy_j.0 - pk.energy_j.0 > c.uncertainty_j.0 + pk.uncertainty_j.0 {
                warnings.push(Warning::new(WarningKind::Counter, format!(
                    "{id} ({:.6} ± {:.6} J) exceeds {} ({:.6} ± {:.6} J), which contains it: one of the two counters is wrong (a frozen, reset or misreported package counter)",
                    c.energy_j.0, c.uncertainty_j.0, ids[p], pk.energy_j.0, pk.uncertainty_j.0
                )));
            }
        }

        // Resets, steps back and jumps: when, what, and what was counted instead.
        let first = self.t.first_ns.unwrap_or(0);
        let events: Vec<CounterEventReport> = self
            .t
            .events
            .iter()
            .map(|e| {
                let c = &self.t.counters[e.channel];
                CounterEventReport {
                    domain: ids[e.channel].to_string(),
                    t_s: (e.t_ns.saturating_sub(first)) as f64 * 1e-9,
                    kind: e.step.kind.name(),
                    from_raw: e.step.from,
                    to_raw: e.step.to,
                    counted_j: c.joules(e.step.steps),
                    plausible_j: c.joules(e.step.bound),
                    restart_j: c.joules(e.step.to),
                }
            })
            .collect();
        for (e, r) in self.t.events.iter().zip(&events) {
            warnings.push(Warning::new(
                WarningKind::Counter,
                event_warning(r, &self.channels()[e.channel]),
            ));
        }
        if self.t.events_dropped > 0 {
            warnings.push(Warning::new(
                WarningKind::Counter,
                format!(
                    "{} more counter resets, steps back or jumps were not listed",
                    self.t.events_dropped
                ),
            ));
        }

        // Counters that stopped, and figures their resolution dominates.
        for ((c, &changed), d) in self
            .channels()
            .iter()
            .zip(&self.t.last_change_ns)
            .zip(&domains)
        {
            if c.id.domain == Domain::Psys && d.energy_j.0 == 0.0 {
                continue; // said above
            }
            let still = Duration::from_nanos(self.t.last_ns.saturating_sub(changed));
            // A source that changes only every so often (the reader service)
            // is not frozen for standing still twice that long.
            if still >= STALE_AFTER.max(2 * self.t.update_floor) {
                warnings.push(Warning::new(WarningKind::Counter, format!(
                    "{} ({}): the counter did not advance during the last {:.3} s: a frozen counter, or a domain drawing no power",
                    c.id,
                    c.origin.display(),
                    still.as_secs_f64()
                )));
            } else if d.energy_j.0 == 0.0 && elapsed > Duration::ZERO {
                warnings.push(Warning::new(WarningKind::Resolution, format!(
                    "{}: the counter did not move during the {:.6} s measured: the run is shorter than the counter's update interval, so its energy lies between 0 and what the domain can draw over it (≤ {:.6} J, the uncertainty); repeat the work until it lasts 0.1 s or more to resolve it",
                    c.id,
                    elapsed.as_secs_f64(),
                    d.uncertainty_j.0
                )));
            }
        }
        if let Some(t) = &total {
            if t.energy_j.0 > 0.0 && t.uncertainty_j.0 > DOMINATED * t.energy_j.0 {
                let p = t.energy_j.per(elapsed).0.max(f64::MIN_POSITIVE);
                // Long enough for the fixed part (quantum + one update) to be 1 %.
                let need = t.uncertainty_j.0 / (0.01 * p);
                warnings.push(Warning::new(WarningKind::Resolution, format!(
                    "the total's uncertainty (± {:.6} J) is {:.0} % of it: over {:.3} s the counters' resolution dominates (their step and ~{:.1} ms update interval); measure for at least {:.2} s for 1 %",
                    t.uncertainty_j.0,
                    100.0 * t.uncertainty_j.0 / t.energy_j.0,
                    elapsed.as_secs_f64(),
                    domains
                        .iter()
                        .map(|d| d.update_interval_s)
                        .fold(0.0, f64::max)
                        * 1e3,
                    need
                )));
            }
        }

        EnergyReport {
            mechanism: self.label(),
            duration_s: elapsed.as_secs_f64(),
            domains,
            total_energy_j: total.as_ref().map(|t| t.energy_j),
            total_uncertainty_j: total.as_ref().map(|t| t.uncertainty_j),
            total_power_w: total.as_ref().map(|t| t.energy_j.per(elapsed)),
            total_power_uncertainty_w: total.as_ref().map(|t| t.uncertainty_j.per(elapsed)),
            total_rule: rule,
            finer_total,
            counter_events: events,
            warnings,
        }
    }
}

/// A sum of members' energies and uncertainties.
struct Sum {
    energy_j: Joules,
    uncertainty_j: Joules,
}

fn members_total(domains: &[DomainEnergy], members: &[usize], _elapsed: Duration) -> Option<Sum> {
    (!members.is_empty()).then(|| Sum {
        energy_j: members.iter().map(|&i| domains[i].energy_j).sum(),
        // Worst case: the members' errors come from the same read times, so they add.
        uncertainty_j: members.iter().map(|&i| domains[i].uncertainty_j).sum(),
    })
}

fn names(ids: &[DomainId], which: &[usize]) -> String {
    which
        .iter()
        .map(|&i| format!("socket {}", ids[i].socket))
        .collect::<Vec<_>>()
        .join(", ")
}

fn indices(ids: &[DomainId], keep: impl Fn(Domain) -> bool) -> Vec<usize> {
    ids.iter()
        .enumerate()
        .filter(|(_, id)| keep(id.domain))
        .map(|(i, _)| i)
        .collect()
}

fn event_warning(e: &CounterEventReport, c: &Channel) -> String {
    let what = match e.kind {
        "reset" => format!(
            "restarted from 0 (module reload or resume?): counted the {:.6} J since the restart, the energy before it in that interval is lost",
            e.counted_j.0
        ),
        "backstep" => "stepped back: not a wrap (a wrap would mean more energy than the domain can draw in that interval); counted 0 J for the interval".to_string(),
        "ambiguous" => format!(
            "decreased: a wrap or a restart from 0, which a counter of so small a range cannot tell apart (read it faster); counted {:.6} J as a wrap, a restart would leave between {:.6} J and that",
            e.counted_j.0, e.restart_j.0
        ),
        "above_package" => format!(
            "advanced more than its package over the interval, by more than a read skew (checked at the next reading) and resolution explain: counted {:.6} J, the package's advance and resolution, and dropped the rest",
            e.counted_j.0
        ),
        _ => "jumped forward by more than the domain can draw in that interval; counted 0 J for the interval".to_string(),
    };
    format!(
        "{} ({}) at {:.3} s: raw {} -> {}: {what} (plausible at most {:.6} J); the counter was rebased",
        e.domain,
        c.origin.display(),
        e.t_s,
        e.from_raw,
        e.to_raw,
        e.plausible_j.0
    )
}

/// A duration with the digits it needs: `250 ms`, `3.2 µs`, `12.5 s`, never `0.000 s`.
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 1.0 {
        format!("{s:.3} s")
    } else if s >= 1e-3 {
        format!("{:.3} ms", s * 1e3)
    } else if s >= 1e-6 {
        format!("{:.3} µs", s * 1e6)
    } else {
        format!("{} ns", d.as_nanos())
    }
}

#[cfg(test)]
mod tests;

/// Each channel's stated model error, W, of an estimating source; empty for
/// one that measures.
fn model_errors(source: &dyn Source) -> Vec<f64> {
    source
        .estimate()
        .map(|e| e.error_w.clone())
        .unwrap_or_default()
}
