//! Side by side, on the same events, at the same rate: the polling sampler (perf,
//! one `read()` per event per tick), `ebpf` and `perf-ring`. Prints, per mechanism,
//! the records a second achieved, the process's user-space wake-ups a second
//! (voluntary context switches of every thread, from getrusage), the tool's CPU per
//! record (every thread of the process, plus the BPF program's own run time where
//! the kernel reports it) and the share of one CPU.
//!
//! ```text
//! cargo run --release -p quietwatt --features bpf --example inkernel_bench -- [SECONDS] [HZ]
//! ```
//!
//! The events are software counters of CPU 0 standing in for the RAPL events
//! (`quietwatt::inkernel::stand_in_specs`), so it runs on machines without RAPL;
//! it needs root (or CAP_BPF and CAP_PERFMON). Output goes to CSV files in the
//! temporary directory, as `quietwatt record` would write them.

use quietwatt::inkernel::{self, open_specs, stand_in_specs, Opened};
use quietwatt::meter::{monotonic_ns, Meter};
use quietwatt::record::{record, EngineConfig};
use quietwatt::sink::{Format, Metadata, OutputFile};
use quietwatt::source::perf::PerfEvents;
use quietwatt::{Hertz, Mechanism, Rate, SysRoot};
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The whole process's CPU time and voluntary context switches so far.
fn process_usage() -> (u64, u64) {
    // SAFETY: getrusage writes the zeroed struct it is given, which lives for the call.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    (
        (us(ru.ru_utime) + us(ru.ru_stime)) * 1000,
        ru.ru_nvcsw as u64,
    )
}

struct Row {
    name: String,
    records: u64,
    secs: f64,
    wakeups: u64,
    sampler_wakeups: u64,
    cpu_ns: u64,
    kernel_ns: Option<u64>,
    missed: u64,
    /// Clock gaps longer than two periods, and perf throttles (in-kernel only).
    gaps: Option<(u64, u64, f64)>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10.0);
    let hz: f64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1000.0);
    let (Ok(freq), Ok(drain)) = (Hertz::new(hz), Hertz::new(inkernel::DEFAULT_DRAIN_HZ)) else {
        eprintln!("inkernel_bench: give SECONDS and a rate in (0, 100000] Hz");
        return ExitCode::FAILURE;
    };
    let duration = Duration::from_secs_f64(secs);
    let dir = std::env::temp_dir();
    let root = SysRoot::default();
    let mut rows = Vec::new();
    for m in [Mechanism::Perf, Mechanism::Ebpf, Mechanism::PerfRing] {
        let path = dir.join(format!("quietwatt-bench-{}.csv", m.name()));
        let file = match OutputFile::create(&path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("inkernel_bench: {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        };
        let mut sink = Format::Csv.sink(file);
        let meta = Metadata::new(m.name(), &Rate::Fixed(freq), &root);
        let stop = AtomicBool::new(false);
        let (cpu0, csw0) = process_usage();
        let t0 = monotonic_ns();
        let row = if m == Mechanism::Perf {
            let src = match PerfEvents::from_specs(stand_in_specs(0)) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("inkernel_bench: perf: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let mut meter = Meter::new(Box::new(src));
            let mut config = EngineConfig::new(Rate::Fixed(freq));
            config.duration = Some(duration);
            match record(&mut meter, sink.as_mut(), &path, &meta, &config, &stop) {
                Ok(r) => Row {
                    name: "perf (polling)".into(),
                    records: r.samples,
                    secs: r.measurement.overhead.as_ref().unwrap().duration_s,
                    wakeups: 0,
                    sampler_wakeups: r
                        .measurement
                        .overhead
                        .as_ref()
                        .unwrap()
                        .sampler
                        .voluntary_switches,
                    cpu_ns: 0,
                    kernel_ns: None,
                    missed: r.measurement.overhead.as_ref().unwrap().missed_deadlines,
                    gaps: None,
                },
                Err(e) => {
                    eprintln!("inkernel_bench: perf: {e}");
                    return ExitCode::FAILURE;
                }
            }
        } else {
            let opened = open_specs(m, stand_in_specs(0), freq, drain);
            let s = match opened {
                Ok(Opened::InKernel(s)) => s,
                Ok(Opened::Fallback { reason, .. }) => {
                    eprintln!("inkernel_bench: {m}: {reason}");
                    return ExitCode::FAILURE;
                }
                Err(e) => {
                    eprintln!("inkernel_bench: {m}: {e}");
                    return ExitCode::FAILURE;
                }
            };
            // The same engine as perf's: the source samples at `freq` in the kernel
            // and is drained at `drain`.
            let mut meter = Meter::new(Box::new(s));
            let mut config = EngineConfig::new(Rate::Fixed(freq));
            config.duration = Some(duration);
            let r = record(&mut meter, sink.as_mut(), &path, &meta, &config, &stop);
            match r.map(|r| {
                let k = r.measurement.kernel.clone();
                (r, k)
            }) {
                Ok((r, Some(k))) => Row {
                    name: m.name().into(),
                    records: r.samples,
                    secs: r.measurement.overhead.as_ref().unwrap().duration_s,
                    wakeups: 0,
                    sampler_wakeups: r
                        .measurement
                        .overhead
                        .as_ref()
                        .unwrap()
                        .sampler
                        .voluntary_switches,
                    cpu_ns: 0,
                    kernel_ns: k.kernel.prog_run_ns,
                    missed: r.measurement.overhead.as_ref().unwrap().missed_deadlines,
                    gaps: Some((k.clock_gaps, k.kernel.throttled, k.longest_gap_ms)),
                },
                Ok((_, None)) => {
                    eprintln!("inkernel_bench: {m}: the recording has no kernel figures");
                    return ExitCode::FAILURE;
                }
                Err(e) => {
                    eprintln!("inkernel_bench: {m}: {e}");
                    return ExitCode::FAILURE;
                }
            }
        };
        let (cpu1, csw1) = process_usage();
        let wall = (monotonic_ns() - t0) as f64 / 1e9;
        rows.push(Row {
            wakeups: csw1 - csw0,
            cpu_ns: cpu1 - cpu0,
            secs: if row.secs > 0.0 { row.secs } else { wall },
            ..row
        });
        let _ = std::fs::remove_file(&path);
    }

    println!(
        "{} s per mechanism at {hz} Hz, stand-in events (cpu-clock, task-clock of CPU 0), CSV output; in-kernel drained at {} Hz",
        secs,
        drain.hz()
    );
    println!(
        "{:<15} {:>10} {:>9} {:>14} {:>15} {:>13} {:>13} {:>12} {:>8}",
        "mechanism",
        "records/s",
        "missed",
        "wake-ups/s",
        "sampler w-u/s",
        "user us/rec",
        "kernel us/rec",
        "total us/rec",
        "CPU %"
    );
    for r in &rows {
        let per = |ns: f64| ns / r.records.max(1) as f64 / 1e3;
        let kernel = r.kernel_ns.map(|k| per(k as f64));
        let total_ns = r.cpu_ns as f64 + r.kernel_ns.unwrap_or(0) as f64;
        println!(
            "{:<15} {:>10.1} {:>9} {:>14.2} {:>15.2} {:>13.2} {:>13} {:>12.2} {:>8.3}",
            r.name,
            r.records as f64 / r.secs,
            r.missed,
            r.wakeups as f64 / r.secs,
            r.sampler_wakeups as f64 / r.secs,
            per(r.cpu_ns as f64),
            kernel.map_or("n/a".to_string(), |k| format!("{k:.2}")),
            per(total_ns),
            total_ns / (r.secs * 1e9) * 100.0
        );
    }
    for r in &rows {
        if let Some((gaps, throttled, longest)) = r.gaps {
            println!(
                "{}: the kernel's clock skipped {gaps} time(s) (longest gap {longest:.1} ms), {throttled} perf throttle record(s)",
                r.name
            );
        }
    }
    println!(
        "user: CPU time of every thread of the process over the recording (getrusage); kernel: the BPF program's run_time_ns \
         (BPF statistics on); perf-ring's kernel-side copy into the ring is not measurable and not included"
    );
    ExitCode::SUCCESS
}
