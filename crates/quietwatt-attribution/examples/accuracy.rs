//! Attribution against the procfs CPU-share method (what Scaphandre and Kepler do:
//! every window, each process's share of the host's busy CPU ticks in
//! `/proc/PID/stat` and `/proc/stat` times the window's energy) over 1 s and 5 s
//! windows, on the same emulated truth: the emulator's package draws 10 W + 5 W per
//! busy CPU of this machine, so a process's true dynamic energy is 5 W × its CPU
//! time (`/proc/PID/task/*/schedstat`, ns).
//!
//! Two processes run 10 s, pinned to CPU 0 (busy 8 ms of every 10) and to the last
//! CPU (3 ms of every 10), then sleep until the end: both are alive at every
//! window's read, so the procfs method loses nothing to an exit here (a real
//! exporter loses the CPU time of a process's last window when it exits). Both
//! methods set the same 10 W idle part apart and split the rest.
//!
//! With `exit`, the processes run 9.5 s and exit, as processes do: procfs then
//! loses what each ran since its last window's read (its /proc entry is gone once
//! it is reaped, which a reaper thread does at once, after reading its final
//! `schedstat`, the truth).
//!
//! Run as root: `cargo run -p quietwatt-attribution --example accuracy [RUNS] [exit]`.

use quietwatt::record::{record, EngineConfig};
use quietwatt::sink::{Metadata, Sink};
use quietwatt::transform::{NoRows, Transformed};
use quietwatt::{Hertz, Mechanism, Meter, Rate, Selection, SysRoot};
use quietwatt_attribution::{cpu_sockets, Attribution, By, Entity, IdlePower, Tracker};
use quietwatt_emulator::{Emulator, EmulatorConfig, LoadFollowing};
use std::num::NonZero;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

const IDLE_W: f64 = 10.0;
const PER_CPU_W: f64 = 5.0;
const RUN_S: u64 = 10;

fn spin(cpu: usize, busy_ms: u32, exit: bool) -> Child {
    // busy_ms of every 10 ms for RUN_S s (9.5 s with `exit`), then sleep until
    // killed, or exit.
    let (run, then) = if exit {
        (RUN_S as f64 - 0.5, "")
    } else {
        (RUN_S as f64, "time.sleep(1e6)\n")
    };
    let script = format!(
        "import time\nend=time.time()+{run}\nwhile time.time()<end:\n t=time.time()\n while time.time()-t<{b}: pass\n time.sleep({s})\n{then}",
        b = f64::from(busy_ms) / 1000.0,
        s = f64::from(10 - busy_ms) / 1000.0
    );
    let mut cmd = Command::new("python3");
    cmd.args(["-c", &script]);
    // SAFETY: only sched_setaffinity between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().expect("python3")
}

fn schedstat_ns(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
                .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

/// utime + stime, clock ticks.
fn proc_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = s.rsplit_once(')').map_or("", |(_, a)| a);
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // Fields 14 and 15 of stat; `after` starts at field 3.
    f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)
}

/// Busy ticks of all CPUs: everything but idle and iowait.
fn host_busy_ticks() -> u64 {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = s.lines().next().unwrap_or("");
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    [0, 1, 2, 5, 6, 7]
        .iter()
        .map(|&i| v.get(i).copied().unwrap_or(0))
        .sum()
}

fn energy_j(emu: &Emulator) -> f64 {
    let p = emu.dir().join("sys/class/powercap/intel-rapl:0/energy_uj");
    std::fs::read_to_string(p)
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0) as f64
        / 1e6
}

/// One read at a window boundary.
struct Read {
    t: Instant,
    e: f64,
    host: u64,
    procs: [u64; 2],
}

/// Waits until `pid` has exited (a zombie), reads its final CPU time (ns,
/// `/proc/PID/schedstat`), and reaps it, as a parent does at once: from then on
/// /proc has no entry for it, which is what a procfs exporter meets.
fn reap_when_done(pid: u32) -> u64 {
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, a)| a.split_whitespace().next());
        if state == Some("Z") || stat.is_empty() {
            let ns = std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok())
                .unwrap_or(0);
            let mut status = 0;
            // SAFETY: waits for our own child; status is a local.
            unsafe { libc::waitpid(pid as i32, &mut status, 0) };
            return ns;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn once(exit: bool) -> [[f64; 4]; 2] {
    let dir = tempfile::tempdir().unwrap();
    let cpus = std::thread::available_parallelism().map_or(1, NonZero::get);
    let mut config = EmulatorConfig::default().with_cpus_per_socket(cpus as u32);
    config.power.follow = Some(LoadFollowing::new(IDLE_W, PER_CPU_W));
    (config.power.default.core, config.power.default.uncore) = (4.0, 1.0);
    config.domains.dram = false;
    let emu = Emulator::mount(dir.path(), config).expect("mount the emulator (root, /dev/fuse)");
    let root = SysRoot::new(emu.dir());
    let src = quietwatt::source::open(&root, Some(Mechanism::Powercap), &Selection::all()).unwrap();
    let mut meter = Meter::new(src);
    let tracker = Tracker::open().expect("load the accounting program (root, BTF)");
    // The split alone: its totals are the figures, and no row is written.
    let mut sink = Transformed::new(
        Attribution::new(
            By::Process,
            IdlePower::Configured(IDLE_W),
            cpu_sockets(&root).unwrap(),
            Box::new(tracker),
        ),
        NoRows,
    );
    let mut ec = EngineConfig::new(Rate::Fixed(Hertz::new(100.0).unwrap()));
    ec.duration = Some(Duration::from_secs(RUN_S + 2));
    let meta = Metadata::new("powercap", &ec.rate, &root);
    let (pids, truth_ns, reads) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(500));
            let mut kids = [spin(0, 8, exit), spin(cpus - 1, 3, exit)];
            let pids = [kids[0].id(), kids[1].id()];
            let reapers = exit.then(|| pids.map(|p| std::thread::spawn(move || reap_when_done(p))));
            let mut reads = Vec::new();
            let start = Instant::now();
            for w in 0..=RUN_S + 1 {
                let due = start + Duration::from_secs(w);
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
                reads.push(Read {
                    t: Instant::now(),
                    e: energy_j(&emu),
                    host: host_busy_ticks(),
                    procs: [proc_ticks(pids[0]), proc_ticks(pids[1])],
                });
            }
            let truth = if let Some([a, b]) = reapers {
                [a.join().unwrap_or(0), b.join().unwrap_or(0)]
            } else {
                let t = [schedstat_ns(pids[0]), schedstat_ns(pids[1])];
                for k in &mut kids {
                    let _ = k.kill();
                    let _ = k.wait();
                }
                t
            };
            (pids, truth, reads)
        });
        let stop = AtomicBool::new(false);
        record(
            &mut meter,
            &mut sink as &mut dyn Sink,
            std::path::Path::new("mem"),
            &meta,
            &ec,
            &stop,
        )
        .expect("the recording");
        h.join().unwrap()
    });
    let t = sink.transform().totals();
    let mut out = [[0.0; 4]; 2];
    for i in 0..2 {
        let truth = PER_CPU_W * truth_ns[i] as f64 / 1e9;
        let ours = t
            .entities
            .get(&Entity::Process(pids[i]))
            .map_or(0.0, |e| e.dynamic_uj as f64 / 1e6);
        let procfs = |step: usize| -> f64 {
            reads
                .iter()
                .step_by(step)
                .collect::<Vec<_>>()
                .windows(2)
                .map(|w| {
                    let dt = w[1].t.duration_since(w[0].t).as_secs_f64();
                    let dynamic = (w[1].e - w[0].e - IDLE_W * dt).max(0.0);
                    let host = w[1].host.saturating_sub(w[0].host);
                    let mine = w[1].procs[i].saturating_sub(w[0].procs[i]);
                    if host == 0 {
                        0.0
                    } else {
                        dynamic * mine as f64 / host as f64
                    }
                })
                .sum()
        };
        out[i] = [truth, ours, procfs(1), procfs(5)];
    }
    out
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    let exit = std::env::args().nth(2).as_deref() == Some("exit");
    println!("run | process | truth (J) | attribution (J) | err % | procfs 1 s (J) | err % | procfs 5 s (J) | err %");
    println!("---|---|---:|---:|---:|---:|---:|---:|---:");
    let mut abs = [[0.0f64; 3]; 2];
    for r in 0..runs {
        let res = once(exit);
        for (i, name) in ["A 80 % CPU0", "B 30 % last CPU"].iter().enumerate() {
            let [truth, ours, p1, p5] = res[i];
            let e = |x: f64| 100.0 * (x - truth) / truth;
            println!(
                "{r} | {name} | {truth:.3} | {ours:.3} | {:+.2} | {p1:.3} | {:+.2} | {p5:.3} | {:+.2}",
                e(ours),
                e(p1),
                e(p5)
            );
            for (k, x) in [ours, p1, p5].iter().enumerate() {
                abs[i][k] += e(*x).abs() / runs as f64;
            }
        }
    }
    for (i, name) in ["A", "B"].iter().enumerate() {
        println!(
            "mean |error| {name}: attribution {:.2} %, procfs 1 s {:.2} %, procfs 5 s {:.2} %",
            abs[i][0], abs[i][1], abs[i][2]
        );
    }
}
