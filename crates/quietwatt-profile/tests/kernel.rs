//! The sampler against the real kernel: a child process that spins for 300 ms of
//! its own CPU time, profiled with `inherit` on every CPU. Needs perf_event_open
//! on one's own child with kernel stacks (`perf_event_paranoid` <= 1, root or
//! CAP_PERFMON). The software cpu-clock event works in a VM without a PMU.

use quietwatt_profile::{
    EventRequest, Modules, Options, Profiler, SampledEvent, StackSample, StackTable, Symbolizer,
    Target,
};
use quietwatt_sys::clock::{monotonic_ns, process_cpu_ns};
use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

const CHILD_ENV: &str = "QUIETWATT_PROFILE_SPIN_CHILD";

/// Not a test: the child's body. The parent runs this test binary again with
/// only this function selected and the variable set; run by hand it does nothing.
/// It says it is ready (its threads exist), waits for a line on stdin, spins
/// until it has used 300 ms of CPU, and prints the monotonic times the spin
/// started and ended; then, given "more", spins 50 ms more.
#[test]
#[ignore = "the child process of the other tests"]
fn spin_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    // Libtest may have written the test's name on the line already.
    println!("\nqw-ready");
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    let start = monotonic_ns();
    spin(300_000_000);
    println!("\nqw-spin {start} {}", monotonic_ns());
    line.clear();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    if line.trim() == "more" {
        spin(50_000_000);
        println!("\nqw-more");
    }
}

/// Spins until this process has used `ns` more of CPU time.
fn spin(ns: u64) {
    let cpu0 = process_cpu_ns();
    let mut x = 1u64;
    while process_cpu_ns() < cpu0 + ns {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

/// The child, started: it waits for its go.
struct Spinner {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Lines<BufReader<ChildStdout>>,
}

impl Spinner {
    fn spawn() -> Spinner {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "spin_child", "--ignored", "--nocapture"])
            .env(CHILD_ENV, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the test binary runs again");
        let out = BufReader::new(child.stdout.take().unwrap()).lines();
        let stdin = child.stdin.take();
        Spinner { child, stdin, out }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The words after `tag` on the first line that has it.
    fn wait_for(&mut self, tag: &str) -> Vec<u64> {
        for line in &mut self.out {
            let line = line.unwrap();
            if let Some((_, rest)) = line.split_once(tag) {
                return rest
                    .split_whitespace()
                    .map(|v| v.parse().unwrap())
                    .collect();
            }
        }
        panic!("the child never printed {tag:?}");
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin.as_mut().unwrap(), "{line}").unwrap();
    }

    /// Drains `profiler` until the child has exited; returns its spin's window.
    fn run(
        &mut self,
        profiler: &mut Profiler,
        table: &mut StackTable,
        samples: &mut Vec<StackSample>,
    ) -> (u64, u64) {
        self.send("go");
        let w = self.wait_for("qw-spin ");
        // No more: it exits.
        self.stdin = None;
        while self.child.try_wait().unwrap().is_none() {
            profiler.drain(table, samples);
            std::thread::sleep(Duration::from_millis(10));
        }
        (w[0], w[1])
    }
}

fn open(options: Options) -> Profiler {
    match Profiler::open(options) {
        Ok(p) => p,
        Err(e) => panic!(
            "NEEDS perf_event_open on a child with kernel stacks (root, CAP_PERFMON or perf_event_paranoid <= 1): {e}"
        ),
    }
}

#[test]
fn a_spawned_command_is_sampled_with_user_stacks_on_the_monotonic_clock() {
    let before = monotonic_ns();
    let mut profiler = open(Options::new(Target::Spawned));
    // The choice is typed: cpu-clock where no PMU counts cycles (this VM).
    let choice = profiler.event().clone();
    assert!(!choice.reason.is_empty());
    if choice.event == SampledEvent::CpuClock {
        assert!(choice.reason.contains("no hardware PMU"), "{choice:?}");
    }
    let mut child = Spinner::spawn();
    let pid = child.pid();
    // Its own code mapped (after its exec).
    child.wait_for("qw-ready");
    let mut modules = Modules::new();
    assert!(
        modules.snapshot(pid) > 0,
        "the child's mappings are readable"
    );
    profiler.start().unwrap();
    let (mut table, mut samples) = (StackTable::new(), Vec::new());
    let window = child.run(&mut profiler, &mut table, &mut samples);
    profiler.stop().unwrap();
    profiler.drain(&mut table, &mut samples);
    let after = monotonic_ns();
    let counts = profiler.counts();

    assert!(!samples.is_empty(), "no sample of 300 ms of CPU");
    assert_eq!(counts.samples, samples.len() as u64);
    assert_eq!(counts.malformed, 0);
    // Lost is reported (0 with a ring this size), and only from LOST records.
    assert!(counts.lost_records > 0 || counts.lost == 0, "{counts:?}");
    let exe = std::env::current_exe().unwrap();
    let exe = exe.file_name().unwrap().to_string_lossy().into_owned();
    let (mut spinning, mut in_binary) = (0, 0);
    for s in &samples {
        assert_eq!(s.pid, pid, "only the spawned command is followed: {s:?}");
        assert!(
            (before..=after).contains(&s.time_ns),
            "{} is not CLOCK_MONOTONIC between {before} and {after}",
            s.time_ns
        );
        assert!(s.period > 0);
        let stack = table.get(s.stack).unwrap();
        assert!(!stack.is_empty(), "an empty call chain: {s:?}");
        // Out of its spin the child may be in the kernel on its way out, its
        // memory gone: the spin's samples must have user frames.
        if (window.0..=window.1).contains(&s.time_ns) {
            spinning += 1;
            assert!(
                !stack.user.is_empty(),
                "no user frame while spinning: {stack:?}"
            );
            if modules.frame(pid, stack.user[0], false).starts_with(&exe) {
                in_binary += 1;
            }
        }
    }
    assert!(spinning > 0, "no sample in the spin {window:?}");
    // Where it spun: the test binary's code (the clock read goes through the
    // vDSO, so not every leaf is in the binary).
    let some: Vec<String> = samples
        .iter()
        .take(5)
        .map(|s| {
            let st = table.get(s.stack).unwrap();
            st.root_first()
                .map(|(ip, k)| modules.frame(pid, ip, k))
                .collect::<Vec<_>>()
                .join(";")
        })
        .collect();
    assert!(
        in_binary > 0,
        "no leaf in {exe} among {spinning} samples, such as {some:#?}"
    );
}

#[test]
fn a_running_process_and_its_threads_are_sampled() {
    let mut child = Spinner::spawn();
    child.wait_for("qw-ready");
    let pid = child.pid();
    let mut profiler = open(Options::new(Target::Process { pid: pid as i32 }));
    profiler.start().unwrap();
    let (mut table, mut samples) = (StackTable::new(), Vec::new());
    let window = child.run(&mut profiler, &mut table, &mut samples);
    profiler.stop().unwrap();
    profiler.drain(&mut table, &mut samples);
    let spinning = samples
        .iter()
        .filter(|s| (window.0..=window.1).contains(&s.time_ns))
        .inspect(|s| assert_eq!(s.pid, pid))
        .count();
    // The spin runs on a thread that existed before the open (libtest's).
    assert!(
        spinning > 0,
        "no sample of the spin among {}",
        samples.len()
    );
}

#[test]
fn a_ring_too_small_for_the_samples_reports_what_it_lost() {
    let mut profiler = open(Options {
        ring_pages: 1,
        ..Options::new(Target::Spawned)
    });
    let (mut table, mut samples) = (StackTable::new(), Vec::new());
    let mut child = Spinner::spawn();
    child.send("go");
    // Not drained during the spin: one page holds a few dozen of its ~300
    // samples. The kernel reports what it lost at its next write, so the ring is
    // drained and the child spins a little more.
    child.wait_for("qw-spin ");
    profiler.drain(&mut table, &mut samples);
    child.send("more");
    child.wait_for("qw-more");
    child.stdin = None;
    child.child.wait().unwrap();
    profiler.stop().unwrap();
    profiler.drain(&mut table, &mut samples);
    let c = profiler.counts();
    assert!(
        c.lost_records > 0 && c.lost > 0,
        "{c:?} with {} samples kept",
        samples.len()
    );
    assert_eq!(c.samples, samples.len() as u64);
}

#[test]
fn asking_for_cpu_clock_is_reported_as_asked() {
    let options = Options {
        event: EventRequest::Only(SampledEvent::CpuClock),
        ..Options::new(Target::Spawned)
    };
    let profiler = open(options);
    assert_eq!(profiler.event().event, SampledEvent::CpuClock);
    assert_eq!(profiler.event().reason, "asked for");
    assert!(!profiler.cpus().is_empty());
}

#[test]
fn system_wide_sampling_sees_the_child_among_every_task() {
    let mut child = Spinner::spawn();
    child.wait_for("qw-ready");
    let pid = child.pid();
    let mut profiler = match Profiler::open(Options::new(Target::System)) {
        Ok(p) => p,
        Err(e) => panic!(
            "NEEDS system-wide perf_event_open (root, CAP_PERFMON or perf_event_paranoid <= 0): {e}"
        ),
    };
    profiler.start().unwrap();
    let (mut table, mut samples) = (StackTable::new(), Vec::new());
    let window = child.run(&mut profiler, &mut table, &mut samples);
    profiler.stop().unwrap();
    profiler.drain(&mut table, &mut samples);
    let cpus = profiler.cpus();
    assert!(samples.iter().all(|s| cpus.contains(&s.cpu)));
    let of_child = samples
        .iter()
        .filter(|s| s.pid == pid && (window.0..=window.1).contains(&s.time_ns))
        .count();
    assert!(
        of_child > 0,
        "the spin is not among {} samples",
        samples.len()
    );
}
