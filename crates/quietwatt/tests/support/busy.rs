//! Keeps CPU 0 busy, and so its scheduler tick running, while a [`Busy0`] lives.
//! perf throttles a sampling event after perf_event_max_sample_rate/HZ samples
//! without a tick (400 at 100 kHz and HZ=250), and an idle CPU stops its tick: the
//! kernel's sampling clock then pauses until something wakes the CPU (see
//! docs/in-kernel-sampling.md). The tests of the in-kernel mechanisms check the
//! mechanisms, not the machine's idleness. Included by path by the engine's and the
//! CLI's tests (`#[path = ".../support/busy.rs"] mod busy;`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A thread spinning on CPU 0 until dropped.
pub struct Busy0 {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// Starts spinning on CPU 0.
pub fn busy_cpu0() -> Busy0 {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::spawn(move || {
        let mut set = rustix::thread::CpuSet::new();
        set.set(0);
        let _ = rustix::thread::sched_setaffinity(None, &set);
        while !s.load(Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    });
    Busy0 {
        stop,
        thread: Some(thread),
    }
}

impl Drop for Busy0 {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
