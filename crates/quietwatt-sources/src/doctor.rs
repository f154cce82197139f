//! Why each mechanism works or not on this machine, and the exact fix.

use crate::cpuinfo::CpuInfo;
use crate::error::Error;
use crate::root::SysRoot;
use crate::{probe_all, Mechanism, Probe, LIVENESS_WINDOW};
use serde::Serialize;

/// The verdict on one mechanism.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// Whether quietwatt can measure through it now.
    pub works: bool,
    /// What was found.
    pub finding: String,
    /// What to do about it, when it does not work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// Whether `/proc/cpuinfo` under `root` says this runs under a hypervisor.
pub fn is_virtual_machine(root: &SysRoot) -> bool {
    CpuInfo::read(root)
        .map(|c| c.is_virtual_machine())
        .unwrap_or(false)
}

/// Examines every mechanism under `root`.
pub fn diagnose(root: &SysRoot) -> Vec<Diagnosis> {
    let vm = is_virtual_machine(root);
    let no_rapl_vm = "this is a virtual machine and its hypervisor does not expose RAPL: \
                      measure on bare metal, or try quietwatt against its built-in emulator";
    probe_all(root)
        .into_iter()
        .map(|p| {
            let moves = p.moves;
            let d = diagnose_one(root, p, vm, no_rapl_vm);
            frozen(d, moves, vm, no_rapl_vm)
        })
        .collect()
}

/// The verdict on one probed mechanism, from what opening and reading it said.
fn diagnose_one(root: &SysRoot, p: Probe, vm: bool, no_rapl_vm: &str) -> Diagnosis {
    let m = p.mechanism;
    match m {
        Mechanism::Powercap => match p.result {
            Ok(ch) => Diagnosis {
                mechanism: m,
                works: true,
                finding: format!(
                    "{} zone(s) readable under {}",
                    ch.len(),
                    root.path("/sys/class/powercap").display()
                ),
                fix: None,
            },
            Err(e) => {
                let fix = match &e {
                            Error::Permission { fix, .. } => fix.clone(),
                            Error::NoDomains { .. } if vm => no_rapl_vm.to_string(),
                            Error::NoDomains { .. } => {
                                "load the driver: `sudo modprobe intel_rapl_msr` (Intel, AMD Zen on 5.11+); check `dmesg | grep -i rapl`".into()
                            }
                            _ => "see the error above".into(),
                        };
                Diagnosis {
                    mechanism: m,
                    works: false,
                    finding: e.to_string(),
                    fix: Some(fix),
                }
            }
        },
        Mechanism::Perf => {
            let pmu = root.path("/sys/bus/event_source/devices/power");
            let has_energy = pmu_lists_energy_events(&pmu);
            let paranoid = root
                .read_trimmed("/proc/sys/kernel/perf_event_paranoid")
                .ok()
                .and_then(|s| s.parse::<i32>().ok())
                .map_or("unknown".into(), |p| p.to_string());
            match p.result {
                    Ok(ch) => Diagnosis {
                        mechanism: m,
                        works: true,
                        finding: format!(
                            "{} counter(s) readable through the power PMU ({}); perf_event_paranoid = {paranoid}",
                            ch.len(),
                            pmu.display()
                        ),
                        fix: None,
                    },
                    Err(e) => {
                        let fix = match &e {
                            Error::Permission { fix, .. } => fix.clone(),
                            Error::MechanismUnavailable { .. } | Error::NoDomains { .. }
                                if !has_energy && vm =>
                            {
                                no_rapl_vm.to_string()
                            }
                            Error::MechanismUnavailable { .. } if has_energy && !root.is_system() => {
                                "perf_event_open always reaches the real kernel, so perf cannot read an emulated PMU: use powercap or msr under an emulated root".into()
                            }
                            Error::MechanismUnavailable { .. } | Error::NoDomains { .. }
                                if !has_energy =>
                            {
                                format!("the kernel lacks CONFIG_PERF_EVENTS_INTEL_RAPL, or its module is not loaded: {}", crate::perf::rapl_module_hint(root))
                            }
                            _ => format!(
                                "see the error above; system-wide counters need `sudo sysctl kernel.perf_event_paranoid=0` (now {paranoid}) or CAP_PERFMON: `sudo setcap cap_perfmon=ep $(which quietwatt)`"
                            ),
                        };
                        Diagnosis {
                            mechanism: m,
                            works: false,
                            finding: format!("{e} (perf_event_paranoid = {paranoid})"),
                            fix: Some(fix),
                        }
                    }
                }
        }
        Mechanism::Ebpf | Mechanism::PerfRing => diagnose_in_kernel(root, p, vm, no_rapl_vm),
        Mechanism::Msr => {
            let dev = root.path("/dev/cpu/0/msr");
            match p.result {
                Ok(ch) => Diagnosis {
                    mechanism: m,
                    works: true,
                    finding: format!(
                        "{} register(s) readable through {}",
                        ch.len(),
                        root.path("/dev/cpu/*/msr").display()
                    ),
                    fix: None,
                },
                Err(e) => {
                    let fix = match &e {
                            Error::Permission { fix, .. } => fix.clone(),
                            _ if !dev.exists() && vm => no_rapl_vm.to_string(),
                            _ if !dev.exists() => {
                                "load the msr driver: `sudo modprobe msr` (kernel option CONFIG_X86_MSR)".into()
                            }
                            Error::MechanismUnavailable { .. } | Error::NoDomains { .. } if vm => {
                                no_rapl_vm.to_string()
                            }
                            _ => "see the error above; reading MSRs needs CAP_SYS_RAWIO: run as root or `sudo setcap cap_sys_rawio=ep $(which quietwatt)`".into(),
                        };
                    Diagnosis {
                        mechanism: m,
                        works: false,
                        finding: e.to_string(),
                        fix: Some(fix),
                    }
                }
            }
        }
        // Never probed (not in `Mechanism::ALL`): the reader service is another
        // process, reached by its socket.
        Mechanism::Socket => Diagnosis {
            mechanism: m,
            works: p.result.is_ok(),
            finding: "read through the reader service's socket".into(),
            fix: None,
        },
        Mechanism::Estimate => Diagnosis {
            mechanism: m,
            works: p.result.is_ok(),
            finding: "a power model's estimate, not a measurement".into(),
            fix: None,
        },
    }
}

/// Opening and reading once says nothing about the numbers: a hypervisor can expose
/// RAPL counters that always read the same value (this project's VM: a `power` PMU
/// whose `energy-psys` reads 0). A working mechanism whose counters did not move
/// (`moves`, from the probe) is no mechanism.
fn frozen(d: Diagnosis, moves: Option<bool>, vm: bool, no_rapl_vm: &str) -> Diagnosis {
    if !d.works || moves != Some(false) {
        return d;
    }
    let machinery = if matches!(d.mechanism, Mechanism::Ebpf | Mechanism::PerfRing) {
        "; the in-kernel machinery itself works on this kernel (it loaded, attached and read those events)"
    } else {
        ""
    };
    Diagnosis {
        works: false,
        finding: format!(
            "{}; but none of these counters changed in {} ms: they are not backed by RAPL hardware (every figure would be 0 J){machinery}",
            d.finding,
            LIVENESS_WINDOW.as_millis(),
        ),
        fix: Some(if vm {
            no_rapl_vm.to_string()
        } else {
            "check that the machine has RAPL (`dmesg | grep -i rapl`): these counters measure nothing; quietwatt's built-in emulator can stand in for them".to_string()
        }),
        ..d
    }
}

/// Whether the power PMU at `pmu` lists an `energy-*` event. Some hypervisors'
/// kernels register the PMU with an empty `events/` directory (seen on this
/// project's VM, Linux 6.18): that is no RAPL, like a missing PMU.
fn pmu_lists_energy_events(pmu: &std::path::Path) -> bool {
    std::fs::read_dir(pmu.join("events")).is_ok_and(|dir| {
        dir.flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("energy-"))
    })
}

const MACHINERY_WORKS: &str = "; the in-kernel machinery itself works on this kernel \
    (checked on software counters standing in for the energy events)";

/// The in-kernel mechanisms: the RAPL events sampled by a BPF program or a perf
/// sampling group, and, where the machine has no RAPL, whether the machinery itself
/// works here (checked on software counters).
fn diagnose_in_kernel(root: &SysRoot, p: Probe, vm: bool, no_rapl_vm: &str) -> Diagnosis {
    let m = p.mechanism;
    let pmu = root.path("/sys/bus/event_source/devices/power");
    let has_energy = pmu_lists_energy_events(&pmu);
    let how = match m {
        Mechanism::Ebpf => "a BPF program on a cpu-clock event reads them into a BPF ring buffer",
        _ => "they are members of a cpu-clock sampling group whose overflows fill an mmap ring",
    };
    let e = match p.result {
        Ok(ch) => {
            return Diagnosis {
                mechanism: m,
                works: true,
                finding: format!(
                    "{} counter(s) of the power PMU ({}) sampled in the kernel: {how}; user space drains them once a second by default{}",
                    ch.len(),
                    pmu.display(),
                    p.notes.iter().map(|n| format!("; note: {n}")).collect::<String>()
                ),
                fix: None,
            }
        }
        Err(e) => e,
    };
    // Without RAPL, say whether the rest would work: the same code on software events.
    let machinery = || match crate::inkernel::check_machinery(m) {
        Ok(()) => MACHINERY_WORKS.to_string(),
        Err(e) => format!("; the in-kernel machinery fails here too: {e}"),
    };
    let refused_group =
        matches!(&e, Error::MechanismUnavailable { why, .. } if why.contains("falls back"));
    let (finding, fix) = match &e {
        Error::Permission { fix, .. } => (e.to_string(), fix.clone()),
        _ if refused_group => (
            e.to_string(),
            "nothing to do: the perf-ring mechanism polls the same events through perf instead and says so; \
             the in-kernel form needs a kernel that accepts a RAPL event in a cpu-clock (software) group, \
             which mainline does (docs/in-kernel-sampling.md); the ebpf mechanism samples in the kernel without a group"
                .into(),
        ),
        _ if !has_energy && vm => (format!("{e}{}", machinery()), no_rapl_vm.to_string()),
        _ if !has_energy => (
            format!("{e}{}", machinery()),
            format!("the kernel lacks CONFIG_PERF_EVENTS_INTEL_RAPL, or its module is not loaded: {}", crate::perf::rapl_module_hint(root)),
        ),
        Error::MechanismUnavailable { .. } if !root.is_system() => (
            e.to_string(),
            "perf_event_open always reaches the real kernel, so the in-kernel mechanisms cannot read an emulated PMU".into(),
        ),
        _ if m == Mechanism::Ebpf => (
            e.to_string(),
            "the BPF sampler needs CONFIG_BPF_SYSCALL, BPF ring buffers (Linux 5.8+) and bounded loops (5.3+); \
             libbpf's message is in the finding; the perf-ring and perf mechanisms read the same events"
                .into(),
        ),
        _ => (e.to_string(), "see the error above; the perf mechanism reads the same events by polling".into()),
    };
    Diagnosis {
        mechanism: m,
        works: false,
        finding,
        fix: Some(fix),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_power_pmu_without_energy_events_is_no_rapl() {
        let dir = tempfile::tempdir().unwrap();
        let pmu = dir.path().join("power");
        assert!(!pmu_lists_energy_events(&pmu), "no PMU");
        std::fs::create_dir_all(pmu.join("events")).unwrap();
        assert!(!pmu_lists_energy_events(&pmu), "empty events/ (a VM's PMU)");
        std::fs::write(pmu.join("events/energy-pkg"), "event=0x02\n").unwrap();
        assert!(pmu_lists_energy_events(&pmu));
    }
}
