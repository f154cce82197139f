//! Faults a reader must survive, injected at the mount or at run time.
//!
//! Text form: `KIND[=AMOUNT]:SOCKET/DOMAIN[@TIME]`, e.g. `eacces:0/package`,
//! `vanish:0/dram@2s`, `freeze:1/package@1.5s`, `garbage:0/core`,
//! `reset:0/package@1s`, `backstep=2.5J:0/dram@500ms`, `jump:0/package@2s`,
//! `busy=6:0/package@1s`.
//! TIME counts from the mount (`1.5s`, `500ms`, a bare number is seconds); without
//! it the fault starts at once. AMOUNT (joules, `2.5` or `2.5J`, to the µJ) is
//! given to `backstep` and `jump` only; `busy=N` takes a count of reads instead.
//! What each kind does:
//!
//! | kind | powercap `energy_uj` | `/dev/cpu/N/msr` |
//! |---|---|---|
//! | `eacces` | open fails with EACCES, even for root | unaffected |
//! | `vanish` | the zone's directory (with its subzones) and its `class/powercap` link disappear; reads on open files fail with ENODEV | the register reads EIO |
//! | `freeze` | the counter stops advancing | the same counter stops |
//! | `garbage` | reads `nan` | reads 0xDEADBEEFDEADBEEF |
//! | `overrange` | reads a value above `max_energy_range_uj` | the count has bit `counter_bits` set |
//! | `reset` | at TIME the counter restarts from 0 (module reload, resume from suspend): from then on it holds the energy drawn since TIME, wrapping as usual | the same counter |
//! | `backstep[=J]` | at TIME the counter steps back by J (default 0.5 J) and counts on from there, J behind | the same counter |
//! | `jump[=J]` | at TIME the counter leaps forward by J (default 10000 J) and counts on from there, J ahead | the same counter |
//! | `busy[=N]` | from TIME, the next N reads (default 3) fail with EBUSY, a transient refusal a reader may retry; then reads succeed again | the same, on the register |
//!
//! `reset`, `backstep` and `jump` are *steps*: one-off moves of the counter at
//! TIME. A step amount is rounded to whole raw counts (at least one), and must stay
//! under half the counter's range (2^(counter_bits-1) counts), else a reader could
//! not tell it from a wrap; the default jump is cut to just under half the range
//! when 10000 J is not under it (e.g. 16-bit counters). A freeze or a step is
//! never dated before the moment it is injected: that would rewrite values
//! already served. A read at or after TIME sees the step (the counter's update
//! interval does not delay it). [`crate::Emulator::steps`] tells when each step
//! took effect and how far it moved the counter.
//!
//! The ground truth ([`crate::Emulator::truth`]) never sees faults: it is the
//! energy really drawn. [`crate::Served`] counts the energy the counter measured
//! between a reader's reads with steps taken out (see its docs).

use crate::duration::{format_duration, parse_duration};
use crate::error::Error;
use quietwatt_core::{Domain, Joules};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// What goes wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// Opening the zone's `energy_uj` fails with EACCES, even for root.
    Eacces,
    /// The zone disappears; open files read ENODEV; its MSR reads EIO.
    Vanish,
    /// The counter stops advancing.
    Freeze,
    /// The counter reads something that is not a number (`nan`; MSR: 0xDEADBEEFDEADBEEF).
    Garbage,
    /// The counter reads a value above its range.
    Overrange,
    /// The counter restarts from 0 at the fault's time (a step).
    Reset,
    /// The counter steps back by the fault's amount (default 0.5 J) at its time (a step).
    Backstep,
    /// The counter leaps forward by the fault's amount (default 10000 J) at its time (a step).
    Jump,
    /// From its time, the next [`Fault::reads`] reads (default 3) fail with EBUSY: a
    /// transient refusal, which a reader retries.
    Busy,
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 9] = [
        FaultKind::Eacces,
        FaultKind::Vanish,
        FaultKind::Freeze,
        FaultKind::Garbage,
        FaultKind::Overrange,
        FaultKind::Reset,
        FaultKind::Backstep,
        FaultKind::Jump,
        FaultKind::Busy,
    ];

    /// How many reads a `busy` fault refuses when it gives no count.
    pub const DEFAULT_BUSY_READS: u32 = 3;

    /// The default amount of a backstep: 0.5 J.
    pub const DEFAULT_BACKSTEP: Microjoules = Microjoules(500_000);
    /// The default amount of a jump: 10000 J (cut to just under half the counter's
    /// range when that is smaller).
    pub const DEFAULT_JUMP: Microjoules = Microjoules(10_000_000_000);

    /// The name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Eacces => "eacces",
            FaultKind::Vanish => "vanish",
            FaultKind::Freeze => "freeze",
            FaultKind::Garbage => "garbage",
            FaultKind::Overrange => "overrange",
            FaultKind::Reset => "reset",
            FaultKind::Backstep => "backstep",
            FaultKind::Jump => "jump",
            FaultKind::Busy => "busy",
        }
    }

    /// Whether this kind is a step: a one-off move of the counter at the fault's time.
    pub fn is_step(self) -> bool {
        matches!(
            self,
            FaultKind::Reset | FaultKind::Backstep | FaultKind::Jump
        )
    }

    /// Whether this kind takes an amount (`backstep=J`, `jump=J`).
    pub fn takes_amount(self) -> bool {
        matches!(self, FaultKind::Backstep | FaultKind::Jump)
    }

    /// The amount used when a fault of this kind gives none (backstep, jump).
    pub fn default_amount(self) -> Option<Microjoules> {
        match self {
            FaultKind::Backstep => Some(FaultKind::DEFAULT_BACKSTEP),
            FaultKind::Jump => Some(FaultKind::DEFAULT_JUMP),
            _ => None,
        }
    }
}

/// An energy in whole microjoules: exact, so that a fault's text form round-trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Microjoules(pub u64);

impl Microjoules {
    /// In joules.
    pub fn joules(self) -> Joules {
        Joules(self.0 as f64 / 1e6)
    }

    /// Parses joules written as a decimal (`2.5`, `0.000001`, `10000`), with an
    /// optional `J`; at most six decimals (a microjoule).
    pub fn parse_joules(text: &str) -> Result<Microjoules, String> {
        let t = text.trim();
        let number = t
            .strip_suffix('J')
            .or_else(|| t.strip_suffix('j'))
            .unwrap_or(t)
            .trim();
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) {
            return Err(format!("'{text}' is not an amount of joules (e.g. 2.5J)"));
        }
        if frac.len() > 6 {
            return Err(format!("'{text}' is finer than a microjoule"));
        }
        let too_big = || format!("'{text}' is too many joules");
        let whole: u64 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| too_big())?
        };
        let frac_uj: u64 = format!("{frac:0<6}").parse().unwrap_or(0);
        whole
            .checked_mul(1_000_000)
            .and_then(|w| w.checked_add(frac_uj))
            .map(Microjoules)
            .ok_or_else(too_big)
    }
}

impl fmt::Display for Microjoules {
    /// Joules, exactly, with a `J`: `2.5J`, `10000J`, `0.000001J`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, frac) = (self.0 / 1_000_000, self.0 % 1_000_000);
        if frac == 0 {
            write!(f, "{whole}J")
        } else {
            let digits = format!("{frac:06}");
            write!(f, "{whole}.{}J", digits.trim_end_matches('0'))
        }
    }
}

/// One fault on one (socket, domain), from a time on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fault {
    /// What goes wrong.
    pub kind: FaultKind,
    /// The socket (psys: the psys master, [`crate::EmulatorConfig::psys_master`]).
    pub socket: u32,
    /// The domain.
    pub domain: Domain,
    /// When it starts, from the mount; `None`: at once (at the mount, or when injected).
    pub at: Option<Duration>,
    /// How far a backstep or jump moves the counter; `None`: the kind's default
    /// ([`FaultKind::default_amount`]). Always `None` for other kinds.
    pub amount: Option<Microjoules>,
    /// How many reads a `busy` fault refuses; `None`: [`FaultKind::DEFAULT_BUSY_READS`].
    /// Always `None` for other kinds.
    pub reads: Option<u32>,
}

impl Fault {
    /// A fault starting at once.
    pub fn new(kind: FaultKind, socket: u32, domain: Domain) -> Fault {
        Fault {
            kind,
            socket,
            domain,
            at: None,
            amount: None,
            reads: None,
        }
    }

    /// The same `busy` fault, refusing `reads` reads.
    pub fn reads(self, reads: u32) -> Fault {
        Fault {
            reads: Some(reads),
            ..self
        }
    }

    /// The same fault, starting `at` after the mount.
    pub fn at(self, at: Duration) -> Fault {
        Fault {
            at: Some(at),
            ..self
        }
    }

    /// The same backstep or jump, moving the counter by `amount` (for other kinds
    /// the text form and [`crate::Emulator::inject`] refuse an amount).
    pub fn amount(self, amount: Microjoules) -> Fault {
        Fault {
            amount: Some(amount),
            ..self
        }
    }

    /// The amount in force: the given one, else the kind's default (steps that
    /// move by an amount only).
    pub fn effective_amount(&self) -> Option<Microjoules> {
        self.amount.or_else(|| self.kind.default_amount())
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kind.name())?;
        if let Some(amount) = self.amount {
            write!(f, "={amount}")?;
        }
        if let Some(reads) = self.reads {
            write!(f, "={reads}")?;
        }
        write!(f, ":{}/{}", self.socket, self.domain)?;
        if let Some(at) = self.at {
            write!(f, "@{}", format_duration(at))?;
        }
        Ok(())
    }
}

impl FromStr for Fault {
    type Err = Error;

    fn from_str(spec: &str) -> Result<Fault, Error> {
        let err = |why: String| Error::FaultSpec {
            spec: spec.to_string(),
            why,
        };
        let (body, at) = match spec.trim().split_once('@') {
            Some((b, t)) => (b, Some(parse_duration(t).map_err(|e| err(e.to_string()))?)),
            None => (spec.trim(), None),
        };
        let (kind, target) = body
            .split_once(':')
            .ok_or_else(|| err("no ':' after the kind".to_string()))?;
        let (kind, given) = match kind.split_once('=') {
            Some((k, a)) => (k, Some(a)),
            None => (kind, None),
        };
        let kind = FaultKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(kind.trim()))
            .ok_or_else(|| err(format!("unknown kind '{kind}'")))?;
        // busy=N counts reads; backstep=J and jump=J move by an energy.
        let (amount, reads) = match given {
            Some(n) if kind == FaultKind::Busy => match n.trim().parse::<u32>() {
                Ok(r) if r > 0 => (None, Some(r)),
                _ => return Err(err(format!("'{n}' is not a count of reads above 0"))),
            },
            Some(a) => (Some(Microjoules::parse_joules(a).map_err(err)?), None),
            None => (None, None),
        };
        if let Some(a) = amount {
            if !kind.takes_amount() {
                return Err(err(format!(
                    "{} takes no amount (only backstep=J and jump=J do)",
                    kind.name()
                )));
            }
            if a.0 == 0 {
                return Err(err("the amount must be above 0 J".to_string()));
            }
        }
        let (socket, domain) = target
            .split_once('/')
            .ok_or_else(|| err("no '/' between socket and domain".to_string()))?;
        let socket = socket
            .trim()
            .parse::<u32>()
            .map_err(|_| err(format!("'{socket}' is not a socket number")))?;
        let domain = domain.parse::<Domain>().map_err(|e| err(e.to_string()))?;
        Ok(Fault {
            kind,
            socket,
            domain,
            at,
            amount,
            reads,
        })
    }
}

impl Serialize for Fault {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Fault {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Fault, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A fault with its start fixed, in nanoseconds since the mount.
#[derive(Debug)]
struct Active {
    fault: Fault,
    from_ns: u64,
    /// Reads a `busy` fault still refuses.
    left: AtomicU32,
}

/// The faults in force, queried on every read.
#[derive(Debug, Default)]
pub(crate) struct FaultSet {
    active: Vec<Active>,
}

/// What the faults do to one counter at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Effect {
    /// Opening `energy_uj` fails with EACCES.
    pub eacces: bool,
    /// The zone is gone.
    pub vanished: bool,
    /// The counter stopped at this read time (ns since the mount).
    pub frozen_at: Option<u64>,
    /// Reads are garbage.
    pub garbage: bool,
    /// Reads are out of range.
    pub overrange: bool,
}

impl FaultSet {
    /// Adds `fault`; `now_ns` (since the mount) is when an undated fault starts.
    /// A freeze or a step is never dated in the past: that would change values
    /// already served (a freeze would make the counter go back).
    pub fn add(&mut self, fault: Fault, now_ns: u64) {
        let at = fault
            .at
            .map_or(now_ns, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let from_ns = if fault.kind == FaultKind::Freeze || fault.kind.is_step() {
            at.max(now_ns)
        } else {
            at
        };
        let left = AtomicU32::new(match fault.kind {
            FaultKind::Busy => fault.reads.unwrap_or(FaultKind::DEFAULT_BUSY_READS),
            _ => 0,
        });
        self.active.push(Active {
            fault,
            from_ns,
            left,
        });
    }

    /// Removes every fault.
    pub fn clear(&mut self) {
        self.active.clear();
    }

    /// The faults, as given.
    pub fn faults(&self) -> Vec<Fault> {
        self.active.iter().map(|a| a.fault).collect()
    }

    /// The steps (reset, backstep, jump) of (socket, domain) with the time each
    /// takes effect (ns since the mount), in time order (ties: in the order added).
    pub fn steps(&self, socket: u32, domain: Domain) -> Vec<(Fault, u64)> {
        let mut out: Vec<(Fault, u64)> = self
            .active
            .iter()
            .filter(|a| a.fault.kind.is_step())
            .filter(|a| a.fault.socket == socket && a.fault.domain == domain)
            .map(|a| (a.fault, a.from_ns))
            .collect();
        out.sort_by_key(|&(_, t)| t);
        out
    }

    /// Whether a read of (socket, domain) at `now_ns` is refused by a `busy` fault
    /// (each call is one read: it uses up one of the refusals).
    pub fn take_busy(&self, socket: u32, domain: Domain, now_ns: u64) -> bool {
        self.active.iter().any(|a| {
            a.fault.kind == FaultKind::Busy
                && a.fault.socket == socket
                && a.fault.domain == domain
                && now_ns >= a.from_ns
                && a.left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok()
        })
    }

    /// What the faults do to (socket, domain) at `now_ns`. A freeze is reported
    /// before it starts too (its time caps the counter's time either way).
    pub fn effect(&self, socket: u32, domain: Domain, now_ns: u64) -> Effect {
        let mut e = Effect::default();
        for a in &self.active {
            let f = a.fault;
            if f.socket != socket || f.domain != domain {
                continue;
            }
            if f.kind == FaultKind::Freeze {
                e.frozen_at = Some(e.frozen_at.map_or(a.from_ns, |t| t.min(a.from_ns)));
                continue;
            }
            if now_ns < a.from_ns {
                continue;
            }
            match f.kind {
                FaultKind::Eacces => e.eacces = true,
                FaultKind::Vanish => e.vanished = true,
                FaultKind::Garbage => e.garbage = true,
                FaultKind::Overrange => e.overrange = true,
                // Steps move the counter's value: see `steps`.
                // Busy refuses reads one at a time: see `take_busy`.
                FaultKind::Freeze
                | FaultKind::Reset
                | FaultKind::Backstep
                | FaultKind::Jump
                | FaultKind::Busy => {}
            }
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_fault_refuses_its_count_of_reads_from_its_time() {
        let f: Fault = "busy=2:0/package@1s".parse().expect("parses");
        assert_eq!(
            f,
            Fault::new(FaultKind::Busy, 0, Domain::Package)
                .reads(2)
                .at(Duration::from_secs(1))
        );
        assert_eq!(f.to_string(), "busy=2:0/package@1s");
        assert!("busy=0:0/package".parse::<Fault>().is_err());
        assert!("busy=1.5J:0/package".parse::<Fault>().is_err());
        let mut set = FaultSet::default();
        set.add(f, 0);
        let s = 1_000_000_000;
        assert!(
            !set.take_busy(0, Domain::Package, s - 1),
            "not before its time"
        );
        assert!(!set.take_busy(0, Domain::Dram, s), "only its domain");
        assert!(set.take_busy(0, Domain::Package, s));
        assert!(set.take_busy(0, Domain::Package, s));
        assert!(!set.take_busy(0, Domain::Package, s), "two reads only");
    }

    #[test]
    fn parses_and_prints_the_text_form() {
        for (text, want) in [
            (
                "eacces:0/package",
                Fault::new(FaultKind::Eacces, 0, Domain::Package),
            ),
            (
                "vanish:0/dram@2s",
                Fault::new(FaultKind::Vanish, 0, Domain::Dram).at(Duration::from_secs(2)),
            ),
            (
                "freeze:1/package@1.5s",
                Fault::new(FaultKind::Freeze, 1, Domain::Package).at(Duration::from_millis(1500)),
            ),
            (
                "GARBAGE:0/core",
                Fault::new(FaultKind::Garbage, 0, Domain::Core),
            ),
            (
                "overrange:0/psys@250ms",
                Fault::new(FaultKind::Overrange, 0, Domain::Psys).at(Duration::from_millis(250)),
            ),
        ] {
            let f: Fault = text.parse().unwrap();
            assert_eq!(f, want, "{text}");
            assert_eq!(f.to_string().parse::<Fault>().unwrap(), f);
        }
        for bad in [
            "eacces",
            "reset=1:0/package",
            "backstep=0:0/package",
            "backstep=x:0/package",
            "jump=1.0000001:0/package",
            "jump=-1:0/package",
            "melt:0/package",
            "eacces:x/package",
            "eacces:0/gpu0",
            "freeze:0/package@soon",
            "eacces:0",
        ] {
            let e = bad.parse::<Fault>().unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }

    /// Readers' tests write step faults as text (CLI `--fault`, config JSON): every
    /// form must read back as the same fault, amounts exactly to the microjoule.
    #[test]
    fn step_faults_round_trip_through_text() {
        for (text, want, printed) in [
            (
                "reset:0/package@1s",
                Fault::new(FaultKind::Reset, 0, Domain::Package).at(Duration::from_secs(1)),
                "reset:0/package@1s",
            ),
            (
                "backstep:1/dram@500ms",
                Fault::new(FaultKind::Backstep, 1, Domain::Dram).at(Duration::from_millis(500)),
                "backstep:1/dram@500ms",
            ),
            (
                "backstep=2.5J:0/core",
                Fault::new(FaultKind::Backstep, 0, Domain::Core).amount(Microjoules(2_500_000)),
                "backstep=2.5J:0/core",
            ),
            (
                "JUMP=0.000001:0/psys@2",
                Fault::new(FaultKind::Jump, 0, Domain::Psys)
                    .amount(Microjoules(1))
                    .at(Duration::from_secs(2)),
                "jump=0.000001J:0/psys@2s",
            ),
            (
                "jump=10000j:0/package",
                Fault::new(FaultKind::Jump, 0, Domain::Package).amount(Microjoules(10_000_000_000)),
                "jump=10000J:0/package",
            ),
        ] {
            let f: Fault = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(f, want, "{text}");
            assert_eq!(f.to_string(), printed);
            assert_eq!(printed.parse::<Fault>().unwrap(), f);
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(serde_json::from_str::<Fault>(&json).unwrap(), f);
        }
        let d: Fault = "backstep:0/package".parse().unwrap();
        assert_eq!(d.effective_amount(), Some(Microjoules(500_000)));
        let j: Fault = "jump:0/package".parse().unwrap();
        assert_eq!(j.effective_amount(), Some(Microjoules(10_000_000_000)));
        let r: Fault = "reset:0/package".parse().unwrap();
        assert_eq!(r.effective_amount(), None);
        let e = "reset=2:0/package"
            .parse::<Fault>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("takes no amount"), "{e}");
        assert!(FaultKind::ALL.iter().filter(|k| k.is_step()).count() == 3);
    }

    /// A step injected with a time already past takes effect when injected, so
    /// that no value already served changes; steps come back in time order.
    #[test]
    fn steps_are_listed_in_time_order_and_never_start_in_the_past() {
        let mut set = FaultSet::default();
        set.add("jump:0/package@3s".parse().unwrap(), 0);
        set.add("reset:0/package@1s".parse().unwrap(), 2_000_000_000);
        set.add("backstep:0/package@2500ms".parse().unwrap(), 0);
        set.add("backstep:0/dram@1s".parse().unwrap(), 0);
        set.add("garbage:0/package".parse().unwrap(), 0);
        let steps: Vec<(FaultKind, u64)> = set
            .steps(0, Domain::Package)
            .into_iter()
            .map(|(f, t)| (f.kind, t))
            .collect();
        assert_eq!(
            steps,
            [
                (FaultKind::Reset, 2_000_000_000),
                (FaultKind::Backstep, 2_500_000_000),
                (FaultKind::Jump, 3_000_000_000),
            ]
        );
        // Steps do not change what a read sees otherwise.
        assert_eq!(set.effect(0, Domain::Dram, u64::MAX), Effect::default());
    }

    #[test]
    fn effects_start_at_their_time_and_freezes_never_go_back() {
        let mut set = FaultSet::default();
        set.add("vanish:0/dram@2s".parse().unwrap(), 0);
        set.add("freeze:0/package@1s".parse().unwrap(), 3_000_000_000);
        assert!(!set.effect(0, Domain::Dram, 1_999_999_999).vanished);
        assert!(set.effect(0, Domain::Dram, 2_000_000_000).vanished);
        assert!(!set.effect(1, Domain::Dram, 2_000_000_000).vanished);
        assert_eq!(
            set.effect(0, Domain::Package, 0).frozen_at,
            Some(3_000_000_000)
        );
        set.clear();
        assert_eq!(set.effect(0, Domain::Dram, u64::MAX), Effect::default());
    }
}
