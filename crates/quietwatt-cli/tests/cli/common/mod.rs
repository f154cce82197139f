//! Shared by the CLI's integration tests: an emulator mounted in a temporary
//! directory, and the `quietwatt` binary run against it.
#![allow(dead_code)]

use quietwatt::Domain;
use quietwatt_emulator::{Emulator, EmulatorConfig, Mechanism as Served};
use std::num::NonZero;
use std::path::Path;
use std::process::{Command, Output};

/// A mounted emulator and its directory (dropped in this order: unmount, then remove).
pub struct Mounted {
    pub emulator: Emulator,
    pub dir: tempfile::TempDir,
    /// Held by a load-following emulator ([`mount_following`]) until it is
    /// dropped: one such truth at a time in this test binary.
    _following: Option<std::sync::MutexGuard<'static, ()>>,
}

/// Taken by every load-following emulator. Its power follows the whole
/// machine's busy CPUs in 10 ms `/proc/stat` quanta, so two truth tests that
/// load the CPUs at once mix their quanta, and one's energy is the other's
/// error (an attribution truth failed by 0.3 J beside the dashboard test's
/// busy shell). Other tests' load still runs beside them, as on a busy CI
/// machine, within each test's stated tolerance.
static FOLLOWING: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Mounted {
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Energy the emulator served between the first and the last powercap read of a domain.
    pub fn served_powercap(&self, socket: u32, domain: Domain) -> f64 {
        self.served(Served::Powercap, socket, domain)
    }

    /// Energy served between the first and the last read of a domain through `mechanism`.
    pub fn served(&self, mechanism: Served, socket: u32, domain: Domain) -> f64 {
        self.served_record(mechanism, socket, domain).energy().0
    }

    /// Energy served between the second and the last read of a domain through
    /// `mechanism`: what a mechanism that probes each counter once while opening
    /// (MSR, to leave out registers that fault) counts from.
    pub fn served_after_probe(&self, mechanism: Served, socket: u32, domain: Domain) -> f64 {
        self.served_record(mechanism, socket, domain)
            .energy_after_probe()
            .0
    }

    /// Everything the emulator served of a domain through `mechanism`: energies and times.
    pub fn served_record(
        &self,
        mechanism: Served,
        socket: u32,
        domain: Domain,
    ) -> quietwatt_emulator::Served {
        self.emulator
            .served(mechanism, socket, domain)
            .unwrap_or_else(|| {
                panic!("the emulator served no {mechanism:?} read of {socket}/{domain}")
            })
    }
}

/// Mounts `config`; fails loudly when FUSE cannot be used (these tests must run in CI).
pub fn mount(config: EmulatorConfig) -> Mounted {
    let dir = tempfile::tempdir().expect("tempdir");
    let emulator = Emulator::mount(dir.path(), config).unwrap_or_else(|e| {
        panic!(
            "cannot mount the RAPL emulator ({e}). These tests need FUSE: run them as root \
             on a machine with /dev/fuse (or install fuse3 for fusermount3)."
        )
    });
    Mounted {
        emulator,
        dir,
        _following: None,
    }
}

/// Runs `quietwatt --root ROOT ARGS...`.
/// The emulator's load-following package: 10 W idle + [`FOLLOW_W_PER_CPU`] per
/// busy CPU of this machine (from its real CPU time), so each entity's true
/// dynamic energy is that power times its CPU time.
pub fn mount_following() -> Mounted {
    mount_following_at(FOLLOW_W_PER_CPU)
}

/// [`mount_following`] with `per_cpu_w` watts per busy CPU.
pub fn mount_following_at(per_cpu_w: f64) -> Mounted {
    mount_following_with(
        EmulatorConfig::default(),
        quietwatt_emulator::LoadFollowing::new(10.0, per_cpu_w),
    )
}

/// `config` with one package per machine, `follow`ing its load on 10 W idle
/// (core and uncore inside it), mounted while no other load-following test
/// runs.
fn mount_following_with(
    config: EmulatorConfig,
    follow: quietwatt_emulator::LoadFollowing,
) -> Mounted {
    let mut config = config.with_cpus_per_socket(cpus() as u32);
    config.power.follow = Some(follow);
    (config.power.default.core, config.power.default.uncore) = (4.0, 1.0);
    // A test that failed while holding it leaves it poisoned: the next one runs.
    let exclusive = FOLLOWING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Mounted {
        _following: Some(exclusive),
        ..mount(config)
    }
}

/// The load-following emulator with emulated frequencies
/// ([`FREQS_KHZ`]): each busy CPU draws `per_cpu_w + per_ghz_w ×` its
/// `scaling_cur_freq` in GHz, on 10 W idle.
pub fn mount_following_freq(per_cpu_w: f64, per_ghz_w: f64) -> Mounted {
    mount_following_with(
        EmulatorConfig::default().with_cpufreq_khz(&FREQS_KHZ),
        quietwatt_emulator::LoadFollowing {
            per_ghz_w,
            ..quietwatt_emulator::LoadFollowing::new(10.0, per_cpu_w)
        },
    )
}

/// [`mount_following_freq`]'s frequencies, kHz.
pub const FREQS_KHZ: [u64; 3] = [3_000_000, 2_200_000, 1_500_000];

/// [`mount_following`]'s watts per busy CPU.
pub const FOLLOW_W_PER_CPU: f64 = 5.0;

/// This machine's CPUs.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, NonZero::get)
}

/// How far an entity's attributed dynamic energy may be from its truth
/// ([`FOLLOW_W_PER_CPU`] × its CPU time) under [`mount_following`]: the emulator's
/// 10 ms busy quanta per CPU at either end (2 × CPUs × 10 ms × 5 W), and 10 % for
/// the few ms of CPU a shell's start and its `cat` add, counted and not in the
/// truth, and quanta mixed among entities that run together.
pub fn follow_tolerance(truth_j: f64) -> f64 {
    2.0 * cpus() as f64 * 0.010 * FOLLOW_W_PER_CPU + 0.10 * truth_j
}

pub fn quietwatt(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quietwatt"))
        .arg("--root")
        .arg(root)
        .args(args)
        .env_remove("QUIETWATT_ROOT")
        .output()
        .expect("run quietwatt")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The tolerance of the issue: 0.5 %, or one RAPL update (1 ms) of energy at `watts`.
pub fn tolerance(expected_j: f64, watts: f64) -> f64 {
    (expected_j * 0.005).max(watts * 0.001)
}

/// Checks that the SVG plot at `svg_path` has its PNG beside it (`plot.png`): the
/// PNG signature, an IHDR of twice the SVG's `width` and `height` (the renderer's
/// scale), a complete image that decodes, and a plot rather than a blank page.
pub fn assert_png_beside(svg_path: &Path) {
    let svg =
        std::fs::read_to_string(svg_path).unwrap_or_else(|e| panic!("{}: {e}", svg_path.display()));
    let root = &svg[..svg.find('>').expect("the <svg> element")];
    let attr = |name: &str| -> u32 {
        let key = format!(" {name}=\"");
        let start = root
            .find(&key)
            .unwrap_or_else(|| panic!("no {name}: {root}"))
            + key.len();
        let len = root[start..].find('"').expect("closing quote");
        root[start..start + len]
            .parse()
            .unwrap_or_else(|e| panic!("{name}: {e}: {root}"))
    };
    let (w, h) = (attr("width"), attr("height"));
    let png_path = svg_path.with_extension("png");
    let bytes = std::fs::read(&png_path)
        .unwrap_or_else(|e| panic!("no PNG beside {}: {e}", svg_path.display()));
    let name = png_path.display();
    assert!(bytes.len() > 33, "{name}: {} bytes", bytes.len());
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{name}: PNG signature");
    // The first chunk: its length (13), "IHDR", then width and height, big-endian.
    assert_eq!(&bytes[8..16], b"\0\0\0\x0dIHDR", "{name}: IHDR first");
    let be = |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    assert_eq!(
        (be(16), be(20)),
        (2 * w, 2 * h),
        "{name}: 2x the SVG's {w}x{h}"
    );
    assert!(
        bytes.ends_with(b"IEND\xae\x42\x60\x82"),
        "{name}: truncated"
    );
    let mut reader = png::Decoder::new(std::io::Cursor::new(&bytes))
        .read_info()
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut buf = vec![0; reader.output_buffer_size().expect("a size that fits")];
    let frame = reader
        .next_frame(&mut buf)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let pixels = &buf[..frame.buffer_size()];
    let step = frame.color_type.samples();
    let colours: std::collections::HashSet<&[u8]> = pixels.chunks(step).collect();
    assert!(
        colours.len() >= 3,
        "{name}: {} colours: blank",
        colours.len()
    );
}

/// A tmpfs of `size` (e.g. `64k`): a filesystem that fills up, for the full-disk
/// tests. Unmounted on drop, a panicking test's included. Needs root.
pub struct SmallFs(tempfile::TempDir);

impl SmallFs {
    /// Mounts it on a fresh temporary directory.
    pub fn new(size: &str) -> SmallFs {
        let dir = tempfile::tempdir().unwrap();
        let st = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "quietwatt-test-full",
            ])
            .arg(dir.path())
            .status()
            .expect("run mount");
        assert!(
            st.success(),
            "mounting a small tmpfs failed: this test needs root"
        );
        SmallFs(dir)
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        // Before the directory itself is removed (the field drops after this).
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

/// Seconds of CPU time every CPU of this machine spent busy so far (`/proc/stat`'s
/// first line: all but idle and iowait, in USER_HZ ticks of 10 ms): with a
/// process's own CPU time, how much other load ran beside it.
pub fn machine_busy_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let ticks: Vec<f64> = stat
        .lines()
        .next()
        .expect("the cpu line")
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...
    let busy: f64 = ticks
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    busy / 100.0
}

/// Builds `source` as crate `krate` (its functions' paths: `krate::f`) into the
/// executable `dir/name` with cargo's toolchain (`RUSTC` where cargo set it,
/// `rustc` on PATH), edition 2021 and `flags` (`-C opt-level=1`,
/// `-C force-frame-pointers=yes`, `--cfg x`, `-g`): the test programs the
/// profile tests run.
pub fn build_rust(
    dir: &Path,
    krate: &str,
    name: &str,
    source: &str,
    flags: &[&str],
) -> std::path::PathBuf {
    let src = dir.join(format!("{krate}.rs"));
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(name);
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let o = Command::new(&rustc)
        .args(["--edition", "2021"])
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {rustc} to build the test program {name}: {e}"));
    assert!(
        o.status.success(),
        "building {name} failed:\n{}",
        stderr(&o)
    );
    exe
}
