//! The exporter against quietwatt's FUSE emulator, from its own crate: the
//! exposition as a scraper reads it, counters that stay monotone through a wrap,
//! a reset and a counter that vanishes and comes back, and an HTTP server that
//! hostile clients (garbage, an oversized head, silent and trickling
//! connections) cannot keep from answering a good scrape.

use quietwatt::session::SampleRow;
use quietwatt::{Domain, Mechanism, Selection, SysRoot};
use quietwatt_emulator::{Emulator, EmulatorConfig, Mechanism as Served};
use quietwatt_exporter::{
    render, CollectError, Collector, Error, Exporter, ExporterConfig, Exposition, ExpositionFormat,
    Family, Kind, Notice, Server, Value,
};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A mounted emulator and its directory (dropped in this order: unmount, then remove).
struct Mounted {
    emulator: Emulator,
    dir: tempfile::TempDir,
}

/// Mounts `config`; fails loudly when FUSE cannot be used (these tests must run in CI).
fn mount(config: EmulatorConfig) -> Mounted {
    let dir = tempfile::tempdir().expect("tempdir");
    let emulator = Emulator::mount(dir.path(), config).unwrap_or_else(|e| {
        panic!(
            "cannot mount the RAPL emulator ({e}). These tests need FUSE: run them as root \
             on a machine with /dev/fuse (or install fuse3 for fusermount3)."
        )
    });
    Mounted { emulator, dir }
}

/// An exporter on powercap over `domains` of `m`, and the notices it gave.
fn exporter(m: &Mounted, domains: &[Domain]) -> (Exporter, Arc<Mutex<Vec<String>>>) {
    let mut c = ExporterConfig::new(SysRoot::new(m.dir.path()));
    c.mechanism = Some(Mechanism::Powercap);
    c.domains = Selection::only(domains.to_vec());
    c.freq = quietwatt::Hertz::clamped(50.0);
    c.resolution = quietwatt::Joules(0.000001);
    c.retry = Duration::from_millis(300);
    c.emulated = true;
    let notices = Arc::new(Mutex::new(Vec::new()));
    let heard = Arc::clone(&notices);
    let e = Exporter::open(
        c,
        Box::new(move |n: Notice| heard.lock().unwrap().push(format!("{n:?}"))),
    )
    .expect("an exporter on the emulator");
    (e, notices)
}

/// The exported energy, resets and up of `domain` in socket 0.
fn series(e: &Exposition, domain: &str) -> (f64, u64, bool) {
    let d = e
        .domains
        .iter()
        .find(|d| d.socket == 0 && d.domain == domain)
        .unwrap_or_else(|| panic!("no {domain} series: {e:?}"));
    (d.energy_j, d.resets, d.up)
}

/// Asserts the exporter gave a notice of `kind` (its `Debug` name).
fn assert_heard(notices: &Mutex<Vec<String>>, kind: &str) {
    let heard = notices.lock().unwrap();
    assert!(
        heard.iter().any(|n| n.starts_with(kind)),
        "no {kind} in {heard:?}"
    );
}

/// Refreshes every 100 ms until `done` holds (at most 20 s), checking on the way
/// that no exported counter of `domains` ever goes back; the last exposition.
fn refresh_until(
    x: &mut Exporter,
    last: &mut Vec<(f64, u64)>,
    done: impl Fn(&Exposition) -> bool,
) -> Exposition {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let e = x.refresh();
        let now: Vec<(f64, u64)> = e.domains.iter().map(|d| (d.energy_j, d.resets)).collect();
        if last.len() == now.len() {
            for ((e0, r0), (e1, r1)) in last.iter().zip(&now) {
                assert!(e1 >= e0 && r1 >= r0, "went back: {last:?} then {now:?}");
            }
        }
        *last = now;
        if done(&e) {
            return e;
        }
        assert!(Instant::now() < deadline, "never reached: {e:?}");
    }
}

#[test]
fn the_text_format_has_every_family_typed_and_the_emulated_energy_labelled() {
    let m = mount(EmulatorConfig::default());
    let (mut x, _) = exporter(&m, &[Domain::Package, Domain::Dram]);
    std::thread::sleep(Duration::from_millis(300));
    let e = x.refresh();
    let t = render(&e, ExpositionFormat::Text);
    let mut typed = Vec::new();
    for line in t.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            typed.push(rest.split(' ').next().unwrap().to_string());
            continue;
        }
        assert!(
            !line.starts_with("# EOF") && !line.starts_with("# UNIT"),
            "{t}"
        );
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("name{labels} value");
        assert!(value.parse::<f64>().is_ok(), "{line}");
        let name = series.split('{').next().unwrap();
        assert!(
            typed.iter().any(|t| t == name),
            "{name} has no # TYPE before it"
        );
    }
    for family in [
        "quietwatt_energy_joules_total",
        "quietwatt_rapl_resets_total",
        "quietwatt_rapl_ambiguous_decreases_total",
        "quietwatt_up",
        "quietwatt_samples_total",
        "quietwatt_missed_deadlines_total",
        "quietwatt_cpu_seconds_total",
        "quietwatt_wakeups_total",
        "quietwatt_build_info",
    ] {
        assert!(typed.iter().any(|t| t == family), "{family}:\n{t}");
    }
    let package = t
        .lines()
        .find(|l| l.starts_with("quietwatt_energy_joules_total{socket=\"0\",domain=\"package\""))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(
        package.contains(",mechanism=\"powercap\",emulated=\"true\"} "),
        "{package}"
    );
    // Within what the emulator served.
    let (joules, _, up) = series(&e, "package");
    let served = m
        .emulator
        .served(Served::Powercap, 0, Domain::Package)
        .expect("served")
        .energy()
        .0;
    assert!(
        up && joules > 0.0 && joules <= served + 1e-6,
        "{joules} J, {served} J served"
    );
    let om = render(&e, ExpositionFormat::OpenMetrics);
    assert!(om.contains("# UNIT quietwatt_energy_joules joules\n") && om.ends_with("# EOF\n"));
}

#[test]
fn a_wrapping_counter_never_makes_the_energy_decrease() {
    // A 1 J range that wraps every 50 ms or so.
    let m = mount(EmulatorConfig::default().with_counter_bits(16).with_esu(16));
    let (mut x, notices) = exporter(&m, &[Domain::Package]);
    let mut last = Vec::new();
    // Beyond the counter's 1 J range: the wraps were corrected (and the energy
    // never went back on the way, checked at every refresh).
    let e = refresh_until(&mut x, &mut last, |e| series(e, "package").0 > 2.0);
    let d = e.domains.iter().find(|d| d.domain == "package").unwrap();
    // A wrap is never taken for a reset. A reading the host held back for a
    // whole range (this machine delays threads by milliseconds) leaves a
    // decrease a restart explains as well: it is counted as the wrap and exported
    // apart, as ambiguous, never as a reset.
    assert_eq!(
        d.resets,
        0,
        "a wrap is not a reset; {} ambiguous; notices: {:?}",
        d.ambiguous,
        notices.lock().unwrap()
    );
    let served = m
        .emulator
        .served(Served::Powercap, 0, Domain::Package)
        .expect("served")
        .energy()
        .0;
    // No wrap invented beyond the one range each ambiguous decrease may add (the
    // emulator has served more since the refresh, never less).
    assert!(
        d.energy_j <= served + d.ambiguous as f64 + 1e-6,
        "{} J exported, {served} J served, {} ambiguous",
        d.energy_j,
        d.ambiguous
    );
}

#[test]
fn a_counter_reset_is_absorbed_and_counted_never_a_drop_or_a_wrap() {
    // Up for ten minutes (12 kJ in the counter), then a module reload at 0.5 s.
    let c = EmulatorConfig {
        start_offset: Duration::from_secs(600),
        ..EmulatorConfig::default()
    };
    let m = mount(c.with_fault("reset:0/package@500ms".parse().unwrap()));
    let (mut x, _) = exporter(&m, &[Domain::Package]);
    let first = x.refresh();
    assert_eq!(series(&first, "package").1, 0, "no reset before the fault");
    let mut last = Vec::new();
    let e = refresh_until(&mut x, &mut last, |e| series(e, "package").1 >= 1);
    std::thread::sleep(Duration::from_millis(300));
    let e2 = x.refresh();
    assert_eq!(series(&e2, "package").1, 1, "the reset is counted once");
    // A reset taken for a wrap would add the counter's 262 kJ range.
    let served = m
        .emulator
        .served(Served::Powercap, 0, Domain::Package)
        .unwrap()
        .energy()
        .0;
    assert!(series(&e2, "package").0 <= served + 1e-3, "{e:?}");
    assert!(series(&e2, "package").0 >= series(&e, "package").0);
}

#[test]
fn a_counter_that_vanishes_and_comes_back_goes_on_from_where_it_stopped() {
    let m = mount(EmulatorConfig::default());
    let (mut x, notices) = exporter(&m, &[Domain::Package, Domain::Dram]);
    let mut last = Vec::new();
    let before = refresh_until(&mut x, &mut last, |e| series(e, "dram").0 > 0.0);
    assert!(series(&before, "dram").2);

    m.emulator
        .inject("vanish:0/dram".parse().unwrap())
        .expect("inject");
    let down = refresh_until(&mut x, &mut last, |e| !series(e, "dram").2);
    // The other domain is still read; dram keeps its last value.
    assert!(series(&down, "package").2);
    let (dram_down, resets_down, _) = series(&down, "dram");
    assert!(dram_down >= series(&before, "dram").0);
    let p0 = series(&down, "package").0;
    let still = refresh_until(&mut x, &mut last, |e| series(e, "package").0 > p0);
    assert_eq!(
        series(&still, "dram").0,
        dram_down,
        "a counter down stays put"
    );
    assert!(
        notices
            .lock()
            .unwrap()
            .iter()
            .any(|n| n.starts_with("DomainFailed")),
        "{:?}",
        notices.lock().unwrap()
    );

    m.emulator.clear_faults();
    let back = refresh_until(&mut x, &mut last, |e| series(e, "dram").2);
    // Counting on from the last value, the gap counted as one reset.
    let (dram_back, resets_back, _) = series(&back, "dram");
    assert!(dram_back >= dram_down, "{dram_back} J after {dram_down} J");
    assert_eq!(resets_back, resets_down + 1);
    let later = refresh_until(&mut x, &mut last, |e| series(e, "dram").0 > dram_back);
    assert!(series(&later, "dram").2);
    assert_heard(&notices, "DomainBack");
    x.stop();
}

/// A collector that counts the package's samples and fails at its third refresh.
struct Counting {
    domain: Domain,
    rows: u64,
    refreshes: u32,
}

impl Collector for Counting {
    fn name(&self) -> &str {
        "counting"
    }

    fn samples_of(&self) -> Option<Domain> {
        Some(self.domain)
    }

    fn sample(&mut self, _: &SampleRow) {
        self.rows += 1;
    }

    fn collect(&mut self, out: &mut Vec<Family>) -> Result<(), CollectError> {
        self.refreshes += 1;
        let mut f = Family::new("test_rows", Kind::Counter, None, "Rows seen.");
        f.push(
            std::iter::empty::<(&str, String)>(),
            Value::Count(self.rows),
        );
        out.push(f);
        if self.refreshes == 3 {
            return Err(CollectError("gone".into()));
        }
        Ok(())
    }
}

#[test]
fn a_collector_gets_its_domains_samples_and_a_failing_one_is_dropped_not_the_energy() {
    let m = mount(EmulatorConfig::default());
    let (mut x, notices) = exporter(&m, &[Domain::Package]);
    let refused = x.register(Box::new(Counting {
        domain: Domain::Dram,
        rows: 0,
        refreshes: 0,
    }));
    assert!(
        matches!(refused, Err(Error::NotRead(Domain::Dram))),
        "{refused:?}"
    );
    x.register(Box::new(Counting {
        domain: Domain::Package,
        rows: 0,
        refreshes: 0,
    }))
    .expect("the package is read");
    let rows = |e: &Exposition| {
        e.families
            .iter()
            .find(|f| f.name == "test_rows")
            .map(|f| f.samples[0].value)
    };
    std::thread::sleep(Duration::from_millis(300));
    let first = x.refresh();
    // Every sample the exporter counted went through the collector.
    assert_eq!(rows(&first), Some(Value::Count(first.samples)));
    assert!(first.samples > 0);
    std::thread::sleep(Duration::from_millis(100));
    let _ = x.refresh();
    std::thread::sleep(Duration::from_millis(100));
    let failed = x.refresh();
    assert_eq!(
        rows(&failed),
        None,
        "a failing collector's families are left out"
    );
    let (e0, _, _) = series(&failed, "package");
    std::thread::sleep(Duration::from_millis(200));
    let after = x.refresh();
    assert_eq!(rows(&after), None, "a failed collector is not asked again");
    assert!(series(&after, "package").0 > e0, "the energy goes on");
    let heard = notices.lock().unwrap();
    assert_eq!(
        heard
            .iter()
            .filter(|n| n.starts_with("CollectorFailed"))
            .count(),
        1,
        "{heard:?}"
    );
    // Its families sit between the process's own and build_info.
    let t = render(&first, ExpositionFormat::Text);
    assert!(t.find("quietwatt_wakeups_total ").unwrap() < t.find("test_rows_total ").unwrap());
    assert!(t.find("test_rows_total ").unwrap() < t.find("quietwatt_build_info{").unwrap());
}

/// A server on loopback over `m`'s package, refreshed by a thread of its own as
/// `serve`'s main thread does (the exporter lives on that thread).
fn serve(m: &Mounted) -> SocketAddr {
    let root = m.dir.path().to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    // The thread ends with the test process (the server's threads too).
    let _ = std::thread::spawn(move || {
        let mut c = ExporterConfig::new(SysRoot::new(root));
        c.mechanism = Some(Mechanism::Powercap);
        c.domains = Selection::only(vec![Domain::Package]);
        let mut x = Exporter::open(c, Box::new(|_| {})).expect("an exporter");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _ = tx.send(listener.local_addr().unwrap());
        let server = Server::start(listener, None, x.refresh()).expect("a server");
        loop {
            std::thread::sleep(Duration::from_millis(100));
            server.publish(x.refresh());
        }
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("the server's address")
}

/// One request, read to the end (the server closes the connection): the status and
/// the body.
fn get(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(request);
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = raw
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

fn scrape(addr: SocketAddr) -> (u16, String) {
    get(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
}

#[test]
fn hostile_clients_are_refused_and_a_good_scrape_still_answered() {
    let m = mount(EmulatorConfig::default());
    let addr = serve(&m);
    // Connections that send nothing, and some that send a byte at a time, kept
    // open through the scrapes below.
    let silent: Vec<TcpStream> = (0..100)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    let mut trickling: Vec<TcpStream> = (0..20)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    for s in &mut trickling {
        let _ = s.write_all(b"GE");
    }
    // Garbage: answered 400 (or closed), never a crash.
    let (status, _) = get(addr, b"\x16\x03\x01 not http at all\r\n\r\n");
    assert!(status == 400 || status == 0, "{status}");
    // Too long a head: 431.
    let (status, _) = get(
        addr,
        format!("GET /{} HTTP/1.1\r\n", "a".repeat(20_000)).as_bytes(),
    );
    assert!(status == 431 || status == 0, "{status}");
    assert_eq!(get(addr, b"POST /metrics HTTP/1.1\r\n\r\n").0, 405);
    assert_eq!(get(addr, b"GET /nope HTTP/1.1\r\n\r\n").0, 404);
    for i in 0..5 {
        for s in &mut trickling {
            let _ = s.write_all(b"T");
        }
        let (status, body) = scrape(addr);
        assert_eq!(status, 200, "scrape {i}: {body}");
        assert!(body.contains("quietwatt_energy_joules_total{"), "{body}");
    }
    // Twenty at once all answered.
    let all: Vec<_> = (0..20)
        .map(|_| std::thread::spawn(move || scrape(addr)))
        .collect();
    for t in all {
        assert_eq!(t.join().expect("a scrape").0, 200);
    }
    drop(silent);
}

/// A node without RAPL keeps being served, saying why, and is read from the
/// moment its counters appear (here: the emulator mounted on the root after the
/// first refresh), with no restart.
#[test]
fn a_machine_without_counters_is_served_with_the_reason_until_they_appear() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = ExporterConfig::new(SysRoot::new(dir.path()));
    c.mechanism = Some(Mechanism::Powercap);
    c.domains = Selection::only(vec![Domain::Package]);
    c.retry = Duration::from_millis(300);
    c.emulated = true;
    let refused = Exporter::open(c.clone(), Box::new(|_| {})).expect_err("no counter to open");
    match &refused {
        Error::Engine(e) => assert_eq!(e.kind(), quietwatt::ErrorKind::Unavailable, "{e}"),
        e => panic!("not the engine's refusal: {e}"),
    }
    let notices = Arc::new(Mutex::new(Vec::new()));
    let heard = Arc::clone(&notices);
    let mut x = Exporter::unavailable(
        c,
        refused.to_string(),
        Box::new(move |n: Notice| heard.lock().unwrap().push(format!("{n:?}"))),
    );
    let e = x.refresh();
    let reason = e.unavailable.clone().expect("the reason is exported");
    assert!(!reason.is_empty() && !reason.contains('\n'), "{reason:?}");
    assert!(e.domains.is_empty());
    let t = render(&e, ExpositionFormat::Text);
    assert!(t.contains("quietwatt_up{reason=\""), "{t}");
    assert!(!t.contains("quietwatt_energy_joules_total{"), "{t}");
    assert!(t.contains("process_cpu_seconds_total "), "{t}");

    let emulator = Emulator::mount(dir.path(), EmulatorConfig::default())
        .unwrap_or_else(|e| panic!("cannot mount the RAPL emulator ({e}): these tests need FUSE"));
    let e = refresh_until(&mut x, &mut Vec::new(), |e| {
        e.domains.first().is_some_and(|d| d.up && d.energy_j > 0.0)
    });
    assert!(e.unavailable.is_none() && x.unavailable_reason().is_none());
    assert!(!render(&e, ExpositionFormat::Text).contains("reason="));
    assert_heard(&notices, "DomainBack");
    x.stop();
    drop(emulator);
}
