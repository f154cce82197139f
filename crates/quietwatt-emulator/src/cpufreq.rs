//! Emulated CPU frequencies: `sys/devices/system/cpu/cpuN/cpufreq/` as the
//! acpi-cpufreq driver shows it under the performance governor.
//!
//! With [`CpuFreq`] in [`crate::EmulatorConfig::cpufreq`] (CLI: `--cpufreq
//! 1.5,2.2,3.0`), every emulated CPU serves, in kHz, newline-terminated:
//! `scaling_available_frequencies` (descending, each value followed by a space
//! as the kernel prints it: `3000000 2200000 1500000 \n`), `cpuinfo_min_freq`,
//! `cpuinfo_max_freq`, `scaling_driver` (`acpi-cpufreq`) and `scaling_governor`
//! (`performance`), read-only; `scaling_min_freq` and `scaling_max_freq`, which
//! root may write; and `scaling_cur_freq`, the frequency the CPU runs at.
//!
//! A written limit is clamped to `[cpuinfo_min_freq, cpuinfo_max_freq]` as the
//! kernel does; text that is not a decimal number of kHz, or a maximum below the
//! minimum (or a minimum above the maximum), is refused with EINVAL. The
//! performance governor runs each CPU at the highest available frequency within
//! its limits (when none lies within them, the available one nearest the
//! maximum). A load-following package ([`crate::LoadFollowing`] with `per_ghz_w`)
//! charges each busy CPU's time at the frequency it ran at.

use serde::{Deserialize, Serialize};
use std::sync::{Mutex, PoisonError};

/// At most this many available frequencies (acpi-cpufreq's P-state tables are
/// about 16 long).
pub const MAX_FREQUENCIES: usize = 32;
/// The lowest frequency accepted, GHz.
const MIN_GHZ: f64 = 0.1;
/// The highest frequency accepted, GHz.
const MAX_GHZ: f64 = 10.0;

/// The frequencies every emulated CPU can run at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuFreq {
    /// The available frequencies in kHz, distinct, highest first (as
    /// `scaling_available_frequencies` lists them).
    pub available_khz: Vec<u64>,
}

impl CpuFreq {
    /// Parses `GHZ[,GHZ...]` (e.g. `1.5,2.2,3.0`; an optional `GHz` after each),
    /// checked as [`CpuFreq::check`] does.
    pub fn parse(text: &str) -> Result<CpuFreq, String> {
        let mut available_khz = Vec::new();
        for item in text.split(',').map(str::trim) {
            let lower = item.to_ascii_lowercase();
            let number = lower.strip_suffix("ghz").unwrap_or(&lower).trim();
            let ghz: f64 = number
                .parse()
                .map_err(|_| format!("'{item}' is not a frequency in GHz (e.g. 1.5,2.2,3.0)"))?;
            if !(ghz.is_finite() && (MIN_GHZ..=MAX_GHZ).contains(&ghz)) {
                return Err(format!("{item} GHz is not between {MIN_GHZ} and {MAX_GHZ}"));
            }
            available_khz.push((ghz * 1e6).round() as u64);
        }
        let mut f = CpuFreq { available_khz };
        f.available_khz.sort_unstable_by(|a, b| b.cmp(a));
        f.check()?;
        Ok(f)
    }

    /// Checks the list: 1 to 32 distinct frequencies, each 0.1 to 10 GHz.
    pub fn check(&self) -> Result<(), String> {
        let n = self.available_khz.len();
        if !(1..=MAX_FREQUENCIES).contains(&n) {
            return Err(format!(
                "{n} CPU frequencies (give 1 to {MAX_FREQUENCIES}, e.g. --cpufreq 1.5,2.2,3.0)"
            ));
        }
        let (lo, hi) = ((MIN_GHZ * 1e6) as u64, (MAX_GHZ * 1e6) as u64);
        if let Some(k) = self.available_khz.iter().find(|k| !(lo..=hi).contains(*k)) {
            return Err(format!(
                "CPU frequency {k} kHz is not between {MIN_GHZ} and {MAX_GHZ} GHz"
            ));
        }
        let mut sorted = self.available_khz.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("CPU frequency {} kHz is given twice", w[0]));
        }
        Ok(())
    }

    /// The lowest available frequency, kHz (`cpuinfo_min_freq`).
    pub fn min_khz(&self) -> u64 {
        self.available_khz.iter().copied().min().unwrap_or(0)
    }

    /// The highest available frequency, kHz (`cpuinfo_max_freq`).
    pub fn max_khz(&self) -> u64 {
        self.available_khz.iter().copied().max().unwrap_or(0)
    }

    /// What the performance governor runs at within `[min_khz, max_khz]`: the
    /// highest available frequency in it, else the available one nearest `max_khz`.
    pub fn governed_khz(&self, min_khz: u64, max_khz: u64) -> u64 {
        self.available_khz
            .iter()
            .copied()
            .filter(|k| (min_khz..=max_khz).contains(k))
            .max()
            .or_else(|| {
                self.available_khz
                    .iter()
                    .copied()
                    .min_by_key(|k| k.abs_diff(max_khz))
            })
            .unwrap_or(0)
    }
}

/// The writable limits of a CPU's policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    /// `scaling_min_freq`.
    Min,
    /// `scaling_max_freq`.
    Max,
}

/// A file of `cpuN/cpufreq/` whose value can change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attr {
    /// `scaling_cur_freq`.
    Cur,
    /// `scaling_min_freq` or `scaling_max_freq`.
    Limit(Limit),
}

/// One CPU's policy: its limits and the frequency the governor picked.
#[derive(Debug, Clone, Copy)]
struct Policy {
    min_khz: u64,
    max_khz: u64,
    cur_khz: u64,
}

/// Every emulated CPU's policy, changed by writes to its limits.
#[derive(Debug)]
pub(crate) struct Policies {
    freq: CpuFreq,
    /// One per emulated CPU, with the current frequencies beside them (what the
    /// load-following power reads, kept in step under the same lock).
    state: Mutex<(Vec<Policy>, Vec<u64>)>,
}

impl Policies {
    /// Every CPU at the widest limits (so at the highest frequency).
    pub fn new(freq: &CpuFreq, cpus: u32) -> Policies {
        let (min_khz, max_khz) = (freq.min_khz(), freq.max_khz());
        let policy = Policy {
            min_khz,
            max_khz,
            cur_khz: freq.governed_khz(min_khz, max_khz),
        };
        let n = cpus as usize;
        Policies {
            freq: freq.clone(),
            state: Mutex::new((vec![policy; n], vec![policy.cur_khz; n])),
        }
    }

    /// The value of `attr` of `cpu`, kHz.
    pub fn value(&self, cpu: u32, attr: Attr) -> Option<u64> {
        let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let p = st.0.get(cpu as usize)?;
        Some(match attr {
            Attr::Cur => p.cur_khz,
            Attr::Limit(Limit::Min) => p.min_khz,
            Attr::Limit(Limit::Max) => p.max_khz,
        })
    }

    /// Runs `f` on every CPU's current frequency (kHz), with no change between.
    pub fn with_current<R>(&self, f: impl FnOnce(&[u64]) -> R) -> R {
        let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f(&st.1)
    }

    /// Sets `limit` of `cpu` to `khz` clamped to the hardware range, as the kernel
    /// does; `before` first sees the frequencies in force until then (the
    /// load-following power charges the busy time so far at them). Refused
    /// (nothing changes, `before` is not called) when the maximum would fall below
    /// the minimum.
    pub fn set(
        &self,
        cpu: u32,
        limit: Limit,
        khz: u64,
        before: impl FnOnce(&[u64]),
    ) -> Result<(), WriteError> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let khz = khz.clamp(self.freq.min_khz(), self.freq.max_khz());
        let mut p = *st.0.get(cpu as usize).ok_or(WriteError::NoSuchCpu)?;
        match limit {
            Limit::Min => p.min_khz = khz,
            Limit::Max => p.max_khz = khz,
        }
        if p.max_khz < p.min_khz {
            return Err(WriteError::Crossed);
        }
        p.cur_khz = self.freq.governed_khz(p.min_khz, p.max_khz);
        before(&st.1);
        let (policies, current) = &mut *st;
        policies[cpu as usize] = p;
        current[cpu as usize] = p.cur_khz;
        Ok(())
    }
}

/// Why a write to a limit is refused (the kernel answers EINVAL to each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum WriteError {
    /// Not a decimal number of kHz.
    #[error("not a decimal number of kHz")]
    NotANumber,
    /// The maximum would fall below the minimum.
    #[error("the maximum would fall below the minimum")]
    Crossed,
    /// The CPU is not emulated.
    #[error("no such CPU")]
    NoSuchCpu,
}

/// A written limit: decimal kHz, whitespace around it allowed (`echo` adds a
/// newline), as the kernel's `sscanf(buf, "%u")` reads it (but stricter: no
/// trailing text).
pub(crate) fn parse_khz(data: &[u8]) -> Result<u64, WriteError> {
    let text = std::str::from_utf8(data).map_err(|_| WriteError::NotANumber)?;
    let digits = text.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(WriteError::NotANumber);
    }
    digits.parse().map_err(|_| WriteError::NotANumber)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_checks_the_list() {
        let f = CpuFreq::parse("1.5, 3.0,2.2GHz").unwrap();
        assert_eq!(f.available_khz, [3_000_000, 2_200_000, 1_500_000]);
        assert_eq!((f.min_khz(), f.max_khz()), (1_500_000, 3_000_000));
        for bad in ["", "1.5,", "x", "0.05", "11", "nan", "inf", "1.5,1.5", "-2"] {
            assert!(CpuFreq::parse(bad).is_err(), "{bad:?} accepted");
        }
        let many: Vec<String> = (1..=33)
            .map(|i| format!("{}", f64::from(i) / 10.0))
            .collect();
        assert!(CpuFreq::parse(&many.join(","))
            .unwrap_err()
            .contains("1 to 32"));
        assert!(CpuFreq::parse(&many[..32].join(",")).is_ok());
        // A configuration built by hand is checked too.
        let f = CpuFreq {
            available_khz: vec![],
        };
        assert!(f.check().is_err());
    }

    #[test]
    fn the_performance_governor_picks_the_highest_within_the_limits() {
        let f = CpuFreq::parse("1.5,2.2,3.0").unwrap();
        assert_eq!(f.governed_khz(1_500_000, 3_000_000), 3_000_000);
        assert_eq!(f.governed_khz(1_500_000, 2_999_999), 2_200_000);
        assert_eq!(f.governed_khz(1_500_000, 1_500_000), 1_500_000);
        // Nothing available within [1.6, 2.0] GHz: the one nearest the maximum.
        assert_eq!(f.governed_khz(1_600_000, 2_000_000), 2_200_000);
    }

    #[test]
    fn writes_clamp_refuse_crossed_limits_and_garbage() {
        let f = CpuFreq::parse("1.5,2.2,3.0").unwrap();
        let p = Policies::new(&f, 2);
        assert_eq!(p.value(1, Attr::Cur), Some(3_000_000));
        let mut seen = Vec::new();
        p.set(1, Limit::Max, 2_500_000, |c| seen = c.to_vec())
            .unwrap();
        // `before` saw the frequencies in force until the write.
        assert_eq!(seen, [3_000_000, 3_000_000]);
        assert_eq!(p.value(1, Attr::Cur), Some(2_200_000));
        assert_eq!(p.value(0, Attr::Cur), Some(3_000_000));
        p.with_current(|c| assert_eq!(c, [3_000_000, 2_200_000]));
        // Clamped to cpuinfo_min_freq.
        p.set(1, Limit::Max, 1, |_| {}).unwrap();
        assert_eq!(p.value(1, Attr::Limit(Limit::Max)), Some(1_500_000));
        assert_eq!(p.value(1, Attr::Cur), Some(1_500_000));
        // A minimum above the maximum is refused, and nothing changes.
        assert_eq!(
            p.set(1, Limit::Min, 2_200_000, |_| panic!("called")),
            Err(WriteError::Crossed)
        );
        assert_eq!(p.value(1, Attr::Limit(Limit::Min)), Some(1_500_000));
        // Clamped to cpuinfo_max_freq.
        p.set(1, Limit::Max, 99_000_000, |_| {}).unwrap();
        assert_eq!(p.value(1, Attr::Limit(Limit::Max)), Some(3_000_000));
        assert_eq!(p.set(7, Limit::Max, 1, |_| {}), Err(WriteError::NoSuchCpu));

        assert_eq!(parse_khz(b"1500000\n"), Ok(1_500_000));
        assert_eq!(parse_khz(b" 1500000 \t\n"), Ok(1_500_000));
        for bad in [
            &b""[..],
            b"\n",
            b"1.5",
            b"-1",
            b"abc",
            b"15 kHz",
            b"1e6",
            b"\xff",
        ] {
            assert_eq!(parse_khz(bad), Err(WriteError::NotANumber), "{bad:?}");
        }
    }
}
