//! `compare --profile`: every measured run profiled (`quietwatt profile`'s
//! library), and which function's energy changed between two commands, with
//! intervals from the repeated runs, as a table and a differential energy flame
//! graph.
//!
//! **What is compared.** Each run's stacks are sampled in user space only
//! (`kernel: false`), so the time a function spends in the kernel (a timer
//! interrupt, a syscall) is its own: kernel leaves would otherwise change with
//! the running time of whatever they interrupted. Per function, its **self**
//! energy in a run is the µJ of the stacks it is the leaf of (0 in a run where
//! it was not sampled); a caller whose callee changed does not change itself.
//!
//! **The statistics.** For each function, B's mean self energy minus A's, with a
//! Welch 95 % interval over the runs, and Welch's t test. A function is
//! **significantly changed** when its p value, adjusted by Holm's method over
//! every function compared, is below 0.05: with many functions, some would
//! otherwise cross 0.05 by chance. Functions with no energy in either command's
//! runs are not compared.
//!
//! **The flame graph.** Widths are B's mean energy per stack; colour is the
//! change (inferno's differential flame graph: red more, blue less), but only
//! for stacks whose leaf function changed significantly: the others are drawn
//! as unchanged (their "before" set to their "after"), so noise is not painted
//! as change. A stack only A had is drawn with width 0 (not at all).

use crate::executor::{ExecError, Executor, Invocation, Run};
use quietwatt::command::{self, ChildEvent};
use quietwatt_profile::{Hooks, NamedStacks, ProfileRun, SymbolOptions, Workload};
use quietwatt_stats::repeat::{self, Summary};
use quietwatt_stats::{holm, student_t_quantile};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{self, Write};

/// One profiled run: the µJ of each named stack (user frames, root first, `;`
/// joined, as folded stacks), `[unattributed]` left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunProfile {
    /// µJ per stack.
    pub stacks: BTreeMap<String, u64>,
}

impl RunProfile {
    /// The stacks of `named`.
    pub fn of(named: &NamedStacks) -> RunProfile {
        RunProfile {
            stacks: named
                .lines()
                .filter(|(s, _)| *s != "[unattributed]")
                .map(|(s, uj)| (s.to_string(), uj))
                .collect(),
        }
    }

    /// Each function's self energy, µJ (the stacks it is the leaf of).
    pub fn self_uj(&self) -> BTreeMap<&str, u64> {
        let mut by = BTreeMap::new();
        for (stack, uj) in &self.stacks {
            let leaf = stack.rsplit(';').next().unwrap_or(stack);
            *by.entry(leaf).or_default() += uj;
        }
        by
    }
}

/// One function's change of self energy from command A to command B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionChange {
    /// The function (its frame's name).
    pub function: String,
    /// A's mean self energy over its runs, µJ.
    pub a_uj: f64,
    /// B's mean self energy over its runs, µJ.
    pub b_uj: f64,
    /// `b_uj - a_uj`, µJ.
    pub change_uj: f64,
    /// Welch's 95 % interval of the change, µJ.
    pub change_95_uj: [f64; 2],
    /// Welch's two-sided p value.
    pub p: f64,
    /// `p` adjusted by Holm's method over every function compared.
    pub p_holm: f64,
    /// Whether `p_holm` < 0.05.
    pub significant: bool,
}

/// Every function's change from `a`'s runs to `b`'s, most significant first
/// (then by the size of the change). Needs at least two runs of each.
pub fn function_changes(a: &[RunProfile], b: &[RunProfile]) -> Vec<FunctionChange> {
    let per_run = |runs: &[RunProfile]| -> Vec<BTreeMap<String, u64>> {
        runs.iter()
            .map(|r| {
                r.self_uj()
                    .into_iter()
                    .map(|(f, uj)| (f.to_string(), uj))
                    .collect()
            })
            .collect()
    };
    let (pa, pb) = (per_run(a), per_run(b));
    let mut names: Vec<&String> = pa.iter().chain(&pb).flat_map(|m| m.keys()).collect();
    names.sort_unstable();
    names.dedup();
    let values = |runs: &[BTreeMap<String, u64>], f: &str| -> Vec<f64> {
        runs.iter()
            .map(|m| m.get(f).copied().unwrap_or(0) as f64)
            .collect()
    };
    let mut out: Vec<FunctionChange> = names
        .into_iter()
        .filter_map(|f| {
            let (x, y) = (values(&pa, f), values(&pb, f));
            let (a_uj, b_uj, change, ci, p) = welch(&x, &y)?;
            Some(FunctionChange {
                function: f.clone(),
                a_uj,
                b_uj,
                change_uj: change,
                change_95_uj: ci,
                p,
                p_holm: p,
                significant: false,
            })
        })
        .collect();
    // Every p is a probability (welch's are), so the adjustment cannot fail.
    let adjusted = holm(&out.iter().map(|c| c.p).collect::<Vec<_>>()).unwrap_or_default();
    for (c, p) in out.iter_mut().zip(adjusted) {
        c.p_holm = p;
        c.significant = p < 0.05;
    }
    out.sort_by(|x, y| {
        y.significant
            .cmp(&x.significant)
            .then(y.change_uj.abs().total_cmp(&x.change_uj.abs()))
    });
    out
}

/// `mean(y) - mean(x)`, its Welch 95 % interval and two-sided p value (the
/// stats crate's Welch test over the runs, no measurement bound: a split's µJ
/// are exact shares of the measured energy); `None` with fewer than two values
/// on a side.
fn welch(x: &[f64], y: &[f64]) -> Option<(f64, f64, f64, [f64; 2], f64)> {
    let exact = |v: &[f64]| Summary::new(v, &vec![0.0; v.len()]);
    let (a, b) = (exact(x)?, exact(y)?);
    let w = repeat::welch(&a, &b)?;
    let d = b.mean - a.mean;
    let h = if w.t.is_finite() && w.t != 0.0 {
        student_t_quantile(0.975, w.df) * d.abs() / w.t.abs()
    } else {
        // No spread on either side: the interval is the difference itself.
        0.0
    };
    Some((a.mean, b.mean, d, [d - h, d + h], w.p_value))
}

/// The differential folded lines (`stack before after`, mean µJ rounded): B's
/// mean per stack as the width; the before count A's mean where the stack's leaf
/// changed significantly, B's own (no colour) where it did not.
pub fn differential_folded(
    a: &[RunProfile],
    b: &[RunProfile],
    changes: &[FunctionChange],
) -> String {
    let means = |runs: &[RunProfile]| -> BTreeMap<String, f64> {
        let mut m: BTreeMap<String, f64> = BTreeMap::new();
        for r in runs {
            for (s, uj) in &r.stacks {
                *m.entry(s.clone()).or_default() += *uj as f64 / runs.len() as f64;
            }
        }
        m
    };
    let (ma, mb) = (means(a), means(b));
    let changed: std::collections::HashSet<&str> = changes
        .iter()
        .filter(|c| c.significant)
        .map(|c| c.function.as_str())
        .collect();
    let mut stacks: Vec<&String> = ma.keys().chain(mb.keys()).collect();
    stacks.sort_unstable();
    stacks.dedup();
    let mut out = String::new();
    for s in stacks {
        let after = mb.get(s).copied().unwrap_or(0.0).round() as u64;
        let leaf = s.rsplit(';').next().unwrap_or(s);
        let before = if changed.contains(leaf) {
            ma.get(s).copied().unwrap_or(0.0).round() as u64
        } else {
            after
        };
        if before == 0 && after == 0 {
            continue;
        }
        out.push_str(&format!("{s} {before} {after}\n"));
    }
    out
}

/// The differential energy flame graph of `folded` ([`differential_folded`]).
pub fn write_differential_svg(
    out: &mut dyn Write,
    folded: &str,
    title: &str,
    subtitle: &str,
) -> io::Result<()> {
    let mut opt = inferno::flamegraph::Options::default();
    opt.title = title.to_string();
    opt.subtitle = (!subtitle.is_empty()).then(|| subtitle.to_string());
    opt.count_name = "µJ".to_string();
    opt.deterministic = true;
    if folded.is_empty() {
        return inferno::flamegraph::from_lines(&mut opt, ["[no energy] 1 1"], out)
            .map_err(io::Error::other);
    }
    inferno::flamegraph::from_lines(&mut opt, folded.lines(), out).map_err(io::Error::other)
}

/// An executor that profiles each measured run ([`ProfileRun`]'s energy
/// session and stack sampler around the command) and keeps each run's
/// [`RunProfile`] per command.
pub struct ProfileExecutor<'w> {
    run: ProfileRun,
    commands: Vec<Invocation>,
    watch: Box<dyn FnMut(ChildEvent) + 'w>,
    /// Each command's runs' profiles, in the order they ran.
    pub profiles: Vec<Vec<RunProfile>>,
}

impl std::fmt::Debug for ProfileExecutor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfileExecutor")
            .field("commands", &self.commands)
            .finish_non_exhaustive()
    }
}

impl<'w> ProfileExecutor<'w> {
    /// Profiles `commands` as `run` says, user stacks only (see the module's
    /// doc); `watch` sees each spawned child (to forward signals to it).
    pub fn new(
        mut run: ProfileRun,
        commands: Vec<Invocation>,
        watch: impl FnMut(ChildEvent) + 'w,
    ) -> ProfileExecutor<'w> {
        run.sampler.kernel = false;
        let n = commands.len();
        ProfileExecutor {
            run,
            commands,
            watch: Box::new(watch),
            profiles: vec![Vec::new(); n],
        }
    }
}

impl Executor for ProfileExecutor<'_> {
    type Error = ExecError;

    fn warm_up(&mut self, i: usize) -> Result<i32, ExecError> {
        let mut c = self
            .commands
            .get(i)
            .ok_or(ExecError::NoCommand(i))?
            .command();
        Ok(crate::executor::exit_code(command::spawn_and_wait(
            &mut c,
            &mut *self.watch,
        )?))
    }

    fn measure(&mut self, i: usize) -> Result<Run, ExecError> {
        let c = self
            .commands
            .get(i)
            .ok_or(ExecError::NoCommand(i))?
            .command();
        let watch = &mut self.watch;
        let mut child = |e| watch(e);
        let mut hooks = Hooks {
            child: &mut child,
            process_seen: &mut |_| {},
            stop: None,
            ready: &mut || {},
        };
        let mut outcome =
            quietwatt_profile::run_profile(&self.run, Workload::Command(c), &mut hooks)
                .map_err(|e| ExecError::Profile(e.to_string()))?;
        let (named, _) = outcome.name_stacks(SymbolOptions::default());
        self.profiles[i].push(RunProfile::of(&named));
        let status = outcome.status.map_or(0, crate::executor::exit_code);
        Ok(Run::of_energy(status, &outcome.measurement.energy))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stacks: &[(&str, u64)]) -> RunProfile {
        RunProfile {
            stacks: stacks.iter().map(|(s, u)| (s.to_string(), *u)).collect(),
        }
    }

    #[test]
    fn the_function_that_doubled_is_the_only_significant_change_and_only_it_is_coloured() {
        // Five runs each: `steady` the same with noise, `changed` twice in B.
        let noise = [0, 7, -5, 3, -4];
        let a: Vec<_> = noise
            .iter()
            .map(|n| {
                run(&[
                    ("main;steady", (1000 + n) as u64),
                    ("main;changed", (1000 - n) as u64),
                ])
            })
            .collect();
        let b: Vec<_> = noise
            .iter()
            .map(|n| {
                run(&[
                    ("main;steady", (1000 - n) as u64),
                    ("main;changed", (2000 + n) as u64),
                ])
            })
            .collect();
        let c = function_changes(&a, &b);
        assert_eq!(c[0].function, "changed");
        assert!(
            c[0].significant && (c[0].change_uj - 1000.0).abs() < 1.0,
            "{c:?}"
        );
        assert!(c[0].change_95_uj[0] > 0.0);
        let steady = c.iter().find(|x| x.function == "steady").unwrap();
        assert!(
            !steady.significant && steady.change_95_uj[0] < 0.0 && steady.change_95_uj[1] > 0.0,
            "{steady:?}"
        );
        let folded = differential_folded(&a, &b, &c);
        assert_eq!(folded, "main;changed 1000 2000\nmain;steady 1000 1000\n");
        let mut svg = Vec::new();
        write_differential_svg(&mut svg, &folded, "t", "s").unwrap();
        assert!(String::from_utf8(svg).unwrap().contains("changed"));
    }
}
