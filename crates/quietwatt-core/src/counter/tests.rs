use super::*;
use proptest::prelude::*;

const MS: u64 = 1_000_000;

/// 500 W with the default slack: the bound the defaults give a package.
fn pkg() -> Plausible {
    Plausible::at(Watts(500.0))
}

/// Feeds `(raw, t_ns)` pairs and returns the kinds after the first.
fn feed(c: &mut Counter, reads: &[(u64, u64)]) -> Vec<StepKind> {
    reads
        .iter()
        .map(|&(r, t)| c.update(r, t).unwrap().kind)
        .skip(1)
        .collect()
}

#[test]
fn wrap_is_corrected_with_the_mechanism_modulus() {
    // MSR: 32-bit field.
    let mut c = Counter::new(Wrap::Modulus(1 << 32), EnergyUnit::PowerOfTwo(16), pkg());
    c.update(u32::MAX as u64 - 9, 0).unwrap();
    let s = c.update(5, MS).unwrap();
    assert_eq!((s.steps, s.kind), (15, StepKind::Wrap));
    assert_eq!(c.wraps(), 1);
    // powercap: max_energy_range_uj + 1.
    let mut p = Counter::new(Wrap::Modulus(1_000_001), EnergyUnit::Microjoule, pkg());
    p.update(999_990, 0).unwrap();
    assert_eq!(p.update(10, MS).unwrap().steps, 21);
    // perf: its own 2^64.
    let mut q = Counter::new(Wrap::PERF, EnergyUnit::Scale(2f64.powi(-32)), pkg());
    q.update(u64::MAX - 1, 0).unwrap();
    assert_eq!(q.update(3, MS).unwrap().steps, 5);
}

#[test]
fn a_value_outside_the_range_is_an_error_not_a_zero() {
    let mut p = Counter::new(Wrap::Modulus(1000), EnergyUnit::Microjoule, pkg());
    p.update(10, 0).unwrap();
    assert_eq!(
        p.update(1000, MS),
        Err(OutOfRange {
            value: 1000,
            modulus: 1000
        })
    );
    assert_eq!(p.total_steps(), 0);
}

#[test]
fn long_runs_accumulate_without_float_drift() {
    // A million readings of a 2^-16 J counter wrapping every 2^20 steps (16 J).
    let m = 1u64 << 20;
    let mut c = Counter::new(Wrap::Modulus(m), EnergyUnit::PowerOfTwo(16), pkg());
    let step = 12_345u64;
    let mut raw = 0u64;
    c.update(raw, 0).unwrap();
    for i in 1..=1_000_000u64 {
        raw = (raw + step) % m;
        c.update(raw, i * MS).unwrap();
    }
    let exact = 1_000_000u128 * step as u128;
    assert_eq!(c.total_steps(), exact);
    assert_eq!(c.total().0, exact as f64 / 65536.0);
    assert!(c.wraps() > 10_000);
    assert_eq!(c.anomalies(), 0);
}

#[test]
fn a_powercap_step_back_of_half_a_joule_is_a_glitch_not_a_wrap() {
    // ESU 14 powercap: a 262 kJ range. Before: a 0.5 J step back was taken as a wrap
    // and added 262144.7 J (`package 262145.228851 J`).
    let range = 262_143_328_851u64;
    let mut c = Counter::new(Wrap::Modulus(range), EnergyUnit::Microjoule, pkg());
    let k = feed(
        &mut c,
        &[
            (100_000_000, 0),
            (100_100_000, 5 * MS),
            (99_600_000, 10 * MS),
            (99_700_000, 15 * MS),
        ],
    );
    assert_eq!(
        k,
        [StepKind::Forward, StepKind::BackStep, StepKind::Forward]
    );
    // 0.1 J + nothing for the glitch + 0.1 J after the rebase.
    assert_eq!(c.total_steps(), 200_000);
    assert_eq!(c.anomalies(), 1);
    assert_eq!(c.lost(), Duration::from_millis(5));
}

#[test]
fn a_restart_from_zero_counts_the_energy_since_the_restart() {
    let range = 65_532_610_988u64;
    let mut c = Counter::new(Wrap::Modulus(range), EnergyUnit::Microjoule, pkg());
    let k = feed(
        &mut c,
        &[
            (40_000_000_000, 0),
            (40_000_100_000, 5 * MS),
            (30_000, 10 * MS),
        ],
    );
    assert_eq!(k, [StepKind::Forward, StepKind::Reset]);
    assert_eq!(c.total_steps(), 130_000);
}

#[test]
fn a_small_step_back_is_not_taken_for_a_restart() {
    // A 75 W bound (a 37.5 W package's), read at 100 Hz: a counter holding 30 J that
    // steps back 0.5 J cannot have restarted (30 J in 10 ms is 3 kW) ...
    let range = 262_143_328_850u64;
    let bound = Plausible::at(Watts(75.0));
    let mut c = Counter::new(Wrap::Modulus(range), EnergyUnit::Microjoule, bound);
    let k = feed(
        &mut c,
        &[
            (30_000_000, 0),
            (30_100_000, 10 * MS),
            (29_600_000, 20 * MS),
        ],
    );
    assert_eq!(k, [StepKind::Forward, StepKind::BackStep]);
    assert_eq!(c.total_steps(), 100_000);
    // ... nor one holding 8 J that steps back 2 J (6 J would take 600 W).
    let mut d = Counter::new(Wrap::Modulus(range), EnergyUnit::Microjoule, bound);
    let k = feed(&mut d, &[(8_000_000, 0), (6_000_000, 10 * MS)]);
    assert_eq!(k, [StepKind::BackStep]);
    assert_eq!(d.total_steps(), 0);
    // A real restart holds what 10 ms can draw: counted.
    let mut e = Counter::new(Wrap::Modulus(range), EnergyUnit::Microjoule, bound);
    let k = feed(&mut e, &[(8_000_000, 0), (200_000, 10 * MS)]);
    assert_eq!(k, [StepKind::Reset]);
    assert_eq!(e.total_steps(), 200_000);
}

#[test]
fn a_decrease_of_a_tiny_counter_is_ambiguous_but_a_wrap_of_a_large_one_is_not() {
    // A 1 J range under a 75 W bound, read at 100 Hz: a reset anywhere would look
    // like a wrap (the tester's 18-bit counters read +13 % with no word).
    let bound = Plausible::at(Watts(75.0));
    let mut c = Counter::new(Wrap::Modulus(1_000_000), EnergyUnit::Microjoule, bound);
    let s = {
        c.update(900_000, 0).unwrap();
        c.update(100_000, 10 * MS).unwrap()
    };
    assert_eq!((s.kind, s.steps), (StepKind::Ambiguous, 200_000));
    assert_eq!((c.anomalies(), c.ambiguous()), (1, 1));
    // A real RAPL range (262 kJ): the same move near the top is a wrap.
    let range = 262_143_328_851u64;
    let mut d = Counter::new(Wrap::Modulus(range), EnergyUnit::Microjoule, bound);
    d.update(range - 100_000, 0).unwrap();
    let s = d.update(100_000, 10 * MS).unwrap();
    assert_eq!((s.kind, s.steps), (StepKind::Wrap, 200_000));
    assert_eq!((d.anomalies(), d.ambiguous()), (0, 0));
    let mut marks = Marks::default();
    marks.set(3, StepKind::Ambiguous);
    assert_eq!(marks.kind(3), Some(StepKind::Ambiguous));
    assert!(!marks.is_empty());
}

#[test]
fn an_implausible_forward_jump_counts_nothing() {
    let mut c = Counter::new(Wrap::Modulus(1 << 32), EnergyUnit::PowerOfTwo(16), pkg());
    // 10 kJ in 5 ms is 2 MW.
    let jump = 10_000u64 << 16;
    let k = feed(&mut c, &[(1000, 0), (2000, 5 * MS), (2000 + jump, 10 * MS)]);
    assert_eq!(k, [StepKind::Forward, StepKind::Jump]);
    assert_eq!(c.total_steps(), 1000);
}

#[test]
fn a_long_gap_still_admits_a_real_wrap() {
    // 2 s stopped at 20 W: 40 J across a wrap of a 65.5 kJ counter.
    let range = 65_532_610_988u64;
    let mut c = Counter::new(Wrap::Modulus(range), EnergyUnit::Microjoule, pkg());
    c.update(range - 10_000_000, 0).unwrap();
    let s = c.update(30_000_000, 2_000 * MS).unwrap();
    assert_eq!((s.kind, s.steps), (StepKind::Wrap, 40_000_000));
}

/// perf counts in 2^-32 J; one hardware wrap at 2^-16 J units is 2^48 counts.
const SCALE: EnergyUnit = EnergyUnit::Scale(1.0 / 4_294_967_296.0);

/// The count the TPMI PMU (`intel_rapl_common.c`, `rapl_event_update`) accumulates:
/// `count += (s64)(new_raw - prev_raw) * scale`, 32-bit raw values, no wrap fix.
fn tpmi_counts(raws: &[u64], scale: u64) -> Vec<u64> {
    let mut count = 0u64;
    let mut out = vec![0];
    for w in raws.windows(2) {
        let delta = (w[1] as i64).wrapping_sub(w[0] as i64);
        count = count.wrapping_add(delta.wrapping_mul(scale as i64) as u64);
        out.push(count);
    }
    out
}

/// The count `rapl.c` accumulates: the 32-bit difference sign-extended, shifted to
/// 2^-32 J (`delta = (new << 32) - (prev << 32); delta >>= 32; sdelta = delta <<
/// (32 - hw_unit)`).
fn rapl_c_counts(raws: &[u64], esu: u32) -> Vec<u64> {
    let mut count = 0u64;
    let mut out = vec![0];
    for w in raws.windows(2) {
        let delta = ((w[1] << 32) as i64).wrapping_sub((w[0] << 32) as i64) >> 32;
        count = count.wrapping_add((delta << (32 - esu)) as u64);
        out.push(count);
    }
    out
}

#[test]
fn a_tpmi_count_that_falls_at_a_hardware_wrap_is_one_wrap() {
    // 32-bit raw register at 2^-16 J, 20 W, read every 100 ms, wrapping once.
    let per_read = 20.0 * 0.1 * 65536.0;
    let start = (1u64 << 32) - 3 * per_read as u64;
    let raws: Vec<u64> = (0..8u64)
        .map(|i| (start + i * per_read as u64) & 0xFFFF_FFFF)
        .collect();
    let counts = tpmi_counts(&raws, 1 << 16);
    // The kernel's count is a signed sum: it falls at the wrap.
    assert!(counts.windows(2).any(|w| (w[1] as i64) < (w[0] as i64)));
    for hw_bits in [Some(48), None] {
        let mut c = Counter::new(Wrap::Perf { hw_bits }, SCALE, pkg());
        for (i, &n) in counts.iter().enumerate() {
            c.update(n, i as u64 * 100 * MS).unwrap();
        }
        // Truth: 7 reads × 2 J; before, the fall read as a 2^64 wrap: +4.29 GJ.
        assert_eq!(c.total(), Joules(14.0), "hw_bits {hw_bits:?}");
        assert_eq!((c.wraps(), c.anomalies()), (1, 0));
    }
}

#[test]
fn a_rapl_c_update_of_more_than_2_31_raw_steps_is_corrected_when_the_unit_is_known() {
    // 40 kJ between two reads 100 s apart (400 W) at 2^-16 J: 2.6e9 raw steps >
    // 2^31, which rapl.c adds as a negative amount.
    let raws = [1000u64, 1000 + 40_000 * 65536];
    let counts = rapl_c_counts(&raws, 16);
    assert!(
        counts[1] > counts[0] && counts[1] > 1 << 63,
        "a fall: {counts:?}"
    );
    let mut c = Counter::new(Wrap::Perf { hw_bits: Some(48) }, SCALE, pkg());
    c.update(counts[0], 0).unwrap();
    let s = c.update(counts[1], 100_000 * MS).unwrap();
    assert_eq!(s.kind, StepKind::Wrap);
    assert_eq!(c.total(), Joules(40_000.0));
}

#[test]
fn a_perf_fall_that_is_no_hardware_wrap_adds_nothing() {
    // A fall of 3 J in 10 ms: no 32-bit wrap of any unit explains it at 500 W.
    let mut c = Counter::new(Wrap::PERF, SCALE, pkg());
    let three = 3u64 << 32;
    c.update(100 << 32, 0).unwrap();
    let s = c.update((100 << 32) - three, 10 * MS).unwrap();
    assert_eq!((s.kind, s.steps), (StepKind::BackStep, 0));
}

#[test]
fn the_quantum_of_a_counter_stepping_in_whole_joules_is_seen() {
    // powercap µJ of a psys that counts whole joules (Sapphire Rapids).
    let mut c = Counter::new(Wrap::Modulus(1 << 40), EnergyUnit::Microjoule, pkg());
    for (i, j) in [0u64, 2, 3, 3, 5, 7, 8].iter().enumerate() {
        c.update(j * 1_000_000, i as u64 * 100 * MS).unwrap();
    }
    assert_eq!(c.quantum(), Joules(1.0));
    assert_eq!(c.intervals(), (6, 5));
}

#[test]
fn wrap_warning_triggers_when_one_period_can_hold_a_full_range() {
    let wrap = Wrap::Modulus(65_532_610_988); // max_energy_range_uj + 1 at ESU 16
    let unit = EnergyUnit::Microjoule;
    // 65.5 kJ at 500 W wraps in ~131 s.
    assert!(!period_may_hide_wraps(
        wrap,
        unit,
        Watts(500.0),
        Duration::from_secs(100)
    ));
    assert!(period_may_hide_wraps(
        wrap,
        unit,
        Watts(500.0),
        Duration::from_secs(140)
    ));
    let p = wrap.period_at(unit, Watts(500.0)).as_secs_f64();
    assert!((p - 131.07).abs() < 0.01, "{p}");
    // perf: one hardware wrap, not 2^64 counts (which would be 248 days at 200 W).
    let perf = Wrap::PERF.period_at(SCALE, Watts(500.0)).as_secs_f64();
    assert!((perf - 131.07).abs() < 0.01, "{perf}");
}

proptest! {
    /// Plausible advances with any number of single wraps between reads sum exactly.
    #[test]
    fn plausible_advances_sum_exactly_across_wraps(
        modulus in 1_000u64..(1 << 40),
        start in any::<u64>(),
        steps in prop::collection::vec((0u64..200, 1u64..2_000), 1..300),
    ) {
        // 100 W over intervals of 1..2000 ms, in µJ: at most one wrap per read
        // because each advance is kept below the modulus.
        let mut c = Counter::new(Wrap::Modulus(modulus), EnergyUnit::Microjoule, pkg());
        let mut raw = start % modulus;
        let mut t = 0u64;
        let mut truth = 0u128;
        c.update(raw, t).unwrap();
        for (watts, ms) in steps {
            let adv = (watts * ms * 1000).min(modulus - 1);
            raw = ((raw as u128 + adv as u128) % modulus as u128) as u64;
            t += ms * MS;
            truth += adv as u128;
            let kind = c.update(raw, t).unwrap().kind;
            // A tiny range read slowly under a changing power is ambiguous (a
            // restart would look the same), never a reset, step back or jump, and
            // it still counts the wrap's advance.
            prop_assert!(
                matches!(kind, StepKind::Forward | StepKind::Wrap | StepKind::Ambiguous),
                "{:?}", kind
            );
        }
        prop_assert_eq!(c.total_steps(), truth);
    }

    /// Whatever the readings (glitches, resets, garbage within range), no interval
    /// adds more than the plausible bound.
    #[test]
    fn no_interval_ever_adds_more_than_the_plausible_bound(
        modulus in 1_000u64..u64::MAX,
        reads in prop::collection::vec((any::<u64>(), 0u64..5_000), 2..200),
        perf in any::<bool>(),
    ) {
        let wrap = if perf { Wrap::PERF } else { Wrap::Modulus(modulus) };
        let plausible = pkg();
        let mut c = Counter::new(wrap, EnergyUnit::Microjoule, plausible);
        let mut t = 0u64;
        let mut bound_sum = 0u128;
        for (i, (raw, ms)) in reads.into_iter().enumerate() {
            let raw = if perf { raw } else { raw % modulus };
            t += ms * MS;
            let s = c.update(raw, t).unwrap();
            prop_assert!(s.steps <= s.bound || i == 0);
            // The bound itself is what the domain can draw over the interval.
            let max = 500.0 * (ms as f64 / 1e3 + Plausible::SLACK.as_secs_f64()) * 1e6;
            prop_assert!(s.steps as f64 <= max + 1.0);
            bound_sum += s.bound as u128;
        }
        prop_assert!(c.total_steps() <= bound_sum);
    }
}
