//! A subdomain (core, uncore) against its package over the same interval: the
//! check that needs the next reading to tell a read skew from a jump.

use super::{CounterEvent, Tally};
use crate::counter::{Step, StepKind};

/// A subdomain's advance beyond its package's, held back for one reading.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Pending {
    /// Steps held back (0: nothing pending).
    steps: u64,
    /// The interval it was counted in: its end and length.
    t_ns: u64,
    dt_ns: u64,
    /// Its raw readings.
    from: u64,
    to: u64,
    /// What was counted for it, and the package's advance plus resolution.
    counted: u64,
    bound: u64,
}

impl Tally {
    /// A core or uncore counter cannot advance more than its package over the same
    /// interval, beyond the two counters' resolution. The channels of one sample
    /// are read one after another, so a reader stalled between the package's read
    /// and the core's (or a RAPL update landing between them) makes core lead
    /// package for one interval, and lag it by as much in the next; one interval
    /// cannot tell that from a jump. So the excess is held back from the count and
    /// from the row, and settled at the next reading where the package moved: if
    /// that interval's headroom (package minus core) pays it back, it was a skew and
    /// is counted there; if not, it was a jump, dropped and reported as an
    /// `above_package` event (the jump's interval keeps the package's advance). A
    /// last interval's excess stays held back, inside the uncertainty. Intervals in
    /// which the package did not move are not judged (between its updates, or
    /// frozen, which the report names). Allocates nothing.
    pub(super) fn check_subdomains(&mut self, t: u64, dt: u64) {
        for i in 0..self.parents.len() {
            let Some(p) = self.parents[i] else { continue };
            let pend = self.pending[i];
            let (sub, pkg) = (&self.counters[i], &self.counters[p]);
            let comparable = self.kinds[i] != StepKind::First
                && !self.kinds[i].is_anomaly()
                && !self.kinds[p].is_anomaly();
            if !comparable {
                // Nothing to judge against: what was held back is counted.
                if pend.steps > 0 {
                    self.counters[i].settle(pend.steps, pend.dt_ns);
                    self.deltas[i] += pend.steps;
                    self.pending[i].steps = 0;
                }
                continue;
            }
            if self.deltas[p] == 0 {
                // The package did not update in this interval (read faster than it
                // updates, or frozen: reported at the end): no payback to judge by;
                // what is pending waits for an interval where it moves.
                continue;
            }
            let jps = sub.unit().joules_per_step();
            // Each side is a difference of two truncated readings. The units, not
            // the observed quanta (an estimate a jump itself can inflate): a
            // coarser truncation is a skew like any other, paid back next time.
            let resolution = 2.0 * (jps + pkg.unit().joules_per_step());
            let room = pkg.joules(self.deltas[p]).0 + resolution;
            let excess = sub.joules(self.deltas[i]).0 - room;
            if excess > 0.0 {
                // This interval leads too: what was pending had no payback.
                if pend.steps > 0 {
                    self.drop_pending(i, pend);
                }
                let steps = ((excess / jps).ceil() as u64).min(self.deltas[i]);
                let held = self.counters[i].withhold(steps);
                self.deltas[i] -= held;
                self.pending[i] = Pending {
                    steps: held,
                    t_ns: t,
                    dt_ns: dt,
                    from: self.from[i],
                    to: self.raw[i],
                    counted: self.deltas[i],
                    bound: (room / jps) as u64,
                };
            } else if pend.steps > 0 {
                // All paid back: a skew. Otherwise a jump, dropped whole (releasing
                // this interval's headroom would count the jump in its place).
                let headroom = (-excess / jps) as u64;
                if pend.steps <= headroom {
                    self.deltas[i] += pend.steps;
                    self.counters[i].settle(pend.steps, pend.dt_ns);
                    self.pending[i].steps = 0;
                } else {
                    self.drop_pending(i, pend);
                }
            }
        }
    }

    /// Drops what channel `i` held back and reports it.
    fn drop_pending(&mut self, i: usize, pend: Pending) {
        self.counters[i].settle(0, pend.dt_ns);
        self.record_above_package(i, pend);
        self.pending[i].steps = 0;
    }

    fn record_above_package(&mut self, i: usize, pend: Pending) {
        // The row that settles it carries the mark: the interval's own row is written.
        self.marks.set(i, StepKind::AbovePackage);
        self.record(CounterEvent {
            channel: i,
            t_ns: pend.t_ns,
            step: Step {
                steps: pend.counted,
                kind: StepKind::AbovePackage,
                from: pend.from,
                to: pend.to,
                bound: pend.bound,
            },
        });
    }
}
