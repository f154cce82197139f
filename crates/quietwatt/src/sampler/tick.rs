//! The sampling loops, once: the polled one (a read per tick of the [`Pacer`]) and
//! the buffered one (a drain per drain period), shared by the recording's sampler
//! ([`super::run`]) and a session's (`session/engine.rs`).
//!
//! What differs between the two is what a tick reads and where the reading goes
//! (raw deltas with marks into the writer's ring, or raw values into a session's
//! outbox), and what ends the loop besides a stop (a duration, the caller's flag, a
//! reader that met a bad reading): a [`Sampling`] says it, and the loops are
//! generic over it, so that each user gets its own monomorphised loop with no
//! indirect call, no allocation and no lock added. What is the same lives here:
//! the wait, the stop (its early wake-up is neither late nor a miss, and one last
//! reading is taken), the retries and skipped ticks ([`crate::retry`]), the
//! missed-deadline arithmetic, the drain schedule and the counts.

use crate::error::{Error, Result};
use crate::overhead::SamplerCounts;
use crate::retry::{Retrier, RetryPolicy, Tick};
use crate::ticker::{monotonic_ns, period_ns, Hertz, Pacer, TimerFd};
use std::time::Duration;

/// What one sampler reads, where its readings go and when it ends: the part of
/// the sampling loops ([`polled`], [`buffered`]) that is its own.
pub(crate) trait Sampling {
    /// Whether a stop was asked: it wakes the timer early (that wake-up is not a
    /// tick) and the loop ends after one last reading.
    fn stopping(&self) -> bool;

    /// Whether the loop ends for another reason at `now` (CLOCK_MONOTONIC ns): a
    /// duration over, the caller's flag, a reader that met a bad reading. Checked
    /// after each reading (`now` is its time) and each skipped tick.
    fn ends(&self, now: u64) -> bool;

    /// Polled: one tick's read (timestamped by `retrier`, retried by it on a
    /// retryable error), kept until [`Sampling::push`].
    fn read(&mut self, retrier: &mut Retrier, counts: &mut SamplerCounts) -> Tick;

    /// Polled: passes on the reading just read, taken at `t`; `missed` deadlines
    /// passed since the previous one (`counts.last_ns`), and it spans them.
    fn push(&mut self, t: u64, missed: u64, counts: &mut SamplerCounts);

    /// Polled: after a reading was pushed and the loop goes on (an adaptive rate
    /// re-arms `pacer`).
    #[inline]
    fn pushed(&mut self, t: u64, pacer: &mut Pacer<'_>, counts: &mut SamplerCounts) {
        let _ = (t, pacer, counts);
    }

    /// Buffered: the timer that wakes the drains (a stop wakes it); without one
    /// the loop sleeps.
    fn timer(&self) -> Option<&TimerFd>;

    /// Buffered: when the loop ends on its own (a duration), to wake for then.
    #[inline]
    fn end_ns(&self) -> Option<u64> {
        None
    }

    /// Buffered: hands every reading the kernel queued to `each` ([`Each::take`]),
    /// oldest first; `last` on the last drain, which takes the last reading.
    fn drain(&mut self, last: bool, each: &mut Each<'_>) -> Result<()>;

    /// Buffered: after a drain at `now` (the recording wakes its writer).
    #[inline]
    fn drained(&mut self, now: u64) {
        let _ = now;
    }
}

/// The polled loop: one read per tick of `pacer` until stopped or
/// [`Sampling::ends`]; returns the read error that ended it, if one did. The hot
/// loop: a timer read, the source's reads, a push; nothing allocates or locks.
pub(crate) fn polled<S: Sampling>(
    s: &mut S,
    pacer: &mut Pacer<'_>,
    counts: &mut SamplerCounts,
) -> Option<Error> {
    let mut retrier = Retrier::new(RetryPolicy::DEFAULT);
    // Ticks skipped on transient read errors since the last sample: it spans them.
    let mut skipped = 0;
    loop {
        let wake = pacer.wait();
        // A stop wakes the timer early: that wake-up is neither late nor a miss.
        let stopping = s.stopping();
        if !stopping {
            counts.lateness.record(wake.late_ns);
        }
        let t = match s.read(&mut retrier, counts) {
            Tick::Read(t) => t,
            // No sample: the next one spans this tick (see `crate::retry`).
            Tick::Skipped => {
                skipped += 1 + if stopping { 0 } else { wake.missed };
                if stopping || s.ends(monotonic_ns()) {
                    // The run ends at the last good reading.
                    counts.missed += skipped;
                    return None;
                }
                continue;
            }
            Tick::Failed(e) => return Some(e),
        };
        // The misses are those before the wake-up and those that passed while this
        // thread was held between the wake-up and the read (a SIGSTOP): this
        // sample's energy and timestamp span both, so it reports both; and the
        // ticks skipped on transient errors, which it spans too.
        let missed = if stopping {
            0
        } else {
            wake.missed + pacer.overdue(t)
        } + std::mem::take(&mut skipped);
        counts.missed += missed;
        s.push(t, missed, counts);
        counts.samples += 1;
        counts.wakes += 1;
        counts.last_ns = t;
        if stopping || s.ends(t) {
            return None;
        }
        s.pushed(t, pacer, counts);
    }
}

/// The buffered loop, for a source the kernel samples at `freq`: wakes every
/// `drain` period (or at [`Sampling::end_ns`], or at once when stopped) and has
/// every queued reading drained, until stopped or [`Sampling::ends`]; the last
/// drain takes the last reading. Returns the error that ended it. Allocates
/// nothing, locks nothing.
pub(crate) fn buffered<S: Sampling>(
    s: &mut S,
    freq: Hertz,
    drain: Hertz,
    counts: &mut SamplerCounts,
) -> Option<Error> {
    let period = crate::source::inkernel::period_ns(freq);
    let drain_ns = period_ns(drain);
    let mut next = counts.first_ns + drain_ns;
    loop {
        let until = s.end_ns().map_or(next, |e| e.min(next));
        match s.timer() {
            // One-shot at the deadline; a stop after this arming wakes it, and one
            // before is seen just below.
            Some(t) => {
                if t.arm(until, 0).is_ok() && !s.stopping() {
                    t.wait();
                }
            }
            None => std::thread::sleep(Duration::from_nanos(until.saturating_sub(monotonic_ns()))),
        }
        let now = monotonic_ns();
        let last = s.stopping() || s.ends(now);
        if now >= next {
            // Drains slept through are skipped rather than run in a burst.
            next += drain_ns * ((now - next) / drain_ns + 1);
        }
        let drained = s.drain(
            last,
            &mut Each {
                counts: &mut *counts,
                period,
            },
        );
        counts.wakes += 1;
        s.drained(now);
        if let Err(e) = drained {
            return Some(e);
        }
        if last {
            return None;
        }
    }
}

/// The accounting of each reading a drain hands over ([`Sampling::drain`]).
pub(crate) struct Each<'c> {
    counts: &'c mut SamplerCounts,
    /// The kernel's sampling period: a longer interval is late by the difference.
    period: u64,
}

impl Each<'_> {
    /// Accounts one reading taken at `t`, `lost` readings after the previous one
    /// (`counts.last_ns`), around `push`, which passes it on and is given the
    /// interval since the previous one.
    #[inline]
    pub(crate) fn take(&mut self, t: u64, lost: u64, push: impl FnOnce(&mut SamplerCounts, u64)) {
        let counts = &mut *self.counts;
        let interval = t.saturating_sub(counts.last_ns);
        counts.lateness.record(interval.saturating_sub(self.period));
        counts.missed += lost;
        push(counts, interval);
        counts.last_ns = t;
        counts.samples += 1;
    }
}

#[cfg(test)]
mod tests;
