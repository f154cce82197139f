//! The sampling engine end to end: sampler thread, ring, writer thread, sinks.
//! Counts and energy are checked exactly; timing only where a generous bound holds.

use quietwatt::counter::Wrap;
use quietwatt::domain::{Domain, DomainId};
use quietwatt::meter::monotonic_ns;
use quietwatt::record::{record, EngineConfig, Recording};
use quietwatt::sink::file::Truncate;
use quietwatt::sink::{CsvSink, JsonlSink, Metadata, OutputFile, Sample, Sink};
use quietwatt::source::Channel;
use quietwatt::{EnergyUnit, Error, Hertz, Mechanism, Meter, Rate, Source, SysRoot};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a scripted source's counters do on each read.
#[derive(Clone, Copy)]
enum Script {
    /// Channel i advances by (i + 1) * 1000 µJ per read.
    Steps,
    /// The counter is the time in µs (1 W), then the read sleeps this long.
    ClockThenSleep(Duration),
}

struct Scripted {
    channels: Vec<Channel>,
    script: Script,
    reads: u64,
    start: u64,
    /// Reads (calls, failed ones included) from `.0` on fail with errno `.2`,
    /// `.1` of them; a failed read leaves the counters as they were.
    fails: Option<(u64, u64, i32)>,
    calls: u64,
}

impl Scripted {
    fn new(n: usize, script: Script, wrap: Wrap) -> Scripted {
        // Not core: channel 2 advances 3 mJ a read to the package's 1 mJ, which a
        // core counter cannot (its excess would be dropped, as it must be).
        let domains = [Domain::Package, Domain::Dram, Domain::Psys];
        Scripted {
            channels: (0..n)
                .map(|i| Channel {
                    id: DomainId::new(0, domains[i % 3]),
                    unit: EnergyUnit::Microjoule,
                    wrap,
                    origin: PathBuf::from(format!("/scripted/{i}")),
                    limit: None,
                })
                .collect(),
            script,
            reads: 0,
            start: monotonic_ns(),
            fails: None,
            calls: 0,
        }
    }
}

impl Source for Scripted {
    fn mechanism(&self) -> Mechanism {
        Mechanism::Powercap
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn read(&mut self, out: &mut [u64]) -> quietwatt::error::SourceResult<()> {
        let call = self.calls;
        self.calls += 1;
        if let Some((from, n, errno)) = self.fails {
            if call >= from && call - from < n {
                return Err(quietwatt::SourceError::Io {
                    path: self.channels[0].origin.clone(),
                    source: io::Error::from_raw_os_error(errno),
                });
            }
        }
        match self.script {
            Script::Steps => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = self.reads * (i as u64 + 1) * 1000;
                }
            }
            Script::ClockThenSleep(d) => {
                let us = (monotonic_ns() - self.start) / 1000;
                out.iter_mut().for_each(|o| *o = us);
                std::thread::sleep(d);
            }
        }
        self.reads += 1;
        Ok(())
    }
}

fn meter(n: usize, script: Script) -> Meter {
    Meter::new(Box::new(Scripted::new(n, script, Wrap::PERF)))
}

/// One sample as collected: t_ns, interval_ns, missed, merged, freq_hz, joules per channel.
type Row = (u64, u64, u32, u32, f64, Vec<f64>);

/// Every sample the writer hands over, kept in memory.
#[derive(Default)]
struct Collect {
    rows: Vec<Row>,
    /// While false, `sample` blocks: a writer that cannot keep up.
    gate: Option<Arc<AtomicBool>>,
}

impl Sink for Collect {
    fn begin(&mut self, _: &Metadata, _: &[Channel]) -> io::Result<()> {
        Ok(())
    }
    fn sample(&mut self, s: &Sample<'_>) -> io::Result<()> {
        if let Some(g) = &self.gate {
            while !g.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let e = s.energy.iter().map(|j| j.0).collect();
        self.rows
            .push((s.t_ns, s.interval_ns, s.missed, s.merged, s.freq_hz, e));
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn config(hz: f64, duration_ms: u64) -> EngineConfig {
    let mut c = EngineConfig::new(Rate::Fixed(Hertz::new(hz).unwrap()));
    c.duration = Some(Duration::from_millis(duration_ms));
    c
}

/// A recording that must not fail (a failure is an `Err` carrying what was kept).
fn run(m: &mut Meter, sink: &mut dyn Sink, c: &EngineConfig) -> Recording {
    let meta = Metadata::new("powercap", &c.rate, &SysRoot::default());
    record(m, sink, Path::new("mem"), &meta, c, &AtomicBool::new(false))
        .unwrap_or_else(|s| panic!("the recording failed: {s}"))
}

/// What a recording or a measured command cost: always there for them.
fn cost(m: &quietwatt::Measurement) -> &quietwatt::Overhead {
    m.overhead.as_ref().expect("a recording's cost")
}

/// Every deadline from the first reading to the last was either served or counted
/// as missed: the duration's `expected` of them (one fewer when the clock crossed
/// the end between the wake-up and the reading), and no more than the last
/// reading's lateness allows.
fn assert_every_deadline_accounted(rec: &Recording, hz: f64, expected: u64) {
    let o = cost(&rec.measurement);
    let ticks = o.samples + o.missed_deadlines;
    let upper = (o.duration_s * hz).floor() as u64 + 1;
    assert!(
        ticks + 1 >= expected && ticks <= upper.max(expected),
        "{ticks} ticks, expected {expected}..={upper}: {o:?}"
    );
}

/// The energy in the rows equals the counters' own totals, channel by channel.
fn assert_energy_conserved(m: &Meter, rows: &[Row]) {
    for (i, total) in m.total_steps().into_iter().enumerate() {
        let sum: f64 = rows.iter().map(|r| r.5[i]).sum();
        let want = total as f64 / 1e6;
        assert!(
            (sum - want).abs() < 1e-9 * want.max(1.0),
            "channel {i}: rows {sum} J, counter {want} J"
        );
    }
}

#[test]
fn every_sample_arrives_in_order_with_its_exact_delta() {
    let mut m = meter(3, Script::Steps);
    let mut sink = Collect::default();
    let rec = run(&mut m, &mut sink, &config(1000.0, 200));
    assert_eq!(rec.samples as usize, sink.rows.len());
    assert_eq!(cost(&rec.measurement).samples, rec.samples);
    assert!(sink.rows.len() > 100);
    let mut prev_t = 0;
    for r in &sink.rows {
        assert!(r.0 > prev_t, "out of order");
        prev_t = r.0;
        // Scripted: one read = (i + 1) mJ whatever the timing.
        assert_eq!(r.5, vec![0.001, 0.002, 0.003]);
        assert_eq!((r.3, r.4), (0, 1000.0));
    }
    assert_every_deadline_accounted(&rec, 1000.0, 200);
    assert_energy_conserved(&m, &sink.rows);
}

#[test]
fn a_slow_source_misses_deadlines_and_the_next_delta_covers_the_gap() {
    // Each read takes 3 ms at 1 kHz: about two deadlines pass during each.
    let mut m = meter(1, Script::ClockThenSleep(Duration::from_millis(3)));
    let mut sink = Collect::default();
    let rec = run(&mut m, &mut sink, &config(1000.0, 300));
    let o = cost(&rec.measurement);
    assert!(o.missed_deadlines >= 100, "{o:?}");
    let in_rows: u64 = sink.rows.iter().map(|r| r.2 as u64).sum();
    assert_eq!(in_rows, o.missed_deadlines, "every miss is in the data");
    assert_every_deadline_accounted(&rec, 1000.0, 300);
    // A row after a gap holds the gap's energy: 1 W over its whole interval.
    for r in sink.rows.iter().filter(|r| r.2 > 0) {
        let expect = r.1 as f64 / 1e9;
        assert!(
            (r.5[0] - expect).abs() < 0.2 * expect,
            "{} J over {} ns",
            r.5[0],
            r.1
        );
    }
    assert_energy_conserved(&m, &sink.rows);
}

#[test]
fn a_full_ring_merges_samples_counts_them_and_keeps_their_energy() {
    let mut m = meter(2, Script::Steps);
    let gate = Arc::new(AtomicBool::new(false));
    let mut sink = Collect {
        gate: Some(gate.clone()),
        ..Collect::default()
    };
    let mut c = config(1000.0, 300);
    c.ring_capacity = Some(4);
    let opener = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        gate.store(true, Ordering::Release);
    });
    let rec = run(&mut m, &mut sink, &c);
    opener.join().unwrap();
    let o = cost(&rec.measurement);
    assert!(o.ring_full > 50, "{o:?}");
    let merged: u64 = sink.rows.iter().map(|r| r.3 as u64).sum();
    assert_eq!(merged, o.ring_full, "each overflow is one merged read");
    assert_eq!(sink.rows.len() as u64 + merged, o.samples, "no read lost");
    assert_eq!(o.written, sink.rows.len() as u64);
    // A merged row carries the steps of every read it holds.
    for r in &sink.rows {
        let want = 0.001 * (r.3 as f64 + 1.0);
        assert!(
            (r.5[0] - want).abs() < 1e-12,
            "{} J for {} reads",
            r.5[0],
            r.3 + 1
        );
    }
    assert_energy_conserved(&m, &sink.rows);
}

fn csv_rows(text: &str) -> Vec<Vec<String>> {
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    assert_eq!(
        lines.next(),
        Some("timestamp_ns,socket,domain,energy_j,power_w,missed,merged,freq_hz,counter")
    );
    lines
        .map(|l| {
            let f: Vec<String> = l.split(',').map(str::to_string).collect();
            assert_eq!(f.len(), 9, "{l}");
            // No counter here resets or glitches: no row is marked.
            assert_eq!(f[8], "", "{l}");
            f[0].parse::<u64>().unwrap();
            f[1].parse::<u32>().unwrap();
            assert!(["package", "dram", "psys"].contains(&f[2].as_str()));
            f[3].parse::<f64>().unwrap();
            f[4].parse::<f64>().unwrap();
            f[5].parse::<u32>().unwrap();
            f[6].parse::<u32>().unwrap();
            f[7].parse::<f64>().unwrap();
            f
        })
        .collect()
}

#[test]
fn the_stop_flag_ends_a_recording_with_a_complete_file_and_its_accounting() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.csv");
    let mut m = meter(2, Script::Steps);
    let mut sink = CsvSink::new(OutputFile::create(&path).unwrap());
    let mut c = config(1000.0, 0);
    c.duration = None; // until the flag
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let raiser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(250));
        s2.store(true, Ordering::Relaxed);
    });
    let meta = Metadata::new("powercap", &c.rate, &SysRoot::default());
    let rec = record(&mut m, &mut sink, &path, &meta, &c, &stop).unwrap();
    raiser.join().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with('\n'), "last line complete");
    assert!(text.contains("# wall_clock_anchor: unix_ns "));
    assert!(text.contains("# cpu_model: "));
    // Measured under /: the CPU is this host's, and said to be.
    assert!(text.contains("# cpu_model_from: this host's /proc/cpuinfo"));
    assert!(!text.contains("# host_cpu_model: "));
    let rows = csv_rows(&text);
    // Self-accounting: samples == rows / channels, CPU time spent, lateness measured.
    let o = cost(&rec.measurement);
    assert_eq!(o.samples as usize, rows.len() / 2);
    assert_eq!(o.written, o.samples);
    assert!(o.samples > 100);
    assert!(o.sampler.cpu_ns > 0 && o.writer.cpu_ns > 0, "{o:?}");
    assert!(o.sampler.voluntary_switches > 0);
    assert!(o.cpu_per_sample_ns > 0.0);
    assert!(o.lateness.wakeups + 1 >= o.samples);
    assert!(o.lateness.p50_ns <= o.lateness.p99_ns && o.lateness.p99_ns <= o.lateness.max_ns);
    assert!(o.duration_s > 0.2 && o.duration_s < 5.0, "{o:?}");
}

#[test]
fn at_1khz_the_timerfd_engine_keeps_the_rate() {
    let mut m = meter(2, Script::Steps);
    let mut sink = Collect::default();
    let mut c = config(1000.0, 1000);
    // SCHED_FIFO where permitted (root in CI): the other tests of this binary run
    // beside this one on as few as two CPUs.
    c.realtime = true;
    let rec = run(&mut m, &mut sink, &c);
    let o = cost(&rec.measurement);
    assert_every_deadline_accounted(&rec, 1000.0, 1000);
    // Timing (generous: timerfd holds 999.6/s on this VM).
    assert!(
        o.samples >= 900,
        "only {} of 1000 samples: {o:?}",
        o.samples
    );
}

#[test]
fn jsonl_parses_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.jsonl");
    let mut m = meter(2, Script::Steps);
    let mut sink = JsonlSink::new(OutputFile::create(&path).unwrap());
    let c = config(500.0, 100);
    let meta = Metadata::new("powercap", &c.rate, &SysRoot::default());
    let rec = record(&mut m, &mut sink, &path, &meta, &c, &AtomicBool::new(false)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let meta = &lines[0]["metadata"];
    assert!(meta["wall_clock_anchor"]["unix_ns"].as_u64().unwrap() > 0);
    assert_eq!(meta["channels"].as_array().unwrap().len(), 2);
    assert!(meta["tool"].as_str().unwrap().starts_with("quietwatt "));
    assert_eq!(lines.len() - 1, rec.samples as usize * 2);
    for l in &lines[1..] {
        assert!(l["timestamp_ns"].as_u64().is_some());
        assert!(l["energy_j"].as_f64().is_some() && l["power_w"].as_f64().is_some());
        assert!(l["missed"].as_u64().is_some() && l["merged"].as_u64() == Some(0));
        assert_eq!(l["freq_hz"].as_f64(), Some(500.0));
    }
}

#[test]
fn dev_full_is_an_output_error_before_anything_is_measured() {
    let mut m = meter(1, Script::Steps);
    let path = Path::new("/dev/full");
    let mut sink = CsvSink::new(OutputFile::create(path).unwrap());
    let c = config(100.0, 100);
    let meta = Metadata::new("powercap", &c.rate, &SysRoot::default());
    let err = record(&mut m, &mut sink, path, &meta, &c, &AtomicBool::new(false)).unwrap_err();
    assert!(matches!(err.error, Error::Output { .. }), "{err}");
    assert!(err.kept.is_none(), "nothing was measured: {err}");
    assert!(err.to_string().contains("/dev/full"), "{err}");
}

/// A disk that fills up after `room` bytes, accepting part of the last write.
struct FillingDisk {
    data: Arc<std::sync::Mutex<Vec<u8>>>,
    room: usize,
}

impl Write for FillingDisk {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut d = self.data.lock().unwrap();
        let n = buf.len().min(self.room - d.len());
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        d.extend_from_slice(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Truncate for FillingDisk {
    fn truncate_to(&mut self, len: u64) -> io::Result<()> {
        self.data.lock().unwrap().truncate(len as usize);
        Ok(())
    }
}

#[test]
fn a_disk_that_fills_up_stops_the_recording_and_leaves_whole_rows() {
    let data = Arc::new(std::sync::Mutex::new(Vec::new()));
    let disk = FillingDisk {
        data: data.clone(),
        room: 200_000,
    };
    let mut m = meter(2, Script::Steps);
    let mut sink = CsvSink::new(OutputFile::new(disk));
    let mut c = config(2000.0, 30_000);
    c.flush_every = Duration::from_millis(50);
    let meta = Metadata::new("powercap", &c.rate, &SysRoot::default());
    let t0 = std::time::Instant::now();
    let stopped = record(
        &mut m,
        &mut sink,
        Path::new("disk.csv"),
        &meta,
        &c,
        &AtomicBool::new(false),
    )
    .unwrap_err();
    // The 30 s recording ended early, with the output error and what it kept.
    assert!(t0.elapsed() < Duration::from_secs(20));
    assert!(
        matches!(stopped.error, Error::Output { .. }),
        "{:?}",
        stopped.error
    );
    let rec = *stopped
        .kept
        .expect("what was recorded before the disk filled up");
    let text = String::from_utf8(data.lock().unwrap().clone()).unwrap();
    // Whole rows only, within the disk (a batch may fill it to the last byte).
    assert!(
        text.len() <= 200_000 && text.ends_with('\n'),
        "{} bytes, ending {:?}",
        text.len(),
        &text[text.len().saturating_sub(80)..]
    );
    let rows = csv_rows(&text);
    assert!(!rows.is_empty());
    // Whole samples only (one row per channel), and the summary counts exactly
    // those: not the samples that were handed over but did not fit.
    let mut per_sample = std::collections::BTreeMap::<&str, usize>::new();
    for r in &rows {
        *per_sample.entry(r[0].as_str()).or_default() += 1;
    }
    assert!(per_sample.values().all(|&n| n == 2), "{per_sample:?}");
    assert_eq!(rec.samples, per_sample.len() as u64);
    assert_eq!(cost(&rec.measurement).written, rec.samples);
    // The summary still has all the energy: it comes from the counters.
    assert!(rec.measurement.energy.domains[0].energy_j.0 > 0.0);
}

#[test]
fn auto_rate_falls_when_idle_rises_under_load_and_respects_the_wrap_floor() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("proc")).unwrap();
    let stat = dir.path().join("proc/stat");
    let write = |busy: u64, idle: u64| {
        std::fs::write(&stat, format!("cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\n")).unwrap();
    };
    write(0, 0);
    // A 40 J counter range wraps in 80 ms at 500 W: the rate may not fall below 25 Hz.
    let src = Scripted::new(1, Script::Steps, Wrap::Modulus(40_000_000));
    let mut m = Meter::new(Box::new(src));
    let mut c = EngineConfig::new(Rate::Auto {
        min: Hertz::new(10.0).unwrap(),
        max: Hertz::new(1000.0).unwrap(),
    });
    // Phases by the feeder's clock, and the recording stopped by the feeder: a host
    // that delays a thread stretches the test, never cuts a phase short.
    c.duration = Some(Duration::from_secs(60));
    c.root = SysRoot::new(dir.path());
    c.hold = Duration::from_millis(100);
    let stat2 = stat.clone();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let feeder = std::thread::spawn(move || {
        let (mut busy, mut idle) = (0, 0);
        let t0 = std::time::Instant::now();
        loop {
            let e = t0.elapsed();
            if e > Duration::from_millis(1600) {
                stop2.store(true, std::sync::atomic::Ordering::Relaxed);
                break;
            }
            // Idle for 0.8 s, then fully busy for 0.8 s.
            if e < Duration::from_millis(800) {
                idle += 2;
            } else {
                busy += 2;
            }
            let _ = std::fs::write(&stat2, format!("cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\n"));
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let mut sink = Collect::default();
    let meta = Metadata::new("powercap", &c.rate, &SysRoot::default());
    let rec = record(&mut m, &mut sink, Path::new("mem"), &meta, &c, &stop)
        .unwrap_or_else(|s| panic!("the recording failed: {s}"));
    feeder.join().unwrap();
    assert!(
        rec.measurement
            .warnings()
            .iter()
            .any(|w| w.contains("raised from 10 Hz to 25 Hz")),
        "{:?}",
        rec.measurement.warnings()
    );
    let rates: Vec<f64> = sink.rows.iter().map(|r| r.4).collect();
    assert_eq!(rates[0], 1000.0, "starts fast");
    let low = rates
        .iter()
        .position(|&r| r == 25.0)
        .expect("fell to the floor when idle");
    assert!(rates[low..].contains(&1000.0), "rose again under load");
    assert!(rates.iter().all(|&r| r >= 25.0));
    assert!(cost(&rec.measurement).rate_changes >= 2);
    // The rows say their interval: at 25 Hz about 40 ms.
    let slow = sink.rows.iter().filter(|r| r.4 == 25.0).nth(1).unwrap();
    assert!(slow.1 > 30_000_000, "{}", slow.1);
}

#[test]
fn a_measured_command_is_sampled_on_the_engine_until_it_exits() {
    let mut m = meter(1, Script::Steps);
    let mut c = EngineConfig::new(Rate::Fixed(Hertz::new(100.0).unwrap()));
    c.realtime = true;
    let mut cmd = std::process::Command::new("sleep");
    cmd.arg("0.3");
    let r = quietwatt::command::measure(&mut m, &mut cmd, &c).unwrap();
    assert!(r.status.success());
    assert!(r.error.is_none());
    assert!(
        r.measurement.energy.duration_s >= 0.3 && r.measurement.energy.duration_s < 3.0,
        "{}",
        r.measurement.energy.duration_s
    );
    // ~30 ticks plus the reading at the exit.
    assert!(
        cost(&r.measurement).samples >= 20,
        "{:?}",
        cost(&r.measurement)
    );
    assert!(cost(&r.measurement).sampler.cpu_ns > 0);
    // Either SCHED_FIFO was granted or a warning says why not.
    assert!(
        cost(&r.measurement).realtime
            || r.measurement
                .warnings()
                .iter()
                .any(|w| w.contains("SCHED_FIFO"))
    );
    let err = quietwatt::command::measure(
        &mut m,
        &mut std::process::Command::new("/nonexistent/x"),
        &c,
    )
    .unwrap_err();
    assert!(matches!(err, Error::Spawn { .. }));
}

#[test]
fn pinning_to_a_cpu_that_does_not_exist_fails_before_sampling() {
    let mut m = meter(1, Script::Steps);
    let mut c = config(100.0, 100);
    c.cpu = Some(100_000);
    let meta = Metadata::new("powercap", &c.rate, &SysRoot::default());
    let err = record(
        &mut m,
        &mut Collect::default(),
        Path::new("mem"),
        &meta,
        &c,
        &AtomicBool::new(false),
    )
    .unwrap_err();
    assert!(err.to_string().contains("CPU 100000"), "{err}");
    // CPU 0 exists everywhere.
    c.cpu = Some(0);
    let rec = run(&mut m, &mut Collect::default(), &c);
    assert_eq!(cost(&rec.measurement).pinned_cpu, Some(0));
}

#[test]
fn a_plain_file_powercap_tree_records() {
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("sys/class/powercap/intel-rapl:0");
    std::fs::create_dir_all(&zone).unwrap();
    std::fs::write(zone.join("name"), "package-0\n").unwrap();
    std::fs::write(zone.join("energy_uj"), "123456\n").unwrap();
    std::fs::write(zone.join("max_energy_range_uj"), "262143328850\n").unwrap();
    let root = SysRoot::new(dir.path());
    let src = quietwatt::source::open(
        &root,
        Some(Mechanism::Powercap),
        &quietwatt::Selection::all(),
    )
    .unwrap();
    let mut m = Meter::new(src);
    let mut sink = Collect::default();
    let rec = run(&mut m, &mut sink, &config(200.0, 100));
    assert_eq!(sink.rows.len() as u64, cost(&rec.measurement).samples);
    assert!(sink.rows.iter().all(|r| r.5 == vec![0.0]));
}

/// A perf source of `cpu-clock` events, one per CPU in `cpus`, each its own channel
/// (software events go through the same open and read as RAPL's `power` events).
fn cpu_clock_meter(cpus: &[u32]) -> Meter {
    use perf_event_open_sys::bindings::{PERF_COUNT_SW_CPU_CLOCK, PERF_TYPE_SOFTWARE};
    use quietwatt::source::perf::{EventSpec, PerfEvents};
    let specs = cpus
        .iter()
        .enumerate()
        .map(|(i, &cpu)| {
            EventSpec::new(
                DomainId::new(i as u32, Domain::Package),
                PERF_TYPE_SOFTWARE,
                PERF_COUNT_SW_CPU_CLOCK as u64,
                cpu,
                EnergyUnit::Scale(1e-9),
            )
        })
        .collect();
    Meter::new(Box::new(PerfEvents::from_specs(specs).unwrap()))
}

fn online_cpus() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    quietwatt::topology::parse_cpu_list(&text).unwrap()
}

#[test]
fn the_sampler_runs_on_the_cpu_whose_perf_counters_it_reads() {
    let cpus = online_cpus();
    // The last CPU first: a sampler left unpinned would often run elsewhere, so
    // this fails if the placement is not made; then the first, so that a sampler
    // always pinned to one fixed CPU fails too.
    for cpu in [cpus[cpus.len() - 1], cpus[0]] {
        let mut m = cpu_clock_meter(&[cpu]);
        assert_eq!(m.read_cpus(), vec![cpu]);
        let rec = run(&mut m, &mut Collect::default(), &config(200.0, 200));
        assert_eq!(
            cost(&rec.measurement).pinned_cpu,
            Some(cpu as usize),
            "{rec:?}"
        );
        // The CPU of its last read, as the kernel says (sched_getcpu).
        assert_eq!(
            cost(&rec.measurement).sampler_cpu,
            Some(cpu as usize),
            "{rec:?}"
        );
        assert!(
            rec.measurement.warnings().is_empty(),
            "{:?}",
            rec.measurement.warnings()
        );
    }
}

#[test]
fn counters_on_several_cpus_or_a_cpu_given_elsewhere_are_reported() {
    let cpus = online_cpus();
    if cpus.len() < 2 {
        eprintln!("one CPU only: nothing can be read from another CPU");
        return;
    }
    let (a, b) = (cpus[0], cpus[1]);
    // Reads on two CPUs: the sampler goes where most are (the lowest on a tie) and
    // says what the others cost.
    let mut m = cpu_clock_meter(&[b, a, b]);
    let rec = run(&mut m, &mut Collect::default(), &config(200.0, 100));
    assert_eq!(cost(&rec.measurement).pinned_cpu, Some(b as usize));
    assert!(
        rec.measurement
            .warnings()
            .iter()
            .any(|w| w.contains("1 of the 3 counter reads") && w.contains("interrupt")),
        "{:?}",
        rec.measurement.warnings()
    );
    // --cpu elsewhere: the user's choice stands, with the cost said.
    let mut m = cpu_clock_meter(&[b]);
    let mut c = config(200.0, 100);
    c.cpu = Some(a as usize);
    let rec = run(&mut m, &mut Collect::default(), &c);
    assert_eq!(cost(&rec.measurement).pinned_cpu, Some(a as usize));
    assert_eq!(cost(&rec.measurement).sampler_cpu, Some(a as usize));
    assert!(
        rec.measurement
            .warnings()
            .iter()
            .any(|w| w.contains(&format!("pin it to CPU {b}"))),
        "{:?}",
        rec.measurement.warnings()
    );
    // A source not tied to a CPU is not pinned.
    let rec = run(
        &mut meter(2, Script::Steps),
        &mut Collect::default(),
        &config(200.0, 100),
    );
    assert_eq!(cost(&rec.measurement).pinned_cpu, None);
}

/// A scripted 1 mJ-a-read source whose calls from `from` on fail with `errno`,
/// `n` of them.
fn failing(from: u64, n: u64, errno: i32) -> Meter {
    let mut src = Scripted::new(1, Script::Steps, Wrap::PERF);
    src.fails = Some((from, n, errno));
    Meter::new(Box::new(src))
}

#[test]
fn transient_read_errors_are_retried_and_the_energy_stays_exact() {
    // Six EAGAINs from the fifth call: a tick's four tries fail (the tick is
    // skipped), the next tick's third try reads.
    let mut m = failing(5, 6, libc::EAGAIN);
    let mut sink = Collect::default();
    let rec = run(&mut m, &mut sink, &config(200.0, 200));
    let o = cost(&rec.measurement);
    assert_eq!((o.read_retries, o.skipped_ticks), (5, 1), "{o:?}");
    assert!(
        o.missed_deadlines >= 1,
        "the skipped tick is a missed deadline"
    );
    let in_rows: u64 = sink.rows.iter().map(|r| r.2 as u64).sum();
    assert_eq!(in_rows, o.missed_deadlines, "every miss is in the data");
    // Every good read is 1 mJ, whatever failed between: nothing made up, nothing lost.
    for r in &sink.rows {
        assert_eq!(r.5, vec![0.001]);
    }
    assert_energy_conserved(&m, &sink.rows);
}

#[test]
fn a_lasting_busy_counter_stops_the_recording_with_its_error() {
    let mut m = failing(5, u64::MAX, libc::EBUSY);
    let mut sink = Collect::default();
    let c = config(200.0, 10_000);
    let meta = Metadata::new("powercap", &c.rate, &SysRoot::default());
    let stopped = record(
        &mut m,
        &mut sink,
        Path::new("mem"),
        &meta,
        &c,
        &AtomicBool::new(false),
    )
    .unwrap_err();
    assert_eq!(stopped.error.kind(), quietwatt::error::ErrorKind::CanRetry);
    assert!(
        stopped.error.to_string().contains("/scripted/0"),
        "{}",
        stopped.error
    );
    let kept = stopped.kept.expect("what was read before is kept");
    // Ten failed ticks in a row: nine skipped, the tenth gives up.
    assert_eq!(
        cost(&kept.measurement).skipped_ticks,
        9,
        "{:?}",
        cost(&kept.measurement)
    );
    assert_eq!(
        cost(&kept.measurement).read_retries,
        30,
        "{:?}",
        cost(&kept.measurement)
    );
    assert_energy_conserved(&m, &sink.rows);
}
