//! What can go wrong while profiling, typed, each with what to do about it.

use std::io;

/// Why the profiler could not start or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// `perf_event_open` refused (EACCES or EPERM): the kernel's
    /// `perf_event_paranoid` is too high for this user, or a capability is missing.
    #[error("perf_event_open refused {what} ({source}): {fix}")]
    Permission {
        /// What was being opened (the event, the target, the CPU).
        what: String,
        /// `kernel.perf_event_paranoid` as read when refused (`None`: unreadable).
        paranoid: Option<i32>,
        /// How to allow it: the sysctl, CAP_PERFMON, or root.
        fix: String,
        /// The kernel's answer.
        source: io::Error,
    },
    /// The process to profile does not exist (ESRCH).
    #[error("no process {pid} to profile (it exited or never existed)")]
    NoSuchProcess {
        /// The pid asked for.
        pid: i32,
    },
    /// Any other failure of a system call, with what it was doing.
    #[error("{what}: {source}")]
    Sys {
        /// What was being done.
        what: String,
        /// The kernel's answer.
        source: io::Error,
    },
}

/// A result whose error is a [`ProfileError`].
pub type Result<T> = std::result::Result<T, ProfileError>;

/// `kernel.perf_event_paranoid`, or `None` where it cannot be read.
pub fn perf_event_paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The error for `source` while opening `what`: a permission error names its fix
/// (what a system-wide or a kernel-stack profile needs differs from a user-only
/// profile of one's own process); ESRCH names the pid.
pub(crate) fn open_error(
    what: String,
    source: io::Error,
    system_wide: bool,
    kernel: bool,
    pid: Option<i32>,
    paranoid: Option<i32>,
) -> ProfileError {
    match source.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => ProfileError::Permission {
            fix: permission_fix(system_wide, kernel, paranoid),
            what,
            paranoid,
            source,
        },
        Some(libc::ESRCH) if pid.is_some() => ProfileError::NoSuchProcess {
            pid: pid.unwrap_or(-1),
        },
        _ => ProfileError::Sys { what, source },
    }
}

/// What allows the profile: the paranoid level it needs, the sysctl that sets it,
/// CAP_PERFMON, or root.
fn permission_fix(system_wide: bool, kernel: bool, paranoid: Option<i32>) -> String {
    // perf_event_paranoid: 2 allows user-space sampling of one's own processes, 1
    // adds their kernel stacks, 0 CPU-wide events, -1 everything.
    let (level, what) = if system_wide {
        (0, "sampling every process on a CPU (system-wide)")
    } else if kernel {
        (1, "kernel call chains of a process")
    } else {
        (2, "sampling a process of the same user")
    };
    let now = paranoid.map_or_else(|| "cannot be read".to_string(), |p| format!("is {p}"));
    format!(
        "kernel.perf_event_paranoid {now}; {what} needs it at most {level} \
         (`sudo sysctl kernel.perf_event_paranoid={level}`), or the CAP_PERFMON capability \
         (`sudo setcap cap_perfmon+ep BINARY`, Linux 5.8+; CAP_SYS_ADMIN before), or root"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_sysctl_the_level_and_cap_perfmon() {
        let e = open_error(
            "cpu-clock on CPU 0".into(),
            io::Error::from_raw_os_error(libc::EACCES),
            true,
            true,
            None,
            Some(2),
        );
        let msg = e.to_string();
        assert!(matches!(
            e,
            ProfileError::Permission {
                paranoid: Some(2),
                ..
            }
        ));
        for want in [
            "cpu-clock on CPU 0",
            "kernel.perf_event_paranoid is 2",
            "sudo sysctl kernel.perf_event_paranoid=0",
            "CAP_PERFMON",
        ] {
            assert!(msg.contains(want), "{want:?} missing from {msg:?}");
        }
        let user = open_error(
            "x".into(),
            io::Error::from_raw_os_error(libc::EPERM),
            false,
            false,
            Some(7),
            None,
        )
        .to_string();
        assert!(
            user.contains("cannot be read") && user.contains("paranoid=2"),
            "{user}"
        );
        let gone = open_error(
            "x".into(),
            io::Error::from_raw_os_error(libc::ESRCH),
            false,
            false,
            Some(7),
            None,
        );
        assert!(matches!(gone, ProfileError::NoSuchProcess { pid: 7 }));
    }
}
