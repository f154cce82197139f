//! A process tree from the kernel's forks: which processes descend from one.

use std::collections::{BTreeSet, HashMap};

/// The most processes a followed tree holds (the accounting program's `tree` map:
/// about 100 bytes of kernel memory each, allocated when a tree is followed).
pub const FOLLOWED: u32 = 1 << 14;

/// `pid` and every process descended from it, sorted, given each followed
/// process's parent (`(child, parent)` pairs, as the fork hook records them).
/// A process id reused within the tree (a parent link pointing back into the
/// descendants) is visited once.
pub fn descendants(pid: u32, parent_of: &[(u32, u32)]) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for &(child, parent) in parent_of {
        if child != parent {
            children.entry(parent).or_default().push(child);
        }
    }
    let mut seen = BTreeSet::from([pid]);
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).map_or(&[][..], Vec::as_slice) {
            if seen.insert(c) {
                todo.push(c);
            }
        }
    }
    seen.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::descendants;

    #[test]
    fn a_subtree_is_its_root_and_everything_below_it() {
        // 1 (quietwatt) started 10 (the command) and 99 (something else); 10
        // started 11 and 12; 12 started 13; 99 started 100.
        let forks = [
            (10, 1),
            (99, 1),
            (11, 10),
            (12, 10),
            (13, 12),
            (100, 99),
            (1, 0),
        ];
        assert_eq!(descendants(10, &forks), [10, 11, 12, 13]);
        assert_eq!(descendants(12, &forks), [12, 13]);
        assert_eq!(descendants(13, &forks), [13]);
        assert_eq!(descendants(1, &forks), [1, 10, 11, 12, 13, 99, 100]);
        // A pid that forked nothing, or is not in the tree: itself only.
        assert_eq!(descendants(500, &forks), [500]);
    }

    #[test]
    fn a_reused_pid_that_loops_back_is_visited_once() {
        assert_eq!(descendants(10, &[(11, 10), (10, 11)]), [10, 11]);
    }
}
