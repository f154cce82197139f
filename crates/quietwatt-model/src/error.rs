//! The energy models' errors: a scenario that cannot run, a model file that cannot
//! be used, a fit the data cannot support, or a measurement that failed (the
//! engine's [`quietwatt::Error`], kept whole).

use quietwatt::ErrorKind;
use quietwatt_stats::fit::FitError;
use std::io;
use std::path::PathBuf;

/// Shorthand for results in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while building, saving or using an energy model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Measuring failed: the engine's error, with its own kind.
    #[error(transparent)]
    Measure(#[from] quietwatt::Error),
    /// An energy-model scenario could not set itself up or run (mmap, fork, a pipe,
    /// a thread, a perf counter).
    #[error("model scenario: cannot {what}: {source}")]
    Scenario {
        /// What was attempted, with the values involved.
        what: String,
        /// What the kernel said.
        source: io::Error,
    },
    /// A model file could not be read, parsed or written.
    #[error("model file {path}: {why}")]
    ModelFile {
        /// The file.
        path: PathBuf,
        /// What is wrong, and what to do.
        why: String,
    },
    /// Measured data that a least-squares fit cannot use (too few runs, one count only).
    #[error(transparent)]
    Fit(#[from] FitError),
}

impl Error {
    /// What the caller can do about this error, in the engine's terms.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Measure(e) => e.kind(),
            Error::Scenario { source, .. } => {
                let transient =
                    matches!(
                        source.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                    ) || matches!(source.raw_os_error(), Some(libc::EBUSY | libc::ENOMEM));
                if transient {
                    ErrorKind::CanRetry
                } else {
                    ErrorKind::Fatal
                }
            }
            Error::ModelFile { .. } => ErrorKind::Usage,
            Error::Fit(_) => ErrorKind::Fatal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_says_what_the_caller_can_do() {
        let busy = Error::Scenario {
            what: "fork".into(),
            source: io::Error::from_raw_os_error(libc::EAGAIN),
        };
        assert_eq!(busy.kind(), ErrorKind::CanRetry);
        let broken = Error::Scenario {
            what: "mmap".into(),
            source: io::Error::from_raw_os_error(libc::EIO),
        };
        assert_eq!(broken.kind(), ErrorKind::Fatal);
        let file = Error::ModelFile {
            path: "m.json".into(),
            why: "not JSON".into(),
        };
        assert_eq!(file.kind(), ErrorKind::Usage);
        let fit = quietwatt_stats::fit::ols(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0], "pagefault time")
            .unwrap_err();
        assert!(fit.to_string().contains("pagefault time"), "{fit}");
        assert_eq!(Error::from(fit).kind(), ErrorKind::Fatal);
        let vanished = Error::from(quietwatt::Error::from(quietwatt::SourceError::Vanished {
            path: "/dev/cpu/0/msr".into(),
            source: io::Error::from_raw_os_error(libc::ENODEV),
        }));
        assert_eq!(vanished.kind(), ErrorKind::CounterVanished);
    }
}
