//! Recordings read back and converted for a trace viewer.
//!
//! [`EnergyFile`] reads the energy file of `quietwatt record` (CSV, JSON Lines or
//! Parquet), [`EventsFile`] the events file written beside it (`<stem>.events.csv`), and
//! [`chrome`] turns both into the Chrome JSON trace format, which Perfetto UI and
//! `chrome://tracing` open. Both files carry CLOCK_MONOTONIC nanoseconds, so they
//! share one timeline without any alignment step. [`StacksFile`] reads the stack
//! samples `quietwatt profile --record` writes beside its energy file
//! (`<stem>.stacks.csv`), which [`chrome`] puts on per-CPU tracks.

pub mod chrome;
pub mod stacks;

pub use stacks::{StackRow, StacksFile};

use crate::summary::EnergyPerEvent;
use crate::Event;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// What can go wrong reading a recording back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the kernel said.
        source: io::Error,
    },
    /// A line is not what quietwatt writes.
    #[error("{}{}: {why}", path.display(), if *line > 0 { format!(":{line}") } else { String::new() })]
    Format {
        /// The file.
        path: PathBuf,
        /// 1-based line number (0: the file as a whole, a Parquet file's or bytes
        /// that are not text).
        line: usize,
        /// What is wrong.
        why: String,
    },
}

/// One energy row: a domain's energy since its previous row.
#[derive(Debug, Clone, PartialEq)]
pub struct EnergyRow {
    /// CLOCK_MONOTONIC ns of the read.
    pub t_ns: u64,
    /// Package.
    pub socket: u32,
    /// Domain name.
    pub domain: String,
    /// Joules since the previous row of this domain.
    pub energy_j: f64,
    /// Mean watts over that interval.
    pub power_w: f64,
}

/// A recording's file read back: its metadata and its rows ([`EnergyFile`],
/// [`EventsFile`]).
#[derive(Debug, Clone)]
pub struct Recording<R> {
    /// `key: value` metadata, in order (for an events file, its `channel`,
    /// `cpuidle` and `note` lines included).
    pub meta: Vec<(String, String)>,
    /// Rows in file order.
    pub rows: Vec<R>,
    /// A last line without its newline (a recording killed mid-write, a full
    /// disk), left out: writers end every row with one, so it is a cut row even
    /// when what is left of it parses.
    pub cut_last_line: Option<String>,
}

// By hand: a derived Default would ask `R: Default` of rows that have none.
impl<R> Default for Recording<R> {
    fn default() -> Self {
        Recording {
            meta: Vec::new(),
            rows: Vec::new(),
            cut_last_line: None,
        }
    }
}

/// An energy recording read back.
pub type EnergyFile = Recording<EnergyRow>;

/// One events row.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    /// CLOCK_MONOTONIC ns of the read (or of the event, for a traced one).
    pub t_ns: u64,
    /// The CPU.
    pub cpu: u32,
    /// The event column as written.
    pub event: String,
    /// Events since the previous row of the same CPU and event (1 for a traced event).
    pub count: u64,
}

pub use crate::TRACED;

/// An events recording read back.
pub type EventsFile = Recording<EventRow>;

fn read(path: &Path) -> Result<String, TraceError> {
    let bytes = std::fs::read(path).map_err(|source| TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // Neither Parquet (no magic) nor text: a format error, not an I/O one.
    String::from_utf8(bytes).map_err(|e| TraceError::Format {
        path: path.to_path_buf(),
        line: 0,
        why: format!(
            "not a quietwatt recording: neither Parquet (no PAR1 magic) nor text (byte {} is not UTF-8)",
            e.utf8_error().valid_up_to()
        ),
    })
}

/// A number that must be finite (a recording never holds NaN or infinities).
fn finite(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|x| x.is_finite())
}

/// The text up to its last newline, and what follows it when that is not empty (a
/// line cut by a kill or a full disk).
fn split_cut(text: &str) -> (&str, Option<String>) {
    match text.rfind('\n') {
        Some(i) if i + 1 < text.len() => (&text[..=i], Some(text[i + 1..].to_string())),
        Some(_) => (text, None),
        // One line, cut: there is no complete row to keep.
        None if !text.is_empty() => ("", Some(text.to_string())),
        None => (text, None),
    }
}

fn meta_line(l: &str) -> Option<(String, String)> {
    let (k, v) = l.strip_prefix('#')?.trim().split_once(": ")?;
    Some((k.trim().to_string(), v.to_string()))
}

/// A line of `path` that is not what quietwatt writes.
fn bad_line(path: &Path, line: usize, why: String) -> TraceError {
    TraceError::Format {
        path: path.to_path_buf(),
        line,
        why,
    }
}

/// A file's `key: value` metadata and its rows, as read.
type MetaAndRows<R> = (Vec<(String, String)>, Vec<R>);

/// What a quietwatt CSV is called in its errors.
struct Csv {
    /// The file's kind (`energy`, `events`).
    file: &'static str,
    /// What each row must be (`an events row`).
    row: &'static str,
}

/// The metadata and rows of `text`, a quietwatt CSV read from `path`: `# key:
/// value` metadata, then the header line (`header` says whether a line is it),
/// then the rows that `row` makes of their comma-separated fields.
fn read_csv<R>(
    path: &Path,
    text: &str,
    what: Csv,
    header: impl Fn(&str) -> bool,
    row: impl Fn(&[&str]) -> Option<R>,
) -> Result<MetaAndRows<R>, TraceError> {
    let (mut meta, mut rows) = (Vec::new(), Vec::new());
    let mut seen_header = false;
    for (i, l) in text.lines().enumerate() {
        if l.starts_with('#') {
            if let Some(kv) = meta_line(l) {
                meta.push(kv);
            }
            continue;
        }
        if l.trim().is_empty() {
            continue;
        }
        if !seen_header {
            if !header(l) {
                let why = format!("expected the {} header, found {l:?}", what.file);
                return Err(bad_line(path, i + 1, why));
            }
            seen_header = true;
            continue;
        }
        let c: Vec<&str> = l.split(',').collect();
        let why = || format!("not {}: {l:?}", what.row);
        rows.push(row(&c).ok_or_else(|| bad_line(path, i + 1, why()))?);
    }
    if !seen_header {
        let why = format!("no header line: not a quietwatt {} CSV", what.file);
        return Err(bad_line(path, 1, why));
    }
    Ok((meta, rows))
}

/// The metadata and rows of `text`, a JSON Lines energy file read from `path`.
fn read_jsonl(path: &Path, text: &str) -> Result<MetaAndRows<EnergyRow>, TraceError> {
    let (mut meta, mut rows) = (Vec::new(), Vec::new());
    for (i, l) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: serde_json::Value =
            serde_json::from_str(l).map_err(|e| bad_line(path, i + 1, e.to_string()))?;
        if let Some(m) = v.get("metadata").and_then(|m| m.as_object()) {
            for (k, v) in m {
                let s = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                meta.push((k.clone(), s));
            }
            continue;
        }
        let num = |k: &str| v.get(k).and_then(serde_json::Value::as_f64);
        let row = (|| {
            Some(EnergyRow {
                t_ns: v.get("timestamp_ns")?.as_u64()?,
                socket: v.get("socket")?.as_u64()? as u32,
                domain: v.get("domain")?.as_str()?.to_string(),
                energy_j: num("energy_j")?,
                power_w: num("power_w")?,
            })
        })()
        .ok_or_else(|| bad_line(path, i + 1, "not an energy row".into()))?;
        rows.push(row);
    }
    Ok((meta, rows))
}

impl EnergyFile {
    /// Reads a CSV, JSON Lines or Parquet energy file (told apart by its first
    /// bytes).
    pub fn read(path: &Path) -> Result<EnergyFile, TraceError> {
        if is_parquet(path) {
            return read_parquet(path);
        }
        let whole = read(path)?;
        let (text, cut_last_line) = split_cut(&whole);
        let (meta, rows) = if text.trim_start().starts_with('{') {
            read_jsonl(path, text)?
        } else {
            let header = |l: &str| l.starts_with("timestamp_ns,socket,domain,energy_j,power_w");
            let row = |c: &[&str]| {
                Some(EnergyRow {
                    t_ns: c.first()?.parse().ok()?,
                    socket: c.get(1)?.parse().ok()?,
                    domain: c.get(2)?.to_string(),
                    energy_j: finite(c.get(3)?)?,
                    power_w: finite(c.get(4)?)?,
                })
            };
            let what = Csv {
                file: "energy",
                row: "an energy row (timestamp, socket, domain, finite energy_j and power_w)",
            };
            read_csv(path, text, what, header, row)?
        };
        Ok(EnergyFile {
            meta,
            rows,
            cut_last_line,
        })
    }

    /// The events file `record --events` writes beside `path` (`run.csv` →
    /// `run.events.csv`).
    pub fn events_path(path: &Path) -> PathBuf {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        path.with_file_name(format!("{stem}.events.csv"))
    }

    /// `socket/domain` names in order of first appearance.
    pub fn domains(&self) -> Vec<(u32, String)> {
        let mut v: Vec<(u32, String)> = Vec::new();
        for r in &self.rows {
            if !v.iter().any(|(s, d)| *s == r.socket && *d == r.domain) {
                v.push((r.socket, r.domain.clone()));
            }
        }
        v
    }
}

/// Whether `path` starts with Parquet's magic (`PAR1`).
fn is_parquet(path: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"PAR1"
}

/// A Parquet energy file, read by the sink's reader.
#[cfg(feature = "parquet")]
fn read_parquet(path: &Path) -> Result<EnergyFile, TraceError> {
    let r = quietwatt::sink::parquet::read(path).map_err(|e| match e.kind() {
        io::ErrorKind::InvalidData => TraceError::Format {
            path: path.to_path_buf(),
            line: 0,
            why: e.to_string(),
        },
        _ => TraceError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    })?;
    // The metadata as a JSON Lines file's: its object's keys, strings as they are.
    let meta = match &r.metadata {
        serde_json::Value::Object(m) => m
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.as_str().map_or_else(|| v.to_string(), str::to_string),
                )
            })
            .collect(),
        _ => r.key_value,
    };
    let rows = r
        .rows
        .into_iter()
        .map(|r| EnergyRow {
            t_ns: r.t_ns,
            socket: r.socket,
            domain: r.domain,
            energy_j: r.energy_j,
            power_w: r.power_w,
        })
        .collect();
    Ok(EnergyFile {
        meta,
        rows,
        cut_last_line: None,
    })
}

#[cfg(not(feature = "parquet"))]
fn read_parquet(path: &Path) -> Result<EnergyFile, TraceError> {
    Err(TraceError::Format {
        path: path.to_path_buf(),
        line: 0,
        why: "a Parquet recording, and this build of quietwatt reads no Parquet (the \
              quietwatt-events crate's feature `parquet` is off)"
            .into(),
    })
}

impl EventsFile {
    /// Reads an events CSV.
    pub fn read(path: &Path) -> Result<EventsFile, TraceError> {
        let whole = read(path)?;
        let (text, cut_last_line) = split_cut(&whole);
        let header = |l: &str| l == crate::recorder::HEADER;
        let row = |c: &[&str]| {
            if c.len() != 4 {
                return None;
            }
            Some(EventRow {
                t_ns: c[0].parse().ok()?,
                cpu: c[1].parse().ok()?,
                event: c[2].to_string(),
                count: c[3].parse().ok()?,
            })
        };
        let what = Csv {
            file: "events",
            row: "an events row",
        };
        let (meta, rows) = read_csv(path, text, what, header, row)?;
        Ok(EventsFile {
            meta,
            rows,
            cut_last_line,
        })
    }

    /// The distinct times of the counted (not traced) rows, in order: one read is
    /// one timestamp for every counter.
    pub fn read_times(&self) -> Vec<u64> {
        let mut t: Vec<u64> = self
            .rows
            .iter()
            .filter(|r| !r.event.starts_with(TRACED))
            .map(|r| r.t_ns)
            .collect();
        t.sort_unstable();
        t.dedup();
        t
    }

    /// Idle state names per `(cpu, state)` from the `# cpuidle:` lines.
    pub fn state_names(&self) -> BTreeMap<(u32, u32), String> {
        let mut m = BTreeMap::new();
        for (k, v) in &self.meta {
            if k != "cpuidle" {
                continue;
            }
            // `cpu0 state1 name="haltpoll idle" latency_us=...`
            let mut it = v.splitn(3, ' ');
            let cpu = it.next().and_then(|c| c.strip_prefix("cpu")?.parse().ok());
            let st = it
                .next()
                .and_then(|s| s.strip_prefix("state")?.parse().ok());
            let name = it
                .next()
                .and_then(|r| r.strip_prefix("name=\"")?.split('"').next());
            if let (Some(c), Some(s), Some(n)) = (cpu, st, name) {
                m.insert((c, s), n.to_string());
            }
        }
        m
    }
}

/// The energy per event over the windows of the events file: for each counted
/// event, the least-squares slope of the mean power of `domain` (summed over
/// sockets) in each window against the event's rate in it (summed over CPUs), in
/// joules per event. Rates rather than counts: windows differ in length, and
/// anything proportional to time would otherwise correlate with the energy. An
/// estimate: see [`crate::summary`].
pub fn energy_per_event(
    energy: &EnergyFile,
    events: &EventsFile,
    domain: &str,
) -> Vec<EnergyPerEvent> {
    // Window edges: the distinct read times of the events file.
    let edges = events.read_times();
    if edges.len() < 4 {
        return Vec::new();
    }
    let nw = edges.len() - 1;
    // Window k covers (edges[k], edges[k+1]].
    let window = |t: u64| -> Option<usize> {
        let k = edges.partition_point(|&e| e < t);
        (k >= 1 && k < edges.len()).then(|| k - 1)
    };
    // Each energy row covers (previous row of its socket, this row] at constant
    // power: spread its joules over the windows it overlaps.
    let mut joules = vec![0.0; nw];
    let mut covered_ns = vec![0u64; nw];
    let mut prev: BTreeMap<u32, u64> = BTreeMap::new();
    let first_socket = energy
        .rows
        .iter()
        .find(|r| r.domain == domain)
        .map(|r| r.socket);
    for r in energy.rows.iter().filter(|r| r.domain == domain) {
        let Some(a) = prev.insert(r.socket, r.t_ns) else {
            continue;
        };
        let b = r.t_ns;
        if b <= a {
            continue;
        }
        for (k, w) in edges.windows(2).enumerate() {
            let (lo, hi) = (a.max(w[0]), b.min(w[1]));
            if hi > lo {
                joules[k] += r.energy_j * (hi - lo) as f64 / (b - a) as f64;
                if Some(r.socket) == first_socket {
                    covered_ns[k] += hi - lo;
                }
            }
        }
    }
    let mut counts: BTreeMap<Event, Vec<f64>> = BTreeMap::new();
    for r in &events.rows {
        let Some(e) = Event::parse(&r.event) else {
            continue;
        };
        // Time and residency are not events.
        if matches!(e, Event::CpuidleTimeUs(_) | Event::BpfIdleNs(_)) {
            continue;
        }
        if let Some(k) = window(r.t_ns) {
            counts.entry(e).or_insert_with(|| vec![0.0; nw])[k] += r.count as f64;
        }
    }
    let secs: Vec<f64> = edges
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / 1e9)
        .collect();
    // A window the energy rows do not (almost) fully cover would bias its power.
    let full: Vec<bool> = edges
        .windows(2)
        .zip(&covered_ns)
        .map(|(w, &c)| c as f64 >= 0.99 * (w[1] - w[0]) as f64)
        .collect();
    let mut out = Vec::new();
    for (e, xs) in counts {
        let pts: Vec<(f64, f64)> = (0..nw)
            .filter(|&k| full[k] && secs[k] > 0.0)
            .map(|k| (xs[k] / secs[k], joules[k] / secs[k]))
            .collect();
        out.extend(EnergyPerEvent::fit(e.to_string(), &pts));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_per_event_recovers_a_known_slope_over_unequal_windows() {
        let mut energy = EnergyFile::default();
        let mut events = EventsFile::default();
        // Windows of 80 to 120 ms; energy rows every 10 ms, not aligned to them.
        let mut t = 1_000_000_000u64;
        let mut edges = vec![t];
        for k in 0..20u64 {
            t += 80_000_000 + (k * 13 % 5) * 10_000_000;
            edges.push(t);
        }
        // 5 W, plus 1 mJ per fault; faults come at a rate that varies per window.
        let rate = |k: usize| ((k * 7) % 11) as f64 * 100.0;
        for (k, w) in edges.windows(2).enumerate() {
            let n = rate(k) * (w[1] - w[0]) as f64 / 1e9;
            events.rows.push(EventRow {
                t_ns: w[1],
                cpu: 0,
                event: "page_faults_min".into(),
                count: n.round() as u64,
            });
        }
        events.rows.push(EventRow {
            t_ns: edges[0],
            cpu: 0,
            event: "page_faults_min".into(),
            count: 0,
        });
        let mut e_t = edges[0] - 3_000_000;
        let end = *edges.last().unwrap() + 10_000_000;
        while e_t < end {
            let next = e_t + 10_000_000;
            // Power over (e_t, next]: constant within a window; rows straddling an edge
            // get the time-weighted mean.
            let mut j = 0.0;
            for (k, w) in edges.windows(2).enumerate() {
                let (lo, hi) = (e_t.max(w[0]), next.min(w[1]));
                if hi > lo {
                    j += (5.0 + 0.001 * rate(k)) * (hi - lo) as f64 / 1e9;
                }
            }
            let inside = edges
                .windows(2)
                .map(|w| next.min(w[1]).saturating_sub(e_t.max(w[0])))
                .sum::<u64>();
            j += 5.0 * (10_000_000 - inside) as f64 / 1e9;
            energy.rows.push(EnergyRow {
                t_ns: next,
                socket: 0,
                domain: "package".into(),
                energy_j: j,
                power_w: j / 0.01,
            });
            e_t = next;
        }
        let e = energy_per_event(&energy, &events, "package");
        assert_eq!(e.len(), 1);
        // An energy row straddling a window edge is spread at its mean power, which
        // blurs neighbouring windows a little (10 ms rows, ~100 ms windows): within 10 %.
        assert!((e[0].joules_per_event - 0.001).abs() < 1e-4, "{e:?}");
        assert!((e[0].watts_at_zero - 5.0).abs() < 0.1, "{e:?}");
        // The first window is not covered from its start (the first row primes).
        assert_eq!((e[0].windows, e[0].kind), (19, "estimate"));
        assert!(e[0].r2 > 0.99);
    }

    #[test]
    fn the_events_path_sits_beside_the_energy_file() {
        assert_eq!(
            EnergyFile::events_path(Path::new("/tmp/run.csv")),
            PathBuf::from("/tmp/run.events.csv")
        );
    }
}
