//! The environment a command measures in: the real system (or `--root`), or
//! quietwatt's built-in emulator mounted for the duration of the command.

use crate::exit::{Failure, NO_RAPL};
use quietwatt::source::{probe_all, Probe};
use quietwatt::SysRoot;
use quietwatt_emulator::{ChildEmulator, EmulatorConfig};
use std::path::Path;

/// When to use the built-in emulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum When {
    /// Never: measure the real machine (or `--root`).
    Off,
    /// Only when no mechanism can measure under the root.
    Auto,
    /// Always.
    On,
}

/// Where to measure, and the emulator kept alive while measuring there.
pub struct Environment {
    /// The root every mechanism reads under.
    pub root: SysRoot,
    /// The mounted emulator, when measuring against it: served by a child process
    /// ([`ChildEmulator`]: a fatal signal cannot leave this process stuck in a read
    /// of its own mount). Dropped before the directory it is mounted on.
    emulator: Option<(ChildEmulator, tempfile::TempDir)>,
    /// Whether `--root` itself is an emulator mounted by `quietwatt emulate`.
    served_by_emulator: bool,
}

impl Environment {
    /// Mounts the emulator if `when` asks for it.
    pub fn prepare(root: &Path, when: When) -> Result<Environment, Failure> {
        let root = SysRoot::new(root);
        let need = match when {
            When::Off => false,
            When::On => true,
            // A mechanism that opens but whose counters never move (a hypervisor's
            // constant RAPL events) cannot measure either.
            When::Auto => !probe_all(&root).iter().any(Probe::measures),
        };
        if !need {
            let served = quietwatt_emulator::serves(root.dir());
            return Ok(Environment {
                root,
                emulator: None,
                served_by_emulator: served,
            });
        }
        let dir = tempfile::Builder::new()
            .prefix("quietwatt-emulator-")
            .tempdir()
            .map_err(|e| {
                Failure::new(
                    NO_RAPL,
                    format!("cannot create a directory for the emulator: {e}"),
                )
            })?;
        let config = EmulatorConfig::default();
        private_mount_namespace();
        let emulator = ChildEmulator::mount(dir.path(), config).map_err(|e| {
            Failure::new(NO_RAPL, format!("cannot start the built-in emulator: {e}"))
        })?;
        eprintln!(
            "quietwatt: *** EMULATED RAPL *** {} measuring against quietwatt's built-in emulator at {}: \
             every figure below is read from the emulator (a known, constant power profile), NOT from this machine's hardware",
            if when == When::Auto {
                "no mechanism can measure on this machine (see `quietwatt doctor`);"
            } else {
                "--emulate on:"
            },
            dir.path().display()
        );
        Ok(Environment {
            root: SysRoot::new(dir.path()),
            emulator: Some((emulator, dir)),
            served_by_emulator: true,
        })
    }

    /// Whether figures come from the emulator: the built-in one, or one that
    /// `quietwatt emulate` mounted at `--root`.
    pub fn is_emulated(&self) -> bool {
        self.emulator.is_some() || self.served_by_emulator
    }

    /// The emulator's configuration when figures come from an emulator whose power
    /// is constant over time (no trace that changes it, no fault that changes what
    /// is served), so that the true value of a statistic is known: 0 J per event,
    /// and the configured watts in every interval. `None` on real hardware, or when
    /// the truth is not that simple.
    pub fn constant_emulator(&self) -> Option<EmulatorConfig> {
        let config = match &self.emulator {
            Some((e, _)) => e.config().clone(),
            None if self.served_by_emulator => {
                // `quietwatt emulate` serves its configuration beside the counters.
                let path = self.root.dir().join(".quietwatt-emulator/config.json");
                serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?
            }
            None => return None,
        };
        let flat = config
            .power
            .trace
            .as_ref()
            .is_none_or(|t| t.points.iter().all(|p| p.scale == 1.0));
        // A load-following package draws what this machine runs: not constant.
        (flat && config.faults.is_empty() && config.power.follow.is_none()).then_some(config)
    }

    /// The true total power (W) of `ids` by the engine's total rule, when
    /// [`Environment::constant_emulator`] knows it.
    pub fn true_total_watts(&self, ids: &[quietwatt::DomainId]) -> Option<f64> {
        let config = self.constant_emulator()?;
        quietwatt::domain::total_members(ids)
            .iter()
            .map(|&i| config.watts(ids[i].socket.0, ids[i].domain))
            .sum()
    }
}

/// Moves this process (and what it starts from now on: the emulator's process,
/// the measured command) into a mount namespace of its own, whose mounts do not
/// propagate back. The built-in emulator is mounted there, so that however
/// quietwatt ends (SIGKILL, a signal before its handlers are installed, SIGUSR1,
/// a crash) the kernel drops the mount with the namespace: no "Transport endpoint
/// is not connected" directory is left behind. Without the privilege (not root)
/// nothing changes and the emulator is unmounted on the way out as before.
fn private_mount_namespace() {
    // SAFETY: plain system calls with valid constant arguments; called while the
    // process has one thread, so every later thread inherits the namespace.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return;
        }
        let root = c"/";
        // Private, recursively: a mount made here must not appear in the parent
        // namespace through shared propagation.
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        );
    }
}
