//! The typed documents of `quietwatt list --json` ([`ListDocument`]) and
//! `quietwatt doctor --json` ([`DoctorDocument`]): what the probes and the
//! diagnoses found, stamped through [`quietwatt_core::document`].

use crate::doctor::Diagnosis;
use crate::{Mechanism, Probe};
use quietwatt_core::document::Document;
use quietwatt_core::domain::{Domain, Socket};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// `quietwatt list --json` (`docs/schemas/list.schema.json`).
#[derive(Debug, Clone, Serialize)]
pub struct ListDocument {
    /// The directory `/sys`, `/dev` and `/proc` were looked up under.
    pub root: PathBuf,
    /// Whether that is the emulator's.
    pub emulated: bool,
    /// One entry per mechanism probed.
    pub mechanisms: Vec<ListedMechanism>,
}

/// One mechanism in [`ListDocument`]: its domains when it opens, why not otherwise.
#[derive(Debug, Clone, Serialize)]
pub struct ListedMechanism {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// Whether it opens and reads.
    pub available: bool,
    /// Whether its counters changed within the liveness window (available only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters_move: Option<Option<bool>>,
    /// Its counters (available only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domains: Option<Vec<ListedDomain>>,
    /// What it left out or wants known (available only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<Vec<String>>,
    /// Why it cannot be used (unavailable only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// One counter of an available mechanism, with the figures that bound its reads.
#[derive(Debug, Clone, Serialize)]
pub struct ListedDomain {
    /// Its socket.
    pub socket: Socket,
    /// Its die, where the package has several.
    pub die: Option<u32>,
    /// Its domain.
    pub domain: Domain,
    /// Joules per raw step.
    pub unit_j: f64,
    /// Joules between two wraps.
    pub range_j: f64,
    /// Seconds between two wraps at the domain's assumed maximum power.
    pub wrap_period_s_at_max_power: f64,
    /// That maximum power, in watts.
    pub max_power_assumed_w: f64,
    /// What is read.
    pub origin: PathBuf,
}

impl ListDocument {
    /// The document of `probes`, run under `root`.
    pub fn new(root: &Path, emulated: bool, probes: &[Probe]) -> Self {
        let mechanisms = probes
            .iter()
            .map(|p| match &p.result {
                Ok(ch) => ListedMechanism {
                    mechanism: p.mechanism,
                    available: true,
                    counters_move: Some(p.moves),
                    domains: Some(
                        ch.iter()
                            .map(|c| {
                                let max = c.id.domain.max_plausible_power();
                                ListedDomain {
                                    socket: c.id.socket,
                                    die: c.id.die,
                                    domain: c.id.domain,
                                    unit_j: c.unit.joules_per_step(),
                                    range_j: c.wrap.range(c.unit).0,
                                    wrap_period_s_at_max_power: c
                                        .wrap
                                        .period_at(c.unit, max)
                                        .as_secs_f64(),
                                    max_power_assumed_w: max.0,
                                    origin: c.origin.clone(),
                                }
                            })
                            .collect(),
                    ),
                    notes: Some(p.notes.clone()),
                    why: None,
                },
                Err(e) => ListedMechanism {
                    mechanism: p.mechanism,
                    available: false,
                    counters_move: None,
                    domains: None,
                    notes: None,
                    why: Some(e.to_string()),
                },
            })
            .collect();
        ListDocument {
            root: root.to_path_buf(),
            emulated,
            mechanisms,
        }
    }
}

impl Document for ListDocument {
    const KIND: &'static str = "list";
}

/// `quietwatt doctor --json` (`docs/schemas/doctor.schema.json`).
#[derive(Debug, Clone, Serialize)]
pub struct DoctorDocument {
    /// The directory `/sys`, `/dev` and `/proc` were looked up under.
    pub root: PathBuf,
    /// Whether that is the emulator's.
    pub emulated: bool,
    /// Whether any mechanism works.
    pub can_measure: bool,
    /// One verdict per mechanism.
    pub mechanisms: Vec<Diagnosis>,
}

impl DoctorDocument {
    /// The document of `mechanisms`, diagnosed under `root`.
    pub fn new(root: &Path, emulated: bool, mechanisms: Vec<Diagnosis>) -> Self {
        DoctorDocument {
            root: root.to_path_buf(),
            emulated,
            can_measure: mechanisms.iter().any(|d| d.works),
            mechanisms,
        }
    }
}

impl Document for DoctorDocument {
    const KIND: &'static str = "doctor";
}
