//! The emulator served by a child process ([`ChildEmulator`]): reads like the
//! in-process one, unmounts when dropped, and a reader killed in the middle of a
//! read ends, and its emulator with it. Needs root and /dev/fuse (fails without).

use quietwatt_emulator::{ChildEmulator, EmulatorConfig};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PKG: &str = "sys/class/powercap/intel-rapl:0/energy_uj";

fn mount(dir: &Path, config: EmulatorConfig) -> ChildEmulator {
    ChildEmulator::mount(dir, config).unwrap_or_else(|e| {
        panic!("\n*** mounting needs root and /dev/fuse; the child emulator failed: {e}\n")
    })
}

fn mounted(at: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(at.to_str().unwrap()))
}

#[test]
fn it_serves_the_counters_and_unmounts_when_dropped_in_milliseconds() {
    let dir = tempfile::tempdir().unwrap();
    let emu = mount(dir.path(), EmulatorConfig::default());
    let at = emu.dir().to_path_buf();
    assert!(mounted(&at), "{} is not mounted", at.display());
    assert_ne!(emu.pid(), std::process::id());
    let read = || -> u64 {
        std::fs::read_to_string(at.join(PKG))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let a = read();
    std::thread::sleep(Duration::from_millis(20));
    assert!(read() > a, "the package counter does not advance");
    let pid = emu.pid();
    emu.unmount().unwrap();
    assert!(!mounted(&at), "{} is still mounted", at.display());
    // The child is reaped: no zombie is left.
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "the emulator's process {pid} is still there"
    );
}

#[test]
fn a_bad_mount_point_is_the_childs_error_named() {
    let err = ChildEmulator::mount("/nonexistent/quietwatt", EmulatorConfig::default())
        .expect_err("no such directory");
    assert!(err.to_string().contains("/nonexistent/quietwatt"), "{err}");
}

/// Set in the re-executed test binary: it then plays the reader that is killed.
const READER: &str = "QUIETWATT_TEST_CHILD_EMULATOR_READER";

/// The reader: mounts a child emulator whose reads take 300 ms, says so on stdout,
/// and reads the package counter until it is killed.
fn be_the_reader(dir: &str) -> ! {
    let config = EmulatorConfig {
        read_latency: Duration::from_millis(300),
        ..EmulatorConfig::default()
    };
    let emu = mount(Path::new(dir), config);
    println!("mounted {}", emu.dir().display());
    let path = emu.dir().join(PKG);
    loop {
        let _ = std::fs::read_to_string(&path);
    }
}

#[test]
fn a_reader_killed_mid_read_ends_and_its_emulator_unmounts() {
    if let Ok(dir) = std::env::var(READER) {
        be_the_reader(&dir);
    }
    // Served by a thread of the reader, a SIGKILL landing while a read waits for
    // its answer left the reader a zombie for good: the FUSE server died with it,
    // and the read waits uninterruptibly once its request was handed over.
    let dir = tempfile::tempdir().unwrap();
    for sig in [libc::SIGKILL, libc::SIGUSR1] {
        let mut reader = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_reader_killed_mid_read_ends_and_its_emulator_unmounts",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(READER, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(reader.stdout.take().unwrap());
        let at: PathBuf = out
            .lines()
            .map_while(Result::ok)
            // The harness prints the test's name on the same line.
            .find_map(|l| l.split_once("mounted ").map(|(_, p)| PathBuf::from(p)))
            .expect("the reader mounts");
        // Reads take 300 ms: one is in flight.
        std::thread::sleep(Duration::from_millis(150));
        // SAFETY: kill(2) on our own child.
        assert_eq!(unsafe { libc::kill(reader.id() as i32, sig) }, 0);
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = reader.try_wait().unwrap() {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(20) {
                let stat = std::fs::read_to_string(format!("/proc/{}/stat", reader.id()));
                panic!("signal {sig}: the reader did not end within 20 s: {stat:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let t0 = Instant::now();
        while mounted(&at) && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !mounted(&at),
            "signal {sig} ({status}): {} is still mounted",
            at.display()
        );
    }
}
