//! The habits of perf stat, hyperfine and a shell: closed pipes, signals sent to
//! `run`, exit codes of commands that cannot run, options before `--`, `-o -` and
//! the format chosen by the file's extension, `record -- CMD`.

mod common;

use common::*;
use quietwatt_emulator::EmulatorConfig;
use std::os::fd::FromRawFd;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The write end of a pipe whose read end is already closed: every write to it
/// fails with EPIPE (and would raise SIGPIPE, which quietwatt ignores).
fn dead_pipe() -> Stdio {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills both descriptors; the read end is closed at once and the
    // write end handed to a File that owns it.
    unsafe {
        assert_eq!(libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC), 0, "pipe2");
        libc::close(fds[0]);
        Stdio::from(std::fs::File::from_raw_fd(fds[1]))
    }
}

fn qw(root: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_quietwatt"));
    c.arg("--root").arg(root).env_remove("QUIETWATT_ROOT");
    c
}

/// The data rows of a CSV recording, each checked to have every column.
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    assert!(text.ends_with('\n'), "the recording ends mid-row");
    let mut lines = text.lines().filter(|l| !l.starts_with('#'));
    let header = lines.next().expect("a header");
    assert!(header.starts_with("timestamp_ns,socket,domain,energy_j,power_w"));
    let width = header.split(',').count();
    lines
        .map(|l| {
            let f: Vec<String> = l.split(',').map(str::to_string).collect();
            assert_eq!(f.len(), width, "malformed row {l:?}");
            f[3].parse::<f64>()
                .unwrap_or_else(|e| panic!("energy_j of {l:?}: {e}"));
            f
        })
        .collect()
}

#[test]
fn a_closed_stderr_neither_kills_a_recording_nor_cuts_its_file() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.csv");
    let status = qw(m.root())
        .args([
            "record",
            "-m",
            "powercap",
            "--freq",
            "100",
            "--duration",
            "0.5",
            "-o",
        ])
        .arg(&out)
        .stdout(dead_pipe())
        .stderr(dead_pipe())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "a panic exits 101");
    let rows = csv_rows(&std::fs::read_to_string(&out).unwrap());
    assert!(rows.len() > 5, "{} rows", rows.len());
}

#[test]
fn a_closed_stderr_or_stdout_keeps_the_commands_exit_code() {
    let m = mount(EmulatorConfig::default());
    for json in [false, true] {
        let mut c = qw(m.root());
        c.args(["run", "-m", "powercap"]);
        if json {
            c.arg("--json");
        }
        let status = c
            .args(["--", "sh", "-c", "exit 3"])
            .stdout(dead_pipe())
            .stderr(dead_pipe())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(3), "--json {json}");
    }
}

#[test]
fn a_reader_that_goes_away_mid_recording_leaves_a_complete_file() {
    // The shell's pipeline of the issue: only the first line of stderr is read.
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.csv");
    let rc = dir.path().join("rc");
    let script = format!(
        "('{}' --root '{}' record -m powercap --duration 0.5 -o '{}'; echo $? >'{}') \
         2>&1 >/dev/null | head -1",
        env!("CARGO_BIN_EXE_quietwatt"),
        m.root().display(),
        out.display(),
        rc.display()
    );
    let o = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert!(!stdout(&o).contains("panicked"), "{}", stdout(&o));
    assert!(
        stdout(&o).starts_with("quietwatt: recording"),
        "{}",
        stdout(&o)
    );
    let code = std::fs::read_to_string(&rc).unwrap();
    assert_eq!(code.trim(), "0", "a panic exits 101");
    assert!(csv_rows(&std::fs::read_to_string(&out).unwrap()).len() > 5);
}
