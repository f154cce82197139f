//! Shared by the CLI's integration tests: an emulator mounted in a temporary
//! directory, and the `quietwatt` binary run against it.
#![allow(dead_code)]

use quietwatt::Domain;
use quietwatt_emulator::{Emulator, EmulatorConfig, Mechanism as Served};
use std::path::Path;
use std::process::{Command, Output};

/// A mounted emulator and its directory (dropped in this order: unmount, then remove).
pub struct Mounted {
    pub emulator: Emulator,
    pub dir: tempfile::TempDir,
}

impl Mounted {
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Energy the emulator served between the first and the last powercap read of a domain.
    pub fn served_powercap(&self, socket: u32, domain: Domain) -> f64 {
        self.served(Served::Powercap, socket, domain)
    }

    /// Energy served between the first and the last read of a domain through `mechanism`.
    pub fn served(&self, mechanism: Served, socket: u32, domain: Domain) -> f64 {
        self.served_record(mechanism, socket, domain).energy().0
    }

    /// Energy served between the second and the last read of a domain through
    /// `mechanism`: what a mechanism that probes each counter once while opening
    /// (MSR, to leave out registers that fault) counts from.
    pub fn served_after_probe(&self, mechanism: Served, socket: u32, domain: Domain) -> f64 {
        self.served_record(mechanism, socket, domain)
            .energy_after_probe()
            .0
    }

    /// Everything the emulator served of a domain through `mechanism`: energies and times.
    pub fn served_record(
        &self,
        mechanism: Served,
        socket: u32,
        domain: Domain,
    ) -> quietwatt_emulator::Served {
        self.emulator
            .served(mechanism, socket, domain)
            .unwrap_or_else(|| {
                panic!("the emulator served no {mechanism:?} read of {socket}/{domain}")
            })
    }
}

/// Mounts `config`; fails loudly when FUSE cannot be used (these tests must run in CI).
pub fn mount(config: EmulatorConfig) -> Mounted {
    let dir = tempfile::tempdir().expect("tempdir");
    let emulator = Emulator::mount(dir.path(), config).unwrap_or_else(|e| {
        panic!(
            "cannot mount the RAPL emulator ({e}). These tests need FUSE: run them as root \
             on a machine with /dev/fuse (or install fuse3 for fusermount3)."
        )
    });
    Mounted { emulator, dir }
}

/// Runs `quietwatt --root ROOT ARGS...`.
pub fn quietwatt(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("--root")
        .arg(root)
        .args(args)
        .env_remove("QUIETWATT_ROOT")
        .output()
        .expect("run quietwatt")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The tolerance of the issue: 0.5 %, or one RAPL update (1 ms) of energy at `watts`.
pub fn tolerance(expected_j: f64, watts: f64) -> f64 {
    (expected_j * 0.005).max(watts * 0.001)
}
