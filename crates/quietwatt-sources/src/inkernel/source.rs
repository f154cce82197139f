//! An in-kernel sampler as a buffered [`Source`]: what is specific to the kernel
//! side (loading the BPF program or opening the perf ring, the groups of events per
//! sampling CPU, the recording's bounds) stays here; the engine sees channels, a
//! user-space [`Source::read`] and batches of [`Reading`]s.
//!
//! **Readings.** The first and last readings of a recording are user-space reads of
//! the very perf events the kernel samples, so the energy covers the recording
//! exactly, as with the polling sampler's priming and final reads. Kernel samples
//! taken before the first read completed, or after the last one began, are
//! discarded: a user-space read of a CPU-wide event runs on that CPU (an IPI, with
//! interrupts off) and so is ordered with the kernel's own reads there, which makes
//! every kept sample's counts lie between the first and last readings.
//!
//! **One reading per tick.** With several sampling CPUs (several packages), the first
//! group's samples make the readings; every other group's latest counts are folded
//! in at that moment. Each counter's deltas still sum to its total.

use super::{period_ns, KernelCounts, KernelSample, KernelSampler};
use crate::error::Result;
use crate::{Channel, Mechanism, Mode, Reading, Source};
use quietwatt_core::Hertz;
use quietwatt_sys::clock::monotonic_ns;
use std::ptr::NonNull;

/// What the kernel side of a buffered source did over a recording.
#[derive(Debug, Clone, Copy)]
pub struct KernelSide {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// The kernel's sampling rate.
    pub freq: Hertz,
    /// The drain rate.
    pub drain: Hertz,
    /// The kernel's own counts.
    pub kernel: KernelCounts,
    /// Samples read from the rings (every sampling CPU) within the recording.
    pub received: u64,
    /// Samples read but outside the recording.
    pub discarded: u64,
    /// Times the rings were drained.
    pub drains: u64,
    /// Intervals of more than two periods between the first group's samples.
    pub gaps: u64,
    /// The longest of those intervals, nanoseconds.
    pub longest_ns: u64,
}

/// Memory that the sampler borrows for its whole life (the BPF object): freed after
/// the sampler, by [`KernelSource`]'s drop.
struct Owned<T>(NonNull<T>);

// Only the BPF object borrows memory this way.
#[cfg(feature = "bpf")]
impl<T: Default> Owned<T> {
    fn new() -> Owned<T> {
        Owned(NonNull::from(Box::leak(Box::<T>::default())))
    }

    /// The memory, for as long as the sampler that borrows it lives.
    ///
    /// # Safety
    /// Called once; the reference must not outlive this `Owned` (the
    /// [`KernelSource`] drops its sampler first).
    unsafe fn lend(&mut self) -> &'static mut T {
        // SAFETY: the pointer comes from a leaked Box and is freed only in drop.
        unsafe { &mut *self.0.as_ptr() }
    }
}

impl<T> Drop for Owned<T> {
    fn drop(&mut self) {
        // SAFETY: leaked by `new`, freed only here; the borrower is gone (see lend).
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

// SAFETY: the memory is only reached through the sampler it is lent to, which is
// Send, and freed after it.
unsafe impl<T> Send for Owned<T> {}

/// The BPF object's room, kept alive behind the sampler that borrows it.
pub(crate) struct Keep {
    _room: Option<Owned<super::Storage>>,
}

impl Keep {
    /// Nothing to keep (perf-ring borrows nothing).
    pub(crate) fn nothing() -> Keep {
        Keep { _room: None }
    }
}

/// Gives room for a BPF object that lives as long as the [`KernelSource`] it goes in.
#[cfg(feature = "bpf")]
pub(crate) fn storage() -> (Keep, &'static mut super::Storage) {
    let mut o = Owned::<super::Storage>::new();
    // SAFETY: lent once; `Keep` goes into the KernelSource after the sampler, which
    // drops the sampler first.
    let r = unsafe { o.lend() };
    (Keep { _room: Some(o) }, r)
}

/// An in-kernel sampler as a [`Mode::Buffered`] source.
pub struct KernelSource {
    // Field order is drop order: the sampler before the memory it borrows.
    sampler: Box<dyn KernelSampler>,
    _keep: Keep,
    fold: Fold,
    drain: Hertz,
    /// Room for the last reading's events, taken at open: the last drain allocates
    /// nothing either.
    last: Vec<u64>,
    /// Every event is a software event standing in for RAPL.
    stand_in: bool,
}

impl std::fmt::Debug for KernelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelSource")
            .field("drain", &self.drain)
            .field("stand_in", &self.stand_in)
            .finish_non_exhaustive()
    }
}

impl KernelSource {
    pub(crate) fn new(
        sampler: Box<dyn KernelSampler>,
        keep: Keep,
        drain: Hertz,
        stand_in: bool,
    ) -> KernelSource {
        let events = sampler.event_count();
        let mut event_channel = Vec::with_capacity(events);
        let mut first_event = Vec::with_capacity(sampler.group_channels().len());
        for g in sampler.group_channels() {
            first_event.push(event_channel.len());
            event_channel.extend_from_slice(g);
        }
        let fold = Fold {
            latest: vec![0; events],
            event_channel,
            first_event,
            raw: vec![0; sampler.channels().len()],
            period_ns: period_ns(sampler.freq()),
            prev_t: 0,
            keep_from: u64::MAX,
            keep_before: u64::MAX,
            pending_lost: 0,
            received: 0,
            discarded: 0,
            drains: 0,
            gaps: 0,
            longest_ns: 0,
        };
        KernelSource {
            sampler,
            _keep: keep,
            fold,
            drain,
            last: vec![0; events],
            stand_in,
        }
    }

    /// The kernel sampler itself: its rings, raw samples and counts (for tests and
    /// benchmarks of the kernel side alone).
    pub fn sampler(&mut self) -> &mut dyn KernelSampler {
        self.sampler.as_mut()
    }
}

impl Source for KernelSource {
    fn mechanism(&self) -> Mechanism {
        self.sampler.mechanism()
    }

    fn label(&self) -> &'static str {
        if self.stand_in {
            crate::STAND_IN_LABEL
        } else {
            self.sampler.mechanism().name()
        }
    }

    fn channels(&self) -> &[Channel] {
        self.sampler.channels()
    }

    /// Reads the sampled events now, from user space: the recording's first reading
    /// (kernel samples count from the end of this read).
    fn read(&mut self, out: &mut [u64]) -> Result<()> {
        let t = monotonic_ns();
        self.sampler.read_events(&mut self.fold.latest)?;
        self.fold.keep_from = monotonic_ns();
        self.fold.prev_t = t;
        self.fold.sum();
        let n = out.len().min(self.fold.raw.len());
        out[..n].copy_from_slice(&self.fold.raw[..n]);
        Ok(())
    }

    fn notes(&self) -> &[String] {
        self.sampler.notes()
    }

    fn mode(&self) -> Mode {
        Mode::Buffered {
            freq: self.sampler.freq(),
            drain: self.drain,
        }
    }

    fn start(&mut self) -> Result<()> {
        self.sampler.start()
    }

    fn drain(&mut self, last: bool, f: &mut dyn FnMut(&Reading<'_>)) -> Result<()> {
        let KernelSource {
            sampler,
            fold,
            last: last_buf,
            ..
        } = self;
        fold.drains += 1;
        if !last {
            return sampler.drain(&mut |s| fold.fold(s, f));
        }
        // The last reading, then stop the kernel sampling and take what it queued
        // before that reading; the reading itself comes last.
        let t_end = monotonic_ns();
        let read = sampler.read_events(last_buf);
        fold.keep_before = t_end;
        let stopped = sampler.stop();
        let drained = sampler.drain(&mut |s| fold.fold(s, f));
        read.and(stopped).and(drained)?;
        fold.latest.copy_from_slice(last_buf);
        fold.emit(t_end, f);
        Ok(())
    }

    fn kernel_side(&self) -> Option<KernelSide> {
        let Mode::Buffered { freq, drain } = self.mode() else {
            return None;
        };
        Some(KernelSide {
            mechanism: self.sampler.mechanism(),
            freq,
            drain,
            kernel: self.sampler.kernel_counts(),
            received: self.fold.received,
            discarded: self.fold.discarded,
            drains: self.fold.drains,
            gaps: self.fold.gaps,
            longest_ns: self.fold.longest_ns,
        })
    }
}

/// Turns the kernel's per-group samples into per-channel readings.
pub(crate) struct Fold {
    /// Each event's latest count, events of all groups in order.
    pub(crate) latest: Vec<u64>,
    /// The channel each event adds to.
    pub(crate) event_channel: Vec<usize>,
    /// Index of each group's first event in `latest`.
    pub(crate) first_event: Vec<usize>,
    /// The summed raw value of each channel.
    pub(crate) raw: Vec<u64>,
    pub(crate) period_ns: u64,
    pub(crate) prev_t: u64,
    /// Samples outside [keep_from, keep_before) are not part of the recording.
    pub(crate) keep_from: u64,
    pub(crate) keep_before: u64,
    pub(crate) pending_lost: u64,
    pub(crate) received: u64,
    pub(crate) discarded: u64,
    pub(crate) drains: u64,
    pub(crate) gaps: u64,
    pub(crate) longest_ns: u64,
}

impl Fold {
    /// Folds one kernel sample in; the first group's samples make readings.
    pub(crate) fn fold(&mut self, s: &KernelSample<'_>, f: &mut dyn FnMut(&Reading<'_>)) {
        if s.t_ns < self.keep_from || s.t_ns >= self.keep_before {
            self.discarded += 1;
            return;
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
        self.pending_lost += s.lost_before;
        if s.group == 0 {
            let interval = s.t_ns.saturating_sub(self.prev_t);
            if interval > 2 * self.period_ns {
                self.gaps += 1;
            }
            self.longest_ns = self.longest_ns.max(interval);
            self.emit(s.t_ns, f);
        }
    }

    /// Sums the latest counts into each channel's raw value.
    fn sum(&mut self) {
        self.raw.fill(0);
        for (&v, &c) in self.latest.iter().zip(&self.event_channel) {
            // Modulo 2^64: a sum of 64-bit counters is a 64-bit counter.
            self.raw[c] = self.raw[c].wrapping_add(v);
        }
    }

    /// Hands a reading of the latest counts at `t` to `f`.
    pub(crate) fn emit(&mut self, t: u64, f: &mut dyn FnMut(&Reading<'_>)) {
        if t <= self.prev_t {
            return;
        }
        self.sum();
        let lost = std::mem::take(&mut self.pending_lost);
        self.prev_t = t;
        f(&Reading {
            t_ns: t,
            raw: &self.raw,
            lost,
        });
    }
}
