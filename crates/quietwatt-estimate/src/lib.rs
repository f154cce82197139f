//! Energy where nothing can measure it: a labelled estimate.
//!
//! Most CI runners and cloud VMs expose no RAPL. This crate fits a power model
//! of package and DRAM on what a VM can see (the busy CPUs, from
//! `/proc/stat`), calibrated against real RAPL on the same CPU with quietwatt's
//! own mechanisms ([`calibrate`]), and states its cross-validated error
//! ([`model::DomainModel::error_w`]). The model then reads as a
//! [`quietwatt::Source`] of mechanism `estimate` ([`EstimateSource`]): the
//! meter computes the figures as for any mechanism, every report says
//! ESTIMATED with the model's source ([`quietwatt::source::Estimated`]), and
//! each figure's uncertainty holds the model's error.
//!
//! ```no_run
//! use quietwatt_estimate::{EstimateSource, PowerModel};
//! let model = PowerModel::load("model.json".as_ref())?;
//! let source = EstimateSource::open(&model, "model.json", &Default::default(), "/proc/stat".as_ref())?;
//! let (_, m) = quietwatt::Session::start_on(Box::new(source), Default::default())
//!     .and_then(|s| Ok(((), s.stop()?)))?;
//! println!("{} J (ESTIMATED)", m.energy.total_energy_j.unwrap_or_default());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

pub mod busy;
pub mod calibrate;
pub mod fit;
pub mod model;
pub mod source;

pub use model::{CpuIdentity, PowerModel};
pub use source::EstimateSource;

use std::path::PathBuf;

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
        model: CpuIdentity,
        /// This one.
        here: CpuIdentity,
    },
    /// `/proc/stat` cannot be read.
    #[error("cannot read the busy CPUs from {path}: {source}; the estimate needs /proc mounted and readable")]
    Stat {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A domain asked for is not modelled.
    #[error("{0}")]
    Selection(quietwatt::source::Error),
    /// Calibration could not measure.
    #[error("calibration needs counters to measure against: {0}")]
    Measure(quietwatt::Error),
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
