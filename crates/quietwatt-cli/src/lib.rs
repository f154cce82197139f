//! `quietwatt`: measure the energy of CPUs and DRAM through RAPL.
//!
//! A thin layer over the `quietwatt` library: parses arguments, explains errors,
//! chooses exit codes. The `quietwatt` binary calls [`run`]; so does the Python
//! package's `quietwatt` command (the same CLI in the wheel), which says how it is
//! invoked with [`set_self_command`].

// First: its println!/eprintln! replace std's in every module below (never a panic
// on a closed pipe).
#[macro_use]
mod out;

mod commands;
mod emulate_cmd;
mod emulated;
mod exit;
mod help;
mod schema;
mod signals;

use clap::{Parser, Subcommand};
use exit::Failure;
use std::path::PathBuf;
use std::process::ExitCode;

/// Measure CPU and DRAM energy through RAPL, at high frequency and low overhead.
#[derive(Parser)]
#[command(name = "quietwatt", version, about, long_about = None, after_help = GLOBAL_OPTIONS)]
struct Cli {
    // Both are accepted before or after the command's name; documented once, in
    // GLOBAL_OPTIONS, rather than in every subcommand's help.
    #[arg(
        long,
        global = true,
        env = "QUIETWATT_ROOT",
        default_value = "/",
        hide = true
    )]
    root: PathBuf,

    #[arg(long, global = true, value_enum, default_value_t = emulated::When::Off, hide = true)]
    emulate: emulated::When,

    #[command(subcommand)]
    command: Command,
}

/// The options every measuring command takes, in the top-level help only.
const GLOBAL_OPTIONS: &str = "\
Options of every measuring command (before or after its name):
      --root <DIR>       Read /sys, /dev and /proc under DIR instead of / (an emulator
                         mounted by `quietwatt emulate`, a test tree) [env: QUIETWATT_ROOT]
      --emulate <WHEN>   off (default): this machine; auto: quietwatt's built-in RAPL
                         emulator when nothing here can measure; on: the emulator always

`quietwatt COMMAND --help` for a command's own options.

Examples:
  quietwatt doctor                       what works here, and the fix for what does not
  quietwatt run -- make -j8              the energy of a command
  quietwatt --emulate on run -- sleep 1  the same against the built-in emulator";

#[derive(Subcommand)]
enum Command {
    /// List the mechanisms available here (and why others are not) and the domains per socket.
    #[command(after_help = help::LIST)]
    List(commands::list::Args),
    /// Check each mechanism and print the exact fix for what does not work.
    #[command(after_help = help::DOCTOR)]
    Doctor(commands::doctor::Args),
    /// Run a command and print the energy it took.
    #[command(after_help = help::RUN)]
    Run(commands::run::Args),
    /// Record a time series of energy per domain to a file or stdout, for a while or
    /// while a command runs.
    #[command(after_help = help::RECORD)]
    Record(commands::record::Args),
    /// Read every working mechanism over the same interval and flag domains where they disagree.
    #[command(after_help = help::CHECK)]
    Check(commands::check::Args),
    /// Compare commands by their energy, as hyperfine compares their time: runs
    /// interleaved in shuffled order, mean ± CI per command, the ratio to the
    /// reference with its interval, Welch's and Wilcoxon's tests, the Hodges-Lehmann
    /// shift; `--fail-if-more-than PCT` for CI (exit 3).
    #[command(after_help = help::COMPARE)]
    Compare(commands::energy_bench::Args),
    /// Benchmarks and the overhead lab: sampler, latency, workload, overhead, wakeup.
    #[command(after_help = help::BENCH)]
    Bench(commands::bench::Args),
    /// Energy models of OS events (page faults, context switches, wake-ups): costs
    /// per event fitted over swept runs, written to a JSON file; `model validate` checks one.
    #[command(after_help = help::MODEL)]
    Model(commands::model::Args),
    /// Convert a recording (and its `--events` file) into a Chrome JSON trace for Perfetto UI or chrome://tracing.
    #[command(after_help = help::TRACE)]
    Trace(commands::trace::Args),
    /// Serve the energy counters to Prometheus (/metrics, text or OpenMetrics) until stopped.
    #[command(after_help = help::SERVE)]
    Serve(commands::serve::Args),
    /// Processes or cgroups by watts, live (the package energy split at each context
    /// switch; root and a kernel with BTF): p processes, c cgroups, q quit.
    #[command(after_help = help::TOP_CMD)]
    Top(commands::top::Args),
    /// Where in the code the energy went: call stacks sampled with perf_event on the
    /// energy clock, each 1 ms package interval's energy split among them (µJ,
    /// conserved), written as an energy flame graph (SVG) or folded stacks.
    #[command(after_help = help::PROFILE)]
    Profile(commands::profile::Args),
    /// Fit a power model (package and DRAM power from the busy CPUs) on this
    /// machine's RAPL, for `--power-model` on machines of the same CPU without it.
    #[command(after_help = help::CALIBRATE)]
    Calibrate(commands::calibrate::Args),
    /// Serve an emulated RAPL device (powercap, msr, perf PMU, topology) under a directory.
    #[command(after_help = help::EMULATE)]
    Emulate(emulate_cmd::EmulateArgs),
}

/// Runs the CLI on `args` (the program's name first, as `std::env::args_os`
/// gives them) and returns its exit code. `--help`, `--version` and argument
/// errors print and exit the process, as clap does.
pub fn run<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = Cli::parse_from(args);
    match dispatch(cli) {
        Ok(code) => code,
        Err(f) => f.report(),
    }
}

/// The number an [`ExitCode`] that [`run`] returned stands for (std keeps it
/// opaque; every code the CLI returns is one of 0..=255).
pub fn exit_status(code: ExitCode) -> u8 {
    (0..=255u8)
        .find(|&i| ExitCode::from(i) == code)
        .unwrap_or(1)
}

static SELF_COMMAND: std::sync::OnceLock<Vec<std::ffi::OsString>> = std::sync::OnceLock::new();

/// How the CLI runs itself (the overhead lab runs its built-in workloads as
/// `quietwatt bench workload ...` in a child process): by default this
/// executable; the Python package's command sets `[python, -m, quietwatt]`.
/// Only the first call counts.
pub fn set_self_command(program: Vec<std::ffi::OsString>) {
    let _ = SELF_COMMAND.set(program);
}

/// The command that runs this CLI ([`set_self_command`]), or `None` when the
/// executable cannot be found.
pub(crate) fn self_command() -> Option<Vec<std::ffi::OsString>> {
    match SELF_COMMAND.get() {
        Some(p) if !p.is_empty() => Some(p.clone()),
        _ => std::env::current_exe()
            .ok()
            .map(|e| vec![e.into_os_string()]),
    }
}

fn dispatch(cli: Cli) -> Result<ExitCode, Failure> {
    if let Command::Emulate(args) = &cli.command {
        emulate_cmd::run(args, &cli.root).map_err(Failure::usage)?;
        return Ok(ExitCode::SUCCESS);
    }
    // What can be refused is refused before an emulator is mounted.
    if let Command::Record(a) = &cli.command {
        a.check()?;
    }
    if let Command::Bench(a) = &cli.command {
        a.check()?;
    }
    if let Command::Compare(a) = &cli.command {
        a.check()?;
    }
    if let Command::Profile(a) = &cli.command {
        a.check()?;
    }
    let env = emulated::Environment::prepare(&cli.root, cli.emulate)?;
    match cli.command {
        Command::List(a) => commands::list::run(&env, a),
        Command::Doctor(a) => commands::doctor::run(&env, a),
        Command::Run(a) => commands::run::run(&env, a),
        Command::Record(a) => commands::record::run(&env, a),
        Command::Check(a) => commands::check::run(&env, a),
        Command::Compare(a) => commands::energy_bench::run(&env, a),
        Command::Bench(a) => commands::bench::run(&env, a),
        Command::Trace(a) => commands::trace::run(a),
        Command::Model(a) => commands::model::run(&env, a),
        Command::Serve(a) => commands::serve::run(&env, a),
        Command::Top(a) => commands::top::run(&env, a),
        Command::Profile(a) => commands::profile::run(&env, a),
        Command::Calibrate(a) => commands::calibrate::run(&env, a),
        Command::Emulate(_) => unreachable!("handled above"),
    }
}
