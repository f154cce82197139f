//! The engine's errors: what went wrong finding or reading the counters (the
//! sources' [`SourceError`], kept whole), and what can go wrong around them (a
//! command that cannot start, an output that refuses writes, a set-up step the
//! kernel refused, a window that is not open). Each carries what a user needs to
//! act on it, and [`Error::kind`] says what a caller can do; the CLI adds the
//! wording and the exit code.

use std::io;
use std::path::PathBuf;

use quietwatt_sources::error::retry_or;
pub use quietwatt_sources::error::{permission_fix, ErrorKind, Result as SourceResult};
pub use quietwatt_sources::Error as SourceError;

/// Shorthand for results in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while measuring.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Finding or reading the counters failed (see [`SourceError`]: a missing or
    /// unreadable counter, one that vanished or reads garbage, a mechanism that
    /// cannot be used here).
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The command to measure could not be started.
    #[error("cannot run '{program}': {source}")]
    Spawn {
        /// The program.
        program: String,
        /// What the kernel said.
        source: io::Error,
    },
    /// Writing the output failed (disk full, device gone); what was written before stays valid.
    #[error("writing {path} failed: {source}; the samples written before this error are complete")]
    Output {
        /// The output file.
        path: PathBuf,
        /// What the kernel said.
        source: io::Error,
    },
    /// More counters than one sample record holds.
    #[error("{count} channels selected but a sample holds at most {max}; select fewer domains")]
    TooManyChannels {
        /// Channels selected.
        count: usize,
        /// The record's capacity.
        max: usize,
    },
    /// The sampling engine could not set itself up (a timer, a thread, CPU pinning).
    #[error("cannot {step}: {source}")]
    Setup {
        /// What was being set up.
        step: SetupStep,
        /// What the kernel said.
        source: io::Error,
    },
    /// A session was asked to end a window that is not open.
    #[error("no window named '{name}' is open in this session (open: {open})")]
    UnknownWindow {
        /// The name asked for.
        name: String,
        /// The windows open, oldest first.
        open: String,
    },
    /// A meter built from channel descriptions alone (`Meter::for_channels`) was
    /// asked to read: it has no source, and is given readings taken elsewhere.
    #[error("this {mechanism} meter has no source to read: it is given readings taken elsewhere (Meter::feed); read through a meter made with Meter::new")]
    NothingToRead {
        /// The mechanism of the readings it is given.
        mechanism: &'static str,
    },
    /// A mechanism that samples in the kernel (ebpf, perf-ring) asked of a session
    /// without a rate: it needs the session's background thread to drain it.
    #[error("mechanism {mechanism} samples in the kernel and is drained by a background thread: give the session a rate (the kernel's sampling rate), or measure without one through perf, powercap or msr")]
    NeedsRate {
        /// The mechanism.
        mechanism: &'static str,
    },
}

/// What the engine was setting up when the kernel refused ([`Error::Setup`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetupStep {
    /// Creating or arming a timerfd (a sampler's, or a benchmark loop's).
    Timer,
    /// Starting one of quietwatt's threads (its name or role).
    Thread(&'static str),
    /// Pinning a thread to a CPU: an offline CPU, or one outside this process's set.
    Pin {
        /// The CPU asked for.
        cpu: usize,
    },
}

impl std::fmt::Display for SetupStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetupStep::Timer => write!(f, "create or arm a timerfd"),
            SetupStep::Thread(name) => write!(f, "start a thread ({name})"),
            SetupStep::Pin { cpu } => write!(
                f,
                "pin a thread to CPU {cpu}: give an online CPU that this process may use"
            ),
        }
    }
}

impl Error {
    /// What the caller can do about this error (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Source(e) => e.kind(),
            // A program that does not exist or cannot be executed is the caller's to
            // fix; a fork refused for want of resources may pass.
            Error::Spawn { source, .. } => retry_or(source, ErrorKind::Usage),
            Error::Output { .. } => ErrorKind::Output,
            Error::TooManyChannels { .. }
            | Error::UnknownWindow { .. }
            | Error::NothingToRead { .. }
            | Error::NeedsRate { .. } => ErrorKind::Usage,
            // A CPU to pin to is a value the caller gave (offline, or out of its set).
            Error::Setup {
                step: SetupStep::Pin { .. },
                source,
            } if !matches!(source.raw_os_error(), Some(libc::EPERM)) => ErrorKind::Usage,
            Error::Setup { source, .. } => retry_or(source, ErrorKind::Fatal),
        }
    }

    /// The sources' error, when this is one: to tell a vanished counter or a
    /// refused permission apart without matching two levels.
    pub fn as_source(&self) -> Option<&SourceError> {
        match self {
            Error::Source(e) => Some(e),
            _ => None,
        }
    }

    /// An I/O error on `path`, turned into a permission error with the fix when
    /// it is one (see [`SourceError::io`]).
    pub fn io(path: &std::path::Path, source: io::Error) -> Error {
        Error::Source(SourceError::io(path, source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn every_engine_error_says_what_the_caller_can_do() {
        let eio = || io::Error::from_raw_os_error(libc::EIO);
        let eagain = || io::Error::from_raw_os_error(libc::EAGAIN);
        let cases = [
            (
                Error::Spawn {
                    program: "x".into(),
                    source: io::ErrorKind::NotFound.into(),
                },
                ErrorKind::Usage,
            ),
            (
                Error::Spawn {
                    program: "x".into(),
                    source: eagain(),
                },
                ErrorKind::CanRetry,
            ),
            (
                Error::Output {
                    path: "o.csv".into(),
                    source: eio(),
                },
                ErrorKind::Output,
            ),
            (
                Error::TooManyChannels { count: 99, max: 8 },
                ErrorKind::Usage,
            ),
            (
                Error::UnknownWindow {
                    name: "w".into(),
                    open: String::new(),
                },
                ErrorKind::Usage,
            ),
            (
                Error::NothingToRead {
                    mechanism: "powercap",
                },
                ErrorKind::Usage,
            ),
            (
                Error::NeedsRate {
                    mechanism: "perf-ring",
                },
                ErrorKind::Usage,
            ),
            (
                Error::Setup {
                    step: SetupStep::Thread("quietwatt-sampler"),
                    source: eagain(),
                },
                ErrorKind::CanRetry,
            ),
            (
                Error::Setup {
                    step: SetupStep::Timer,
                    source: io::Error::from_raw_os_error(libc::EINVAL),
                },
                ErrorKind::Fatal,
            ),
            (
                Error::Setup {
                    step: SetupStep::Pin { cpu: 999 },
                    source: io::Error::from_raw_os_error(libc::EINVAL),
                },
                ErrorKind::Usage,
            ),
            // The sources' kind passes through unchanged.
            (
                Error::io(
                    Path::new("/sys/class/powercap/x/energy_uj"),
                    io::ErrorKind::PermissionDenied.into(),
                ),
                ErrorKind::Unavailable,
            ),
            (
                Error::from(SourceError::Vanished {
                    path: "/dev/cpu/1/msr".into(),
                    source: io::Error::from_raw_os_error(libc::ENXIO),
                }),
                ErrorKind::CounterVanished,
            ),
        ];
        for (e, kind) in &cases {
            assert_eq!(e.kind(), *kind, "{e:?}");
        }
        let pin = &cases[9].0;
        assert!(
            pin.to_string().contains("CPU 999: give an online CPU"),
            "{pin}"
        );
        assert!(cases[10].0.as_source().is_some() && cases[0].0.as_source().is_none());
    }
}
