//! OS events on the energy timeline: `record --events cstate,faults,sched` (its
//! flags and words; the events thread, its summary and `--trace` are composed by
//! `quietwatt-recording`), and `bench wakeup` (paper 004's caller/callee
//! experiment).

use crate::emulated::Environment;
use crate::exit::{Failure, MEASUREMENT, OUTPUT, USAGE};
use quietwatt::{source, Hertz, Selection};
use quietwatt_events::full_trace;
use quietwatt_events::power_profile::EnergySampler;
use quietwatt_events::recorder::DEFAULT_HZ;
use quietwatt_events::summary::EventSummary;
use quietwatt_events::trace::{EnergyFile, TraceError};
use quietwatt_events::wakeup::{self, WakeupConfig, WakeupReport};
use quietwatt_events::{EventsError, Groups};
use quietwatt_recording::{EventsOptions, EventsOutcome, EventsStarted};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

impl From<EventsError> for Failure {
    fn from(e: EventsError) -> Failure {
        let code = match &e {
            EventsError::UnknownGroup(_) => USAGE,
            _ => MEASUREMENT,
        };
        Failure::new(code, e.to_string())
    }
}

impl From<TraceError> for Failure {
    fn from(e: TraceError) -> Failure {
        let code = match &e {
            TraceError::Io { .. } => OUTPUT,
            TraceError::Format { .. } => USAGE,
            // A trace error this CLI does not know yet: the trace could not be made.
            _ => MEASUREMENT,
        };
        Failure::new(code, e.to_string())
    }
}

/// The options `record` takes for events.
#[derive(clap::Args, Debug, Clone)]
pub struct RecordEventsArgs {
    /// Count OS events beside the energy, comma-separated: cstate (power:cpu_idle
    /// entries per state, cpuidle usage and time), faults (minor, major), sched
    /// (context switches, migrations, wake-ups without IPI), or all. Written to
    /// `<OUTPUT stem>.events.csv` on the same CLOCK_MONOTONIC timeline.
    #[arg(long, value_name = "GROUPS")]
    events: Option<Groups>,
    /// Reads of the event counters per second.
    #[arg(long, value_name = "HZ", default_value_t = Hertz::clamped(DEFAULT_HZ))]
    events_freq: Hertz,
    /// At the end, write a Chrome JSON trace of the recording (power counters, event
    /// rates, C-state residency) to this file, for Perfetto UI or chrome://tracing.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Also record every event of the groups one by one (each C-state entry and
    /// exit, context switch, page fault), stamped in the kernel, as `trace:` rows:
    /// the C-state slices and fault instants of `--trace`. One ring record per
    /// event: meant for short windows.
    #[arg(long, requires = "events")]
    full_trace: bool,
    /// Size of the full trace's kernel ring, in MiB (a power of two); events beyond
    /// it between two reads of the events thread are dropped and counted.
    #[arg(long, value_name = "MIB", default_value_t = (full_trace::DEFAULT_RING_BYTES >> 20) as u32, requires = "full_trace",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    trace_ring_mib: u32,
}

impl RecordEventsArgs {
    /// The files these options write beside the recording `output`, with the
    /// flag that names each.
    pub fn outputs(&self, output: &Path) -> Vec<(&'static str, PathBuf)> {
        let mut v = Vec::new();
        if self.events.is_some() {
            v.push(("the events file", EnergyFile::events_path(output)));
        }
        if let Some(t) = &self.trace {
            v.push(("--trace", t.clone()));
        }
        v
    }
}

impl RecordEventsArgs {
    /// The library's typed options for these flags; `truth`: the true energy per
    /// event (an emulator of constant power: 0 J).
    pub fn options(&self, truth: Option<f64>) -> EventsOptions {
        EventsOptions {
            groups: self.events,
            freq: self.events_freq,
            trace: self.trace.clone(),
            full_trace_ring: self
                .full_trace
                .then_some((self.trace_ring_mib as usize) << 20),
            true_joules_per_event: truth,
        }
    }
}

/// What the events thread counts, on stderr, as it starts.
pub fn print_started(s: &EventsStarted<'_>) {
    for n in s.notes {
        eprintln!("quietwatt: note: events: {n}");
    }
    eprintln!(
        "quietwatt: counting {} ({} counters) at {} to {}",
        s.groups,
        s.counters,
        s.freq,
        s.path.display()
    );
}

/// Lines a trace left out because a file ended mid-write, as warnings.
pub fn warn_cut(cut: &[(PathBuf, String)]) {
    for (path, line) in cut {
        eprintln!(
            "quietwatt: warning: {}: the last line was cut (the recording ended mid-write); left out: {line:?}",
            path.display()
        );
    }
}

/// Prints the events summary (stderr, like the energy report).
pub fn print(done: &EventsOutcome) {
    if let (Some(s), Some(p)) = (&done.summary, &done.path) {
        eprintln!();
        eprintln!(" OS events ({}):", p.display());
        for l in s.to_string().lines() {
            eprintln!("  {l}");
        }
    }
    if let Some(t) = &done.trace {
        eprintln!(
            "  Chrome JSON trace written to {} (open it in ui.perfetto.dev or chrome://tracing)",
            t.display()
        );
    }
}

/// `events` (the summary), `events_file` and `trace` for a `--json` document.
pub fn json_fields(done: &EventsOutcome) -> EventsFields<'_> {
    EventsFields {
        events: done.summary.as_ref(),
        events_file: done.path.as_ref().map(|p| p.display().to_string()),
        trace: done.trace.as_ref().map(|t| t.display().to_string()),
    }
}

/// What `record --events` adds to `record --json`.
#[derive(serde::Serialize, Default)]
pub struct EventsFields<'a> {
    /// The OS events' summary.
    #[serde(skip_serializing_if = "Option::is_none")]
    events: Option<&'a EventSummary>,
    /// Where the events were written.
    #[serde(skip_serializing_if = "Option::is_none")]
    events_file: Option<String>,
    /// Where the Chrome trace was written.
    #[serde(skip_serializing_if = "Option::is_none")]
    trace: Option<String>,
}

/// The events thread's error, if it ended early.
pub fn error(done: &EventsOutcome) -> Option<Failure> {
    let e = done.error()?;
    Some(Failure::new(
        MEASUREMENT,
        format!("event counting stopped early: {e}; the rows before it are in the events file"),
    ))
}

/// Converts an energy file (and its events and stacks files, when given) into a
/// Chrome JSON trace (the library's `write_trace_with_stacks`), with its warnings.
pub fn write_trace(
    energy: &Path,
    events: Option<&Path>,
    stacks: Option<&Path>,
    out: &Path,
) -> Result<(), Failure> {
    let cut = quietwatt_recording::events::write_trace_with_stacks(energy, events, stacks, out)
        .map_err(super::record_errors::recording_failure)?;
    warn_cut(&cut);
    Ok(())
}

/// Arguments of `bench wakeup`.
#[derive(clap::Args)]
pub struct WakeupArgs {
    /// CPU of the caller (the waker).
    #[arg(long, default_value = "0")]
    caller_cpu: u32,
    /// CPU of the callee (the CPU that idles and is woken).
    #[arg(long, default_value = "1")]
    callee_cpu: u32,
    /// Milliseconds between two wake-ups.
    #[arg(long, default_value = "20")]
    interval_ms: f64,
    /// Microseconds the callee busy-waits after each wake-up.
    #[arg(long, default_value = "200")]
    busy_us: f64,
    /// Wake-ups to measure.
    #[arg(long, default_value = "200")]
    count: usize,
    /// Print one JSON object (every wake-up included) instead of the table.
    #[arg(long)]
    json: bool,
}

/// `bench wakeup`.
pub fn wakeup(env: &Environment, args: WakeupArgs) -> Result<ExitCode, Failure> {
    let dur = |what: &str, v: f64, scale: f64| {
        Duration::try_from_secs_f64(v / scale)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| Failure::usage(format!("{what} must be a positive number, got {v}")))
    };
    if args.count == 0 {
        return Err(Failure::usage("--count must be at least 1"));
    }
    let config = WakeupConfig {
        caller_cpu: args.caller_cpu,
        callee_cpu: args.callee_cpu,
        interval: dur("--interval-ms", args.interval_ms, 1e3)?,
        busy: dur("--busy-us", args.busy_us, 1e6)?,
        count: args.count,
        root: env.root.clone(),
    };
    // The power around the wake-up: the caller reads the energy counters while it
    // waits (see quietwatt_events::power_profile), every 50 µs.
    let seconds = config.interval.as_secs_f64() * (config.count + 1) as f64;
    let mut true_w = None;
    let (profile, energy) = match source::open(&env.root, None, &Selection::all()) {
        Err(e) => (
            format!(
                "no energy source here (no RAPL opens: {e}); no power profile around the wake-up"
            ),
            None,
        ),
        Ok(s) => {
            let ids: Vec<quietwatt::DomainId> = s.channels().iter().map(|c| c.id).collect();
            true_w = env.true_total_watts(&ids);
            let label = format!(
                "{}{}",
                s.mechanism(),
                if env.is_emulated() { ", EMULATED" } else { "" }
            );
            let line = format!(
                "{label}: read by the caller every 50 µs between signals; RAPL moves about once a millisecond, so the profile is the power averaged over one update interval (not the µs of the exit itself, which needs an external meter sampling every few µs){}",
                if env.is_emulated() {
                    "; EMULATED: the emulator's power does not react to wake-ups, so the profile is flat by construction"
                } else {
                    ""
                }
            );
            let sampler = EnergySampler::new(
                quietwatt::meter::Meter::new(s),
                Duration::from_micros(50),
                seconds,
                label,
            );
            (line, Some(sampler))
        }
    };
    eprintln!(
        "quietwatt: bench wakeup: caller on CPU {}, callee on CPU {}, {} wake-ups every {} ms, callee busy {} µs (about {:.1} s)",
        config.caller_cpu,
        config.callee_cpu,
        config.count,
        args.interval_ms,
        args.busy_us,
        config.interval.as_secs_f64() * config.count as f64
    );
    let mut r = wakeup::run(&config, profile, energy)?;
    if let Some(p) = r.profile.as_mut() {
        p.true_w = true_w;
    }
    if args.json {
        let mut v = crate::schema::stamped(&r, "bench-wakeup");
        v["emulated"] = env.is_emulated().into();
        println!("{}", serde_json::to_string(&v).unwrap_or_default());
    } else {
        print_wakeup(&r);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_wakeup(r: &WakeupReport) {
    println!();
    println!(
        "wake-up latency, signal (FUTEX_WAKE on CPU {}) to the callee running on CPU {}, CLOCK_MONOTONIC; {} wake-ups every {:.1} ms, callee busy {:.0} µs",
        r.caller_cpu,
        r.callee_cpu,
        r.all.n,
        r.interval_s * 1e3,
        r.busy_us
    );
    if r.lost > 0 {
        println!(
            "{} signal(s) LOST: the callee did not run within {} ms (an overloaded machine or a stalled vCPU); left out of every figure below",
            r.lost,
            wakeup::LOST_AFTER.as_millis()
        );
    }
    if r.states.is_empty() {
        println!("callee CPU idle states: none listed (no cpuidle driver)");
    } else {
        println!("callee CPU idle states: {}", r.states.join(", "));
    }
    println!("idle state reached, by: {}", r.classified_by);
    if let Some(why) = &r.bpf_note {
        println!("  (no BPF: {why})");
    }
    for note in &r.notes {
        println!("  note: {note}");
    }
    println!();
    let label = |s: &wakeup::LatencyStats| match s.reached.as_str() {
        "active" => "callee active time".to_string(),
        "all" => "all wake-ups".to_string(),
        other => other.to_string(),
    };
    let w = r
        .by_state
        .iter()
        .map(|s| label(s).chars().count())
        .fold(22, usize::max);
    println!(
        "{:<w$} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "idle state reached", "n", "min us", "p50 us", "p90 us", "p99 us", "max us", "mean us"
    );
    for s in r.by_state.iter().chain([&r.all, &r.active]) {
        println!(
            "{:<w$} {:>6} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            label(s),
            s.n,
            s.min_us,
            s.p50_us,
            s.p90_us,
            s.p99_us,
            s.max_us,
            s.mean_us
        );
    }
    println!();
    println!(
        "other idle periods of the callee's CPU per interval: {:.2} (0 = only these wake-ups end its idle periods)",
        r.idle_entries_per_interval
    );
    if let Some(a) = r.agree {
        println!(
            "cross-check: cpuidle usage (the state whose count rose between the signal and the callee running) agrees on {a} of {} wake-ups",
            r.all.n
        );
    } else if r.states.is_empty() {
        println!("no cross-check: without a cpuidle driver only the tracepoint tells the state");
    } else {
        println!("mixed: entries into more than one state; none: the CPU was not in a cpuidle state at the signal");
    }
    println!("power profile: {}", r.power_profile);
    if let Some(p) = &r.profile {
        print_profile(p);
    }
}

/// The profile as a table: one row per bin, its interval, and whether it differs
/// from the mean power of the whole run (the baseline).
fn print_profile(p: &quietwatt_events::power_profile::PowerProfile) {
    let mean = p.mean_w.unwrap_or(0.0);
    println!(
        "  {} reads, {} counter changes (median {} µs apart), slowest read {:.1} µs; mean {:.3} W{}{}",
        p.samples,
        p.changes,
        p.update_us.map_or("-".into(), |u| format!("{u:.0}")),
        p.slowest_read_us,
        mean,
        p.true_w
            .map_or(String::new(), |t| format!(" (emulated: true value {t:.3} W)")),
        if p.dropped > 0 {
            format!("; {} changes DROPPED (buffer full)", p.dropped)
        } else {
            String::new()
        }
    );
    if let Some(e) = &p.error {
        println!("  sampling stopped early: {e}");
    }
    println!("  intervals: {}", p.interval);
    println!(
        "  {:>8} {:>8} {:>10} {:>9} {:>21} {:>8}  vs the mean",
        "from us", "to us", "mean W", "vs mean", "interval W", "wake-ups"
    );
    for b in &p.bins {
        let Some(w) = b.mean_w else {
            println!(
                "  {:>8.0} {:>8.0} {:>10} {:>9} {:>21} {:>8}  no data",
                b.from_us, b.to_us, "-", "-", "-", b.wakeups
            );
            continue;
        };
        let (interval, verdict) = match (b.ci_w, b.significant) {
            (Some(ci), Some(sig)) => (
                format!("[{:.3}, {:.3}]", ci[0], ci[1]),
                if sig { "differs" } else { "not significant" },
            ),
            _ => ("-".to_string(), "too few wake-ups for an interval"),
        };
        println!(
            "  {:>8.0} {:>8.0} {:>10.3} {:>+8.2}% {:>21} {:>8}  {verdict}",
            b.from_us,
            b.to_us,
            w,
            if mean > 0.0 {
                (w / mean - 1.0) * 100.0
            } else {
                0.0
            },
            interval,
            b.wakeups
        );
    }
}
