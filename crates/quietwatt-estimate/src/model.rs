//! The power model file: what it predicts from, for which CPU, how well.

use crate::fit::Fitted;
use crate::inputs::Input;
use crate::EstimateError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The schema of a model file: version 2 adds the frequency and PMU inputs
/// ([`DomainModel::terms`]) and the simpler fits ([`PowerModel::simpler`]).
pub const SCHEMA: &str = "quietwatt.power-model/2";

/// The schema of version 1 (busy CPUs only), still read.
pub const SCHEMA_V1: &str = "quietwatt.power-model/1";

/// The input every model has: busy CPUs, from `/proc/stat`.
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

/// What one unit of an input beyond the busy CPUs adds to a domain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Term {
    /// The input ([`Input::name`]).
    pub input: String,
    /// W per unit of it ([`Input::unit`]).
    pub w_per_unit: f64,
}

/// One domain's line (a plane, with more inputs than the busy CPUs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DomainModel {
    /// `package` or `dram`.
    pub domain: String,
    /// The power with no CPU busy, W.
    pub idle_w: f64,
    /// What each busy CPU adds, W.
    pub per_busy_cpu_w: f64,
    /// What the other inputs add.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub terms: Vec<Term>,
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
    /// A fit on `inputs` (busy CPUs first) as a domain's model, with its
    /// stated error.
    pub fn from_fit(domain: &str, inputs: &[Input], f: &Fitted, points: usize) -> DomainModel {
        DomainModel {
            domain: domain.to_string(),
            idle_w: f.idle_w,
            per_busy_cpu_w: f.coef.first().copied().unwrap_or(0.0),
            terms: inputs
                .iter()
                .zip(&f.coef)
                .skip(1)
                .map(|(i, c)| Term {
                    input: i.name().into(),
                    w_per_unit: *c,
                })
                .collect(),
            error_w: (ERROR_RMSES * f.loo_rmse_w).max(f.loo_max_w),
            loo_rmse_w: f.loo_rmse_w,
            points,
        }
    }

    /// W per unit of `input` (0 where the model has no such term).
    pub fn coef(&self, input: Input) -> f64 {
        if input == Input::BusyCpus {
            return self.per_busy_cpu_w;
        }
        self.terms
            .iter()
            .find(|t| t.input == input.name())
            .map_or(0.0, |t| t.w_per_unit)
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

/// One fit: each domain's plane on some inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// What it predicts from ([`Input::name`]s, [`BUSY_CPUS`] first).
    pub inputs: Vec<String>,
    /// One plane per domain.
    pub domains: Vec<DomainModel>,
    /// What it cannot see, for every report that uses it.
    pub blind_to: Vec<String>,
}

impl Fit {
    /// Its inputs (those a loaded file names are known).
    pub fn inputs(&self) -> impl Iterator<Item = Input> + '_ {
        self.inputs.iter().filter_map(|i| Input::parse(i))
    }

    /// The plane of `domain`, if modelled.
    pub fn domain(&self, domain: &str) -> Option<&DomainModel> {
        self.domains.iter().find(|d| d.domain == domain)
    }
}

/// A power model: package and DRAM power from the busy CPUs, and where
/// calibration could read them, their frequency, instructions and cycles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerModel {
    /// [`SCHEMA`].
    pub schema: String,
    /// The CPU it was made on.
    pub cpu: CpuIdentity,
    /// The fit on the most inputs.
    #[serde(flatten)]
    pub fit: Fit,
    /// How it was made.
    pub origin: Origin,
    /// Fits on fewer inputs, most first, the last on the busy CPUs alone:
    /// used where a machine cannot read an input of the fits before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub simpler: Vec<Fit>,
    /// The inputs calibration could not fit, and why (read nowhere, or never
    /// varied apart from the others).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

/// What a model on `inputs` cannot tell apart.
pub fn blind_to(inputs: &[Input]) -> Vec<String> {
    let has = |i| inputs.contains(&i);
    let mut v = Vec::new();
    if has(Input::Instructions) {
        v.push("instruction mix beyond the count (vector width, divides)".into());
        v.push("memory traffic beyond the stalls it costs in cycles".into());
    } else {
        v.push("instruction mix (vector units, divides)".into());
        v.push("memory traffic (DRAM follows CPU time only)".into());
    }
    if !has(Input::BusyCpuGhz) && !has(Input::Cycles) {
        v.push("frequency changes not caused by load".into());
    }
    v.push("other machines sharing the host".into());
    v
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
        if m.schema != SCHEMA && m.schema != SCHEMA_V1 {
            return Err(corrupt(format!(
                "schema {:?}, where this quietwatt reads {SCHEMA:?} and {SCHEMA_V1:?}",
                m.schema
            )));
        }
        for fit in std::iter::once(&m.fit).chain(&m.simpler) {
            fit.check().map_err(corrupt)?;
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

    /// The plane of `domain` in the fit on the most inputs, if modelled.
    pub fn domain(&self, domain: &str) -> Option<&DomainModel> {
        self.fit.domain(domain)
    }

    /// The fit on the most inputs that `reads` says this machine reads, and
    /// the inputs of the richer fits it cannot (`None` where even the busy
    /// CPUs' fit needs one: a file that names no such fit).
    pub fn choose(&self, reads: impl Fn(Input) -> bool) -> Option<(&Fit, Vec<Input>)> {
        let mut unread = Vec::new();
        for fit in std::iter::once(&self.fit).chain(&self.simpler) {
            let lacking: Vec<Input> = fit.inputs().filter(|i| !reads(*i)).collect();
            if lacking.is_empty() {
                return Some((fit, unread));
            }
            for i in lacking {
                if !unread.contains(&i) {
                    unread.push(i);
                }
            }
        }
        None
    }

    /// Every input of any of its fits.
    pub fn all_inputs(&self) -> Vec<Input> {
        let mut v: Vec<Input> = Vec::new();
        for i in std::iter::once(&self.fit)
            .chain(&self.simpler)
            .flat_map(Fit::inputs)
        {
            if !v.contains(&i) {
                v.push(i);
            }
        }
        v
    }
}

impl Fit {
    /// Why this fit cannot be used, if it cannot.
    fn check(&self) -> Result<(), String> {
        for i in &self.inputs {
            if Input::parse(i).is_none() {
                return Err(format!(
                    "input {i:?}: this quietwatt models from {}",
                    crate::inputs::ALL.map(Input::name).join(", ")
                ));
            }
        }
        if self.inputs.first().map(String::as_str) != Some(BUSY_CPUS) {
            return Err(format!(
                "inputs {:?}: every fit starts with {BUSY_CPUS}",
                self.inputs
            ));
        }
        if self.domains.is_empty() {
            return Err("no domain".into());
        }
        let ok = |x: f64| x.is_finite() && (0.0..=10_000.0).contains(&x);
        for d in &self.domains {
            if !(ok(d.idle_w)
                && ok(d.per_busy_cpu_w.abs())
                && ok(d.error_w)
                && matches!(d.domain.as_str(), "package" | "dram"))
            {
                return Err(format!(
                    "domain {:?}: idle {} W, {} W per busy CPU, error {} W (a domain package or dram, each 0 to 10000 W)",
                    d.domain, d.idle_w, d.per_busy_cpu_w, d.error_w
                ));
            }
            for t in &d.terms {
                if !(self.inputs.contains(&t.input)
                    && t.input != BUSY_CPUS
                    && ok(t.w_per_unit.abs()))
                {
                    return Err(format!(
                        "domain {:?}: a term of {:?} at {} W per unit (an input of the fit besides {BUSY_CPUS}, within ±10000 W)",
                        d.domain, t.input, t.w_per_unit
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CPUINFO: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC 7B13\n\nprocessor\t: 1\nvendor_id\t: GenuineIntel\n";

    fn fit(inputs: &[Input], coef: &[f64]) -> Fit {
        Fit {
            inputs: inputs.iter().map(|i| i.name().to_string()).collect(),
            domains: vec![DomainModel::from_fit(
                "package",
                inputs,
                &Fitted {
                    idle_w: 10.0,
                    coef: coef.to_vec(),
                    loo_rmse_w: 0.1,
                    loo_max_w: 0.3,
                },
                8,
            )],
            blind_to: blind_to(inputs),
        }
    }

    fn model() -> PowerModel {
        PowerModel {
            schema: SCHEMA.into(),
            cpu: CpuIdentity::parse(CPUINFO, 2),
            fit: fit(&[Input::BusyCpus, Input::BusyCpuGhz], &[2.0, 1.0]),
            origin: Origin::Calibrated {
                mechanism: "powercap".into(),
                emulated: true,
                seconds_per_level: 2.0,
                created_unix_s: 0,
            },
            simpler: vec![fit(&[Input::BusyCpus], &[5.0])],
            left_out: vec![],
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
        assert!((m.fit.domains[0].error_w - 0.3).abs() < 1e-12);
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
                    fit: Fit {
                        domains: vec![],
                        ..model().fit
                    },
                    ..model()
                })
                .unwrap(),
                "no domain",
            ),
            (
                &serde_json::to_string(&model())
                    .unwrap()
                    .replace("\"busy_cpu_ghz\"", "\"watts\""),
                "input \"watts\"",
            ),
        ] {
            std::fs::write(&p, text).unwrap();
            let e = PowerModel::load(&p).unwrap_err().to_string();
            assert!(e.contains("corrupt") && e.contains(says), "{e}");
        }
        let mut bad = model();
        bad.fit.domains[0].idle_w = f64::NAN;
        std::fs::write(
            &p,
            serde_json::to_string(&bad).unwrap().replace("NaN", "null"),
        )
        .unwrap();
        assert!(PowerModel::load(&p).is_err());
    }

    /// A machine that reads the frequency gets the richer fit; one without
    /// cpufreq, the busy CPUs' fit, and is told what it lacks.
    #[test]
    fn the_richest_fit_this_machine_can_read_is_chosen() {
        let m = model();
        let (f, unread) = m.choose(|_| true).unwrap();
        assert_eq!(f.inputs, ["busy_cpus", "busy_cpu_ghz"]);
        assert!(unread.is_empty());
        assert!((f.domains[0].coef(Input::BusyCpuGhz) - 1.0).abs() < 1e-12);
        let (f, unread) = m.choose(|i| i == Input::BusyCpus).unwrap();
        assert_eq!(f.inputs, ["busy_cpus"]);
        assert_eq!(unread, [Input::BusyCpuGhz]);
        assert_eq!(f.domains[0].coef(Input::BusyCpuGhz), 0.0);
        assert_eq!(m.all_inputs(), [Input::BusyCpus, Input::BusyCpuGhz]);
    }

    /// Version 1 files (busy CPUs only, no terms) still load.
    #[test]
    fn a_version_1_file_loads() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.json");
        let mut m = model();
        m.schema = SCHEMA_V1.into();
        m.fit = m.simpler.pop().unwrap();
        std::fs::write(&p, serde_json::to_string(&m).unwrap()).unwrap();
        let back = PowerModel::load(&p).unwrap();
        assert_eq!(back.fit.inputs, [BUSY_CPUS]);
        assert!(back.simpler.is_empty() && back.fit.domains[0].terms.is_empty());
    }
}
