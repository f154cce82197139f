//! The clocks quietwatt timestamps and accounts with.

/// CLOCK_MONOTONIC in nanoseconds: the clock of perf samples and tracepoints, so
/// every user-space timestamp of quietwatt lines up with the kernel's.
#[inline]
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time of the whole process (every thread, including setup), nanoseconds.
pub fn process_cpu_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The kernel's clock ticks per second (`USER_HZ`), the unit of `/proc/stat`'s
/// CPU times; 100 when the system does not say.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_monotonic_clock_never_steps_back() {
        let mut last = monotonic_ns();
        for _ in 0..10_000 {
            let t = monotonic_ns();
            assert!(t >= last, "{t} after {last}");
            last = t;
        }
        assert!(clock_ticks_per_second() >= 1);
    }
}
