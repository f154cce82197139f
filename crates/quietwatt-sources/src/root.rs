//! The root directory every system path is looked up under: `/` on a real machine,
//! an emulator's mount point in tests (`--root DIR`, `QUIETWATT_ROOT`).

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Where `/sys`, `/dev` and `/proc` are found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysRoot {
    root: PathBuf,
}

impl Default for SysRoot {
    fn default() -> Self {
        SysRoot {
            root: PathBuf::from("/"),
        }
    }
}

impl SysRoot {
    /// A root at `dir`; `/` is the real system.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SysRoot { root: dir.into() }
    }

    /// The root directory itself.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// Whether this is the real system root.
    pub fn is_system(&self) -> bool {
        self.root == Path::new("/")
    }

    /// `rel` (written as an absolute system path, e.g. `/sys/class/powercap`) under the root.
    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        let rel = rel.as_ref();
        self.root.join(rel.strip_prefix("/").unwrap_or(rel))
    }

    /// Reads a small text file under the root, trimmed.
    pub fn read_trimmed(&self, rel: impl AsRef<Path>) -> Result<String> {
        read_trimmed(&self.path(rel))
    }
}

/// Reads a small text file, trimmed, with the path in the error.
pub fn read_trimmed(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_system_paths_land_under_the_root() {
        let r = SysRoot::new("/tmp/emu");
        assert_eq!(
            r.path("/sys/class/powercap"),
            PathBuf::from("/tmp/emu/sys/class/powercap")
        );
        assert_eq!(
            SysRoot::default().path("/proc/cpuinfo"),
            PathBuf::from("/proc/cpuinfo")
        );
    }
}
