//! The scheduler: warm-ups, then rounds of every command in a shuffled order.

use crate::executor::{Executor, Run};
use quietwatt_stats::rng::XorShift;

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Measured runs of each command (rounds).
    pub runs: u32,
    /// Unmeasured runs of each command first (caches, frequency ramp-up).
    pub warmup: u32,
    /// Seed of the order within each round.
    pub seed: u64,
    /// Go on when a command exits non-zero (its runs are measured all the same).
    pub ignore_failure: bool,
}

/// A warm-up or a measured run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// Unmeasured, discarded.
    WarmUp,
    /// Measured.
    Measured,
}

impl RunKind {
    /// In words, for messages: "warm-up run", "run".
    pub fn words(self) -> &'static str {
        match self {
            RunKind::WarmUp => "warm-up run",
            RunKind::Measured => "run",
        }
    }
}

/// What the per-run callback is told.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A measured run is about to start (for a progress message).
    Starting {
        /// The command's index.
        command: usize,
        /// The round, from 1.
        round: u32,
    },
    /// A measured run ended (and was not cut by a stop request).
    Measured {
        /// The command's index.
        command: usize,
        /// The round, from 1.
        round: u32,
        /// Its figures.
        run: &'a Run,
    },
}

/// The measured runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Each command's runs, in the commands' order (each as many: whole rounds).
    pub runs: Vec<Vec<Run>>,
    /// Rounds measured whole.
    pub rounds: u32,
    /// The rounds asked for, when a stop request cut the series short.
    pub interrupted: Option<u32>,
    /// The first non-zero exit code of a kept run, in the order they ran.
    pub failure: Option<i32>,
}

impl Outcome {
    /// The first non-zero exit code of any run, in the order they ran (0 if none).
    pub fn first_failure(&self) -> i32 {
        self.failure.unwrap_or(0)
    }
}

/// Why the scheduler stopped without an [`Outcome`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError<E> {
    /// The executor failed.
    #[error(transparent)]
    Executor(E),
    /// A command exited non-zero and `ignore_failure` was off.
    #[error("command #{} exited with code {exit_code} in {} {index} of {of}", .command + 1, .kind.words())]
    Failed {
        /// The command's index.
        command: usize,
        /// A warm-up or a measured run.
        kind: RunKind,
        /// Which one, from 1.
        index: u32,
        /// Of how many.
        of: u32,
        /// Its exit code.
        exit_code: i32,
    },
    /// A stop request came before any round was measured whole.
    #[error("interrupted before a round was measured whole")]
    Interrupted,
}

/// Runs `commands` commands through `executor` as `plan` says: `plan.warmup`
/// warm-up rounds in the commands' order, then `plan.runs` rounds, each running
/// every command once in an order shuffled (Fisher-Yates, [`XorShift`] seeded
/// with `plan.seed`). `stop` is asked after every run: when it says stop, the run
/// it cut and the rest of its round are left out (every command keeps as many
/// runs, as perf stat -r does) and the whole rounds are returned.
pub fn schedule<X: Executor>(
    executor: &mut X,
    commands: usize,
    plan: &Plan,
    stop: &mut dyn FnMut() -> bool,
    on_run: &mut dyn FnMut(Event<'_>),
) -> Result<Outcome, ScheduleError<X::Error>> {
    for round in 0..plan.warmup {
        for i in 0..commands {
            let code = executor.warm_up(i).map_err(ScheduleError::Executor)?;
            if stop() {
                return Err(ScheduleError::Interrupted);
            }
            if code != 0 && !plan.ignore_failure {
                return Err(ScheduleError::Failed {
                    command: i,
                    kind: RunKind::WarmUp,
                    index: round + 1,
                    of: plan.warmup,
                    exit_code: code,
                });
            }
        }
    }
    let mut runs: Vec<Vec<Run>> = vec![Vec::with_capacity(plan.runs as usize); commands];
    let mut rng = XorShift::new(plan.seed);
    let mut order: Vec<usize> = (0..commands).collect();
    let mut failure = None;
    for round in 0..plan.runs {
        for j in (1..commands).rev() {
            order.swap(j, rng.below(j + 1));
        }
        for &i in &order {
            on_run(Event::Starting {
                command: i,
                round: round + 1,
            });
            let r = executor.measure(i).map_err(ScheduleError::Executor)?;
            if stop() {
                if round == 0 {
                    return Err(ScheduleError::Interrupted);
                }
                for r in &mut runs {
                    r.truncate(round as usize);
                }
                return Ok(Outcome {
                    runs,
                    rounds: round,
                    interrupted: Some(plan.runs),
                    failure,
                });
            }
            on_run(Event::Measured {
                command: i,
                round: round + 1,
                run: &r,
            });
            let code = r.exit_code;
            runs[i].push(r);
            if code != 0 {
                if !plan.ignore_failure {
                    return Err(ScheduleError::Failed {
                        command: i,
                        kind: RunKind::Measured,
                        index: round + 1,
                        of: plan.runs,
                        exit_code: code,
                    });
                }
                failure.get_or_insert(code);
            }
        }
    }
    Ok(Outcome {
        runs,
        rounds: plan.runs,
        interrupted: None,
        failure,
    })
}
