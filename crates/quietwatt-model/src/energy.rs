//! The energy of one measured interval: the engine's [`Meter`] read just before and
//! just after it, or nothing where no source opens (the time model stands alone).

use crate::error::Result;
use quietwatt::domain::total_members;
use quietwatt::meter::Meter;
use quietwatt::source::Source;
use serde::{Deserialize, Serialize};

/// One energy counter as a model file names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelName {
    /// The package.
    pub socket: u32,
    /// `package`, `core`, `uncore`, `dram`, `psys`.
    pub domain: String,
}

/// A meter read around intervals.
#[derive(Debug)]
pub struct EnergyProbe {
    meter: Option<Meter>,
    total: Vec<usize>,
}

impl EnergyProbe {
    /// A probe reading `source`, or a probe that measures nothing.
    pub fn new(source: Option<Box<dyn Source>>) -> EnergyProbe {
        let meter = source.map(Meter::new);
        let total = meter
            .as_ref()
            .map(|m| total_members(&m.channels().iter().map(|c| c.id).collect::<Vec<_>>()))
            .unwrap_or_default();
        EnergyProbe { meter, total }
    }

    /// Whether energy is measured.
    pub fn measures(&self) -> bool {
        self.meter.is_some()
    }

    /// The mechanism read, if any.
    pub fn mechanism(&self) -> Option<&'static str> {
        self.meter.as_ref().map(|m| m.mechanism().name())
    }

    /// The channels, in the order of [`EnergyProbe::end`]'s values.
    pub fn channels(&self) -> Vec<ChannelName> {
        self.meter
            .as_ref()
            .map(|m| {
                m.channels()
                    .iter()
                    .map(|c| ChannelName {
                        socket: c.id.socket.0,
                        domain: c.id.domain.name().to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Indices of the channels whose sum is the machine's total (package + dram, or
    /// psys), each joule counted once.
    pub fn total_members(&self) -> &[usize] {
        &self.total
    }

    /// Reads the counters: the interval starts here.
    pub fn begin(&mut self) -> Result<()> {
        if let Some(m) = &mut self.meter {
            m.sample()?;
        }
        Ok(())
    }

    /// Reads the counters again: joules per channel since [`EnergyProbe::begin`]
    /// (empty without a source).
    pub fn end(&mut self) -> Result<Vec<f64>> {
        let Some(m) = &mut self.meter else {
            return Ok(Vec::new());
        };
        let steps = m.sample()?.1.to_vec();
        Ok(steps
            .iter()
            .enumerate()
            .map(|(i, &s)| m.joules(i, s).0)
            .collect())
    }
}
