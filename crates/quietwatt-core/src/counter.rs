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

    /// The bound for an interval of `dt_ns`, in steps of `unit` (saturating).
    #[inline]
    fn steps(self, unit: EnergyUnit, dt_ns: u64) -> u64 {
        let secs = dt_ns as f64 * 1e-9 + self.slack.as_secs_f64();
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
}

impl StepKind {
    /// Whether the interval's energy is not (fully) known: a reset, a step back or a jump.
    pub fn is_anomaly(self) -> bool {
        matches!(self, StepKind::Reset | StepKind::BackStep | StepKind::Jump)
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
            StepKind::Jump => self.jump |= bit,
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
        }
    }

    /// Whether no channel is marked.
    #[inline]
    pub fn is_empty(&self) -> bool {
        (self.reset | self.backstep | self.jump) == 0
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
    /// Time covered by intervals whose energy was not (fully) counted.
    lost_ns: u64,
    /// Readings after the first, and how many of them moved the counter.
    intervals: u64,
    changes: u64,
    /// The longest time the counter stood still between readings (from the last
    /// reading that moved it): a lower bound on its update interval when it is read
    /// faster than it updates.
    still_max_ns: u64,
    last_move_ns: u64,
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
            lost_ns: 0,
            intervals: 0,
            changes: 0,
            still_max_ns: 0,
            last_move_ns: 0,
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
        let (steps, kind) = classify(self.wrap, old, raw, bound);
        self.last = Some((raw, t_ns));
        self.intervals += 1;
        match kind {
            StepKind::Wrap => self.wraps += 1,
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

/// What `old -> new` means for a counter with `wrap`, given the plausible advance
/// `bound` (steps), and how many steps to count.
#[inline]
fn classify(wrap: Wrap, old: u64, new: u64, bound: u64) -> (u64, StepKind) {
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
                (m - old + new, StepKind::Wrap)
            } else if new <= bound {
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    /// 500 W with the default slack: the bound the defaults give a package.
    fn pkg() -> Plausible {
        Plausible::at(Watts(500.0))
    }

    /// Feeds `(raw, t_ns)` pairs and returns the kinds after the first.
    fn feed(c: &mut Counter, reads: &[(u64, u64)]) -> Vec<StepKind> {
        reads
            .iter()
            .map(|&(r, t)| c.update(r, t).unwrap().kind)
            .skip(1)
            .collect()
    }

    #[test]
    fn wrap_is_corrected_with_the_mechanism_modulus() {
        // MSR: 32-bit field.
        let mut c = Counter::new(Wrap::Modulus(1 << 32), EnergyUnit::PowerOfTwo(16), pkg());
        c.update(u32::MAX as u64 - 9, 0).unwrap();
        let s = c.update(5, MS).unwrap();
        assert_eq!((s.steps, s.kind), (15, StepKind::Wrap));
        assert_eq!(c.wraps(), 1);
        // powercap: max_energy_range_uj + 1.
        let mut p = Counter::new(Wrap::Modulus(1_000_001), EnergyUnit::Microjoule, pkg());
        p.update(999_990, 0).unwrap();
        assert_eq!(p.update(10, MS).unwrap().steps, 21);
        // perf: its own 2^64.
        let mut q = Counter::new(Wrap::PERF, EnergyUnit::Scale(2f64.powi(-32)), pkg());
        q.update(u64::MAX - 1, 0).unwrap();
        assert_eq!(q.update(3, MS).unwrap().steps, 5);
    }

    #[test]
    fn a_value_outside_the_range_is_an_error_not_a_zero() {
        let mut p = Counter::new(Wrap::Modulus(1000), EnergyUnit::Microjoule, pkg());
        p.update(10, 0).unwrap();
        assert_eq!(
            p.update(1000, MS),
            Err(OutOfRange {
                value: 1000,
                modulus: 1000
            })
        );
        assert_eq!(p.total_steps(), 0);
    }

    #[test]
    fn long_runs_accumulate_without_float_drift() {
        // A million readings of a 2^-16 J counter wrapping every 2^20 steps (16 J).
        let m = 1u64 << 20;
        let mut c = Counter::new(Wrap::Modulus(m), EnergyUnit::PowerOfTwo(16), pkg());
        let step = 12_345u64;
        let mut raw = 0u64;
        c.update(raw, 0).unwrap();
        for i in 1..=1_000_000u64 {
            raw = (raw + step) % m;
            c.update(raw, i * MS).unwrap();
        }
        let exact = 1_000_000u128 * step as u128;
        assert_eq!(c.total_steps(), exact);
        assert_eq!(c.total().0, exact as f64 / 65536.0);
        assert!(c.wraps() > 10_000);
        assert_eq!(c.anomalies(), 0);
    }

    #[test]
    fn a_powercap_step_back_of_half_a_joule_is_a_glitch_not_a_wrap() {
        // ESU 14 powercap: a 262 kJ range. Before: a 0.5 J step back was taken as a wrap
        // and added 262144.7 J (`package 262145.228851 J`).
        let range = 262_143_328_851u64;
        let mut c = Counter::new(Wrap::Modulus(range), EnergyUnit::Microjoule, pkg());
        let k = feed(
            &mut c,
            &[
                (100_000_000, 0),
                (100_100_000, 5 * MS),
                (99_600_000, 10 * MS),
                (99_700_000, 15 * MS),
            ],
        );
        assert_eq!(
            k,
            [StepKind::Forward, StepKind::BackStep, StepKind::Forward]
        );
        // 0.1 J + nothing for the glitch + 0.1 J after the rebase.
        assert_eq!(c.total_steps(), 200_000);
        assert_eq!(c.anomalies(), 1);
        assert_eq!(c.lost(), Duration::from_millis(5));
    }

    #[test]
    fn a_restart_from_zero_counts_the_energy_since_the_restart() {
        let range = 65_532_610_988u64;
        let mut c = Counter::new(Wrap::Modulus(range), EnergyUnit::Microjoule, pkg());
        let k = feed(
            &mut c,
            &[
                (40_000_000_000, 0),
                (40_000_100_000, 5 * MS),
                (30_000, 10 * MS),
            ],
        );
        assert_eq!(k, [StepKind::Forward, StepKind::Reset]);
        assert_eq!(c.total_steps(), 130_000);
    }

    #[test]
    fn an_implausible_forward_jump_counts_nothing() {
        let mut c = Counter::new(Wrap::Modulus(1 << 32), EnergyUnit::PowerOfTwo(16), pkg());
        // 10 kJ in 5 ms is 2 MW.
        let jump = 10_000u64 << 16;
        let k = feed(&mut c, &[(1000, 0), (2000, 5 * MS), (2000 + jump, 10 * MS)]);
        assert_eq!(k, [StepKind::Forward, StepKind::Jump]);
        assert_eq!(c.total_steps(), 1000);
    }

    #[test]
    fn a_long_gap_still_admits_a_real_wrap() {
        // 2 s stopped at 20 W: 40 J across a wrap of a 65.5 kJ counter.
        let range = 65_532_610_988u64;
        let mut c = Counter::new(Wrap::Modulus(range), EnergyUnit::Microjoule, pkg());
        c.update(range - 10_000_000, 0).unwrap();
        let s = c.update(30_000_000, 2_000 * MS).unwrap();
        assert_eq!((s.kind, s.steps), (StepKind::Wrap, 40_000_000));
    }

    /// perf counts in 2^-32 J; one hardware wrap at 2^-16 J units is 2^48 counts.
    const SCALE: EnergyUnit = EnergyUnit::Scale(1.0 / 4_294_967_296.0);

    /// The count the TPMI PMU (`intel_rapl_common.c`, `rapl_event_update`) accumulates:
    /// `count += (s64)(new_raw - prev_raw) * scale`, 32-bit raw values, no wrap fix.
    fn tpmi_counts(raws: &[u64], scale: u64) -> Vec<u64> {
        let mut count = 0u64;
        let mut out = vec![0];
        for w in raws.windows(2) {
            let delta = (w[1] as i64).wrapping_sub(w[0] as i64);
            count = count.wrapping_add(delta.wrapping_mul(scale as i64) as u64);
            out.push(count);
        }
        out
    }

    /// The count `rapl.c` accumulates: the 32-bit difference sign-extended, shifted to
    /// 2^-32 J (`delta = (new << 32) - (prev << 32); delta >>= 32; sdelta = delta <<
    /// (32 - hw_unit)`).
    fn rapl_c_counts(raws: &[u64], esu: u32) -> Vec<u64> {
        let mut count = 0u64;
        let mut out = vec![0];
        for w in raws.windows(2) {
            let delta = ((w[1] << 32) as i64).wrapping_sub((w[0] << 32) as i64) >> 32;
            count = count.wrapping_add((delta << (32 - esu)) as u64);
            out.push(count);
        }
        out
    }

    #[test]
    fn a_tpmi_count_that_falls_at_a_hardware_wrap_is_one_wrap() {
        // 32-bit raw register at 2^-16 J, 20 W, read every 100 ms, wrapping once.
        let per_read = 20.0 * 0.1 * 65536.0;
        let start = (1u64 << 32) - 3 * per_read as u64;
        let raws: Vec<u64> = (0..8u64)
            .map(|i| (start + i * per_read as u64) & 0xFFFF_FFFF)
            .collect();
        let counts = tpmi_counts(&raws, 1 << 16);
        // The kernel's count is a signed sum: it falls at the wrap.
        assert!(counts.windows(2).any(|w| (w[1] as i64) < (w[0] as i64)));
        for hw_bits in [Some(48), None] {
            let mut c = Counter::new(Wrap::Perf { hw_bits }, SCALE, pkg());
            for (i, &n) in counts.iter().enumerate() {
                c.update(n, i as u64 * 100 * MS).unwrap();
            }
            // Truth: 7 reads × 2 J; before, the fall read as a 2^64 wrap: +4.29 GJ.
            assert_eq!(c.total(), Joules(14.0), "hw_bits {hw_bits:?}");
            assert_eq!((c.wraps(), c.anomalies()), (1, 0));
        }
    }

    #[test]
    fn a_rapl_c_update_of_more_than_2_31_raw_steps_is_corrected_when_the_unit_is_known() {
        // 40 kJ between two reads 100 s apart (400 W) at 2^-16 J: 2.6e9 raw steps >
        // 2^31, which rapl.c adds as a negative amount.
        let raws = [1000u64, 1000 + 40_000 * 65536];
        let counts = rapl_c_counts(&raws, 16);
        assert!(
            counts[1] > counts[0] && counts[1] > 1 << 63,
            "a fall: {counts:?}"
        );
        let mut c = Counter::new(Wrap::Perf { hw_bits: Some(48) }, SCALE, pkg());
        c.update(counts[0], 0).unwrap();
        let s = c.update(counts[1], 100_000 * MS).unwrap();
        assert_eq!(s.kind, StepKind::Wrap);
        assert_eq!(c.total(), Joules(40_000.0));
    }

    #[test]
    fn a_perf_fall_that_is_no_hardware_wrap_adds_nothing() {
        // A fall of 3 J in 10 ms: no 32-bit wrap of any unit explains it at 500 W.
        let mut c = Counter::new(Wrap::PERF, SCALE, pkg());
        let three = 3u64 << 32;
        c.update(100 << 32, 0).unwrap();
        let s = c.update((100 << 32) - three, 10 * MS).unwrap();
        assert_eq!((s.kind, s.steps), (StepKind::BackStep, 0));
    }

    #[test]
    fn the_quantum_of_a_counter_stepping_in_whole_joules_is_seen() {
        // powercap µJ of a psys that counts whole joules (Sapphire Rapids).
        let mut c = Counter::new(Wrap::Modulus(1 << 40), EnergyUnit::Microjoule, pkg());
        for (i, j) in [0u64, 2, 3, 3, 5, 7, 8].iter().enumerate() {
            c.update(j * 1_000_000, i as u64 * 100 * MS).unwrap();
        }
        assert_eq!(c.quantum(), Joules(1.0));
        assert_eq!(c.intervals(), (6, 5));
    }

    #[test]
    fn wrap_warning_triggers_when_one_period_can_hold_a_full_range() {
        let wrap = Wrap::Modulus(65_532_610_988); // max_energy_range_uj + 1 at ESU 16
        let unit = EnergyUnit::Microjoule;
        // 65.5 kJ at 500 W wraps in ~131 s.
        assert!(!period_may_hide_wraps(
            wrap,
            unit,
            Watts(500.0),
            Duration::from_secs(100)
        ));
        assert!(period_may_hide_wraps(
            wrap,
            unit,
            Watts(500.0),
            Duration::from_secs(140)
        ));
        let p = wrap.period_at(unit, Watts(500.0)).as_secs_f64();
        assert!((p - 131.07).abs() < 0.01, "{p}");
        // perf: one hardware wrap, not 2^64 counts (which would be 248 days at 200 W).
        let perf = Wrap::PERF.period_at(SCALE, Watts(500.0)).as_secs_f64();
        assert!((perf - 131.07).abs() < 0.01, "{perf}");
    }

    proptest! {
        /// Plausible advances with any number of single wraps between reads sum exactly.
        #[test]
        fn plausible_advances_sum_exactly_across_wraps(
            modulus in 1_000u64..(1 << 40),
            start in any::<u64>(),
            steps in prop::collection::vec((0u64..200, 1u64..2_000), 1..300),
        ) {
            // 100 W over intervals of 1..2000 ms, in µJ: at most one wrap per read
            // because each advance is kept below the modulus.
            let mut c = Counter::new(Wrap::Modulus(modulus), EnergyUnit::Microjoule, pkg());
            let mut raw = start % modulus;
            let mut t = 0u64;
            let mut truth = 0u128;
            c.update(raw, t).unwrap();
            for (watts, ms) in steps {
                let adv = (watts * ms * 1000).min(modulus - 1);
                raw = ((raw as u128 + adv as u128) % modulus as u128) as u64;
                t += ms * MS;
                truth += adv as u128;
                c.update(raw, t).unwrap();
            }
            prop_assert_eq!(c.total_steps(), truth);
            prop_assert_eq!(c.anomalies(), 0);
        }

        /// Whatever the readings (glitches, resets, garbage within range), no interval
        /// adds more than the plausible bound.
        #[test]
        fn no_interval_ever_adds_more_than_the_plausible_bound(
            modulus in 1_000u64..u64::MAX,
            reads in prop::collection::vec((any::<u64>(), 0u64..5_000), 2..200),
            perf in any::<bool>(),
        ) {
            let wrap = if perf { Wrap::PERF } else { Wrap::Modulus(modulus) };
            let plausible = pkg();
            let mut c = Counter::new(wrap, EnergyUnit::Microjoule, plausible);
            let mut t = 0u64;
            let mut bound_sum = 0u128;
            for (i, (raw, ms)) in reads.into_iter().enumerate() {
                let raw = if perf { raw } else { raw % modulus };
                t += ms * MS;
                let s = c.update(raw, t).unwrap();
                prop_assert!(s.steps <= s.bound || i == 0);
                // The bound itself is what the domain can draw over the interval.
                let max = 500.0 * (ms as f64 / 1e3 + Plausible::SLACK.as_secs_f64()) * 1e6;
                prop_assert!(s.steps as f64 <= max + 1.0);
                bound_sum += s.bound as u128;
            }
            prop_assert!(c.total_steps() <= bound_sum);
        }
    }
}
