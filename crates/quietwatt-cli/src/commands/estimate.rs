//! `--power-model`: an estimate where nothing can measure (the
//! `quietwatt-estimate` crate's model and source); the flags and words.

use crate::exit::{Failure, NO_RAPL, USAGE};
use quietwatt::estimate::{EstimateError, ModelChoice};
use std::path::{Path, PathBuf};

/// The flags of an estimate.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct EstimateArgs {
    /// Where nothing can measure (no RAPL, no reader service), estimate with
    /// this power model: a file `quietwatt calibrate` made on a machine of this
    /// CPU with RAPL, or `builtin` (a guess from a table of per-CPU power by
    /// microarchitecture). Every output says ESTIMATED, and each figure's
    /// uncertainty holds the model's stated error. Where the counters can be
    /// read, they are, and the model is not used.
    #[arg(long, value_name = "FILE|builtin", env = quietwatt::estimate::MODEL_ENV)]
    pub power_model: Option<PathBuf>,
    /// Use a model file made on another CPU (refused otherwise): its stated
    /// error then does not hold.
    #[arg(long, requires = "power_model")]
    pub force_model: bool,
    /// Where nothing can measure, estimate from this TDP, W (on a VM, the share
    /// of the host's TDP its vCPUs are): a guess, labelled so, ± half of it.
    #[arg(
        long,
        value_name = "W",
        conflicts_with = "power_model",
        allow_negative_numbers = true
    )]
    pub tdp_watts: Option<f64>,
}

impl EstimateArgs {
    /// The model to fall back on, for the library.
    pub fn choice(&self) -> Option<ModelChoice> {
        if let Some(watts) = self.tdp_watts {
            return Some(ModelChoice::Tdp { watts });
        }
        let path = self.power_model.as_ref()?;
        Some(if path.as_os_str() == quietwatt::estimate::BUILTIN {
            ModelChoice::BuiltIn
        } else {
            ModelChoice::File {
                path: path.clone(),
                force: self.force_model,
            }
        })
    }
}

/// Where opening the counters failed with `local` for want of any (exit 69),
/// the model's estimate, when a model is given; otherwise `local` as it was.
/// The frequency is read under `root`'s `sys`.
pub fn instead(
    local: Failure,
    args: &EstimateArgs,
    selection: &quietwatt::Selection,
    root: &quietwatt::SysRoot,
) -> Result<Box<dyn quietwatt::Source>, Failure> {
    let Some(choice) = args.choice() else {
        return Err(local);
    };
    if local.code() != NO_RAPL {
        return Err(local);
    }
    quietwatt::estimate::open_model(
        &choice,
        selection,
        Path::new("/proc"),
        &root.dir().join("sys"),
    )
    .map(|s| Box::new(s) as Box<dyn quietwatt::Source>)
    .map_err(|e| {
        Failure::new(
            code(&e),
            format!(
                "{e}\n  (nothing can measure here: {})",
                local.message().lines().next().unwrap_or_default()
            ),
        )
    })
}

/// The exit code of an estimate that cannot be made: a bad file or flag is
/// the user's to fix (2); a machine that cannot be read, 69.
pub fn code(e: &EstimateError) -> u8 {
    match e {
        EstimateError::Stat { .. }
        | EstimateError::Measure(_)
        | EstimateError::NotInTable { .. } => NO_RAPL,
        _ => USAGE,
    }
}
