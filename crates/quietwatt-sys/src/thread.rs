//! The calling thread's placement and scheduling: pinning, SCHED_FIFO, priority,
//! which signals it takes, the futex two threads hand a turn over with, and the
//! [`Worker`] lifecycle (spawn, ready-or-error handshake, join) of a measuring thread.

use std::io;
use std::sync::atomic::AtomicU32;

mod worker;
pub use worker::{Handshake, NotReady, Ready, ScopedWorker, StartError, Worker};

/// Pins the calling thread to `cpu`. EINVAL for a CPU beyond what the kernel's
/// affinity mask can name; the kernel's error for an offline or forbidden one.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= rustix::thread::CpuSet::MAX_CPU {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(io::Error::from)
}

/// Makes the calling thread SCHED_FIFO at `priority` (1 to 99): it then preempts
/// every normal thread when it wakes. Needs CAP_SYS_NICE or an RLIMIT_RTPRIO.
pub fn set_fifo(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sched_setscheduler reads the param struct, which lives for the call;
    // pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets the calling thread's nice value (raising it is always allowed; lowering it
/// needs CAP_SYS_NICE).
pub fn set_nice(nice: i32) -> io::Result<()> {
    // SAFETY: setpriority on the calling thread's id (PRIO_PROCESS with a thread id
    // acts on that thread on Linux); it only changes a scheduling attribute.
    let r = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The CPU the calling thread runs on now (`sched_getcpu`, a vDSO call).
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no argument and only returns a number.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// Blocks SIGINT and SIGTERM in the calling thread, so that they reach the thread
/// that waits for them and never interrupt a read here: a FUSE read (quietwatt's
/// emulator) interrupted by a signal fails with EINTR.
pub fn block_stop_signals() {
    // SAFETY: the set is initialised by sigemptyset before use and outlives the
    // calls; pthread_sigmask only changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Waits while `word` holds `expected`, at most `timeout`: FUTEX_WAIT on a
/// process-private word. May return early or spuriously: the caller loops.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: std::time::Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT reads the aligned u32 behind `word`, which outlives the call;
    // the timeout struct lives across it.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// Wakes one thread waiting on `word` in [`futex_wait`].
pub fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE only uses the address as a key; it reads no memory.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_thread_runs_where_it_was_pinned() {
        let cpu = current_cpu().expect("sched_getcpu");
        std::thread::spawn(move || {
            pin_to_cpu(cpu).expect("pin to a CPU this process runs on");
            assert_eq!(current_cpu(), Some(cpu));
        })
        .join()
        .unwrap();
        let e = pin_to_cpu(usize::MAX).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }
}
