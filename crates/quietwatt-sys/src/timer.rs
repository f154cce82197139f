//! A CLOCK_MONOTONIC timerfd: absolute deadlines whose expiration count tells how
//! many passed while the caller was busy, and which another thread can fire at once
//! to end a wait.

use rustix::fd::OwnedFd;
use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec};
use std::io;

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
    #[inline]
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
