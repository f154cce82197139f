//! The emulator's state, shared by the FUSE thread that serves the files and the
//! [`crate::Emulator`] handle that tests and the CLI hold, and the truth it reports.

use crate::config::EmulatorConfig;
use crate::duration;
use crate::fault::{Effect, Fault, FaultKind, FaultSet};
use crate::layout::{Node, Tree};
use crate::truth::{GroundTruth, Mechanism, Served, ServedLog};
use quietwatt_core::{Domain, Joules};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

/// State shared by the FUSE thread and the [`Emulator`] handle.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The validated configuration.
    pub config: EmulatorConfig,
    /// Counters and clock.
    pub truth: GroundTruth,
    /// The files served.
    pub tree: Tree,
    /// The unit register's value.
    pub unit_register: u64,
    /// Faults in force.
    pub faults: RwLock<FaultSet>,
    /// What was served.
    pub served: Mutex<ServedLog>,
    /// When the mount happened (file times).
    pub mounted_at: SystemTime,
    /// The mount point, canonical.
    pub mountpoint: PathBuf,
}

/// One read of a counter, after faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CounterRead {
    /// The count the register holds (modulo 2^counter_bits, steps applied).
    Value(u64),
    /// Garbage (fault).
    Garbage,
    /// Out of range (fault), with the count the register would have held.
    Overrange(u64),
    /// The counter is gone (fault).
    Vanished,
    /// The read is refused for now (fault: EBUSY).
    Busy,
}

impl Shared {
    /// Nanoseconds since the mount.
    pub fn now_ns(&self) -> u64 {
        self.truth.now_ns()
    }

    pub(crate) fn faults(&self) -> std::sync::RwLockReadGuard<'_, FaultSet> {
        self.faults.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn served_log(&self) -> MutexGuard<'_, ServedLog> {
        self.served.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What faults do to (socket, domain) now.
    pub fn effect(&self, socket: u32, domain: Domain, now_ns: u64) -> Effect {
        self.faults().effect(socket, domain, now_ns)
    }

    /// Whether `node` is present (no vanish fault hides it).
    pub fn visible(&self, node: &Node, now_ns: u64) -> bool {
        if node.hide_if.is_empty() {
            return true;
        }
        let faults = self.faults();
        node.hide_if
            .iter()
            .all(|&(s, d)| !faults.effect(s, d, now_ns).vanished)
    }

    /// The steps of counter `i`'s (socket, domain), with their times.
    fn steps_of(&self, i: usize) -> Vec<(Fault, u64)> {
        let c = self.truth.counter(i);
        self.faults().steps(c.socket, c.domain)
    }

    /// The counter `i` measured by `ns` (unwrapped, no steps), a freeze at `frozen_at` applied.
    fn measured(&self, i: usize, ns: u64, frozen_at: Option<u64>) -> u64 {
        let at = frozen_at.map_or(ns, |f| ns.min(f));
        self.truth.raw(i, self.truth.counter_time(at))
    }

    /// What the first `n` of `steps` add to counter `i`'s measured count, in raw
    /// counts: a reset sets the register to 0 at its time (so it cancels the count
    /// and every earlier step), a backstep subtracts its amount, a jump adds it.
    fn offset(&self, i: usize, steps: &[(Fault, u64)], frozen_at: Option<u64>) -> i128 {
        let mut off: i128 = 0;
        for &(f, t) in steps {
            let counts = self
                .config
                .step_counts(&f)
                .map_or(0, |c| i128::try_from(c).unwrap_or(i128::MAX));
            match f.kind {
                FaultKind::Reset => off = -i128::from(self.measured(i, t, frozen_at)),
                FaultKind::Backstep => off -= counts,
                FaultKind::Jump => off += counts,
                _ => {}
            }
        }
        off
    }

    /// Reads counter `i` through `mechanism` at `now_ns`, recording what is served.
    pub fn read_counter(&self, i: usize, mechanism: Mechanism, now_ns: u64) -> CounterRead {
        let c = self.truth.counter(i);
        let e = self.effect(c.socket, c.domain, now_ns);
        if e.vanished {
            return CounterRead::Vanished;
        }
        if self.faults().take_busy(c.socket, c.domain, now_ns) {
            return CounterRead::Busy;
        }
        let measured = self.measured(i, now_ns, e.frozen_at);
        let steps = self.steps_of(i);
        let seen = steps.partition_point(|&(_, t)| t <= now_ns);
        let off = self.offset(i, &steps[..seen], e.frozen_at);
        let register = self.truth.wrap_signed(i128::from(measured) + off);
        if e.garbage {
            return CounterRead::Garbage;
        }
        if e.overrange {
            return CounterRead::Overrange(register);
        }
        let times: Vec<u64> = steps.iter().map(|&(_, t)| t).collect();
        self.served_log()
            .record(mechanism, i, measured, now_ns, &times);
        CounterRead::Value(register)
    }

    /// The steps of (socket, domain), scheduled or done, with what each does.
    pub fn counter_steps(&self, socket: u32, domain: Domain) -> Vec<CounterStep> {
        let steps = self.faults().steps(socket, domain);
        let now = self.now_ns();
        let frozen_at = self.effect(socket, domain, now).frozen_at;
        let lanes: Vec<usize> = self.truth.lanes(socket, domain).collect();
        steps
            .iter()
            .enumerate()
            .map(|(k, &(fault, t))| {
                let mut shift_j = 0.0;
                for &i in &lanes {
                    let j = |counts: u128| {
                        self.truth
                            .joules(i, u64::try_from(counts).unwrap_or(u64::MAX), None)
                    };
                    shift_j += match fault.kind {
                        FaultKind::Reset => {
                            let before = i128::from(self.measured(i, t, frozen_at))
                                + self.offset(i, &steps[..k], frozen_at);
                            -j(u128::from(self.truth.wrap_signed(before)))
                        }
                        FaultKind::Backstep => -j(self.config.step_counts(&fault).unwrap_or(0)),
                        FaultKind::Jump => j(self.config.step_counts(&fault).unwrap_or(0)),
                        _ => 0.0,
                    };
                }
                CounterStep {
                    fault,
                    at: Duration::from_nanos(t),
                    happened: t <= now,
                    shift_j: Joules(shift_j),
                }
            })
            .collect()
    }

    /// What (socket, domain) served, through `mechanism` or any.
    pub fn served(
        &self,
        mechanism: Option<Mechanism>,
        socket: u32,
        domain: Domain,
    ) -> Option<Served> {
        self.served_log()
            .served(&self.truth, mechanism, socket, domain)
    }

    /// The report `truth.json` serves.
    pub fn report(&self) -> TruthReport {
        let now = self.now_ns();
        let domains = self
            .config
            .counters()
            .into_iter()
            .map(|(socket, domain)| {
                let served = self.served(None, socket, domain);
                DomainTruth {
                    socket,
                    domain,
                    watts: self.config.watts(socket, domain).unwrap_or(0.0),
                    truth_j: self.truth.truth(socket, domain),
                    served_energy_j: served.map(|s| s.energy()),
                    served,
                    served_powercap: self.served(Some(Mechanism::Powercap), socket, domain),
                    served_msr: self.served(Some(Mechanism::Msr), socket, domain),
                    steps: self.counter_steps(socket, domain),
                }
            })
            .collect();
        let load_following = self.config.power.follow.as_ref().map_or(Vec::new(), |f| {
            (0..self.config.sockets)
                .filter_map(|socket| {
                    let (busy, dynamic_j) = self.truth.followed(socket)?;
                    Some(FollowedSocket {
                        socket,
                        busy,
                        dynamic_j,
                        // What the frequencies added beyond per_cpu_w × busy.
                        frequency_j: Joules(dynamic_j.0 - f.per_cpu_w * busy.as_secs_f64()),
                    })
                })
                .collect()
        });
        TruthReport {
            mountpoint: self.mountpoint.clone(),
            elapsed: Duration::from_nanos(now),
            emulated_time: Duration::from_nanos(self.truth.exact_time(now)),
            domains,
            faults: self.faults().faults(),
            load_following,
            cpufreq_khz: self.truth.current_khz(),
        }
    }
}

/// The ground truth of every domain and what was served of it, as
/// `.quietwatt-emulator/truth.json` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TruthReport {
    /// The mount point.
    pub mountpoint: PathBuf,
    /// Time since the mount.
    #[serde(rename = "elapsed_s", with = "duration::secs")]
    pub elapsed: Duration,
    /// The emulated clock: `elapsed` plus the start offset.
    #[serde(rename = "emulated_time_s", with = "duration::secs")]
    pub emulated_time: Duration,
    /// One entry per emulated (socket, domain).
    pub domains: Vec<DomainTruth>,
    /// The faults in force.
    pub faults: Vec<Fault>,
    /// Per socket, what the load-following package power counted (empty without it).
    pub load_following: Vec<FollowedSocket>,
    /// Each emulated CPU's `scaling_cur_freq` now, kHz (empty without emulated
    /// frequencies).
    pub cpufreq_khz: Vec<u64>,
}

/// What the load-following package power of one socket counted from the mount to
/// the latest counter time: the package's energy is its idle part plus `dynamic_j`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FollowedSocket {
    /// The socket.
    pub socket: u32,
    /// Its CPUs' busy time.
    #[serde(rename = "busy_s", with = "duration::secs")]
    pub busy: Duration,
    /// The energy its busy CPUs drew beyond the idle power.
    pub dynamic_j: Joules,
    /// The part of `dynamic_j` drawn per GHz of the CPUs' frequencies.
    pub frequency_j: Joules,
}

/// The truth about one (socket, domain).
#[derive(Debug, Clone, Serialize)]
pub struct DomainTruth {
    /// The socket (psys: the psys master).
    pub socket: u32,
    /// The domain.
    pub domain: Domain,
    /// The configured (untraced) power, watts.
    pub watts: f64,
    /// The exact energy drawn since emulated time 0.
    pub truth_j: Joules,
    /// `served.last_j - served.first_j`.
    pub served_energy_j: Option<Joules>,
    /// What was served through any mechanism, in the hardware unit.
    pub served: Option<Served>,
    /// What was served through powercap, converted as powercap does.
    pub served_powercap: Option<Served>,
    /// What was served through MSRs.
    pub served_msr: Option<Served>,
    /// The steps (reset, backstep, jump) of this counter, scheduled or done.
    pub steps: Vec<CounterStep>,
}

/// A step (`reset`, `backstep` or `jump` fault) of one counter: when it takes
/// effect and how far it moves the counter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CounterStep {
    /// The fault, as given.
    pub fault: Fault,
    /// When it takes effect, since the mount: a read at or after this time sees it
    /// (a fault dated before its injection takes effect when injected).
    #[serde(rename = "at_s", with = "duration::secs")]
    pub at: Duration,
    /// Whether `at` has passed.
    pub happened: bool,
    /// How far the register moves at `at`, in joules (the hardware unit; all
    /// lanes of AMD `core` added), wraps ignored: a reset, minus what the register
    /// held (it reads 0 then); a backstep, minus its amount in whole counts; a
    /// jump, plus its amount in whole counts (the default jump cut to under half
    /// the range). Computed from the ground truth, so known before `at` too.
    pub shift_j: Joules,
}
