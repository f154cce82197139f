//! The power model file: what it predicts from, for which CPU, how well.

use crate::fit::Line;
use crate::EstimateError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The schema of a model file.
pub const SCHEMA: &str = "quietwatt.power-model/1";

/// The one input of this version: busy CPUs, from `/proc/stat`.
pub const BUSY_CPUS: &str = "busy_cpus";

/// How confident the stated error is: a figure's uncertainty holds this many
/// leave-one-out RMSEs of the model (about 95 % of points for normal
/// residuals), and never less than its largest leave-one-out residual.
pub const ERROR_RMSES: f64 = 2.0;

/// Which CPU a model was made on (`/proc/cpuinfo`'s first processor).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuIdentity {
    /// `vendor_id`: `GenuineIntel`, `AuthenticAMD`.
    pub vendor: String,
    /// `cpu family`.
    pub family: u32,
    /// `model`.
    pub model: u32,
    /// `model name`, for people.
    pub model_name: String,
    /// The CPUs counted in `/proc/stat` when it was made.
    pub cpus: u32,
}

impl CpuIdentity {
    /// This machine's, from `cpuinfo` text and the CPUs `/proc/stat` counts.
    pub fn parse(cpuinfo: &str, cpus: u32) -> CpuIdentity {
        let field = |key: &str| {
            cpuinfo
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    (k.trim() == key).then(|| v.trim().to_string())
                })
                .unwrap_or_default()
        };
        CpuIdentity {
            vendor: field("vendor_id"),
            family: field("cpu family").parse().unwrap_or(0),
            model: field("model").parse().unwrap_or(0),
            model_name: field("model name"),
            cpus,
        }
    }

    /// Whether a model made on `self` describes `other`: same vendor, family
    /// and model (the CPU count may differ: the model is per busy CPU).
    pub fn same_part(&self, other: &CpuIdentity) -> bool {
        self.vendor == other.vendor && self.family == other.family && self.model == other.model
    }
}

impl std::fmt::Display for CpuIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} family {} model {:#x} ({})",
            self.vendor, self.family, self.model, self.model_name
        )
    }
}

/// One domain's line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DomainModel {
    /// `package` or `dram`.
    pub domain: String,
    /// The power with no CPU busy, W.
    pub idle_w: f64,
    /// What each busy CPU adds, W.
    pub per_busy_cpu_w: f64,
    /// The stated error of a predicted power, W: what every estimated figure's
    /// uncertainty holds per second ([`ERROR_RMSES`] leave-one-out RMSEs, at
    /// least the largest leave-one-out residual).
    pub error_w: f64,
    /// The leave-one-out RMSE, W.
    pub loo_rmse_w: f64,
    /// The calibration points fitted.
    pub points: usize,
}

impl DomainModel {
    /// A fitted line as a domain's model, with its stated error.
    pub fn from_line(domain: &str, line: &Line, points: usize) -> DomainModel {
        DomainModel {
            domain: domain.to_string(),
            idle_w: line.idle_w,
            per_busy_cpu_w: line.per_busy_cpu_w,
            error_w: (ERROR_RMSES * line.loo_rmse_w).max(line.loo_max_w),
            loo_rmse_w: line.loo_rmse_w,
            points,
        }
    }
}

/// How the model was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Origin {
    /// `quietwatt calibrate` on this CPU, against its RAPL counters.
    Calibrated {
        /// The mechanism that measured.
        mechanism: String,
        /// Whether those counters were quietwatt's emulator's.
        emulated: bool,
        /// Seconds measured per load level.
        seconds_per_level: f64,
        /// When, seconds since the Unix epoch.
        created_unix_s: u64,
    },
    /// Not calibrated: a guess ([`crate::guess`]), whose basis is said.
    Guess {
        /// What it rests on.
        basis: String,
    },
}

impl Origin {
    /// How the model was made, in words for the reports.
    pub fn describe(&self) -> String {
        match self {
            Origin::Calibrated {
                mechanism,
                emulated,
                ..
            } => format!(
                "calibrated with {mechanism}{}",
                if *emulated {
                    " on quietwatt's EMULATED RAPL"
                } else {
                    ""
                }
            ),
            Origin::Guess { basis } => basis.clone(),
        }
    }
}

/// A power model: package and DRAM power from the busy CPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerModel {
    /// [`SCHEMA`].
    pub schema: String,
    /// The CPU it was made on.
    pub cpu: CpuIdentity,
    /// What it predicts from ([`BUSY_CPUS`]).
    pub inputs: Vec<String>,
    /// One line per domain.
    pub domains: Vec<DomainModel>,
    /// How it was made.
    pub origin: Origin,
    /// What it cannot see, for every report that uses it.
    pub blind_to: Vec<String>,
}

/// What a busy-CPU model cannot tell apart.
pub fn blind_to() -> Vec<String> {
    vec![
        "instruction mix (vector units, divides)".into(),
        "memory traffic (DRAM follows CPU time only)".into(),
        "frequency changes not caused by load".into(),
        "other machines sharing the host".into(),
    ]
}

impl PowerModel {
    /// Reads and checks a model file.
    pub fn load(path: &Path) -> Result<PowerModel, EstimateError> {
        let text = std::fs::read_to_string(path).map_err(|source| EstimateError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let corrupt = |why: String| EstimateError::Corrupt {
            path: path.to_path_buf(),
            why,
        };
        let m: PowerModel = serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
        if m.schema != SCHEMA {
            return Err(corrupt(format!(
                "schema {:?}, where this quietwatt reads {SCHEMA:?}",
                m.schema
            )));
        }
        if m.inputs.iter().any(|i| i != BUSY_CPUS) {
            return Err(corrupt(format!(
                "inputs {:?}: this quietwatt models from {BUSY_CPUS} only",
                m.inputs
            )));
        }
        if m.domains.is_empty() {
            return Err(corrupt("no domain".into()));
        }
        for d in &m.domains {
            let ok = |x: f64| x.is_finite() && (0.0..=10_000.0).contains(&x);
            if !(ok(d.idle_w)
                && ok(d.per_busy_cpu_w.abs())
                && ok(d.error_w)
                && matches!(d.domain.as_str(), "package" | "dram"))
            {
                return Err(corrupt(format!(
                    "domain {:?}: idle {} W, {} W per busy CPU, error {} W (a domain package or dram, each 0 to 10000 W)",
                    d.domain, d.idle_w, d.per_busy_cpu_w, d.error_w
                )));
            }
        }
        Ok(m)
    }

    /// Writes it as pretty JSON.
    pub fn save(&self, path: &Path) -> Result<(), EstimateError> {
        let mut text = serde_json::to_string_pretty(self).expect("a model serialises");
        text.push('\n');
        std::fs::write(path, text).map_err(|source| EstimateError::Write {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Refuses a model made on another part, unless `force`.
    pub fn check_cpu(&self, here: &CpuIdentity, force: bool) -> Result<(), EstimateError> {
        if force || self.cpu.same_part(here) {
            Ok(())
        } else {
            Err(EstimateError::OtherCpu {
                model: Box::new(self.cpu.clone()),
                here: Box::new(here.clone()),
            })
        }
    }

    /// The line of `domain`, if modelled.
    pub fn domain(&self, domain: &str) -> Option<&DomainModel> {
        self.domains.iter().find(|d| d.domain == domain)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\n";

    fn model() -> PowerModel {
        PowerModel {
            schema: SCHEMA.into(),
            cpu: CpuIdentity::parse(CPUINFO, 2),
            inputs: vec![BUSY_CPUS.into()],
            domains: vec![DomainModel::from_line(
                "package",
                &Line {
                    idle_w: 10.0,
                    per_busy_cpu_w: 5.0,
                    loo_rmse_w: 0.1,
                    loo_max_w: 0.3,
                },
                8,
            )],
            origin: Origin::Calibrated {
                mechanism: "powercap".into(),
                emulated: true,
                seconds_per_level: 2.0,
                created_unix_s: 0,
            },
            blind_to: blind_to(),
        }
    }

    #[test]
    fn the_first_processor_names_the_cpu() {
        let c = CpuIdentity::parse(CPUINFO, 2);
        assert_eq!(
            (c.vendor.as_str(), c.family, c.model),
            ("AuthenticAMD", 25, 1)
        );
        assert_eq!(c.model_name, "AMD EPYC 7B13");
    }

    #[test]
    fn a_model_round_trips_and_states_its_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.json");
        let m = model();
        // The larger of two RMSEs and the worst point.
        assert!((m.domains[0].error_w - 0.3).abs() < 1e-12);
        m.save(&p).unwrap();
        assert_eq!(PowerModel::load(&p).unwrap(), m);
    }

    #[test]
    fn another_cpu_is_refused_unless_forced() {
        let m = model();
        let other = CpuIdentity {
            model: 0x11,
            ..m.cpu.clone()
        };
        let e = m.check_cpu(&other, false).unwrap_err().to_string();
        assert!(
            e.contains("made on AuthenticAMD family 25 model 0x1")
                && e.contains("model 0x11")
                && e.contains("calibrate"),
            "{e}"
        );
        m.check_cpu(&other, true).unwrap();
        m.check_cpu(&m.cpu, false).unwrap();
    }

    #[test]
    fn a_corrupt_file_says_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.json");
        for (text, says) in [
            ("{not json", "key must be a string"),
            (
                &serde_json::to_string(&PowerModel {
                    schema: "x/9".into(),
                    ..model()
                })
                .unwrap(),
                "schema",
            ),
            (
                &serde_json::to_string(&PowerModel {
                    domains: vec![],
                    ..model()
                })
                .unwrap(),
                "no domain",
            ),
        ] {
            std::fs::write(&p, text).unwrap();
            let e = PowerModel::load(&p).unwrap_err().to_string();
            assert!(e.contains("corrupt") && e.contains(says), "{e}");
        }
        let mut bad = model();
        bad.domains[0].idle_w = f64::NAN;
        std::fs::write(
            &p,
            serde_json::to_string(&bad).unwrap().replace("NaN", "null"),
        )
        .unwrap();
        assert!(PowerModel::load(&p).is_err());
    }
}
