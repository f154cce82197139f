//! The errors of finding and reading energy counters. Each carries what a user
//! needs to act on it, and [`Error::kind`] says what a caller can do about it; the
//! engine wraps these in its own error, and the CLI adds the wording and the exit
//! code.

use std::io;
use std::path::{Path, PathBuf};

/// Shorthand for results in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while discovering or reading energy counters.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the kernel said.
        source: io::Error,
    },
    /// A file read fine but its content is not what the kernel writes there.
    #[error("{path}: unexpected content {content:?} (expected {expected})")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What it held.
        content: String,
        /// What it should have held.
        expected: &'static str,
    },
    /// A counter file is readable only by root (powercap since CVE-2020-8694).
    #[error("{path}: permission denied; {fix}")]
    Permission {
        /// The file.
        path: PathBuf,
        /// How to grant access.
        fix: String,
    },
    /// A counter returned a value that cannot be a reading of it.
    #[error("{path}: counter read {value}, which is not a valid reading (the range is 0..{modulus}); the counter or its driver is broken")]
    CorruptCounter {
        /// The counter file.
        path: PathBuf,
        /// The value read.
        value: u64,
        /// The counter's wrap modulus.
        modulus: u64,
    },
    /// A counter that worked at the start disappeared (zone removed, CPU offline).
    #[error("{path}: the counter vanished during the measurement ({source}); a CPU went offline or the driver was unloaded")]
    Vanished {
        /// The counter file.
        path: PathBuf,
        /// What the kernel said.
        source: io::Error,
    },
    /// The mechanism found no domain at all.
    #[error("no RAPL domain found through {mechanism} under {root}: {why}")]
    NoDomains {
        /// The mechanism tried.
        mechanism: &'static str,
        /// The root searched.
        root: PathBuf,
        /// What was missing.
        why: String,
    },
    /// The user asked for a domain that this machine does not expose.
    #[error("domain '{asked}' is not available here; available: {available}")]
    UnknownDomain {
        /// What was asked for.
        asked: String,
        /// What exists.
        available: String,
    },
    /// The kernel's side of a buffered mechanism (a BPF program, a perf ring, a
    /// sampling group) could not be set up.
    #[error("cannot {}: {source}", on_cpu(detail, *cpu))]
    KernelSampling {
        /// The CPU concerned, when one is.
        cpu: Option<u32>,
        /// The step, with the values involved.
        detail: String,
        /// What the kernel said.
        source: io::Error,
    },
    /// A mechanism quietwatt knows but cannot use here.
    #[error("mechanism {mechanism} is not usable here: {why}")]
    MechanismUnavailable {
        /// The mechanism.
        mechanism: &'static str,
        /// Why, and the fix.
        why: String,
    },
    /// A power model the caller gave that cannot be used (unreadable, corrupt,
    /// another CPU's, a TDP that is no power): fix what was given.
    #[error("{why}")]
    BadModel {
        /// What is wrong, and the fix.
        why: String,
    },
    /// A mechanism this build of the library left out: its cargo feature is off.
    #[error(
        "mechanism {mechanism} is not in this build: quietwatt was compiled without its `{feature}` feature \
         (enable it: `quietwatt = {{ version = \"...\", features = [\"{feature}\"] }}`)"
    )]
    FeatureDisabled {
        /// The mechanism.
        mechanism: &'static str,
        /// The cargo feature that builds it.
        feature: &'static str,
    },
}

fn on_cpu(detail: &str, cpu: Option<u32>) -> String {
    match cpu {
        Some(c) => format!("{detail} on CPU {c}"),
        None => detail.to_string(),
    }
}

/// What a caller can do about an [`Error`], whatever its variant: give up, try the
/// same call again, carry on without a counter, fix what it passed, or measure
/// some other way. Modelled on Alumet's `PollError { Fatal, CanRetry, NormalStop }`,
/// with the two kinds a measuring library adds: the caller's mistake, and a machine
/// that cannot measure at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Something broke that the same call will hit again: a counter reading garbage,
    /// a kernel file of unexpected content, data a fit cannot use. Stop, and report it.
    Fatal,
    /// A transient refusal (EAGAIN, EINTR, EBUSY, ENOMEM, a timeout): the same call
    /// may succeed a moment later.
    CanRetry,
    /// A counter that worked went away (a CPU offline, a driver unloaded): what was
    /// measured before it stays valid; measure again without it, or stop.
    CounterVanished,
    /// The caller asked for something that cannot be: an unknown domain, too many
    /// channels, a window that is not open, a program that cannot run, a model file
    /// that is not one, a CPU that cannot be pinned to. Change the request.
    Usage,
    /// Nothing can measure here through what was asked: no RAPL, no permission, a
    /// mechanism that does not work on this machine or is not in this build. Grant
    /// access, or choose another mechanism.
    Unavailable,
    /// The output refused the data (disk full, device gone, reader gone): the
    /// measurement was fine and what was written before stays valid. Write elsewhere.
    Output,
}

impl Error {
    /// What the caller can do about this error (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { source, .. } => retry_or(source, ErrorKind::Fatal),
            Error::Parse { .. } | Error::CorruptCounter { .. } => ErrorKind::Fatal,
            Error::Permission { .. }
            | Error::NoDomains { .. }
            | Error::MechanismUnavailable { .. }
            | Error::FeatureDisabled { .. } => ErrorKind::Unavailable,
            Error::Vanished { .. } => ErrorKind::CounterVanished,
            Error::UnknownDomain { .. } | Error::BadModel { .. } => ErrorKind::Usage,
            Error::KernelSampling { source, .. } => retry_or(source, ErrorKind::Fatal),
        }
    }

    /// An I/O error on `path`, turned into a permission error with the fix when it is one.
    pub fn io(path: &Path, source: io::Error) -> Error {
        if source.kind() == io::ErrorKind::PermissionDenied {
            return Error::Permission {
                path: path.to_path_buf(),
                fix: permission_fix(path),
            };
        }
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// [`ErrorKind::CanRetry`] when the kernel's refusal is one that passes, else `otherwise`.
pub fn retry_or(e: &io::Error, otherwise: ErrorKind) -> ErrorKind {
    let transient = matches!(
        e.kind(),
        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    ) || matches!(e.raw_os_error(), Some(libc::EBUSY | libc::ENOMEM));
    if transient {
        ErrorKind::CanRetry
    } else {
        otherwise
    }
}

/// The fix for an unreadable counter file, by the kind of file.
pub fn permission_fix(path: &Path) -> String {
    let p = path.to_string_lossy();
    if p.contains("powercap") {
        format!(
            "energy_uj is readable by root only since CVE-2020-8694; run as root, or grant read access: \
             `sudo setfacl -m u:$USER:r {p}` (until reboot) or a udev rule \
             `SUBSYSTEM==\"powercap\", ACTION==\"add\", RUN+=\"/bin/chmod a+r /sys%p/energy_uj\"`"
        )
    } else if p.contains("/msr") {
        "reading MSRs needs CAP_SYS_RAWIO: run as root or `sudo setcap cap_sys_rawio=ep $(which quietwatt)`".into()
    } else {
        "run as root or grant read access to this file".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One error of each variant, with the kernel's answer where it carries one.
    fn one_of_each(source: fn() -> io::Error) -> Vec<Error> {
        let p = PathBuf::from("/sys/x");
        vec![
            Error::Io {
                path: p.clone(),
                source: source(),
            },
            Error::Parse {
                path: p.clone(),
                content: "x".into(),
                expected: "a number",
            },
            Error::Permission {
                path: p.clone(),
                fix: "run as root".into(),
            },
            Error::CorruptCounter {
                path: p.clone(),
                value: 9,
                modulus: 8,
            },
            Error::Vanished {
                path: p.clone(),
                source: source(),
            },
            Error::NoDomains {
                mechanism: "msr",
                root: p.clone(),
                why: "none".into(),
            },
            Error::UnknownDomain {
                asked: "gpu".into(),
                available: "package".into(),
            },
            Error::KernelSampling {
                cpu: Some(1),
                detail: "map the 64 KiB perf ring".into(),
                source: source(),
            },
            Error::MechanismUnavailable {
                mechanism: "perf",
                why: "no PMU".into(),
            },
            Error::BadModel {
                why: "corrupt".into(),
            },
            Error::FeatureDisabled {
                mechanism: "ebpf",
                feature: "bpf",
            },
        ]
    }

    /// The decision for each variant, given whether its kernel error is transient.
    /// No wildcard: a new variant does not compile until it is classified here too.
    fn expected(e: &Error, transient: bool) -> ErrorKind {
        let or_retry = |k| if transient { ErrorKind::CanRetry } else { k };
        match e {
            Error::Io { .. } => or_retry(ErrorKind::Fatal),
            Error::Parse { .. } => ErrorKind::Fatal,
            Error::Permission { .. } => ErrorKind::Unavailable,
            Error::CorruptCounter { .. } => ErrorKind::Fatal,
            Error::Vanished { .. } => ErrorKind::CounterVanished,
            Error::NoDomains { .. } => ErrorKind::Unavailable,
            Error::UnknownDomain { .. } => ErrorKind::Usage,
            Error::KernelSampling { .. } => or_retry(ErrorKind::Fatal),
            Error::MechanismUnavailable { .. } => ErrorKind::Unavailable,
            Error::BadModel { .. } => ErrorKind::Usage,
            Error::FeatureDisabled { .. } => ErrorKind::Unavailable,
        }
    }

    #[test]
    fn every_variant_has_a_kind() {
        let permanent = || io::Error::from_raw_os_error(libc::EIO);
        let transient = || io::Error::from_raw_os_error(libc::EAGAIN);
        let all = one_of_each(permanent);
        // Every variant is in the list once: the list and the match above agree.
        let distinct: std::collections::HashSet<_> =
            all.iter().map(std::mem::discriminant).collect();
        assert_eq!(distinct.len(), all.len());
        for e in &all {
            assert_eq!(e.kind(), expected(e, false), "{e:?}");
        }
        for e in &one_of_each(transient) {
            assert_eq!(e.kind(), expected(e, true), "{e:?}");
        }
    }

    #[test]
    fn a_refused_permission_is_a_machine_that_cannot_measure() {
        let e = Error::KernelSampling {
            cpu: Some(3),
            detail: "start the sampling group".into(),
            source: io::Error::from_raw_os_error(libc::EINVAL),
        };
        assert!(
            e.to_string()
                .starts_with("cannot start the sampling group on CPU 3: "),
            "{e}"
        );
        // A refused permission is a machine that cannot measure, not a bad request.
        let e = Error::io(
            Path::new("/sys/class/powercap/x/energy_uj"),
            io::ErrorKind::PermissionDenied.into(),
        );
        assert_eq!(e.kind(), ErrorKind::Unavailable);
    }
}
