//! An output file that only ever grows by whole batches.
//!
//! On a full disk `write` can accept part of a batch and then fail: the file would
//! end in half a row. [`OutputFile`] remembers where the last complete batch ended
//! and cuts the file back there when a write fails, so that whatever a failed
//! recording leaves behind still parses.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::Path;

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

/// A [`Write`] whose `write_all` either appends the whole buffer or, on failure,
/// leaves the output as it was before the call (when it can be truncated: a regular
/// file can, `/dev/full` or a pipe cannot and need not).
#[derive(Debug)]
pub struct OutputFile<F: Truncate = File> {
    out: F,
    committed: u64,
}

impl OutputFile<File> {
    /// Creates (or truncates) `path`.
    pub fn create(path: &Path) -> io::Result<OutputFile<File>> {
        Ok(OutputFile::new(File::create(path)?))
    }
}

impl<F: Truncate> OutputFile<F> {
    /// Wraps an output positioned at its start.
    pub fn new(out: F) -> OutputFile<F> {
        OutputFile { out, committed: 0 }
    }

    /// Bytes written in whole batches so far.
    pub fn committed(&self) -> u64 {
        self.committed
    }

    /// The wrapped output.
    pub fn get_ref(&self) -> &F {
        &self.out
    }
}

impl<F: Truncate> OutputFile<F> {
    /// After a failed write of `buf` of which `done` bytes landed: keeps the whole
    /// lines (rows) that landed, so a full disk loses only the rows that did not fit,
    /// and cuts the partial one.
    fn keep_whole_lines(&mut self, buf: &[u8], done: usize, e: io::Error) -> io::Result<()> {
        let whole = buf[..done]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        // Best effort: a device or a pipe cannot be truncated, and has nothing
        // half-written to undo that a reader could see as a file.
        if self.out.truncate_to(self.committed + whole as u64).is_ok() {
            self.committed += whole as u64;
        }
        Err(e)
    }
}

impl<F: Truncate> Write for OutputFile<F> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Callers write batches with write_all; a bare write is one too.
        self.write_all(buf).map(|()| buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let mut done = 0;
        while done < buf.len() {
            match self.out.write(&buf[done..]) {
                Ok(0) => return self.keep_whole_lines(buf, done, io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.keep_whole_lines(buf, done, e),
            }
        }
        self.committed += buf.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
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
    fn dev_full_fails_with_enospc() {
        let mut f = OutputFile::create(Path::new("/dev/full")).unwrap();
        let err = f.write_all(b"x\n").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOSPC));
    }
}
