//! Energy where nothing can measure it: a labelled estimate.
//!
//! Most CI runners and cloud VMs expose no RAPL. This crate fits a power model
//! of package and DRAM on what a VM can see (the busy CPUs, from
//! `/proc/stat`), calibrated against real RAPL on the same CPU with quietwatt's
//! own mechanisms ([`calibrate`]), and where they can be read, on the busy
//! CPUs' frequency and the PMU's instructions and cycles ([`inputs`]), with
//! simpler fits kept for machines that read fewer; it states its
//! cross-validated error
//! ([`model::DomainModel::error_w`]). The model then reads as a
//! [`quietwatt_sources::Source`] of mechanism `estimate` ([`EstimateSource`]):
//! the engine's meter computes the figures as for any mechanism, every report
//! says ESTIMATED with the model's source ([`quietwatt_sources::Estimated`]),
//! and each figure's uncertainty holds the model's error. The engine opens it
//! where nothing can measure and a model is given ([`open_model`]).
//!
//! This crate sits beside the mechanisms, below the engine: the calibration
//! sweep is given a way to measure ([`calibrate::calibrate`]'s `measure`, the
//! engine's session in `quietwatt calibrate`).
//!
//! ```no_run
//! use quietwatt_estimate::{open_model, ModelChoice};
//! use quietwatt_sources::Source;
//! let model = ModelChoice::file("model.json");
//! let mut source = open_model(&model, &Default::default(), "/proc".as_ref(), "/sys".as_ref())?;
//! let mut energy = vec![0; source.channels().len()];
//! source.read(&mut energy)?; // µJ since it was opened, as the model predicts
//! println!("{:?} (ESTIMATED: {:?})", energy, source.estimate());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod busy;
pub mod calibrate;
pub mod fit;
pub mod governor;
pub mod guess;
pub mod inputs;
pub mod model;
pub mod source;

pub use model::{CpuIdentity, PowerModel};
pub use source::EstimateSource;

use std::path::{Path, PathBuf};

/// Which model to estimate with.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ModelChoice {
    /// A model file (`quietwatt calibrate`'s); `force`: use it even if made
    /// on another CPU.
    File {
        /// The file.
        path: PathBuf,
        /// Whether another CPU's model is accepted.
        force: bool,
    },
    /// The built-in table's guess for this CPU's microarchitecture
    /// ([`guess::builtin`]).
    BuiltIn,
    /// A TDP-based guess ([`guess::tdp`]).
    Tdp {
        /// The TDP of this machine's CPUs, W.
        watts: f64,
    },
}

impl ModelChoice {
    /// The model file at `path`, refused if made on another CPU.
    pub fn file(path: impl Into<PathBuf>) -> ModelChoice {
        ModelChoice::File {
            path: path.into(),
            force: false,
        }
    }

    /// What `QUIETWATT_POWER_MODEL` names (a file, or `builtin`), when it is
    /// set and not empty.
    pub fn from_env() -> Option<ModelChoice> {
        match std::env::var_os(MODEL_ENV) {
            Some(p) if p == BUILTIN => Some(ModelChoice::BuiltIn),
            Some(p) if !p.is_empty() => Some(ModelChoice::file(p)),
            _ => None,
        }
    }
}

/// The name of the built-in table where a model file is expected.
pub const BUILTIN: &str = "builtin";

/// The model `choice` names, checked against this CPU (`proc`'s `cpuinfo`; a
/// model file of another part is refused unless forced), as a source
/// estimating the domains `selection` names from `proc`'s `stat` (and
/// `sys`'s cpufreq, and the PMU, where the model uses them and they can be
/// read).
pub fn open_model(
    choice: &ModelChoice,
    selection: &quietwatt_sources::Selection,
    proc: &Path,
    sys: &Path,
) -> Result<EstimateSource, EstimateError> {
    let cpuinfo =
        std::fs::read_to_string(proc.join("cpuinfo")).map_err(|source| EstimateError::Stat {
            path: proc.join("cpuinfo"),
            source,
        })?;
    let cpus = busy::BusyClock::open(&proc.join("stat"), 0)
        .map_err(|source| EstimateError::Stat {
            path: proc.join("stat"),
            source,
        })?
        .cpus();
    let here = CpuIdentity::parse(&cpuinfo, u32::try_from(cpus).unwrap_or(u32::MAX));
    let (model, origin) = match choice {
        ModelChoice::File { path, force } => {
            let model = PowerModel::load(path)?;
            model.check_cpu(&here, *force)?;
            (model, path.display().to_string())
        }
        ModelChoice::BuiltIn => (
            guess::builtin(&here).ok_or_else(|| EstimateError::NotInTable {
                cpu: Box::new(here.clone()),
            })?,
            "the built-in table".to_string(),
        ),
        ModelChoice::Tdp { watts } => {
            if !(watts.is_finite() && *watts > 0.0 && *watts <= 10_000.0) {
                return Err(EstimateError::Tdp { watts: *watts });
            }
            (guess::tdp(&here, *watts), format!("a {watts} W TDP"))
        }
    };
    EstimateSource::open(&model, &origin, selection, &proc.join("stat"), sys)
}

impl From<EstimateError> for quietwatt_sources::Error {
    /// A domain not modelled, as from a mechanism; a model file or TDP the
    /// caller must fix, [`quietwatt_sources::Error::BadModel`]; a machine
    /// whose inputs cannot be read (or a CPU the table lacks), nothing can
    /// estimate this way. Each message says what to do.
    fn from(e: EstimateError) -> Self {
        match e {
            EstimateError::Selection(e) => e,
            e @ (EstimateError::Stat { .. }
            | EstimateError::Measure(_)
            | EstimateError::NotInTable { .. }) => quietwatt_sources::Error::MechanismUnavailable {
                mechanism: "estimate",
                why: e.to_string(),
            },
            e => quietwatt_sources::Error::BadModel { why: e.to_string() },
        }
    }
}

/// The environment variable naming a power model file.
pub const MODEL_ENV: &str = "QUIETWATT_POWER_MODEL";

/// What went wrong making, reading or using a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EstimateError {
    /// The model file cannot be read.
    #[error("cannot read the power model {path}: {source}; give the file `quietwatt calibrate -o FILE` wrote")]
    Read {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The model file cannot be written.
    #[error("cannot write the power model {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The file is not a model this quietwatt reads.
    #[error("the power model {path} is corrupt: {why}; make it again with `quietwatt calibrate -o FILE` on a machine with RAPL")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// Made on another CPU.
    #[error("the power model was made on {model}, and this machine is {here}: its figures would not describe this CPU; calibrate one here (`quietwatt calibrate` on a machine of this CPU with RAPL), or force it (--force-model) and accept an error the model cannot state")]
    OtherCpu {
        /// The model's CPU.
        model: Box<CpuIdentity>,
        /// This one.
        here: Box<CpuIdentity>,
    },
    /// `/proc/stat` cannot be read.
    #[error("cannot read the busy CPUs from {path}: {source}; the estimate needs /proc mounted and readable")]
    Stat {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The built-in table does not list this CPU.
    #[error("the built-in table has no figures for {cpu}: calibrate a model on a machine of this CPU with RAPL (`quietwatt calibrate -o FILE`, then --power-model FILE), or give --tdp-watts W for a TDP-based guess")]
    NotInTable {
        /// This CPU.
        cpu: Box<CpuIdentity>,
    },
    /// A TDP that is no power.
    #[error("a TDP of {watts} W: give the power of this machine's CPUs in watts, above 0 and at most 10000 (on a VM, the share of the host's TDP its vCPUs are)")]
    Tdp {
        /// What was given.
        watts: f64,
    },
    /// A domain asked for is not modelled.
    #[error("{0}")]
    Selection(quietwatt_sources::Error),
    /// Calibration was asked to stop (a signal) after `measured` levels; the
    /// frequency limits are restored and no model is written.
    #[error("calibration stopped after {measured} level(s): no model written (the frequency limits are as they were)")]
    Interrupted {
        /// The levels measured.
        measured: usize,
    },
    /// A frequency could not be set part-way through the sweep.
    #[error("cannot set the frequency for calibration: {0}; calibrate with --frequencies 0 to leave it to the governor")]
    Governor(String),
    /// Calibration could not measure.
    #[error("calibration needs counters to measure against: {0}")]
    Measure(String),
    /// The spinners did not change the load: other work kept the CPUs busy.
    #[error("the busy CPUs stayed between {lo:.2} and {hi:.2} while 0 to {spinners} CPUs were kept busy: other work kept this machine busy, so the sweep saw no change of load to fit; calibrate on an idle machine")]
    NoLoadRange {
        /// The fewest busy CPUs seen at a level.
        lo: f64,
        /// The most.
        hi: f64,
        /// The most spinners run.
        spinners: usize,
    },
    /// Calibration's points do not make a model.
    #[error("calibration could not fit {domain}: {why}")]
    Fit {
        /// The domain.
        domain: String,
        /// Why.
        why: String,
    },
}
