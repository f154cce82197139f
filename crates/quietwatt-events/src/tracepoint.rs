//! Tracepoints for perf: the `attr.config` of a `PERF_TYPE_TRACEPOINT` event is the
//! tracepoint's id, which only tracefs publishes (`events/<sys>/<name>/id`).
//!
//! tracefs lives at `/sys/kernel/tracing` (since 4.1) or, on older setups, under
//! debugfs at `/sys/kernel/debug/tracing`. A minimal system (this project's VM)
//! boots with neither mounted; as root quietwatt then mounts tracefs at its
//! canonical place itself (what systemd does on most distributions) and says so,
//! since without it no tracepoint can be counted at all.

use super::{open_fix, EventsError, Result};
use perf_event_open_sys::bindings::PERF_TYPE_TRACEPOINT;
use quietwatt_sys::perf::open_counting_event;
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Where tracefs is looked for, in order.
pub const TRACEFS_DIRS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The `state` value of `power:cpu_idle` on exit (`PWR_EVENT_EXIT`, -1 as u32).
pub const PWR_EVENT_EXIT: u32 = u32::MAX;

/// A mounted tracefs, found or mounted.
#[derive(Debug, Clone)]
pub struct Tracefs {
    dir: PathBuf,
    /// Set when quietwatt mounted it (the user is told).
    pub mounted_here: bool,
}

impl Tracefs {
    /// Finds tracefs; as root, mounts it at `/sys/kernel/tracing` when it is not
    /// mounted anywhere.
    pub fn find() -> Result<Tracefs> {
        for d in TRACEFS_DIRS {
            if Path::new(d).join("events").is_dir() {
                return Ok(Tracefs {
                    dir: d.into(),
                    mounted_here: false,
                });
            }
        }
        let target = TRACEFS_DIRS[0];
        let fix = format!("mount it: `mount -t tracefs nodev {target}`");
        if !rustix::process::geteuid().is_root() {
            return Err(EventsError::NoTracefs {
                why: format!("neither {} is mounted; {fix}", TRACEFS_DIRS.join(" nor ")),
            });
        }
        mount_tracefs(target).map_err(|e| EventsError::NoTracefs {
            why: format!("it is not mounted and mounting it at {target} failed ({e}); {fix}"),
        })?;
        Ok(Tracefs {
            dir: target.into(),
            mounted_here: true,
        })
    }

    /// The tracefs directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The id of tracepoint `sys:name`.
    pub fn id(&self, sys: &str, name: &str) -> Result<u64> {
        let path = self.dir.join("events").join(sys).join(name).join("id");
        let text = std::fs::read_to_string(&path).map_err(|source| EventsError::NoTracepoint {
            name: format!("{sys}:{name}"),
            path: path.clone(),
            source,
        })?;
        text.trim().parse().map_err(|_| EventsError::Parse {
            path,
            content: text,
        })
    }
}

/// The id of tracepoint `sys:name` in tracefs, found (or mounted) for it; a mount
/// of tracefs by quietwatt goes in `notes`, as the user is told of it.
pub fn find_id(sys: &str, name: &str, notes: &mut Vec<String>) -> Result<u64> {
    let t = Tracefs::find()?;
    if t.mounted_here {
        notes.push(format!(
            "tracefs was not mounted; quietwatt mounted it at {}",
            t.dir().display()
        ));
    }
    t.id(sys, name)
}

fn mount_tracefs(target: &str) -> std::io::Result<()> {
    let c = |s: &str| CString::new(s).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL));
    let (src, dst, fs) = (c("nodev")?, c(target)?, c("tracefs")?);
    // SAFETY: the three strings are NUL-terminated and live across the call; no data
    // argument is passed.
    let r = unsafe { libc::mount(src.as_ptr(), dst.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Opens tracepoint `id` as a counting event on `cpu`, with an optional filter
/// (`state == 1`): the kernel then counts only the hits that match, so per-state
/// counts cost no user-space work.
pub fn open_tracepoint(id: u64, cpu: u32, filter: Option<&str>, name: &str) -> Result<OwnedFd> {
    let err = |source: std::io::Error| EventsError::Open {
        event: match filter {
            Some(f) => format!("{name} [{f}]"),
            None => name.to_string(),
        },
        cpu,
        fix: open_fix(&source),
        source,
    };
    let fd = open_counting_event(PERF_TYPE_TRACEPOINT, id, cpu).map_err(err)?;
    if let Some(f) = filter {
        let c =
            CString::new(f).map_err(|_| err(std::io::Error::from_raw_os_error(libc::EINVAL)))?;
        // SAFETY: the fd is a perf event we own; the filter string is NUL-terminated
        // and outlives the ioctl, which only reads it.
        let r = unsafe {
            perf_event_open_sys::ioctls::SET_FILTER(fd.as_raw_fd(), c.as_ptr() as *mut _)
        };
        if r != 0 {
            return Err(err(std::io::Error::last_os_error()));
        }
    }
    Ok(fd)
}
