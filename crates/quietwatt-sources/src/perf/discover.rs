//! PMU discovery: the `power` and `power_core` PMUs' events, their units, and the
//! CPUs to open them on.

use super::{DEVICES, POWER_CORE_PMU, POWER_PMU};
use crate::cpuinfo::CpuInfo;
use crate::error::{Error, Result};
use crate::root::{read_trimmed, SysRoot};
use crate::topology::{parse_cpu_list, Topology};
use crate::Mechanism;
use quietwatt_core::domain::{Domain, DomainId};
use quietwatt_core::units::EnergyUnit;
use std::path::PathBuf;

// ---------------------------------------------------------------------------
// PMU discovery.

/// One event to open: what it measures, which PMU event, on which CPU, in which unit.
#[derive(Debug, Clone, PartialEq)]
pub struct EventSpec {
    /// The domain and socket the count belongs to.
    pub id: DomainId,
    /// `attr.type`: the PMU's `type` number.
    pub pmu_type: u32,
    /// `attr.config`.
    pub config: u64,
    /// The CPU to open it on.
    pub cpu: u32,
    /// Energy of one count.
    pub unit: EnergyUnit,
    /// What is read, for errors and listings.
    pub origin: PathBuf,
}

impl EventSpec {
    /// Whether every spec is a software event: no RAPL PMU is the software PMU, so
    /// such events only stand in for energy ([`crate::Source::label`] says so).
    pub fn all_stand_ins<'a>(specs: impl IntoIterator<Item = &'a EventSpec>) -> bool {
        let mut any = false;
        specs.into_iter().all(|s| {
            any = true;
            s.pmu_type == perf_event_open_sys::bindings::PERF_TYPE_SOFTWARE
        }) && any
    }

    /// A spec with an origin naming the raw event (`perf type T config C cpu N`).
    pub fn new(id: DomainId, pmu_type: u32, config: u64, cpu: u32, unit: EnergyUnit) -> Self {
        EventSpec {
            id,
            pmu_type,
            config,
            cpu,
            unit,
            origin: PathBuf::from(format!("perf type {pmu_type} config {config:#x} cpu {cpu}")),
        }
    }
}

/// The domain an event of `pmu` named `event` measures.
fn event_domain(pmu: &str, event: &str) -> Option<Domain> {
    Some(match (pmu, event) {
        (POWER_PMU, "energy-pkg") => Domain::Package,
        (POWER_PMU, "energy-cores") => Domain::Core,
        (POWER_PMU, "energy-gpu") => Domain::Uncore,
        (POWER_PMU, "energy-ram") => Domain::Dram,
        (POWER_PMU, "energy-psys") => Domain::Psys,
        (POWER_CORE_PMU, "energy-core") => Domain::Core,
        _ => return None,
    })
}

/// Parses a format file (`config:0-7`, `config:12`) into the bit range it covers;
/// only `config` is supported (the RAPL PMUs use nothing else).
pub fn parse_format(text: &str) -> Option<(u32, u32)> {
    let bits = text.trim().strip_prefix("config:")?;
    // A format may list several ranges (`config:0-7,32-35`); RAPL's never does, and
    // a split field cannot be filled by a plain shift.
    if bits.contains(',') {
        return None;
    }
    let (lo, hi) = match bits.split_once('-') {
        Some((a, b)) => (a.parse().ok()?, b.parse().ok()?),
        None => {
            let b = bits.parse().ok()?;
            (b, b)
        }
    };
    (lo <= hi && hi < 64).then_some((lo, hi))
}

/// Parses an event description (`event=0x02`, terms separated by commas, values in
/// hex or decimal, a bare term meaning 1) into `attr.config`, placing each term's
/// value at the bits its format gives. `format` returns a term's bit range.
pub fn parse_event_config(
    text: &str,
    format: impl Fn(&str) -> Option<(u32, u32)>,
) -> std::result::Result<u64, String> {
    let mut config = 0u64;
    let mut any = false;
    for term in text
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        let (name, value) = match term.split_once('=') {
            Some((n, v)) => (
                n.trim(),
                parse_number(v.trim()).ok_or_else(|| format!("bad value in '{term}'"))?,
            ),
            None => (term, 1),
        };
        let (lo, hi) = format(name).ok_or_else(|| format!("no config format for term '{name}'"))?;
        let width = hi - lo + 1;
        if width < 64 && value >> width != 0 {
            return Err(format!("'{term}' does not fit in config:{lo}-{hi}"));
        }
        config |= value << lo;
        any = true;
    }
    if any {
        Ok(config)
    } else {
        Err("empty event description".into())
    }
}

fn parse_number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Parses a `.scale` file into the unit of one count. An exact power of two
/// (2^-32 J on every RAPL PMU) becomes [`EnergyUnit::PowerOfTwo`], so totals convert
/// exactly; anything else stays a decimal [`EnergyUnit::Scale`].
pub fn parse_scale(text: &str) -> Option<EnergyUnit> {
    let s: f64 = text.trim().parse().ok()?;
    if !(s.is_finite() && s > 0.0) {
        return None;
    }
    let n = -s.log2().round();
    if (1.0..=64.0).contains(&n) && (-n).exp2() == s {
        return Some(EnergyUnit::PowerOfTwo(n as u8));
    }
    Some(EnergyUnit::Scale(s))
}

/// Whether a `.unit` file says joules.
pub fn is_joules(text: &str) -> bool {
    text.trim().eq_ignore_ascii_case("joules")
}

/// One event a PMU lists, before it is spread over the PMU's CPUs.
#[derive(Debug, Clone, PartialEq)]
struct PmuEvent {
    name: String,
    domain: Domain,
    config: u64,
    unit: EnergyUnit,
    path: PathBuf,
}

/// A RAPL PMU as sysfs describes it.
#[derive(Debug, Clone, PartialEq)]
struct Pmu {
    name: &'static str,
    pmu_type: u32,
    cpus: Vec<u32>,
    events: Vec<PmuEvent>,
}

fn pmu_dir(root: &SysRoot, name: &str) -> PathBuf {
    root.path(DEVICES).join(name)
}

/// Reads a PMU's `type` under `root`, if the PMU exists there.
fn pmu_type(root: &SysRoot, name: &str) -> Result<Option<u32>> {
    let dir = pmu_dir(root, name);
    if !dir.exists() {
        return Ok(None);
    }
    let path = dir.join("type");
    let text = read_trimmed(&path)?;
    text.parse().map(Some).map_err(|_| Error::Parse {
        path,
        content: text,
        expected: "a PMU type number",
    })
}

/// Reads one PMU; `None` when the kernel does not register it.
fn read_pmu(root: &SysRoot, name: &'static str, notes: &mut Vec<String>) -> Result<Option<Pmu>> {
    let Some(pmu_type) = pmu_type(root, name)? else {
        return Ok(None);
    };
    let dir = pmu_dir(root, name);
    let mask_path = dir.join("cpumask");
    let mask = read_trimmed(&mask_path)?;
    let cpus = parse_cpu_list(&mask).ok_or(Error::Parse {
        path: mask_path,
        content: mask,
        expected: "a CPU list such as 0,4",
    })?;

    let events_dir = dir.join("events");
    let entries = std::fs::read_dir(&events_dir).map_err(|e| Error::io(&events_dir, e))?;
    let mut names: Vec<String> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&events_dir, e))?;
        let file = entry.file_name().to_string_lossy().into_owned();
        // `<event>.scale` and `<event>.unit` describe `<event>`.
        if !file.contains('.') {
            names.push(file);
        }
    }
    names.sort();

    let format = |term: &str| -> Option<(u32, u32)> {
        match std::fs::read_to_string(dir.join("format").join(term)) {
            Ok(t) => parse_format(&t),
            // Without a format file the term is taken as the raw config, from bit 0.
            Err(_) => (term == "event").then_some((0, 63)),
        }
    };

    let mut events = Vec::new();
    for ev in names {
        let Some(domain) = event_domain(name, &ev) else {
            notes.push(format!(
                "{name}/{ev}: not an energy event quietwatt knows; left out"
            ));
            continue;
        };
        let path = events_dir.join(&ev);
        let text = read_trimmed(&path)?;
        let config = match parse_event_config(&text, format) {
            Ok(c) => c,
            Err(why) => {
                notes.push(format!("{}: {why}; left out", path.display()));
                continue;
            }
        };
        let scale_path = events_dir.join(format!("{ev}.scale"));
        let unit = match read_trimmed(&scale_path) {
            Ok(s) => match parse_scale(&s) {
                Some(u) => u,
                None => {
                    return Err(Error::Parse {
                        path: scale_path,
                        content: s,
                        expected: "a positive decimal scale such as 2.3283064365386962890625e-10",
                    })
                }
            },
            Err(_) => {
                notes.push(format!(
                    "{name}/{ev} has no readable .scale: its counts cannot be converted; left out"
                ));
                continue;
            }
        };
        match read_trimmed(&events_dir.join(format!("{ev}.unit"))) {
            Ok(u) if is_joules(&u) => {}
            Ok(u) => {
                notes.push(format!("{name}/{ev} counts '{u}', not joules; left out"));
                continue;
            }
            Err(_) => {
                notes.push(format!("{name}/{ev} has no readable .unit; left out"));
                continue;
            }
        }
        events.push(PmuEvent {
            name: ev,
            domain,
            config,
            unit,
            path,
        });
    }
    Ok(Some(Pmu {
        name,
        pmu_type,
        cpus,
        events,
    }))
}

/// Finds the RAPL perf events under `root`: one spec per event per CPU of its PMU's
/// `cpumask`, with the socket (and die) of that CPU, and notes on what was left out.
pub fn discover(root: &SysRoot) -> Result<(Vec<EventSpec>, Vec<String>)> {
    let mut notes = Vec::new();
    let power = read_pmu(root, POWER_PMU, &mut notes)?;
    let power_core = read_pmu(root, POWER_CORE_PMU, &mut notes)?;
    if power.is_none() && power_core.is_none() {
        // On a model only powercap's table lists, the usual hints (module, VM) are
        // wrong: the kernel's perf driver does not support the CPU at all.
        let why = match CpuInfo::read(root)
            .ok()
            .and_then(|c| crate::quirks::perf_absence_note(&c))
        {
            Some(note) => format!("no `power` PMU at {}: {note}", pmu_dir(root, POWER_PMU).display()),
            None => format!(
                "no `power` PMU at {} (no RAPL hardware, e.g. a VM; or the kernel lacks CONFIG_PERF_EVENTS_INTEL_RAPL, or its module is not loaded: {})",
                pmu_dir(root, POWER_PMU).display(),
                rapl_module_hint(root)
            ),
        };
        return Err(Error::MechanismUnavailable {
            mechanism: Mechanism::Perf.name(),
            why,
        });
    }
    let topo = Topology::read(root)?;

    let mut specs: Vec<EventSpec> = Vec::new();
    for pmu in power.iter().chain(&power_core) {
        let per_core = pmu.name == POWER_CORE_PMU;
        for ev in &pmu.events {
            for &cpu in &pmu.cpus {
                let Some(c) = topo.cpus().iter().find(|c| c.id == cpu) else {
                    notes.push(format!(
                        "{}/{}: CPU {cpu} of its cpumask is not online; left out",
                        pmu.name, ev.name
                    ));
                    continue;
                };
                // Name the die only where the package has several (as powercap's
                // `package-N-die-M`), and never for per-core events summed by socket.
                let multi_die = topo
                    .cpus()
                    .iter()
                    .any(|o| o.package == c.package && o.die != c.die);
                let id = DomainId {
                    socket: c.package,
                    die: (multi_die && !per_core).then_some(c.die),
                    domain: ev.domain,
                };
                if !per_core {
                    if let Some(dup) = specs.iter().find(|s| s.id == id) {
                        // Two CPUs of one scope in the cpumask: adding both would count
                        // the same counter twice.
                        notes.push(format!(
                            "{}/{}: CPUs {} and {cpu} both read {id}; only CPU {} is used",
                            pmu.name, ev.name, dup.cpu, dup.cpu
                        ));
                        continue;
                    }
                } else if specs
                    .iter()
                    .any(|s| s.id == id && s.pmu_type != pmu.pmu_type)
                {
                    notes.push(format!(
                        "{}/{} on CPU {cpu}: {id} is already read through the `power` PMU; left out",
                        pmu.name, ev.name
                    ));
                    continue;
                }
                specs.push(EventSpec {
                    id,
                    pmu_type: pmu.pmu_type,
                    config: ev.config,
                    cpu,
                    unit: ev.unit,
                    origin: PathBuf::from(format!("{}@cpu{cpu}", ev.path.display())),
                });
            }
        }
    }
    if specs.is_empty() {
        return Err(Error::NoDomains {
            mechanism: Mechanism::Perf.name(),
            root: root.dir().to_path_buf(),
            why: "the power PMU lists no energy event quietwatt can read".into(),
        });
    }
    // Stable: within one domain the CPUs keep the cpumask's order.
    specs.sort_by_key(|s| s.id);
    Ok((specs, notes))
}

/// Under an emulated root the PMU directories are emulated but `perf_event_open`
/// still reaches the real kernel: a `type` that is not the real kernel's same PMU
/// would open some other PMU's event and read nonsense.
pub(crate) fn check_real_kernel_has(root: &SysRoot) -> Result<()> {
    if root.is_system() {
        return Ok(());
    }
    let real = SysRoot::default();
    for name in [POWER_PMU, POWER_CORE_PMU] {
        let Some(t) = pmu_type(root, name)? else {
            continue;
        };
        if pmu_type(&real, name).ok().flatten() != Some(t) {
            return Err(Error::MechanismUnavailable {
                mechanism: Mechanism::Perf.name(),
                why: format!(
                    "the `{name}` PMU under {} is emulated: perf_event_open reaches the real kernel, which has no `{name}` PMU of type {t}",
                    root.dir().display()
                ),
            });
        }
    }
    Ok(())
}
/// How to load perf's RAPL PMU on the kernel under `root` (its release from
/// `proc/sys/kernel/osrelease`): the driver moved to `arch/x86/events/rapl.c` in
/// Linux 5.8 (`obj-$(CONFIG_PERF_EVENTS_INTEL_RAPL) += rapl.o`: module `rapl`);
/// before, `arch/x86/events/intel/Makefile` built it as `intel-rapl-perf`.
pub fn rapl_module_hint(root: &SysRoot) -> String {
    let release = read_trimmed(&root.path("/proc/sys/kernel/osrelease")).unwrap_or_default();
    match kernel_version(&release) {
        Some(v) if v >= (5, 8) => "`sudo modprobe rapl`".into(),
        Some(v) if v < (5, 5) => "`sudo modprobe intel_rapl_perf`".into(),
        // 5.5 to 5.7, or unknown: the move was backported to some stable kernels.
        _ => "`sudo modprobe rapl` (`intel_rapl_perf` before Linux 5.8)".into(),
    }
}

/// `(major, minor)` of a kernel release such as `6.18.44-fc-v595`.
fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut it = release.split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_rapl_module_is_named_by_kernel_version() {
        assert_eq!(kernel_version("6.18.44-fc-v595"), Some((6, 18)));
        assert_eq!(kernel_version("4.19.0-27-amd64"), Some((4, 19)));
        assert_eq!(kernel_version("weird"), None);
        let dir = tempfile::tempdir().unwrap();
        let osrelease = dir.path().join("proc/sys/kernel");
        std::fs::create_dir_all(&osrelease).unwrap();
        let root = SysRoot::new(dir.path());
        for (release, module) in [
            ("6.18.44", "`sudo modprobe rapl`"),
            ("4.19.0", "intel_rapl_perf"),
        ] {
            std::fs::write(osrelease.join("osrelease"), format!("{release}\n")).unwrap();
            assert!(rapl_module_hint(&root).contains(module), "{release}");
        }
    }
    use super::*;
    use crate::perf::PerfEvents;
    use crate::Selection;
    use std::path::Path;

    const TWO_POW_MINUS_32: &str = "2.3283064365386962890625e-10\n";

    #[test]
    fn event_descriptions_parse_into_config_bits() {
        let rapl = |t: &str| (t == "event").then_some((0, 7));
        assert_eq!(parse_event_config("event=0x02\n", rapl), Ok(2));
        assert_eq!(parse_event_config("event=5", rapl), Ok(5));
        assert!(parse_event_config("event=0x100", rapl).is_err());
        assert!(parse_event_config("umask=0x1", rapl).is_err());
        assert!(parse_event_config("event=zz", rapl).is_err());
        assert!(parse_event_config("", rapl).is_err());
        // Terms land where their format says.
        let fmt = |t: &str| match t {
            "event" => Some((0, 7)),
            "umask" => Some((8, 15)),
            "edge" => Some((18, 18)),
            _ => None,
        };
        assert_eq!(
            parse_event_config("event=0x3c,umask=0x01,edge", fmt),
            Ok(0x3c | 0x100 | 1 << 18)
        );
        assert_eq!(parse_format("config:0-7\n"), Some((0, 7)));
        assert_eq!(parse_format("config:18"), Some((18, 18)));
        assert_eq!(parse_format("config1:0-7"), None);
        assert_eq!(parse_format("config:7-0"), None);
        assert_eq!(parse_format("config:0-7,32-35"), None);
    }

    #[test]
    fn scale_and_unit_parse() {
        // The kernel's 2^-32 J is exact in binary: it becomes an exact power of two.
        assert_eq!(
            parse_scale(TWO_POW_MINUS_32),
            Some(EnergyUnit::PowerOfTwo(32))
        );
        assert_eq!(parse_scale("1e-9"), Some(EnergyUnit::Scale(1e-9)));
        assert_eq!(parse_scale("0.5"), Some(EnergyUnit::PowerOfTwo(1)));
        // 1 is not a fraction: keep it a plain scale.
        assert_eq!(parse_scale("1"), Some(EnergyUnit::Scale(1.0)));
        assert_eq!(
            parse_scale("2.3283064365386963e-10"),
            Some(EnergyUnit::PowerOfTwo(32))
        );
        assert_eq!(parse_scale("2.33e-10"), Some(EnergyUnit::Scale(2.33e-10)));
        assert_eq!(parse_scale("0"), None);
        assert_eq!(parse_scale("-1e-9"), None);
        assert_eq!(parse_scale("nan"), None);
        assert_eq!(parse_scale("joules"), None);
        assert!(is_joules("Joules\n") && is_joules("joules"));
        assert!(!is_joules("Watts"));
    }

    /// A sysfs tree: `n` CPUs, `per_pkg` per package, SMT pairs sharing a core.
    fn topology_tree(root: &Path, n: u32, per_pkg: u32) {
        let cpu = root.join("sys/devices/system/cpu");
        std::fs::create_dir_all(&cpu).unwrap();
        std::fs::write(cpu.join("online"), format!("0-{}\n", n - 1)).unwrap();
        for i in 0..n {
            let t = cpu.join(format!("cpu{i}/topology"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("physical_package_id"), format!("{}\n", i / per_pkg)).unwrap();
            std::fs::write(t.join("die_id"), "0\n").unwrap();
            std::fs::write(t.join("core_id"), format!("{}\n", (i % per_pkg) / 2)).unwrap();
        }
    }

    fn pmu_tree(root: &Path, name: &str, ty: u32, cpumask: &str, events: &[(&str, &str)]) {
        let d = root.join("sys/bus/event_source/devices").join(name);
        std::fs::create_dir_all(d.join("events")).unwrap();
        std::fs::create_dir_all(d.join("format")).unwrap();
        std::fs::write(d.join("type"), format!("{ty}\n")).unwrap();
        std::fs::write(d.join("cpumask"), format!("{cpumask}\n")).unwrap();
        std::fs::write(d.join("format/event"), "config:0-7\n").unwrap();
        for (ev, code) in events {
            let e = d.join("events");
            std::fs::write(e.join(ev), format!("{code}\n")).unwrap();
            std::fs::write(e.join(format!("{ev}.scale")), TWO_POW_MINUS_32).unwrap();
            std::fs::write(e.join(format!("{ev}.unit")), "Joules\n").unwrap();
        }
    }

    const INTEL_EVENTS: [(&str, &str); 5] = [
        ("energy-cores", "event=0x01"),
        ("energy-pkg", "event=0x02"),
        ("energy-ram", "event=0x03"),
        ("energy-gpu", "event=0x04"),
        ("energy-psys", "event=0x05"),
    ];

    #[test]
    fn intel_two_sockets_one_event_per_cpumask_cpu() {
        let dir = tempfile::tempdir().unwrap();
        topology_tree(dir.path(), 8, 4);
        pmu_tree(dir.path(), "power", 23, "0,4", &INTEL_EVENTS);
        // Another PMU's events are none of ours.
        pmu_tree(dir.path(), "cpu", 4, "0-7", &[("cycles", "event=0x3c")]);
        let root = SysRoot::new(dir.path());
        let (specs, notes) = discover(&root).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        let got: Vec<(String, u32, u64, u32)> = specs
            .iter()
            .map(|s| (s.id.to_string(), s.pmu_type, s.config, s.cpu))
            .collect();
        let want: Vec<(String, u32, u64, u32)> = [
            ("0/package", 2, 0),
            ("0/core", 1, 0),
            ("0/uncore", 4, 0),
            ("0/dram", 3, 0),
            ("0/psys", 5, 0),
            ("1/package", 2, 4),
            ("1/core", 1, 4),
            ("1/uncore", 4, 4),
            ("1/dram", 3, 4),
            ("1/psys", 5, 4),
        ]
        .into_iter()
        .map(|(id, c, cpu)| (id.to_string(), 23, c, cpu))
        .collect();
        assert_eq!(got, want);
        assert!(specs.iter().all(|s| s.unit == EnergyUnit::PowerOfTwo(32)));
        assert!(specs[0]
            .origin
            .to_string_lossy()
            .ends_with("devices/power/events/energy-pkg@cpu0"));

        // Under an emulated root perf must not open the emulated type on the real kernel.
        let err = PerfEvents::open(&root, &Selection::all()).err().unwrap();
        assert!(
            matches!(&err, Error::MechanismUnavailable { why, .. } if why.contains("emulated")),
            "{err}"
        );
    }

    #[test]
    fn a_cpumask_listing_two_cpus_of_one_package_is_not_double_counted() {
        let dir = tempfile::tempdir().unwrap();
        topology_tree(dir.path(), 8, 4);
        pmu_tree(dir.path(), "power", 23, "0,1,4", &INTEL_EVENTS[1..2]);
        let (specs, notes) = discover(&SysRoot::new(dir.path())).unwrap();
        assert_eq!(specs.iter().map(|s| s.cpu).collect::<Vec<_>>(), vec![0, 4]);
        assert!(notes.iter().any(|n| n.contains("only CPU 0")), "{notes:?}");
    }

    #[test]
    fn multi_die_packages_name_the_die() {
        let dir = tempfile::tempdir().unwrap();
        topology_tree(dir.path(), 4, 4);
        for i in 2..4 {
            let t = dir
                .path()
                .join(format!("sys/devices/system/cpu/cpu{i}/topology"));
            std::fs::write(t.join("die_id"), "1\n").unwrap();
        }
        pmu_tree(dir.path(), "power", 23, "0,2", &INTEL_EVENTS[1..2]);
        let (specs, _) = discover(&SysRoot::new(dir.path())).unwrap();
        let ids: Vec<String> = specs.iter().map(|s| s.id.to_string()).collect();
        assert_eq!(ids, vec!["0/die0/package", "0/die1/package"]);
    }

    #[test]
    fn amd_package_and_per_core_events() {
        let dir = tempfile::tempdir().unwrap();
        topology_tree(dir.path(), 8, 8);
        pmu_tree(
            dir.path(),
            "power",
            11,
            "0",
            &[("energy-pkg", "event=0x02")],
        );
        pmu_tree(
            dir.path(),
            "power_core",
            12,
            "0,2,4,6",
            &[("energy-core", "event=0x01")],
        );
        let (specs, notes) = discover(&SysRoot::new(dir.path())).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        let got: Vec<(String, u32, u64, u32)> = specs
            .iter()
            .map(|s| (s.id.to_string(), s.pmu_type, s.config, s.cpu))
            .collect();
        assert_eq!(
            got,
            vec![
                ("0/package".to_string(), 11, 2, 0),
                ("0/core".to_string(), 12, 1, 0),
                ("0/core".to_string(), 12, 1, 2),
                ("0/core".to_string(), 12, 1, 4),
                ("0/core".to_string(), 12, 1, 6),
            ]
        );
    }

    #[test]
    fn unknown_events_and_missing_scale_are_notes_and_no_pmu_is_unavailable() {
        let dir = tempfile::tempdir().unwrap();
        topology_tree(dir.path(), 2, 2);
        let err = discover(&SysRoot::new(dir.path())).unwrap_err();
        assert!(
            matches!(&err, Error::MechanismUnavailable { why, .. } if why.contains("modprobe")),
            "{err}"
        );
        pmu_tree(
            dir.path(),
            "power",
            23,
            "0",
            &[("energy-pkg", "event=0x02"), ("energy-foo", "event=0x09")],
        );
        let ev = dir.path().join("sys/bus/event_source/devices/power/events");
        std::fs::write(ev.join("energy-cores"), "event=0x01\n").unwrap();
        let (specs, notes) = discover(&SysRoot::new(dir.path())).unwrap();
        assert_eq!(specs.len(), 1);
        assert!(notes.iter().any(|n| n.contains("energy-foo")), "{notes:?}");
        assert!(
            notes
                .iter()
                .any(|n| n.contains("energy-cores") && n.contains(".scale")),
            "{notes:?}"
        );
    }
}
