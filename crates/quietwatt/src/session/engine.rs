//! What a session shares with its sampler thread, and that thread: the
//! [`Pacer`] on a timerfd of every recording, one reading per tick, accounted
//! under a lock that the caller's snapshots and windows take too.

use super::samples::SampleRing;
use super::Fed;
use crate::error::{Error, Result, SetupStep};
use crate::meter::{monotonic_ns, Meter};
use crate::overhead::{SamplerCounts, ThreadUsage};
use crate::sampler::{self, Setup};
use crate::source::Source;
use crate::ticker::{Hertz, Pacer, TimerFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// The session's side and the sampler's.
pub(super) struct Shared {
    state: Mutex<State>,
    /// Set by the session to end the sampler after one last reading.
    pub(super) stop: AtomicBool,
    /// The sampler's timer (with a rate): woken at once to stop.
    pub(super) timer: Option<TimerFd>,
}

impl Shared {
    pub(super) fn new(state: State, timer: Option<TimerFd>) -> Shared {
        Shared {
            state: Mutex::new(state),
            stop: AtomicBool::new(false),
            timer,
        }
    }

    /// The state, even after a panic while it was held: every update leaves it
    /// consistent (a reading is accounted whole or not at all by each meter).
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Everything the readings go into.
pub(super) struct State {
    /// The session's meter, fed every reading.
    pub(super) meter: Meter,
    /// Open windows, oldest first, each a meter fed every reading since it opened.
    windows: Vec<(String, Meter)>,
    /// The samples (with a rate).
    pub(super) rows: Option<SampleRing>,
    /// The reading error that ended the sampler.
    pub(super) error: Option<Error>,
    /// The longest time between two readings.
    pub(super) longest_gap: Duration,
    last_raw: Vec<u64>,
    last_t: Option<u64>,
    /// The last reading's steps, copied out of the meter to convert them.
    deltas: Vec<u64>,
}

impl State {
    pub(super) fn new(meter: Meter, rows: Option<SampleRing>) -> State {
        let n = meter.channels().len();
        State {
            meter,
            windows: Vec::new(),
            rows,
            error: None,
            longest_gap: Duration::ZERO,
            last_raw: vec![0; n],
            last_t: None,
            deltas: vec![0; n],
        }
    }

    /// Accounts one reading of every channel, taken at `t`, in the session's meter,
    /// every open window's and (after the first) the samples. Allocates nothing.
    pub(super) fn feed(&mut self, t: u64, raw: &[u64], missed: u64) -> Result<()> {
        let d = self.meter.feed(t, raw)?;
        self.deltas.copy_from_slice(d);
        for (_, w) in &mut self.windows {
            w.feed(t, raw)?;
        }
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

    /// Opens a window at the last reading.
    pub(super) fn open_window(&mut self, name: &str) -> Result<()> {
        let mut m = Fed::meter_like(&self.meter);
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

/// Starts the sampler thread at `freq` on a source read last at `first_ns` (into
/// `raw`), and waits until it is set up: its warnings (a refused pin), or the
/// error that keeps it from sampling.
pub(super) fn spawn(
    shared: Arc<Shared>,
    source: Box<dyn Source>,
    freq: Hertz,
    first_ns: u64,
    raw: Vec<u64>,
) -> Result<(JoinHandle<SamplerCounts>, Vec<String>)> {
    // Where the counters are read, as for a recording: a perf event or an MSR of
    // another CPU costs an inter-processor interrupt per read.
    let (cpu, mut notes) = sampler::placement(&source.read_cpus(), None);
    let setup = Setup {
        cpu,
        cpu_from_counters: true,
        first_ns,
        ..Setup::default()
    };
    let (ready_tx, ready_rx) = sync_channel(1);
    let handle = thread::Builder::new()
        .name("quietwatt-session".into())
        .spawn(move || run(&shared, source, freq, &setup, raw, ready_tx))
        .map_err(|source| Error::Setup {
            step: SetupStep::Thread("quietwatt-session"),
            source,
        })?;
    match ready_rx.recv() {
        Ok(Ok(w)) => {
            notes.extend(w);
            Ok((handle, notes))
        }
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(e)
        }
        Err(_) => {
            let _ = handle.join();
            Err(Error::Setup {
                step: SetupStep::Thread("quietwatt-session"),
                source: std::io::Error::other("the thread ended during its setup"),
            })
        }
    }
}

/// The sampler thread's body: setup, then one reading per tick until stopped,
/// then one last reading. Returns its counts for the session's overhead.
fn run(
    shared: &Shared,
    mut source: Box<dyn Source>,
    freq: Hertz,
    setup: &Setup,
    mut raw: Vec<u64>,
    ready: SyncSender<Result<Vec<String>>>,
) -> SamplerCounts {
    // SIGINT belongs to the program that embeds the session; a FUSE read (the
    // emulator) interrupted by one would fail with EINTR.
    sampler::block_stop_signals();
    let mut counts = SamplerCounts {
        first_ns: setup.first_ns,
        last_ns: setup.first_ns,
        ..SamplerCounts::default()
    };
    let usage = ThreadUsage::current();
    let started = match &shared.timer {
        Some(timer) => sampler::prepare(setup, &mut counts).and_then(|w| {
            Pacer::start(Some(timer), setup.first_ns, freq)
                .map(|p| (w, p))
                .map_err(|source| Error::Setup {
                    step: SetupStep::Timer,
                    source,
                })
        }),
        None => Err(Error::Setup {
            step: SetupStep::Thread("quietwatt-session"),
            source: std::io::Error::other("the session has no timer"),
        }),
    };
    let mut pacer = match started {
        Ok((w, p)) => {
            let _ = ready.send(Ok(w));
            p
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return counts;
        }
    };
    // The hot loop: a timerfd read, the source's reads, and the accounting under
    // the lock; no allocation.
    loop {
        let wake = pacer.wait();
        // A stop wakes the timer early: that wake-up is neither late nor a miss.
        let stopping = shared.stop.load(Ordering::Acquire);
        if !stopping {
            counts.lateness.record(wake.late_ns);
        }
        let t = monotonic_ns();
        let read = source.read(&mut raw).map_err(Error::from).and_then(|()| {
            let missed = if stopping {
                0
            } else {
                wake.missed + pacer.overdue(t)
            };
            counts.missed += missed;
            shared.state().feed(t, &raw, missed)
        });
        if let Err(e) = read {
            shared.state().error = Some(e);
            break;
        }
        counts.samples += 1;
        counts.last_ns = t;
        if stopping {
            break;
        }
    }
    counts.last_cpu = sampler::current_cpu();
    counts.usage = ThreadUsage::current().since(usage);
    counts
}
