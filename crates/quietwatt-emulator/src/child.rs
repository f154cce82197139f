//! The emulator served from a child process, for a program that reads its own
//! emulator: the CLI's `--emulate` and Python's `emulate=`.
//!
//! Served from a thread of the reading process, a fatal signal can deadlock it:
//! the kernel kills the FUSE thread while another thread waits in a read of the
//! mount for an answer, which it waits for uninterruptibly once the request was
//! handed over (`request_wait_answer` in `fs/fuse/dev.c`); the connection is only
//! aborted when the last holder of `/dev/fuse` closes it, and that holder is the
//! process stuck in the read. A child answers reads while the reader dies, then
//! sees the reader gone (the keep-alive pipe closes) and unmounts. Killed itself,
//! its `/dev/fuse` closes and every read of the mount fails at once (ENOTCONN)
//! instead of hanging.

use crate::config::EmulatorConfig;
use crate::emulator::Emulator;
use crate::error::{Error, Result};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// An emulator mounted and served by a child process until this handle is
/// dropped (or [`ChildEmulator::unmount`]) or this process ends, however it ends.
#[derive(Debug)]
pub struct ChildEmulator {
    pid: libc::pid_t,
    /// The write end of the pipe the child waits on: closing it (dropping it, or
    /// this process ending) tells the child to unmount and exit.
    keepalive: Option<OwnedFd>,
    dir: PathBuf,
    config: EmulatorConfig,
}

/// Signals the child ignores: those a terminal or a supervisor sends to a whole
/// process group (Ctrl-C, `timeout`), which must reach the reader, not cut its
/// counters from under it. The reader's end ends the child.
const IGNORED: [libc::c_int; 7] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGPIPE,
];

impl ChildEmulator {
    /// Forks a child that mounts the emulator at `dir` ([`Emulator::mount`]) and
    /// serves it; returns once it is mounted, or with the child's error. Call it
    /// while this process has one thread where it can: a fork copies only the
    /// calling thread, and the child allocates.
    pub fn mount(dir: impl AsRef<Path>, config: EmulatorConfig) -> Result<ChildEmulator> {
        let dir = dir.as_ref().to_path_buf();
        config.validate()?;
        let (ready_r, ready_w) = pipe()?;
        let (alive_r, alive_w) = pipe()?;
        // SAFETY: fork has no memory-safety preconditions; the child below only
        // mounts, writes to a pipe, reads another and exits with `_exit`.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(child_error(format!(
                "cannot fork the emulator's process: {}; free memory or raise the process limit (ulimit -u)",
                std::io::Error::last_os_error()
            )));
        }
        if pid == 0 {
            drop(ready_r);
            drop(alive_w);
            serve(&dir, config, ready_w, alive_r);
        }
        drop(ready_w);
        drop(alive_r);
        let said = read_message(File::from(ready_r));
        let mut child = ChildEmulator {
            pid,
            keepalive: Some(alive_w),
            dir,
            config,
        };
        match said {
            Some((0, mounted)) => {
                child.dir = PathBuf::from(String::from_utf8_lossy(&mounted).into_owned());
                Ok(child)
            }
            Some((_, why)) => {
                child.reap();
                Err(child_error(String::from_utf8_lossy(&why).into_owned()))
            }
            None => {
                child.reap();
                Err(child_error(
                    "the emulator's process ended before it mounted: check that /dev/fuse exists and that this runs as root (or with fusermount3), and see dmesg".into(),
                ))
            }
        }
    }

    /// The mount point (canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The configuration served.
    pub fn config(&self) -> &EmulatorConfig {
        &self.config
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// Tells the child to unmount and waits for it to exit; an error when it
    /// failed to unmount (the mount is then left detached, never busy).
    pub fn unmount(mut self) -> Result<()> {
        match self.reap() {
            Some(0) | None => Ok(()),
            Some(code) => Err(child_error(format!(
                "the emulator's process exited {code} while unmounting {}",
                self.dir.display()
            ))),
        }
    }

    /// Closes the keep-alive pipe and waits for the child; its exit code.
    fn reap(&mut self) -> Option<i32> {
        drop(self.keepalive.take());
        loop {
            let mut status = 0;
            // SAFETY: waiting for our own child with a valid status pointer.
            let r = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if r == self.pid {
                return Some(if libc::WIFEXITED(status) {
                    libc::WEXITSTATUS(status)
                } else {
                    128 + libc::WTERMSIG(status)
                });
            }
            if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return None;
            }
        }
    }
}

impl Drop for ChildEmulator {
    fn drop(&mut self) {
        if self.keepalive.is_some() {
            self.reap();
        }
    }
}

/// The child: leaves the parent's process group and its group signals, mounts,
/// says so (a 0 byte and the canonical mount point, or the error), and serves
/// until the keep-alive pipe closes. Never returns.
fn serve(dir: &Path, config: EmulatorConfig, ready: OwnedFd, alive: OwnedFd) -> ! {
    // SAFETY: plain system calls with valid arguments in a single-threaded child.
    unsafe {
        libc::setpgid(0, 0);
        for s in IGNORED {
            libc::signal(s, libc::SIG_IGN);
        }
        // Its errors go through the pipe; holding the parent's stdout would keep a
        // reader of it (`| jq`, a test harness) waiting after the parent ended.
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            libc::close(null);
        }
    }
    let mut ready = File::from(ready);
    let emulator = match Emulator::mount(dir, config) {
        Ok(e) => e,
        Err(e) => {
            write_message(&mut ready, 1, e.to_string().as_bytes());
            // SAFETY: ends the child without running the parent's atexit handlers.
            unsafe { libc::_exit(1) }
        }
    };
    write_message(&mut ready, 0, emulator.dir().as_os_str().as_encoded_bytes());
    drop(ready);
    // Blocks until every write end is closed: the parent's handle dropped, or the
    // parent gone however it ended.
    let mut alive = File::from(alive);
    let mut buf = [0u8; 1];
    loop {
        match alive.read(&mut buf) {
            Ok(0) => break,
            Err(e) if e.kind() != std::io::ErrorKind::Interrupted => break,
            _ => {}
        }
    }
    let code = match emulator.unmount() {
        Ok(()) => 0,
        Err(_) => 1,
    };
    // SAFETY: as above.
    unsafe { libc::_exit(code) }
}

/// The child's one message: a status byte (0: mounted), a length, the bytes (the
/// mount point, or the error). Framed rather than read to the end of the pipe: a
/// fork elsewhere in the parent (another thread) can hold a copy of the write end,
/// and the end of the pipe would come only when that process ends.
fn write_message(to: &mut File, status: u8, bytes: &[u8]) {
    let mut m = vec![status];
    m.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    m.extend_from_slice(bytes);
    let _ = to.write_all(&m);
}

/// Reads [`write_message`]'s message; `None` if the child ended first.
fn read_message(mut from: File) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 5];
    from.read_exact(&mut head).ok()?;
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
    let mut bytes = vec![0u8; len];
    from.read_exact(&mut bytes).ok()?;
    Some((head[0], bytes))
}

/// A pipe whose ends close on exec (the measured command must not hold them).
fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two descriptors for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(child_error(format!(
            "cannot create a pipe to the emulator's process: {}; close some files or raise the limit (ulimit -n)",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn child_error(why: String) -> Error {
    Error::Child(why)
}
