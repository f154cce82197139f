//! A bounded set of per-entity counters for an exporter: the `n` entities that
//! used the most energy lately, each with its own counter, and everything else
//! in one `other` counter; however many processes or cgroups come and go.
//!
//! What a time-series database needs of them, and what [`Bounded::update`] keeps:
//!
//! - **at most `n` entity series**, plus `other`;
//! - **every counter never decreases**: an entity admitted to the set starts its
//!   counter at 0 (what it used before stays in `other`); an entity evicted from it
//!   hands its count to `other`, and its series ends;
//! - **conservation**: the entities' counters plus `other` equal every update's
//!   energy added up, exactly (integers).
//!
//! "Lately" is an exponentially weighted energy per update with a half-life of
//! [`Bounded::new`]'s `half_life` updates: a process that burst once gives way to
//! one that draws steadily, without the set churning at every update. While the
//! set has room, any entity that used energy is admitted at once; when full, a
//! newcomer replaces the member that used the least lately, and only if it used
//! more. The entities remembered outside the set are capped too (64 per member, at
//! least 4096; the lightest are forgotten first), so memory stays bounded however
//! many processes a second the machine starts.

use crate::splitter::EntityTotal;
use crate::timeline::Entity;
use std::collections::{BTreeMap, HashMap};

/// Below this weighted energy (µJ) an entity outside the set is forgotten: the
/// memory held follows the entities active lately, not all that ever ran.
const FORGET_UJ: f64 = 0.5;

/// The most entities remembered outside the set, per member (at least
/// [`MIN_REMEMBERED`]): a machine that starts a thousand short processes a second
/// would otherwise keep every one for the minutes its weight takes to decay.
const REMEMBERED_PER_MEMBER: usize = 64;
/// The least cap on the entities remembered outside the set.
const MIN_REMEMBERED: usize = 4096;

/// The exported counters (see the module's documentation).
#[derive(Debug, Clone)]
pub struct Bounded {
    n: usize,
    decay: f64,
    members: BTreeMap<Entity, EntityTotal>,
    other: EntityTotal,
    recent: HashMap<Entity, f64>,
}

impl Bounded {
    /// At most `n` entity counters (at least 1); lately means with a half-life of
    /// `half_life` updates (at least 1).
    pub fn new(n: usize, half_life: f64) -> Bounded {
        Bounded {
            n: n.max(1),
            decay: 0.5f64.powf(1.0 / half_life.max(1.0)),
            members: BTreeMap::new(),
            other: EntityTotal::default(),
            recent: HashMap::new(),
        }
    }

    /// Adds one update's energy and CPU time per entity (what each used since the
    /// last update), after choosing the set as the module says.
    pub fn update(&mut self, deltas: &BTreeMap<Entity, EntityTotal>) {
        for w in self.recent.values_mut() {
            *w *= self.decay;
        }
        for (e, d) in deltas {
            *self.recent.entry(*e).or_default() += d.total_uj() as f64;
        }
        let members = &self.members;
        self.recent
            .retain(|e, w| *w >= FORGET_UJ || members.contains_key(e));
        self.forget_the_lightest();
        let recent = &self.recent;
        let weight = |e: &Entity| recent.get(e).copied().unwrap_or(0.0);
        // Newcomers with energy this update, heaviest first.
        let mut newcomers: Vec<(f64, Entity)> = deltas
            .iter()
            .filter(|(e, d)| d.total_uj() > 0 && !self.members.contains_key(e))
            .map(|(e, _)| (weight(e), *e))
            .collect();
        newcomers.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for (w, e) in newcomers {
            if self.members.len() >= self.n {
                let Some((lw, least)) = self
                    .members
                    .keys()
                    .map(|m| (weight(m), *m))
                    .min_by(|a, b| a.0.total_cmp(&b.0).then(b.1.cmp(&a.1)))
                else {
                    break;
                };
                if lw >= w {
                    // The rest are lighter still.
                    break;
                }
                if let Some(gone) = self.members.remove(&least) {
                    self.other += &gone;
                }
            }
            self.members.insert(e, EntityTotal::default());
        }
        for (e, d) in deltas {
            *self.members.get_mut(e).unwrap_or(&mut self.other) += d;
        }
    }

    /// The entity counters, at most `n`.
    pub fn members(&self) -> impl Iterator<Item = (&Entity, &EntityTotal)> {
        self.members.iter()
    }

    /// Everything not counted in a member's counter.
    pub fn other(&self) -> &EntityTotal {
        &self.other
    }

    /// Entities remembered for choosing the set (members and those used lately).
    pub fn remembered(&self) -> usize {
        self.recent.len()
    }

    /// The most entities [`Bounded::remembered`] holds besides the members.
    pub fn remembered_cap(&self) -> usize {
        (self.n * REMEMBERED_PER_MEMBER).max(MIN_REMEMBERED)
    }

    /// Past the cap, keeps the members and the heaviest of the others: a light
    /// entity forgotten early can still be admitted later, on its weight from then.
    fn forget_the_lightest(&mut self) {
        let cap = self.remembered_cap();
        if self.recent.len() <= cap + self.members.len() {
            return;
        }
        let mut others: Vec<(f64, Entity)> = self
            .recent
            .iter()
            .filter(|(e, _)| !self.members.contains_key(e))
            .map(|(e, w)| (*w, *e))
            .collect();
        if others.len() <= cap {
            return;
        }
        // Heaviest first; ties by entity, so that the outcome does not depend on
        // the hash map's order.
        others.select_nth_unstable_by(cap, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, e) in &others[cap..] {
            self.recent.remove(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn uj(v: u64) -> EntityTotal {
        EntityTotal {
            dynamic_uj: v,
            idle_uj: v / 3,
            cpu_ns: v * 10,
        }
    }

    fn snapshot(b: &Bounded) -> BTreeMap<Option<Entity>, EntityTotal> {
        let mut m: BTreeMap<Option<Entity>, EntityTotal> =
            b.members().map(|(e, t)| (Some(*e), *t)).collect();
        m.insert(None, *b.other());
        m
    }

    #[test]
    fn a_steady_heavy_newcomer_replaces_the_lightest_member() {
        let mut b = Bounded::new(2, 2.0);
        let p = Entity::Process;
        b.update(&[(p(1), uj(100)), (p(2), uj(50))].into());
        assert_eq!(b.members().count(), 2);
        // Process 3 draws more than 2 from now on: it takes 2's place, and 2's count
        // goes to other; 3 starts at what it used in the update that admitted it.
        b.update(&[(p(1), uj(100)), (p(3), uj(400))].into());
        let s = snapshot(&b);
        assert_eq!(
            s.keys().flatten().copied().collect::<Vec<_>>(),
            [p(1), p(3)]
        );
        assert_eq!(s[&Some(p(3))], uj(400));
        assert_eq!(s[&None].dynamic_uj, 50);
        // A light newcomer does not displace anyone.
        b.update(&[(p(4), uj(1))].into());
        assert!(!snapshot(&b).contains_key(&Some(p(4))));
        assert_eq!(b.other().dynamic_uj, 51);
    }

    #[test]
    fn a_flood_of_short_lived_processes_is_remembered_within_the_cap() {
        // A build machine: 2000 new processes each update (30 s half-life at one
        // update a second), and one steady heavy process among them.
        let mut b = Bounded::new(3, 30.0);
        let cap = b.remembered_cap();
        let mut given = 0u64;
        let mut next = 1u32;
        for _ in 0..100 {
            let mut deltas: BTreeMap<Entity, EntityTotal> = BTreeMap::new();
            for _ in 0..2000 {
                next += 1;
                deltas.insert(Entity::Process(next), uj(1000));
            }
            deltas.insert(Entity::Process(1), uj(50_000));
            given += deltas.values().map(EntityTotal::total_uj).sum::<u64>();
            b.update(&deltas);
            assert!(
                b.remembered() <= cap + 3,
                "{} remembered, cap {cap} + 3 members",
                b.remembered()
            );
        }
        // Forgetting never loses a joule, and the steady process keeps its series.
        let counted = b.members().map(|(_, t)| t.total_uj()).sum::<u64>() + b.other().total_uj();
        assert_eq!(counted, given);
        assert!(b.members().any(|(e, _)| *e == Entity::Process(1)));
    }

    proptest! {
        /// Whatever comes: at most n series, no counter ever decreases, and the
        /// counters add up to everything that was given.
        #[test]
        fn counters_are_bounded_monotone_and_conserved(
            n in 1usize..5,
            updates in prop::collection::vec(
                prop::collection::btree_map(0u32..12, 0u64..1_000, 0..8), 1..40),
        ) {
            let mut b = Bounded::new(n, 3.0);
            let mut given = 0u64;
            let mut before = snapshot(&b);
            for u in updates {
                let deltas: BTreeMap<Entity, EntityTotal> =
                    u.iter().map(|(e, v)| (Entity::Process(*e), uj(*v))).collect();
                given += deltas.values().map(EntityTotal::total_uj).sum::<u64>();
                b.update(&deltas);
                let now = snapshot(&b);
                prop_assert!(now.len() <= n + 1);
                for (k, v) in &now {
                    if let Some(old) = before.get(k) {
                        prop_assert!(v.total_uj() >= old.total_uj() && v.cpu_ns >= old.cpu_ns);
                    }
                }
                prop_assert_eq!(now.values().map(EntityTotal::total_uj).sum::<u64>(), given);
                before = now;
            }
            prop_assert!(b.remembered() <= 12);
        }
    }
}
