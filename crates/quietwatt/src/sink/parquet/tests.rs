//! The Parquet sink: readable after every row group, a full disk, the footer's cost.
use super::*;
use crate::counter::{Marks, Wrap};
use crate::domain::{Domain, DomainId};
use crate::sampler::Rate;
use crate::units::{EnergyUnit, Joules};
use crate::{Hertz, SysRoot};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

fn channels(n: usize) -> Vec<Channel> {
    let domains = [Domain::Package, Domain::Dram, Domain::Core, Domain::Uncore];
    (0..n)
        .map(|i| Channel {
            id: DomainId::new(0, domains[i % 4]),
            unit: EnergyUnit::Microjoule,
            wrap: Wrap::PERF,
            origin: format!("/test/{i}").into(),
            limit: None,
        })
        .collect()
}

fn metadata() -> Metadata {
    let mut m = Metadata::new(
        "powercap",
        &Rate::Fixed(Hertz::new(100.0).unwrap()),
        &SysRoot::default(),
    );
    m.push("emulated", "true");
    m
}

/// Sample `k` of a 100 Hz recording: channel i draws (i + 1) W, with a little
/// that varies so that the energies are not all one value.
fn sample<'a>(k: u64, energy: &'a mut Vec<Joules>, marks: Marks) -> Sample<'a> {
    for (i, e) in energy.iter_mut().enumerate() {
        *e = Joules((i as f64 + 1.0) * 0.01 + (k % 7) as f64 * 1e-6);
    }
    Sample {
        t_ns: 1_000_000_000 + k * 10_000_000,
        interval_ns: 10_000_000,
        missed: (k % 5 == 3) as u32,
        merged: 0,
        freq_hz: 100.0,
        marks,
        energy,
    }
}

/// A disk with room for `room` bytes that takes part of the write that fills it.
struct Disk {
    data: Mutex<Vec<u8>>,
    room: usize,
    /// Bytes handed to `write_at`, all told.
    written: AtomicU64,
}

impl Disk {
    fn new(room: usize) -> Arc<Disk> {
        Arc::new(Disk {
            data: Mutex::new(Vec::new()),
            room,
            written: AtomicU64::new(0),
        })
    }

    /// The disk's bytes, read back as a recording.
    fn read(&self) -> io::Result<Recorded> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("copy.parquet");
        std::fs::write(&path, &*self.data.lock().unwrap())?;
        read(&path)
    }

    fn len(&self) -> usize {
        self.data.lock().unwrap().len()
    }
}

impl Storage for Arc<Disk> {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        let mut d = self.data.lock().unwrap();
        let at = offset as usize;
        // Room is taken only by bytes beyond the end.
        let n = buf.len().min(self.room.saturating_sub(at));
        if n == 0 {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        if d.len() < at + n {
            d.resize(at + n, 0);
        }
        d[at..at + n].copy_from_slice(&buf[..n]);
        self.written.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.data.lock().unwrap().resize(len as usize, 0);
        Ok(())
    }
}

#[test]
fn the_schema_parses_and_names_the_csv_columns_in_order() {
    let s = SchemaDescriptor::new(Arc::new(parse_message_type(SCHEMA).unwrap()));
    let names: Vec<&str> = s.columns().iter().map(|c| c.name()).collect();
    assert_eq!(names.join(","), crate::sink::csv::HEADER);
}

#[test]
fn every_row_reads_back_typed_with_the_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.parquet");
    let mut sink = ParquetSink::create(&path).unwrap();
    let ch = channels(2);
    sink.begin(&metadata(), &ch).unwrap();
    let mut e = vec![Joules(0.0); 2];
    let mut want = Vec::new();
    for k in 0..50u64 {
        let mut marks = Marks::default();
        if k == 20 {
            marks.set(1, StepKind::Reset);
        }
        let s = sample(k, &mut e, marks);
        for (i, j) in s.energy.iter().enumerate() {
            want.push((s.t_ns, i, j.0, s.power(*j), s.missed));
        }
        sink.sample(&s).unwrap();
        if k % 10 == 9 {
            sink.flush().unwrap();
        }
    }
    sink.finish().unwrap();
    assert_eq!(sink.kept(), Some(50));
    let r = read(&path).unwrap();
    assert_eq!(r.rows.len(), 100);
    for (row, (t, i, j, w, missed)) in r.rows.iter().zip(&want) {
        assert_eq!(row.t_ns, *t);
        assert_eq!(row.socket, 0);
        assert_eq!(row.domain, ch[*i].id.domain.name());
        // Doubles: exactly what was measured, no decimal rounding.
        assert_eq!(row.energy_j, *j);
        assert_eq!(row.power_w, *w);
        assert_eq!(row.missed, *missed);
        assert_eq!(row.merged, 0);
        assert_eq!(row.freq_hz, 100.0);
        let marked = row.t_ns == 1_200_000_000 && *i == 1;
        assert_eq!(row.counter.as_deref(), marked.then_some("reset"), "{row:?}");
    }
    // The metadata: the JSON Lines object, and the CSV's fields as text.
    assert_eq!(r.metadata["schema"], "quietwatt.recording/1");
    assert_eq!(r.metadata["schema_version"], 1);
    assert_eq!(r.metadata["emulated"], true);
    assert_eq!(r.metadata["channels"].as_array().unwrap().len(), 2);
    let kv = |k: &str| {
        r.key_value
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(kv("mechanism"), Some("powercap"));
    assert_eq!(kv("freq_hz"), Some("100"));
    assert!(kv("wall_clock_anchor").unwrap().starts_with("unix_ns "));
}

#[test]
fn the_file_is_a_whole_recording_after_every_row_group_and_before_the_first() {
    let disk = Disk::new(usize::MAX);
    let mut sink = ParquetSink::on(Box::new(disk.clone()));
    sink.begin(&metadata(), &channels(3)).unwrap();
    // Begun: an empty recording with its metadata, readable as it is.
    let r = disk.read().unwrap();
    assert_eq!((r.rows.len(), r.row_groups), (0, 0));
    assert_eq!(r.metadata["mechanism"], "powercap");
    let mut e = vec![Joules(0.0); 3];
    for k in 0..400u64 {
        sink.sample(&sample(k, &mut e, Marks::default())).unwrap();
        // A flush every half second (50 samples at 100 Hz), as the writer does.
        if k % 50 == 49 {
            sink.flush().unwrap();
            // What a SIGKILL now would leave: every sample the sink calls
            // kept, whole (three rows each) and in order.
            let r = disk.read().unwrap();
            let kept = sink.kept().unwrap();
            assert!(kept > 0, "no row group after {} samples", k + 1);
            assert_eq!(r.rows.len() as u64, kept * 3, "after sample {k}");
            assert!(r.rows.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
            assert_eq!(
                r.rows.last().unwrap().t_ns,
                1_000_000_000 + (kept - 1) * 10_000_000
            );
        }
    }
    sink.finish().unwrap();
    let r = disk.read().unwrap();
    assert_eq!(r.rows.len(), 1200);
    assert_eq!(disk.len() as u64, {
        let tail = sink.writer.as_ref().unwrap().inner();
        tail.data_end + tail.footer.len() as u64
    });
}

#[test]
fn a_full_disk_keeps_the_row_groups_written_before_it_and_says_so() {
    let disk = Disk::new(24 * 1024);
    let mut sink = ParquetSink::on(Box::new(disk.clone()));
    sink.begin(&metadata(), &channels(4)).unwrap();
    let mut e = vec![Joules(0.0); 4];
    let err = (0..1_000_000u64)
        .find_map(|k| {
            let r = sink.sample(&sample(k, &mut e, Marks::default()));
            match r {
                Ok(()) if k % 50 == 49 => sink.flush().err(),
                r => r.err(),
            }
        })
        .expect("the disk filled up");
    assert_eq!(err.raw_os_error(), Some(libc::ENOSPC), "{err}");
    // The failed row group's bytes are gone and the previous footer is back:
    // the file reads, with exactly the samples the sink says it kept.
    let r = disk.read().unwrap();
    let kept = sink.kept().unwrap();
    assert!(kept >= 50, "{kept} samples kept of a 24 KiB disk");
    assert_eq!(r.rows.len() as u64, kept * 4);
    assert!(disk.len() <= 24 * 1024);
    // Nothing more is written after a failure, and finish says why.
    assert!(sink.finish().is_err());
    assert_eq!(disk.read().unwrap().rows.len() as u64, kept * 4);
}

/// What a recording of `n` samples of `channels` domains at `hz`, flushed every
/// half second as the writer does, writes: (bytes handed to the disk, the
/// file's size, row groups, the largest share of the samples so far that a
/// kill would have lost beyond the last half second).
fn simulate(channels_n: usize, hz: u64, n: u64) -> (u64, u64, usize, f64) {
    let disk = Disk::new(usize::MAX);
    let mut sink = ParquetSink::on(Box::new(disk.clone()));
    sink.begin(&metadata(), &channels(channels_n)).unwrap();
    let mut e = vec![Joules(0.0); channels_n];
    let mut worst = 0.0f64;
    let period = 1_000_000_000 / hz;
    for k in 0..n {
        let mut s = sample(k, &mut e, Marks::default());
        s.t_ns = k * period;
        s.interval_ns = period;
        sink.sample(&s).unwrap();
        if (k + 1) % (hz / 2) == 0 {
            sink.flush().unwrap();
            let lost = (k + 1 - sink.kept().unwrap()).saturating_sub(hz / 2);
            worst = worst.max(lost as f64 / (k + 1) as f64);
        }
    }
    sink.finish().unwrap();
    assert_eq!(
        disk.read().unwrap().rows.len() as u64,
        n * channels_n as u64
    );
    let groups = sink.writer.as_ref().unwrap().flushed_row_groups().len();
    (
        disk.written.load(Ordering::Relaxed),
        disk.len() as u64,
        groups,
        worst,
    )
}

#[test]
fn footers_cost_no_more_writes_than_the_data_and_a_kill_loses_little() {
    // Three minutes at 1 kHz of four domains: the row groups grow with the footer,
    // so that all the footers written together are no more than the file's
    // own bytes (the file is written at most twice).
    let (written, size, groups, worst) = simulate(4, 1000, 180_000);
    assert!(
        written <= 2 * size,
        "{written} bytes written for a {size}-byte file"
    );
    assert!(groups < 200, "{groups} row groups");
    // Beyond the last flush, a kill loses at most a twentieth of the time.
    assert!(worst <= 1.0 / TIME_FRACTION as f64, "{worst}");
    // An hour at 100 Hz of one domain: few bytes a second, where the time rule
    // writes row groups sooner than the bytes would. The footers then cost more
    // than the data, but little (8 MB in the hour), and a kill still loses at
    // most a twentieth.
    let (written, size, groups, worst) = simulate(1, 100, 360_000);
    assert!(
        written <= 4 * size,
        "{written} bytes written for a {size}-byte file"
    );
    assert!(written < 16 << 20, "{written} bytes written in an hour");
    assert!(groups < 300, "{groups} row groups in an hour");
    assert!(worst <= 1.0 / TIME_FRACTION as f64, "{worst}");
}

#[test]
fn a_pipe_is_refused_with_what_to_do() {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills the two-element array it is given.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: both descriptors are new and owned by nothing else.
    let (r, w) = unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) };
    drop(r);
    let err = ParquetSink::new(w).expect_err("refused");
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(err.to_string().contains("regular file"), "{err}");
    assert!(err.to_string().contains("CSV"), "{err}");
}

#[test]
fn a_damaged_file_the_decoder_asserts_on_is_an_error_not_a_panic() {
    // Found by scripts/fuzz.sh: a varint of more than ten bytes in a page.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.parquet");
    std::fs::write(
        &p,
        include_bytes!("../../../tests/vectors/fuzz-parquet-vlq-overflow.parquet"),
    )
    .unwrap();
    let e = read(&p).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{e}");
}
