//! `quietwatt top`: processes or cgroups by watts, live, like top or powertop.
//!
//! Each refresh reads the package energy, hands it as one sample to the
//! attribution transform (quietwatt-attribution: the sched_switch accounting splits
//! it exactly; no rows, no output), takes out what each entity drew since the
//! previous refresh, and shows it. Keys:
//! `p` processes, `c` cgroups, `q` quits (Ctrl-C too). In batch mode (`-b`, or
//! stdout not a terminal) it prints plain screens one after the other, as top(1) -b.

use super::attribute::ByArg;
use crate::emulated::Environment;
use crate::exit::{Failure, MEASUREMENT};
use crate::signals::{install, STOP};
use quietwatt::sink::Sample;
use quietwatt::transform::Transform;
use quietwatt::units::Joules;
use quietwatt::{DomainId, Meter};
use quietwatt_attribution::{Attribution, By, Entity, IdlePower, Names, Options};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Arguments of `top`.
#[derive(clap::Args)]
pub struct Args {
    /// What to list first (`p` and `c` switch while it runs).
    #[arg(
        long,
        value_enum,
        default_value = "process",
        value_name = "process|cgroup"
    )]
    by: ByArg,
    /// Seconds between refreshes.
    #[arg(short = 'd', long, default_value_t = 1.0)]
    interval: f64,
    /// Stop after this many refreshes (default: until `q` or Ctrl-C).
    #[arg(short = 'n', long)]
    iterations: Option<u64>,
    /// Rows shown.
    #[arg(long, default_value_t = 15)]
    limit: usize,
    /// Each package's idle power in watts, set apart (default: none, every joule is
    /// split by CPU time), or `fit` to fit it as top runs.
    #[arg(long, value_name = "W|fit", value_parser = super::attribute::parse_idle)]
    idle_watts: Option<IdlePower>,
    /// Mechanism to read (default: the best that works here).
    #[arg(short, long)]
    mechanism: Option<quietwatt::Mechanism>,
    /// Batch mode, as top(1)'s: plain lines, one screen after the other, no escape
    /// codes and no keys read; for a pipe or a file. On whenever stdout is not a
    /// terminal.
    #[arg(short = 'b', long)]
    batch: bool,
}

/// A screen as batch mode prints it: without the clear-screen codes, the keys'
/// line or carriage returns, and a blank line after it.
fn plain(screen: &str) -> String {
    let mut text: String = screen
        .replace("\x1b[H\x1b[2J", "")
        .replace("p: processes  c: cgroups  q: quit\r\n", "")
        .replace("\r\n", "\n");
    text.push('\n');
    text
}

/// The terminal in non-canonical mode without echo (keys arrive one by one),
/// restored when dropped. Signals stay on: Ctrl-C still stops.
struct RawTerminal(Option<libc::termios>);

impl RawTerminal {
    fn enter() -> RawTerminal {
        // SAFETY: tcgetattr/tcsetattr on stdin with a termios we own; failure (not
        // a terminal) leaves the terminal untouched.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut t) != 0 {
                return RawTerminal(None);
            }
            let old = t;
            t.c_lflag &= !(libc::ICANON | libc::ECHO);
            t.c_cc[libc::VMIN] = 0;
            t.c_cc[libc::VTIME] = 0;
            if libc::tcsetattr(0, libc::TCSANOW, &t) != 0 {
                return RawTerminal(None);
            }
            RawTerminal(Some(old))
        }
    }

    /// A key pressed within `wait`, if any.
    fn key(&self, wait: Duration) -> Option<u8> {
        self.0?;
        let mut fds = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one pollfd that lives for the call; a one-byte read into a local.
        unsafe {
            if libc::poll(&mut fds, 1, ms) <= 0 {
                return None;
            }
            let mut b = 0u8;
            (libc::read(0, (&mut b as *mut u8).cast(), 1) == 1).then_some(b)
        }
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        if let Some(old) = self.0 {
            // SAFETY: restores the settings read in `enter`.
            unsafe {
                libc::tcsetattr(0, libc::TCSANOW, &old);
            }
        }
    }
}

/// The split of the meter's samples, charged to `by`.
fn open_split(
    env: &Environment,
    meter: &Meter,
    by: By,
    idle: IdlePower,
) -> Result<Attribution, Failure> {
    let mut split = super::attribute::attribution(env, &Options::new(by, idle), "top")?;
    let channels: Vec<DomainId> = meter.channels().iter().map(|c| c.id).collect();
    split.begin(&channels);
    Ok(split)
}

/// Runs the live view until `q`, Ctrl-C or `--iterations`.
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    if !(args.interval.is_finite() && (0.05..=3600.0).contains(&args.interval)) {
        return Err(Failure::usage(format!(
            "--interval {}: give seconds between 0.05 and 3600",
            args.interval
        )));
    }
    let idle = args.idle_watts.unwrap_or(IdlePower::None);
    let source = quietwatt::source::open(
        &env.root,
        args.mechanism,
        &super::selection(&Some("package,dram".into()))?,
    )
    .map_err(Failure::from)?;
    let mut meter = Meter::new(source);
    let mut by = By::from(args.by);
    let mut split = open_split(env, &meter, by, idle)?;
    let mut joules = vec![Joules(0.0); meter.channels().len()];
    let mut prev_t = meter
        .sample_joules(&mut joules)
        .map_err(|e| Failure::new(MEASUREMENT, format!("top: {e}")))?;
    let mut prev_energy = 0u64;
    let mut names = Names::new();
    install();
    let batch = args.batch || !std::io::stdout().is_terminal();
    // In batch mode the terminal, if any, is left alone: no key is read.
    let term = if batch {
        RawTerminal(None)
    } else {
        RawTerminal::enter()
    };
    let period = Duration::from_secs_f64(args.interval);
    let mut next = Instant::now() + period;
    let mut shown = 0u64;
    let mut out = std::io::stdout();
    while !STOP.load(Ordering::Relaxed) {
        // Wait for the refresh, answering keys meanwhile.
        let mut switch = None;
        let mut quit = false;
        loop {
            let left = next.saturating_duration_since(Instant::now());
            if left.is_zero() || STOP.load(Ordering::Relaxed) {
                break;
            }
            match term.key(left) {
                Some(b'q') => {
                    quit = true;
                    break;
                }
                Some(b'p') => switch = Some(By::Process),
                Some(b'c') => switch = Some(By::Cgroup),
                Some(_) => {}
                None if term.0.is_none() => std::thread::sleep(left),
                None => {}
            }
        }
        if quit {
            break;
        }
        next += period;
        let t = meter
            .sample_joules(&mut joules)
            .map_err(|e| Failure::new(MEASUREMENT, format!("top: {e}")))?;
        let sample = Sample {
            t_ns: t,
            interval_ns: t.saturating_sub(prev_t),
            missed: 0,
            merged: 0,
            freq_hz: 1.0 / args.interval,
            marks: Default::default(),
            energy: &joules,
        };
        prev_t = t;
        split.feed(&sample);
        // What each entity drew since the previous refresh, taken out of the
        // split: memory follows the entities of the last refresh only.
        let drawn = split.take_entities();
        let energy_uj = split.totals().energy_uj;
        let secs = sample.interval_ns as f64 / 1e9;
        let w = |uj: u64| {
            if secs > 0.0 {
                uj as f64 / 1e6 / secs
            } else {
                0.0
            }
        };
        let mut rows: Vec<(Entity, u64, u64, u64)> = drawn
            .iter()
            .map(|(e, v)| (*e, v.total_uj(), v.dynamic_uj, v.cpu_ns))
            .filter(|r| r.1 > 0 || r.3 > 0)
            .collect();
        rows.sort_by_key(|r| std::cmp::Reverse((r.1, r.3)));
        let pkg = energy_uj - prev_energy;
        let mut screen = String::new();
        screen.push_str("\x1b[H\x1b[2J");
        screen.push_str(&format!(
            "quietwatt top - package {:.2} W{} - by {} - every {} s{}\r\np: processes  c: cgroups  q: quit\r\n\r\n",
            w(pkg),
            if env.is_emulated() { " (EMULATED)" } else { "" },
            by.name(),
            args.interval,
            match idle {
                IdlePower::None =>
                    ", idle power not set apart (--idle-watts W|fit to split it)".to_string(),
                IdlePower::Configured(i) => format!(", idle {i} W set apart"),
                IdlePower::Fitted => ", idle power fitted".to_string(),
            }
        ));
        screen.push_str(&format!(
            "{:>10}  {:<36} {:>9} {:>9} {:>7}\r\n",
            if by == By::Process { "PID" } else { "CGROUP" },
            "NAME",
            "WATTS",
            "DYN W",
            "CPU %"
        ));
        for (e, total, dynamic, cpu) in rows.iter().take(args.limit) {
            let (id, name) = names.id_and_name(*e);
            let name: String = name.chars().take(36).collect();
            // Without an idle power nothing tells dynamic power from idle: not
            // shown as dynamic (it once read WATTS 14.955 DYN W 14.955 for 5 W).
            let dyn_w = match idle {
                IdlePower::None => "-".to_string(),
                _ => format!("{:.3}", w(*dynamic)),
            };
            screen.push_str(&format!(
                "{id:>10}  {name:<36} {:>9.3} {:>9} {:>7.1}\r\n",
                w(*total),
                dyn_w,
                if secs > 0.0 {
                    *cpu as f64 / 1e7 / secs
                } else {
                    0.0
                }
            ));
        }
        screen.push_str(&format!(
            "\r\n{:>10}  {:<36} {:>9.3}\r\n",
            "",
            "(idle CPUs, unseen)",
            // Exact: the entities' and the unattributed parts add up to the package.
            w(pkg.saturating_sub(rows.iter().map(|r| r.1).sum()))
        ));
        if batch {
            screen = plain(&screen);
        }
        let _ = out.write_all(screen.as_bytes());
        let _ = out.flush();
        prev_energy = energy_uj;
        shown += 1;
        if args.iterations.is_some_and(|n| shown >= n) {
            break;
        }
        if let Some(b) = switch.filter(|b| *b != by) {
            by = b;
            split = open_split(env, &meter, by, idle)?;
            prev_energy = 0;
            prev_t = meter
                .sample_joules(&mut joules)
                .map_err(|e| Failure::new(MEASUREMENT, format!("top: {e}")))?;
        }
    }
    drop(term);
    Ok(ExitCode::SUCCESS)
}
