//! The mount the emulator's integration tests share.

use quietwatt_emulator::{Emulator, EmulatorConfig};
use std::fs;
use std::os::unix::fs::PermissionsExt;

/// A mounted emulator in a temporary directory. The emulator is declared first so
/// that it is dropped (unmounted) before the directory is removed.
pub struct Mounted {
    pub emu: Emulator,
    pub _dir: tempfile::TempDir,
}

/// Mounts `config`; fails loudly where FUSE cannot be used.
pub fn mount(config: EmulatorConfig) -> Mounted {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    // Let other users traverse to the mount (tests read and write as nobody).
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    let mnt = dir.path().join("root");
    fs::create_dir(&mnt).expect("create the mount point");
    match Emulator::mount(&mnt, config) {
        Ok(emu) => Mounted { emu, _dir: dir },
        Err(e) => panic!(
            "\n\n*** quietwatt-emulator: these tests mount a FUSE filesystem and must run \
             as root with /dev/fuse present. Mounting failed:\n*** {e}\n\n"
        ),
    }
}
