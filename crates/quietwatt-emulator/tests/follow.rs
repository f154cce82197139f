//! The load-following package power against this machine's real CPU time: a busy
//! loop pinned to one CPU must show in the emulated package energy as
//! `per_cpu_w ×` its CPU time, on top of `idle_w ×` the elapsed time. Needs root and
//! /dev/fuse (it mounts the emulator); it fails loudly without them. The truth comes
//! from measured CPU times (`/proc/PID/schedstat`, `/proc/stat`), never from wall
//! time assumptions, so other load on the machine does not break it.

use quietwatt_core::Domain;
use quietwatt_emulator::{Emulator, EmulatorConfig, LoadFollowing, Mechanism};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const IDLE_W: f64 = 10.0;
const PER_CPU_W: f64 = 5.0;
/// `/proc/stat` prints idle time in 10 ms units: the model's busy time may run
/// ahead of the truth by this much per CPU at either end of a window.
const TICK_S: f64 = 0.010;

fn cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

fn mount(dir: &std::path::Path) -> Emulator {
    let mut config = EmulatorConfig::default().with_cpus_per_socket(cpus());
    config.power.follow = Some(LoadFollowing::new(IDLE_W, PER_CPU_W));
    // Core and uncore draw constant power inside the package's idle part.
    (config.power.default.core, config.power.default.uncore) = (4.0, 1.0);
    Emulator::mount(dir, config).unwrap_or_else(|e| {
        panic!(
            "\n\n*** quietwatt-emulator: this test mounts a FUSE filesystem and must run as \
             root with /dev/fuse present. Mounting failed:\n*** {e}\n\n"
        )
    })
}

/// A busy loop pinned to `cpu`, in its own process.
fn spin_on(cpu: u32) -> Child {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "while :; do :; done"]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu as usize, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().expect("spawn a busy loop")
}

/// A process's CPU time so far (`/proc/PID/schedstat`, ns).
fn cpu_ns(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).expect("schedstat");
    s.split_whitespace().next().unwrap().parse().unwrap()
}

/// Σ over CPUs of (idle + iowait) from the real `/proc/stat`, seconds.
fn idle_s() -> f64 {
    let s = std::fs::read_to_string("/proc/stat").unwrap();
    s.lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .map(|x| x.parse().unwrap())
                .collect();
            (v[3] + v[4]) as f64 / 100.0
        })
        .sum()
}

fn energy_j(emu: &Emulator) -> f64 {
    let p = emu.dir().join("sys/class/powercap/intel-rapl:0/energy_uj");
    let uj: u64 = std::fs::read_to_string(p).unwrap().trim().parse().unwrap();
    uj as f64 / 1e6
}

#[test]
fn package_energy_follows_a_pinned_busy_loop() {
    let dir = tempfile::tempdir().unwrap();
    let emu = mount(dir.path());
    let n = cpus();
    let mut child = spin_on(n - 1);
    std::thread::sleep(Duration::from_millis(100));

    let (idle0, wall0) = (idle_s(), Instant::now());
    let e0 = energy_j(&emu);
    let c0 = cpu_ns(child.id());
    std::thread::sleep(Duration::from_millis(1000));
    let c1 = cpu_ns(child.id());
    let e1 = energy_j(&emu);
    let (idle1, wall) = (idle_s(), wall0.elapsed().as_secs_f64());
    child.kill().unwrap();
    child.wait().unwrap();

    let served = emu.served(Mechanism::Powercap, 0, Domain::Package).unwrap();
    let t = (served.last_t - served.first_t).as_secs_f64();
    let dynamic = (e1 - e0) - IDLE_W * t;
    let loop_s = (c1 - c0) as f64 / 1e9;
    // Everything that ran on any CPU in the window, as the test itself read it.
    let all_busy_s = (f64::from(n) * wall - (idle1 - idle0)).max(0.0);
    let slack = PER_CPU_W * 2.0 * TICK_S * f64::from(n) + 0.01;
    eprintln!(
        "window {t:.3} s, package {:.3} J, dynamic {dynamic:.3} J, loop {loop_s:.3} s \
         (truth {:.3} J), all busy {all_busy_s:.3} s (at most {:.3} J)",
        e1 - e0,
        PER_CPU_W * loop_s,
        PER_CPU_W * all_busy_s
    );
    assert!(
        loop_s > 0.02,
        "the busy loop hardly ran ({loop_s} s): machine too loaded?"
    );
    assert!(
        dynamic >= PER_CPU_W * loop_s - slack,
        "the package's dynamic energy {dynamic} J is below the loop's own {} J",
        PER_CPU_W * loop_s
    );
    assert!(
        dynamic <= PER_CPU_W * all_busy_s + slack,
        "the package's dynamic energy {dynamic} J is above what all CPUs' busy time allows ({} J)",
        PER_CPU_W * all_busy_s
    );
    assert!(dynamic <= PER_CPU_W * f64::from(n) * t + slack);
    // The truth API says the same: idle × elapsed + per-CPU × the busy time it counted.
    let busy = emu.busy(0).unwrap().as_secs_f64();
    let truth = emu.truth(0, Domain::Package).0;
    let elapsed = emu.elapsed().as_secs_f64();
    assert!((truth - (IDLE_W * elapsed + PER_CPU_W * busy)).abs() < IDLE_W * 0.002 + 1e-6);
}
