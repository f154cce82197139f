//! Which processor the emulator plays: vendor, family and model, and the name
//! `/proc/cpuinfo` shows for it.

use serde::{Deserialize, Serialize};

/// The processor vendor, family and model, as `/proc/cpuinfo` shows them. The
/// model selects the unit quirks (see the `units` module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    /// GenuineIntel: MSRs 0x606/0x611/0x639/0x641/0x619/0x64D, perf `power` PMU.
    Intel {
        /// CPU family (6 for every RAPL part).
        family: u32,
        /// CPU model, e.g. 0x9E (Kaby Lake), 0x55 (Skylake-X), 0x8F (Sapphire Rapids).
        model: u32,
    },
    /// AuthenticAMD (Zen): package and per-core energy only.
    Amd {
        /// CPU family, e.g. 0x17 (Zen, Zen 2), 0x19 (Zen 3, Zen 4), 0x1A (Zen 5).
        family: u32,
        /// CPU model.
        model: u32,
    },
}

impl Vendor {
    /// Kaby Lake desktop (family 6, model 0x9E): the default, no unit quirk.
    pub const KABY_LAKE: Vendor = Vendor::Intel {
        family: 6,
        model: 0x9E,
    };
    /// Skylake-X server (family 6, model 0x55): DRAM counts in 2^-16 J.
    pub const SKYLAKE_X: Vendor = Vendor::Intel {
        family: 6,
        model: 0x55,
    };
    /// Sapphire Rapids-X (family 6, model 0x8F): psys counts in 1 J.
    pub const SAPPHIRE_RAPIDS_X: Vendor = Vendor::Intel {
        family: 6,
        model: 0x8F,
    };
    /// AMD Zen 3 EPYC (family 0x19, model 0x01).
    pub const ZEN3: Vendor = Vendor::Amd {
        family: 0x19,
        model: 0x01,
    };

    /// An Intel family-6 part of the given model.
    pub fn intel(model: u32) -> Vendor {
        Vendor::Intel { family: 6, model }
    }

    /// The `model name` `/proc/cpuinfo` shows.
    pub fn model_name(self) -> String {
        model_name(self)
    }

    /// Whether this is AMD (package and per-core counters only).
    pub fn is_amd(self) -> bool {
        matches!(self, Vendor::Amd { .. })
    }

    /// `vendor_id` in `/proc/cpuinfo`.
    pub fn vendor_id(self) -> &'static str {
        match self {
            Vendor::Intel { .. } => "GenuineIntel",
            Vendor::Amd { .. } => "AuthenticAMD",
        }
    }

    /// The CPU family.
    pub fn family(self) -> u32 {
        match self {
            Vendor::Intel { family, .. } | Vendor::Amd { family, .. } => family,
        }
    }

    /// The CPU model.
    pub fn model(self) -> u32 {
        match self {
            Vendor::Intel { model, .. } | Vendor::Amd { model, .. } => model,
        }
    }
}

/// The marketing name of a few well-known parts; a generic name otherwise.
pub(crate) fn model_name(vendor: Vendor) -> String {
    let known = match vendor {
        Vendor::Intel { family: 6, model } => match model {
            0x9E => Some("Intel(R) Core(TM) i7-7700K CPU @ 4.20GHz"),
            0x55 => Some("Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz"),
            0x3F => Some("Intel(R) Xeon(R) CPU E5-2680 v3 @ 2.50GHz"),
            0x4F => Some("Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz"),
            0x56 => Some("Intel(R) Xeon(R) CPU D-1540 @ 2.00GHz"),
            0x6A => Some("Intel(R) Xeon(R) Platinum 8380 CPU @ 2.30GHz"),
            0x6C => Some("Intel(R) Xeon(R) D-2796NT CPU @ 2.00GHz"),
            0x57 => Some("Intel(R) Xeon Phi(TM) CPU 7210 @ 1.30GHz"),
            0x85 => Some("Intel(R) Xeon Phi(TM) CPU 7295 @ 1.50GHz"),
            0x8F => Some("Intel(R) Xeon(R) Platinum 8480+"),
            0xCF => Some("INTEL(R) XEON(R) PLATINUM 8580"),
            0x8C => Some("11th Gen Intel(R) Core(TM) i7-1165G7 @ 2.80GHz"),
            0x97 => Some("12th Gen Intel(R) Core(TM) i9-12900K"),
            0x37 => Some("Intel(R) Atom(TM) CPU  E3845  @ 1.91GHz"),
            _ => None,
        },
        Vendor::Amd { family, model } => match (family, model) {
            (0x17, 0x31) => Some("AMD EPYC 7742 64-Core Processor"),
            (0x19, 0x01) => Some("AMD EPYC 7763 64-Core Processor"),
            (0x19, 0x11) => Some("AMD EPYC 9654 96-Core Processor"),
            (0x19, 0x21) => Some("AMD Ryzen 9 5950X 16-Core Processor"),
            _ => None,
        },
        Vendor::Intel { .. } => None,
    };
    match known {
        Some(name) => name.to_string(),
        None => format!(
            "{} Processor (family {:#x}, model {:#x})",
            if vendor.is_amd() { "AMD" } else { "Intel(R)" },
            vendor.family(),
            vendor.model()
        ),
    }
}
