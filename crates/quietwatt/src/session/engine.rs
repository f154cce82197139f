//! What a session shares with its sampler thread, and that thread.
//!
//! ```text
//!  sampler thread ── (t, missed, merged, raw × n) ──▶ rtrb ring ──▶ fold, under the state's lock
//!  polled: one read per tick                         by whoever asks: snapshot, windows,
//!  buffered: one drain per drain period              drain_samples, stop
//!  no allocation, no lock per reading                session meter, windows, sample rows
//! ```
//!
//! The sampler thread owns the source and reads it, on the [`Pacer`] of every
//! recording for a polled source, or once per drain period for a buffered one
//! (ebpf, perf-ring: the kernel queues its readings and [`Source::drain`] hands them
//! over), in the very loops a recording runs ([`tick`]: this file says only what
//! a tick reads, where it goes and when the session ends). Each reading goes
//! whole, raw, into a lock-free ring of fixed-size records; the correction (wraps,
//! resets, plausibility) and the accounting into the session's meter, every open
//! window's and the sample rows happen on the reader's side, when a caller asks
//! for anything ([`Shared::folded`]). So the sampler takes no lock and allocates
//! nothing per reading, and a caller sees every reading up to the last one pushed.
//!
//! A session nobody reads (a `Monitor` left running for an hour) must not lose its
//! rows to a full ring: when the ring is half full, the sampler folds it itself if
//! the state's lock is free (`try_lock`, never a wait; the lock is busy only while
//! a caller is folding or reporting, and that caller empties the ring). The ring
//! holds a second of readings (two drains' worth for a buffered source), so this
//! happens at most about twice a second and never for a caller that reads more
//! often. If the ring is full anyway (a caller held the lock the whole while), the
//! reading is held back and the next one replaces it: its deltas then cover both,
//! so the energy stays whole, and the readings folded that way are counted
//! ([`super::SampleStats::merged`], the overhead's `ring_full`) and reported.

use super::samples::SampleRing;
use crate::error::{Error, Result, SetupStep};
use crate::meter::Meter;
use crate::overhead::{SamplerCounts, ThreadUsage};
use crate::retry::{Retrier, Tick};
use crate::sampler::tick::{self, Each, Sampling};
use crate::sampler::{self, Setup};
use crate::source::inkernel::KernelSide;
use crate::source::{Mode, Source};
use crate::ticker::{Hertz, Pacer, TimerFd};
use quietwatt_sys::thread::{NotReady, Ready, Worker};
use rtrb::{Consumer, Producer, RingBuffer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

/// Words before the raw values in a record on the ring: the reading's time
/// (CLOCK_MONOTONIC ns), the deadlines missed before it (for a buffered source,
/// the readings the kernel lost before it), and the readings merged into it
/// because the ring was full.
const HEAD: usize = 3;

/// The fewest records a ring holds, whatever the rate.
const MIN_RECORDS: usize = 64;

/// The most records a polled session's ring holds: at 16 kHz and above, the
/// sampler folds the ring itself more than once a second.
const MAX_RECORDS: usize = 16_384;

/// Readings the ring between the sampler and the readers holds: a second of them
/// at `rate` (within [`MIN_RECORDS`]..[`MAX_RECORDS`]), and for a buffered source
/// at least two drains' worth, so that one drain never fills it.
pub(super) fn ring_records(mode: Mode, rate: Hertz) -> usize {
    let second = (rate.hz().ceil() as usize).clamp(MIN_RECORDS, MAX_RECORDS);
    match mode {
        Mode::Polled => second,
        Mode::Buffered { freq, drain } => {
            let per_drain = (freq.hz() / drain.hz()).ceil();
            // A silly --drain-hz (a drain every hour) must not make the ring huge:
            // beyond, the sampler folds it itself within the drain.
            let two = (2.0 * per_drain).min((1u64 << 18) as f64) as usize + 16;
            second.max(two)
        }
    }
}

/// The ring of readings: the sampler's end and the readers'.
pub(super) fn ring(records: usize, channels: usize) -> (Producer<u64>, Consumer<u64>) {
    // Whole records only: a multiple of the record's size, so none wraps around.
    RingBuffer::new(records.max(1) * (HEAD + channels))
}

/// The session's side and the sampler's.
pub(super) struct Shared {
    state: Mutex<State>,
    /// Set by the session to end the sampler after one last reading.
    pub(super) stop: AtomicBool,
    /// Set by a reader that met a reading it cannot account (a corrupt counter):
    /// the sampler ends at its next wake-up, since nothing after it counts.
    failed: AtomicBool,
    /// The sampler's timer (with a rate): woken at once to stop.
    pub(super) timer: Option<TimerFd>,
}

impl Shared {
    pub(super) fn new(state: State, timer: Option<TimerFd>) -> Shared {
        Shared {
            state: Mutex::new(state),
            stop: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            timer,
        }
    }

    /// The state, even after a panic while it was held: every update leaves it
    /// consistent (a reading is accounted whole or not at all by each meter).
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state with every reading the sampler has pushed so far accounted.
    pub(super) fn folded(&self) -> MutexGuard<'_, State> {
        let mut st = self.state();
        self.fold(&mut st);
        st
    }

    /// Accounts what is in the ring; a reading that cannot be accounted ends the
    /// sampling.
    fn fold(&self, st: &mut State) {
        if st.fold() {
            self.failed.store(true, Ordering::Relaxed);
        }
    }

    /// The sampler's backstop when nobody reads the session: folds the ring if the
    /// lock is free, and otherwise does nothing (whoever holds it folds). Never
    /// waits; allocates nothing.
    fn try_fold(&self) {
        let mut st = match self.state.try_lock() {
            Ok(st) => st,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        self.fold(&mut st);
    }
}

/// Everything the readings go into, on the readers' side.
pub(super) struct State {
    /// The sampler's readings not yet accounted (with a rate).
    inbox: Option<Consumer<u64>>,
    /// The session's meter, fed every reading.
    pub(super) meter: Meter,
    /// Open windows, oldest first, each a meter fed every reading since it opened.
    windows: Vec<(String, Meter)>,
    /// The samples (with a rate).
    pub(super) rows: Option<SampleRing>,
    /// The reading error that ended the sampler, or the reading that could not be
    /// accounted.
    pub(super) error: Option<Error>,
    /// The longest time between two readings.
    pub(super) longest_gap: Duration,
    /// Readings the sampler folded into the next because the ring was full.
    pub(super) merged: u64,
    last_raw: Vec<u64>,
    last_t: Option<u64>,
    /// The last reading's steps, copied out of the meter to convert them.
    deltas: Vec<u64>,
}

impl State {
    pub(super) fn new(
        meter: Meter,
        rows: Option<SampleRing>,
        inbox: Option<Consumer<u64>>,
    ) -> State {
        let n = meter.channels().len();
        State {
            inbox,
            meter,
            windows: Vec::new(),
            rows,
            error: None,
            longest_gap: Duration::ZERO,
            merged: 0,
            last_raw: vec![0; n],
            last_t: None,
            deltas: vec![0; n],
        }
    }

    /// Accounts every whole record in the ring, oldest first; after an error, the
    /// records are dropped (the figures end at the last good reading). Returns
    /// whether a reading failed. Allocates nothing (but the error, once).
    fn fold(&mut self) -> bool {
        let Some(mut inbox) = self.inbox.take() else {
            return false;
        };
        let words = HEAD + self.last_raw.len();
        let n = inbox.slots() / words * words;
        let mut failed = false;
        if let Ok(chunk) = inbox.read_chunk(n) {
            let (a, b) = chunk.as_slices();
            for w in a.chunks_exact(words).chain(b.chunks_exact(words)) {
                if self.error.is_none() {
                    if let Err(e) = self.feed(w[0], &w[HEAD..], w[1], w[2]) {
                        self.error = Some(e);
                        failed = true;
                    }
                }
            }
            chunk.commit_all();
        }
        self.inbox = Some(inbox);
        failed
    }

    /// Accounts one reading of every channel, taken at `t`, in the session's meter,
    /// every open window's and (after the first) the samples. `merged` readings
    /// were folded into it. Allocates nothing.
    pub(super) fn feed(&mut self, t: u64, raw: &[u64], missed: u64, merged: u64) -> Result<()> {
        let d = self.meter.feed(t, raw)?;
        self.deltas.copy_from_slice(d);
        for (_, w) in &mut self.windows {
            w.feed(t, raw)?;
        }
        self.merged += merged;
        if let Some(prev) = self.last_t {
            let gap = t.saturating_sub(prev);
            self.longest_gap = self.longest_gap.max(Duration::from_nanos(gap));
            if let Some(rows) = &mut self.rows {
                let meter = &self.meter;
                let joules = self
                    .deltas
                    .iter()
                    .enumerate()
                    .map(|(i, &d)| meter.joules(i, d).0);
                rows.push(t, gap, missed, joules);
            }
        }
        self.last_raw.copy_from_slice(raw);
        self.last_t = Some(t);
        Ok(())
    }

    /// The sample buffer's figures, with the readings merged on the way to it.
    pub(super) fn sample_stats(&self) -> Option<super::SampleStats> {
        self.rows.as_ref().map(|r| super::SampleStats {
            merged: self.merged,
            ..r.stats()
        })
    }

    /// Opens a window at the last reading.
    pub(super) fn open_window(&mut self, name: &str) -> Result<()> {
        let mut m = self.meter.like();
        if let Some(t) = self.last_t {
            m.feed(t, &self.last_raw)?;
        }
        self.windows.push((name.to_string(), m));
        Ok(())
    }

    /// Closes the latest window named `name`.
    pub(super) fn close_window(&mut self, name: &str) -> Option<Meter> {
        let i = self.windows.iter().rposition(|(n, _)| n == name)?;
        Some(self.windows.remove(i).1)
    }

    /// The names of the open windows, oldest first.
    pub(super) fn window_names(&self) -> Vec<&str> {
        self.windows.iter().map(|(n, _)| n.as_str()).collect()
    }
}

/// What the sampler thread hands back when joined.
pub(super) struct SamplerEnd {
    /// Its counts, for the overhead.
    pub(super) counts: SamplerCounts,
    /// What a buffered source's kernel side did.
    pub(super) kernel: Option<KernelSide>,
}

/// The sampler's end of the ring, with a reading the full ring refused.
struct Outbox {
    ring: Producer<u64>,
    /// One record: [`HEAD`] words, then the raw values.
    staged: Vec<u64>,
    /// Whether `staged` holds a reading not yet on the ring.
    held: bool,
    /// Free words below which the sampler folds the ring itself: half the ring.
    half: usize,
}

impl Outbox {
    fn new(ring: Producer<u64>, channels: usize) -> Outbox {
        let half = ring.buffer().capacity() / 2;
        Outbox {
            ring,
            staged: vec![0; HEAD + channels],
            held: false,
            half,
        }
    }

    /// Pushes one reading; a reading still held (the ring was full) is replaced by
    /// this one, which covers its interval. Allocates nothing, locks nothing but a
    /// `try_lock` when the ring is half full.
    #[inline]
    fn push(
        &mut self,
        t: u64,
        missed: u64,
        raw: &[u64],
        shared: &Shared,
        counts: &mut SamplerCounts,
    ) {
        if self.held {
            self.staged[1] += missed;
            self.staged[2] += 1;
            counts.ring_full += 1;
        } else {
            self.staged[1] = missed;
            self.staged[2] = 0;
        }
        self.staged[0] = t;
        let n = raw.len().min(self.staged.len() - HEAD);
        self.staged[HEAD..HEAD + n].copy_from_slice(&raw[..n]);
        self.held = true;
        // Half full: make room now, if nobody is reading (never a wait).
        if self.ring.slots() < self.half {
            shared.try_fold();
        }
        if let Ok(chunk) = self.ring.write_chunk_uninit(self.staged.len()) {
            chunk.fill_from_iter(self.staged.iter().copied());
            self.held = false;
        }
    }
}

/// Starts the sampler thread on a source read last at `first_ns` (into `raw`):
/// at `freq` for a polled source, at the source's own drain rate for a buffered
/// one. Waits until it is set up: its warnings (a refused pin), or the error that
/// keeps it from sampling.
pub(super) fn spawn(
    shared: Arc<Shared>,
    source: Box<dyn Source>,
    ring: Producer<u64>,
    freq: Hertz,
    first_ns: u64,
    raw: Vec<u64>,
) -> Result<(Worker<SamplerEnd>, Vec<String>)> {
    // Where the counters are read, as for a recording: a perf event or an MSR of
    // another CPU costs an inter-processor interrupt per read.
    let (cpu, mut notes) = sampler::placement(&source.read_cpus(), None);
    let setup = Setup {
        cpu,
        cpu_from_counters: true,
        first_ns,
        ..Setup::default()
    };
    let outbox = Outbox::new(ring, raw.len());
    let spawned = Worker::spawn("quietwatt-session", move |ready| {
        let mut s = Sampler {
            shared: &shared,
            source,
            outbox,
            raw,
        };
        s.run(freq, &setup, ready)
    });
    let (worker, handshake) = spawned.map_err(|source| Error::Setup {
        step: SetupStep::Thread("quietwatt-session"),
        source,
    })?;
    // A failed or panicked setup is the session's error, not a panic of its own:
    // the thread is joined here and its panic dropped.
    match handshake.wait() {
        Ok(w) => {
            notes.extend(w);
            Ok((worker, notes))
        }
        Err(NotReady::Failed(e)) => {
            let _ = worker.try_join();
            Err(e)
        }
        Err(NotReady::Ended) => {
            let _ = worker.try_join();
            Err(Error::Setup {
                step: SetupStep::Thread("quietwatt-session"),
                source: std::io::Error::other("the thread ended during its setup"),
            })
        }
    }
}

/// The sampler thread's state: a session's side of the sampling loops
/// ([`tick`]), which reads a [`Source`] raw into the [`Outbox`].
struct Sampler<'s> {
    shared: &'s Shared,
    source: Box<dyn Source>,
    outbox: Outbox,
    raw: Vec<u64>,
}

impl Sampler<'_> {
    /// Setup, the loop until stopped (one last reading included), then what is
    /// left accounted under the lock, once. Returns its counts for the overhead.
    fn run(&mut self, freq: Hertz, setup: &Setup, ready: Ready<Vec<String>, Error>) -> SamplerEnd {
        // SIGINT belongs to the program that embeds the session; a FUSE read (the
        // emulator) interrupted by one would fail with EINTR.
        sampler::block_stop_signals();
        let usage = ThreadUsage::current();
        let shared = self.shared;
        let mut counts = SamplerCounts {
            first_ns: setup.first_ns,
            last_ns: setup.first_ns,
            ..SamplerCounts::default()
        };
        let started = match &shared.timer {
            Some(_) => sampler::prepare(setup, &mut counts),
            None => Err(Error::Setup {
                step: SetupStep::Timer,
                source: std::io::Error::other("the session has no timer"),
            }),
        };
        let error = match (started, self.source.mode()) {
            (Err(e), _) => {
                ready.fail(e);
                return SamplerEnd {
                    counts,
                    kernel: None,
                };
            }
            (Ok(w), Mode::Polled) => {
                let timer = shared.timer.as_ref();
                match Pacer::start(timer, setup.first_ns, freq) {
                    Ok(mut pacer) => {
                        ready.ok(w);
                        tick::polled(self, &mut pacer, &mut counts)
                    }
                    Err(source) => {
                        ready.fail(Error::Setup {
                            step: SetupStep::Timer,
                            source,
                        });
                        return SamplerEnd {
                            counts,
                            kernel: None,
                        };
                    }
                }
            }
            (Ok(w), Mode::Buffered { freq, drain }) => {
                ready.ok(w);
                tick::buffered(self, freq, drain, &mut counts)
            }
        };
        counts.last_cpu = sampler::current_cpu();
        counts.usage = ThreadUsage::current().since(usage);
        // The end, once: what is still in the ring, then the reading held back,
        // then the error that ended the loop, so that the report stops at the
        // last good reading.
        let mut st = shared.state();
        shared.fold(&mut st);
        if self.outbox.held && st.error.is_none() {
            let r = &self.outbox.staged;
            if let Err(e) = st.feed(r[0], &r[HEAD..], r[1], r[2]) {
                st.error = Some(e);
            }
        }
        if let Some(e) = error {
            st.error.get_or_insert(e);
        }
        drop(st);
        SamplerEnd {
            counts,
            kernel: self.source.kernel_side(),
        }
    }
}

/// Each reading goes whole and raw into the ring, polled (one read per tick) or
/// buffered (each reading the kernel queued, one drain per drain period, the last
/// drain taking the last reading from user space: [`Source::drain`]). Allocates
/// nothing, locks nothing.
impl Sampling for Sampler<'_> {
    #[inline]
    fn stopping(&self) -> bool {
        self.shared.stop.load(Ordering::Acquire)
    }

    /// A reader met a reading it cannot account: nothing after it counts.
    #[inline]
    fn ends(&self, _now: u64) -> bool {
        self.shared.failed.load(Ordering::Relaxed)
    }

    #[inline]
    fn read(&mut self, retrier: &mut Retrier, counts: &mut SamplerCounts) -> Tick {
        let (source, raw) = (&mut self.source, &mut self.raw);
        retrier.read(counts, || Ok(source.read(raw)?))
    }

    #[inline]
    fn push(&mut self, t: u64, missed: u64, counts: &mut SamplerCounts) {
        self.outbox.push(t, missed, &self.raw, self.shared, counts);
    }

    fn timer(&self) -> Option<&TimerFd> {
        self.shared.timer.as_ref()
    }

    fn drain(&mut self, last: bool, each: &mut Each<'_>) -> Result<()> {
        let (outbox, shared) = (&mut self.outbox, self.shared);
        self.source.drain(last, &mut |r| {
            each.take(r.t_ns, r.lost, |counts, _| {
                outbox.push(r.t_ns, r.lost, r.raw, shared, counts);
            });
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_hold_a_second_of_readings_or_two_drains() {
        let hz = Hertz::clamped;
        assert_eq!(ring_records(Mode::Polled, hz(10.0)), MIN_RECORDS);
        assert_eq!(ring_records(Mode::Polled, hz(1000.0)), 1000);
        assert_eq!(ring_records(Mode::Polled, hz(100_000.0)), MAX_RECORDS);
        let buffered = |f, d| Mode::Buffered {
            freq: hz(f),
            drain: hz(d),
        };
        // 1 kHz in the kernel drained every second: two drains and a margin.
        assert_eq!(ring_records(buffered(1000.0, 1.0), hz(1000.0)), 2016);
        // A drain every 10 s at 10 Hz: 100 readings a drain.
        assert_eq!(ring_records(buffered(10.0, 0.1), hz(10.0)), 216);
    }
}
