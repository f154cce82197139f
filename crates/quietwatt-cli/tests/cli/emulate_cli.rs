//! `quietwatt emulate DIR`: serves until a signal or until someone else unmounts it,
//! and then always leaves: a stale emulator process is never left behind. Needs
//! root and FUSE; a missing feature fails, never skips.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn spawn(dir: &Path, truth: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("emulate")
        .arg(dir)
        .arg("--truth")
        .arg(truth)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn quietwatt emulate")
}

/// Waits until the emulator serves `dir` (its powercap tree appears).
fn wait_mounted(dir: &Path, child: &mut Child) {
    let t0 = Instant::now();
    while !dir.join("sys/class/powercap").exists() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("quietwatt emulate exited with {status} before mounting (FUSE needed, as root)");
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no mount after 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits up to `limit` for the child to exit.
fn exits_within(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn truth_domains(truth: &Path) -> usize {
    let text = std::fs::read_to_string(truth).expect("the ground truth file");
    let v: serde_json::Value = serde_json::from_str(&text).expect("ground truth JSON");
    v["domains"].as_array().expect("domains").len()
}

#[test]
fn sigterm_unmounts_and_writes_the_ground_truth() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, truth) = (tmp.path().join("emu"), tmp.path().join("truth.json"));
    let mut child = spawn(&dir, &truth);
    wait_mounted(&dir, &mut child);
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = exits_within(&mut child, Duration::from_secs(5));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    assert!(!dir.exists(), "the directory it created is left behind");
    assert!(truth_domains(&truth) >= 4);
}

#[test]
fn an_unmount_by_someone_else_stops_the_emulator() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, truth) = (tmp.path().join("emu"), tmp.path().join("truth.json"));
    let mut child = spawn(&dir, &truth);
    wait_mounted(&dir, &mut child);
    // SAFETY: umount2 with a valid NUL-terminated path; detaches our own mount.
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).unwrap();
    let rc = unsafe { libc::umount2(path.as_ptr(), 0) };
    assert_eq!(rc, 0, "umount: {}", std::io::Error::last_os_error());
    let status = exits_within(&mut child, Duration::from_secs(5));
    if status.is_none() {
        let _ = child.kill();
        panic!("quietwatt emulate still runs 5 s after its mount went away");
    }
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.unwrap().success(), "{err}");
    assert!(err.contains("unmounted by someone else"), "{err}");
    assert!(
        truth_domains(&truth) >= 4,
        "the ground truth is still written"
    );
}

/// Starts `quietwatt --emulate on record` and returns it with the emulator's mount
/// point, read from its banner.
fn emulated_record(freq: &str) -> (Child, String) {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .args([
            "--emulate",
            "on",
            "record",
            "-o",
            "/dev/null",
            "--freq",
            freq,
            "--duration",
            "30",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start quietwatt");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let at = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.split(" at ")
                .nth(1)
                .and_then(|r| r.split(':').next())
                .filter(|p| p.contains("quietwatt-emulator-"))
                .map(str::to_string)
        })
        .expect("the banner names the mount point");
    // Keep draining stderr so that quietwatt never blocks on it.
    std::thread::spawn(move || lines.for_each(drop));
    (child, at)
}

#[test]
fn sigterm_leaves_no_built_in_emulator_mounted() {
    // The built-in emulator lives in quietwatt's own mount namespace, which the
    // kernel drops with the process.
    let sig = libc::SIGTERM;
    let (mut child, at) = emulated_record("10");
    std::thread::sleep(Duration::from_millis(200));
    // While it runs, the mount is quietwatt's alone: in its mount table, never in
    // ours (as root; this suite runs as root for FUSE).
    let theirs = std::fs::read_to_string(format!("/proc/{}/mounts", child.id())).unwrap();
    assert!(
        theirs.contains(&at),
        "{at} is not mounted for quietwatt:\n{theirs}"
    );
    let ours = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        !ours.contains(&at),
        "{at} is visible outside quietwatt's namespace"
    );
    // SAFETY: kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    let status = child.wait().unwrap();
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    assert!(
        !mounts.contains(&at),
        "signal {sig} ({status}) left {at} mounted:\n{mounts}"
    );
    // Whatever is left at the path is a plain directory, not a dead mount.
    if let Err(e) = std::fs::metadata(&at) {
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{at}: {e}");
    }
    let _ = std::fs::remove_dir(&at);
}

/// Processes whose mount table holds `at`: quietwatt, its emulator's process, or
/// anything else left in their namespace.
fn holders(at: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| std::fs::read_to_string(e.path().join("mounts")).is_ok_and(|m| m.contains(at)))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_fatal_signal_mid_read_ends_quietwatt_and_its_emulator() {
    // A fatal signal (SIGKILL, or SIGUSR1 whose default is to terminate) landing
    // while the sampler waits in a read of the emulator's mount: served from a
    // thread of quietwatt, the FUSE server died with the signal and the read
    // waited for its answer forever (a zombie in D state, the mount held). Served
    // from a child process, the read is answered, quietwatt ends, and the child
    // sees it gone and unmounts. 1 kHz, so that reads take much of the time.
    for (round, sig) in [libc::SIGKILL, libc::SIGUSR1, libc::SIGKILL, libc::SIGUSR1]
        .into_iter()
        .enumerate()
    {
        let (mut child, at) = emulated_record("1000");
        std::thread::sleep(Duration::from_millis(150 + 40 * round as u64));
        // SAFETY: kill(2) on our own child.
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
        let Some(status) = exits_within(&mut child, Duration::from_secs(30)) else {
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id()));
            let _ = child.kill();
            panic!("signal {sig}: quietwatt did not end within 30 s: {stat:?}");
        };
        // Its emulator's process unmounts and leaves: no process keeps the mount.
        let t0 = Instant::now();
        while !holders(&at).is_empty() && t0.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            holders(&at),
            Vec::<String>::new(),
            "signal {sig} ({status}): the mount at {at} is still held"
        );
        if let Err(e) = std::fs::metadata(&at) {
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{at}: {e}");
        }
        let _ = std::fs::remove_dir(&at);
    }
}
