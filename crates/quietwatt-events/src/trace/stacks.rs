//! The stacks file `quietwatt profile --record FILE.csv` writes beside its energy
//! file (`<stem>.stacks.csv`): one row per stack sample, `time_ns,cpu,pid,tid,
//! period,energy_uj,stack` (the library `quietwatt-profile`'s `timeline` module
//! writes it; docs/events.md describes it). `stack` is the frames, root first,
//! joined by `;`, and the last column: it may hold commas, so a row is split at
//! its first six commas only.

use super::{read, split_cut, Recording, TraceError};
use std::path::{Path, PathBuf};

/// The header line of a stacks file.
pub const HEADER: &str = "time_ns,cpu,pid,tid,period,energy_uj,stack";

/// One stack sample.
#[derive(Debug, Clone, PartialEq)]
pub struct StackRow {
    /// CLOCK_MONOTONIC ns of the sample (the energy rows' clock).
    pub t_ns: u64,
    /// The CPU it was taken on.
    pub cpu: u32,
    /// Its process.
    pub pid: u32,
    /// Its thread.
    pub tid: u32,
    /// The event's count since the CPU's previous sample (ns for cpu-clock).
    pub period: u64,
    /// Its part of its interval's package energy, µJ.
    pub energy_uj: u64,
    /// Its frames, root first, `;`-joined.
    pub stack: String,
}

impl StackRow {
    /// The frame the sample was taken in (the stack's last).
    pub fn leaf(&self) -> &str {
        self.stack.rsplit(';').next().unwrap_or(&self.stack)
    }
}

/// A stacks file read back.
pub type StacksFile = Recording<StackRow>;

impl StacksFile {
    /// Reads a stacks CSV.
    pub fn read(path: &Path) -> Result<StacksFile, TraceError> {
        let whole = read(path)?;
        let (text, cut_last_line) = split_cut(&whole);
        let (mut meta, mut rows, mut header) = (Vec::new(), Vec::new(), false);
        let bad = |line: usize, why: String| TraceError::Format {
            path: path.to_path_buf(),
            line,
            why,
        };
        for (i, l) in text.lines().enumerate() {
            if l.starts_with('#') {
                if let Some(kv) = super::meta_line(l) {
                    meta.push(kv);
                }
                continue;
            }
            if l.trim().is_empty() {
                continue;
            }
            if !header {
                if l != HEADER {
                    return Err(bad(
                        i + 1,
                        format!("expected the stacks header {HEADER:?}, found {l:?}"),
                    ));
                }
                header = true;
                continue;
            }
            let c: Vec<&str> = l.splitn(7, ',').collect();
            let row = (|| {
                if c.len() != 7 {
                    return None;
                }
                Some(StackRow {
                    t_ns: c[0].parse().ok()?,
                    cpu: c[1].parse().ok()?,
                    pid: c[2].parse().ok()?,
                    tid: c[3].parse().ok()?,
                    period: c[4].parse().ok()?,
                    energy_uj: c[5].parse().ok()?,
                    stack: c[6].to_string(),
                })
            })();
            rows.push(row.ok_or_else(|| {
                bad(
                    i + 1,
                    format!("not a stacks row (time_ns,cpu,pid,tid,period,energy_uj,stack): {l:?}"),
                )
            })?);
        }
        if !header {
            return Err(bad(1, "no header line: not a quietwatt stacks CSV".into()));
        }
        Ok(StacksFile {
            meta,
            rows,
            cut_last_line,
        })
    }

    /// The stacks file `profile --record` writes beside energy file `path`
    /// (`run.csv` → `run.stacks.csv`).
    pub fn path_beside(path: &Path) -> PathBuf {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        path.with_file_name(format!("{stem}.stacks.csv"))
    }

    /// A metadata value.
    pub fn meta_value(&self, key: &str) -> Option<&str> {
        self.meta
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stacks_file_reads_back_with_commas_in_frames_and_refuses_another_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.stacks.csv");
        std::fs::write(
            &p,
            format!(
                "# event: cpu-clock\n{HEADER}\n5,1,7,8,1000,12,main;std::map<int, int>::find\n"
            ),
        )
        .unwrap();
        let f = StacksFile::read(&p).unwrap();
        assert_eq!(f.meta_value("event"), Some("cpu-clock"));
        assert_eq!(f.rows[0].leaf(), "std::map<int, int>::find");
        assert_eq!((f.rows[0].cpu, f.rows[0].energy_uj), (1, 12));
        std::fs::write(&p, "timestamp_ns,socket,domain,energy_j,power_w\n").unwrap();
        let e = StacksFile::read(&p).unwrap_err().to_string();
        assert!(e.contains("expected the stacks header"), "{e}");
        assert_eq!(
            StacksFile::path_beside(Path::new("a/run.csv")),
            Path::new("a/run.stacks.csv")
        );
    }
}
