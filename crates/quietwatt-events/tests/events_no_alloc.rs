//! The events thread's per-read path allocates nothing: a counting allocator counts
//! this thread's allocations across 200 reads of every event counter on every CPU,
//! rows formatted into the CSV buffer and batches written out included. (Its own
//! binary: the global allocator is per test binary.) Needs root for the counters.

use quietwatt::SysRoot;
use quietwatt_events::{EventCounters, EventLog, Groups};
use std::io::{self, Write};

#[path = "../../quietwatt/tests/support/mod.rs"]
mod support;

use support::allocations;

/// Counts bytes, keeps none (so the sink itself does not allocate).
struct Discard(u64);

impl Write for Discard {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn reading_and_writing_every_event_counter_allocates_nothing() {
    let c = EventCounters::open(Groups::all(), &SysRoot::default(), None).unwrap_or_else(|e| {
        panic!("cannot open the event counters ({e}); run as root on a kernel with perf events")
    });
    let n = c.channels().len();
    assert!(n >= 10, "only {n} counters opened");
    let mut log = EventLog::begin(c, Discard(0), &[]).unwrap();
    // Warm up: the first batches settle the buffer's capacity.
    for _ in 0..20 {
        log.tick().unwrap();
    }
    let before = allocations();
    for _ in 0..200 {
        log.tick().unwrap();
    }
    log.flush().unwrap();
    let allocated = allocations() - before;
    assert_eq!(
        allocated, 0,
        "{allocated} allocations in 200 reads of {n} counters"
    );
}
