//! One module per subcommand.

pub mod attribute;
pub mod bench;
pub mod calibrate;
pub mod check;
pub mod doctor;
pub mod energy_bench;
pub mod estimate;
pub mod events;
pub mod exports;
pub mod fallback;
pub mod inkernel;
pub mod lab;
pub mod list;
pub mod model;
pub mod profile;
pub mod record;
pub mod record_errors;
pub mod repeat;
pub mod run;
pub mod runs;
pub mod serve;
pub mod serve_reader;
pub mod top;
pub mod trace;

use crate::exit::Failure;
use quietwatt::adaptive::{DEFAULT_MAX_HZ, DEFAULT_MIN_HZ};
use quietwatt::{Domain, EngineConfig, FreqArg, Hertz, Rate, Selection, SysRoot};
use std::path::Path;
use std::time::Duration;

/// Parses `--domains package,dram`.
pub fn selection(domains: &Option<String>) -> Result<Selection, Failure> {
    match domains {
        None => Ok(Selection::all()),
        Some(list) => list
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.parse::<Domain>().map_err(|e| Failure::usage(e.to_string())))
            .collect::<Result<Vec<_>, _>>()
            .and_then(|d| {
                if d.is_empty() {
                    Err(Failure::usage("--domains is empty: name at least one of package, core, uncore, dram, psys"))
                } else {
                    Ok(Selection::only(d))
                }
            }),
    }
}

/// Parses a duration flag (`--duration 10`, `2.5s`, `500ms`, `2m`): quietwatt-core's
/// one grammar (a bare number is seconds), more than zero.
pub fn parse_duration(s: &str) -> Result<Duration, quietwatt::duration::InvalidDuration> {
    quietwatt::duration::parse_positive_duration(s)
}

/// What to read and how often, for the front doors that measure commands (`run`,
/// `run -r`, `compare`): the same flags, defaults and checks in each.
#[derive(clap::Args, Debug, Clone)]
pub struct MeterArgs {
    /// Mechanism to read (default: the best that works here).
    #[arg(short, long)]
    pub mechanism: Option<quietwatt::Mechanism>,
    /// Domains to measure, comma-separated (package,core,uncore,dram,psys; default: all).
    #[arg(short, long)]
    pub domains: Option<String>,
    /// Reads per second while a command runs, or `auto` to follow the machine's
    /// load [default: 10, raised when a counter could wrap twice between reads]
    #[arg(short, long, allow_negative_numbers = true)]
    pub freq: Option<FreqArg>,
    #[command(flatten)]
    pub sampler: SamplerArgs,
    #[command(flatten)]
    pub estimate: estimate::EstimateArgs,
}

/// The sampler's options shared by `run` and `record` (each has its own `--freq`
/// default).
#[derive(clap::Args, Debug, Clone)]
pub struct SamplerArgs {
    /// Lowest rate of `--freq auto` (raised if a counter could wrap unseen)
    /// [default: 5]
    #[arg(long, value_name = "HZ")]
    freq_min: Option<f64>,
    /// Highest rate of `--freq auto` [default: 1000]
    #[arg(long, value_name = "HZ")]
    freq_max: Option<f64>,
    /// Pin the sampler thread to this CPU [default: the CPU whose perf events or
    /// MSRs are read, where a read costs no inter-processor interrupt; unpinned for
    /// powercap]
    #[arg(long, value_name = "N")]
    cpu: Option<usize>,
    /// Run the sampler thread at real-time priority (SCHED_FIFO) if permitted; a
    /// warning otherwise.
    #[arg(long)]
    rt: bool,
}

impl SamplerArgs {
    /// The engine configuration for `--freq` and these options.
    pub fn config(&self, freq: FreqArg, root: &SysRoot) -> Result<EngineConfig, Failure> {
        if let FreqArg::Fixed(f) = freq {
            if self.freq_min.is_some() || self.freq_max.is_some() {
                return Err(Failure::usage(format!(
                    "--freq-min and --freq-max bound --freq auto, but the rate is fixed at {}: give --freq auto, or leave them out",
                    f.hz()
                )));
            }
        }
        let hz = |name: &str, v: Option<f64>, default: f64| {
            let v = v.unwrap_or(Hertz::clamped(default).hz());
            Hertz::new(v).map_err(|_| {
                Failure::usage(format!(
                    "invalid {name} {v}: give a number of hertz from {} to {}",
                    quietwatt::frequency::MIN_HZ,
                    quietwatt::frequency::MAX_HZ
                ))
            })
        };
        let (min, max) = (
            hz("--freq-min", self.freq_min, DEFAULT_MIN_HZ)?,
            hz("--freq-max", self.freq_max, DEFAULT_MAX_HZ)?,
        );
        if min > max {
            return Err(Failure::usage(format!(
                "--freq-min {} is above --freq-max {}",
                min.hz(),
                max.hz()
            )));
        }
        if let Some(cpu) = self.cpu {
            // Pinning acts on this machine, whatever --root says.
            let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
                .ok()
                .and_then(|s| quietwatt::topology::parse_cpu_list(&s))
                .unwrap_or_default();
            if !online.contains(&(cpu as u32)) {
                return Err(Failure::usage(format!(
                    "--cpu {cpu}: no such online CPU here (online: {}); pick one from `nproc`'s range",
                    online.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
                )));
            }
        }
        let mut c = EngineConfig::new(freq.rate(min, max));
        c.cpu = self.cpu;
        c.realtime = self.rt;
        c.root = root.clone();
        Ok(c)
    }
}

/// The rate for people: `1000 Hz`, or `auto, 5-1000 Hz`.
pub fn rate_words(rate: &Rate) -> String {
    match rate {
        Rate::Fixed(f) => f.to_string(),
        Rate::Auto { min, max } => format!("auto, {}-{} Hz", min.hz(), max.hz()),
    }
}

/// Writes each plot twice: the SVG, and a PNG beside it (`plot.svg` → `plot.png`)
/// for viewers that show no SVG. The fonts are loaded at the first plot, not before
/// (most commands write none), and a missing font is said once, not once per plot.
#[derive(Debug, Default)]
pub struct PlotFiles {
    renderer: Option<quietwatt_lab::png::PngRenderer>,
}

impl PlotFiles {
    /// Writes `svg` to `svg_path`, then its PNG beside it; returns what was written
    /// (`a.svg and a.png`) for the command's message. A failed SVG is the error; a
    /// failed PNG is a warning, since the SVG has the same plot.
    pub fn write(&mut self, svg: &str, svg_path: &std::path::Path) -> std::io::Result<String> {
        std::fs::write(svg_path, svg)?;
        let renderer = self.renderer.get_or_insert_with(|| {
            let renderer = quietwatt_lab::png::PngRenderer::new();
            if let Some(warning) = renderer.font_warning() {
                eprintln!("quietwatt: warning: {warning}");
            }
            renderer
        });
        let png = svg_path.with_extension("png");
        Ok(match renderer.write(svg, &png) {
            Ok(()) => format!("{} and {}", svg_path.display(), png.display()),
            Err(e) => {
                eprintln!(
                    "quietwatt: warning: no PNG beside {} ({e}); the SVG has the same plot",
                    svg_path.display()
                );
                svg_path.display().to_string()
            }
        })
    }
}

/// What the mechanism left out or wants known (duplicate zones, one-core AMD zones).
pub fn print_notes(meter: &quietwatt::Meter) {
    for n in meter.notes() {
        eprintln!("quietwatt: note: {n}");
    }
}

/// What a heading adds after the mechanism's name where the figures are a
/// power model's estimate (`run`, `run -r`, `compare`); nothing otherwise.
pub fn estimated_words(mechanism: &str) -> &'static str {
    if mechanism == quietwatt::Mechanism::Estimate.name() {
        ": ESTIMATED by a power model, not measured"
    } else {
        ""
    }
}

/// The exit code `run` passes on: the command's, or 128 + the signal that killed it.
pub use quietwatt::command::exit_code;

/// The default rate of `run` and `run -r`/`compare`: 10 Hz (cheap, and far above
/// what real RAPL counters need: they wrap after minutes), raised by the engine's
/// one rule ([`quietwatt::safe_rate::default_rate`]) where a counter could wrap
/// twice within its period (small emulated counters): a default must not lose energy.
pub fn default_freq(meter: &quietwatt::Meter) -> quietwatt::Hertz {
    quietwatt::safe_rate::default_rate(
        quietwatt::Hertz::clamped(DEFAULT_POLLED_HZ),
        meter.max_safe_period(),
    )
}

/// The default rate of `run` on a polled mechanism.
const DEFAULT_POLLED_HZ: f64 = 10.0;

/// Refuses, before anything runs, an output that would overwrite an input or
/// another output (the same path, a symlink to it or a hard link): `trace X -o X`
/// once replaced the recording with its trace. Each entry is a flag's name and its
/// path; `-` (stdout) and absent paths are left out by the caller.
pub fn distinct_files(inputs: &[(&str, &Path)], outputs: &[(&str, &Path)]) -> Result<(), Failure> {
    use quietwatt::sink::file::overwrites;
    for (i, (oflag, out)) in outputs.iter().enumerate() {
        let others = inputs
            .iter()
            .map(|x| (x, "input"))
            .chain(outputs[i + 1..].iter().map(|x| (x, "output")));
        for ((flag, other), kind) in others {
            if overwrites(out, other) {
                return Err(Failure::usage(format!(
                    "{oflag} {} is the same file as the {kind} {flag} {}: writing it would destroy \
                     the {kind}; give {oflag} another path",
                    out.display(),
                    other.display()
                )));
            }
        }
    }
    Ok(())
}
