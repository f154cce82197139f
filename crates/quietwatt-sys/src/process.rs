//! A child process waited for without reaping it: its owner (a
//! `std::process::Child`) reaps it afterwards, so its status is read once, where
//! it belongs, and the pid cannot be reused in between.

use rustix::event::{poll, PollFd, PollFlags};
use rustix::process::{pidfd_open, Pid, PidfdFlags};
use std::time::Duration;

/// Blocks until the child `pid` has exited, leaving it unreaped: a pidfd polled
/// where the kernel has them (5.3 and later; EINTR, as when Ctrl-C reaches the
/// child too, just polls again), else a `waitid(WNOWAIT)` look every 10 ms. Returns
/// at once for a pid that is not a child of this process.
pub fn wait_exited_unreaped(pid: u32) {
    let fd = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok());
    match fd {
        Some(fd) => loop {
            let mut fds = [PollFd::new(&fd, PollFlags::IN)];
            if matches!(poll(&mut fds, None), Ok(n) if n > 0) {
                return;
            }
        },
        None => loop {
            let mut info = std::mem::MaybeUninit::<libc::siginfo_t>::zeroed();
            // SAFETY: waitid with WNOWAIT only fills `info`; the child stays unreaped.
            let rc = unsafe {
                libc::waitid(
                    libc::P_PID,
                    pid,
                    info.as_mut_ptr(),
                    libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
                )
            };
            // SAFETY: zeroed, and filled by waitid when it returned 0.
            if rc != 0 || unsafe { info.assume_init().si_pid() } != 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_that_exits_is_waited_for_and_left_to_its_owner_to_reap() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "exit 7"])
            .spawn()
            .expect("sh runs");
        wait_exited_unreaped(child.id());
        // Still unreaped: its owner reads its status.
        let status = child.try_wait().expect("try_wait").expect("it has exited");
        assert_eq!(status.code(), Some(7));
    }

    #[test]
    fn a_pid_that_is_not_a_child_returns_at_once() {
        // No such process: no pidfd, and waitid fails (ECHILD) instead of waiting.
        wait_exited_unreaped(u32::MAX / 2);
    }
}
