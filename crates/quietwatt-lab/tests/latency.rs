//! quietwatt_lab::latency on this machine, with small sample counts: every primitive gets a
//! row, measured rows hold a consistent distribution, and rows that are not the
//! kernel's RAPL say so. (Timings themselves are not asserted: they belong to
//! BENCHMARKS.md.)

use quietwatt::SysRoot;
use quietwatt_lab::latency::{run, LatencyConfig, Row};

fn small(root: SysRoot) -> LatencyConfig {
    LatencyConfig {
        iterations: 300,
        warmup: 10,
        bootstrap: 50,
        root,
        ..LatencyConfig::default()
    }
}

fn rows<'a>(rows: &'a [Row], primitive: &str) -> Vec<&'a Row> {
    rows.iter().filter(|r| r.primitive == primitive).collect()
}

#[test]
fn every_primitive_has_a_row_and_each_distribution_is_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let report = run(&small(SysRoot::new(dir.path()))).expect("runs");
    let names: Vec<&str> = report.rows.iter().map(|r| r.primitive.as_str()).collect();
    for want in [
        "rdtsc",
        "cpuid",
        "getppid",
        "clock_gettime",
        "sysfs pread",
        "powercap pread",
        "perf read",
        "msr pread",
        "bpf map lookup",
    ] {
        assert!(names.contains(&want), "no {want} row in {names:?}");
    }
    for r in &report.rows {
        assert!(
            r.latency.is_some() != r.unavailable.is_some(),
            "a row is measured or says why not: {r:?}"
        );
        if let Some(d) = &r.latency {
            assert_eq!(d.n, 300, "{r:?}");
            assert!(d.min_ns <= d.median_ns && d.median_ns <= d.p99_ns, "{r:?}");
            assert!(
                d.ci_low_ns <= d.median_ns && d.median_ns <= d.ci_high_ns,
                "{r:?}"
            );
            assert!(d.median_ns.is_finite() && d.median_ns >= 0.0, "{r:?}");
        }
    }
    // The floor is first and has no net figure; every other measured row has one.
    assert_eq!(report.rows[0].primitive, "rdtsc");
    let floor = report.rows[0]
        .latency
        .as_ref()
        .expect("the timer always works");
    assert!(floor.net_median_ns.is_none());
    assert!(report.rows[1..]
        .iter()
        .filter_map(|r| r.latency.as_ref())
        .all(|d| d.net_median_ns.is_some()));
    // An empty root has no RAPL: the mechanism rows say why instead of a figure.
    for r in rows(&report.rows, "powercap pread") {
        assert!(
            r.unavailable.as_deref().unwrap_or("").contains("powercap"),
            "{r:?}"
        );
    }
    // The BPF map is read in the kernel: the row says why it has no user-space figure.
    let bpf = &rows(&report.rows, "bpf map lookup")[0];
    assert!(bpf.latency.is_none(), "{bpf:?}");
    assert!(
        bpf.unavailable
            .as_deref()
            .unwrap_or("")
            .contains("in the kernel"),
        "{bpf:?}"
    );
    // The software event is never passed off as RAPL.
    for r in rows(&report.rows, "perf read") {
        if r.target.starts_with("cpu-clock") {
            assert!(
                r.label.as_deref().unwrap_or("").starts_with("stand-in"),
                "{r:?}"
            );
        }
    }
    if report.other_cpu.is_some() {
        let other = rows(&report.rows, "perf read")
            .into_iter()
            .find(|r| r.target.contains("other CPU"))
            .expect("an other-CPU row");
        // Unavailable only for a reason (perf_event_paranoid), never silently.
        assert!(other.latency.is_some() || other.unavailable.is_some());
    }
}

#[test]
fn a_powercap_tree_that_is_not_the_kernels_is_labelled() {
    let dir = tempfile::tempdir().unwrap();
    let zone = dir.path().join("sys/class/powercap/intel-rapl:0");
    std::fs::create_dir_all(&zone).unwrap();
    std::fs::write(zone.join("name"), "package-0\n").unwrap();
    std::fs::write(zone.join("energy_uj"), "123456\n").unwrap();
    std::fs::write(zone.join("max_energy_range_uj"), "262143328850\n").unwrap();
    let report = run(&small(SysRoot::new(dir.path()))).expect("runs");
    let pc = rows(&report.rows, "powercap pread");
    assert_eq!(pc.len(), 1, "{pc:?}");
    assert!(pc[0].latency.is_some(), "{:?}", pc[0]);
    assert!(pc[0].target.contains("package"), "{:?}", pc[0]);
    let label = pc[0].label.as_deref().unwrap_or("");
    assert!(label.contains("not the kernel's"), "{label}");
}

#[test]
fn zero_iterations_and_a_foreign_cpu_are_refused() {
    let mut c = small(SysRoot::default());
    c.iterations = 0;
    assert!(run(&c).is_err());
    let mut c = small(SysRoot::default());
    c.cpu = Some(100_000);
    let e = run(&c).expect_err("no such CPU");
    assert!(e.to_string().contains("CPU 100000"), "{e}");
}
