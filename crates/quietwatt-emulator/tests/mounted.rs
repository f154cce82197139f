//! The emulator mounted for real and read with plain std::fs / pread, other
//! processes and other users. These tests need root and /dev/fuse (CI runs them
//! as root); without them they fail loudly rather than pass silently.

use quietwatt_core::Domain;
use quietwatt_emulator::{
    Emulator, EmulatorConfig, Error, Fault, FaultKind, Mechanism, Trace, TracePoint, Vendor,
};
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

mod support;
use support::{mount, Mounted};

impl Mounted {
    fn path(&self, rel: &str) -> PathBuf {
        self.emu.dir().join(rel)
    }

    fn read(&self, rel: &str) -> String {
        fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    fn try_read(&self, rel: &str) -> io::Result<String> {
        fs::read_to_string(self.path(rel))
    }

    fn zone(&self, id: &str, file: &str) -> String {
        self.read(&format!("sys/class/powercap/{id}/{file}"))
    }

    fn uj(&self, id: &str) -> u64 {
        let s = self.zone(id, "energy_uj");
        s.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{id}/energy_uj = {s:?}"))
    }

    fn msr_file(&self, cpu: u32) -> File {
        File::open(self.path(&format!("dev/cpu/{cpu}/msr"))).expect("open msr")
    }

    fn msr(&self, cpu: u32, reg: u64) -> io::Result<u64> {
        let mut buf = [0u8; 8];
        let n = self.msr_file(cpu).read_at(&mut buf, reg)?;
        assert_eq!(n, 8, "short MSR read");
        Ok(u64::from_le_bytes(buf))
    }
}

fn errno(r: io::Result<impl std::fmt::Debug>) -> i32 {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e
            .raw_os_error()
            .unwrap_or_else(|| panic!("not an OS error: {e}")),
    }
}

fn near(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= want.abs() * rel
}

#[test]
fn powercap_topology_cpuinfo_and_pmu_layouts_match_the_kernel() {
    let mut c = EmulatorConfig::default()
        .with_sockets(2)
        .with_cpus_per_socket(2);
    c.domains.psys = true;
    c.mmio = true;
    let m = mount(c.clone());

    let mut class: Vec<String> = fs::read_dir(m.path("sys/class/powercap"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    class.sort();
    assert_eq!(
        class,
        [
            "intel-rapl",
            "intel-rapl-mmio",
            "intel-rapl-mmio:0",
            "intel-rapl-mmio:0:0",
            "intel-rapl:0",
            "intel-rapl:0:0",
            "intel-rapl:0:1",
            "intel-rapl:0:2",
            "intel-rapl:1",
            "intel-rapl:2",
            "intel-rapl:2:0",
            "intel-rapl:2:1",
            "intel-rapl:2:2",
        ]
    );
    // psys is registered with its package (0, the master), before package 1.
    for (id, name) in [
        ("intel-rapl:0", "package-0"),
        ("intel-rapl:0:0", "core"),
        ("intel-rapl:0:1", "uncore"),
        ("intel-rapl:2:2", "dram"),
        ("intel-rapl:2", "package-1"),
        ("intel-rapl:1", "psys"),
        ("intel-rapl-mmio:0", "package-0"),
        ("intel-rapl-mmio:0:0", "dram"),
    ] {
        assert_eq!(m.zone(id, "name"), format!("{name}\n"), "{id}");
    }
    let link = m.path("sys/class/powercap/intel-rapl:2:2");
    assert_eq!(
        fs::read_link(&link).unwrap(),
        PathBuf::from("../../devices/virtual/powercap/intel-rapl/intel-rapl:2/intel-rapl:2:2")
    );
    assert_eq!(
        link.canonicalize().unwrap(),
        m.path("sys/devices/virtual/powercap/intel-rapl/intel-rapl:2/intel-rapl:2:2")
    );
    assert_eq!(
        fs::read_link(m.path("sys/class/powercap/intel-rapl")).unwrap(),
        PathBuf::from("../../devices/virtual/powercap/intel-rapl")
    );
    assert_eq!(
        m.read("sys/devices/virtual/powercap/intel-rapl/enabled"),
        "1\n"
    );

    let energy = fs::metadata(m.path("sys/class/powercap/intel-rapl:0/energy_uj")).unwrap();
    assert_eq!(energy.permissions().mode() & 0o7777, 0o400);
    assert_eq!(energy.len(), 4096);
    let range =
        fs::metadata(m.path("sys/class/powercap/intel-rapl:0/max_energy_range_uj")).unwrap();
    assert_eq!(range.permissions().mode() & 0o7777, 0o444);
    assert_eq!(
        m.zone("intel-rapl:0", "max_energy_range_uj"),
        "262143328850\n"
    );
    assert_eq!(m.zone("intel-rapl:0", "constraint_0_name"), "long_term\n");
    assert!(m
        .zone("intel-rapl:0", "constraint_0_power_limit_uw")
        .trim()
        .parse::<u64>()
        .is_ok());

    assert_eq!(m.read("sys/devices/system/cpu/online"), "0-3\n");
    assert_eq!(m.read("sys/devices/system/cpu/possible"), "0-3\n");
    assert!(!m.path("sys/devices/system/cpu/cpu0/online").exists());
    assert_eq!(m.read("sys/devices/system/cpu/cpu3/online"), "1\n");
    assert_eq!(
        m.read("sys/devices/system/cpu/cpu2/topology/physical_package_id"),
        "1\n"
    );
    assert_eq!(
        m.read("sys/devices/system/cpu/cpu3/topology/core_id"),
        "1\n"
    );
    assert_eq!(m.read("sys/devices/system/cpu/cpu3/topology/die_id"), "0\n");

    let cpuinfo = m.read("proc/cpuinfo");
    assert_eq!(cpuinfo.matches("processor\t:").count(), 4);
    assert!(cpuinfo.contains("vendor_id\t: GenuineIntel\n"));
    assert!(cpuinfo.contains("model\t\t: 158\n"));
    assert!(cpuinfo.contains("physical id\t: 1\n"));
    assert!(!cpuinfo.contains("hypervisor"));

    let pmu = "sys/bus/event_source/devices/power";
    assert_eq!(
        fs::read_link(m.path(pmu)).unwrap(),
        PathBuf::from("../../../devices/power")
    );
    assert_eq!(m.read(&format!("{pmu}/type")), "37\n");
    assert_eq!(m.read(&format!("{pmu}/cpumask")), "0,2\n");
    assert_eq!(m.read(&format!("{pmu}/format/event")), "config:0-7\n");
    for (event, code) in [
        ("energy-cores", "0x01"),
        ("energy-pkg", "0x02"),
        ("energy-ram", "0x03"),
        ("energy-gpu", "0x04"),
        ("energy-psys", "0x05"),
    ] {
        assert_eq!(
            m.read(&format!("{pmu}/events/{event}")),
            format!("event={code}\n")
        );
        assert_eq!(
            m.read(&format!("{pmu}/events/{event}.scale")),
            "2.3283064365386962890625e-10\n"
        );
        assert_eq!(m.read(&format!("{pmu}/events/{event}.unit")), "Joules\n");
    }
    for cpu in 0..4 {
        assert!(m.path(&format!("dev/cpu/{cpu}/msr")).is_file());
    }

    let config: EmulatorConfig =
        serde_json::from_str(&m.read(".quietwatt-emulator/config.json")).unwrap();
    assert_eq!(config, c);
    let truth: serde_json::Value =
        serde_json::from_str(&m.read(".quietwatt-emulator/truth.json")).unwrap();
    assert_eq!(truth["domains"].as_array().unwrap().len(), 9);
    assert_eq!(truth["domains"][0]["domain"], "package");
}

#[test]
fn zone_ids_are_hex_and_follow_registration_not_socket_order() {
    let mut c = EmulatorConfig::default()
        .with_sockets(11)
        .with_cpus_per_socket(1);
    c.domains.psys = true;
    c.shuffle_zone_ids = true;
    let m = mount(c);
    assert_eq!(m.zone("intel-rapl:0", "name"), "package-10\n");
    assert_eq!(m.zone("intel-rapl:a", "name"), "package-0\n");
    assert_eq!(m.zone("intel-rapl:b", "name"), "psys\n");
    assert_eq!(m.zone("intel-rapl:a:0", "name"), "dram\n");
    assert_eq!(m.zone("intel-rapl:a:2", "name"), "core\n");
    assert!(m.try_read("sys/class/powercap/intel-rapl:10/name").is_err());
}

#[test]
fn counters_advance_at_the_configured_power() {
    let m = mount(
        EmulatorConfig::default()
            .with_power("package=25,dram=5")
            .unwrap(),
    );
    let (p0, d0) = (m.uj("intel-rapl:0"), m.uj("intel-rapl:0:2"));
    std::thread::sleep(Duration::from_millis(200));
    let (p1, d1) = (m.uj("intel-rapl:0"), m.uj("intel-rapl:0:2"));
    let pkg = m
        .emu
        .served(Mechanism::Powercap, 0, Domain::Package)
        .unwrap();
    let dram = m.emu.served_any(0, Domain::Dram).unwrap();
    let secs = (pkg.last_t - pkg.first_t).as_secs_f64();
    assert!(secs >= 0.2, "{secs}");
    // The reader's difference is exactly what was served...
    assert!(near((p1 - p0) as f64 / 1e6, pkg.energy().0, 1e-6));
    assert!(near((d1 - d0) as f64 / 1e6, dram.energy().0, 1e-4));
    // ...and what was served is the configured power over the time between reads.
    assert!(near(pkg.energy().0, 25.0 * secs, 0.02), "{pkg:?}");
    assert!(near(
        dram.energy().0,
        5.0 * (dram.last_t - dram.first_t).as_secs_f64(),
        0.02
    ));
    assert_eq!(pkg.reads, 2);
    // The truth keeps growing at the same rate.
    let t = m.emu.truth(0, Domain::Package).0;
    assert!(near(t, 25.0 * m.emu.elapsed().as_secs_f64(), 0.02), "{t}");
    m.emu.reset_served();
    assert!(m.emu.served_any(0, Domain::Package).is_none());
}

#[test]
fn counters_step_at_the_update_interval() {
    let m = mount(EmulatorConfig::default());
    let f = File::open(m.path("sys/class/powercap/intel-rapl:0/energy_uj")).unwrap();
    let mut buf = [0u8; 32];
    let mut values = Vec::new();
    let start = Instant::now();
    for _ in 0..2000 {
        let n = f.read_at(&mut buf, 0).unwrap();
        values.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    let ms = start.elapsed().as_millis() as usize;
    values.dedup();
    // At most one new value per millisecond (a 1 ms update interval).
    assert!(values.len() <= ms + 2, "{} values in {ms} ms", values.len());
    assert!(values.len() >= 2, "the counter never moved");

    let m = mount(EmulatorConfig::default().with_update_interval(Duration::from_millis(100)));
    let mut seen = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(350) {
        seen.push(m.uj("intel-rapl:0"));
        std::thread::sleep(Duration::from_millis(5));
    }
    seen.dedup();
    assert!((3..=5).contains(&seen.len()), "{seen:?}");
    // Each step is 20 W x 100 ms = 2 J (to a count of 61 µJ).
    for w in seen.windows(2) {
        let step = (w[1] - w[0]) as f64;
        assert!((step - 2e6).abs() < 100.0, "{seen:?}");
    }
}

#[test]
fn counters_wrap_at_the_configured_width_and_served_tracks_every_wrap() {
    // ESU 14 and 16 bits: 4 J per wrap; 40 W wraps every 100 ms.
    let m = mount(
        EmulatorConfig::default()
            .with_counter_bits(16)
            .with_power("package=40")
            .unwrap(),
    );
    let max: u64 = m
        .zone("intel-rapl:0", "max_energy_range_uj")
        .trim()
        .parse()
        .unwrap();
    assert_eq!(max, 65535 * 61035 / 1000);
    let energy = File::open(m.path("sys/class/powercap/intel-rapl:0/energy_uj")).unwrap();
    let msr = m.msr_file(0);
    let read_uj = || {
        let mut buf = [0u8; 32];
        let n = energy.read_at(&mut buf, 0).unwrap();
        String::from_utf8_lossy(&buf[..n])
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let read_raw = || {
        let mut buf = [0u8; 8];
        msr.read_at(&mut buf, 0x611).unwrap();
        u64::from_le_bytes(buf)
    };
    let (mut uj_prev, mut raw_prev) = (read_uj(), read_raw());
    let (mut uj_sum, mut raw_sum, mut wraps) = (0u64, 0u64, 0);
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1150) {
        std::thread::sleep(Duration::from_millis(10));
        let (uj, raw) = (read_uj(), read_raw());
        assert!(uj <= max && raw < 1 << 16, "{uj} {raw:#x}");
        if uj < uj_prev {
            wraps += 1;
            uj_sum += uj + max + 1 - uj_prev;
        } else {
            uj_sum += uj - uj_prev;
        }
        raw_sum += raw.wrapping_sub(raw_prev) & 0xFFFF;
        (uj_prev, raw_prev) = (uj, raw);
    }
    assert!(wraps >= 10, "{wraps} wraps");
    let pc = m
        .emu
        .served(Mechanism::Powercap, 0, Domain::Package)
        .unwrap();
    let ms = m.emu.served(Mechanism::Msr, 0, Domain::Package).unwrap();
    assert!(
        near(uj_sum as f64 / 1e6, pc.energy().0, 0.005),
        "{uj_sum} {pc:?}"
    );
    assert!(
        near(raw_sum as f64 / 16384.0, ms.energy().0, 1e-9),
        "{raw_sum} {ms:?}"
    );
    let secs = (pc.last_t - pc.first_t).as_secs_f64();
    assert!(near(pc.energy().0, 40.0 * secs, 0.02), "{pc:?}");
}

#[test]
fn intel_msrs_serve_units_counters_and_kernel_errors() {
    let m = mount(
        EmulatorConfig::default()
            .with_sockets(2)
            .with_cpus_per_socket(2)
            .with_update_interval(Duration::from_millis(50))
            .with_power("1/package=40")
            .unwrap(),
    );
    assert_eq!(m.msr(3, 0x606).unwrap(), 0xA0E03);
    std::thread::sleep(Duration::from_millis(120));
    // Package registers read on any CPU of the package agree (same 50 ms step).
    let agree = (0..5).any(|_| m.msr(0, 0x611).unwrap() == m.msr(1, 0x611).unwrap());
    assert!(agree);
    let (p0, p1) = (m.msr(0, 0x611).unwrap(), m.msr(2, 0x611).unwrap());
    assert!(p0 > 0 && p0 >> 32 == 0);
    assert!(near(p1 as f64, 2.0 * p0 as f64, 0.3), "{p0} {p1}");
    for reg in [0x639, 0x641, 0x619] {
        assert!(m.msr(2, reg).unwrap() > 0, "{reg:#x}");
    }
    let f = m.msr_file(0);
    assert_eq!(errno(m.msr(0, 0x64D)), libc::EIO, "no psys here");
    assert_eq!(errno(m.msr(0, 0x1234)), libc::EIO);
    assert_eq!(errno(m.msr(0, 0xC001_029B)), libc::EIO);
    let mut b12 = [0u8; 12];
    assert_eq!(errno(f.read_at(&mut b12, 0x611)), libc::EINVAL);
    let mut b16 = [0u8; 16];
    assert_eq!(f.read_at(&mut b16, 0x606).unwrap(), 16);
    assert_eq!(b16[..8], b16[8..]);
    assert_eq!(u64::from_le_bytes(b16[..8].try_into().unwrap()), 0xA0E03);
    assert!(m.emu.served(Mechanism::Msr, 1, Domain::Package).is_some());
}

#[test]
fn skylake_x_dram_and_sapphire_rapids_psys_units() {
    let m = mount(EmulatorConfig::intel(0x55));
    // DRAM counts 2^-16 J; powercap converts with 15300 nJ.
    assert_eq!(
        m.zone("intel-rapl:0:2", "max_energy_range_uj"),
        "65712999613\n"
    );
    assert_eq!(
        m.zone("intel-rapl:0", "max_energy_range_uj"),
        "262143328850\n"
    );
    // The register and powercap's file are read one after the other: a host that
    // stalls the test between the two reads skews the comparison by the stall's
    // energy. Read register, file, register, and keep a pair only when the
    // register moved by less than 2 ms at 4 W around the file's read.
    let file_reads = std::cell::RefCell::new(Vec::new());
    let pair = || {
        for _ in 0..50 {
            let a = m.msr(0, 0x619).unwrap();
            let u = m.uj("intel-rapl:0:2");
            file_reads.borrow_mut().push(u);
            let t = std::time::Instant::now();
            let b = m.msr(0, 0x619).unwrap();
            if b.wrapping_sub(a) <= 524 {
                return (a + (b - a) / 2, u, t);
            }
        }
        panic!("every read of the register and the file was 2 ms apart or more");
    };
    let (r0, u0, t0) = pair();
    std::thread::sleep(Duration::from_millis(200));
    let (r1, u1, t1) = pair();
    let secs = (t1 - t0).as_secs_f64();
    assert!(
        near((r1 - r0) as f64 / 65536.0, 4.0 * secs, 0.02),
        "{r0} {r1}"
    );
    assert!(near(
        (u1 - u0) as f64 / 1e6,
        (r1 - r0) as f64 * 15.3e-6,
        0.01
    ));
    // What the emulator served between the file's first and last reads (every
    // read, the pairs refused included) is what the file said.
    let pc = m.emu.served(Mechanism::Powercap, 0, Domain::Dram).unwrap();
    let reads = file_reads.borrow();
    let (first, last) = (reads[0], reads[reads.len() - 1]);
    assert!(near(pc.energy().0, (last - first) as f64 / 1e6, 1e-6));

    let mut c = EmulatorConfig::intel(0x8F);
    c.domains.psys = true;
    c.start_offset = Duration::from_secs(100);
    let m = mount(c);
    // psys counts whole joules: 20 + 4 + 6 W for 100 s = 3000 counts.
    let raw = m.msr(1, 0x64D).unwrap();
    assert!((3000..3010).contains(&raw), "{raw}");
    let uj = m.uj("intel-rapl:1");
    assert_eq!(uj % 1_000_000, 0);
    assert_eq!(
        m.zone("intel-rapl:1", "max_energy_range_uj"),
        "4294967295000000\n"
    );
}

#[test]
fn amd_msrs_have_package_and_per_core_counters() {
    let m = mount(
        EmulatorConfig::amd()
            .with_sockets(2)
            .with_cpus_per_socket(4)
            .with_update_interval(Duration::from_millis(50)),
    );
    // 0xC0010299 and friends lie far beyond any page: direct I/O passes the offset.
    assert_eq!(m.msr(5, 0xC001_0299).unwrap(), 0xA1003);
    assert_eq!(errno(m.msr(0, 0x611)), libc::EIO);
    assert_eq!(errno(m.msr(0, 0x606)), libc::EIO);
    std::thread::sleep(Duration::from_millis(120));
    let pkg = m.msr(5, 0xC001_029B).unwrap();
    assert!(pkg > 0 && pkg >> 32 == 0);
    let cores0: Vec<u64> = (0..4).map(|c| m.msr(c, 0xC001_029A).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let cores1: Vec<u64> = (0..4).map(|c| m.msr(c, 0xC001_029A).unwrap()).collect();
    let served = m.emu.served_any(0, Domain::Core).unwrap();
    assert_eq!(served.reads, 8);
    let counted: u64 = cores1.iter().zip(&cores0).map(|(b, a)| b - a).sum();
    assert!(near(counted as f64 / 65536.0, served.energy().0, 1e-9));
    // Each core draws a quarter of 12 W. The counters step every 50 ms here, so the
    // energy between two reads is the power over the span within one step's energy
    // (a read that a loaded machine delays lands later in the same step: a clean-clone run saw
    // 2.40 J served over 212 ms, 2.55 J of power × time).
    let secs = (served.last_t - served.first_t).as_secs_f64();
    assert!(
        (served.energy().0 - 12.0 * secs).abs() <= 12.0 * 0.050 + 1e-9,
        "{served:?} {secs}"
    );
    // powercap's `core` zone reads one core (the lead CPU's): a quarter of 12 W.
    assert_eq!(m.zone("intel-rapl:0:0", "name"), "core\n");
    let z0 = m.uj("intel-rapl:0:0");
    std::thread::sleep(Duration::from_millis(200));
    let z1 = m.uj("intel-rapl:0:0");
    let zone = m.emu.served(Mechanism::Powercap, 0, Domain::Core).unwrap();
    let secs = (zone.last_t - zone.first_t).as_secs_f64();
    assert!(
        near((z1 - z0) as f64 / 1e6, 3.0 * secs, 0.05),
        "{z0} {z1} {secs}"
    );
    assert!(near(zone.energy().0, (z1 - z0) as f64 / 1e6, 1e-6));
    assert_eq!(
        m.read("sys/bus/event_source/devices/power_core/cpumask"),
        "0-7\n"
    );
    assert_eq!(
        m.read("sys/bus/event_source/devices/power/cpumask"),
        "0,4\n"
    );
    let events: Vec<String> = fs::read_dir(m.path("sys/devices/power/events"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(events.len(), 3, "{events:?}");
    assert!(m.read("proc/cpuinfo").contains(" rapl "));
}

#[test]
fn eacces_garbage_and_overrange_faults() {
    let m = mount(EmulatorConfig::default().with_fault("eacces:0/package".parse().unwrap()));
    assert_eq!(
        errno(m.try_read("sys/class/powercap/intel-rapl:0/energy_uj")),
        libc::EACCES
    );
    assert!(m
        .zone("intel-rapl:0", "max_energy_range_uj")
        .trim()
        .parse::<u64>()
        .is_ok());
    assert!(m.uj("intel-rapl:0:2") > 0);
    assert!(m.msr(0, 0x611).is_ok(), "eacces is a powercap fault");

    m.emu
        .inject(Fault::new(FaultKind::Garbage, 0, Domain::Core))
        .unwrap();
    assert_eq!(m.zone("intel-rapl:0:0", "energy_uj"), "nan\n");
    assert_eq!(m.msr(0, 0x639).unwrap(), 0xDEAD_BEEF_DEAD_BEEF);

    m.emu.inject("overrange:0/uncore".parse().unwrap()).unwrap();
    let max: u64 = m
        .zone("intel-rapl:0:1", "max_energy_range_uj")
        .trim()
        .parse()
        .unwrap();
    assert!(m.uj("intel-rapl:0:1") > max);
    assert_ne!(m.msr(0, 0x641).unwrap() >> 32, 0);

    assert!(m.emu.inject("freeze:3/package".parse().unwrap()).is_err());
    assert!(m.emu.inject("freeze:0/psys".parse().unwrap()).is_err());
    assert_eq!(m.emu.faults().len(), 3);
    m.emu.clear_faults();
    assert!(m.uj("intel-rapl:0") > 0);
    assert!(m.uj("intel-rapl:0:0") > 0);
}

#[test]
fn vanish_removes_zones_and_fails_open_files() {
    let m = mount(EmulatorConfig::default().with_fault("vanish:0/uncore@300ms".parse().unwrap()));
    let dram = File::open(m.path("sys/class/powercap/intel-rapl:0:2/energy_uj")).unwrap();
    let mut buf = [0u8; 32];
    assert!(dram.read_at(&mut buf, 0).unwrap() > 0);
    assert!(m.path("sys/class/powercap/intel-rapl:0:1").exists());
    m.emu.inject("vanish:0/dram".parse().unwrap()).unwrap();
    assert_eq!(errno(dram.read_at(&mut buf, 0)), libc::ENODEV);
    assert!(fs::symlink_metadata(m.path("sys/class/powercap/intel-rapl:0:2")).is_err());
    let listed: Vec<String> =
        fs::read_dir(m.path("sys/devices/virtual/powercap/intel-rapl/intel-rapl:0"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
    assert!(
        !listed.contains(&"intel-rapl:0:2".to_string()),
        "{listed:?}"
    );
    assert!(listed.contains(&"intel-rapl:0:0".to_string()));
    assert_eq!(errno(m.msr(0, 0x619)), libc::EIO);

    // The scheduled vanish.
    while m.emu.elapsed() < Duration::from_millis(320) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!m.path("sys/class/powercap/intel-rapl:0:1").exists());

    // A package takes its subzones (and their links) with it.
    m.emu.inject("vanish:0/package".parse().unwrap()).unwrap();
    assert!(!m.path("sys/class/powercap/intel-rapl:0").exists());
    assert!(fs::symlink_metadata(m.path("sys/class/powercap/intel-rapl:0:0")).is_err());
    assert!(m.path("sys/class/powercap/intel-rapl").exists());
}

#[test]
fn freeze_stops_the_counter_but_not_the_truth() {
    let m = mount(EmulatorConfig::default());
    std::thread::sleep(Duration::from_millis(20));
    m.emu
        .inject(Fault::new(FaultKind::Freeze, 0, Domain::Package))
        .unwrap();
    let (a, ra) = (m.uj("intel-rapl:0"), m.msr(0, 0x611).unwrap());
    let truth = m.emu.truth(0, Domain::Package).0;
    let dram = m.uj("intel-rapl:0:2");
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(m.uj("intel-rapl:0"), a);
    assert_eq!(m.msr(0, 0x611).unwrap(), ra);
    assert!(m.emu.truth(0, Domain::Package).0 > truth + 1.0);
    assert!(m.uj("intel-rapl:0:2") > dram);

    let m = mount(EmulatorConfig::default().with_fault("freeze:0/dram@100ms".parse().unwrap()));
    std::thread::sleep(Duration::from_millis(150));
    let frozen = m.uj("intel-rapl:0:2");
    // 4 W for 100 ms.
    assert!(near(frozen as f64, 0.4e6, 0.01), "{frozen}");
}

#[test]
fn a_value_read_in_pieces_is_one_snapshot() {
    let m = mount(EmulatorConfig::default());
    let mut f = File::open(m.path("sys/class/powercap/intel-rapl:0/energy_uj")).unwrap();
    let mut text = Vec::new();
    let mut byte = [0u8; 1];
    while f.read(&mut byte).unwrap() == 1 {
        text.push(byte[0]);
        std::thread::sleep(Duration::from_millis(3));
    }
    let value: u64 = String::from_utf8(text).unwrap().trim().parse().unwrap();
    let served = m
        .emu
        .served(Mechanism::Powercap, 0, Domain::Package)
        .unwrap();
    assert_eq!(
        served.reads, 1,
        "only the read at offset 0 samples the counter"
    );
    assert!((served.first_j.0 * 1e6 - value as f64).abs() < 1.0);
}

#[test]
fn power_traces_and_start_offsets_shape_the_energy() {
    let mut c = EmulatorConfig::default()
        .with_power("package=20,core=0,uncore=0,dram=0")
        .unwrap();
    c.power.trace = Some(Trace {
        points: vec![
            TracePoint {
                time_s: 0.0,
                scale: 0.0,
            },
            TracePoint {
                time_s: 0.15,
                scale: 2.0,
            },
        ],
    });
    let m = mount(c);
    assert_eq!(m.uj("intel-rapl:0"), 0);
    while m.emu.elapsed() < Duration::from_millis(300) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let uj = m.uj("intel-rapl:0") as f64 / 1e6;
    let t = m
        .emu
        .served_any(0, Domain::Package)
        .unwrap()
        .last_t
        .as_secs_f64();
    assert!(near(uj, 40.0 * (t - 0.15), 0.03), "{uj} J at {t} s");

    let m = mount(EmulatorConfig {
        start_offset: Duration::from_secs(1000),
        ..EmulatorConfig::default()
    });
    assert!(near(
        m.uj("intel-rapl:0") as f64,
        20.0 * 1000.0 * 1e6,
        0.001
    ));
    assert!(m.emu.truth(0, Domain::Package).0 >= 20_000.0);
}

/// Runs `cat path` as user and group 65534 (nobody); its output or stderr.
fn cat_as_nobody(path: &std::path::Path) -> Result<String, String> {
    let out = Command::new("cat")
        .arg(path)
        .uid(65534)
        .gid(65534)
        .output()
        .expect("run cat");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn other_users_get_eacces_as_after_the_cve_2020_8694_fix() {
    let m = mount(EmulatorConfig::default());
    let err = cat_as_nobody(&m.path("sys/class/powercap/intel-rapl:0/energy_uj")).unwrap_err();
    assert!(err.contains("Permission denied"), "{err}");
    let err = cat_as_nobody(&m.path("dev/cpu/0/msr")).unwrap_err();
    assert!(err.contains("Permission denied"), "{err}");
    let range = cat_as_nobody(&m.path("sys/class/powercap/intel-rapl:0/max_energy_range_uj"));
    assert_eq!(range.unwrap(), "262143328850\n");
    assert!(cat_as_nobody(&m.path("proc/cpuinfo"))
        .unwrap()
        .contains("GenuineIntel"));

    let m = mount(EmulatorConfig {
        enforce_permissions: false,
        ..EmulatorConfig::default()
    });
    let uj = cat_as_nobody(&m.path("sys/class/powercap/intel-rapl:0/energy_uj")).unwrap();
    assert!(uj.trim().parse::<u64>().is_ok(), "{uj}");
}

/// Runs a shell script; its stdout, or a panic with everything it printed.
fn sh(script: &str) -> String {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .output()
        .expect("run sh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "script failed ({}):\n{script}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn another_program_reads_it_at_the_standard_paths_via_enter_sh() {
    let host_had_powercap = std::path::Path::new("/sys/class/powercap/intel-rapl:0").exists();
    let m = mount(
        EmulatorConfig::amd()
            .with_cpus_per_socket(3)
            .with_update_interval(Duration::from_millis(1)),
    );
    let out = sh(&format!(
        "sh '{}' sh -c 'cat /sys/class/powercap/intel-rapl:0/name /sys/class/powercap/intel-rapl:0/energy_uj; \
         cat /sys/devices/system/cpu/online; grep -m1 \"model name\" /proc/cpuinfo; \
         cat /sys/bus/event_source/devices/power_core/cpumask; \
         dd if=/dev/cpu/1/msr bs=8 count=1 skip=$((0xC001029B)) iflag=skip_bytes 2>/dev/null | od -An -tu8; \
         ls /sys/class | grep -c .; test -e /dev/null && echo dev-ok'",
        m.emu.enter_script().display()
    ));
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    assert_eq!(lines[0], "package-0", "{out}");
    assert!(lines[1].parse::<u64>().is_ok(), "{out}");
    assert_eq!(lines[2], "0-2");
    assert!(
        lines[3].ends_with("AMD EPYC 7763 64-Core Processor"),
        "{out}"
    );
    assert_eq!(lines[4], "0-2");
    assert!(lines[5].parse::<u64>().unwrap() > 0, "{out}");
    // The rest of /sys/class is still there.
    assert!(lines[6].parse::<u32>().unwrap() > 1, "{out}");
    assert_eq!(lines[7], "dev-ok");
    // The reads went through the emulator...
    assert!(m
        .emu
        .served(Mechanism::Powercap, 0, Domain::Package)
        .is_some());
    assert!(m.emu.served(Mechanism::Msr, 0, Domain::Package).is_some());
    // ...and nothing leaked into this mount namespace.
    assert_eq!(
        std::path::Path::new("/sys/class/powercap/intel-rapl:0").exists(),
        host_had_powercap
    );
}

#[test]
fn another_program_reads_it_with_the_manual_unshare_recipe() {
    let m = mount(EmulatorConfig::default());
    let e = m.emu.dir().display().to_string();
    // The README's minimal recipe: tmpfs over the parents (in the namespace only),
    // then bind the emulated directories.
    let out = sh(&format!(
        "unshare --mount --propagation private sh -ec '
           E={e}
           for d in /sys/class /sys/devices/virtual; do mount -t tmpfs quietwatt $d; done
           mkdir /sys/class/powercap /sys/devices/virtual/powercap
           mount --bind $E/sys/class/powercap /sys/class/powercap
           mount --bind $E/sys/devices/virtual/powercap /sys/devices/virtual/powercap
           cat /sys/class/powercap/intel-rapl:0/name /sys/class/powercap/intel-rapl:0/energy_uj'"
    ));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "package-0", "{out}");
    assert!(lines[1].parse::<u64>().unwrap() > 0);
    assert!(m.emu.served_any(0, Domain::Package).is_some());
}

#[test]
fn unmount_leaves_an_empty_directory_even_when_busy() {
    let m = mount(EmulatorConfig::default());
    let dir = m.emu.dir().to_path_buf();
    let mounted = || {
        fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .any(|l| l.split(' ').nth(4) == Some(dir.to_str().unwrap()))
    };
    assert!(mounted());
    let busy = File::open(m.path("sys/class/powercap/intel-rapl:0/energy_uj")).unwrap();
    let Mounted { emu, _dir } = m;
    emu.unmount().unwrap();
    assert!(!mounted());
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
    drop(busy);

    let m = mount(EmulatorConfig::default());
    let dir = m.emu.dir().to_path_buf();
    drop(m);
    assert!(!dir.exists() || fs::read_dir(&dir).unwrap().count() == 0);
}

#[test]
fn mount_errors_explain_themselves() {
    let missing = Emulator::mount("/nonexistent/quietwatt", EmulatorConfig::default());
    assert!(
        matches!(missing, Err(Error::MountPoint { .. })),
        "{missing:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("x"), "").unwrap();
    let full = Emulator::mount(dir.path(), EmulatorConfig::default()).unwrap_err();
    assert!(full.to_string().contains("not empty"), "{full}");
    let bad = Emulator::mount(dir.path(), EmulatorConfig::default().with_counter_bits(40));
    assert!(matches!(bad, Err(Error::Config(_))));
    let amd = EmulatorConfig {
        vendor: Vendor::ZEN3,
        ..EmulatorConfig::default()
    };
    assert!(Emulator::mount(dir.path(), amd)
        .unwrap_err()
        .to_string()
        .contains("AMD"));
}

/// Waits (without asserting anything about speed) until the emulator's clock has
/// passed `at`.
fn wait_past(m: &Mounted, at: Duration) {
    while m.emu.elapsed() <= at {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A 32-bit register difference `b - a` as a signed count (no wrap between them).
fn signed_diff32(a: u64, b: u64) -> i64 {
    i64::from(b.wrapping_sub(a) as u32 as i32)
}

/// The MSR count of `raw` counts at ESU 14, in joules.
fn esu14(raw: i64) -> f64 {
    raw as f64 / 16384.0
}

#[test]
fn reset_restarts_the_counter_from_zero_and_serves_the_energy_since() {
    // WHY: a module reload or a resume from suspend restarts a counter from 0; a
    // reader must not take that fall for a wrap. After the reset the register
    // holds exactly the energy measured since the reset (Served, steps taken out,
    // minus what it held at the reset), while the truth keeps everything drawn.
    // 1000 s of history (20 kJ) makes the fall certain however late the reads.
    let m = mount(EmulatorConfig {
        start_offset: Duration::from_secs(1000),
        ..EmulatorConfig::default()
    });
    let (uj0, raw0) = (m.uj("intel-rapl:0"), m.msr(0, 0x611).unwrap());
    let (uj1, raw1) = (m.uj("intel-rapl:0"), m.msr(0, 0x611).unwrap());
    // Injected after those reads and dated ahead: they certainly precede it.
    let at = m.emu.elapsed() + Duration::from_millis(30);
    m.emu
        .inject(Fault::new(FaultKind::Reset, 0, Domain::Package).at(at))
        .unwrap();
    wait_past(&m, at);
    let (uj2, raw2) = (m.uj("intel-rapl:0"), m.msr(0, 0x611).unwrap());
    let (uj3, raw3) = (m.uj("intel-rapl:0"), m.msr(0, 0x611).unwrap());

    let steps = m.emu.steps(0, Domain::Package);
    assert_eq!(steps.len(), 1, "{steps:?}");
    let step = steps[0];
    assert_eq!(step.fault.kind, FaultKind::Reset);
    assert_eq!(step.at, at, "a dated step takes effect at its time");
    assert!(step.happened);
    // It took away the 20 kJ and more the counter held.
    assert!(step.shift_j.0 < -20_000.0, "{step:?}");

    let ms = m.emu.served(Mechanism::Msr, 0, Domain::Package).unwrap();
    let pc = m
        .emu
        .served(Mechanism::Powercap, 0, Domain::Package)
        .unwrap();
    // The register after the reset = measured energy at that read - what it held
    // at the reset (`-shift_j`): the energy drawn since the reset.
    assert!(
        (esu14(raw3 as i64) - (ms.last_j.0 + step.shift_j.0)).abs() < 1e-9,
        "{raw3} {ms:?} {step:?}"
    );
    // powercap's whole-nanojoule unit is 2.6 ppm short of 2^-14 J, which shows on
    // the 20 kJ `shift_j` (given in the hardware unit).
    assert!(
        (uj3 as f64 / 1e6 - (pc.last_j.0 + step.shift_j.0)).abs()
            < 1e-3 + step.shift_j.0.abs() * 3e-6,
        "{uj3} {pc:?} {step:?}"
    );
    // The energy since the reset is 20 W over the time since it, to one 1 ms update
    // step and one count (times from the emulator's own record, not from a clock).
    let since = (ms.last_t - at).as_secs_f64();
    assert!(
        (esu14(raw3 as i64) - 20.0 * since).abs() <= 20.0 * 0.001 + 2.0 / 16384.0,
        "{raw3} after {since} s"
    );
    // Both mechanisms saw one step between their first and last read.
    assert_eq!((ms.steps, pc.steps), (1, 1));
    // The counter fell: values after are far below values before.
    assert!(raw2 < raw1 && uj2 < uj1 && raw1 >= raw0 && uj1 >= uj0);

    // A reader that takes the fall for a restart (counts the new value) lands in
    // Served's range for a correct reader; one that takes it for a wrap does not.
    let correct =
        esu14(signed_diff32(raw0, raw1)) + esu14(raw2 as i64) + esu14(signed_diff32(raw2, raw3));
    let (lo, hi) = ms.correct_range();
    assert!(
        lo.0 - 1e-9 <= correct && correct <= hi.0 + 1e-9,
        "{correct} not in {lo:?}..{hi:?}"
    );
    let as_wrap = esu14(raw3.wrapping_sub(raw0) as u32 as i64);
    assert!(as_wrap > hi.0 + 1000.0, "{as_wrap} {hi:?}");

    // The truth never sees the reset: 20 W since emulated time 0 (1000 s before
    // the mount), bracketed by the clock read before and after it.
    let before = m.emu.elapsed().as_secs_f64();
    let truth = m.emu.truth(0, Domain::Package).0;
    let after = m.emu.elapsed().as_secs_f64();
    assert!(
        20.0 * (1000.0 + before) - 1e-6 <= truth && truth <= 20.0 * (1000.0 + after) + 1e-6,
        "{truth}"
    );
    // Other counters are untouched.
    assert!(m.uj("intel-rapl:0:2") as f64 / 1e6 > 4.0 * 1000.0);
}

#[test]
fn backstep_and_jump_move_the_counter_by_their_amount_and_not_the_truth() {
    // WHY: a counter that glitches back a little or leaps implausibly forward must
    // be told apart from a wrap and from real energy. Each step moves the register
    // by exactly its amount at its time (on top of the energy measured between the
    // reads, which Served reports with the step taken out), and the truth is
    // unaffected.
    let m = mount(EmulatorConfig::default());
    std::thread::sleep(Duration::from_millis(50));
    let read = |m: &Mounted| (m.uj("intel-rapl:0"), m.msr(0, 0x611).unwrap());
    let max_uj: u64 = m
        .zone("intel-rapl:0", "max_energy_range_uj")
        .trim()
        .parse()
        .unwrap();

    for (fault, shift) in [
        ("backstep=2J:0/package", -2.0),
        ("backstep:0/package", -0.5),
        ("jump:0/package", 10_000.0),
    ] {
        m.emu.reset_served();
        let (uj_a, raw_a) = read(&m);
        let at = m.emu.elapsed() + Duration::from_millis(30);
        let f: Fault = fault.parse().unwrap();
        m.emu.inject(f.at(at)).unwrap();
        wait_past(&m, at);
        let (uj_b, raw_b) = read(&m);

        let step = *m
            .emu
            .steps(0, Domain::Package)
            .iter()
            .find(|s| s.at == at)
            .unwrap_or_else(|| panic!("{fault}: no step at {at:?}"));
        assert!(step.happened);
        // The amounts are whole counts at ESU 14: exact.
        assert_eq!(step.shift_j.0, shift, "{fault}");

        let ms = m.emu.served(Mechanism::Msr, 0, Domain::Package).unwrap();
        let pc = m
            .emu
            .served(Mechanism::Powercap, 0, Domain::Package)
            .unwrap();
        assert_eq!((ms.reads, ms.steps), (2, 1), "{fault}");
        // Measured energy between the reads is 20 W over their span, to one 1 ms
        // update step and a count either end: the step is not in it.
        let span = (ms.last_t - ms.first_t).as_secs_f64();
        assert!(
            (ms.energy().0 - 20.0 * span).abs() <= 20.0 * 0.001 + 2.0 / 16384.0,
            "{fault}: {ms:?}"
        );
        // The register moved by that energy plus the step.
        let moved = esu14(signed_diff32(raw_a, raw_b));
        assert!(
            (moved - (ms.energy().0 + shift)).abs() < 1e-9,
            "{fault}: moved {moved} J, served {ms:?}"
        );
        // powercap wraps at max_energy_range_uj + 1: take the signed difference
        // (an early backstep takes the counter below 0, i.e. to near the top).
        let range = max_uj + 1;
        let up = (uj_b + range - uj_a) % range;
        let moved_uj = if up > range / 2 {
            up as f64 / 1e6 - range as f64 / 1e6
        } else {
            up as f64 / 1e6
        };
        // powercap converts with a whole-nanojoule unit (61035 nJ for 61035.156 nJ),
        // 2.6 ppm short: that shows on the 10 kJ jump.
        assert!(
            (moved_uj - (pc.energy().0 + shift)).abs() < 1e-3 + shift.abs() * 3e-6,
            "{fault}: moved {moved_uj} J, served {pc:?}"
        );
        // With only two reads, a reader that drops the glitched interval loses all
        // of it: the correct range starts at 0.
        assert!(ms.correct_range().0 .0.abs() < 1e-9, "{ms:?}");
    }
    assert_eq!(m.emu.steps(0, Domain::Package).len(), 3);
    assert!(m.emu.steps(0, Domain::Dram).is_empty());
    // 0.5 J + 2 J back and 10 kJ forward: the register is ~9997.5 J ahead of the
    // measured energy, while the truth is still 20 W since the mount.
    let before = m.emu.elapsed().as_secs_f64();
    let truth = m.emu.truth(0, Domain::Package).0;
    let after = m.emu.elapsed().as_secs_f64();
    assert!(20.0 * before - 1e-6 <= truth && truth <= 20.0 * after + 1e-6);
    let raw = m.msr(0, 0x611).unwrap();
    let measured = m.emu.served(Mechanism::Msr, 0, Domain::Package).unwrap();
    assert!((esu14(raw as i64) - (measured.last_j.0 + 9997.5)).abs() < 1e-9);
    // The report shows the steps with their times.
    let report: serde_json::Value =
        serde_json::from_str(&m.read(".quietwatt-emulator/truth.json")).unwrap();
    let steps = report["domains"][0]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[2]["shift_j"], 10_000.0);
    assert!(steps[2]["fault"]
        .as_str()
        .unwrap()
        .starts_with("jump:0/package@"));

    // A jump as large as the range would read as a wrap: refused, with the fix.
    let small = mount(EmulatorConfig::default().with_counter_bits(16));
    let e = small
        .emu
        .inject("jump=3J:0/package".parse().unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("smaller amount"), "{e}");
    // The default jump there is cut to just under half the 4 J range.
    small.emu.inject("jump:0/package".parse().unwrap()).unwrap();
    let cut = small.emu.steps(0, Domain::Package)[0].shift_j.0;
    assert_eq!(cut, 32767.0 / 16384.0);
}

/// The psys zones: (directory, name) for every top-level zone named psys*.
fn psys_zones(m: &Mounted) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in fs::read_dir(m.path("sys/devices/virtual/powercap/intel-rapl")).unwrap() {
        let id = e.unwrap().file_name().into_string().unwrap();
        // Zones only (not `enabled`, nor the `subsystem` link back to the class).
        if !id.starts_with("intel-rapl:") {
            continue;
        }
        let name = m.zone(&id, "name").trim().to_string();
        if name.starts_with("psys") {
            out.push((id, name));
        }
    }
    out
}

#[test]
fn psys_is_served_on_the_master_packages_cpus_only() {
    // WHY: on Sapphire/Emerald Rapids only the psys master package's CPUs read
    // MSR_PLATFORM_ENERGY_STATUS; the others read 0 (Linux "perf/x86/rapl: Fix
    // psys-energy event on Intel SPR platform"), and the master need not be
    // package 0. A reader that adds psys over packages must count it once (54 J,
    // not 108 J), and one that reads psys on package 0 only gets 0 when the master
    // is package 1. powercap shows psys once, on the master (`psys` / `psys-N`).
    for master in [0u32, 1] {
        let c = EmulatorConfig::intel(0x8F)
            .with_sockets(2)
            .with_cpus_per_socket(2)
            .with_psys_master(master);
        let m = mount(EmulatorConfig {
            start_offset: Duration::from_secs(100),
            ..c
        });
        let other = 1 - master;
        let before = m.emu.truth(master, Domain::Psys).0;
        let on_master: Vec<u64> = (0..2)
            .map(|k| m.msr(master * 2 + k, 0x64D).unwrap())
            .collect();
        let after = m.emu.truth(master, Domain::Psys).0;
        let elsewhere: Vec<u64> = (0..2)
            .map(|k| m.msr(other * 2 + k, 0x64D).unwrap())
            .collect();
        assert_eq!(elsewhere, [0, 0], "master {master}");
        // psys counts whole joules on SPR: the count is the truth rounded down, to
        // one count and one 1 ms update step of 54 W.
        for &raw in &on_master {
            let j = raw as f64;
            assert!(
                before - 1.0 - 54.0 * 0.001 <= j && j <= after + 1e-9,
                "master {master}: {raw} vs truth {before}..{after}"
            );
        }
        assert!(before >= 54.0 * 100.0, "{before}");
        // Summing one CPU per package counts psys once.
        let summed = m.msr(0, 0x64D).unwrap() + m.msr(2, 0x64D).unwrap();
        assert!(summed as f64 <= m.emu.truth(master, Domain::Psys).0 + 1e-9);
        // psys belongs to the master: nothing on the other socket.
        assert_eq!(m.emu.truth(other, Domain::Psys).0, 0.0);
        assert!(m.emu.served(Mechanism::Msr, other, Domain::Psys).is_none());
        let served = m.emu.served(Mechanism::Msr, master, Domain::Psys).unwrap();
        assert_eq!(served.reads, 3, "the zero reads elsewhere serve nothing");
        let e = m
            .emu
            .inject(Fault::new(FaultKind::Freeze, other, Domain::Psys))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("psys master, socket {master}")), "{e}");

        // powercap: one psys zone, top level, named after the master.
        let zones = psys_zones(&m);
        let want = if master == 0 {
            "psys".to_string()
        } else {
            format!("psys-{master}")
        };
        assert_eq!(zones.len(), 1, "{zones:?}");
        assert_eq!(zones[0].1, want);
        let uj = m.uj(&zones[0].0);
        assert!(uj > 0 && uj % 1_000_000 == 0, "{uj}");
        let pc = m
            .emu
            .served(Mechanism::Powercap, master, Domain::Psys)
            .unwrap();
        assert_eq!(pc.last_j.0, uj as f64 / 1e6);
        assert_eq!(
            m.read("sys/devices/power/events/energy-psys"),
            "event=0x05\n"
        );
    }
}

#[test]
fn bios_disabled_psys_reads_zero_and_stays_zero() {
    // WHY: the BIOS can disable psys while perf still lists `energy-psys` on
    // Sapphire/Emerald Rapids (`no_check` in intel_rapl_spr_msrs) and the MSR
    // exists: every CPU reads 0, for good. A reader must not report psys as the
    // platform's energy then. powercap registers no zone for a domain reading 0
    // (`rapl_check_domain`), so there is none; the truth is what was drawn.
    let c = EmulatorConfig::intel(0x8F)
        .with_sockets(2)
        .with_cpus_per_socket(2)
        .with_psys_disabled();
    let m = mount(EmulatorConfig {
        start_offset: Duration::from_secs(100),
        ..c
    });
    let first: Vec<u64> = (0..4).map(|cpu| m.msr(cpu, 0x64D).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(30));
    let later: Vec<u64> = (0..4).map(|cpu| m.msr(cpu, 0x64D).unwrap()).collect();
    assert_eq!(first, [0, 0, 0, 0]);
    assert_eq!(later, [0, 0, 0, 0]);
    assert!(psys_zones(&m).is_empty(), "{:?}", psys_zones(&m));
    assert_eq!(
        m.read("sys/devices/power/events/energy-psys"),
        "event=0x05\n"
    );
    // The platform drew 54 W all along; the counter measured nothing of it.
    assert!(m.emu.truth(0, Domain::Psys).0 >= 54.0 * 100.0);
    let served = m.emu.served(Mechanism::Msr, 0, Domain::Psys).unwrap();
    assert_eq!((served.energy().0, served.last_j.0), (0.0, 0.0));
    // Packages still count.
    assert!(m.msr(2, 0x611).unwrap() > 0);
}
