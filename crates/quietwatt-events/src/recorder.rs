//! The events thread: reads every event counter at a low rate and writes
//! `timestamp_ns,cpu,event,count` rows, one per counter per read, to its own CSV.
//!
//! **Why a thread of its own** rather than columns in the energy samples: the energy
//! sampler's record is a fixed array of a few RAPL channels read at up to kHz rates;
//! events are CPUs × events counters (dozens to thousands) whose interesting scale
//! is 10-100 ms. Reading them on every energy tick would multiply the sampler's
//! cost by that count; a separate thread at its own rate keeps the energy loop as it
//! is, and both stamp their reads with the same CLOCK_MONOTONIC, so they join on
//! `timestamp_ns` (the trace exporter and the summary do exactly that).
//!
//! The loop allocates nothing: counters are read into vectors sized once, rows are
//! formatted into a buffer reserved once and written to the file in whole batches
//! of [`BATCH_BYTES`] (an [`quietwatt::sink::OutputFile`] then never ends in half a row).
//! With `--full-trace` a burst of traced rows can grow that buffer once; it keeps
//! the room for the next.

use super::cpuidle::CpuidleStates;
use super::{Event, EventCounters, EventsError, Result};
use quietwatt::ticker::monotonic_ns;
use quietwatt::ticker::{Hertz, Pacer, TimerFd};
use quietwatt_sys::thread::{Ready, Worker};
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The events CSV's header line.
pub const HEADER: &str = "timestamp_ns,cpu,event,count";

/// Rows are handed to the file in batches of about this many bytes.
pub const BATCH_BYTES: usize = 64 * 1024;

/// The default rate of the events thread.
pub const DEFAULT_HZ: f64 = 10.0;

/// What a finished events recording counted.
#[derive(Debug)]
pub struct EventTotals {
    /// CLOCK_MONOTONIC of the first (priming) read.
    pub first_ns: u64,
    /// CLOCK_MONOTONIC of the last read.
    pub last_ns: u64,
    /// Reads after the priming one.
    pub reads: u64,
    /// Deadlines that passed without a read (the next read covers them).
    pub missed: u64,
    /// `(cpu, event)` of each counter.
    pub channels: Vec<(u32, Event)>,
    /// Each counter's total over the recording, in the event's unit.
    pub totals: Vec<u64>,
    /// The cpuidle states (names for the summary).
    pub cpuidle: CpuidleStates,
    /// What was left out or found while opening.
    pub notes: Vec<String>,
    /// What ended the recording early (a read or a write), if anything.
    pub error: Option<EventsError>,
    /// With a full trace: events written one by one, and those the kernel's ring
    /// had no room for.
    pub traced: Option<TraceTotals>,
}

/// What a full trace recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TraceTotals {
    /// `trace:` rows written.
    pub written: u64,
    /// Events lost because the ring was full between two drains (raise
    /// `--events-freq` or the ring size); `None` when the count could not be read.
    pub dropped: Option<u64>,
    /// Ring records that were no event quietwatt knows (0 unless the program and
    /// this reader disagree: a bug to report).
    pub undecoded: u64,
}

impl EventTotals {
    /// Seconds between the first and the last read.
    pub fn seconds(&self) -> f64 {
        self.last_ns.saturating_sub(self.first_ns) as f64 / 1e9
    }

    /// The total of `event` on `cpu`, if it was counted.
    pub fn get(&self, cpu: u32, event: Event) -> Option<u64> {
        self.channels
            .iter()
            .position(|&c| c == (cpu, event))
            .map(|i| self.totals[i])
    }

    /// The total of `event` summed over every CPU, if it was counted anywhere.
    pub fn sum(&self, event: Event) -> Option<u64> {
        let mut any = false;
        let s = self
            .channels
            .iter()
            .zip(&self.totals)
            .filter(|((_, e), _)| *e == event)
            .map(|(_, &t)| {
                any = true;
                t
            })
            .sum();
        any.then_some(s)
    }

    /// The CPUs counted, in order.
    pub fn cpus(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.channels.iter().map(|c| c.0).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// The counters, their previous values and the CSV buffer: one [`EventLog::tick`]
/// per read. Public so that a test can drive ticks by hand (and count allocations).
pub struct EventLog<W: Write> {
    counters: EventCounters,
    prev: Vec<u64>,
    cur: Vec<u64>,
    totals: Vec<u64>,
    buf: Vec<u8>,
    out: W,
    first_ns: u64,
    last_ns: u64,
    reads: u64,
}

impl<W: Write> std::fmt::Debug for EventLog<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog")
            .field("reads", &self.reads)
            .field("first_ns", &self.first_ns)
            .field("last_ns", &self.last_ns)
            .finish_non_exhaustive()
    }
}

impl<W: Write> EventLog<W> {
    /// Writes the header (`fields` as `# key: value` lines, one `# channel:` line per
    /// counter, the cpuidle states) straight through to `out`, so that an unwritable
    /// output fails before anything is counted, then takes the priming read.
    pub fn begin(counters: EventCounters, mut out: W, fields: &[(String, String)]) -> Result<Self> {
        let n = counters.channels().len();
        let mut buf = Vec::with_capacity(BATCH_BYTES + 64 * n.max(16));
        let w = |e: io::Error| EventsError::Recorder {
            what: "write the events file's header".into(),
            source: e,
        };
        for (k, v) in fields {
            writeln!(buf, "# {k}: {v}").map_err(w)?;
        }
        writeln!(
            buf,
            "# columns: count = events since the previous row of the same cpu and event (µs for cpuidle_time_us, ns for bpf_idle_ns); timestamp_ns is CLOCK_MONOTONIC, the clock of the energy file"
        )
        .map_err(w)?;
        if counters.full_trace() {
            writeln!(
                buf,
                "# columns: a trace:<event> row (the full trace) is one event, stamped in the kernel (bpf_ktime_get_ns, CLOCK_MONOTONIC), count 1; such rows come before the counter rows of the read that drained them, so timestamps are not sorted across the two kinds"
            )
            .map_err(w)?;
        }
        for c in counters.channels() {
            writeln!(
                buf,
                "# channel: cpu{} {} unit={} origin={}",
                c.cpu,
                c.label,
                c.event.unit(),
                c.origin
            )
            .map_err(w)?;
        }
        for line in counters.cpuidle.describe() {
            writeln!(buf, "# cpuidle: {line}").map_err(w)?;
        }
        for note in &counters.notes {
            writeln!(buf, "# note: {note}").map_err(w)?;
        }
        writeln!(buf, "{HEADER}").map_err(w)?;
        out.write_all(&buf).and_then(|()| out.flush()).map_err(w)?;
        buf.clear();
        let mut log = EventLog {
            counters,
            prev: vec![0; n],
            cur: vec![0; n],
            totals: vec![0; n],
            buf,
            out,
            first_ns: 0,
            last_ns: 0,
            reads: 0,
        };
        log.first_ns = monotonic_ns();
        log.counters.read(&mut log.prev)?;
        log.last_ns = log.first_ns;
        Ok(log)
    }

    /// Reads every counter and appends one row per counter; hands a full batch to
    /// the output. Returns the read's timestamp. Allocates nothing, except when a
    /// full trace's burst of rows outgrows the buffer's reserve (it keeps the room).
    pub fn tick(&mut self) -> Result<u64> {
        // Traced events first: they all happened before this read. (The buffer grows
        // past its reserve only when a burst of them outgrows it.)
        if let Some(trace) = self.counters.trace.as_mut() {
            trace.drain(&mut self.buf);
        }
        let t = monotonic_ns();
        self.counters.read(&mut self.cur)?;
        for (i, c) in self.counters.channels().iter().enumerate() {
            // Counters are 64-bit and never wrap in practice; a reset (a CPU that went
            // offline and back) must not become a huge delta.
            let d = self.cur[i].saturating_sub(self.prev[i]);
            self.totals[i] += d;
            // Into a reserved Vec: no allocation unless a row outgrows the reserve.
            let _ = writeln!(self.buf, "{t},{},{},{d}", c.cpu, c.label);
        }
        std::mem::swap(&mut self.prev, &mut self.cur);
        self.last_ns = t;
        self.reads += 1;
        if self.buf.len() >= BATCH_BYTES {
            self.commit()?;
        }
        Ok(t)
    }

    fn commit(&mut self) -> Result<()> {
        let r = self.out.write_all(&self.buf);
        self.buf.clear();
        r.map_err(|source| EventsError::Recorder {
            what: "write the events file".into(),
            source,
        })
    }

    /// Hands every row so far to the output.
    pub fn flush(&mut self) -> Result<()> {
        self.commit()?;
        self.out.flush().map_err(|source| EventsError::Recorder {
            what: "flush the events file".into(),
            source,
        })
    }

    /// The counters being read.
    pub fn counters(&self) -> &EventCounters {
        &self.counters
    }

    /// Flushes and returns the totals.
    pub fn finish(mut self, missed: u64, error: Option<EventsError>) -> EventTotals {
        let traced = self.counters.trace.as_mut().map(|t| {
            t.drain(&mut self.buf);
            TraceTotals {
                written: t.traced(),
                dropped: t.dropped().ok(),
                undecoded: t.unknown(),
            }
        });
        let error = match self.flush() {
            Err(e) if error.is_none() => Some(e),
            _ => error,
        };
        let channels = self
            .counters
            .channels()
            .iter()
            .map(|c| (c.cpu, c.event))
            .collect();
        EventTotals {
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            reads: self.reads,
            missed,
            channels,
            totals: self.totals,
            cpuidle: std::mem::take(&mut self.counters.cpuidle),
            notes: std::mem::take(&mut self.counters.notes),
            error,
            traced,
        }
    }
}

struct Shared {
    stop: AtomicBool,
    timer: TimerFd,
}

/// The events thread, started and stopped around an energy recording.
pub struct EventRecorder {
    shared: Arc<Shared>,
    // Taken by `stop`; dropped unstopped, the thread is stopped and joined.
    worker: Option<Worker<EventTotals>>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("running", &self.worker.is_some())
            .finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// Writes the header to `out` and starts reading every `1/freq` seconds.
    pub fn start<W: Write + Send + 'static>(
        counters: EventCounters,
        out: W,
        fields: &[(String, String)],
        freq: Hertz,
    ) -> Result<EventRecorder> {
        let err = |what: &str| {
            let what = what.to_string();
            move |source| EventsError::Recorder { what, source }
        };
        let timer = TimerFd::new().map_err(err("create a timerfd"))?;
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            timer,
        });
        let log = EventLog::begin(counters, out, fields)?;
        let s = Arc::clone(&shared);
        // A timer that cannot be armed is said in the totals, at stop, as before.
        let (worker, _) = Worker::spawn("quietwatt-events", move |ready: Ready<(), ()>| {
            ready.ok(());
            run(log, &s, freq)
        })
        .map_err(err("start the events thread"))?;
        Ok(EventRecorder {
            shared,
            worker: Some(worker),
        })
    }

    /// Takes one last read, flushes, and returns the totals.
    pub fn stop(mut self) -> EventTotals {
        self.signal_stop();
        self.worker.take().expect("stopped once").join()
    }

    fn signal_stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.timer.wake();
    }
}

impl Drop for EventRecorder {
    /// Stops the thread of a recorder that was not stopped; its worker joins it.
    fn drop(&mut self) {
        self.signal_stop();
    }
}

fn run<W: Write>(mut log: EventLog<W>, s: &Shared, freq: Hertz) -> EventTotals {
    quietwatt_sys::thread::block_stop_signals();
    let mut pacer = match Pacer::start(Some(&s.timer), log.first_ns, freq) {
        Ok(p) => p,
        Err(source) => {
            let e = EventsError::Recorder {
                what: "arm the events timer".into(),
                source,
            };
            return log.finish(0, Some(e));
        }
    };
    let flush_ns = Duration::from_secs(1).as_nanos() as u64;
    let mut last_flush = log.first_ns;
    let mut missed = 0;
    let error = loop {
        let wake = pacer.wait();
        let stopping = s.stop.load(Ordering::Acquire);
        if !stopping {
            missed += wake.missed;
        }
        let t = match log.tick() {
            Ok(t) => t,
            Err(e) => break Some(e),
        };
        if stopping {
            break None;
        }
        if t.saturating_sub(last_flush) >= flush_ns {
            if let Err(e) = log.flush() {
                break Some(e);
            }
            last_flush = t;
        }
    };
    log.finish(missed, error)
}
