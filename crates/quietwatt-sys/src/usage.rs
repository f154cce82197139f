//! What a thread cost: its CPU time and context switches.

use serde::Serialize;

/// CPU time and context switches of one thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ThreadUsage {
    /// CPU time (user + system), nanoseconds.
    pub cpu_ns: u64,
    /// Times the thread gave up the CPU to wait (a timer, a read).
    pub voluntary_switches: u64,
    /// Times the scheduler took the CPU away from it.
    pub involuntary_switches: u64,
}

impl ThreadUsage {
    /// The calling thread's usage so far: `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`
    /// and `getrusage(RUSAGE_THREAD)`.
    pub fn current() -> ThreadUsage {
        let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        let cpu_ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
        // SAFETY: getrusage only writes the struct it is given, which is zeroed and
        // lives for the call; RUSAGE_THREAD is valid on Linux since 2.6.26.
        let ru = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            if libc::getrusage(libc::RUSAGE_THREAD, &mut ru) != 0 {
                ru = std::mem::zeroed();
            }
            ru
        };
        ThreadUsage {
            cpu_ns,
            voluntary_switches: ru.ru_nvcsw as u64,
            involuntary_switches: ru.ru_nivcsw as u64,
        }
    }

    /// The usage accrued between `start` and `self`.
    pub fn since(self, start: ThreadUsage) -> ThreadUsage {
        ThreadUsage {
            cpu_ns: self.cpu_ns.saturating_sub(start.cpu_ns),
            voluntary_switches: self
                .voluntary_switches
                .saturating_sub(start.voluntary_switches),
            involuntary_switches: self
                .involuntary_switches
                .saturating_sub(start.involuntary_switches),
        }
    }

    /// The sum of two threads' usage.
    pub fn plus(self, o: ThreadUsage) -> ThreadUsage {
        ThreadUsage {
            cpu_ns: self.cpu_ns + o.cpu_ns,
            voluntary_switches: self.voluntary_switches + o.voluntary_switches,
            involuntary_switches: self.involuntary_switches + o.involuntary_switches,
        }
    }
}

/// The whole process's usage so far, every thread's (living or joined):
/// `getrusage(RUSAGE_SELF)`, to the microsecond; `None` when the call fails.
pub fn process_usage() -> Option<ThreadUsage> {
    // SAFETY: getrusage only writes the zeroed struct it is given, which lives for
    // the call.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
            return None;
        }
        ru
    };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    Some(ThreadUsage {
        cpu_ns: ns(ru.ru_utime) + ns(ru.ru_stime),
        voluntary_switches: ru.ru_nvcsw as u64,
        involuntary_switches: ru.ru_nivcsw as u64,
    })
}

/// The whole process as Prometheus's standard `process_*` metrics describe it
/// (resident and virtual memory, open and allowed file descriptors, start time),
/// read from `/proc/self`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ProcessFigures {
    /// Resident memory, bytes (`/proc/self/stat` rss × the page size).
    pub resident_bytes: u64,
    /// Virtual memory, bytes (`/proc/self/stat` vsize).
    pub virtual_bytes: u64,
    /// Open file descriptors (entries of `/proc/self/fd`).
    pub open_fds: u64,
    /// The soft limit on file descriptors (`RLIMIT_NOFILE`; `u64::MAX` when
    /// unlimited).
    pub max_fds: u64,
    /// When the process started, microseconds since the Unix epoch (the boot
    /// time of `/proc/stat` plus the start of `/proc/self/stat`, in clock ticks).
    pub start_time_us: u64,
}

impl ProcessFigures {
    /// The calling process's figures; `None` where `/proc` cannot be read.
    pub fn current() -> Option<ProcessFigures> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        // SAFETY: sysconf reads a configuration value and writes nothing.
        let (ticks, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        let (ticks, page) = (u64::try_from(ticks).ok()?, u64::try_from(page).ok()?);
        let mut f = parse_stat(&stat, page, ticks, boot_time_s(&boot)?)?;
        f.open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        f.max_fds = limit.current.unwrap_or(u64::MAX);
        Some(f)
    }
}

/// `btime` of `/proc/stat`: the boot time, seconds since the epoch.
fn boot_time_s(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// The memory and start time of a `/proc/PID/stat` line (proc(5)): the fields
/// after the command's closing parenthesis (the command may hold spaces and
/// parentheses), starttime the 22nd field, vsize the 23rd, rss the 24th.
fn parse_stat(stat: &str, page: u64, ticks: u64, boot_s: u64) -> Option<ProcessFigures> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // `rest` starts at field 3 (state).
    let field = |n: usize| -> Option<u64> { rest.split_whitespace().nth(n - 3)?.parse().ok() };
    let start_ticks = field(22)?;
    if ticks == 0 {
        return None;
    }
    Some(ProcessFigures {
        resident_bytes: field(24)?.saturating_mul(page),
        virtual_bytes: field(23)?,
        open_fds: 0,
        max_fds: 0,
        start_time_us: boot_s * 1_000_000 + start_ticks * 1_000_000 / ticks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_accrues_cpu_time() {
        let start = ThreadUsage::current();
        let mut x = 0u64;
        while ThreadUsage::current().since(start).cpu_ns < 2_000_000 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let used = ThreadUsage::current().since(start);
        assert!(used.cpu_ns >= 2_000_000 && x > 0);
        assert_eq!(used.plus(ThreadUsage::default()), used);
    }

    #[test]
    fn a_stat_line_gives_memory_and_start_time_whatever_the_command_is_called() {
        // A command whose name holds a space and a parenthesis.
        let line = "4242 (qw (x) y) S 1 4242 4242 0 -1 4194560 300 0 0 0 5 3 0 0 20 0 3 0 \
                    12345 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0";
        let f = parse_stat(line, 4096, 100, 1_700_000_000).unwrap();
        assert_eq!(f.resident_bytes, 2560 * 4096);
        assert_eq!(f.virtual_bytes, 104_857_600);
        assert_eq!(f.start_time_us, 1_700_000_000_000_000 + 123_450_000);
        assert!(parse_stat("4242 (cut", 4096, 100, 0).is_none());
        assert_eq!(
            boot_time_s("cpu 1 2\nbtime 1700000000\nprocesses 9\n"),
            Some(1_700_000_000)
        );
    }

    #[test]
    fn this_process_has_memory_open_files_and_started_before_now() {
        let f = ProcessFigures::current().expect("/proc/self is readable");
        assert!(f.resident_bytes > 0 && f.virtual_bytes >= f.resident_bytes);
        // stdin, stdout, stderr at least, and the limit above them.
        assert!(f.open_fds >= 3 && f.max_fds >= f.open_fds, "{f:?}");
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64;
        // Boot time is whole seconds: a start up to 1 s off, never in the future.
        assert!(
            f.start_time_us <= now_us + 1_000_000
                && f.start_time_us > now_us - 86_400_000_000 * 365
        );
    }
}
