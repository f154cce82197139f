//! The shared loops on a scripted [`Sampling`]: what they count and pass on,
//! never how fast (the pacer sleeps; nothing here depends on when it wakes).

use super::*;
use crate::SourceError;
use std::path::PathBuf;

/// A scripted sampler: the tries of reads in `failing` (first, last) fail with EAGAIN
/// (tries count from 1), and it ends after `pushes_until_end` readings.
#[derive(Default)]
struct Script {
    tries: u64,
    failing: (u64, u64),
    pushes_until_end: usize,
    stop: bool,
    /// Each reading passed on: its time, the misses it spans, and the previous
    /// reading's time it was given (`counts.last_ns`).
    pushes: Vec<(u64, u64, u64)>,
    /// Times the loop went on after a push.
    went_on: usize,
    /// Buffered: the readings each drain hands over, `(t, lost)`.
    queued: Vec<Vec<(u64, u64)>>,
    /// Buffered: each drain's `last`, and the interval each reading was given.
    drains: Vec<bool>,
    intervals: Vec<u64>,
}

impl Sampling for Script {
    fn stopping(&self) -> bool {
        self.stop
    }
    fn ends(&self, _now: u64) -> bool {
        self.pushes.len() >= self.pushes_until_end
    }
    fn read(&mut self, retrier: &mut Retrier, counts: &mut SamplerCounts) -> Tick {
        retrier.read(counts, || {
            self.tries += 1;
            if (self.failing.0..=self.failing.1).contains(&self.tries) {
                return Err(Error::Source(SourceError::Io {
                    path: PathBuf::from("energy_uj"),
                    source: std::io::Error::from_raw_os_error(libc::EAGAIN),
                }));
            }
            Ok(())
        })
    }
    fn push(&mut self, t: u64, missed: u64, counts: &mut SamplerCounts) {
        self.pushes.push((t, missed, counts.last_ns));
    }
    fn pushed(&mut self, _t: u64, _pacer: &mut Pacer<'_>, _counts: &mut SamplerCounts) {
        self.went_on += 1;
    }
    fn timer(&self) -> Option<&TimerFd> {
        None
    }
    fn drain(&mut self, last: bool, each: &mut Each<'_>) -> Result<()> {
        self.drains.push(last);
        let batch = if self.queued.is_empty() {
            Vec::new()
        } else {
            self.queued.remove(0)
        };
        for (t, lost) in batch {
            each.take(t, lost, |_, interval| self.intervals.push(interval));
            self.pushes.push((t, lost, 0));
        }
        Ok(())
    }
}

fn counts_from(first_ns: u64) -> SamplerCounts {
    SamplerCounts {
        first_ns,
        last_ns: first_ns,
        ..SamplerCounts::default()
    }
}

fn khz() -> Hertz {
    Hertz::new(1000.0).unwrap()
}

#[test]
fn skipped_ticks_are_spanned_by_the_next_reading_and_counted_missed() {
    // The second and third ticks fail every try (four each): both are skipped.
    let mut s = Script {
        failing: (2, 9),
        pushes_until_end: 3,
        ..Script::default()
    };
    let first = monotonic_ns();
    let mut counts = counts_from(first);
    let mut pacer = Pacer::start(None, first, khz()).unwrap();
    assert!(polled(&mut s, &mut pacer, &mut counts).is_none());
    assert_eq!((counts.skipped_ticks, counts.read_retries), (2, 6));
    assert_eq!((counts.samples, counts.wakes), (3, 3));
    assert_eq!(s.pushes.len(), 3);
    assert!(s.pushes[1].1 >= 2, "{:?}", s.pushes);
    let missed: u64 = s.pushes.iter().map(|p| p.1).sum();
    assert_eq!(counts.missed, missed, "every miss is in a reading");
    // Each reading follows the one before it (the first, the priming read).
    let mut prev = first;
    for &(t, _, given) in &s.pushes {
        assert_eq!(given, prev);
        prev = t;
    }
    assert_eq!(counts.last_ns, prev);
    // The loop went on after every reading but the last.
    assert_eq!(s.went_on, 2);
}

#[test]
fn a_stop_takes_one_last_reading_that_is_neither_late_nor_missed() {
    let mut s = Script {
        stop: true,
        pushes_until_end: usize::MAX,
        ..Script::default()
    };
    let first = monotonic_ns();
    let mut counts = counts_from(first);
    let mut pacer = Pacer::start(None, first, khz()).unwrap();
    assert!(polled(&mut s, &mut pacer, &mut counts).is_none());
    assert_eq!(s.pushes.len(), 1);
    assert_eq!((s.pushes[0].1, counts.missed), (0, 0));
    assert_eq!(counts.lateness.count(), 0);
    assert_eq!((counts.samples, s.went_on), (1, 0));
}

#[test]
fn a_stop_on_a_skipped_tick_ends_at_the_last_good_reading() {
    let mut s = Script {
        stop: true,
        failing: (1, 4),
        pushes_until_end: usize::MAX,
        ..Script::default()
    };
    let first = monotonic_ns();
    let mut counts = counts_from(first);
    let mut pacer = Pacer::start(None, first, khz()).unwrap();
    assert!(polled(&mut s, &mut pacer, &mut counts).is_none());
    assert!(s.pushes.is_empty());
    // The skipped tick is missed; the stop's wake-up is not.
    assert_eq!(
        (counts.samples, counts.missed, counts.last_ns),
        (0, 1, first)
    );
}

#[test]
fn drains_account_every_reading_and_the_last_drain_is_the_last() {
    let first = 1_000_000;
    let mut s = Script {
        pushes_until_end: 3,
        queued: vec![
            vec![(first + 1_000, 0), (first + 4_000, 2)],
            vec![],
            vec![(first + 5_000, 0)],
            vec![(first + 9_000, 1)],
        ],
        ..Script::default()
    };
    let mut counts = counts_from(first);
    assert!(buffered(&mut s, khz(), Hertz::new(2000.0).unwrap(), &mut counts).is_none());
    // Three readings end it: the drain after them is the last, and takes the rest.
    assert_eq!(s.drains, [false, false, false, true]);
    assert_eq!(s.intervals, [1_000, 3_000, 1_000, 4_000]);
    assert_eq!((counts.samples, counts.wakes), (4, 4));
    assert_eq!((counts.missed, counts.last_ns), (3, first + 9_000));
}
