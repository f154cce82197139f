//! Emulated CPU frequencies mounted for real: the cpufreq files as a shell and
//! other users see them, root's writes to the limits, and a load-following package
//! whose busy CPUs draw per GHz of their frequency. Needs root and /dev/fuse (it
//! mounts the emulator); it fails loudly without them. The load comes from a
//! `/proc/stat` the test writes (every CPU always busy), and energies are checked
//! against the emulator's own record of when each value was served, never against
//! the test's sleeps, so a loaded machine does not break it.

use quietwatt_core::Domain;
use quietwatt_emulator::{EmulatorConfig, Mechanism};
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod support;
use support::{mount, Mounted};

impl Mounted {
    fn cpufreq(&self, cpu: u32, file: &str) -> PathBuf {
        self.emu
            .dir()
            .join(format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/{file}"))
    }

    fn read(&self, cpu: u32, file: &str) -> String {
        fs::read_to_string(self.cpufreq(cpu, file)).unwrap_or_else(|e| panic!("{file}: {e}"))
    }

    /// Writes as `std::fs::write` does (a truncating open, then one write).
    fn write(&self, cpu: u32, file: &str, text: &str) -> std::io::Result<()> {
        fs::write(self.cpufreq(cpu, file), text)
    }
}

/// Runs `sh -c script` as root, or as user and group 65534 (nobody); its stderr
/// when it fails.
fn sh(script: &str, nobody: bool) -> Result<(), String> {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", script]);
    if nobody {
        cmd.uid(65534).gid(65534);
    }
    let out = cmd.output().expect("run sh");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn errno(r: std::io::Result<()>) -> i32 {
    r.expect_err("the write succeeded").raw_os_error().unwrap()
}

fn three_frequencies() -> EmulatorConfig {
    EmulatorConfig::default()
        .with_cpus_per_socket(2)
        .with_cpufreq_khz(&[1_500_000, 2_200_000, 3_000_000])
}

#[test]
fn cpufreq_files_serve_the_policy_and_root_alone_changes_the_limits() {
    let m = mount(three_frequencies());
    assert_eq!(
        m.read(1, "scaling_available_frequencies"),
        "3000000 2200000 1500000 \n"
    );
    assert_eq!(m.read(1, "cpuinfo_min_freq"), "1500000\n");
    assert_eq!(m.read(1, "cpuinfo_max_freq"), "3000000\n");
    assert_eq!(m.read(1, "scaling_driver"), "acpi-cpufreq\n");
    assert_eq!(m.read(1, "scaling_governor"), "performance\n");
    // The widest limits at the start, so the highest frequency.
    assert_eq!(m.read(1, "scaling_min_freq"), "1500000\n");
    assert_eq!(m.read(1, "scaling_max_freq"), "3000000\n");
    assert_eq!(m.read(1, "scaling_cur_freq"), "3000000\n");

    // A maximum between two frequencies: the governor runs at the one below.
    m.write(1, "scaling_max_freq", "2500000\n").unwrap();
    assert_eq!(m.read(1, "scaling_max_freq"), "2500000\n");
    assert_eq!(m.read(1, "scaling_cur_freq"), "2200000\n");
    // Each CPU has its own policy.
    assert_eq!(m.read(0, "scaling_cur_freq"), "3000000\n");
    // Clamped to the hardware's range, as the kernel does.
    m.write(1, "scaling_max_freq", "1").unwrap();
    assert_eq!(m.read(1, "scaling_max_freq"), "1500000\n");
    assert_eq!(m.read(1, "scaling_cur_freq"), "1500000\n");
    // Garbage, and a minimum above the maximum: EINVAL, nothing changes.
    assert_eq!(
        errno(m.write(1, "scaling_max_freq", "fast\n")),
        libc::EINVAL
    );
    assert_eq!(
        errno(m.write(1, "scaling_min_freq", "2200000\n")),
        libc::EINVAL
    );
    assert_eq!(m.read(1, "scaling_min_freq"), "1500000\n");
    // A shell's redirection (a truncating open) works, for root.
    let max = m.cpufreq(1, "scaling_max_freq");
    sh(&format!("echo 99000000 > '{}'", max.display()), false).unwrap();
    assert_eq!(m.read(1, "scaling_max_freq"), "3000000\n");
    assert_eq!(m.read(1, "scaling_cur_freq"), "3000000\n");
    m.write(1, "scaling_min_freq", "2200000").unwrap();
    assert_eq!(m.read(1, "scaling_cur_freq"), "3000000\n");

    // Anyone reads; another user cannot write.
    let err = sh(&format!("echo 1500000 > '{}'", max.display()), true).unwrap_err();
    assert!(err.contains("Permission denied"), "{err}");
    let err = sh(&format!("cat '{}'", max.display()), true);
    assert_eq!(err, Ok(()));
    assert_eq!(m.read(1, "scaling_max_freq"), "3000000\n");
    // Nor does root write the read-only files, nor the other 0644 attributes.
    assert_eq!(
        errno(m.write(1, "scaling_cur_freq", "1500000")),
        libc::EACCES
    );
    assert_eq!(
        errno(m.write(1, "cpuinfo_max_freq", "1500000")),
        libc::EACCES
    );
    let online = m.emu.dir().join("sys/devices/system/cpu/cpu1/online");
    assert_eq!(
        fs::write(online, "0").unwrap_err().raw_os_error(),
        Some(libc::EPERM)
    );
}

/// A `/proc/stat` where `cpus` CPUs never idle.
fn always_busy(path: &Path, cpus: u32) {
    let mut s = String::from("cpu  1 0 0 0 0 0 0 0 0 0\n");
    for c in 0..cpus {
        s += &format!("cpu{c} 1 0 0 0 0 0 0 0 0 0\n");
    }
    fs::write(path, s).unwrap();
}

/// The package energy served between two reads `pause` apart, and the emulated
/// time between them (from the emulator's record of the reads, not the sleep).
fn window(m: &Mounted, pause: Duration) -> (f64, f64) {
    let uj = m
        .emu
        .dir()
        .join("sys/class/powercap/intel-rapl:0/energy_uj");
    m.emu.reset_served();
    fs::read_to_string(&uj).unwrap();
    std::thread::sleep(pause);
    fs::read_to_string(&uj).unwrap();
    let s = m
        .emu
        .served(Mechanism::Powercap, 0, Domain::Package)
        .unwrap();
    (s.energy().0, (s.last_t - s.first_t).as_secs_f64())
}

#[test]
fn busy_cpus_draw_per_ghz_of_their_frequency() {
    let stat = tempfile::NamedTempFile::new().unwrap();
    always_busy(stat.path(), 2);
    let mut config = three_frequencies().with_power("follow=10:2:1").unwrap();
    config.power.follow.as_mut().unwrap().stat_path = Some(stat.path().to_path_buf());
    let m = mount(config);
    let check = |watts: f64, what: &str| {
        let (j, t) = window(&m, Duration::from_millis(300));
        let slack = slack(watts);
        eprintln!("{what}: {j:.6} J over {t:.6} s, expected {watts} W");
        assert!(
            (j - watts * t).abs() <= slack,
            "{what}: {j} J over {t} s is not {watts} W (± {slack} J)"
        );
    };
    // Both CPUs at 3 GHz: 10 + 2 × (2 + 3) W.
    check(20.0, "3 GHz");
    m.write(0, "scaling_max_freq", "1500000").unwrap();
    // One at 1.5 GHz: 10 + (2 + 1.5) + (2 + 3) W.
    check(18.5, "1.5 and 3 GHz");
    m.write(1, "scaling_max_freq", "2200000").unwrap();
    check(17.7, "1.5 and 2.2 GHz");

    // Across a write, the energy lies between the two powers' (the time before it
    // charged at the old frequency, after it at the new).
    let uj = m
        .emu
        .dir()
        .join("sys/class/powercap/intel-rapl:0/energy_uj");
    m.emu.reset_served();
    fs::read_to_string(&uj).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    m.write(0, "scaling_max_freq", "3000000").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    fs::read_to_string(&uj).unwrap();
    let s = m
        .emu
        .served(Mechanism::Powercap, 0, Domain::Package)
        .unwrap();
    let (j, t) = (s.energy().0, (s.last_t - s.first_t).as_secs_f64());
    let slack = slack(19.2);
    assert!(
        17.7 * t - slack <= j && j <= 19.2 * t + slack,
        "{j} J over {t} s is outside 17.7 to 19.2 W"
    );

    // The truth agrees: every CPU busy all along, so the package drew at least
    // the lowest power and at most the highest since the mount.
    let before = m.emu.elapsed().as_secs_f64();
    let truth = m.emu.truth(0, Domain::Package).0;
    let busy = m.emu.busy(0).unwrap().as_secs_f64();
    let after = m.emu.elapsed().as_secs_f64();
    assert!(
        truth >= 17.7 * before && truth <= 20.0 * after,
        "truth {truth} J between {before} and {after} s"
    );
    // Both CPUs busy since the mount: at least to the last read the emulator
    // served (its counter time, to the 1 ms update), at most to now. (Not to
    // `before`: a busy host may run the emulator's update late.)
    let last_read = s.last_t.as_secs_f64();
    assert!(
        busy >= 2.0 * (last_read - 0.001) && busy <= 2.0 * after,
        "busy {busy} s between the last read at {last_read} s and {after} s"
    );
    // The report: each busy second cost 2 W plus 1 W per GHz, 1.5 to 3 GHz.
    let report = m.emu.report();
    assert_eq!(report.cpufreq_khz, [3_000_000, 2_200_000]);
    let [s] = report.load_following[..] else {
        panic!("{:?}", report.load_following)
    };
    let busy = s.busy.as_secs_f64();
    assert!(busy > 0.0);
    assert!((s.dynamic_j.0 - s.frequency_j.0 - 2.0 * busy).abs() < 1e-9);
    assert!(
        s.frequency_j.0 >= 1.5 * busy - 1e-9 && s.frequency_j.0 <= 3.0 * busy + 1e-9,
        "{s:?}"
    );
    assert!(m.emu.dynamic(0).unwrap().0 >= s.dynamic_j.0);
}

/// How far a served energy may stray from `watts` × the time between its reads:
/// each read's counter time is its time rounded down to the 1 ms update (1 ms of
/// power at each end), and each value is a whole count of 61 µJ.
fn slack(watts: f64) -> f64 {
    2.0 * 0.001 * watts + 2.0 * 61e-6
}
