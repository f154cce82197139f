//! What the kernel says about a run: a child's exit status and resource usage
//! (`wait4`, `getrusage`), and how idle the CPUs were (`/proc/stat`, `cpuidle`).
//! Always the real kernel's figures: they describe this machine's CPUs whatever
//! root the RAPL sources are opened under.

use std::io;
use std::num::NonZero;
use std::time::Instant;

/// CPU time (s), voluntary and involuntary switches of an rusage.
pub(crate) fn rusage_figures(ru: &libc::rusage) -> (f64, u64, u64) {
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (
        tv(ru.ru_utime) + tv(ru.ru_stime),
        ru.ru_nvcsw as u64,
        ru.ru_nivcsw as u64,
    )
}

pub(crate) fn children_rusage() -> libc::rusage {
    // SAFETY: getrusage writes only the zeroed struct it is given.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru
    }
}

/// `wait4(pid)`: the exit status and rusage of a child (and of the children it
/// waited for). `block = false` returns `None` while it runs.
pub(crate) fn wait4(pid: i32, block: bool) -> io::Result<Option<(i32, libc::rusage)>> {
    loop {
        let mut status = 0;
        // SAFETY: wait4 writes the two out-values we pass, which live for the call.
        let (r, ru) = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            let r = libc::wait4(
                pid,
                &mut status,
                if block { 0 } else { libc::WNOHANG },
                &mut ru,
            );
            (r, ru)
        };
        if r == pid {
            return Ok(Some((status, ru)));
        }
        if r == 0 {
            return Ok(None);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

pub(crate) fn status_text(status: i32) -> String {
    if libc::WIFEXITED(status) {
        format!("exit code {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("status {status}")
    }
}

/// Aggregate CPU jiffies: (idle + iowait, total), from the first line of `/proc/stat`.
fn proc_stat() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let line = text.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    // guest and guest_nice are already inside user and nice.
    let total: u64 = v.iter().take(8).sum();
    Some((idle, total))
}

/// Time in each C-state summed over CPUs, microseconds, by state name.
fn cpuidle_times() -> Vec<(String, u64)> {
    let mut out: Vec<(String, u64)> = Vec::new();
    let Ok(cpus) = std::fs::read_dir("/sys/devices/system/cpu") else {
        return out;
    };
    for cpu in cpus.flatten() {
        let name = cpu.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with("cpu") || !name[3..].chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let Ok(states) = std::fs::read_dir(cpu.path().join("cpuidle")) else {
            continue;
        };
        for st in states.flatten() {
            let p = st.path();
            let (Ok(n), Ok(t)) = (
                std::fs::read_to_string(p.join("name")),
                std::fs::read_to_string(p.join("time")),
            ) else {
                continue;
            };
            let Ok(t) = t.trim().parse::<u64>() else {
                continue;
            };
            let n = n.trim().to_string();
            match out.iter_mut().find(|(k, _)| *k == n) {
                Some((_, v)) => *v += t,
                None => out.push((n, t)),
            }
        }
    }
    out
}

/// The idle figures at one moment.
pub(crate) struct IdleSnapshot {
    stat: Option<(u64, u64)>,
    cstates: Vec<(String, u64)>,
    at: Instant,
}

impl IdleSnapshot {
    pub(crate) fn now() -> IdleSnapshot {
        IdleSnapshot {
            stat: proc_stat(),
            cstates: cpuidle_times(),
            at: Instant::now(),
        }
    }

    /// (idle fraction, `NAME=residency;...`) since `self`.
    pub(crate) fn since(&self) -> (Option<f64>, Option<String>) {
        let now = IdleSnapshot::now();
        let frac = match (self.stat, now.stat) {
            (Some((i0, t0)), Some((i1, t1))) if t1 > t0 => {
                Some(i1.saturating_sub(i0) as f64 / (t1 - t0) as f64)
            }
            _ => None,
        };
        let ncpu = std::thread::available_parallelism().map_or(1, NonZero::get) as f64;
        let wall_us = now.at.duration_since(self.at).as_secs_f64() * 1e6 * ncpu;
        let cs: Vec<String> = now
            .cstates
            .iter()
            .filter_map(|(n, t1)| {
                let t0 = self.cstates.iter().find(|(k, _)| k == n)?.1;
                Some(format!(
                    "{n}={:.4}",
                    t1.saturating_sub(t0) as f64 / wall_us.max(1.0)
                ))
            })
            .collect();
        (frac, (!cs.is_empty()).then(|| cs.join(";")))
    }
}
