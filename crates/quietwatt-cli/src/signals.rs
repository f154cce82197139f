//! Ctrl-C and SIGTERM end a recording cleanly: the handler only raises a flag, and
//! the loops check it, so the file is flushed and closed.

use std::sync::atomic::{AtomicBool, Ordering};

/// Raised by SIGINT or SIGTERM.
pub static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Installs the handler for SIGINT and SIGTERM, without SA_RESTART so a sleeping
/// loop wakes at once. Handlers (unlike ignored signals) reset to the default in a
/// child after exec, so a measured command still dies on Ctrl-C as usual.
pub fn install() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe, and
    // the sigaction struct is fully initialised before use.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
}
