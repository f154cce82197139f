//! JSON Lines: the metadata as the first line (`{"metadata": {...}}`), then one
//! object per sample and domain with the same fields as the CSV columns.
//!
//! pandas: `pd.read_json(f, lines=True).iloc[1:]`, or read line by line and skip the
//! line that has a `metadata` key.

use super::file::Batch;
use super::{Metadata, RecordOutput, Sample, Sink};
use crate::source::Channel;
use std::io::{self, Write};

/// Writes JSON Lines to `W` in whole batches.
pub struct JsonlSink<W: Write> {
    /// The output and the samples not yet written to it.
    batch: Batch<W>,
    labels: Vec<(u32, &'static str)>,
}

impl<W: Write> std::fmt::Debug for JsonlSink<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlSink")
            .field("kept", &self.batch.kept())
            .finish_non_exhaustive()
    }
}

impl<W: RecordOutput> JsonlSink<W> {
    /// A JSON Lines sink writing to `out`.
    pub fn new(out: W) -> Self {
        JsonlSink {
            batch: Batch::new(out),
            labels: Vec::new(),
        }
    }
}

/// A metadata value as JSON: the same text as the CSV's header, typed where the
/// key says what it is (`emulated` a boolean, `*_hz` a number, or null where it is
/// none: `--freq auto`, whose words go to `freq_auto`).
fn typed(key: &str, value: &str) -> serde_json::Value {
    if key == "emulated" {
        if let Ok(b) = value.parse::<bool>() {
            return b.into();
        }
    }
    if key.ends_with("_hz") {
        return value
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .map_or(serde_json::Value::Null, Into::into);
    }
    value.into()
}

/// The metadata line's object.
pub fn metadata_json(meta: &Metadata, channels: &[Channel]) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    // The one versioned JSON shape of quietwatt's outputs (docs/json.md).
    m.insert("schema".into(), "quietwatt.recording/1".into());
    m.insert("schema_version".into(), 1.into());
    for (k, v) in &meta.fields {
        let t = typed(k, v);
        if t.is_null() && k == "freq_hz" {
            m.insert("freq_auto".into(), v.clone().into());
        }
        m.insert(k.clone(), t);
    }
    // Structured as well as in words: a reader converts timestamps without parsing text.
    m.insert(
        "wall_clock_anchor".into(),
        serde_json::json!({
            "unix_ns": meta.anchor.unix_ns as u64,
            "monotonic_ns": meta.anchor.monotonic_ns,
        }),
    );
    m.insert(
        "channels".into(),
        channels
            .iter()
            .map(|c| {
                serde_json::json!({
                    "socket": c.id.socket.0,
                    "die": c.id.die,
                    "domain": c.id.domain.name(),
                    "unit_j": c.unit.joules_per_step(),
                    "range_j": c.wrap.range(c.unit).0,
                    "origin": c.origin,
                })
            })
            .collect(),
    );
    serde_json::json!({ "metadata": m })
}

impl<W: RecordOutput + Send> Sink for JsonlSink<W> {
    fn begin(&mut self, meta: &Metadata, channels: &[Channel]) -> io::Result<()> {
        serde_json::to_writer(&mut self.batch.buf, &metadata_json(meta, channels))?;
        self.batch.buf.push(b'\n');
        self.labels = channels
            .iter()
            .map(|c| (c.id.socket.0, c.id.domain.name()))
            .collect();
        self.flush()
    }

    fn sample(&mut self, s: &Sample<'_>) -> io::Result<()> {
        // Written by hand: the fields are numbers and fixed ASCII names, so this is
        // valid JSON without a serializer per row.
        for (i, (&(socket, domain), &e)) in self.labels.iter().zip(s.energy).enumerate() {
            write!(
                self.batch.buf,
                "{{\"timestamp_ns\":{},\"socket\":{socket},\"domain\":\"{domain}\",\"energy_j\":{:.9},\"power_w\":{:.6},\"missed\":{},\"merged\":{},\"freq_hz\":{}",
                s.t_ns,
                e.0,
                s.power(e),
                s.missed,
                s.merged,
                s.freq_hz
            )?;
            // Present only on a marked row (a reset, step back or jump of this counter).
            match s.marks.kind(i) {
                Some(k) => writeln!(self.batch.buf, ",\"counter\":\"{}\"}}", k.name())?,
                None => writeln!(self.batch.buf, "}}")?,
            }
        }
        self.batch.end_record()
    }

    fn flush(&mut self) -> io::Result<()> {
        self.batch.flush()
    }

    fn kept(&self) -> Option<u64> {
        Some(self.batch.kept())
    }
}
