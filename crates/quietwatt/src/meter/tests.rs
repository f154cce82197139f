use super::*;
use crate::counter::Wrap;
use crate::domain::Domain;
use crate::units::{EnergyUnit, Watts};
use std::path::PathBuf;

/// A source replaying scripted raw values.
struct Scripted {
    channels: Vec<Channel>,
    values: Vec<Vec<u64>>,
    next: usize,
}

impl Source for Scripted {
    fn mechanism(&self) -> Mechanism {
        Mechanism::Powercap
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn read(&mut self, out: &mut [u64]) -> crate::error::SourceResult<()> {
        out.copy_from_slice(&self.values[self.next]);
        self.next += 1;
        Ok(())
    }
}

fn channel(socket: u32, domain: Domain, modulus: u64) -> Channel {
    Channel {
        id: DomainId::new(socket, domain),
        unit: EnergyUnit::Microjoule,
        wrap: Wrap::Modulus(modulus),
        origin: PathBuf::from(format!("/fake/{socket}/{domain}")),
        limit: None,
    }
}

#[test]
fn report_corrects_wraps_and_totals_packages_plus_dram_only() {
    // A 1 kJ range: large against what 500 W can draw in the interval, so the
    // decrease is a wrap, not ambiguous with a restart (a 1 J range would be).
    let m = 1_000_000_000;
    let src = Scripted {
        channels: vec![
            channel(0, Domain::Package, m),
            channel(0, Domain::Core, m),
            channel(0, Domain::Dram, m),
        ],
        values: vec![vec![999_900_000, 100, 0], vec![100_000, 150_100, 250_000]],
        next: 0,
    };
    let mut meter = Meter::new(Box::new(src));
    meter.sample().unwrap();
    let (_, d) = meter.sample().unwrap();
    assert_eq!(d, &[200_000, 150_000, 250_000]);
    let r = meter.report();
    assert_eq!(r.domains[0].energy_j, Joules(0.2));
    assert_eq!(r.domains[0].wraps, 1);
    // core is inside package: the total is package + dram.
    assert!((r.total_energy_j.unwrap().0 - 0.45).abs() < 1e-12);
    assert_eq!(r.total_rule, "package + dram");
}

#[test]
fn a_reading_beyond_the_range_is_an_error_naming_the_counter() {
    let src = Scripted {
        channels: vec![channel(1, Domain::Package, 1000)],
        values: vec![vec![10], vec![5000]],
        next: 0,
    };
    let mut meter = Meter::new(Box::new(src));
    meter.sample().unwrap();
    let err = meter.sample().unwrap_err().to_string();
    assert!(
        err.contains("/fake/1/package") && err.contains("5000"),
        "{err}"
    );
}

#[test]
fn a_period_that_could_hide_a_wrap_is_warned_about() {
    let src = Scripted {
        channels: vec![channel(0, Domain::Package, 1_000_001)],
        values: vec![],
        next: 0,
    };
    let meter = Meter::new(Box::new(src));
    // 1 J range at 500 W wraps every 2 ms.
    assert!(meter.wrap_warnings(Duration::from_millis(1)).is_empty());
    let w = meter.wrap_warnings(Duration::from_millis(10));
    assert_eq!(w.len(), 1);
    assert!(
        w[0].contains("can wrap in 2.000 ms")
            && w[0].contains("period of 10.000 ms could hide a wrap"),
        "{}",
        w[0]
    );
}

/// A meter over `ids`, fed with `reads` (µJ counters of a 2^40 range) at `dt_ms`.
fn fed(ids: &[(u32, Domain)], reads: &[Vec<u64>], dt_ms: u64) -> EnergyReport {
    let src = Scripted {
        channels: ids.iter().map(|&(s, d)| channel(s, d, 1 << 40)).collect(),
        values: vec![],
        next: 0,
    };
    let mut meter = Meter::new(Box::new(src));
    for (i, r) in reads.iter().enumerate() {
        meter.feed(i as u64 * dt_ms * 1_000_000, r).unwrap();
    }
    meter.report()
}

#[test]
fn a_psys_that_reads_zero_leaves_the_total_to_packages_and_dram() {
    use Domain::*;
    let ids = [(0, Package), (0, Dram), (0, Psys), (1, Psys)];
    // The master is package 1: socket 0's psys reads 0 throughout.
    let reads: Vec<Vec<u64>> = (0..11u64)
        .map(|i| vec![i * 2_000_000, i * 500_000, 0, i * 3_000_000])
        .collect();
    let r = fed(&ids, &reads, 100);
    assert_eq!(r.total_rule, "psys (covers the platform)");
    assert_eq!(r.total_energy_j, Some(Joules(30.0)));
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("psys reads 0 on socket 0")),
        "{:?}",
        r.warnings
    );
    // Disabled everywhere: before, the total was 0 J "psys (covers the platform)".
    let reads: Vec<Vec<u64>> = (0..11u64)
        .map(|i| vec![i * 2_000_000, i * 500_000, 0, 0])
        .collect();
    let r = fed(&ids, &reads, 100);
    assert_eq!(r.total_rule, "package + dram");
    assert_eq!(r.total_energy_j, Some(Joules(25.0)));
    assert!(
        r.warnings.iter().any(|w| w.contains("did not move")),
        "{:?}",
        r.warnings
    );
    // psys alone and disabled: no total, not a 0.
    let r = fed(&[(0, Psys)], &vec![vec![0]; 5], 100);
    assert_eq!(r.total_energy_j, None);
    assert_eq!(r.total_rule, "none");
}

#[test]
fn a_psys_in_whole_joules_offers_the_finer_packages_plus_dram() {
    use Domain::*;
    // 50 ms at 54 W: psys moves in 1 J steps (SPR), package + dram in µJ.
    let reads: Vec<Vec<u64>> = (0..11u64)
        .map(|i| {
            vec![
                i * 250_000,
                i * 20_000,
                (i * 270_000) / 1_000_000 * 1_000_000 + if i > 4 { 1_000_000 } else { 0 },
            ]
        })
        .collect();
    let r = fed(&[(0, Package), (0, Dram), (0, Psys)], &reads, 5);
    let f = r.finer_total.as_ref().expect("a finer total");
    assert_eq!(f.rule, "package + dram");
    assert!((f.energy_j.0 - 2.7).abs() < 1e-9, "{f:?}");
    assert!(
        f.uncertainty_j.0 < 0.1 * r.total_uncertainty_j.unwrap().0,
        "{r:?}"
    );
    assert!(
        r.warnings.iter().any(|w| w.contains("coarse")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn core_above_package_is_dropped_interval_by_interval_and_reported() {
    use Domain::*;
    // Core advances 2 J an interval, its package 1 J: each interval's excess
    // is dropped (the next pays none of it back), and each is an event.
    let reads: Vec<Vec<u64>> = (0..11u64)
        .map(|i| vec![i * 1_000_000, i * 2_000_000])
        .collect();
    let r = fed(&[(0, Package), (0, Core)], &reads, 100);
    let core = &r.domains[1];
    // The package's advance each interval (the last interval's excess held back,
    // the others dropped): 10 J for the 20 J read.
    assert!((core.energy_j.0 - 10.0).abs() < 1e-4, "{core:?}");
    assert_eq!(core.anomalies, 9, "{core:?}");
    let above = r
        .counter_events
        .iter()
        .filter(|e| e.kind == "above_package")
        .count();
    assert_eq!(above, 9, "{:?}", r.counter_events);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("0/core") && w.contains("more than its package")),
        "{:?}",
        r.warnings
    );
    // A frozen package is the broken counter: core is not judged by it, and the
    // report names both.
    let reads: Vec<Vec<u64>> = (0..11u64).map(|i| vec![5_000_000, i * 1_000_000]).collect();
    let r = fed(&[(0, Package), (0, Core)], &reads, 100);
    assert_eq!(r.domains[1].energy_j, Joules(10.0));
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("0/core") && w.contains("exceeds 0/package")),
        "{:?}",
        r.warnings
    );
    // Within resolution: nothing dropped, no warning.
    let reads: Vec<Vec<u64>> = (0..11u64)
        .map(|i| vec![i * 1_000_000, i * 1_000_000 + 1])
        .collect();
    let r = fed(&[(0, Package), (0, Core)], &reads, 100);
    assert_eq!(r.domains[1].energy_j, Joules(10.0));
    assert!(r.counter_events.is_empty(), "{:?}", r.counter_events);
}

#[test]
fn a_core_jump_below_the_power_bound_is_dropped_and_a_read_skew_is_not() {
    use Domain::*;
    // 100 Hz, package 0.36 J and core 0.25 J per interval (36 W, 25 W).
    let truth = |i: u64| vec![i * 360_000, i * 250_000];
    // A 3 J core jump at reading 5: 300 W over 10 ms, under core's 450 W default
    // bound, so the counter alone counts it; its package says it cannot be.
    let reads: Vec<Vec<u64>> = (0..21u64)
        .map(|i| {
            let mut r = truth(i);
            if i >= 5 {
                r[1] += 3_000_000;
            }
            r
        })
        .collect();
    let r = fed(&[(0, Package), (0, Core)], &reads, 10);
    let core = &r.domains[1];
    // Truth 5.0 J; before this check 8.0 J. The jump's interval counts the
    // package's advance (0.36 J for 0.25 J), the excess is dropped.
    assert!((core.energy_j.0 - 5.11).abs() < 1e-3, "{core:?}");
    assert!(core.energy_j.0 - core.uncertainty_j.0 <= 5.0, "{core:?}");
    assert!(core.energy_j.0 + core.uncertainty_j.0 >= 5.0, "{core:?}");
    assert_eq!(core.anomalies, 1);
    let e: Vec<_> = r
        .counter_events
        .iter()
        .filter(|e| e.kind == "above_package")
        .collect();
    assert_eq!(e.len(), 1, "{:?}", r.counter_events);
    assert!((e[0].t_s - 0.05).abs() < 1e-9, "{e:?}");

    // Package 36 W, core 30 W; a reader stalled 8 ms between package and core at
    // reading 5: core leads by 0.24 J there (0.54 J against the package's 0.36)
    // and pays it back at reading 6. Nothing is lost.
    let reads: Vec<Vec<u64>> = (0..21u64)
        .map(|i| {
            let mut r = vec![i * 360_000, i * 300_000];
            if i == 5 {
                r[1] += 240_000;
            }
            r
        })
        .collect();
    let r = fed(&[(0, Package), (0, Core)], &reads, 10);
    assert_eq!(r.domains[1].energy_j, Joules(6.0));
    assert_eq!(r.domains[1].anomalies, 0);
    assert!(r.counter_events.is_empty(), "{:?}", r.counter_events);

    // Core ahead in the last interval: held back, inside the uncertainty.
    let mut reads: Vec<Vec<u64>> = (0..11u64).map(truth).collect();
    reads[10][1] += 1_000_000;
    let r = fed(&[(0, Package), (0, Core)], &reads, 10);
    let core = &r.domains[1];
    assert!(core.energy_j.0 <= 2.5 + 0.36, "{core:?}");
    assert!(core.energy_j.0 + core.uncertainty_j.0 >= 3.5, "{core:?}");
}

#[test]
fn a_reset_is_reported_with_its_time_and_counted_from_zero() {
    use Domain::*;
    let reads = vec![
        vec![9_000_000],
        vec![9_100_000],
        vec![40_000],
        vec![140_000],
    ];
    let r = fed(&[(0, Package)], &reads, 5);
    // 0.1 J, then 0.04 J since the restart, then 0.1 J.
    assert!((r.domains[0].energy_j.0 - 0.24).abs() < 1e-12, "{r:?}");
    assert_eq!(r.counter_events.len(), 1);
    let e = &r.counter_events[0];
    assert_eq!((e.kind, e.domain.as_str()), ("reset", "0/package"));
    assert!((e.t_s - 0.010).abs() < 1e-9);
    assert!(
        r.warnings.iter().any(|w| w.contains("restarted from 0")),
        "{:?}",
        r.warnings
    );
    // The lost part of the interval widens the uncertainty.
    assert!(r.domains[0].uncertainty_j.0 > 0.1, "{r:?}");
}

#[test]
fn a_run_shorter_than_the_update_interval_says_its_resolution_dominates() {
    use Domain::*;
    // 2 ms at 24 W with a counter updating every 1 ms: 48 mJ ± 24 mJ.
    let reads = vec![vec![0], vec![24_000], vec![48_000]];
    let r = fed(&[(0, Package)], &reads, 1);
    let u = r.total_uncertainty_j.unwrap().0;
    assert!(u >= 0.024 - 1e-9, "{r:?}");
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("resolution dominates")),
        "{:?}",
        r.warnings
    );
    // A counter read every 1 ms that updates every 50 ms: the interval observed.
    let reads: Vec<Vec<u64>> = (0..201u64).map(|i| vec![(i / 50) * 1_000_000]).collect();
    let r = fed(&[(0, Package)], &reads, 1);
    assert!(r.domains[0].update_interval_s >= 0.049, "{r:?}");
    assert!(r.domains[0].uncertainty_j.0 >= 0.049 * 20.0 - 1e-6, "{r:?}");
}

/// The counts the TPMI `power` PMU accumulates (`rapl_event_update` in
/// `drivers/powercap/intel_rapl_common.c`): `count += (s64)(new_raw - prev_raw) *
/// scale` on 32-bit raw values, no wrap fix.
fn tpmi(raws: &[u64], scale: u64) -> Vec<u64> {
    let mut count = 0u64;
    let mut out = vec![0];
    for w in raws.windows(2) {
        let d = (w[1] as i64).wrapping_sub(w[0] as i64);
        count = count.wrapping_add(d.wrapping_mul(scale as i64) as u64);
        out.push(count);
    }
    out
}

#[test]
fn the_meter_fed_a_tpmi_perf_count_across_a_hardware_wrap_reports_the_truth() {
    // Package at 20 W read every 100 ms by perf (2^-32 J counts) for 3 s, its 32-bit
    // register at 2^-16 J wrapping once. Before, the fall read as a 2^64 wrap:
    // +4.29 GJ.
    let step = (20.0 * 0.1 * 65536.0) as u64;
    let start = (1u64 << 32) - 10 * step;
    let raws: Vec<u64> = (0..31u64)
        .map(|i| (start + i * step) & 0xFFFF_FFFF)
        .collect();
    let counts = tpmi(&raws, 1 << 16);
    let src = Scripted {
        channels: vec![Channel {
            id: DomainId::new(0, Domain::Package),
            unit: EnergyUnit::Scale(1.0 / 4_294_967_296.0),
            wrap: Wrap::PERF,
            origin: PathBuf::from("power/energy-pkg"),
            limit: None,
        }],
        values: vec![],
        next: 0,
    };
    let mut meter = Meter::new(Box::new(src));
    for (i, &c) in counts.iter().enumerate() {
        meter.feed(i as u64 * 100_000_000, &[c]).unwrap();
    }
    let r = meter.report();
    assert_eq!(r.total_energy_j, Some(Joules(60.0)), "{r:?}");
    assert_eq!(r.domains[0].wraps, 1);
    assert!(r.counter_events.is_empty(), "{r:?}");
}

/// A meter built from the channels alone accounts fed readings exactly as a meter
/// reading a source does (wraps included), reports the source's mechanism and
/// notes, and refuses to read with a typed error rather than pretending to.
#[test]
fn a_meter_for_channels_is_fed_like_a_reading_one_and_cannot_read() {
    // A 1 kJ range: the decrease is a wrap (see report_corrects_wraps_...).
    let m = 1_000_000_000;
    let channels = vec![channel(0, Domain::Package, m), channel(0, Domain::Dram, m)];
    let values = vec![
        vec![999_900_000, 0],
        vec![100_000, 250_000],
        vec![300_000, 260_000],
    ];
    let mut reading = Meter::new(Box::new(Scripted {
        channels: channels.clone(),
        values: values.clone(),
        next: 0,
    }));
    let mut fed = Meter::for_channels(Mechanism::Powercap, channels, vec!["a note".into()]);
    for (k, v) in values.iter().enumerate() {
        let t = 1_000_000 * (k as u64 + 1);
        let want = reading.sample().map(|(_, d)| d.to_vec()).unwrap();
        assert_eq!(fed.feed(t, v).unwrap(), want.as_slice());
    }
    assert_eq!(fed.total_steps(), reading.total_steps());
    assert_eq!(fed.wraps(), vec![1, 0]);
    assert_eq!(fed.mechanism(), Mechanism::Powercap);
    assert_eq!(fed.notes(), ["a note".to_string()]);
    assert_eq!(fed.mode(), Mode::Polled);
    assert!(fed.read_cpus().is_empty() && fed.kernel_side().is_none());
    let e = fed.sample().unwrap_err();
    assert!(
        matches!(
            e,
            Error::NothingToRead {
                mechanism: "powercap"
            }
        ),
        "{e:?}"
    );
    // A fresh meter like it: the same channels, nothing accounted.
    let like = fed.like();
    assert_eq!(like.channels().len(), 2);
    assert_eq!(like.total_steps(), vec![0, 0]);
    assert_eq!(like.notes(), fed.notes());
    let mut like = reading.like();
    assert!(like.sample().is_err());
    assert_eq!(like.channels()[1].id, DomainId::new(0, Domain::Dram));
    // Described from a source: its label too (a stand-in's is its own).
    let described = Meter::describing(&Scripted {
        channels: vec![channel(0, Domain::Package, m)],
        values: Vec::new(),
        next: 0,
    });
    assert_eq!(
        (described.label(), described.channels().len()),
        ("powercap", 1)
    );
    assert_eq!(described.report().mechanism, "powercap");
}

#[test]
fn a_block_with_no_counter_update_is_bounded_by_what_the_domain_can_draw() {
    use Domain::*;
    // 300 µs, no update: before, 0 ± 1 µJ however much was drawn.
    let src = Scripted {
        channels: vec![Channel {
            limit: Some(Watts(37.5)),
            ..channel(0, Package, 1 << 40)
        }],
        values: vec![],
        next: 0,
    };
    let mut meter = Meter::new(Box::new(src));
    meter.feed(0, &[5_000_000]).unwrap();
    meter.feed(300_000, &[5_000_000]).unwrap();
    let r = meter.report();
    let d = &r.domains[0];
    assert_eq!(d.energy_j, Joules(0.0));
    // Twice the stated 37.5 W over 300 µs: 22.5 mJ, covering the ~6 mJ a 20 W
    // package draws.
    assert!(
        (d.uncertainty_j.0 - (75.0 * 300e-6 + 1e-6)).abs() < 1e-9,
        "{d:?}"
    );
    assert!(
        r.warnings.iter().any(|w| w.contains("did not move")
            && w.contains(&format!("{:.6}", d.uncertainty_j.0))),
        "{:?}",
        r.warnings
    );
    // One update of 20 mJ (20 W, 1 ms) inside 1.7 ms: 34 mJ were drawn; the
    // lag is bounded by the energy over the 0.7 ms the update certainly spans.
    let src = Scripted {
        channels: vec![channel(0, Package, 1 << 40)],
        values: vec![],
        next: 0,
    };
    let mut meter = Meter::new(Box::new(src));
    meter.feed(0, &[0]).unwrap();
    meter.feed(1_700_000, &[20_000]).unwrap();
    let d = &meter.report().domains[0];
    assert!(d.energy_j.0 + d.uncertainty_j.0 >= 0.034, "{d:?}");
}

/// A source whose readings change only every 200 ms (the reader service's
/// policy and the age of its readings): each figure's uncertainty holds that
/// much of the domain's energy, where the same readings from RAPL hold one
/// millisecond's.
#[test]
fn a_source_that_updates_slowly_widens_the_uncertainty_by_its_interval() {
    struct Slow(Scripted);
    impl Source for Slow {
        fn mechanism(&self) -> Mechanism {
            Mechanism::Socket
        }
        fn channels(&self) -> &[Channel] {
            self.0.channels()
        }
        fn read(&mut self, out: &mut [u64]) -> crate::error::SourceResult<()> {
            self.0.read(out)
        }
        fn update_interval(&self) -> Option<Duration> {
            Some(Duration::from_millis(200))
        }
    }
    let scripted = || Scripted {
        channels: vec![channel(0, Domain::Package, u64::MAX)],
        values: Vec::new(),
        next: 0,
    };
    let mut plain = Meter::describing(&scripted());
    let mut slow = Meter::describing(&Slow(scripted()));
    // 10 W, read every second for 3 s, 1 µJ steps.
    for (k, m) in [&mut plain, &mut slow].into_iter().enumerate() {
        for s in 0..4u64 {
            m.feed(s * 1_000_000_000, &[s * 10_000_000]).unwrap();
        }
        let d = &m.report().domains[0];
        assert_eq!(d.energy_j, Joules(30.0));
        let (u, update) = (d.uncertainty_j.0, d.update_interval_s);
        if k == 0 {
            assert!(u < 0.02 && update < 0.002, "RAPL-like: ± {u} J, {update} s");
        } else {
            assert!((update - 0.2).abs() < 1e-9, "{update} s");
            assert!((u - (1e-6 + 10.0 * 0.2)).abs() < 1e-6, "± {u} J");
        }
    }
    // A window over the slow meter's readings keeps its interval.
    assert!((slow.like().report().domains[0].update_interval_s - 0.2).abs() < 1e-9);
}
