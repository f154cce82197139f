//! The service's side of the socket: one thread, one `poll(2)` over the
//! listening socket and every connection, every socket non-blocking. A client
//! is identified by the kernel (`SO_PEERCRED`) when it connects, judged by the
//! [`Policy`], and answered from the [`Board`]'s latest snapshot, so that
//! nothing a client does (or fails to do) reaches the counters' samplers.
//!
//! What a hostile or broken client meets ([`Limits`]):
//! - more connections than [`Limits::max_connections`] in all, or than
//!   [`Limits::max_per_user`] for one user (root aside): a `busy` refusal, and
//!   the connection closed;
//! - no hello within [`Limits::hello_within`]: a `timeout` refusal;
//! - a line that is not a request, or another version: `bad_request` or
//!   `version`, and closed; a line longer than [`MAX_LINE`]: `too_long`;
//! - more than [`Limits::max_requests_per_second`]: `flood`, and closed;
//! - a client that does not read its replies: once more than
//!   [`Limits::max_unsent`] bytes wait for it, it is dropped (no refusal: it
//!   would not read one);
//! - a client that goes away mid-session: its connection is closed and
//!   forgotten at once (nothing is kept per client beyond its connection).

use crate::board::{Board, Snapshot};
use crate::policy::{Grant, Peer, Policy};
use crate::protocol::{
    encode, parse_request, Malformed, Reading, Refusal, RefusalCode, Reply, Request, Welcome,
    MAX_LINE, VERSION,
};
use rustix::event::{poll, PollFd, PollFlags};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the service allows a client before it refuses or drops it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections held at once, in all.
    pub max_connections: usize,
    /// Connections held at once by one user (root is not limited).
    pub max_per_user: usize,
    /// How long a new connection has to say hello.
    pub hello_within: Duration,
    /// Requests a connection may make in one second: a reader asking at 1 kHz
    /// uses half.
    pub max_requests_per_second: u32,
    /// Bytes of replies that may wait for a client that does not read them.
    pub max_unsent: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 256,
            max_per_user: 64,
            hello_within: Duration::from_secs(10),
            max_requests_per_second: 2_000,
            max_unsent: 64 * 1024,
        }
    }
}

/// What the service did, for its log and for tests.
#[derive(Debug, Default)]
pub struct Stats {
    /// Connections accepted (refused ones included).
    pub accepted: AtomicU64,
    /// Clients welcomed.
    pub welcomed: AtomicU64,
    /// Readings sent.
    pub readings: AtomicU64,
    /// Refusals sent (each followed by a close).
    pub refused: AtomicU64,
    /// Clients dropped without a refusal (they did not read their replies).
    pub dropped: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
}

/// Binds the service's socket at `path`: its directory made if missing
/// (0755), a socket left there by a service that is gone replaced (anything
/// else there is an error), and the socket connectable by every local user
/// (0666: the policy, not the file mode, says who may read).
pub fn bind(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::FileTypeExt;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_socket() {
            return Err(std::io::Error::new(
                ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket: remove it or give another path",
                    path.display()
                ),
            ));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                ErrorKind::AddrInUse,
                format!("{} is served by another running service", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666))?;
    Ok(listener)
}

/// The socket systemd passed to this process (socket activation: the
/// `quietwatt-reader.socket` unit in `contrib/systemd/`), with the path it
/// listens at; `None` when none was passed. systemd made it, owns its mode and
/// group, and removes it: the service only accepts on it.
pub fn activated() -> Option<std::io::Result<(UnixListener, PathBuf)>> {
    let listener = quietwatt_sys::socket::activated_listener()?;
    Some(listener.and_then(|l| {
        let path = l
            .local_addr()?
            .as_pathname()
            .map(Path::to_path_buf)
            .ok_or_else(|| {
                std::io::Error::new(
                    ErrorKind::InvalidInput,
                    "the socket systemd passed has no path (abstract or unnamed): give the .socket unit ListenStream=/run/quietwatt/reader.sock",
                )
            })?;
        Ok((l, path))
    }))
}

/// The supplementary groups of process `pid`, from `/proc/PID/status` (empty
/// when it cannot be read: the process is gone, or /proc is hidden).
pub fn groups_of(pid: i32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("Groups:")).map(|g| {
                g.split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// Who the kernel says is at the other end of `stream`.
fn peer_of(stream: &UnixStream) -> std::io::Result<Peer> {
    let c = rustix::net::sockopt::socket_peercred(stream)?;
    let pid = c.pid.as_raw_pid();
    Ok(Peer {
        uid: c.uid.as_raw(),
        gid: c.gid.as_raw(),
        pid,
        // From the kernel's record of the connection; /proc only where the
        // kernel is older than 4.13 (a hardened service may not see it).
        groups: match quietwatt_sys::socket::peer_groups(stream) {
            Ok(g) => g,
            Err(_) if pid > 0 => groups_of(pid),
            Err(_) => Vec::new(),
        },
    })
}

/// A welcomed client: what it was granted and what it was last sent.
#[derive(Debug)]
struct Granted {
    interval_ns: u64,
    resolution_uj: u64,
    /// The snapshot's channels it reads, in its order.
    channels: Vec<usize>,
    /// The last snapshot sent: a newer one is sent once it is `interval_ns`
    /// newer.
    sent: Option<Arc<Snapshot>>,
}

#[derive(Debug)]
struct Conn {
    stream: UnixStream,
    peer: Peer,
    granted: Option<Granted>,
    opened: Instant,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    /// Requests in the current second, and when it began.
    window: (Instant, u32),
    /// Refused or gone: closed after the next flush.
    closing: bool,
}

/// The reader service: a listening socket, a policy, and the board it answers
/// from.
#[derive(Debug)]
pub struct Service {
    listener: UnixListener,
    policy: Policy,
    limits: Limits,
    board: Arc<Board>,
    conns: Vec<Conn>,
    stats: Arc<Stats>,
    /// Said by the service as it goes (refusals, drops): the caller's log.
    log: fn(&str),
}

impl Service {
    /// A service answering on `listener` from `board` as `policy` says; `log`
    /// hears one line per refusal or drop.
    pub fn new(
        listener: UnixListener,
        policy: Policy,
        limits: Limits,
        board: Arc<Board>,
        log: fn(&str),
    ) -> std::io::Result<Service> {
        listener.set_nonblocking(true)?;
        Ok(Service {
            listener,
            policy,
            limits,
            board,
            conns: Vec::new(),
            stats: Arc::new(Stats::default()),
            log,
        })
    }

    /// Its counts, shared.
    pub fn stats(&self) -> Arc<Stats> {
        Arc::clone(&self.stats)
    }

    /// Runs on a thread of its own (`quietwatt-reader`) until `stop` is set.
    pub fn spawn(mut self, stop: Arc<AtomicBool>) -> std::io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new()
            .name("quietwatt-reader".into())
            .spawn(move || self.run(&stop))
    }

    /// Answers clients until `stop` is set (looked at least every 200 ms).
    pub fn run(&mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            self.step(Duration::from_millis(200));
        }
    }

    /// One round: waits up to `timeout` for something to do, then does it.
    pub fn step(&mut self, timeout: Duration) {
        let now = Instant::now();
        // The next hello deadline bounds the wait.
        let wait = self
            .conns
            .iter()
            .filter(|c| c.granted.is_none())
            .map(|c| (c.opened + self.limits.hello_within).saturating_duration_since(now))
            .min()
            .map_or(timeout, |d| d.min(timeout));
        let ready: Vec<PollFlags> = {
            let mut fds = Vec::with_capacity(self.conns.len() + 1);
            fds.push(PollFd::new(&self.listener, PollFlags::IN));
            for c in &self.conns {
                let mut f = PollFlags::IN;
                if !c.out.is_empty() {
                    f |= PollFlags::OUT;
                }
                fds.push(PollFd::new(&c.stream, f));
            }
            let ts = rustix::time::Timespec {
                tv_sec: wait.as_secs() as i64,
                tv_nsec: i64::from(wait.subsec_nanos()),
            };
            match poll(&mut fds, Some(&ts)) {
                Ok(_) => fds.iter().map(PollFd::revents).collect(),
                // EINTR: nothing to do this round.
                Err(_) => return,
            }
        };
        for (i, flags) in ready.iter().enumerate().skip(1).rev() {
            let c = i - 1;
            if flags.intersects(PollFlags::IN | PollFlags::HUP | PollFlags::ERR) {
                self.serve(c);
            }
            if !self.conns[c].out.is_empty() {
                self.flush(c);
            }
        }
        self.expire_hellos();
        self.conns.retain(|c| !(c.closing && c.out.is_empty()));
        self.stats
            .open
            .store(self.conns.len() as u64, Ordering::Relaxed);
        if ready[0].contains(PollFlags::IN) {
            self.accept();
        }
    }

    /// Accepts what is waiting (at most 64 a round, so that a storm of
    /// connections does not starve the clients already served).
    fn accept(&mut self) {
        for _ in 0..64 {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(_) => return,
            };
            self.stats.accepted.fetch_add(1, Ordering::Relaxed);
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let peer = match peer_of(&stream) {
                Ok(p) => p,
                // Without credentials there is no one to grant anything to.
                Err(_) => continue,
            };
            let mine = self.conns.iter().filter(|c| c.peer.uid == peer.uid).count();
            let busy = if self.conns.len() >= self.limits.max_connections {
                Some(format!(
                    "the service holds its most connections ({}): try again later",
                    self.limits.max_connections
                ))
            } else if peer.uid != 0 && mine >= self.limits.max_per_user {
                Some(format!(
                    "user {} holds the most connections one user may ({}): close some",
                    peer.uid, self.limits.max_per_user
                ))
            } else {
                None
            };
            let mut conn = Conn {
                stream,
                peer,
                granted: None,
                opened: Instant::now(),
                inbuf: Vec::new(),
                out: Vec::new(),
                window: (Instant::now(), 0),
                closing: false,
            };
            if let Some(why) = busy {
                // Said once, without waiting: the connection is not kept.
                refuse(&mut conn, RefusalCode::Busy, why);
                let _ = conn.stream.write(&conn.out);
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            self.conns.push(conn);
        }
    }

    /// Reads what connection `i` sent and answers each whole line.
    fn serve(&mut self, i: usize) {
        let mut buf = [0u8; 4096];
        // At most 16 KiB a round: a client that floods does not hold the thread.
        for _ in 0..4 {
            if self.conns[i].closing {
                return;
            }
            match self.conns[i].stream.read(&mut buf) {
                Ok(0) => {
                    // Gone: nothing of it is kept.
                    let c = &mut self.conns[i];
                    c.closing = true;
                    c.out.clear();
                    return;
                }
                Ok(n) => {
                    self.conns[i].inbuf.extend_from_slice(&buf[..n]);
                    self.lines(i);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(_) => {
                    let c = &mut self.conns[i];
                    c.closing = true;
                    c.out.clear();
                    return;
                }
            }
        }
    }

    /// Answers every whole line of connection `i`'s input.
    fn lines(&mut self, i: usize) {
        loop {
            let c = &mut self.conns[i];
            if c.closing {
                c.inbuf.clear();
                return;
            }
            let Some(end) = c.inbuf.iter().position(|&b| b == b'\n') else {
                if c.inbuf.len() >= MAX_LINE {
                    self.refuse(
                        i,
                        RefusalCode::TooLong,
                        format!("a request longer than {MAX_LINE} bytes"),
                    );
                }
                return;
            };
            if end >= MAX_LINE {
                self.refuse(
                    i,
                    RefusalCode::TooLong,
                    format!("a request longer than {MAX_LINE} bytes"),
                );
                return;
            }
            let line: Vec<u8> = c.inbuf.drain(..=end).collect();
            let now = Instant::now();
            if now.duration_since(c.window.0) >= Duration::from_secs(1) {
                c.window = (now, 0);
            }
            c.window.1 += 1;
            if c.window.1 > self.limits.max_requests_per_second {
                let most = self.limits.max_requests_per_second;
                self.refuse(
                    i,
                    RefusalCode::Flood,
                    format!("more than {most} requests in a second: a reading changes at most every interval the welcome gave; ask about that often"),
                );
                return;
            }
            let line = line.strip_suffix(b"\n").unwrap_or(&line);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            self.request(i, line);
            if self.conns[i].out.len() > self.limits.max_unsent / 2 {
                self.flush(i);
            }
        }
    }

    /// Answers one request of connection `i`.
    fn request(&mut self, i: usize, line: &[u8]) {
        let req = match parse_request(line) {
            Ok(r) => r,
            Err(Malformed::Version(v)) => {
                return self.refuse(
                    i,
                    RefusalCode::Version,
                    format!("protocol version {v}: this service speaks version {VERSION}; use a quietwatt of the same version"),
                )
            }
            Err(Malformed::Garbage(why)) => {
                return self.refuse(
                    i,
                    RefusalCode::BadRequest,
                    format!("not a request of the quietwatt reader protocol ({why}); see docs/reader.md"),
                )
            }
        };
        match req {
            Request::Hello {
                interval_ns,
                resolution_uj,
                ..
            } => {
                if self.conns[i].granted.is_some() {
                    return self.refuse(i, RefusalCode::BadRequest, "a second hello".into());
                }
                self.hello(i, interval_ns.map(Duration::from_nanos), resolution_uj);
            }
            Request::Read { .. } => self.read(i),
        }
    }

    /// Judges connection `i`'s client and welcomes it, or refuses it.
    fn hello(&mut self, i: usize, interval: Option<Duration>, resolution_uj: Option<u64>) {
        let peer = self.conns[i].peer.clone();
        let grant: Grant = match self.policy.decide(&peer) {
            Ok(g) => g,
            Err(d) => return self.refuse(i, RefusalCode::Denied, d.0),
        };
        let snapshot = match self.board.latest() {
            Ok(s) => s,
            Err(why) => return self.refuse(i, RefusalCode::Unavailable, unavailable(&why)),
        };
        let channels: Vec<usize> = snapshot
            .channels
            .iter()
            .enumerate()
            .filter(|(_, c)| grant.allows(c.domain))
            .map(|(k, _)| k)
            .collect();
        if channels.is_empty() {
            let read: Vec<&str> = snapshot.channels.iter().map(|c| c.domain.name()).collect();
            return self.refuse(
                i,
                RefusalCode::Denied,
                format!(
                    "the policy ({}) lets user {} read none of the domains this service reads ({}): ask the admin to add them to its rule, or run as root",
                    grant.rule,
                    peer.uid,
                    read.join(", ")
                ),
            );
        }
        let (interval, resolution_uj, coarsened) = grant.for_request(interval, resolution_uj);
        let info = self.board.info();
        let welcome = Welcome {
            v: VERSION,
            uid: peer.uid,
            gid: peer.gid,
            interval_ns: interval.as_nanos() as u64,
            resolution_uj,
            coarsened,
            channels: channels
                .iter()
                .map(|&k| snapshot.channels[k].info())
                .collect(),
            mechanism: info.mechanism.clone(),
            emulated: info.emulated,
            staleness_ns: info.staleness.as_nanos() as u64,
            refresh_ns: info.refresh.as_nanos() as u64,
        };
        let c = &mut self.conns[i];
        c.granted = Some(Granted {
            interval_ns: welcome.interval_ns,
            resolution_uj,
            channels,
            sent: None,
        });
        c.out.extend(encode(&Reply::Welcome(welcome)));
        self.stats.welcomed.fetch_add(1, Ordering::Relaxed);
    }

    /// Sends connection `i` the latest reading it may have.
    fn read(&mut self, i: usize) {
        let latest = match self.board.latest() {
            Ok(s) => s,
            Err(why) => return self.refuse(i, RefusalCode::Unavailable, unavailable(&why)),
        };
        let c = &mut self.conns[i];
        let Some(g) = c.granted.as_mut() else {
            return self.refuse(
                i,
                RefusalCode::BadRequest,
                "a read before the hello: say hello first (docs/reader.md)".into(),
            );
        };
        // Held back until it is a whole interval newer than the last one sent.
        let s = match &g.sent {
            Some(prev) if latest.t_ns < prev.t_ns.saturating_add(g.interval_ns) => Arc::clone(prev),
            _ => latest,
        };
        let res = g.resolution_uj.max(1);
        let pick = |f: &dyn Fn(&crate::board::ChannelState) -> u64| -> Vec<u64> {
            g.channels.iter().map(|&k| f(&s.channels[k])).collect()
        };
        let reading = Reading {
            v: VERSION,
            seq: s.seq,
            t_ns: s.t_ns,
            energy_uj: pick(&|ch| ch.energy_uj / res * res),
            resets: pick(&|ch| ch.resets),
            ambiguous: pick(&|ch| ch.ambiguous),
            up: g.channels.iter().map(|&k| s.channels[k].up).collect(),
        };
        g.sent = Some(s);
        c.out.extend(encode(&Reply::Reading(reading)));
        self.stats.readings.fetch_add(1, Ordering::Relaxed);
    }

    /// Refuses connection `i`: the refusal is its last line.
    fn refuse(&mut self, i: usize, code: RefusalCode, message: String) {
        let c = &mut self.conns[i];
        (self.log)(&format!(
            "refused uid {} pid {} ({}): {message}",
            c.peer.uid,
            c.peer.pid,
            code.name()
        ));
        refuse(c, code, message);
        self.stats.refused.fetch_add(1, Ordering::Relaxed);
        self.flush(i);
    }

    /// Writes what connection `i` has waiting, without blocking; drops it when
    /// more waits than it may.
    fn flush(&mut self, i: usize) {
        let c = &mut self.conns[i];
        while !c.out.is_empty() {
            match c.stream.write(&c.out) {
                Ok(0) => break,
                Ok(n) => {
                    c.out.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => {
                    c.out.clear();
                    c.closing = true;
                    return;
                }
            }
        }
        if c.closing {
            // A refusal is said once, as far as the socket takes it.
            c.out.clear();
        } else if c.out.len() > self.limits.max_unsent {
            (self.log)(&format!(
                "dropped uid {} pid {}: {} bytes of replies unread",
                c.peer.uid,
                c.peer.pid,
                c.out.len()
            ));
            c.out.clear();
            c.closing = true;
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Refuses the connections that did not say hello in time.
    fn expire_hellos(&mut self) {
        let within = self.limits.hello_within;
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if c.granted.is_none() && !c.closing && c.opened.elapsed() >= within {
                self.refuse(
                    i,
                    RefusalCode::Timeout,
                    format!("no hello within {} s", within.as_secs_f64()),
                );
            }
        }
    }
}

/// Puts the refusal on `c`'s output and marks it for closing.
fn refuse(c: &mut Conn, code: RefusalCode, message: String) {
    c.out.extend(encode(&Reply::Error(Refusal {
        v: VERSION,
        code,
        message,
    })));
    c.closing = true;
}

/// A refusal's words while the service reads no counter.
fn unavailable(why: &str) -> String {
    format!(
        "the service reads no energy counter now ({why}); it tries again on its own: measure again later, or ask the admin (`quietwatt doctor` run as the service's user says what is missing)"
    )
}
