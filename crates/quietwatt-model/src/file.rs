//! A model is data: one JSON file recording the machine, the kernel, the energy
//! source, the scenarios, every raw run, the fits and the per-event costs, and the
//! quietwatt version that made it. It is rewritten (to a temporary file, then
//! renamed) after every run, so that a kill or Ctrl-C loses at most the run in
//! progress and the file on disk is always whole.

use super::energy::ChannelName;
use super::{Family, ScenarioSpec, XAxis};
use crate::error::{Error, Result};
use quietwatt::cpuinfo::CpuInfo;
use quietwatt::root::SysRoot;
use quietwatt_stats::fit::Fit;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::num::NonZero;
use std::path::Path;

/// The version of the file's layout; a reader refuses others.
pub const FORMAT: u32 = 1;

/// The whole model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// [`FORMAT`].
    pub format: u32,
    /// `quietwatt X.Y.Z`.
    pub quietwatt_version: String,
    /// Unix time the model was started, in seconds.
    pub created_unix_s: u64,
    /// The machine it was measured on.
    pub machine: Machine,
    /// The kernel it was measured under.
    pub kernel: Kernel,
    /// Where the energy figures come from.
    pub energy: EnergySource,
    /// Whether paper 003's TLB dimension (stride sweep with dTLB-miss counts) could
    /// be measured.
    pub tlb: TlbDimension,
    /// One entry per event family measured.
    pub families: Vec<FamilyModel>,
}

/// The machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// From `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: usize,
    /// The page size, in bytes.
    pub page_size_bytes: usize,
    /// Whether `/proc/cpuinfo` has the `hypervisor` flag.
    pub virtual_machine: bool,
}

/// The kernel, from uname(2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    /// `Linux`.
    pub sysname: String,
    /// e.g. `6.18.44`.
    pub release: String,
    /// The build string.
    pub version: String,
    /// e.g. `x86_64`.
    pub machine: String,
}

/// The energy source of the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergySource {
    /// The mechanism read, or `None` when no source opened (time model only).
    pub mechanism: Option<String>,
    /// Whether the source is quietwatt's emulator (a known constant power profile,
    /// not this machine's hardware).
    pub emulated: bool,
    /// The channels, in the order of every run's `joules`.
    pub channels: Vec<ChannelName>,
    /// Indices of the channels that add up to the total (each joule once).
    pub total_members: Vec<usize>,
}

/// Paper 003's TLB dimension.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TlbDimension {
    /// Whether dTLB misses can be counted here.
    pub available: bool,
    /// Why not, or what would be swept.
    pub note: String,
}

/// One event family: its scenarios, runs, fits and costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamilyModel {
    /// Which family.
    pub family: Family,
    /// The scenarios and how they were swept.
    pub scenarios: Vec<PlannedScenario>,
    /// Rounds of the interleaved schedule.
    pub rounds: usize,
    /// Seed of the shuffles.
    pub seed: u64,
    /// Every run, in the order run.
    pub runs: Vec<Run>,
    /// Whether every planned run is in `runs` (false after Ctrl-C).
    pub complete: bool,
    /// Fits per scenario (empty until enough runs).
    pub fits: Vec<ScenarioFit>,
    /// The price of one event per non-baseline scenario.
    pub costs: Vec<EventCost>,
    /// What the reader should know (a fit that failed, what the time means).
    pub notes: Vec<String>,
}

/// A scenario as swept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedScenario {
    /// What it is.
    #[serde(flatten)]
    pub spec: ScenarioSpec,
    /// Counts per execution.
    pub counts: Vec<u64>,
    /// Executions per measured run.
    pub batch: u32,
}

/// One measured run (totals over its batch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Position in the schedule.
    pub seq: usize,
    /// Round.
    pub round: usize,
    /// Scenario name.
    pub scenario: String,
    /// Count per execution asked for.
    pub count: u64,
    /// Executions in the run.
    pub batch: u32,
    /// Modelled events counted in the run.
    pub events: u64,
    /// Every counter read in the run.
    pub counts: BTreeMap<String, u64>,
    /// The time the model prices, seconds, whole run.
    pub seconds: f64,
    /// Wall-clock time of the interval, seconds, whole run.
    pub wall_seconds: f64,
    /// Joules per energy channel, whole run.
    pub joules: Vec<f64>,
}

/// The fits of one scenario, per execution (run totals divided by the batch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioFit {
    /// Scenario name.
    pub scenario: String,
    /// What x is.
    pub x: XAxis,
    /// Seconds per execution against events per execution.
    pub time: Fit,
    /// Wall-clock seconds per execution (the same as `time` except for wake-ups).
    pub wall: Fit,
    /// Joules per execution per channel (absent without an energy source).
    pub energy: Vec<Fit>,
    /// Joules per execution of the total (each joule once).
    pub total_energy: Option<Fit>,
    /// Mean measured events per unit of the count asked for (1.0 means the
    /// scenario does what it claims).
    pub events_per_count: f64,
}

/// The price of one event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventCost {
    /// The scenario it was measured in.
    pub scenario: String,
    /// The baseline whose slope was subtracted (paper 003), if the family has one.
    pub baseline: Option<String>,
    /// The counter that counts the event (for attribution).
    pub counted: String,
    /// Seconds per event.
    pub seconds_per_event: f64,
    /// Its confidence interval.
    pub seconds_ci: [f64; 2],
    /// Joules per event per channel.
    pub joules_per_event: Vec<f64>,
    /// Their intervals.
    pub joules_ci: Vec<[f64; 2]>,
    /// Joules per event of the total.
    pub total_joules_per_event: Option<f64>,
    /// Its interval.
    pub total_joules_ci: Option<[f64; 2]>,
}

impl Model {
    /// An empty model of this machine; `energy` describes the probe.
    pub fn new(root: &SysRoot, energy: EnergySource) -> Model {
        let uname = rustix::system::uname();
        let s = |c: &std::ffi::CStr| c.to_string_lossy().into_owned();
        // /proc/cpuinfo of the real machine: an emulator's --root describes the
        // emulated CPU, not the one the scenarios ran on.
        let cpu = CpuInfo::read(&SysRoot::default()).or_else(|_| CpuInfo::read(root));
        let cpus = std::thread::available_parallelism().map_or(1, NonZero::get);
        Model {
            format: FORMAT,
            quietwatt_version: format!("quietwatt {}", env!("CARGO_PKG_VERSION")),
            created_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            machine: Machine {
                cpu_model: cpu
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_else(|e| format!("unknown ({e})")),
                cpus,
                page_size_bytes: super::page_size(),
                virtual_machine: cpu.as_ref().is_ok_and(quietwatt::cpuinfo::CpuInfo::is_virtual_machine),
            },
            kernel: Kernel {
                sysname: s(uname.sysname()),
                release: s(uname.release()),
                version: s(uname.version()),
                machine: s(uname.machine()),
            },
            energy,
            tlb: match super::counters::dtlb_misses_countable() {
                Ok(()) => TlbDimension {
                    available: true,
                    note: "dTLB read misses can be counted here; the stride sweep is not implemented yet".into(),
                },
                Err(why) => TlbDimension {
                    available: false,
                    note: format!("not available: {why}"),
                },
            },
            families: Vec::new(),
        }
    }

    /// The family's entry, if measured.
    pub fn family(&self, f: Family) -> Option<&FamilyModel> {
        self.families.iter().find(|m| m.family == f)
    }

    /// The cost measured in `scenario` of `family`.
    pub fn cost(&self, f: Family, scenario: &str) -> Option<&EventCost> {
        self.family(f)?
            .costs
            .iter()
            .find(|c| c.scenario == scenario)
    }

    /// Writes the model to `path` whole: to `path.tmp`, then renamed over `path`.
    pub fn save(&self, path: &Path) -> Result<()> {
        let err = |why: String| Error::ModelFile {
            path: path.to_path_buf(),
            why,
        };
        let text = serde_json::to_string_pretty(self).map_err(|e| err(e.to_string()))?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        std::fs::write(&tmp, text + "\n")
            .map_err(|e| err(format!("cannot write {}: {e}", tmp.display())))?;
        std::fs::rename(&tmp, path)
            .map_err(|e| err(format!("cannot rename {} over it: {e}", tmp.display())))
    }

    /// Reads a model written by [`Model::save`].
    pub fn load(path: &Path) -> Result<Model> {
        let err = |why: String| Error::ModelFile {
            path: path.to_path_buf(),
            why,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            err(format!(
                "not JSON ({e}); give a file written by `quietwatt model`"
            ))
        })?;
        match v.get("format").and_then(serde_json::Value::as_u64) {
            Some(f) if f == FORMAT as u64 => {}
            Some(f) => {
                return Err(err(format!(
                    "format {f}, but this quietwatt reads format {FORMAT}: measure the model again with this version"
                )))
            }
            None => return Err(err("no \"format\" field: not a quietwatt model".into())),
        }
        serde_json::from_value(v).map_err(|e| err(format!("not a quietwatt model: {e}")))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use quietwatt_stats::fit::ols;

    pub(crate) fn sample_model() -> Model {
        let mut m = Model::new(
            &SysRoot::default(),
            EnergySource {
                mechanism: Some("powercap".into()),
                emulated: true,
                channels: vec![ChannelName {
                    socket: 0,
                    domain: "package".into(),
                }],
                total_members: vec![0],
            },
        );
        let fit = ols(&[1.0, 2.0, 3.0], &[2.0, 4.1, 5.9], "t").unwrap();
        m.families.push(FamilyModel {
            family: Family::Pagefault,
            scenarios: vec![PlannedScenario {
                spec: ScenarioSpec {
                    name: "odpa".into(),
                    description: "d".into(),
                    baseline: false,
                    x: XAxis::Measured,
                    counted: "minor-faults".into(),
                    unit: "page".into(),
                },
                counts: vec![1, 2, 3],
                batch: 4,
            }],
            rounds: 1,
            seed: 7,
            runs: vec![Run {
                seq: 0,
                round: 0,
                scenario: "odpa".into(),
                count: 1,
                batch: 4,
                events: 4,
                counts: BTreeMap::from([("minor-faults".to_string(), 4)]),
                seconds: 0.25,
                wall_seconds: 0.25,
                joules: vec![5.0],
            }],
            complete: true,
            fits: vec![ScenarioFit {
                scenario: "odpa".into(),
                x: XAxis::Measured,
                time: fit.clone(),
                wall: fit.clone(),
                energy: vec![fit.clone()],
                total_energy: Some(fit),
                events_per_count: 1.0,
            }],
            costs: vec![EventCost {
                scenario: "odpa".into(),
                baseline: Some("npf".into()),
                counted: "minor-faults".into(),
                seconds_per_event: 1.5e-6,
                seconds_ci: [1.4e-6, 1.6e-6],
                joules_per_event: vec![3e-5],
                joules_ci: vec![[2e-5, 4e-5]],
                total_joules_per_event: Some(3e-5),
                total_joules_ci: Some([2e-5, 4e-5]),
            }],
            notes: vec![],
        });
        m
    }

    fn same(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
        use serde_json::Value as V;
        match (a, b) {
            (V::Number(x), V::Number(y)) => {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                assert!(
                    (x - y).abs() <= 1e-14 * x.abs().max(y.abs()),
                    "{at}: {x} vs {y}"
                );
            }
            (V::Array(x), V::Array(y)) => {
                assert_eq!(x.len(), y.len(), "{at}");
                for (i, (p, q)) in x.iter().zip(y).enumerate() {
                    same(p, q, &format!("{at}[{i}]"));
                }
            }
            (V::Object(x), V::Object(y)) => {
                assert_eq!(
                    x.keys().collect::<Vec<_>>(),
                    y.keys().collect::<Vec<_>>(),
                    "{at}"
                );
                for (k, p) in x {
                    same(p, &y[k], &format!("{at}.{k}"));
                }
            }
            _ => assert_eq!(a, b, "{at}"),
        }
    }

    #[test]
    fn a_model_round_trips_through_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        let m = sample_model();
        m.save(&path).unwrap();
        let back = Model::load(&path).unwrap();
        // serde_json parses floats best-effort (its exact mode is a feature this
        // crate does not enable): compare numbers to 1e-14 relative, the rest exactly.
        same(
            &serde_json::to_value(&back).unwrap(),
            &serde_json::to_value(&m).unwrap(),
            "$",
        );
        assert_eq!(
            back.cost(Family::Pagefault, "odpa")
                .unwrap()
                .seconds_per_event,
            1.5e-6
        );
        assert!(!dir.path().join("m.json.tmp").exists());
    }

    #[test]
    fn a_foreign_or_newer_file_is_refused_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        std::fs::write(&path, "{\"format\": 99}").unwrap();
        let e = Model::load(&path).unwrap_err().to_string();
        assert!(e.contains("format 99"), "{e}");
        std::fs::write(&path, "hello").unwrap();
        let e = Model::load(&path).unwrap_err().to_string();
        assert!(e.contains("not JSON"), "{e}");
    }
}
