//! Wake-ups of an idle CPU, through the caller/callee experiment of the events
//! module ([`quietwatt_events::wakeup`], paper 004's Listing 1): a caller pinned to one
//! CPU wakes a callee pinned to another with a futex, `count` times spread evenly
//! over a fixed window, and the callee goes straight back to sleep (no busy-wait).
//!
//! The window is the same for every count, so a run's wall-clock time (and on
//! real RAPL the caller's share of the energy) is constant: the energy slope
//! against the number of wake-ups is what a wake-up adds. The events counted are
//! the wake-ups that found the callee's CPU in an idle state (by the tracepoint
//! when the BPF program loads, else by cpuidle's usage counters); the time priced
//! is the wake-up latency, from the signal to the callee running.

use super::energy::EnergyProbe;
use super::sweep::Planned;
use super::{Measured, Scenario, ScenarioSpec, XAxis};
use crate::error::{Error, Result};
use quietwatt::root::SysRoot;
use quietwatt_events::wakeup::{self, WakeupConfig};
use std::collections::BTreeMap;
use std::io;
use std::time::{Duration, Instant};

/// Wake-ups per window swept by default.
pub const DEFAULT_COUNTS: [u64; 5] = [10, 20, 40, 80, 160];

/// The window every run lasts by default.
pub const DEFAULT_WINDOW: Duration = Duration::from_millis(200);

/// The scenario.
#[derive(Debug)]
pub struct WakeupScenario {
    caller: u32,
    callee: u32,
    window: Duration,
}

impl WakeupScenario {
    /// Caller on `caller`, callee on `callee`, runs of `window`.
    pub fn new(caller: u32, callee: u32, window: Duration) -> WakeupScenario {
        WakeupScenario {
            caller,
            callee,
            window,
        }
    }
}

impl Scenario for WakeupScenario {
    fn spec(&self) -> ScenarioSpec {
        ScenarioSpec {
            name: "wakeup".into(),
            description: format!(
                "CPU {} wakes a thread sleeping on CPU {} with a futex, N times evenly over {} ms; the woken thread sleeps again at once",
                self.caller,
                self.callee,
                self.window.as_millis()
            ),
            baseline: false,
            x: XAxis::Measured,
            counted: "wake-ups that found the callee's CPU idle (power:cpu_idle via BPF, else cpuidle usage)".into(),
            unit: "wake-up".into(),
        }
    }

    fn run(&mut self, count: u64, batch: u32, probe: &mut EnergyProbe) -> Result<Measured> {
        let n = count.max(1) * batch.max(1) as u64;
        let config = WakeupConfig {
            caller_cpu: self.caller,
            callee_cpu: self.callee,
            // n signals after one first interval: n + 1 intervals fill the window.
            interval: self.window.mul_f64(batch.max(1) as f64) / (n as u32 + 1),
            busy: Duration::ZERO,
            count: n as usize,
            // cpuidle of the machine the threads run on, whatever --root says.
            root: SysRoot::default(),
        };
        probe.begin()?;
        let t0 = Instant::now();
        let report = wakeup::run(&config, String::new(), None).map_err(|e| Error::Scenario {
            what: "run the wake-up experiment".into(),
            source: io::Error::other(e.to_string()),
        })?;
        let wall = t0.elapsed().as_secs_f64();
        let joules = probe.end()?;
        let idle = |w: &wakeup::Wakeup| match w.tp_state {
            Some(t) => t.is_some(),
            None => w.state.is_some() || w.mixed,
        };
        let from_idle: Vec<&wakeup::Wakeup> = report.wakeups.iter().filter(|w| idle(w)).collect();
        let latency: u64 = from_idle.iter().map(|w| w.latency_ns).sum();
        Ok(Measured {
            events: from_idle.len() as u64,
            counts: BTreeMap::from([
                ("wakeups".to_string(), report.wakeups.len() as u64),
                ("wakeups-from-idle".to_string(), from_idle.len() as u64),
            ]),
            seconds: latency as f64 / 1e9,
            wall_seconds: wall,
            joules,
        })
    }
}

/// The scenario at `counts` wake-ups per window (one window per run).
pub fn plan(counts: &[u64], caller: u32, callee: u32, window: Duration) -> Vec<Planned> {
    vec![Planned {
        scenario: Box::new(WakeupScenario::new(caller, callee, window)),
        counts: counts.to_vec(),
        batch: 1,
    }]
}
