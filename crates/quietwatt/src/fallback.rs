//! Where the counters cannot be opened in this process: the local reader
//! service (another process reads them), then a power model's labelled
//! estimate (nothing reads them). One rule for the session, the recording,
//! `compare` and `run`.

use crate::reader::{self, Want};
use crate::source::{Error as SourceError, Selection, Source};
use crate::SysRoot;
use std::path::Path;

/// A power model to estimate with where nothing can measure.
pub use crate::estimate::ModelChoice;

/// Where opening the counters here failed with `local` for want of access or
/// of any mechanism ([`reader::refused_locally`]), and nothing was named: the
/// reader service at [`reader::discover`]'s path when there is one and it
/// answers, else `model`'s estimate when one is given. `None`: nothing
/// applies (keep `local`). `Some(Err)`: the one that applied could not be
/// read; its error says why, with `local` beside it. The estimate reads the
/// frequency under `root`'s `sys`.
pub fn instead(
    local: &SourceError,
    selection: &Selection,
    want: Want,
    model: Option<&ModelChoice>,
    root: &SysRoot,
) -> Option<Result<Box<dyn Source>, SourceError>> {
    let service = reader::fallback(local, selection, want);
    match (service, model) {
        (Some(Ok(s)), _) => Some(Ok(Box::new(s))),
        (service, Some(model)) if reader::refused_locally(local) => Some(
            crate::estimate::open_model(
                model,
                selection,
                Path::new("/proc"),
                &root.dir().join("sys"),
            )
            .map(|s| Box::new(s) as Box<dyn Source>)
            .map_err(|e| {
                // Why nothing measured, beside what the model lacks.
                let nothing = format!(
                    "{local}{}",
                    match &service {
                        Some(Err(s)) => format!("; {s}"),
                        _ => String::new(),
                    }
                );
                match SourceError::from(e) {
                    SourceError::BadModel { why } => SourceError::BadModel {
                        why: format!("{why}\n  (nothing can measure here: {nothing})"),
                    },
                    SourceError::MechanismUnavailable { mechanism, why } => {
                        SourceError::MechanismUnavailable {
                            mechanism,
                            why: format!("nothing can measure here ({nothing}), and {why}"),
                        }
                    }
                    e => e,
                }
            }),
        ),
        (service, _) => service.map(|r| r.map(|s| Box::new(s) as Box<dyn Source>)),
    }
}
