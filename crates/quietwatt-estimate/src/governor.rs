//! The frequencies the governor allows, and holding the CPUs at each in turn
//! for calibration (cpufreq's `scaling_max_freq`), restored when dropped.

use crate::inputs::cpufreq_dir;
use std::path::{Path, PathBuf};

/// Each CPU's frequency limits as calibration found them, restored on drop.
#[derive(Debug)]
pub struct FreqControl {
    /// Per CPU: its cpufreq directory, and its `scaling_min_freq` and
    /// `scaling_max_freq` at open, kHz.
    cpus: Vec<(PathBuf, u64, u64)>,
    allowed: Vec<u64>,
}

fn read_khz(p: &Path) -> Result<u64, String> {
    let s = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
    s.trim()
        .parse()
        .map_err(|_| format!("{}: {:?} is no frequency in kHz", p.display(), s.trim()))
}

fn write_khz(p: &Path, khz: u64) -> Result<(), String> {
    std::fs::write(p, format!("{khz}\n")).map_err(|e| format!("{}: {e}", p.display()))
}

impl FreqControl {
    /// The limits of each CPU in `cpus` under `sys` (`/sys`), and the
    /// frequencies allowed: `scaling_available_frequencies` where the driver
    /// lists them, else the lowest, middle and highest of `cpuinfo_min_freq`
    /// to `cpuinfo_max_freq` (intel_pstate, amd-pstate). Every CPU's
    /// `scaling_min_freq` is set to the lowest, so each maximum set after
    /// holds. An error, saying why, where the limits cannot be read or
    /// written (no cpufreq driver, not root).
    pub fn open(sys: &Path, cpus: &[usize]) -> Result<FreqControl, String> {
        let first = cpufreq_dir(sys, *cpus.first().ok_or("no CPU")?);
        let mut allowed: Vec<u64> =
            match std::fs::read_to_string(first.join("scaling_available_frequencies")) {
                Ok(s) => s
                    .split_ascii_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect(),
                Err(_) => {
                    let lo = read_khz(&first.join("cpuinfo_min_freq"))?;
                    let hi = read_khz(&first.join("cpuinfo_max_freq"))?;
                    vec![lo, (lo + hi) / 2, hi]
                }
            };
        allowed.retain(|k| *k > 0);
        allowed.sort_unstable_by(|a, b| b.cmp(a));
        allowed.dedup();
        let lowest = *allowed.last().ok_or_else(|| {
            format!(
                "{}: no frequency listed",
                first.join("scaling_available_frequencies").display()
            )
        })?;
        let mut c = FreqControl {
            cpus: Vec::with_capacity(cpus.len()),
            allowed,
        };
        for &cpu in cpus {
            let d = cpufreq_dir(sys, cpu);
            let min = read_khz(&d.join("scaling_min_freq"))?;
            let max = read_khz(&d.join("scaling_max_freq"))?;
            // Kept before the first write, so a failure part-way restores it.
            c.cpus.push((d.clone(), min, max));
            write_khz(&d.join("scaling_min_freq"), lowest)
                .map_err(|e| format!("cannot set the frequency limits ({e}): run as root"))?;
        }
        Ok(c)
    }

    /// At most `most` of the allowed frequencies, spread from the highest to
    /// the lowest, kHz.
    pub fn pick(&self, most: usize) -> Vec<u64> {
        let n = self.allowed.len();
        if most == 0 || n == 0 {
            return Vec::new();
        }
        if most >= n {
            return self.allowed.clone();
        }
        if most == 1 {
            return vec![self.allowed[0]];
        }
        let mut v: Vec<u64> = (0..most)
            .map(|k| self.allowed[k * (n - 1) / (most - 1)])
            .collect();
        v.dedup();
        v
    }

    /// Holds every CPU at or below `khz` (its `scaling_max_freq`).
    pub fn set(&self, khz: u64) -> Result<(), String> {
        for (d, ..) in &self.cpus {
            write_khz(&d.join("scaling_max_freq"), khz)?;
        }
        Ok(())
    }
}

impl Drop for FreqControl {
    /// Puts each CPU's limits back: the maximum first, which the lowest
    /// minimum set at open allows, then the minimum.
    fn drop(&mut self) {
        for (d, min, max) in &self.cpus {
            let _ = write_khz(&d.join("scaling_max_freq"), *max);
            let _ = write_khz(&d.join("scaling_min_freq"), *min);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(dir: &Path, available: Option<&str>) -> PathBuf {
        let sys = dir.join("sys");
        for c in 0..2 {
            let d = cpufreq_dir(&sys, c);
            std::fs::create_dir_all(&d).unwrap();
            if let Some(a) = available {
                std::fs::write(d.join("scaling_available_frequencies"), a).unwrap();
            }
            std::fs::write(d.join("cpuinfo_min_freq"), "1000000\n").unwrap();
            std::fs::write(d.join("cpuinfo_max_freq"), "3000000\n").unwrap();
            std::fs::write(d.join("scaling_min_freq"), "2000000\n").unwrap();
            std::fs::write(d.join("scaling_max_freq"), "2800000\n").unwrap();
        }
        sys
    }

    #[test]
    fn the_listed_frequencies_are_swept_and_the_limits_restored() {
        let dir = tempfile::tempdir().unwrap();
        let sys = tree(dir.path(), Some("3000000 2200000 1800000 1500000 \n"));
        let max = |c| std::fs::read_to_string(cpufreq_dir(&sys, c).join("scaling_max_freq"));
        {
            let f = FreqControl::open(&sys, &[0, 1]).unwrap();
            assert_eq!(f.pick(3), [3_000_000, 2_200_000, 1_500_000]);
            assert_eq!(f.pick(9).len(), 4);
            assert_eq!(f.pick(1), [3_000_000]);
            f.set(1_500_000).unwrap();
            assert_eq!(max(1).unwrap(), "1500000\n");
        }
        assert_eq!(max(0).unwrap(), "2800000\n");
        assert_eq!(max(1).unwrap(), "2800000\n");
        let min = std::fs::read_to_string(cpufreq_dir(&sys, 1).join("scaling_min_freq"));
        assert_eq!(min.unwrap(), "2000000\n");
    }

    #[test]
    fn without_a_list_the_range_is_swept() {
        let dir = tempfile::tempdir().unwrap();
        let sys = tree(dir.path(), None);
        let f = FreqControl::open(&sys, &[0, 1]).unwrap();
        assert_eq!(f.pick(3), [3_000_000, 2_000_000, 1_000_000]);
    }

    #[test]
    fn a_machine_without_cpufreq_says_where_it_looked() {
        let dir = tempfile::tempdir().unwrap();
        let e = FreqControl::open(dir.path(), &[0]).unwrap_err();
        assert!(e.contains("cpu0/cpufreq/cpuinfo_min_freq"), "{e}");
    }
}
