//! The system calls of the perf mechanism, and what their errors mean for the
//! caller.

use super::EventSpec;
use crate::error::Error;
use crate::source::Mechanism;
use perf_event_open_sys::bindings::{perf_event_attr, PERF_FLAG_FD_CLOEXEC};
use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

// ---------------------------------------------------------------------------
// The syscall wrapper.

/// Opens a system-wide counting event: `perf_event_open(attr, pid = -1, cpu, -1,
/// FD_CLOEXEC)` with `attr.type = pmu_type`, `attr.config = config`, counting
/// (sample period 0), enabled at once, no `exclude_*` bit, and `read_format = 0`
/// so that a `read()` returns the bare 64-bit count.
pub fn open_counting_event(pmu_type: u32, config: u64, cpu: u32) -> io::Result<OwnedFd> {
    let cpu = libc::c_int::try_from(cpu).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut attr = perf_event_attr {
        type_: pmu_type,
        // The struct as this binding knows it; the kernel accepts a larger struct
        // whose extra bytes are zero, and a smaller one from older headers.
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config,
        ..Default::default()
    };
    // SAFETY: `attr` is a fully initialised perf_event_attr (zeroed by Default, then
    // the three fields above); the call asks only for a counting event, which has
    // no effect on memory of this process.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            &mut attr,
            -1,
            cpu,
            -1,
            PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads an event's 64-bit count with one `read()` into a stack buffer.
#[inline]
pub fn read_count(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut buf = [0u8; 8];
    let n = rustix::io::read(fd, &mut buf[..]).map_err(io::Error::from)?;
    if n != buf.len() {
        // With read_format = 0 the kernel always returns 8 bytes; fewer means the
        // descriptor is not what we opened.
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
    }
    Ok(u64::from_ne_bytes(buf))
}

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
