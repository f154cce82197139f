//! The bounded buffer of a background session's samples: a ring of fixed size,
//! allocated once when the session starts, so that a run of any length keeps the
//! same memory and the sampler thread never allocates.

use crate::measurement::SampleStats;
use crate::units::Joules;
use serde::Serialize;

/// Rows a background session keeps unless told otherwise: about five minutes at
/// 200 Hz, 5.5 MiB with 8 channels ([`SampleRow`] costs `24 + 8 × channels` bytes
/// in the ring).
pub const DEFAULT_SAMPLES_KEPT: usize = 65_536;

/// One reading of a background session: the energy of each channel since the
/// previous reading.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SampleRow {
    /// CLOCK_MONOTONIC nanoseconds of the reading ([`crate::ticker::monotonic_ns`]).
    pub t_ns: u64,
    /// Nanoseconds since the previous reading: longer than the period when deadlines
    /// were missed, whose energy this row then holds.
    pub interval_ns: u64,
    /// Deadlines that passed without a reading, covered by this row.
    pub missed: u64,
    /// Energy per channel, in the order of [`crate::Session::channels`].
    pub energy_j: Vec<Joules>,
}

/// A ring of rows in flat arrays (one allocation each, made up front).
#[derive(Debug)]
pub(crate) struct SampleRing {
    channels: usize,
    capacity: usize,
    /// Index of the oldest row.
    head: usize,
    len: usize,
    t_ns: Vec<u64>,
    interval_ns: Vec<u64>,
    missed: Vec<u64>,
    /// `capacity × channels` joules, row after row.
    energy: Vec<f64>,
    drained: u64,
    dropped: u64,
    dropped_energy: Vec<f64>,
}

impl SampleRing {
    /// An empty ring of `capacity` rows (at least 1) of `channels` values.
    pub(crate) fn new(capacity: usize, channels: usize) -> SampleRing {
        let capacity = capacity.max(1);
        SampleRing {
            channels,
            capacity,
            head: 0,
            len: 0,
            t_ns: vec![0; capacity],
            interval_ns: vec![0; capacity],
            missed: vec![0; capacity],
            energy: vec![0.0; capacity * channels],
            drained: 0,
            dropped: 0,
            dropped_energy: vec![0.0; channels],
        }
    }

    /// Appends a row; when full, the oldest row is dropped first (its energy is
    /// added to the dropped total). Allocates nothing.
    #[inline]
    pub(crate) fn push(
        &mut self,
        t_ns: u64,
        interval_ns: u64,
        missed: u64,
        energy: impl Iterator<Item = f64>,
    ) {
        if self.len == self.capacity {
            let old = self.head * self.channels;
            for (d, e) in self
                .dropped_energy
                .iter_mut()
                .zip(&self.energy[old..old + self.channels])
            {
                *d += e;
            }
            self.head = (self.head + 1) % self.capacity;
            self.len -= 1;
            self.dropped += 1;
        }
        let i = (self.head + self.len) % self.capacity;
        self.t_ns[i] = t_ns;
        self.interval_ns[i] = interval_ns;
        self.missed[i] = missed;
        let row = &mut self.energy[i * self.channels..(i + 1) * self.channels];
        for (slot, e) in row.iter_mut().zip(energy) {
            *slot = e;
        }
        self.len += 1;
    }

    /// The rows held, oldest first.
    pub(crate) fn rows(&self) -> Vec<SampleRow> {
        (0..self.len)
            .map(|k| {
                let i = (self.head + k) % self.capacity;
                SampleRow {
                    t_ns: self.t_ns[i],
                    interval_ns: self.interval_ns[i],
                    missed: self.missed[i],
                    energy_j: self.energy[i * self.channels..(i + 1) * self.channels]
                        .iter()
                        .map(|&e| Joules(e))
                        .collect(),
                }
            })
            .collect()
    }

    /// The rows held, oldest first, removed from the ring.
    pub(crate) fn drain(&mut self) -> Vec<SampleRow> {
        let rows = self.rows();
        self.drained += rows.len() as u64;
        self.head = 0;
        self.len = 0;
        rows
    }

    pub(crate) fn stats(&self) -> SampleStats {
        SampleStats {
            capacity: self.capacity,
            kept: self.len,
            drained: self.drained,
            dropped: self.dropped,
            dropped_energy_j: self.dropped_energy.iter().map(|&e| Joules(e)).collect(),
            merged: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_ring_drops_the_oldest_and_keeps_its_energy() {
        let mut r = SampleRing::new(2, 2);
        for k in 0..5u64 {
            r.push(k, 1, 0, [k as f64, 1.0].into_iter());
        }
        let rows = r.rows();
        assert_eq!(rows.iter().map(|r| r.t_ns).collect::<Vec<_>>(), [3, 4]);
        let s = r.stats();
        assert_eq!((s.kept, s.dropped), (2, 3));
        assert_eq!(s.dropped_energy_j, [Joules(3.0), Joules(3.0)]);
        assert_eq!(r.drain().len(), 2);
        assert_eq!((r.stats().kept, r.stats().drained), (0, 2));
        r.push(9, 1, 0, [1.0, 2.0].into_iter());
        assert_eq!(r.rows()[0].energy_j, [Joules(1.0), Joules(2.0)]);
    }
}
