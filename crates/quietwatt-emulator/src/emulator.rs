//! The mounted emulator: the handle tests and the CLI hold.

use crate::config::EmulatorConfig;
use crate::error::{mount_hint, Error, Result};
use crate::fault::{Fault, FaultSet};
use crate::fs::EmulatorFs;
use crate::layout::{self};
use crate::shared::{CounterStep, Shared, TruthReport};
use crate::truth::{GroundTruth, Mechanism, Served, ServedLog};
use quietwatt_core::{Domain, Joules};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime};

/// A mounted RAPL emulator. Dropping it (or [`Emulator::unmount`]) unmounts.
///
/// ```no_run
/// use quietwatt_emulator::{Emulator, EmulatorConfig};
/// let dir = std::path::Path::new("/tmp/emu");
/// let emu = Emulator::mount(dir, EmulatorConfig::default())?;
/// let uj = std::fs::read_to_string(dir.join("sys/class/powercap/intel-rapl:0/energy_uj"))?;
/// println!("{uj} (truth {:?})", emu.truth(0, quietwatt_core::Domain::Package));
/// emu.unmount()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Emulator {
    shared: Arc<Shared>,
    session: Option<fuser::BackgroundSession>,
}

impl Emulator {
    /// Mounts a FUSE filesystem at `dir` (an existing empty directory) serving the
    /// emulated tree from a background thread. Needs root (or CAP_SYS_ADMIN) and
    /// `/dev/fuse`; the error says what to do when the mount fails.
    pub fn mount(dir: impl AsRef<Path>, config: EmulatorConfig) -> Result<Emulator> {
        config.validate()?;
        let dir = check_mountpoint(dir.as_ref())?;
        let truth = GroundTruth::new(&config);
        let tree = layout::build(&config, &truth, &dir);
        let mut faults = FaultSet::default();
        for f in &config.faults {
            faults.add(*f, 0);
        }
        let shared = Arc::new(Shared {
            unit_register: config.unit_register(),
            config,
            truth,
            tree,
            faults: RwLock::new(faults),
            served: Mutex::new(ServedLog::default()),
            mounted_at: SystemTime::now(),
            mountpoint: dir.clone(),
        });
        let mut options = fuser::Config::default();
        options.mount_options = vec![fuser::MountOption::FSName(FS_NAME.to_string())];
        options.acl = fuser::SessionACL::All;
        let session = fuser::spawn_mount(EmulatorFs::new(Arc::clone(&shared)), &dir, &options)
            .map_err(|source| Error::Mount {
                path: dir.clone(),
                hint: mount_hint(&source),
                source,
            })?;
        Ok(Emulator {
            shared,
            session: Some(session),
        })
    }

    /// The mount point (canonical).
    pub fn dir(&self) -> &Path {
        &self.shared.mountpoint
    }

    /// The configuration served.
    pub fn config(&self) -> &EmulatorConfig {
        &self.shared.config
    }

    /// Time since the mount.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.shared.now_ns())
    }

    /// The exact energy (socket, domain) has drawn by now, since emulated time 0
    /// (the mount, less `start_offset`), whatever the faults (steps included). Zero
    /// for a domain that is not emulated (psys: on any socket but the psys master).
    /// AMD `core` is the sum of every core. BIOS-disabled psys still draws: its
    /// truth grows while its counter reads 0.
    pub fn truth(&self, socket: u32, domain: Domain) -> Joules {
        self.shared.truth.truth(socket, domain)
    }

    /// The busy CPU time of `socket`'s CPUs that the load-following package power
    /// ([`crate::LoadFollowing`]) has counted from the mount to now; `None` without
    /// it. The package's energy is `idle_w × elapsed + per_cpu_w × busy` (a trace
    /// scales the idle part), plus, with `per_ghz_w`, the frequency term
    /// ([`Emulator::dynamic`] is the whole dynamic part).
    pub fn busy(&self, socket: u32) -> Option<Duration> {
        self.shared.truth.busy(socket)
    }

    /// The energy `socket`'s busy CPUs drew beyond the idle power, as the
    /// load-following package power ([`crate::LoadFollowing`]) counted it from the
    /// mount to now: `Σ over its CPUs ∫ (per_cpu_w + per_ghz_w × f) d busy`. `None`
    /// without it.
    pub fn dynamic(&self, socket: u32) -> Option<Joules> {
        self.shared.truth.followed(socket).map(|(_, j)| j)
    }

    /// What (socket, domain)'s counter served through `mechanism` between its first
    /// and its last read, converted as a correct reader of that mechanism converts
    /// it (powercap: µJ with the kernel's whole-nanojoule unit, e.g. 15300 nJ for
    /// Skylake-X DRAM; MSR: the hardware unit, quirks applied); `None` before any
    /// read. powercap counts both `intel-rapl` and `intel-rapl-mmio` zones. AMD
    /// `core` adds every core read (powercap's `core` zone reads only core 0).
    /// Steps (reset, backstep, jump) are taken out of the values and bounded by
    /// [`Served::step_span_j`]: see [`Served`]. psys read on a CPU of a package
    /// that is not the psys master serves nothing (it reads 0) and is not counted.
    pub fn served(&self, mechanism: Mechanism, socket: u32, domain: Domain) -> Option<Served> {
        self.shared.served(Some(mechanism), socket, domain)
    }

    /// Like [`Emulator::served`], over reads through any mechanism (the earliest
    /// first read and the latest last read of the counter), in the hardware unit.
    pub fn served_any(&self, socket: u32, domain: Domain) -> Option<Served> {
        self.shared.served(None, socket, domain)
    }

    /// Forgets what was served so far.
    pub fn reset_served(&self) {
        self.shared.served_log().reset();
    }

    /// Injects `fault` now (or at its `@TIME` after the mount). A freeze or a step
    /// never starts in the past: that would change values already served. Errors
    /// when the (socket, domain) is not emulated (psys: only on the psys master) or
    /// a backstep/jump amount is not under half the counter's range.
    pub fn inject(&self, fault: Fault) -> Result<()> {
        self.shared
            .config
            .check_fault(&fault)
            .map_err(|why| Error::FaultSpec {
                spec: fault.to_string(),
                why,
            })?;
        let now = self.shared.now_ns();
        self.shared
            .faults
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .add(fault, now);
        Ok(())
    }

    /// Removes every fault (a frozen counter jumps to its live value; a counter moved
    /// by steps goes back to counting from the mount).
    pub fn clear_faults(&self) {
        self.shared
            .faults
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    /// The faults in force.
    pub fn faults(&self) -> Vec<Fault> {
        self.shared.faults().faults()
    }

    /// The steps (reset, backstep, jump faults) of (socket, domain)'s counter in
    /// time order, scheduled or done: when each takes effect and how far it moves
    /// the register. Empty when there are none.
    pub fn steps(&self, socket: u32, domain: Domain) -> Vec<CounterStep> {
        self.shared.counter_steps(socket, domain)
    }

    /// The truth report (what `truth.json` serves).
    pub fn report(&self) -> TruthReport {
        self.shared.report()
    }

    /// The script that runs a command seeing this emulator as `/`:
    /// `sh <this> COMMAND...` (as root; see the `namespace` docs).
    pub fn enter_script(&self) -> PathBuf {
        self.dir().join(".quietwatt-emulator/enter.sh")
    }

    /// Whether the mount is still served: false once someone else unmounted it
    /// (`fusermount3 -u`, `umount`) and the FUSE thread ended.
    pub fn is_mounted(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| !s.guard.is_finished())
    }

    /// Unmounts, reporting errors (dropping unmounts too, silently). A mount still
    /// in use (a process's working directory, an open file) is detached lazily:
    /// it disappears from the directory at once and stops when the last user closes it.
    pub fn unmount(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        let Some(session) = self.session.take() else {
            return Ok(());
        };
        let result = umount(&self.shared.mountpoint);
        // The FUSE thread ends when the kernel closes the connection: at once,
        // unless another mount namespace still holds a copy of the mount.
        let deadline = Instant::now() + Duration::from_secs(2);
        while !session.guard.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        if session.guard.is_finished() {
            let _ = session.join();
        } else {
            drop(session);
        }
        result
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// Unmounts `dir`; lazily when busy; fine when already unmounted.
fn umount(dir: &Path) -> Result<()> {
    let err = |source| Error::Unmount {
        path: dir.to_path_buf(),
        source,
    };
    let c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| err(std::io::Error::from(std::io::ErrorKind::InvalidInput)))?;
    // SAFETY: `c` is a valid NUL-terminated path for the duration of the call.
    if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EBUSY) => {
            // SAFETY: as above.
            if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
                Ok(())
            } else {
                Err(err(std::io::Error::last_os_error()))
            }
        }
        // Not mounted any more (unmounted by hand).
        Some(libc::EINVAL) => Ok(()),
        _ => Err(err(e)),
    }
}

/// Checks that `dir` is an existing empty directory; returns it canonical.
fn check_mountpoint(dir: &Path) -> Result<PathBuf> {
    let bad = |why: String| Error::MountPoint {
        path: dir.to_path_buf(),
        why,
    };
    let meta = std::fs::metadata(dir).map_err(|e| bad(format!("{e} (create it first)")))?;
    if !meta.is_dir() {
        return Err(bad("not a directory".to_string()));
    }
    let mut entries = std::fs::read_dir(dir).map_err(|e| bad(e.to_string()))?;
    if entries.next().is_some() {
        return Err(bad(
            "not empty (the emulator would hide what it holds; use an empty directory)".to_string(),
        ));
    }
    dir.canonicalize().map_err(|e| bad(e.to_string()))
}

/// The file-system name the emulator mounts with, as the kernel's mount table shows it.
pub const FS_NAME: &str = "quietwatt-emulator";

/// Whether `dir` is the mount point of a quietwatt emulator (this process's or
/// another's), from the kernel's mount table, so that a figure read under it can be
/// labelled as emulated.
pub fn serves(dir: &Path) -> bool {
    let Ok(dir) = dir.canonicalize() else {
        return false;
    };
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return false;
    };
    mounts.lines().any(|line| {
        let mut fields = line.split(' ');
        let (Some(source), Some(target)) = (fields.next(), fields.next()) else {
            return false;
        };
        // The mount table escapes spaces and a few other bytes as octal.
        source == FS_NAME && Path::new(&target.replace("\\040", " ")) == dir
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handle_can_move_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Emulator>();
        send_sync::<TruthReport>();
    }

    #[test]
    fn mount_points_must_be_empty_directories() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check_mountpoint(dir.path()).is_ok());
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        assert!(check_mountpoint(&file)
            .unwrap_err()
            .to_string()
            .contains("not a directory"));
        assert!(check_mountpoint(dir.path())
            .unwrap_err()
            .to_string()
            .contains("not empty"));
        let missing = check_mountpoint(&dir.path().join("nope"))
            .unwrap_err()
            .to_string();
        assert!(missing.contains("create it first"), "{missing}");
    }
}
