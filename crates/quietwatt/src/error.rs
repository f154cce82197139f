//! The library's errors. Each carries what a user needs to act on it; the CLI adds
//! the wording and the exit code.

use std::io;
use std::path::{Path, PathBuf};

/// Shorthand for results in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while discovering or reading energy counters.
#[derive(Debug, thiserror::Error)]
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
    #[error(
        "{count} channels selected but a sample holds at most {max}; select fewer with --domains"
    )]
    TooManyChannels {
        /// Channels selected.
        count: usize,
        /// The record's capacity.
        max: usize,
    },
    /// The sampling engine could not set itself up (a thread, a timer, CPU pinning).
    #[error("cannot {what}: {source}")]
    Engine {
        /// What was attempted, with the value involved.
        what: String,
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
    /// A session was asked to end a window that is not open.
    #[error("no window named '{name}' is open in this session (open: {open})")]
    UnknownWindow {
        /// The name asked for.
        name: String,
        /// The windows open, oldest first.
        open: String,
    },
    /// Measured data that a least-squares fit cannot use (too few runs, one count only).
    #[error("cannot fit {what}: {why}")]
    Fit {
        /// The fit (scenario and quantity).
        what: String,
        /// Why.
        why: String,
    },
}

impl Error {
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
