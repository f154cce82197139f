//! Call stacks as the kernel writes them into a sample, and a table that gives
//! each distinct stack a small id ([`StackId`]) so that samples stay small.
//!
//! A sample of `PERF_SAMPLE_TID | TIME | CPU | PERIOD | CALLCHAIN` is laid out
//! (include/uapi/linux/perf_event.h, `PERF_RECORD_SAMPLE`) as `u32 pid, tid; u64
//! time; u32 cpu, res; u64 period; u64 nr; u64 ips[nr]`. The call chain is leaf
//! first and carries context markers: `PERF_CONTEXT_KERNEL` before the kernel's
//! frames, `PERF_CONTEXT_USER` before user space's (the first user address is
//! where the task was when it entered the kernel or was interrupted).

use perf_event_open_sys::bindings::{PERF_CONTEXT_KERNEL, PERF_CONTEXT_MAX, PERF_CONTEXT_USER};
use std::collections::HashMap;

/// One call stack: the process it ran in and its frames, leaf first, as
/// instruction addresses (return addresses for all but the leaf of each part).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stack {
    /// The process (thread group) it was sampled in: what its user addresses mean
    /// depends on that process's mappings.
    pub pid: u32,
    /// Kernel frames, leaf first (empty when the sample was taken in user space,
    /// or kernel stacks were not asked for).
    pub kernel: Vec<u64>,
    /// User frames, leaf first (empty for a kernel thread).
    pub user: Vec<u64>,
}

/// One part's frames, root first, each with whether it is the part's leaf.
fn leaves(frames: &[u64], kernel: bool) -> impl Iterator<Item = (u64, bool, bool)> + '_ {
    frames
        .iter()
        .enumerate()
        .rev()
        .map(move |(i, &ip)| (ip, kernel, i == 0))
}

impl Stack {
    /// Frames root first, as [`Stack::root_first`], each with whether it is its
    /// part's leaf (index 0 of `user` or `kernel`: where the sample was taken in
    /// that space) rather than a return address, one instruction past a call.
    pub fn root_first_with_leaves(&self) -> impl Iterator<Item = (u64, bool, bool)> + '_ {
        leaves(&self.user, false).chain(leaves(&self.kernel, true))
    }

    /// Frames root first, as a flame graph stacks them: user space's outermost
    /// caller down to the kernel's leaf. `true` marks a kernel frame.
    pub fn root_first(&self) -> impl Iterator<Item = (u64, bool)> + '_ {
        self.root_first_with_leaves().map(|(ip, k, _)| (ip, k))
    }

    /// Whether it holds no frame at all.
    pub fn is_empty(&self) -> bool {
        self.kernel.is_empty() && self.user.is_empty()
    }
}

/// The index of a [`Stack`] in its [`StackTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackId(pub u32);

/// Every distinct stack seen, each once.
#[derive(Debug, Default, Clone)]
pub struct StackTable {
    stacks: Vec<Stack>,
    ids: HashMap<Stack, StackId>,
}

impl StackTable {
    /// An empty table.
    pub fn new() -> StackTable {
        StackTable::default()
    }

    /// The id of `stack`, added (copied) if new: a stack seen before costs a
    /// lookup, no allocation.
    pub fn intern(&mut self, stack: &Stack) -> StackId {
        if let Some(&id) = self.ids.get(stack) {
            return id;
        }
        let id = StackId(u32::try_from(self.stacks.len()).unwrap_or(u32::MAX));
        self.stacks.push(stack.clone());
        self.ids.insert(stack.clone(), id);
        id
    }

    /// The stack of `id` (`None` for an id of another table).
    pub fn get(&self, id: StackId) -> Option<&Stack> {
        self.stacks.get(id.0 as usize)
    }

    /// How many distinct stacks.
    pub fn len(&self) -> usize {
        self.stacks.len()
    }

    /// Whether no stack was added.
    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }
}

/// One stack sample: when, where, how much it weighs, and its stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackSample {
    /// CLOCK_MONOTONIC ns (the energy samples' clock: `use_clockid`).
    pub time_ns: u64,
    /// Process (thread group) id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The CPU it was taken on.
    pub cpu: u32,
    /// The event's count since the previous sample: ns of CPU time for
    /// cpu-clock, cycles for cycles. The sample's weight in the energy split.
    pub period: u64,
    /// Its stack in the table it was drained into.
    pub stack: StackId,
}

/// The fixed part of a sample record, before its call chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SampleHead {
    pub pid: u32,
    pub tid: u32,
    pub time_ns: u64,
    pub cpu: u32,
    pub period: u64,
}

/// Bytes before the call chain's addresses: pid, tid, time, cpu, res, period, nr.
pub(crate) const FIXED: usize = 40;

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// Parses a `PERF_RECORD_SAMPLE` body (without its header) of this profiler's
/// sample type into its head and `stack`'s frames (cleared first; `stack.pid`
/// set). `None` for a body too short for what it says it holds.
pub(crate) fn parse_sample(body: &[u8], stack: &mut Stack) -> Option<SampleHead> {
    let head = SampleHead {
        pid: u32_at(body, 0)?,
        tid: u32_at(body, 4)?,
        time_ns: u64_at(body, 8)?,
        cpu: u32_at(body, 16)?,
        period: u64_at(body, 24)?,
    };
    let nr = usize::try_from(u64_at(body, 32)?).ok()?;
    let ips = body.get(FIXED..FIXED.checked_add(nr.checked_mul(8)?)?)?;
    stack.pid = head.pid;
    stack.kernel.clear();
    stack.user.clear();
    #[derive(PartialEq)]
    enum Ctx {
        Kernel,
        User,
        Other,
    }
    // Before any marker (the kernel always writes one first) and in hypervisor or
    // guest contexts, which this profiler does not ask for: dropped.
    let mut ctx = Ctx::Other;
    for ip in ips.chunks_exact(8) {
        let ip = u64::from_ne_bytes(ip.try_into().ok()?);
        if ip >= PERF_CONTEXT_MAX {
            ctx = match ip {
                PERF_CONTEXT_KERNEL => Ctx::Kernel,
                PERF_CONTEXT_USER => Ctx::User,
                _ => Ctx::Other,
            };
            continue;
        }
        match ctx {
            Ctx::Kernel => stack.kernel.push(ip),
            Ctx::User => stack.user.push(ip),
            Ctx::Other => {}
        }
    }
    Some(head)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A sample body as the kernel writes it for this profiler's sample type.
    pub(crate) fn body(pid: u32, tid: u32, t: u64, cpu: u32, period: u64, ips: &[u64]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_ne_bytes());
        b.extend_from_slice(&tid.to_ne_bytes());
        b.extend_from_slice(&t.to_ne_bytes());
        b.extend_from_slice(&cpu.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b.extend_from_slice(&period.to_ne_bytes());
        b.extend_from_slice(&(ips.len() as u64).to_ne_bytes());
        for ip in ips {
            b.extend_from_slice(&ip.to_ne_bytes());
        }
        b
    }

    #[test]
    fn a_call_chain_is_split_at_its_context_markers_and_read_root_first() {
        let ips = [
            PERF_CONTEXT_KERNEL,
            0xffff_0001,
            0xffff_0002,
            PERF_CONTEXT_USER,
            0x1001,
            0x1002,
            0x1003,
        ];
        let mut s = Stack {
            pid: 0,
            kernel: vec![9],
            user: vec![9],
        };
        let h = parse_sample(&body(10, 11, 123, 1, 1_000_000, &ips), &mut s).unwrap();
        assert_eq!(
            h,
            SampleHead {
                pid: 10,
                tid: 11,
                time_ns: 123,
                cpu: 1,
                period: 1_000_000
            }
        );
        assert_eq!(
            (s.pid, &s.kernel[..], &s.user[..]),
            (
                10,
                &[0xffff_0001, 0xffff_0002][..],
                &[0x1001, 0x1002, 0x1003][..]
            )
        );
        let root: Vec<_> = s.root_first().collect();
        assert_eq!(
            root,
            vec![
                (0x1003, false),
                (0x1002, false),
                (0x1001, false),
                (0xffff_0002, true),
                (0xffff_0001, true)
            ]
        );
    }

    #[test]
    fn a_truncated_sample_is_refused_not_read_past_its_end() {
        let mut s = Stack {
            pid: 0,
            kernel: vec![],
            user: vec![],
        };
        let b = body(1, 1, 1, 0, 1, &[PERF_CONTEXT_USER, 0x10, 0x20]);
        assert!(parse_sample(&b[..b.len() - 1], &mut s).is_none());
        assert!(parse_sample(&b[..20], &mut s).is_none());
        // A count that would overflow the length.
        let mut huge = body(1, 1, 1, 0, 1, &[]);
        huge[32..40].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert!(parse_sample(&huge, &mut s).is_none());
        assert!(parse_sample(&b, &mut s).is_some());
        assert_eq!(s.user, vec![0x10, 0x20]);
    }

    #[test]
    fn equal_stacks_share_one_id() {
        let mut t = StackTable::new();
        let a = Stack {
            pid: 1,
            kernel: vec![],
            user: vec![1, 2],
        };
        let mut b = a.clone();
        b.pid = 2;
        let ia = t.intern(&a);
        assert_eq!(t.intern(&a), ia);
        assert_ne!(t.intern(&b), ia);
        assert_eq!((t.len(), t.get(ia)), (2, Some(&a)));
    }
}
