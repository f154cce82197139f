//! The attribution model: how one interval's package energy is split.
//!
//! For each energy sample and each package, with `E` the measured package energy
//! of the interval (whole µJ), `dt` its length and `n` the package's CPUs:
//!
//! - **idle part** `I = min(E, P_idle × dt)`, with `P_idle` the package's idle
//!   power as configured, or fitted ([`IdlePower`]; labelled in the output); 0
//!   without one.
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
    /// Fitted: the intercept of a least-squares line of the package's power on its
    /// number of busy CPUs (CPU time over the interval), over the intervals so far.
    /// Each interval uses the fit of the intervals before it (none until
    /// [`FIT_MIN_INTERVALS`] intervals with a spread of load: then no idle part).
    Fitted,
}

/// Intervals a fitted idle power needs before it is used.
pub const FIT_MIN_INTERVALS: u64 = 20;
/// The least variance of the busy-CPU count over those intervals for a fit: a load
/// that never changes says nothing about the intercept.
pub const FIT_MIN_VARIANCE: f64 = 0.01;

/// Running sums of a least-squares line y = a + b x.
#[derive(Debug, Default, Clone, Copy)]
struct Line {
    n: f64,
    sx: f64,
    sy: f64,
    sxx: f64,
    sxy: f64,
}

impl Line {
    fn add(&mut self, x: f64, y: f64) {
        self.n += 1.0;
        self.sx += x;
        self.sy += y;
        self.sxx += x * x;
        self.sxy += x * y;
    }

    /// (intercept, slope), when there are enough points with a spread of x.
    fn fit(&self) -> Option<(f64, f64)> {
        if self.n < FIT_MIN_INTERVALS as f64 {
            return None;
        }
        let mx = self.sx / self.n;
        let var = self.sxx / self.n - mx * mx;
        if var.is_nan() || var < FIT_MIN_VARIANCE {
            return None;
        }
        let b = (self.sxy / self.n - mx * self.sy / self.n) / var;
        let a = self.sy / self.n - b * mx;
        (a.is_finite() && b.is_finite()).then_some((a, b))
    }
}

impl IdlePower {
    /// A package's idle power as a person writes it: watts (`10`, `10W`, 0 to
    /// 10 000), or `fit`; the error says what to give.
    pub fn parse(s: &str) -> Result<IdlePower, String> {
        if s.eq_ignore_ascii_case("fit") {
            return Ok(IdlePower::Fitted);
        }
        match s.trim_end_matches(['W', 'w']).parse::<f64>() {
            Ok(w) if w.is_finite() && (0.0..=10_000.0).contains(&w) => Ok(IdlePower::Configured(w)),
            _ => Err(format!(
                "'{s}': give the package's idle power in watts (0 to 10000), or `fit`"
            )),
        }
    }

    /// µW, or 0 without a model.
    pub fn microwatts(self) -> u64 {
        match self {
            IdlePower::None | IdlePower::Fitted => 0,
            IdlePower::Configured(w) if w.is_finite() && w > 0.0 => (w * 1e6).round() as u64,
            IdlePower::Configured(_) => 0,
        }
    }

    /// How the output labels it.
    pub fn label(self) -> String {
        match self {
            IdlePower::None => "none (every joule is dynamic)".to_string(),
            IdlePower::Configured(w) => format!("configured: {w} W per package"),
            IdlePower::Fitted => "fitted: the intercept of a least-squares line of each package's \
                power on its busy CPUs, each interval using the intervals before it"
                .to_string(),
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
    /// Power on busy CPUs, when the idle power is fitted.
    fit: Option<Line>,
    splitter: Splitter,
    weights: Vec<u64>,
    out: Vec<u64>,
}

impl Model {
    /// A model with this idle power.
    pub fn new(idle: IdlePower) -> Model {
        Model {
            idle_uw: idle.microwatts(),
            fit: (idle == IdlePower::Fitted).then(Line::default),
            ..Model::default()
        }
    }

    /// The fitted idle power so far, watts, with the intervals it rests on (`None`
    /// unless fitted, and until there is a fit).
    pub fn fitted_idle(&self) -> Option<(f64, u64)> {
        let l = self.fit?;
        l.fit().map(|(a, _)| (a, l.n as u64))
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
        if let Some(line) = &mut self.fit {
            // The fit of the intervals before this one: this one's energy does not
            // set its own idle part.
            self.idle_uw = line
                .fit()
                .map_or(0, |(a, _)| (a.max(0.0) * 1e6).round() as u64);
            if dt_ns > 0 {
                let busy: u128 = cpu_ns.iter().map(|&c| u128::from(c)).sum();
                line.add(
                    busy as f64 / dt_ns as f64,
                    energy_uj as f64 * 1e3 / dt_ns as f64,
                );
            }
        }
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
    use quietwatt_stats::rng::XorShift;

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

    /// Power = 10 W + 5 W per busy CPU: the fit finds 10 W once the load has
    /// varied, and the intervals after it set 10 W apart; conservation holds
    /// throughout, before the fit too.
    #[test]
    fn a_fitted_idle_power_is_the_intercept_of_power_on_busy_cpus() {
        let mut m = Model::new(IdlePower::Fitted);
        let mut s = Split::default();
        let mut rng = XorShift::new(7);
        for i in 0..200u64 {
            let dt = 1_000_000;
            let busy = [rng.next_u64() % (dt + 1), rng.next_u64() % (dt + 1)];
            let e = 10_000 + 5 * (busy[0] + busy[1]) / 1000;
            m.split(e, dt, 2, &busy, &mut s);
            assert_eq!(s.accounted_uj(), e);
            if i < FIT_MIN_INTERVALS {
                assert_eq!(s.idle_uj, 0, "no idle part before the fit");
            }
        }
        let (w, n) = m.fitted_idle().unwrap();
        assert!((w - 10.0).abs() < 0.01, "fitted {w} W");
        assert_eq!(n, 200);
        assert!((s.idle_uj as i64 - 10_000).abs() <= 10, "{}", s.idle_uj);
        // A load that never changes: no fit, no idle part.
        let mut flat = Model::new(IdlePower::Fitted);
        for _ in 0..100 {
            flat.split(20_000, 1_000_000, 2, &[1_000_000, 1_000_000], &mut s);
        }
        assert!(flat.fitted_idle().is_none());
        assert_eq!(s.idle_uj, 0);
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
