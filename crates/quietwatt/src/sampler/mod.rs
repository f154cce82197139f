//! The sampler thread: wakes at absolute deadlines, reads every counter, pushes one
//! record of raw deltas into a lock-free ring for the writer thread.
//!
//! The loop allocates nothing, takes no lock, formats nothing and writes nothing:
//! per tick it costs one timerfd `read`, the source's reads (one `pread` per
//! powercap zone, one `read` per perf event) and a copy into the ring. A record
//! on the ring is exactly [`HEADER_WORDS`] + one word per channel (80 bytes for
//! two channels, not a fixed 64-channel struct), so that the ring stays in the
//! cache: every slot written is a cache line that must be fetched first. Deadlines
//! that pass while it is busy are counted, and the next record's deltas cover them,
//! so no energy is lost; when the ring is full the record is kept and the next
//! tick's deltas are added to it, so no energy is lost either.
//!
//! The loops themselves, polled and buffered, are in the crate's own `tick`
//! module, shared with a session's sampler: this file says what a recording's
//! tick reads (the [`Meter`]), where it goes (the ring, waking the writer) and
//! what else it does (the adaptive rate, the end of a set duration).

use crate::adaptive::{Adaptive, DEFAULT_MAX_HZ, DEFAULT_MIN_HZ};
use crate::counter::Marks;
use crate::error::{Error, Result, SetupStep};
use crate::meter::Meter;
use crate::overhead::{SamplerCounts, ThreadUsage};
use crate::retry::{Retrier, Tick};
use crate::source::Mode;
use crate::ticker::{Hertz, InvalidFrequency, Pacer, TimerFd};
use rtrb::Producer;
use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::Thread;
use tick::{Each, Sampling};

pub(crate) mod tick;

/// Counters one record holds: 8 sockets of 5 domains fit with room to spare.
pub const MAX_CHANNELS: usize = 64;

/// Words before the deltas in a record on the ring: `t_ns`, `interval_ns`,
/// `missed << 32 | merged`, `freq_hz` as bits, and the [`Marks`] (reset, step back,
/// jump, ambiguous masks).
pub const HEADER_WORDS: usize = 8;

/// One sample: raw counter steps, converted on the writer side. On the ring it is
/// [`Record::header`] followed by the deltas; this struct holds a sample the full
/// ring refused, until it is merged into the next.
#[derive(Debug, Clone, Copy)]
pub struct Record {
    /// CLOCK_MONOTONIC nanoseconds of the read.
    pub t_ns: u64,
    /// Nanoseconds since the previous record's read: a gap makes it longer.
    pub interval_ns: u64,
    /// Deadlines missed between the previous record's read and this one's: the
    /// interval (and the energy) of this record spans them.
    pub missed: u32,
    /// Reads folded into this record because the ring was full.
    pub merged: u32,
    /// The sampling rate in force.
    pub freq_hz: f64,
    /// Channels whose energy is not the full interval's (a reset, step back or jump).
    pub marks: Marks,
    len: u8,
    deltas: [u64; MAX_CHANNELS],
}

impl Record {
    /// A record of `deltas` (at most [`MAX_CHANNELS`]).
    pub fn new(t_ns: u64, interval_ns: u64, missed: u64, freq: Hertz, deltas: &[u64]) -> Record {
        let len = deltas.len().min(MAX_CHANNELS);
        let mut r = Record {
            t_ns,
            interval_ns,
            missed: missed.min(u32::MAX as u64) as u32,
            merged: 0,
            freq_hz: freq.hz(),
            marks: Marks::default(),
            len: len as u8,
            deltas: [0; MAX_CHANNELS],
        };
        r.deltas[..len].copy_from_slice(&deltas[..len]);
        r
    }

    /// A record from its header words and deltas.
    fn from_parts(head: [u64; HEADER_WORDS], deltas: &[u64]) -> Record {
        let mut r = Record::from_words(&head);
        let len = deltas.len().min(MAX_CHANNELS);
        r.len = len as u8;
        r.deltas[..len].copy_from_slice(&deltas[..len]);
        r
    }

    /// Raw steps per channel since the previous record.
    pub fn deltas(&self) -> &[u64] {
        &self.deltas[..self.len as usize]
    }

    /// The words before the deltas on the ring.
    #[inline]
    pub fn header(&self) -> [u64; HEADER_WORDS] {
        header(
            self.t_ns,
            self.interval_ns,
            self.missed as u64,
            self.merged,
            self.freq_hz,
            self.marks,
        )
    }

    /// Reads back a record of `words` ([`HEADER_WORDS`] + one per channel).
    pub fn from_words(words: &[u64]) -> Record {
        let deltas = &words[HEADER_WORDS.min(words.len())..];
        let mut r = Record::new(
            words[0],
            words[1],
            words[2] >> 32,
            Hertz::clamped(f64::from_bits(words[3])),
            deltas,
        );
        r.merged = words[2] as u32;
        r.marks = marks_of(words);
        r
    }

    /// Adds an earlier record that could not be delivered: this one then covers both.
    fn absorb(&mut self, earlier: &Record) {
        for (d, e) in self.deltas.iter_mut().zip(earlier.deltas()) {
            *d += e;
        }
        self.interval_ns += earlier.interval_ns;
        self.missed = self.missed.saturating_add(earlier.missed);
        self.merged = self.merged.saturating_add(earlier.merged + 1);
        self.marks = self.marks.or(earlier.marks);
    }
}

/// The header words of a record ([`HEADER_WORDS`]).
#[inline]
pub(crate) fn header(
    t_ns: u64,
    interval_ns: u64,
    missed: u64,
    merged: u32,
    freq_hz: f64,
    marks: Marks,
) -> [u64; HEADER_WORDS] {
    let missed = missed.min(u32::MAX as u64);
    [
        t_ns,
        interval_ns,
        missed << 32 | merged as u64,
        freq_hz.to_bits(),
        marks.reset,
        marks.backstep,
        marks.jump,
        marks.ambiguous,
    ]
}

/// The [`Marks`] in a record's header words (none in a shorter header).
#[inline]
pub(crate) fn marks_of(words: &[u64]) -> Marks {
    match words {
        [_, _, _, _, reset, backstep, jump, ambiguous, ..] => Marks {
            reset: *reset,
            backstep: *backstep,
            jump: *jump,
            ambiguous: *ambiguous,
        },
        _ => Marks::default(),
    }
}

/// How fast to sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// Always this rate.
    Fixed(Hertz),
    /// Follow the machine's load between two rates (see [`crate::adaptive`]).
    Auto {
        /// The rate when idle (raised if a counter could wrap unseen).
        min: Hertz,
        /// The rate under load.
        max: Hertz,
    },
}

impl Rate {
    /// The highest rate this can reach.
    pub fn max(&self) -> Hertz {
        match *self {
            Rate::Fixed(f) => f,
            Rate::Auto { max, .. } => max,
        }
    }

    /// The lowest rate this can reach.
    pub fn min(&self) -> Hertz {
        match *self {
            Rate::Fixed(f) => f,
            Rate::Auto { min, .. } => min,
        }
    }

    /// `auto` between the default bounds (5 Hz and 1 kHz).
    pub fn auto() -> Rate {
        Rate::Auto {
            min: Hertz::clamped(DEFAULT_MIN_HZ),
            max: Hertz::clamped(DEFAULT_MAX_HZ),
        }
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rate::Fixed(h) => write!(f, "{}", h.hz()),
            Rate::Auto { min, max } => write!(f, "auto ({}-{})", min.hz(), max.hz()),
        }
    }
}

/// `--freq`: a frequency, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FreqArg {
    /// A fixed rate.
    Fixed(Hertz),
    /// Adaptive.
    Auto,
}

impl FreqArg {
    /// The rate, with the bounds used when this is `auto`.
    pub fn rate(self, min: Hertz, max: Hertz) -> Rate {
        match self {
            FreqArg::Fixed(f) => Rate::Fixed(f),
            FreqArg::Auto => Rate::Auto { min, max },
        }
    }
}

impl FromStr for FreqArg {
    type Err = InvalidFrequency;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        if s.trim().eq_ignore_ascii_case("auto") {
            Ok(FreqArg::Auto)
        } else {
            s.parse().map(FreqArg::Fixed)
        }
    }
}

/// What the sampler shares with the other threads: the stop flags and a way to wake it.
#[derive(Debug)]
pub(crate) struct Control<'s> {
    stop: AtomicBool,
    /// The caller's stop flag (a signal handler's), checked by the sampler at every
    /// tick so that the orchestrating thread need not poll it often.
    external: Option<&'s AtomicBool>,
    done: AtomicBool,
    timer: Option<TimerFd>,
    orchestrator: Thread,
}

impl<'s> Control<'s> {
    pub(crate) fn new(timer: Option<TimerFd>, external: Option<&'s AtomicBool>) -> Control<'s> {
        Control {
            stop: AtomicBool::new(false),
            external,
            done: AtomicBool::new(false),
            timer,
            orchestrator: std::thread::current(),
        }
    }

    pub(crate) fn timer(&self) -> Option<&TimerFd> {
        self.timer.as_ref()
    }

    /// Asks the sampler to take one last sample and end, waking it at once.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = &self.timer {
            t.wake();
        }
    }

    /// Whether [`Control::stop`] was called (its wake-up is not a tick).
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Whether the caller's flag asks to stop (checked after a regular tick).
    #[inline]
    fn externally_stopped(&self) -> bool {
        self.external.is_some_and(|f| f.load(Ordering::Relaxed))
    }

    /// Whether the sampler has ended (duration over, error, or stopped).
    pub(crate) fn sampler_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    fn mark_done(&self) {
        self.done.store(true, Ordering::Release);
        self.orchestrator.unpark();
    }
}

/// How the sampler thread (or a loop measured beside it, as the overhead lab's
/// `bench sampler` loops) is set up before its loop: public for those loops, which
/// must be placed and prioritised exactly as the sampler is ([`prepare`]).
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// The CPU to pin to.
    pub cpu: Option<usize>,
    /// `cpu` was chosen because the counters are read there, not asked for with
    /// `--cpu`: a refused pin is then a warning (reads cost an IPI), not an error.
    pub cpu_from_counters: bool,
    /// SCHED_FIFO for the thread (`--rt`); refused, a warning.
    pub realtime: bool,
    /// The sampler wakes the writer this often (the writer flushes at each wake),
    /// and never needs to otherwise: data only arrives at ticks.
    pub flush_every_ns: u64,
    /// End the loop this long after `first_ns` (a recording of a set duration).
    pub end_after_ns: Option<u64>,
    /// CLOCK_MONOTONIC of the priming read, taken by the caller before spawning
    /// this thread so that no thread start-up falls before the first reading.
    pub first_ns: u64,
}

/// What the sampler thread returns.
pub(crate) struct SamplerOutcome {
    pub counts: SamplerCounts,
    pub error: Option<Error>,
}

/// The sampler thread's body: setup, loop, last record, on a meter already primed
/// (read once at `setup.first_ns`). Reports setup (warnings, or the error that
/// prevents sampling) through `ready` before the loop.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    meter: &mut Meter,
    ring: Producer<u64>,
    adaptive: Option<Adaptive>,
    start: Hertz,
    setup: Setup,
    control: &Control<'_>,
    writer: Thread,
    ready: Ready<Vec<String>, Error>,
) -> SamplerOutcome {
    block_stop_signals();
    // Declared before the ring so that it is dropped after it: the writer, woken
    // here, then finds the ring abandoned and ends.
    let _end = EndGuard {
        control,
        writer: writer.clone(),
    };
    let ring = ring;
    let mut counts = SamplerCounts {
        first_ns: setup.first_ns,
        last_ns: setup.first_ns,
        ..SamplerCounts::default()
    };
    let usage = ThreadUsage::current();
    let started = prepare(&setup, &mut counts).and_then(|warnings| {
        let pacer = Pacer::start(control.timer(), counts.first_ns, start).map_err(|source| {
            Error::Setup {
                step: SetupStep::Timer,
                source,
            }
        })?;
        Ok((warnings, pacer))
    });
    let mut pacer = match started {
        Ok((warnings, pacer)) => {
            ready.ok(warnings);
            pacer
        }
        Err(e) => {
            ready.fail(e);
            return SamplerOutcome {
                counts,
                error: None,
            };
        }
    };
    let half = ring.buffer().capacity() / 2;
    let words = HEADER_WORDS + meter.channels().len();
    let end_ns = setup.end_after_ns.map(|d| counts.first_ns + d);
    let mut s = Recorder {
        meter,
        ring,
        adaptive,
        control,
        writer,
        end_ns,
        freq: start,
        pending: None,
        half,
        words,
        flush_ns: setup.flush_every_ns.max(1),
        last_writer_wake: counts.first_ns,
    };
    let error = match s.meter.mode() {
        Mode::Polled => tick::polled(&mut s, &mut pacer, &mut counts),
        Mode::Buffered { freq, drain } => {
            // The kernel's rate is the records' (a buffered source has no adaptive rate).
            s.freq = freq;
            tick::buffered(&mut s, freq, drain, &mut counts)
        }
    };
    counts.last_cpu = current_cpu();
    s.deliver_pending();
    counts.usage = ThreadUsage::current().since(usage);
    SamplerOutcome { counts, error }
}

/// Wakes the writer and marks the sampler done when the sampler thread ends,
/// however it ends (a panic included), so that no thread waits for it forever.
struct EndGuard<'c, 's> {
    control: &'c Control<'s>,
    writer: Thread,
}

impl Drop for EndGuard<'_, '_> {
    fn drop(&mut self) {
        self.writer.unpark();
        self.control.mark_done();
    }
}

/// Pinning and priority of the calling thread; warnings for what was refused but
/// is not fatal.
pub fn prepare(setup: &Setup, counts: &mut SamplerCounts) -> Result<Vec<String>> {
    let mut warnings = Vec::new();
    if let Some(cpu) = setup.cpu {
        match pin(cpu) {
            Ok(()) => counts.pinned_cpu = Some(cpu),
            Err(e) if setup.cpu_from_counters => warnings.push(format!(
                "the counters are read on CPU {cpu}, but the sampler cannot run there ({e}): each read of them costs an inter-processor interrupt"
            )),
            Err(e) => return Err(e),
        }
    }
    if setup.realtime {
        match set_fifo() {
            Ok(()) => counts.realtime = true,
            Err(e) => warnings.push(format!(
                "real-time priority (SCHED_FIFO) refused ({e}); sampling at normal priority (needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO of at least {RT_PRIORITY})"
            )),
        }
    }
    Ok(warnings)
}

pub(crate) use quietwatt_sys::thread::{block_stop_signals, current_cpu, Ready};

/// Where the sampler runs: `(cpu to pin to, notes)`, from the CPU of each counter
/// read per tick (`read_cpus`, one entry per read, [`crate::Source::read_cpus`])
/// and the CPU the user asked for (`--cpu`).
///
/// A perf event or an MSR is read on the CPU it belongs to: from any other CPU the
/// kernel sends an inter-processor interrupt and waits for it (measured on the
/// project's VM: 18 µs against 0.23 µs for a perf read on the same CPU; a few µs on
/// bare metal). So, without `--cpu`, the sampler is pinned to the CPU with the most
/// reads (the lowest on a tie), which on one socket is the only one. Reads that
/// span CPUs (two sockets, AMD's per-core counters) cannot all be local to one
/// thread; the rest cost an interrupt each and a note says how many. One reader
/// thread per CPU was weighed and left out: each would add a timer wake-up per tick
/// on its CPU, which costs as much as the interrupt it saves (more in a VM), and
/// the samples of several threads would have to be merged. With `--cpu` on another
/// CPU the user's choice stands and a note says what it costs.
pub fn placement(read_cpus: &[u32], asked: Option<usize>) -> (Option<usize>, Vec<String>) {
    let mut per_cpu: Vec<(u32, usize)> = Vec::new();
    for &c in read_cpus {
        match per_cpu.iter_mut().find(|(cpu, _)| *cpu == c) {
            Some((_, n)) => *n += 1,
            None => per_cpu.push((c, 1)),
        }
    }
    per_cpu.sort_by_key(|&(cpu, n)| (std::cmp::Reverse(n), cpu));
    let Some(&(best, _)) = per_cpu.first() else {
        return (asked, Vec::new());
    };
    let cpu = asked.unwrap_or(best as usize);
    let remote: usize = per_cpu
        .iter()
        .filter(|(c, _)| *c as usize != cpu)
        .map(|(_, n)| n)
        .sum();
    let mut notes = Vec::new();
    if remote > 0 {
        let others: Vec<String> = per_cpu
            .iter()
            .filter(|(c, _)| *c as usize != cpu)
            .map(|(c, _)| c.to_string())
            .collect();
        notes.push(format!(
            "{remote} of the {} counter reads per sample are on CPU(s) {} while the sampler runs on CPU {cpu}{}: each costs an inter-processor interrupt (~18 us on a VM, a few us on bare metal){}",
            read_cpus.len(),
            others.join(","),
            if asked.is_some() { " (as asked)" } else { "" },
            if asked.is_some() && per_cpu.len() == 1 {
                format!("; pin it to CPU {best}, or let quietwatt place it, to read them locally")
            } else {
                String::new()
            }
        ));
    }
    (Some(cpu), notes)
}

/// SCHED_FIFO priority of the sampler: above every normal thread, below the
/// kernel's own real-time threads (which use 50 and 99).
pub const RT_PRIORITY: i32 = 10;

fn set_fifo() -> std::io::Result<()> {
    quietwatt_sys::thread::set_fifo(RT_PRIORITY)
}

fn pin(cpu: usize) -> Result<()> {
    quietwatt_sys::thread::pin_to_cpu(cpu).map_err(|source| Error::Setup {
        step: SetupStep::Pin { cpu },
        source,
    })
}

/// The recording's side of the sampling loops ([`tick`]): reads a [`Meter`] and
/// pushes records of deltas into the writer's ring, waking the writer.
struct Recorder<'a, 'm> {
    meter: &'m mut Meter,
    ring: Producer<u64>,
    adaptive: Option<Adaptive>,
    control: &'a Control<'a>,
    writer: Thread,
    end_ns: Option<u64>,
    freq: Hertz,
    /// A record the full ring refused, to be merged into the next.
    pending: Option<Record>,
    /// Ring slots (words) below which the writer is woken: half the ring.
    half: usize,
    /// Words per record.
    words: usize,
    /// How often the writer is woken to write and flush.
    flush_ns: u64,
    /// When it was last woken.
    last_writer_wake: u64,
}

impl Sampling for Recorder<'_, '_> {
    #[inline]
    fn stopping(&self) -> bool {
        self.control.stopping()
    }

    #[inline]
    fn ends(&self, now: u64) -> bool {
        self.end_ns.is_some_and(|end| now >= end) || self.control.externally_stopped()
    }

    #[inline]
    fn read(&mut self, retrier: &mut Retrier, counts: &mut SamplerCounts) -> Tick {
        match self.meter.sample_marked_retrying(retrier, counts) {
            Ok(Some((t, _, _))) => Tick::Read(t),
            Ok(None) => Tick::Skipped,
            Err(e) => Tick::Failed(e),
        }
    }

    #[inline]
    fn push(&mut self, t: u64, missed: u64, counts: &mut SamplerCounts) {
        let (deltas, marks) = self.meter.last_step();
        let head = header(t, t - counts.last_ns, missed, 0, self.freq.hz(), marks);
        push(
            &mut self.ring,
            &mut self.pending,
            counts,
            self.words,
            head,
            deltas,
        );
        // The writer sleeps until woken: when a flush is due, or early when the
        // ring is half full. Waking it from here, right after a tick, adds no
        // timer of its own to the machine's wake-ups.
        if t - self.last_writer_wake >= self.flush_ns || self.ring.slots() < self.half {
            self.writer.unpark();
            self.last_writer_wake = t;
        }
    }

    #[inline]
    fn pushed(&mut self, t: u64, pacer: &mut Pacer<'_>, counts: &mut SamplerCounts) {
        if let Some(f) = self.adaptive.as_mut().and_then(|a| a.tick(t)) {
            // A failed re-arm keeps the old rate, which still samples correctly.
            if pacer.set_rate(f).is_ok() {
                self.freq = f;
                counts.rate_changes += 1;
            }
            // Re-arming discards a wake-up a stop may have just sent: send it again.
            if self.control.stopping() {
                self.control.stop();
            }
        }
    }

    fn timer(&self) -> Option<&TimerFd> {
        self.control.timer()
    }

    fn end_ns(&self) -> Option<u64> {
        self.end_ns
    }

    /// One record per reading, into the same ring as a polled one's.
    fn drain(&mut self, last: bool, each: &mut Each<'_>) -> Result<()> {
        let Recorder {
            meter,
            ring,
            pending,
            words,
            writer,
            half,
            freq,
            ..
        } = self;
        let hz = freq.hz();
        meter.drain(last, &mut |t, deltas, marks, lost| {
            each.take(t, lost, |counts, interval| {
                let head = header(t, interval, lost, 0, hz, marks);
                // A drain hands a batch at once: wait for the writer rather than
                // merge records when the ring is full (nothing here is late).
                while ring.slots() < *words && !ring.is_abandoned() {
                    writer.unpark();
                    std::thread::yield_now();
                }
                push(ring, pending, counts, *words, head, deltas);
                if ring.slots() < *half {
                    writer.unpark();
                }
            });
        })
    }

    fn drained(&mut self, now: u64) {
        self.writer.unpark();
        self.last_writer_wake = now;
    }
}

impl Recorder<'_, '_> {
    /// At the end, waits for room for a refused record: it holds energy. Gives up
    /// only when the writer is gone (it failed; its error says why).
    fn deliver_pending(&mut self) {
        while let Some(rec) = self.pending.take() {
            if write_words(&mut self.ring, self.words, rec.header(), rec.deltas()) {
                continue;
            }
            if self.ring.is_abandoned() {
                return;
            }
            self.pending = Some(rec);
            self.writer.unpark();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// Pushes one sample (`head` and `deltas`), with any refused record folded in; on a
/// full ring keeps it for the next tick and counts the overflow. No allocation:
/// the common case copies `words` words straight into the ring.
#[inline]
fn push(
    ring: &mut Producer<u64>,
    pending: &mut Option<Record>,
    counts: &mut SamplerCounts,
    words: usize,
    head: [u64; HEADER_WORDS],
    deltas: &[u64],
) {
    let rec = match pending.take() {
        None => {
            if write_words(ring, words, head, deltas) {
                return;
            }
            Record::from_parts(head, deltas)
        }
        Some(earlier) => {
            let mut rec = Record::from_parts(head, deltas);
            rec.absorb(&earlier);
            if write_words(ring, words, rec.header(), rec.deltas()) {
                return;
            }
            rec
        }
    };
    *pending = Some(rec);
    counts.ring_full += 1;
}

/// Writes one record as `words` words; false when the ring has no room for it.
#[inline]
fn write_words(
    ring: &mut Producer<u64>,
    words: usize,
    head: [u64; HEADER_WORDS],
    deltas: &[u64],
) -> bool {
    match ring.write_chunk_uninit(words) {
        Ok(chunk) => {
            chunk.fill_from_iter(head.into_iter().chain(deltas.iter().copied()));
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests;
