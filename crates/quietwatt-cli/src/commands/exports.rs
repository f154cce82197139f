//! What repeated runs leave behind: `--export-json` (the `--json` object),
//! `--export-csv` (one row per run),
//! `--export-markdown` (hyperfine's table, by energy), and the progress bar shown
//! on a terminal while they run.

use super::runs::{RunResult, Summaries};
use crate::exit::{Failure, OUTPUT};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use quietwatt::sink::csv::field;
use quietwatt_stats::repeat::Ratio;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::Path;

fn write(path: &Path, flag: &str, text: &str) -> Result<(), Failure> {
    std::fs::write(path, text).map_err(|e| {
        Failure::new(
            OUTPUT,
            format!(
                "cannot write {flag} {}: {e}; give a path in a writable directory",
                path.display()
            ),
        )
    })
}

/// `v`, pretty, for `--export-json`.
/// The export files a command was given, by flag (`named`: each flag with its
/// path, if given), refused before any run when one would overwrite an input or
/// another output ([`super::distinct_files`]) or cannot be written
/// ([`check_writable`]).
pub fn checked<'a>(
    inputs: &[(&str, &Path)],
    named: &[(&'a str, Option<&'a Path>)],
) -> Result<Vec<(&'a str, &'a Path)>, Failure> {
    let outputs: Vec<(&str, &Path)> = named.iter().filter_map(|&(f, p)| Some((f, p?))).collect();
    super::distinct_files(inputs, &outputs)?;
    for (flag, p) in &outputs {
        check_writable(flag, p)?;
    }
    Ok(outputs)
}

/// Refuses, before any run, an export path that cannot be written (a missing or
/// read-only directory, a directory as the file): the runs would be measured for
/// nothing. The file itself is written only at the end.
fn check_writable(flag: &str, path: &Path) -> Result<(), Failure> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let why = if path.is_dir() {
        Some("it is a directory".to_string())
    } else if !dir.is_dir() {
        Some(format!("{} is not a directory", dir.display()))
    } else if path.exists() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .err()
            .map(|e| e.to_string())
    } else {
        rustix::fs::access(dir, rustix::fs::Access::WRITE_OK)
            .err()
            .map(|e| format!("{}: {e}", dir.display()))
    };
    match why {
        None => Ok(()),
        Some(why) => Err(Failure::new(
            crate::exit::OUTPUT,
            format!(
                "{flag} {}: cannot be written ({why}); choose a writable path before the runs start",
                path.display()
            ),
        )),
    }
}

pub fn json(path: &Path, v: &serde_json::Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    write(path, "--export-json", &(text + "\n"))
}

/// One row per run: `command,run,exit_code,duration_s,total_energy_j,
/// total_uncertainty_j`, then `energy_j` and `uncertainty_j` of each domain as
/// `S/DOMAIN_energy_j`, `S/DOMAIN_uncertainty_j` (pandas: `pd.read_csv(FILE)`).
pub fn csv(path: &Path, commands: &[(&str, &[RunResult])]) -> Result<(), Failure> {
    let domains: Vec<(u32, &str)> = commands
        .iter()
        .find_map(|(_, r)| r.first())
        .map(|r| r.domains.iter().map(|d| (d.0, d.1)).collect())
        .unwrap_or_default();
    let mut out =
        String::from("command,run,exit_code,duration_s,total_energy_j,total_uncertainty_j");
    for (s, d) in &domains {
        let _ = write!(out, ",{s}/{d}_energy_j,{s}/{d}_uncertainty_j");
    }
    out.push('\n');
    for (cmd, runs) in commands {
        for (i, r) in runs.iter().enumerate() {
            let (e, u) = r.total.map_or((String::new(), String::new()), |(e, u)| {
                (format!("{e:.9}"), format!("{u:.9}"))
            });
            let _ = write!(
                out,
                "{},{},{},{:.9},{e},{u}",
                field(cmd),
                i + 1,
                r.exit_code,
                r.duration_s
            );
            for (_, _, e, u) in &r.domains {
                let _ = write!(out, ",{e:.9},{u:.9}");
            }
            out.push('\n');
        }
    }
    write(path, "--export-csv", &out)
}

/// A Markdown table in hyperfine's shape, by energy: mean ± standard deviation,
/// the 95 % interval, min … max, time, and each command relative to the reference.
pub fn markdown(
    path: &Path,
    commands: &[(&str, &Summaries)],
    relative: &[Option<Ratio>],
    reference: usize,
) -> Result<(), Failure> {
    let mut out = String::from(
        "| Command | Energy [J] | 95 % CI [J] | Min … Max [J] | Time [s] | Relative (energy) |\n\
         |:---|---:|---:|---:|---:|---:|\n",
    );
    for (i, (cmd, s)) in commands.iter().enumerate() {
        let energy =
            s.energy
                .as_ref()
                .map_or(("-".to_string(), "-".to_string(), "-".to_string()), |e| {
                    (
                        format!("{:.4} ± {:.4}", e.mean, e.std),
                        format!("[{:.4}, {:.4}]", e.ci[0], e.ci[1]),
                        format!("{:.4} … {:.4}", e.min, e.max),
                    )
                });
        let time = s
            .duration
            .as_ref()
            .map_or("-".to_string(), |d| format!("{:.4} ± {:.4}", d.mean, d.std));
        let rel = if i == reference {
            "1.00 (reference)".to_string()
        } else {
            relative
                .get(i)
                .and_then(Option::as_ref)
                .map_or("-".to_string(), |r| {
                    format!("{:.3} [{:.3}, {:.3}]", r.estimate, r.ci[0], r.ci[1])
                })
        };
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {time} | {rel} |",
            cmd.replace('|', "\\|").replace('`', "'"),
            energy.0,
            energy.1,
            energy.2
        );
    }
    write(path, "--export-markdown", &out)
}

/// A progress bar on stderr when it is a terminal (and nothing when it is not, or
/// with `--json`), as hyperfine shows one.
pub fn progress(total: u64, quiet: bool) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} runs, ETA {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}
