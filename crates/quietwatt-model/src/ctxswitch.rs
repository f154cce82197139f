//! Context switches, priced by the method of paper 003: a pipe ping-pong between
//! two threads pinned to the same CPU (each byte sent blocks the sender until the
//! other thread answers, so every exchange is two switches and nothing else can
//! overlap them), against a baseline that makes the same pipe reads and writes from
//! one thread, without switching. Switches are counted by the perf software event
//! `context-switches` on both threads around the interval.
//!
//! Both threads share one CPU so that a switch is the switch itself: threads on two
//! CPUs would also pay a cross-CPU wake-up and often an idle exit, which the
//! [`super::wakeup`] family prices apart.

use super::counters::{SoftwareEvent, Task, TaskCounter};
use super::energy::EnergyProbe;
use super::sweep::{plan_each, Planned};
use super::{Measured, Scenario, ScenarioSpec, XAxis};
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Switches per execution swept by default.
pub const DEFAULT_COUNTS: [u64; 5] = [2000, 4000, 8000, 16000, 32000];

/// Which variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchKind {
    /// One thread: write and read both pipes itself (the same syscalls, no switch).
    Baseline,
    /// Two threads on one CPU answering each other through two pipes.
    PingPong,
}

/// The scenario, pinned to `cpu`.
#[derive(Debug)]
pub struct SwitchScenario {
    kind: SwitchKind,
    cpu: usize,
}

impl SwitchScenario {
    /// The variant on `cpu`.
    pub fn new(kind: SwitchKind, cpu: usize) -> SwitchScenario {
        SwitchScenario { kind, cpu }
    }
}

fn scenario_err(what: String) -> impl FnOnce(io::Error) -> Error {
    move |source| Error::Scenario { what, source }
}

fn pin(cpu: usize) -> Result<()> {
    quietwatt_sys::thread::pin_to_cpu(cpu).map_err(scenario_err(format!(
        "pin a thread to CPU {cpu} (is it online?)"
    )))
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills the two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(scenario_err("create a pipe".into())(
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: the kernel just returned these descriptors; nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn put(fd: &OwnedFd, b: u8) -> Result<()> {
    match rustix::io::write(fd.as_fd(), &[b]) {
        Ok(1) => Ok(()),
        Ok(_) => Err(scenario_err("write to a pipe".into())(
            io::ErrorKind::WriteZero.into(),
        )),
        Err(e) => Err(scenario_err("write to a pipe".into())(e.into())),
    }
}

fn get(fd: &OwnedFd) -> Result<u8> {
    let mut b = [0u8];
    loop {
        match rustix::io::read(fd.as_fd(), &mut b) {
            Ok(1) => return Ok(b[0]),
            Ok(_) => {
                return Err(scenario_err("read from a pipe".into())(
                    io::ErrorKind::UnexpectedEof.into(),
                ))
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(scenario_err("read from a pipe".into())(e.into())),
        }
    }
}

impl Scenario for SwitchScenario {
    fn spec(&self) -> ScenarioSpec {
        let (name, description, baseline, x) = match self.kind {
            SwitchKind::Baseline => (
                "pipes",
                "one thread writes a byte to a pipe and reads it back, twice per exchange (the ping-pong's syscalls without a switch)",
                true,
                XAxis::Intended,
            ),
            SwitchKind::PingPong => (
                "pingpong",
                "two threads pinned to one CPU pass a byte back and forth through two pipes (two context switches per exchange)",
                false,
                XAxis::Measured,
            ),
        };
        ScenarioSpec {
            name: name.into(),
            description: format!("{description}; CPU {}", self.cpu),
            baseline,
            x,
            counted: SoftwareEvent::ContextSwitches.name().into(),
            unit: "context switch".into(),
        }
    }

    fn run(&mut self, count: u64, batch: u32, probe: &mut EnergyProbe) -> Result<Measured> {
        // Two switches per exchange.
        let exchanges = (count / 2).max(1) * batch.max(1) as u64;
        let (a_r, a_w) = pipe()?;
        let (b_r, b_w) = pipe()?;
        let (a_r, a_w, b_r, b_w) = (&a_r, &a_w, &b_r, &b_w);
        let cpu = self.cpu;
        let kind = self.kind;
        std::thread::scope(|s| -> Result<Measured> {
            let (tid_tx, tid_rx) = std::sync::mpsc::sync_channel::<Result<i32>>(1);
            let partner = (kind == SwitchKind::PingPong).then(|| {
                s.spawn(move || -> Result<()> {
                    let r = pin(cpu).map(|()| rustix::thread::gettid().as_raw_nonzero().get());
                    let ok = r.is_ok();
                    let _ = tid_tx.send(r);
                    if !ok {
                        return Ok(());
                    }
                    // Answers every byte until told to stop (0).
                    loop {
                        let b = get(a_r)?;
                        if b == 0 {
                            return Ok(());
                        }
                        put(b_w, b)?;
                    }
                })
            });
            let driver = s.spawn(move || -> Result<Measured> {
                pin(cpu)?;
                let mut counters = vec![TaskCounter::open(
                    SoftwareEvent::ContextSwitches,
                    Task::ThisThread,
                )?];
                if kind == SwitchKind::PingPong {
                    let tid = tid_rx.recv().map_err(|_| Error::Scenario {
                        what: "start the ping-pong partner".into(),
                        source: io::Error::other("the thread ended"),
                    })??;
                    counters.push(TaskCounter::open(
                        SoftwareEvent::ContextSwitches,
                        Task::Id(tid),
                    )?);
                }
                probe.begin()?;
                let c0: Vec<u64> = counters
                    .iter()
                    .map(super::counters::TaskCounter::read)
                    .collect::<Result<_>>()?;
                let t0 = Instant::now();
                for _ in 0..exchanges {
                    match kind {
                        SwitchKind::PingPong => {
                            put(a_w, 1)?;
                            get(b_r)?;
                        }
                        SwitchKind::Baseline => {
                            put(a_w, 1)?;
                            get(a_r)?;
                            put(b_w, 1)?;
                            get(b_r)?;
                        }
                    }
                }
                let wall = t0.elapsed().as_secs_f64();
                let c1: Vec<u64> = counters
                    .iter()
                    .map(super::counters::TaskCounter::read)
                    .collect::<Result<_>>()?;
                let joules = probe.end()?;
                let switches: u64 = c1.iter().zip(&c0).map(|(a, b)| a - b).sum();
                Ok(Measured {
                    events: switches,
                    counts: BTreeMap::from([(
                        SoftwareEvent::ContextSwitches.name().to_string(),
                        switches,
                    )]),
                    seconds: wall,
                    wall_seconds: wall,
                    joules,
                })
            });
            let result = driver.join().unwrap_or_else(|_| {
                Err(Error::Scenario {
                    what: "run the context-switch driver".into(),
                    source: io::Error::other("the thread panicked"),
                })
            });
            // Stop the partner whatever happened (a 0 byte; EOF if the write fails).
            let _ = put(a_w, 0);
            if let Some(p) = partner {
                let _ = p.join();
            }
            result
        })
    }
}

/// Both variants on `cpu` at `counts` switches per execution; batch as
/// [`super::scenario::plan`] chooses it.
pub fn plan(
    counts: &[u64],
    batch: Option<u32>,
    min_run: Duration,
    cpu: usize,
) -> Result<Vec<Planned>> {
    let lo = counts.iter().copied().min().unwrap_or(2);
    let kinds = [SwitchKind::Baseline, SwitchKind::PingPong];
    plan_each(
        kinds.map(|k| SwitchScenario::new(k, cpu)),
        counts,
        batch,
        lo,
        min_run,
        1000,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ping_pong_switches_twice_per_exchange_and_the_baseline_does_not() {
        let mut probe = EnergyProbe::new(None);
        let mut p = SwitchScenario::new(SwitchKind::PingPong, 0);
        let m = p.run(2000, 1, &mut probe).unwrap();
        // 1000 exchanges, 2 switches each; a tick or a stray task may add a few.
        assert!((1900..=2300).contains(&m.events), "{}", m.events);
        let mut b = SwitchScenario::new(SwitchKind::Baseline, 0);
        let m = b.run(2000, 1, &mut probe).unwrap();
        assert!(m.events < 100, "{}", m.events);
    }
}
