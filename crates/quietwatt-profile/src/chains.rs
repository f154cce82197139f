//! Whether the profiled code keeps frame pointers: the kernel unwinds user
//! stacks by following them, so code built without them gives chains cut after
//! a frame or two, and its energy lands on the leaf with every caller missing.
//!
//! The heuristic, per module (the executable or library a sample's leaf is in):
//! a chain is **cut** when it has at most [`CUT_DEPTH`] user frames and never
//! leaves the leaf's module. A whole chain of a process always reaches the
//! runtime's start code (libc's `__libc_start_call_main`, a thread's
//! `start_thread`, Go's `runtime.goexit`), so a program with frame pointers
//! whose hot loop is in `main` still gives `main ← libc`: two frames, two
//! modules, not cut. Without frame pointers the kernel stops at the first
//! frame whose saved pointer is not one: `leaf ← main+0x25` or the leaf alone,
//! all in the executable (seen with rustc's `-C force-frame-pointers=no`). A
//! module is reported when at least [`MIN_SAMPLES`] of its samples were taken
//! and at least [`CUT_SHARE`] of them are cut. A statically linked program
//! (no libc to reach) whose hot loop is in `main` can be reported wrongly; JIT
//! code in anonymous memory is never judged (its perf map names it).

use crate::stack::{StackSample, StackTable};
use crate::symbols::MapTable;
use std::collections::BTreeMap;

/// At most this many user frames, all in the leaf's module: a cut chain.
pub const CUT_DEPTH: usize = 2;
/// A module is judged on at least this many samples.
pub const MIN_SAMPLES: u64 = 50;
/// The share of a module's samples that must be cut for it to be reported.
pub const CUT_SHARE: f64 = 0.8;

/// A module whose call chains look cut: built without frame pointers.
#[derive(Debug, Clone, PartialEq)]
pub struct CutChains {
    /// The module (`spin`, `libfoo.so.1`).
    pub module: String,
    /// Samples whose leaf is in it.
    pub samples: u64,
    /// Of them, cut chains.
    pub cut: u64,
}

impl CutChains {
    /// The warning a user reads, with how to rebuild.
    pub fn message(&self) -> String {
        format!(
            "call chains ending in {} stop after {CUT_DEPTH} frames or fewer in {:.0} % of its {} samples: it seems built without frame pointers, so its callers are missing and its energy shows on its leaves; rebuild it with them (C, C++: -fno-omit-frame-pointer; Rust: RUSTFLAGS=\"-C force-frame-pointers=yes\"; Go keeps them; Node: V8 keeps them, add --perf-basic-prof for names)",
            self.module,
            100.0 * self.cut as f64 / self.samples as f64,
            self.samples
        )
    }
}

/// The modules of `samples` whose chains look cut (see the module's doc), most
/// samples first.
pub fn cut_chains(table: &StackTable, samples: &[StackSample], maps: &MapTable) -> Vec<CutChains> {
    // module -> (samples, cut)
    let mut per: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for s in samples {
        let Some(stack) = table.get(s.stack) else {
            continue;
        };
        let Some(&leaf) = stack.user.first() else {
            continue;
        };
        let Some(m) = maps.find(stack.pid, leaf).filter(|m| m.is_file()) else {
            continue;
        };
        let same = |ip: &u64| maps.find(stack.pid, *ip).is_some_and(|o| o.path == m.path);
        let cut = stack.user.len() <= CUT_DEPTH && stack.user.iter().all(same);
        let e = per.entry(m.path.as_ref()).or_default();
        e.0 += 1;
        e.1 += u64::from(cut);
    }
    let mut out: Vec<CutChains> = per
        .into_iter()
        .filter(|(_, (n, cut))| *n >= MIN_SAMPLES && *cut as f64 >= CUT_SHARE * *n as f64)
        .map(|(path, (samples, cut))| CutChains {
            module: path.rsplit('/').next().unwrap_or(path).to_string(),
            samples,
            cut,
        })
        .collect();
    out.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.module.cmp(&b.module)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::{Stack, StackSample};

    /// `n` samples of process 1 with the user chain `user`.
    fn sampled(table: &mut StackTable, out: &mut Vec<StackSample>, user: &[u64], n: usize) {
        let stack = table.intern(&Stack {
            pid: 1,
            kernel: vec![],
            user: user.to_vec(),
        });
        out.extend((0..n).map(|i| StackSample {
            time_ns: i as u64,
            pid: 1,
            tid: 1,
            cpu: 0,
            period: 1,
            stack,
        }));
    }

    #[test]
    fn chains_cut_inside_one_module_are_reported_and_whole_ones_are_not() {
        let mut maps = MapTable::new();
        maps.insert(1, 0x1000, 0x1000, 0, "/opt/nofp");
        maps.insert(1, 0x4000, 0x1000, 0, "/usr/lib/libc.so.6");
        maps.insert(1, 0x8000, 0x1000, 0, "/opt/libfp.so");
        let mut table = StackTable::new();
        let mut samples = Vec::new();
        // Built without: leaf <- main+0x25, both in the executable; some alone.
        sampled(&mut table, &mut samples, &[0x1100, 0x1200], 90);
        sampled(&mut table, &mut samples, &[0x1100], 5);
        // With them: deep chains through libc.
        sampled(
            &mut table,
            &mut samples,
            &[0x8100, 0x8200, 0x8300, 0x4100],
            200,
        );
        // With them, the hot loop in main: main <- libc, not cut.
        sampled(&mut table, &mut samples, &[0x1300, 0x4100], 40);
        // JIT code in anonymous memory is not judged.
        sampled(&mut table, &mut samples, &[0xf000], 100);
        // 95 of the executable's 135 samples are cut (70 %): under the share.
        assert!(cut_chains(&table, &samples, &maps).is_empty());
        // Without the main-hot samples, 95 of 95 are cut.
        let only: Vec<_> = samples
            .iter()
            .filter(|s| table.get(s.stack).unwrap().user[0] != 0x1300)
            .copied()
            .collect();
        let cut = cut_chains(&table, &only, &maps);
        assert_eq!(cut.len(), 1);
        assert_eq!(
            (cut[0].module.as_str(), cut[0].samples, cut[0].cut),
            ("nofp", 95, 95)
        );
        assert!(
            cut[0].message().contains("force-frame-pointers=yes"),
            "{}",
            cut[0].message()
        );
        // Too few samples to judge.
        assert!(cut_chains(&table, &only[..40], &maps).is_empty());
    }
}
