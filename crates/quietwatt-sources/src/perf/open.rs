//! The system calls of the perf mechanism, and what their errors mean for the
//! caller.

use super::EventSpec;
use crate::error::Error;
use crate::Mechanism;
use std::io;
use std::path::Path;

pub use quietwatt_sys::perf::{open_counting_event, read_count};

/// The fix for a refused system-wide event, with this machine's setting.
pub fn permission_fix() -> String {
    // perf_event_open always reaches the real kernel, so the real sysctl applies
    // even under an emulated root.
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    format!(
        "system-wide perf events need kernel.perf_event_paranoid <= 0 (it is {paranoid}) or CAP_PERFMON: \
         `sudo sysctl kernel.perf_event_paranoid=0`, or `sudo setcap cap_perfmon=ep $(which quietwatt)`, or run as root"
    )
}

/// A refused `perf_event_open` as the error that says what to do: permission,
/// no such PMU or CPU, or an attribute the power PMUs refuse.
pub(crate) fn open_error(spec: &EventSpec, e: io::Error) -> Error {
    let (t, c, cpu) = (spec.pmu_type, spec.config, spec.cpu);
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => Error::Permission {
            path: spec.origin.clone(),
            fix: permission_fix(),
        },
        Some(libc::ENOENT) => Error::MechanismUnavailable {
            mechanism: Mechanism::Perf.name(),
            why: format!(
                "the kernel has no PMU of type {t} that accepts config {c:#x} (ENOENT opening {})",
                spec.origin.display()
            ),
        },
        Some(libc::ENODEV) => Error::MechanismUnavailable {
            mechanism: Mechanism::Perf.name(),
            why: format!(
                "CPU {cpu} is offline or PMU type {t} does not support it (ENODEV opening {})",
                spec.origin.display()
            ),
        },
        Some(libc::EINVAL) => Error::Io {
            path: spec.origin.clone(),
            source: io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "EINVAL: the kernel refused type {t} config {c:#x} on CPU {cpu}; the power PMUs accept only \
                     system-wide counting events (pid -1, a valid CPU, sample_period 0, no exclude_* bits) \
                     and config bits inside their format (event=config:0-7)"
                ),
            ),
        },
        _ => Error::io(&spec.origin, e),
    }
}

/// A failed `read()` of an open event: a vanished counter when its PMU or CPU went
/// away.
pub(super) fn read_error(path: &Path, e: io::Error) -> Error {
    match e.raw_os_error() {
        // The PMU was unregistered or the CPU's context went away.
        Some(libc::ENODEV | libc::ENXIO) => Error::Vanished {
            path: path.to_path_buf(),
            source: e,
        },
        _ => Error::io(path, e),
    }
}
