//! quietwatt's system calls, each written once with its `// SAFETY:` argument: the
//! crates above call these and hold no `unsafe` of their own for them.
//!
//! - [`clock`]: CLOCK_MONOTONIC (the clock of every timestamp), process CPU time.
//! - [`timer`]: a timerfd with absolute deadlines.
//! - [`perf`]: `perf_event_open` and the calls on its descriptors.
//! - [`ring`]: the BPF ring buffer and the perf mmap ring, read in place.
//! - [`thread`]: pinning, SCHED_FIFO, nice, signal masks, futexes.
//! - [`usage`]: what a thread cost (CPU time, context switches).
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
pub mod ring;
pub mod thread;
pub mod timer;
pub mod usage;
