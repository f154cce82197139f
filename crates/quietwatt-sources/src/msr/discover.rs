//! Discovery: which registers exist on which CPUs, in which unit, for this vendor
//! and model.

use crate::cpuinfo::{CpuInfo, Vendor};
use crate::error::{Error, Result};
use crate::quirks;
use crate::root::SysRoot;
use crate::topology::{Cpu, Topology};
use crate::Mechanism;
use quietwatt_core::domain::{Domain, DomainId, Socket};
use quietwatt_core::units::{EnergyUnit, Watts};
use std::fs::File;
use std::path::PathBuf;

use super::registers::{
    device_path, open_device, power_info_watts, probe_register, Reg, INTEL_DOMAINS, MASK,
    MSR_AMD_CORE_ENERGY_STATUS, MSR_AMD_PKG_ENERGY_STATUS, MSR_AMD_RAPL_POWER_UNIT,
    MSR_DRAM_POWER_INFO, MSR_PKG_POWER_INFO, MSR_RAPL_POWER_UNIT,
};

/// One register to read.
#[derive(Debug, Clone, PartialEq)]
pub struct MsrSpec {
    /// The domain and socket it measures.
    pub id: DomainId,
    /// The CPU whose device is read.
    pub cpu: u32,
    /// The register address (the file offset).
    pub register: u64,
    /// Energy of one raw step.
    pub unit: EnergyUnit,
    /// The power the CPU states for the domain (`MSR_PKG_POWER_INFO`, and
    /// `MSR_DRAM_POWER_INFO` for dram; core and uncore take their package's):
    /// what its counter's plausibility bound is derived from. `None`: not stated
    /// (AMD, psys, or registers that read 0 or EIO).
    pub limit: Option<Watts>,
}

/// The die to name in a domain id: only where `cpu`'s package has several.
fn die_label(topo: &Topology, cpu: &Cpu) -> Option<u32> {
    topo.cpus()
        .iter()
        .any(|o| o.package == cpu.package && o.die != cpu.die)
        .then_some(cpu.die)
}

/// Opened devices, indexed by CPU, so each CPU's device is opened once.
struct Devices<'a> {
    root: &'a SysRoot,
    files: Vec<(u32, File)>,
}

impl Devices<'_> {
    fn get(&mut self, cpu: u32) -> Result<usize> {
        if let Some(i) = self.files.iter().position(|(c, _)| *c == cpu) {
            return Ok(i);
        }
        self.files.push((cpu, open_device(self.root, cpu)?));
        Ok(self.files.len() - 1)
    }

    fn file(&self, i: usize) -> &File {
        &self.files[i].1
    }

    fn path(&self, i: usize) -> PathBuf {
        device_path(self.root, self.files[i].0)
    }
}

/// Reads a unit register; EIO there means the CPU has no RAPL at all.
fn unit_register(dev: &mut Devices<'_>, cpu: u32, register: u64) -> Result<u64> {
    let i = dev.get(cpu)?;
    match probe_register(dev.file(i), &dev.path(i), register)? {
        Reg::Value(v) => Ok(v),
        Reg::Absent => Err(Error::MechanismUnavailable {
            mechanism: Mechanism::Msr.name(),
            why: format!(
                "CPU {cpu} has no RAPL unit register {register:#x} (EIO): no RAPL on this CPU, or the hypervisor hides it"
            ),
        }),
    }
}

/// The vendor from cpuinfo, or, where cpuinfo cannot be read, from which unit
/// register answers on `cpu`.
fn vendor_of(
    cpu: Option<&CpuInfo>,
    dev: &mut Devices<'_>,
    first: u32,
    notes: &mut Vec<String>,
) -> Result<Vendor> {
    if let Some(c) = cpu {
        return Ok(c.vendor);
    }
    let i = dev.get(first)?;
    let vendor = if matches!(
        probe_register(dev.file(i), &dev.path(i), MSR_RAPL_POWER_UNIT)?,
        Reg::Value(_)
    ) {
        Vendor::Intel
    } else {
        Vendor::Amd
    };
    notes.push(format!(
        "/proc/cpuinfo is unreadable: vendor taken as {vendor} from the unit register that answers; no model quirk applied"
    ));
    Ok(vendor)
}

/// Everything discovery found, with the devices it opened.
pub(super) struct Found {
    /// Every register found, one per (domain, CPU).
    pub(super) specs: Vec<MsrSpec>,
    /// The devices opened during discovery, by CPU, kept for reading.
    pub(super) files: Vec<(u32, File)>,
    /// What discovery left out or corrected, and why.
    pub(super) notes: Vec<String>,
}

/// Discovers the registers under `root`, keeping the devices it opened.
pub(super) fn find(root: &SysRoot) -> Result<Found> {
    // No CPU list at all: no machine under this root (a wrong --root), not a broken one.
    let topo = Topology::read(root).map_err(|e| match e {
        Error::Io { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
            Error::NoDomains {
                mechanism: Mechanism::Msr.name(),
                root: root.dir().to_path_buf(),
                why: format!("{} does not exist: no CPUs under this root", path.display()),
            }
        }
        e => e,
    })?;
    let mut notes = Vec::new();
    let cpu = match CpuInfo::read(root) {
        Ok(c) => Some(c),
        Err(e) => {
            notes.push(format!("{e}"));
            None
        }
    };
    let first = topo
        .cpus()
        .first()
        .map(|c| c.id)
        .ok_or_else(|| Error::NoDomains {
            mechanism: Mechanism::Msr.name(),
            root: root.dir().to_path_buf(),
            why: "no online CPU".into(),
        })?;
    let mut dev = Devices {
        root,
        files: Vec::new(),
    };
    let vendor = vendor_of(cpu.as_ref(), &mut dev, first, &mut notes)?;
    // Without cpuinfo, quirks cannot be matched: an identity no row matches.
    let ident = cpu.clone().unwrap_or(CpuInfo {
        vendor,
        family: None,
        model: None,
        model_name: String::new(),
        flags: Vec::new(),
    });
    // A model the quirk table cannot vouch for: the unit register is used as is, and
    // the notes (printed once, when the mechanism opens) say so.
    if cpu.is_some() {
        notes.extend(crate::quirks::unknown_model_warning(&ident));
    }

    let mut specs = Vec::new();
    match vendor {
        Vendor::Intel => {
            // The first online CPU of each (package, die).
            let mut leads: Vec<&Cpu> = Vec::new();
            for c in topo.cpus() {
                if !leads
                    .iter()
                    .any(|l| l.package == c.package && l.die == c.die)
                {
                    leads.push(c);
                }
            }
            for lead in leads {
                let unit_reg = unit_register(&mut dev, lead.id, MSR_RAPL_POWER_UNIT)?;
                let i = dev.get(lead.id)?;
                let stated = |register| match probe_register(dev.file(i), &dev.path(i), register) {
                    Ok(Reg::Value(v)) => power_info_watts(v, unit_reg).map(Watts),
                    _ => None,
                };
                let package_w = stated(MSR_PKG_POWER_INFO);
                let dram_w = stated(MSR_DRAM_POWER_INFO).or(package_w);
                for (domain, register) in INTEL_DOMAINS {
                    let id = DomainId {
                        socket: lead.package,
                        die: die_label(&topo, lead),
                        domain,
                    };
                    let (unit, quirk) = quirks::energy_unit(&ident, domain, unit_reg);
                    match probe_register(dev.file(i), &dev.path(i), register)? {
                        Reg::Absent => notes.push(format!(
                            "{id}: register {register:#x} is not implemented on CPU {} (EIO); left out",
                            lead.id
                        )),
                        Reg::Value(v) if v & MASK == 0 => notes.push(format!(
                            "{id}: register {register:#x} reads 0 on CPU {} (the kernel also treats this as no domain); left out",
                            lead.id
                        )),
                        Reg::Value(_) => {
                            if let Some(q) = quirk {
                                notes.push(format!(
                                    "{id}: unit {unit} instead of the register's 2^-{} J ({}: {:?}, {})",
                                    quirks::energy_status_units(unit_reg),
                                    q.model_name,
                                    q.quirk,
                                    q.source
                                ));
                            }
                            specs.push(MsrSpec {
                                id,
                                cpu: lead.id,
                                register,
                                unit,
                                limit: match domain {
                                    Domain::Package | Domain::Core | Domain::Uncore => package_w,
                                    Domain::Dram => dram_w,
                                    _ => None,
                                },
                            });
                        }
                    }
                }
            }
        }
        Vendor::Amd | Vendor::Hygon => {
            for package in topo.packages() {
                let Some(lead) = topo.first_cpu(package) else {
                    continue;
                };
                let unit_reg = unit_register(&mut dev, lead, MSR_AMD_RAPL_POWER_UNIT)?;
                let i = dev.get(lead)?;
                let id = DomainId::new(package.0, Domain::Package);
                let (unit, _) = quirks::energy_unit(&ident, Domain::Package, unit_reg);
                match probe_register(dev.file(i), &dev.path(i), MSR_AMD_PKG_ENERGY_STATUS)? {
                    Reg::Value(v) if v & MASK != 0 => specs.push(MsrSpec {
                        id,
                        cpu: lead,
                        register: MSR_AMD_PKG_ENERGY_STATUS,
                        unit,
                        limit: None,
                    }),
                    _ => notes.push(format!(
                        "{id}: register {MSR_AMD_PKG_ENERGY_STATUS:#x} is not implemented or reads 0 on CPU {lead}; left out"
                    )),
                }
                let (unit, _) = quirks::energy_unit(&ident, Domain::Core, unit_reg);
                specs.extend(amd_cores(root, &topo, package, unit, &mut dev, &mut notes)?);
            }
        }
        Vendor::Other => {
            return Err(Error::MechanismUnavailable {
                mechanism: Mechanism::Msr.name(),
                why: format!(
                    "RAPL registers are known for Intel, AMD and Hygon only; this CPU is {ident}"
                ),
            })
        }
    }
    if specs.is_empty() {
        return Err(Error::NoDomains {
            mechanism: Mechanism::Msr.name(),
            root: root.dir().to_path_buf(),
            why: format!("no energy register is implemented ({})", notes.join("; ")),
        });
    }
    specs.sort_by_key(|s| s.id);
    Ok(Found {
        specs,
        files: dev.files,
        notes,
    })
}

/// AMD's per-core counters of one package: the first online CPU of each core. All
/// or nothing, since a partial sum would pass for the whole package's cores.
fn amd_cores(
    root: &SysRoot,
    topo: &Topology,
    package: Socket,
    unit: EnergyUnit,
    dev: &mut Devices<'_>,
    notes: &mut Vec<String>,
) -> Result<Vec<MsrSpec>> {
    let id = DomainId::new(package.0, Domain::Core);
    let mut cores: Vec<(u32, u32, u32)> = Vec::new(); // (die, core_id, cpu)
    for c in topo.cpus().iter().filter(|c| c.package == package) {
        let rel = format!("/sys/devices/system/cpu/cpu{}/topology/core_id", c.id);
        let Some(core) = root.read_trimmed(&rel).ok().and_then(|s| s.parse().ok()) else {
            notes.push(format!(
                "{id}: {} is unreadable, so SMT siblings cannot be told apart; core left out",
                root.path(&rel).display()
            ));
            return Ok(Vec::new());
        };
        if !cores.iter().any(|&(d, k, _)| d == c.die && k == core) {
            cores.push((c.die, core, c.id));
        }
    }
    let mut specs = Vec::with_capacity(cores.len());
    let mut any_nonzero = false;
    for (_, _, cpu) in cores {
        let i = dev.get(cpu)?;
        match probe_register(dev.file(i), &dev.path(i), MSR_AMD_CORE_ENERGY_STATUS)? {
            Reg::Absent => {
                notes.push(format!(
                    "{id}: register {MSR_AMD_CORE_ENERGY_STATUS:#x} is not implemented on CPU {cpu} (EIO); core left out"
                ));
                return Ok(Vec::new());
            }
            Reg::Value(v) => any_nonzero |= v & MASK != 0,
        }
        specs.push(MsrSpec {
            id,
            cpu,
            register: MSR_AMD_CORE_ENERGY_STATUS,
            unit,
            limit: None,
        });
    }
    if !any_nonzero {
        notes.push(format!(
            "{id}: register {MSR_AMD_CORE_ENERGY_STATUS:#x} reads 0 on every core; left out"
        ));
        return Ok(Vec::new());
    }
    Ok(specs)
}

/// Finds the RAPL registers readable under `root`, with notes on those left out.
pub fn discover(root: &SysRoot) -> Result<(Vec<MsrSpec>, Vec<String>)> {
    let f = find(root)?;
    Ok((f.specs, f.notes))
}
