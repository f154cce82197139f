//! `quietwatt serve` against the emulator, over HTTP on loopback with plain
//! `TcpStream`s: its flags and wording end to end (the formats, the energy against
//! what the emulator served, `--events`, `--attribute`, `--listen`,
//! `--basic-auth-file`, what it says when a counter vanishes, SIGTERM, a real
//! Prometheus); and the buffered path (ebpf, perf-ring) for real on this
//! machine's kernel, with software counters standing in for the RAPL events
//! (perf_event_open cannot reach the emulator's PMU). Wraps, resets, a counter
//! that comes back, and hostile or concurrent clients are the exporter's logic,
//! tested in `crates/quietwatt-exporter/tests/emulated.rs`.

use crate::common;

use crate::common::{mount, quietwatt, stderr};
use quietwatt::Domain;
use quietwatt_emulator::{EmulatorConfig, Mechanism as Served};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A running `quietwatt serve` and what it printed on stderr.
struct Server {
    child: Child,
    addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    fn start(root: &Path, extra: &[&str]) -> Server {
        Server::start_on(root, "127.0.0.1:0", extra)
    }

    fn start_on(root: &Path, listen: &str, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_quietwatt"))
            .arg("--root")
            .arg(root)
            .args(["serve", "--listen", listen])
            .args(extra)
            .env_remove("QUIETWATT_ROOT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start quietwatt serve");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let pipe = child.stderr.take().expect("stderr");
        let log = Arc::clone(&stderr);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("serving http://").nth(1) {
                    let addr = rest.split('/').next().unwrap_or("").to_string();
                    let _ = tx.send(addr);
                }
                let mut l = log.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(a) => a.parse().expect("an address"),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "quietwatt serve printed no address: {}",
                    stderr.lock().unwrap()
                );
            }
        };
        Server {
            child,
            addr,
            stderr,
        }
    }

    fn scrape(&self) -> Response {
        get(self.addr, "/metrics", None)
    }

    fn terminate(mut self) -> (std::process::ExitStatus, Duration, String) {
        let t = Instant::now();
        // SAFETY: kill with the pid of a child not yet reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            if t.elapsed() > Duration::from_secs(10) {
                let _ = self.child.kill();
                panic!("quietwatt serve still running 10 s after SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let took = t.elapsed();
        // The reader thread sees the pipe close.
        std::thread::sleep(Duration::from_millis(200));
        let log = self.stderr.lock().unwrap().clone();
        (status, took, log)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Response {
    status: u16,
    content_type: String,
    body: String,
}

/// One request, read to the end (the server closes the connection).
fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> Response {
    let accept: Vec<_> = accept.map(|a| ("Accept", a)).into_iter().collect();
    get_with(addr, path, &accept)
}

/// One request with `authorization` as its Authorization header.
fn get_with_auth(addr: SocketAddr, path: &str, authorization: &str) -> Response {
    get_with(addr, path, &[("Authorization", authorization)])
}

/// One request with `headers`, read to the end.
fn get_with(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read the response");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a response head");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status line");
    let content_type = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default();
    Response {
        status,
        content_type,
        body: body.to_string(),
    }
}

/// Checks the text format line by line and returns the samples as
/// (name, labels, value).
fn parse(body: &str) -> Vec<(String, String, f64)> {
    let mut samples = Vec::new();
    let mut typed = Vec::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            typed.push(rest.split(' ').next().unwrap().to_string());
            continue;
        }
        if line.starts_with("# HELP ") || line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        assert!(!line.starts_with('#'), "an unknown comment: {line}");
        let (series, value) = line.rsplit_once(' ').expect("name{labels} value");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("a value: {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.strip_suffix('}').expect("closed labels")),
            None => (series, ""),
        };
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "a metric name: {name}"
        );
        for pair in split_labels(labels) {
            let (k, v) = pair.split_once('=').expect("label=value");
            assert!(k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
            assert!(v.starts_with('"') && v.ends_with('"'), "quoted: {pair}");
        }
        // Each sample belongs to a family declared before it.
        assert!(
            typed.iter().any(|t| name == t
                || name.strip_suffix("_total") == Some(t)
                || name.strip_suffix("_info") == Some(t)),
            "{name} has no # TYPE before it"
        );
        samples.push((name.to_string(), labels.to_string(), value));
    }
    samples
}

/// `k="v",k2="v2"` split at the commas between pairs, not those inside a quoted
/// value (a stand-in's label has one).
fn split_labels(labels: &str) -> Vec<&str> {
    let (mut pairs, mut start, mut quoted, mut escaped) = (Vec::new(), 0, false, false);
    for (i, c) in labels.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                pairs.push(&labels[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    pairs.push(&labels[start..]);
    pairs.into_iter().filter(|p| !p.is_empty()).collect()
}

/// The value of the one sample of `name` whose labels contain `has`.
fn value(samples: &[(String, String, f64)], name: &str, has: &str) -> Option<f64> {
    samples
        .iter()
        .find(|(n, l, _)| n == name && l.contains(has))
        .map(|s| s.2)
}

#[test]
fn the_text_format_parses_and_package_energy_matches_what_was_served() {
    let m = mount(EmulatorConfig::default());
    let server = Server::start(
        m.root(),
        &[
            "-m",
            "powercap",
            "--min-interval",
            "0.2",
            "--resolution",
            "0.001",
        ],
    );
    let mut last = 0.0;
    for i in 0..5 {
        std::thread::sleep(Duration::from_millis(300));
        let before = m.served_powercap(0, Domain::Package);
        let r = server.scrape();
        let after = m.served_record(Served::Powercap, 0, Domain::Package);
        assert_eq!(r.status, 200);
        assert_eq!(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
        // Read from the emulator (`--root` at its mount): every energy series says so.
        for line in r
            .body
            .lines()
            .filter(|l| l.starts_with("quietwatt_energy_joules_total{"))
        {
            assert!(line.contains("emulated=\"true\""), "{line}");
        }
        for family in [
            "quietwatt_energy_joules_total",
            "quietwatt_rapl_resets_total",
            "quietwatt_rapl_ambiguous_decreases_total",
            "quietwatt_up",
            "quietwatt_samples_total",
            "quietwatt_missed_deadlines_total",
            "quietwatt_cpu_seconds_total",
            "quietwatt_build_info",
        ] {
            assert!(
                r.body.contains(&format!("# TYPE {family} ")),
                "{family}:\n{}",
                r.body
            );
            assert!(r.body.contains(&format!("# HELP {family} ")), "{family}");
        }
        assert!(!r.body.contains("# EOF"));
        let s = parse(&r.body);
        let e = value(
            &s,
            "quietwatt_energy_joules_total",
            "domain=\"package\",mechanism=\"powercap\"",
        )
        .expect("package energy");
        assert!(e >= last, "scrape {i}: the counter went from {last} to {e}");
        last = e;
        // The figure is a reading at most one --min-interval (and a sampling period)
        // before the scrape, rounded down: within what the emulator served up to
        // the scrape, and not less than what it served a generous 0.5 s before it.
        let watts = after.energy().0 / (after.last_t - after.first_t).as_secs_f64();
        assert!(
            e <= after.energy().0 + 0.001,
            "{e} J above the {} J served",
            after.energy().0
        );
        assert!(
            e >= before - watts * 0.5 - 0.001,
            "{e} J well below the {before} J served before the scrape ({watts} W)"
        );
        assert_eq!(value(&s, "quietwatt_up", "domain=\"package\""), Some(1.0));
        assert_eq!(value(&s, "quietwatt_build_info", "version=\""), Some(1.0));
    }
    assert!(last > 0.0);
    let (status, _, log) = server.terminate();
    assert!(status.success(), "{status}: {log}");
}

#[test]
fn openmetrics_is_served_when_asked_for() {
    let m = mount(EmulatorConfig::default());
    let server = Server::start(m.root(), &["-d", "package"]);
    let r = get(
        server.addr,
        "/metrics",
        Some("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
    );
    assert_eq!(r.status, 200);
    assert!(
        r.content_type
            .starts_with("application/openmetrics-text; version=1.0.0"),
        "{}",
        r.content_type
    );
    assert!(r.body.ends_with("# EOF\n"), "{}", r.body);
    assert!(r.body.contains("# TYPE quietwatt_energy_joules counter\n"));
    assert!(r.body.contains("# UNIT quietwatt_energy_joules joules\n"));
    assert!(r.body.contains("# TYPE quietwatt_build info\n"));
    let s = parse(&r.body);
    assert!(value(&s, "quietwatt_energy_joules_total", "domain=\"package\"").is_some());
    // Without the header: the text format.
    let plain = server.scrape();
    assert!(plain.content_type.starts_with("text/plain; version=0.0.4"));
    assert!(!plain.body.contains("# EOF"));
}

#[test]
fn events_export_each_cpus_idle_states_and_wakeups_within_physical_bounds() {
    let m = mount(EmulatorConfig::default());
    let started = Instant::now();
    let server = Server::start(
        m.root(),
        &[
            "-m",
            "powercap",
            "-d",
            "package",
            "--min-interval",
            "0.1",
            "--events",
        ],
    );
    let cpus = std::fs::read_dir("/sys/devices/system/cpu")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| {
            n.strip_prefix("cpu")
                .is_some_and(|d| d.parse::<u32>().is_ok())
        })
        .count();
    // cpuidle's states; without a cpuidle driver (many cloud VMs) the exporter counts
    // the kernel's own two (0 polling, 1 default idle) through BPF instead.
    let listed = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cpuidle")
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("state"))
            })
            .count()
        })
        .unwrap_or(0);
    let states = if listed > 0 {
        listed
    } else {
        eprintln!(
            "NO CPUIDLE DRIVER on this machine: expecting the kernel's states 0 and 1 through BPF"
        );
        2
    };
    let mut last: Option<Vec<(String, String, f64)>> = None;
    for _ in 0..4 {
        std::thread::sleep(Duration::from_millis(300));
        let r = server.scrape();
        assert_eq!(r.status, 200);
        let s = parse(&r.body);
        let idle: Vec<_> = s
            .iter()
            .filter(|x| x.0 == "quietwatt_cpu_idle_seconds_total")
            .cloned()
            .collect();
        let entries = s
            .iter()
            .filter(|x| x.0 == "quietwatt_cpu_idle_entries_total")
            .count();
        let wakeups = s
            .iter()
            .filter(|x| x.0 == "quietwatt_cpu_wakeups_total")
            .count();
        // One series per CPU and state, one wake-up series per CPU: bounded.
        assert_eq!(idle.len(), cpus * states, "{}", r.body);
        assert_eq!(entries, cpus * states);
        assert_eq!(wakeups, cpus, "{}", r.body);
        // A CPU cannot idle longer than the exporter has run.
        let elapsed = started.elapsed().as_secs_f64();
        for cpu in 0..cpus {
            let tag = format!("cpu=\"{cpu}\"");
            let sum: f64 = idle
                .iter()
                .filter(|x| x.1.contains(&tag))
                .map(|x| x.2)
                .sum();
            assert!(
                sum <= elapsed + 0.01,
                "cpu {cpu} idled {sum} s in {elapsed} s"
            );
        }
        // Counters never decrease.
        if let Some(prev) = &last {
            for (p, n) in prev.iter().zip(&idle) {
                assert_eq!(p.1, n.1);
                assert!(n.2 >= p.2, "{p:?} then {n:?}");
            }
        }
        last = Some(idle);
    }
}

#[test]
fn a_vanished_counter_is_marked_and_the_others_still_served() {
    let config = EmulatorConfig::default().with_fault("vanish:0/dram@1s".parse().unwrap());
    let m = mount(config);
    let server = Server::start(
        m.root(),
        &[
            "-m",
            "powercap",
            "-d",
            "package,dram",
            "--min-interval",
            "0.2",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let down = loop {
        let s = parse(&server.scrape().body);
        if value(&s, "quietwatt_up", "domain=\"dram\"") == Some(0.0) {
            break s;
        }
        assert!(Instant::now() < deadline, "dram never marked down: {s:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        value(&down, "quietwatt_up", "domain=\"package\""),
        Some(1.0)
    );
    // The dram series stays, at its last value.
    assert!(value(&down, "quietwatt_energy_joules_total", "domain=\"dram\"").is_some());
    let p0 = value(&down, "quietwatt_energy_joules_total", "domain=\"package\"").unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let s = parse(&server.scrape().body);
    let p1 = value(&s, "quietwatt_energy_joules_total", "domain=\"package\"").unwrap();
    assert!(p1 > p0, "package stopped at {p0} J");
    let (status, _, log) = server.terminate();
    assert!(status.success(), "{status}: {log}");
    assert!(log.contains("dram is no longer read"), "{log}");
}

#[test]
fn sigterm_stops_it_cleanly() {
    let m = mount(EmulatorConfig::default());
    let server = Server::start(m.root(), &["-d", "package"]);
    assert_eq!(server.scrape().status, 200);
    let (status, took, log) = server.terminate();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(took < Duration::from_secs(10));
    let last = log.lines().last().unwrap_or("");
    assert!(last.starts_with("quietwatt: stopped after"), "{log}");
    assert!(last.contains("1 scrapes served"), "{last}");
    // Left to choose on the emulator (whose perf events the kernel does not
    // have), it polls powercap and says why it does not sample in the kernel.
    assert!(
        log.contains("note: polling powercap: sampling in the kernel")
            && log.contains("(powercap at 10 Hz,"),
        "{log}"
    );
}

use crate::busy::busy_cpu0;

/// The buffered path through each in-kernel mechanism, on the stand-ins of CPU 0
/// (cpu-clock as the package: one "joule" per second of wall time, so the truth is
/// the clock): the exported energy lies between what the clock counted up to the
/// scrape and what it counted up to a drain period and a refresh before it (with
/// a generous margin for a loaded machine), while the kernel takes 200 readings a
/// second and the whole process wakes fewer than 10 times a second (polling at
/// 200 Hz wakes at least 200 times).
#[test]
fn the_buffered_path_exports_the_clocks_energy_and_wakes_about_once_a_second() {
    let _tick = busy_cpu0();
    let dir = tempfile::tempdir().unwrap();
    for m in ["ebpf", "perf-ring"] {
        let t0 = Instant::now();
        let server = Server::start(
            dir.path(),
            &[
                "-m",
                m,
                "--stand-in-events",
                "-f",
                "200",
                "-d",
                "package",
                "--min-interval",
                "0.5",
                "--resolution",
                "0.001",
            ],
        );
        let ready = Instant::now();
        let lag = 0.5 + 1.0 + 1.5;
        let scrape = || {
            let before = Instant::now();
            let r = server.scrape();
            let after = Instant::now();
            assert_eq!(r.status, 200);
            let s = parse(&r.body);
            // Software events are labelled as such, never as a mechanism's energy.
            let e = value(
                &s,
                "quietwatt_energy_joules_total",
                &format!(
                    "domain=\"package\",mechanism=\"{}\"",
                    quietwatt::source::STAND_IN_LABEL
                ),
            )
            .unwrap_or_else(|| panic!("{m}: no package energy: {}", r.body));
            // The clock counted from after the start to the exporter's last
            // reading, which is before the scrape answered and, drained and
            // published, at most `lag` before the scrape asked.
            let upper = (after - t0).as_secs_f64();
            let lower = (before - ready).as_secs_f64() - lag;
            assert!(
                e <= upper,
                "{m}: {e} J exported, only {upper} s since the start"
            );
            assert!(
                e >= lower,
                "{m}: {e} J exported, {lower} s of the clock were surely drained"
            );
            let w = value(&s, "quietwatt_wakeups_total", "").expect("wake-ups");
            let n = value(&s, "quietwatt_samples_total", "").expect("samples");
            (before, e, w, n)
        };
        std::thread::sleep(Duration::from_millis(2500));
        let (t1, e1, w1, n1) = scrape();
        std::thread::sleep(Duration::from_millis(5000));
        let (t2, e2, w2, n2) = scrape();
        let secs = (t2 - t1).as_secs_f64();
        assert!(e2 > e1, "{m}: {e1} J then {e2} J");
        let wakeups = (w2 - w1) / secs;
        let readings = (n2 - n1) / secs;
        assert!(
            wakeups < 10.0,
            "{m}: the exporter woke {wakeups:.1} times a second for {readings:.0} readings a second"
        );
        assert!(
            readings > 100.0,
            "{m}: {readings:.0} readings a second at 200 Hz in the kernel"
        );
        let (status, _, log) = server.terminate();
        assert!(status.success(), "{m}: {status}: {log}");
        let how = format!("({m} at 200 Hz in the kernel, collected every 1.000 s, package;");
        assert!(log.contains(&how), "{log}");
    }
}

#[test]
fn listen_takes_a_host_name() {
    let m = mount(EmulatorConfig::default());
    let server = Server::start_on(m.root(), "localhost:0", &["-d", "package"]);
    assert!(server.addr.ip().is_loopback(), "{}", server.addr);
    assert_eq!(server.scrape().status, 200);
    let (status, _, log) = server.terminate();
    assert!(status.success(), "{status}: {log}");
    let o = quietwatt(m.root(), &["serve", "--listen", "localhost"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("give ADDR:PORT"), "{}", stderr(&o));
}

#[test]
fn basic_auth_is_required_when_configured() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("auth");
    std::fs::write(&file, "prom:s3cret\n").unwrap();
    let server = Server::start(
        m.root(),
        &["-d", "package", "--basic-auth-file", file.to_str().unwrap()],
    );
    assert_eq!(server.scrape().status, 401);
    let mut s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // base64("prom:s3cret")
    s.write_all(b"GET /metrics HTTP/1.1\r\nAuthorization: Basic cHJvbTpzM2NyZXQ=\r\n\r\n")
        .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
}

/// `s` with everything but letters and digits percent-encoded, for a query string.
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A Prometheus query's first result value, if it has one.
fn prom_query(addr: SocketAddr, query: &str) -> Option<f64> {
    let r = get(
        addr,
        &format!("/api/v1/query?query={}", urlencode(query)),
        None,
    );
    if r.status != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&r.body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

/// A node without RAPL (here: a root with no counter at all) keeps being
/// served, as a DaemonSet needs: no energy series, `quietwatt_up` 0 with the
/// reason, the process's own metrics, `/healthz` 200 saying so without
/// credentials; and it stops cleanly.
#[test]
fn a_machine_without_rapl_is_served_with_the_reason_and_stays_healthy() {
    let empty = tempfile::tempdir().unwrap();
    let auth = empty.path().join("auth");
    std::fs::write(&auth, "u:p\n").unwrap();
    let server = Server::start(
        empty.path(),
        &[
            "--min-interval",
            "0.1",
            "--basic-auth-file",
            auth.to_str().unwrap(),
        ],
    );
    let health = get(server.addr, "/healthz", None);
    assert_eq!(health.status, 200, "{}", health.body);
    assert!(
        health.body.starts_with("ok: ") && health.body.contains("no energy: "),
        "{}",
        health.body
    );
    // The metrics still need the credentials.
    assert_eq!(server.scrape().status, 401);
    let body = get_with_auth(server.addr, "/metrics", "Basic dTpw").body;
    assert!(body.contains("quietwatt_up{reason=\""), "{body}");
    assert!(
        body.contains("} 0\n") && !body.contains("quietwatt_energy_joules_total{"),
        "{body}"
    );
    assert!(body.contains("process_resident_memory_bytes "), "{body}");
    let (status, _, log) = server.terminate();
    assert!(status.success(), "{status:?}: {log}");
    assert!(
        log.contains("no energy counter can be read here") && log.contains("without energy"),
        "{log}"
    );
}

/// `name` found in PATH: Debian's prometheus package, which scripts/setup-deps.sh
/// installs, brings `prometheus` and `promtool`.
fn installed(name: &str) -> std::path::PathBuf {
    std::env::var_os("PATH")
        .and_then(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .find(|f| f.is_file())
        })
        .unwrap_or_else(|| {
            panic!("`{name}` is not installed: run scripts/setup-deps.sh (Debian's prometheus package)")
        })
}

/// Prometheus's own linter finds nothing to fix in a whole exposition: the
/// energy, the counters' families, `--events`' per-CPU families and the
/// standard `process_*` families (names, units, `_total` suffixes, help).
#[test]
fn promtool_finds_nothing_to_fix_in_what_it_serves() {
    let m = mount(EmulatorConfig::default());
    let server = Server::start(
        m.root(),
        &["-m", "powercap", "--min-interval", "0.1", "--events"],
    );
    let mut body = server.scrape().body;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !body.contains("process_start_time_seconds ") {
        assert!(
            Instant::now() < deadline,
            "no process_* families in 30 s:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(100));
        body = server.scrape().body;
    }
    for family in [
        "quietwatt_energy_joules_total{",
        "quietwatt_rapl_resets_total{",
        "quietwatt_up{",
        "process_cpu_seconds_total ",
        "process_resident_memory_bytes ",
        "process_open_fds ",
    ] {
        assert!(body.contains(family), "no {family} in:\n{body}");
    }
    let mut check = Command::new(installed("promtool"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start promtool");
    check
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = check.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {said}\n{body}"
    );
}

/// A real Prometheus (Debian's `prometheus`, which scripts/setup-deps.sh
/// installs) scraping `target` every second as job `quietwatt`, killed when
/// dropped.
struct Prometheus {
    child: Child,
    web: SocketAddr,
    dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: SocketAddr) -> Prometheus {
        let prometheus = installed("prometheus");
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: quietwatt\n    static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let web: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new(&prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={web}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        Prometheus { child, web, dir }
    }

    /// Its log so far, for a failure's message.
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every series of a Prometheus instant query: its labels and value.
fn prom_series(
    addr: SocketAddr,
    query: &str,
) -> Vec<(serde_json::Map<String, serde_json::Value>, f64)> {
    let r = get(
        addr,
        &format!("/api/v1/query?query={}", urlencode(query)),
        None,
    );
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
    assert!(
        r.status == 200 || r.status == 503,
        "{query}: {} {}",
        r.status,
        r.body
    );
    v["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| {
            let value = s["value"][1].as_str()?.parse().ok()?;
            Some((s["metric"].as_object()?.clone(), value))
        })
        .collect()
}

/// A real Prometheus (Debian's `prometheus`, which scripts/setup-deps.sh installs)
/// scrapes the exporter every second, negotiating OpenMetrics as it does by
/// default: the energy is there, positive, and its rate() is the emulator's power.
#[test]
fn a_real_prometheus_scrapes_it() {
    let m = mount(EmulatorConfig::default());
    let server = Server::start(m.root(), &["-m", "powercap", "-d", "package"]);
    let mut prom = Prometheus::start(server.addr);
    let web = prom.web;
    let deadline = Instant::now() + Duration::from_secs(120);
    // The exporter updates its values at most once a second (--min-interval): at a
    // scrape a value can be up to a second (more on a loaded host) old, so a rate
    // over a 30 s window is within a few percent of the truth where a 10 s one
    // could be 10 % off (seen on a loaded CI machine).
    let query = "rate(quietwatt_energy_joules_total{domain=\"package\"}[30s])";
    let (energy, rate) = loop {
        assert!(
            prom.child.try_wait().unwrap().is_none(),
            "prometheus exited: {}",
            prom.log()
        );
        let ready = TcpStream::connect_timeout(&web, Duration::from_secs(1)).is_ok();
        if ready {
            let e = prom_query(
                web,
                "quietwatt_energy_joules_total{domain=\"package\",job=\"quietwatt\"}",
            );
            let r = prom_query(web, query);
            if let (Some(e), Some(r)) = (e, r) {
                if e > 0.0 && r > 0.0 && Instant::now() > deadline - Duration::from_secs(80) {
                    break (e, r);
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "no quietwatt_energy_joules_total in Prometheus after 120 s: {}",
            prom.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let served = m.served_record(Served::Powercap, 0, Domain::Package);
    let watts = served.energy().0 / (served.last_t - served.first_t).as_secs_f64();
    assert!(energy > 0.0);
    assert!(
        (rate - watts).abs() <= watts * 0.1,
        "Prometheus's {query} = {rate} W, the emulator serves {watts} W"
    );
    assert_eq!(prom_query(web, "up{job=\"quietwatt\"}"), Some(1.0));
}

/// `serve --attribute` at 50 Hz over [`common::mount_following`]'s powercap tree,
/// values every 0.2 s to the µJ, with `attribute` (the attribution's flags).
fn serve_attributing(root: &Path, attribute: &[&str]) -> Server {
    let mut args = vec!["-m", "powercap", "--freq", "50", "--min-interval", "0.2"];
    args.extend(["--resolution", "0.000001", "--attribute"]);
    args.extend(attribute);
    Server::start(root, &args)
}

/// Σ of every attributed series (both parts, `other` included) and the
/// unattributed parts, against the package counter: equal but for the readings
/// taken between the refresh's split and its snapshot (a few sampling periods at
/// the package's most power, all of this machine's CPUs busy).
fn attribution_adds_up(s: &[(String, String, f64)], period_s: f64) -> f64 {
    let max_watts = 10.0 + common::FOLLOW_W_PER_CPU * common::cpus() as f64;
    let sum = |name: &str| {
        s.iter()
            .filter(|(n, _, _)| n == name)
            .map(|x| x.2)
            .sum::<f64>()
    };
    let split = sum("quietwatt_attributed_energy_joules_total")
        + sum("quietwatt_unattributed_energy_joules_total");
    let package = value(s, "quietwatt_energy_joules_total", "domain=\"package\"").unwrap();
    let lag = package - split;
    assert!(
        lag >= -1e-5 && lag <= max_watts * 3.0 * period_s + 1e-5,
        "split {split} J against the package's {package} J"
    );
    split
}

#[test]
fn attribute_exports_each_cgroups_energy_against_the_emulators_truth() {
    let m = common::mount_following();
    let server = serve_attributing(m.root(), &["--idle-watts", "10"]);
    let v2 = quietwatt_attribution::names::cgroup2_mount().expect("cgroup v2");
    let pid = std::process::id();
    let groups: Vec<_> = [150_000, 300_000]
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let cg =
                quietwatt_attribution::OwnCgroup::create_in(&v2, &format!("qw-serve-{pid}-{i}"))
                    .expect("create a cgroup (root and cgroup v2 are needed)");
            // Each shell prints its own CPU time (ns) at its end: the truth.
            let mut cmd = Command::new("sh");
            cmd.args([
                "-c",
                &format!("i=0; while [ $i -lt {n} ]; do i=$((i+1)); done; cat /proc/$$/schedstat"),
            ])
            .stdout(Stdio::piped());
            cg.join_on_exec(&mut cmd);
            (cg, cmd.spawn().expect("spawn a busy shell"))
        })
        .collect();
    let mut truths = Vec::new();
    for (cg, child) in groups {
        let o = child.wait_with_output().unwrap();
        let cpu_ns: f64 = String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .expect("the shell's schedstat");
        truths.push((cg, cpu_ns));
    }
    // Two refreshes: the exported figures cover both shells' ends.
    std::thread::sleep(Duration::from_millis(600));
    let r = server.scrape();
    let s = parse(&r.body);
    for (cg, cpu_ns) in &truths {
        let id = format!("id=\"{}\"", cg.id());
        let dynamic = s
            .iter()
            .find(|(n, l, _)| {
                n == "quietwatt_attributed_energy_joules_total"
                    && l.contains(&id)
                    && l.contains("part=\"dynamic\"")
            })
            .map(|x| x.2)
            .unwrap_or_else(|| panic!("no series for cgroup {}:\n{}", cg.id(), r.body));
        let truth = common::FOLLOW_W_PER_CPU * cpu_ns / 1e9;
        let tol = common::follow_tolerance(truth);
        eprintln!(
            "cgroup {}: dynamic {dynamic:.4} J, truth {truth:.4} J, tolerance {tol:.3} J",
            cg.id()
        );
        assert!(
            (dynamic - truth).abs() <= tol,
            "{dynamic} J against {truth} J"
        );
        let cpu = value(&s, "quietwatt_attributed_cpu_seconds_total", &id).unwrap();
        assert!(
            (cpu - cpu_ns / 1e9).abs() <= 0.05 + 0.1 * cpu_ns / 1e9,
            "{cpu} s of CPU against {} s",
            cpu_ns / 1e9
        );
    }
    attribution_adds_up(&s, 1.0 / 50.0);
    let (status, _, log) = server.terminate();
    assert!(status.success(), "{status}: {log}");
    assert!(
        log.contains("attributing the package energy by cgroup"),
        "{log}"
    );
}

#[test]
fn attribute_top_bounds_the_series_and_every_counter_keeps_adding_up() {
    let m = common::mount_following();
    let server = serve_attributing(m.root(), &["process", "--attribute-top", "2"]);
    // Six busy processes, more than the series allowed.
    let mut children: Vec<_> = (0..6)
        .map(|_| {
            Command::new("sh")
                .args(["-c", "i=0; while [ $i -lt 60000 ]; do i=$((i+1)); done"])
                .spawn()
                .unwrap()
        })
        .collect();
    let (mut last_other, mut last_split) = (0.0, 0.0);
    let mut scrapes = 0;
    let mut done = false;
    while !done || scrapes < 3 {
        done = children.iter_mut().all(|c| c.try_wait().unwrap().is_some());
        std::thread::sleep(Duration::from_millis(250));
        let r = server.scrape();
        let s = parse(&r.body);
        let ids: std::collections::BTreeSet<&str> = s
            .iter()
            .filter(|(n, _, _)| n == "quietwatt_attributed_energy_joules_total")
            .filter_map(|(_, l, _)| l.split("id=\"").nth(1)?.split('"').next())
            .filter(|id| *id != "other")
            .collect();
        assert!(ids.len() <= 2, "{} processes exported: {ids:?}", ids.len());
        assert!(r.body.contains("by=\"process\",id=\"other\""));
        let other: f64 = s
            .iter()
            .filter(|(n, l, _)| {
                n == "quietwatt_attributed_energy_joules_total" && l.contains("id=\"other\"")
            })
            .map(|x| x.2)
            .sum();
        assert!(
            other >= last_other,
            "other went from {last_other} to {other}"
        );
        let split = attribution_adds_up(&s, 1.0 / 50.0);
        assert!(
            split >= last_split,
            "the split went from {last_split} to {split}"
        );
        (last_other, last_split) = (other, split);
        scrapes += 1;
    }
    // More processes used energy than the two series: the rest is in other.
    assert!(last_other > 0.0, "nothing in other");
    let (status, _, log) = server.terminate();
    assert!(status.success(), "{status}: {log}");
}

/// A Kubernetes pod's container as the kubelet's systemd driver and containerd
/// lay it out (`kubepods-pod<uid>.slice/cri-containerd-<id>.scope`), under a
/// cgroup of the test's own, and the kubelet's log directory naming the pod;
/// removed when dropped.
struct KubePod {
    uid: &'static str,
    id: &'static str,
    logs: tempfile::TempDir,
    // Dropped in this order: the container's cgroup before its parents.
    container: quietwatt_attribution::OwnCgroup,
    _pod: quietwatt_attribution::OwnCgroup,
    _base: quietwatt_attribution::OwnCgroup,
}

impl KubePod {
    fn new(namespace: &str, name: &str, uid: &'static str) -> KubePod {
        let id = "4f1c2d3e4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0";
        let logs = tempfile::tempdir().unwrap();
        std::fs::create_dir(logs.path().join(format!("{namespace}_{name}_{uid}"))).unwrap();
        let v2 = quietwatt_attribution::names::cgroup2_mount().expect("cgroup v2");
        let base = quietwatt_attribution::OwnCgroup::create_in(
            &v2,
            &format!("qw-kubepods-{}-{name}", std::process::id()),
        )
        .expect("create a cgroup (root and cgroup v2 are needed)");
        let pod = quietwatt_attribution::OwnCgroup::create_in(
            base.path(),
            &format!("kubepods-besteffort-pod{}.slice", uid.replace('-', "_")),
        )
        .unwrap();
        let container = quietwatt_attribution::OwnCgroup::create_in(
            pod.path(),
            &format!("cri-containerd-{id}.scope"),
        )
        .unwrap();
        KubePod {
            uid,
            id,
            logs,
            container,
            _pod: pod,
            _base: base,
        }
    }

    /// The log directory, for `--pod-logs`.
    fn logs(&self) -> &str {
        self.logs.path().to_str().unwrap()
    }
}

/// A pod's container, laid out as the kubelet's systemd driver and containerd
/// lay it out (`kubepods-pod<uid>.slice/cri-containerd-<id>.scope`, under a
/// cgroup of the test's own), with the kubelet's log directory beside: its
/// series carry the pod UID and the container id in full, and the pod's
/// namespace and name, as kube-state-metrics writes them (to join on).
#[test]
fn attribute_labels_a_pods_container_with_its_uid_id_namespace_and_name() {
    let m = common::mount_following();
    let pod = KubePod::new("shop", "web-0", "0c5a9e2d-7b1f-4e3a-9d8c-6f2b1a0e9c7d");
    let server = serve_attributing(m.root(), &["--pod-logs", pod.logs()]);
    let (uid, id, container) = (pod.uid, pod.id, &pod.container);
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"]);
    container.join_on_exec(&mut cmd);
    assert!(cmd.status().unwrap().success());
    // Two refreshes: the shell's slices are split and exported.
    std::thread::sleep(Duration::from_millis(600));
    let r = server.scrape();
    let want = format!(
        "id=\"{}\",name=\"containerd:4f1c2d3e4b5a\",pod_uid=\"{uid}\",container_id=\"containerd://{id}\",namespace=\"shop\",pod=\"web-0\"",
        container.id()
    );
    let s = parse(&r.body);
    let cpu = value(&s, "quietwatt_attributed_cpu_seconds_total", &want)
        .unwrap_or_else(|| panic!("no series with {want}:\n{}", r.body));
    assert!(cpu > 0.0, "{}", r.body);
    drop(server);
}

/// The fleet kit's Grafana dashboard (contrib/grafana/quietwatt.json), every
/// panel's query evaluated by a real Prometheus scraping `serve --attribute` on
/// the load-following emulator, with a pod's container busy: each returns
/// data, with the labels its legend names, in its unit's range (watts between
/// 0 and the emulator's most power; the CPU share of one CPU). Grafana's
/// `$__rate_interval` and `$__range` are given as 10 s and 1 min.
#[test]
fn every_panel_of_the_grafana_dashboard_returns_data_from_a_real_prometheus() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../contrib/grafana/quietwatt.json"
    ))
    .expect("the dashboard");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let panels: Vec<(String, String, String, String)> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .map(|p| {
            (
                p["title"].as_str().unwrap().to_string(),
                p["targets"][0]["expr"].as_str().unwrap().to_string(),
                p["targets"][0]["legendFormat"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                p["fieldConfig"]["defaults"]["unit"]
                    .as_str()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect();
    assert!(panels.len() >= 8, "{panels:?}");

    let m = common::mount_following();
    let pod = KubePod::new("shop", "cart-7", "9e8d7c6b-5a49-4382-8170-6f5e4d3c2b1a");
    let server = serve_attributing(m.root(), &["--pod-logs", pod.logs()]);
    // Busy a third of the time, as long as the test runs.
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        "while :; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 0.02; done",
    ]);
    pod.container.join_on_exec(&mut cmd);
    struct Killed(Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let busy = Killed(cmd.spawn().expect("spawn a busy shell"));
    let prom = Prometheus::start(server.addr);
    let max_watts = 10.0 + common::FOLLOW_W_PER_CPU * common::cpus() as f64;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut waiting: Vec<usize> = (0..panels.len()).collect();
    let mut results = vec![Vec::new(); panels.len()];
    while !waiting.is_empty() {
        assert!(
            Instant::now() < deadline,
            "no data after 120 s for {:?}\n{}",
            waiting.iter().map(|&i| &panels[i].0).collect::<Vec<_>>(),
            prom.log()
        );
        std::thread::sleep(Duration::from_millis(500));
        if TcpStream::connect_timeout(&prom.web, Duration::from_secs(1)).is_err() {
            continue;
        }
        waiting.retain(|&i| {
            let expr = panels[i]
                .1
                .replace("$__rate_interval", "10s")
                .replace("$__range", "1m");
            let got = prom_series(prom.web, &expr);
            // A rate needs two scrapes in its window: wait for some power.
            let ready =
                got.iter().any(|(_, v)| *v > 0.0) || (panels[i].3 != "watt" && !got.is_empty());
            if ready {
                results[i] = got;
            }
            !ready
        });
    }
    drop(busy);
    for (i, (title, _, legend, unit)) in panels.iter().enumerate() {
        // Some series has every label the legend names (`reason` or `domain` for
        // the up panel: one or the other). Not every one: a pod whose log
        // directory is not known here (another test's, running at once) sums
        // without a namespace and name.
        let named = |labels: &serde_json::Map<String, serde_json::Value>| {
            legend
                .split("{{")
                .skip(1)
                .filter_map(|l| l.split("}}").next())
                .all(|name| {
                    labels.contains_key(name)
                        || (matches!(name, "domain" | "reason")
                            && (labels.contains_key("domain") || labels.contains_key("reason")))
                })
        };
        assert!(
            results[i].iter().any(|(l, _)| named(l)),
            "{title}: no series has the labels of {legend}: {:?}",
            results[i]
        );
        for (_, v) in &results[i] {
            match unit.as_str() {
                // An idle cgroup among the top 10 draws 0 W.
                "watt" => assert!(*v >= 0.0 && *v <= max_watts * 1.2, "{title}: {v} W"),
                "joule" => assert!(*v > 0.0 && *v <= max_watts * 60.0 * 1.5, "{title}: {v} J"),
                "percentunit" => assert!(*v > 0.0 && *v <= common::cpus() as f64, "{title}: {v}"),
                _ => assert!(v.is_finite() && *v >= 0.0, "{title}: {v}"),
            }
        }
    }
    // The per-pod panel names the pod by its namespace and name.
    let per_pod = panels
        .iter()
        .position(|p| p.0 == "Package power per pod")
        .unwrap();
    assert!(
        results[per_pod]
            .iter()
            .any(
                |(l, _)| l.get("namespace").and_then(|v| v.as_str()) == Some("shop")
                    && l.get("pod").and_then(|v| v.as_str()) == Some("cart-7")
            ),
        "{:?}",
        results[per_pod]
    );
}
