//! What the service publishes: the latest [`Snapshot`] of every counter, put
//! there by the thread that refreshes the counters and read by the thread that
//! answers clients. Neither waits on the other beyond swapping a pointer: the
//! samplers never see a client.

use crate::protocol::ChannelInfo;
use quietwatt_core::domain::Domain;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// One counter as published.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelState {
    /// Which counter.
    pub domain: Domain,
    /// Its package.
    pub socket: u32,
    /// Its die, on multi-die parts.
    pub die: Option<u32>,
    /// Its energy since the service started, µJ (never decreasing).
    pub energy_uj: u64,
    /// Resets, steps back and jumps its energy absorbed, and restarts.
    pub resets: u64,
    /// Decreases a wrap and a restart explained equally well.
    pub ambiguous: u64,
    /// Whether it is still read.
    pub up: bool,
}

impl ChannelState {
    /// How the protocol names it.
    pub fn info(&self) -> ChannelInfo {
        ChannelInfo {
            socket: self.socket,
            die: self.die,
            domain: self.domain.name().to_string(),
        }
    }
}

/// Every counter at one refresh.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The refresh's number, increasing.
    pub seq: u64,
    /// When it was published, CLOCK_MONOTONIC ns.
    pub t_ns: u64,
    /// The counters, always the same ones in the same order.
    pub channels: Vec<ChannelState>,
}

/// What clients are told about the service's reading of the counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceInfo {
    /// The mechanism read.
    pub mechanism: String,
    /// Whether it is quietwatt's emulator.
    pub emulated: bool,
    /// How old a reading can be when it is published (the sampling period).
    pub staleness: Duration,
    /// How often a snapshot is published.
    pub refresh: Duration,
}

/// The latest snapshot, shared between the publisher and the service.
#[derive(Debug)]
pub struct Board {
    info: ServiceInfo,
    latest: Mutex<Latest>,
}

#[derive(Debug, Default)]
struct Latest {
    snapshot: Option<Arc<Snapshot>>,
    /// Why no counter is read, while none is.
    unavailable: Option<String>,
}

impl Board {
    /// An empty board: clients are told to try again until the first
    /// [`Board::publish`].
    pub fn new(info: ServiceInfo) -> Board {
        Board {
            info,
            latest: Mutex::new(Latest::default()),
        }
    }

    /// How the counters are read.
    pub fn info(&self) -> &ServiceInfo {
        &self.info
    }

    /// Publishes `channels` as refresh `seq` taken at `t_ns`. A counter set
    /// that differs from the first one published is refused (clients index
    /// readings by the channels they were welcomed with): `false`.
    pub fn publish(&self, seq: u64, t_ns: u64, channels: Vec<ChannelState>) -> bool {
        let mut l = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(old) = &l.snapshot {
            let same = old.channels.len() == channels.len()
                && old
                    .channels
                    .iter()
                    .zip(&channels)
                    .all(|(a, b)| (a.domain, a.socket, a.die) == (b.domain, b.socket, b.die));
            if !same {
                return false;
            }
        }
        l.snapshot = Some(Arc::new(Snapshot {
            seq,
            t_ns,
            channels,
        }));
        l.unavailable = None;
        true
    }

    /// Says why no counter is read (before any snapshot: clients are refused
    /// with it).
    pub fn unavailable(&self, reason: String) {
        let mut l = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        l.unavailable = Some(reason);
    }

    /// The latest snapshot, or why there is none.
    pub fn latest(&self) -> Result<Arc<Snapshot>, String> {
        let l = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        match (&l.snapshot, &l.unavailable) {
            (Some(s), _) => Ok(Arc::clone(s)),
            (None, Some(r)) => Err(r.clone()),
            (None, None) => {
                Err("the service has not read the counters yet: try again in a second".into())
            }
        }
    }
}
