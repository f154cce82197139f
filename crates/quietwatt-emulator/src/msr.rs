//! The model-specific registers behind `/dev/cpu/N/msr` (RAPL-FACTS §1, §5).
//!
//! `pread(fd, buf, 8 * k, REGISTER)` returns the register as a little-endian u64,
//! `k` times; a count that is not a multiple of 8 is EINVAL, an unknown register
//! EIO, as in `arch/x86/kernel/msr.c`. Only the registers of emulated domains
//! exist. Energy registers hold the count modulo 2^counter_bits in bits 31:0.
//!
//! | Intel | | AMD | |
//! |---|---|---|---|
//! | 0x606 | unit | 0xC0010299 | unit |
//! | 0x611 | package | 0xC001029B | package |
//! | 0x639 | core (PP0) | 0xC001029A | this CPU's core |
//! | 0x641 | uncore (PP1) | | |
//! | 0x619 | dram | | |
//! | 0x64D | psys (the psys master's CPUs; 0 elsewhere) | | |
//! | 0x614 | package power info | | |
//! | 0x61C | dram power info | | |
//!
//! The power-info registers state the thermal spec power (bits 14:0) and the
//! maximum power (bits 46:32) in the unit register's power units (bits 3:0,
//! 2^-PU W): 1.5 times the domain's configured watts, as the powercap
//! `constraint_0_*` files say for the package.
//! Package registers read on any CPU of a package give that package's count.
//!
//! psys is read as on Sapphire/Emerald Rapids servers: only CPUs of the psys
//! master package ([`EmulatorConfig::psys_master`], not necessarily package 0)
//! read the counter; CPUs of every other package read MSR_PLATFORM_ENERGY_STATUS
//! as 0 (Linux commit "perf/x86/rapl: Fix psys-energy event on Intel SPR
//! platform": "only CPUs on the master package can read valid value of the Psys
//! energy counter, reading the MSR on CPUs in the slave package returns 0"). A
//! reader adding psys over packages therefore counts it once. With
//! `psys_disabled` the master's CPUs read 0 too.

use crate::config::EmulatorConfig;
use crate::truth::GroundTruth;
use quietwatt_core::Domain;

/// MSR_RAPL_POWER_UNIT.
pub const MSR_RAPL_POWER_UNIT: u64 = 0x606;
/// MSR_PKG_ENERGY_STATUS.
pub const MSR_PKG_ENERGY_STATUS: u64 = 0x611;
/// MSR_DRAM_ENERGY_STATUS.
pub const MSR_DRAM_ENERGY_STATUS: u64 = 0x619;
/// MSR_PP0_ENERGY_STATUS (core).
pub const MSR_PP0_ENERGY_STATUS: u64 = 0x639;
/// MSR_PP1_ENERGY_STATUS (uncore).
pub const MSR_PP1_ENERGY_STATUS: u64 = 0x641;
/// MSR_PLATFORM_ENERGY_STATUS (psys).
pub const MSR_PLATFORM_ENERGY_STATUS: u64 = 0x64D;
/// MSR_PKG_POWER_INFO (thermal spec and maximum power of the package).
pub const MSR_PKG_POWER_INFO: u64 = 0x614;
/// MSR_DRAM_POWER_INFO (thermal spec and maximum power of dram).
pub const MSR_DRAM_POWER_INFO: u64 = 0x61C;
/// MSR_AMD_RAPL_POWER_UNIT.
pub const MSR_AMD_RAPL_POWER_UNIT: u64 = 0xC001_0299;
/// MSR_AMD_CORE_ENERGY_STATUS (per core).
pub const MSR_AMD_CORE_ENERGY_STATUS: u64 = 0xC001_029A;
/// MSR_AMD_PKG_ENERGY_STATUS.
pub const MSR_AMD_PKG_ENERGY_STATUS: u64 = 0xC001_029B;

/// The value MSR garbage faults serve.
pub(crate) const GARBAGE: u64 = 0xDEAD_BEEF_DEAD_BEEF;

/// What a register read on a CPU returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Register {
    /// A constant (the unit register).
    Fixed(u64),
    /// The energy counter with this index in the ground truth.
    Energy(usize),
}

/// Register `reg` as CPU `cpu` sees it, or `None` (EIO).
pub(crate) fn register(
    config: &EmulatorConfig,
    truth: &GroundTruth,
    unit_register: u64,
    cpu: u32,
    reg: u64,
) -> Option<Register> {
    if cpu >= config.cpus() {
        return None;
    }
    let socket = config.socket_of(cpu);
    let energy = |socket: u32, domain: Domain, lane: u32| {
        truth.find(socket, domain, lane).map(Register::Energy)
    };
    if config.vendor.is_amd() {
        match reg {
            MSR_AMD_RAPL_POWER_UNIT => Some(Register::Fixed(unit_register)),
            MSR_AMD_PKG_ENERGY_STATUS => energy(socket, Domain::Package, 0),
            MSR_AMD_CORE_ENERGY_STATUS => {
                energy(socket, Domain::Core, cpu % config.cpus_per_socket.max(1))
            }
            _ => None,
        }
    } else {
        match reg {
            MSR_RAPL_POWER_UNIT => Some(Register::Fixed(unit_register)),
            MSR_PKG_ENERGY_STATUS => energy(socket, Domain::Package, 0),
            MSR_PP0_ENERGY_STATUS => energy(socket, Domain::Core, 0),
            MSR_PP1_ENERGY_STATUS => energy(socket, Domain::Uncore, 0),
            MSR_DRAM_ENERGY_STATUS => energy(socket, Domain::Dram, 0),
            MSR_PKG_POWER_INFO => power_info(config, unit_register, socket, Domain::Package),
            MSR_DRAM_POWER_INFO => power_info(config, unit_register, socket, Domain::Dram),
            MSR_PLATFORM_ENERGY_STATUS if config.domains.psys => {
                if socket == config.psys_master {
                    energy(socket, Domain::Psys, 0)
                } else {
                    // Not the psys master: the register exists and reads 0.
                    Some(Register::Fixed(0))
                }
            }
            _ => None,
        }
    }
}

/// A power-info register: 1.5 times the domain's watts as thermal spec and maximum
/// power, in the unit register's power units; EIO where the domain is absent.
fn power_info(
    config: &EmulatorConfig,
    unit_register: u64,
    socket: u32,
    domain: Domain,
) -> Option<Register> {
    let watts = config.watts(socket, domain)?.max(1.0) * 1.5;
    let units = ((watts * (1u64 << (unit_register & 0xF)) as f64).round() as u64).min(0x7FFF);
    Some(Register::Fixed(units | units << 32))
}

/// The energy register an Intel or AMD part uses for `domain`, for documentation
/// and listings.
pub fn energy_register(amd: bool, domain: Domain) -> Option<u64> {
    match (amd, domain) {
        (false, Domain::Package) => Some(MSR_PKG_ENERGY_STATUS),
        (false, Domain::Core) => Some(MSR_PP0_ENERGY_STATUS),
        (false, Domain::Uncore) => Some(MSR_PP1_ENERGY_STATUS),
        (false, Domain::Dram) => Some(MSR_DRAM_ENERGY_STATUS),
        (false, Domain::Psys) => Some(MSR_PLATFORM_ENERGY_STATUS),
        (true, Domain::Package) => Some(MSR_AMD_PKG_ENERGY_STATUS),
        (true, Domain::Core) => Some(MSR_AMD_CORE_ENERGY_STATUS),
        // AMD has only package and core; no register is known for a newer domain.
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intel_and_amd_register_maps() {
        let c = EmulatorConfig::default().with_sockets(2);
        let t = GroundTruth::new(&c);
        let r = |cpu, reg| register(&c, &t, 0xA0E03, cpu, reg);
        assert_eq!(r(0, 0x606), Some(Register::Fixed(0xA0E03)));
        // 1.5 × the package's watts in 1/8 W, as thermal spec and maximum power.
        let pkg = (c.watts(0, Domain::Package).unwrap() * 1.5 * 8.0).round() as u64;
        assert_eq!(r(0, 0x614), Some(Register::Fixed(pkg | pkg << 32)));
        assert_eq!(
            r(5, 0x611),
            t.find(1, Domain::Package, 0).map(Register::Energy)
        );
        assert_eq!(r(5, 0x64D), None, "psys is off by default");

        // psys on the master's CPUs only (here package 1 of 2): 0 on package 0's.
        let p = EmulatorConfig::intel(0x8F)
            .with_sockets(2)
            .with_psys_master(1);
        let t = GroundTruth::new(&p);
        let r = |cpu, reg| register(&p, &t, 0xA0E03, cpu, reg);
        let psys = t.find(1, Domain::Psys, 0).map(Register::Energy);
        assert!(psys.is_some());
        assert_eq!(r(4, 0x64D), psys);
        assert_eq!(r(7, 0x64D), psys);
        assert_eq!(r(0, 0x64D), Some(Register::Fixed(0)));
        assert_eq!(r(3, 0x64D), Some(Register::Fixed(0)));
        assert!(t.find(0, Domain::Psys, 0).is_none());
        assert_eq!(r(8, 0x611), None, "no CPU 8");
        assert_eq!(r(0, 0xC001029B), None);

        let a = EmulatorConfig::amd()
            .with_cpus_per_socket(4)
            .with_sockets(2);
        let t = GroundTruth::new(&a);
        let r = |cpu, reg| register(&a, &t, 0xA1003, cpu, reg);
        assert_eq!(
            r(6, MSR_AMD_CORE_ENERGY_STATUS),
            t.find(1, Domain::Core, 2).map(Register::Energy)
        );
        assert_eq!(
            r(6, MSR_AMD_PKG_ENERGY_STATUS),
            t.find(1, Domain::Package, 0).map(Register::Energy)
        );
        assert_eq!(r(0, MSR_PKG_ENERGY_STATUS), None);
        assert_eq!(energy_register(true, Domain::Dram), None);
    }
}
