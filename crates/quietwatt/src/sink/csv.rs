//! CSV: `timestamp_ns,socket,domain,energy_j,power_w,missed,merged,freq_hz,counter`,
//! one row per sample and domain, metadata as leading `#` lines.
//!
//! pandas: `pd.read_csv(f, comment="#")`; polars: `pl.read_csv(f, comment_prefix="#")`.
//! The first five columns are the stable core; the next three say whether a gap
//! precedes the row and at what rate it was sampled; `counter` is empty, or names
//! what the domain's counter did in the row's interval (`reset`, `backstep`, `jump`).

use super::file::Batch;
use super::{Metadata, RecordOutput, Sample, Sink};
use crate::source::Channel;
use std::io::{self, Write};

/// The header line.
pub const HEADER: &str =
    "timestamp_ns,socket,domain,energy_j,power_w,missed,merged,freq_hz,counter";

/// `s` as one CSV field (RFC 4180): quoted, with its quotes doubled, when it holds a
/// comma, a quote or a line break; as it is otherwise.
pub fn field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// Writes CSV rows to `W` in whole batches (give it an [`super::OutputFile`], not a
/// `BufWriter`: the sink does its own buffering).
///
/// Rows are built with integer arithmetic rather than `write!`: the writer thread
/// formats every sample of every domain, and at 1 kHz the general float formatter
/// cost about as much as a tenth of the sampler's own work on the project's VM.
pub struct CsvSink<W: Write> {
    /// The output and the samples not yet written to it.
    batch: Batch<W>,
    /// `,socket,domain,` of each channel, ready to copy.
    labels: Vec<Vec<u8>>,
    /// The last `freq_hz` seen and its text (the rate changes rarely).
    freq: (u64, Vec<u8>),
}

impl<W: Write> std::fmt::Debug for CsvSink<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CsvSink")
            .field("kept", &self.batch.kept())
            .finish_non_exhaustive()
    }
}

impl<W: RecordOutput> CsvSink<W> {
    /// A CSV sink writing to `out`.
    pub fn new(out: W) -> Self {
        CsvSink {
            batch: Batch::new(out),
            labels: Vec::new(),
            freq: (u64::MAX, Vec::new()),
        }
    }
}

impl<W: RecordOutput + Send> Sink for CsvSink<W> {
    fn begin(&mut self, meta: &Metadata, channels: &[Channel]) -> io::Result<()> {
        for (k, v) in &meta.fields {
            writeln!(self.batch.buf, "# {k}: {v}")?;
        }
        for c in channels {
            writeln!(
                self.batch.buf,
                "# channel: {} unit={} range={:.6} J origin={}",
                c.id,
                c.unit,
                c.wrap.range(c.unit).0,
                c.origin.display()
            )?;
        }
        writeln!(self.batch.buf, "{HEADER}")?;
        self.labels = channels
            .iter()
            .map(|c| format!(",{},{},", c.id.socket.0, c.id.domain.name()).into_bytes())
            .collect();
        self.flush()
    }

    fn sample(&mut self, s: &Sample<'_>) -> io::Result<()> {
        if self.freq.0 != s.freq_hz.to_bits() {
            self.freq = (s.freq_hz.to_bits(), format!("{}", s.freq_hz).into_bytes());
        }
        for (i, (label, &e)) in self.labels.iter().zip(s.energy).enumerate() {
            let b = &mut self.batch.buf;
            push_u64(b, s.t_ns);
            b.extend_from_slice(label);
            push_fixed(b, e.0, 9);
            b.push(b',');
            push_fixed(b, s.power(e), 6);
            b.push(b',');
            push_u64(b, s.missed as u64);
            b.push(b',');
            push_u64(b, s.merged as u64);
            b.push(b',');
            b.extend_from_slice(&self.freq.1);
            b.push(b',');
            if let Some(k) = s.marks.kind(i) {
                b.extend_from_slice(k.name().as_bytes());
            }
            b.push(b'\n');
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

/// Appends `v` in decimal.
#[inline]
fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

/// Appends `x` with `digits` decimals, as `format!("{x:.digits$}")` does, up to the
/// last digit's rounding of an exact tie. Values whose scaled form is beyond 2^53
/// (where an f64 no longer holds every integer), negative or not finite go
/// through the general formatter.
#[inline]
fn push_fixed(buf: &mut Vec<u8>, x: f64, digits: u32) {
    let scale = 10u64.pow(digits);
    let scaled = x * scale as f64;
    if !(x >= 0.0 && scaled < (1u64 << 53) as f64) {
        let _ = write!(buf, "{x:.*}", digits as usize);
        return;
    }
    let n = scaled.round() as u64;
    push_u64(buf, n / scale);
    buf.push(b'.');
    let mut frac = n % scale;
    let mut tmp = [b'0'; 20];
    for i in (0..digits as usize).rev() {
        tmp[i] = b'0' + (frac % 10) as u8;
        frac /= 10;
    }
    buf.extend_from_slice(&tmp[..digits as usize]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_text_matches_the_formatter() {
        let mut x = 0.000_000_001_f64;
        let values = std::iter::from_fn(|| {
            x *= 1.7;
            (x < 1e12).then_some(x)
        })
        .chain([
            0.0,
            1.0,
            0.5,
            12.345_678_9,
            1e-10,
            4.999_999_999_9,
            123_456.75,
        ]);
        for v in values {
            for digits in [6u32, 9] {
                let mut b = Vec::new();
                push_fixed(&mut b, v, digits);
                let got = String::from_utf8(b).unwrap();
                let want = format!("{v:.*}", digits as usize);
                // Equal, or one unit apart in the last digit on a rounding tie.
                let diff = (got.parse::<f64>().unwrap() - want.parse::<f64>().unwrap()).abs();
                assert!(
                    got == want || diff <= 1.01 / 10f64.powi(digits as i32),
                    "{v}: {got} != {want}"
                );
            }
        }
        for bad in [-1.5, f64::NAN, f64::INFINITY] {
            let mut b = Vec::new();
            push_fixed(&mut b, bad, 9);
            assert_eq!(String::from_utf8(b).unwrap(), format!("{bad:.9}"));
        }
        let mut b = Vec::new();
        for v in [0, 7, 10, 1_234_567_890, u64::MAX] {
            b.clear();
            push_u64(&mut b, v);
            assert_eq!(b, v.to_string().into_bytes());
        }
    }
}
