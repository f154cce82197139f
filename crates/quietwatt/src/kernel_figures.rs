//! What only a buffered source can tell about its cost and losses, beside the
//! engine's own [`Overhead`](crate::overhead::Overhead): samples the kernel took and
//! dropped, the BPF program's run time, drains and wake-ups a second.

use crate::overhead::{SamplerCounts, ThreadUsage};
use crate::source::inkernel::{KernelCounts, KernelSide};
use crate::source::Mechanism;
use serde::Serialize;

/// What only a buffered source can tell about its cost and losses.
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
            "    drained {} time(s) at {} Hz, {:.2} wake-ups/s, {:.1} records/s; {}{:.2} us of CPU per record in all",
            self.drains,
            self.drain_hz,
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
                 throttled time was not counted: {fix}, or use the ebpf mechanism (its energy \
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

impl KernelFigures {
    /// The figures of a recording: the kernel side's counts, and the sampler
    /// thread's (`counts`, its CPU time and wake-ups) and the writer's CPU time.
    pub fn new(side: &KernelSide, counts: &SamplerCounts, writer: ThreadUsage) -> KernelFigures {
        let secs = (counts.last_ns.saturating_sub(counts.first_ns)) as f64 / 1e9;
        let per_s = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
        let kernel = side.kernel;
        let kernel_ns_per_sample = match (kernel.prog_run_ns, kernel.prog_runs) {
            (Some(ns), Some(runs)) if runs > 0 => Some(ns as f64 / runs as f64),
            _ => None,
        };
        let samples = counts.samples.max(1) as f64;
        let user_ns = (counts.usage.cpu_ns + writer.cpu_ns) as f64;
        KernelFigures {
            mechanism: side.mechanism.name(),
            freq_hz: side.freq.hz(),
            drain_hz: side.drain.hz(),
            kernel,
            received: side.received,
            discarded: side.discarded,
            drains: side.drains,
            wakeups_per_s: per_s(counts.usage.voluntary_switches as f64),
            achieved_hz: per_s(counts.samples as f64),
            clock_gaps: side.gaps,
            longest_gap_ms: side.longest_ns as f64 / 1e6,
            kernel_ns_per_sample,
            total_cpu_per_sample_ns: (user_ns + kernel.prog_run_ns.unwrap_or(0) as f64) / samples,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
