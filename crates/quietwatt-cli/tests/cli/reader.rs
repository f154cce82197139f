//! The local reader service end to end: `quietwatt serve --socket` as root
//! against the emulator (whose counters, as the kernel's since CVE-2020-8694,
//! only root may read), and `quietwatt run` as users without that right
//! (`setpriv` to `nobody`, to a member of a group the policy names, to a user
//! it does not name). Each gets the emulator's energy through the service,
//! coarsened as the policy says, or a refusal naming the fix.

use crate::common;
use quietwatt_emulator::EmulatorConfig;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The emulator's powers (its default configuration): package and DRAM, W.
const PACKAGE_W: f64 = 20.0;
const DRAM_W: f64 = 4.0;

/// The policy of these tests: `nobody` every 100 ms to 1 mJ; group 4242 the
/// package alone, every 200 ms to 10 mJ.
const POLICY: &str = "version = 1
[[allow]]
users = [65534]
interval_ms = 100
resolution_uj = 1000
[[allow]]
groups = [4242]
domains = [\"package\"]
interval_ms = 200
resolution_uj = 10000
";

/// A running `serve --socket` and the directory everyone may reach: the
/// binary (0755), the policy and the socket.
struct Service {
    child: Child,
    dir: tempfile::TempDir,
    http: String,
    log: Arc<Mutex<String>>,
}

impl Service {
    fn start(root: &Path) -> Service {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin = dir.path().join("quietwatt");
        std::fs::copy(env!("CARGO_BIN_EXE_quietwatt"), &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let policy = dir.path().join("policy.toml");
        std::fs::write(&policy, POLICY).unwrap();
        let mut child = Command::new(&bin)
            .arg("--root")
            .arg(root)
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "-m",
                "powercap",
                "--freq",
                "50",
            ])
            .arg("--socket")
            .arg(dir.path().join("reader.sock"))
            .arg("--policy")
            .arg(&policy)
            .env_remove("QUIETWATT_ROOT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start quietwatt serve --socket");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        let l = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("serving http://").nth(1) {
                    let _ = tx.send(rest.split('/').next().unwrap_or("").to_string());
                }
                let mut l = l.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let http = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| {
                let _ = child.kill();
                panic!("serve --socket did not start: {}", log.lock().unwrap())
            });
        let s = Service {
            child,
            dir,
            http,
            log,
        };
        assert!(
            s.log()
                .contains(&format!("reader service on {}", s.socket().display())),
            "{}",
            s.log()
        );
        s
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("reader.sock")
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// `quietwatt --root ROOT ARGS` as `ids` (setpriv's options), finding the
    /// service through QUIETWATT_SOCKET.
    fn run_as(&self, ids: &[&str], root: &Path, args: &[&str]) -> Output {
        Command::new("setpriv")
            .args(ids)
            .arg(self.dir.path().join("quietwatt"))
            .arg("--root")
            .arg(root)
            .args(args)
            .env("QUIETWATT_SOCKET", self.socket())
            .env_remove("QUIETWATT_ROOT")
            .current_dir(self.dir.path())
            .output()
            .expect("setpriv (util-linux) runs quietwatt as another user")
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const NOBODY: &[&str] = &["--reuid=65534", "--regid=65534", "--clear-groups"];

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", common::stdout(o), common::stderr(o)))
}

fn domain<'a>(doc: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    doc["domains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["domain"] == name)
}

/// Whether `j` joules is a whole number of `step_uj` µJ.
fn multiple_of(j: f64, step_uj: f64) -> bool {
    let steps = j * 1e6 / step_uj;
    (steps - steps.round()).abs() < 1e-6
}

#[test]
fn an_unprivileged_user_reads_the_emulators_energy_through_the_service() {
    let m = common::mount(EmulatorConfig::default());
    let s = Service::start(m.root());
    // Refused the counters themselves (root's only), nobody reads through the
    // service its environment names.
    let direct = s.run_as(
        NOBODY,
        m.root(),
        &[
            "run",
            "--require-energy",
            "--socket",
            "/nonexistent",
            "--",
            "true",
        ],
    );
    assert_eq!(
        direct.status.code(),
        Some(69),
        "{}",
        common::stderr(&direct)
    );
    let o = s.run_as(NOBODY, m.root(), &["run", "--json", "--", "sleep", "1"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let doc = json(&o);
    assert_eq!(doc["mechanism"], "socket", "{doc}");
    assert_eq!(doc["emulated"], true);
    let notes = doc["notes"].to_string();
    assert!(
        notes.contains(&format!(
            "read through the reader service at {}",
            s.socket().display()
        )) && notes.contains("powercap counters of quietwatt's emulator")
            && notes.contains("as uid 65534")
            && notes.contains("every 100 ms, rounded down to 1000 µJ"),
        "{notes}"
    );
    let err = common::stderr(&o);
    assert!(err.contains("read through the reader service"), "{err}");
    // The same, for programs: where, through what, and what was granted.
    assert_eq!(
        doc["via"],
        serde_json::json!({
            "socket": s.socket(),
            "mechanism": "powercap",
            "emulated": true,
            "uid": 65534,
            "interval_s": 0.1,
            "resolution_uj": 1000,
            "coarsened": false,
        }),
        "{doc}"
    );
    // Read here, as root: no "via".
    let here = common::quietwatt(m.root(), &["run", "--json", "--", "true"]);
    assert!(here.status.success(), "{}", common::stderr(&here));
    let here = json(&here);
    assert_eq!(here["mechanism"], "powercap");
    assert!(here.get("via").is_none(), "{here}");
    let d = doc["duration_s"].as_f64().unwrap();
    for (name, watts) in [("package", PACKAGE_W), ("dram", DRAM_W)] {
        let dom = domain(&doc, name).unwrap_or_else(|| panic!("no {name}: {doc}"));
        let e = dom["energy_j"].as_f64().unwrap();
        let u = dom["uncertainty_j"].as_f64().unwrap();
        // Coarsened to the policy's millijoule.
        assert!(multiple_of(e, 1000.0), "{name}: {e} J is not whole mJ");
        // The emulator's truth over the measured span: its constant power for
        // the client's duration. Each end's reading lags by up to the policy's
        // interval and the service's sampling period (the uncertainty holds
        // it); a service held up longer by a loaded machine adds to that, up
        // to a quarter second allowed here.
        let truth = watts * d;
        assert!(
            (e - truth).abs() <= u + watts * 0.25,
            "{name}: {e} ± {u} J read, {truth} J drawn over {d} s"
        );
        // The uncertainty is the coarsening's, not a blanket: under half a
        // second of the domain's power.
        assert!(u > 0.0 && u <= watts * 0.5, "{name}: ± {u} J");
    }
    // The HTTP side of the same serve is untouched.
    let mut http = std::net::TcpStream::connect(&s.http).unwrap();
    http.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    http.read_to_string(&mut body).unwrap();
    assert!(body.starts_with("HTTP/1.1 200"), "{body}");
    assert!(body.contains("quietwatt_energy_joules_total{"), "{body}");
}

#[test]
fn a_user_outside_the_policy_is_refused_with_the_fix() {
    let m = common::mount(EmulatorConfig::default());
    let s = Service::start(m.root());
    let stranger = &["--reuid=1234", "--regid=1234", "--clear-groups"][..];
    let o = s.run_as(
        stranger,
        m.root(),
        &["run", "--require-energy", "--", "true"],
    );
    assert_eq!(o.status.code(), Some(69), "{}", common::stderr(&o));
    let err = common::stderr(&o);
    let policy = std::fs::canonicalize(s.dir.path().join("policy.toml")).unwrap();
    for says in [
        "refused: user 1234 (groups 1234) may not read energy through this service",
        "ask the admin to add your user or one of your groups to the policy file",
        &policy.display().to_string(),
        "or run as root",
        // What failed locally is said too.
        "permission denied",
    ] {
        assert!(err.contains(says), "no {says:?} in {err}");
    }
    // Without --require-energy the command runs, its energy unsupported, the
    // refusal as the reason.
    let o = s.run_as(stranger, m.root(), &["run", "--", "sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(3));
    let err = common::stderr(&o);
    assert!(
        err.contains("no energy measured")
            && err.contains("may not read energy through this service"),
        "{err}"
    );
    assert!(s.log().contains("refused uid 1234"), "{}", s.log());
}

#[test]
fn a_group_member_gets_the_groups_grant_and_a_finer_request_is_coarsened() {
    let m = common::mount(EmulatorConfig::default());
    let s = Service::start(m.root());
    let member = &["--reuid=1234", "--regid=1234", "--groups=4242"][..];
    // 1 kHz asks for a reading every millisecond: the group's rule gives one
    // every 200 ms, to 10 mJ, of the package alone.
    let o = s.run_as(
        member,
        m.root(),
        &["run", "--json", "--freq", "1000", "--", "sleep", "1"],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let doc = json(&o);
    let notes = doc["notes"].to_string();
    assert!(
        notes.contains("every 200 ms, rounded down to 10000 µJ")
            && notes.contains("finer was asked for: the service's policy coarsened it"),
        "{notes}"
    );
    assert!(domain(&doc, "dram").is_none(), "{doc}");
    let p = domain(&doc, "package").expect("package");
    let (e, u) = (
        p["energy_j"].as_f64().unwrap(),
        p["uncertainty_j"].as_f64().unwrap(),
    );
    assert!(multiple_of(e, 10_000.0), "{e} J is not whole 10 mJ");
    let truth = PACKAGE_W * doc["duration_s"].as_f64().unwrap();
    assert!(
        (e - truth).abs() <= u + PACKAGE_W * 0.25,
        "{e} ± {u} J, {truth} J drawn"
    );
    // Asking for DRAM, which the rule does not grant, names what is.
    let o = s.run_as(
        member,
        m.root(),
        &["run", "--require-energy", "-d", "dram", "--", "true"],
    );
    assert_ne!(o.status.code(), Some(0));
    let err = common::stderr(&o);
    assert!(err.contains("dram") && err.contains("package"), "{err}");
}

#[test]
fn record_and_repeated_runs_read_through_the_service_as_well() {
    let m = common::mount(EmulatorConfig::default());
    let s = Service::start(m.root());
    let out = s.dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).unwrap();
    let csv = out.join("r.csv");
    let o = s.run_as(
        NOBODY,
        m.root(),
        &[
            "record",
            "-o",
            csv.to_str().unwrap(),
            "--duration",
            "1",
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let doc = json(&o);
    assert_eq!(doc["mechanism"], "socket", "{doc}");
    assert_eq!(doc["via"]["socket"], s.socket().to_str().unwrap(), "{doc}");
    assert_eq!(doc["via"]["interval_s"], 0.1, "{doc}");
    let p = domain(&doc, "package").expect("package");
    let (e, u) = (
        p["energy_j"].as_f64().unwrap(),
        p["uncertainty_j"].as_f64().unwrap(),
    );
    let truth = PACKAGE_W * doc["duration_s"].as_f64().unwrap();
    assert!(
        (e - truth).abs() <= u + PACKAGE_W * 0.25,
        "{e} ± {u} J, {truth} J drawn"
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.contains("# mechanism: socket\n"), "{text}");
    assert!(
        text.contains(&format!("origin={}", s.socket().display())),
        "{text}"
    );
    // Each run of a series opens the service anew.
    let o = s.run_as(
        NOBODY,
        m.root(),
        &["run", "-r", "2", "--json", "--", "true"],
    );
    assert!(o.status.success(), "{}", common::stderr(&o));
    let doc = json(&o);
    assert_eq!(doc["energy_j"]["n"], 2, "{doc}");
    assert!(
        common::stderr(&o).contains("read through the reader service"),
        "{}",
        common::stderr(&o)
    );
}

/// The embedding API through the service by path (`SessionConfig::socket`):
/// `measure` around a block, and a session with a rate whose snapshots only
/// grow; the mechanism says `socket` and the note names it. (Run as root here,
/// so never coarsened: the refused-locally fallback is the tests above, as
/// other users.)
#[test]
fn a_session_and_measure_read_through_the_service_by_path() {
    let m = common::mount(EmulatorConfig::default());
    let s = Service::start(m.root());
    let config = || {
        quietwatt::SessionConfig::default()
            .root(quietwatt::SysRoot::new("/nonexistent"))
            .socket(s.socket())
    };
    let ((), r) = quietwatt::measure(config(), || std::thread::sleep(Duration::from_millis(500)))
        .expect("measure through the socket");
    assert_eq!(r.mechanism, quietwatt::Mechanism::Socket);
    assert_eq!(r.energy.mechanism, "socket");
    let p = r
        .energy
        .domains
        .iter()
        .find(|d| d.domain == "package")
        .expect("package");
    let truth = PACKAGE_W * r.energy.duration_s;
    assert!(
        (p.energy_j.0 - truth).abs() <= p.uncertainty_j.0 + PACKAGE_W * 0.25,
        "{} ± {} J, {truth} J drawn",
        p.energy_j.0,
        p.uncertainty_j.0
    );
    let session = quietwatt::Session::start(config().rate(quietwatt::Hertz::new(50.0).unwrap()))
        .expect("a session with a rate");
    let mut last = 0.0;
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(150));
        let e = session.snapshot().unwrap().energy.domains[0].energy_j.0;
        assert!(e >= last, "{e} J after {last} J");
        last = e;
    }
    let r = session.stop().unwrap();
    assert!(r.energy.domains[0].energy_j.0 >= last && last > 0.0);
    // A socket where there is none: the error names the fix.
    let e = quietwatt::Session::start(
        quietwatt::SessionConfig::default().socket(PathBuf::from("/nonexistent/reader.sock")),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("no reader service at /nonexistent/reader.sock")
            && e.contains("quietwatt serve --socket"),
        "{e}"
    );
}

/// `serve --socket` on a machine where no counter can be read keeps serving
/// and refuses clients with the reason; the flags' mistakes are usage errors
/// naming the fix.
#[test]
fn a_service_without_counters_says_why_and_bad_flags_name_the_fix() {
    let empty = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("r.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("--root")
        .arg(empty.path())
        .args(["serve", "--listen", "none", "--socket"])
        .arg(&sock)
        .env_remove("QUIETWATT_ROOT")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while !sock.exists() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .args(["run", "--require-energy", "--socket"])
        .arg(&sock)
        .args(["--", "true"])
        .output()
        .unwrap();
    // SAFETY: kill with the pid of a child not yet reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(status.success(), "{log}");
    assert!(
        !sock.exists(),
        "the socket is removed when the service stops"
    );
    assert_eq!(o.status.code(), Some(69), "{}", common::stderr(&o));
    let err = common::stderr(&o);
    assert!(
        err.contains("the service reads no energy counter now") && err.contains("quietwatt doctor"),
        "{err}"
    );
    for (args, says) in [
        (
            &["serve", "--listen", "none"][..],
            "--listen none serves nothing without --socket",
        ),
        (&["serve", "--policy", "p.toml"][..], "--socket"),
    ] {
        let o = common::quietwatt(empty.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", common::stderr(&o));
        assert!(
            common::stderr(&o).contains(says),
            "{args:?}: {}",
            common::stderr(&o)
        );
    }
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[allow]]\nusers = [\"no-such-user-here\"]\n").unwrap();
    let m = common::mount(EmulatorConfig::default());
    let o = common::quietwatt(
        m.root(),
        &[
            "serve",
            "--listen",
            "none",
            "--socket",
            dir.path().join("s.sock").to_str().unwrap(),
            "--policy",
            bad.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", common::stderr(&o));
    let err = common::stderr(&o);
    assert!(
        err.contains("no user named 'no-such-user-here'") && err.contains("bad.toml"),
        "{err}"
    );
}
