//! Where a session's counters come from when the local reader service is in
//! play (`quietwatt-reader`): a socket asked for by path, or the service found
//! where the counters cannot be opened here.

use super::SessionConfig;
use crate::error::Result;
use crate::fallback::instead;
use crate::reader::{SocketSource, Want};
use crate::source::{self, Mechanism, Source};
use crate::ticker::Hertz;

impl SessionConfig {
    /// `Some(path)`: read through the local reader service listening at `path`
    /// (`quietwatt serve --socket`), whatever this process may open itself.
    /// `None` (the default): open the counters here, and only where that is
    /// refused (no permission, no RAPL visible: [`crate::reader::refused_locally`])
    /// and no mechanism was named, read through the service found at
    /// `QUIETWATT_SOCKET` or [`crate::reader::DEFAULT_SOCKET`] when there is one
    /// ([`crate::reader::fallback`]). Either way the reports say so: the
    /// mechanism is `socket`, and a note names the socket and the policy's
    /// coarsening.
    pub fn socket(mut self, path: impl Into<Option<std::path::PathBuf>>) -> Self {
        self.socket = path.into();
        self
    }

    /// Where nothing can measure (the counters refused or absent here, no
    /// reader service, no mechanism named): estimate with this power model
    /// (`quietwatt calibrate`'s file) instead of failing. The reports say so:
    /// the mechanism is `estimate`, `estimated` is true, and each figure's
    /// uncertainty holds the model's stated error. `None` (the default, unless
    /// `QUIETWATT_POWER_MODEL` is set for [`SessionConfig::from_env`]): fail.
    pub fn power_model(mut self, model: impl Into<Option<crate::fallback::ModelChoice>>) -> Self {
        self.power_model = model.into();
        self
    }

    /// What to ask the reader service for: readings as often as the rate reads
    /// (the policy may coarsen it), at the policy's resolution.
    fn want(&self) -> Want {
        Want {
            interval: self.rate.map(Hertz::period),
            resolution_uj: None,
        }
    }
}

/// A polled source for `config` with mechanism `m` (`None`: the best here): the
/// service at the config's socket when it names one; else the counters here,
/// or, where they are refused and nothing was named, the service if there is
/// one, else the config's power model's estimate if it has one.
pub(super) fn open(config: &SessionConfig, m: Option<Mechanism>) -> Result<Box<dyn Source>> {
    if let Some(path) = &config.socket {
        let s = SocketSource::connect(path, config.want(), &config.domains)
            .map_err(crate::SourceError::from)?;
        return Ok(Box::new(s));
    }
    match source::open(&config.root, m, &config.domains) {
        Ok(s) => Ok(s),
        Err(e) if m.is_none() => {
            match instead(
                &e,
                &config.domains,
                config.want(),
                config.power_model.as_ref(),
                &config.root,
            ) {
                Some(Ok(s)) => Ok(s),
                Some(Err(e)) => Err(e.into()),
                None => Err(e.into()),
            }
        }
        Err(e) => Err(e.into()),
    }
}
