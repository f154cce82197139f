//! Absolute-deadline pacing on CLOCK_MONOTONIC, so that the time spent reading does
//! not stretch the period (a relative sleep loses ticks; paper 002 Fig. 5).
//!
//! [`Ticker`] sleeps with `clock_nanosleep(TIMER_ABSTIME)`; [`Pacer`] waits on a
//! timerfd, whose expiration count tells how many deadlines passed while the loop was
//! busy, and which another thread can fire at once ([`TimerFd::wake`]) to end a wait.

use rustix::fd::OwnedFd;
use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec};
use std::fmt;
use std::io;
use std::str::FromStr;
use std::time::Duration;

/// CLOCK_MONOTONIC in nanoseconds: the clock of perf samples and tracepoints.
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The highest sampling frequency accepted: RAPL updates about every millisecond, and
/// beyond 100 kHz a read costs more than the period.
pub const MAX_HZ: f64 = 100_000.0;

/// A sampling frequency in hertz, in (0, 100 kHz].
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Hertz(f64);

/// A frequency outside (0, 100 kHz] or not a number.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "invalid frequency '{0}': give a number of hertz above 0 and at most 100000 (e.g. 1000 or 2kHz)"
)]
pub struct InvalidFrequency(pub String);

impl Hertz {
    /// A checked frequency.
    pub fn new(hz: f64) -> Result<Hertz, InvalidFrequency> {
        if hz.is_finite() && hz > 0.0 && hz <= MAX_HZ {
            Ok(Hertz(hz))
        } else {
            Err(InvalidFrequency(hz.to_string()))
        }
    }

    /// `hz` brought into (0, 100 kHz] (a NaN becomes the maximum): for rates computed
    /// from rates already checked.
    pub fn clamped(hz: f64) -> Hertz {
        if hz.is_nan() {
            return Hertz(MAX_HZ);
        }
        Hertz(hz.clamp(f64::MIN_POSITIVE, MAX_HZ))
    }

    /// The value in hertz.
    pub fn hz(self) -> f64 {
        self.0
    }

    /// The sampling period.
    pub fn period(self) -> Duration {
        Duration::from_secs_f64(1.0 / self.0)
    }
}

impl FromStr for Hertz {
    type Err = InvalidFrequency;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let (num, mult) = if let Some(k) = t.strip_suffix("kHz").or_else(|| t.strip_suffix("khz")) {
            (k, 1000.0)
        } else {
            (
                t.strip_suffix("Hz")
                    .or_else(|| t.strip_suffix("hz"))
                    .unwrap_or(t),
                1.0,
            )
        };
        let hz: f64 = num
            .trim()
            .parse()
            .map_err(|_| InvalidFrequency(s.to_string()))?;
        Hertz::new(hz * mult).map_err(|_| InvalidFrequency(s.to_string()))
    }
}

impl fmt::Display for Hertz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} Hz", self.0)
    }
}

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

fn timespec(ns: u64) -> Timespec {
    Timespec {
        tv_sec: (ns / 1_000_000_000) as _,
        tv_nsec: (ns % 1_000_000_000) as _,
    }
}

/// A CLOCK_MONOTONIC timerfd.
#[derive(Debug)]
pub struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    /// A disarmed timer.
    pub fn new() -> io::Result<TimerFd> {
        let fd = rustix::time::timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::CLOEXEC)?;
        Ok(TimerFd { fd })
    }

    /// Arms the timer to expire at the absolute time `first_ns`, then every `period_ns`.
    /// Expirations not yet read are discarded (the kernel resets the count).
    pub fn arm(&self, first_ns: u64, period_ns: u64) -> io::Result<()> {
        let spec = Itimerspec {
            it_interval: timespec(period_ns),
            it_value: timespec(first_ns.max(1)),
        };
        rustix::time::timerfd_settime(&self.fd, TimerfdTimerFlags::ABSTIME, &spec)?;
        Ok(())
    }

    /// Blocks until the timer expires; returns the expirations since the last read
    /// (1 when on time, more when deadlines passed unseen).
    pub fn wait(&self) -> u64 {
        let mut buf = [0u8; 8];
        loop {
            match rustix::io::read(&self.fd, &mut buf) {
                Ok(8) => return u64::from_ne_bytes(buf),
                // A signal landed on this thread: whoever wants the wait to end also
                // calls `wake`, so waiting again is right.
                Err(rustix::io::Errno::INTR) => continue,
                // Cannot happen for a valid timerfd; count it as one tick rather than spin.
                _ => return 1,
            }
        }
    }

    /// Makes a blocked (or the next) [`TimerFd::wait`] return at once, from any
    /// thread. The periodic schedule is dropped: this is for stopping.
    pub fn wake(&self) {
        let spec = Itimerspec {
            it_interval: timespec(0),
            it_value: timespec(1),
        };
        // Relative 1 ns: fires immediately. Failure is impossible for a valid fd.
        let _ = rustix::time::timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &spec);
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

/// A frequency's period in whole nanoseconds (at least 1).
pub fn period_ns(freq: Hertz) -> u64 {
    (1e9 / freq.hz()).round().max(1.0) as u64
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

    #[test]
    fn frequencies_are_checked() {
        assert_eq!("1000".parse::<Hertz>().unwrap().hz(), 1000.0);
        assert_eq!("2kHz".parse::<Hertz>().unwrap().hz(), 2000.0);
        assert_eq!(
            "0.5".parse::<Hertz>().unwrap().period(),
            Duration::from_secs(2)
        );
        for bad in ["0", "-1", "100001", "nan", "inf", "fast", ""] {
            assert!(bad.parse::<Hertz>().is_err(), "{bad} accepted");
        }
    }
}
