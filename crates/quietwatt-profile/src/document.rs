//! `quietwatt profile --json` (`docs/schemas/profile.schema.json`): one typed
//! document, built from a [`ProfileOutcome`] and its named stacks, that the CLI
//! stamps and prints (and Python can serialise alike).

use crate::interval::{energy_range, EnergyRange};
use crate::output::{Format, NamedStacks};
use crate::profile::ProfileOutcome;
use quietwatt::document::Document;
use quietwatt::meter::DomainEnergy;
use quietwatt::{Warning, WarningKind};
use serde::Serialize;

/// One function's energy in the document.
#[derive(Debug, Clone, Serialize)]
pub struct TopFunction {
    /// Its frame's name.
    pub function: String,
    /// µJ of the stacks it is the leaf of.
    pub self_uj: u64,
    /// µJ of the stacks it is in.
    pub total_uj: u64,
    /// `self_uj` over the measured package energy (0 to 1).
    pub self_share: f64,
    /// 95 % interval on `self_uj`: its samples' share (Wilson) widened by the
    /// measured package energy's ± bound (`crate::interval`).
    pub self_uj_95: EnergyRange,
}

/// A profile's figures: the energy measured (with each domain's uncertainty, as
/// `run --json` gives it), how it was split among the stacks and what stayed
/// unattributed, the sampling event and what the kernel lost, the top functions.
#[derive(Debug, Clone, Serialize)]
pub struct ProfileDocument {
    /// The energy mechanism read.
    pub mechanism: &'static str,
    /// Whether the counters were quietwatt's emulator's.
    pub emulated: bool,
    /// The event the stacks were sampled on (`cycles`, `cpu-clock`).
    pub event: &'static str,
    /// Why that event.
    pub event_reason: String,
    /// Stack samples a second asked per CPU.
    pub frequency_hz: u64,
    /// Stack samples taken.
    pub samples: u64,
    /// Stack samples the kernel lost (its ring full): their energy went to the kept ones.
    pub lost: u64,
    /// Throttle records (the kernel lowered the sampling rate).
    pub throttled: u64,
    /// Distinct stacks.
    pub stacks: usize,
    /// The measured package energy, µJ (the sum of every interval).
    pub package_uj: u64,
    /// Of it, µJ split among the stacks.
    pub attributed_uj: u64,
    /// Of it, µJ no sample explains (idle, before the exec, after the exit).
    pub unattributed_uj: u64,
    /// The idle part set apart (0 without an idle model).
    pub idle_uj: u64,
    /// What the idle part is (`none`, configured, fitted).
    pub idle_power: String,
    /// DRAM's energy beside the package's, µJ (not split); `None` without DRAM.
    pub dram_uj: Option<u64>,
    /// Always false: DRAM is reported, not split (docs: why).
    pub dram_split: bool,
    /// Package intervals split.
    pub intervals: u64,
    /// Of them, intervals without a sample.
    pub empty_intervals: u64,
    /// Samples outside every interval (before the first or after the last reading).
    pub samples_outside: u64,
    /// Each domain's energy with its uncertainty, as `run --json`'s `domains`.
    pub domains: Vec<DomainEnergy>,
    /// Wall time of the profile, seconds.
    pub wall_s: f64,
    /// The command's exit code (128 + signal when it was killed); `None` for `-a`.
    pub exit_code: Option<i32>,
    /// The output written.
    pub output: String,
    /// Its format.
    pub format: &'static str,
    /// The functions with the most self energy.
    pub top_self: Vec<TopFunction>,
    /// Things that make a figure doubtful.
    pub warnings: Vec<Warning>,
}

impl ProfileDocument {
    /// The document of `o`, its stacks named in `named` (the `top` functions by
    /// self energy listed), written to `output` as `format`.
    pub fn new(
        o: &ProfileOutcome,
        named: &NamedStacks,
        top: usize,
        emulated: bool,
        output: String,
        format: Format,
    ) -> ProfileDocument {
        let measured = o.package_total_uj();
        let unattributed = o.energy.unattributed.total_uj();
        let share = |uj: u64| {
            if measured == 0 {
                0.0
            } else {
                uj as f64 / measured as f64
            }
        };
        // The package's relative ± bound, for each function's interval.
        let (pkg_j, pkg_u) = o
            .measurement
            .energy
            .domains
            .iter()
            .filter(|d| d.domain == "package")
            .fold((0.0, 0.0), |(e, u), d| {
                (e + d.energy_j.0, u + d.uncertainty_j.0)
            });
        let measured_rel = if pkg_j > 0.0 { pkg_u / pkg_j } else { 0.0 };
        let of_samples = named.sample_count();
        let mut warnings = o.measurement.warnings().to_vec();
        if o.counts.lost > 0 {
            warnings.push(Warning::new(WarningKind::Sampling, format!(
                "{} stack samples lost (the kernel's ring was full {} times): their energy went to the samples kept",
                o.counts.lost, o.counts.lost_records
            )));
        }
        for cut in &o.cut_chains {
            warnings.push(Warning::new(WarningKind::Sampling, cut.message()));
        }
        if o.rows_dropped > 0 {
            warnings.push(Warning::new(
                WarningKind::Sampling,
                format!(
                    "{} energy rows dropped before they were read: their energy is in no interval",
                    o.rows_dropped
                ),
            ));
        }
        ProfileDocument {
            mechanism: o.mechanism.name(),
            emulated,
            event: o.event.event.name(),
            event_reason: o.event.reason.clone(),
            frequency_hz: o.frequency_hz,
            samples: o.counts.samples,
            lost: o.counts.lost,
            throttled: o.counts.throttled,
            stacks: o.table.len(),
            package_uj: measured,
            attributed_uj: o.energy.accounted_uj() - unattributed,
            unattributed_uj: unattributed,
            idle_uj: o.energy.idle_uj,
            idle_power: o.energy.idle_label.clone(),
            dram_uj: o.dram_total_uj(),
            dram_split: false,
            intervals: o.energy.intervals,
            empty_intervals: o.energy.empty_intervals,
            samples_outside: o.energy.samples_outside,
            domains: o.measurement.energy.domains.clone(),
            wall_s: o.wall.as_secs_f64(),
            exit_code: o.status.map(quietwatt::command::exit_code),
            output,
            format: format.name(),
            top_self: named
                .top_functions(top)
                .into_iter()
                .map(|f| TopFunction {
                    self_share: share(f.self_uj),
                    self_uj_95: energy_range(f.self_uj, f.self_samples, of_samples, measured_rel),
                    function: f.name,
                    self_uj: f.self_uj,
                    total_uj: f.total_uj,
                })
                .collect(),
            warnings,
        }
    }
}

impl Document for ProfileDocument {
    const KIND: &'static str = "profile";
}
