//! The engine of the in-kernel mechanisms: one drain thread turns the kernel's
//! samples into the polling sampler's [`Record`]s and writes them through the same
//! writer conversion into the same sinks.
//!
//! ```text
//!  kernel: cpu-clock tick ─▶ read energy events ─▶ ring (BPF ring buffer / perf mmap)
//!  drain thread (wakes at --drain-hz, or early at a ring's watermark):
//!      ring ─▶ Meter::feed (64-bit wrap correction) ─▶ Record ─▶ rtrb ─▶ writer::drain ─▶ Sink
//!  calling thread: sleeps until Ctrl-C / the command's exit / the drain thread ends
//! ```
//!
//! **Readings.** The first and last readings of a recording are user-space reads of
//! the very perf events the kernel samples (`read()`), so the energy covers the
//! recording exactly, as with the polling sampler's priming and final reads. Kernel
//! samples taken before the first read completed, or after the last one began, are
//! discarded: a user-space read of a CPU-wide event runs on that CPU (an IPI, with
//! interrupts off) and so is ordered with the kernel's own reads there, which makes
//! every kept sample's counts lie between the first and last readings.
//!
//! **One record per tick.** With several sampling CPUs (several packages), the first
//! group's samples make the records; every other group's latest counts are folded in
//! at that moment. Each counter's deltas still sum to its total.
//!
//! **Self-accounting.** The same [`Overhead`] as the polling sampler: "sampler" is the
//! drain thread's CPU time outside the sink, "writer" the time in the sink; the
//! lateness is how much later than one period after the previous one each kernel
//! sample came. [`KernelFigures`] adds what only this engine sees: samples the
//! kernel took and dropped, the BPF program's run time, drains and wake-ups a second.

use super::{KernelCounts, KernelSample, KernelSampler};
use crate::command::{ChildEvent, MeasuredCommand};
use crate::error::{Error, Result};
use crate::meter::{monotonic_ns, Meter};
use crate::overhead::{Overhead, SamplerCounts, ThreadUsage};
use crate::record::Recording;
use crate::sampler::{block_stop_signals, Record, MAX_CHANNELS, RT_PRIORITY};
use crate::sink::{Metadata, NullSink, Sink};
use crate::source::{Channel, Mechanism, Source};
use crate::ticker::Hertz;
use crate::units::{EnergyUnit, Joules};
use crate::writer;
use rtrb::{Consumer, Producer, PushError};
use rustix::event::epoll;
use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec};
use serde::Serialize;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How to run an in-kernel recording.
#[derive(Debug, Clone)]
pub struct InKernelConfig {
    /// How often user space drains the kernel rings (default 1 Hz); the rings also
    /// wake it early at their watermark (far behind the timer).
    pub drain: Hertz,
    /// End after this long (from the first reading); `None`: until stopped.
    pub duration: Option<Duration>,
    /// Pin the drain thread to this CPU.
    pub cpu: Option<usize>,
    /// Ask for SCHED_FIFO for the drain thread (a warning when refused).
    pub realtime: bool,
}

impl InKernelConfig {
    /// Defaults: drain at `drain`, no end, no pinning, normal priority.
    pub fn new(drain: Hertz) -> InKernelConfig {
        InKernelConfig {
            drain,
            duration: None,
            cpu: None,
            realtime: false,
        }
    }
}

/// What only the in-kernel engine can tell about its cost and losses.
#[derive(Debug, Clone, Serialize)]
pub struct KernelFigures {
    /// The mechanism (`ebpf` or `perf-ring`).
    pub mechanism: &'static str,
    /// The sampling rate asked of the kernel.
    pub freq_hz: f64,
    /// The drain rate.
    pub drain_hz: f64,
    /// The kernel side's own counts over the recording.
    pub kernel: KernelCounts,
    /// Samples read from the rings (every sampling CPU).
    pub received: u64,
    /// Samples read but outside the recording (before its first or after its last
    /// user-space reading).
    pub discarded: u64,
    /// Times user space drained the rings.
    pub drains: u64,
    /// Drains a ring's watermark caused before the drain timer.
    pub early_wakeups: u64,
    /// The drain thread's voluntary context switches a second: its wake-ups.
    pub wakeups_per_s: f64,
    /// Records a second (the first sampling CPU's samples, as received).
    pub achieved_hz: f64,
    /// Times the first sampling CPU's clock skipped more than two periods (perf
    /// throttles a sampling event on a tickless idle CPU: see
    /// [`KernelFigures::warnings`]).
    pub clock_gaps: u64,
    /// The longest time between two of its samples, milliseconds.
    pub longest_gap_ms: f64,
    /// The BPF program's run time per run, nanoseconds (ebpf with statistics on).
    pub kernel_ns_per_sample: Option<f64>,
    /// User-space CPU (drain and sink) plus the kernel program's run time, per record.
    pub total_cpu_per_sample_ns: f64,
}

impl std::fmt::Display for KernelFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "    in-kernel ({}): {} samples taken by the kernel at {} Hz, {} dropped (full ring), {} read errors{}",
            self.mechanism,
            self.kernel.taken,
            self.freq_hz,
            self.kernel.dropped,
            self.kernel.read_errors,
            if self.kernel.throttled > 0 {
                format!(", throttled {} time(s)", self.kernel.throttled)
            } else {
                String::new()
            }
        )?;
        if self.clock_gaps > 0 {
            writeln!(
                f,
                "    the kernel's clock skipped {} time(s), the longest gap {:.1} ms",
                self.clock_gaps, self.longest_gap_ms
            )?;
        }
        write!(
            f,
            "    drained {} time(s) at {} Hz ({} early), {:.2} wake-ups/s, {:.1} records/s; {}{:.2} us of CPU per record in all",
            self.drains,
            self.drain_hz,
            self.early_wakeups,
            self.wakeups_per_s,
            self.achieved_hz,
            match self.kernel_ns_per_sample {
                Some(ns) => format!("{:.2} us in the BPF program per sample, ", ns / 1e3),
                None => String::new(),
            },
            self.total_cpu_per_sample_ns / 1e3
        )
    }
}

impl KernelFigures {
    /// What the figures say the user must know: clock gaps (perf throttling), and
    /// for perf-ring the energy its throttled group did not count.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let fix = "raise the limit, e.g. `sudo sysctl kernel.perf_event_max_sample_rate=2000000` \
                   (perf throttles a sampling event after perf_event_max_sample_rate/HZ samples \
                   without a scheduler tick, which an idle CPU stops)";
        if self.mechanism == Mechanism::PerfRing.name() && self.kernel.throttled > 0 {
            w.push(format!(
                "perf-ring: the kernel throttled the sampling group {} time(s); since Linux 6.16 a \
                 throttle stops the whole group, energy events included, so the energy of the \
                 throttled time was not counted: {fix}, or use --mechanism ebpf (its energy \
                 events are not in the clock's group)",
                self.kernel.throttled
            ));
        } else if self.clock_gaps > 0 && self.longest_gap_ms > 20.0 {
            w.push(format!(
                "{}: the kernel's sampling clock stopped {} time(s), for up to {:.0} ms (the energy \
                 is still complete: the next sample covers the gap); to sample idle CPUs without \
                 gaps, {fix}",
                self.mechanism, self.clock_gaps, self.longest_gap_ms
            ));
        }
        w
    }
}

/// An in-kernel recording: the same [`Recording`] as the polling engine's, and the
/// kernel side's figures.
#[derive(Debug)]
pub struct InKernelRecording {
    /// Samples, energy, overhead, warnings, error: as for a polling recording.
    pub recording: Recording,
    /// What the kernel side did and cost.
    pub kernel: KernelFigures,
}

/// A command measured by an in-kernel mechanism.
#[derive(Debug)]
pub struct InKernelCommand {
    /// Energy, exit status, overhead: as for a polling measurement.
    pub measured: MeasuredCommand,
    /// What the kernel side did and cost.
    pub kernel: KernelFigures,
}

/// Records `sampler` into `sink` until `config.duration` has passed or `stop` is
/// set (seen at once when a signal sets it, otherwise at the next drain: no thread
/// wakes just to look at it). `output` names the sink's file in
/// errors; `meta` is the sink's header. The same contract as
/// [`crate::record::record`]: a header that cannot be written fails before anything
/// is measured, a later failure ends the recording with the error set.
pub fn record(
    sampler: &mut dyn KernelSampler,
    sink: &mut dyn Sink,
    output: &Path,
    meta: &Metadata,
    config: &InKernelConfig,
    stop: &AtomicBool,
) -> Result<InKernelRecording> {
    let out_err = |source| Error::Output {
        path: output.to_path_buf(),
        source,
    };
    sink.begin(meta, sampler.channels()).map_err(out_err)?;
    let mut meter = Meter::new(Box::new(Fed::of(sampler)));
    let run = drive(sampler, &mut meter, sink, config, Some(stop), |done| {
        wait_for(&[done], stop)?;
        Ok(())
    })?;
    let error = match run.outcome.write_error {
        Some(e) => Some(out_err(e)),
        None => run.outcome.read_error,
    };
    let overhead = Overhead::new(
        &run.outcome.counts,
        run.outcome.sink_usage,
        run.outcome.kept,
    );
    let mut warnings = run.warnings;
    warnings.extend(run.outcome.figures.warnings());
    Ok(InKernelRecording {
        recording: Recording {
            samples: run.outcome.kept,
            missed_deadlines: run.outcome.counts.missed,
            report: meter.report(),
            overhead,
            warnings,
            error,
        },
        kernel: run.outcome.figures,
    })
}

/// Runs `cmd` while `sampler` samples in the kernel; the first reading is taken
/// before the spawn and the last as soon as the command exits (a pidfd wakes the
/// waiting thread), as [`crate::command::measure`] does.
pub fn measure(
    sampler: &mut dyn KernelSampler,
    cmd: &mut Command,
    config: &InKernelConfig,
) -> Result<InKernelCommand> {
    measure_watched(sampler, cmd, config, &mut |_| {})
}

/// [`measure`], telling `watch` when the command starts and ends (as
/// [`crate::command::measure_watched`] does).
pub fn measure_watched(
    sampler: &mut dyn KernelSampler,
    cmd: &mut Command,
    config: &InKernelConfig,
    watch: &mut dyn FnMut(ChildEvent),
) -> Result<InKernelCommand> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let spawn_err = |source| Error::Spawn {
        program: program.clone(),
        source,
    };
    let mut config = config.clone();
    config.duration = None;
    let mut meter = Meter::new(Box::new(Fed::of(sampler)));
    let mut status: Option<ExitStatus> = None;
    let run = drive(sampler, &mut meter, &mut NullSink, &config, None, |done| {
        let mut child = cmd.spawn().map_err(spawn_err)?;
        watch(ChildEvent::Spawned(child.id()));
        let pidfd = rustix::process::Pid::from_raw(child.id() as i32).and_then(|p| {
            rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok()
        });
        match &pidfd {
            Some(fd) => {
                // Ctrl-C reaches the child too; it exits and wakes us through its pidfd.
                let never = AtomicBool::new(false);
                wait_for(&[fd.as_fd(), done], &never)?;
            }
            None => {
                // No pidfd (kernel < 5.3): look every 10 ms.
                while matches!(child.try_wait(), Ok(None)) {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
        watch(ChildEvent::Exited);
        status = Some(child.wait().map_err(spawn_err)?);
        Ok(())
    })?;
    let status = status.ok_or_else(|| Error::Engine {
        what: "wait for the measured command".into(),
        source: io::Error::other("the command's status was not collected"),
    })?;
    let overhead = Overhead::new(
        &run.outcome.counts,
        run.outcome.sink_usage,
        run.outcome.kept,
    );
    let mut warnings = run.warnings;
    warnings.extend(run.outcome.figures.warnings());
    Ok(InKernelCommand {
        measured: MeasuredCommand {
            report: meter.report(),
            status,
            overhead,
            warnings,
            error: run.outcome.read_error,
        },
        kernel: run.outcome.figures,
    })
}

/// Sleeps until one of `fds` (one or two) is readable, or a signal arrives and
/// `stop` is set. A flag set without a signal is the drain thread's to see (it
/// looks at each drain): this thread then wakes through the drain thread's end.
fn wait_for(fds: &[BorrowedFd<'_>], stop: &AtomicBool) -> Result<()> {
    let (first, second) = match fds {
        [a] => (*a, None),
        [a, b, ..] => (*a, Some(*b)),
        [] => {
            return Err(Error::Engine {
                what: "wait for the end of the recording".into(),
                source: io::Error::from_raw_os_error(libc::EINVAL),
            })
        }
    };
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut polled: [PollFd<'_>; 2] = [
            PollFd::from_borrowed_fd(first, PollFlags::IN),
            PollFd::from_borrowed_fd(second.unwrap_or(first), PollFlags::IN),
        ];
        let n = if second.is_some() { 2 } else { 1 };
        match rustix::event::poll(&mut polled[..n], None) {
            Ok(n) if n > 0 => return Ok(()),
            // A signal (Ctrl-C, SIGTERM): its handler set `stop`, or it was another one.
            Ok(_) | Err(rustix::io::Errno::INTR) => continue,
            Err(e) => {
                return Err(Error::Engine {
                    what: "wait for the end of the recording".into(),
                    source: e.into(),
                })
            }
        }
    }
}

/// The channels of an in-kernel sampler as a [`Source`] for its [`Meter`], which is
/// fed the kernel's readings ([`Meter::feed`]) and never reads by itself.
struct Fed {
    mechanism: Mechanism,
    channels: Vec<Channel>,
    notes: Vec<String>,
}

impl Fed {
    fn of(s: &dyn KernelSampler) -> Fed {
        Fed {
            mechanism: s.mechanism(),
            channels: s.channels().to_vec(),
            notes: s.notes().to_vec(),
        }
    }
}

impl Source for Fed {
    fn mechanism(&self) -> Mechanism {
        self.mechanism
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn read(&mut self, _: &mut [u64]) -> Result<()> {
        Err(Error::Engine {
            what: format!("read the {} mechanism from user space", self.mechanism),
            source: io::Error::other("its readings come from the kernel (Meter::feed)"),
        })
    }
    fn notes(&self) -> &[String] {
        &self.notes
    }
}

/// What one in-kernel run gave.
struct Run {
    outcome: Outcome,
    warnings: Vec<String>,
}

/// What the drain thread returns.
struct Outcome {
    counts: SamplerCounts,
    sink_usage: ThreadUsage,
    /// Samples the output holds whole ([`Sink::kept`]): after a failed write,
    /// fewer than were handed to the sink.
    kept: u64,
    read_error: Option<Error>,
    write_error: Option<io::Error>,
    figures: KernelFigures,
}

/// Runs the drain thread on `sampler`, runs `between` on this thread once the first
/// reading is taken (it returns when it is time to stop; it gets the descriptor that
/// becomes readable when the drain thread ends by itself), then stops and joins it.
/// The drain thread also ends at a drain that finds `stop` set.
fn drive(
    sampler: &mut dyn KernelSampler,
    meter: &mut Meter,
    sink: &mut dyn Sink,
    config: &InKernelConfig,
    stop: Option<&AtomicBool>,
    between: impl FnOnce(BorrowedFd<'_>) -> Result<()>,
) -> Result<Run> {
    let n = sampler.channels().len();
    if n > MAX_CHANNELS {
        return Err(Error::TooManyChannels {
            count: n,
            max: MAX_CHANNELS,
        });
    }
    let efd = |what: &str| {
        rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).map_err(|e| {
            Error::Engine {
                what: format!("create an eventfd ({what})"),
                source: e.into(),
            }
        })
    };
    let stop_fd = efd("stop")?;
    let done_fd = efd("done")?;
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<Vec<String>>>(1);
    std::thread::scope(|s| {
        let (stop_ref, done_ref) = (&stop_fd, &done_fd);
        let drain = std::thread::Builder::new()
            .name("quietwatt-drain".into())
            .spawn_scoped(s, move || {
                let out = drain_thread(
                    sampler,
                    meter,
                    sink,
                    config,
                    stop_ref.as_fd(),
                    stop,
                    ready_tx,
                );
                signal(done_ref.as_fd());
                out
            })
            .map_err(|source| Error::Engine {
                what: "start the drain thread".into(),
                source,
            })?;
        let mut warnings = Vec::new();
        let between_result = match ready_rx.recv() {
            Ok(Ok(w)) => {
                warnings.extend(w);
                between(done_fd.as_fd())
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::Engine {
                what: "start the drain thread".into(),
                source: io::Error::other("the drain thread ended during setup"),
            }),
        };
        signal(stop_fd.as_fd());
        let outcome = drain
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        between_result?;
        let outcome = outcome?;
        Ok(Run { outcome, warnings })
    })
}

/// Makes an eventfd readable.
fn signal(fd: BorrowedFd<'_>) {
    // An eventfd write only fails when the counter would overflow, which one write
    // per run cannot reach.
    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
}

/// Pinning and priority; warnings for what was refused but is not fatal.
fn prepare(config: &InKernelConfig, counts: &mut SamplerCounts) -> Result<Vec<String>> {
    let mut warnings = Vec::new();
    if let Some(cpu) = config.cpu {
        let what = || {
            format!("pin the drain thread to CPU {cpu} (--cpu): give an online CPU that this process may use")
        };
        if cpu >= rustix::thread::CpuSet::MAX_CPU {
            return Err(Error::Engine {
                what: what(),
                source: io::Error::from_raw_os_error(libc::EINVAL),
            });
        }
        let mut set = rustix::thread::CpuSet::new();
        set.set(cpu);
        rustix::thread::sched_setaffinity(None, &set).map_err(|e| Error::Engine {
            what: what(),
            source: e.into(),
        })?;
        counts.pinned_cpu = Some(cpu);
    }
    if config.realtime {
        let param = libc::sched_param {
            sched_priority: RT_PRIORITY,
        };
        // SAFETY: sched_setscheduler reads the param struct, which lives for the
        // call; pid 0 is the calling thread.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
            counts.realtime = true;
        } else {
            warnings.push(format!(
                "--rt: SCHED_FIFO refused ({}); draining at normal priority",
                io::Error::last_os_error()
            ));
        }
    }
    Ok(warnings)
}

/// Turns kernel samples into records: the state the drain callback needs, apart
/// from the sampler itself (which lends its ring to the callback).
struct Folder<'m> {
    meter: &'m mut Meter,
    producer: Producer<Record>,
    /// Each event's latest count, events of all groups in order.
    latest: Vec<u64>,
    /// The channel each event adds to.
    event_channel: Vec<usize>,
    /// Index of each group's first event in `latest`.
    first_event: Vec<usize>,
    /// Scratch: the summed raw value of each channel.
    raw: Vec<u64>,
    freq: Hertz,
    period_ns: u64,
    prev_t: u64,
    /// Samples outside [keep_from, keep_before) are not part of the recording.
    keep_from: u64,
    keep_before: u64,
    pending_missed: u64,
    counts: SamplerCounts,
    received: u64,
    discarded: u64,
    /// Intervals of more than two periods between the first group's samples.
    gaps: u64,
    longest_ns: u64,
    error: Option<Error>,
}

impl Folder<'_> {
    /// Folds one kernel sample in; the first group's samples make records.
    fn fold(&mut self, s: &KernelSample<'_>) -> bool {
        if s.t_ns < self.keep_from || s.t_ns >= self.keep_before {
            self.discarded += 1;
            return false;
        }
        self.received += 1;
        let base = self.first_event.get(s.group).copied().unwrap_or(0);
        for (i, &v) in s.values.iter().enumerate() {
            if s.failed & (1 << i) == 0 {
                if let Some(l) = self.latest.get_mut(base + i) {
                    *l = v;
                }
            }
        }
        self.pending_missed += s.lost_before;
        if s.group == 0 {
            let interval = s.t_ns.saturating_sub(self.prev_t);
            self.counts
                .lateness
                .record(interval.saturating_sub(self.period_ns));
            if interval > 2 * self.period_ns {
                self.gaps += 1;
            }
            self.longest_ns = self.longest_ns.max(interval);
            return self.emit(s.t_ns);
        }
        false
    }

    /// Makes a record of the latest counts at `t`; true when the producer is full
    /// (the caller must hand the records to the sink before the next).
    fn emit(&mut self, t: u64) -> bool {
        if t <= self.prev_t || self.error.is_some() {
            return false;
        }
        self.raw.fill(0);
        for (&v, &c) in self.latest.iter().zip(&self.event_channel) {
            // Modulo 2^64: a sum of 64-bit counters is a 64-bit counter.
            self.raw[c] = self.raw[c].wrapping_add(v);
        }
        let deltas = match self.meter.feed(t, &self.raw) {
            Ok(d) => d,
            Err(e) => {
                self.error = Some(e);
                return false;
            }
        };
        let missed = std::mem::take(&mut self.pending_missed);
        let mut rec = Record::new(t, t - self.prev_t, missed, self.freq, deltas);
        rec.marks = self.meter.marks();
        self.prev_t = t;
        self.counts.samples += 1;
        self.counts.missed += missed;
        self.counts.last_ns = t;
        match self.producer.push(rec) {
            Ok(()) => self.producer.slots() == 0,
            // Cannot happen: the caller empties the ring whenever it fills.
            Err(PushError::Full(_)) => {
                self.counts.ring_full += 1;
                true
            }
        }
    }
}

/// Hands the records to the sink, timing it as the writer's share.
struct Writer<'s> {
    sink: &'s mut dyn Sink,
    consumer: Consumer<Record>,
    units: Vec<EnergyUnit>,
    energy: Vec<Joules>,
    written: u64,
    usage: ThreadUsage,
    error: Option<io::Error>,
}

impl Writer<'_> {
    fn write(&mut self, flush: bool) {
        if self.error.is_some() || (self.consumer.slots() == 0 && !flush) {
            return;
        }
        let t0 = ThreadUsage::current();
        let mut r = writer::drain(
            &mut self.consumer,
            self.sink,
            &self.units,
            &mut self.energy,
            &mut self.written,
        );
        if r.is_ok() && flush {
            r = self.sink.flush();
        }
        self.usage = self.usage.plus(ThreadUsage::current().since(t0));
        if let Err(e) = r {
            self.error = Some(e);
        }
    }
}

/// The drain thread's body.
fn drain_thread(
    sampler: &mut dyn KernelSampler,
    meter: &mut Meter,
    sink: &mut dyn Sink,
    config: &InKernelConfig,
    stop_fd: BorrowedFd<'_>,
    stop: Option<&AtomicBool>,
    ready: std::sync::mpsc::SyncSender<Result<Vec<String>>>,
) -> Result<Outcome> {
    block_stop_signals();
    let usage0 = ThreadUsage::current();
    let mut counts = SamplerCounts::default();
    let setup = prepare(config, &mut counts).and_then(|w| {
        let ep = epoll_for(sampler, stop_fd)?;
        Ok((w, ep))
    });
    let (warnings, ep) = match setup {
        Ok(x) => x,
        Err(e) => {
            let _ = ready.send(Err(e));
            return Err(Error::Engine {
                what: "set up the drain thread".into(),
                source: io::Error::other("see the error reported at start"),
            });
        }
    };

    let freq = sampler.freq();
    let period_ns = super::period_ns(freq);
    let events = sampler.event_count();
    let mut event_channel = Vec::with_capacity(events);
    let mut first_event = Vec::with_capacity(sampler.group_channels().len());
    for g in sampler.group_channels() {
        first_event.push(event_channel.len());
        event_channel.extend_from_slice(g);
    }
    // The records of one drain go to the sink whenever this ring fills, so it need
    // not hold a whole drain: 1024 records (about half a megabyte) at any rate.
    let capacity = 1024;
    let (producer, consumer) = rtrb::RingBuffer::<Record>::new(capacity);
    let units: Vec<EnergyUnit> = sampler.channels().iter().map(|c| c.unit).collect();
    let n = units.len();
    let mut writer = Writer {
        sink,
        consumer,
        units,
        energy: vec![Joules(0.0); n],
        written: 0,
        usage: ThreadUsage::default(),
        error: None,
    };
    let mut folder = Folder {
        meter,
        producer,
        latest: vec![0; events],
        event_channel,
        first_event,
        raw: vec![0; n],
        freq,
        period_ns,
        prev_t: 0,
        keep_from: u64::MAX,
        keep_before: u64::MAX,
        pending_missed: 0,
        counts,
        received: 0,
        discarded: 0,
        gaps: 0,
        longest_ns: 0,
        error: None,
    };

    // Start, then the priming reading: its time is taken before the reads (as the
    // polling sampler's), and kernel samples count from the end of the reads.
    let started = sampler.start().and_then(|()| {
        let t0 = monotonic_ns();
        sampler.read_events(&mut folder.latest)?;
        let t1 = monotonic_ns();
        Ok((t0, t1))
    });
    let (t0, t1) = match started {
        Ok(x) => x,
        Err(e) => {
            let _ = sampler.stop();
            let _ = ready.send(Err(e));
            return Err(Error::Engine {
                what: "start the in-kernel sampling".into(),
                source: io::Error::other("see the error reported at start"),
            });
        }
    };
    folder.raw.fill(0);
    for (&v, &c) in folder.latest.iter().zip(&folder.event_channel) {
        folder.raw[c] = folder.raw[c].wrapping_add(v);
    }
    if let Err(e) = folder.meter.feed(t0, &folder.raw) {
        let _ = sampler.stop();
        let _ = ready.send(Err(e));
        return Err(Error::Engine {
            what: "take the first reading".into(),
            source: io::Error::other("see the error reported at start"),
        });
    }
    folder.prev_t = t0;
    folder.keep_from = t1;
    folder.counts.first_ns = t0;
    folder.counts.last_ns = t0;
    let _ = ready.send(Ok(warnings));

    let drain_ns = (1e9 / config.drain.hz()).round().max(1.0) as u64;
    let end_ns = config.duration.map(|d| t0 + d.as_nanos() as u64);
    let mut next_drain = t0 + drain_ns;
    let mut drains = 0u64;
    let mut early = 0u64;
    let mut events_buf = [epoll::Event {
        flags: epoll::EventFlags::empty(),
        data: epoll::EventData::new_u64(0),
    }; 8];
    let mut sample_error: Option<Error> = None;
    // The last reading's room, taken now: the final drain allocates nothing either.
    let mut last = vec![0u64; events];
    loop {
        let now = monotonic_ns();
        let until = end_ns.map_or(next_drain, |e| e.min(next_drain));
        let wait = until.saturating_sub(now);
        let ts = Timespec {
            tv_sec: (wait / 1_000_000_000) as _,
            tv_nsec: (wait % 1_000_000_000) as _,
        };
        let mut stopping = false;
        let mut ring_ready = false;
        match epoll::wait(&ep, &mut events_buf[..], Some(&ts)) {
            Ok(k) => {
                for ev in &events_buf[..k] {
                    if ev.data.u64() == STOP_KEY {
                        stopping = true;
                    } else {
                        ring_ready = true;
                    }
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => {
                sample_error = Some(Error::Engine {
                    what: "wait for the kernel rings".into(),
                    source: e.into(),
                });
                stopping = true;
            }
        }
        let now = monotonic_ns();
        if end_ns.is_some_and(|e| now >= e) || stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
            stopping = true;
        }
        if stopping {
            break;
        }
        if ring_ready && now < next_drain {
            early += 1;
        }
        drains += 1;
        if let Err(e) = drain_once(sampler, &mut folder, &mut writer) {
            sample_error = Some(e);
            break;
        }
        writer.write(true);
        if folder.error.is_some() || writer.error.is_some() {
            break;
        }
        if now >= next_drain {
            // Skip drains the thread slept through rather than run them in a burst.
            next_drain += drain_ns * ((now - next_drain) / drain_ns + 1);
        }
    }

    // The last reading, then stop the kernel sampling and take what it queued before.
    let t_end = monotonic_ns();
    let last_read = sampler.read_events(&mut last);
    folder.keep_before = t_end;
    let stopped = sampler.stop();
    drains += 1;
    if let Err(e) = drain_once(sampler, &mut folder, &mut writer) {
        sample_error.get_or_insert(e);
    }
    match last_read.and(stopped) {
        Ok(()) => {
            folder.latest.copy_from_slice(&last);
            folder.emit(t_end);
        }
        Err(e) => {
            sample_error.get_or_insert(e);
        }
    }
    writer.write(true);
    if writer.error.is_none() {
        if let Err(e) = writer.sink.finish() {
            writer.error = Some(e);
        }
    }

    let mut counts = folder.counts;
    let total = ThreadUsage::current().since(usage0);
    counts.usage = ThreadUsage {
        cpu_ns: total.cpu_ns.saturating_sub(writer.usage.cpu_ns),
        ..total
    };
    let kernel = sampler.kernel_counts();
    let secs = (counts.last_ns.saturating_sub(counts.first_ns)) as f64 / 1e9;
    let per_s = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
    let kernel_ns_per_sample = match (kernel.prog_run_ns, kernel.prog_runs) {
        (Some(ns), Some(runs)) if runs > 0 => Some(ns as f64 / runs as f64),
        _ => None,
    };
    let samples = counts.samples.max(1) as f64;
    let user_ns = (counts.usage.cpu_ns + writer.usage.cpu_ns) as f64;
    let figures = KernelFigures {
        mechanism: sampler.mechanism().name(),
        freq_hz: freq.hz(),
        drain_hz: config.drain.hz(),
        kernel,
        received: folder.received,
        discarded: folder.discarded,
        drains,
        early_wakeups: early,
        wakeups_per_s: per_s(total.voluntary_switches as f64),
        achieved_hz: per_s(counts.samples as f64),
        clock_gaps: folder.gaps,
        longest_gap_ms: folder.longest_ns as f64 / 1e6,
        kernel_ns_per_sample,
        total_cpu_per_sample_ns: (user_ns + kernel.prog_run_ns.unwrap_or(0) as f64) / samples,
    };
    Ok(Outcome {
        counts,
        sink_usage: writer.usage,
        kept: writer.sink.kept().unwrap_or(writer.written),
        read_error: folder.error.or(sample_error),
        write_error: writer.error,
        figures,
    })
}

/// Drains every ring once, handing records to the sink whenever the ring to the
/// writer fills.
fn drain_once(
    sampler: &mut dyn KernelSampler,
    folder: &mut Folder<'_>,
    writer: &mut Writer<'_>,
) -> Result<()> {
    sampler.drain(&mut |s| {
        if folder.fold(s) {
            writer.write(false);
        }
    })
}

/// The epoll key of the stop eventfd (the rings use 0..).
const STOP_KEY: u64 = u64::MAX;

/// An epoll set with the rings' watermark descriptors (edge-triggered: a ring's
/// readiness is level in the kernel and would wake us for every sample) and the
/// stop eventfd.
fn epoll_for(sampler: &dyn KernelSampler, stop_fd: BorrowedFd<'_>) -> Result<OwnedFd> {
    let err = |source: rustix::io::Errno| Error::Engine {
        what: "set up the drain thread's epoll".into(),
        source: source.into(),
    };
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(err)?;
    for (i, fd) in sampler.wake_fds().into_iter().enumerate() {
        epoll::add(
            &ep,
            fd,
            epoll::EventData::new_u64(i as u64),
            epoll::EventFlags::IN | epoll::EventFlags::ET,
        )
        .map_err(err)?;
    }
    epoll::add(
        &ep,
        stop_fd,
        epoll::EventData::new_u64(STOP_KEY),
        epoll::EventFlags::IN,
    )
    .map_err(err)?;
    Ok(ep)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::Wrap;
    use crate::domain::{Domain, DomainId};
    use std::path::PathBuf;

    fn channel(socket: u32, domain: Domain) -> Channel {
        Channel {
            id: DomainId::new(socket, domain),
            unit: EnergyUnit::PowerOfTwo(32),
            wrap: Wrap::PERF,
            origin: PathBuf::from(format!("test/{socket}/{domain}")),
            limit: None,
        }
    }

    /// Two sampling CPUs: group 0 has package and dram of socket 0, group 1 the
    /// package of socket 1. Channels: 0/package, 0/dram, 1/package.
    fn folder(meter: &mut Meter) -> (Folder<'_>, Consumer<Record>) {
        let (producer, consumer) = rtrb::RingBuffer::new(64);
        let f = Folder {
            meter,
            producer,
            latest: vec![0; 3],
            event_channel: vec![0, 1, 2],
            first_event: vec![0, 2],
            raw: vec![0; 3],
            freq: Hertz::clamped(1000.0),
            // Test times are in microseconds' worth of nanoseconds: a 1 us period.
            period_ns: 1_000,
            prev_t: 0,
            keep_from: 0,
            keep_before: u64::MAX,
            pending_missed: 0,
            counts: SamplerCounts::default(),
            received: 0,
            discarded: 0,
            gaps: 0,
            longest_ns: 0,
            error: None,
        };
        (f, consumer)
    }

    fn sample(
        group: usize,
        t_ns: u64,
        lost_before: u64,
        values: &[u64],
        failed: u32,
    ) -> KernelSample<'_> {
        KernelSample {
            group,
            t_ns,
            lost_before,
            values,
            failed,
        }
    }

    #[test]
    fn the_first_group_makes_the_records_and_the_others_fold_in() {
        let mut meter = Meter::new(Box::new(Fed {
            mechanism: Mechanism::Ebpf,
            channels: vec![
                channel(0, Domain::Package),
                channel(0, Domain::Dram),
                channel(1, Domain::Package),
            ],
            notes: Vec::new(),
        }));
        let (mut f, mut out) = folder(&mut meter);
        // The priming reading.
        f.latest.copy_from_slice(&[100, 10, 1000]);
        f.raw.copy_from_slice(&[100, 10, 1000]);
        f.meter.feed(1_000, &f.raw).unwrap();
        f.prev_t = 1_000;
        f.keep_from = 1_500;

        // Before the first reading ended: not part of the recording.
        assert!(!f.fold(&sample(0, 1_200, 0, &[99, 9], 0)));
        // Group 1 first: no record yet.
        assert!(!f.fold(&sample(1, 1_900, 0, &[1_050], 0)));
        f.fold(&sample(0, 2_000, 0, &[110, 12], 0));
        // Three samples of group 0 lost, and its dram failed to read this time.
        f.fold(&sample(0, 6_000, 3, &[150, 0], 0b10));
        f.fold(&sample(1, 6_500, 0, &[1_200], 0));
        f.fold(&sample(0, 7_000, 0, &[160, 20], 0));

        let recs: Vec<Record> = std::iter::from_fn(|| out.pop().ok()).collect();
        let got: Vec<(u64, u64, u32, Vec<u64>)> = recs
            .iter()
            .map(|r| (r.t_ns, r.interval_ns, r.missed, r.deltas().to_vec()))
            .collect();
        assert_eq!(
            got,
            vec![
                (2_000, 1_000, 0, vec![10, 2, 50]),
                // The failed dram reading kept its previous value: delta 0, caught up next.
                (6_000, 4_000, 3, vec![40, 0, 0]),
                (7_000, 1_000, 0, vec![10, 8, 150]),
            ]
        );
        assert_eq!((f.received, f.discarded), (5, 1));
        assert_eq!((f.counts.samples, f.counts.missed), (3, 3));
        // The counters' totals are the sums of the deltas.
        let totals = f.meter.total_steps();
        assert_eq!(totals, vec![60, 10, 200]);
        // Lateness: the 4 us interval was 3 us late; it is the one gap.
        assert_eq!(f.counts.lateness.max(), 3_000);
        assert_eq!((f.gaps, f.longest_ns), (1, 4_000));
    }

    fn figures(mechanism: Mechanism, throttled: u64, gaps: u64, longest_ms: f64) -> KernelFigures {
        KernelFigures {
            mechanism: mechanism.name(),
            freq_hz: 1000.0,
            drain_hz: 1.0,
            kernel: KernelCounts {
                throttled,
                ..KernelCounts::default()
            },
            received: 0,
            discarded: 0,
            drains: 0,
            early_wakeups: 0,
            wakeups_per_s: 0.0,
            achieved_hz: 0.0,
            clock_gaps: gaps,
            longest_gap_ms: longest_ms,
            kernel_ns_per_sample: None,
            total_cpu_per_sample_ns: 0.0,
        }
    }

    #[test]
    fn throttling_and_clock_gaps_are_told_with_the_fix() {
        assert!(figures(Mechanism::Ebpf, 0, 0, 1.0).warnings().is_empty());
        // A few ms now and then: not worth a warning.
        assert!(figures(Mechanism::Ebpf, 0, 3, 6.0).warnings().is_empty());
        let w = figures(Mechanism::Ebpf, 0, 2, 370.0).warnings();
        assert!(
            w.len() == 1
                && w[0].contains("still complete")
                && w[0].contains("perf_event_max_sample_rate"),
            "{w:?}"
        );
        let w = figures(Mechanism::PerfRing, 2, 2, 370.0).warnings();
        assert!(
            w.len() == 1
                && w[0].contains("6.16")
                && w[0].contains("not counted")
                && w[0].contains("ebpf"),
            "{w:?}"
        );
    }

    #[test]
    fn a_64_bit_wrap_between_two_samples_is_corrected() {
        let mut meter = Meter::new(Box::new(Fed {
            mechanism: Mechanism::PerfRing,
            channels: vec![channel(0, Domain::Package)],
            notes: Vec::new(),
        }));
        let (producer, mut out) = rtrb::RingBuffer::new(8);
        let mut f = Folder {
            meter: &mut meter,
            producer,
            latest: vec![u64::MAX - 5],
            event_channel: vec![0],
            first_event: vec![0],
            raw: vec![u64::MAX - 5],
            freq: Hertz::clamped(1000.0),
            period_ns: 1_000_000,
            prev_t: 10,
            keep_from: 0,
            keep_before: u64::MAX,
            pending_missed: 0,
            counts: SamplerCounts::default(),
            received: 0,
            discarded: 0,
            gaps: 0,
            longest_ns: 0,
            error: None,
        };
        f.meter.feed(10, &[u64::MAX - 5]).unwrap();
        f.fold(&sample(0, 20, 0, &[4], 0));
        assert_eq!(out.pop().unwrap().deltas(), &[10]);
        assert_eq!(f.meter.wraps(), vec![1]);
    }
}
