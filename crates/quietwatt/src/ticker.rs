//! Absolute-deadline pacing on CLOCK_MONOTONIC, so that the time spent reading does
//! not stretch the period (a relative sleep loses ticks; paper 002 Fig. 5).
//!
//! [`Ticker`] sleeps with `clock_nanosleep(TIMER_ABSTIME)`; [`Pacer`] waits on a
//! timerfd, whose expiration count tells how many deadlines passed while the loop was
//! busy, and which another thread can fire at once ([`TimerFd::wake`]) to end a wait.

use std::io;
use std::time::Duration;

pub use quietwatt_core::frequency::{period_ns, Hertz, InvalidFrequency, MAX_HZ};
pub use quietwatt_sys::clock::monotonic_ns;
pub use quietwatt_sys::timer::TimerFd;

/// Deadlines at `start + k * period`.
#[derive(Debug, Clone)]
pub struct Ticker {
    period_ns: u64,
    next_ns: u64,
}

impl Ticker {
    /// A ticker whose first deadline is one period from now.
    pub fn new(freq: Hertz) -> Ticker {
        let period_ns = (1e9 / freq.hz()).round().max(1.0) as u64;
        Ticker {
            period_ns,
            next_ns: monotonic_ns() + period_ns,
        }
    }

    /// Time left until the next deadline (zero when it has passed).
    pub fn remaining(&self) -> Duration {
        Duration::from_nanos(self.next_ns.saturating_sub(monotonic_ns()))
    }

    /// Sleeps until the next deadline, then moves it one period on. Deadlines that
    /// already passed are skipped rather than fired in a burst; returns how many.
    pub fn wait(&mut self) -> u64 {
        let ts = rustix::time::Timespec {
            tv_sec: (self.next_ns / 1_000_000_000) as _,
            tv_nsec: (self.next_ns % 1_000_000_000) as _,
        };
        // EINTR (a signal) just ends the sleep early; the caller checks its stop flag.
        let _ = rustix::thread::clock_nanosleep_absolute(rustix::thread::ClockId::Monotonic, &ts);
        self.advance()
    }

    /// Moves the deadline past now; returns how many deadlines were missed.
    pub fn advance(&mut self) -> u64 {
        let now = monotonic_ns();
        self.next_ns += self.period_ns;
        let mut missed = 0;
        if now >= self.next_ns {
            missed = (now - self.next_ns) / self.period_ns + 1;
            self.next_ns += missed * self.period_ns;
        }
        missed
    }
}

/// How a sampling loop waits for its next tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pacing {
    /// Absolute deadlines on a timerfd: the time spent reading does not stretch the
    /// period, and expirations beyond one are deadlines missed.
    #[default]
    TimerFd,
    /// `sleep(period)` after each read, as many tools do: the period stretches by the
    /// work and the wake-up latency of every tick (paper 002's "badsleep"). Kept to
    /// measure that difference, not to record with.
    RelativeSleep,
}

/// One wake-up of a [`Pacer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wake {
    /// Deadlines that passed unserved since the previous wake-up.
    pub missed: u64,
    /// How long after its deadline this wake-up came (for a relative sleep: after
    /// the time it asked to wake at).
    pub late_ns: u64,
}

/// Waits for ticks at a rate that can change, on a timerfd or with relative sleeps.
#[derive(Debug)]
pub struct Pacer<'t> {
    timer: Option<&'t TimerFd>,
    period_ns: u64,
    /// The deadline the next expiration serves (timerfd) or the requested wake time (sleep).
    next_ns: u64,
    /// Deadlines from `next_ns` on already reported missed by [`Pacer::overdue`]:
    /// the next wait's expirations include them and must not report them again.
    reported: u64,
    /// The read time last given to [`Pacer::overdue`] since the last wait.
    read_ns: Option<u64>,
}

impl<'t> Pacer<'t> {
    /// Ticks at `freq` from `start_ns` (the first at `start_ns + period`): on `timer`
    /// with absolute deadlines, or by relative sleeps when `timer` is `None`.
    pub fn start(timer: Option<&'t TimerFd>, start_ns: u64, freq: Hertz) -> io::Result<Pacer<'t>> {
        let period_ns = period_ns(freq);
        let next_ns = start_ns + period_ns;
        if let Some(t) = timer {
            t.arm(next_ns, period_ns)?;
        }
        Ok(Pacer {
            timer,
            period_ns,
            next_ns,
            reported: 0,
            read_ns: None,
        })
    }

    /// Blocks until the next tick. Allocates nothing; one `read` (timerfd) or one
    /// `nanosleep` plus two vDSO clock reads.
    pub fn wait(&mut self) -> Wake {
        match self.timer {
            Some(t) => {
                let expirations = t.wait().max(1);
                let now = monotonic_ns();
                // The latest deadline that fired is the one this wake-up serves.
                let served = self.next_ns + (expirations - 1) * self.period_ns;
                self.next_ns = served + self.period_ns;
                let missed = (expirations - 1).saturating_sub(self.reported);
                self.reported = 0;
                self.read_ns = None;
                Wake {
                    missed,
                    late_ns: now.saturating_sub(served),
                }
            }
            None => {
                let asked = monotonic_ns() + self.period_ns;
                std::thread::sleep(Duration::from_nanos(self.period_ns));
                let now = monotonic_ns();
                self.next_ns = now + self.period_ns;
                Wake {
                    missed: 0,
                    late_ns: now.saturating_sub(asked),
                }
            }
        }
    }

    /// Deadlines missed between the last wake-up and a read taken at `t_ns`, not
    /// yet reported: all that passed by `t_ns` but the latest, which the next wait
    /// serves at once (late). The read at `t_ns` covers them, so its sample must say
    /// so; without this a thread held up between its wake-up and its read (a
    /// SIGSTOP, a preemption) would have the *next* sample report the gap. The next
    /// [`Pacer::wait`] leaves these out of its count, so none is counted twice.
    /// Pure arithmetic: no system call. Always 0 for relative sleeps.
    pub fn overdue(&mut self, t_ns: u64) -> u64 {
        self.read_ns = Some(t_ns);
        if self.timer.is_none() || t_ns < self.next_ns {
            return 0;
        }
        let passed = (t_ns - self.next_ns) / self.period_ns + 1;
        let new = (passed - 1).saturating_sub(self.reported);
        self.reported += new;
        new
    }

    /// Changes the rate: the next deadline is one new period after the last one served.
    pub fn set_rate(&mut self, freq: Hertz) -> io::Result<()> {
        let period = period_ns(freq);
        let last = self.next_ns - self.period_ns;
        self.period_ns = period;
        self.next_ns = last + period;
        // Re-arming discards the expirations not yet read, those reported included;
        // the new schedule's deadlines that the last read already covered were
        // reported under the old rate (or were not due under it).
        self.reported = 0;
        if let Some(t) = self.read_ns {
            self.overdue(t);
        }
        if let Some(t) = self.timer {
            t.arm(self.next_ns, period)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timerfd_counts_the_deadlines_a_busy_loop_missed() {
        let timer = TimerFd::new().unwrap();
        let t0 = monotonic_ns();
        let mut p = Pacer::start(Some(&timer), t0, Hertz::new(1000.0).unwrap()).unwrap();
        // On time: no deadline missed (unless this thread was kept off the CPU).
        let w = p.wait();
        assert!(w.missed <= (monotonic_ns() - t0) / 1_000_000, "{w:?}");
        // Busy for 5.5 periods (or more on a loaded machine): the next wait serves
        // the latest deadline and says how many passed.
        let t = monotonic_ns();
        std::thread::sleep(Duration::from_micros(5500));
        let w = p.wait();
        let busy_periods = (monotonic_ns() - t) / 1_000_000;
        assert!(
            w.missed >= 4 && w.missed <= busy_periods + 1,
            "{w:?} after {busy_periods} periods"
        );
        // A wake from elsewhere ends a wait at once, even at 0.1 Hz.
        p.set_rate(Hertz::new(0.1).unwrap()).unwrap();
        let t0 = monotonic_ns();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(20));
                timer.wake();
            });
            p.wait();
        });
        assert!(monotonic_ns() - t0 < 5_000_000_000);
    }

    #[test]
    fn deadlines_missed_before_a_held_read_are_reported_once_with_that_read() {
        let timer = TimerFd::new().unwrap();
        let mut p =
            Pacer::start(Some(&timer), monotonic_ns(), Hertz::new(1000.0).unwrap()).unwrap();
        p.wait();
        // Held for 5.5 periods (or more) between the wake-up and the read, as by a
        // SIGSTOP: at least 5 deadlines passed; the latest is served by the next
        // wake-up, which comes at once, so the read reports the others.
        std::thread::sleep(Duration::from_micros(5500));
        let t = monotonic_ns();
        let late = p.overdue(t);
        assert!(late >= 4, "{late}");
        assert_eq!(p.overdue(t), 0, "reported twice");
        // The next wake-up reports only what passed after the read.
        let w = p.wait();
        let after = (monotonic_ns() - t) / 1_000_000;
        assert!(
            w.missed <= after + 1,
            "{w:?} {after} periods after the read"
        );
        // Relative sleeps have no deadlines to miss.
        let mut r = Pacer::start(None, monotonic_ns(), Hertz::new(1000.0).unwrap()).unwrap();
        r.wait();
        std::thread::sleep(Duration::from_micros(5500));
        assert_eq!(r.overdue(monotonic_ns()), 0);
    }
}
