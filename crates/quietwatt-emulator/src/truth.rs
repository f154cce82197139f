//! The ground truth: the exact energy each domain has drawn, the raw counts served
//! from it, and the record of what was served.
//!
//! Energy is integrated in integers so that nothing drifts: power in µW, time in
//! ns, a trace's scale in parts per million, energy in femtojoules (µW × ns).
//! A counter's raw count at emulated time `t` is `floor(E(t_q) / unit)`, where
//! `t_q` is `t` rounded down to the update interval since the mount; the served
//! value is that count modulo 2^counter_bits. Nothing is stored per read, so two
//! reads at the same `t_q` always agree and no read can be torn.
//!
//! AMD's per-core counters ("lanes") each draw an even share of the core power;
//! every other counter has a single lane 0.

use crate::config::EmulatorConfig;
use crate::cpufreq::{self, Attr, Limit, Policies, WriteError};
use crate::duration;
use crate::follow::Follower;
use crate::units::{self, Unit};
use quietwatt_core::{Domain, Joules};
use serde::Serialize;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Femtojoules per joule.
const FJ_PER_J: u128 = 1_000_000_000_000_000;
/// The trace scale's fixed point: parts per million.
const PPM: u128 = 1_000_000;

/// How a counter was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
// Exhaustive on purpose: tests match it so that a newly served mechanism is covered.
pub enum Mechanism {
    /// `energy_uj` of a powercap zone (`intel-rapl` or `intel-rapl-mmio`).
    Powercap,
    /// An energy register through `/dev/cpu/N/msr`.
    Msr,
}

impl Mechanism {
    /// Both mechanisms.
    pub const ALL: [Mechanism; 2] = [Mechanism::Powercap, Mechanism::Msr];
}

/// What was served of one domain's counter between its first and last read.
///
/// `last_j - first_j` ([`Served::energy`]) is the energy a correct reader must
/// report for the interval from its first to its last read, wraps included.
///
/// The counter values here are the counter *as it measured*: unwrapped, and with
/// steps (`reset`, `backstep`, `jump` faults) taken out, so `energy()` is the
/// energy the counter measured between the reads whatever steps happened; it
/// equals what was drawn over the counter's update steps between the reads (a
/// `freeze` is not taken out: a frozen counter measured nothing, and
/// BIOS-disabled psys measures 0). A step cannot be told apart exactly from the
/// reads either side of it, so a reader that handles every step correctly (a
/// reset as a restart, a backstep or an implausible jump as a glitch) may lose
/// at most the energy between those two reads: [`Served::step_span_j`], summed
/// over the steps. Such a reader reports an energy within
/// [`Served::correct_range`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Served {
    /// The unwrapped counter at the first read, in joules, steps taken out.
    pub first_j: Joules,
    /// The unwrapped counter at the last read, in joules, steps taken out.
    pub last_j: Joules,
    /// When the first read happened, since the mount.
    #[serde(rename = "first_t_s", with = "duration::secs")]
    pub first_t: Duration,
    /// When the last read happened, since the mount.
    #[serde(rename = "last_t_s", with = "duration::secs")]
    pub last_t: Duration,
    /// How many reads served a value.
    pub reads: u64,
    /// The unwrapped counter at the second read (the first when there was one read):
    /// a mechanism that probes each register once while opening (MSR) starts
    /// counting there.
    pub second_j: Joules,
    /// When the second read happened, since the mount.
    #[serde(rename = "second_t_s", with = "duration::secs")]
    pub second_t: Duration,
    /// How many steps (reset, backstep, jump) took effect after the first read and
    /// at or before the last (the most over lanes and mechanisms).
    pub steps: u32,
    /// For each of those steps, the energy (as `energy()` counts it) between the
    /// last read before the step and the first read at or after it, added up (over
    /// lanes and mechanisms too): the most a reader handling every step correctly
    /// may lose. Steps between the same two reads count that interval once.
    pub step_span_j: Joules,
}

impl Served {
    /// The energy served between the first and the last read.
    pub fn energy(&self) -> Joules {
        Joules(self.last_j.0 - self.first_j.0)
    }

    /// The energy served between the second and the last read: what a reader that
    /// probed the counter once before its first counted read measured.
    pub fn energy_after_probe(&self) -> Joules {
        Joules(self.last_j.0 - self.second_j.0)
    }

    /// The energies a reader that handles every step correctly may report for its
    /// first to last read: from `energy() - step_span_j` to `energy()` (both when
    /// no step happened in between). A reader that counts a backstep as a wrap or
    /// a jump as energy lands far outside.
    pub fn correct_range(&self) -> (Joules, Joules) {
        let e = self.energy().0;
        (Joules(e - self.step_span_j.0), Joules(e))
    }
}

/// One counter: a (socket, domain, lane) with its power and units.
#[derive(Debug, Clone)]
pub(crate) struct Counter {
    /// The socket (psys: the psys master).
    pub socket: u32,
    /// The domain.
    pub domain: Domain,
    /// The core within the package for AMD per-core counters, else 0.
    pub lane: u32,
    /// Untraced power in µW.
    pub power_uw: u64,
    /// What one raw count is.
    pub unit: Unit,
    /// powercap's unit for this counter, nJ.
    pub powercap_unit_nj: u64,
    /// The counter reads 0 for good (BIOS-disabled psys); its truth still grows.
    pub disabled: bool,
}

/// The power scale over emulated time, as an integral.
#[derive(Debug, Clone)]
struct Scale {
    /// (start ns, scale ppm, integral of scale up to start in ppm·ns), by start.
    segments: Vec<(u64, u128, u128)>,
}

impl Scale {
    fn new(config: &EmulatorConfig) -> Scale {
        let mut segments = vec![(0u64, PPM, 0u128)];
        let points = config.power.trace.iter().flat_map(|t| &t.points);
        for p in points {
            let start = (p.time_s * 1e9).round() as u64;
            let ppm = (p.scale * 1e6).round() as u128;
            let Some(last) = segments.last_mut() else {
                continue;
            };
            if start <= last.0 {
                // Only a point at time 0 lands here: it replaces the implicit scale 1.
                last.1 = ppm;
            } else {
                let cum = last.2 + last.1 * u128::from(start - last.0);
                segments.push((start, ppm, cum));
            }
        }
        Scale { segments }
    }

    /// ∫_0^t scale(τ) dτ, in ppm·ns.
    fn integral(&self, t_ns: u64) -> u128 {
        let i = self.segments.partition_point(|&(s, _, _)| s <= t_ns);
        let (start, ppm, cum) = self.segments[i.saturating_sub(1)];
        cum + ppm * u128::from(t_ns - start)
    }
}

/// The exact energy of every counter over time.
#[derive(Debug)]
pub(crate) struct GroundTruth {
    counters: Vec<Counter>,
    index: HashMap<(u32, Domain, u32), usize>,
    scale: Scale,
    bits: u8,
    start: Instant,
    offset_ns: u64,
    step_ns: u64,
    /// The load-following package power, when configured.
    follow: Option<Follower>,
    /// The emulated CPU frequencies, when configured.
    cpufreq: Option<Policies>,
}

impl GroundTruth {
    /// The counters of a validated configuration; time 0 is now.
    pub fn new(config: &EmulatorConfig) -> GroundTruth {
        let esu = config.esu();
        let mut counters = Vec::new();
        for (socket, domain) in config.counters() {
            let watts = config.watts(socket, domain).unwrap_or(0.0);
            let unit = units::hardware_unit(config.vendor, esu, domain);
            let powercap_unit_nj = units::powercap_unit_nj(config.vendor, esu, domain);
            let lanes = if config.vendor.is_amd() && domain == Domain::Core {
                config.cpus_per_socket.max(1)
            } else {
                1
            };
            let watts = match &config.power.follow {
                // The package's static part; the dynamic part comes from the Follower.
                Some(f) if domain == Domain::Package => f.idle_w,
                _ => watts,
            };
            let power_uw = (watts * 1e6 / f64::from(lanes)).round() as u64;
            for lane in 0..lanes {
                counters.push(Counter {
                    socket,
                    domain,
                    lane,
                    power_uw,
                    unit,
                    powercap_unit_nj,
                    disabled: domain == Domain::Psys && config.psys_disabled,
                });
            }
        }
        let index = counters
            .iter()
            .enumerate()
            .map(|(i, c)| ((c.socket, c.domain, c.lane), i))
            .collect();
        GroundTruth {
            counters,
            index,
            scale: Scale::new(config),
            bits: config.counter_bits,
            start: Instant::now(),
            offset_ns: nanos(config.start_offset),
            step_ns: nanos(config.update_interval).max(1),
            follow: config
                .power
                .follow
                .as_ref()
                .map(|f| Follower::new(f, config.sockets, config.cpus_per_socket)),
            cpufreq: config
                .cpufreq
                .as_ref()
                .map(|f| Policies::new(f, config.cpus())),
        }
    }

    /// The counter `i`.
    pub fn counter(&self, i: usize) -> &Counter {
        &self.counters[i]
    }

    /// The counter of (socket, domain, lane), if emulated.
    pub fn find(&self, socket: u32, domain: Domain, lane: u32) -> Option<usize> {
        self.index.get(&(socket, domain, lane)).copied()
    }

    /// The counters of (socket, domain): one, or one per core for AMD core.
    pub fn lanes(&self, socket: u32, domain: Domain) -> impl Iterator<Item = usize> + '_ {
        self.counters
            .iter()
            .enumerate()
            .filter(move |(_, c)| c.socket == socket && c.domain == domain)
            .map(|(i, _)| i)
    }

    /// Nanoseconds since the mount.
    pub fn now_ns(&self) -> u64 {
        nanos(self.start.elapsed())
    }

    /// The emulated time a counter shows when read at `read_ns` since the mount:
    /// quantized down to the update interval, plus the start offset.
    pub fn counter_time(&self, read_ns: u64) -> u64 {
        self.offset_ns + read_ns / self.step_ns * self.step_ns
    }

    /// The emulated time, unquantized, at `read_ns` since the mount.
    pub fn exact_time(&self, read_ns: u64) -> u64 {
        self.offset_ns + read_ns
    }

    /// Energy of counter `i` by emulated time `t_ns`, femtojoules.
    pub fn energy_fj(&self, i: usize, t_ns: u64) -> u128 {
        let c = &self.counters[i];
        let base = u128::from(c.power_uw).saturating_mul(self.scale.integral(t_ns)) / PPM;
        match &self.follow {
            Some(f) if c.domain == Domain::Package => {
                let at = t_ns.saturating_sub(self.offset_ns);
                base + self.with_khz(|khz| f.dynamic_fj(c.socket, at, khz))
            }
            _ => base,
        }
    }

    /// The busy CPU time of `socket` that the load-following model counted from the
    /// mount to now (`None` without the model).
    pub fn busy(&self, socket: u32) -> Option<Duration> {
        self.followed(socket).map(|(busy, _)| busy)
    }

    /// The busy CPU time of `socket` and the dynamic energy the load-following model
    /// counted from the mount to now, at one counter time (`None` without the model).
    pub fn followed(&self, socket: u32) -> Option<(Duration, Joules)> {
        let f = self.follow.as_ref()?;
        let at = self
            .counter_time(self.now_ns())
            .saturating_sub(self.offset_ns);
        let (busy, fj) =
            self.with_khz(|khz| (f.busy_ns(socket, at, khz), f.dynamic_fj(socket, at, khz)));
        Some((
            Duration::from_nanos(busy),
            Joules(fj as f64 / FJ_PER_J as f64),
        ))
    }

    /// Every emulated CPU's `scaling_cur_freq` now, kHz (empty without frequencies).
    pub fn current_khz(&self) -> Vec<u64> {
        self.with_khz(<[u64]>::to_vec)
    }

    /// Runs `f` on every CPU's current frequency in kHz (none without emulated
    /// frequencies), with no write in between.
    fn with_khz<R>(&self, f: impl FnOnce(&[u64]) -> R) -> R {
        match &self.cpufreq {
            Some(p) => p.with_current(f),
            None => f(&[]),
        }
    }

    /// The value of a `cpufreq` file of `cpu`, kHz (`None` without frequencies).
    pub fn cpufreq_value(&self, cpu: u32, attr: Attr) -> Option<u64> {
        self.cpufreq.as_ref()?.value(cpu, attr)
    }

    /// Writes `data` to `limit` of `cpu` (`scaling_min_freq`/`scaling_max_freq`).
    /// The load-following power is first brought up to now, as a counter read now
    /// would, so that the busy time until the write is charged at the old frequency.
    pub fn write_cpufreq(&self, cpu: u32, limit: Limit, data: &[u8]) -> Result<(), WriteError> {
        let p = self.cpufreq.as_ref().ok_or(WriteError::NoSuchCpu)?;
        let khz = cpufreq::parse_khz(data)?;
        let at = self
            .counter_time(self.now_ns())
            .saturating_sub(self.offset_ns);
        p.set(cpu, limit, khz, |current| {
            if let Some(f) = &self.follow {
                f.advance(at, current);
            }
        })
    }

    /// The unwrapped raw count of counter `i` at emulated time `t_ns`, as the
    /// hardware counts it (0 for good when disabled).
    pub fn raw(&self, i: usize, t_ns: u64) -> u64 {
        if self.counters[i].disabled {
            return 0;
        }
        let unit = self.counters[i].unit;
        let count = self.energy_fj(i, t_ns).saturating_mul(unit.den) / (unit.num * FJ_PER_J);
        u64::try_from(count).unwrap_or(u64::MAX)
    }

    /// The counter width.
    pub fn bits(&self) -> u8 {
        self.bits
    }

    /// A raw count reduced to the counter width, as the register holds it.
    pub fn wrap(&self, raw: u64) -> u64 {
        raw & ((1u64 << self.bits) - 1)
    }

    /// A signed count (a step can take it below 0) reduced to the counter width.
    pub fn wrap_signed(&self, raw: i128) -> u64 {
        u64::try_from(raw.rem_euclid(1i128 << self.bits)).unwrap_or(0)
    }

    /// `energy_uj` for a raw count of counter `i`.
    pub fn powercap_uj(&self, i: usize, raw: u64) -> u64 {
        units::powercap_uj(self.wrap(raw), self.counters[i].powercap_unit_nj)
    }

    /// `max_energy_range_uj` of counter `i`.
    pub fn max_energy_range_uj(&self, i: usize) -> u64 {
        units::max_energy_range_uj(self.bits, self.counters[i].powercap_unit_nj)
    }

    /// An unwrapped raw count of counter `i` in joules, as `mechanism` converts it.
    pub fn joules(&self, i: usize, raw: u64, mechanism: Option<Mechanism>) -> f64 {
        let c = &self.counters[i];
        match mechanism {
            Some(Mechanism::Powercap) => {
                (u128::from(raw) * u128::from(c.powercap_unit_nj) / 1000) as f64 / 1e6
            }
            _ => (u128::from(raw) * c.unit.num) as f64 / c.unit.den as f64,
        }
    }

    /// The exact energy (socket, domain) has drawn by now, all lanes.
    pub fn truth(&self, socket: u32, domain: Domain) -> Joules {
        let t = self.exact_time(self.now_ns());
        let fj: u128 = self
            .lanes(socket, domain)
            .map(|i| self.energy_fj(i, t))
            .sum();
        Joules(fj as f64 / FJ_PER_J as f64)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The first and last raw count served of one counter through one mechanism.
#[derive(Debug, Clone, Copy)]
struct Record {
    first_raw: u64,
    first_ns: u64,
    /// The second-earliest read (the first while there was only one).
    second_raw: u64,
    second_ns: u64,
    last_raw: u64,
    last_ns: u64,
    reads: u64,
    /// Steps that took effect between two reads in time order.
    steps: u32,
    /// The raw counts between the reads either side of those steps.
    step_span_raw: u64,
}

/// Every value served, per (mechanism, counter).
#[derive(Debug, Default)]
pub(crate) struct ServedLog {
    records: HashMap<(Mechanism, usize), Record>,
}

impl ServedLog {
    /// Notes that counter `i` served `raw` (unwrapped, steps taken out) through
    /// `mechanism` at `read_ns`; `steps_ns` are the times its steps take effect.
    pub fn record(
        &mut self,
        mechanism: Mechanism,
        i: usize,
        raw: u64,
        read_ns: u64,
        steps_ns: &[u64],
    ) {
        self.records
            .entry((mechanism, i))
            .and_modify(|r| {
                if read_ns >= r.last_ns {
                    // Steps since the previous read: this interval is what a
                    // reader handling them may lose.
                    let n = steps_ns
                        .iter()
                        .filter(|&&t| r.last_ns < t && t <= read_ns)
                        .count();
                    if n > 0 {
                        r.steps = r.steps.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
                        r.step_span_raw += raw.saturating_sub(r.last_raw);
                    }
                }
                if read_ns < r.first_ns {
                    (r.second_ns, r.second_raw) = (r.first_ns, r.first_raw);
                    r.first_ns = read_ns;
                    r.first_raw = raw;
                } else if r.reads == 1 || read_ns < r.second_ns {
                    (r.second_ns, r.second_raw) = (read_ns, raw);
                }
                if read_ns >= r.last_ns {
                    r.last_ns = read_ns;
                    r.last_raw = r.last_raw.max(raw);
                }
                r.reads += 1;
            })
            .or_insert(Record {
                first_raw: raw,
                first_ns: read_ns,
                second_raw: raw,
                second_ns: read_ns,
                last_raw: raw,
                last_ns: read_ns,
                reads: 1,
                steps: 0,
                step_span_raw: 0,
            });
    }

    /// Forgets everything served.
    pub fn reset(&mut self) {
        self.records.clear();
    }

    /// What (socket, domain) served through `mechanism` (`None`: any mechanism,
    /// counted in the hardware unit), all lanes added.
    pub fn served(
        &self,
        truth: &GroundTruth,
        mechanism: Option<Mechanism>,
        socket: u32,
        domain: Domain,
    ) -> Option<Served> {
        let mut out: Option<Served> = None;
        for i in truth.lanes(socket, domain) {
            let mut lane: Option<Record> = None;
            for m in Mechanism::ALL {
                if mechanism.is_some_and(|want| want != m) {
                    continue;
                }
                let Some(r) = self.records.get(&(m, i)) else {
                    continue;
                };
                lane = Some(match lane {
                    None => *r,
                    Some(l) => {
                        let (first_raw, first_ns) = if r.first_ns < l.first_ns {
                            (r.first_raw, r.first_ns)
                        } else {
                            (l.first_raw, l.first_ns)
                        };
                        let (last_raw, last_ns) = if r.last_ns > l.last_ns {
                            (r.last_raw, r.last_ns)
                        } else {
                            (l.last_raw, l.last_ns)
                        };
                        // The second-earliest of both records' two earliest reads (a
                        // record of one read has only its first).
                        let mut early: Vec<(u64, u64)> = [*r, l]
                            .iter()
                            .flat_map(|x| {
                                let second = (x.reads > 1).then_some((x.second_ns, x.second_raw));
                                std::iter::once((x.first_ns, x.first_raw)).chain(second)
                            })
                            .collect();
                        early.sort_unstable();
                        let (second_ns, second_raw) = early[1];
                        Record {
                            first_raw,
                            first_ns,
                            second_raw,
                            second_ns,
                            last_raw,
                            last_ns,
                            reads: l.reads + r.reads,
                            steps: l.steps.max(r.steps),
                            step_span_raw: l.step_span_raw + r.step_span_raw,
                        }
                    }
                });
            }
            let Some(l) = lane else { continue };
            let first_j = truth.joules(i, l.first_raw, mechanism);
            let last_j = truth.joules(i, l.last_raw, mechanism);
            let second_j = truth.joules(i, l.second_raw, mechanism);
            let span_j = truth.joules(i, l.step_span_raw, mechanism);
            let second_t = Duration::from_nanos(l.second_ns);
            let (first_t, last_t) = (
                Duration::from_nanos(l.first_ns),
                Duration::from_nanos(l.last_ns),
            );
            out = Some(match out {
                None => Served {
                    first_j: Joules(first_j),
                    last_j: Joules(last_j),
                    first_t,
                    last_t,
                    reads: l.reads,
                    second_j: Joules(second_j),
                    second_t,
                    steps: l.steps,
                    step_span_j: Joules(span_j),
                },
                Some(s) => Served {
                    first_j: Joules(s.first_j.0 + first_j),
                    last_j: Joules(s.last_j.0 + last_j),
                    first_t: s.first_t.min(first_t),
                    last_t: s.last_t.max(last_t),
                    reads: s.reads + l.reads,
                    second_j: Joules(s.second_j.0 + second_j),
                    second_t: s.second_t.max(second_t),
                    steps: s.steps.max(l.steps),
                    step_span_j: Joules(s.step_span_j.0 + span_j),
                },
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Trace, TracePoint, Vendor};

    fn config() -> EmulatorConfig {
        EmulatorConfig::default()
    }

    #[test]
    fn integer_energy_and_counts() {
        let t = GroundTruth::new(&config());
        let pkg = t.find(0, Domain::Package, 0).unwrap();
        // 20 W for 1 s = 20 J = 20 * 2^14 counts at ESU 14.
        assert_eq!(t.energy_fj(pkg, 1_000_000_000), 20 * FJ_PER_J);
        assert_eq!(t.raw(pkg, 1_000_000_000), 20 << 14);
        assert_eq!(t.raw(pkg, 0), 0);
        // One count of 61.035 µJ at 20 W takes 3.0518 µs.
        assert_eq!(t.raw(pkg, 3_052), 1);
        assert_eq!(t.raw(pkg, 3_051), 0);
        assert_eq!(t.counter_time(1_999_999), 1_000_000);
        assert_eq!(t.max_energy_range_uj(pkg), 262_143_328_850);
    }

    #[test]
    fn trace_scales_every_domain_piecewise() {
        let mut c = config();
        c.power.trace = Some(Trace {
            points: vec![
                TracePoint {
                    time_s: 0.0,
                    scale: 0.0,
                },
                TracePoint {
                    time_s: 1.0,
                    scale: 2.0,
                },
                TracePoint {
                    time_s: 1.5,
                    scale: 0.5,
                },
            ],
        });
        let t = GroundTruth::new(&c);
        let pkg = t.find(0, Domain::Package, 0).unwrap();
        let j = |ns: u64| t.energy_fj(pkg, ns) as f64 / 1e15;
        assert_eq!(j(1_000_000_000), 0.0);
        assert_eq!(j(1_500_000_000), 20.0);
        assert_eq!(j(2_500_000_000), 30.0);
    }

    /// The bound a reader's test uses around a step is the interval between the
    /// reads either side of it, counted once per interval, and only for steps
    /// between the first and last read.
    #[test]
    fn steps_between_reads_count_the_interval_around_them() {
        let t = GroundTruth::new(&config());
        let pkg = t.find(0, Domain::Package, 0).unwrap();
        let mut log = ServedLog::default();
        // Steps at 5 (before the first read), 25 and 27 (one interval), 40 (on a read).
        let steps = [5, 25, 27, 40];
        for (raw, ns) in [(100, 10), (200, 20), (350, 30), (400, 40), (500, 50)] {
            log.record(Mechanism::Msr, pkg, raw, ns, &steps);
        }
        let s = log
            .served(&t, Some(Mechanism::Msr), 0, Domain::Package)
            .unwrap();
        assert_eq!(s.steps, 3);
        let unit = 1.0 / 16384.0;
        // 200 -> 350 around 25 and 27, 350 -> 400 around 40.
        assert_eq!(s.step_span_j.0, 200.0 * unit);
        let (lo, hi) = s.correct_range();
        assert_eq!(hi.0, 400.0 * unit);
        assert_eq!(lo.0, 200.0 * unit);
    }

    #[test]
    fn disabled_psys_counts_nothing_but_its_truth_grows() {
        let c = EmulatorConfig::default().with_psys_disabled();
        let t = GroundTruth::new(&c);
        let psys = t.find(0, Domain::Psys, 0).unwrap();
        assert_eq!(t.raw(psys, 10_000_000_000), 0);
        assert!(t.energy_fj(psys, 1_000_000_000) > 0);
    }

    #[test]
    fn amd_core_lanes_split_the_core_power() {
        let c = EmulatorConfig::amd();
        let t = GroundTruth::new(&c);
        assert_eq!(t.lanes(0, Domain::Core).count(), 8);
        let lane = t.find(0, Domain::Core, 7).unwrap();
        assert_eq!(t.counter(lane).power_uw, 1_500_000);
        assert_eq!(t.counter(lane).unit, Unit::pow2(16));
        assert!(t.find(0, Domain::Dram, 0).is_none());
        let _ = Vendor::ZEN3;
    }

    #[test]
    fn served_spans_first_to_last_read_over_mechanisms_and_lanes() {
        let c = EmulatorConfig::amd().with_cpus_per_socket(2);
        let t = GroundTruth::new(&c);
        let mut log = ServedLog::default();
        let (a, b) = (
            t.find(0, Domain::Core, 0).unwrap(),
            t.find(0, Domain::Core, 1).unwrap(),
        );
        log.record(Mechanism::Powercap, a, 100, 10, &[]);
        log.record(Mechanism::Msr, a, 300, 30, &[]);
        log.record(Mechanism::Msr, a, 200, 20, &[]);
        log.record(Mechanism::Msr, b, 1 << 16, 20, &[]);
        log.record(Mechanism::Msr, b, 3 << 16, 40, &[]);
        let all = log.served(&t, None, 0, Domain::Core).unwrap();
        let unit = 1.0 / 65536.0;
        assert_eq!(all.reads, 5);
        assert_eq!(all.first_j.0, 100.0 * unit + 1.0);
        assert_eq!(all.last_j.0, 300.0 * unit + 3.0);
        assert_eq!(all.first_t, Duration::from_nanos(10));
        assert_eq!(all.last_t, Duration::from_nanos(40));
        let msr = log
            .served(&t, Some(Mechanism::Msr), 0, Domain::Core)
            .unwrap();
        assert_eq!(msr.first_j.0, 200.0 * unit + 1.0);
        // The second read of each lane: a at 30 ns (read out of order), b at 40 ns.
        assert_eq!(msr.second_j.0, 300.0 * unit + 3.0);
        assert_eq!(msr.second_t, Duration::from_nanos(40));
        assert_eq!(msr.energy_after_probe().0, 0.0);
        // Over both mechanisms, lane a's second read is the MSR one at 20 ns.
        assert_eq!(all.second_j.0, 200.0 * unit + 3.0);
        assert!(log.served(&t, None, 0, Domain::Package).is_none());
        assert_eq!((all.steps, all.step_span_j.0), (0, 0.0));
        log.reset();
        assert!(log.served(&t, None, 0, Domain::Core).is_none());
    }
}
