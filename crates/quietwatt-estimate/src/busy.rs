//! Busy CPU time, as a VM sees it: `/proc/stat`'s per-CPU idle and iowait.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Nanoseconds per USER_HZ tick: `/proc/stat` counts in 1/100 s whatever the
/// kernel's HZ.
pub const NS_PER_TICK: u64 = 10_000_000;

/// The machine's busy CPU time since [`BusyClock::open`]: for each CPU, the
/// wall time less what `/proc/stat` counts as its `idle` and `iowait`. Idle
/// rather than the busy fields, because a tickless kernel measures idle time,
/// while `user` and `system` are sampled at each tick. Each CPU's figure never
/// decreases and never exceeds the wall time; it may run ahead of the truth by
/// one tick (10 ms) at any instant, which does not accumulate.
#[derive(Debug)]
pub struct BusyClock {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    /// Idle + iowait ticks of each CPU at open.
    base: Vec<u64>,
    /// Busy ns of each CPU so far.
    busy: Vec<u64>,
    opened_ns: u64,
}

impl BusyClock {
    /// Reads `path` (`/proc/stat`) once: the starting point. An error where it
    /// cannot be read or holds no per-CPU line.
    pub fn open(path: &Path, now_ns: u64) -> std::io::Result<BusyClock> {
        let file = File::open(path)?;
        let mut c = BusyClock {
            path: path.to_path_buf(),
            file,
            buf: Vec::with_capacity(16 * 1024),
            base: Vec::new(),
            busy: Vec::new(),
            opened_ns: now_ns,
        };
        c.fill()?;
        let mut base = Vec::new();
        for_each_cpu(&c.buf, |cpu, idle| {
            if base.len() <= cpu {
                base.resize(cpu + 1, u64::MAX);
            }
            base[cpu] = idle;
        });
        if base.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} has no per-CPU line (cpu0 ...)", path.display()),
            ));
        }
        c.busy = vec![0; base.len()];
        c.base = base;
        Ok(c)
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The CPUs counted.
    pub fn cpus(&self) -> usize {
        self.base.iter().filter(|b| **b != u64::MAX).count()
    }

    /// The numbers of the CPUs counted.
    pub fn cpu_numbers(&self) -> Vec<usize> {
        (0..self.base.len())
            .filter(|&c| self.base[c] != u64::MAX)
            .collect()
    }

    /// Busy ns of each CPU number since open, as of the last
    /// [`BusyClock::busy_ns`] (0 for a number not counted).
    pub fn per_cpu(&self) -> &[u64] {
        &self.busy
    }

    /// Busy CPU-nanoseconds of all CPUs since open, at `now_ns` (the same clock
    /// as at open). Allocates nothing once the buffer has grown to the file.
    pub fn busy_ns(&mut self, now_ns: u64) -> std::io::Result<u64> {
        self.fill()?;
        let wall = now_ns.saturating_sub(self.opened_ns);
        let (base, busy) = (&self.base, &mut self.busy);
        for_each_cpu(&self.buf, |cpu, idle| {
            let (Some(&b), Some(x)) = (base.get(cpu), busy.get_mut(cpu)) else {
                return; // a CPU brought online since: not counted
            };
            if b == u64::MAX {
                return;
            }
            let idle_ns = idle.saturating_sub(b).saturating_mul(NS_PER_TICK);
            *x = (*x).max(wall.saturating_sub(idle_ns)).min(wall);
        });
        Ok(self.busy.iter().sum())
    }

    fn fill(&mut self) -> std::io::Result<()> {
        self.file.seek(SeekFrom::Start(0))?;
        self.buf.clear();
        self.file.read_to_end(&mut self.buf)?;
        Ok(())
    }
}

/// Calls `f(cpu, idle + iowait ticks)` for each `cpuN` line of `/proc/stat`.
fn for_each_cpu(stat: &[u8], mut f: impl FnMut(usize, u64)) {
    for line in stat.split(|b| *b == b'\n') {
        // "cpuN ...", not the total line "cpu  ...".
        let Some(rest) = line
            .strip_prefix(b"cpu")
            .filter(|r| r.first().is_some_and(u8::is_ascii_digit))
        else {
            continue;
        };
        let mut fields = rest
            .split(|b| *b == b' ')
            .filter(|w| !w.is_empty())
            .map(|w| {
                std::str::from_utf8(w)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
            });
        let Some(Some(cpu)) = fields.next() else {
            continue;
        };
        let v: [Option<u64>; 5] = std::array::from_fn(|_| fields.next().flatten());
        if let (Some(idle), Some(iowait)) = (v[3], v[4]) {
            if let Ok(cpu) = usize::try_from(cpu) {
                f(cpu, idle + iowait);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(idle: &[u64]) -> String {
        let mut s = String::from("cpu  1 2 3 4 5 6 7 0 0 0\n");
        for (i, t) in idle.iter().enumerate() {
            s.push_str(&format!("cpu{i} 1 0 1 {t} 0 0 0 0 0 0\n"));
        }
        s.push_str("intr 1 2 3\nctxt 5\n");
        s
    }

    #[test]
    fn busy_is_wall_less_idle_per_cpu_never_backwards_nor_above_wall() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("stat");
        std::fs::write(&p, stat(&[0, 0])).unwrap();
        let mut c = BusyClock::open(&p, 0).unwrap();
        assert_eq!(c.cpus(), 2);
        // 1 s later: cpu0 idle the whole second, cpu1 half of it.
        std::fs::write(&p, stat(&[100, 50])).unwrap();
        assert_eq!(c.busy_ns(1_000_000_000).unwrap(), 500_000_000);
        // A tick's rounding that would take it back: held.
        std::fs::write(&p, stat(&[100, 101])).unwrap();
        assert_eq!(c.busy_ns(1_005_000_000).unwrap(), 5_000_000 + 500_000_000);
        // Idle that would make busy negative: zero, never above wall.
        std::fs::write(&p, stat(&[0, 0])).unwrap();
        assert_eq!(c.busy_ns(2_000_000_000).unwrap(), 4_000_000_000);
    }

    #[test]
    fn a_file_without_cpus_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("stat");
        std::fs::write(&p, "intr 1\n").unwrap();
        let e = BusyClock::open(&p, 0).unwrap_err();
        assert!(e.to_string().contains("no per-CPU line"), "{e}");
        assert!(BusyClock::open(&dir.path().join("absent"), 0).is_err());
    }
}
