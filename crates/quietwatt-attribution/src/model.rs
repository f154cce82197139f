//! The attribution model: how one interval's package energy is split.
//!
//! For each energy sample and each package, with `E` the measured package energy
//! of the interval (whole µJ), `dt` its length and `n` the package's CPUs:
//!
//! - **idle part** `I = min(E, P_idle × dt)`, with `P_idle` the package's idle
//!   power as configured ([`IdlePower`]; labelled in the output); 0 without one.
//! - **dynamic part** `D = E − I`, split among the entities that ran on the
//!   package's CPUs in the interval in proportion to their CPU time. If nothing
//!   but the idle task ran, `D` stays unattributed.
//! - **idle share**: `I` is split in proportion to CPU time over the package's
//!   capacity `n × dt`: an entity that held one CPU of two for the whole interval
//!   gets half of `I`; the share of the CPUs' idle time (and of time the accounting
//!   could not see) stays unattributed.
//!
//! Both splits are exact in integers ([`crate::split`]), so for every interval
//! `Σ entities (dynamic + idle) + unattributed == E`, and so in total.

use crate::split::Splitter;

/// The package's idle power, which the model sets apart before splitting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IdlePower {
    /// No idle model: the whole energy is dynamic.
    None,
    /// Configured by the user, watts per package.
    Configured(f64),
}

impl IdlePower {
    /// µW, or 0 without a model.
    pub fn microwatts(self) -> u64 {
        match self {
            IdlePower::None => 0,
            IdlePower::Configured(w) if w.is_finite() && w > 0.0 => (w * 1e6).round() as u64,
            IdlePower::Configured(_) => 0,
        }
    }

    /// How the output labels it.
    pub fn label(self) -> String {
        match self {
            IdlePower::None => "none (every joule is dynamic)".to_string(),
            IdlePower::Configured(w) => format!("configured: {w} W per package"),
        }
    }
}

/// One entity's part of one interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Part {
    /// Its share of the dynamic part, µJ.
    pub dynamic_uj: u64,
    /// Its share of the idle part, µJ.
    pub idle_uj: u64,
}

impl Part {
    /// Dynamic plus idle, µJ.
    pub fn total_uj(&self) -> u64 {
        self.dynamic_uj + self.idle_uj
    }
}

/// One interval of one package, split.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// The measured energy `E`, µJ.
    pub energy_uj: u64,
    /// The idle part `I`, µJ.
    pub idle_uj: u64,
    /// Each entity's part, in the order of the CPU times given.
    pub parts: Vec<Part>,
    /// What no entity got: the dynamic part when nothing ran, and the idle part's
    /// share of idle (and unseen) CPU time, µJ.
    pub unattributed: Part,
}

impl Split {
    /// Σ parts + unattributed: equal to `energy_uj` by construction.
    pub fn accounted_uj(&self) -> u64 {
        self.parts.iter().map(Part::total_uj).sum::<u64>() + self.unattributed.total_uj()
    }
}

/// Splits intervals, reusing its buffers.
#[derive(Debug, Default)]
pub struct Model {
    idle_uw: u64,
    splitter: Splitter,
    weights: Vec<u64>,
    out: Vec<u64>,
}

impl Model {
    /// A model with this idle power.
    pub fn new(idle: IdlePower) -> Model {
        Model {
            idle_uw: idle.microwatts(),
            ..Model::default()
        }
    }

    /// Splits `energy_uj` measured over `dt_ns` on a package of `cpus` CPUs among
    /// entities that ran `cpu_ns[i]` each (the idle task not among them), into
    /// `split` (its buffers reused).
    pub fn split(
        &mut self,
        energy_uj: u64,
        dt_ns: u64,
        cpus: u32,
        cpu_ns: &[u64],
        split: &mut Split,
    ) {
        let n = cpu_ns.len();
        let idle_wanted = u128::from(self.idle_uw) * u128::from(dt_ns) / 1_000_000_000;
        let idle_uj = u64::try_from(idle_wanted)
            .unwrap_or(u64::MAX)
            .min(energy_uj);
        let dynamic_uj = energy_uj - idle_uj;
        split.energy_uj = energy_uj;
        split.idle_uj = idle_uj;
        split.parts.clear();
        split.parts.resize(n, Part::default());
        self.out.clear();
        self.out.resize(n + 1, 0);

        // Dynamic: by CPU time among the entities.
        let given = self.splitter.split(dynamic_uj, cpu_ns, &mut self.out[..n]);
        for (p, &o) in split.parts.iter_mut().zip(&self.out) {
            p.dynamic_uj = o;
        }
        split.unattributed.dynamic_uj = dynamic_uj - given;

        // Idle: by CPU time over the capacity; the rest is the idle CPUs' share.
        let capacity = u128::from(dt_ns) * u128::from(cpus.max(1));
        let used: u128 = cpu_ns.iter().map(|&c| u128::from(c)).sum();
        self.weights.clear();
        self.weights.extend_from_slice(cpu_ns);
        // Entities may have run longer than the capacity (clock skew between the
        // kernel's stamps and the sample's): then idle is split among them alone.
        self.weights
            .push(u64::try_from(capacity.saturating_sub(used)).unwrap_or(u64::MAX));
        let given = self.splitter.split(idle_uj, &self.weights, &mut self.out);
        for (p, &o) in split.parts.iter_mut().zip(&self.out) {
            p.idle_uj = o;
        }
        split.unattributed.idle_uj = self.out[n] + (idle_uj - given);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quietwatt::rng::XorShift;

    #[test]
    fn one_busy_cpu_of_two_gets_the_dynamic_part_and_half_the_idle() {
        let mut m = Model::new(IdlePower::Configured(10.0));
        let mut s = Split::default();
        // 1 ms at 15 W: 15000 µJ, idle 10000 µJ.
        m.split(15_000, 1_000_000, 2, &[1_000_000], &mut s);
        assert_eq!(s.idle_uj, 10_000);
        assert_eq!(
            s.parts[0],
            Part {
                dynamic_uj: 5_000,
                idle_uj: 5_000
            }
        );
        assert_eq!(
            s.unattributed,
            Part {
                dynamic_uj: 0,
                idle_uj: 5_000
            }
        );
        // Below the idle power: everything is idle, nothing dynamic.
        m.split(8_000, 1_000_000, 2, &[1_000_000], &mut s);
        assert_eq!((s.idle_uj, s.parts[0].dynamic_uj), (8_000, 0));
        // Nothing ran: the dynamic part is unattributed.
        m.split(15_000, 1_000_000, 2, &[], &mut s);
        assert_eq!(s.unattributed.total_uj(), 15_000);
    }

    /// Conservation on every row of random intervals: entities + unattributed ==
    /// the measured energy, exactly.
    #[test]
    fn every_random_interval_is_conserved_exactly() {
        let mut rng = XorShift::new(0x5eed);
        for idle in [
            IdlePower::None,
            IdlePower::Configured(7.5),
            IdlePower::Configured(1e4),
        ] {
            let mut m = Model::new(idle);
            let mut s = Split::default();
            for _ in 0..20_000 {
                let e = rng.next_u64() % 10_000_000;
                let dt = rng.next_u64() % 5_000_000_000;
                let cpus = (rng.next_u64() % 8) as u32 + 1;
                let n = (rng.next_u64() % 12) as usize;
                let ns: Vec<u64> = (0..n).map(|_| rng.next_u64() % (dt + 2)).collect();
                m.split(e, dt, cpus, &ns, &mut s);
                assert_eq!(
                    s.accounted_uj(),
                    e,
                    "{idle:?} e={e} dt={dt} cpus={cpus} ns={ns:?}"
                );
                assert!(s.idle_uj <= e);
            }
        }
    }
}
