//! An output file that only ever grows by whole rows, or whole samples.
//!
//! On a full disk `write` can accept part of a batch and then fail: the file would
//! end in half a row. [`OutputFile`] remembers where the last complete batch ended
//! and, when a write fails, cuts the file back to the last whole line of the batch
//! that landed ([`Write::write_all`]) or the last whole record
//! ([`RecordOutput::write_records`]: a sample is one row per domain), so that
//! whatever a failed recording leaves behind still parses, and a summary can
//! count exactly the samples it holds.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::Path;

/// Whether writing `output` would overwrite the file `other` names: the same
/// inode once symlinks are followed (the same path, a symlink to it or a hard
/// link), or, for an output not yet created, the same place once its directory's
/// symlinks are resolved. Devices, pipes and sockets are never "the same file":
/// writing two streams to `/dev/null` or a terminal destroys nothing.
pub fn overwrites(output: &Path, other: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(output), std::fs::metadata(other)) {
        (Ok(a), Ok(b)) => a.is_file() && a.dev() == b.dev() && a.ino() == b.ino(),
        // Not created yet (or dangling): compare where each would land.
        _ => match (resolved(output), resolved(other)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        },
    }
}

/// `path` with its directory's symlinks resolved (the file itself may not exist;
/// a dangling symlink is followed to where it points).
fn resolved(path: &Path) -> Option<std::path::PathBuf> {
    let path = match std::fs::read_link(path) {
        Ok(target) => path.parent().unwrap_or(Path::new(".")).join(target),
        Err(_) => path.to_path_buf(),
    };
    let name = path.file_name()?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    Some(std::fs::canonicalize(dir).ok()?.join(name))
}

/// A writable output that can be cut back to a length.
pub trait Truncate: Write {
    /// Shortens the output to `len` bytes and continues writing there.
    fn truncate_to(&mut self, len: u64) -> io::Result<()>;
}

impl Truncate for File {
    fn truncate_to(&mut self, len: u64) -> io::Result<()> {
        self.set_len(len)?;
        self.seek(SeekFrom::Start(len)).map(drop)
    }
}

/// In memory (tests, a buffer handed on later): never short of room.
impl Truncate for Vec<u8> {
    fn truncate_to(&mut self, len: u64) -> io::Result<()> {
        self.truncate(len as usize);
        Ok(())
    }
}

/// An output taking batches of records (a record: a sample's rows) that keeps
/// only whole records when a write fails part-way.
pub trait RecordOutput: Write {
    /// Appends `buf`, made of records that end at the ascending offsets `ends` (the
    /// last is `buf.len()`). On failure the output keeps the records that landed
    /// whole, cuts what landed of the next, and returns how many it kept with the
    /// error.
    fn write_records(&mut self, buf: &[u8], ends: &[usize]) -> Result<(), (usize, io::Error)>;
}

/// A text sink's output and its batch: `buf` holds whole records, each ending at
/// an entry of `ends` (none: the metadata and header lines, no sample); `kept`
/// counts the records that landed, also when a write failed part-way. The CSV and
/// JSON Lines sinks write through it.
pub(crate) struct Batch<W> {
    out: W,
    /// The records not yet written.
    pub(crate) buf: Vec<u8>,
    /// Where each record in `buf` ends: a failed write keeps whole records only.
    ends: Vec<usize>,
    /// Records the output holds whole.
    kept: u64,
}

impl<W: RecordOutput> Batch<W> {
    /// An empty batch writing to `out`.
    pub(crate) fn new(out: W) -> Self {
        Batch {
            out,
            buf: Vec::with_capacity(super::BATCH_BYTES + 4096),
            // A batch of one-domain samples (the shortest) fits without growing.
            ends: Vec::with_capacity(super::BATCH_BYTES / 32),
            kept: 0,
        }
    }

    /// Ends the record just put in `buf`; writes the batch once it is full.
    #[inline]
    pub(crate) fn end_record(&mut self) -> io::Result<()> {
        self.ends.push(self.buf.len());
        if self.buf.len() >= super::BATCH_BYTES {
            self.commit()?;
        }
        Ok(())
    }

    /// Writes the batch and empties it.
    pub(crate) fn commit(&mut self) -> io::Result<()> {
        let r = if self.ends.is_empty() {
            self.out.write_all(&self.buf)
        } else {
            let (landed, r) = match self.out.write_records(&self.buf, &self.ends) {
                Ok(()) => (self.ends.len(), Ok(())),
                Err((landed, e)) => (landed, Err(e)),
            };
            self.kept += landed as u64;
            r
        };
        self.buf.clear();
        self.ends.clear();
        r
    }

    /// Writes the batch and flushes the output.
    pub(crate) fn flush(&mut self) -> io::Result<()> {
        self.commit()?;
        self.out.flush()
    }
}

impl<W> Batch<W> {
    /// Records the output holds whole.
    pub(crate) fn kept(&self) -> u64 {
        self.kept
    }
}

/// A [`Write`] whose `write_all` either appends the whole buffer or, on failure,
/// keeps the whole lines of it that landed and cuts the rest (when it can be
/// truncated: a regular file can, `/dev/full` or a pipe cannot).
#[derive(Debug)]
pub struct OutputFile<F: Truncate = File> {
    out: F,
    committed: u64,
    /// Whether a failed batch may be cut back (not for stdout: it may be a file
    /// opened for appending, whose earlier content is not this output's).
    cut: bool,
}

impl OutputFile<File> {
    /// Creates (or truncates) `path`.
    pub fn create(path: &Path) -> io::Result<OutputFile<File>> {
        Ok(OutputFile::new(File::create(path)?))
    }

    /// This process's standard output (`-o -`): a pipe, a terminal or a file the
    /// shell opened. Never cut back after a failed write.
    pub fn stdout() -> io::Result<OutputFile<File>> {
        use std::os::fd::AsFd;
        let fd = io::stdout().as_fd().try_clone_to_owned()?;
        Ok(OutputFile {
            cut: false,
            ..OutputFile::new(File::from(fd))
        })
    }
}

impl<F: Truncate> OutputFile<F> {
    /// Wraps an output positioned at its start.
    pub fn new(out: F) -> OutputFile<F> {
        OutputFile {
            out,
            committed: 0,
            cut: true,
        }
    }

    /// Bytes written in whole batches so far.
    pub fn committed(&self) -> u64 {
        self.committed
    }

    /// The wrapped output.
    pub fn get_ref(&self) -> &F {
        &self.out
    }

    /// The wrapped output, for a writer that does its own whole-record keeping (the
    /// Parquet sink writes its footer back over itself).
    pub fn into_inner(self) -> F {
        self.out
    }
}

impl<F: Truncate> OutputFile<F> {
    /// Writes `buf` whole; on failure returns how many of its bytes landed.
    fn put(&mut self, buf: &[u8]) -> Result<(), (usize, io::Error)> {
        let mut done = 0;
        while done < buf.len() {
            match self.out.write(&buf[done..]) {
                Ok(0) => return Err((done, io::ErrorKind::WriteZero.into())),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err((done, e)),
            }
        }
        self.committed += buf.len() as u64;
        Ok(())
    }

    /// After a failed write: keeps the first `keep` bytes of the batch and cuts
    /// whatever landed beyond them.
    fn keep(&mut self, keep: usize) {
        // Best effort: a device or a pipe cannot be truncated, and has nothing
        // half-written to undo that a reader could see as a file.
        if self.cut && self.out.truncate_to(self.committed + keep as u64).is_ok() {
            self.committed += keep as u64;
        }
    }
}

impl<F: Truncate> RecordOutput for OutputFile<F> {
    fn write_records(&mut self, buf: &[u8], ends: &[usize]) -> Result<(), (usize, io::Error)> {
        self.put(buf).map_err(|(done, e)| {
            // So a full disk loses only the samples that did not fit, never part
            // of one: a reader grouping rows by timestamp sees whole samples.
            let kept = ends.partition_point(|&end| end <= done);
            self.keep(if kept == 0 { 0 } else { ends[kept - 1] });
            (kept, e)
        })
    }
}

impl<F: Truncate> Write for OutputFile<F> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Callers write batches with write_all; a bare write is one too.
        self.write_all(buf).map(|()| buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.put(buf).map_err(|(done, e)| {
            // The whole lines (rows) that landed stay: a full disk loses only the
            // rows that did not fit.
            let whole = buf[..done]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
            self.keep(whole);
            e
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_output_overwrites_its_input_by_path_symlink_or_hard_link_but_not_a_device() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.csv");
        std::fs::write(&input, "x").unwrap();
        let link = dir.path().join("link.csv");
        std::os::unix::fs::symlink(&input, &link).unwrap();
        let hard = dir.path().join("hard.csv");
        std::fs::hard_link(&input, &hard).unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let dotted = sub.join("..").join("in.csv");
        for same in [&input, &link, &hard, &dotted] {
            assert!(overwrites(same, &input), "{}", same.display());
        }
        let other = dir.path().join("out.json");
        assert!(!overwrites(&other, &input));
        // Two outputs not yet created at one place.
        assert!(overwrites(&other, &sub.join("..").join("out.json")));
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink("out.json", &dangling).unwrap();
        assert!(overwrites(&dangling, &other));
        let null = Path::new("/dev/null");
        assert!(!overwrites(null, null));
    }
    use super::*;

    /// A disk with room for `room` bytes that accepts a partial write before failing.
    struct TinyDisk {
        data: Vec<u8>,
        room: usize,
    }

    impl Write for TinyDisk {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = buf.len().min(self.room - self.data.len());
            if n == 0 {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            self.data.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Truncate for TinyDisk {
        fn truncate_to(&mut self, len: u64) -> io::Result<()> {
            self.data.truncate(len as usize);
            Ok(())
        }
    }

    #[test]
    fn a_failed_batch_keeps_the_whole_rows_that_fit_and_cuts_the_partial_one() {
        let mut f = OutputFile::new(TinyDisk {
            data: Vec::new(),
            room: 22,
        });
        f.write_all(b"header\nrow 1\n").unwrap();
        // 9 bytes of room left: "row 2\n" fits whole, "row 3\n" only in part.
        let err = f.write_all(b"row 2\nrow 3\nrow 4\n").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(f.get_ref().data, b"header\nrow 1\nrow 2\n");
        assert_eq!(f.committed(), 19);
    }

    #[test]
    fn a_failed_batch_of_samples_keeps_the_whole_samples_that_fit() {
        let mut f = OutputFile::new(TinyDisk {
            data: Vec::new(),
            room: 27,
        });
        f.write_all(b"header\n").unwrap();
        // Two rows a sample; 20 bytes of room: sample 1 fits, sample 2 only one row.
        let batch = b"1 pkg\n1 dram\n2 pkg\n2 dram\n";
        let (kept, err) = f.write_records(batch, &[13, 26]).unwrap_err();
        assert_eq!((kept, err.raw_os_error()), (1, Some(libc::ENOSPC)));
        assert_eq!(f.get_ref().data, b"header\n1 pkg\n1 dram\n");
        assert_eq!(f.committed(), 20);
        // Not even one sample fits: the file stays as it was.
        let mut g = OutputFile::new(TinyDisk {
            data: Vec::new(),
            room: 16,
        });
        g.write_all(b"header\n").unwrap();
        assert_eq!(g.write_records(batch, &[13, 26]).unwrap_err().0, 0);
        assert_eq!(g.get_ref().data, b"header\n");
        // On time, every sample lands.
        let mut h = OutputFile::new(Vec::new());
        h.write_records(batch, &[13, 26]).unwrap();
        assert_eq!(h.committed(), 26);
    }

    #[test]
    fn dev_full_fails_with_enospc() {
        let mut f = OutputFile::create(Path::new("/dev/full")).unwrap();
        let err = f.write_all(b"x\n").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    }
}
