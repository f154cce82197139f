//! A profile as a timeline (`quietwatt profile --record FILE.csv`): the package
//! energy intervals in `quietwatt record`'s CSV format, and beside them
//! (`<stem>.stacks.csv`) every stack sample with the µJ the split gave it, so
//! that `quietwatt trace FILE.csv` shows the samples on the power timeline.
//!
//! - **The energy file** holds the profile's package intervals, exactly the µJ
//!   that were split (`energy_j` is their µJ over 10⁶), one row per interval at
//!   its end, after a first row at the first interval's start (0 J: the
//!   baseline read). Its columns are `record`'s
//!   (`timestamp_ns,socket,domain,energy_j,power_w,missed,merged,freq_hz,counter`);
//!   only the `package` domain is written (DRAM is not split, and its
//!   intervals are not kept).
//! - **The stacks file** ([`STACKS_HEADER`]): `time_ns` (CLOCK_MONOTONIC, the
//!   energy rows' clock), `cpu`, `pid`, `tid`, `period` (the sample's weight:
//!   ns of CPU time for cpu-clock, cycles for cycles), `energy_uj` (its part of
//!   its interval's energy, [`sample_energy`]) and `stack`, its frames root
//!   first joined by `;` as in the folded output. `stack` is the last column and
//!   is not quoted: a frame may hold a comma (`std::map<int, int>`), so a reader
//!   splits a row at its first six commas only. Samples outside every interval
//!   are written with 0 µJ.
//!
//! The samples' µJ add up to the profile's attributed energy exactly: within an
//! interval each stack's part is shared among its samples in proportion to
//! their periods, with the rounding carried, not lost.

use crate::folded::{frame_names, Symbolizer};
use crate::profile::ProfileOutcome;
use crate::split::IntervalSplit;
use crate::stack::{StackSample, StackTable};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The energy file's header: `quietwatt record`'s CSV header.
pub const ENERGY_HEADER: &str =
    "timestamp_ns,socket,domain,energy_j,power_w,missed,merged,freq_hz,counter";

/// The stacks file's header.
pub const STACKS_HEADER: &str = "time_ns,cpu,pid,tid,period,energy_uj,stack";

/// The stacks file beside energy file `path` (`run.csv` → `run.stacks.csv`), as
/// `quietwatt trace` looks for it.
pub fn stacks_path(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!("{stem}.stacks.csv"))
}

/// Each sample's µJ, in the order of `samples`: each interval's stack parts of
/// `splits` (as [`crate::split_energy`] made them from these samples and
/// `cpu_package`) shared among the stack's samples in that interval by their
/// periods. Σ = the stacks' energy, exactly.
pub fn sample_energy(
    splits: &[IntervalSplit],
    samples: &[StackSample],
    cpu_package: &[Option<u32>],
) -> Vec<u64> {
    let mut order: Vec<usize> = (0..samples.len()).collect();
    order.sort_by_key(|&i| samples[i].time_ns);
    let package_of = |cpu: u32| cpu_package.get(cpu as usize).copied().flatten();
    let mut out = vec![0u64; samples.len()];
    let mut of_stack: BTreeMap<crate::StackId, Vec<usize>> = BTreeMap::new();
    for sp in splits {
        let iv = &sp.interval;
        // The samples split_energy counted in this interval: (start, end], its package.
        let from = order.partition_point(|&i| samples[i].time_ns <= iv.start_ns);
        let to = order
            .partition_point(|&i| samples[i].time_ns <= iv.end_ns)
            .max(from);
        of_stack.clear();
        for &i in &order[from..to] {
            if package_of(samples[i].cpu) == Some(iv.package) {
                of_stack.entry(samples[i].stack).or_default().push(i);
            }
        }
        for part in &sp.stacks {
            let Some(members) = of_stack.get(&part.stack) else {
                continue;
            };
            share(part.part.total_uj(), members, samples, &mut out);
        }
    }
    out
}

/// Shares `uj` among `members` by their periods (equally when every period is
/// 0): each gets the difference of the rounded-down cumulative shares, so the
/// parts add up to `uj`.
fn share(uj: u64, members: &[usize], samples: &[StackSample], out: &mut [u64]) {
    let weighed: u128 = members.iter().map(|&i| samples[i].period as u128).sum();
    let equal = weighed == 0;
    let total = if equal {
        members.len() as u128
    } else {
        weighed
    };
    let (mut cum, mut given) = (0u128, 0u64);
    for &i in members {
        cum += if equal { 1 } else { samples[i].period as u128 };
        let upto = (uj as u128 * cum / total) as u64;
        out[i] += upto - given;
        given = upto;
    }
}

/// Writes the energy file of `o` (see the module doc), its `meta` first as
/// `# key: value` lines.
pub fn write_energy_csv(
    out: &mut dyn Write,
    o: &ProfileOutcome,
    meta: &[(String, String)],
) -> io::Result<()> {
    for (k, v) in meta {
        writeln!(out, "# {k}: {v}")?;
    }
    writeln!(out, "{ENERGY_HEADER}")?;
    let mut by_package: BTreeMap<u32, Vec<&crate::EnergyInterval>> = BTreeMap::new();
    for iv in &o.intervals {
        by_package.entry(iv.package).or_default().push(iv);
    }
    let mut rows: Vec<(u64, u32, u64, u64)> = Vec::new();
    for (pkg, ivs) in &by_package {
        if let Some(first) = ivs.first() {
            rows.push((first.start_ns, *pkg, 0, 0));
        }
        for iv in ivs {
            rows.push((iv.end_ns, *pkg, iv.energy_uj, iv.end_ns - iv.start_ns));
        }
    }
    rows.sort_by_key(|r| (r.0, r.1));
    for (t, pkg, uj, dur_ns) in rows {
        let (power, hz) = if dur_ns == 0 {
            (0.0, 0.0)
        } else {
            (uj as f64 * 1e3 / dur_ns as f64, 1e9 / dur_ns as f64)
        };
        writeln!(
            out,
            "{t},{pkg},package,{}.{:06},{power:.6},0,0,{hz:.0},",
            uj / 1_000_000,
            uj % 1_000_000
        )?;
    }
    Ok(())
}

/// Writes the stacks file of `o` (see the module doc), frames named by `sym`,
/// its `meta` first; returns the µJ written (the attributed energy).
pub fn write_stacks_csv(
    out: &mut dyn Write,
    o: &ProfileOutcome,
    sym: &mut dyn Symbolizer,
    meta: &[(String, String)],
) -> io::Result<u64> {
    for (k, v) in meta {
        writeln!(out, "# {k}: {v}")?;
    }
    writeln!(out, "{STACKS_HEADER}")?;
    let uj = sample_energy(&o.splits, &o.samples, &o.cpu_package);
    let mut names: BTreeMap<crate::StackId, String> = BTreeMap::new();
    let mut total = 0u64;
    for (s, &e) in o.samples.iter().zip(&uj) {
        let name = names
            .entry(s.stack)
            .or_insert_with(|| stack_name(&o.table, s, sym));
        writeln!(
            out,
            "{},{},{},{},{},{e},{name}",
            s.time_ns, s.cpu, s.pid, s.tid, s.period
        )?;
        total += e;
    }
    Ok(total)
}

/// A sample's frames, root first, `;`-joined, with no line break.
fn stack_name(table: &StackTable, s: &StackSample, sym: &mut dyn Symbolizer) -> String {
    match table.get(s.stack) {
        Some(st) if !st.is_empty() => frame_names(st, sym).join(";"),
        Some(_) => "[no call chain]".to_string(),
        None => "[unknown stack]".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::split_energy;
    use crate::split::EnergyInterval;
    use crate::stack::Stack;
    use quietwatt_attribution::IdlePower;

    #[test]
    fn each_sample_gets_its_period_s_part_and_the_parts_add_up_exactly() {
        let mut table = StackTable::new();
        let a = table.intern(&Stack {
            pid: 7,
            kernel: vec![],
            user: vec![0x10],
        });
        let b = table.intern(&Stack {
            pid: 7,
            kernel: vec![],
            user: vec![0x20],
        });
        let at = |time_ns, cpu, period, stack| StackSample {
            time_ns,
            pid: 7,
            tid: 7,
            cpu,
            period,
            stack,
        };
        // Two a's (1:2) and a b in the first ms, one a on the other package's CPU.
        let samples = [
            at(900_000, 0, 200, a),
            at(100_000, 0, 100, a),
            at(500_000, 1, 300, b),
            at(1_500_000, 2, 100, a),
            at(5_000_000, 0, 100, b),
        ];
        let energy = [
            EnergyInterval {
                package: 0,
                start_ns: 0,
                end_ns: 1_000_000,
                energy_uj: 1_001,
            },
            EnergyInterval {
                package: 1,
                start_ns: 1_000_000,
                end_ns: 2_000_000,
                energy_uj: 77,
            },
        ];
        let cpu_package = [Some(0), Some(0), Some(1)];
        let (splits, total) = split_energy(&energy, &samples, &cpu_package, IdlePower::None);
        let uj = sample_energy(&splits, &samples, &cpu_package);
        let attributed = total.accounted_uj() - total.unattributed.total_uj();
        assert_eq!(uj.iter().sum::<u64>(), attributed);
        assert_eq!(uj[3], 77, "alone in package 1's interval");
        assert_eq!(uj[4], 0, "outside every interval");
        // a's part shared 1:2 between its samples.
        let a_part = total.stacks[&a].total_uj() - 77;
        assert_eq!(uj[1] + uj[0], a_part);
        assert!(uj[0] >= 2 * uj[1] - 1 && uj[0] <= 2 * uj[1] + 2, "{uj:?}");
    }

    #[test]
    fn the_stacks_file_sits_beside_the_energy_file() {
        assert_eq!(
            stacks_path(Path::new("/tmp/run.csv")),
            Path::new("/tmp/run.stacks.csv")
        );
    }
}
