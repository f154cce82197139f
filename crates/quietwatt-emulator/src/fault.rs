//! Faults a reader must survive, injected at the mount or at run time.
//!
//! Text form: `KIND:SOCKET/DOMAIN[@TIME]`, e.g. `eacces:0/package`,
//! `vanish:0/dram@2s`, `freeze:1/package@1.5s`, `garbage:0/core`. TIME counts from
//! the mount (`1.5s`, `500ms`, a bare number is seconds); without it the fault
//! starts at once. What each kind does:
//!
//! | kind | powercap `energy_uj` | `/dev/cpu/N/msr` |
//! |---|---|---|
//! | `eacces` | open fails with EACCES, even for root | unaffected |
//! | `vanish` | the zone's directory (with its subzones) and its `class/powercap` link disappear; reads on open files fail with ENODEV | the register reads EIO |
//! | `freeze` | the counter stops advancing | the same counter stops |
//! | `garbage` | reads `nan` | reads 0xDEADBEEFDEADBEEF |
//! | `overrange` | reads a value above `max_energy_range_uj` | the count has bit `counter_bits` set |
//!
//! The ground truth ([`crate::Emulator::truth`]) never sees faults: it is the
//! energy really drawn.

use crate::duration::{format_duration, parse_duration};
use crate::error::Error;
use quietwatt::Domain;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
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
}

impl FaultKind {
    /// Every kind.
    pub const ALL: [FaultKind; 5] = [
        FaultKind::Eacces,
        FaultKind::Vanish,
        FaultKind::Freeze,
        FaultKind::Garbage,
        FaultKind::Overrange,
    ];

    /// The name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Eacces => "eacces",
            FaultKind::Vanish => "vanish",
            FaultKind::Freeze => "freeze",
            FaultKind::Garbage => "garbage",
            FaultKind::Overrange => "overrange",
        }
    }
}

/// One fault on one (socket, domain), from a time on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fault {
    /// What goes wrong.
    pub kind: FaultKind,
    /// The socket (psys: 0).
    pub socket: u32,
    /// The domain.
    pub domain: Domain,
    /// When it starts, from the mount; `None`: at once (at the mount, or when injected).
    pub at: Option<Duration>,
}

impl Fault {
    /// A fault starting at once.
    pub fn new(kind: FaultKind, socket: u32, domain: Domain) -> Fault {
        Fault {
            kind,
            socket,
            domain,
            at: None,
        }
    }

    /// The same fault, starting `at` after the mount.
    pub fn at(self, at: Duration) -> Fault {
        Fault {
            at: Some(at),
            ..self
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}/{}", self.kind.name(), self.socket, self.domain)?;
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
            Some((b, t)) => (b, Some(parse_duration(t).map_err(err)?)),
            None => (spec.trim(), None),
        };
        let (kind, target) = body
            .split_once(':')
            .ok_or_else(|| err("no ':' after the kind".to_string()))?;
        let kind = FaultKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(kind.trim()))
            .ok_or_else(|| err(format!("unknown kind '{kind}'")))?;
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
#[derive(Debug, Clone, Copy)]
struct Active {
    fault: Fault,
    from_ns: u64,
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
    /// A freeze is never dated in the past: that would make the counter go back.
    pub fn add(&mut self, fault: Fault, now_ns: u64) {
        let at = fault
            .at
            .map_or(now_ns, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let from_ns = if fault.kind == FaultKind::Freeze {
            at.max(now_ns)
        } else {
            at
        };
        self.active.push(Active { fault, from_ns });
    }

    /// Removes every fault.
    pub fn clear(&mut self) {
        self.active.clear();
    }

    /// The faults, as given.
    pub fn faults(&self) -> Vec<Fault> {
        self.active.iter().map(|a| a.fault).collect()
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
                FaultKind::Freeze => {}
            }
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
