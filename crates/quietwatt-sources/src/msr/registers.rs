//! The RAPL registers and the `/dev/cpu/N/msr` device they are read through: one
//! `pread` per register, and what its errors mean.

use crate::error::{Error, Result};
use crate::root::SysRoot;
use crate::Mechanism;
use quietwatt_core::domain::Domain;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Intel `MSR_RAPL_POWER_UNIT`.
pub const MSR_RAPL_POWER_UNIT: u64 = 0x606;
/// Intel `MSR_PKG_ENERGY_STATUS`.
pub const MSR_PKG_ENERGY_STATUS: u64 = 0x611;
/// Intel `MSR_DRAM_ENERGY_STATUS`.
pub const MSR_DRAM_ENERGY_STATUS: u64 = 0x619;
/// Intel `MSR_PP0_ENERGY_STATUS` (cores).
pub const MSR_PP0_ENERGY_STATUS: u64 = 0x639;
/// Intel `MSR_PP1_ENERGY_STATUS` (uncore, usually the integrated GPU).
pub const MSR_PP1_ENERGY_STATUS: u64 = 0x641;
/// Intel `MSR_PLATFORM_ENERGY_STATUS` (psys).
pub const MSR_PLATFORM_ENERGY_STATUS: u64 = 0x64D;
/// Intel `MSR_PKG_POWER_INFO`: the package's thermal spec and maximum power.
pub const MSR_PKG_POWER_INFO: u64 = 0x614;
/// Intel `MSR_DRAM_POWER_INFO`: dram's thermal spec and maximum power.
pub const MSR_DRAM_POWER_INFO: u64 = 0x61C;
/// AMD `MSR_AMD_RAPL_POWER_UNIT`.
pub const MSR_AMD_RAPL_POWER_UNIT: u64 = 0xC001_0299;
/// AMD `MSR_AMD_CORE_ENERGY_STATUS` (per core).
pub const MSR_AMD_CORE_ENERGY_STATUS: u64 = 0xC001_029A;
/// AMD `MSR_AMD_PKG_ENERGY_STATUS`.
pub const MSR_AMD_PKG_ENERGY_STATUS: u64 = 0xC001_029B;

/// The energy-status field is 32 bits wide on every part.
pub(super) const MASK: u64 = 0xFFFF_FFFF;

/// Intel's package-scope energy registers, in quietwatt's domain order.
pub(super) const INTEL_DOMAINS: [(Domain, u64); 5] = [
    (Domain::Package, MSR_PKG_ENERGY_STATUS),
    (Domain::Core, MSR_PP0_ENERGY_STATUS),
    (Domain::Uncore, MSR_PP1_ENERGY_STATUS),
    (Domain::Dram, MSR_DRAM_ENERGY_STATUS),
    (Domain::Psys, MSR_PLATFORM_ENERGY_STATUS),
];

/// The power a `*_POWER_INFO` register states: the larger of its thermal spec
/// power (bits 14:0) and maximum power (bits 46:32), in the unit register's power
/// units (bits 3:0: 2^-PU W), as `intel_rapl_common.c` decodes them
/// (`THERMAL_SPEC_POWER`, `MAX_POWER`, `POWER_UNIT_MASK`). `None` when both are 0.
pub(super) fn power_info_watts(info: u64, unit_register: u64) -> Option<f64> {
    let per_unit = 1.0 / (1u64 << (unit_register & 0xF)) as f64;
    let spec = (info & 0x7FFF) as f64 * per_unit;
    let max = ((info >> 32) & 0x7FFF) as f64 * per_unit;
    let w = spec.max(max);
    (w > 0.0).then_some(w)
}

/// What a register read found.
#[derive(Debug)]
pub(super) enum Reg {
    Value(u64),
    /// EIO: the CPU does not implement the register.
    Absent,
}

/// `/dev/cpu/N/msr` under `root`.
pub(super) fn device_path(root: &SysRoot, cpu: u32) -> PathBuf {
    root.path(format!("/dev/cpu/{cpu}/msr"))
}

pub(super) fn origin(dev: &Path, register: u64) -> PathBuf {
    PathBuf::from(format!("{}@{register:#x}", dev.display()))
}

/// Opens a CPU's MSR device, with the fix for each way it can fail.
pub(super) fn open_device(root: &SysRoot, cpu: u32) -> Result<File> {
    let path = device_path(root, cpu);
    File::open(&path).map_err(|e| match e.raw_os_error() {
        Some(libc::ENOENT) => Error::MechanismUnavailable {
            mechanism: Mechanism::Msr.name(),
            why: format!(
                "{} does not exist: load the msr module: `sudo modprobe msr` (kernel option CONFIG_X86_MSR)",
                path.display()
            ),
        },
        Some(libc::ENXIO) => Error::MechanismUnavailable {
            mechanism: Mechanism::Msr.name(),
            why: format!("CPU {cpu} is offline (ENXIO opening {})", path.display()),
        },
        Some(libc::EIO) => Error::MechanismUnavailable {
            mechanism: Mechanism::Msr.name(),
            why: format!("CPU {cpu} has no MSRs (EIO opening {})", path.display()),
        },
        // EPERM/EACCES: Error::io gives the CAP_SYS_RAWIO fix for `/msr` paths.
        _ => Error::io(&path, e),
    })
}

/// One `pread` of 8 bytes at `register`, little-endian as the device returns it.
#[inline]
pub(super) fn pread_register(file: &File, register: u64) -> io::Result<u64> {
    let mut buf = [0u8; 8];
    let n = file.read_at(&mut buf, register)?;
    if n != buf.len() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "short read: {n} of 8 bytes at register {register:#x}; the MSR device never returns fewer, so this is not one (a plain file ending before the register?)"
            ),
        ));
    }
    Ok(u64::from_le_bytes(buf))
}

/// Reads a register at discovery: EIO means "not implemented", any other failure
/// (a short read included) is an error naming the register.
pub(super) fn probe_register(file: &File, dev: &Path, register: u64) -> Result<Reg> {
    match pread_register(file, register) {
        Ok(v) => Ok(Reg::Value(v)),
        Err(e) if e.raw_os_error() == Some(libc::EIO) => Ok(Reg::Absent),
        Err(e) => Err(Error::io(&origin(dev, register), e)),
    }
}

pub(super) fn read_error(path: &Path, e: io::Error) -> Error {
    match e.raw_os_error() {
        // The CPU went offline or the module was unloaded mid-measurement.
        Some(libc::ENXIO | libc::ENODEV) => Error::Vanished {
            path: path.to_path_buf(),
            source: e,
        },
        _ => Error::io(path, e),
    }
}
