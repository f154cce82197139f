//! A total never counts a joule twice: psys alone when present, and the MMIO view of
//! package 0 never added.

use crate::common::*;
use quietwatt_emulator::EmulatorConfig;

fn run_json(m: &Mounted) -> serde_json::Value {
    let out = quietwatt(
        m.root(),
        &["run", "--json", "--freq", "100", "--", "sleep", "0.3"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(stdout(&out).trim()).unwrap()
}

fn energy(v: &serde_json::Value, domain: &str) -> Vec<f64> {
    v["domains"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["domain"] == domain)
        .map(|d| d["energy_j"].as_f64().unwrap())
        .collect()
}

#[test]
fn total_is_psys_alone_when_psys_is_present() {
    let mut c = EmulatorConfig::default().with_sockets(2);
    c.domains.psys = true;
    let m = mount(c);
    let v = run_json(&m);
    let psys = energy(&v, "psys");
    assert_eq!(psys.len(), 1);
    assert_eq!(v["total_energy_j"].as_f64().unwrap(), psys[0]);
    // And psys is not the sum of everything listed (that would double count).
    let all: f64 = v["domains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["energy_j"].as_f64().unwrap())
        .sum();
    assert!(all > psys[0] * 1.5, "{v}");
}

#[test]
fn total_is_packages_plus_dram_and_ignores_the_mmio_duplicate() {
    let mut c = EmulatorConfig::default().with_sockets(2);
    c.mmio = true;
    let m = mount(c);
    let v = run_json(&m);
    let packages = energy(&v, "package");
    assert_eq!(
        packages.len(),
        2,
        "the MMIO zone must not appear as a third package: {v}"
    );
    let expected: f64 = packages.iter().sum::<f64>() + energy(&v, "dram").iter().sum::<f64>();
    let total = v["total_energy_j"].as_f64().unwrap();
    assert!(
        (total - expected).abs() < 1e-9,
        "total {total} vs package+dram {expected}"
    );
    assert_eq!(v["total_rule"], "package + dram");
    // `list` names the duplicate and says it is not added.
    let out = quietwatt(m.root(), &["list"]);
    let text = stdout(&out);
    assert!(
        text.contains("intel-rapl-mmio:0") && text.contains("duplicate"),
        "{text}"
    );
}
