//! The wrap guard of a session without a rate: it reads the counters twice per safe
//! period (half the time a counter takes to turn once at its domain's highest
//! plausible power), so that a region of any length is exact although the caller reads only
//! at its start and end. Without it, a counter that turns twice between those two
//! reads loses whole ranges unseen (a 1 s region at 20 W on counters that wrap every
//! 0.25 s read 5 J). On real RAPL counters (262 kJ powercap, 65 kJ MSR ranges) it
//! wakes every half minute or more; it allocates nothing per wake-up.

use super::engine::Shared;
use crate::meter::monotonic_ns;
use crate::source::Source;
use quietwatt_sys::thread::{Ready, Worker};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

/// The polled source a session and its guard share.
pub(super) type Polled = Arc<Mutex<Box<dyn Source>>>;

/// A running guard thread; dropped, it is stopped and joined.
pub(super) struct Guard {
    stop: Arc<(Mutex<bool>, Condvar)>,
    // Declared after the flag, dropped after `Drop::drop` has set it.
    _worker: Worker<()>,
}

impl Guard {
    /// Reads `source` into `shared` every `period` until stopped. A failed reading
    /// is kept as the session's error (its next report says it) and ends the guard.
    pub(super) fn spawn(
        source: Polled,
        shared: Arc<Shared>,
        channels: usize,
        period: Duration,
    ) -> std::io::Result<Guard> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stop);
        let (worker, _) = Worker::spawn("quietwatt-guard", move |ready: Ready<(), ()>| {
            // Nothing to set up: ready at once, and nobody waits on it.
            ready.ok(());
            let mut raw = vec![0u64; channels];
            let (lock, cv) = &*flag;
            loop {
                let stopped = lock.lock().unwrap_or_else(PoisonError::into_inner);
                let (stopped, _) = cv
                    .wait_timeout_while(stopped, period, |s| !*s)
                    .unwrap_or_else(PoisonError::into_inner);
                if *stopped {
                    return;
                }
                drop(stopped);
                let mut src = source.lock().unwrap_or_else(PoisonError::into_inner);
                let t = monotonic_ns();
                let read = src.read(&mut raw).map_err(crate::Error::from);
                drop(src);
                let mut st = shared.folded();
                if let Err(e) = read.and_then(|()| st.feed(t, &raw, 0, 0)) {
                    st.error.get_or_insert(e);
                    return;
                }
            }
        })?;
        Ok(Guard {
            stop,
            _worker: worker,
        })
    }

    /// Stops the thread and waits for it (a wake-up, not a period).
    pub(super) fn stop(self) {
        drop(self);
    }
}

impl Drop for Guard {
    /// Sets the flag and wakes the thread; the worker, dropped next, joins it.
    fn drop(&mut self) {
        let (lock, cv) = &*self.stop;
        *lock.lock().unwrap_or_else(PoisonError::into_inner) = true;
        cv.notify_all();
    }
}
