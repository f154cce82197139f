//! The tree served under the mount point, mirroring the kernel's layouts
//! (RAPL-FACTS §3-5):
//!
//! ```text
//! sys/devices/system/cpu/{online,possible,present,offline}
//! sys/devices/system/cpu/cpuN/online                 (not cpu0)
//! sys/devices/system/cpu/cpuN/topology/{physical_package_id,die_id,core_id,*_list}
//! sys/devices/system/cpu/cpuN/cpufreq/{scaling_*,cpuinfo_*_freq}   (with cpufreq)
//! sys/devices/virtual/powercap/intel-rapl/enabled
//! sys/devices/virtual/powercap/intel-rapl/intel-rapl:X/{name,energy_uj,max_energy_range_uj,enabled,constraint_*}
//! sys/devices/virtual/powercap/intel-rapl/intel-rapl:X/intel-rapl:X:Y/...   (core, uncore, dram)
//! sys/devices/virtual/powercap/intel-rapl/intel-rapl:P/...                  (psys, top level, after its package)
//! sys/devices/virtual/powercap/intel-rapl-mmio/intel-rapl-mmio:0/...        (optional)
//! sys/class/powercap/{intel-rapl,intel-rapl:X,intel-rapl:X:Y,...} -> ../../devices/virtual/powercap/...
//! sys/devices/power/{type,cpumask,format/event,events/energy-*}             (perf PMU)
//! sys/devices/power_core/...                                                (AMD)
//! sys/bus/event_source/devices/{power,power_core} -> ../../../devices/...
//! proc/cpuinfo
//! dev/cpu/N/msr
//! .quietwatt-emulator/{truth.json,config.json,enter.sh,stash/}
//! ```
//!
//! Zone ids are hexadecimal and follow registration order: packages in socket
//! order (reversed with `shuffle_zone_ids`), each package's subzones in the order
//! core, uncore, dram (reversed too), and right after the psys master package's
//! subzones its top-level psys zone. That is the kernel's order since psys is
//! enumerated with its package (drivers/powercap/intel_rapl_common.c,
//! `rapl_package_register_powercap`: the package zone, then its other domains in
//! domain order, psys with no parent). The kernel probes psys on every package
//! and registers it only where the counter reads non-zero (`rapl_check_domain`),
//! so psys appears once, on the master, named `psys` on package 0 and `psys-N`
//! on package N (`rapl_init_domains`); BIOS-disabled psys reads 0 everywhere and
//! has no zone.

use crate::config::EmulatorConfig;
use crate::cpufreq::{Attr, Limit};
use crate::cpuinfo;
use crate::namespace;
use crate::truth::GroundTruth;
use crate::units;
use quietwatt_core::Domain;
use std::path::Path;

/// An inode number; the root is 1.
pub(crate) type Ino = u64;

/// The root directory's inode.
pub(crate) const ROOT: Ino = 1;

/// The size `stat` shows for sysfs attributes.
const SYSFS_SIZE: u64 = 4096;
/// The size `stat` shows for `msr` files: past every register offset (AMD's are
/// near 2^32), in case a kernel path clamps reads to the file size.
const MSR_SIZE: u64 = 1 << 40;
/// perf's scale for every RAPL event: 2^-32 J.
const PERF_SCALE: &str = "2.3283064365386962890625e-10";
/// The `type` numbers of the emulated perf PMUs.
const POWER_PMU_TYPE: u32 = 37;
const POWER_CORE_PMU_TYPE: u32 = 38;

/// What a file serves.
#[derive(Debug, Clone)]
pub(crate) enum Content {
    /// Fixed text.
    Text(String),
    /// powercap `energy_uj` of the counter with this index.
    EnergyUj(usize),
    /// `max_energy_range_uj` of the counter with this index.
    MaxRange(usize),
    /// `/dev/cpu/N/msr` of this CPU.
    Msr(u32),
    /// `.quietwatt-emulator/truth.json`, computed when read.
    Truth,
    /// `/proc/stat` under the configured load schedule.
    ProcStat,
    /// A `cpufreq` value of this CPU that can change, kHz.
    CpuFreq(u32, Attr),
}

/// What a node is.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// A directory and its entries, in creation order.
    Dir(Vec<(String, Ino)>),
    /// A regular file.
    File(Content),
    /// A symbolic link and its target.
    Symlink(String),
}

/// One file, directory or link.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    /// The parent directory (the root is its own parent).
    pub parent: Ino,
    /// What it is.
    pub kind: Kind,
    /// Permission bits (owner root:root).
    pub mode: u16,
    /// The size `stat` shows.
    pub size: u64,
    /// Whether lookups and attributes may change (no kernel caching).
    pub dynamic: bool,
    /// (socket, domain) pairs whose vanishing removes this node.
    pub hide_if: Vec<(u32, Domain)>,
}

/// Every node, indexed by inode number - 1.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    nodes: Vec<Node>,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            nodes: vec![Node {
                parent: ROOT,
                kind: Kind::Dir(Vec::new()),
                mode: 0o755,
                size: 0,
                dynamic: false,
                hide_if: Vec::new(),
            }],
        }
    }

    /// The node `ino`.
    pub fn get(&self, ino: Ino) -> Option<&Node> {
        usize::try_from(ino)
            .ok()
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| self.nodes.get(i))
    }

    /// The entry `name` of directory `dir`.
    pub fn lookup(&self, dir: Ino, name: &str) -> Option<Ino> {
        match &self.get(dir)?.kind {
            Kind::Dir(entries) => entries.iter().find(|(n, _)| n == name).map(|&(_, i)| i),
            _ => None,
        }
    }

    /// The node at `path` (relative, `/`-separated).
    #[cfg(test)]
    pub fn resolve(&self, path: &str) -> Option<Ino> {
        path.split('/')
            .filter(|c| !c.is_empty())
            .try_fold(ROOT, |dir, name| self.lookup(dir, name))
    }

    fn add(&mut self, parent: Ino, name: &str, kind: Kind, mode: u16, size: u64) -> Ino {
        let (dynamic, hide_if) = self
            .get(parent)
            .map(|p| (p.dynamic, p.hide_if.clone()))
            .unwrap_or_default();
        self.nodes.push(Node {
            parent,
            kind,
            mode,
            size,
            dynamic,
            hide_if,
        });
        let ino = self.nodes.len() as Ino;
        if let Some(Node {
            kind: Kind::Dir(entries),
            ..
        }) = self.nodes.get_mut(parent as usize - 1)
        {
            entries.push((name.to_string(), ino));
        }
        ino
    }

    fn node_mut(&mut self, ino: Ino) -> &mut Node {
        &mut self.nodes[ino as usize - 1]
    }

    /// Directory `name` in `parent` (created 0755 if missing).
    fn dir(&mut self, parent: Ino, name: &str) -> Ino {
        match self.lookup(parent, name) {
            Some(i) => i,
            None => self.add(parent, name, Kind::Dir(Vec::new()), 0o755, 0),
        }
    }

    /// The directory at `path` under the root, created as needed.
    fn dirs(&mut self, path: &str) -> Ino {
        path.split('/')
            .filter(|c| !c.is_empty())
            .fold(ROOT, |dir, name| self.dir(dir, name))
    }

    fn file(&mut self, dir: Ino, name: &str, mode: u16, content: Content) -> Ino {
        self.add(dir, name, Kind::File(content), mode, SYSFS_SIZE)
    }

    /// A read-only (0444) sysfs attribute holding `value` and a newline.
    fn attr(&mut self, dir: Ino, name: &str, value: impl std::fmt::Display) -> Ino {
        self.file(dir, name, 0o444, Content::Text(format!("{value}\n")))
    }

    /// A writable-looking (0644) sysfs attribute.
    fn attr_rw(&mut self, dir: Ino, name: &str, value: impl std::fmt::Display) -> Ino {
        self.file(dir, name, 0o644, Content::Text(format!("{value}\n")))
    }

    fn symlink(&mut self, dir: Ino, name: &str, target: &str) -> Ino {
        self.add(
            dir,
            name,
            Kind::Symlink(target.to_string()),
            0o777,
            target.len() as u64,
        )
    }
}

/// A CPU list in the kernel's `%*pbl` form: `0-3,8,10-11`.
pub(crate) fn cpulist(cpus: impl IntoIterator<Item = u32>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut run: Option<(u32, u32)> = None;
    let flush = |run: Option<(u32, u32)>, out: &mut Vec<String>| {
        if let Some((a, b)) = run {
            out.push(if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            });
        }
    };
    for c in cpus {
        run = match run {
            Some((a, b)) if c == b + 1 => Some((a, c)),
            r => {
                flush(r, &mut out);
                Some((c, c))
            }
        };
    }
    flush(run, &mut out);
    out.join(",")
}

/// Builds the whole tree for a validated configuration.
pub(crate) fn build(config: &EmulatorConfig, truth: &GroundTruth, mountpoint: &Path) -> Tree {
    let mut t = Tree::new();
    topology(&mut t, config);
    let proc = t.dirs("proc");
    t.add(
        proc,
        "cpuinfo",
        Kind::File(Content::Text(cpuinfo::cpuinfo(config))),
        0o444,
        0,
    );
    if !config.load.is_empty() {
        t.add(proc, "stat", Kind::File(Content::ProcStat), 0o444, 0);
    }
    powercap(&mut t, config, truth);
    perf(&mut t, config);
    msr(&mut t, config);
    introspection(&mut t, config, mountpoint);
    t
}

fn topology(t: &mut Tree, config: &EmulatorConfig) {
    let cpu = t.dirs("sys/devices/system/cpu");
    let all = cpulist(0..config.cpus());
    t.attr(cpu, "online", &all);
    t.attr(cpu, "possible", &all);
    t.attr(cpu, "present", &all);
    t.attr(cpu, "offline", "");
    let per = config.cpus_per_socket;
    for c in 0..config.cpus() {
        let d = t.dir(cpu, &format!("cpu{c}"));
        if c != 0 {
            t.attr_rw(d, "online", 1);
        }
        let socket = config.socket_of(c);
        let package = cpulist(socket * per..(socket + 1) * per);
        let topo = t.dir(d, "topology");
        t.attr(topo, "physical_package_id", socket);
        t.attr(topo, "die_id", 0);
        t.attr(topo, "core_id", c % per);
        t.attr(topo, "core_cpus_list", c);
        t.attr(topo, "thread_siblings_list", c);
        t.attr(topo, "core_siblings_list", &package);
        t.attr(topo, "package_cpus_list", &package);
        t.attr(topo, "die_cpus_list", &package);
        if let Some(f) = &config.cpufreq {
            // As acpi-cpufreq under the performance governor; root may write the limits.
            let d = t.dir(d, "cpufreq");
            // Each value followed by a space, as the kernel's show_available_freqs.
            let list: String = f.available_khz.iter().map(|k| format!("{k} ")).collect();
            t.attr(d, "scaling_available_frequencies", list);
            t.attr(d, "cpuinfo_min_freq", f.min_khz());
            t.attr(d, "cpuinfo_max_freq", f.max_khz());
            t.attr(d, "scaling_driver", "acpi-cpufreq");
            t.attr(d, "scaling_governor", "performance");
            for (name, attr, mode) in [
                ("scaling_cur_freq", Attr::Cur, 0o444),
                ("scaling_min_freq", Attr::Limit(Limit::Min), 0o644),
                ("scaling_max_freq", Attr::Limit(Limit::Max), 0o644),
            ] {
                let f = t.file(d, name, mode, Content::CpuFreq(c, attr));
                t.node_mut(f).dynamic = true;
            }
        }
    }
}

/// A powercap zone to create.
struct ZoneSpec<'a> {
    /// The directory name, e.g. `intel-rapl:0:1`.
    id: &'a str,
    /// The `name` attribute.
    name: &'a str,
    /// The counter behind `energy_uj`.
    counter: usize,
    /// (socket, domain) pairs whose vanishing removes the zone.
    hide: &'a [(u32, Domain)],
    /// The package power for power-limit constraints (Intel packages), if any.
    constraints: Option<f64>,
    /// The zone's path under `devices/virtual/powercap`, for its `class/powercap` link.
    path: String,
}

/// One powercap zone directory with its attributes, and its link in `class`.
fn zone(t: &mut Tree, parent: Ino, class: Ino, spec: ZoneSpec<'_>, energy_mode: u16) -> Ino {
    let z = t.dir(parent, spec.id);
    {
        let node = t.node_mut(z);
        node.dynamic = true;
        node.hide_if.extend_from_slice(spec.hide);
    }
    let hide = t.node_mut(z).hide_if.clone();
    let link = t.symlink(class, spec.id, &format!("{VIRTUAL}/{}", spec.path));
    t.node_mut(link).hide_if = hide;
    // As the kernel's device model: every zone links back to its class (readers
    // such as CodeCarbon look for it; a reader that walks zones must not follow it).
    let depth = 3 + spec.path.split('/').count();
    t.symlink(
        z,
        "subsystem",
        &format!("{}class/powercap", "../".repeat(depth)),
    );
    t.attr(z, "name", spec.name);
    t.file(z, "energy_uj", energy_mode, Content::EnergyUj(spec.counter));
    t.file(
        z,
        "max_energy_range_uj",
        0o444,
        Content::MaxRange(spec.counter),
    );
    t.attr_rw(z, "enabled", 1);
    if let Some(package_w) = spec.constraints {
        let tdp_uw = (package_w.max(1.0) * 1.5 * 1e6).round() as u64;
        t.attr(z, "constraint_0_name", "long_term");
        t.attr_rw(z, "constraint_0_power_limit_uw", tdp_uw);
        t.attr_rw(z, "constraint_0_time_window_us", 27_983_872);
        t.attr(z, "constraint_0_max_power_uw", tdp_uw);
        t.attr(z, "constraint_1_name", "short_term");
        t.attr_rw(z, "constraint_1_power_limit_uw", tdp_uw / 4 * 5);
        t.attr_rw(z, "constraint_1_time_window_us", 2_440);
    }
    z
}

/// Where `class/powercap` links point.
const VIRTUAL: &str = "../../devices/virtual/powercap";

fn powercap(t: &mut Tree, config: &EmulatorConfig, truth: &GroundTruth) {
    let energy_mode = if config.enforce_permissions {
        0o400
    } else {
        0o444
    };
    let amd = config.vendor.is_amd();
    let class = t.dirs("sys/class/powercap");
    let virt = t.dirs("sys/devices/virtual/powercap");
    {
        // Zones come and go with faults: never cache these directories.
        t.node_mut(class).dynamic = true;
        t.node_mut(virt).dynamic = true;
    }

    let ct = t.dir(virt, "intel-rapl");
    t.attr_rw(ct, "enabled", 1);
    t.symlink(ct, "subsystem", "../../../../class/powercap");
    t.symlink(class, "intel-rapl", &format!("{VIRTUAL}/intel-rapl"));

    let mut sockets: Vec<u32> = (0..config.sockets).collect();
    let mut subdomains: Vec<Domain> = [Domain::Core, Domain::Uncore, Domain::Dram]
        .into_iter()
        .filter(|d| config.domains.has(*d))
        .collect();
    if config.shuffle_zone_ids {
        sockets.reverse();
        subdomains.reverse();
    }
    let mut next_id = 0u32;
    for s in sockets {
        let Some(counter) = truth.find(s, Domain::Package, 0) else {
            continue;
        };
        let id = format!("intel-rapl:{next_id:x}");
        next_id += 1;
        let watts = config.watts(s, Domain::Package);
        let z = zone(
            t,
            ct,
            class,
            ZoneSpec {
                id: &id,
                name: &format!("package-{s}"),
                counter,
                hide: &[(s, Domain::Package)],
                constraints: if amd { None } else { watts },
                path: format!("intel-rapl/{id}"),
            },
            energy_mode,
        );
        let mut sub_id = 0u32;
        for &d in &subdomains {
            // AMD's `core` zone reads the per-core MSR on the package's lead CPU:
            // lane 0, one core's energy (RAPL-FACTS §4).
            let Some(counter) = truth.find(s, d, 0) else {
                continue;
            };
            let sid = format!("{id}:{sub_id:x}");
            sub_id += 1;
            let spec = ZoneSpec {
                id: &sid,
                name: d.name(),
                counter,
                hide: &[(s, d)],
                constraints: None,
                path: format!("intel-rapl/{id}/{sid}"),
            };
            zone(t, z, class, spec, energy_mode);
        }
        // psys is found on the master package only and, disabled, nowhere.
        let psys = truth
            .find(s, Domain::Psys, 0)
            .filter(|_| !config.psys_disabled);
        if let Some(counter) = psys {
            let pid = format!("intel-rapl:{next_id:x}");
            next_id += 1;
            let name = if s == 0 {
                "psys".to_string()
            } else {
                format!("psys-{s}")
            };
            let spec = ZoneSpec {
                id: &pid,
                name: &name,
                counter,
                hide: &[(s, Domain::Psys)],
                constraints: None,
                path: format!("intel-rapl/{pid}"),
            };
            zone(t, ct, class, spec, energy_mode);
        }
    }

    if config.mmio {
        let mt = t.dir(virt, "intel-rapl-mmio");
        t.attr_rw(mt, "enabled", 1);
        t.symlink(
            class,
            "intel-rapl-mmio",
            &format!("{VIRTUAL}/intel-rapl-mmio"),
        );
        if let Some(counter) = truth.find(0, Domain::Package, 0) {
            let id = "intel-rapl-mmio:0";
            let spec = ZoneSpec {
                id,
                name: "package-0",
                counter,
                hide: &[(0, Domain::Package)],
                constraints: config.watts(0, Domain::Package),
                path: format!("intel-rapl-mmio/{id}"),
            };
            let z = zone(t, mt, class, spec, energy_mode);
            if let Some(counter) = truth.find(0, Domain::Dram, 0) {
                let sid = "intel-rapl-mmio:0:0";
                let spec = ZoneSpec {
                    id: sid,
                    name: "dram",
                    counter,
                    hide: &[(0, Domain::Dram)],
                    constraints: None,
                    path: format!("intel-rapl-mmio/{id}/{sid}"),
                };
                zone(t, z, class, spec, energy_mode);
            }
        }
    }
}

/// One perf PMU directory under `sys/devices` and its `bus/event_source` link.
fn pmu(t: &mut Tree, name: &str, type_: u32, cpumask: &str, events: &[(&str, u32)]) {
    let devices = t.dirs("sys/devices");
    let p = t.dir(devices, name);
    t.attr(p, "type", type_);
    t.attr(p, "cpumask", cpumask);
    t.attr_rw(p, "perf_event_mux_interval_ms", 4);
    let format = t.dir(p, "format");
    t.attr(format, "event", "config:0-7");
    let ev = t.dir(p, "events");
    for &(event, code) in events {
        t.attr(ev, event, format!("event={code:#04x}"));
        t.attr(ev, &format!("{event}.scale"), PERF_SCALE);
        t.attr(ev, &format!("{event}.unit"), "Joules");
    }
    t.symlink(p, "subsystem", "../../bus/event_source");
    let bus = t.dirs("sys/bus/event_source/devices");
    t.symlink(bus, name, &format!("../../../devices/{name}"));
}

fn perf(t: &mut Tree, config: &EmulatorConfig) {
    let per = config.cpus_per_socket;
    let leads = cpulist((0..config.sockets).map(|s| s * per));
    if config.vendor.is_amd() {
        pmu(t, "power", POWER_PMU_TYPE, &leads, &[("energy-pkg", 0x02)]);
        if config.domains.core {
            let all = cpulist(0..config.cpus());
            pmu(
                t,
                "power_core",
                POWER_CORE_PMU_TYPE,
                &all,
                &[("energy-core", 0x01)],
            );
        }
        return;
    }
    let mut events = Vec::new();
    for (domain, event, code) in [
        (Domain::Core, "energy-cores", 0x01),
        (Domain::Package, "energy-pkg", 0x02),
        (Domain::Dram, "energy-ram", 0x03),
        (Domain::Uncore, "energy-gpu", 0x04),
        (Domain::Psys, "energy-psys", 0x05),
    ] {
        // perf drops an event whose MSR reads 0 when probed, except psys on
        // Sapphire/Emerald Rapids (`no_check`): disabled psys is listed there only.
        let probed_zero = domain == Domain::Psys
            && config.psys_disabled
            && !units::psys_always_listed(config.vendor);
        if config.domains.has(domain) && !probed_zero {
            events.push((event, code));
        }
    }
    pmu(t, "power", POWER_PMU_TYPE, &leads, &events);
}

fn msr(t: &mut Tree, config: &EmulatorConfig) {
    let cpu = t.dirs("dev/cpu");
    let mode = if config.enforce_permissions {
        0o600
    } else {
        0o644
    };
    for c in 0..config.cpus() {
        let d = t.dir(cpu, &c.to_string());
        let f = t.file(d, "msr", mode, Content::Msr(c));
        t.node_mut(f).size = MSR_SIZE;
    }
}

fn introspection(t: &mut Tree, config: &EmulatorConfig, mountpoint: &Path) {
    let q = t.dirs(".quietwatt-emulator");
    let truth = t.add(q, "truth.json", Kind::File(Content::Truth), 0o444, 0);
    t.node_mut(truth).dynamic = true;
    let json = serde_json::to_string_pretty(config).unwrap_or_default() + "\n";
    t.add(q, "config.json", Kind::File(Content::Text(json)), 0o444, 0);
    let script = namespace::enter_script(mountpoint, config);
    t.add(q, "enter.sh", Kind::File(Content::Text(script)), 0o555, 0);
    let stash = t.dir(q, "stash");
    t.node_mut(stash).mode = 0o700;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(t: &Tree, path: &str) -> Vec<String> {
        let ino = t.resolve(path).unwrap_or_else(|| panic!("{path}"));
        match &t.get(ino).unwrap().kind {
            Kind::Dir(e) => e.iter().map(|(n, _)| n.clone()).collect(),
            _ => panic!("{path} is not a directory"),
        }
    }

    fn text(t: &Tree, path: &str) -> String {
        match &t.get(t.resolve(path).unwrap()).unwrap().kind {
            Kind::File(Content::Text(s)) => s.clone(),
            k => panic!("{path}: {k:?}"),
        }
    }

    /// On a multi-socket server psys appears once, as the kernel registers it: after
    /// the master package's subzones, `psys-N` when the master is package N > 0;
    /// BIOS-disabled psys has no zone but stays listed by perf on SPR.
    #[test]
    fn psys_zone_follows_the_master_package() {
        let base = "sys/devices/virtual/powercap/intel-rapl";
        let c = EmulatorConfig::default().with_sockets(2).with_psys();
        let t = build(&c, &GroundTruth::new(&c), Path::new("/m"));
        assert_eq!(
            text(&t, &format!("{base}/intel-rapl:0/name")),
            "package-0\n"
        );
        assert_eq!(text(&t, &format!("{base}/intel-rapl:1/name")), "psys\n");
        assert_eq!(
            text(&t, &format!("{base}/intel-rapl:2/name")),
            "package-1\n"
        );

        let c = EmulatorConfig::intel(0x8F)
            .with_sockets(3)
            .with_psys_master(1);
        let t = build(&c, &GroundTruth::new(&c), Path::new("/m"));
        let top = names(&t, base);
        assert_eq!(
            top,
            [
                "enabled",
                "subsystem",
                "intel-rapl:0",
                "intel-rapl:1",
                "intel-rapl:2",
                "intel-rapl:3"
            ]
        );
        assert_eq!(text(&t, &format!("{base}/intel-rapl:2/name")), "psys-1\n");
        // Each zone links back to its class, as the kernel's device model does.
        match &t
            .get(
                t.resolve(&format!("{base}/intel-rapl:2/subsystem"))
                    .unwrap(),
            )
            .unwrap()
            .kind
        {
            Kind::Symlink(target) => assert_eq!(target, "../../../../../class/powercap"),
            other => panic!("subsystem is {other:?}"),
        }
        assert_eq!(
            text(&t, &format!("{base}/intel-rapl:3/name")),
            "package-2\n"
        );

        let c = EmulatorConfig::intel(0x8F).with_psys_disabled();
        let t = build(&c, &GroundTruth::new(&c), Path::new("/m"));
        assert_eq!(names(&t, base), ["enabled", "subsystem", "intel-rapl:0"]);
        assert!(names(&t, "sys/devices/power/events").contains(&"energy-psys".to_string()));
        let c = EmulatorConfig::default().with_psys_disabled();
        let t = build(&c, &GroundTruth::new(&c), Path::new("/m"));
        assert!(!names(&t, "sys/devices/power/events").contains(&"energy-psys".to_string()));
    }

    /// Each CPU's cpufreq directory as acpi-cpufreq shows it (performance governor),
    /// only when frequencies are emulated; the limits root-writable, the rest not.
    #[test]
    fn cpufreq_directories_as_acpi_cpufreq() {
        let c = EmulatorConfig::default()
            .with_cpus_per_socket(2)
            .with_sockets(2)
            .with_cpufreq_khz(&[1_500_000, 2_200_000, 3_000_000]);
        let t = build(&c, &GroundTruth::new(&c), Path::new("/m"));
        let d = "sys/devices/system/cpu/cpu3/cpufreq";
        assert_eq!(
            text(&t, &format!("{d}/scaling_available_frequencies")),
            "3000000 2200000 1500000 \n"
        );
        assert_eq!(text(&t, &format!("{d}/cpuinfo_min_freq")), "1500000\n");
        assert_eq!(text(&t, &format!("{d}/cpuinfo_max_freq")), "3000000\n");
        assert_eq!(text(&t, &format!("{d}/scaling_driver")), "acpi-cpufreq\n");
        assert_eq!(text(&t, &format!("{d}/scaling_governor")), "performance\n");
        let node = |name: &str| t.get(t.resolve(&format!("{d}/{name}")).unwrap()).unwrap();
        for (name, mode, attr) in [
            ("scaling_cur_freq", 0o444, Attr::Cur),
            ("scaling_min_freq", 0o644, Attr::Limit(Limit::Min)),
            ("scaling_max_freq", 0o644, Attr::Limit(Limit::Max)),
        ] {
            assert_eq!(node(name).mode, mode, "{name}");
            assert!(
                matches!(node(name).kind, Kind::File(Content::CpuFreq(3, a)) if a == attr),
                "{name}"
            );
        }
        assert_eq!(node("cpuinfo_max_freq").mode, 0o444);
        let without = EmulatorConfig::default();
        let t = build(&without, &GroundTruth::new(&without), Path::new("/m"));
        assert!(t.resolve("sys/devices/system/cpu/cpu0/cpufreq").is_none());
    }

    #[test]
    fn cpulists_compress_runs() {
        assert_eq!(cpulist([0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(cpulist([0]), "0");
        assert_eq!(cpulist([0, 4]), "0,4");
        assert_eq!(cpulist([]), "");
    }

    #[test]
    fn shuffled_zones_and_hex_ids() {
        let mut c = EmulatorConfig::default()
            .with_sockets(11)
            .with_cpus_per_socket(1);
        c.domains.psys = true;
        c.shuffle_zone_ids = true;
        let truth = GroundTruth::new(&c);
        let t = build(&c, &truth, Path::new("/m"));
        let base = "sys/devices/virtual/powercap/intel-rapl";
        assert_eq!(
            text(&t, &format!("{base}/intel-rapl:0/name")),
            "package-10\n"
        );
        // psys follows its package (0, the master, registered last here).
        assert_eq!(
            text(&t, &format!("{base}/intel-rapl:a/name")),
            "package-0\n"
        );
        assert_eq!(text(&t, &format!("{base}/intel-rapl:b/name")), "psys\n");
        assert_eq!(
            text(&t, &format!("{base}/intel-rapl:0/intel-rapl:0:0/name")),
            "dram\n"
        );
        assert!(names(&t, "sys/class/powercap").contains(&"intel-rapl:a:2".to_string()));
        assert_eq!(text(&t, "sys/devices/power/cpumask"), "0-10\n");
        assert_eq!(
            text(&t, "sys/devices/power/events/energy-psys"),
            "event=0x05\n"
        );
        let cpu3 = names(&t, "sys/devices/system/cpu/cpu3");
        assert!(cpu3.contains(&"online".to_string()));
        assert!(!names(&t, "sys/devices/system/cpu/cpu0").contains(&"online".to_string()));
        let e = t
            .resolve(&format!("{base}/intel-rapl:0/intel-rapl:0:1/energy_uj"))
            .unwrap();
        assert_eq!(
            t.get(e).unwrap().hide_if,
            vec![(10, Domain::Package), (10, Domain::Uncore)]
        );
        let link = t.resolve("sys/class/powercap/intel-rapl:0:1").unwrap();
        assert_eq!(
            t.get(link).unwrap().hide_if,
            vec![(10, Domain::Package), (10, Domain::Uncore)]
        );
        match &t.get(link).unwrap().kind {
            Kind::Symlink(target) => assert_eq!(
                target,
                "../../devices/virtual/powercap/intel-rapl/intel-rapl:0/intel-rapl:0:1"
            ),
            k => panic!("{k:?}"),
        }
    }
}
