//! RAPL energy units as the hardware and the kernel apply them, quirks included.
//!
//! This table is the emulator's own, written from the kernel sources
//! (RAPL-FACTS §1-2) and deliberately not shared with the engine's, so that a
//! mistake in one is caught by the other.
//!
//! - The unit register (`MSR_RAPL_POWER_UNIT` 0x606, AMD 0xC0010299) holds power
//!   units in bits 3:0, the energy-status unit (ESU) in bits 12:8 and time units
//!   in bits 19:16; one raw count is 2^-ESU J.
//! - Haswell-X, Broadwell-X, Broadwell-D, Skylake-X, Icelake-X/D and Xeon Phi
//!   count DRAM in 2^-16 J whatever the ESU (perf's `RAPL_UNIT_QUIRK_INTEL_HSW`).
//!   powercap converts those DRAM counts with 15300 nJ, except on Broadwell-D where
//!   it uses the register's unit (`rapl_defaults_hsw_server` is not applied there):
//!   the emulator reproduces both, so powercap DRAM on Broadwell-D is as wrong as
//!   on a real kernel.
//! - Sapphire Rapids-X and Emerald Rapids-X count psys in 1 J.
//! - Silvermont/Airmont Atom SoCs invert the field: one count is 2^ESU µJ.
//!
//! powercap stores the unit as a whole number of nanojoules (`1e9 >> ESU`, i.e.
//! 15258 for ESU 16) and reports `raw * unit_nj / 1000` µJ.

use crate::vendor::Vendor;
use quietwatt_core::Domain;

/// Models (family 6) whose DRAM counts in 2^-16 J (perf's table).
const FIXED_DRAM_HARDWARE: &[u32] = &[0x3F, 0x4F, 0x56, 0x55, 0x6A, 0x6C, 0x57, 0x85];
/// Models (family 6) for which powercap converts DRAM with 15300 nJ.
const FIXED_DRAM_POWERCAP: &[u32] = &[0x3F, 0x4F, 0x55, 0x6A, 0x6C, 0x57, 0x85];
/// Models (family 6) whose psys counts in 1 J.
const FIXED_PSYS: &[u32] = &[0x8F, 0xCF];
/// Models (family 6) whose ESU field is an exponent of microjoules.
const INVERTED_UNIT: &[u32] = &[0x37, 0x4C, 0x4A, 0x5A];

/// The powercap DRAM unit of the fixed-unit servers, in nJ.
const POWERCAP_FIXED_DRAM_NJ: u64 = 15300;

/// The size of one raw count: `num / den` joules, exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unit {
    /// Numerator, joules.
    pub num: u128,
    /// Denominator.
    pub den: u128,
}

impl Unit {
    /// 2^-shift J.
    pub fn pow2(shift: u8) -> Unit {
        Unit {
            num: 1,
            den: 1u128 << shift,
        }
    }
}

fn intel_model(vendor: Vendor, table: &[u32]) -> bool {
    matches!(vendor, Vendor::Intel { family: 6, model } if table.contains(&model))
}

/// The ESU the unit register reports when the configuration does not choose one:
/// 14 (61 µJ) on Intel, as on most Core and Xeon parts; 16 (15.3 µJ) on AMD, as on
/// Zen; 5 (32 µJ) on the inverted-unit Atoms.
pub(crate) fn default_esu(vendor: Vendor) -> u8 {
    match vendor {
        Vendor::Amd { .. } => 16,
        v if intel_model(v, INVERTED_UNIT) => 5,
        Vendor::Intel { .. } => 14,
    }
}

/// The unit register's value: power units 1/8 W (3), the ESU, time units 2^-10 s (10).
pub(crate) fn unit_register(esu: u8) -> u64 {
    3 | (u64::from(esu & 0x1F) << 8) | (10 << 16)
}

/// What one raw count of `domain` really is on this part.
pub(crate) fn hardware_unit(vendor: Vendor, esu: u8, domain: Domain) -> Unit {
    if intel_model(vendor, INVERTED_UNIT) {
        return Unit {
            num: 1u128 << esu,
            den: 1_000_000,
        };
    }
    match domain {
        Domain::Dram if intel_model(vendor, FIXED_DRAM_HARDWARE) => Unit::pow2(16),
        Domain::Psys if intel_model(vendor, FIXED_PSYS) => Unit::pow2(0),
        _ => Unit::pow2(esu),
    }
}

/// The unit, in whole nanojoules, powercap converts `domain`'s counts with.
pub(crate) fn powercap_unit_nj(vendor: Vendor, esu: u8, domain: Domain) -> u64 {
    if intel_model(vendor, INVERTED_UNIT) {
        return 1000u64 << esu;
    }
    match domain {
        Domain::Dram if intel_model(vendor, FIXED_DRAM_POWERCAP) => POWERCAP_FIXED_DRAM_NJ,
        Domain::Psys if intel_model(vendor, FIXED_PSYS) => 1_000_000_000,
        _ => 1_000_000_000u64 >> esu,
    }
}

/// Whether perf lists `energy-psys` on this part even when psys reads 0: Sapphire
/// and Emerald Rapids, whose `intel_rapl_spr_msrs` (arch/x86/events/rapl.c) mark
/// MSR_PLATFORM_ENERGY_STATUS `no_check` ("perf/x86/rapl: Fix psys-energy event on
/// Intel SPR platform"); elsewhere `perf_msr_probe` drops an event reading 0.
pub(crate) fn psys_always_listed(vendor: Vendor) -> bool {
    intel_model(vendor, FIXED_PSYS)
}

/// `amount_uj` microjoules in whole raw counts of `unit`, rounded to the nearest,
/// at least one.
pub(crate) fn counts_of(amount_uj: u64, unit: Unit) -> u128 {
    let num = u128::from(amount_uj) * unit.den;
    let den = unit.num * 1_000_000;
    ((num + den / 2) / den).max(1)
}

/// `max_energy_range_uj`: the largest count times the powercap unit.
pub(crate) fn max_energy_range_uj(bits: u8, unit_nj: u64) -> u64 {
    let max = (1u128 << bits) - 1;
    u64::try_from(max * u128::from(unit_nj) / 1000).unwrap_or(u64::MAX)
}

/// A served count (already reduced modulo 2^bits) as powercap's `energy_uj`.
pub(crate) fn powercap_uj(count: u64, unit_nj: u64) -> u64 {
    u64::try_from(u128::from(count) * u128::from(unit_nj) / 1000).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KBL: Vendor = Vendor::Intel {
        family: 6,
        model: 0x9E,
    };
    const SKX: Vendor = Vendor::Intel {
        family: 6,
        model: 0x55,
    };
    const BDX_D: Vendor = Vendor::Intel {
        family: 6,
        model: 0x56,
    };
    const SPR: Vendor = Vendor::Intel {
        family: 6,
        model: 0x8F,
    };
    const ZEN3: Vendor = Vendor::Amd {
        family: 0x19,
        model: 0x01,
    };

    #[test]
    fn kernel_arithmetic_matches_rapl_facts() {
        assert_eq!(powercap_unit_nj(KBL, 16, Domain::Package), 15258);
        assert_eq!(powercap_unit_nj(KBL, 14, Domain::Package), 61035);
        assert_eq!(max_energy_range_uj(32, 15258), 65_532_610_987);
        assert_eq!(max_energy_range_uj(32, 61035), 262_143_328_850);
        assert_eq!(unit_register(14), 0xA0E03);
        assert_eq!(unit_register(16), 0xA1003);
    }

    #[test]
    fn skylake_x_dram_and_sapphire_rapids_psys() {
        assert_eq!(hardware_unit(SKX, 14, Domain::Dram), Unit::pow2(16));
        assert_eq!(hardware_unit(SKX, 14, Domain::Package), Unit::pow2(14));
        assert_eq!(powercap_unit_nj(SKX, 14, Domain::Dram), 15300);
        assert_eq!(hardware_unit(BDX_D, 14, Domain::Dram), Unit::pow2(16));
        assert_eq!(powercap_unit_nj(BDX_D, 14, Domain::Dram), 61035);
        assert_eq!(hardware_unit(SPR, 14, Domain::Psys), Unit::pow2(0));
        assert_eq!(powercap_unit_nj(SPR, 14, Domain::Psys), 1_000_000_000);
        assert_eq!(hardware_unit(ZEN3, 16, Domain::Dram), Unit::pow2(16));
        assert_eq!(default_esu(ZEN3), 16);
        assert_eq!(default_esu(KBL), 14);
    }

    #[test]
    fn step_amounts_round_to_whole_counts() {
        // 0.5 J at ESU 14 is 8192 counts; on SPR psys (1 J counts) it rounds to one.
        assert_eq!(counts_of(500_000, Unit::pow2(14)), 8192);
        assert_eq!(counts_of(500_000, Unit::pow2(0)), 1);
        assert_eq!(counts_of(1, Unit::pow2(0)), 1);
        assert_eq!(counts_of(2_500_000, Unit::pow2(0)), 3);
        assert!(psys_always_listed(SPR) && !psys_always_listed(KBL));
    }

    #[test]
    fn atom_units_are_microjoule_exponents() {
        let byt = Vendor::Intel {
            family: 6,
            model: 0x37,
        };
        assert_eq!(default_esu(byt), 5);
        assert_eq!(
            hardware_unit(byt, 5, Domain::Package),
            Unit {
                num: 32,
                den: 1_000_000
            }
        );
        assert_eq!(powercap_unit_nj(byt, 5, Domain::Package), 32_000);
    }
}
