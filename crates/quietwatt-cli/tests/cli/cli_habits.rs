//! The habits of perf stat, hyperfine and a shell: closed pipes, signals sent to
//! `run`, exit codes of commands that cannot run, options before `--`, `-o -` and
//! the format chosen by the file's extension, `record -- CMD`.

use crate::common::*;
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

/// Process ids whose parent is `pid`, with their names.
fn children(pid: u32) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": the name may hold spaces, not ')' at its end.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = stat[open + 1..close].to_string();
        let ppid = stat[close + 2..]
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok());
        if ppid == Some(pid) {
            out.push((p, comm));
        }
    }
    out
}

/// Waits (up to a minute: CI is loaded) for a process named `name` below `pid`.
fn wait_for_descendant(pid: u32, name: &str) -> u32 {
    let start = Instant::now();
    loop {
        let mut queue = vec![pid];
        while let Some(p) = queue.pop() {
            for (c, comm) in children(p) {
                if comm == name {
                    return c;
                }
                queue.push(c);
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no {name} under {pid}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `quietwatt run ARGS`, waits for its `sleep`, sends `sig` to quietwatt;
/// returns its output, the time from the signal to its end, and the sleep's pid.
fn signal_run(root: &Path, args: &[&str], sig: i32) -> (Output, Duration, u32) {
    let child = qw(root)
        .arg("run")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let sleep = wait_for_descendant(child.id(), "sleep");
    let sent = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    let o = child.wait_with_output().unwrap();
    (o, sent.elapsed(), sleep)
}

#[test]
fn sigterm_to_run_is_forwarded_and_run_exits_128_plus_15_with_the_energy_so_far() {
    let m = mount(EmulatorConfig::default());
    let (o, took, _) = signal_run(
        m.root(),
        &["-m", "powercap", "--", "sleep", "30"],
        libc::SIGTERM,
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(143), "{err}");
    assert!(
        took < Duration::from_secs(20),
        "took {took:?}: the command was not signalled"
    );
    assert!(err.contains("Energy of 'sleep 30'"), "{err}");
    assert!(err.contains("total"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn sighup_and_sigint_are_forwarded_too() {
    let m = mount(EmulatorConfig::default());
    for (sig, code) in [(libc::SIGHUP, 129), (libc::SIGINT, 130)] {
        let (o, took, _) = signal_run(m.root(), &["-m", "powercap", "--", "sleep", "30"], sig);
        assert_eq!(o.status.code(), Some(code), "signal {sig}: {}", stderr(&o));
        assert!(took < Duration::from_secs(20), "took {took:?}");
    }
}

#[test]
fn a_command_that_handles_the_signal_gives_its_own_exit_code() {
    let m = mount(EmulatorConfig::default());
    // The trap is set before the sleep starts, so it is in place once the sleep is seen.
    let script = "trap 'kill $p; exit 7' TERM; sleep 30 & p=$!; wait";
    let (o, took, _) = signal_run(
        m.root(),
        &["-m", "powercap", "--", "sh", "-c", script],
        libc::SIGTERM,
    );
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

#[test]
fn a_command_that_leads_its_own_process_group_gets_the_signal_group_wide() {
    // setsid makes the shell a group leader; the group gets SIGTERM, so its
    // background sleep ends with it instead of living on for 30 s.
    let m = mount(EmulatorConfig::default());
    let args = [
        "-m",
        "powercap",
        "--",
        "setsid",
        "sh",
        "-c",
        "sleep 30 & wait",
    ];
    let (o, took, sleep) = signal_run(m.root(), &args, libc::SIGTERM);
    assert_eq!(o.status.code(), Some(143), "{}", stderr(&o));
    assert!(took < Duration::from_secs(20), "took {took:?}");
    let start = Instant::now();
    // Gone, or a zombie waiting for init to reap it.
    while std::fs::read_to_string(format!("/proc/{sleep}/stat")).is_ok_and(|s| !s.contains(") Z "))
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the group's sleep lives on"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn options_before_the_double_dash_parse_and_unknown_ones_are_refused_before_anything_runs() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let touch = format!("touch '{}'", marker.display());
    // Known options after the subcommand, and the command's own options after it.
    let o = quietwatt(
        m.root(),
        &[
            "run", "-m", "powercap", "--json", "-f", "20", "--", "sh", "-c", &touch,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("--json parsed");
    assert_eq!(v["freq_hz"], 20.0);
    assert!(marker.exists());
    std::fs::remove_file(&marker).unwrap();
    // An unknown option is clap's usage error, not a command named '-z'.
    let o = quietwatt(m.root(), &["run", "-z", "3", "--", "sh", "-c", &touch]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unexpected argument '-z'"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("cannot run"), "{}", stderr(&o));
    assert!(!marker.exists());
    // The command's options stay the command's without `--` too.
    let o = quietwatt(m.root(), &["run", "-m", "powercap", "sh", "-c", "exit 4"]);
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
}

#[test]
fn a_missing_command_exits_127_and_one_that_cannot_execute_126() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let o = quietwatt(m.root(), &["run", "--", "no-such-command-quietwatt"]);
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
    assert!(stderr(&o).contains("command not found"), "{}", stderr(&o));
    let o = quietwatt(
        m.root(),
        &["run", "--", dir.path().join("absent").to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
    let text = dir.path().join("not-executable");
    std::fs::write(&text, "echo hi\n").unwrap();
    let o = quietwatt(m.root(), &["run", "--", text.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(126), "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
}

#[test]
fn without_rapl_run_still_runs_the_command_and_says_not_supported() {
    // An empty root: no powercap, no msr, no perf PMU.
    let dir = tempfile::tempdir().unwrap();
    let o = quietwatt(dir.path(), &["run", "--", "sh", "-c", "echo out; exit 5"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert_eq!(stdout(&o), "out\n");
    assert!(stderr(&o).contains("<not supported>"), "{}", stderr(&o));
    assert!(stderr(&o).contains("quietwatt doctor"), "{}", stderr(&o));
    let o = quietwatt(dir.path(), &["run", "--json", "--", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(stdout(&o).trim()).expect("JSON");
    assert_eq!(v["energy_supported"], false);
    assert_eq!(v["exit_code"], 0);
    // Unless energy is required, or a mechanism named.
    let o = quietwatt(dir.path(), &["run", "--require-energy", "--", "true"]);
    assert_eq!(o.status.code(), Some(69), "{}", stderr(&o));
    let o = quietwatt(dir.path(), &["run", "-m", "powercap", "--", "true"]);
    assert_eq!(o.status.code(), Some(69), "{}", stderr(&o));
}

#[test]
fn dash_o_dash_writes_the_recording_to_stdout_as_csv() {
    let m = mount(EmulatorConfig::default());
    let cwd = tempfile::tempdir().unwrap();
    let o = qw(m.root())
        .args(["record", "-m", "powercap", "--duration", "0.3", "-o", "-"])
        .current_dir(cwd.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let rows = csv_rows(&stdout(&o));
    assert!(rows.len() > 5, "{} rows", rows.len());
    assert!(!cwd.path().join("-").exists(), "a file named '-'");
    assert!(stderr(&o).contains("to stdout"), "{}", stderr(&o));
    // The reader may stop early, as `| head` does: a clean end, not an error.
    let script = format!(
        "'{}' --root '{}' record -m powercap -o - | head -c 1 >/dev/null; echo ${{PIPESTATUS[0]}}",
        env!("CARGO_BIN_EXE_quietwatt"),
        m.root().display()
    );
    let o = Command::new("bash").args(["-c", &script]).output().unwrap();
    assert_eq!(stdout(&o).trim(), "0", "{}", stderr(&o));
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    // Nothing else can share stdout with it.
    let o = quietwatt(
        m.root(),
        &["record", "--json", "--duration", "0.1", "-o", "-"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // A recorded command's own stdout goes to stderr: every stdout line is a row.
    let o = quietwatt(
        m.root(),
        &[
            "record",
            "-m",
            "powercap",
            "-o",
            "-",
            "--",
            "sh",
            "-c",
            "echo hello-from-cmd; sleep 0.3; echo bye-from-cmd",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        !out.contains("from-cmd"),
        "the command's output is in the rows: {out}"
    );
    assert!(csv_rows(&out).len() > 5, "{out}");
    let err = stderr(&o);
    assert!(
        err.contains("hello-from-cmd") && err.contains("bye-from-cmd"),
        "{err}"
    );
}

#[test]
fn the_extension_chooses_the_format_unless_format_says_otherwise() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("r.jsonl");
    let o = quietwatt(
        m.root(),
        &[
            "record",
            "-m",
            "powercap",
            "--duration",
            "0.3",
            "-o",
            jsonl.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect();
    assert!(lines[0].get("metadata").is_some(), "{}", lines[0]);
    assert!(lines.len() > 5);
    assert!(
        lines[1..].iter().all(|v| v["energy_j"].is_number()),
        "{text}"
    );
    // --format wins over the name.
    let named = dir.path().join("r.jsonl.bak");
    let o = quietwatt(
        m.root(),
        &[
            "record",
            "--format",
            "csv",
            "--duration",
            "0.2",
            "-o",
            named.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    csv_rows(&std::fs::read_to_string(&named).unwrap());
}

#[test]
fn unknown_extensions_and_parquet_on_stdout_are_refused_before_anything_is_written() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.txt");
    let o = quietwatt(
        m.root(),
        &["record", "--duration", "0.1", "-o", out.to_str().unwrap()],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("'.txt' is not a format"), "{err}");
    for format in ["csv", "jsonl", "parquet"] {
        assert!(err.contains(format), "{format} not named: {err}");
    }
    assert!(!err.contains("EMULATED"), "refused after mounting: {err}");
    assert!(!out.exists(), "r.txt was written");
    // Parquet's footer is written back into the file: a pipe cannot take it.
    let o = quietwatt(
        m.root(),
        &[
            "record",
            "--format",
            "parquet",
            "--duration",
            "0.1",
            "-o",
            "-",
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("-o FILE.parquet") && err.contains("--format csv"),
        "{err}"
    );
    assert!(!err.contains("EMULATED"), "refused after mounting: {err}");
    assert!(o.stdout.is_empty(), "{} bytes on stdout", o.stdout.len());
}

#[test]
fn record_with_a_command_records_while_it_runs_and_exits_with_its_code() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.csv");
    let o = quietwatt(
        m.root(),
        &[
            "record",
            "-m",
            "powercap",
            "-f",
            "100",
            "-o",
            out.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "sleep 0.3; exit 6",
        ],
    );
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    let rows = csv_rows(&std::fs::read_to_string(&out).unwrap());
    let first: u64 = rows[0][0].parse().unwrap();
    let last: u64 = rows[rows.len() - 1][0].parse().unwrap();
    // It ran 0.3 s at least: the series spans it.
    assert!(last - first >= 250_000_000, "{} ns", last - first);
    assert!(
        stderr(&o).contains("Energy of 'sh -c sleep 0.3; exit 6'"),
        "{}",
        stderr(&o)
    );
    // A missing command: 127, as `run`.
    let o = quietwatt(
        m.root(),
        &[
            "record",
            "-o",
            out.to_str().unwrap(),
            "--",
            "no-such-command-quietwatt",
        ],
    );
    assert_eq!(o.status.code(), Some(127), "{}", stderr(&o));
    // And a signal sent to quietwatt goes to the command.
    let child = qw(m.root())
        .args([
            "record",
            "-m",
            "powercap",
            "-o",
            out.to_str().unwrap(),
            "--",
            "sleep",
            "30",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_descendant(child.id(), "sleep");
    let sent = Instant::now();
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(143), "{}", stderr(&o));
    assert!(sent.elapsed() < Duration::from_secs(20));
    csv_rows(&std::fs::read_to_string(&out).unwrap());
}

/// `quietwatt ARGS --help`.
fn help(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn help_texts_name_no_internals_and_the_global_options_once() {
    let top = help(&[]);
    assert!(top.contains("--root") && top.contains("--emulate"), "{top}");
    let subcommands: &[&[&str]] = &[
        &["list"],
        &["doctor"],
        &["run"],
        &["record"],
        &["check"],
        &["bench"],
        &["bench", "sampler"],
        &["bench", "latency"],
        &["bench", "workload"],
        &["bench", "overhead"],
        &["bench", "wakeup"],
        &["model"],
        &["model", "pagefault"],
        &["model", "validate"],
        &["trace"],
        &["emulate"],
    ];
    for args in subcommands {
        let text = help(args);
        // One meaning per short flag.
        if let Some(i) = text.find("-m, --") {
            assert!(
                text[i..].starts_with("-m, --mechanism"),
                "{args:?}: -m is not --mechanism:\n{text}"
            );
        }
        if let Some(i) = text.find("-o, --") {
            assert!(
                text[i..].starts_with("-o, --output"),
                "{args:?}: -o is not --output:\n{text}"
            );
        }
        for leak in [
            "paper 00",
            "Paper 00",
            "quietwatt::",
            "the issue",
            "in this version",
        ] {
            assert!(
                !text.contains(leak),
                "{args:?} --help says {leak:?}:\n{text}"
            );
        }
        assert!(
            !text.contains("--root <"),
            "{args:?} repeats --root:\n{text}"
        );
        assert!(
            !text.contains("--emulate <"),
            "{args:?} repeats --emulate:\n{text}"
        );
    }
    for leak in ["paper 00", "quietwatt::"] {
        assert!(!top.contains(leak), "{top}");
    }
    // Each model family lists its own options only.
    let pf = help(&["model", "pagefault"]);
    assert!(
        pf.contains("--max-mib") && !pf.contains("--callee-cpu"),
        "{pf}"
    );
    let cs = help(&["model", "ctxswitch"]);
    assert!(cs.contains("--cpu") && !cs.contains("--max-mib"), "{cs}");
    assert!(help(&["bench", "overhead"]).contains("-o, --output <DIR>"));
    // Still accepted after the command's name.
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .args(["run", "--root"])
        .arg(dir.path())
        .args(["--", "true"])
        .env_remove("QUIETWATT_ROOT")
        .output()
        .unwrap();
    assert!(stderr(&o).contains("<not supported>"), "{}", stderr(&o));
}

/// The subcommands a help text lists under "Commands:" (without `help`).
fn listed_subcommands(text: &str) -> Vec<String> {
    let Some(start) = text.find("\nCommands:\n") else {
        return Vec::new();
    };
    text[start + "\nCommands:\n".len()..]
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_commands_help_ends_with_examples() {
    // Every command and subcommand, found from the help texts themselves so that a
    // new one is checked too.
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    let mut seen = 0;
    while let Some(args) = todo.pop() {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let text = help(&argv);
        let examples = text
            .find("\nExamples:\n")
            .unwrap_or_else(|| panic!("{args:?} --help has no Examples section:\n{text}"));
        // At least one line that runs quietwatt, after the heading.
        assert!(
            text[examples..]
                .lines()
                .skip(2)
                .any(|l| l.contains("quietwatt ")),
            "{args:?}: the Examples section shows no command:\n{text}"
        );
        for sub in listed_subcommands(&text) {
            let mut next = args.clone();
            next.push(sub);
            todo.push(next);
        }
        seen += 1;
    }
    // The top level, its commands, bench's and model's subcommands.
    assert!(seen >= 20, "only {seen} help texts found");
}

#[test]
fn run_dash_o_writes_the_report_to_the_file_and_leaves_the_commands_streams_alone() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let o = qw(m.root())
        .args(["run", "--json", "-o"])
        .arg(&json)
        .args(["--", "echo", "hi"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The command's output alone on stdout: a pipe reads it unmixed.
    assert_eq!(stdout(&o), "hi\n");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).expect("a JSON file");
    assert_eq!(v["schema"], "quietwatt.run/1", "{v}");
    assert_eq!(v["exit_code"], 0, "{v}");
    assert!(v["total_energy_j"].as_f64().unwrap() > 0.0, "{v}");

    // The table too, as perf stat -o: in the file, not on stderr.
    let table = dir.path().join("r.txt");
    let o = qw(m.root())
        .args(["run", "-o"])
        .arg(&table)
        .args(["--", "sh", "-c", "echo out; echo err >&2"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "out\n");
    assert!(!stderr(&o).contains("Energy of"), "{}", stderr(&o));
    let text = std::fs::read_to_string(&table).unwrap();
    assert!(
        text.contains("Energy of 'sh -c") && text.contains("total"),
        "{text}"
    );

    // Where the file cannot be written, nothing runs.
    let o = qw(m.root())
        .args([
            "run",
            "--json",
            "-o",
            "/nonexistent/dir/r.json",
            "--",
            "echo",
            "ran",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(74), "{}", stderr(&o));
    assert!(
        !stdout(&o).contains("ran"),
        "the command ran: {}",
        stdout(&o)
    );
}

/// Spawns quietwatt with `args` in `dir`, waits for a `sleep` among its
/// descendants (the run the signal will cut), sends SIGTERM.
fn signal_series(root: &Path, dir: &Path, args: &[&str]) -> Output {
    let child = qw(root)
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_descendant(child.id(), "sleep");
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    child.wait_with_output().unwrap()
}

#[test]
fn sigterm_during_run_repeat_or_compare_summarises_and_exports_the_whole_runs() {
    // Each run appends a line to `count`; from the 3rd run of `run -r` (the 5th of
    // `compare`, in its 3rd round) the command sleeps, and the signal comes then.
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let slow_from =
        |n: u32| format!("echo >> count; if [ $(wc -l < count) -ge {n} ]; then exec sleep 30; fi");
    let cmd = slow_from(3);
    let o = signal_series(
        m.root(),
        dir.path(),
        &[
            "run",
            "-m",
            "powercap",
            "-r",
            "10",
            "--export-json",
            "r.json",
            "--",
            "sh",
            "-c",
            &cmd,
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(143), "{err}");
    assert!(
        err.contains("summarising the 2 whole run(s) of 10"),
        "{err}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(v["runs"], 2, "{v}");
    assert_eq!(v["interrupted"]["exit_status"], 143, "{v}");
    assert_eq!(v["per_run"].as_array().unwrap().len(), 2, "{v}");

    std::fs::remove_file(dir.path().join("count")).unwrap();
    let cmd = slow_from(5);
    let o = signal_series(
        m.root(),
        dir.path(),
        &[
            "compare",
            "-m",
            "powercap",
            "--runs",
            "10",
            "--export-json",
            "c.json",
            &cmd,
            &cmd,
        ],
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(143), "{err}");
    assert!(
        err.contains("comparing the 2 whole round(s) of 10"),
        "{err}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("c.json")).unwrap()).unwrap();
    assert_eq!(v["runs"], 2, "{v}");
    for c in v["commands"].as_array().unwrap() {
        assert_eq!(c["per_run"].as_array().unwrap().len(), 2, "{v}");
    }
}

#[test]
fn an_unwritable_export_is_refused_before_any_run() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let cmd = format!("touch {}", marker.display());
    // A directory where the file should go.
    let here = dir.path().display().to_string();
    for args in [
        vec![
            "run",
            "-r",
            "2",
            "--export-json",
            "/nonexistent/r.json",
            "--",
            "sh",
            "-c",
            &cmd,
        ],
        vec!["compare", "--runs", "2", "--export-csv", &here, &cmd, &cmd],
    ] {
        let o = quietwatt(m.root(), &args);
        assert_eq!(o.status.code(), Some(74), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("before the runs start"),
            "{}",
            stderr(&o)
        );
        assert!(!marker.exists(), "{args:?} ran the command first");
    }
}
