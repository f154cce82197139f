//! Where samples go: one trait, one module per format.
//!
//! A sink sees the run's [`Metadata`] and channels once ([`Sink::begin`]), then one
//! [`Sample`] at a time in order, in joules, on the writer thread (never on the
//! sampler's hot path), then [`Sink::flush`] at least once a second and
//! [`Sink::finish`] at the end. A columnar format fits the same shape: Parquet
//! (`parquet`, feature `parquet`) begins with the schema and an empty footer,
//! appends samples to its columns, writes a row group (and the footer after it) at
//! the flushes where one is due, and the last one at `finish`.

pub mod csv;
pub mod file;
pub mod jsonl;
#[cfg(feature = "parquet")]
pub mod parquet;

pub use self::csv::CsvSink;
pub use self::file::{OutputFile, RecordOutput};
pub use self::jsonl::JsonlSink;
#[cfg(feature = "parquet")]
pub use self::parquet::ParquetSink;

use crate::counter::Marks;
use crate::cpuinfo::CpuInfo;
use crate::root::SysRoot;
use crate::sampler::Rate;
use crate::source::Channel;
use crate::ticker::monotonic_ns;
use crate::units::Joules;
use std::fmt;
use std::io;
use std::str::FromStr;

/// The clock of the timestamps and one reading of the wall clock against it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockAnchor {
    /// Nanoseconds since the Unix epoch (CLOCK_REALTIME)...
    pub unix_ns: u128,
    /// ...read at the same moment as this CLOCK_MONOTONIC value.
    pub monotonic_ns: u64,
}

impl ClockAnchor {
    /// Reads both clocks now (back to back, within a microsecond).
    pub fn now() -> ClockAnchor {
        let unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        ClockAnchor {
            unix_ns,
            monotonic_ns: monotonic_ns(),
        }
    }
}

/// What a recording is, written before the samples.
#[derive(Debug, Clone)]
pub struct Metadata {
    /// `key: value` pairs (tool, host, CPU model, mechanism, rate, clock, units, ...),
    /// in order.
    pub fields: Vec<(String, String)>,
    /// The wall-clock anchor of the monotonic timestamps.
    pub anchor: ClockAnchor,
}

/// Where `cpu_model` comes from: this host, or the root measured under.
fn cpu_model_from(root: &SysRoot) -> String {
    if root.is_system() {
        "this host's /proc/cpuinfo".into()
    } else {
        format!(
            "{}/proc/cpuinfo: the root measured under (an emulator's configured CPU, or a test tree), not this host's (host_cpu_model)",
            root.dir().display()
        )
    }
}

/// What the columns of every format mean.
pub const COLUMNS: &str = "timestamp_ns: CLOCK_MONOTONIC ns of the read; energy_j: joules since the previous row of that domain \
(a row after a gap covers the gap); power_w: energy_j over that interval; missed: sampling deadlines that passed without a read \
since the previous row (this row's interval and energy span them); merged: reads folded into this row because the writer fell behind; freq_hz: the sampling rate in force; \
counter: empty, or reset/backstep/jump/ambiguous when the counter restarted from 0, stepped back, jumped, or decreased in a way \
a wrap and a restart explain alike during this row's interval \
(energy_j then holds only what can be counted: the energy since a restart, 0, or for ambiguous the wrap's advance, the most it can be)";

impl Metadata {
    /// The fields every recording carries: tool version, host, kernel, CPU model (from
    /// `/proc/cpuinfo` under `root`), mechanism, rate, clock and wall-clock anchor, units.
    pub fn new(mechanism: &str, rate: &Rate, root: &SysRoot) -> Metadata {
        let anchor = ClockAnchor::now();
        let uname = rustix::system::uname();
        let cpu = CpuInfo::read(root)
            .map(|c| c.to_string())
            .unwrap_or_else(|e| format!("unknown ({e})"));
        let fields = vec![
            (
                "tool".into(),
                format!("quietwatt {}", env!("CARGO_PKG_VERSION")),
            ),
            (
                "host".into(),
                uname.nodename().to_string_lossy().into_owned(),
            ),
            (
                "kernel".into(),
                uname.release().to_string_lossy().into_owned(),
            ),
            ("cpu_model".into(), cpu),
            ("cpu_model_from".into(), cpu_model_from(root)),
            ("mechanism".into(), mechanism.into()),
            ("freq_hz".into(), rate.to_string()),
            (
                "clock".into(),
                "timestamp_ns is CLOCK_MONOTONIC nanoseconds".into(),
            ),
            (
                "wall_clock_anchor".into(),
                format!(
                    "unix_ns {} = monotonic_ns {}",
                    anchor.unix_ns, anchor.monotonic_ns
                ),
            ),
            ("units".into(), COLUMNS.into()),
        ];
        let mut m = Metadata { fields, anchor };
        if !root.is_system() {
            // The CPU measured is the root's (an emulator's configured one); the
            // machine that ran the recording is said beside it.
            let host = CpuInfo::read(&SysRoot::default())
                .map(|c| c.to_string())
                .unwrap_or_else(|e| format!("unknown ({e})"));
            m.push("host_cpu_model", host);
        }
        m
    }

    /// Adds a field.
    pub fn push(&mut self, key: impl Into<String>, value: impl Into<String>) {
        self.fields.push((key.into(), value.into()));
    }

    /// The fields but `key`: for a file beside the recording that takes its
    /// metadata and describes its own columns (`units`).
    pub fn fields_except(&self, key: &str) -> Vec<(String, String)> {
        self.fields
            .iter()
            .filter(|(k, _)| k != key)
            .cloned()
            .collect()
    }
}

/// One sample as a sink receives it, converted to joules.
#[derive(Debug, Clone, Copy)]
pub struct Sample<'a> {
    /// CLOCK_MONOTONIC nanoseconds of the read.
    pub t_ns: u64,
    /// Nanoseconds since the previous sample's read (gaps included).
    pub interval_ns: u64,
    /// Deadlines missed since the previous sample (this one's interval spans them).
    pub missed: u32,
    /// Reads merged into this sample because the ring was full.
    pub merged: u32,
    /// The sampling rate in force.
    pub freq_hz: f64,
    /// Channels whose energy is not the full interval's (a counter reset, step back or
    /// jump): their rows are marked.
    pub marks: Marks,
    /// Energy per channel since the previous sample, in channel order.
    pub energy: &'a [Joules],
}

impl Sample<'_> {
    /// Mean power of channel energy `e` over this sample's interval (0 for an empty one).
    pub fn power(&self, e: Joules) -> f64 {
        if self.interval_ns > 0 {
            e.0 / (self.interval_ns as f64 / 1e9)
        } else {
            0.0
        }
    }
}

/// Where samples go.
pub trait Sink: Send {
    /// Called once before the first sample; writes the header through to the output
    /// so that an unwritable output fails before anything is measured.
    fn begin(&mut self, meta: &Metadata, channels: &[Channel]) -> io::Result<()>;
    /// One sample, in order.
    fn sample(&mut self, sample: &Sample<'_>) -> io::Result<()>;
    /// Hands everything so far to the output (the file, not necessarily the disk);
    /// a columnar sink may keep rows in memory until a row group is due.
    fn flush(&mut self) -> io::Result<()>;
    /// The end: flushes and completes the output.
    fn finish(&mut self) -> io::Result<()> {
        self.flush()
    }
    /// Samples the output holds whole (every row of each), after a failed write
    /// too: what a summary may call written. `None` when the sink cannot tell; the
    /// samples handed to it are counted instead.
    fn kept(&self) -> Option<u64> {
        None
    }
}

/// Discards samples: for measurements whose result is only the summary.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullSink;

impl Sink for NullSink {
    fn begin(&mut self, _: &Metadata, _: &[Channel]) -> io::Result<()> {
        Ok(())
    }
    fn sample(&mut self, _: &Sample<'_>) -> io::Result<()> {
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What [`Format::sink`] gives for a format that cannot stream: fails at `begin`,
/// before anything is measured.
struct NeedsFile(Format);

impl NeedsFile {
    fn refusal(&self) -> io::Error {
        io::Error::new(
            io::ErrorKind::Unsupported,
            format!(
                "{} cannot be written to a stream: it needs a regular file (Format::file_sink)",
                self.0
            ),
        )
    }
}

impl Sink for NeedsFile {
    fn begin(&mut self, _: &Metadata, _: &[Channel]) -> io::Result<()> {
        Err(self.refusal())
    }
    fn sample(&mut self, _: &Sample<'_>) -> io::Result<()> {
        Err(self.refusal())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Format {
    /// Comma-separated values, metadata as leading `#` lines.
    #[default]
    Csv,
    /// JSON Lines, metadata as the first line.
    Jsonl,
    /// Parquet, metadata in the key-value metadata (`sink::parquet`). Needs the
    /// `parquet` feature, and a regular file: not a stream.
    Parquet,
}

impl Format {
    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Jsonl => "jsonl",
            Format::Parquet => "parquet",
        }
    }

    /// Whether the format can be written to a stream (a pipe, stdout): Parquet
    /// cannot, its footer is written back into the file after each row group.
    pub fn streams(self) -> bool {
        !matches!(self, Format::Parquet)
    }

    /// A sink of this format writing to `out`, a stream. A format that needs a file
    /// ([`Format::streams`] is false: Parquet) gives a sink whose `begin` fails,
    /// saying so: use [`Format::file_sink`] for it.
    pub fn sink<W: RecordOutput + Send + 'static>(self, out: W) -> Box<dyn Sink> {
        match self {
            Format::Csv => Box::new(CsvSink::new(out)),
            Format::Jsonl => Box::new(JsonlSink::new(out)),
            Format::Parquet => Box::new(NeedsFile(self)),
        }
    }

    /// A sink of this format writing to `out`, a file created for it (or stdout,
    /// for a format that streams). Parquet fails here when `out` is not a regular
    /// file, or when the library was built without the `parquet` feature.
    pub fn file_sink(self, out: OutputFile) -> io::Result<Box<dyn Sink>> {
        match self {
            #[cfg(feature = "parquet")]
            Format::Parquet => Ok(Box::new(ParquetSink::new(out.into_inner())?)),
            #[cfg(not(feature = "parquet"))]
            Format::Parquet => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this build of quietwatt writes no Parquet (the quietwatt crate's feature \
                 `parquet` is off): record CSV or JSON Lines, or build with --features parquet",
            )),
            Format::Csv => Ok(Box::new(CsvSink::new(out))),
            Format::Jsonl => Ok(Box::new(JsonlSink::new(out))),
        }
    }
}

impl Format {
    /// The format a file's name asks for: `.csv`, `.jsonl` (or `.ndjson`),
    /// `.parquet`; `None` for a name without an extension. An extension
    /// of no format (`.txt`) is an error naming the formats there are.
    pub fn from_extension(path: &std::path::Path) -> Result<Option<Format>, UnknownFormat> {
        let Some(ext) = path.extension() else {
            return Ok(None);
        };
        let ext = ext.to_string_lossy();
        ext.parse()
            .map(Some)
            .map_err(|_| UnknownFormat(ext.into_owned()))
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is not a format.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown format '{0}': expected csv, jsonl or parquet")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "csv" => Ok(Format::Csv),
            "jsonl" | "ndjson" => Ok(Format::Jsonl),
            "parquet" => Ok(Format::Parquet),
            _ => Err(UnknownFormat(s.to_string())),
        }
    }
}

/// Text sinks accumulate rows and hand the output whole batches of this size: few
/// `write` calls, and a failed write never splits a sample (see [`OutputFile`]).
pub(crate) const BATCH_BYTES: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_extension_or_the_name_picks_the_format_and_parquet_needs_a_file() {
        let ext = |p: &str| Format::from_extension(Path::new(p));
        assert_eq!(ext("r.parquet").unwrap(), Some(Format::Parquet));
        assert_eq!(ext("r.JSONL").unwrap(), Some(Format::Jsonl));
        assert_eq!(ext("r").unwrap(), None);
        let err = ext("r.txt").unwrap_err().to_string();
        assert!(err.contains("csv, jsonl or parquet"), "{err}");
        assert_eq!("Parquet".parse::<Format>().unwrap(), Format::Parquet);
        assert!(Format::Csv.streams() && !Format::Parquet.streams());
        // Handed a stream, Parquet fails before anything is measured, saying why.
        let mut s = Format::Parquet.sink(OutputFile::new(Vec::new()));
        let meta = Metadata {
            fields: Vec::new(),
            anchor: ClockAnchor::now(),
        };
        let err = s.begin(&meta, &[]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Unsupported);
        assert!(err.to_string().contains("regular file"), "{err}");
    }

    /// Without the feature, Parquet is refused with the way to get it.
    #[cfg(not(feature = "parquet"))]
    #[test]
    fn without_the_feature_parquet_says_how_to_get_it() {
        let dir = tempfile::tempdir().unwrap();
        let f = OutputFile::create(&dir.path().join("r.parquet")).unwrap();
        let err = Format::Parquet.file_sink(f).err().expect("refused");
        assert_eq!(err.kind(), io::ErrorKind::Unsupported);
        assert!(err.to_string().contains("--features parquet"), "{err}");
    }

    #[test]
    fn the_cpu_model_says_whose_it_is() {
        // Measured under another root (an emulator): its CPU, said to be the
        // root's, and this host's beside it. Before, an emulated recording on an
        // AMD host said i7-7700K and nothing else.
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(
            dir.path().join("proc/cpuinfo"),
            "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 158\nmodel name\t: Emulated i7\nflags\t\t: msr\n\n",
        )
        .unwrap();
        let rate = Rate::Fixed(crate::ticker::Hertz::new(10.0).unwrap());
        let m = Metadata::new("powercap", &rate, &SysRoot::new(dir.path()));
        let get = |k: &str| {
            m.fields
                .iter()
                .find(|(f, _)| f == k)
                .map(|(_, v)| v.clone())
        };
        assert!(get("cpu_model").unwrap().contains("Emulated i7"));
        assert!(get("cpu_model_from").unwrap().contains("not this host's"));
        let host = get("host_cpu_model").expect("the host's CPU beside it");
        assert!(!host.contains("Emulated i7"), "{host}");
        let here = Metadata::new("powercap", &rate, &SysRoot::default());
        let get = |k: &str| {
            here.fields
                .iter()
                .find(|(f, _)| f == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("cpu_model_from").unwrap(), "this host's /proc/cpuinfo");
        assert!(get("host_cpu_model").is_none());
    }
}
