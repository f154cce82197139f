//! `--power-model`: an estimate where nothing can measure (the
//! `quietwatt-estimate` crate's model and source); the flags and words.

use crate::exit::{Failure, NO_RAPL, USAGE};
use quietwatt_estimate::{CpuIdentity, EstimateError, EstimateSource, PowerModel};
use std::path::{Path, PathBuf};

/// The flags of an estimate.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct EstimateArgs {
    /// Where nothing can measure (no RAPL, no reader service), estimate with
    /// this power model (made by `quietwatt calibrate` on a machine of this
    /// CPU with RAPL): every output says ESTIMATED, and each figure's
    /// uncertainty holds the model's stated error. Where the counters can be
    /// read, they are, and the model is not used.
    #[arg(long, value_name = "FILE", env = quietwatt_estimate::MODEL_ENV)]
    pub power_model: Option<PathBuf>,
    /// Use a model made on another CPU (refused otherwise): its stated error
    /// then does not hold.
    #[arg(long, requires = "power_model")]
    pub force_model: bool,
}

/// Where opening the counters failed with `local` for want of any (exit 69),
/// the model's estimate, when a model is given; otherwise `local` as it was.
pub fn instead(
    local: Failure,
    args: &EstimateArgs,
    selection: &quietwatt::Selection,
) -> Result<Box<dyn quietwatt::Source>, Failure> {
    let Some(path) = &args.power_model else {
        return Err(local);
    };
    if local.code() != NO_RAPL {
        return Err(local);
    }
    open(path, args.force_model, selection, Path::new("/proc"))
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

/// The model at `path`, checked against this CPU (`proc`'s cpuinfo), as a
/// source reading `proc`'s stat.
pub fn open(
    path: &Path,
    force: bool,
    selection: &quietwatt::Selection,
    proc: &Path,
) -> Result<EstimateSource, EstimateError> {
    let model = PowerModel::load(path)?;
    let cpuinfo =
        std::fs::read_to_string(proc.join("cpuinfo")).map_err(|source| EstimateError::Stat {
            path: proc.join("cpuinfo"),
            source,
        })?;
    let here = CpuIdentity::parse(&cpuinfo, model.cpu.cpus);
    model.check_cpu(&here, force)?;
    EstimateSource::open(
        &model,
        &path.display().to_string(),
        selection,
        &proc.join("stat"),
    )
}

/// The exit code of an estimate that cannot be made: a bad file or flag is
/// the user's to fix (2); a machine that cannot be read, 69.
pub fn code(e: &EstimateError) -> u8 {
    match e {
        EstimateError::Stat { .. } | EstimateError::Measure(_) => NO_RAPL,
        _ => USAGE,
    }
}
