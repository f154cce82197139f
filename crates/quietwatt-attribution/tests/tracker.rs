//! The accounting program alone: what it reports of a process matches the
//! kernel's own CPU time of that process. Needs root and a kernel with BTF; fails
//! loudly without them.

use quietwatt_attribution::{By, Entity, Timeline, Tracker, Usage};
use std::time::Duration;

#[test]
fn the_accounting_sees_a_busy_process_cpu_time() {
    let mut tracker = Tracker::open().unwrap_or_else(|e| {
        panic!("\n\n*** quietwatt-attribution: {e}\n*** This test needs root and a kernel with BTF.\n\n")
    });
    let mut timeline = Timeline::new();
    let online = online_cpus();
    let kernel_idle0 = kernel_idle_ms(&online);
    let t0 = quietwatt::ticker::monotonic_ns();
    let mut child = std::process::Command::new("sh")
        .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"])
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut cpu_ns = 0;
    loop {
        std::thread::sleep(Duration::from_millis(20));
        tracker.drain(&mut timeline);
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/schedstat")) {
            cpu_ns = s.split_whitespace().next().unwrap().parse::<u64>().unwrap();
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(20));
    tracker.drain(&mut timeline);
    let t1 = quietwatt::ticker::monotonic_ns();
    let kernel_idle = kernel_idle_ms(&online).saturating_sub(kernel_idle0);
    let mut u = vec![Usage::default()];
    timeline.usage(
        t0,
        t1,
        By::Process,
        |c| online.contains(&c).then_some(0),
        &mut u,
    );
    let seen = u[0]
        .by_entity
        .get(&Entity::Process(pid))
        .copied()
        .unwrap_or(0);
    eprintln!(
        "slices {}, dropped {}, child seen {seen} ns, kernel says at least {cpu_ns} ns; \
         idle {} ns, unseen {} ns, cost {:?}",
        tracker.slices(),
        tracker.dropped(),
        u[0].idle_ns,
        u[0].unseen_ns,
        tracker.cost()
    );
    assert!(tracker.slices() > 0);
    // The child has exited: /proc has no name for it, the accounting does.
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    assert_eq!(timeline.comm(pid), Some("sh"));
    let mut names = quietwatt_attribution::Names::under(None);
    assert_eq!(names.process_or(pid, timeline.comm(pid)), "sh");
    // Every nanosecond of every CPU is a task's or the idle task's: the idle
    // task's slices, which the program sends with the next task's record or keeps
    // in the CPU's slot, are all rebuilt, and no record was lost.
    assert_eq!(tracker.dropped(), 0);
    let covered: u64 = u[0].by_entity.values().sum::<u64>() + u[0].idle_ns;
    assert_eq!(u[0].unseen_ns, 0, "unseen time on a CPU");
    assert_eq!(covered, (t1 - t0) * online.len() as u64);
    // Idle time to rebuild exists only where a CPU idled: on a machine kept busy
    // (stress-ng on every CPU) the kernel counts none, and neither may we.
    if kernel_idle >= 50 {
        assert!(
            u[0].idle_ns > 0,
            "no idle time rebuilt where the kernel counted {kernel_idle} ms"
        );
    } else {
        eprintln!(
            "WEAK CHECK: the CPUs idled only {kernel_idle} ms in the window (a loaded \
             machine): the idle task's slices were barely exercised; every nanosecond \
             was still accounted"
        );
    }
    // The last schedstat read came before the child's last slice.
    assert!(
        seen + 2_000_000 >= cpu_ns,
        "saw {seen} ns of at least {cpu_ns}"
    );
}

/// The kernel's idle and iowait time of `cpus`, ms (`/proc/stat`, USER_HZ = 100).
fn kernel_idle_ms(cpus: &[u32]) -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    stat.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu: u32 = f.next()?.strip_prefix("cpu")?.parse().ok()?;
            let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
            if !cpus.contains(&cpu) {
                return None;
            }
            Some((v.get(3)? + v.get(4)?) * 10)
        })
        .sum()
}

/// The online CPUs (`/sys/devices/system/cpu/online`, e.g. `0-3,5`).
fn online_cpus() -> Vec<u32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    let mut cpus = Vec::new();
    for part in text.trim().split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        cpus.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap());
    }
    cpus
}
