//! The two kernel rings user space drains: the BPF ring buffer (`BPF_MAP_TYPE_RINGBUF`)
//! and the perf mmap ring of a sampling event. Both are memory shared with the kernel
//! and read in place: draining costs no syscall and no copy beyond the record itself.
//!
//! **BPF ring buffer** (kernel/bpf/ringbuf.c): a consumer page (ours, read-write) at
//! offset 0 of the map's fd, then a producer page and the data area (read-only),
//! the data mapped twice in a row so that a record never wraps. Each record has an
//! 8-byte header: its length, with a busy bit while the producer fills it and a
//! discard bit. We read from `consumer_pos` to `producer_pos` and publish the new
//! `consumer_pos`.
//!
//! **perf ring** (`perf_event_mmap_page`): one control page then 2^n data pages. We
//! read from `data_tail` to `data_head` and publish `data_tail`; a record may wrap
//! around the end of the data area, so each is copied out (a few hundred bytes). Mapped
//! read-write, the kernel never overwrites unread data: when full it counts what it
//! could not write and reports it in a `PERF_RECORD_LOST`.
//!
//! Memory ordering follows the kernel's documentation: acquire loads of the producer
//! position (and of each BPF record's header), release stores of the consumer position.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf only reads a system constant.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// A shared mapping of a descriptor, unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every access through it goes through
// the atomic or volatile reads below, whichever thread makes it.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` from `offset`, shared, with `prot`.
    pub fn new(
        fd: BorrowedFd<'_>,
        len: usize,
        offset: usize,
        prot: libc::c_int,
    ) -> io::Result<Mapping> {
        let off = libc::off_t::try_from(offset)
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a fresh mapping chosen by the kernel (addr NULL) over a descriptor we
        // hold; it aliases no Rust object.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                off,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(Mapping { ptr, len })
    }

    fn at(&self, off: usize) -> *mut u8 {
        debug_assert!(off < self.len);
        // SAFETY: callers pass offsets inside the mapping (checked in debug builds).
        unsafe { self.ptr.as_ptr().add(off) }
    }

    /// The 64-bit word at `off`, as an atomic shared with the kernel: how a
    /// BPF_F_MMAPABLE array's values are read. `None` outside the mapping or unaligned.
    pub fn word(&self, off: usize) -> Option<&AtomicU64> {
        (off % 8 == 0 && off.checked_add(8).is_some_and(|end| end <= self.len))
            .then(|| self.u64_at(off))
    }

    /// The 64-bit word at `off` (8-byte aligned), as an atomic shared with the kernel.
    fn u64_at(&self, off: usize) -> &AtomicU64 {
        // SAFETY: in bounds, aligned (mappings are page-aligned and every offset used
        // is a multiple of 8), and the memory lives as long as `self`.
        unsafe { &*self.at(off).cast::<AtomicU64>() }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        // SAFETY: as for `u64_at`, with 4-byte alignment.
        unsafe { &*self.at(off).cast::<AtomicU32>() }
    }

    /// `out.len()` bytes from `off`, which the kernel has finished writing.
    fn copy_out(&self, off: usize, out: &mut [u8]) {
        debug_assert!(off + out.len() <= self.len);
        // SAFETY: in bounds; the producer published these bytes before the position
        // we acquired, and does not touch them until we release them.
        unsafe { std::ptr::copy_nonoverlapping(self.at(off), out.as_mut_ptr(), out.len()) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; nothing borrows it past `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

// ---------------------------------------------------------------------------
// BPF ring buffer.

const BPF_RINGBUF_BUSY_BIT: u32 = 1 << 31;
const BPF_RINGBUF_DISCARD_BIT: u32 = 1 << 30;
const BPF_RINGBUF_HDR_SZ: usize = 8;

/// A BPF ring buffer mapped for reading.
// Plain shared memory, no libbpf: built (and tested) whatever the features, read
// by the BPF users only.
#[derive(Debug)]
pub struct BpfRing {
    consumer: Mapping,
    producer: Mapping,
    mask: usize,
    page: usize,
}

impl BpfRing {
    /// Maps the ring buffer map `fd` of `size` data bytes (a power of two).
    pub fn new(fd: BorrowedFd<'_>, size: usize) -> io::Result<BpfRing> {
        let page = page_size();
        let consumer = Mapping::new(fd, page, 0, libc::PROT_READ | libc::PROT_WRITE)?;
        let producer = Mapping::new(fd, page + 2 * size, page, libc::PROT_READ)?;
        Ok(BpfRing {
            consumer,
            producer,
            mask: size - 1,
            page,
        })
    }

    /// Bytes written by the kernel and not yet consumed.
    #[inline]
    pub fn pending(&self) -> u64 {
        let prod = self.producer.u64_at(0).load(Ordering::Acquire);
        let cons = self.consumer.u64_at(0).load(Ordering::Acquire);
        prod.saturating_sub(cons)
    }

    /// Hands each complete record to `f` (its payload, in place), oldest first, and
    /// releases it. Stops at a record the kernel is still writing. Returns how many
    /// records were handed over.
    #[inline]
    pub fn consume(&mut self, f: &mut dyn FnMut(&[u8])) -> u64 {
        let cons_word = self.consumer.u64_at(0);
        let mut cons = cons_word.load(Ordering::Acquire);
        let mut n = 0;
        loop {
            let prod = self.producer.u64_at(0).load(Ordering::Acquire);
            if cons >= prod {
                return n;
            }
            while cons < prod {
                let hdr_off = self.page + (cons as usize & self.mask);
                let len = self.producer.u32_at(hdr_off).load(Ordering::Acquire);
                if len & BPF_RINGBUF_BUSY_BIT != 0 {
                    // Reserved, not yet submitted: everything after it waits too.
                    return n;
                }
                let payload = (len & !(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT)) as usize;
                if len & BPF_RINGBUF_DISCARD_BIT == 0 {
                    let start = hdr_off + BPF_RINGBUF_HDR_SZ;
                    // SAFETY: the data area is mapped twice in a row, so the record is
                    // contiguous and in bounds; the kernel published it (busy bit
                    // clear, read with acquire) and keeps it until we move past it.
                    let rec =
                        unsafe { std::slice::from_raw_parts(self.producer.at(start), payload) };
                    f(rec);
                    n += 1;
                }
                cons += (payload + BPF_RINGBUF_HDR_SZ).next_multiple_of(8) as u64;
                cons_word.store(cons, Ordering::Release);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// perf mmap ring.

/// Offsets in `struct perf_event_mmap_page` (include/uapi/linux/perf_event.h).
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;

/// The largest record quietwatt reads: a sample with the time and a group of up
/// to 1 + MAX_DOMAINS (value, id) pairs is 296 bytes.
pub const MAX_RECORD: usize = 512;

/// A perf event's mmap ring. The caller keeps its own read position (from
/// [`PerfRing::tail`] to [`PerfRing::head`]) and gives records back with
/// [`PerfRing::release`].
#[derive(Debug)]
pub struct PerfRing {
    map: Mapping,
    data_off: usize,
    data_size: usize,
}

impl PerfRing {
    /// Maps the ring of sampling event `fd`: one control page and `data_pages`
    /// (a power of two) data pages.
    pub fn new(fd: BorrowedFd<'_>, data_pages: usize) -> io::Result<PerfRing> {
        let page = page_size();
        let map = Mapping::new(
            fd,
            page * (1 + data_pages),
            0,
            libc::PROT_READ | libc::PROT_WRITE,
        )?;
        // Kernels before 4.1 leave these zero: the data then starts at the next page.
        let mut data_off = map.u64_at(DATA_OFFSET).load(Ordering::Relaxed) as usize;
        let mut data_size = map.u64_at(DATA_SIZE).load(Ordering::Relaxed) as usize;
        if data_off == 0 || data_size == 0 {
            data_off = page;
            data_size = page * data_pages;
        }
        Ok(PerfRing {
            map,
            data_off,
            data_size,
        })
    }

    /// Where the kernel has written up to (acquire: the records before it are complete).
    #[inline]
    pub fn head(&self) -> u64 {
        self.map.u64_at(DATA_HEAD).load(Ordering::Acquire)
    }

    /// Where user space has read up to.
    #[inline]
    pub fn tail(&self) -> u64 {
        self.map.u64_at(DATA_TAIL).load(Ordering::Relaxed)
    }

    /// Gives every record before `pos` back to the kernel.
    #[inline]
    pub fn release(&self, pos: u64) {
        self.map.u64_at(DATA_TAIL).store(pos, Ordering::Release);
    }

    /// Bytes written by the kernel and not yet released.
    #[inline]
    pub fn pending(&self) -> u64 {
        self.head().saturating_sub(self.tail())
    }

    /// Copies the record at `pos` (which must be below a head already acquired) into
    /// `buf` without its header; returns its type, its full size (the step to the
    /// next record) and the body length copied (at most [`MAX_RECORD`]).
    #[inline]
    pub fn read(&self, pos: u64, buf: &mut [u8; MAX_RECORD]) -> (u32, u64, usize) {
        let mut hdr = [0u8; 8];
        self.copy(pos, &mut hdr);
        let kind = u32::from_ne_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
        let size = u16::from_ne_bytes([hdr[6], hdr[7]]) as u64;
        if size < 8 {
            // Cannot happen with a sane kernel; a zero step would loop forever.
            return (0, u64::MAX, 0);
        }
        let body = ((size - 8) as usize).min(MAX_RECORD);
        self.copy(pos + 8, &mut buf[..body]);
        (kind, size, body)
    }

    /// Copies the whole record at `pos` (which must be below a head already
    /// acquired) into `buf` without its header, however long (a sample with a call
    /// chain can exceed [`MAX_RECORD`]; a record is at most 64 KiB); returns its
    /// type and its full size (the step to the next record). `buf` keeps its memory
    /// between calls.
    pub fn read_record(&self, pos: u64, buf: &mut Vec<u8>) -> (u32, u64) {
        let mut hdr = [0u8; 8];
        self.copy(pos, &mut hdr);
        let kind = u32::from_ne_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
        let size = u16::from_ne_bytes([hdr[6], hdr[7]]) as u64;
        buf.clear();
        if size < 8 {
            // As in `read`: a zero step would loop forever.
            return (0, u64::MAX);
        }
        buf.resize((size - 8) as usize, 0);
        self.copy(pos + 8, buf);
        (kind, size)
    }

    /// Copies `out.len()` bytes from ring position `pos`, wrapping at the end.
    fn copy(&self, pos: u64, out: &mut [u8]) {
        let size = self.data_size;
        let off = (pos as usize) & (size - 1);
        let first = out.len().min(size - off);
        self.map.copy_out(self.data_off + off, &mut out[..first]);
        if first < out.len() {
            let rest = out.len() - first;
            self.map
                .copy_out(self.data_off, &mut out[first..first + rest]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};

    #[test]
    fn a_perf_record_longer_than_max_record_is_read_whole_across_the_wrap() {
        let page = page_size();
        // SAFETY: a new anonymous file; the name is a NUL-terminated literal.
        let raw = unsafe { libc::memfd_create(c"qw-perf-ring".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(raw >= 0);
        // SAFETY: the kernel just returned this descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // A control page (data offset and size 0: the data starts at the next
        // page) and one data page.
        rustix::fs::ftruncate(&fd, (2 * page) as u64).unwrap();
        let body: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let size = (8 + body.len()) as u16;
        let mut rec = Vec::new();
        rec.extend_from_slice(&9u32.to_ne_bytes()); // PERF_RECORD_SAMPLE
        rec.extend_from_slice(&0u16.to_ne_bytes());
        rec.extend_from_slice(&size.to_ne_bytes());
        rec.extend_from_slice(&body);
        // Starts 100 bytes before the end of the data: wraps.
        let start = page - 100;
        let (first, rest) = rec.split_at(100);
        rustix::io::pwrite(&fd, first, (page + start) as u64).unwrap();
        rustix::io::pwrite(&fd, rest, page as u64).unwrap();
        let ring = PerfRing::new(fd.as_fd(), 1).unwrap();
        let mut buf = Vec::new();
        let (kind, step) = ring.read_record(start as u64, &mut buf);
        assert_eq!((kind, step), (9, u64::from(size)));
        assert_eq!(buf, body);
        // The fixed-size read truncates the same record to MAX_RECORD.
        let mut small = [0u8; MAX_RECORD];
        assert_eq!(ring.read(start as u64, &mut small).2, MAX_RECORD);
    }

    #[test]
    fn the_bpf_ring_hands_over_submitted_records_skips_discarded_ones_and_stops_at_busy() {
        let page = page_size();
        let size = page; // one page of data, mapped twice in a row by the kernel
                         // SAFETY: a new anonymous file; the name is a NUL-terminated literal.
        let raw = unsafe { libc::memfd_create(c"qw-bpf-ring".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(raw >= 0);
        // SAFETY: the kernel just returned this descriptor.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // Consumer page, producer page, data twice.
        rustix::fs::ftruncate(&fd, (2 * page + 2 * size) as u64).unwrap();
        let put = |off: usize, b: &[u8]| {
            rustix::io::pwrite(&fd, b, off as u64).unwrap();
        };
        // Data offset `d` of the ring as the file holds it (both copies).
        let data = |d: usize, b: &[u8]| {
            put(2 * page + d, b);
            put(2 * page + size + d, b);
        };
        let rec = |d: usize, len: u32, payload: u64| {
            data(d, &len.to_ne_bytes());
            data(d + 8, &payload.to_ne_bytes());
        };
        rec(0, 8, 1);
        rec(16, 8 | BPF_RINGBUF_DISCARD_BIT, 2);
        rec(32, 8, 3);
        rec(48, 8 | BPF_RINGBUF_BUSY_BIT, 4);
        rec(64, 8, 5);
        put(page, &80u64.to_ne_bytes()); // producer_pos
        let mut ring = BpfRing::new(fd.as_fd(), size).unwrap();
        let mut got = Vec::new();
        let n = ring.consume(&mut |b| got.push(u64::from_ne_bytes(b.try_into().unwrap())));
        assert_eq!((n, got.clone()), (2, vec![1, 3]));
        // Stopped at the busy record: it and the next are still pending.
        assert_eq!(ring.pending(), 32);
        // Submitted: both come.
        rec(48, 8, 4);
        ring.consume(&mut |b| got.push(u64::from_ne_bytes(b.try_into().unwrap())));
        assert_eq!(got, vec![1, 3, 4, 5]);
        assert_eq!(ring.pending(), 0);
    }
}
