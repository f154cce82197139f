//! Between the meter and the sinks: a [`Transform`] turns each sample into rows of
//! its own (the package energy split among processes, say, or among call stacks)
//! and keeps running totals, with no I/O of its own; a [`RowSink`] writes those
//! rows somewhere; [`Transformed`] joins the two into one [`Sink`], so that the
//! writer thread runs a transform between the meter and the output without knowing
//! it is there.
//!
//! A consumer that wants only the figures (a live view, an exporter, a summary)
//! calls [`Transform::apply`] itself, asking for no rows, and reads
//! [`Transform::totals`] by value: nothing is formatted into nothing. Where the
//! engine's writer must drive it (a measured command), [`NoRows`] is the row sink
//! that asks for none.
//!
//! ```
//! use quietwatt::domain::DomainId;
//! use quietwatt::sink::Sample;
//! use quietwatt::transform::Transform;
//!
//! /// The energy of every sample, added up in whole microjoules.
//! struct Sum(u64);
//!
//! impl Transform for Sum {
//!     type Row = u64;
//!     type Totals = u64;
//!     fn begin(&mut self, _channels: &[DomainId]) {}
//!     fn apply(&mut self, s: &Sample<'_>, rows: Option<&mut Vec<u64>>) {
//!         let uj = s.energy.iter().map(|j| (j.0 * 1e6).round() as u64).sum();
//!         self.0 += uj;
//!         if let Some(rows) = rows {
//!             rows.push(uj);
//!         }
//!     }
//!     fn totals(&self) -> &u64 {
//!         &self.0
//!     }
//! }
//!
//! let mut sum = Sum(0);
//! let energy = [quietwatt::Joules(0.5)];
//! let sample = Sample {
//!     t_ns: 1_000_000,
//!     interval_ns: 1_000_000,
//!     missed: 0,
//!     merged: 0,
//!     freq_hz: 1000.0,
//!     marks: Default::default(),
//!     energy: &energy,
//! };
//! sum.apply(&sample, None);
//! assert_eq!(*sum.totals(), 500_000);
//! ```

use crate::domain::DomainId;
use crate::sink::{Metadata, Sample, Sink};
use crate::source::Channel;
use std::io;

/// An I/O-free stage between the meter and the sinks: each sample in, in order,
/// derived rows out, running totals kept.
///
/// A transform reads no file and writes none: what it needs from outside (the
/// context switches an attribution splits by, say) comes through a source it was
/// given, so that a test can script it. It runs on the writer thread, never on the
/// sampler's hot path.
pub trait Transform: Send {
    /// One derived row.
    type Row: Send;
    /// What the transform adds up over the run.
    type Totals;
    /// Lays the transform out for samples whose energies are of `channels`, in this
    /// order; called once before the first sample.
    fn begin(&mut self, channels: &[DomainId]);
    /// One sample, in order: the totals take it in, and its rows are appended to
    /// `rows` when given (`None`: nobody reads rows, only the totals are kept).
    fn apply(&mut self, sample: &Sample<'_>, rows: Option<&mut Vec<Self::Row>>);
    /// The totals so far.
    fn totals(&self) -> &Self::Totals;
    /// The end of the run: brings the figures that are known only late (what a
    /// source lost, a fit) into the totals.
    fn finish(&mut self) {}
}

/// Where a transform's rows go: the I/O side of a [`Transformed`] sink. It sees the
/// transform by reference, for what the rows alone do not say (a name the
/// transform saw, how it was configured).
pub trait RowSink<T: Transform + ?Sized>: Send {
    /// Called once before the first rows, with the recording's metadata; writes
    /// the header through, so that an unwritable output fails before anything is
    /// measured.
    fn begin(&mut self, meta: &Metadata, transform: &T) -> io::Result<()>;
    /// The rows of one sample, in order.
    fn rows(&mut self, rows: &[T::Row], transform: &T) -> io::Result<()>;
    /// Hands everything so far to the output.
    fn flush(&mut self) -> io::Result<()>;
    /// The end: flushes and completes the output.
    fn finish(&mut self) -> io::Result<()> {
        self.flush()
    }
    /// Whether this sink reads rows at all: when it does not, the transform is
    /// asked for none and only keeps its totals.
    fn wants_rows(&self) -> bool {
        true
    }
}

/// The row sink that asks for no rows: a transform driven by the engine's writer
/// for its totals alone (a measured command's share).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoRows;

impl<T: Transform + ?Sized> RowSink<T> for NoRows {
    fn begin(&mut self, _: &Metadata, _: &T) -> io::Result<()> {
        Ok(())
    }
    fn rows(&mut self, _: &[T::Row], _: &T) -> io::Result<()> {
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    fn wants_rows(&self) -> bool {
        false
    }
}

/// A transform and the sink of its rows, as one [`Sink`] the engine's writer
/// drives: each sample goes through the transform, its rows to the row sink. The
/// caller keeps it (the engine borrows a sink for a recording), so the totals are
/// read directly afterwards ([`Transformed::transform`]).
#[derive(Debug)]
pub struct Transformed<T: Transform, S> {
    transform: T,
    sink: S,
    /// One sample's rows, reused.
    rows: Vec<T::Row>,
}

impl<T: Transform, S: RowSink<T>> Transformed<T, S> {
    /// `transform` followed by `sink`.
    pub fn new(transform: T, sink: S) -> Transformed<T, S> {
        Transformed {
            transform,
            sink,
            rows: Vec::new(),
        }
    }

    /// The transform, with its totals.
    pub fn transform(&self) -> &T {
        &self.transform
    }

    /// The transform, to change or settle.
    pub fn transform_mut(&mut self) -> &mut T {
        &mut self.transform
    }

    /// The row sink.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// The transform and the row sink, apart.
    pub fn into_parts(self) -> (T, S) {
        (self.transform, self.sink)
    }
}

impl<T: Transform, S: RowSink<T>> Sink for Transformed<T, S> {
    fn begin(&mut self, meta: &Metadata, channels: &[Channel]) -> io::Result<()> {
        let ids: Vec<DomainId> = channels.iter().map(|c| c.id).collect();
        self.transform.begin(&ids);
        self.sink.begin(meta, &self.transform)
    }

    fn sample(&mut self, sample: &Sample<'_>) -> io::Result<()> {
        if !self.sink.wants_rows() {
            self.transform.apply(sample, None);
            return Ok(());
        }
        self.rows.clear();
        self.transform.apply(sample, Some(&mut self.rows));
        self.sink.rows(&self.rows, &self.transform)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sink.flush()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.transform.finish();
        self.sink.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counter::Wrap;
    use crate::domain::Domain;
    use crate::sink::ClockAnchor;
    use crate::units::{EnergyUnit, Joules};

    /// Counts samples; each row is the sample's timestamp.
    #[derive(Default)]
    struct Count {
        channels: usize,
        samples: u64,
        finished: bool,
    }

    impl Transform for Count {
        type Row = u64;
        type Totals = u64;
        fn begin(&mut self, channels: &[DomainId]) {
            self.channels = channels.len();
        }
        fn apply(&mut self, s: &Sample<'_>, rows: Option<&mut Vec<u64>>) {
            self.samples += 1;
            if let Some(rows) = rows {
                rows.push(s.t_ns);
            }
        }
        fn totals(&self) -> &u64 {
            &self.samples
        }
        fn finish(&mut self) {
            self.finished = true;
        }
    }

    /// Keeps every row it is given.
    #[derive(Default)]
    struct Keep(Vec<u64>, bool);

    impl RowSink<Count> for Keep {
        fn begin(&mut self, _: &Metadata, t: &Count) -> io::Result<()> {
            // The transform is laid out before its sink begins.
            self.1 = t.channels == 1;
            Ok(())
        }
        fn rows(&mut self, rows: &[u64], _: &Count) -> io::Result<()> {
            self.0.extend_from_slice(rows);
            Ok(())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn drive(sink: &mut dyn Sink) {
        let meta = Metadata {
            fields: Vec::new(),
            anchor: ClockAnchor::now(),
        };
        let channel = Channel {
            id: DomainId::new(0, Domain::Package),
            unit: EnergyUnit::Microjoule,
            wrap: Wrap::PERF,
            origin: "/test".into(),
            limit: None,
        };
        sink.begin(&meta, &[channel]).unwrap();
        for t in 1..=3 {
            sink.sample(&Sample {
                t_ns: t,
                interval_ns: 1,
                missed: 0,
                merged: 0,
                freq_hz: 1.0,
                marks: Default::default(),
                energy: &[Joules(1.0)],
            })
            .unwrap();
        }
        sink.finish().unwrap();
    }

    #[test]
    fn the_writer_drives_the_transform_and_its_rows_reach_the_row_sink() {
        let mut s = Transformed::new(Count::default(), Keep::default());
        drive(&mut s);
        assert_eq!(*s.transform().totals(), 3);
        assert!(s.transform().finished, "finish reaches the transform");
        let (_, keep) = s.into_parts();
        assert!(keep.1, "laid out before the sink's header");
        assert_eq!(keep.0, [1, 2, 3]);
    }

    #[test]
    fn without_rows_only_the_totals_are_kept() {
        let mut s = Transformed::new(Count::default(), NoRows);
        drive(&mut s);
        assert_eq!(*s.transform().totals(), 3);
        assert!(s.rows.is_empty(), "no row was asked for");
    }
}
