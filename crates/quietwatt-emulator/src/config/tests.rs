use super::*;

#[test]
fn default_is_valid_and_round_trips_through_json() {
    let c = EmulatorConfig::default();
    c.validate().unwrap();
    let json = serde_json::to_string(&c).unwrap();
    assert!(json.contains("\"update_interval\":\"1ms\""), "{json}");
    let back: EmulatorConfig = serde_json::from_str(&json).unwrap();
    assert_eq!(back, c);
    EmulatorConfig::amd().validate().unwrap();
}

#[test]
fn power_spec_sets_defaults_sockets_and_platform() {
    let mut c = EmulatorConfig::default().with_sockets(2);
    c.power
        .apply("package=30, core=15,1/dram=6W,platform=8")
        .unwrap();
    assert_eq!(c.watts(0, Domain::Package), Some(30.0));
    assert_eq!(c.watts(1, Domain::Core), Some(15.0));
    assert_eq!(c.watts(0, Domain::Dram), Some(4.0));
    assert_eq!(c.watts(1, Domain::Dram), Some(6.0));
    c.domains.psys = true;
    assert_eq!(
        c.watts(0, Domain::Psys),
        Some(30.0 + 4.0 + 30.0 + 6.0 + 8.0)
    );
    assert_eq!(c.watts(1, Domain::Psys), None);
    assert_eq!(c.zone_watts(1, Domain::Core), Some(15.0));
    assert_eq!(EmulatorConfig::amd().zone_watts(0, Domain::Core), Some(1.5));
    for bad in [
        "package",
        "package=x",
        "gpu0=3",
        "psys=3",
        "1/platform=2",
        "x/core=1",
        "core=-1",
    ] {
        assert!(c.power.apply(bad).is_err(), "{bad}");
    }
}

#[test]
fn validation_explains() {
    let amd_dram = EmulatorConfig {
        domains: Domains::INTEL,
        ..EmulatorConfig::amd()
    };
    assert!(amd_dram.validate().unwrap_err().to_string().contains("AMD"));
    let hot_core = EmulatorConfig::default().with_power("core=30").unwrap();
    assert!(hot_core.validate().is_err());
    assert!(EmulatorConfig::default()
        .with_counter_bits(4)
        .validate()
        .is_err());
}

/// Readers must not assume psys lives on package 0: the master is settable,
/// a master that does not exist is refused with the fix, and psys faults
/// target the master.
#[test]
fn psys_master_and_disabled_psys_validate() {
    let c = EmulatorConfig::default()
        .with_sockets(2)
        .with_psys_master(1);
    c.validate().unwrap();
    assert!(c.has(1, Domain::Psys) && !c.has(0, Domain::Psys));
    assert_eq!(c.counters().last(), Some(&(1, Domain::Psys)));
    assert!(c.watts(1, Domain::Psys).is_some() && c.watts(0, Domain::Psys).is_none());
    let json = serde_json::to_string(&c).unwrap();
    assert_eq!(serde_json::from_str::<EmulatorConfig>(&json).unwrap(), c);

    let e = EmulatorConfig::default()
        .with_sockets(2)
        .with_psys_master(2)
        .validate()
        .unwrap_err()
        .to_string();
    assert!(e.contains("psys_master = 2") && e.contains("0 to 1"), "{e}");
    let off = EmulatorConfig {
        psys_disabled: true,
        ..EmulatorConfig::default()
    };
    let e = off.validate().unwrap_err().to_string();
    assert!(e.contains("--psys"), "{e}");
    EmulatorConfig::default()
        .with_psys_disabled()
        .validate()
        .unwrap();
    let wrong = c.clone().with_fault("reset:0/psys".parse().unwrap());
    let e = wrong.validate().unwrap_err().to_string();
    assert!(e.contains("psys master, socket 1"), "{e}");
    // A config.json written before these fields existed still loads.
    let mut v: serde_json::Value = serde_json::to_value(EmulatorConfig::default()).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("psys_master");
    o.remove("psys_disabled");
    let old: EmulatorConfig = serde_json::from_value(v).unwrap();
    assert_eq!(old, EmulatorConfig::default());
}

/// A step larger than half the counter's range would read as a wrap the other
/// way: an explicit amount that large is refused, the default jump is cut.
#[test]
fn step_amounts_stay_under_half_the_range() {
    let c = EmulatorConfig::default();
    let jump: Fault = "jump:0/package".parse().unwrap();
    // 10000 J at ESU 14 (2^-14 J counts), under the 2^31-count half range.
    assert_eq!(c.step_counts(&jump), Some(10_000 << 14));
    let back: Fault = "backstep:0/package".parse().unwrap();
    assert_eq!(c.step_counts(&back), Some(8192));
    // 16-bit counters at ESU 14 hold 4 J: the default jump is cut under 2 J.
    let small = EmulatorConfig::default().with_counter_bits(16);
    assert_eq!(small.step_counts(&jump), Some((1 << 15) - 1));
    small.clone().with_fault(jump).validate().unwrap();
    let e = small
        .with_fault("jump=3:0/package".parse().unwrap())
        .validate()
        .unwrap_err()
        .to_string();
    assert!(e.contains("half") && e.contains("smaller amount"), "{e}");
    assert!(c.check_fault(&"reset:0/package".parse().unwrap()).is_ok());
    assert_eq!(c.step_counts(&"reset:0/package".parse().unwrap()), None);
}

#[test]
fn trace_parses_with_header_and_comments() {
    let t = Trace::parse(
        "time_s,scale\n# idle first\n0,0\n0.5, 2 # busy\n\n1.5\t1\n",
        "t",
    )
    .unwrap();
    assert_eq!(t.points.len(), 3);
    assert_eq!(
        t.points[1],
        TracePoint {
            time_s: 0.5,
            scale: 2.0
        }
    );
    assert!(Trace::parse("0,1\n0,2\n", "t").is_err());
    assert!(Trace::parse("0,1\nx,2\n", "t").is_err());
    assert!(Trace::parse("0,-1\n", "t").is_err());
    assert!(Trace::parse("0,1,2\n", "t").is_err());
}

#[test]
fn follow_alone_fits_core_and_uncore_inside_its_idle_package() {
    // The help's own example: the default core and uncore (14 W) once made it fail
    // ("exceeds the load-following idle power 10 W").
    let c = EmulatorConfig::default().with_power("follow=10:5").unwrap();
    c.validate().unwrap();
    let w = c.power.socket(0);
    assert!((w.core + w.uncore - 7.0).abs() < 1e-9, "{w:?}");
    assert!(
        (w.core / w.uncore - 6.0).abs() < 1e-9,
        "the ratio is kept: {w:?}"
    );
    // Named core and uncore are the user's: checked, not rescaled.
    let named = EmulatorConfig::default()
        .with_power("follow=10:5,core=12")
        .unwrap();
    assert!(named.validate().is_err());
}

#[test]
fn a_package_alone_keeps_core_and_uncore_inside_it() {
    // `Emulator(watts={"package": 5})` once failed: the default core and uncore
    // (14 W) exceeded 5 W.
    let c = EmulatorConfig::default().with_power("package=5").unwrap();
    c.validate().unwrap();
    let w = c.power.socket(0);
    assert!((w.core + w.uncore - 3.5).abs() < 1e-9, "{w:?}");
    assert!((w.core / w.uncore - 6.0).abs() < 1e-9, "{w:?}");
    // A package with room keeps the defaults.
    let w = EmulatorConfig::default()
        .with_power("package=40")
        .unwrap()
        .power
        .socket(0);
    assert_eq!((w.core, w.uncore), (12.0, 2.0));
    // Named core and uncore are the user's: checked, not rescaled.
    let named = EmulatorConfig::default()
        .with_power("package=5,core=12")
        .unwrap();
    assert!(named.validate().is_err());
}

#[test]
fn a_per_ghz_term_needs_emulated_frequencies() {
    let c = EmulatorConfig::default()
        .with_power("follow=10:2:1")
        .unwrap();
    let f = c.power.follow.as_ref().unwrap();
    assert_eq!((f.idle_w, f.per_cpu_w, f.per_ghz_w), (10.0, 2.0, 1.0));
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("--cpufreq"), "{e}");
    let c = c.with_cpufreq_khz(&[1_500_000, 3_000_000]);
    c.validate().unwrap();
    assert_eq!(
        c.cpufreq.as_ref().unwrap().available_khz,
        [3_000_000, 1_500_000]
    );
    // The configuration round-trips, and one written before the field reads back.
    let json = serde_json::to_string(&c).unwrap();
    assert_eq!(serde_json::from_str::<EmulatorConfig>(&json).unwrap(), c);
    let old = EmulatorConfig::default().with_power("follow=10:5").unwrap();
    let mut value = serde_json::to_value(&old).unwrap();
    value.as_object_mut().unwrap().remove("cpufreq");
    value["power"]["follow"]
        .as_object_mut()
        .unwrap()
        .remove("per_ghz_w");
    assert_eq!(
        serde_json::from_value::<EmulatorConfig>(value).unwrap(),
        old
    );
    // A list built by hand is checked at validation.
    let bad = EmulatorConfig::default().with_cpufreq_khz(&[1_500_000, 1_500_000]);
    assert!(bad.validate().is_err());
    let bad = EmulatorConfig::default().with_cpufreq_khz(&[]);
    assert!(bad.validate().is_err());
}
