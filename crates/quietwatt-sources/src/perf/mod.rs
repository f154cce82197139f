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
//! shares a [`DomainId`](quietwatt_core::domain::DomainId).
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
use crate::error::{Error, Result};
use crate::root::SysRoot;
use crate::STAND_IN_LABEL;
use quietwatt_core::counter::Wrap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

const DEVICES: &str = "/sys/bus/event_source/devices";
/// The package-scope RAPL PMU (Intel, AMD, Hygon; also the TPMI driver's).
pub const POWER_PMU: &str = "power";
/// AMD's per-core energy PMU (Linux 6.14+).
pub const POWER_CORE_PMU: &str = "power_core";

// Discovery (which events, in which unit, on which CPUs) and the system calls
// (open, read, and what their errors mean) are apart from the source that holds
// the descriptors.
mod discover;
mod open;
pub(crate) use discover::check_real_kernel_has;
pub use discover::{
    discover, is_joules, parse_event_config, parse_format, parse_scale, rapl_module_hint, EventSpec,
};
pub(crate) use open::open_error;
use open::read_error;
pub use open::{open_counting_event, permission_fix, read_count};

// ---------------------------------------------------------------------------
// The source.

/// Open perf counting events, one per (event, CPU), summed per [`DomainId`](quietwatt_core::domain::DomainId).
#[derive(Debug)]
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
    /// Every event is a software event (a stand-in for RAPL in tests and benchmarks).
    stand_in: bool,
}

/// The index in `channels` of the channel `spec` adds to: the one of its
/// [`DomainId`](quietwatt_core::domain::DomainId), or a new one pushed for it. Events
/// summed into one channel must count in one unit: the reason why not otherwise.
pub(crate) fn summed_channel(
    channels: &mut Vec<Channel>,
    spec: &EventSpec,
) -> std::result::Result<usize, String> {
    match channels.iter().position(|c| c.id == spec.id) {
        Some(i) if channels[i].unit != spec.unit => Err(format!(
            "the events of {} count in different units ({} and {}): they cannot be summed",
            spec.id, channels[i].unit, spec.unit
        )),
        Some(i) => Ok(i),
        None => {
            channels.push(Channel {
                id: spec.id,
                unit: spec.unit,
                wrap: Wrap::PERF,
                origin: spec.origin.clone(),
                limit: None,
            });
            Ok(channels.len() - 1)
        }
    }
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
    /// a [`DomainId`](quietwatt_core::domain::DomainId) are summed into one channel, so they must share a unit.
    pub fn from_specs(specs: Vec<EventSpec>) -> Result<PerfEvents> {
        let software = EventSpec::all_stand_ins(&specs);
        let mut channels: Vec<Channel> = Vec::new();
        let mut members: Vec<usize> = Vec::new();
        let mut fds = Vec::with_capacity(specs.len());
        let mut slots = Vec::with_capacity(specs.len());
        let mut origins = Vec::with_capacity(specs.len());
        let mut cpus = Vec::with_capacity(specs.len());
        for spec in specs {
            let slot = summed_channel(&mut channels, &spec).map_err(|why| {
                Error::MechanismUnavailable {
                    mechanism: Mechanism::Perf.name(),
                    why,
                }
            })?;
            if slot == members.len() {
                members.push(0);
            }
            members[slot] += 1;
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
            stand_in: software,
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

    fn label(&self) -> &'static str {
        if self.stand_in {
            STAND_IN_LABEL
        } else {
            Mechanism::Perf.name()
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Topology;
    use perf_event_open_sys::bindings::{
        PERF_COUNT_SW_CPU_CLOCK, PERF_COUNT_SW_TASK_CLOCK, PERF_TYPE_SOFTWARE,
    };
    use quietwatt_core::domain::{Domain, DomainId};
    use quietwatt_core::units::EnergyUnit;
    use std::io;
    use std::path::Path;
    use std::time::{Duration, Instant};

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

        // Summed into one channel: the 1e-9 scale turns ns into "joules" = seconds.
        let specs = cpus.iter().map(|&cpu| cpu_clock(0, cpu)).collect();
        let mut summed = PerfEvents::from_specs(specs).unwrap();
        assert_eq!(summed.channels().len(), 1);
        assert_eq!(summed.event_count(), cpus.len());
        // Software events are no energy: the source says it stands in.
        assert_eq!(summed.label(), crate::STAND_IN_LABEL);
        assert_eq!(summed.mechanism(), Mechanism::Perf);
        assert_eq!(summed.channels()[0].id.socket, quietwatt_core::Socket(0));
        let (mut a, mut b) = ([0u64; 1], [0u64; 1]);
        let t0 = Instant::now();
        summed.read(&mut a).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        summed.read(&mut b).unwrap();
        let secs = t0.elapsed().as_secs_f64();
        let c = &summed.channels()[0];
        let j = c.unit.to_joules(u128::from(c.wrap.delta(a[0], b[0]))).0;
        let n = cpus.len() as f64;
        assert!(
            j > 0.75 * n * secs && j < 1.25 * n * secs,
            "{n} CPUs summed to {j} s in {secs} s"
        );
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
                );
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
