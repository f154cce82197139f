//! `--power-model`: an estimate where nothing can measure (the
//! `quietwatt-estimate` crate's model and source); the flags and words.

use quietwatt::estimate::ModelChoice;
use std::path::PathBuf;

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
