//! The emulator's errors: each says what went wrong and, where the user can fix
//! it, how.

use std::io;
use std::path::PathBuf;

/// Anything that can go wrong configuring, mounting or unmounting the emulator.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration cannot describe a RAPL machine.
    #[error("invalid emulator configuration: {0}")]
    Config(String),

    /// A fault specification (`freeze:1/package@1.5s`) does not parse.
    #[error("invalid fault '{spec}': {why} (expected KIND[=JOULES]:SOCKET/DOMAIN[@TIME], KIND one of eacces, vanish, freeze, garbage, overrange, reset, backstep, jump; JOULES for backstep and jump only; e.g. freeze:0/package@1.5s, backstep=2J:0/dram@1s)")]
    FaultSpec {
        /// The text given.
        spec: String,
        /// What is wrong with it.
        why: String,
    },

    /// A power specification (`package=30,1/dram=5`) does not parse.
    #[error("invalid power '{spec}': {why} (expected [SOCKET/]DOMAIN=WATTS[,...], DOMAIN one of package, core, uncore, dram, platform, e.g. package=30,core=15,1/dram=6)")]
    PowerSpec {
        /// The text given.
        spec: String,
        /// What is wrong with it.
        why: String,
    },

    /// A power trace does not parse.
    #[error("invalid power trace {origin} line {line}: {why} (expected lines 'time_s,scale', times increasing from 0)")]
    Trace {
        /// The file, or `<text>`.
        origin: String,
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it.
        why: String,
    },

    /// A power trace file cannot be read.
    #[error("cannot read power trace {path}: {source}")]
    TraceFile {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },

    /// The mount point is unusable (missing, not a directory, not empty).
    #[error("mount point {path}: {why}")]
    MountPoint {
        /// The directory asked for.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },

    /// The FUSE mount itself failed.
    #[error("cannot mount the emulator at {path}: {source}; {hint}")]
    Mount {
        /// The mount point.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
        /// How to fix it.
        hint: String,
    },

    /// The child process serving the emulator ([`crate::ChildEmulator`]) could
    /// not start, mount or unmount: what it said.
    #[error("{0}")]
    Child(String),

    /// Unmounting failed.
    #[error("cannot unmount the emulator at {path}: {source}")]
    Unmount {
        /// The mount point.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

/// The emulator's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The advice for a failed FUSE mount, from its error.
pub(crate) fn mount_hint(err: &io::Error) -> String {
    let root = euid() == 0;
    let fuse_dev = std::path::Path::new("/dev/fuse").exists();
    if !fuse_dev {
        return "there is no /dev/fuse: load the module (`modprobe fuse`), or in a container \
                pass the device (`docker run --device /dev/fuse --cap-add SYS_ADMIN ...`)"
            .to_string();
    }
    match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) if root => {
            "mounting needs CAP_SYS_ADMIN in the initial user namespace; in a container add \
             `--cap-add SYS_ADMIN` (and `--device /dev/fuse`)"
                .to_string()
        }
        _ if !root => "mount as root (`sudo`), or install fuse3 (`apt-get install fuse3`) for \
                       the setuid fusermount3 helper and enable `user_allow_other` in \
                       /etc/fuse.conf (the emulator mounts with allow_other)"
            .to_string(),
        _ if err.kind() == io::ErrorKind::NotFound => {
            "the kernel refused the direct mount and no fusermount3 helper was found: \
             install fuse3 (`apt-get install fuse3`)"
                .to_string()
        }
        _ => "check that /dev/fuse is usable (`modprobe fuse`) and that the mount point is a \
              local directory"
            .to_string(),
    }
}

/// The effective user id.
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}
