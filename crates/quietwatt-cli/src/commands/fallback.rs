//! Where the counters cannot be opened here and no mechanism was named: the
//! library's one rule (`quietwatt::fallback::instead`: the local reader
//! service, then the power model's estimate), for `run` and the series of
//! `run -r` and `compare`; here only the flags it takes.

use super::estimate::EstimateArgs;
use super::serve_reader::{want, Opened};
use crate::exit::Failure;
use quietwatt::{FreqArg, Mechanism, Selection, SourceError, SysRoot};

/// `local`, the counters' error here, unless no mechanism was named and the
/// library's fallback applies: then its source (and whether it reads
/// quietwatt's emulator, through the service), or why it could not be read,
/// beside `local`.
pub fn instead(
    local: SourceError,
    mechanism: Option<Mechanism>,
    selection: &Selection,
    freq: Option<FreqArg>,
    estimate: &EstimateArgs,
    root: &SysRoot,
) -> Result<Opened, Failure> {
    if mechanism.is_some() {
        return Err(local.into());
    }
    let model = estimate.choice();
    match quietwatt::fallback::instead(&local, selection, want(freq), model.as_ref(), root) {
        None => Err(local.into()),
        Some(Ok(source)) => {
            let emulated = source.via().is_some_and(|v| v.emulated);
            Ok((source, emulated))
        }
        Some(Err(e)) => Err(e.into()),
    }
}
