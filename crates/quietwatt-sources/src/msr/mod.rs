//! The MSR mechanism: RAPL registers read with `pread(fd, buf, 8, address)` on
//! `/dev/cpu/N/msr` (the `msr` module, CONFIG_X86_MSR; needs CAP_SYS_RAWIO).
//!
//! **Registers.** Intel: unit 0x606, package 0x611, core (PP0) 0x639, uncore (PP1)
//! 0x641, dram 0x619, psys 0x64D. AMD and Hygon: unit 0xC0010299, package
//! 0xC001029B, and a per-core counter 0xC001029A. The vendor, family and model come
//! from `/proc/cpuinfo` under the root ([`crate::cpuinfo`]).
//!
//! **Where each is read.** Package-scope registers are read on the first online
//! CPU of each package (of each die, on multi-die Intel parts, where the kernel's
//! perf PMU is die-scoped too). AMD's core counter exists once per physical core:
//! it is read on the first online CPU of each core and, as in the perf mechanism,
//! the cores of a socket are presented **summed** as that socket's `core` channel
//! (modulo 2^32, so the sum is itself a 32-bit counter), like Intel's PP0.
//!
//! **Units.** The energy-status-unit field (bits 12:8) of the unit register gives
//! 2^-ESU J, except where [`crate::quirks`] says otherwise: fixed 2^-16 J DRAM on
//! server parts, 1 J psys on Sapphire/Emerald Rapids, inverted units on some Atoms.
//! The quirk table follows perf's (exact 2^-16 J, Broadwell-D included), not
//! powercap's 15.3 µJ.
//!
//! **Stated power.** On Intel, `MSR_PKG_POWER_INFO` (0x614) and
//! `MSR_DRAM_POWER_INFO` (0x61C) state a thermal spec and a maximum power; the
//! larger bounds what the package (and its core and uncore) and dram can
//! plausibly draw (dram takes its package's where it states none), as powercap's
//! constraints do for that mechanism. AMD states none: the domain defaults apply.
//!
//! **Wrap.** Every kernel path masks the energy status to 32 bits; so does this one:
//! [`Wrap::Modulus`]`(2^32)`. At 2^-14 J per step that is 262 kJ, ~22 min at 200 W.
//!
//! **Absent domains.** A register the CPU does not implement reads EIO: the domain
//! is left out with a note. A register that reads 0 is left out too, as the kernel
//! does (powercap's `rapl_check_domain`, perf's `perf_msr_probe`). A *short* read
//! (fewer than 8 bytes, which the real device never returns) is an error: the file
//! is not an MSR device.

use super::{Channel, Mechanism, Selection, Source};
use crate::error::Result;
use crate::root::SysRoot;
use quietwatt_core::counter::Wrap;
use std::fs::File;
use std::path::PathBuf;

// The registers and the device file are apart from discovery (which registers,
// on which CPUs, in which unit) and from the source that reads them each tick.
mod discover;
mod registers;
use discover::find;
pub use discover::{discover, MsrSpec};
use registers::{device_path, origin, pread_register, read_error, MASK};
pub use registers::{
    MSR_AMD_CORE_ENERGY_STATUS, MSR_AMD_PKG_ENERGY_STATUS, MSR_AMD_RAPL_POWER_UNIT,
    MSR_DRAM_ENERGY_STATUS, MSR_DRAM_POWER_INFO, MSR_PKG_ENERGY_STATUS, MSR_PKG_POWER_INFO,
    MSR_PLATFORM_ENERGY_STATUS, MSR_PP0_ENERGY_STATUS, MSR_PP1_ENERGY_STATUS, MSR_RAPL_POWER_UNIT,
};

/// One register read per tick.
#[derive(Debug)]
struct RegRead {
    /// Index into `Msr::files`.
    file: usize,
    register: u64,
    /// The channel it adds to.
    slot: usize,
    origin: PathBuf,
}

/// Open MSR devices and the registers to read on each.
#[derive(Debug)]
pub struct Msr {
    channels: Vec<Channel>,
    files: Vec<File>,
    reads: Vec<RegRead>,
    /// The CPU of each read, when the devices are this machine's (an emulated
    /// `/dev/cpu/N/msr` is a file like any other).
    read_cpus: Vec<u32>,
    notes: Vec<String>,
}

impl Msr {
    /// Discovers the registers under `root` and opens the selected domains.
    pub fn open(root: &SysRoot, selection: &Selection) -> Result<Msr> {
        let found = find(root)?;
        let specs = selection.apply(found.specs, |s| s.id)?;
        let cpus: Vec<u32> = found.files.iter().map(|(c, _)| *c).collect();
        let files: Vec<File> = found.files.into_iter().map(|(_, f)| f).collect();
        let mut channels: Vec<Channel> = Vec::new();
        let mut members: Vec<usize> = Vec::new();
        let mut reads = Vec::with_capacity(specs.len());
        for spec in specs {
            let Some(file) = cpus.iter().position(|&c| c == spec.cpu) else {
                continue; // unreachable: discovery opened every spec's CPU
            };
            let origin = origin(&device_path(root, spec.cpu), spec.register);
            let slot = match channels.iter().position(|c| c.id == spec.id) {
                Some(i) => {
                    members[i] += 1;
                    i
                }
                None => {
                    channels.push(Channel {
                        id: spec.id,
                        unit: spec.unit,
                        wrap: Wrap::Modulus(1 << 32),
                        origin: origin.clone(),
                        limit: spec.limit,
                    });
                    members.push(1);
                    channels.len() - 1
                }
            };
            reads.push(RegRead {
                file,
                register: spec.register,
                slot,
                origin,
            });
        }
        for (ch, &n) in channels.iter_mut().zip(&members) {
            if n > 1 {
                ch.origin = PathBuf::from(format!(
                    "{} (+{} more cores, summed)",
                    ch.origin.display(),
                    n - 1
                ));
            }
        }
        // /dev/cpu/N/msr runs rdmsr on CPU N: an interrupt from any other CPU.
        let read_cpus = if root.is_system() {
            reads.iter().map(|r| cpus[r.file]).collect()
        } else {
            Vec::new()
        };
        Ok(Msr {
            channels,
            files,
            reads,
            read_cpus,
            notes: found.notes,
        })
    }
}

impl Source for Msr {
    fn mechanism(&self) -> Mechanism {
        Mechanism::Msr
    }

    fn channels(&self) -> &[Channel] {
        &self.channels
    }

    fn read(&mut self, out: &mut [u64]) -> Result<()> {
        out.fill(0);
        for r in &self.reads {
            let v = pread_register(&self.files[r.file], r.register)
                .map_err(|e| read_error(&r.origin, e))?;
            if let Some(o) = out.get_mut(r.slot) {
                // Modulo 2^32: a sum of 32-bit counters is a 32-bit counter.
                *o = (*o + (v & MASK)) & MASK;
            }
        }
        Ok(())
    }

    fn notes(&self) -> &[String] {
        &self.notes
    }

    fn read_cpus(&self) -> Vec<u32> {
        self.read_cpus.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::registers::{probe_register, Reg};
    use super::*;
    use crate::error::Error;
    use quietwatt_core::domain::Domain;
    use quietwatt_core::units::EnergyUnit;
    use std::io;
    use std::os::unix::fs::FileExt;
    use std::path::Path;

    /// cpuinfo of one vendor, family and model.
    fn cpuinfo(root: &Path, vendor: &str, family: u32, model: u32) {
        std::fs::create_dir_all(root.join("proc")).unwrap();
        std::fs::write(
            root.join("proc/cpuinfo"),
            format!("processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\nmodel name\t: test\nflags\t\t: fpu msr\n\n"),
        )
        .unwrap();
    }

    /// `n` online CPUs, `per_pkg` per package, SMT pairs sharing a core id.
    fn topology(root: &Path, n: u32, per_pkg: u32) {
        let cpu = root.join("sys/devices/system/cpu");
        std::fs::create_dir_all(&cpu).unwrap();
        std::fs::write(cpu.join("online"), format!("0-{}\n", n - 1)).unwrap();
        for i in 0..n {
            let t = cpu.join(format!("cpu{i}/topology"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("physical_package_id"), format!("{}\n", i / per_pkg)).unwrap();
            std::fs::write(t.join("core_id"), format!("{}\n", (i % per_pkg) / 2)).unwrap();
        }
    }

    /// Writes u64 LE values at register offsets of a sparse plain file.
    fn registers(root: &Path, cpu: u32, regs: &[(u64, u64)]) {
        let d = root.join(format!("dev/cpu/{cpu}"));
        std::fs::create_dir_all(&d).unwrap();
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(d.join("msr"))
            .unwrap();
        for &(reg, v) in regs {
            f.write_all_at(&v.to_le_bytes(), reg).unwrap();
        }
    }

    /// Power units 3, ESU `esu`, time units 10.
    fn unit(esu: u64) -> u64 {
        0xA_0003 | (esu << 8)
    }

    fn intel_package(root: &Path, cpu: u32, pkg: u64, core: u64, dram: u64) {
        registers(
            root,
            cpu,
            &[
                (MSR_RAPL_POWER_UNIT, unit(14)),
                // High bits are not energy: the value is masked to 32 bits.
                (MSR_PKG_ENERGY_STATUS, 0xDEAD_BEEF_0000_0000 | pkg),
                (MSR_DRAM_ENERGY_STATUS, dram),
                (MSR_PP0_ENERGY_STATUS, core),
                // PP1 (uncore) reads 0: no such domain on a server.
                (MSR_PP1_ENERGY_STATUS, 0),
                (MSR_PLATFORM_ENERGY_STATUS, 0),
            ],
        );
    }

    #[test]
    fn skylake_x_two_sockets_from_sparse_register_files() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        cpuinfo(r, "GenuineIntel", 6, 0x55);
        topology(r, 4, 2);
        intel_package(r, 0, 1000, 400, 300);
        intel_package(r, 2, 2000, 800, 600);
        let root = SysRoot::new(r);
        let mut msr = Msr::open(&root, &Selection::all()).unwrap();
        let got: Vec<(String, EnergyUnit)> = msr
            .channels()
            .iter()
            .map(|c| (c.id.to_string(), c.unit))
            .collect();
        assert_eq!(
            got,
            vec![
                ("0/package".into(), EnergyUnit::PowerOfTwo(14)),
                ("0/core".into(), EnergyUnit::PowerOfTwo(14)),
                // The register says 14; Skylake-X DRAM is fixed at 2^-16 J.
                ("0/dram".into(), EnergyUnit::PowerOfTwo(16)),
                ("1/package".into(), EnergyUnit::PowerOfTwo(14)),
                ("1/core".into(), EnergyUnit::PowerOfTwo(14)),
                ("1/dram".into(), EnergyUnit::PowerOfTwo(16)),
            ]
        );
        assert!(msr
            .channels()
            .iter()
            .all(|c| c.wrap == Wrap::Modulus(1 << 32)));
        assert!(msr.channels()[3]
            .origin
            .to_string_lossy()
            .ends_with("dev/cpu/2/msr@0x611"));
        let notes = msr.notes().join("\n");
        assert!(
            notes.contains("0/uncore") && notes.contains("reads 0"),
            "{notes}"
        );
        assert!(notes.contains("SKYLAKE_X"), "{notes}");

        let mut buf = [0u64; 6];
        msr.read(&mut buf).unwrap();
        assert_eq!(buf, [1000, 400, 300, 2000, 800, 600]);
        // Each read is a fresh pread: a new value shows at once.
        registers(r, 2, &[(MSR_PKG_ENERGY_STATUS, 2500)]);
        msr.read(&mut buf).unwrap();
        assert_eq!(buf[3], 2500);

        // Selection applies.
        let dram = Msr::open(&root, &Selection::only(vec![Domain::Dram])).unwrap();
        assert_eq!(dram.channels().len(), 2);
    }

    #[test]
    fn power_info_is_decoded_in_the_unit_registers_power_units() {
        use super::registers::power_info_watts;
        // (Registers at byte offsets 3 apart cannot share a plain file, so the
        // emulator's MSR device tests discovery: crates/quietwatt-cli/tests/cli/edges.rs.)
        // 125 W thermal spec in 1/8 W; no maximum.
        assert_eq!(power_info_watts(1000, unit(14)), Some(125.0));
        // The larger of spec (10 W) and maximum (30 W, bits 46:32); min power
        // (bits 30:16) and the bits above 46 are not power.
        let v = 80 | 0x7FFF << 16 | 240 << 32 | 0xFF << 48;
        assert_eq!(power_info_watts(v, unit(14)), Some(30.0));
        // Power unit 0: whole watts.
        assert_eq!(power_info_watts(35, 0xA0E00), Some(35.0));
        assert_eq!(power_info_watts(0, unit(14)), None);
    }

    #[test]
    fn a_register_past_the_end_of_a_plain_file_is_a_short_read_error_not_absent() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        cpuinfo(r, "GenuineIntel", 6, 0x55);
        topology(r, 2, 2);
        // The file ends after 0x611: reading 0x639 (core, read next) returns 0 bytes.
        registers(
            r,
            0,
            &[(MSR_RAPL_POWER_UNIT, unit(14)), (MSR_PKG_ENERGY_STATUS, 7)],
        );
        let err = Msr::open(&SysRoot::new(r), &Selection::all())
            .err()
            .unwrap();
        let msg = err.to_string();
        assert!(
            matches!(err, Error::Io { .. }) && msg.contains("short read") && msg.contains("0x639"),
            "{msg}"
        );
    }

    #[test]
    fn eio_means_absent_and_other_errors_are_errors() {
        // EIO needs the real device (or the FUSE emulator); the classification is
        // tested here on the error values.
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(dir.path().join("m"))
            .unwrap();
        f.write_all_at(&5u64.to_le_bytes(), 0x10).unwrap();
        assert!(matches!(
            probe_register(&f, dir.path(), 0x10).unwrap(),
            Reg::Value(5)
        ));
        assert!(matches!(
            read_error(Path::new("x"), io::Error::from_raw_os_error(libc::ENXIO)),
            Error::Vanished { .. }
        ));
        assert!(matches!(
            read_error(Path::new("x"), io::Error::from_raw_os_error(libc::EIO)),
            Error::Io { .. }
        ));
    }

    #[test]
    fn missing_device_and_permission_errors_carry_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        cpuinfo(r, "GenuineIntel", 6, 0x55);
        topology(r, 2, 2);
        let err = Msr::open(&SysRoot::new(r), &Selection::all())
            .err()
            .unwrap();
        assert!(
            matches!(&err, Error::MechanismUnavailable { why, .. } if why.contains("sudo modprobe msr")),
            "{err}"
        );
        let e = Error::io(
            &device_path(&SysRoot::new(r), 0),
            io::Error::from_raw_os_error(libc::EPERM),
        );
        assert!(
            e.to_string().contains("CAP_SYS_RAWIO") || e.to_string().contains("cap_sys_rawio"),
            "{e}"
        );
    }

    #[test]
    fn amd_cores_are_read_once_per_core_and_summed_mod_2_pow_32() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        cpuinfo(r, "AuthenticAMD", 0x19, 0x11);
        // 4 CPUs, one package, SMT pairs: cores are CPUs {0,1} and {2,3}.
        topology(r, 4, 4);
        // The AMD registers are adjacent (…99 unit, …9A core, …9B package): the
        // device reads each as a whole, but in a plain file their 8 bytes overlap.
        // These bytes decode consistently: unit = 0x0A1003 (ESU 16), core =
        // 0x0A10, package = 0x0A.
        let d = r.join("dev/cpu/0");
        std::fs::create_dir_all(&d).unwrap();
        let f = File::create(d.join("msr")).unwrap();
        f.write_all_at(
            &[0x03, 0x10, 0x0A, 0, 0, 0, 0, 0, 0, 0],
            MSR_AMD_RAPL_POWER_UNIT,
        )
        .unwrap();
        registers(r, 2, &[(MSR_AMD_CORE_ENERGY_STATUS, 0xFFFF_FFF0)]);
        let root = SysRoot::new(r);
        let (specs, notes) = discover(&root).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        let got: Vec<(String, u32, u64)> = specs
            .iter()
            .map(|s| (s.id.to_string(), s.cpu, s.register))
            .collect();
        assert_eq!(
            got,
            vec![
                ("0/package".into(), 0, MSR_AMD_PKG_ENERGY_STATUS),
                ("0/core".into(), 0, MSR_AMD_CORE_ENERGY_STATUS),
                ("0/core".into(), 2, MSR_AMD_CORE_ENERGY_STATUS),
            ]
        );
        let mut msr = Msr::open(&root, &Selection::all()).unwrap();
        assert_eq!(msr.channels().len(), 2);
        assert_eq!(msr.channels()[1].unit, EnergyUnit::PowerOfTwo(16));
        assert!(msr.channels()[1]
            .origin
            .to_string_lossy()
            .contains("summed"));
        let mut raw = [0u64; 2];
        msr.read(&mut raw).unwrap();
        assert_eq!(raw, [0x0A, (0x0A10 + 0xFFFF_FFF0) & MASK]);

        // Core 1's counter wraps past 2^32: the sum advances by its 0x20 steps,
        // which the channel's own wrap recovers from the two summed readings.
        let before = raw;
        registers(r, 2, &[(MSR_AMD_CORE_ENERGY_STATUS, 0x10)]);
        msr.read(&mut raw).unwrap();
        let wraps: Vec<Wrap> = msr.channels().iter().map(|c| c.wrap).collect();
        let d: Vec<u64> = (0..2).map(|i| wraps[i].delta(before[i], raw[i])).collect();
        assert_eq!(d, [0, 0x20]);
    }

    #[test]
    fn an_atom_with_inverted_units_and_an_unknown_vendor() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        cpuinfo(r, "GenuineIntel", 6, 0x37);
        topology(r, 2, 2);
        registers(
            r,
            0,
            &[
                (MSR_RAPL_POWER_UNIT, unit(5)),
                (MSR_PKG_ENERGY_STATUS, 10),
                (MSR_PP0_ENERGY_STATUS, 5),
                (MSR_PLATFORM_ENERGY_STATUS, 0),
            ],
        );
        let msr = Msr::open(&SysRoot::new(r), &Selection::all()).unwrap();
        assert_eq!(msr.channels()[0].unit, EnergyUnit::Scale(32e-6));
        assert_eq!(msr.channels()[1].unit, EnergyUnit::Scale(32e-6));

        cpuinfo(r, "CentaurHauls", 7, 1);
        let err = Msr::open(&SysRoot::new(r), &Selection::all())
            .err()
            .unwrap();
        assert!(matches!(err, Error::MechanismUnavailable { .. }), "{err}");
    }

    #[test]
    fn a_model_the_quirk_table_does_not_know_uses_the_register_and_warns_once() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        topology(r, 1, 2);
        intel_package(r, 0, 10, 5, 7);
        let warned = |msr: &Msr| {
            msr.notes()
                .iter()
                .filter(|n| n.contains("powercap RAPL model table"))
                .count()
        };
        cpuinfo(r, "GenuineIntel", 6, 0x01);
        let msr = Msr::open(&SysRoot::new(r), &Selection::all()).unwrap();
        assert_eq!(warned(&msr), 1, "{:?}", msr.notes());
        // The register's unit for every domain, DRAM included.
        assert!(msr.channels().iter().any(|c| c.id.domain == Domain::Dram));
        for c in msr.channels() {
            assert_eq!(c.unit, EnergyUnit::PowerOfTwo(14), "{}", c.id);
        }
        // A known model: no warning.
        cpuinfo(r, "GenuineIntel", 6, 0x9E);
        let msr = Msr::open(&SysRoot::new(r), &Selection::all()).unwrap();
        assert_eq!(warned(&msr), 0, "{:?}", msr.notes());
    }

    #[test]
    fn this_machine_has_no_msr_device_or_reads_it() {
        // On this project's VMs there is no /dev/cpu/*/msr; on bare metal as root
        // the mechanism opens. Either way the outcome is typed, never a panic.
        match Msr::open(&SysRoot::default(), &Selection::all()) {
            Ok(m) => assert!(!m.channels().is_empty()),
            Err(e) => assert!(
                matches!(
                    e,
                    Error::MechanismUnavailable { .. }
                        | Error::Permission { .. }
                        | Error::NoDomains { .. }
                ),
                "{e}"
            ),
        }
    }
}
