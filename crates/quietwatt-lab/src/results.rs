//! What a run records and the file that keeps it: one CSV row per run, appended
//! and flushed as soon as the run ends, read back on a restart (a half-written
//! last line from a kill cut off first) so that an interrupted plan resumes.

use crate::plan::{io_err, ExperimentError, RunKey};
use serde::Serialize;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The measurements of one run (everything but its identity).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Measurement {
    /// Whether the run went through (a failed run keeps what it has, and `error`).
    pub ok: bool,
    /// The workload's own time (solve time), seconds.
    pub workload_s: Option<f64>,
    /// Wall time of the workload process, seconds.
    pub wall_s: Option<f64>,
    /// CPU time (user + system) of the workload process, seconds.
    pub workload_cpu_s: Option<f64>,
    /// CPU time of the monitor over the run, seconds.
    pub monitor_cpu_s: Option<f64>,
    /// The monitor's voluntary context switches (its wake-ups).
    pub monitor_wakeups: Option<u64>,
    /// The monitor's involuntary context switches.
    pub monitor_involuntary: Option<u64>,
    /// Samples a quietwatt monitor took.
    pub monitor_samples: Option<u64>,
    /// Deadlines a quietwatt monitor missed.
    pub monitor_missed: Option<u64>,
    /// Energy over the run (total of the domains, each joule once), joules.
    pub energy_j: Option<f64>,
    /// Seconds between the two energy reads (a little longer than the workload:
    /// they bracket the monitor's start and stop too).
    pub energy_s: Option<f64>,
    /// Fraction of CPU time idle (idle + iowait of `/proc/stat`) over the run.
    pub proc_idle_frac: Option<f64>,
    /// Residency per C-state over the run as `NAME=fraction;...` (`cpuidle`).
    pub cstates: Option<String>,
    /// Wall-clock start, seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// Why the run failed, with the monitor's or workload's stderr.
    pub error: Option<String>,
}

/// One row of the results.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// Position in the schedule.
    pub seq: usize,
    /// Round.
    pub round: usize,
    /// Identity.
    pub key: RunKey,
    /// Measurements.
    pub m: Measurement,
}

/// The CSV header, in column order.
pub const CSV_COLUMNS: [&str; 21] = [
    "seq",
    "round",
    "workload",
    "monitor",
    "freq_hz",
    "rep",
    "status",
    "workload_s",
    "wall_s",
    "workload_cpu_s",
    "monitor_cpu_s",
    "monitor_wakeups",
    "monitor_involuntary",
    "monitor_samples",
    "monitor_missed",
    "energy_j",
    "energy_s",
    "proc_idle_frac",
    "cstates",
    "started_unix_s",
    "error",
];

fn opt<T: fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map(ToString::to_string).unwrap_or_default()
}

impl RunRecord {
    /// The record as one CSV line (with its newline).
    pub fn to_csv(&self) -> String {
        let m = &self.m;
        let fields = [
            self.seq.to_string(),
            self.round.to_string(),
            self.key.workload.clone(),
            self.key.monitor.clone(),
            self.key.freq_hz.clone(),
            self.key.rep.to_string(),
            if m.ok { "ok" } else { "failed" }.to_string(),
            opt(&m.workload_s),
            opt(&m.wall_s),
            opt(&m.workload_cpu_s),
            opt(&m.monitor_cpu_s),
            opt(&m.monitor_wakeups),
            opt(&m.monitor_involuntary),
            opt(&m.monitor_samples),
            opt(&m.monitor_missed),
            opt(&m.energy_j),
            opt(&m.energy_s),
            opt(&m.proc_idle_frac),
            opt(&m.cstates),
            m.started_unix_s.to_string(),
            // One line per run: the error's own newlines would survive quoting, but
            // a line-oriented reader (grep, tail) is happier without them.
            m.error
                .as_deref()
                .unwrap_or("")
                .replace(['\n', '\r'], " | "),
        ];
        let mut line = fields
            .iter()
            .map(|f| quietwatt::sink::csv::field(f))
            .collect::<Vec<_>>()
            .join(",");
        line.push('\n');
        line
    }

    /// Parses a row written by [`RunRecord::to_csv`] (already split into fields).
    pub fn from_fields(f: &[String]) -> Result<RunRecord, String> {
        if f.len() != CSV_COLUMNS.len() {
            return Err(format!(
                "{} fields, expected {}",
                f.len(),
                CSV_COLUMNS.len()
            ));
        }
        fn num<T: std::str::FromStr>(s: &str, col: &str) -> Result<T, String> {
            s.parse()
                .map_err(|_| format!("{col}: '{s}' is not a number"))
        }
        fn optn<T: std::str::FromStr>(s: &str, col: &str) -> Result<Option<T>, String> {
            if s.is_empty() {
                Ok(None)
            } else {
                num(s, col).map(Some)
            }
        }
        let ok = match f[6].as_str() {
            "ok" => true,
            "failed" => false,
            other => return Err(format!("status: '{other}' is neither ok nor failed")),
        };
        Ok(RunRecord {
            seq: num(&f[0], "seq")?,
            round: num(&f[1], "round")?,
            key: RunKey {
                workload: f[2].clone(),
                monitor: f[3].clone(),
                freq_hz: f[4].clone(),
                rep: num(&f[5], "rep")?,
            },
            m: Measurement {
                ok,
                workload_s: optn(&f[7], "workload_s")?,
                wall_s: optn(&f[8], "wall_s")?,
                workload_cpu_s: optn(&f[9], "workload_cpu_s")?,
                monitor_cpu_s: optn(&f[10], "monitor_cpu_s")?,
                monitor_wakeups: optn(&f[11], "monitor_wakeups")?,
                monitor_involuntary: optn(&f[12], "monitor_involuntary")?,
                monitor_samples: optn(&f[13], "monitor_samples")?,
                monitor_missed: optn(&f[14], "monitor_missed")?,
                energy_j: optn(&f[15], "energy_j")?,
                energy_s: optn(&f[16], "energy_s")?,
                proc_idle_frac: optn(&f[17], "proc_idle_frac")?,
                cstates: (!f[18].is_empty()).then(|| f[18].clone()),
                started_unix_s: num(&f[19], "started_unix_s")?,
                error: (!f[20].is_empty()).then(|| f[20].clone()),
            },
        })
    }
}

/// Splits CSV text into records of fields (RFC 4180: quoted fields may hold
/// commas, doubled quotes and newlines). Returns the records and the byte length
/// of the complete lines: a last line without its newline is left out.
pub fn parse_csv(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut records = Vec::new();
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut complete = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if quoted {
            match c {
                '"' if matches!(chars.peek(), Some((_, '"'))) => {
                    field.push('"');
                    chars.next();
                }
                '"' => quoted = false,
                c => field.push(c),
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            ',' => fields.push(std::mem::take(&mut field)),
            '\r' => {}
            '\n' => {
                fields.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut fields));
                complete = i + 1;
            }
            c => field.push(c),
        }
    }
    (records, complete)
}

/// The CSV file of an experiment, opened for appending.
#[derive(Debug)]
pub struct Results {
    path: PathBuf,
    file: File,
    /// Every row in the file, in file order.
    pub records: Vec<RunRecord>,
}

impl Results {
    /// Opens `path`, creating it with its header, or reads the rows already there
    /// (cutting off a last line left half-written by a kill).
    pub fn open(path: &Path) -> Result<Results, ExperimentError> {
        let err = io_err(path);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(path)
            .map_err(&err)?;
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(|e| {
            if e.kind() == io::ErrorKind::InvalidData {
                ExperimentError::Incompatible {
                    path: path.to_path_buf(),
                    why: "not a text file".into(),
                }
            } else {
                err(e)
            }
        })?;
        let header = CSV_COLUMNS.join(",");
        if text.is_empty() {
            file.write_all(format!("{header}\n").as_bytes())
                .and_then(|()| file.flush())
                .map_err(&err)?;
            return Ok(Results {
                path: path.to_path_buf(),
                file,
                records: Vec::new(),
            });
        }
        let (rows, complete) = parse_csv(&text);
        if complete < text.len() {
            // A kill in the middle of a write: the partial row is not a run.
            file.set_len(complete as u64).map_err(&err)?;
            file.seek(SeekFrom::End(0)).map_err(&err)?;
        }
        let Some(first) = rows.first() else {
            return Err(ExperimentError::Incompatible {
                path: path.to_path_buf(),
                why: "no complete header line".into(),
            });
        };
        if first.join(",") != header {
            return Err(ExperimentError::Incompatible {
                path: path.to_path_buf(),
                why: format!("its header is not quietwatt's ({header})"),
            });
        }
        let mut records = Vec::with_capacity(rows.len());
        for (i, r) in rows[1..].iter().enumerate() {
            records.push(RunRecord::from_fields(r).map_err(|why| {
                ExperimentError::Incompatible {
                    path: path.to_path_buf(),
                    why: format!("row {}: {why}", i + 2),
                }
            })?);
        }
        Ok(Results {
            path: path.to_path_buf(),
            file,
            records,
        })
    }

    /// Appends a row and hands it to the kernel at once, so that a kill loses at
    /// most the run in progress.
    pub fn append(&mut self, r: RunRecord) -> Result<(), ExperimentError> {
        self.file
            .write_all(r.to_csv().as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(io_err(&self.path))?;
        self.records.push(r);
        Ok(())
    }

    /// Whether a run with this identity is already in the file.
    pub fn has(&self, key: &RunKey) -> bool {
        self.records.iter().any(|r| &r.key == key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_round_trip_with_awkward_text() {
        let r = RunRecord {
            seq: 3,
            round: 1,
            key: RunKey {
                workload: "my, \"odd\" workload".into(),
                monitor: "none".into(),
                freq_hz: "0".into(),
                rep: 2,
            },
            m: Measurement {
                ok: false,
                workload_s: Some(1.25),
                monitor_wakeups: Some(7),
                cstates: Some("C1=0.5;C2=0.25".into()),
                started_unix_s: 1.5,
                error: Some("line one\nline two, with comma".into()),
                ..Measurement::default()
            },
        };
        let line = r.to_csv();
        assert_eq!(line.matches('\n').count(), 1, "{line}");
        let (rows, complete) = parse_csv(&line);
        assert_eq!(complete, line.len());
        let back = RunRecord::from_fields(&rows[0]).unwrap();
        let mut want = r.clone();
        want.m.error = Some("line one | line two, with comma".into());
        assert_eq!(back, want);
        // A half-written line is not a row.
        let (rows, complete) = parse_csv(&format!("{line}4,1,ep"));
        assert_eq!((rows.len(), complete), (1, line.len()));
    }

    #[test]
    fn a_foreign_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.csv");
        std::fs::write(&path, "a,b\n1,2\n").unwrap();
        assert!(matches!(
            Results::open(&path),
            Err(ExperimentError::Incompatible { .. })
        ));
    }
}
