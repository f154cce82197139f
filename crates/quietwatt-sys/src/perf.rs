//! `perf_event_open(2)` and the calls on its descriptors.

use perf_event_open_sys::bindings::{perf_event_attr, PERF_FLAG_FD_CLOEXEC};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `perf_event_open(attr, pid = -1, cpu, group_fd, FD_CLOEXEC)`: a CPU-wide event.
/// Sets `attr.size` to the struct this binding knows (the kernel accepts a larger
/// struct whose extra bytes are zero, and a smaller one from older headers).
pub fn open_cpu_event(
    attr: &mut perf_event_attr,
    cpu: u32,
    group_fd: Option<BorrowedFd<'_>>,
) -> io::Result<OwnedFd> {
    let cpu = libc::c_int::try_from(cpu).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    let group = group_fd.map_or(-1, |fd| fd.as_raw_fd());
    // SAFETY: `attr` is a fully initialised perf_event_attr that outlives the call;
    // the events quietwatt asks for (counting, or sampling into their own ring)
    // write no memory of this process.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            attr,
            -1,
            cpu,
            group,
            PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `perf_event_open(attr, pid, cpu = -1, -1, FD_CLOEXEC)`: an event that follows a
/// task (`pid` 0: the calling thread) on whichever CPU it runs.
pub fn open_task_event(attr: &mut perf_event_attr, pid: i32) -> io::Result<OwnedFd> {
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    // SAFETY: as in `open_cpu_event`: an initialised attr that outlives the call,
    // for a counting event that writes no memory of this process.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            attr,
            pid,
            -1,
            -1,
            PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `perf_event_open(attr, pid, cpu, group_fd, FD_CLOEXEC)` with every argument
/// given: `pid` -1 for every task on `cpu`, `cpu` -1 for `pid` on any CPU, both
/// set for `pid` on `cpu` only (what a sampling event with `inherit` needs to be
/// mapped: the kernel refuses to mmap an inherited event of `cpu` -1).
pub fn open_event(
    attr: &mut perf_event_attr,
    pid: i32,
    cpu: i32,
    group_fd: Option<BorrowedFd<'_>>,
) -> io::Result<OwnedFd> {
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    let group = group_fd.map_or(-1, |fd| fd.as_raw_fd());
    // SAFETY: as in `open_cpu_event`: an initialised attr that outlives the call;
    // a sampling event writes into its own ring, no memory of this process.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            attr,
            pid,
            cpu,
            group,
            PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens a system-wide counting event: `attr.type = pmu_type`, `attr.config =
/// config`, counting (sample period 0), enabled at once, no `exclude_*` bit, and
/// `read_format = 0` so that a `read()` returns the bare 64-bit count.
pub fn open_counting_event(pmu_type: u32, config: u64, cpu: u32) -> io::Result<OwnedFd> {
    let mut attr = perf_event_attr {
        type_: pmu_type,
        config,
        ..Default::default()
    };
    open_cpu_event(&mut attr, cpu, None)
}

/// Reads an event's 64-bit count with one `read()` into a stack buffer.
#[inline]
pub fn read_count(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut buf = [0u8; 8];
    let n = rustix::io::read(fd, &mut buf[..]).map_err(io::Error::from)?;
    if n != buf.len() {
        // With read_format = 0 the kernel always returns 8 bytes; fewer means the
        // descriptor is not what we opened.
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
    }
    Ok(u64::from_ne_bytes(buf))
}

/// Enables (`true`) or disables a perf event; on a group leader, the whole group.
pub fn enable(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    use perf_event_open_sys::ioctls;
    // SAFETY: ENABLE and DISABLE take an integer argument and touch no memory.
    let r = unsafe {
        if on {
            ioctls::ENABLE(fd.as_raw_fd(), 0)
        } else {
            ioctls::DISABLE(fd.as_raw_fd(), 0)
        }
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sends `fd`'s records into the ring of `target` (an event on the same CPU with a
/// mapped ring, `PERF_EVENT_IOC_SET_OUTPUT`): many events, one ring to drain.
pub fn set_output(fd: BorrowedFd<'_>, target: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: SET_OUTPUT takes a descriptor number and touches no memory.
    let r = unsafe { perf_event_open_sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), target.as_raw_fd()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The kernel's id of a perf event (what `PERF_FORMAT_ID` reports beside its value).
pub fn event_id(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut id = 0u64;
    // SAFETY: ID writes one u64 through the pointer, which is valid for the call.
    let r = unsafe { perf_event_open_sys::ioctls::ID(fd.as_raw_fd(), &mut id) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perf_event_open_sys::bindings::{PERF_COUNT_SW_PAGE_FAULTS_MIN, PERF_TYPE_SOFTWARE};
    use std::os::fd::AsFd;

    #[test]
    fn a_software_event_counts_the_faults_this_thread_takes() {
        let cpu = crate::thread::current_cpu().unwrap() as u32;
        crate::thread::pin_to_cpu(cpu as usize).unwrap();
        let fd = match open_counting_event(PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN as u64, cpu) {
            Ok(fd) => fd,
            Err(e) => panic!(
                "NEEDS perf_event_paranoid <= 0 or CAP_PERFMON to open a CPU-wide software event: {e}"
            ),
        };
        let before = read_count(fd.as_fd()).unwrap();
        let pages: Vec<u8> = vec![1; 64 * 4096];
        assert!(pages.iter().step_by(4096).all(|&b| b == 1));
        let after = read_count(fd.as_fd()).unwrap();
        assert!(
            after >= before + 32,
            "{before} -> {after} faults for 64 new pages"
        );
        assert!(event_id(fd.as_fd()).unwrap() > 0);
        enable(fd.as_fd(), false).unwrap();
    }
}
