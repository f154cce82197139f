//! What a Unix socket's peer is, and a listening socket handed over by systemd.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixListener;

/// The supplementary groups of the process at the other end of `socket`, as
/// the kernel recorded them when it connected (`SO_PEERGROUPS`, Linux 4.13):
/// unlike `/proc/PID/status`, readable where `/proc` hides other users'
/// processes (`hidepid`, systemd's `ProtectProc=invisible`), and not racing
/// the peer's exit.
pub fn peer_groups(socket: impl AsFd) -> io::Result<Vec<u32>> {
    let fd = socket.as_fd().as_raw_fd();
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut len = libc::socklen_t::try_from(std::mem::size_of_val(groups.as_slice()))
            .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: the buffer is `len` bytes of gid_t; the kernel writes at most
        // `len` bytes and says how many it needs.
        let rc = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let needed = len as usize / std::mem::size_of::<libc::gid_t>();
        if rc == 0 {
            groups.truncate(needed);
            return Ok(groups);
        }
        let e = io::Error::last_os_error();
        // ERANGE: `len` now says how much room the list needs.
        if e.raw_os_error() == Some(libc::ERANGE) && needed > groups.len() {
            groups.resize(needed, 0);
            continue;
        }
        return Err(e);
    }
}

/// The first file descriptor systemd passes (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: i32 = 3;

/// A listening Unix socket passed by systemd's socket activation (a `.socket`
/// unit, or `systemd-socket-activate`): `LISTEN_PID` is this process and
/// `LISTEN_FDS` at least 1. `None` when nothing was passed. The variables are
/// removed, so children do not take the socket for theirs; the descriptor is
/// made close-on-exec. An error: the descriptor passed is not a listening Unix
/// stream socket.
pub fn activated_listener() -> Option<io::Result<UnixListener>> {
    let pid: u32 = std::env::var("LISTEN_PID").ok()?.parse().ok()?;
    let fds: i32 = std::env::var("LISTEN_FDS").ok()?.parse().ok()?;
    if pid != std::process::id() || fds < 1 {
        return None;
    }
    for var in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        std::env::remove_var(var);
    }
    Some(take_listener(LISTEN_FDS_START))
}

fn take_listener(raw: i32) -> io::Result<UnixListener> {
    use rustix::net::sockopt;
    // SAFETY: systemd's protocol hands this descriptor to this process (checked
    // by LISTEN_PID above), and nothing else in it owns descriptor 3 at start.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::CLOEXEC)?;
    if sockopt::socket_domain(&fd)? != rustix::net::AddressFamily::UNIX
        || sockopt::socket_type(&fd)? != rustix::net::SocketType::STREAM
        || !sockopt::socket_acceptconn(&fd)?
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the socket systemd passed is not a listening Unix stream socket: give the .socket unit ListenStream=/path",
        ));
    }
    Ok(UnixListener::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn the_peers_groups_are_this_process_groups() {
        let (a, _b) = UnixStream::pair().unwrap();
        let mut theirs: Vec<u32> = peer_groups(&a).unwrap();
        let mut ours: Vec<u32> = rustix::process::getgroups()
            .unwrap()
            .into_iter()
            .map(rustix::process::Gid::as_raw)
            .collect();
        ours.sort_unstable();
        theirs.sort_unstable();
        assert_eq!(theirs, ours);
    }

    #[test]
    fn a_descriptor_that_is_not_a_listening_socket_is_refused() {
        let (a, _b) = UnixStream::pair().unwrap();
        let raw = OwnedFd::from(a);
        let n = raw.as_raw_fd();
        std::mem::forget(raw);
        let e = take_listener(n).unwrap_err();
        assert!(e.to_string().contains("ListenStream"), "{e}");
    }
}
