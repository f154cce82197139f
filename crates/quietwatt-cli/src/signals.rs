//! SIGINT, SIGTERM and SIGHUP, as a shell and perf stat treat them.
//!
//! - A recording without a command ends cleanly: the handler only raises [`STOP`],
//!   and the loops check it, so the file is flushed and closed.
//! - A measured command (`run`, `record -- CMD`) gets the signal: the handler
//!   forwards it (to the command's process group when the command leads one, as a
//!   shell with job control made it, otherwise to the command), quietwatt waits for
//!   the command to end, prints what it measured up to then, and exits with the
//!   command's status: 128 + the signal when the command died of it (`docker stop`
//!   sees 143), the command's own code when it caught the signal and exited.
//!
//! A signal the terminal sent (Ctrl-C, Ctrl-\, a hang-up) has already reached
//! the whole foreground process group, the command included: it is not sent a
//! second time. Only a signal sent by a process (`kill`, `docker stop`, systemd) is
//! forwarded.

use quietwatt::command::ChildEvent;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Raised by SIGINT, SIGTERM or SIGHUP.
pub static STOP: AtomicBool = AtomicBool::new(false);

/// The last of those signals received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The exit status of a process stopped by the signal received, as a shell reports
/// one killed by it: 128 + the signal (130 for SIGINT, 143 for SIGTERM, 129 for
/// SIGHUP); 130 when none was recorded.
pub fn stopped_status() -> u8 {
    match SIGNAL.load(Ordering::Relaxed) {
        s @ 1..=64 => 128 + s as u8,
        _ => 130,
    }
}

/// The running command's process id while it may be signalled; 0 otherwise.
static CHILD: AtomicI32 = AtomicI32::new(0);

/// A signal to forward that arrived before the command started.
static PENDING: AtomicI32 = AtomicI32::new(0);

/// The signals handled.
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// `si_code` of a signal that the kernel itself generated (the terminal's).
const SI_KERNEL: libc::c_int = 0x80;

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    STOP.store(true, Ordering::Relaxed);
    SIGNAL.store(sig, Ordering::Relaxed);
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t.
    let from_terminal = !info.is_null() && unsafe { (*info).si_code } == SI_KERNEL;
    if from_terminal {
        return;
    }
    match CHILD.load(Ordering::Relaxed) {
        0 => PENDING.store(sig, Ordering::Relaxed),
        pid => forward(pid, sig),
    }
}

/// Sends `sig` to the command's process group if it leads one, else to it.
/// Async-signal-safe: two system calls.
fn forward(pid: i32, sig: libc::c_int) {
    // SAFETY: getpgid and kill take plain integers; a pid that has ended but is not
    // reaped (see ChildEvent::Exited) is harmless to signal.
    unsafe {
        let target = if libc::getpgid(pid) == pid { -pid } else { pid };
        libc::kill(target, sig);
    }
}

/// Installs the handler for SIGINT, SIGTERM and SIGHUP, without SA_RESTART so a
/// sleeping loop wakes at once. Handlers (unlike ignored signals) reset to the
/// default in a child after exec, so a measured command still dies on Ctrl-C as
/// usual.
pub fn install() {
    // SAFETY: the handler only stores to atomics and calls async-signal-safe
    // functions, and the sigaction struct is fully initialised before use.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_SIGINFO;
        libc::sigemptyset(&mut sa.sa_mask);
        for sig in SIGNALS {
            libc::sigaddset(&mut sa.sa_mask, sig);
        }
        for sig in SIGNALS {
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// The watcher of a measured command: while it runs, the signals above go to it.
/// A signal that arrived between [`install`] and the start is sent at the start.
pub fn forward_to_command(event: ChildEvent) {
    match event {
        ChildEvent::Spawned(pid) => {
            let pid = pid as i32;
            CHILD.store(pid, Ordering::Relaxed);
            let pending = PENDING.swap(0, Ordering::Relaxed);
            if pending != 0 {
                forward(pid, pending);
            }
        }
        ChildEvent::Exited => CHILD.store(0, Ordering::Relaxed),
    }
}
