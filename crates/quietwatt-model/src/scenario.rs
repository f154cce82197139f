//! The page-fault scenarios of paper 003 at this machine's page size: one write per
//! page of a buffer, with
//! - **NPF** (no page fault): the buffer's pages were touched beforehand;
//! - **ODPA** (on-demand page allocation): a fresh anonymous mapping, every write is
//!   the first touch of its page;
//! - **COW** (copy on write): a forked child writes the pages its parent filled.
//!
//! Each measured run executes the scenario `batch` times back to back (buffers and
//! children prepared before the interval, torn down after it), so that a run lasts
//! long enough for the energy source's resolution. Faults are counted by perf
//! software events on the task that writes (this thread, or each child), around
//! the interval: measured, not assumed.

use super::counters::{SoftwareEvent, Task, TaskCounter};
use super::energy::EnergyProbe;
use super::{Measured, Scenario, ScenarioSpec, XAxis};
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::io;
use std::time::Instant;

/// Which of paper 003's scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageFaultKind {
    /// Pages touched beforehand: the cost of the writes without faults (the baseline).
    Npf,
    /// First touch of fresh anonymous pages.
    Odpa,
    /// A forked child writes pages its parent filled.
    Cow,
}

impl PageFaultKind {
    /// All three, baseline first.
    pub const ALL: [PageFaultKind; 3] =
        [PageFaultKind::Npf, PageFaultKind::Odpa, PageFaultKind::Cow];

    /// The paper's name, lower case.
    pub fn name(self) -> &'static str {
        match self {
            PageFaultKind::Npf => "npf",
            PageFaultKind::Odpa => "odpa",
            PageFaultKind::Cow => "cow",
        }
    }
}

/// An anonymous private mapping of whole pages, unmapped on drop.
#[derive(Debug)]
pub struct Buffer {
    ptr: *mut u8,
    pages: usize,
    page: usize,
}

// SAFETY: the mapping is owned by the Buffer alone; moving it to another thread moves
// that ownership.
unsafe impl Send for Buffer {}

impl Buffer {
    /// Maps `pages` pages of `page` bytes, not touched yet (no page allocated), with
    /// transparent huge pages refused so that one fault is one page.
    pub fn map(pages: usize, page: usize) -> Result<Buffer> {
        let len = pages
            .max(1)
            .checked_mul(page)
            .ok_or_else(|| Error::Scenario {
                what: format!("map {pages} pages"),
                source: io::Error::from_raw_os_error(libc::EOVERFLOW),
            })?;
        // SAFETY: a fresh anonymous mapping at an address the kernel picks; nothing
        // else is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(Error::Scenario {
                what: format!("map {pages} pages ({} MiB)", len >> 20),
                source: io::Error::last_os_error(),
            });
        }
        // SAFETY: the range was just mapped by us. A kernel without THP refuses the
        // advice, which is then moot.
        unsafe { libc::madvise(ptr, len, libc::MADV_NOHUGEPAGE) };
        Ok(Buffer {
            ptr: ptr.cast(),
            pages: pages.max(1),
            page,
        })
    }

    /// The first byte; `len()` bytes follow.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Keeps the mapping out of children forked from now on. A fork write-protects
    /// every private page of the parent for copy-on-write, so a buffer meant to be
    /// written without faults (a baseline) would fault again after any fork.
    pub fn dont_fork(&self) {
        // SAFETY: advice on our own mapping; a refusal leaves it forkable (moot).
        unsafe { libc::madvise(self.ptr.cast(), self.len(), libc::MADV_DONTFORK) };
    }

    /// Bytes in the buffer.
    pub fn len(&self) -> usize {
        self.pages * self.page
    }

    /// Whether the buffer has no byte (never: a buffer has at least one page).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pages in the buffer.
    pub fn pages(&self) -> usize {
        self.pages
    }

    /// Writes one byte in each page: the paper's test loop at a stride of one page.
    /// Allocates nothing and calls nothing, so a forked child may run it.
    #[inline(never)]
    pub fn touch(&self) {
        for i in 0..self.pages {
            // SAFETY: i * page is inside the mapping; volatile so the writes stay.
            unsafe { self.ptr.add(i * self.page).write_volatile((i as u8) | 1) };
        }
    }

    /// The byte at the start of page `i` (for checks).
    pub fn first_byte(&self, i: usize) -> u8 {
        assert!(i < self.pages);
        // SAFETY: inside the mapping.
        unsafe { self.ptr.add(i * self.page).read_volatile() }
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `map` mapped; nothing points into it any more.
        unsafe { libc::munmap(self.ptr.cast(), self.pages * self.page) };
    }
}

/// One of the three scenarios, ready to run.
#[derive(Debug)]
pub struct PageFaultScenario {
    kind: PageFaultKind,
    page: usize,
}

impl PageFaultScenario {
    /// The scenario at this machine's page size.
    pub fn new(kind: PageFaultKind) -> PageFaultScenario {
        PageFaultScenario {
            kind,
            page: super::page_size(),
        }
    }
}

impl Scenario for PageFaultScenario {
    fn spec(&self) -> ScenarioSpec {
        let (description, baseline, x) = match self.kind {
            PageFaultKind::Npf => (
                "one write per page of a buffer whose pages were touched beforehand (no fault)",
                true,
                XAxis::Intended,
            ),
            PageFaultKind::Odpa => (
                "one write per page of a fresh anonymous mapping (first touch: one minor fault per page)",
                false,
                XAxis::Measured,
            ),
            PageFaultKind::Cow => (
                "a forked child writes one byte per page of a buffer its parent filled (one copy-on-write fault per page)",
                false,
                XAxis::Measured,
            ),
        };
        ScenarioSpec {
            name: self.kind.name().to_string(),
            description: description.to_string(),
            baseline,
            x,
            counted: SoftwareEvent::MinorFaults.name().to_string(),
            unit: format!("page of {} bytes", self.page),
        }
    }

    fn run(&mut self, count: u64, batch: u32, probe: &mut EnergyProbe) -> Result<Measured> {
        let pages = usize::try_from(count).map_err(|_| Error::Scenario {
            what: format!("map {count} pages"),
            source: io::Error::from_raw_os_error(libc::EOVERFLOW),
        })?;
        match self.kind {
            PageFaultKind::Npf | PageFaultKind::Odpa => self.in_process(pages, batch, probe),
            PageFaultKind::Cow => cow(pages, self.page, batch, probe),
        }
    }
}

impl PageFaultScenario {
    fn in_process(&self, pages: usize, batch: u32, probe: &mut EnergyProbe) -> Result<Measured> {
        let buffers = (0..batch)
            .map(|_| Buffer::map(pages, self.page))
            .collect::<Result<Vec<_>>>()?;
        if self.kind == PageFaultKind::Npf {
            for b in &buffers {
                b.touch();
            }
        }
        let minor = TaskCounter::open(SoftwareEvent::MinorFaults, Task::ThisThread)?;
        let major = TaskCounter::open(SoftwareEvent::MajorFaults, Task::ThisThread)?;
        probe.begin()?;
        let (m0, j0) = (minor.read()?, major.read()?);
        let t0 = Instant::now();
        for b in &buffers {
            b.touch();
        }
        let wall = t0.elapsed().as_secs_f64();
        let (m1, j1) = (minor.read()?, major.read()?);
        let joules = probe.end()?;
        // Unmapped after the interval: freeing is not part of the scenario.
        drop(buffers);
        Ok(fault_measure(m1 - m0, j1 - j0, wall, joules))
    }
}

fn fault_measure(minor: u64, major: u64, wall: f64, joules: Vec<f64>) -> Measured {
    let counts = BTreeMap::from([
        (SoftwareEvent::MinorFaults.name().to_string(), minor),
        (SoftwareEvent::MajorFaults.name().to_string(), major),
    ]);
    Measured {
        events: minor + major,
        counts,
        seconds: wall,
        wall_seconds: wall,
        joules,
    }
}

/// A forked child waiting to write the parent's buffer.
struct Child {
    pid: libc::pid_t,
    go: OwnedPipeEnd,
    done: OwnedPipeEnd,
}

struct OwnedPipeEnd(libc::c_int);

impl Drop for OwnedPipeEnd {
    fn drop(&mut self) {
        // SAFETY: closes a descriptor this struct owns.
        unsafe { libc::close(self.0) };
    }
}

fn pipe() -> Result<(OwnedPipeEnd, OwnedPipeEnd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe2 fills the two-element array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::Scenario {
            what: "create a pipe".into(),
            source: io::Error::last_os_error(),
        });
    }
    Ok((OwnedPipeEnd(fds[0]), OwnedPipeEnd(fds[1])))
}

fn write_byte(fd: libc::c_int, b: u8) -> bool {
    // SAFETY: writes one byte from a stack variable.
    unsafe { libc::write(fd, (&b as *const u8).cast(), 1) == 1 }
}

/// One byte, or `None` at end of file or on an error other than EINTR.
fn read_byte(fd: libc::c_int) -> Option<u8> {
    let mut b = 0u8;
    loop {
        // SAFETY: reads one byte into a stack variable.
        let n = unsafe { libc::read(fd, (&mut b as *mut u8).cast(), 1) };
        if n == 1 {
            return Some(b);
        }
        if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return None;
    }
}

/// Runs in the child between fork and `_exit`: only async-signal-safe calls (read,
/// write, _exit) and plain stores, because the parent may have other threads (the
/// emulator's FUSE server, a test harness) whose locks the child inherits taken.
fn child_body(work: &dyn Fn(), go: libc::c_int, done: libc::c_int, close: &[libc::c_int]) -> ! {
    // The write ends of this child's and its elder siblings' go pipes: held here,
    // they would keep this child (and the siblings) from ever seeing EOF.
    for &fd in close {
        // SAFETY: closes this process's copy of a descriptor; close is async-signal-safe.
        unsafe { libc::close(fd) };
    }
    // Fault in this child's own copy of the stack pages it uses before saying it is
    // ready, so that the counted faults are the buffer's.
    let mut scratch = [0u8; 16384];
    for i in (0..scratch.len()).step_by(512) {
        // SAFETY: in bounds; volatile so the stores happen.
        unsafe { (scratch.as_mut_ptr().add(i)).write_volatile(1) };
    }
    let mut code = 0;
    if !write_byte(done, b'r') || read_byte(go) != Some(b'g') {
        code = 1;
    } else {
        work();
        if !write_byte(done, b'd') {
            code = 1;
        }
        // Wait for the end of the parent's interval (EOF): exiting frees this child's
        // copies, which must not run inside the next measured interval.
        let _ = read_byte(go);
    }
    // SAFETY: ends the child without running the parent's atexit handlers or
    // destructors.
    unsafe { libc::_exit(code) }
}

fn cow(pages: usize, page: usize, batch: u32, probe: &mut EnergyProbe) -> Result<Measured> {
    let buf = Buffer::map(pages, page)?;
    buf.touch();
    in_forked_children(batch, probe, &|| buf.touch())
}

/// Forks `batch` children of this process (which has filled the memory `work`
/// writes), then inside one measured interval lets each run `work` in turn, and
/// counts their faults. `work` runs between fork and `_exit`: it must not allocate,
/// lock or call anything but async-signal-safe functions.
pub(crate) fn in_forked_children(
    batch: u32,
    probe: &mut EnergyProbe,
    work: &dyn Fn(),
) -> Result<Measured> {
    let mut children: Vec<Child> = Vec::with_capacity(batch as usize);
    let result = (|| -> Result<Measured> {
        for _ in 0..batch {
            let (go_r, go_w) = pipe()?;
            let (done_r, done_w) = pipe()?;
            // Made before the fork: the child must not allocate.
            let mut close: Vec<libc::c_int> = children.iter().map(|c| c.go.0).collect();
            close.extend([go_w.0, done_r.0]);
            // SAFETY: the child runs only `child_body` (async-signal-safe calls) and
            // ends with _exit; see there.
            let pid = unsafe { libc::fork() };
            if pid < 0 {
                return Err(Error::Scenario {
                    what: "fork a child for the copy-on-write scenario".into(),
                    source: io::Error::last_os_error(),
                });
            }
            if pid == 0 {
                child_body(work, go_r.0, done_w.0, &close);
            }
            drop((go_r, done_w));
            children.push(Child {
                pid,
                go: go_w,
                done: done_r,
            });
        }
        let lost = |c: &Child| Error::Scenario {
            what: format!("hear from copy-on-write child {}", c.pid),
            source: io::Error::new(io::ErrorKind::UnexpectedEof, "the child ended early"),
        };
        for c in &children {
            if read_byte(c.done.0) != Some(b'r') {
                return Err(lost(c));
            }
        }
        let counters = children
            .iter()
            .map(|c| {
                Ok((
                    TaskCounter::open(SoftwareEvent::MinorFaults, Task::Id(c.pid))?,
                    TaskCounter::open(SoftwareEvent::MajorFaults, Task::Id(c.pid))?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        let start: Vec<(u64, u64)> = counters
            .iter()
            .map(|(m, j)| Ok((m.read()?, j.read()?)))
            .collect::<Result<_>>()?;
        probe.begin()?;
        let t0 = Instant::now();
        for c in &children {
            if !write_byte(c.go.0, b'g') || read_byte(c.done.0) != Some(b'd') {
                return Err(lost(c));
            }
        }
        let wall = t0.elapsed().as_secs_f64();
        let joules = probe.end()?;
        let (mut minor, mut major) = (0, 0);
        for ((m, j), (m0, j0)) in counters.iter().zip(&start) {
            minor += m.read()? - m0;
            major += j.read()? - j0;
        }
        Ok(fault_measure(minor, major, wall, joules))
    })();
    // Close every go pipe (EOF: the children exit), then reap them all.
    let pids: Vec<libc::pid_t> = children.iter().map(|c| c.pid).collect();
    drop(children);
    for pid in pids {
        let mut status = 0;
        // SAFETY: waits for our own child.
        while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
            && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
    result
}

/// Pages per execution swept by default: 4 to 64 MiB at 4 KiB pages.
pub const DEFAULT_COUNTS: [u64; 5] = [1024, 2048, 4096, 8192, 16384];

/// The three scenarios at `counts` pages per execution. Without `batch`, each
/// scenario gets as many executions per run as make its smallest run last
/// `min_run` (one calibration execution), within `max_bytes` of buffers per run.
pub fn plan(
    counts: &[u64],
    batch: Option<u32>,
    min_run: std::time::Duration,
    max_bytes: u64,
) -> Result<Vec<super::sweep::Planned>> {
    let page = super::page_size() as u64;
    let (lo, hi) = (
        counts.iter().copied().min().unwrap_or(1),
        counts.iter().copied().max().unwrap_or(1),
    );
    // COW keeps the parent's buffer and one copy per child.
    let cap = (max_bytes / (hi.max(1) * page)).saturating_sub(1).max(1) as u32;
    super::sweep::plan_each(
        PageFaultKind::ALL.map(PageFaultScenario::new),
        counts,
        batch,
        lo,
        min_run,
        cap,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odpa_and_cow_fault_once_per_page_and_npf_not_at_all() {
        let mut probe = EnergyProbe::new(None);
        let pages = 2000u64;
        for (kind, lo, hi) in [
            (PageFaultKind::Odpa, 0.95, 1.05),
            (PageFaultKind::Cow, 0.95, 1.05),
            (PageFaultKind::Npf, 0.0, 0.05),
        ] {
            let mut s = PageFaultScenario::new(kind);
            let m = s.run(pages, 2, &mut probe).unwrap();
            let per = m.counts["minor-faults"] as f64 / (2 * pages) as f64;
            assert!(
                (lo..=hi).contains(&per),
                "{}: {} minor faults for 2 x {pages} pages",
                kind.name(),
                m.counts["minor-faults"]
            );
            assert!(m.wall_seconds > 0.0);
        }
    }

    #[test]
    fn a_buffer_holds_what_was_written() {
        let b = Buffer::map(3, crate::page_size()).unwrap();
        b.touch();
        assert_eq!((b.first_byte(0), b.first_byte(2)), (1, 3));
    }
}
