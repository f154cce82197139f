//! The cpuidle residency counters in sysfs, the cross-check of the tracepoint:
//! `sys/devices/system/cpu/cpuN/cpuidle/stateM/{name,usage,time,latency,residency,disable}`.
//!
//! `usage` counts entries into the state and `time` the microseconds spent in it,
//! both kept by cpuidle itself (`cpuidle_enter_state`). They miss the idle periods
//! that bypass cpuidle (`default_idle_call`, when no driver is loaded or the
//! governor is bypassed), which the `power:cpu_idle` tracepoint still reports: the
//! two can disagree for that reason as well as for a blind tracing mechanism.

use super::{Channel, Event, EventsError, Result};
use quietwatt::root::SysRoot;
use std::path::PathBuf;

/// One idle state of one CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuidleState {
    /// The `M` of `stateM`: the index the `power:cpu_idle` tracepoint reports.
    pub index: u32,
    /// `name` (`POLL`, `C1`, `haltpoll idle`).
    pub name: String,
    /// `latency`: exit latency, µs.
    pub latency_us: u64,
    /// `residency`: target residency, µs.
    pub residency_us: u64,
    /// `disable` is non-zero: the governor never picks it.
    pub disabled: bool,
}

/// The idle states of each CPU, and the root they were read under.
#[derive(Debug, Clone, Default)]
pub struct CpuidleStates {
    /// `(cpu, states)` for every CPU that has cpuidle.
    pub cpus: Vec<(u32, Vec<CpuidleState>)>,
    /// The root the files are read under (the system root when an emulator's lacks them).
    pub root: SysRoot,
}

fn state_dir(root: &SysRoot, cpu: u32, index: u32) -> PathBuf {
    root.path(format!(
        "/sys/devices/system/cpu/cpu{cpu}/cpuidle/state{index}"
    ))
}

impl CpuidleStates {
    /// Reads the states of `cpus` under `root`. A root without cpuidle that is not
    /// the system's (an emulator mount) falls back to `/` with a note; a system
    /// without cpuidle at all is a note too (no cross-check then).
    pub fn read(root: &SysRoot, cpus: &[u32], notes: &mut Vec<String>) -> Result<CpuidleStates> {
        let has = |r: &SysRoot| {
            cpus.first()
                .is_some_and(|&c| state_dir(r, c, 0).join("usage").exists())
        };
        let root = if has(root) {
            root.clone()
        } else if !root.is_system() && has(&SysRoot::default()) {
            notes.push(format!(
                "{} has no cpuidle; cpuidle counters are read from this machine's /sys",
                root.dir().display()
            ));
            SysRoot::default()
        } else {
            notes.push(
                "no cpuidle driver (no cpuN/cpuidle in sysfs): idle entries and time come from \
                 power:cpu_idle only (state 0 polling, 1 the kernel's default idle); state names, \
                 cpuidle usage and residency cannot be read, so no sysfs cross-check"
                    .to_string(),
            );
            return Ok(CpuidleStates {
                cpus: Vec::new(),
                root: root.clone(),
            });
        };
        let mut out = Vec::with_capacity(cpus.len());
        for &cpu in cpus {
            let mut states = Vec::new();
            for index in 0u32.. {
                let dir = state_dir(&root, cpu, index);
                if !dir.is_dir() {
                    break;
                }
                let text = |f: &str| {
                    let p = dir.join(f);
                    std::fs::read_to_string(&p)
                        .map(|s| s.trim().to_string())
                        .map_err(|source| EventsError::Io { path: p, source })
                };
                let num = |f: &str| -> Result<u64> {
                    let t = text(f)?;
                    t.parse().map_err(|_| EventsError::Parse {
                        path: dir.join(f),
                        content: t,
                    })
                };
                states.push(CpuidleState {
                    index,
                    name: text("name")?,
                    latency_us: num("latency")?,
                    residency_us: num("residency")?,
                    // Absent on very old kernels: enabled.
                    disabled: num("disable").unwrap_or(0) != 0,
                });
            }
            out.push((cpu, states));
        }
        Ok(CpuidleStates { cpus: out, root })
    }

    /// The states of `cpu` (empty when it has none).
    pub fn of(&self, cpu: u32) -> &[CpuidleState] {
        self.cpus
            .iter()
            .find(|(c, _)| *c == cpu)
            .map_or(&[], |(_, s)| s.as_slice())
    }

    /// Whether `cpu` lists cpuidle states (names, `usage`, `time`).
    pub fn listed(&self, cpu: u32) -> bool {
        !self.of(cpu).is_empty()
    }

    /// The state indices `power:cpu_idle` reports on `cpu`: cpuidle's where it lists
    /// states; without a cpuidle driver the kernel's own idle loop reports 0 when it
    /// polls (`cpu_idle_poll`) and 1 when it halts (`default_idle_call`).
    pub fn traced_indices(&self, cpu: u32) -> Vec<u32> {
        if self.listed(cpu) {
            self.of(cpu).iter().map(|s| s.index).collect()
        } else {
            vec![0, 1]
        }
    }

    /// The name of state `index` on `cpu`, or `stateN` when unknown (on a CPU
    /// without cpuidle: `poll` and `default idle`, the kernel's own idle loop).
    pub fn name(&self, cpu: u32, index: u32) -> String {
        if !self.listed(cpu) {
            match index {
                0 => return "poll (no cpuidle driver)".to_string(),
                1 => return "default idle (no cpuidle driver)".to_string(),
                _ => {}
            }
        }
        self.of(cpu)
            .iter()
            .find(|s| s.index == index)
            .map_or_else(|| format!("state{index}"), |s| s.name.clone())
    }

    /// A `usage` and a `time` counter per state per CPU, files opened once.
    pub fn channels(&self) -> Result<Vec<Channel>> {
        let mut out = Vec::new();
        for (cpu, states) in &self.cpus {
            for s in states {
                let dir = state_dir(&self.root, *cpu, s.index);
                out.push(Channel::sysfs(
                    *cpu,
                    Event::CpuidleUsage(s.index),
                    dir.join("usage"),
                )?);
                out.push(Channel::sysfs(
                    *cpu,
                    Event::CpuidleTimeUs(s.index),
                    dir.join("time"),
                )?);
            }
        }
        Ok(out)
    }

    /// One `# cpuidle:` line per CPU and state for file headers.
    pub fn describe(&self) -> Vec<String> {
        let mut v = Vec::new();
        for (cpu, states) in &self.cpus {
            for s in states {
                v.push(format!(
                    "cpu{cpu} state{} name={:?} latency_us={} residency_us={}{}",
                    s.index,
                    s.name,
                    s.latency_us,
                    s.residency_us,
                    if s.disabled { " disabled" } else { "" }
                ));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(root: &std::path::Path, cpu: u32, states: &[(&str, u64, u64)]) {
        for (i, (name, usage, time)) in states.iter().enumerate() {
            let d = root.join(format!("sys/devices/system/cpu/cpu{cpu}/cpuidle/state{i}"));
            std::fs::create_dir_all(&d).unwrap();
            for (f, v) in [
                ("name", name.to_string()),
                ("usage", usage.to_string()),
                ("time", time.to_string()),
                ("latency", (i * 10).to_string()),
                ("residency", (i * 20).to_string()),
                ("disable", "0".into()),
            ] {
                std::fs::write(d.join(f), format!("{v}\n")).unwrap();
            }
        }
    }

    #[test]
    fn states_are_read_per_cpu_and_their_counters_open() {
        let dir = tempfile::tempdir().unwrap();
        tree(dir.path(), 0, &[("POLL", 5, 7), ("C1", 100, 12345)]);
        tree(dir.path(), 1, &[("POLL", 0, 0), ("C1", 3, 4)]);
        let mut notes = Vec::new();
        let root = SysRoot::new(dir.path());
        let s = CpuidleStates::read(&root, &[0, 1], &mut notes).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(s.of(0).len(), 2);
        assert_eq!(s.name(1, 1), "C1");
        assert_eq!(s.name(1, 7), "state7");
        assert_eq!(s.of(0)[1].latency_us, 10);
        let chans = s.channels().unwrap();
        assert_eq!(chans.len(), 8);
        let mut c = crate::EventCounters::from_channels(chans, s);
        let mut out = vec![0; 8];
        c.read(&mut out).unwrap();
        assert_eq!(out, vec![5, 7, 100, 12345, 0, 0, 3, 4]);
    }
}
