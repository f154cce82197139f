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
}
