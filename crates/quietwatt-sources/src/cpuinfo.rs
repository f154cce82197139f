//! The processor's identity from `/proc/cpuinfo` under the root: vendor, family,
//! model, model name and flags.
//!
//! The MSR mechanism needs vendor, family and model to pick the registers and the
//! energy-unit quirks (see [`crate::quirks`]); `doctor` needs the `hypervisor` flag.
//! Only the first processor block is read: the kernel's RAPL drivers also decide
//! from the boot CPU alone, and mixed-vendor systems do not exist.

use crate::error::{Error, Result};
use crate::root::SysRoot;
use serde::Serialize;
use std::fmt;

const CPUINFO: &str = "/proc/cpuinfo";

/// The CPU vendor, from `vendor_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Vendor {
    /// `GenuineIntel`.
    Intel,
    /// `AuthenticAMD`.
    Amd,
    /// `HygonGenuine`: AMD Zen licensed to Hygon; same RAPL registers as AMD.
    Hygon,
    /// Anything else, including no `vendor_id` line (non-x86).
    Other,
}

impl Vendor {
    /// The vendor named by a `vendor_id` value.
    pub fn from_vendor_id(s: &str) -> Vendor {
        match s.trim() {
            "GenuineIntel" => Vendor::Intel,
            "AuthenticAMD" => Vendor::Amd,
            "HygonGenuine" => Vendor::Hygon,
            _ => Vendor::Other,
        }
    }

    /// Whether the CPU uses AMD's RAPL registers (AMD and Hygon).
    pub fn is_amd_like(self) -> bool {
        matches!(self, Vendor::Amd | Vendor::Hygon)
    }
}

impl fmt::Display for Vendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Vendor::Intel => "Intel",
            Vendor::Amd => "AMD",
            Vendor::Hygon => "Hygon",
            Vendor::Other => "unknown vendor",
        })
    }
}

/// What `/proc/cpuinfo` says about the (first) processor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CpuInfo {
    /// The vendor.
    pub vendor: Vendor,
    /// `cpu family` (decimal in the file), absent on non-x86.
    pub family: Option<u32>,
    /// `model` (decimal in the file; the kernel's tables write it in hex).
    pub model: Option<u32>,
    /// `model name`, e.g. `Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz`.
    pub model_name: String,
    /// The `flags` line, split on whitespace.
    pub flags: Vec<String>,
}

impl CpuInfo {
    /// Reads and parses `/proc/cpuinfo` under `root`.
    pub fn read(root: &SysRoot) -> Result<CpuInfo> {
        let path = root.path(CPUINFO);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        Ok(CpuInfo::parse(&text))
    }

    /// Parses the text of `/proc/cpuinfo`; fields that are missing or malformed are
    /// left unknown rather than failing, since only some callers need each field.
    pub fn parse(text: &str) -> CpuInfo {
        let mut info = CpuInfo {
            vendor: Vendor::Other,
            family: None,
            model: None,
            model_name: String::new(),
            flags: Vec::new(),
        };
        for line in text.lines() {
            // A blank line ends the first processor's block.
            if line.trim().is_empty() {
                if info.vendor != Vendor::Other || info.family.is_some() {
                    break;
                }
                continue;
            }
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            // Keys are padded with tabs: `model\t\t: 85`, `model name\t: ...`.
            match key.trim() {
                "vendor_id" => info.vendor = Vendor::from_vendor_id(value),
                "cpu family" => info.family = value.parse().ok(),
                "model" => info.model = value.parse().ok(),
                "model name" => info.model_name = value.to_string(),
                "flags" => info.flags = value.split_whitespace().map(str::to_string).collect(),
                _ => {}
            }
        }
        info
    }

    /// Whether the `flags` line has `flag`.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    /// Whether this runs under a hypervisor (the `hypervisor` CPUID flag).
    pub fn is_virtual_machine(&self) -> bool {
        self.has_flag("hypervisor")
    }
}

impl fmt::Display for CpuInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.vendor)?;
        match (self.family, self.model) {
            (Some(fam), Some(m)) => write!(f, " family {fam:#x} model {m:#x}")?,
            (Some(fam), None) => write!(f, " family {fam:#x}")?,
            _ => {}
        }
        if !self.model_name.is_empty() {
            write!(f, " ({})", self.model_name)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKX: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\n\
        model name\t: Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz\nstepping\t: 4\n\
        flags\t\t: fpu vme msr rapl\n\nprocessor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n";

    #[test]
    fn first_block_gives_vendor_family_model_and_name() {
        let c = CpuInfo::parse(SKX);
        assert_eq!(c.vendor, Vendor::Intel);
        assert_eq!(c.family, Some(6));
        // `model` must not be confused with `model name`, and is decimal.
        assert_eq!(c.model, Some(0x55));
        assert_eq!(c.model_name, "Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz");
        assert!(c.has_flag("rapl"));
        assert!(!c.is_virtual_machine());
        assert_eq!(
            c.to_string(),
            "Intel family 0x6 model 0x55 (Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz)"
        );
    }

    #[test]
    fn vendors_and_missing_fields() {
        assert_eq!(Vendor::from_vendor_id("HygonGenuine"), Vendor::Hygon);
        assert!(Vendor::Hygon.is_amd_like() && Vendor::Amd.is_amd_like());
        assert!(!Vendor::Intel.is_amd_like());
        // An arm64 cpuinfo: no vendor_id, no family.
        let c = CpuInfo::parse("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\n");
        assert_eq!(c.vendor, Vendor::Other);
        assert_eq!((c.family, c.model), (None, None));
        let vm = CpuInfo::parse("vendor_id : AuthenticAMD\nflags : fpu hypervisor\n");
        assert!(vm.is_virtual_machine());
    }

    #[test]
    fn reads_under_a_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("proc/cpuinfo"), SKX).unwrap();
        let c = CpuInfo::read(&SysRoot::new(dir.path())).unwrap();
        assert_eq!(c.model, Some(85));
        let err = CpuInfo::read(&SysRoot::new(dir.path().join("nope")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("proc/cpuinfo"), "{err}");
    }
}
