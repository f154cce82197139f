//! The powercap mechanism: `/sys/class/powercap/<zone>/energy_uj`.
//!
//! Zones are found by walking `class/powercap` and reading each zone's `name`: the
//! directory ids are hexadecimal and follow registration order, so neither the id
//! nor the order says which package a zone belongs to. Each `energy_uj` stays open
//! and is re-read with one `pread` into a stack buffer per tick. The kernel does not
//! correct wraps: the value falls back to 0 after `max_energy_range_uj`, so the
//! counter's modulus is `max_energy_range_uj + 1` µJ (the kernel's true step is one
//! raw RAPL unit, ~15-61 µJ, so each wrap may be off by that much: under 1e-9 of the
//! range).
//!
//! `intel-rapl-mmio` zones (the int340x thermal driver) read the same package-0
//! registers through MMIO: they are listed as duplicates and never added.

use super::{Channel, Mechanism, Selection, Source};
use crate::error::{Error, Result};
use crate::root::{read_trimmed, SysRoot};
use quietwatt_core::counter::Wrap;
use quietwatt_core::domain::{Domain, DomainId, Socket};
use quietwatt_core::units::{EnergyUnit, Watts};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

const CLASS_DIR: &str = "/sys/class/powercap";
const MMIO_CONTROL_TYPE: &str = "intel-rapl-mmio";

/// A powercap zone that holds an energy counter.
#[derive(Debug, Clone, PartialEq)]
pub struct Zone {
    /// The directory name in `class/powercap`, e.g. `intel-rapl:0:1`.
    pub entry: String,
    /// The zone's `name` file, e.g. `package-0`, `dram`.
    pub name: String,
    /// What it measures.
    pub id: DomainId,
    /// `max_energy_range_uj`.
    pub max_energy_range_uj: u64,
    /// The zone directory.
    pub dir: PathBuf,
    /// The largest power its constraints state (`constraint_*_power_limit_uw` and
    /// `constraint_*_max_power_uw`), if it has any.
    pub limit: Option<Watts>,
}

impl Zone {
    /// The counter's wrap: `max_energy_range_uj + 1` µJ.
    pub fn wrap(&self) -> Wrap {
        Wrap::Modulus(self.max_energy_range_uj.saturating_add(1))
    }
}

/// Finds the RAPL zones under `root`: the counters to read, and notes on zones left out.
pub fn discover(root: &SysRoot) -> Result<(Vec<Zone>, Vec<String>)> {
    let class = root.path(CLASS_DIR);
    let entries = std::fs::read_dir(&class).map_err(|e| {
        if e.kind() == io::ErrorKind::NotFound {
            Error::NoDomains {
                mechanism: "powercap",
                root: root.dir().to_path_buf(),
                why: format!(
                    "{} does not exist (no RAPL hardware, e.g. a VM, or the intel_rapl_msr / intel_rapl_common module is not loaded: `sudo modprobe intel_rapl_msr`)",
                    class.display()
                ),
            }
        } else {
            Error::io(&class, e)
        }
    })?;

    // (entry, name) of every zone with a name, whatever its control type.
    let mut named: Vec<(String, String, PathBuf)> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&class, e))?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        // Control-type directories (`intel-rapl`) have no ':'; zones do.
        if !file_name.contains(':') {
            continue;
        }
        let dir = entry.path();
        match read_trimmed(&dir.join("name")) {
            Ok(name) => named.push((file_name, name, dir)),
            // A zone vanishing while we walk is a race, not an error.
            Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }

    let mut zones = Vec::new();
    let mut notes = Vec::new();
    for (entry, name, dir) in &named {
        let control_type = entry.split(':').next().unwrap_or_default();
        if control_type == MMIO_CONTROL_TYPE {
            notes.push(format!(
                "{entry} ({name}) is the MMIO view of package 0's counters: a duplicate, never added"
            ));
            continue;
        }
        let Some(id) = zone_domain(entry, name, &named) else {
            notes.push(format!(
                "{entry}: zone name '{name}' is not a RAPL domain quietwatt knows; left out"
            ));
            continue;
        };
        if !dir.join("energy_uj").exists() {
            notes.push(format!("{entry} ({name}) has no energy_uj; left out"));
            continue;
        }
        let range_path = dir.join("max_energy_range_uj");
        let range_text = read_trimmed(&range_path)?;
        let max_energy_range_uj =
            range_text
                .parse::<u64>()
                .ok()
                .filter(|&m| m > 0)
                .ok_or(Error::Parse {
                    path: range_path,
                    content: range_text,
                    expected: "a positive integer number of microjoules",
                })?;
        zones.push(Zone {
            entry: entry.clone(),
            name: name.clone(),
            id,
            max_energy_range_uj,
            dir: dir.clone(),
            limit: stated_limit(dir),
        });
    }
    // AMD's core energy register is per core, and powercap reads it on the package's
    // lead CPU only: its `core` zone is ONE core's energy, not the package's cores.
    let amd = crate::cpuinfo::CpuInfo::read(root).is_ok_and(|c| c.vendor.is_amd_like());
    if amd && zones.iter().any(|z| z.id.domain == Domain::Core) {
        notes.push(
            "AMD: powercap's core zone counts only the lead CPU's core (the kernel reads the per-core \
             register on one CPU); for all cores read them through the msr or perf mechanism"
                .into(),
        );
    }
    if zones.is_empty() {
        return Err(Error::NoDomains {
            mechanism: "powercap",
            root: root.dir().to_path_buf(),
            why: format!("{} holds no intel-rapl zone", class.display()),
        });
    }
    zones.sort_by_key(|z| z.id);
    inherit_limits(&mut zones);
    Ok((zones, notes))
}

/// A zone that states no limit of its own takes its package's (same socket and
/// die): core and uncore are parts of the package and cannot draw more than it.
/// DRAM is not part of the package, but on every part RAPL reports it draws well
/// under it (tens of watts against hundreds), so the package's limit bounds it too,
/// which is far tighter than a fixed default (a 37.5 W laptop package left a 3 J jump
/// of its core and an 8 J jump of its DRAM counted as energy). psys covers the whole
/// platform, more than a package, and keeps its default.
fn inherit_limits(zones: &mut [Zone]) {
    let packages: Vec<(DomainId, Watts)> = zones
        .iter()
        .filter(|z| z.id.domain == Domain::Package)
        .filter_map(|z| Some((z.id, z.limit?)))
        .collect();
    for z in zones.iter_mut().filter(|z| z.limit.is_none()) {
        if matches!(z.id.domain, Domain::Core | Domain::Uncore | Domain::Dram) {
            z.limit = packages
                .iter()
                .find(|(p, _)| p.socket == z.id.socket && p.die == z.id.die)
                .map(|(_, w)| *w);
        }
    }
}

/// The largest power a zone's constraints state: what the platform says the domain
/// may draw (`intel_rapl_common.c` exposes PL1, PL2 and PL4 as constraints 0..2 and
/// the long-term maximum as `constraint_0_max_power_uw`). Unreadable or absent files
/// are ignored: the bound then falls back to the domain's default.
fn stated_limit(dir: &Path) -> Option<Watts> {
    let mut best: Option<u64> = None;
    for i in 0..4 {
        for what in ["power_limit_uw", "max_power_uw"] {
            let path = dir.join(format!("constraint_{i}_{what}"));
            if let Some(uw) = read_trimmed(&path).ok().and_then(|t| t.parse::<u64>().ok()) {
                if uw > 0 {
                    best = Some(best.map_or(uw, |b| b.max(uw)));
                }
            }
        }
    }
    best.map(|uw| Watts(uw as f64 / 1e6))
}

/// What a zone measures, from its name (and its parent's, for subzones).
fn zone_domain(entry: &str, name: &str, all: &[(String, String, PathBuf)]) -> Option<DomainId> {
    if let Some(rest) = name.strip_prefix("package-") {
        let (socket, die) = match rest.split_once("-die-") {
            Some((s, d)) => (s.parse().ok()?, Some(d.parse().ok()?)),
            None => (rest.parse().ok()?, None),
        };
        return Some(DomainId {
            socket: Socket(socket),
            die,
            domain: Domain::Package,
        });
    }
    if name == "psys" {
        return Some(DomainId::new(0, Domain::Psys));
    }
    if let Some(n) = name.strip_prefix("psys-") {
        return Some(DomainId::new(n.parse().ok()?, Domain::Psys));
    }
    let domain = match name {
        "core" => Domain::Core,
        "uncore" => Domain::Uncore,
        "dram" => Domain::Dram,
        _ => return None,
    };
    // A subzone `intel-rapl:X:Y` belongs to the package of zone `intel-rapl:X`.
    let (parent_entry, _) = entry.rsplit_once(':')?;
    let (_, parent_name, _) = all.iter().find(|(e, _, _)| e == parent_entry)?;
    let parent = zone_domain(parent_entry, parent_name, all)?;
    (parent.domain == Domain::Package).then_some(DomainId { domain, ..parent })
}

/// Open `energy_uj` files of the selected zones.
#[derive(Debug)]
pub struct Powercap {
    channels: Vec<Channel>,
    files: Vec<File>,
    notes: Vec<String>,
}

impl Powercap {
    /// Discovers the zones under `root` and opens the selected ones.
    pub fn open(root: &SysRoot, selection: &Selection) -> Result<Powercap> {
        let (zones, notes) = discover(root)?;
        let zones = selection.apply(zones, |z| z.id)?;
        let mut channels = Vec::with_capacity(zones.len());
        let mut files = Vec::with_capacity(zones.len());
        for z in zones {
            let path = z.dir.join("energy_uj");
            files.push(File::open(&path).map_err(|e| Error::io(&path, e))?);
            channels.push(Channel {
                id: z.id,
                unit: EnergyUnit::Microjoule,
                wrap: z.wrap(),
                origin: path,
                limit: z.limit,
            });
        }
        Ok(Powercap {
            channels,
            files,
            notes,
        })
    }

    /// Zones found but left out, and why.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
}

impl Source for Powercap {
    fn mechanism(&self) -> Mechanism {
        Mechanism::Powercap
    }

    fn channels(&self) -> &[Channel] {
        &self.channels
    }

    fn read(&mut self, out: &mut [u64]) -> Result<()> {
        for ((file, ch), slot) in self.files.iter().zip(&self.channels).zip(out.iter_mut()) {
            *slot = read_counter(file, &ch.origin)?;
        }
        Ok(())
    }

    fn notes(&self) -> &[String] {
        &self.notes
    }
}

/// One pread of a decimal counter file into a stack buffer.
///
/// rustix's raw system call rather than libc's `pread`: in a process with more than
/// one thread (the sampler beside the writer) glibc makes `pread` a cancellation
/// point and brackets it with two calls that switch asynchronous cancellation on
/// and off, about 0.3 % of the sampler's CPU at 1 kHz in `perf record` (BENCHMARKS.md,
/// issue 24); nothing here is ever cancelled.
#[inline]
fn read_counter(file: &File, path: &Path) -> Result<u64> {
    let mut buf = [0u8; 32];
    let n = rustix::io::pread(file, &mut buf[..], 0)
        .map_err(|e| read_error(path, io::Error::from(e)))?;
    parse_decimal(&buf[..n]).ok_or_else(|| Error::Parse {
        path: path.to_path_buf(),
        content: String::from_utf8_lossy(&buf[..n]).trim().to_string(),
        expected: "a decimal number of microjoules",
    })
}

fn read_error(path: &Path, e: io::Error) -> Error {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::ENODEV | libc::ENXIO) => Error::Vanished {
            path: path.to_path_buf(),
            source: e,
        },
        _ => Error::io(path, e),
    }
}

/// Parses `digits` followed by optional whitespace; anything else is garbage.
fn parse_decimal(bytes: &[u8]) -> Option<u64> {
    let end = bytes
        .iter()
        .position(u8::is_ascii_whitespace)
        .unwrap_or(bytes.len());
    let (digits, rest) = bytes.split_at(end);
    if digits.is_empty() || !rest.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &b| {
        b.is_ascii_digit()
            .then(|| acc.checked_mul(10)?.checked_add((b - b'0') as u64))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_text_parses_strictly() {
        assert_eq!(parse_decimal(b"123456\n"), Some(123456));
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b""), None);
        assert_eq!(parse_decimal(b"\n"), None);
        assert_eq!(parse_decimal(b"12a\n"), None);
        assert_eq!(parse_decimal(b"-5\n"), None);
        assert_eq!(parse_decimal(b"12 34\n"), None);
        assert_eq!(parse_decimal(b"99999999999999999999999\n"), None);
    }

    fn zone(dir: &Path, rel: &str, name: &str, energy: &str) {
        let d = dir.join(rel);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("name"), format!("{name}\n")).unwrap();
        std::fs::write(d.join("energy_uj"), energy).unwrap();
        std::fs::write(d.join("max_energy_range_uj"), "262143328850\n").unwrap();
    }

    #[test]
    fn zones_are_identified_by_name_not_by_id_or_order() {
        let dir = tempfile::tempdir().unwrap();
        let class = dir.path().join("sys/class/powercap");
        std::fs::create_dir_all(class.join("intel-rapl")).unwrap();
        // Package 1 registered first, so it got id 0; ids beyond 9 are hex.
        zone(&class, "intel-rapl:0", "package-1", "10\n");
        zone(&class, "intel-rapl:0:0", "dram", "11\n");
        zone(&class, "intel-rapl:a", "package-0", "12\n");
        zone(&class, "intel-rapl:a:0", "core", "13\n");
        zone(&class, "intel-rapl:a:1", "dram", "14\n");
        zone(&class, "intel-rapl:b", "psys", "15\n");
        zone(&class, "intel-rapl-mmio:0", "package-0", "16\n");
        let root = SysRoot::new(dir.path());
        let (zones, notes) = discover(&root).unwrap();
        let got: Vec<(String, String)> = zones
            .iter()
            .map(|z| (z.entry.clone(), z.id.to_string()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("intel-rapl:a".to_string(), "0/package".to_string()),
                ("intel-rapl:a:0".to_string(), "0/core".to_string()),
                ("intel-rapl:a:1".to_string(), "0/dram".to_string()),
                ("intel-rapl:b".to_string(), "0/psys".to_string()),
                ("intel-rapl:0".to_string(), "1/package".to_string()),
                ("intel-rapl:0:0".to_string(), "1/dram".to_string()),
            ]
        );
        assert!(notes
            .iter()
            .any(|n| n.contains("intel-rapl-mmio:0") && n.contains("duplicate")));

        let mut pc = Powercap::open(&root, &Selection::only(vec![Domain::Dram])).unwrap();
        let mut buf = [0u64; 2];
        pc.read(&mut buf).unwrap();
        assert_eq!(buf, [14, 11]);
        assert_eq!(pc.channels()[0].wrap, Wrap::Modulus(262143328851));
    }

    #[test]
    fn core_uncore_and_dram_without_a_limit_take_their_packages() {
        let dir = tempfile::tempdir().unwrap();
        let class = dir.path().join("sys/class/powercap");
        zone(&class, "intel-rapl:0", "package-0", "1\n");
        std::fs::write(
            class.join("intel-rapl:0/constraint_0_power_limit_uw"),
            "37500000\n",
        )
        .unwrap();
        zone(&class, "intel-rapl:0:0", "core", "1\n");
        zone(&class, "intel-rapl:0:1", "uncore", "1\n");
        zone(&class, "intel-rapl:0:2", "dram", "1\n");
        std::fs::write(
            class.join("intel-rapl:0:2/constraint_0_max_power_uw"),
            "10000000\n",
        )
        .unwrap();
        zone(&class, "intel-rapl:1", "psys", "1\n");
        zone(&class, "intel-rapl:2", "package-1", "1\n");
        zone(&class, "intel-rapl:2:0", "core", "1\n");
        let (zones, _) = discover(&SysRoot::new(dir.path())).unwrap();
        let limit = |id: &str| zones.iter().find(|z| z.id.to_string() == id).unwrap().limit;
        assert_eq!(limit("0/package"), Some(Watts(37.5)));
        assert_eq!(limit("0/core"), Some(Watts(37.5)));
        assert_eq!(limit("0/uncore"), Some(Watts(37.5)));
        // A zone's own limit wins; psys and a package that states none keep defaults.
        assert_eq!(limit("0/dram"), Some(Watts(10.0)));
        assert_eq!(limit("0/psys"), None);
        assert_eq!(limit("1/core"), None);
    }

    #[test]
    fn die_zones_and_numbered_psys_keep_their_socket() {
        let dir = tempfile::tempdir().unwrap();
        let class = dir.path().join("sys/class/powercap");
        zone(&class, "intel-rapl:0", "package-0-die-1", "1\n");
        zone(&class, "intel-rapl:1", "psys-1", "1\n");
        let (zones, _) = discover(&SysRoot::new(dir.path())).unwrap();
        assert_eq!(
            zones[0].id,
            DomainId {
                socket: Socket(0),
                die: Some(1),
                domain: Domain::Package
            }
        );
        assert_eq!(zones[1].id, DomainId::new(1, Domain::Psys));
    }

    #[test]
    fn garbage_in_a_counter_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let class = dir.path().join("sys/class/powercap");
        zone(&class, "intel-rapl:0", "package-0", "nan\n");
        let mut pc = Powercap::open(&SysRoot::new(dir.path()), &Selection::all()).unwrap();
        let err = pc.read(&mut [0u64; 1]).unwrap_err().to_string();
        assert!(
            err.contains("intel-rapl:0/energy_uj") && err.contains("nan"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_tree_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let err = discover(&SysRoot::new(dir.path())).unwrap_err().to_string();
        assert!(
            err.contains("does not exist") && err.contains("modprobe"),
            "{err}"
        );
    }
}
