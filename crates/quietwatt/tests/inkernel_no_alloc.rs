//! The in-kernel engine's per-sample path allocates nothing: from the kernel ring
//! through the Meter, the record ring and the writer conversion into the sink. A
//! counting allocator counts per thread; the sink (which runs on the drain thread)
//! notes the thread's count at every sample. (Its own binary: the global allocator
//! is per test binary.) Needs root, like every in-kernel test.

use quietwatt::inkernel::{self, open_specs, stand_in_specs, InKernelConfig, Opened, Storage};
use quietwatt::sink::{Metadata, Sample, Sink};
use quietwatt::source::Channel;
use quietwatt::{Hertz, Mechanism, Rate, SysRoot};
use std::io;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

mod support;

use support::allocations;

/// Notes the drain thread's allocation count at each sample, into room reserved
/// up front.
struct Spy {
    seen: Vec<u64>,
}

impl Sink for Spy {
    fn begin(&mut self, _: &Metadata, _: &[Channel]) -> io::Result<()> {
        Ok(())
    }
    fn sample(&mut self, _: &Sample<'_>) -> io::Result<()> {
        if self.seen.len() < self.seen.capacity() {
            self.seen.push(allocations());
        }
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn draining_allocates_nothing_per_sample() {
    let hz = |f| Hertz::new(f).expect("valid");
    // CPU 0 busy, so that its tick runs and perf never throttles the clock (an idle
    // CPU stops its tick; see docs/in-kernel-sampling.md): enough samples come.
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let busy = std::thread::spawn(move || {
        // SAFETY: a zeroed set with CPU 0 added, read for this thread only.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
        }
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            std::hint::spin_loop();
        }
    });
    // ebpf needs the `bpf` feature (on by default).
    let mechanisms: &[Mechanism] = if cfg!(feature = "bpf") {
        &[Mechanism::Ebpf, Mechanism::PerfRing]
    } else {
        &[Mechanism::PerfRing]
    };
    for &m in mechanisms {
        let mut storage = Storage::new();
        let mut s = match open_specs(&mut storage, m, stand_in_specs(0), hz(1000.0), hz(2.0)) {
            Ok(Opened::InKernel(s)) => s,
            Ok(Opened::Fallback { reason, .. }) => panic!("{m}: {reason}"),
            Err(e) => panic!("{m} needs root (or CAP_BPF and CAP_PERFMON) here: {e}"),
        };
        let mut spy = Spy {
            seen: Vec::with_capacity(100_000),
        };
        let meta = Metadata::new(m.name(), &Rate::Fixed(hz(1000.0)), &SysRoot::default());
        let mut config = InKernelConfig::new(hz(2.0));
        config.duration = Some(Duration::from_millis(2600));
        let rec = inkernel::record(
            s.as_mut(),
            &mut spy,
            Path::new("spy"),
            &meta,
            &config,
            &AtomicBool::new(false),
        )
        .expect("records");
        assert!(
            rec.recording.error.is_none(),
            "{m}: {:?}",
            rec.recording.error
        );
        // Several drains' worth of samples; the last record follows the final
        // reading's set-up and is left out.
        let n = spy.seen.len();
        assert!(
            n > 2000 && rec.kernel.drains >= 4,
            "{m}: {n} samples, {:?}",
            rec.kernel
        );
        let (first, last) = (spy.seen[10], spy.seen[n - 2]);
        assert_eq!(
            first,
            last,
            "{m}: {} allocations on the drain path",
            last - first
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = busy.join();
}
