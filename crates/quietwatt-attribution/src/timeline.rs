//! Who ran on each CPU over time, from the kernel's slices, and how long each
//! entity ran on a package's CPUs in any interval.
//!
//! Per CPU the timeline is the closed slices the accounting program reported (in
//! time order, each from one context switch to the next) and the slice running now
//! ([`Running`]). Time that neither covers (before the first switch seen, a slice
//! the ring dropped) is *unseen*: no entity gets it, and the model counts it with
//! the idle CPU time.

pub use crate::splitter::Usage;
use std::collections::{HashMap, VecDeque};

/// The most process names a timeline keeps.
pub const MAX_NAMES: usize = 1 << 16;

/// A process or a cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Entity {
    /// A process, by tgid.
    Process(u32),
    /// A cgroup v2, by id (the inode number of its directory).
    Cgroup(u64),
}

impl Entity {
    /// What it is, and its id as a number.
    pub fn by_and_id(self) -> (By, u64) {
        match self {
            Entity::Process(t) => (By::Process, u64::from(t)),
            Entity::Cgroup(c) => (By::Cgroup, c),
        }
    }
}

/// Which entities time is charged to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// Processes (a thread's time goes to its process).
    Process,
    /// cgroups v2.
    Cgroup,
}

impl By {
    /// `process` or `cgroup`, as the outputs name it.
    pub fn name(self) -> &'static str {
        match self {
            By::Process => "process",
            By::Cgroup => "cgroup",
        }
    }
}

/// One slice: `tgid` ran on `cpu` from `start_ns` to `end_ns` (CLOCK_MONOTONIC),
/// in cgroup `cgid`. tgid 0 is the idle task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slice {
    /// Start, CLOCK_MONOTONIC ns.
    pub start_ns: u64,
    /// End, CLOCK_MONOTONIC ns.
    pub end_ns: u64,
    /// The cgroup v2 id.
    pub cgid: u64,
    /// The process (0: the idle task).
    pub tgid: u32,
    /// The CPU.
    pub cpu: u32,
    /// The thread's name (`comm`), NUL-padded.
    pub comm: [u8; 16],
}

impl Slice {
    /// The entity this slice's time goes to, `None` for the idle task.
    pub fn entity(&self, by: By) -> Option<Entity> {
        if self.tgid == 0 {
            return None;
        }
        Some(match by {
            By::Process => Entity::Process(self.tgid),
            By::Cgroup => Entity::Cgroup(self.cgid),
        })
    }
}

/// What runs on a CPU now, since `start_ns`, and the idle task's slice before it
/// when it followed the idle task (the accounting program writes no record of the
/// idle task's slices: each goes with the next task's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Running {
    /// When it was switched in, CLOCK_MONOTONIC ns (0: not known).
    pub start_ns: u64,
    /// Its cgroup v2 id.
    pub cgid: u64,
    /// The idle task ran from here to `start_ns` (0: it did not run just before).
    pub idle_from_ns: u64,
    /// Its process (0: the idle task).
    pub tgid: u32,
}

#[derive(Debug, Default, Clone)]
struct Line {
    closed: VecDeque<Slice>,
    /// The end of the last closed slice received.
    known_until: u64,
    running: Option<Running>,
}

/// The timelines of every CPU.
#[derive(Debug, Default, Clone)]
pub struct Timeline {
    lines: Vec<Line>,
    /// The name of each process's latest slice seen (a thread's `comm`).
    comms: HashMap<u32, [u8; 16]>,
}

fn overlap(a0: u64, a1: u64, b0: u64, b1: u64) -> u64 {
    a1.min(b1).saturating_sub(a0.max(b0))
}

impl Timeline {
    /// An empty timeline.
    pub fn new() -> Timeline {
        Timeline::default()
    }

    fn line(&mut self, cpu: u32) -> &mut Line {
        let i = cpu as usize;
        if self.lines.len() <= i {
            self.lines.resize(i + 1, Line::default());
        }
        &mut self.lines[i]
    }

    /// Adds a closed slice (slices of a CPU arrive in time order).
    pub fn push(&mut self, s: Slice) {
        // The latest name: a process's first slices may carry its parent's name,
        // from before its exec.
        if s.comm[0] != 0 {
            if self.comms.len() >= MAX_NAMES && !self.comms.contains_key(&s.tgid) {
                // Bounded: a long run over many short-lived processes starts over
                // (names then come from /proc while the processes live).
                self.comms.clear();
            }
            match self.comms.get_mut(&s.tgid) {
                Some(c) if *c == s.comm => {}
                Some(c) => *c = s.comm,
                None => {
                    self.comms.insert(s.tgid, s.comm);
                }
            }
        }
        let line = self.line(s.cpu);
        line.known_until = line.known_until.max(s.end_ns);
        line.closed.push_back(s);
    }

    /// Sets what runs on `cpu` now; read *before* draining the closed slices, so
    /// that a switch in between shows as a closed slice, never as a gap.
    pub fn set_running(&mut self, cpu: u32, r: Running) {
        self.line(cpu).running = (r.start_ns != 0).then_some(r);
    }

    /// Adds to `usage[package]` how long each entity, the idle task, and nothing
    /// seen ran on each CPU in `[t0, t1)`; `package_of(cpu)` is the index of the CPU's
    /// package (`None`: not counted). `usage` is cleared first.
    pub fn usage(
        &self,
        t0: u64,
        t1: u64,
        by: By,
        package_of: impl Fn(u32) -> Option<usize>,
        usage: &mut [Usage],
    ) {
        usage.iter_mut().for_each(Usage::clear);
        for (cpu, line) in self.lines.iter().enumerate() {
            let Some(u) = package_of(cpu as u32).and_then(|p| usage.get_mut(p)) else {
                continue;
            };
            let mut seen = 0;
            let add = |start: u64, end: u64, tgid: u32, cgid: u64, u: &mut Usage| {
                let ns = overlap(start, end, t0, t1);
                if ns == 0 {
                    return 0;
                }
                let s = Slice {
                    start_ns: start,
                    end_ns: end,
                    cgid,
                    tgid,
                    cpu: cpu as u32,
                    comm: [0; 16],
                };
                match s.entity(by) {
                    Some(e) => *u.by_entity.entry(e).or_insert(0) += ns,
                    None => u.idle_ns += ns,
                }
                ns
            };
            for s in &line.closed {
                if s.start_ns >= t1 {
                    break;
                }
                seen += add(s.start_ns, s.end_ns, s.tgid, s.cgid, u);
            }
            if let Some(r) = line.running {
                // The running slice continues the last closed one; one that starts
                // before it is a stale read (the switch is already in the ring).
                if r.start_ns >= line.known_until {
                    if r.idle_from_ns != 0 {
                        let from = r.idle_from_ns.max(line.known_until);
                        seen += add(from, r.start_ns, 0, 0, u);
                    }
                    seen += add(r.start_ns, u64::MAX, r.tgid, r.cgid, u);
                }
            }
            u.unseen_ns += (t1.saturating_sub(t0)).saturating_sub(seen);
        }
    }

    /// Forgets the closed slices that end at or before `t`.
    pub fn forget_before(&mut self, t: u64) {
        for line in &mut self.lines {
            while line.closed.front().is_some_and(|s| s.end_ns <= t) {
                line.closed.pop_front();
            }
        }
    }

    /// The name the accounting saw for process `tgid` (its latest slice's thread
    /// name), if any: a name for a process that has already exited.
    pub fn comm(&self, tgid: u32) -> Option<&str> {
        let c = self.comms.get(&tgid)?;
        let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
        std::str::from_utf8(&c[..end]).ok()
    }

    /// Closed slices held.
    pub fn held(&self) -> usize {
        self.lines.iter().map(|l| l.closed.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(cpu: u32, start_ns: u64, end_ns: u64, tgid: u32, cgid: u64) -> Slice {
        let mut comm = [0; 16];
        comm[..4].copy_from_slice(b"test");
        Slice {
            start_ns,
            end_ns,
            cgid,
            tgid,
            cpu,
            comm,
        }
    }

    #[test]
    fn slices_are_cut_at_the_interval_and_the_running_one_counts() {
        let mut t = Timeline::new();
        t.push(slice(0, 0, 40, 7, 100));
        t.push(slice(0, 40, 60, 0, 1));
        t.push(slice(0, 60, 90, 8, 100));
        t.set_running(
            0,
            Running {
                start_ns: 90,
                cgid: 200,
                idle_from_ns: 0,
                tgid: 9,
            },
        );
        // CPU 1: nothing closed, something running since 30.
        t.set_running(
            1,
            Running {
                start_ns: 30,
                cgid: 200,
                idle_from_ns: 0,
                tgid: 9,
            },
        );
        let mut u = vec![Usage::default()];
        t.usage(20, 120, By::Process, |_| Some(0), &mut u);
        let e = &u[0].by_entity;
        assert_eq!(e[&Entity::Process(7)], 20);
        assert_eq!(e[&Entity::Process(8)], 30);
        assert_eq!(e[&Entity::Process(9)], 30 + 90);
        assert_eq!(u[0].idle_ns, 20);
        assert_eq!(u[0].unseen_ns, 10);
        t.usage(20, 120, By::Cgroup, |_| Some(0), &mut u);
        assert_eq!(u[0].by_entity[&Entity::Cgroup(100)], 50);
        assert_eq!(u[0].by_entity[&Entity::Cgroup(200)], 120);
        t.forget_before(60);
        assert_eq!(t.held(), 1);
        assert_eq!(t.comm(7), Some("test"));
        assert_eq!(t.comm(9), None);
    }

    #[test]
    fn the_idle_slice_before_the_running_task_is_idle_not_unseen() {
        let mut t = Timeline::new();
        t.push(slice(0, 0, 30, 7, 100));
        // Idle from 30 to 50 (the slot says so), then process 8 since 50.
        t.set_running(
            0,
            Running {
                start_ns: 50,
                cgid: 100,
                idle_from_ns: 30,
                tgid: 8,
            },
        );
        let mut u = vec![Usage::default()];
        t.usage(10, 70, By::Process, |_| Some(0), &mut u);
        assert_eq!(u[0].by_entity[&Entity::Process(7)], 20);
        assert_eq!(u[0].by_entity[&Entity::Process(8)], 20);
        assert_eq!(u[0].idle_ns, 20);
        assert_eq!(u[0].unseen_ns, 0);
        // Once process 8's record arrives with that idle slice, the slot read then
        // is stale and nothing is counted twice.
        t.push(slice(0, 30, 50, 0, 0));
        t.push(slice(0, 50, 60, 8, 100));
        t.usage(10, 70, By::Process, |_| Some(0), &mut u);
        assert_eq!(u[0].by_entity[&Entity::Process(8)], 10);
        assert_eq!(u[0].idle_ns, 20);
        assert_eq!(u[0].unseen_ns, 10);
    }

    #[test]
    fn a_stale_running_read_is_not_counted_twice_and_gaps_are_unseen() {
        let mut t = Timeline::new();
        t.set_running(
            0,
            Running {
                start_ns: 10,
                cgid: 1,
                idle_from_ns: 0,
                tgid: 5,
            },
        );
        t.push(slice(0, 10, 50, 5, 1));
        t.push(slice(0, 70, 80, 6, 1)); // 50..70 dropped
        let mut u = vec![Usage::default()];
        t.usage(0, 100, By::Process, |c| (c == 0).then_some(0), &mut u);
        assert_eq!(u[0].by_entity[&Entity::Process(5)], 40);
        assert_eq!(u[0].by_entity[&Entity::Process(6)], 10);
        assert_eq!(u[0].unseen_ns, 50);
    }
}
