//! The reader service as a shared server installs it: `scripts/install-reader.sh`
//! into a scratch root, the shipped systemd units checked by `systemd-analyze
//! verify`, and the service unit's own command line started the way systemd
//! starts it (the socket made first and passed as LISTEN_FDS, by
//! `systemd-socket-activate`), as a throwaway user holding only the unit's two
//! capabilities, with the group `systemd-sysusers` created in place of the
//! machine's. A member of that group reads the emulator's energy through it at
//! the default policy; a user outside it is told how to be added.

use crate::common;
use quietwatt_emulator::EmulatorConfig;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `KEY=` line of a unit file (the last, as systemd reads it).
fn setting(unit: &str, key: &str) -> String {
    unit.lines()
        .rev()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in\n{unit}"))
        .to_string()
}

/// `scripts/install-reader.sh --root` into `root`: the files it placed.
fn install(root: &Path) {
    let o = Command::new(repo().join("scripts/install-reader.sh"))
        .arg("--binary")
        .arg(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("--root")
        .arg(root)
        .output()
        .expect("run scripts/install-reader.sh");
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o)
            .contains("not started; start it with: systemctl enable --now quietwatt-reader.socket"),
        "{}",
        common::stderr(&o)
    );
}

/// The gid `systemd-sysusers` gave `quietwatt-readers` in `root`'s group file.
fn readers_gid(root: &Path) -> u32 {
    let groups = std::fs::read_to_string(root.join("etc/group")).unwrap();
    groups
        .lines()
        .find_map(|l| l.strip_prefix("quietwatt-readers:x:"))
        .and_then(|rest| rest.split(':').next())
        .and_then(|g| g.parse().ok())
        .unwrap_or_else(|| panic!("no quietwatt-readers in\n{groups}"))
}

/// The service unit's `ExecStart`, its program replaced by `bin`, run as
/// systemd would: `socket` made and passed (LISTEN_FDS), a user that is not
/// root with the unit's ambient capabilities, `/etc/group` the scratch root's.
fn start(service: &str, bin: &Path, socket: &Path, emulator: &Path, group: &Path) -> Child {
    let exec = setting(service, "ExecStart");
    let mut words = exec.split_whitespace();
    assert_eq!(words.next(), Some("/usr/local/bin/quietwatt"), "{exec}");
    let args: Vec<&str> = words.collect();
    let caps = setting(service, "AmbientCapabilities")
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect::<Vec<_>>()
        .join(",");
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(
            // A private mount namespace: the machine's /etc/group is untouched.
            "mount --bind \"$1\" /etc/group && shift && exec \"$@\"",
        )
        .arg("sh")
        .arg(group)
        .arg("systemd-socket-activate")
        .arg("-l")
        .arg(socket)
        .arg(format!("--setenv=QUIETWATT_ROOT={}", emulator.display()))
        .args([
            "setpriv",
            "--reuid=61234",
            "--regid=61234",
            "--clear-groups",
        ])
        .arg(format!("--inh-caps=-all,{caps}"))
        .arg(format!("--ambient-caps=-all,{caps}"))
        .arg(format!("--bounding-set=-all,{caps}"))
        .arg("--")
        .arg(bin)
        .args(&args)
        .env_remove("QUIETWATT_ROOT")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd.spawn()
        .expect("unshare, systemd-socket-activate (systemd) and setpriv (util-linux)")
}

/// `quietwatt --root EMULATOR run ARGS` as uid 1234 in `groups`, finding the
/// service through QUIETWATT_SOCKET.
fn run_as(bin: &Path, groups: &str, socket: &Path, emulator: &Path, args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=1234", "--regid=1234"])
        .arg(groups)
        .arg(bin)
        .arg("--root")
        .arg(emulator)
        .args(args)
        .env("QUIETWATT_SOCKET", socket)
        .env_remove("QUIETWATT_ROOT")
        .current_dir("/")
        .output()
        .expect("setpriv runs quietwatt as another user")
}

#[test]
fn the_installed_units_serve_the_readers_group_through_socket_activation() {
    let m = common::mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = dir.path().join("root");
    install(&root);
    let units = root.join("etc/systemd/system");
    let bin = root.join("usr/local/bin/quietwatt");
    let service = std::fs::read_to_string(units.join("quietwatt-reader.service")).unwrap();
    let socket_unit = std::fs::read_to_string(units.join("quietwatt-reader.socket")).unwrap();

    // The units as systemd reads them: no unknown key, nothing refused (the
    // program's path made this machine's, since verify checks it exists).
    let check = dir.path().join("verify");
    std::fs::create_dir(&check).unwrap();
    std::fs::write(
        check.join("quietwatt-reader.service"),
        service.replace("/usr/local/bin/quietwatt", &bin.display().to_string()),
    )
    .unwrap();
    std::fs::write(check.join("quietwatt-reader.socket"), &socket_unit).unwrap();
    let v = Command::new("systemd-analyze")
        .arg("verify")
        .arg(check.join("quietwatt-reader.socket"))
        .arg(check.join("quietwatt-reader.service"))
        .output()
        .expect("systemd-analyze (systemd)");
    assert!(
        v.status.success() && common::stderr(&v).trim().is_empty(),
        "systemd-analyze verify: {}",
        common::stderr(&v)
    );
    // Where the socket unit listens is where clients look by default.
    assert_eq!(
        setting(&socket_unit, "ListenStream"),
        quietwatt::reader::DEFAULT_SOCKET
    );
    assert_eq!(setting(&socket_unit, "SocketMode"), "0666");

    let gid = readers_gid(&root);
    let socket = dir.path().join("reader.sock");
    let mut child = start(&service, &bin, &socket, m.root(), &root.join("etc/group"));
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for l in lines.by_ref().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut log = String::new();
    let wait_for = |log: &mut String, says: &str| {
        while !log.contains(says) {
            match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(l) => log.push_str(&(l + "\n")),
                Err(_) => panic!("no {says:?} from the service: {log}"),
            }
        }
    };
    // As systemd, the socket is there before the service: the first client's
    // connection starts it.
    wait_for(&mut log, "Listening on");
    // The unit's SocketMode (systemd-socket-activate has no such option).
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();

    // A member of quietwatt-readers, with nothing else: the default policy.
    let o = run_as(
        &bin,
        &format!("--groups={gid}"),
        &socket,
        m.root(),
        &["run", "--json", "--", "sleep", "1"],
    );
    assert!(o.status.success(), "{}\n{log}", common::stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["mechanism"], "socket", "{doc}");
    let notes = doc["notes"].to_string();
    assert!(
        notes.contains("as uid 1234") && notes.contains("every 100 ms, rounded down to 1000 µJ"),
        "{notes}"
    );
    // It took the socket systemd made, and read the emulator's counters with
    // the unit's two capabilities alone.
    wait_for(&mut log, "reader service on");
    assert!(
        log.contains(&format!(
            "reader service on {} (powercap counters",
            socket.display()
        )),
        "{log}"
    );
    let d = doc["duration_s"].as_f64().unwrap();
    let package = doc["domains"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["domain"] == "package")
        .expect("package");
    let (e, u) = (
        package["energy_j"].as_f64().unwrap(),
        package["uncertainty_j"].as_f64().unwrap(),
    );
    // The emulator's 20 W over the run (a quarter second more allowed for a
    // loaded machine's delays, as in reader.rs).
    assert!(
        (e - 20.0 * d).abs() <= u + 20.0 * 0.25,
        "{e} ± {u} J read, {} J drawn",
        20.0 * d
    );

    // Outside the group: refused, with the fix.
    let o = run_as(
        &bin,
        "--clear-groups",
        &socket,
        m.root(),
        &["run", "--require-energy", "--", "true"],
    );
    assert_eq!(o.status.code(), Some(69), "{}", common::stderr(&o));
    assert!(
        common::stderr(&o).contains("usermod -aG quietwatt-readers"),
        "{}",
        common::stderr(&o)
    );

    // Stopped as systemd stops it: cleanly, and the socket, systemd's, left
    // in place for the next start.
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}\n{log}");
    assert!(socket.exists(), "the service removed systemd's socket");
}
