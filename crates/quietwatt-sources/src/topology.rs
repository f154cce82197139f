//! Online CPUs and the package (and die) of each, read from sysfs under the root.

use crate::error::{Error, Result};
use crate::root::SysRoot;
use quietwatt_core::domain::Socket;

/// One online CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpu {
    /// The logical CPU number (`cpuN`).
    pub id: u32,
    /// Its package, from `topology/physical_package_id`.
    pub package: Socket,
    /// Its die inside the package, from `topology/die_id` (0 where absent).
    pub die: u32,
}

/// The online CPUs of the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    cpus: Vec<Cpu>,
}

impl Topology {
    /// Reads `sys/devices/system/cpu/online` and each CPU's topology under `root`.
    pub fn read(root: &SysRoot) -> Result<Topology> {
        let online_path = root.path("/sys/devices/system/cpu/online");
        let online = root.read_trimmed("/sys/devices/system/cpu/online")?;
        let ids = parse_cpu_list(&online).ok_or_else(|| Error::Parse {
            path: online_path,
            content: online.clone(),
            expected: "a CPU list such as 0-3,8",
        })?;
        let mut cpus = Vec::with_capacity(ids.len());
        for id in ids {
            let topo = format!("/sys/devices/system/cpu/cpu{id}/topology");
            let package = read_u32(root, &format!("{topo}/physical_package_id"))?;
            // die_id exists since 5.2; a missing file means one die per package.
            let die = read_u32(root, &format!("{topo}/die_id")).unwrap_or(0);
            cpus.push(Cpu {
                id,
                package: Socket(package),
                die,
            });
        }
        Ok(Topology { cpus })
    }

    /// Online CPUs in increasing order.
    pub fn cpus(&self) -> &[Cpu] {
        &self.cpus
    }

    /// Packages that have at least one online CPU, in increasing order.
    pub fn packages(&self) -> Vec<Socket> {
        let mut p: Vec<Socket> = self.cpus.iter().map(|c| c.package).collect();
        p.sort();
        p.dedup();
        p
    }

    /// The first online CPU of `package`: where per-package counters are read.
    pub fn first_cpu(&self, package: Socket) -> Option<u32> {
        self.cpus
            .iter()
            .find(|c| c.package == package)
            .map(|c| c.id)
    }
}

fn read_u32(root: &SysRoot, rel: &str) -> Result<u32> {
    let s = root.read_trimmed(rel)?;
    s.parse().map_err(|_| Error::Parse {
        path: root.path(rel),
        content: s,
        expected: "a non-negative integer",
    })
}

/// The highest CPU number a CPU list may name: the kernel's largest `NR_CPUS`
/// (`CONFIG_NR_CPUS_RANGE_END`, 8192 on x86_64 with MAXSMP), with room to spare. A
/// list beyond it is not the kernel's (a broken or hostile file): `0-2049604145` once
/// made quietwatt allocate 8 GB (found by `scripts/fuzz.sh`).
pub const MAX_CPU: u32 = 65_535;

/// Parses the kernel's CPU list syntax (`0-3,8,10-11`); `None` for anything else,
/// or for a CPU above [`MAX_CPU`].
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if a > b || b > MAX_CPU || out.len() + (b - a) as usize > MAX_CPU as usize + 1 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => {
                let c: u32 = part.parse().ok()?;
                if c > MAX_CPU || out.len() > MAX_CPU as usize {
                    return None;
                }
                out.push(c);
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_as_the_kernel_writes_them() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11\n"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("3-1"), None);
        // Not the kernel's: refused, not an 8 GB allocation.
        assert_eq!(parse_cpu_list("000003-2049604145"), None);
        assert_eq!(parse_cpu_list("70000"), None);
        assert_eq!(parse_cpu_list(&"0-65535,".repeat(3)), None);
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("a-b"), None);
    }

    #[test]
    fn reads_two_packages_from_a_sysfs_tree() {
        let dir = tempfile::tempdir().unwrap();
        let cpu = dir.path().join("sys/devices/system/cpu");
        std::fs::create_dir_all(&cpu).unwrap();
        std::fs::write(cpu.join("online"), "0-3\n").unwrap();
        for i in 0..4 {
            let t = cpu.join(format!("cpu{i}/topology"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("physical_package_id"), format!("{}\n", i / 2)).unwrap();
        }
        let topo = Topology::read(&SysRoot::new(dir.path())).unwrap();
        assert_eq!(topo.packages(), vec![Socket(0), Socket(1)]);
        assert_eq!(topo.first_cpu(Socket(1)), Some(2));
        assert_eq!(topo.cpus()[3].die, 0);
    }

    #[test]
    fn the_real_machine_has_at_least_one_package() {
        let topo = Topology::read(&SysRoot::default()).unwrap();
        assert!(!topo.packages().is_empty());
        assert_eq!(topo.first_cpu(topo.packages()[0]), Some(topo.cpus()[0].id));
    }
}
