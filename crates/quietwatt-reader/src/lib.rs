//! quietwatt's local reader service and its client: energy without root.
//!
//! Since CVE-2020-8694 (PLATYPUS) the RAPL counters are root's alone. The
//! service (`quietwatt serve --socket`) is one process that holds them, with
//! the least privilege, and answers local users over a Unix socket: the kernel
//! names each client (`SO_PEERCRED`), an access [`policy`] says which domains
//! it may read and how finely (by default every 100 ms, to 1 mJ: coarse enough
//! that PLATYPUS's attacks become impractical, fine enough for the energy of a
//! program), and the client reads through it as through any mechanism
//! ([`client::SocketSource`], a [`quietwatt_sources::Source`]).
//!
//! - [`protocol`]: the messages, one JSON object per line, versioned.
//! - [`policy`]: the policy file, the default, and the decision for a client.
//! - [`board`]: the latest snapshot, published by whoever reads the counters
//!   (the exporter's refresh in `serve`), read by the service.
//! - [`service`]: the connections, the limits a hostile client meets, the
//!   socket.
//! - [`client`]: the socket as a source; [`discover`] and [`refused_locally`]
//!   decide when the engine reads through it instead of the counters.
//!
//! This crate sits beside the mechanisms (it depends on `quietwatt-sources`
//! for the `Source` trait) and below the engine, which opens it when the
//! counters cannot be opened locally. It knows nothing of sessions: the caller
//! that holds them publishes their figures on a [`board::Board`].
#![deny(missing_docs)]

pub mod board;
pub mod client;
pub mod policy;
pub mod protocol;
pub mod service;

pub use board::{Board, ChannelState, ServiceInfo, Snapshot};
pub use client::{SocketSource, Want};
pub use policy::{Grant, Names, Peer, Policy, PolicyError};
pub use protocol::RefusalCode;
pub use service::{Limits, Service, Stats};

use std::path::{Path, PathBuf};

/// Where the service listens unless told otherwise, and where a client looks
/// when `QUIETWATT_SOCKET` is not set.
pub const DEFAULT_SOCKET: &str = "/run/quietwatt/reader.sock";

/// The environment variable naming the service's socket for clients.
pub const SOCKET_ENV: &str = "QUIETWATT_SOCKET";

/// What went wrong talking to the service.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReaderError {
    /// No socket at the path.
    #[error("no reader service at {path}: ask the admin to start one (`quietwatt serve --socket {path}` as root, or the systemd units in contrib/), or set QUIETWATT_SOCKET to where it listens")]
    NotFound {
        /// The socket's path.
        path: PathBuf,
    },
    /// The socket is there but nothing accepts (or it may not be opened).
    #[error("cannot connect to the reader service at {path}: {source}; is it running? (`systemctl status quietwatt-reader`)")]
    Connect {
        /// The socket's path.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The service refused: its message says why and the fix.
    #[error("the reader service at {path} refused: {message}")]
    Refused {
        /// The socket's path.
        path: PathBuf,
        /// What kind of refusal.
        code: RefusalCode,
        /// Its words.
        message: String,
    },
    /// The service closed the connection.
    #[error("the reader service at {path} closed the connection (it stopped or restarted): the figures up to now stand; measure again")]
    Closed {
        /// The socket's path.
        path: PathBuf,
    },
    /// Writing or reading the socket failed.
    #[error("the reader service at {path}: {source}")]
    Io {
        /// The socket's path.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The service said something this client does not understand.
    #[error(
        "the reader service at {path}: {why}; use the quietwatt of the same version as the service"
    )]
    Protocol {
        /// The socket's path.
        path: PathBuf,
        /// What was wrong.
        why: String,
    },
    /// A domain asked for is not among those granted.
    #[error("through the reader service: {0}")]
    Selection(quietwatt_sources::Error),
}

impl From<ReaderError> for quietwatt_sources::Error {
    fn from(e: ReaderError) -> Self {
        use quietwatt_sources::Error;
        match e {
            // A user's request that cannot be: as from a local mechanism.
            ReaderError::Selection(e) => e,
            // Mid-way, the service went away: what was read stands.
            ReaderError::Closed { ref path } => Error::Vanished {
                path: path.clone(),
                source: std::io::Error::new(std::io::ErrorKind::UnexpectedEof, e.to_string()),
            },
            ReaderError::Io { path, source } => Error::Io { path, source },
            // Refused, absent, unreachable, not understood: nothing can be read
            // this way, and the message says what to do.
            e => Error::MechanismUnavailable {
                mechanism: "socket",
                why: e.to_string(),
            },
        }
    }
}

/// Where a client finds the service: `QUIETWATT_SOCKET` when set and not
/// empty, else [`DEFAULT_SOCKET`] when something is there; `None` otherwise.
pub fn discover() -> Option<PathBuf> {
    match std::env::var_os(SOCKET_ENV) {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => Path::new(DEFAULT_SOCKET)
            .exists()
            .then(|| PathBuf::from(DEFAULT_SOCKET)),
    }
}

/// Whether an error opening the counters locally is one the service exists
/// for: no permission, nothing visible to this user, no mechanism usable here
/// ([`quietwatt_sources::ErrorKind::Unavailable`]). A domain that does not
/// exist, or a broken counter, is not.
pub fn refused_locally(e: &quietwatt_sources::Error) -> bool {
    e.kind() == quietwatt_sources::ErrorKind::Unavailable
}

/// The engine's fallback: where opening the counters failed with `local`, the
/// service at [`discover`]'s path, when there is one and `local` is an error
/// it answers ([`refused_locally`]). `None`: no fallback applies (keep
/// `local`). `Some(Err)`: the service was there and could not be read; its
/// error says why, with `local` beside it.
pub fn fallback(
    local: &quietwatt_sources::Error,
    selection: &quietwatt_sources::Selection,
    want: Want,
) -> Option<Result<SocketSource, quietwatt_sources::Error>> {
    if !refused_locally(local) {
        return None;
    }
    Some(discovered(selection, want)?.map_err(|e| match e {
        ReaderError::Selection(e) => e,
        e => quietwatt_sources::Error::MechanismUnavailable {
            mechanism: "socket",
            why: format!("the counters cannot be opened here ({local}), and {e}"),
        },
    }))
}

/// The service at [`discover`]'s path, asked for `want`, with the channels
/// `selection` names; `None` when there is no service to try.
pub fn discovered(
    selection: &quietwatt_sources::Selection,
    want: Want,
) -> Option<Result<SocketSource, ReaderError>> {
    let path = discover()?;
    Some(SocketSource::connect(&path, want, selection))
}
