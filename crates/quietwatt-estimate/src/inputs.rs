//! What a model predicts from, as a VM sees it: the busy CPUs (always), the
//! frequency they ran at (cpufreq, where readable) and the instructions and
//! cycles they retired (the hardware PMU, where it exists). Each is read as a
//! running integral since [`InputClock::open`], so a model linear in the
//! inputs' rates gives energy linear in the integrals.

use crate::busy::BusyClock;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// One input of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Input {
    /// Busy CPUs (`/proc/stat`): W per busy CPU.
    BusyCpus,
    /// Busy CPUs × their frequency, GHz (`scaling_cur_freq`): W per busy CPU
    /// per GHz.
    BusyCpuGhz,
    /// Instructions retired, 10⁹ per second (the PMU): W per G/s, i.e. nJ
    /// per instruction.
    Instructions,
    /// Core cycles, 10⁹ per second (the PMU): nJ per cycle.
    Cycles,
}

/// Every input, in the order of [`InputClock::sample`]'s integrals.
pub const ALL: [Input; 4] = [
    Input::BusyCpus,
    Input::BusyCpuGhz,
    Input::Instructions,
    Input::Cycles,
];

impl Input {
    /// Its name in a model file.
    pub fn name(self) -> &'static str {
        match self {
            Input::BusyCpus => "busy_cpus",
            Input::BusyCpuGhz => "busy_cpu_ghz",
            Input::Instructions => "instructions_gps",
            Input::Cycles => "cycles_gps",
        }
    }

    /// The input a model file names.
    pub fn parse(name: &str) -> Option<Input> {
        ALL.into_iter().find(|i| i.name() == name)
    }

    /// Its place in [`ALL`] and in the integrals.
    pub fn index(self) -> usize {
        self as usize
    }

    /// What one unit of it is, for people.
    pub fn unit(self) -> &'static str {
        match self {
            Input::BusyCpus => "busy CPU",
            Input::BusyCpuGhz => "busy CPU × GHz",
            Input::Instructions => "10⁹ instructions/s",
            Input::Cycles => "10⁹ cycles/s",
        }
    }
}

/// Each CPU's `scaling_cur_freq`, kHz, read at most every
/// [`FREQ_EVERY_NS`]: the governor changes it at its own pace, and a sysfs
/// read per CPU per sample would cost more than the rest of the estimate.
#[derive(Debug)]
pub struct FreqReader {
    /// Per CPU number: its file, if it has one.
    files: Vec<Option<File>>,
    /// Per CPU number: the last frequency read, GHz.
    ghz: Vec<f64>,
    read_ns: u64,
}

/// How often the frequencies are read again, ns.
pub const FREQ_EVERY_NS: u64 = 10_000_000;

/// `sys`'s cpufreq directory of CPU `cpu`.
pub fn cpufreq_dir(sys: &Path, cpu: usize) -> PathBuf {
    sys.join(format!("devices/system/cpu/cpu{cpu}/cpufreq"))
}

impl FreqReader {
    /// Opens `scaling_cur_freq` of each CPU in `cpus` under `sys` (`/sys`).
    /// An error, saying why, where no busy CPU's frequency can be read (no
    /// cpufreq driver: most VMs).
    pub fn open(sys: &Path, cpus: &[usize]) -> Result<FreqReader, String> {
        let n = cpus.iter().max().map_or(0, |m| m + 1);
        let mut files: Vec<Option<File>> = (0..n).map(|_| None).collect();
        let mut missing = Vec::new();
        for &c in cpus {
            let p = cpufreq_dir(sys, c).join("scaling_cur_freq");
            match File::open(&p) {
                Ok(f) => files[c] = Some(f),
                Err(e) => missing.push(format!("{}: {e}", p.display())),
            }
        }
        if !missing.is_empty() {
            return Err(format!(
                "no frequency for every CPU ({}; no cpufreq driver, as on most VMs)",
                missing[0]
            ));
        }
        let mut r = FreqReader {
            files,
            ghz: vec![0.0; n],
            read_ns: 0,
        };
        r.refresh()
            .map_err(|e| format!("scaling_cur_freq unreadable: {e}"))?;
        Ok(r)
    }

    /// Each CPU's frequency, GHz, read again when [`FREQ_EVERY_NS`] have
    /// passed since the last read at `now_ns`.
    pub fn ghz(&mut self, now_ns: u64) -> io::Result<&[f64]> {
        if now_ns.saturating_sub(self.read_ns) >= FREQ_EVERY_NS {
            self.refresh()?;
            self.read_ns = now_ns;
        }
        Ok(&self.ghz)
    }

    fn refresh(&mut self) -> io::Result<()> {
        let mut buf = [0u8; 32];
        for (f, ghz) in self.files.iter().zip(&mut self.ghz) {
            let Some(f) = f else { continue };
            let n = f.read_at(&mut buf, 0)?;
            let khz: f64 = std::str::from_utf8(&buf[..n])
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| {
                    io::Error::new(io::ErrorKind::InvalidData, "scaling_cur_freq is no number")
                })?;
            *ghz = khz * 1e-6;
        }
        Ok(())
    }
}

/// Instructions and cycles of every CPU, counted by the hardware PMU
/// (`perf_event_open`, CPU-wide: root, CAP_PERFMON or
/// `perf_event_paranoid` ≤ 0).
#[derive(Debug)]
pub struct Pmu {
    /// Per CPU: (instructions, cycles).
    events: Vec<(OwnedFd, OwnedFd)>,
    base: [u64; 2],
}

impl Pmu {
    /// Opens both events on each CPU in `cpus`. An error, saying why, where
    /// the PMU cannot count them (none in most VMs, or not permitted).
    pub fn open(cpus: &[usize]) -> Result<Pmu, String> {
        use perf_event_open_sys::bindings::{
            PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS, PERF_TYPE_HARDWARE,
        };
        let open = |config: u32, cpu: usize| {
            quietwatt_sys::perf::open_counting_event(
                PERF_TYPE_HARDWARE,
                u64::from(config),
                u32::try_from(cpu).unwrap_or(u32::MAX),
            )
            .map_err(|e| {
                let why = match e.raw_os_error() {
                    Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV) => {
                        "no hardware PMU counts them here (most VMs have none)".to_string()
                    }
                    Some(libc::EACCES | libc::EPERM) => format!(
                        "not permitted ({e}): counting every CPU needs root, CAP_PERFMON or kernel.perf_event_paranoid ≤ 0"
                    ),
                    _ => e.to_string(),
                };
                format!("instructions and cycles of CPU {cpu}: {why}")
            })
        };
        let mut events = Vec::with_capacity(cpus.len());
        for &c in cpus {
            events.push((
                open(PERF_COUNT_HW_INSTRUCTIONS, c)?,
                open(PERF_COUNT_HW_CPU_CYCLES, c)?,
            ));
        }
        let mut p = Pmu {
            events,
            base: [0; 2],
        };
        p.base = p.counts().map_err(|e| format!("reading the PMU: {e}"))?;
        Ok(p)
    }

    /// Instructions and cycles of all CPUs since open, 10⁹.
    pub fn giga(&self) -> io::Result<[f64; 2]> {
        let now = self.counts()?;
        Ok([
            now[0].wrapping_sub(self.base[0]) as f64 * 1e-9,
            now[1].wrapping_sub(self.base[1]) as f64 * 1e-9,
        ])
    }

    fn counts(&self) -> io::Result<[u64; 2]> {
        let mut sum = [0u64; 2];
        for (i, c) in &self.events {
            sum[0] = sum[0].wrapping_add(quietwatt_sys::perf::read_count(i.as_fd())?);
            sum[1] = sum[1].wrapping_add(quietwatt_sys::perf::read_count(c.as_fd())?);
        }
        Ok(sum)
    }
}

/// The inputs' integrals since open: busy CPU-seconds, busy CPU-GHz-seconds,
/// 10⁹ instructions, 10⁹ cycles ([`ALL`]'s order), of those this machine can
/// read. Sampling allocates nothing.
#[derive(Debug)]
pub struct InputClock {
    busy: BusyClock,
    freq: Option<FreqReader>,
    pmu: Option<Pmu>,
    /// Busy ns per CPU at the last sample, for the frequency's weights.
    last_busy: Vec<u64>,
    totals: [f64; 4],
    /// Why each input this machine cannot read is missing.
    missing: Vec<(Input, String)>,
}

impl InputClock {
    /// Starts at `now_ns`: the busy CPUs from `stat` (`/proc/stat`; an error
    /// where unreadable), and of `want`, the frequency from `sys` (`/sys`) and
    /// the PMU, where they can be read.
    pub fn open(stat: &Path, sys: &Path, want: &[Input], now_ns: u64) -> io::Result<InputClock> {
        let busy = BusyClock::open(stat, now_ns)?;
        let cpus = busy.cpu_numbers();
        let mut missing = Vec::new();
        let freq = if want.contains(&Input::BusyCpuGhz) {
            FreqReader::open(sys, &cpus)
                .map_err(|why| missing.push((Input::BusyCpuGhz, why)))
                .ok()
        } else {
            None
        };
        let pmu = if want.contains(&Input::Instructions) || want.contains(&Input::Cycles) {
            Pmu::open(&cpus)
                .map_err(|why| {
                    missing.push((Input::Instructions, why.clone()));
                    missing.push((Input::Cycles, why));
                })
                .ok()
        } else {
            None
        };
        Ok(InputClock {
            last_busy: vec![0; busy.per_cpu().len()],
            busy,
            freq,
            pmu,
            totals: [0.0; 4],
            missing,
        })
    }

    /// Whether `input` is read.
    pub fn reads(&self, input: Input) -> bool {
        match input {
            Input::BusyCpus => true,
            Input::BusyCpuGhz => self.freq.is_some(),
            Input::Instructions | Input::Cycles => self.pmu.is_some(),
        }
    }

    /// The inputs asked for that cannot be read here, and why.
    pub fn missing(&self) -> &[(Input, String)] {
        &self.missing
    }

    /// The busy CPUs' file.
    pub fn stat_path(&self) -> &Path {
        self.busy.path()
    }

    /// The CPUs counted.
    pub fn cpus(&self) -> usize {
        self.busy.cpus()
    }

    /// Their numbers.
    pub fn cpu_numbers(&self) -> Vec<usize> {
        self.busy.cpu_numbers()
    }

    /// The integrals at `now_ns` (an input not read stays 0). The busy time
    /// added since the last sample is charged at each CPU's frequency now.
    pub fn sample(&mut self, now_ns: u64) -> io::Result<&[f64; 4]> {
        let busy_ns = self.busy.busy_ns(now_ns)?;
        self.totals[0] = busy_ns as f64 * 1e-9;
        if let Some(freq) = &mut self.freq {
            let ghz = freq.ghz(now_ns)?;
            for ((now, last), g) in self.busy.per_cpu().iter().zip(&mut self.last_busy).zip(ghz) {
                self.totals[1] += now.saturating_sub(*last) as f64 * 1e-9 * g;
                *last = *now;
            }
        }
        if let Some(pmu) = &self.pmu {
            let [i, c] = pmu.giga()?;
            self.totals[2] = i;
            self.totals[3] = c;
        }
        Ok(&self.totals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_index_the_integrals() {
        for (k, i) in ALL.into_iter().enumerate() {
            assert_eq!(Input::parse(i.name()), Some(i));
            assert_eq!(i.index(), k);
        }
        assert_eq!(Input::parse("watts"), None);
    }

    fn stat(idle: &[u64]) -> String {
        let mut s = String::from("cpu  1 2 3 4 5 6 7 0 0 0\n");
        for (i, t) in idle.iter().enumerate() {
            s.push_str(&format!("cpu{i} 1 0 1 {t} 0 0 0 0 0 0\n"));
        }
        s
    }

    /// Busy time is charged at each CPU's own frequency; a frequency that
    /// changes is charged from the next sample on.
    #[test]
    fn busy_time_is_weighted_by_each_cpus_frequency() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("stat");
        std::fs::write(&p, stat(&[0, 0])).unwrap();
        let sys = dir.path().join("sys");
        for (c, khz) in [(0, 3_000_000), (1, 1_500_000)] {
            let d = cpufreq_dir(&sys, c);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("scaling_cur_freq"), format!("{khz}\n")).unwrap();
        }
        let mut clock = InputClock::open(&p, &sys, &ALL, 0).unwrap();
        assert!(clock.reads(Input::BusyCpuGhz));
        // No hardware PMU in a test's scratch: either way, said.
        assert_eq!(clock.reads(Input::Instructions), clock.missing().is_empty());
        // 1 s: cpu0 fully busy at 3 GHz, cpu1 half busy at 1.5 GHz.
        std::fs::write(&p, stat(&[0, 50])).unwrap();
        let t = *clock.sample(1_000_000_000).unwrap();
        assert!(
            (t[0] - 1.5).abs() < 1e-9 && (t[1] - 3.75).abs() < 1e-9,
            "{t:?}"
        );
        // cpu0 slows to 1 GHz; another second, both fully busy.
        std::fs::write(cpufreq_dir(&sys, 0).join("scaling_cur_freq"), "1000000\n").unwrap();
        std::fs::write(&p, stat(&[0, 50])).unwrap();
        let t = *clock.sample(2_000_000_000).unwrap();
        assert!((t[0] - 3.5).abs() < 1e-9, "{t:?}");
        assert!((t[1] - (3.75 + 1.0 + 1.5)).abs() < 1e-9, "{t:?}");
    }

    /// Where the kernel lists a core PMU, instructions are counted (CPU-wide:
    /// the tests run as root); where it lists none, the answer says so.
    #[test]
    fn the_pmu_counts_where_the_kernel_lists_one() {
        let listed = ["cpu", "cpu_core", "cpu_atom"]
            .iter()
            .any(|p| Path::new("/sys/bus/event_source/devices").join(p).exists());
        match Pmu::open(&[0]) {
            Ok(p) => {
                assert!(listed, "counted without a core PMU listed");
                let mut x = 0u64;
                for i in 0..10_000_000u64 {
                    x = std::hint::black_box(x.wrapping_add(i));
                }
                let [instructions, cycles] = p.giga().unwrap();
                // CPU 0's count: this loop ran there or elsewhere, so only
                // that both count.
                assert!(
                    instructions > 0.0 && cycles > 0.0,
                    "{instructions} {cycles}"
                );
            }
            Err(why) if !listed => assert!(why.contains("no hardware PMU"), "{why}"),
            // A VM may list a core PMU whose hardware events the hypervisor
            // does not pass through: refused, and said why.
            Err(why) => {
                eprintln!("a core PMU is listed, yet it does not count here: {why}");
                assert!(
                    why.contains("no hardware PMU") || why.contains("not permitted"),
                    "{why}"
                );
            }
        }
    }

    #[test]
    fn a_machine_without_cpufreq_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("stat");
        std::fs::write(&p, stat(&[0])).unwrap();
        let clock = InputClock::open(&p, dir.path(), &[Input::BusyCpuGhz], 0).unwrap();
        assert!(!clock.reads(Input::BusyCpuGhz));
        let (i, why) = &clock.missing()[0];
        assert_eq!(*i, Input::BusyCpuGhz);
        assert!(
            why.contains("scaling_cur_freq") && why.contains("no cpufreq"),
            "{why}"
        );
    }
}
