//! Where repeated runs' exports go: the paths checked before any run, the files
//! written (`--export-json`: the `--json` document; `--export-csv` and
//! `--export-markdown`: `quietwatt_compare::export`'s text of the typed result),
//! and the progress bar shown on a terminal while they run.

use crate::exit::{Failure, OUTPUT};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::Path;

/// Writes `text` to `path`, the flag named in the error.
pub fn write(path: &Path, flag: &str, text: &str) -> Result<(), Failure> {
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

/// `v`, pretty, for `--export-json`.
pub fn json(path: &Path, v: &serde_json::Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(v).unwrap_or_default();
    write(path, "--export-json", &(text + "\n"))
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
