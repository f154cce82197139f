//! The caller/callee wake-up experiment of paper 004 (Listing 1): two threads
//! pinned to two CPUs; the caller busy-waits to a fixed deadline and wakes the
//! callee, which runs, busy-waits a set time and sleeps again. The latency is the
//! time from the caller's signal to the callee running, both read on
//! CLOCK_MONOTONIC (one clock for every CPU).
//!
//! **Idle state reached.** cpuidle bumps a state's `usage` when an idle period in it
//! *ends*. The caller reads the callee CPU's `usage` counters (one `pread` per
//! state, outside the timed interval) just before the signal and again once the
//! callee runs: the state whose count rose in between is the one our signal woke
//! the CPU from. One state: the wake-up is from that state. Several: `mixed`. None:
//! the CPU was not in a cpuidle state when signalled (it ran something else, or
//! idled outside cpuidle), classed `none`. Idle periods that ended between two
//! wake-ups (ticks, other tasks) are counted apart.
//!
//! When the BPF program on `power:cpu_idle` loads (see [`super::bpf_idle`]), the
//! state is also read from the tracepoint itself, as paper 004 does: just before
//! the signal the caller reads whether the callee's CPU is inside an idle period
//! and in which state (a few loads from the BPF map). That classification is the
//! one reported; the cpuidle one is kept beside it, with how often they agree.
//!
//! The signal is a futex word (what `pthread_cond_signal` uses underneath, without
//! the mutex): the caller writes the sequence number and calls `FUTEX_WAKE`; the
//! callee sleeps in `FUTEX_WAIT` until the word changes.

use super::cpuidle::CpuidleStates;
use super::power_profile::{EnergySampler, PowerProfile};
use super::{pread_u64, EventsError, Result};
use quietwatt::root::SysRoot;
use quietwatt::ticker::monotonic_ns;
use quietwatt_stats::rng::XorShift;
use serde::Serialize;
use std::fs::File;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

/// The experiment's parameters.
#[derive(Debug, Clone)]
pub struct WakeupConfig {
    /// CPU of the caller (the waker).
    pub caller_cpu: u32,
    /// CPU of the callee (the one that idles and is woken).
    pub callee_cpu: u32,
    /// Time between two signals (paper 004: 1 s).
    pub interval: Duration,
    /// How long the callee busy-waits after each wake-up (paper 004: 200 µs).
    pub busy: Duration,
    /// Wake-ups to measure.
    pub count: usize,
    /// Where cpuidle is read.
    pub root: SysRoot,
}

impl Default for WakeupConfig {
    fn default() -> Self {
        WakeupConfig {
            caller_cpu: 0,
            callee_cpu: 1,
            interval: Duration::from_millis(20),
            busy: Duration::from_micros(200),
            count: 200,
            root: SysRoot::default(),
        }
    }
}

/// Latency statistics of one class of wake-ups, in microseconds.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyStats {
    /// The class: a state's name, `mixed` or `none`.
    pub reached: String,
    /// Wake-ups in the class.
    pub n: usize,
    /// Smallest.
    pub min_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Largest.
    pub max_us: f64,
    /// Mean.
    pub mean_us: f64,
}

/// One wake-up.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Wakeup {
    /// CLOCK_MONOTONIC of the signal.
    pub signal_ns: u64,
    /// Signal to the callee running.
    pub latency_ns: u64,
    /// Callee running to it calling FUTEX_WAIT again (busy-wait plus overhead).
    pub active_ns: u64,
    /// The state reached: `Some(index)`, or `None` for none/mixed (see `mixed`).
    pub state: Option<u32>,
    /// Entries into more than one state since the previous signal.
    pub mixed: bool,
    /// The state by the tracepoint (BPF): `Some(Some(s))` idle in `s` at the signal,
    /// `Some(None)` running, `None` when no BPF program is loaded.
    pub tp_state: Option<Option<u32>>,
    /// Other idle periods of the callee's CPU between the previous wake-up and this
    /// signal (0 when only our wake-ups end its idle periods).
    pub idle_entries: u64,
}

/// What the experiment measured.
#[derive(Debug, Clone, Serialize)]
pub struct WakeupReport {
    /// Caller CPU.
    pub caller_cpu: u32,
    /// Callee CPU.
    pub callee_cpu: u32,
    /// Seconds between signals.
    pub interval_s: f64,
    /// Callee busy-wait, µs.
    pub busy_us: f64,
    /// Latency per idle state reached.
    pub by_state: Vec<LatencyStats>,
    /// Latency of every wake-up together.
    pub all: LatencyStats,
    /// The callee's active time per wake-up (paper 004: 220 µs for a 200 µs busy-wait).
    pub active: LatencyStats,
    /// Mean number of other idle periods of the callee's CPU per interval (0 = only
    /// our wake-ups end its idle periods; ticks and other tasks add to it).
    pub idle_entries_per_interval: f64,
    /// Every wake-up (for plots).
    pub wakeups: Vec<Wakeup>,
    /// Signals whose wake-up was not seen: the callee did not run within
    /// [`LOST_AFTER`] (a stalled vCPU, an overloaded machine). Left out of every
    /// statistic, and said.
    pub lost: usize,
    /// The callee CPU's states, `index name`.
    pub states: Vec<String>,
    /// What `by_state` is classified by: `power:cpu_idle (BPF ...)` or `cpuidle usage`.
    pub classified_by: String,
    /// Wake-ups where the tracepoint and cpuidle classifications agree (with BPF and
    /// cpuidle both; `None` otherwise).
    pub agree: Option<usize>,
    /// Why BPF is not used, when it is not.
    pub bpf_note: Option<String>,
    /// What the machine could not tell (no cpuidle driver) and what stood in.
    pub notes: Vec<String>,
    /// What the power profile around the wake-up could or could not use.
    pub power_profile: String,
    /// The power around the wake-up, when an energy source was sampled.
    pub profile: Option<PowerProfile>,
}

/// How long the caller waits for the callee to run before it counts the wake-up as
/// lost and goes on: far beyond any C-state exit latency (≤ 1 ms), long enough to
/// ride out a host stalling this VM's vCPUs for tens of ms.
pub const LOST_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

use quietwatt_sys::thread::{futex_wait, futex_wake};

fn pin(cpu: u32) -> Result<()> {
    quietwatt_sys::thread::pin_to_cpu(cpu as usize).map_err(|source| EventsError::Recorder {
        what: format!("pin a thread to CPU {cpu} (is it online and allowed?)"),
        source,
    })
}

fn spin_until(t_ns: u64) {
    while monotonic_ns() < t_ns {
        std::hint::spin_loop();
    }
}

/// Busy-waits until `t_ns` or until `done()`, reading the energy counters meanwhile
/// when a sampler is given (the caller's waits: see [`super::power_profile`]).
fn spin_sampling(t_ns: u64, done: impl Fn() -> bool, energy: &mut Option<EnergySampler>) {
    loop {
        let now = monotonic_ns();
        if now >= t_ns || done() {
            return;
        }
        if let Some(e) = energy.as_mut() {
            e.poll(now);
        }
        std::hint::spin_loop();
    }
}

/// The profile window: from 2 ms before the signal to 6 ms after, in 250 µs bins.
pub const PROFILE_BEFORE: Duration = Duration::from_millis(2);
/// See [`PROFILE_BEFORE`].
pub const PROFILE_AFTER: Duration = Duration::from_millis(6);
/// See [`PROFILE_BEFORE`].
pub const PROFILE_BIN: Duration = Duration::from_micros(250);

/// Percentile of sorted values (nearest rank).
fn pick(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64 / 1e3
}

/// Statistics of `ns` values labelled `reached`.
pub fn stats(reached: &str, ns: &[u64]) -> LatencyStats {
    let mut v = ns.to_vec();
    v.sort_unstable();
    let mean = if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<u64>() as f64 / v.len() as f64 / 1e3
    };
    LatencyStats {
        reached: reached.to_string(),
        n: v.len(),
        min_us: pick(&v, 0.0),
        p50_us: pick(&v, 0.5),
        p90_us: pick(&v, 0.9),
        p99_us: pick(&v, 0.99),
        max_us: pick(&v, 1.0),
        mean_us: mean,
    }
}

/// Runs the experiment, sampling `energy` in the caller's waits when given (see
/// [`super::power_profile`]). `power_profile` is the sentence the report carries about the
/// energy source (the CLI decides it: it knows which source opens here).
pub fn run(
    config: &WakeupConfig,
    power_profile: String,
    mut energy: Option<EnergySampler>,
) -> Result<WakeupReport> {
    if config.caller_cpu == config.callee_cpu {
        return Err(EventsError::Recorder {
            what: format!(
                "run the wake-up experiment with caller and callee both on CPU {}: give two different CPUs",
                config.caller_cpu
            ),
            source: std::io::Error::from_raw_os_error(libc::EINVAL),
        });
    }
    let mut notes = Vec::new();
    let cpuidle = CpuidleStates::read(&config.root, &[config.callee_cpu], &mut notes)?;
    let states = cpuidle.of(config.callee_cpu).to_vec();
    // The classes wake-ups are put in: cpuidle's states, or without a driver the
    // states the kernel's own idle loop reports on the tracepoint.
    let classes: Vec<(u32, String)> = cpuidle
        .traced_indices(config.callee_cpu)
        .into_iter()
        .map(|i| (i, cpuidle.name(config.callee_cpu, i)))
        .collect();
    let usage: Vec<File> = states
        .iter()
        .map(|s| {
            let p = cpuidle.root.path(format!(
                "/sys/devices/system/cpu/cpu{}/cpuidle/state{}/usage",
                config.callee_cpu, s.index
            ));
            File::open(&p).map_err(|source| EventsError::Io { path: p, source })
        })
        .collect::<Result<_>>()?;
    let (bpf, bpf_note) = match super::bpf_idle::BpfIdle::open(&[config.callee_cpu], &cpuidle) {
        Ok((b, _)) => (Some(b), None),
        Err(e) => (None, Some(e.to_string())),
    };
    if states.is_empty() {
        notes.push(match bpf {
            Some(_) => format!(
                "CPU {} has no cpuidle driver: the state reached and the other idle entries \
                 come from power:cpu_idle (BPF) alone, with the kernel's own state numbers",
                config.callee_cpu
            ),
            None => format!(
                "CPU {} has no cpuidle driver and BPF is not available: wake-ups are not \
                 classified by idle state and other idle entries are not counted (run as \
                 root on a kernel with BPF for both)",
                config.callee_cpu
            ),
        });
    }
    // Idle entries of the callee's CPU by the BPF program, where cpuidle cannot count
    // them (the program counts an entry when the period begins).
    let bpf_entries = || -> u64 {
        match (&bpf, states.is_empty()) {
            (Some(b), true) => b.entries(config.callee_cpu),
            _ => 0,
        }
    };
    let n = config.count;
    let seq = AtomicU32::new(0);
    let run_ns: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let done_ns: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let busy_ns = config.busy.as_nanos() as u64;
    let interval_ns = config.interval.as_nanos().max(1) as u64;
    const STOP: u32 = u32::MAX;

    type CallerOut = (Vec<u64>, Vec<Vec<u64>>, Vec<Option<u32>>, Vec<u64>);
    let (signal_ns, deltas, tp, bpf_other) = std::thread::scope(|s| -> Result<CallerOut> {
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<()>>(1);
        let (seq, run_ns, done_ns) = (&seq, &run_ns, &done_ns);
        let callee = s.spawn(move || {
            let r = pin(config.callee_cpu);
            let ok = r.is_ok();
            let _ = ready_tx.send(r);
            if !ok {
                return;
            }
            // A bounded wait: a lost wake-up can never hang the experiment.
            let timeout = std::time::Duration::from_secs(1);
            let mut seen = 0u32;
            loop {
                let v = seq.load(Ordering::Acquire);
                if v == seen {
                    futex_wait(seq, seen, timeout);
                    continue;
                }
                let t = monotonic_ns();
                if v == STOP {
                    return;
                }
                seen = v;
                let i = (v - 1) as usize;
                if i < n {
                    run_ns[i].store(t, Ordering::Release);
                }
                spin_until(t + busy_ns);
                if i < n {
                    done_ns[i].store(monotonic_ns(), Ordering::Relaxed);
                }
            }
        });
        let stop = || {
            seq.store(STOP, Ordering::Release);
            futex_wake(seq);
        };
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(EventsError::Recorder {
                    what: "start the callee".into(),
                    source: std::io::Error::other("the callee thread ended"),
                })
            }
        }
        let caller = (|| -> Result<CallerOut> {
            pin(config.caller_cpu)?;
            let read_usage = |out: &mut [u64]| -> Result<()> {
                for (f, o) in usage.iter().zip(out.iter_mut()) {
                    *o = pread_u64(f).map_err(|source| EventsError::Read {
                        what: "cpuidle usage".into(),
                        source,
                    })?;
                }
                Ok(())
            };
            let k = usage.len();
            let mut pre = vec![0u64; k];
            let mut post = vec![0u64; k];
            let mut signal = vec![0u64; n];
            // Per wake-up: entries accounted between just before the signal and the
            // callee running (cpuidle counts an entry when the idle period *ends*, so
            // this is the period our signal ended), then entries between wake-ups.
            let mut deltas = vec![vec![0u64; 2 * k]; n];
            let mut tp = vec![None; n];
            let mut bpf_other = vec![0u64; n];
            // Let the callee reach its first wait.
            let t0 = monotonic_ns() + interval_ns;
            // When profiling, move each signal by a pseudo-random 0..1 ms (at most half
            // an interval): with a fixed interval of whole milliseconds every signal
            // would fall at the same phase of RAPL's ~1 ms updates, and the profile's
            // equivalent-time average needs them at every phase.
            let spread = if energy.is_some() {
                (interval_ns / 2).min(1_000_000)
            } else {
                0
            };
            let mut rng = XorShift::new(0x5eed);
            let jitter: Vec<u64> = (0..n)
                .map(|_| rng.below(spread.max(1) as usize) as u64)
                .collect();
            read_usage(&mut post)?;
            let mut bpf_post = bpf_entries();
            for (i, d) in deltas.iter_mut().enumerate() {
                spin_sampling(
                    t0 + i as u64 * interval_ns + jitter[i],
                    || false,
                    &mut energy,
                );
                read_usage(&mut pre)?;
                for j in 0..k {
                    d[k + j] = pre[j].saturating_sub(post[j]);
                }
                bpf_other[i] = bpf_entries().saturating_sub(bpf_post);
                tp[i] = bpf.as_ref().and_then(|b| b.idle_state(config.callee_cpu));
                let t = monotonic_ns();
                seq.store(i as u32 + 1, Ordering::Release);
                futex_wake(seq);
                signal[i] = t;
                // Bounded: a callee that never runs is a lost wake-up, not a hang.
                spin_sampling(
                    t + LOST_AFTER.as_nanos() as u64,
                    || run_ns[i].load(Ordering::Acquire) != 0,
                    &mut energy,
                );
                read_usage(&mut post)?;
                bpf_post = bpf_entries();
                for j in 0..k {
                    d[j] = post[j].saturating_sub(pre[j]);
                }
            }
            Ok((signal, deltas, tp, bpf_other))
        })();
        stop();
        let _ = callee.join();
        caller
    })?;

    let mut wakeups = Vec::with_capacity(n);
    for i in 0..n {
        let run = run_ns[i].load(Ordering::Relaxed);
        if run == 0 {
            continue; // never ran (the callee's timeout path); not a wake-up
        }
        let k = states.len();
        let entered: Vec<usize> = (0..k).filter(|&j| deltas[i][j] > 0).collect();
        wakeups.push(Wakeup {
            signal_ns: signal_ns[i],
            latency_ns: run.saturating_sub(signal_ns[i]),
            active_ns: done_ns[i].load(Ordering::Relaxed).saturating_sub(run),
            state: (entered.len() == 1).then(|| states[entered[0]].index),
            mixed: entered.len() > 1,
            idle_entries: deltas[i][k..].iter().sum::<u64>() + bpf_other[i],
            tp_state: bpf.as_ref().map(|_| tp[i]),
        });
    }
    // By the tracepoint when BPF is loaded, else by cpuidle's usage.
    let class = |w: &Wakeup| -> Option<u32> {
        match w.tp_state {
            Some(t) => t,
            None => w.state,
        }
    };
    let mut by_state = Vec::new();
    for (index, name) in &classes {
        let v: Vec<u64> = wakeups
            .iter()
            .filter(|w| class(w) == Some(*index))
            .map(|w| w.latency_ns)
            .collect();
        if !v.is_empty() {
            by_state.push(stats(&format!("{index} {name}"), &v));
        }
    }
    let other: Vec<u64> = wakeups
        .iter()
        .filter(|w| class(w).is_some_and(|c| !classes.iter().any(|s| s.0 == c)))
        .map(|w| w.latency_ns)
        .collect();
    if !other.is_empty() {
        by_state.push(stats("other state", &other));
    }
    type Pick = fn(&Wakeup) -> bool;
    let rest: Vec<(&str, Pick)> = if bpf.is_some() {
        vec![("running (not idle)", |w: &Wakeup| w.tp_state == Some(None))]
    } else if states.is_empty() {
        vec![("unclassified (no cpuidle driver, no BPF)", |_: &Wakeup| {
            true
        })]
    } else {
        vec![
            ("mixed", |w: &Wakeup| w.mixed),
            ("none", |w: &Wakeup| w.state.is_none() && !w.mixed),
        ]
    };
    for (label, pick) in rest {
        let v: Vec<u64> = wakeups
            .iter()
            .filter(|w| pick(w))
            .map(|w| w.latency_ns)
            .collect();
        if !v.is_empty() {
            by_state.push(stats(label, &v));
        }
    }
    let agree = bpf.as_ref().filter(|_| !states.is_empty()).map(|_| {
        wakeups
            .iter()
            .filter(|w| w.tp_state == Some(w.state) && !w.mixed)
            .count()
    });
    let classified_by = match &bpf {
        Some(b) => format!("power:cpu_idle at the signal (BPF {})", b.kind()),
        None if states.is_empty() => "nothing (no cpuidle driver, no BPF)".to_string(),
        None => "cpuidle usage between the signal and the callee running".to_string(),
    };
    let all: Vec<u64> = wakeups.iter().map(|w| w.latency_ns).collect();
    let active: Vec<u64> = wakeups.iter().map(|w| w.active_ns).collect();
    let entries = if wakeups.is_empty() {
        0.0
    } else {
        wakeups.iter().map(|w| w.idle_entries).sum::<u64>() as f64 / wakeups.len() as f64
    };
    let profile = energy.map(|e| {
        let signals: Vec<u64> = wakeups.iter().map(|w| w.signal_ns).collect();
        e.profile(&signals, PROFILE_BEFORE, PROFILE_AFTER, PROFILE_BIN)
    });
    Ok(WakeupReport {
        caller_cpu: config.caller_cpu,
        callee_cpu: config.callee_cpu,
        interval_s: config.interval.as_secs_f64(),
        busy_us: config.busy.as_secs_f64() * 1e6,
        by_state,
        all: stats("all", &all),
        active: stats("active", &active),
        idle_entries_per_interval: entries,
        lost: n - wakeups.len(),
        wakeups,
        states: states
            .iter()
            .map(|s| format!("{} {} (exit latency {} µs)", s.index, s.name, s.latency_us))
            .collect(),
        classified_by,
        agree,
        bpf_note,
        notes,
        profile,
        power_profile,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_use_nearest_rank() {
        let v: Vec<u64> = (1..=100).map(|x| x * 1000).collect();
        let s = stats("x", &v);
        assert_eq!(
            (s.n, s.min_us, s.p50_us, s.p99_us, s.max_us),
            (100, 1.0, 50.0, 99.0, 100.0)
        );
        assert!((s.mean_us - 50.5).abs() < 1e-9);
        assert_eq!(stats("e", &[]).n, 0);
    }
}
