//! The splitting core from outside the crate, as the profiler (energy per call
//! stack) will use it: call stacks as the entities, weighted by their samples'
//! periods, with no I/O and no root. Every interval is conserved exactly, the idle
//! part is set apart, and the totals add up to the measured energy.

use quietwatt::domain::{Domain, DomainId};
use quietwatt::sink::Sample;
use quietwatt::units::Joules;
use quietwatt_attribution::{EnergySplitter, IdlePower, Row, RowKind, Usage};

/// A seeded xorshift: the same draws on every run.
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> XorShift {
        XorShift(seed.max(1))
    }
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A call stack: its frames, outermost first.
type Stack = Vec<&'static str>;

const FRAMES: [&str; 4] = ["main", "parse", "hash", "write"];

fn stack(rng: &mut XorShift) -> Stack {
    let depth = 1 + (rng.next_u64() % 3) as usize;
    (0..depth)
        .map(|_| FRAMES[(rng.next_u64() % 4) as usize])
        .collect()
}

#[test]
fn call_stacks_get_every_microjoule_of_every_interval() {
    for idle in [
        IdlePower::None,
        IdlePower::Configured(6.0),
        IdlePower::Fitted,
    ] {
        // One package of four CPUs, its package and DRAM channels.
        let mut s: EnergySplitter<Stack> = EnergySplitter::new(idle, vec![Some(0); 4]);
        s.set_channels(&[
            DomainId::new(0, Domain::Package),
            DomainId::new(0, Domain::Dram),
        ]);
        let mut rng = XorShift::new(25);
        let mut rows: Vec<Row<Stack>> = Vec::new();
        let (mut t_ns, mut measured_uj, mut idle_seen) = (0u64, 0u64, 0u64);
        for _ in 0..2_000 {
            let dt = 500_000 + rng.next_u64() % 1_500_000;
            t_ns += dt;
            // Whole µJ, so that the measured figure is known exactly: 5 to 25 W.
            let uj = dt * (5 + rng.next_u64() % 21) / 1_000;
            measured_uj += uj;
            let mut u = Usage::default();
            for _ in 0..rng.next_u64() % 6 {
                // Each stack sample's period: 1 ms of CPU time, cpu-clock style.
                *u.by_entity.entry(stack(&mut rng)).or_insert(0) += 1_000_000;
            }
            let energy = [Joules(uj as f64 / 1e6), Joules(0.001)];
            rows.clear();
            s.apply(
                &Sample {
                    t_ns,
                    interval_ns: dt,
                    missed: 0,
                    merged: 0,
                    freq_hz: 1000.0,
                    marks: Default::default(),
                    energy: &energy,
                },
                std::slice::from_ref(&u),
                Some(&mut rows),
            );
            let of = |f: &dyn Fn(&RowKind<Stack>) -> bool| -> u64 {
                rows.iter()
                    .filter(|r| f(&r.kind))
                    .map(|r| r.part.total_uj())
                    .sum()
            };
            let stacks = of(&|k| matches!(k, RowKind::Entity(_)));
            let unattributed = of(&|k| *k == RowKind::Unattributed);
            let total = of(&|k| *k == RowKind::Total);
            assert_eq!(total, uj, "the total row is the measured energy");
            assert_eq!(stacks + unattributed, uj, "{idle:?}: conserved, exactly");
            let idle_part = rows
                .iter()
                .find(|r| r.kind == RowKind::Total)
                .map_or(0, |r| r.part.idle_uj);
            if let IdlePower::Configured(w) = idle {
                let want = ((w * 1e6) as u64 * dt / 1_000_000_000).min(uj);
                assert_eq!(idle_part, want, "the idle part set apart");
            }
            idle_seen += idle_part;
            assert_eq!(of(&|k| *k == RowKind::Dram), 1_000, "DRAM is not split");
        }
        let t = s.totals();
        assert_eq!(t.energy_uj, measured_uj);
        assert_eq!(t.accounted_uj(), measured_uj);
        assert_eq!(t.idle_uj, idle_seen);
        assert_eq!(t.unbalanced, 0);
        // Every stack that was sampled has its share; a deeper stack is its own.
        assert!(t.entities.keys().any(|k| k.len() == 3));
        match idle {
            IdlePower::None => assert_eq!(t.idle_uj, 0),
            _ => assert!(t.idle_uj > 0, "{idle:?}: an idle part was set apart"),
        }
    }
}
