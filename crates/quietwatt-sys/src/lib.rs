//! quietwatt's system calls, each written once with its `// SAFETY:` argument: the
//! crates above call these and hold no `unsafe` of their own for them.
//!
//! - [`clock`]: CLOCK_MONOTONIC (the clock of every timestamp), process CPU time.
//! - [`timer`]: a timerfd with absolute deadlines.
//! - [`perf`]: `perf_event_open` and the calls on its descriptors.
//! - [`ring`]: the BPF ring buffer and the perf mmap ring, read in place.
//! - [`thread`]: pinning, SCHED_FIFO, nice, signal masks, futexes, the [`thread::Worker`]
//!   lifecycle of a measuring thread.
//! - [`usage`]: what a thread cost (CPU time, context switches).
//! - [`process`]: a child waited for without reaping it.
//!
//! # Example
//!
//! ```
//! use quietwatt_sys::{clock, timer::TimerFd};
//!
//! let timer = TimerFd::new().expect("a timerfd");
//! let start = clock::monotonic_ns();
//! timer.arm(start + 1_000_000, 1_000_000).expect("armed"); // every ms from now + 1 ms
//! let expirations = timer.wait();
//! assert!(expirations >= 1 && clock::monotonic_ns() >= start + 1_000_000);
//! ```
#![deny(missing_docs)]

pub mod clock;
pub mod perf;
pub mod process;
pub mod ring;
pub mod socket;
pub mod thread;
pub mod timer;
pub mod usage;

/// Declares `mod skel` holding the skeleton that `build.rs` generated for
/// `src/bpf/NAME.bpf.c` of the calling crate (`quietwatt-bpf-build` in its build
/// script: the C structs as Rust types, the object embedded). Generated code: the
/// crate's lints do not apply to it.
#[macro_export]
macro_rules! bpf_skeleton {
    ($name:literal) => {
        #[allow(
            dead_code,
            missing_docs,
            unused_qualifications,
            clippy::all,
            clippy::pedantic,
            unsafe_op_in_unsafe_fn
        )]
        mod skel {
            include!(concat!(env!("OUT_DIR"), "/", $name, ".skel.rs"));
        }
    };
}
