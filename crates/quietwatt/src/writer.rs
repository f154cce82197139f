//! The writer thread: drains the ring in batches, converts raw steps to joules with
//! each channel's unit, hands samples to the sink, flushes at least once a second.
//!
//! It sleeps until the sampler wakes it, right after a tick: when a flush is due
//! (every `flush_every`, 500 ms by default) or early when the ring is half full. So
//! it costs two wake-ups a second at most rates and never a timer of its own: on a
//! VM a wake-up costs as much as a sample, and at an idle machine's low rate each
//! wake-up counts. Data only arrives at ticks, so there is never anything to
//! flush between them. When the sink fails it stops the sampler: a recording that
//! cannot be written ends at once, with the error, and the file keeps the whole
//! samples written before (the sink says how many, for the summary).

use crate::overhead::ThreadUsage;
use crate::sampler::{marks_of, Control, HEADER_WORDS};
use crate::sink::{Sample, Sink};
use crate::units::{EnergyUnit, Joules};
use rtrb::Consumer;
use std::io;
use std::time::Duration;

/// The longest the writer sleeps without being woken.
const BACKSTOP: Duration = Duration::from_secs(2);

/// What the writer thread returns.
pub(crate) struct WriterOutcome {
    pub usage: ThreadUsage,
    /// Samples the output holds whole: fewer than were handed to the sink when a
    /// write failed (a full disk) with a batch of them in flight.
    pub kept: u64,
    /// What those samples hold.
    pub held: Held,
    /// The longest interval of any sample handed to the sink (ns).
    pub longest_ns: u64,
    pub error: Option<io::Error>,
}

/// What the output holds: the time of its last sample (CLOCK_MONOTONIC ns; `None`
/// without one) and the energy of its samples, per channel. After a failed write
/// it is less than the measurement's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Held {
    /// When the last sample the output holds was read.
    pub last_t_ns: Option<u64>,
    /// The energy its samples add up to, per channel.
    pub energy: Vec<Joules>,
}

/// The samples handed to the sink since its last successful flush, each as its time
/// and the running energy totals after it: when a write fails, the sink says how
/// many samples it kept, and what those hold is read here. Cleared at each flush;
/// its buffer is reused.
struct Ledger {
    channels: usize,
    /// The longest interval of a sample handed over.
    longest_ns: u64,
    /// The time of the last sample handed over.
    last_t: Option<u64>,
    /// Running totals over every sample handed to the sink.
    totals: Vec<f64>,
    /// At the last flush: samples, time of the last, totals.
    flushed: (u64, Option<u64>, Vec<f64>),
    /// Since: `[t_ns as f64 bits, totals...]` per sample.
    since: Vec<u64>,
}

impl Ledger {
    fn new(channels: usize) -> Ledger {
        Ledger {
            channels,
            longest_ns: 0,
            last_t: None,
            totals: vec![0.0; channels],
            flushed: (0, None, vec![0.0; channels]),
            since: Vec::new(),
        }
    }

    fn handed(&mut self, t_ns: u64, interval_ns: u64, energy: &[Joules]) {
        self.longest_ns = self.longest_ns.max(interval_ns);
        self.last_t = Some(t_ns);
        self.since.push(t_ns);
        for (t, e) in self.totals.iter_mut().zip(energy) {
            *t += e.0;
            self.since.push(t.to_bits());
        }
    }

    fn flushed(&mut self, samples: u64) {
        self.flushed.1 = self.last_t;
        self.flushed.0 = samples;
        self.flushed.2.copy_from_slice(&self.totals);
        self.since.clear();
    }

    /// What the first `kept` samples hold.
    fn held(&self, kept: u64) -> Held {
        let (n, t, totals) = &self.flushed;
        let row = kept.checked_sub(*n).filter(|&k| k > 0).and_then(|k| {
            self.since
                .chunks_exact(1 + self.channels)
                .nth(k as usize - 1)
        });
        match row {
            Some(w) => Held {
                last_t_ns: Some(w[0]),
                energy: w[1..].iter().map(|&b| Joules(f64::from_bits(b))).collect(),
            },
            None => Held {
                last_t_ns: *t,
                energy: totals.iter().map(|&j| Joules(j)).collect(),
            },
        }
    }
}

/// The writer thread's body. Ends when the sampler has ended and the ring is empty,
/// or at the first sink error.
pub(crate) fn run(
    mut ring: Consumer<u64>,
    sink: &mut dyn Sink,
    units: &[EnergyUnit],
    control: &Control<'_>,
) -> WriterOutcome {
    crate::sampler::block_stop_signals();
    lower_priority();
    let start = ThreadUsage::current();
    let mut energy = vec![Joules(0.0); units.len()];
    let mut written = 0u64;
    let mut flushed = 0u64;
    let mut ledger = Ledger::new(units.len());
    let error = loop {
        // Read before draining: once the sampler is gone, one more drain empties the ring.
        let sampler_gone = ring.is_abandoned();
        if let Err(e) = drain_words(
            &mut ring,
            sink,
            units,
            &mut energy,
            &mut written,
            &mut ledger,
        ) {
            break Some(e);
        }
        if sampler_gone {
            let e = sink.finish().err();
            if e.is_none() {
                ledger.flushed(written);
            }
            break e;
        }
        if written > flushed {
            if let Err(e) = sink.flush() {
                break Some(e);
            }
            flushed = written;
            ledger.flushed(written);
        }
        // The sampler wakes this thread; the timeout only guards against a wake-up
        // lost to a bug, and never fires while the sampler wakes it more often.
        std::thread::park_timeout(BACKSTOP);
    };
    if error.is_some() {
        control.stop();
    }
    // Dropping the consumer tells a sampler waiting for room that nobody will read.
    drop(ring);
    let kept = sink.kept().unwrap_or(written);
    WriterOutcome {
        usage: ThreadUsage::current().since(start),
        kept,
        held: ledger.held(kept),
        longest_ns: ledger.longest_ns,
        error,
    }
}

/// The writer's nice value: when it shares a CPU with the sampler, the sampler's
/// wake-up preempts its batch of formatting at once instead of waiting for its
/// time slice (at 10 kHz a 5000-record batch is milliseconds, dozens of periods).
/// It still gets a tenth of a CPU against a busy nice-0 thread, far more than the
/// fraction of a percent it needs, and the ring holds seconds of samples.
const WRITER_NICE: i32 = 10;

/// Lowers the calling thread's priority to [`WRITER_NICE`]; a refusal (never
/// expected: lowering is always allowed) leaves it as it was.
fn lower_priority() {
    let _ = quietwatt_sys::thread::set_nice(WRITER_NICE);
}

/// Hands every record in the sampler's word ring to the sink, converted to
/// joules. A record is [`HEADER_WORDS`] words and one per channel; the sampler
/// writes whole records into a ring whose size is a multiple of one, so none
/// straddles the wrap-around.
fn drain_words(
    ring: &mut Consumer<u64>,
    sink: &mut dyn Sink,
    units: &[EnergyUnit],
    energy: &mut [Joules],
    written: &mut u64,
    ledger: &mut Ledger,
) -> io::Result<()> {
    let len = HEADER_WORDS + units.len();
    let n = ring.slots() / len * len;
    if n == 0 {
        return Ok(());
    }
    let chunk = match ring.read_chunk(n) {
        Ok(c) => c,
        Err(_) => return Ok(()),
    };
    let (a, b) = chunk.as_slices();
    for w in a.chunks_exact(len).chain(b.chunks_exact(len)) {
        for ((e, u), &d) in energy.iter_mut().zip(units).zip(&w[HEADER_WORDS..]) {
            *e = u.to_joules(d as u128);
        }
        sink.sample(&Sample {
            t_ns: w[0],
            interval_ns: w[1],
            missed: (w[2] >> 32) as u32,
            merged: w[2] as u32,
            freq_hz: f64::from_bits(w[3]),
            marks: marks_of(w),
            energy,
        })?;
        ledger.handed(w[0], w[1], energy);
        *written += 1;
    }
    chunk.commit_all();
    Ok(())
}
