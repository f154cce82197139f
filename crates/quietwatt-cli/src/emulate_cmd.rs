//! `quietwatt emulate`: serve an emulated RAPL device under a directory until
//! SIGINT/SIGTERM, then unmount and print the ground truth as JSON.

use quietwatt_emulator::{
    CpuFreq, Domains, Emulator, EmulatorConfig, Fault, Trace, TruthReport, Vendor,
};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The processor vendor to emulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VendorArg {
    /// GenuineIntel (default model 0x9E, Kaby Lake: no unit quirk).
    Intel,
    /// AuthenticAMD (default family 0x19 model 0x01, Zen 3 EPYC): package and per-core counters.
    Amd,
}

/// Serve an emulated RAPL device (powercap, msr, perf PMU description, topology,
/// cpuinfo) with a known ground truth, until Ctrl-C or SIGTERM.
#[derive(Debug, Clone, clap::Args)]
pub struct EmulateArgs {
    /// Directory to mount at (created if missing; must be empty). Default: --root.
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Processor vendor.
    #[arg(long, value_enum, default_value_t = VendorArg::Intel)]
    pub vendor: VendorArg,

    /// CPU model, hex or decimal (e.g. 0x55 Skylake-X: fixed DRAM unit; 0x8F Sapphire Rapids: 1 J psys).
    #[arg(long, value_parser = parse_number)]
    pub model: Option<u32>,

    /// CPU family, hex or decimal (default 6 on Intel, 0x19 on AMD).
    #[arg(long, value_parser = parse_number)]
    pub family: Option<u32>,

    /// Number of packages.
    #[arg(long, default_value_t = 1)]
    pub sockets: u32,

    /// CPUs per package (default 4 on Intel, 8 on AMD).
    #[arg(long)]
    pub cpus_per_socket: Option<u32>,

    /// Add the psys (platform) domain (Intel).
    #[arg(long)]
    pub psys: bool,

    /// The package whose CPUs read psys (the others read 0, as on Sapphire Rapids
    /// servers); implies --psys. Default 0.
    #[arg(long, value_name = "SOCKET")]
    pub psys_master: Option<u32>,

    /// psys disabled by the BIOS: present but reading 0 everywhere; implies --psys.
    #[arg(long)]
    pub psys_disabled: bool,

    /// Leave out the dram domain (Intel).
    #[arg(long)]
    pub no_dram: bool,

    /// Leave out the uncore (PP1) domain (Intel).
    #[arg(long)]
    pub no_uncore: bool,

    /// Leave out the core (PP0) domain.
    #[arg(long)]
    pub no_core: bool,

    /// Also serve the intel-rapl-mmio duplicate of package 0.
    #[arg(long)]
    pub mmio: bool,

    /// Energy-status unit: one count is 2^-ESU J (default 14 on Intel, 16 on AMD).
    #[arg(long)]
    pub esu: Option<u8>,

    /// Counter width in bits (8 to 32); small values wrap quickly.
    #[arg(long, default_value_t = 32)]
    pub counter_bits: u8,

    /// Counter update interval, microseconds.
    #[arg(long, default_value_t = 1000)]
    pub update_us: u64,

    /// Start the counters as if the machine had been running this long (e.g. 60s, 1500ms).
    #[arg(long, value_name = "DURATION")]
    pub start_offset: Option<String>,

    /// Power per domain: [SOCKET/]DOMAIN=WATTS[,...], DOMAIN in package, core, uncore,
    /// dram, platform (psys beyond packages and dram). Repeatable.
    /// `follow=IDLE:PER_CPU[:PER_GHZ]` makes each package draw IDLE watts plus, per busy
    /// CPU of this machine (read from the real /proc/stat), PER_CPU watts and PER_GHZ
    /// watts per GHz of that CPU's emulated scaling_cur_freq (needs --cpufreq), e.g.
    /// `follow=10:5` or `follow=10:2:1`.
    #[arg(long, value_name = "DOMAIN=W[,..]")]
    pub power: Vec<String>,

    /// Serve sys/devices/system/cpu/cpuN/cpufreq/ with these frequencies (GHz, 1 to 32
    /// of them, 0.1 to 10), as acpi-cpufreq under the performance governor: each CPU
    /// runs at the highest one within its scaling_min_freq..scaling_max_freq, which
    /// root may write (kHz), e.g. --cpufreq 1.5,2.2,3.0.
    #[arg(long, value_name = "GHZ[,GHZ...]")]
    pub cpufreq: Option<String>,

    /// Scale the power over time: a CSV of `time_s,scale` lines (piecewise constant).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,

    /// Inject a fault: `KIND[=JOULES]:SOCKET/DOMAIN[@TIME]`, KIND in eacces, vanish,
    /// freeze, garbage, overrange, reset, backstep (default 0.5 J), jump (default
    /// 10000 J), busy[=READS] (the next READS reads fail with EBUSY, default 3)
    /// (e.g. freeze:0/package@1.5s, backstep=2J:0/dram@1s, busy=6:0/package@1s).
    /// Repeatable.
    #[arg(long = "fault", value_name = "SPEC")]
    pub faults: Vec<String>,

    /// Register powercap zones out of socket order (package-1 before package-0).
    #[arg(long)]
    pub shuffle_zone_ids: bool,

    /// Make energy_uj and msr readable by everyone (as before the CVE-2020-8694 fix).
    #[arg(long)]
    pub world_readable: bool,

    /// Write the final ground truth JSON here instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub truth: Option<PathBuf>,
}

/// Parses `0x55`, `55h` or decimal `85`.
fn parse_number(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let parsed = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u32::from_str_radix(h, 16)
    } else if let Some(h) = t.strip_suffix('h') {
        u32::from_str_radix(h, 16)
    } else {
        t.parse()
    };
    parsed.map_err(|_| format!("'{s}' is not a number (hex as 0x55)"))
}

impl EmulateArgs {
    /// The emulator configuration these arguments describe, validated.
    pub fn config(&self) -> Result<EmulatorConfig, String> {
        let mut c = match self.vendor {
            VendorArg::Intel => EmulatorConfig::default(),
            VendorArg::Amd => EmulatorConfig::amd(),
        };
        c.vendor = match self.vendor {
            VendorArg::Intel => Vendor::Intel {
                family: self.family.unwrap_or(6),
                model: self.model.unwrap_or(0x9E),
            },
            VendorArg::Amd => Vendor::Amd {
                family: self.family.unwrap_or(0x19),
                model: self.model.unwrap_or(0x01),
            },
        };
        c.sockets = self.sockets;
        if let Some(n) = self.cpus_per_socket {
            c.cpus_per_socket = n;
        }
        let psys = self.psys || self.psys_master.is_some() || self.psys_disabled;
        c.domains = match self.vendor {
            VendorArg::Intel => Domains {
                core: !self.no_core,
                uncore: !self.no_uncore,
                dram: !self.no_dram,
                psys,
            },
            VendorArg::Amd => Domains {
                core: !self.no_core,
                psys,
                ..Domains::AMD
            },
        };
        c.psys_master = self.psys_master.unwrap_or(0);
        c.psys_disabled = self.psys_disabled;
        c.mmio = self.mmio;
        c.esu = self.esu;
        c.counter_bits = self.counter_bits;
        c.update_interval = Duration::from_micros(self.update_us);
        if let Some(offset) = &self.start_offset {
            c.start_offset = quietwatt_emulator::duration::parse_duration(offset)
                .map_err(|e| format!("--start-offset: {e}"))?;
        }
        for spec in &self.power {
            c.power.apply(spec).map_err(|e| e.to_string())?;
        }
        if let Some(list) = &self.cpufreq {
            c.cpufreq = Some(CpuFreq::parse(list).map_err(|e| format!("--cpufreq {list}: {e}"))?);
        }
        if let Some(path) = &self.trace {
            c.power.trace = Some(Trace::load(path).map_err(|e| e.to_string())?);
        }
        for spec in &self.faults {
            c.faults
                .push(spec.parse::<Fault>().map_err(|e| e.to_string())?);
        }
        c.shuffle_zone_ids = self.shuffle_zone_ids;
        c.enforce_permissions = !self.world_readable;
        c.validate().map_err(|e| e.to_string())?;
        Ok(c)
    }
}

/// SIGINT, SIGTERM and SIGHUP, blocked in every thread so that only `sigwait` sees them.
struct BlockedSignals {
    set: libc::sigset_t,
    old: libc::sigset_t,
}

impl BlockedSignals {
    /// Blocks the signals in this thread and every thread it starts afterwards.
    fn block() -> BlockedSignals {
        // SAFETY: the sets are initialised by sigemptyset before use; the calls only
        // change this thread's signal mask.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            libc::sigaddset(&mut set, libc::SIGHUP);
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            BlockedSignals { set, old }
        }
    }

    /// Waits for one of the signals, or for `gone()` to turn true (checked twice a
    /// second); returns what ended the wait.
    fn wait(&self, gone: impl Fn() -> bool) -> &'static str {
        let timeout = libc::timespec {
            tv_sec: 0,
            tv_nsec: 500_000_000,
        };
        loop {
            // SAFETY: `set` is a valid signal set; no siginfo is asked for; `timeout`
            // lives across the call.
            let sig = unsafe { libc::sigtimedwait(&self.set, std::ptr::null_mut(), &timeout) };
            match sig {
                libc::SIGINT => return "SIGINT",
                libc::SIGTERM => return "SIGTERM",
                libc::SIGHUP => return "SIGHUP",
                // EAGAIN: the timeout; EINTR: another signal. Either way, look.
                _ if gone() => return "unmounted by someone else",
                _ => {}
            }
        }
    }
}

impl Drop for BlockedSignals {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `block`.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.old, std::ptr::null_mut());
        }
    }
}

/// Mounts the emulator at `dir` (or the positional DIR), tells how to use it, serves
/// until SIGINT/SIGTERM/SIGHUP or until someone else unmounts it, unmounts and writes
/// the ground truth JSON.
pub fn run(args: &EmulateArgs, dir: &Path) -> Result<(), String> {
    let dir = args.dir.as_deref().unwrap_or(dir);
    if dir == Path::new("/") {
        return Err(
            "give the directory to mount the emulator at: `quietwatt emulate DIR` or \
             `quietwatt --root DIR emulate` (it cannot be /)"
                .to_string(),
        );
    }
    let config = args.config()?;
    let created = !dir.exists();
    if created {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    // Block the signals before the FUSE thread starts, so it inherits the mask.
    let signals = BlockedSignals::block();
    let emulator = match Emulator::mount(dir, config) {
        Ok(e) => e,
        Err(e) => {
            if created {
                let _ = std::fs::remove_dir(dir);
            }
            return Err(e.to_string());
        }
    };
    eprint!("{}", describe(&emulator));

    let signal = signals.wait(|| !emulator.is_mounted());
    eprintln!(
        "quietwatt: {signal}: {} {}",
        if emulator.is_mounted() {
            "unmounting"
        } else {
            "stopping the emulator of"
        },
        emulator.dir().display()
    );
    let report = emulator.report();
    let mountpoint = emulator.dir().to_path_buf();
    let unmounted = emulator.unmount().map_err(|e| e.to_string());
    drop(signals);
    if created {
        let _ = std::fs::remove_dir(&mountpoint);
    }
    write_truth(&report, args.truth.as_deref())?;
    unmounted
}

/// What is served and how to use it.
fn describe(emulator: &Emulator) -> String {
    let c = emulator.config();
    let d = emulator.dir().display().to_string();
    let v = c.vendor;
    let report = emulator.report();
    let domains: Vec<String> = report
        .domains
        .iter()
        .map(|t| format!("{}/{} {} W", t.socket, t.domain, t.watts))
        .collect();
    let faults: Vec<String> = c.faults.iter().map(ToString::to_string).collect();
    let cpufreq = c.cpufreq.as_ref().map_or(String::new(), |f| {
        let ghz: Vec<String> = f
            .available_khz
            .iter()
            .map(|k| format!("{}", *k as f64 / 1e6))
            .collect();
        format!(
            "\n  cpufreq: {} GHz (sys/devices/system/cpu/cpuN/cpufreq; root writes scaling_max_freq)",
            ghz.join(", ")
        )
    });
    let psys = if !c.domains.psys {
        String::new()
    } else if c.psys_disabled {
        "\n  psys: disabled by the BIOS (reads 0 everywhere)".to_string()
    } else {
        format!(
            "\n  psys: read on package {}'s CPUs only (0 elsewhere)",
            c.psys_master
        )
    };
    let q = |s: &str| {
        if s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-:".contains(&b))
        {
            s.to_string()
        } else {
            format!("'{}'", s.replace('\'', r"'\''"))
        }
    };
    let dq = q(&d);
    format!(
        "quietwatt: *** EMULATED RAPL *** mounted at {d}\n\
         \x20 {vid} family {fam:#x} model {model:#x} ({name}), {s} socket(s) x {n} CPUs\n\
         \x20 ESU {esu} (unit register {unit:#x}), {bits}-bit counters updated every {upd}{trace}\n\
         \x20 domains: {domains}{psys}{cpufreq}\n\
         \x20 faults: {faults}\n\
         \x20 serves: sys/class/powercap + sys/devices/virtual/powercap{mmio}, dev/cpu/N/msr,\n\
         \x20         sys/bus/event_source/devices/power (description only), sys/devices/system/cpu, proc/cpuinfo\n\
         use it:\n\
         \x20 quietwatt --root {dq} list\n\
         \x20 QUIETWATT_ROOT={dq} quietwatt run -- COMMAND\n\
         \x20 sh {dq}/.quietwatt-emulator/enter.sh COMMAND   (any program, as root: sees it as /sys, /proc/cpuinfo, /dev/cpu)\n\
         \x20 cat {dq}/.quietwatt-emulator/truth.json        (ground truth and what was served, live)\n\
         Ctrl-C or SIGTERM unmounts and prints the final ground truth as JSON.\n",
        vid = v.vendor_id(),
        fam = v.family(),
        model = v.model(),
        name = v.model_name(),
        s = c.sockets,
        n = c.cpus_per_socket,
        esu = c.esu(),
        unit = c.unit_register(),
        bits = c.counter_bits,
        upd = quietwatt_emulator::duration::format_duration(c.update_interval),
        trace = if c.power.trace.is_some() { ", power scaled by a trace" } else { "" },
        domains = domains.join(", "),
        faults = if faults.is_empty() { "none".to_string() } else { faults.join(", ") },
        mmio = if c.mmio { " (+ intel-rapl-mmio)" } else { "" },
    )
}

/// Writes the report to `path`, or stdout.
fn write_truth(report: &TruthReport, path: Option<&Path>) -> Result<(), String> {
    let mut json = serde_json::to_string_pretty(report)
        .map_err(|e| format!("cannot encode the ground truth: {e}"))?;
    json.push('\n');
    match path {
        Some(p) => std::fs::write(p, json)
            .map_err(|e| format!("cannot write the ground truth to {}: {e}", p.display())),
        None => std::io::stdout()
            .write_all(json.as_bytes())
            .map_err(|e| format!("cannot write the ground truth: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: EmulateArgs,
    }

    fn config(argv: &[&str]) -> Result<EmulatorConfig, String> {
        let mut full = vec!["emulate"];
        full.extend_from_slice(argv);
        Cli::try_parse_from(full)
            .map_err(|e| e.to_string())?
            .args
            .config()
    }

    #[test]
    fn arguments_build_the_configuration() {
        let c = config(&[
            "--model",
            "0x55",
            "--sockets",
            "2",
            "--psys",
            "--no-uncore",
            "--esu",
            "16",
            "--counter-bits",
            "16",
            "--update-us",
            "500",
            "--power",
            "package=30,1/dram=6",
            "--fault",
            "freeze:1/package@1.5s",
            "--fault",
            "eacces:0/dram",
            "--mmio",
        ])
        .unwrap();
        assert_eq!(c.vendor, Vendor::SKYLAKE_X);
        assert!(c.domains.psys && !c.domains.uncore && c.domains.dram);
        assert_eq!((c.sockets, c.esu(), c.counter_bits), (2, 16, 16));
        assert_eq!(c.update_interval, Duration::from_micros(500));
        assert_eq!(c.faults.len(), 2);
        assert!(c.mmio);
        let amd = config(&["--vendor", "amd"]).unwrap();
        assert_eq!(amd.vendor, Vendor::ZEN3);
        assert_eq!(amd.domains, Domains::AMD);
        assert!(config(&["--vendor", "amd", "--psys"])
            .unwrap_err()
            .contains("AMD"));
        assert!(config(&["--fault", "melt:0/package"]).is_err());
        // psys options imply --psys; a master that does not exist is refused.
        let spr = config(&[
            "--model",
            "0x8F",
            "--sockets",
            "2",
            "--psys-master",
            "1",
            "--fault",
            "backstep=2J:1/psys@1s",
            "--fault",
            "reset:0/package@2s",
        ])
        .unwrap();
        assert!(spr.domains.psys && !spr.psys_disabled);
        assert_eq!((spr.psys_master, spr.faults.len()), (1, 2));
        assert!(config(&["--psys-disabled"]).unwrap().psys_disabled);
        let e = config(&["--psys-master", "1"]).unwrap_err();
        assert!(e.contains("psys_master = 1"), "{e}");
        assert!(config(&["--fault", "jump=100000000J:0/package"])
            .unwrap_err()
            .contains("smaller amount"));
        assert!(config(&["--power", "core=100"]).is_err());
        // Emulated frequencies, and a load-following power per GHz of them.
        let f = config(&["--cpufreq", "1.5,2.2,3.0", "--power", "follow=10:2:1"]).unwrap();
        let cpufreq = f.cpufreq.unwrap();
        assert_eq!(cpufreq.available_khz, [3_000_000, 2_200_000, 1_500_000]);
        assert_eq!(f.power.follow.unwrap().per_ghz_w, 1.0);
        let e = config(&["--power", "follow=10:2:1"]).unwrap_err();
        assert!(e.contains("--cpufreq"), "{e}");
        for bad in ["", "fast", "1.5,1.5", "0.01", "12"] {
            let e = config(&["--cpufreq", bad]).unwrap_err();
            assert!(e.contains("--cpufreq"), "{bad}: {e}");
        }
        assert_eq!(parse_number("0x9E"), Ok(0x9E));
        assert_eq!(parse_number("85"), Ok(85));
    }
}
