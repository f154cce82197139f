//! What the sampling loops do when a read fails with an error that may pass
//! ([`ErrorKind::CanRetry`]: EAGAIN, EINTR, EBUSY, ENOMEM, a timeout), after the
//! idea of Alumet's run loop acting on `PollError::CanRetry`:
//!
//! 1. the read is tried again at once, up to [`RetryPolicy::retries_per_tick`]
//!    more times within the same tick;
//! 2. if every try failed, the tick is skipped: no sample is taken, so no number
//!    is made up; the next good read's sample spans the skipped tick (a counter's
//!    delta covers it) and counts it among its missed deadlines;
//! 3. after [`RetryPolicy::max_failed_ticks`] consecutive skipped ticks the loop
//!    gives up with the error, as it does at once for any other error.
//!
//! Retried reads and skipped ticks are counted ([`SamplerCounts::read_retries`],
//! [`SamplerCounts::skipped_ticks`]) and reported with the overhead. Nothing here
//! allocates or locks.

use crate::error::{Error, ErrorKind, Result};
use crate::overhead::SamplerCounts;
use crate::ticker::monotonic_ns;

/// How often a retryable read error is tried again before the sampling gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Extra tries of a failed read within the same tick.
    pub retries_per_tick: u32,
    /// Consecutive ticks whose every try failed after which the error ends the run.
    pub max_failed_ticks: u32,
}

impl RetryPolicy {
    /// Three extra tries a tick; ten failed ticks in a row end the run. A transient
    /// refusal (a FUSE read interrupted, a busy driver) passes within a few µs; a
    /// source failing for ten whole ticks is not transient.
    pub const DEFAULT: RetryPolicy = RetryPolicy {
        retries_per_tick: 3,
        max_failed_ticks: 10,
    };
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy::DEFAULT
    }
}

/// What one tick's read came to.
#[derive(Debug)]
pub(crate) enum Tick {
    /// Read at this CLOCK_MONOTONIC time (ns).
    Read(u64),
    /// Every try failed with a retryable error: no sample this tick.
    Skipped,
    /// The error that ends the run.
    Failed(Error),
}

/// A [`RetryPolicy`] with the run's streak of failed ticks.
#[derive(Debug, Default)]
pub(crate) struct Retrier {
    policy: RetryPolicy,
    streak: u32,
}

impl Retrier {
    /// A retrier with no failed tick yet.
    pub(crate) fn new(policy: RetryPolicy) -> Retrier {
        Retrier { policy, streak: 0 }
    }

    /// One tick's read: `read` is called (after a timestamp), and again at once
    /// while it fails with a retryable error and tries are left.
    #[inline]
    pub(crate) fn read(
        &mut self,
        counts: &mut SamplerCounts,
        mut read: impl FnMut() -> Result<()>,
    ) -> Tick {
        let mut left = self.policy.retries_per_tick;
        loop {
            let t = monotonic_ns();
            let e = match read() {
                Ok(()) => {
                    self.streak = 0;
                    return Tick::Read(t);
                }
                Err(e) => e,
            };
            if e.kind() != ErrorKind::CanRetry {
                return Tick::Failed(e);
            }
            if left > 0 {
                left -= 1;
                counts.read_retries += 1;
                continue;
            }
            self.streak += 1;
            if self.streak >= self.policy.max_failed_ticks {
                return Tick::Failed(e);
            }
            counts.skipped_ticks += 1;
            return Tick::Skipped;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietwatt_sources::Error as SourceError;
    use std::path::PathBuf;

    fn io(errno: i32) -> Error {
        Error::Source(SourceError::Io {
            path: PathBuf::from("energy_uj"),
            source: std::io::Error::from_raw_os_error(errno),
        })
    }

    #[test]
    fn a_transient_error_is_retried_within_the_tick() {
        let mut r = Retrier::new(RetryPolicy::DEFAULT);
        let mut c = SamplerCounts::default();
        let mut fails = 2;
        let tick = r.read(&mut c, || {
            if fails > 0 {
                fails -= 1;
                Err(io(libc::EAGAIN))
            } else {
                Ok(())
            }
        });
        assert!(matches!(tick, Tick::Read(_)));
        assert_eq!((c.read_retries, c.skipped_ticks), (2, 0));
    }

    #[test]
    fn a_tick_that_keeps_failing_is_skipped_then_the_run_gives_up() {
        let policy = RetryPolicy {
            retries_per_tick: 1,
            max_failed_ticks: 3,
        };
        let mut r = Retrier::new(policy);
        let mut c = SamplerCounts::default();
        assert!(matches!(
            r.read(&mut c, || Err(io(libc::EBUSY))),
            Tick::Skipped
        ));
        // A good tick resets the streak.
        assert!(matches!(r.read(&mut c, || Ok(())), Tick::Read(_)));
        assert!(matches!(
            r.read(&mut c, || Err(io(libc::EBUSY))),
            Tick::Skipped
        ));
        assert!(matches!(
            r.read(&mut c, || Err(io(libc::EBUSY))),
            Tick::Skipped
        ));
        match r.read(&mut c, || Err(io(libc::EBUSY))) {
            Tick::Failed(e) => assert_eq!(e.kind(), ErrorKind::CanRetry),
            t => panic!("gave up expected, got {t:?}"),
        }
        assert_eq!((c.read_retries, c.skipped_ticks), (4, 3));
    }

    #[test]
    fn a_lasting_error_ends_the_run_at_once() {
        let mut r = Retrier::new(RetryPolicy::DEFAULT);
        let mut c = SamplerCounts::default();
        assert!(matches!(
            r.read(&mut c, || Err(io(libc::ENODEV))),
            Tick::Failed(_)
        ));
        assert_eq!((c.read_retries, c.skipped_ticks), (0, 0));
    }
}
