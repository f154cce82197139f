//! `quietwatt profile -- CMD` and `quietwatt profile -a --duration S`: where in
//! the code the energy went. The work is `quietwatt_profile::run_profile`'s; here
//! the flags, the summary's wording, the exit codes.

use crate::emulated::Environment;
use crate::exit::{Failure, MEASUREMENT, NO_RAPL, OUTPUT};
use quietwatt_profile::{
    EventRequest, Format, Hooks, NamedStacks, Options, ProfileDocument, ProfileError,
    ProfileOutcome, ProfileRun, RunError, SampledEvent, SymbolOptions, Symbols, Target, Workload,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The output when `-o` is not given.
const DEFAULT_OUTPUT: &str = "profile.svg";

/// How many functions the summary lists.
const TOP: usize = 10;

/// Output formats by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// Folded stacks with µJ counts (inferno-flamegraph, flamegraph.pl).
    Folded,
    /// An energy flame graph, widths in µJ.
    Svg,
    /// pprof's gzipped profile.proto (.pb.gz): µJ and samples per stack.
    Pprof,
}

/// The stack-sampling event by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EventArg {
    /// cycles where a hardware PMU counts them, cpu-clock otherwise.
    Auto,
    /// Hardware CPU cycles only.
    Cycles,
    /// The software cpu-clock (CPU time) only.
    CpuClock,
}

/// Arguments of `profile`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The output file; its extension chooses the format (.svg, .folded, .pb.gz) unless
    /// --format does [default: profile.svg]
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// The output's format (default: from -o's extension).
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: Option<FormatArg>,
    /// Stack samples per second per CPU (as perf record -F).
    #[arg(short = 'F', long = "freq", value_name = "HZ", default_value_t = 997,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    freq: u64,
    /// The event that drives the sampling.
    #[arg(long, value_enum, default_value_t = EventArg::Auto)]
    event: EventArg,
    /// User-space stacks only (no kernel frames): a profile of one's own command
    /// then needs only kernel.perf_event_paranoid <= 2.
    #[arg(long)]
    user_only: bool,
    /// The whole machine (every task on every CPU) instead of a command; needs
    /// --duration.
    #[arg(short = 'a', long = "all-cpus")]
    all_cpus: bool,
    /// How long a system-wide profile (-a) lasts: 10, 2.5s, 500ms, 2m.
    #[arg(long, value_name = "TIME")]
    duration: Option<String>,
    /// Name frames with their source file and line (DWARF), as `func (file:line)`.
    #[arg(long)]
    lines: bool,
    /// The energy mechanism to read (default: the best that works here).
    #[arg(short, long)]
    mechanism: Option<quietwatt::Mechanism>,
    /// Print the summary as one JSON object on stdout (after what the command
    /// printed there).
    #[arg(long)]
    json: bool,
    /// Also write the profile as a timeline: the package energy intervals in
    /// `record`'s CSV format to FILE.csv and every stack sample with its µJ to
    /// `<stem>.stacks.csv` beside it (`quietwatt trace FILE.csv` shows them in
    /// Perfetto).
    #[arg(long, value_name = "FILE.csv")]
    record: Option<PathBuf>,
    /// Each package's idle power in watts, set apart before the split and shared
    /// among the stacks by CPU time over the package's capacity (the rest, idle
    /// CPUs' share, stays unattributed), or `fit` to fit it as the profile runs
    /// (default: none, every joule is split as the stacks' dynamic energy).
    #[arg(long = "idle-watts", value_name = "W|fit", value_parser = super::attribute::parse_idle)]
    idle_watts: Option<quietwatt_attribution::IdlePower>,
    /// The command and its arguments.
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    command: Vec<String>,
}

impl Args {
    /// Refuses bad input before anything is mounted, run or written.
    pub fn check(&self) -> Result<(), Failure> {
        match (self.all_cpus, self.command.is_empty(), &self.duration) {
            (true, false, _) => {
                return Err(Failure::usage(
                    "-a profiles the whole machine, a command its own process tree: give one or the other",
                ))
            }
            (true, true, None) => {
                return Err(Failure::usage(
                    "-a needs --duration (how long to profile the whole machine), e.g. `quietwatt profile -a --duration 10s`",
                ))
            }
            (false, true, _) => {
                return Err(Failure::usage(
                    "nothing to profile: give a command after `--` (`quietwatt profile -- ./bench`) or -a --duration S for the whole machine",
                ))
            }
            (false, false, Some(_)) => {
                return Err(Failure::usage(
                    "--duration is for -a (a command is profiled until it ends): leave it out, or add -a instead of the command",
                ))
            }
            _ => {}
        }
        self.duration()?;
        self.format()?;
        if let Some(r) = &self.record {
            if r.extension().and_then(|e| e.to_str()) != Some("csv") {
                return Err(Failure::usage(format!(
                    "--record {}: the timeline is written as CSV: name it FILE.csv (its stacks go to FILE.stacks.csv)",
                    r.display()
                )));
            }
        }
        let stacks = self.record.as_deref().map(quietwatt_profile::stacks_path);
        super::exports::checked(
            &[],
            &[
                ("-o", Some(self.output().as_path())),
                ("--record", self.record.as_deref()),
                ("--record's stacks file", stacks.as_deref()),
            ],
        )?;
        Ok(())
    }

    fn output(&self) -> PathBuf {
        self.output
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_OUTPUT))
    }

    fn format(&self) -> Result<Format, Failure> {
        match self.format {
            Some(FormatArg::Folded) => Ok(Format::Folded),
            Some(FormatArg::Svg) => Ok(Format::Svg),
            Some(FormatArg::Pprof) => Ok(Format::Pprof),
            None => Format::from_path(&self.output()).ok_or_else(|| {
                Failure::usage(format!(
                    "-o {}: the format cannot be told from its extension: name it .svg, .folded or .pb.gz, or give --format svg|folded|pprof",
                    self.output().display()
                ))
            }),
        }
    }

    fn duration(&self) -> Result<Option<Duration>, Failure> {
        self.duration
            .as_deref()
            .map(|d| {
                super::parse_duration(d)
                    .map_err(|e| Failure::usage(format!("invalid --duration {d:?}: {e}")))
            })
            .transpose()
    }
}

/// Profiles, writes the output, prints the summary; exits with the command's code.
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    args.check()?;
    let (output, format) = (args.output(), args.format()?);
    let mut run = ProfileRun::new(env.root.clone());
    run.mechanism = args.mechanism;
    run.idle = args
        .idle_watts
        .unwrap_or(quietwatt_attribution::IdlePower::None);
    run.sampler = Options {
        frequency_hz: args.freq,
        kernel: !args.user_only,
        event: match args.event {
            EventArg::Auto => EventRequest::Auto,
            EventArg::Cycles => EventRequest::Only(SampledEvent::Cycles),
            EventArg::CpuClock => EventRequest::Only(SampledEvent::CpuClock),
        },
        ..Options::new(Target::Spawned)
    };
    let workload = match args.duration()? {
        Some(duration) if args.all_cpus => Workload::SystemWide { duration },
        _ => {
            let mut cmd = std::process::Command::new(&args.command[0]);
            cmd.args(&args.command[1..]);
            Workload::Command(cmd)
        }
    };
    crate::signals::install();
    let started = std::time::SystemTime::now();
    let mut outcome = {
        let mut child = crate::signals::forward_to_command;
        // The sampler keeps each process's mappings itself (exec records, or
        // /proc/PID/maps at its first sample): nothing to do here.
        let mut seen = |_: u32| {};
        let mut hooks = Hooks {
            child: &mut child,
            process_seen: &mut seen,
            stop: Some(&crate::signals::STOP),
            ready: &mut || {},
        };
        quietwatt_profile::run_profile(&run, workload, &mut hooks).map_err(failure)?
    };
    let (named, mut symbols) = outcome.name_stacks(SymbolOptions {
        lines: args.lines,
        ..SymbolOptions::default()
    });
    let what = if args.all_cpus {
        format!("every CPU for {:.1} s", outcome.wall.as_secs_f64())
    } else {
        args.command.join(" ")
    };
    let written = outcome
        .write(&output, format, &named, &what, env.is_emulated(), started)
        .map_err(|e| cannot_write("-o", &output, &e));
    let recorded = match &args.record {
        Some(path) => write_timeline(env, path, &outcome, &mut symbols),
        None => Ok(()),
    };
    // The figures are measured whatever the disk said: printed before the failure.
    summary(
        env,
        &args,
        &outcome,
        &named,
        &output,
        format,
        written.is_ok(),
    );
    written?;
    recorded?;
    Ok(match outcome.status {
        Some(s) => ExitCode::from(super::exit_code(s).clamp(0, 255) as u8),
        None if crate::signals::STOP.load(std::sync::atomic::Ordering::Relaxed) => {
            ExitCode::from(crate::signals::stopped_status())
        }
        None => ExitCode::SUCCESS,
    })
}

/// A profile's error for a person, with its exit code: a refused perf_event_open
/// keeps the library's fix (the sysctl, CAP_PERFMON, root).
fn failure(e: RunError) -> Failure {
    match e {
        RunError::Energy(e) => Failure::from(e),
        RunError::Spawn { program, source } => crate::exit::spawn(&program, &source),
        RunError::Profile(e @ ProfileError::Permission { .. }) => {
            Failure::new(NO_RAPL, e.to_string())
        }
        RunError::NoPackage { .. } => Failure::new(NO_RAPL, e.to_string()),
        e => Failure::new(MEASUREMENT, e.to_string()),
    }
}

/// `--record`: the package intervals in `record`'s CSV at `path`, the stack
/// samples with their µJ beside it (the library's `timeline`).
fn write_timeline(
    env: &Environment,
    path: &std::path::Path,
    o: &ProfileOutcome,
    symbols: &mut Symbols,
) -> Result<(), Failure> {
    let stacks = quietwatt_profile::stacks_path(path);
    let mut meta: Vec<(String, String)> = vec![
        (
            "tool".into(),
            format!("quietwatt {} profile", env!("CARGO_PKG_VERSION")),
        ),
        ("mechanism".into(), o.mechanism.to_string()),
        ("clock".into(), "CLOCK_MONOTONIC".into()),
        ("emulated".into(), env.is_emulated().to_string()),
        (
            "content".into(),
            "the profile's package energy intervals, exact µJ as split (DRAM not written)".into(),
        ),
    ];
    let mut energy = Vec::new();
    quietwatt_profile::write_energy_csv(&mut energy, o, &meta)
        .expect("writing to memory cannot fail");
    meta.truncate(4);
    meta.push(("event".into(), o.event.event.name().into()));
    meta.push(("frequency_hz".into(), o.frequency_hz.to_string()));
    meta.push((
        "units".into(),
        "time_ns CLOCK_MONOTONIC ns; period event count (ns for cpu-clock); energy_uj µJ".into(),
    ));
    let mut samples = Vec::new();
    quietwatt_profile::write_stacks_csv(&mut samples, o, symbols, &meta)
        .expect("writing to memory cannot fail");
    for (p, bytes) in [(path, &energy), (stacks.as_path(), &samples)] {
        quietwatt_profile::output::write_whole(p, bytes)
            .map_err(|e| cannot_write("--record", p, &e))?;
    }
    Ok(())
}

/// A write of `flag`'s `path` that failed, for a person: a full disk names the
/// fix, and nothing cut was left at the path.
fn cannot_write(flag: &str, path: &std::path::Path, e: &std::io::Error) -> Failure {
    Failure::new(
        OUTPUT,
        format!(
            "cannot write {flag} {}: {} (the summary above holds the figures)",
            path.display(),
            quietwatt_profile::output::why_not_written(path, e)
        ),
    )
}

/// Joules from µJ, as the summary writes them.
fn joules(uj: u64) -> String {
    format!("{}.{:06}", uj / 1_000_000, uj % 1_000_000)
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// The terminal summary (stderr), or the JSON object (stdout).
fn summary(
    env: &Environment,
    args: &Args,
    o: &ProfileOutcome,
    named: &NamedStacks,
    output: &std::path::Path,
    format: Format,
    written: bool,
) {
    // One document: what --json prints, and what the words below say.
    let doc = ProfileDocument::new(
        o,
        named,
        TOP,
        env.is_emulated(),
        output.display().to_string(),
        format,
    );
    if args.json {
        println!("{}", crate::schema::to_json(&doc));
        return;
    }
    for w in &doc.warnings {
        eprintln!("quietwatt: warning: {w}");
    }
    let measured = doc.package_uj;
    let emulated = if doc.emulated { " [EMULATED RAPL]" } else { "" };
    eprintln!(
        "quietwatt profile{emulated}: {} in {:.2} s",
        match doc.exit_code {
            Some(code) => format!("{} (exit {code})", args.command.join(" ")),
            None => "every CPU".to_string(),
        },
        doc.wall_s
    );
    eprintln!(
        "  stacks       {} @ {} Hz per CPU: {}",
        doc.event, doc.frequency_hz, doc.event_reason
    );
    eprintln!(
        "  samples      {} ({} lost, {} throttled), {} distinct stacks",
        doc.samples, doc.lost, doc.throttled, doc.stacks
    );
    let dram = doc.dram_uj.map_or(String::new(), |d| {
        format!("; DRAM {} J beside it, not split", joules(d))
    });
    eprintln!(
        "  energy       {} J package ({}, {} Hz){dram}",
        joules(measured),
        doc.mechanism,
        quietwatt_profile::profile::ENERGY_HZ
    );
    eprintln!(
        "  attributed   {} J ({:.1} %) to the stacks sampled",
        joules(doc.attributed_uj),
        share(doc.attributed_uj, measured)
    );
    if args.idle_watts.is_some() {
        eprintln!(
            "  idle part    {} J of it ({}), shared by CPU time over the package's capacity",
            joules(doc.idle_uj),
            doc.idle_power
        );
    }
    // System-wide, cpu-clock samples the idle task too: its stacks take the idle
    // energy, and only intervals with no sample at all stay unattributed.
    let why = if o.status.is_some() {
        "no sample of the command on the package in the interval: idle, before its exec, after its exit"
    } else {
        "no sample on the package in the interval"
    };
    eprintln!(
        "  unattributed {} J ({:.1} %): {why}",
        joules(doc.unattributed_uj),
        share(doc.unattributed_uj, measured)
    );
    if !doc.top_self.is_empty() {
        eprintln!(
            "  top functions by self energy (95 % interval: samples' share, Wilson, and the measured bound):"
        );
        eprintln!(
            "    {:>7}  {:>10}  {:>23}  {:>7}  {:>10}  function",
            "share", "self J", "self J 95 %", "samples", "total J"
        );
        for f in &doc.top_self {
            let r = &f.self_uj_95;
            eprintln!(
                "    {:>6.1} %  {:>10}  {:>23}  {:>7}  {:>10}  {}",
                100.0 * f.self_share,
                joules(f.self_uj),
                format!("{}..{}", joules(r.low_uj), joules(r.high_uj)),
                r.samples,
                joules(f.total_uj),
                f.function
            );
        }
    }
    if written {
        eprintln!("  wrote {} ({})", output.display(), format.name());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused perf_event_open keeps the library's fix and exits 69 (nothing can
    /// profile here as this user), not 1.
    #[test]
    fn a_refused_open_exits_69_with_its_fix() {
        let e = RunError::Profile(ProfileError::Permission {
            what: "cpu-clock sampling on CPU 0 (system-wide)".into(),
            paranoid: Some(2),
            fix: "kernel.perf_event_paranoid is 2; ... `sudo sysctl kernel.perf_event_paranoid=0`, or the CAP_PERFMON capability".into(),
            source: std::io::Error::from_raw_os_error(libc::EACCES),
        });
        let f = failure(e);
        assert_eq!(f.code(), NO_RAPL);
        assert!(
            f.message().contains("perf_event_open refused"),
            "{}",
            f.message()
        );
        assert!(f.message().contains("CAP_PERFMON"), "{}", f.message());
        let missing = failure(RunError::Spawn {
            program: "nope".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        });
        assert_eq!(missing.code(), crate::exit::NOT_FOUND);
    }

    #[test]
    fn joules_are_written_from_integer_microjoules() {
        assert_eq!(joules(7_980_021), "7.980021");
        assert_eq!(joules(5), "0.000005");
    }
}
