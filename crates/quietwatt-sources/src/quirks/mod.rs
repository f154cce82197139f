//! Energy-unit quirks of RAPL MSRs, and the kernel's RAPL model tables, as data:
//! one row per CPU model, each table naming the kernel file and table it was
//! copied from and the copy that was read.
//!
//! The unit register (`MSR_RAPL_POWER_UNIT` 0x606, AMD 0xC0010299) gives the
//! energy-status unit (ESU, bits 12:8) as 2^-ESU J per step. Some parts ignore it
//! for one domain, and some Atom parts invert its meaning; the kernel keeps those
//! exceptions in two tables that do not agree:
//!
//! - perf (`arch/x86/events/rapl.c`, `RAPL_UNIT_QUIRK_*`) fixes DRAM at exactly
//!   2^-16 J on Haswell-X, Broadwell-X, **Broadwell-D**, Skylake-X, Icelake-X/D and
//!   Xeon Phi, and psys at 2^0 J on Sapphire/Emerald Rapids.
//! - powercap (`rapl_defaults_*` in `drivers/powercap/intel_rapl_msr.c`, formerly
//!   `intel_rapl_common.c`) fixes DRAM at 15.3 µJ (not 2^-16 J = 15.2588 µJ) and
//!   leaves Broadwell-D to the register.
//!
//! The MSR mechanism follows **perf's** table, the exact power of two, including
//! Broadwell-D; so on those parts powercap's DRAM reads about 0.27 % higher than
//! quietwatt's MSR and perf readings, and on Broadwell-D it may differ entirely.
//! The Atom inverted-unit rows come from powercap, the only driver that knows them
//! (perf does not support those parts at all).
//!
//! # Sources read (checked 2026 against the newest copies the code index held)
//!
//! - perf: `arch/x86/events/rapl.c`, `rapl_model_match` and the `model_*` structs,
//!   torvalds/linux @ efef7f184f2e (has the `power_core` PMU, so 6.14 or later).
//!   Copies quoted in later mails end with the same rows (`ARROWLAKE_U`,
//!   `LUNARLAKE_M` last); no copy or patch found adds Granite Rapids or Sierra Forest.
//! - powercap: `drivers/powercap/intel_rapl_msr.c`, `rapl_ids` (the table moved
//!   there from `intel_rapl_common.c` in 2026 and gained `_pl4`/`_pl4_pmu` variants
//!   of `rapl_defaults_core`, which change no unit). The index did not name that
//!   copy's commit; the same model list, defaults for defaults, is the `-` side of
//!   "powercap: intel_rapl: Cleanup coding style" (linux-pm, 2026-01-29, on
//!   `intel_rapl_common.c` blob 3471cee7ac04).
//! - model numbers: `arch/x86/include/asm/intel-family.h` (the `IFM(family, model)`
//!   copy with both old and new names; Nova Lake from the 2025-08 tip commit
//!   "x86/cpu: Add new Intel CPU model numbers for Wildcatlake and Novalake").
//! - TPMI: `drivers/powercap/intel_rapl_tpmi.c` binds to a TPMI device, not to a
//!   model table, so no kernel table lists its models; see [`TPMI_INTEL_MODELS`].
//!
//! Where [`QUIRKS`] and these tables must agree, the unit tests check it.

use crate::cpuinfo::{CpuInfo, Vendor};
use quietwatt_core::domain::Domain;
use quietwatt_core::units::EnergyUnit;
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
    /// Whether powercap applies this quirk too: its `rapl_ids` row for the model
    /// carries the matching `rapl_defaults_*` (hsw_server for DRAM, spr_server for
    /// psys, an Atom one for inverted units). Where it does not (Broadwell-D's DRAM),
    /// powercap converts with the unit register and reads 2^(16 - ESU) times what
    /// perf and the MSR mechanism read.
    pub fn powercap_applies(&self) -> bool {
        let Some(row) = find(POWERCAP_INTEL_MODELS, self.family, self.model) else {
            return false;
        };
        match self.quirk {
            Quirk::FixedDramUnit => row.driver_data == "rapl_defaults_hsw_server",
            Quirk::FixedPsysUnit => row.driver_data == "rapl_defaults_spr_server",
            Quirk::InvertedUnit => ATOM_DEFAULTS.contains(&row.driver_data),
        }
    }
}

const PERF_HSW: &str = "arch/x86/events/rapl.c rapl_model_match: model_hsx/model_knl \
                        (RAPL_UNIT_QUIRK_INTEL_HSW); intel_rapl_msr.c rapl_ids: \
                        rapl_defaults_hsw_server (15.3 uJ)";
const PERF_HSW_ONLY: &str = "arch/x86/events/rapl.c rapl_model_match: model_hsx \
                             (RAPL_UNIT_QUIRK_INTEL_HSW); intel_rapl_msr.c rapl_ids: \
                             rapl_defaults_core (register unit)";
const PERF_SPR: &str = "arch/x86/events/rapl.c rapl_model_match: model_spr \
                        (RAPL_UNIT_QUIRK_INTEL_SPR); intel_rapl_msr.c rapl_ids: \
                        rapl_defaults_spr_server (psys 1 J)";

/// powercap's `rapl_defaults_*` whose `check_unit` is `rapl_check_unit_atom`.
const ATOM_DEFAULTS: [&str; 4] = [
    "rapl_defaults_byt",
    "rapl_defaults_cht",
    "rapl_defaults_tng",
    "rapl_defaults_ann",
];

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

/// Every known energy-unit quirk, from perf's `model_hsx`, `model_knl` and
/// `model_spr` rows of `rapl_model_match` and powercap's `rapl_defaults_byt`, `_cht`,
/// `_tng` and `_ann` rows of `rapl_ids` (versions in the module docs). AMD and Hygon
/// have none: both kernel drivers decode their unit register with the plain rule.
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
        "intel_rapl_msr.c rapl_ids: rapl_defaults_byt (rapl_check_unit_atom)",
    ),
    row(
        0x4C,
        "ATOM_AIRMONT (Cherry Trail)",
        Quirk::InvertedUnit,
        "intel_rapl_msr.c rapl_ids: rapl_defaults_cht (rapl_check_unit_atom)",
    ),
    row(
        0x4A,
        "ATOM_SILVERMONT_MID (Merrifield/Tangier)",
        Quirk::InvertedUnit,
        "intel_rapl_msr.c rapl_ids: rapl_defaults_tng (rapl_check_unit_atom)",
    ),
    row(
        0x5A,
        "ATOM_SILVERMONT_MID2, formerly ATOM_AIRMONT_MID (Moorefield/Anniedale)",
        Quirk::InvertedUnit,
        "intel_rapl_msr.c rapl_ids: rapl_defaults_ann (rapl_check_unit_atom)",
    ),
];

/// One row of a kernel model table: an Intel CPU and the driver data the table
/// gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ModelRow {
    /// The CPU family (6, or 18 for Nova Lake).
    pub family: u32,
    /// The CPU model.
    pub model: u32,
    /// The kernel's name, `intel-family.h`'s `INTEL_<name>`.
    pub name: &'static str,
    /// perf: the `model_*` struct; powercap: the `rapl_defaults_*` struct; TPMI:
    /// where the part is said to be read through TPMI.
    pub driver_data: &'static str,
}

const fn m(model: u32, name: &'static str, driver_data: &'static str) -> ModelRow {
    ModelRow {
        family: 6,
        model,
        name,
        driver_data,
    }
}

/// perf's `rapl_model_match` (`arch/x86/events/rapl.c`, torvalds/linux @
/// efef7f184f2e), Intel rows in the kernel's order. AMD and Hygon match there by the
/// CPUID RAPL feature bit instead (`X86_MATCH_FEATURE(X86_FEATURE_RAPL, …)`).
pub const PERF_INTEL_MODELS: &[ModelRow] = &[
    m(0x2A, "SANDYBRIDGE", "model_snb"),
    m(0x2D, "SANDYBRIDGE_X", "model_snbep"),
    m(0x3A, "IVYBRIDGE", "model_snb"),
    m(0x3E, "IVYBRIDGE_X", "model_snbep"),
    m(0x3C, "HASWELL", "model_hsw"),
    m(0x3F, "HASWELL_X", "model_hsx"),
    m(0x45, "HASWELL_L", "model_hsw"),
    m(0x46, "HASWELL_G", "model_hsw"),
    m(0x3D, "BROADWELL", "model_hsw"),
    m(0x47, "BROADWELL_G", "model_hsw"),
    m(0x4F, "BROADWELL_X", "model_hsx"),
    m(0x56, "BROADWELL_D", "model_hsx"),
    m(0x57, "XEON_PHI_KNL", "model_knl"),
    m(0x85, "XEON_PHI_KNM", "model_knl"),
    m(0x4E, "SKYLAKE_L", "model_skl"),
    m(0x5E, "SKYLAKE", "model_skl"),
    m(0x55, "SKYLAKE_X", "model_hsx"),
    m(0x8E, "KABYLAKE_L", "model_skl"),
    m(0x9E, "KABYLAKE", "model_skl"),
    m(0x66, "CANNONLAKE_L", "model_skl"),
    m(0x5C, "ATOM_GOLDMONT", "model_hsw"),
    m(0x5F, "ATOM_GOLDMONT_D", "model_hsw"),
    m(0x7A, "ATOM_GOLDMONT_PLUS", "model_hsw"),
    m(0x7E, "ICELAKE_L", "model_skl"),
    m(0x7D, "ICELAKE", "model_skl"),
    m(0x6C, "ICELAKE_D", "model_hsx"),
    m(0x6A, "ICELAKE_X", "model_hsx"),
    m(0xA6, "COMETLAKE_L", "model_skl"),
    m(0xA5, "COMETLAKE", "model_skl"),
    m(0x8C, "TIGERLAKE_L", "model_skl"),
    m(0x8D, "TIGERLAKE", "model_skl"),
    m(0x97, "ALDERLAKE", "model_skl"),
    m(0x9A, "ALDERLAKE_L", "model_skl"),
    m(0xBE, "ATOM_GRACEMONT", "model_skl"),
    m(0x8F, "SAPPHIRERAPIDS_X", "model_spr"),
    m(0xCF, "EMERALDRAPIDS_X", "model_spr"),
    m(0xB7, "RAPTORLAKE", "model_skl"),
    m(0xBA, "RAPTORLAKE_P", "model_skl"),
    m(0xBF, "RAPTORLAKE_S", "model_skl"),
    m(0xAC, "METEORLAKE", "model_skl"),
    m(0xAA, "METEORLAKE_L", "model_skl"),
    m(0xC5, "ARROWLAKE_H", "model_skl"),
    m(0xC6, "ARROWLAKE", "model_skl"),
    m(0xB5, "ARROWLAKE_U", "model_skl"),
    m(0xBD, "LUNARLAKE_M", "model_skl"),
];

/// The domains (`pkg_events`) of one of perf's `model_*` structs, as read in
/// `arch/x86/events/rapl.c` @ efef7f184f2e; empty for a name it does not define.
/// perf hides any of them whose MSR faults or reads 0 at boot (`perf_msr_probe`),
/// except psys on `model_spr` (`no_check`).
pub fn perf_model_domains(model_struct: &str) -> &'static [Domain] {
    use Domain::*;
    match model_struct {
        "model_snb" => &[Core, Package, Uncore],
        "model_snbep" | "model_hsx" => &[Core, Package, Dram],
        "model_hsw" => &[Core, Package, Dram, Uncore],
        "model_knl" => &[Package, Dram],
        "model_skl" => &[Core, Package, Dram, Uncore, Psys],
        "model_spr" => &[Core, Package, Dram, Psys],
        _ => &[],
    }
}

/// powercap's `rapl_ids`, Intel rows in the kernel's order: `intel_rapl_msr.c` as
/// described in the module docs (the newest copy read; same models as
/// `intel_rapl_common.c` blob 3471cee7ac04). Only the `hsw_server`, `spr_server`
/// and Atom (`byt`, `cht`, `tng`, `ann`) defaults change an energy unit; the `_pl4`
/// and `_pmu` variants of `rapl_defaults_core` add a power limit and an MSR-based
/// `power` PMU of powercap's own.
pub const POWERCAP_INTEL_MODELS: &[ModelRow] = &[
    m(0x2A, "SANDYBRIDGE", "rapl_defaults_core"),
    m(0x2D, "SANDYBRIDGE_X", "rapl_defaults_core"),
    m(0x3A, "IVYBRIDGE", "rapl_defaults_core"),
    m(0x3E, "IVYBRIDGE_X", "rapl_defaults_core"),
    m(0x3C, "HASWELL", "rapl_defaults_core"),
    m(0x45, "HASWELL_L", "rapl_defaults_core"),
    m(0x46, "HASWELL_G", "rapl_defaults_core"),
    m(0x3F, "HASWELL_X", "rapl_defaults_hsw_server"),
    m(0x3D, "BROADWELL", "rapl_defaults_core"),
    m(0x47, "BROADWELL_G", "rapl_defaults_core"),
    m(0x56, "BROADWELL_D", "rapl_defaults_core"),
    m(0x4F, "BROADWELL_X", "rapl_defaults_hsw_server"),
    m(0x5E, "SKYLAKE", "rapl_defaults_core"),
    m(0x4E, "SKYLAKE_L", "rapl_defaults_core"),
    m(0x55, "SKYLAKE_X", "rapl_defaults_hsw_server"),
    m(0x8E, "KABYLAKE_L", "rapl_defaults_core"),
    m(0x9E, "KABYLAKE", "rapl_defaults_core"),
    m(0x66, "CANNONLAKE_L", "rapl_defaults_core"),
    m(0x7E, "ICELAKE_L", "rapl_defaults_core_pl4"),
    m(0x7D, "ICELAKE", "rapl_defaults_core"),
    m(0x9D, "ICELAKE_NNPI", "rapl_defaults_core"),
    m(0x6A, "ICELAKE_X", "rapl_defaults_hsw_server"),
    m(0x6C, "ICELAKE_D", "rapl_defaults_hsw_server"),
    m(0xA6, "COMETLAKE_L", "rapl_defaults_core"),
    m(0xA5, "COMETLAKE", "rapl_defaults_core"),
    m(0x8C, "TIGERLAKE_L", "rapl_defaults_core_pl4"),
    m(0x8D, "TIGERLAKE", "rapl_defaults_core"),
    m(0xA7, "ROCKETLAKE", "rapl_defaults_core"),
    m(0x97, "ALDERLAKE", "rapl_defaults_core_pl4"),
    m(0x9A, "ALDERLAKE_L", "rapl_defaults_core_pl4"),
    m(0xBE, "ATOM_GRACEMONT", "rapl_defaults_core_pl4"),
    m(0xB7, "RAPTORLAKE", "rapl_defaults_core_pl4"),
    m(0xBA, "RAPTORLAKE_P", "rapl_defaults_core_pl4"),
    m(0xBF, "RAPTORLAKE_S", "rapl_defaults_core"),
    m(0xD7, "BARTLETTLAKE", "rapl_defaults_core"),
    m(0xAC, "METEORLAKE", "rapl_defaults_core_pl4"),
    m(0xAA, "METEORLAKE_L", "rapl_defaults_core_pl4"),
    m(0x8F, "SAPPHIRERAPIDS_X", "rapl_defaults_spr_server"),
    m(0xCF, "EMERALDRAPIDS_X", "rapl_defaults_spr_server"),
    m(0xBD, "LUNARLAKE_M", "rapl_defaults_core"),
    m(0xCC, "PANTHERLAKE_L", "rapl_defaults_core_pl4_pmu"),
    m(0xD5, "WILDCATLAKE_L", "rapl_defaults_core_pl4_pmu"),
    ModelRow {
        family: 18,
        model: 0x01,
        name: "NOVALAKE",
        driver_data: "rapl_defaults_core_pl4",
    },
    ModelRow {
        family: 18,
        model: 0x03,
        name: "NOVALAKE_L",
        driver_data: "rapl_defaults_core_pl4",
    },
    m(0xC5, "ARROWLAKE_H", "rapl_defaults_core_pl4"),
    m(0xC6, "ARROWLAKE", "rapl_defaults_core"),
    m(0xB5, "ARROWLAKE_U", "rapl_defaults_core_pl4"),
    m(0x8A, "LAKEFIELD", "rapl_defaults_core"),
    m(0x37, "ATOM_SILVERMONT", "rapl_defaults_byt"),
    m(0x4C, "ATOM_AIRMONT", "rapl_defaults_cht"),
    m(0x4A, "ATOM_SILVERMONT_MID", "rapl_defaults_tng"),
    m(0x5A, "ATOM_SILVERMONT_MID2", "rapl_defaults_ann"),
    m(0x5C, "ATOM_GOLDMONT", "rapl_defaults_core"),
    m(0x7A, "ATOM_GOLDMONT_PLUS", "rapl_defaults_core"),
    m(0x5F, "ATOM_GOLDMONT_D", "rapl_defaults_core"),
    m(0x96, "ATOM_TREMONT", "rapl_defaults_core"),
    m(0x86, "ATOM_TREMONT_D", "rapl_defaults_core"),
    m(0x9C, "ATOM_TREMONT_L", "rapl_defaults_core"),
    m(0x57, "XEON_PHI_KNL", "rapl_defaults_hsw_server"),
    m(0x85, "XEON_PHI_KNM", "rapl_defaults_hsw_server"),
];

/// powercap's AMD and Hygon rows of `rapl_ids`: `X86_MATCH_VENDOR_FAM(AMD, 0x17 |
/// 0x19 | 0x1A)` and `(HYGON, 0x18)`, all `rapl_defaults_amd` (register unit).
pub const POWERCAP_AMD_FAMILIES: &[(Vendor, u32)] = &[
    (Vendor::Amd, 0x17),
    (Vendor::Amd, 0x19),
    (Vendor::Amd, 0x1A),
    (Vendor::Hygon, 0x18),
];

/// Server parts whose RAPL the kernel reads through TPMI (`intel_rapl_tpmi.c`),
/// not through either MSR model table. That driver binds to a TPMI device, so no
/// kernel table lists these models. Granite Rapids: the 2026 linux-pm cover letter
/// of Kuppuswamy Sathyanarayanan's RAPL PMU cpumask fix was "tested on both
/// MSR-based (PTL) and TPMI-based (GNR)" systems, and an Intel reply on LKML (KVM
/// RAPL thread) says GNR has both TPMI and MSR RAPL. Sierra Forest
/// (ATOM_CRESTMONT_X) is Granite Rapids' E-core sibling on the same platform; no
/// kernel source read names it TPMI-based. Other TPMI parts (Grand Ridge,
/// Clearwater Forest, Diamond Rapids) are left out for want of a source and get the
/// plain unknown-model warning.
pub const TPMI_INTEL_MODELS: &[ModelRow] = &[
    m(
        0xAD,
        "GRANITERAPIDS_X",
        "intel_rapl_tpmi.c (Granite Rapids)",
    ),
    m(
        0xAE,
        "GRANITERAPIDS_D",
        "intel_rapl_tpmi.c (Granite Rapids)",
    ),
    m(
        0xAF,
        "ATOM_CRESTMONT_X",
        "intel_rapl_tpmi.c (Sierra Forest)",
    ),
];

fn find(table: &'static [ModelRow], family: u32, model: u32) -> Option<&'static ModelRow> {
    table
        .iter()
        .find(|r| r.family == family && r.model == model)
}

/// What the kernel's RAPL tables say about one CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Coverage {
    /// Both perf's and powercap's MSR tables list it: their unit quirks (and
    /// quietwatt's) are the kernel's word.
    PerfAndPowercap,
    /// Only powercap's table lists it: powercap (and quietwatt's msr, which then
    /// agrees with powercap's units) work; perf's `rapl.c` PMU does not load.
    PowercapOnly,
    /// Only perf's table lists it (AMD families newer than powercap's list).
    PerfOnly,
    /// Read through TPMI: in neither MSR table ([`TPMI_INTEL_MODELS`]).
    Tpmi,
    /// In no table, or the family or model is unknown.
    Unknown,
}

/// Where `cpu` stands in the kernel's RAPL model tables.
pub fn coverage(cpu: &CpuInfo) -> Coverage {
    let (Some(family), Some(model)) = (cpu.family, cpu.model) else {
        return Coverage::Unknown;
    };
    let (perf, powercap) = match cpu.vendor {
        Vendor::Intel => {
            if find(TPMI_INTEL_MODELS, family, model).is_some() {
                return Coverage::Tpmi;
            }
            (
                find(PERF_INTEL_MODELS, family, model).is_some(),
                find(POWERCAP_INTEL_MODELS, family, model).is_some(),
            )
        }
        // perf matches the CPUID RAPL bit, which Zen (family 0x17 on) sets; the
        // family stands in for it here.
        Vendor::Amd | Vendor::Hygon => (
            family >= 0x17,
            POWERCAP_AMD_FAMILIES.contains(&(cpu.vendor, family)),
        ),
        Vendor::Other => (false, false),
    };
    match (perf, powercap) {
        (true, true) => Coverage::PerfAndPowercap,
        (false, true) => Coverage::PowercapOnly,
        (true, false) => Coverage::PerfOnly,
        (false, false) => Coverage::Unknown,
    }
}

/// The kernel's name of `cpu`'s model, from any of the tables.
fn kernel_name(cpu: &CpuInfo) -> Option<&'static str> {
    let (family, model) = (cpu.family?, cpu.model?);
    if cpu.vendor != Vendor::Intel {
        return None;
    }
    [TPMI_INTEL_MODELS, PERF_INTEL_MODELS, POWERCAP_INTEL_MODELS]
        .into_iter()
        .find_map(|t| find(t, family, model))
        .map(|r| r.name)
}

fn describe(cpu: &CpuInfo, family: u32, model: u32) -> String {
    match kernel_name(cpu) {
        Some(name) => format!(
            "{} family {family:#x} model {model:#x} ({name})",
            cpu.vendor
        ),
        None => format!("{} family {family:#x} model {model:#x}", cpu.vendor),
    }
}

/// A warning (to print once, with the mechanism's notes) when no kernel MSR model
/// table vouches for `cpu`'s energy units: a model in neither perf's nor
/// powercap's table, a part the kernel reads through TPMI (which says so and what
/// works there), an AMD/Hygon family older than Zen, or a CPU whose family or model
/// is unknown. `None` when either table lists it.
pub fn unknown_model_warning(cpu: &CpuInfo) -> Option<String> {
    let (Some(family), Some(model)) = (cpu.family, cpu.model) else {
        return Some(format!(
            "the {} CPU's family and model are unknown (cpuinfo lacks them): the quirk table \
             cannot be matched, so every domain uses the unit register's ESU; compare with \
             `quietwatt check`",
            cpu.vendor
        ));
    };
    let who = describe(cpu, family, model);
    match coverage(cpu) {
        Coverage::PerfAndPowercap | Coverage::PowercapOnly | Coverage::PerfOnly => None,
        Coverage::Tpmi => Some(format!(
            "{who} is read through TPMI: it is in neither the kernel's perf nor its powercap \
             MSR model table, so no kernel table vouches for its MSR energy units and every \
             domain uses the unit register's ESU as is, which may be wrong for DRAM or psys. \
             powercap works through the intel_rapl_tpmi driver; from Linux 6.10 perf's `power` \
             PMU comes from that driver too, and its counts can fall at each hardware counter \
             wrap. Prefer the powercap mechanism and compare with `quietwatt check`"
        )),
        Coverage::Unknown => Some(format!(
            "{who} is in neither the kernel's perf nor its powercap RAPL model table: every \
             domain uses the unit register's ESU as is, which may be wrong for DRAM or psys on \
             a new server part; compare with `quietwatt check`"
        )),
    }
}

/// A note for a CPU that only powercap's table lists: the kernel's perf `power`
/// PMU (`arch/x86/events/rapl.c`) does not load on it. `None` otherwise.
pub fn perf_absence_note(cpu: &CpuInfo) -> Option<String> {
    if coverage(cpu) != Coverage::PowercapOnly {
        return None;
    }
    let who = describe(cpu, cpu.family?, cpu.model?);
    let own_pmu = cpu.vendor == Vendor::Intel
        && find(POWERCAP_INTEL_MODELS, cpu.family?, cpu.model?)
            .is_some_and(|r| r.driver_data.ends_with("_pmu"));
    Some(if own_pmu {
        format!(
            "{who} is in powercap's RAPL model table but not perf's: a `power` PMU, if any, \
             comes from powercap's driver (newest kernels), not from perf's; powercap and msr \
             read it as the kernel does"
        )
    } else {
        format!(
            "{who} is in powercap's RAPL model table but not perf's: the kernel has no perf \
             `power` PMU for it; read it through the powercap or msr mechanism"
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
mod tests;
