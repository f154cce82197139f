//! The perf_event mechanism: counting events on the `power` PMU (and AMD's per-core
//! `power_core` PMU), read from user space with one `read()` per event per tick.
//!
//! **Discovery.** Each PMU is a directory `bus/event_source/devices/<pmu>` with its
//! dynamic `type` number, a `cpumask`, a `format/` that says which `config` bits an
//! event term sets, and `events/<name>` (`event=0x02`) with `<name>.scale`
//! (2^-32 J on every kernel so far) and `<name>.unit` (`Joules`). Events map to
//! domains: `energy-pkg` → package, `energy-cores` → core, `energy-gpu` → uncore,
//! `energy-ram` → dram, `energy-psys` → psys, `power_core/energy-core` → core.
//!
//! **One event per CPU in `cpumask`.** The kernel lists one CPU per die (Intel) or
//! package (AMD) for `power`, and one per core for `power_core`. Any CPU of the
//! scope reads the same counter, so opening more than the listed ones
//! double-counts. The events are opened with `pid = -1` (the PMU refuses task
//! events), `sample_period = 0` and no `exclude_*` bit (both are EINVAL there).
//!
//! **Per-core energy (AMD `power_core`).** Each core has its own counter. quietwatt
//! opens one event per listed CPU and presents their **sum** as the socket's `core`
//! channel, so `core` means "all cores of the package" on AMD as it does on Intel
//! (PP0), and a listing has one row per socket rather than one per core. The sum is
//! taken modulo 2^64, so it is itself a 64-bit counter that wraps like each part;
//! per-core detail is not kept. (powercap's AMD `core` zone, by contrast, reads one
//! core only.) More generally, [`PerfEvents::from_specs`] sums every spec that
//! shares a [`DomainId`].
//!
//! **Wrap and update caveat.** The kernel accumulates each event into a 64-bit
//! count, so the counter wraps at 2^64 ([`Wrap::PERF`]): at 2^-32 J per step that is
//! 2^32 J, ~248 days at 200 W. But the kernel adds each hardware update as a
//! *sign-extended* 32-bit difference: more than 2^31 raw steps between two updates
//! is added as a negative amount. Its own hrtimer updates every 5×2^(31−ESU) ms
//! (164 s at ESU 16, sized for 200 W), and every `read()` updates too, so reading
//! every few seconds, as any sampling rate of quietwatt does, keeps the count right.
//!
//! The code that opens and reads ([`open_counting_event`], [`read_count`]) is the
//! same whatever the event, so the tests drive it with software events
//! (`cpu-clock`) on machines without RAPL.

use super::{Channel, Mechanism, Selection, Source};
use crate::counter::Wrap;
use crate::cpuinfo::CpuInfo;
use crate::domain::{Domain, DomainId};
use crate::error::{Error, Result};
use crate::root::{read_trimmed, SysRoot};
use crate::topology::{parse_cpu_list, Topology};
use crate::units::EnergyUnit;
use perf_event_open_sys::bindings::{perf_event_attr, PERF_FLAG_FD_CLOEXEC};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

const DEVICES: &str = "/sys/bus/event_source/devices";
/// The package-scope RAPL PMU (Intel, AMD, Hygon; also the TPMI driver's).
pub const POWER_PMU: &str = "power";
/// AMD's per-core energy PMU (Linux 6.14+).
pub const POWER_CORE_PMU: &str = "power_core";

// ---------------------------------------------------------------------------
// The syscall wrapper.

/// Opens a system-wide counting event: `perf_event_open(attr, pid = -1, cpu, -1,
/// FD_CLOEXEC)` with `attr.type = pmu_type`, `attr.config = config`, counting
/// (sample period 0), enabled at once, no `exclude_*` bit, and `read_format = 0`
/// so that a `read()` returns the bare 64-bit count.
pub fn open_counting_event(pmu_type: u32, config: u64, cpu: u32) -> io::Result<OwnedFd> {
    let cpu = libc::c_int::try_from(cpu).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut attr = perf_event_attr {
        type_: pmu_type,
        // The struct as this binding knows it; the kernel accepts a larger struct
        // whose extra bytes are zero, and a smaller one from older headers.
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config,
        ..Default::default()
    };
    // SAFETY: `attr` is a fully initialised perf_event_attr (zeroed by Default, then
    // the three fields above); the call asks only for a counting event, which has
    // no effect on memory of this process.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            &mut attr,
            -1,
            cpu,
            -1,
            PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads an event's 64-bit count with one `read()` into a stack buffer.
#[inline]
pub fn read_count(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut buf = [0u8; 8];
    let n = rustix::io::read(fd, &mut buf[..]).map_err(io::Error::from)?;
    if n != buf.len() {
        // With read_format = 0 the kernel always returns 8 bytes; fewer means the
        // descriptor is not what we opened.
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
    }
    Ok(u64::from_ne_bytes(buf))
}

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
                "no `power` PMU at {} (no RAPL hardware, e.g. a VM; or the kernel lacks CONFIG_PERF_EVENTS_INTEL_RAPL, or its module is not loaded: `sudo modprobe intel_rapl_perf`)",
                pmu_dir(root, POWER_PMU).display()
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

// ---------------------------------------------------------------------------
// The source.

/// Open perf counting events, one per (event, CPU), summed per [`DomainId`].
pub struct PerfEvents {
    channels: Vec<Channel>,
    fds: Vec<OwnedFd>,
    /// The channel each descriptor adds to.
    slots: Vec<usize>,
    /// What each descriptor reads, for errors.
    origins: Vec<PathBuf>,
    /// The CPU each descriptor's event was opened on.
    cpus: Vec<u32>,
    notes: Vec<String>,
}

impl PerfEvents {
    /// Discovers the RAPL PMUs under `root` and opens the selected domains.
    pub fn open(root: &SysRoot, selection: &Selection) -> Result<PerfEvents> {
        let (specs, notes) = discover(root)?;
        check_real_kernel_has(root)?;
        let specs = selection.apply(specs, |s| s.id)?;
        let mut events = PerfEvents::from_specs(specs)?;
        events.notes = notes;
        Ok(events)
    }

    /// Opens explicit events (any PMU, software events included). Specs that share
    /// a [`DomainId`] are summed into one channel, so they must share a unit.
    pub fn from_specs(specs: Vec<EventSpec>) -> Result<PerfEvents> {
        let mut channels: Vec<Channel> = Vec::new();
        let mut members: Vec<usize> = Vec::new();
        let mut fds = Vec::with_capacity(specs.len());
        let mut slots = Vec::with_capacity(specs.len());
        let mut origins = Vec::with_capacity(specs.len());
        let mut cpus = Vec::with_capacity(specs.len());
        for spec in specs {
            let slot = match channels.iter().position(|c| c.id == spec.id) {
                Some(i) => {
                    if channels[i].unit != spec.unit {
                        return Err(Error::MechanismUnavailable {
                            mechanism: Mechanism::Perf.name(),
                            why: format!(
                                "the events of {} count in different units ({} and {}): they cannot be summed",
                                spec.id, channels[i].unit, spec.unit
                            ),
                        });
                    }
                    members[i] += 1;
                    i
                }
                None => {
                    channels.push(Channel {
                        id: spec.id,
                        unit: spec.unit,
                        wrap: Wrap::PERF,
                        origin: spec.origin.clone(),
                        limit: None,
                    });
                    members.push(1);
                    channels.len() - 1
                }
            };
            let fd = open_counting_event(spec.pmu_type, spec.config, spec.cpu)
                .map_err(|e| open_error(&spec, e))?;
            fds.push(fd);
            slots.push(slot);
            cpus.push(spec.cpu);
            origins.push(spec.origin);
        }
        for (ch, &n) in channels.iter_mut().zip(&members) {
            if n > 1 {
                ch.origin = PathBuf::from(format!(
                    "{} (+{} more CPUs, summed)",
                    ch.origin.display(),
                    n - 1
                ));
            }
        }
        Ok(PerfEvents {
            channels,
            fds,
            slots,
            origins,
            cpus,
            notes: Vec::new(),
        })
    }

    /// How many events are open (one per CPU per event).
    pub fn event_count(&self) -> usize {
        self.fds.len()
    }
}

impl Source for PerfEvents {
    fn mechanism(&self) -> Mechanism {
        Mechanism::Perf
    }

    fn channels(&self) -> &[Channel] {
        &self.channels
    }

    fn read(&mut self, out: &mut [u64]) -> Result<()> {
        out.fill(0);
        for ((fd, &slot), origin) in self.fds.iter().zip(&self.slots).zip(&self.origins) {
            let v = read_count(fd.as_fd()).map_err(|e| read_error(origin, e))?;
            if let Some(o) = out.get_mut(slot) {
                // Modulo 2^64: a sum of 64-bit counters is a 64-bit counter.
                *o = o.wrapping_add(v);
            }
        }
        Ok(())
    }

    fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The CPU each event was opened on. A read from elsewhere makes the kernel
    /// interrupt that CPU (since Linux 6.12 a package-scope event such as RAPL's
    /// `power` ones is read locally from any CPU of its package, but its own CPU is
    /// local on every kernel).
    fn read_cpus(&self) -> Vec<u32> {
        self.cpus.clone()
    }
}

/// The fix for a refused system-wide event, with this machine's setting.
pub fn permission_fix() -> String {
    // perf_event_open always reaches the real kernel, so the real sysctl applies
    // even under an emulated root.
    let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    format!(
        "system-wide perf events need kernel.perf_event_paranoid <= 0 (it is {paranoid}) or CAP_PERFMON: \
         `sudo sysctl kernel.perf_event_paranoid=0`, or `sudo setcap cap_perfmon=ep $(which quietwatt)`, or run as root"
    )
}

pub(crate) fn open_error(spec: &EventSpec, e: io::Error) -> Error {
    let (t, c, cpu) = (spec.pmu_type, spec.config, spec.cpu);
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => Error::Permission {
            path: spec.origin.clone(),
            fix: permission_fix(),
        },
        Some(libc::ENOENT) => Error::MechanismUnavailable {
            mechanism: Mechanism::Perf.name(),
            why: format!(
                "the kernel has no PMU of type {t} that accepts config {c:#x} (ENOENT opening {})",
                spec.origin.display()
            ),
        },
        Some(libc::ENODEV) => Error::MechanismUnavailable {
            mechanism: Mechanism::Perf.name(),
            why: format!(
                "CPU {cpu} is offline or PMU type {t} does not support it (ENODEV opening {})",
                spec.origin.display()
            ),
        },
        Some(libc::EINVAL) => Error::Io {
            path: spec.origin.clone(),
            source: io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "EINVAL: the kernel refused type {t} config {c:#x} on CPU {cpu}; the power PMUs accept only \
                     system-wide counting events (pid -1, a valid CPU, sample_period 0, no exclude_* bits) \
                     and config bits inside their format (event=config:0-7)"
                ),
            ),
        },
        _ => Error::io(&spec.origin, e),
    }
}

fn read_error(path: &Path, e: io::Error) -> Error {
    match e.raw_os_error() {
        // The PMU was unregistered or the CPU's context went away.
        Some(libc::ENODEV | libc::ENXIO) => Error::Vanished {
            path: path.to_path_buf(),
            source: e,
        },
        _ => Error::io(path, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::Meter;
    use perf_event_open_sys::bindings::{
        PERF_COUNT_SW_CPU_CLOCK, PERF_COUNT_SW_TASK_CLOCK, PERF_TYPE_SOFTWARE,
    };
    use std::time::{Duration, Instant};

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

    fn online_cpus() -> Vec<u32> {
        let topo = Topology::read(&SysRoot::default()).unwrap();
        topo.cpus().iter().map(|c| c.id).take(2).collect()
    }

    fn cpu_clock(socket: u32, cpu: u32) -> EventSpec {
        EventSpec::new(
            DomainId::new(socket, Domain::Package),
            PERF_TYPE_SOFTWARE,
            PERF_COUNT_SW_CPU_CLOCK as u64,
            cpu,
            // "joules" standing in for nanoseconds.
            EnergyUnit::Scale(1e-9),
        )
    }

    #[test]
    fn real_software_events_count_through_the_same_open_and_read() {
        let cpus = online_cpus();
        let specs: Vec<EventSpec> = cpus
            .iter()
            .enumerate()
            .map(|(i, &cpu)| cpu_clock(i as u32, cpu))
            .collect();
        let mut src = PerfEvents::from_specs(specs).unwrap();
        assert_eq!(src.channels().len(), cpus.len());
        assert!(src.channels().iter().all(|c| c.wrap == Wrap::PERF));
        let mut a = vec![0u64; cpus.len()];
        let mut b = vec![0u64; cpus.len()];
        let t0 = Instant::now();
        src.read(&mut a).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        src.read(&mut b).unwrap();
        let elapsed = t0.elapsed().as_nanos() as f64;
        for i in 0..cpus.len() {
            // cpu-clock on a CPU counts every nanosecond it is enabled, idle or not.
            let d = Wrap::PERF.delta(a[i], b[i]) as f64;
            assert!(
                d > 0.75 * elapsed && d < 1.25 * elapsed,
                "cpu {}: counted {d} ns in {elapsed} ns",
                cpus[i]
            );
        }

        // The same through a Meter: the 1e-9 scale turns ns into "joules" = seconds.
        let specs = cpus.iter().map(|&cpu| cpu_clock(0, cpu)).collect();
        let summed = PerfEvents::from_specs(specs).unwrap();
        assert_eq!(summed.channels().len(), 1);
        assert_eq!(summed.event_count(), cpus.len());
        let mut meter = Meter::new(Box::new(summed));
        let t0 = Instant::now();
        meter.sample().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        meter.sample().unwrap();
        let secs = t0.elapsed().as_secs_f64();
        let report = meter.report();
        let j = report.domains[0].energy_j.0;
        let n = cpus.len() as f64;
        assert!(
            j > 0.75 * n * secs && j < 1.25 * n * secs,
            "{n} CPUs summed to {j} s in {secs} s"
        );
        assert_eq!(report.domains[0].socket, 0);
    }

    #[test]
    fn task_clock_opens_too_and_bad_events_give_clear_errors() {
        // task-clock with pid -1 on a CPU is a valid system-wide event as well.
        let spec = EventSpec::new(
            DomainId::new(0, Domain::Core),
            PERF_TYPE_SOFTWARE,
            PERF_COUNT_SW_TASK_CLOCK as u64,
            online_cpus()[0],
            EnergyUnit::Scale(1e-9),
        );
        let mut src = PerfEvents::from_specs(vec![spec]).unwrap();
        src.read(&mut [0u64]).unwrap();

        // A type no PMU has.
        let bad = EventSpec::new(
            DomainId::new(0, Domain::Package),
            0x7fff_fff0,
            2,
            online_cpus()[0],
            EnergyUnit::PowerOfTwo(32),
        );
        let err = PerfEvents::from_specs(vec![bad]).err().unwrap();
        let msg = err.to_string();
        assert!(
            matches!(err, Error::MechanismUnavailable { .. }) && msg.contains("type 2147483632"),
            "{msg}"
        );

        // Specs summed into one channel must agree on the unit.
        let mut other = cpu_clock(0, online_cpus()[0]);
        other.unit = EnergyUnit::Scale(2e-9);
        let err = PerfEvents::from_specs(vec![cpu_clock(0, online_cpus()[0]), other])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("different units"), "{err}");
    }

    #[test]
    fn open_errors_are_typed() {
        let spec = cpu_clock(0, 0);
        let e = |n| open_error(&spec, io::Error::from_raw_os_error(n));
        match e(libc::EACCES) {
            Error::Permission { fix, .. } => {
                assert!(
                    fix.contains("perf_event_paranoid=0") && fix.contains("cap_perfmon"),
                    "{fix}"
                )
            }
            other => panic!("{other}"),
        }
        assert!(matches!(e(libc::EPERM), Error::Permission { .. }));
        assert!(matches!(
            e(libc::ENODEV),
            Error::MechanismUnavailable { .. }
        ));
        let einval = e(libc::EINVAL).to_string();
        assert!(
            einval.contains("sample_period 0") && einval.contains("pid -1"),
            "{einval}"
        );
        assert!(matches!(
            read_error(Path::new("x"), io::Error::from_raw_os_error(libc::ENODEV)),
            Error::Vanished { .. }
        ));
    }
}
