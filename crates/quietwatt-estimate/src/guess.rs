//! Models that are guesses, not calibrations: a built-in table of per-CPU
//! power by microarchitecture, and a line from a TDP the user gives. Both say
//! so in every report, and state an error as wide as their basis deserves.

use crate::inputs::Input;
use crate::model::{
    blind_to, CpuIdentity, DomainModel, Fit, Origin, PowerModel, BUSY_CPUS, SCHEMA,
};

/// The share of a guess's full-load power stated as its error: the table's
/// servers and a TDP say little about one machine's package.
pub const GUESS_ERROR: f64 = 0.5;

/// vendor, family, models, name, W per CPU idle, W per CPU busy.
type Row = (&'static str, u32, &'static [u32], &'static str, f64, f64);

/// Watts per CPU idle and fully busy, by microarchitecture: Cloud Carbon
/// Footprint's coefficients (averages of SPECpower results of servers of
/// each microarchitecture, per vCPU, as its cloud-carbon-coefficients
/// notebook computes them). Whole-server figures spread per CPU, not RAPL's
/// package: a guess of the order of magnitude.
const TABLE: &[Row] = &[
    (
        "AuthenticAMD",
        0x17,
        &[0x01],
        "AMD EPYC 1st gen (Naples)",
        0.82,
        2.55,
    ),
    (
        "AuthenticAMD",
        0x17,
        &[0x31],
        "AMD EPYC 2nd gen (Rome)",
        0.47,
        1.64,
    ),
    (
        "AuthenticAMD",
        0x19,
        &[0x01],
        "AMD EPYC 3rd gen (Milan)",
        0.45,
        1.87,
    ),
    // Genoa: Milan's coefficients, as the table's users do for want of data.
    (
        "AuthenticAMD",
        0x19,
        &[0x11],
        "AMD EPYC 4th gen (Genoa, Milan's figures)",
        0.45,
        1.87,
    ),
    ("GenuineIntel", 6, &[0x3F], "Intel Haswell", 1.90, 5.99),
    ("GenuineIntel", 6, &[0x4F], "Intel Broadwell", 0.71, 3.54),
    // Skylake-SP and Cascade Lake share model 0x55; the lower of the two.
    (
        "GenuineIntel",
        6,
        &[0x55],
        "Intel Skylake / Cascade Lake",
        0.64,
        3.80,
    ),
];

/// The built-in table's guess for `cpu` with `cpus` CPUs, if it lists its
/// microarchitecture.
pub fn builtin(cpu: &CpuIdentity) -> Option<PowerModel> {
    let (_, _, _, name, min, max) = TABLE.iter().find(|(v, f, models, ..)| {
        *v == cpu.vendor && *f == cpu.family && models.contains(&cpu.model)
    })?;
    let n = f64::from(cpu.cpus.max(1));
    Some(guess(
        cpu,
        min * n,
        max - min,
        max * n,
        format!(
            "a guess from the built-in table ({name}: {min} W per CPU idle, {max} W busy; Cloud Carbon Footprint's SPECpower averages), not calibrated on this machine"
        ),
    ))
}

/// A TDP-based guess: a fifth of `tdp_w` idle, `tdp_w` with every CPU busy.
/// `tdp_w` is the power of the CPUs this machine has: on a VM, the share of
/// the host's TDP its vCPUs are.
pub fn tdp(cpu: &CpuIdentity, tdp_w: f64) -> PowerModel {
    let n = f64::from(cpu.cpus.max(1));
    guess(
        cpu,
        0.2 * tdp_w,
        0.8 * tdp_w / n,
        tdp_w,
        format!("a TDP-based guess ({tdp_w} W given: a fifth of it idle, all of it with every CPU busy), not calibrated on this machine"),
    )
}

fn guess(
    cpu: &CpuIdentity,
    idle_w: f64,
    per_busy_cpu_w: f64,
    full_w: f64,
    basis: String,
) -> PowerModel {
    PowerModel {
        schema: SCHEMA.into(),
        cpu: cpu.clone(),
        fit: Fit {
            inputs: vec![BUSY_CPUS.into()],
            domains: vec![DomainModel {
                domain: "package".into(),
                idle_w,
                per_busy_cpu_w,
                terms: Vec::new(),
                error_w: GUESS_ERROR * full_w,
                loo_rmse_w: 0.0,
                points: 0,
            }],
            blind_to: blind_to(&[Input::BusyCpus]),
        },
        origin: Origin::Guess { basis },
        simpler: Vec::new(),
        left_out: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(vendor: &str, family: u32, model: u32) -> CpuIdentity {
        CpuIdentity {
            vendor: vendor.into(),
            family,
            model,
            model_name: String::new(),
            cpus: 4,
        }
    }

    #[test]
    fn the_table_knows_milan_and_not_an_unknown_part() {
        let m = builtin(&cpu("AuthenticAMD", 0x19, 0x01)).unwrap();
        let p = m.domain("package").unwrap();
        assert!((p.idle_w - 1.8).abs() < 1e-9 && (p.per_busy_cpu_w - 1.42).abs() < 1e-9);
        // Half the full load's 7.48 W.
        assert!((p.error_w - 3.74).abs() < 1e-9);
        assert!(matches!(&m.origin, Origin::Guess { basis } if basis.contains("not calibrated")));
        assert!(builtin(&cpu("AuthenticAMD", 0x1A, 0x02)).is_none());
    }

    #[test]
    fn a_tdp_guess_spans_a_fifth_to_all_of_it() {
        let m = tdp(&cpu("GenuineIntel", 6, 0xCF), 100.0);
        let p = m.domain("package").unwrap();
        assert!((p.idle_w - 20.0).abs() < 1e-9);
        assert!((p.idle_w + 4.0 * p.per_busy_cpu_w - 100.0).abs() < 1e-9);
        assert!((p.error_w - 50.0).abs() < 1e-9);
    }
}
