//! From raw counter readings to corrected energy: wrap correction with each
//! mechanism's modulus, a plausibility bound that tells a wrap from a reset or a
//! glitch, integer accumulation, conversion at the edge.
//!
//! | mechanism | wraps at | kernel source |
//! |---|---|---|
//! | MSR | 2^32 raw steps (the register's 32-bit energy field) | `RAPL_CNTR_WIDTH 32` in `arch/x86/events/rapl.c`; `ENERGY_STATUS_MASK` in `drivers/powercap/intel_rapl_common.c` |
//! | powercap | `max_energy_range_uj` + 1 µJ | `rapl_get_max_energy_range_uj` / `get_energy_counter` in `intel_rapl_common.c`: no wrap handling |
//! | perf_event | 2^64, and it *falls* by one hardware wrap (2^32 raw steps) in two cases | below |
//!
//! **perf counts can fall.** `rapl_event_update` in `arch/x86/events/rapl.c` shifts the
//! 32-bit raw difference up and arithmetically back down (`delta = (new << shift) -
//! (prev << shift); delta >>= shift`), so a difference of more than 2^31 raw steps
//! between two kernel updates is added as a negative amount. The TPMI `power` PMU in
//! `drivers/powercap/intel_rapl_common.c` (`rapl_event_update`, Linux 6.10+: Granite
//! Rapids, Sierra Forest) computes `delta = new_raw_count - prev_raw_count` as a signed
//! 64-bit difference of two 32-bit register values, with no wrap fix, so every
//! hardware wrap subtracts 2^32 raw steps × scale. In both cases the true advance is
//! the fall's complement to one hardware wrap: [`Wrap::Perf`].
//!
//! **Resets and glitches.** A decrease is a wrap only when the energy it implies over
//! the interval is physically plausible for the domain ([`Plausible`]). Anything else
//! is a restart of the counter (module reload, resume from suspend: the new reading
//! is the energy since the restart, counted when it is itself plausible) or a glitch
//! (a backward step, an implausible forward jump: nothing is counted for that
//! interval). Either way the counter is rebased on the new reading and the event is
//! reported ([`Step`]), and no interval ever adds more than the plausible bound.

use crate::units::{EnergyUnit, Joules, Watts};
use serde::Serialize;
use std::time::Duration;

/// Where a counter wraps back to zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Wrap {
    /// The counter takes values `0..m` and continues at 0.
    Modulus(u64),
    /// perf's 64-bit count of 2^-32 J steps, built by the kernel from a 32-bit
    /// hardware counter: it wraps at 2^64 and falls by less than one hardware wrap when
    /// the kernel mishandles one (module docs). `hw_bits`: log2 of one hardware wrap in
    /// count steps (`64 - ESU`: 48 for 2^-16 J units) when known; when not, a fall is
    /// matched to the smallest hardware wrap (≥ 2^48 steps, ESU ≤ 16) that explains it.
    Perf {
        /// log2 of one hardware wrap in count steps, when the energy unit is known.
        hw_bits: Option<u8>,
    },
}

/// log2 of the hardware wrap assumed for warnings when the unit is unknown: ESU 16
/// (2^-16 J, the finest unit in use), so the shortest range, 65536 J.
const ASSUMED_HW_BITS: u8 = 48;

impl Wrap {
    /// A perf count whose hardware unit is unknown.
    pub const PERF: Wrap = Wrap::Perf { hw_bits: None };

    /// The difference `new - old` as the counter moved forward, across at most one wrap
    /// (perf: across 2^64, the count's own width).
    #[inline]
    pub fn delta(self, old: u64, new: u64) -> u64 {
        match self {
            Wrap::Perf { .. } => new.wrapping_sub(old),
            Wrap::Modulus(_) if new >= old => new - old,
            Wrap::Modulus(m) => m - old + new,
        }
    }

    /// Whether `raw` can be a reading of this counter.
    #[inline]
    pub fn admits(self, raw: u64) -> bool {
        match self {
            Wrap::Perf { .. } => true,
            Wrap::Modulus(m) => raw < m,
        }
    }

    /// One turn of the counter in steps: the modulus, or for perf one hardware wrap
    /// (the most that can pass between two reads and still be corrected), assuming
    /// 2^-16 J units when the unit is unknown.
    pub fn steps(self) -> u128 {
        match self {
            Wrap::Perf { hw_bits } => 1u128 << hw_bits.unwrap_or(ASSUMED_HW_BITS),
            Wrap::Modulus(m) => m as u128,
        }
    }

    /// The energy of one full turn of the counter.
    pub fn range(self, unit: EnergyUnit) -> Joules {
        unit.to_joules(self.steps())
    }

    /// How long the counter takes to wrap at `power`.
    pub fn period_at(self, unit: EnergyUnit, power: Watts) -> Duration {
        let secs = self.range(unit).0 / power.0.max(f64::MIN_POSITIVE);
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
    }
}

/// A reading that cannot come from the counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("raw value {value} is outside the counter's range 0..{modulus}")]
pub struct OutOfRange {
    /// The value read.
    pub value: u64,
    /// The counter's modulus.
    pub modulus: u64,
}

/// The most energy a domain can plausibly draw over an interval: `power × (interval +
/// slack)`. The slack covers what a timestamp does not see: the counter's own update
/// interval and a reader delayed between its timestamp and its read (the host can stall
/// a thread for milliseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plausible {
    /// The power bound (already with its margin).
    pub power: Watts,
    /// Added to every interval.
    pub slack: Duration,
}

impl Plausible {
    /// The default slack: 50 ms, far above RAPL's ~1 ms update and the delays seen here.
    pub const SLACK: Duration = Duration::from_millis(50);

    /// A bound at `power` with the default slack.
    pub fn at(power: Watts) -> Plausible {
        Plausible {
            power,
            slack: Self::SLACK,
        }
    }

    /// The slack for the energy a counter holds after a restart: it restarted inside
    /// the interval, so what it holds was drawn within it; only the counter's own
    /// update (about 1 ms) and a read's delay after its timestamp widen that. A step
    /// back to a value above this is a glitch, not a restart (a 0.5 J step back of a
    /// package counter holding 30 J, read at 100 Hz, was once counted as 30 J drawn).
    pub const RESET_SLACK: Duration = Duration::from_millis(5);

    /// The bound for an interval of `dt_ns`, in steps of `unit` (saturating).
    #[inline]
    fn steps(self, unit: EnergyUnit, dt_ns: u64) -> u64 {
        self.steps_with(unit, dt_ns, self.slack)
    }

    /// The bound on the energy since a restart within an interval of `dt_ns`.
    #[inline]
    fn reset_steps(self, unit: EnergyUnit, dt_ns: u64) -> u64 {
        self.steps_with(unit, dt_ns, self.slack.min(Self::RESET_SLACK))
    }

    #[inline]
    fn steps_with(self, unit: EnergyUnit, dt_ns: u64, slack: Duration) -> u64 {
        let secs = dt_ns as f64 * 1e-9 + slack.as_secs_f64();
        let steps = self.power.0 * secs / unit.joules_per_step();
        if steps >= u64::MAX as f64 {
            u64::MAX
        } else {
            steps as u64
        }
    }
}

/// What one reading did to the counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// The first reading: nothing counted yet.
    First,
    /// An ordinary advance (or no change).
    Forward,
    /// A decrease explained by one wrap of the counter (or, for perf, one hardware
    /// wrap the kernel did not correct): the full advance is counted.
    Wrap,
    /// A decrease no single wrap explains, to a reading that is itself plausible as
    /// energy since a restart from 0 (module reload, resume): that reading is counted;
    /// the energy between the previous reading and the restart is lost.
    Reset,
    /// A decrease that is neither a wrap nor a restart (a backward step), or a
    /// perf count that fell by something other than one hardware wrap: nothing counted.
    BackStep,
    /// A forward move larger than the domain can draw over the interval: nothing counted.
    Jump,
    /// A decrease that a wrap and a restart from 0 explain equally well: the
    /// counter's range is so small against what the domain can draw in the
    /// interval that its position says nothing. The wrap's advance is counted (the
    /// larger reading); had it restarted, the interval held between the new
    /// reading and that. Widens the uncertainty as the other anomalies do.
    Ambiguous,
    /// A subdomain (core, uncore) that advanced more than its package over the
    /// same interval, beyond resolution and beyond what a read skew between the
    /// two explains (checked at the next reading, which a skew pays back): only
    /// the package's advance was counted for it. Marked in recordings as a jump.
    AbovePackage,
}

impl StepKind {
    /// Whether the interval's energy is not (fully) known: a reset, a step back or a jump.
    pub fn is_anomaly(self) -> bool {
        matches!(
            self,
            StepKind::Reset
                | StepKind::BackStep
                | StepKind::Jump
                | StepKind::Ambiguous
                | StepKind::AbovePackage
        )
    }

    /// The name used in recordings, JSON and warnings.
    pub fn name(self) -> &'static str {
        match self {
            StepKind::First => "first",
            StepKind::Forward => "forward",
            StepKind::Wrap => "wrap",
            StepKind::Reset => "reset",
            StepKind::BackStep => "backstep",
            StepKind::Jump => "jump",
            StepKind::Ambiguous => "ambiguous",
            StepKind::AbovePackage => "above_package",
        }
    }
}

/// Which channels of one sample had a reset, a step back or a jump: one bit per
/// channel (channel indices below 64, the most a sample holds). Carried with each
/// sample to the recording, which marks those rows: their energy is not the full
/// interval's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks {
    /// Channels that restarted from 0.
    pub reset: u64,
    /// Channels that stepped back (or, perf, fell by no hardware wrap).
    pub backstep: u64,
    /// Channels that jumped forward implausibly.
    pub jump: u64,
    /// Channels whose decrease was a wrap or a restart, which could not be told.
    pub ambiguous: u64,
}

impl Marks {
    /// Marks channel `i` with `kind` (ordinary kinds mark nothing).
    #[inline]
    pub fn set(&mut self, i: usize, kind: StepKind) {
        if i >= 64 {
            return;
        }
        let bit = 1u64 << i;
        match kind {
            StepKind::Reset => self.reset |= bit,
            StepKind::BackStep => self.backstep |= bit,
            StepKind::Jump | StepKind::AbovePackage => self.jump |= bit,
            StepKind::Ambiguous => self.ambiguous |= bit,
            _ => {}
        }
    }

    /// The mark of channel `i`, if any.
    #[inline]
    pub fn kind(&self, i: usize) -> Option<StepKind> {
        let bit = 1u64.checked_shl(i as u32).unwrap_or(0);
        if self.reset & bit != 0 {
            Some(StepKind::Reset)
        } else if self.backstep & bit != 0 {
            Some(StepKind::BackStep)
        } else if self.jump & bit != 0 {
            Some(StepKind::Jump)
        } else if self.ambiguous & bit != 0 {
            Some(StepKind::Ambiguous)
        } else {
            None
        }
    }

    /// Both samples' marks (a merged sample carries what either had).
    #[inline]
    pub fn or(self, o: Marks) -> Marks {
        Marks {
            reset: self.reset | o.reset,
            backstep: self.backstep | o.backstep,
            jump: self.jump | o.jump,
            ambiguous: self.ambiguous | o.ambiguous,
        }
    }

    /// Whether no channel is marked.
    #[inline]
    pub fn is_empty(&self) -> bool {
        (self.reset | self.backstep | self.jump | self.ambiguous) == 0
    }
}

/// One reading's outcome: the steps counted and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Steps counted for the interval ending at this reading.
    pub steps: u64,
    /// What happened.
    pub kind: StepKind,
    /// The previous raw reading (equal to the new one for the first).
    pub from: u64,
    /// The raw reading.
    pub to: u64,
    /// The plausible bound for the interval, in steps.
    pub bound: u64,
}

/// Accumulates one counter: integer steps, corrected for wraps, guarded against resets
/// and glitches.
#[derive(Debug, Clone)]
pub struct Counter {
    wrap: Wrap,
    unit: EnergyUnit,
    plausible: Plausible,
    last: Option<(u64, u64)>,
    total: u128,
    wraps: u64,
    anomalies: u64,
    /// Of `anomalies`, the ambiguous decreases (counted as wraps).
    ambiguous: u64,
    /// Time covered by intervals whose energy was not (fully) counted.
    lost_ns: u64,
    /// Steps counted on ambiguous decreases beyond what a restart would have left:
    /// how far the count may be above the truth.
    ambiguity: u128,
    /// Steps of the last interval held back from the total until the next reading
    /// tells whether they were a read skew or a jump ([`Counter::withhold`]).
    withheld: u64,
    /// Readings after the first, and how many of them moved the counter.
    intervals: u64,
    changes: u64,
    /// The longest time the counter stood still between readings (from the last
    /// reading that moved it): a lower bound on its update interval when it is read
    /// faster than it updates.
    still_max_ns: u64,
    last_move_ns: u64,
    /// Steps and nanoseconds of the last interval counted normally ((0, 0): none
    /// yet): what a wrap's advance is expected to be near.
    last_counted: (u64, u64),
    /// GCD of the non-zero advances: the counter's real quantum (powercap reports µJ of
    /// a counter that may step in whole joules, as psys does on Sapphire Rapids).
    gcd: u64,
    /// Whether two different advances were seen: equal advances (a constant power
    /// read on the update grid) say nothing about the quantum.
    distinct: bool,
}

impl Counter {
    /// A counter that wraps at `wrap`, counts `unit` per step, and whose domain draws
    /// at most `plausible`.
    pub fn new(wrap: Wrap, unit: EnergyUnit, plausible: Plausible) -> Self {
        Counter {
            wrap,
            unit,
            plausible,
            last: None,
            total: 0,
            wraps: 0,
            anomalies: 0,
            ambiguous: 0,
            lost_ns: 0,
            ambiguity: 0,
            withheld: 0,
            intervals: 0,
            changes: 0,
            still_max_ns: 0,
            last_move_ns: 0,
            last_counted: (0, 0),
            gcd: 0,
            distinct: false,
        }
    }

    /// Feeds a raw reading taken at `t_ns` (CLOCK_MONOTONIC) and returns what was
    /// counted for the interval since the previous reading. Allocates nothing.
    #[inline]
    pub fn update(&mut self, raw: u64, t_ns: u64) -> Result<Step, OutOfRange> {
        if !self.wrap.admits(raw) {
            return Err(OutOfRange {
                value: raw,
                modulus: self.wrap.steps().min(u64::MAX as u128) as u64,
            });
        }
        let Some((old, t_old)) = self.last else {
            self.last = Some((raw, t_ns));
            self.last_move_ns = t_ns;
            return Ok(Step {
                steps: 0,
                kind: StepKind::First,
                from: raw,
                to: raw,
                bound: 0,
            });
        };
        let dt = t_ns.saturating_sub(t_old);
        let bound = self.plausible.steps(self.unit, dt);
        // The bounds a decrease needs are computed only on a decrease.
        let judge = Judge {
            plausible: self.plausible,
            unit: self.unit,
            dt,
            last: self.last_counted,
        };
        let (steps, kind) = classify(self.wrap, old, raw, bound, &judge);
        if dt > 0 && matches!(kind, StepKind::Forward | StepKind::Wrap) {
            self.last_counted = (steps, dt);
        }
        self.last = Some((raw, t_ns));
        self.intervals += 1;
        match kind {
            StepKind::Wrap => self.wraps += 1,
            // Counted as the wrap it may be; a restart would have left `raw`.
            StepKind::Ambiguous => {
                self.anomalies += 1;
                self.ambiguous += 1;
                self.ambiguity += steps.saturating_sub(raw) as u128;
            }
            k if k.is_anomaly() => {
                self.anomalies += 1;
                self.lost_ns += dt;
            }
            _ => {}
        }
        if steps == 0 && kind == StepKind::Forward {
            self.still_max_ns = self
                .still_max_ns
                .max(t_ns.saturating_sub(self.last_move_ns));
        } else {
            self.last_move_ns = t_ns;
        }
        if steps != 0 && !kind.is_anomaly() {
            self.changes += 1;
            if self.gcd == 0 {
                self.gcd = steps;
            } else if steps != self.gcd {
                self.distinct = true;
                // Cheap on the hot path: once small, the GCD divides almost every step.
                if steps % self.gcd != 0 {
                    self.gcd = gcd(self.gcd, steps);
                }
            }
        }
        self.total += steps as u128;
        Ok(Step {
            steps,
            kind,
            from: old,
            to: raw,
            bound,
        })
    }

    /// Steps accumulated since the first reading.
    pub fn total_steps(&self) -> u128 {
        self.total
    }

    /// Energy accumulated since the first reading.
    pub fn total(&self) -> Joules {
        self.unit.to_joules(self.total)
    }

    /// Converts a number of steps of this counter to joules.
    pub fn joules(&self, steps: u64) -> Joules {
        self.unit.to_joules(steps as u128)
    }

    /// How many times the counter wrapped so far (corrected).
    pub fn wraps(&self) -> u64 {
        self.wraps
    }

    /// Resets, backward steps and jumps seen so far.
    pub fn anomalies(&self) -> u64 {
        self.anomalies
    }

    /// Of [`Counter::anomalies`], the decreases that a wrap and a restart explained
    /// equally well ([`StepKind::Ambiguous`]): counted as wraps, so no energy was
    /// dropped for them, unlike a reset, a step back or a jump.
    pub fn ambiguous(&self) -> u64 {
        self.ambiguous
    }

    /// How much the count may exceed the truth through ambiguous decreases (each
    /// counted as a wrap; a restart would have left less).
    pub fn ambiguity(&self) -> Joules {
        self.unit.to_joules(self.ambiguity)
    }

    /// Holds back up to `steps` of the last interval's count from the total (a
    /// check against another counter failed, and only the next reading can tell a
    /// read skew from a jump); returns the steps held. They are given back or
    /// dropped by [`Counter::settle`].
    pub fn withhold(&mut self, steps: u64) -> u64 {
        let steps = (steps as u128).min(self.total) as u64;
        self.total -= steps as u128;
        self.withheld = self.withheld.saturating_add(steps);
        steps
    }

    /// Settles what [`Counter::withhold`] held back: `release` steps of it return
    /// to the total, the rest is dropped as an anomaly covering `dt_ns` (the
    /// interval it was counted in). Returns the steps dropped.
    pub fn settle(&mut self, release: u64, dt_ns: u64) -> u64 {
        let release = release.min(self.withheld);
        let dropped = self.withheld - release;
        self.total += release as u128;
        self.withheld = 0;
        if dropped > 0 {
            self.anomalies += 1;
            self.lost_ns += dt_ns;
        }
        dropped
    }

    /// Steps held back and not yet settled: the total may be short by this much.
    pub fn withheld(&self) -> Joules {
        self.unit.to_joules(self.withheld as u128)
    }

    /// Time covered by intervals whose energy was not (fully) counted.
    pub fn lost(&self) -> Duration {
        Duration::from_nanos(self.lost_ns)
    }

    /// Intervals read (readings after the first), and how many of them moved.
    pub fn intervals(&self) -> (u64, u64) {
        (self.intervals, self.changes)
    }

    /// The longest time the counter stood still across readings.
    pub fn longest_still(&self) -> Duration {
        Duration::from_nanos(self.still_max_ns)
    }

    /// The energy of the counter's smallest step as observed: the GCD of its advances
    /// once two different advances were seen, else its unit.
    pub fn quantum(&self) -> Joules {
        if self.distinct && self.gcd > 1 {
            self.joules(self.gcd)
        } else {
            self.unit.to_joules(1)
        }
    }

    /// The counter's wrap.
    pub fn wrap(&self) -> Wrap {
        self.wrap
    }

    /// The counter's unit.
    pub fn unit(&self) -> EnergyUnit {
        self.unit
    }

    /// The domain's plausible bound.
    pub fn plausible(&self) -> Plausible {
        self.plausible
    }
}

/// What a decrease is judged against, computed only when one happens (the forward
/// path, every reading, needs the bound alone).
struct Judge {
    plausible: Plausible,
    unit: EnergyUnit,
    dt: u64,
    /// Steps and nanoseconds of the last interval counted normally.
    last: (u64, u64),
}

impl Judge {
    /// The plausible energy since a restart within the interval, in steps.
    #[inline]
    fn reset(&self) -> u64 {
        self.plausible.reset_steps(self.unit, self.dt)
    }

    /// What the last interval's power predicts for this one, doubled, plus 1 ms at
    /// the bound (`None` before any interval: nothing is predicted).
    #[inline]
    fn expected(&self) -> Option<u64> {
        let (steps, ns) = self.last;
        if ns == 0 {
            return None;
        }
        let e = 2.0 * steps as f64 * self.dt as f64 / ns as f64
            + self
                .plausible
                .steps_with(self.unit, 1_000_000, Duration::ZERO) as f64;
        Some(if e >= u64::MAX as f64 {
            u64::MAX
        } else {
            e as u64
        })
    }
}

/// What `old -> new` means for a counter with `wrap`, given the plausible advance
/// `bound` (steps) and what a decrease is judged against, and how many steps to
/// count.
#[inline]
fn classify(wrap: Wrap, old: u64, new: u64, bound: u64, judge: &Judge) -> (u64, StepKind) {
    match wrap {
        Wrap::Modulus(m) => {
            if new >= old {
                let d = new - old;
                if d <= bound {
                    (d, StepKind::Forward)
                } else {
                    (0, StepKind::Jump)
                }
            } else if m - old + new <= bound {
                // A restart from 0 would look the same when the new reading is
                // itself plausible since a restart and the whole range is small
                // against the wrap's bound (a reading near the top is then little
                // sign of a wrap: a restart lands there a quarter of the time or
                // more), unless the advance is what the last interval's power
                // predicts.
                let advance = m - old + new;
                let kind = if m <= bound.saturating_mul(4)
                    && new <= judge.reset()
                    && judge.expected().is_none_or(|e| advance > e)
                {
                    StepKind::Ambiguous
                } else {
                    StepKind::Wrap
                };
                (advance, kind)
            } else if new <= judge.reset() {
                // Restarted from 0: the reading is the energy since the restart.
                (new, StepKind::Reset)
            } else {
                (0, StepKind::BackStep)
            }
        }
        Wrap::Perf { hw_bits } => {
            // Forward, across the count's own 2^64 wrap if need be.
            let d = new.wrapping_sub(old);
            if d <= bound {
                let kind = if new < old {
                    StepKind::Wrap
                } else {
                    StepKind::Forward
                };
                return (d, kind);
            }
            if (d as i64) > 0 {
                return (0, StepKind::Jump);
            }
            // The count is a signed sum of the kernel's deltas: it fell, modulo 2^64.
            let fall = old.wrapping_sub(new);
            let hw: u128 = match hw_bits {
                Some(b) => 1u128 << b,
                // The smallest hardware wrap that explains the fall, of at least 2^32
                // steps of 2^-16 J: no part counts in finer units (ESU ≤ 16), so a
                // fall of a few joules is never taken for a wrap of a tiny counter.
                None => (fall as u128 + 1)
                    .next_power_of_two()
                    .max(1 << ASSUMED_HW_BITS),
            };
            let advance = hw.saturating_sub(fall as u128);
            if fall as u128 <= hw && advance <= bound as u128 {
                (advance as u64, StepKind::Wrap)
            } else {
                // perf's count is energy since the event was opened: after a reset of
                // the hardware counter it cannot tell the energy since the restart.
                (0, StepKind::BackStep)
            }
        }
    }
}

#[inline]
fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Whether two wraps could hide in one sampling interval: true when, at `max_power`,
/// the counter can turn once or more during `period`, so the corrected delta (which
/// assumes at most one wrap) could be short by a whole range.
pub fn period_may_hide_wraps(
    wrap: Wrap,
    unit: EnergyUnit,
    max_power: Watts,
    period: Duration,
) -> bool {
    max_power.over(period).0 >= wrap.range(unit).0
}

#[cfg(test)]
mod tests;
