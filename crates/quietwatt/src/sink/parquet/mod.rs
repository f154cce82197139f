//! Parquet: the CSV's columns, typed, one row per sample and domain; the metadata in
//! the file's key-value metadata.
//!
//! | column | Parquet type | from |
//! |---|---|---|
//! | `timestamp_ns` | `INT64` | CLOCK_MONOTONIC ns (fits a signed 64-bit integer for 292 years of uptime) |
//! | `socket` | `INT32` (`INTEGER(32, false)`: unsigned) | the package |
//! | `domain` | `BYTE_ARRAY` (`STRING`) | `package`, `core`, `uncore`, `dram`, `psys` |
//! | `energy_j` | `DOUBLE` | joules since the previous row of the domain |
//! | `power_w` | `DOUBLE` | `energy_j` over the row's interval |
//! | `missed`, `merged` | `INT32` (`INTEGER(32, false)`) | deadlines missed, reads merged |
//! | `freq_hz` | `DOUBLE` | the rate in force |
//! | `counter` | optional `BYTE_ARRAY` (`STRING`) | null, or `reset`/`backstep`/`jump` |
//!
//! The key-value metadata holds each of the CSV header's `key: value` fields as
//! it is (text), and under [`METADATA_KEY`] the JSON Lines metadata object (typed,
//! with `schema` and `schema_version`, the channels, the structured clock anchor).
//!
//! **A file that stays readable.** A Parquet file is read from its end: the footer
//! (the schema, the key-value metadata, where each row group's columns are) and its
//! length close the file. The sink keeps the rows in memory and writes them as a
//! row group when one is due ([`ParquetSink::flush`]), each time with a new footer
//! describing every row group so far, written over the previous footer in one
//! write (`pwrite` of the row group and the footer together). So the file on disk is
//! a complete Parquet file after every row group: a SIGKILL or a power cut leaves
//! the row groups written before it, and loses the rows still in memory. A write
//! that fails (a full disk) puts the previous footer back and cuts what landed
//! beyond it: the file holds the row groups before the failed one. The one window
//! left is a kill that lands inside the `pwrite` itself (microseconds per row group):
//! the file may then end in a torn row group and no footer.
//!
//! **When a row group is due.** The footer grows with every row group, and it is
//! written again after each: row groups at every flush (twice a second) would make a
//! long recording rewrite megabytes of footers a second. A row group is written at
//! the first flush after it holds at least as many bytes as the footer that must be
//! written after it (so that, where this rule decides, footers cost fewer writes
//! than the data), or covers at least a twentieth of the time recorded so far (so
//! that at slow rates it never waits long; footers may then cost more than the data,
//! which is little there): a kill loses at most 5 % of the recording's time, plus
//! one flush, and at high rates far less (BENCHMARKS.md has the figures).
//! `finish` writes the last rows and the final footer.

use super::{Metadata, Sample, Sink};
use crate::counter::StepKind;
use crate::source::Channel;
use parquet::basic::Encoding;
use parquet::data_type::{ByteArray, ByteArrayType, DataType, DoubleType, Int32Type, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::metadata::{FileMetaData, KeyValue, ParquetMetaData, ParquetMetaDataWriter};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::{SerializedFileWriter, SerializedRowGroupWriter};
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::{ColumnPath, SchemaDescriptor};
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// The schema, in the Parquet message syntax.
pub const SCHEMA: &str = "message quietwatt_recording {
  required int64 timestamp_ns;
  required int32 socket (INTEGER(32,false));
  required binary domain (STRING);
  required double energy_j;
  required double power_w;
  required int32 missed (INTEGER(32,false));
  required int32 merged (INTEGER(32,false));
  required double freq_hz;
  optional binary counter (STRING);
}";

/// The key-value metadata key of the JSON metadata object (the first line of a JSON
/// Lines recording, `quietwatt.recording/1`).
pub const METADATA_KEY: &str = "quietwatt.recording";

/// Rows held in memory at most: past this many a row group is written at once,
/// whatever the rules of [`ParquetSink::flush`] say (a bound on memory: about 20 MiB).
const MAX_ROWS: usize = 1 << 18;

/// A row group is due once it covers this fraction of the time recorded so far.
const TIME_FRACTION: u64 = 20;

/// Bytes per row assumed before the first row group says what they are.
const FIRST_ROW_BYTES: u64 = 16;

/// An error of the parquet crate as an I/O error (its own I/O errors keep their kind).
fn io_err(e: ParquetError) -> io::Error {
    match e {
        ParquetError::External(e) => match e.downcast::<io::Error>() {
            Ok(e) => *e,
            Err(e) => io::Error::other(e),
        },
        e => io::Error::other(e),
    }
}

/// Where the bytes go: a file written at offsets. A trait so that the tests can
/// stand in a disk that fills up part-way through a write.
trait Storage: Send {
    /// `pwrite(2)`: writes some of `buf` at `offset`.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// `ftruncate(2)`.
    fn set_len(&self, len: u64) -> io::Result<()>;

    /// Writes all of `buf` at `offset`, or fails.
    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, offset) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    buf = &buf[n..];
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Storage for File {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        FileExt::write_at(self, buf, offset)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        File::set_len(self, len)
    }
}

/// What the parquet crate's writer writes into: the bytes of the row group being
/// written, held until [`Tail::commit`] puts them and the footer after them into
/// the file in one write. The writer's byte offsets are offsets in the file: the
/// data so far ends at `data_end`, where the footer starts.
struct Tail {
    file: Box<dyn Storage>,
    /// Where the row groups end (the footer starts) in the file.
    data_end: u64,
    /// The bytes handed over since the last commit (the magic, then row groups).
    pending: Vec<u8>,
    /// The footer now in the file at `data_end`: what a failed commit puts back.
    footer: Vec<u8>,
}

impl Write for Tail {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Tail {
    /// Writes the pending bytes and `footer` after them, over the old footer. On
    /// failure the old footer goes back where it was and the file is cut after it:
    /// the file is what it was before the call.
    fn commit(&mut self, footer: Vec<u8>) -> io::Result<()> {
        let data = self.pending.len() as u64;
        self.pending.extend_from_slice(&footer);
        let end = self.data_end + self.pending.len() as u64;
        let old_end = self.data_end + self.footer.len() as u64;
        let r = self
            .file
            .write_all_at(&self.pending, self.data_end)
            // The footer only grows; were it ever shorter, the old one's end must go.
            .and_then(|()| match end < old_end {
                true => self.file.set_len(end),
                false => Ok(()),
            });
        self.pending.clear();
        match r {
            Ok(()) => {
                self.data_end += data;
                self.footer = footer;
                Ok(())
            }
            Err(e) => {
                // The old footer's bytes are the file's own already (no new room is
                // needed to write them back), so this works on a full disk too.
                let back = self
                    .file
                    .write_all_at(&self.footer, self.data_end)
                    .and_then(|()| self.file.set_len(old_end));
                match back {
                    Ok(()) => Err(e),
                    Err(b) => Err(io::Error::new(
                        e.kind(),
                        format!("{e}; putting the previous footer back failed too ({b}): the file may not be readable"),
                    )),
                }
            }
        }
    }
}

/// The rows not yet in a row group, column by column.
#[derive(Default)]
struct Columns {
    t_ns: Vec<i64>,
    socket: Vec<i32>,
    domain: Vec<ByteArray>,
    energy_j: Vec<f64>,
    power_w: Vec<f64>,
    missed: Vec<i32>,
    merged: Vec<i32>,
    freq_hz: Vec<f64>,
    /// The non-null `counter` values, and 1 (a value) or 0 (null) for each row.
    counter: Vec<ByteArray>,
    counter_def: Vec<i16>,
}

impl Columns {
    fn len(&self) -> usize {
        self.t_ns.len()
    }

    fn clear(&mut self) {
        self.t_ns.clear();
        self.socket.clear();
        self.domain.clear();
        self.energy_j.clear();
        self.power_w.clear();
        self.missed.clear();
        self.merged.clear();
        self.freq_hz.clear();
        self.counter.clear();
        self.counter_def.clear();
    }
}

/// Writes one column of a row group.
fn column<T: DataType>(
    rg: &mut SerializedRowGroupWriter<'_, Tail>,
    values: &[T::T],
    def: Option<&[i16]>,
) -> Result<(), ParquetError> {
    let mut c = rg
        .next_column()?
        .ok_or_else(|| ParquetError::General("more columns than the schema has".into()))?;
    c.typed::<T>().write_batch(values, def, None)?;
    c.close()
}

/// Writes Parquet to a file, a row group at a time, the file complete after each
/// (see the module's documentation).
pub struct ParquetSink {
    /// `None` before `begin` and after a failed write (nothing more is written).
    writer: Option<SerializedFileWriter<Tail>>,
    /// The file until `begin` hands it to the writer.
    file: Option<Box<dyn Storage>>,
    schema: Arc<SchemaDescriptor>,
    props: Arc<WriterProperties>,
    kv: Vec<KeyValue>,
    rows: Columns,
    /// Each channel's socket and domain name, ready to copy into a row.
    labels: Vec<(i32, ByteArray)>,
    /// The `counter` names, ready to copy.
    marks: [(StepKind, ByteArray); 4],
    /// Samples in the row groups written, and in memory.
    kept: u64,
    pending: u64,
    /// Rows in the row groups written.
    rows_written: u64,
    /// The first sample's timestamp, and the first one in memory.
    first_ns: Option<u64>,
    pending_first_ns: u64,
    last_ns: u64,
}

impl std::fmt::Debug for ParquetSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParquetSink")
            .field("kept", &self.kept)
            .field("pending", &self.pending)
            .field("rows_written", &self.rows_written)
            .finish_non_exhaustive()
    }
}

impl ParquetSink {
    /// A Parquet sink writing to `file`, which must be a regular file (Parquet's
    /// footer is rewritten in place): a pipe, a terminal or a device is refused.
    pub fn new(file: File) -> io::Result<ParquetSink> {
        use std::os::unix::fs::FileTypeExt;
        let ft = file.metadata()?.file_type();
        if !ft.is_file() {
            let what = if ft.is_fifo() || ft.is_socket() {
                "a pipe"
            } else if ft.is_char_device() || ft.is_block_device() {
                "a device"
            } else {
                "not a regular file"
            };
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("Parquet needs a regular file it can write back into, and this is {what}: record to a file, or write CSV or JSON Lines here"),
            ));
        }
        Ok(ParquetSink::on(Box::new(file)))
    }

    /// A Parquet sink writing to `file`.
    fn on(file: Box<dyn Storage>) -> ParquetSink {
        // The schema is a constant, parsed by the tests.
        let schema = Arc::new(parse_message_type(SCHEMA).expect("the schema parses"));
        let col = |name: &str| ColumnPath::from(name);
        let props = WriterProperties::builder()
            // Typed columns, uncompressed: no codec to build, and what repeats
            // (sockets, domains, rates, empty marks, most energies) is dictionary-
            // and run-length encoded anyway.
            .set_statistics_enabled(EnabledStatistics::None)
            // The time range of each row group, for readers that filter on it.
            .set_column_statistics_enabled(col("timestamp_ns"), EnabledStatistics::Chunk)
            // The footer is rewritten after each row group: only what readers need.
            .set_offset_index_disabled(true)
            // The rows of one sample share a timestamp: deltas are 0 or the period.
            .set_column_dictionary_enabled(col("timestamp_ns"), false)
            .set_column_encoding(col("timestamp_ns"), Encoding::DELTA_BINARY_PACKED)
            // A power is an energy over a measured interval: all different.
            .set_column_dictionary_enabled(col("power_w"), false)
            .build();
        ParquetSink {
            writer: None,
            file: Some(file),
            schema: Arc::new(SchemaDescriptor::new(schema)),
            props: Arc::new(props),
            kv: Vec::new(),
            rows: Columns::default(),
            labels: Vec::new(),
            marks: [
                StepKind::Reset,
                StepKind::BackStep,
                StepKind::Jump,
                StepKind::Ambiguous,
            ]
            .map(|k| (k, ByteArray::from(k.name()))),
            kept: 0,
            pending: 0,
            rows_written: 0,
            first_ns: None,
            pending_first_ns: 0,
            last_ns: 0,
        }
    }

    /// Creates (or replaces) `path` and writes Parquet there.
    pub fn create(path: &Path) -> io::Result<ParquetSink> {
        ParquetSink::new(File::create(path)?)
    }

    fn writer(&mut self) -> io::Result<&mut SerializedFileWriter<Tail>> {
        self.writer.as_mut().ok_or_else(|| {
            io::Error::other("the Parquet file was not begun, or an earlier write failed")
        })
    }

    /// The footer for the row groups written so far.
    fn footer(&mut self) -> io::Result<Vec<u8>> {
        let kv = self.kv.clone();
        let (schema, props) = (self.schema.clone(), self.props.clone());
        let groups = self.writer()?.flushed_row_groups().to_vec();
        let file = FileMetaData::new(
            props.writer_version().as_num(),
            // Summed from the row groups by the metadata writer.
            0,
            Some(props.created_by().to_string()),
            Some(kv),
            schema,
            None,
        );
        let meta = ParquetMetaData::new(file, groups);
        let mut buf = Vec::new();
        ParquetMetaDataWriter::new(&mut buf, &meta)
            .finish()
            .map_err(io_err)?;
        Ok(buf)
    }

    /// Hands the file writer's buffered bytes to the tail and writes them with a
    /// new footer. After a failure nothing more is written.
    fn commit(&mut self) -> io::Result<()> {
        let r = (|| {
            let footer = self.footer()?;
            let w = self.writer()?;
            w.flush()?;
            w.inner_mut().commit(footer)
        })();
        if r.is_err() {
            self.writer = None;
        }
        r
    }

    /// Writes the rows in memory as one row group, and the footer after it.
    fn write_row_group(&mut self) -> io::Result<()> {
        // Not begun, or failed before: say so, rows or not.
        self.writer()?;
        if self.rows.len() == 0 {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.rows);
        let written = (|| {
            let w = self.writer()?;
            let mut rg = w.next_row_group().map_err(io_err)?;
            (|| {
                column::<Int64Type>(&mut rg, &rows.t_ns, None)?;
                column::<Int32Type>(&mut rg, &rows.socket, None)?;
                column::<ByteArrayType>(&mut rg, &rows.domain, None)?;
                column::<DoubleType>(&mut rg, &rows.energy_j, None)?;
                column::<DoubleType>(&mut rg, &rows.power_w, None)?;
                column::<Int32Type>(&mut rg, &rows.missed, None)?;
                column::<Int32Type>(&mut rg, &rows.merged, None)?;
                column::<DoubleType>(&mut rg, &rows.freq_hz, None)?;
                column::<ByteArrayType>(&mut rg, &rows.counter, Some(&rows.counter_def))?;
                rg.close().map(drop)
            })()
            .map_err(io_err)
        })();
        let n = rows.len() as u64;
        // The buffers' room is kept for the next row group.
        self.rows = rows;
        self.rows.clear();
        if let Err(e) = written {
            self.writer = None;
            return Err(e);
        }
        self.commit()?;
        self.kept += self.pending;
        self.pending = 0;
        self.rows_written += n;
        Ok(())
    }

    /// Whether the rows in memory are due as a row group (the module's rules).
    fn due(&self) -> bool {
        let n = self.rows.len() as u64;
        if n == 0 {
            return false;
        }
        let Some(tail) = self
            .writer
            .as_ref()
            .map(parquet::file::writer::SerializedFileWriter::inner)
        else {
            return false;
        };
        let row_bytes = match self.rows_written {
            0 => FIRST_ROW_BYTES,
            r => (tail.data_end / r).max(1),
        };
        let footer = tail.footer.len() as u64;
        let recorded = self.last_ns - self.first_ns.unwrap_or(self.last_ns);
        let held = self.last_ns - self.pending_first_ns;
        n * row_bytes >= footer || held * TIME_FRACTION >= recorded
    }
}

/// The key-value metadata of a recording: the CSV header's fields as they are, and
/// the JSON Lines metadata object under [`METADATA_KEY`].
pub fn key_value_metadata(meta: &Metadata, channels: &[Channel]) -> Vec<KeyValue> {
    let mut kv: Vec<KeyValue> = meta
        .fields
        .iter()
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
        .collect();
    let json = super::jsonl::metadata_json(meta, channels);
    kv.push(KeyValue::new(
        METADATA_KEY.to_string(),
        json["metadata"].to_string(),
    ));
    kv
}

impl Sink for ParquetSink {
    fn begin(&mut self, meta: &Metadata, channels: &[Channel]) -> io::Result<()> {
        let file = self
            .file
            .take()
            .ok_or_else(|| io::Error::other("the Parquet file was begun twice"))?;
        self.kv = key_value_metadata(meta, channels);
        self.labels = channels
            .iter()
            .map(|c| (c.id.socket.0 as i32, ByteArray::from(c.id.domain.name())))
            .collect();
        let tail = Tail {
            file,
            data_end: 0,
            pending: Vec::new(),
            footer: Vec::new(),
        };
        let root = self.schema.root_schema_ptr();
        self.writer =
            Some(SerializedFileWriter::new(tail, root, self.props.clone()).map_err(io_err)?);
        // The magic and a footer of no row groups: a valid, empty recording with its
        // metadata, and an unwritable file fails now.
        self.commit()
    }

    fn sample(&mut self, s: &Sample<'_>) -> io::Result<()> {
        if self.rows.len() == 0 {
            self.pending_first_ns = s.t_ns;
        }
        self.first_ns.get_or_insert(s.t_ns);
        self.last_ns = s.t_ns;
        let r = &mut self.rows;
        for (i, ((socket, domain), &e)) in self.labels.iter().zip(s.energy).enumerate() {
            r.t_ns.push(s.t_ns as i64);
            r.socket.push(*socket);
            // A clone is a reference count: the name's bytes are shared.
            r.domain.push(domain.clone());
            r.energy_j.push(e.0);
            r.power_w.push(s.power(e));
            // Stored as INT32 with the unsigned annotation: the bits of the u32.
            r.missed.push(s.missed as i32);
            r.merged.push(s.merged as i32);
            r.freq_hz.push(s.freq_hz);
            match s.marks.kind(i) {
                Some(k) => {
                    let name = self.marks.iter().find(|(m, _)| *m == k);
                    r.counter
                        .push(name.map_or_else(|| ByteArray::from(k.name()), |(_, b)| b.clone()));
                    r.counter_def.push(1);
                }
                None => r.counter_def.push(0),
            }
        }
        self.pending += 1;
        if self.rows.len() >= MAX_ROWS {
            return self.write_row_group();
        }
        Ok(())
    }

    /// Writes the rows in memory as a row group when one is due (see the module's
    /// documentation); until then they stay in memory.
    fn flush(&mut self) -> io::Result<()> {
        if self.due() {
            self.write_row_group()
        } else {
            Ok(())
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        self.write_row_group()
    }

    fn kept(&self) -> Option<u64> {
        Some(self.kept)
    }
}

/// One row of a Parquet recording read back ([`read`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// CLOCK_MONOTONIC ns of the read.
    pub t_ns: u64,
    /// The package.
    pub socket: u32,
    /// The domain's name.
    pub domain: String,
    /// Joules since the previous row of the domain.
    pub energy_j: f64,
    /// Mean watts over that interval.
    pub power_w: f64,
    /// Deadlines missed since the previous sample.
    pub missed: u32,
    /// Reads merged into this one.
    pub merged: u32,
    /// The rate in force.
    pub freq_hz: f64,
    /// `reset`, `backstep` or `jump` on a marked row.
    pub counter: Option<String>,
}

/// A Parquet recording read back ([`read`]).
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The key-value metadata, in order.
    pub key_value: Vec<(String, String)>,
    /// The JSON metadata object (under [`METADATA_KEY`]); `Null` when there is none.
    pub metadata: serde_json::Value,
    /// Row groups in the file.
    pub row_groups: usize,
    /// The rows, in file order.
    pub rows: Vec<Row>,
}

/// Reads a Parquet recording written by [`ParquetSink`] (for `quietwatt trace`,
/// `record --events` and the tests; a data frame library reads it faster). A file
/// that is not one is an [`io::ErrorKind::InvalidData`] error saying why.
pub fn read(path: &Path) -> io::Result<Recorded> {
    // The parquet crate asserts on some damaged inputs (a varint longer than ten
    // bytes panicked in its bit reader: found by scripts/fuzz.sh): a damaged file
    // is an error here, never a panic of the caller.
    quietly(|| read_unguarded(path)).unwrap_or_else(|_| {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a damaged Parquet file: its decoder failed on it",
        ))
    })
}

std::thread_local! {
    /// Set while this thread runs [`quietly`].
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, catching a panic without the panic hook's message: the caller turns
/// it into an error of its own, and a user reading a damaged file should see that
/// error, not "thread panicked at ... bit_reader.rs" above it. Other threads'
/// panics are reported as before (the previous hook runs for them).
fn quietly<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
    QUIET.with(|q| q.set(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.with(|q| q.set(false));
    r
}

fn read_unguarded(path: &Path) -> io::Result<Recorded> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let reader = SerializedFileReader::new(File::open(path)?).map_err(|e| match e {
        ParquetError::External(_) => io_err(e),
        e => bad(format!("not a readable Parquet file ({e})")),
    })?;
    let meta = reader.metadata();
    let key_value: Vec<(String, String)> = meta
        .file_metadata()
        .key_value_metadata()
        .into_iter()
        .flatten()
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect();
    let metadata = key_value
        .iter()
        .find(|(k, _)| k == METADATA_KEY)
        .map(|(_, v)| serde_json::from_str(v))
        .transpose()
        .map_err(|e| bad(format!("{METADATA_KEY} is not JSON ({e})")))?
        .unwrap_or(serde_json::Value::Null);
    let row_groups = meta.num_row_groups();
    let mut rows = Vec::new();
    let iter = reader
        .get_row_iter(None)
        .map_err(|e| bad(format!("cannot read the rows ({e})")))?;
    for row in iter {
        let row = row.map_err(|e| bad(format!("cannot read a row ({e})")))?;
        let mut r = Row {
            t_ns: 0,
            socket: 0,
            domain: String::new(),
            energy_j: f64::NAN,
            power_w: f64::NAN,
            missed: 0,
            merged: 0,
            freq_hz: f64::NAN,
            counter: None,
        };
        let mut seen = 0;
        for (name, field) in row.get_column_iter() {
            seen += 1;
            match (name.as_str(), field) {
                ("timestamp_ns", Field::Long(v)) => r.t_ns = *v as u64,
                ("socket", Field::UInt(v)) => r.socket = *v,
                ("domain", Field::Str(v)) => r.domain = v.clone(),
                ("energy_j", Field::Double(v)) => r.energy_j = *v,
                ("power_w", Field::Double(v)) => r.power_w = *v,
                ("missed", Field::UInt(v)) => r.missed = *v,
                ("merged", Field::UInt(v)) => r.merged = *v,
                ("freq_hz", Field::Double(v)) => r.freq_hz = *v,
                ("counter", Field::Str(v)) => r.counter = Some(v.clone()),
                ("counter", Field::Null) => {}
                (name, field) => {
                    return Err(bad(format!(
                        "column {name} holds {field:?}: not a quietwatt recording"
                    )))
                }
            }
        }
        if seen != 9 {
            return Err(bad(format!(
                "{seen} columns, not the 9 of a quietwatt recording"
            )));
        }
        rows.push(r);
    }
    Ok(Recorded {
        key_value,
        metadata,
        row_groups,
        rows,
    })
}

#[cfg(test)]
mod tests;
