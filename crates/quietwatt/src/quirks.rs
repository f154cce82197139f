//! Energy-unit quirks of RAPL MSRs, as data: one table, one row per CPU model and
//! quirk, each row naming the kernel table it was copied from.
//!
//! The unit register (`MSR_RAPL_POWER_UNIT` 0x606, AMD 0xC0010299) gives the
//! energy-status unit (ESU, bits 12:8) as 2^-ESU J per step. Some parts ignore it
//! for one domain, and some Atom parts invert its meaning; the kernel keeps those
//! exceptions in two tables that do not agree:
//!
//! - perf (`arch/x86/events/rapl.c`, `RAPL_UNIT_QUIRK_*`) fixes DRAM at exactly
//!   2^-16 J on Haswell-X, Broadwell-X, **Broadwell-D**, Skylake-X, Icelake-X/D and
//!   Xeon Phi, and psys at 2^0 J on Sapphire/Emerald Rapids.
//! - powercap (`drivers/powercap/intel_rapl_common.c`, `rapl_defaults_*`) fixes DRAM
//!   at 15.3 µJ (not 2^-16 J = 15.2588 µJ) and leaves Broadwell-D to the register.
//!
//! The MSR mechanism follows **perf's** table, the exact power of two, including
//! Broadwell-D; so on those parts powercap's DRAM reads about 0.27 % higher than
//! quietwatt's MSR and perf readings, and on Broadwell-D it may differ entirely.
//! The Atom inverted-unit rows come from powercap, the only driver that knows them
//! (perf does not support those parts at all).
//!
//! Model numbers were checked against `arch/x86/include/asm/intel-family.h`.

use crate::cpuinfo::{CpuInfo, Vendor};
use crate::domain::Domain;
use crate::units::EnergyUnit;
use serde::Serialize;

/// An exception to "the unit register's ESU applies to every domain".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Quirk {
    /// The DRAM domain counts in 2^-16 J whatever the register says.
    FixedDramUnit,
    /// The psys domain counts in 2^0 = 1 J whatever the register says.
    FixedPsysUnit,
    /// Every domain counts in 2^ESU µJ: the field is an exponent of microjoules,
    /// not a negative exponent of joules (Silvermont/Airmont-era Atom SoCs).
    InvertedUnit,
}

/// One row of the quirk table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QuirkRow {
    /// The vendor.
    pub vendor: Vendor,
    /// The CPU family.
    pub family: u32,
    /// The CPU model.
    pub model: u32,
    /// The kernel's name for the model (`intel-family.h`).
    pub model_name: &'static str,
    /// What is different.
    pub quirk: Quirk,
    /// Where the kernel says so.
    pub source: &'static str,
}

impl QuirkRow {
    /// Whether powercap (`intel_rapl_common.c`) applies this quirk too. Where it does
    /// not (Broadwell-D's DRAM), powercap converts with the unit register and reads
    /// 2^(16 - ESU) times what perf and the MSR mechanism read.
    pub fn powercap_applies(&self) -> bool {
        self.source != PERF_HSW_ONLY
    }
}

const PERF_HSW: &str = "arch/x86/events/rapl.c RAPL_UNIT_QUIRK_INTEL_HSW (model_hsx/model_knl); \
                        intel_rapl_common.c rapl_defaults_hsw_server (15.3 uJ)";
const PERF_HSW_ONLY: &str = "arch/x86/events/rapl.c RAPL_UNIT_QUIRK_INTEL_HSW (model_hsx); \
                             not in intel_rapl_common.c (rapl_defaults_core: register unit)";
const PERF_SPR: &str = "arch/x86/events/rapl.c RAPL_UNIT_QUIRK_INTEL_SPR (model_spr); \
                        intel_rapl_common.c rapl_defaults_spr_server";

const fn row(model: u32, model_name: &'static str, quirk: Quirk, source: &'static str) -> QuirkRow {
    QuirkRow {
        vendor: Vendor::Intel,
        family: 6,
        model,
        model_name,
        quirk,
        source,
    }
}

/// Every known energy-unit quirk. AMD and Hygon have none: both kernel drivers
/// decode their unit register with the plain Intel rule.
pub const QUIRKS: &[QuirkRow] = &[
    row(0x3F, "HASWELL_X", Quirk::FixedDramUnit, PERF_HSW),
    row(0x4F, "BROADWELL_X", Quirk::FixedDramUnit, PERF_HSW),
    row(0x56, "BROADWELL_D", Quirk::FixedDramUnit, PERF_HSW_ONLY),
    row(0x55, "SKYLAKE_X", Quirk::FixedDramUnit, PERF_HSW),
    row(0x6A, "ICELAKE_X", Quirk::FixedDramUnit, PERF_HSW),
    row(0x6C, "ICELAKE_D", Quirk::FixedDramUnit, PERF_HSW),
    row(0x57, "XEON_PHI_KNL", Quirk::FixedDramUnit, PERF_HSW),
    row(0x85, "XEON_PHI_KNM", Quirk::FixedDramUnit, PERF_HSW),
    row(0x8F, "SAPPHIRERAPIDS_X", Quirk::FixedPsysUnit, PERF_SPR),
    row(0xCF, "EMERALDRAPIDS_X", Quirk::FixedPsysUnit, PERF_SPR),
    row(
        0x37,
        "ATOM_SILVERMONT (Bay Trail)",
        Quirk::InvertedUnit,
        "intel_rapl_common.c rapl_defaults_byt (rapl_check_unit_atom)",
    ),
    row(
        0x4C,
        "ATOM_AIRMONT (Cherry Trail)",
        Quirk::InvertedUnit,
        "intel_rapl_common.c rapl_defaults_cht (rapl_check_unit_atom)",
    ),
    row(
        0x4A,
        "ATOM_SILVERMONT_MID (Merrifield/Tangier)",
        Quirk::InvertedUnit,
        "intel_rapl_common.c rapl_defaults_tng (rapl_check_unit_atom)",
    ),
    row(
        0x5A,
        "ATOM_AIRMONT_MID / ATOM_SILVERMONT_MID2 (Moorefield/Anniedale)",
        Quirk::InvertedUnit,
        "intel_rapl_common.c rapl_defaults_ann (rapl_check_unit_atom)",
    ),
];

/// Intel family-6 models whose RAPL units the kernel's tables describe: perf's
/// `rapl_model_match` (`arch/x86/events/rapl.c`, Linux 6.10, with the model numbers
/// of `intel-family.h`) plus later server parts. On a model outside this list and
/// [`QUIRKS`], nobody has said whether the unit register tells the truth for every
/// domain: quietwatt uses it, and says so ([`unknown_model_warning`]).
pub const KNOWN_INTEL_MODELS: &[(u32, &str)] = &[
    (0x2A, "SANDYBRIDGE"),
    (0x2D, "SANDYBRIDGE_X"),
    (0x3A, "IVYBRIDGE"),
    (0x3E, "IVYBRIDGE_X"),
    (0x3C, "HASWELL"),
    (0x3F, "HASWELL_X"),
    (0x45, "HASWELL_L"),
    (0x46, "HASWELL_G"),
    (0x3D, "BROADWELL"),
    (0x47, "BROADWELL_G"),
    (0x4F, "BROADWELL_X"),
    (0x56, "BROADWELL_D"),
    (0x57, "XEON_PHI_KNL"),
    (0x85, "XEON_PHI_KNM"),
    (0x4E, "SKYLAKE_L"),
    (0x5E, "SKYLAKE"),
    (0x55, "SKYLAKE_X"),
    (0x8E, "KABYLAKE_L"),
    (0x9E, "KABYLAKE"),
    (0x66, "CANNONLAKE_L"),
    (0x5C, "ATOM_GOLDMONT"),
    (0x5F, "ATOM_GOLDMONT_D"),
    (0x7A, "ATOM_GOLDMONT_PLUS"),
    (0x7E, "ICELAKE_L"),
    (0x7D, "ICELAKE"),
    (0x6C, "ICELAKE_D"),
    (0x6A, "ICELAKE_X"),
    (0xA6, "COMETLAKE_L"),
    (0xA5, "COMETLAKE"),
    (0x8C, "TIGERLAKE_L"),
    (0x8D, "TIGERLAKE"),
    (0x97, "ALDERLAKE"),
    (0x9A, "ALDERLAKE_L"),
    (0xBE, "ATOM_GRACEMONT"),
    (0x8F, "SAPPHIRERAPIDS_X"),
    (0xCF, "EMERALDRAPIDS_X"),
    (0xAD, "GRANITERAPIDS_X"),
    (0xAE, "GRANITERAPIDS_D"),
    (0xAF, "ATOM_CRESTMONT_X"),
    (0xB7, "RAPTORLAKE"),
    (0xBA, "RAPTORLAKE_P"),
    (0xBF, "RAPTORLAKE_S"),
    (0xAC, "METEORLAKE"),
    (0xAA, "METEORLAKE_L"),
    (0xC5, "ARROWLAKE_H"),
    (0xC6, "ARROWLAKE"),
    (0xB5, "ARROWLAKE_U"),
    (0xBD, "LUNARLAKE_M"),
];

/// A warning (to print once, with the mechanism's notes) when `cpu` is a model the
/// quirk table cannot vouch for: an Intel model neither in [`KNOWN_INTEL_MODELS`]
/// nor in [`QUIRKS`], an AMD/Hygon family older than Zen (0x17), or a CPU whose
/// family or model is unknown. `None` when the table covers it.
pub fn unknown_model_warning(cpu: &CpuInfo) -> Option<String> {
    let (Some(family), Some(model)) = (cpu.family, cpu.model) else {
        return Some(format!(
            "the {} CPU's family and model are unknown (cpuinfo lacks them): the quirk table \
             cannot be matched, so every domain uses the unit register's ESU; compare with \
             `quietwatt check`",
            cpu.vendor
        ));
    };
    let known = match cpu.vendor {
        Vendor::Intel => {
            family == 6
                && (KNOWN_INTEL_MODELS.iter().any(|&(m, _)| m == model)
                    || quirks_for(cpu).next().is_some())
        }
        Vendor::Amd | Vendor::Hygon => family >= 0x17,
        Vendor::Other => false,
    };
    (!known).then(|| {
        format!(
            "{} family {family:#x} model {model:#x} is not in the kernel's RAPL model tables that \
             quietwatt's unit quirks follow: every domain uses the unit register's ESU as is, \
             which may be wrong for DRAM or psys on a new server part; compare with `quietwatt check`",
            cpu.vendor
        )
    })
}

/// The energy-status-unit field (bits 12:8) of a unit register value.
pub fn energy_status_units(unit_register: u64) -> u8 {
    ((unit_register >> 8) & 0x1F) as u8
}

/// The rows that apply to this CPU.
pub fn quirks_for(cpu: &CpuInfo) -> impl Iterator<Item = &'static QuirkRow> + '_ {
    QUIRKS.iter().filter(move |r| {
        r.vendor == cpu.vendor && Some(r.family) == cpu.family && Some(r.model) == cpu.model
    })
}

/// The energy of one raw step of `domain`'s status register on `cpu`, given the
/// value of its unit register; with the quirk row that changed it, if any.
pub fn energy_unit(
    cpu: &CpuInfo,
    domain: Domain,
    unit_register: u64,
) -> (EnergyUnit, Option<&'static QuirkRow>) {
    let esu = energy_status_units(unit_register);
    for r in quirks_for(cpu) {
        match (r.quirk, domain) {
            (Quirk::FixedDramUnit, Domain::Dram) => return (EnergyUnit::PowerOfTwo(16), Some(r)),
            (Quirk::FixedPsysUnit, Domain::Psys) => return (EnergyUnit::PowerOfTwo(0), Some(r)),
            // 2^ESU µJ: not a power of two of joules, hence a decimal scale.
            (Quirk::InvertedUnit, _) => {
                return (EnergyUnit::Scale((esu as f64).exp2() * 1e-6), Some(r))
            }
            _ => {}
        }
    }
    (EnergyUnit::PowerOfTwo(esu), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intel(model: u32) -> CpuInfo {
        CpuInfo {
            vendor: Vendor::Intel,
            family: Some(6),
            model: Some(model),
            model_name: String::new(),
            flags: Vec::new(),
        }
    }

    /// A unit register with power units 3, ESU `esu`, time units 10.
    fn unit_reg(esu: u64) -> u64 {
        0xA_0000 | (esu << 8) | 0x3
    }

    #[test]
    fn models_outside_the_kernel_tables_get_one_warning() {
        // Kaby Lake (this project's VM host), Skylake-X (a quirk row) and an Atom with
        // inverted units (only in the quirk table) are known.
        for m in [0x9E, 0x55, 0x37] {
            assert_eq!(unknown_model_warning(&intel(m)), None, "{m:#x}");
        }
        let w = unknown_model_warning(&intel(0x01)).expect("model 0x1 is unknown");
        assert!(
            w.contains("model 0x1") && w.contains("quietwatt check"),
            "{w}"
        );
        let mut zen = intel(0x31);
        zen.vendor = Vendor::Amd;
        zen.family = Some(0x17);
        assert_eq!(unknown_model_warning(&zen), None);
        zen.family = Some(0x15);
        assert!(unknown_model_warning(&zen).is_some(), "pre-Zen AMD");
        let mut blank = intel(0x9E);
        blank.model = None;
        assert!(unknown_model_warning(&blank)
            .expect("no model")
            .contains("unknown"));
    }

    #[test]
    fn esu_is_bits_12_to_8() {
        assert_eq!(energy_status_units(0x000A_0E03), 14);
        assert_eq!(energy_status_units(0xFFFF_FFFF_FFFF_1003), 16);
        assert_eq!(energy_status_units(0x1F00), 31);
    }

    #[test]
    fn skylake_x_dram_is_2_pow_minus_16_while_the_register_says_14() {
        let skx = intel(0x55);
        let (u, q) = energy_unit(&skx, Domain::Dram, unit_reg(14));
        assert_eq!(u, EnergyUnit::PowerOfTwo(16));
        assert_eq!(q.map(|r| r.model_name), Some("SKYLAKE_X"));
        // The other domains keep the register's unit.
        assert_eq!(
            energy_unit(&skx, Domain::Package, unit_reg(14)),
            (EnergyUnit::PowerOfTwo(14), None)
        );
        // Broadwell-D follows perf's table: fixed too.
        assert_eq!(
            energy_unit(&intel(0x56), Domain::Dram, unit_reg(14)).0,
            EnergyUnit::PowerOfTwo(16)
        );
        // A client Skylake (0x5E) has no quirk.
        assert_eq!(
            energy_unit(&intel(0x5E), Domain::Dram, unit_reg(14)).0,
            EnergyUnit::PowerOfTwo(14)
        );
    }

    #[test]
    fn sapphire_rapids_psys_is_one_joule() {
        let spr = intel(0x8F);
        assert_eq!(
            energy_unit(&spr, Domain::Psys, unit_reg(14)).0,
            EnergyUnit::PowerOfTwo(0)
        );
        assert_eq!(EnergyUnit::PowerOfTwo(0).to_joules(3).0, 3.0);
        // SPR's DRAM uses the register (the SPR DRAM quirk was removed from perf).
        assert_eq!(
            energy_unit(&spr, Domain::Dram, unit_reg(14)).0,
            EnergyUnit::PowerOfTwo(14)
        );
        assert_eq!(
            energy_unit(&intel(0xCF), Domain::Psys, unit_reg(16)).0,
            EnergyUnit::PowerOfTwo(0)
        );
    }

    #[test]
    fn atom_units_are_inverted_microjoules() {
        // Bay Trail with ESU 5: 2^5 µJ = 32 µJ per step, for every domain.
        for d in [Domain::Package, Domain::Core] {
            let (u, q) = energy_unit(&intel(0x37), d, unit_reg(5));
            assert_eq!(u, EnergyUnit::Scale(32e-6));
            assert_eq!(q.map(|r| r.quirk), Some(Quirk::InvertedUnit));
        }
        for m in [0x4C, 0x4A, 0x5A] {
            assert_eq!(
                energy_unit(&intel(m), Domain::Package, unit_reg(0)).0,
                EnergyUnit::Scale(1e-6)
            );
        }
    }

    #[test]
    fn vendor_and_family_must_match_too() {
        let mut amd = intel(0x55);
        amd.vendor = Vendor::Amd;
        assert_eq!(energy_unit(&amd, Domain::Dram, unit_reg(16)).1, None);
        let mut fam15 = intel(0x55);
        fam15.family = Some(15);
        assert_eq!(quirks_for(&fam15).count(), 0);
    }

    #[test]
    fn every_row_names_its_source_and_none_is_repeated() {
        for (i, r) in QUIRKS.iter().enumerate() {
            assert!(r.source.contains(".c "), "{r:?}");
            for o in &QUIRKS[i + 1..] {
                assert!(
                    (r.vendor, r.family, r.model, r.quirk)
                        != (o.vendor, o.family, o.model, o.quirk),
                    "duplicate row for model {:#x}",
                    r.model
                );
            }
        }
    }
}
