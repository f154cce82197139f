//! `quietwatt top` in a real terminal (tmux): it lists a busy process by watts,
//! switches to cgroups on `c`, and quits on `q` with exit code 0. Needs root (FUSE,
//! BPF), a kernel with BTF and tmux; fails loudly without them.

use crate::common;
use std::num::NonZero;

use quietwatt_emulator::{EmulatorConfig, LoadFollowing};
use std::process::Command;
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> String {
    let o = Command::new("tmux")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("\n\n*** this test drives quietwatt top in tmux, which did not run: {e}\n\n")
        });
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Captures the pane until `want` is on it (or 10 s pass), and returns it.
fn wait_for(session: &str, want: &str) -> String {
    let start = Instant::now();
    loop {
        let pane = tmux(&["capture-pane", "-p", "-t", session]);
        if pane.contains(want) || start.elapsed() > Duration::from_secs(10) {
            return pane;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

struct Session(String);

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["kill-session", "-t", &self.0])
            .status();
    }
}

#[test]
fn top_lists_a_busy_process_switches_to_cgroups_and_quits() {
    let cpus = std::thread::available_parallelism().map_or(1, NonZero::get) as u32;
    let mut config = EmulatorConfig::default().with_cpus_per_socket(cpus);
    config.power.follow = Some(LoadFollowing::new(10.0, 5.0));
    (config.power.default.core, config.power.default.uncore) = (4.0, 1.0);
    let m = common::mount(config);
    let mut busy = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .unwrap();
    let session = Session(format!("qwtop{}", std::process::id()));
    let cmd = format!(
        "{} --root {} top -d 0.3; echo QW_EXIT=$?; sleep 30",
        env!("CARGO_BIN_EXE_quietwatt"),
        m.root().display()
    );
    tmux(&[
        "new-session",
        "-d",
        "-s",
        &session.0,
        "-x",
        "150",
        "-y",
        "40",
        &cmd,
    ]);

    let pid = busy.id().to_string();
    let pane = wait_for(&session.0, &format!(" {pid} "));
    assert!(
        pane.contains("quietwatt top - package"),
        "no header:\n{pane}"
    );
    assert!(pane.contains("by process"), "not by process:\n{pane}");
    let row = pane
        .lines()
        .find(|l| l.split_whitespace().next() == Some(pid.as_str()))
        .unwrap_or_else(|| panic!("the busy process {pid} is not listed:\n{pane}"));
    // PID, name, watts, dynamic watts, CPU %: a spinning shell draws power.
    let f: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(f[1], "sh", "{row}");
    let watts: f64 = f[2].parse().unwrap();
    assert!(
        watts > 0.5,
        "a busy loop drawing {watts} W at 5 W per busy CPU:\n{pane}"
    );
    // No idle power given: the dynamic part is not claimed, and the header says why.
    assert_eq!(f[3], "-", "{row}");
    assert!(pane.contains("idle power not set apart"), "{pane}");

    tmux(&["send-keys", "-t", &session.0, "c"]);
    let pane = wait_for(&session.0, "by cgroup");
    assert!(pane.contains("CGROUP"), "no cgroup view after 'c':\n{pane}");

    tmux(&["send-keys", "-t", &session.0, "q"]);
    let pane = wait_for(&session.0, "QW_EXIT=");
    assert!(
        pane.contains("QW_EXIT=0"),
        "top did not quit cleanly on 'q':\n{pane}"
    );
    busy.kill().unwrap();
    busy.wait().unwrap();
}

/// Without a terminal (a pipe), `top -n 2` prints two screens and exits 0: no key
/// is read, nothing waits for one.
#[test]
fn top_without_a_terminal_stops_after_its_iterations() {
    let cpus = std::thread::available_parallelism().map_or(1, NonZero::get) as u32;
    let mut config = EmulatorConfig::default().with_cpus_per_socket(cpus);
    config.power.follow = Some(LoadFollowing::new(10.0, 5.0));
    (config.power.default.core, config.power.default.uncore) = (4.0, 1.0);
    let m = common::mount(config);
    let o = common::quietwatt(
        m.root(),
        &[
            "top",
            "-d",
            "0.2",
            "-n",
            "2",
            "--by",
            "cgroup",
            "--idle-watts",
            "fit",
        ],
    );
    let out = common::stdout(&o);
    assert!(
        o.status.success(),
        "top -n 2 failed (root and a kernel with BTF needed):\n{}",
        common::stderr(&o)
    );
    assert_eq!(out.matches("quietwatt top - package").count(), 2, "{out}");
    assert!(
        out.contains("by cgroup") && out.contains("idle power fitted"),
        "{out}"
    );
    // Batch mode, as top -b: plain lines for a file, no escape codes, no keys.
    assert!(!out.contains('\x1b'), "escape codes in a pipe: {out:?}");
    assert!(!out.contains('\r') && !out.contains("q: quit"), "{out:?}");
}

/// `top -b -n 1 > file`: the file holds one plain screen.
#[test]
fn top_batch_mode_writes_plain_text_to_a_file() {
    let m = common::mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("top.txt");
    let status = Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("--root")
        .arg(m.root())
        .args(["top", "-b", "-d", "0.2", "-n", "1"])
        .env_remove("QUIETWATT_ROOT")
        .stdout(std::fs::File::create(&path).unwrap())
        .status()
        .unwrap();
    assert!(status.success(), "top -b -n 1 failed (root and BTF needed)");
    let bytes = std::fs::read(&path).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(!bytes.contains(&0x1b), "an ESC byte in {text:?}");
    assert_eq!(text.matches("quietwatt top - package").count(), 1, "{text}");
}
