//! What to emulate: the processor, its topology, the RAPL domains and units, the
//! power each domain draws over time, and the faults to inject.
//!
//! [`EmulatorConfig::default`] is a one-socket, four-CPU Intel Kaby Lake desktop
//! (family 6, model 0x9E: no unit quirk) with package, core, uncore and dram
//! domains, ESU 14 (61 µJ), full 32-bit counters updated every millisecond, and
//! 20 W package (12 W core, 2 W uncore) plus 4 W DRAM.

use crate::cpufreq::CpuFreq;
use crate::duration;
use crate::error::{Error, Result};
use crate::fault::{Fault, FaultKind};
use crate::follow::LoadFollowing;
use crate::units;
pub use crate::vendor::Vendor;
use quietwatt_core::Domain;
use serde::{Deserialize, Serialize};
use std::time::Duration;

mod trace;
pub use trace::{Trace, TracePoint};

/// Which RAPL domains exist besides `package` (always present).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Domains {
    /// PP0, all cores (AMD: the per-core counters).
    pub core: bool,
    /// PP1, the uncore / integrated GPU (Intel only).
    pub uncore: bool,
    /// DRAM (Intel only).
    pub dram: bool,
    /// Platform (psys), one per system (Intel only), read on the psys master
    /// package ([`EmulatorConfig::psys_master`]).
    pub psys: bool,
}

impl Domains {
    /// Intel's default: core, uncore and dram; no psys.
    pub const INTEL: Domains = Domains {
        core: true,
        uncore: true,
        dram: true,
        psys: false,
    };
    /// AMD's only layout: package and core.
    pub const AMD: Domains = Domains {
        core: true,
        uncore: false,
        dram: false,
        psys: false,
    };

    /// Whether `domain` is emulated (package always is).
    pub fn has(&self, domain: Domain) -> bool {
        match domain {
            Domain::Package => true,
            Domain::Core => self.core,
            Domain::Uncore => self.uncore,
            Domain::Dram => self.dram,
            Domain::Psys => self.psys,
            // A domain added to quietwatt-core after this emulator: not emulated.
            _ => false,
        }
    }
}

/// Constant power per domain of one socket, in watts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DomainWatts {
    /// The package; includes core and uncore.
    pub package: f64,
    /// The cores (AMD: all cores together, split evenly between them).
    pub core: f64,
    /// The uncore.
    pub uncore: f64,
    /// The DRAM.
    pub dram: f64,
}

impl Default for DomainWatts {
    fn default() -> Self {
        DomainWatts {
            package: 20.0,
            core: 12.0,
            uncore: 2.0,
            dram: 4.0,
        }
    }
}

impl DomainWatts {
    fn get_mut(&mut self, domain: Domain) -> Option<&mut f64> {
        match domain {
            Domain::Package => Some(&mut self.package),
            Domain::Core => Some(&mut self.core),
            Domain::Uncore => Some(&mut self.uncore),
            Domain::Dram => Some(&mut self.dram),
            // psys is not per socket; a domain this emulator does not know has no power.
            _ => None,
        }
    }

    /// Scales core and uncore down together, if need be, so that they add up to
    /// at most `cap` watts.
    fn fit_inside(&mut self, cap: f64) {
        let inside = self.core + self.uncore;
        if inside > cap && inside > 0.0 {
            self.core *= cap / inside;
            self.uncore *= cap / inside;
        }
    }

    /// The power of `domain` (psys is not per socket: 0 here).
    pub fn get(&self, domain: Domain) -> f64 {
        match domain {
            Domain::Package => self.package,
            Domain::Core => self.core,
            Domain::Uncore => self.uncore,
            Domain::Dram => self.dram,
            // psys, and any domain this emulator does not know: no per-socket power.
            _ => 0.0,
        }
    }
}

/// The power every domain draws.
///
/// Socket `s` draws `sockets[s]` when given, else `default`. psys, when emulated,
/// draws every package and DRAM plus `platform`. A [`Trace`] scales all of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerProfile {
    /// The power of every socket without an entry in `sockets`.
    pub default: DomainWatts,
    /// Per-socket overrides, by socket number.
    #[serde(default)]
    pub sockets: Vec<DomainWatts>,
    /// What psys sees beyond packages and DRAM (chipset, fans, ...), watts.
    pub platform: f64,
    /// A scaling over time; constant power when absent.
    #[serde(default)]
    pub trace: Option<Trace>,
    /// A package power that follows this machine's real load (see
    /// [`crate::follow`]); the packages' `package` watts are then unused.
    #[serde(default)]
    pub follow: Option<LoadFollowing>,
}

impl Default for PowerProfile {
    fn default() -> Self {
        PowerProfile {
            default: DomainWatts::default(),
            sockets: Vec::new(),
            platform: 6.0,
            trace: None,
            follow: None,
        }
    }
}

impl PowerProfile {
    /// The power of socket `socket`'s domains.
    pub fn socket(&self, socket: u32) -> DomainWatts {
        self.sockets
            .get(socket as usize)
            .copied()
            .unwrap_or(self.default)
    }

    /// Applies a text specification: comma-separated `[SOCKET/]DOMAIN=WATTS`, DOMAIN
    /// one of `package`, `core`, `uncore`, `dram` (per socket; without SOCKET, every
    /// socket) or `platform` (psys beyond packages and DRAM). Example:
    /// `package=30,core=15,1/dram=6,platform=8`. `follow=IDLE:PER_CPU[:PER_GHZ]` makes
    /// every package follow this machine's real load ([`LoadFollowing`]), e.g.
    /// `follow=10:5`, or `follow=10:2:1` with a term per GHz of each busy CPU's
    /// emulated frequency ([`EmulatorConfig::cpufreq`]);
    /// core and uncore, unless the specification names them, are then scaled down
    /// (if need be) to 70 % of the idle power, as they sit inside the package.
    pub fn apply(&mut self, spec: &str) -> Result<()> {
        let err = |why: String| Error::PowerSpec {
            spec: spec.to_string(),
            why,
        };
        let mut inside_named = false;
        let mut package_named = false;
        let mut follow_named = false;
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (target, watts) = item
                .split_once('=')
                .ok_or_else(|| err(format!("'{item}' has no '='")))?;
            if target.trim().eq_ignore_ascii_case("follow") {
                // follow=IDLE:PER_CPU[:PER_GHZ]: a load-following package (crate::follow).
                self.follow = Some(LoadFollowing::parse(watts).map_err(err)?);
                follow_named = true;
                continue;
            }
            let watts: f64 = watts
                .trim()
                .trim_end_matches(['W', 'w'])
                .parse()
                .map_err(|_| err(format!("'{watts}' is not a number of watts")))?;
            if !(watts.is_finite() && (0.0..=10_000.0).contains(&watts)) {
                return Err(err(format!("{watts} W is not between 0 and 10000")));
            }
            let (socket, name) = match target.split_once('/') {
                Some((s, d)) => (
                    Some(
                        s.trim()
                            .parse::<u32>()
                            .map_err(|_| err(format!("'{s}' is not a socket number")))?,
                    ),
                    d.trim(),
                ),
                None => (None, target.trim()),
            };
            if name.eq_ignore_ascii_case("platform") {
                if socket.is_some() {
                    return Err(err("platform power is not per socket".to_string()));
                }
                self.platform = watts;
                continue;
            }
            let domain: Domain = name.parse().map_err(|e| err(format!("{e}")))?;
            inside_named |= matches!(domain, Domain::Core | Domain::Uncore);
            package_named |= domain == Domain::Package;
            if domain == Domain::Psys {
                return Err(err(
                    "psys is the sum of packages, DRAM and `platform`: set platform=W".to_string(),
                ));
            }
            match socket {
                Some(s) => {
                    let s = s as usize;
                    if s >= 4096 {
                        return Err(err(format!("socket {s} is out of range")));
                    }
                    if self.sockets.len() <= s {
                        self.sockets.resize(s + 1, self.default);
                    }
                    if let Some(w) = self.sockets[s].get_mut(domain) {
                        *w = watts;
                    }
                }
                None => {
                    if let Some(w) = self.default.get_mut(domain) {
                        *w = watts;
                    }
                    for socket in &mut self.sockets {
                        if let Some(w) = socket.get_mut(domain) {
                            *w = watts;
                        }
                    }
                }
            }
        }
        if let (true, false, Some(f)) = (follow_named, inside_named, &self.follow) {
            // `follow=10:5` alone: the default core and uncore (14 W) would not fit
            // in a 10 W idle package.
            let cap = 0.7 * f.idle_w;
            for w in std::iter::once(&mut self.default).chain(self.sockets.iter_mut()) {
                w.fit_inside(cap);
            }
        } else if package_named && !inside_named {
            // `package=5` alone: the default core and uncore (14 W) would not fit
            // either; they keep their share, within 70 % of the package.
            for w in std::iter::once(&mut self.default).chain(self.sockets.iter_mut()) {
                let cap = 0.7 * w.package;
                w.fit_inside(cap);
            }
        }
        Ok(())
    }
}

/// Everything the emulator serves. Plain data: build it with struct update syntax
/// or the `with_*` helpers, then [`crate::Emulator::mount`] validates it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmulatorConfig {
    /// Vendor, family and model.
    pub vendor: Vendor,
    /// Number of packages.
    pub sockets: u32,
    /// CPUs per package (one thread per core).
    pub cpus_per_socket: u32,
    /// Which domains exist besides `package`.
    pub domains: Domains,
    /// Also serve the `intel-rapl-mmio` control type (package 0 and its DRAM,
    /// duplicating `intel-rapl:0`), as the int340x thermal driver does (Intel only).
    pub mmio: bool,
    /// The energy-status unit in the unit register (one count = 2^-esu J); `None`
    /// picks the vendor's usual value: 14 on Intel, 16 on AMD, 5 on Atom.
    pub esu: Option<u8>,
    /// Counter width: served counts wrap at 2^counter_bits (hardware: 32).
    pub counter_bits: u8,
    /// Counters advance in steps, at multiples of this since the mount.
    #[serde(with = "duration::text")]
    pub update_interval: Duration,
    /// Emulated time at the mount: counters start as if the machine had been
    /// drawing power this long (e.g. to start just before a wrap).
    #[serde(with = "duration::text")]
    pub start_offset: Duration,
    /// The power drawn.
    pub power: PowerProfile,
    /// Faults present from the mount (or from their `@TIME`).
    pub faults: Vec<Fault>,
    /// Serve `energy_uj` as 0400 root-only and `msr` as 0600, refusing other users
    /// with EACCES, as kernels since the CVE-2020-8694 fix do (false: 0444).
    pub enforce_permissions: bool,
    /// Register zones out of socket order (package 1 before package 0, subzones
    /// reversed), so that readers relying on zone ids are caught.
    pub shuffle_zone_ids: bool,
    /// The psys master package: the one socket whose CPUs read psys, as on
    /// Sapphire/Emerald Rapids, where the master need not be package 0 and the
    /// other packages' CPUs read MSR_PLATFORM_ENERGY_STATUS as 0 (Linux commit
    /// "perf/x86/rapl: Fix psys-energy event on Intel SPR platform"; TPMI likewise
    /// lists psys on the root package only, `TPMI_RAPL_DOMAIN_ROOT` in
    /// drivers/powercap/intel_rapl_tpmi.c). The psys counter, its truth and its
    /// faults belong to this socket. Default 0.
    #[serde(default)]
    pub psys_master: u32,
    /// psys disabled by the BIOS: the register exists and perf still lists
    /// `energy-psys` on Sapphire/Emerald Rapids (`no_check`), but the counter reads 0
    /// on every CPU, for good; powercap then has no psys zone, since the kernel
    /// registers no domain whose counter reads 0 (`rapl_check_domain` in
    /// drivers/powercap/intel_rapl_common.c). The truth is still what the platform drew.
    #[serde(default)]
    pub psys_disabled: bool,
    /// Serve `/proc/stat` with this machine load: `(from, busy fraction)` steps from
    /// the mount, in time order (the load before the first step is 0). Readers that
    /// follow the load (`--freq auto`) then see a known load instead of the host's,
    /// which a loaded CI machine would make unpredictable. Empty: no `/proc/stat`.
    #[serde(default)]
    pub load: Vec<LoadStep>,
    /// How long each read of a counter file or MSR takes to be answered: a slow
    /// device (or a host that stalls), and in tests a read that is surely in flight
    /// when a signal lands. Zero by default.
    #[serde(default, with = "duration::text")]
    pub read_latency: Duration,
    /// Serve `sys/devices/system/cpu/cpuN/cpufreq/` with these frequencies
    /// ([`crate::cpufreq`]; CLI `--cpufreq`), which a load-following package's
    /// `per_ghz_w` follows. `None`: no cpufreq directory, as on most VMs.
    #[serde(default)]
    pub cpufreq: Option<CpuFreq>,
}

/// From a time on, the busy fraction of every CPU in the emulated `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadStep {
    /// When it starts, from the mount.
    #[serde(with = "duration::text")]
    pub from: Duration,
    /// The busy fraction, 0 to 1.
    pub busy: f64,
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        EmulatorConfig {
            vendor: Vendor::KABY_LAKE,
            sockets: 1,
            cpus_per_socket: 4,
            domains: Domains::INTEL,
            mmio: false,
            esu: None,
            counter_bits: 32,
            update_interval: Duration::from_millis(1),
            start_offset: Duration::ZERO,
            power: PowerProfile::default(),
            faults: Vec::new(),
            enforce_permissions: true,
            shuffle_zone_ids: false,
            psys_master: 0,
            psys_disabled: false,
            load: Vec::new(),
            read_latency: Duration::ZERO,
            cpufreq: None,
        }
    }
}

impl EmulatorConfig {
    /// The default Intel configuration for another model (family 6).
    pub fn intel(model: u32) -> EmulatorConfig {
        EmulatorConfig {
            vendor: Vendor::intel(model),
            ..EmulatorConfig::default()
        }
    }

    /// An AMD Zen 3 EPYC (family 0x19, model 0x01): package and per-core counters,
    /// ESU 16, 8 cores per socket.
    pub fn amd() -> EmulatorConfig {
        EmulatorConfig {
            vendor: Vendor::ZEN3,
            cpus_per_socket: 8,
            domains: Domains::AMD,
            ..EmulatorConfig::default()
        }
    }

    /// With a `/proc/stat` whose load follows `steps` (`(from mount, busy fraction)`).
    pub fn with_load(mut self, steps: &[(Duration, f64)]) -> Self {
        self.load = steps
            .iter()
            .map(|&(from, busy)| LoadStep { from, busy })
            .collect();
        self
    }

    /// Cumulative (busy, idle) jiffies of all CPUs at USER_HZ 100, `ns` after the
    /// mount, under the load schedule.
    pub fn load_jiffies(&self, ns: u64) -> (u64, u64) {
        let now = ns as f64 * 1e-9;
        let cpus = (self.sockets * self.cpus_per_socket) as f64;
        let mut busy = 0.0;
        let mut t = 0.0;
        let mut level = 0.0;
        for step in &self.load {
            let from = step.from.as_secs_f64().min(now);
            busy += level * (from - t).max(0.0);
            t = t.max(from);
            level = step.busy.clamp(0.0, 1.0);
        }
        busy += level * (now - t).max(0.0);
        let hz = 100.0 * cpus;
        let b = (busy * hz) as u64;
        let all = (now * hz) as u64;
        (b, all.saturating_sub(b))
    }

    /// With `n` sockets.
    pub fn with_sockets(mut self, n: u32) -> Self {
        self.sockets = n;
        self
    }

    /// With `n` CPUs per socket.
    pub fn with_cpus_per_socket(mut self, n: u32) -> Self {
        self.cpus_per_socket = n;
        self
    }

    /// With `scaling_available_frequencies` of every CPU these (kHz, any order),
    /// as [`CpuFreq`] holds them: highest first.
    pub fn with_cpufreq_khz(mut self, khz: &[u64]) -> Self {
        let mut available_khz = khz.to_vec();
        available_khz.sort_unstable_by(|a, b| b.cmp(a));
        self.cpufreq = Some(CpuFreq { available_khz });
        self
    }

    /// With counters `bits` wide.
    pub fn with_counter_bits(mut self, bits: u8) -> Self {
        self.counter_bits = bits;
        self
    }

    /// With this energy-status unit.
    pub fn with_esu(mut self, esu: u8) -> Self {
        self.esu = Some(esu);
        self
    }

    /// With counters updated every `interval`.
    pub fn with_update_interval(mut self, interval: Duration) -> Self {
        self.update_interval = interval;
        self
    }

    /// With `fault` injected from the mount (or its `@TIME`).
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.faults.push(fault);
        self
    }

    /// With the psys (platform) domain, read on package 0's CPUs.
    pub fn with_psys(mut self) -> Self {
        self.domains.psys = true;
        self
    }

    /// With the psys domain, read on package `socket`'s CPUs only (the psys master);
    /// every other package's CPUs read it as 0. [`EmulatorConfig::validate`]
    /// refuses a socket that does not exist.
    pub fn with_psys_master(mut self, socket: u32) -> Self {
        self.domains.psys = true;
        self.psys_master = socket;
        self
    }

    /// With the psys domain present but disabled by the BIOS: it reads 0 on every
    /// CPU, always (see [`EmulatorConfig::psys_disabled`]).
    pub fn with_psys_disabled(mut self) -> Self {
        self.domains.psys = true;
        self.psys_disabled = true;
        self
    }

    /// With the power specification applied (see [`PowerProfile::apply`]).
    pub fn with_power(mut self, spec: &str) -> Result<Self> {
        self.power.apply(spec)?;
        Ok(self)
    }

    /// The ESU in effect.
    pub fn esu(&self) -> u8 {
        self.esu.unwrap_or_else(|| units::default_esu(self.vendor))
    }

    /// The value of the unit register (0x606 / 0xC0010299): power units 1/8 W, the
    /// ESU, time units 2^-10 s.
    pub fn unit_register(&self) -> u64 {
        units::unit_register(self.esu())
    }

    /// Number of CPUs.
    pub fn cpus(&self) -> u32 {
        self.sockets.saturating_mul(self.cpus_per_socket)
    }

    /// The socket of CPU `cpu`.
    pub fn socket_of(&self, cpu: u32) -> u32 {
        cpu / self.cpus_per_socket.max(1)
    }

    /// Whether (socket, domain) is emulated. psys exists once, on the psys master.
    pub fn has(&self, socket: u32, domain: Domain) -> bool {
        socket < self.sockets
            && self.domains.has(domain)
            && (domain != Domain::Psys || socket == self.psys_master)
    }

    /// The raw counts a backstep or jump on `fault.domain` moves the counter by
    /// (`None` for other kinds): the amount in whole counts of that domain's unit,
    /// at least one. The default jump is cut to just under half the counter's
    /// range; an explicit amount is not cut (see [`EmulatorConfig::check_fault`]).
    pub(crate) fn step_counts(&self, fault: &Fault) -> Option<u128> {
        let amount = fault.effective_amount()?;
        let unit = units::hardware_unit(self.vendor, self.esu(), fault.domain);
        let counts = units::counts_of(amount.0, unit);
        Some(if fault.amount.is_none() {
            counts.min(self.half_range_counts() - 1)
        } else {
            counts
        })
    }

    /// Half the counter's range in raw counts: a move this large or larger reads
    /// like a wrap the other way.
    fn half_range_counts(&self) -> u128 {
        1u128 << (self.counter_bits.clamp(1, 64) - 1)
    }

    /// Checks that `fault` can happen here: its (socket, domain) is emulated, and a
    /// backstep or jump stays under half the counter's range. The error says why.
    pub fn check_fault(&self, fault: &Fault) -> std::result::Result<(), String> {
        if !self.has(fault.socket, fault.domain) {
            let hint = if fault.domain == Domain::Psys && self.domains.psys {
                format!(
                    " (psys belongs to the psys master, socket {})",
                    self.psys_master
                )
            } else {
                String::new()
            };
            return Err(format!(
                "socket {} has no {} domain in this emulator{hint}",
                fault.socket, fault.domain
            ));
        }
        if fault.amount.is_some() && !fault.kind.takes_amount() {
            return Err(format!(
                "{} takes no amount (only backstep and jump do)",
                fault.kind.name()
            ));
        }
        if fault
            .reads
            .is_some_and(|n| n == 0 || fault.kind != FaultKind::Busy)
        {
            return Err("only busy takes a count of reads, of at least one".to_string());
        }
        if fault.amount.is_some_and(|a| a.0 == 0) {
            return Err("the amount must be above 0 J".to_string());
        }
        if let (Some(counts), Some(amount)) = (self.step_counts(fault), fault.amount) {
            let limit = self.half_range_counts();
            if counts >= limit {
                let unit = units::hardware_unit(self.vendor, self.esu(), fault.domain);
                let limit_j = limit as f64 * unit.num as f64 / unit.den as f64;
                return Err(format!(
                    "{amount} is not under half the {} counter's range ({limit_j} J with \
                     {}-bit counters), so it would read as a wrap: give a smaller amount",
                    fault.domain, self.counter_bits
                ));
            }
        }
        Ok(())
    }

    /// Every emulated (socket, domain), sockets in order.
    pub fn counters(&self) -> Vec<(u32, Domain)> {
        let mut out = Vec::new();
        for s in 0..self.sockets {
            for d in Domain::ALL {
                if self.has(s, d) {
                    out.push((s, d));
                }
            }
        }
        out
    }

    /// The constant (untraced) power of (socket, domain) in watts, if emulated.
    pub fn watts(&self, socket: u32, domain: Domain) -> Option<f64> {
        if !self.has(socket, domain) {
            return None;
        }
        if domain == Domain::Psys {
            let mut sum = self.power.platform;
            for s in 0..self.sockets {
                let w = self.power.socket(s);
                sum += w.package;
                if self.domains.dram {
                    sum += w.dram;
                }
            }
            return Some(sum);
        }
        Some(self.power.socket(socket).get(domain))
    }

    /// The power behind (socket, domain)'s powercap zone: [`EmulatorConfig::watts`],
    /// except AMD `core`, whose zone reads only the package's first core (the
    /// kernel reads the per-core MSR on the lead CPU, RAPL-FACTS §4): the core
    /// power divided by `cpus_per_socket`.
    pub fn zone_watts(&self, socket: u32, domain: Domain) -> Option<f64> {
        let w = self.watts(socket, domain)?;
        if self.vendor.is_amd() && domain == Domain::Core {
            Some(w / f64::from(self.cpus_per_socket.max(1)))
        } else {
            Some(w)
        }
    }

    /// Checks that the configuration describes a machine the emulator can serve.
    pub fn validate(&self) -> Result<()> {
        let bad = |why: String| Err(Error::Config(why));
        if !(1..=64).contains(&self.sockets) {
            return bad(format!("sockets = {} (1 to 64)", self.sockets));
        }
        if !(1..=512).contains(&self.cpus_per_socket) {
            return bad(format!(
                "cpus_per_socket = {} (1 to 512)",
                self.cpus_per_socket
            ));
        }
        if !(8..=32).contains(&self.counter_bits) {
            return bad(format!(
                "counter_bits = {} (8 to 32; real counters are 32)",
                self.counter_bits
            ));
        }
        let esu = self.esu();
        if esu > 24 {
            return bad(format!("esu = {esu} (0 to 24)"));
        }
        if self.update_interval < Duration::from_micros(1)
            || self.update_interval > Duration::from_secs(60)
        {
            return bad(format!(
                "update_interval = {} (1us to 60s)",
                duration::format_duration(self.update_interval)
            ));
        }
        if self.start_offset > Duration::from_secs(10 * 365 * 86_400) {
            return bad("start_offset is over ten years".to_string());
        }
        if self.vendor.is_amd() {
            if self.domains.uncore || self.domains.dram || self.domains.psys {
                return bad(
                    "AMD RAPL has only package and core domains: disable uncore, dram and psys"
                        .to_string(),
                );
            }
            if self.mmio {
                return bad(
                    "intel-rapl-mmio is an Intel thermal driver: no mmio on AMD".to_string()
                );
            }
        }
        for s in 0..self.sockets {
            let w = self.power.socket(s);
            for d in [Domain::Package, Domain::Core, Domain::Uncore, Domain::Dram] {
                let v = w.get(d);
                if !(v.is_finite() && (0.0..=10_000.0).contains(&v)) {
                    return bad(format!("socket {s} {d} power {v} W (0 to 10000)"));
                }
            }
            let inside = if self.domains.core { w.core } else { 0.0 }
                + if self.domains.uncore { w.uncore } else { 0.0 };
            if inside > w.package + 1e-9 {
                return bad(format!(
                    "socket {s}: core + uncore = {inside} W exceeds package {} W (they are inside it)",
                    w.package
                ));
            }
        }
        if let Some(f) = &self.cpufreq {
            f.check().map_err(Error::Config)?;
        }
        if let Some(f) = &self.power.follow {
            f.check().map_err(Error::Config)?;
            if f.per_ghz_w != 0.0 && self.cpufreq.is_none() {
                return bad(format!(
                    "the load-following power has {} W per GHz but no CPU frequencies are \
                     emulated: give them (CLI: --cpufreq GHZ[,GHZ...], e.g. --cpufreq \
                     1.5,2.2,3.0; config: cpufreq)",
                    f.per_ghz_w
                ));
            }
            for s in 0..self.sockets {
                let w = self.power.socket(s);
                let inside = if self.domains.core { w.core } else { 0.0 }
                    + if self.domains.uncore { w.uncore } else { 0.0 };
                if inside > f.idle_w + 1e-9 {
                    return bad(format!(
                        "socket {s}: core + uncore = {inside} W exceeds the load-following \
                         idle power {} W (they are inside the package)",
                        f.idle_w
                    ));
                }
            }
        }
        let p = self.power.platform;
        if !(p.is_finite() && (0.0..=10_000.0).contains(&p)) {
            return bad(format!("platform power {p} W (0 to 10000)"));
        }
        if self.domains.psys && self.psys_master >= self.sockets {
            return bad(format!(
                "psys_master = {}, but there are {} socket(s) (0 to {}): pick an existing \
                 socket as the psys master",
                self.psys_master,
                self.sockets,
                self.sockets - 1
            ));
        }
        if !self.domains.psys && (self.psys_master != 0 || self.psys_disabled) {
            return bad(
                "psys_master or psys_disabled is set but the psys domain is off: enable \
                 domains.psys (CLI: --psys)"
                    .to_string(),
            );
        }
        for f in &self.faults {
            if let Err(why) = self.check_fault(f) {
                return bad(format!("fault {f}: {why}"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
