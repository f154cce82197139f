//! The exporter's HTTP side: one thread that accepts connections and reads their
//! request heads without blocking (`poll(2)` over every connection still sending
//! its head), and a fixed pool of workers that only ever get complete requests,
//! through a bounded queue. A client that connects and sends nothing, or a byte a
//! second, holds a few hundred bytes of the reader's memory until its head
//! deadline, never a worker: before, 8 such clients (or ~70 idle connections
//! queued behind them) made a real scrape wait 8.5 s, time out or get a 503. GET
//! and HEAD of `/metrics` (and `/`), content negotiation between the Prometheus
//! text format and OpenMetrics, optional basic auth compared in constant time;
//! `/healthz` for liveness probes (no credentials: it tells nothing of the
//! energy), 503 once the refreshes stopped.
//!
//! The limits: a head must arrive within 5 s of the accept and hold at most
//! 8 KiB (beyond: 431, closed); at most 1024 connections wait for their heads (the
//! oldest is closed to make room); 4 workers behind a queue of 64 complete
//! requests (beyond: 503 at once); a reply may take 5 s to write.
//!
//! The server is a small HTTP/1.x subset written here (GET and HEAD of one path,
//! `Connection: close`) rather than a crate: tiny_http, the smallest well-kept
//! one, sets no timeouts on its connections and starts a thread per client,
//! which is what a slow client must not be able to cause; the subset needs no
//! dependency and its limits are plain above. Its threads live as long as the
//! process.

use crate::exposition::{render, Exposition, ExpositionFormat};
use crate::http::{authorized, head_end, parse_head, BasicAuth, RequestHead};
use rustix::event::{PollFd, PollFlags, Timespec};
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// What the HTTP side reads: the latest exposition.
struct Published {
    exposition: RwLock<Arc<Exposition>>,
    scrapes: AtomicU64,
    auth: Option<BasicAuth>,
    /// When the latest exposition was published, and the interval before it.
    refreshed: Mutex<(Instant, Option<Duration>)>,
}

/// `/healthz` answers 503 once no exposition was published for this long, or
/// three of the last intervals between two, whichever is longer: the
/// exporter's thread is stuck (the process alive, its figures frozen).
const STALE_AFTER: Duration = Duration::from_secs(10);

/// A running server: publish each refresh's exposition to it.
pub struct Server {
    published: Arc<Published>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").finish_non_exhaustive()
    }
}

impl Server {
    /// Serves `first` on `listener` (its acceptor and head reader, and the
    /// workers), requiring `auth` when given, until the process ends.
    pub fn start(
        listener: TcpListener,
        auth: Option<BasicAuth>,
        first: Exposition,
    ) -> std::io::Result<Server> {
        let published = Arc::new(Published {
            exposition: RwLock::new(Arc::new(first)),
            scrapes: AtomicU64::new(0),
            auth,
            refreshed: Mutex::new((Instant::now(), None)),
        });
        start_http(listener, Arc::clone(&published))?;
        Ok(Server { published })
    }

    /// What the next scrapes show: swapped under a lock held for a pointer copy.
    pub fn publish(&self, exposition: Exposition) {
        *self
            .published
            .exposition
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(exposition);
        let mut r = self
            .published
            .refreshed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        *r = (now, Some(now - r.0));
    }

    /// Scrapes of `/metrics` answered so far.
    pub fn scrapes(&self) -> u64 {
        self.published.scrapes.load(Ordering::Relaxed)
    }

    /// Whether scrapes need basic auth.
    pub fn has_auth(&self) -> bool {
        self.published.auth.is_some()
    }
}

/// HTTP workers; a scrape is a copy and a render, so few are enough.
const WORKERS: usize = 4;
/// Complete requests waiting for a worker; beyond, answered 503 at once.
const QUEUE: usize = 64;
/// The most a request's head may take to arrive (from the connection's accept),
/// and its largest size.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
const MAX_HEAD: usize = 8192;
/// Connections still sending their heads; beyond, the oldest is closed to make
/// room (a real scraper sends its head at once, so it is never the oldest for long).
const MAX_PENDING: usize = 1024;
/// How long a worker may take to write a reply to a client that does not read.
const WRITE_DEADLINE: Duration = Duration::from_secs(5);

/// A connection whose head is still arriving.
struct Pending {
    stream: TcpStream,
    buf: Vec<u8>,
    deadline: Instant,
}

/// What became of a pending connection after a read.
enum Progress {
    Waiting,
    Done(String),
    Closed,
}

impl Pending {
    /// Reads what has arrived, without blocking.
    fn read(&mut self) -> Progress {
        let mut chunk = [0u8; 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Progress::Closed,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Progress::Waiting,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Progress::Closed,
            }
            if let Some(end) = head_end(&self.buf) {
                self.buf.truncate(end);
                return Progress::Done(String::from_utf8_lossy(&self.buf).into_owned());
            }
            if self.buf.len() > MAX_HEAD {
                let _ = self.stream.set_nonblocking(false);
                let _ = self
                    .stream
                    .set_write_timeout(Some(Duration::from_millis(100)));
                let _ = self.stream.write_all(&response(
                    431,
                    "text/plain",
                    "request too large\n",
                    &[],
                    false,
                ));
                return Progress::Closed;
            }
        }
    }
}

/// The acceptor and head reader, and the workers.
fn start_http(listener: TcpListener, published: Arc<Published>) -> std::io::Result<()> {
    let (tx, rx) = sync_channel::<(TcpStream, String)>(QUEUE);
    let rx = Arc::new(Mutex::new(rx));
    listener.set_nonblocking(true)?;
    for i in 0..WORKERS {
        let rx = Arc::clone(&rx);
        let p = Arc::clone(&published);
        std::thread::Builder::new()
            .name(format!("quietwatt-http{i}"))
            .spawn(move || worker(&rx, &p))?;
    }
    std::thread::Builder::new()
        .name("quietwatt-accept".into())
        .spawn(move || reader(&listener, &tx))?;
    Ok(())
}

/// Accepts connections and reads their heads as they arrive; hands each complete
/// request to the workers. Never blocks on one client.
fn reader(listener: &TcpListener, tx: &SyncSender<(TcpStream, String)>) {
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut ready: Vec<bool> = Vec::new();
    loop {
        let now = Instant::now();
        // Heads that did not arrive in time: closed without an answer.
        pending.retain(|p| p.deadline > now);
        let wait = pending
            .iter()
            .map(|p| p.deadline.saturating_duration_since(now))
            .min()
            .unwrap_or(Duration::from_secs(1))
            .clamp(Duration::from_millis(1), Duration::from_secs(1));
        let timeout = Timespec {
            tv_sec: wait.as_secs() as _,
            tv_nsec: wait.subsec_nanos() as _,
        };
        // The listener first, then each pending connection in order.
        let listener_ready = {
            let mut fds = Vec::with_capacity(pending.len() + 1);
            fds.push(PollFd::new(listener, PollFlags::IN));
            fds.extend(
                pending
                    .iter()
                    .map(|p| PollFd::new(&p.stream, PollFlags::IN)),
            );
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(n) if n > 0 => {}
                _ => continue, // a timeout (deadlines are swept above) or EINTR
            }
            ready.clear();
            ready.extend(fds[1..].iter().map(|f| !f.revents().is_empty()));
            !fds[0].revents().is_empty()
        };
        // The pending connections first, then the new ones, so that the indices
        // still match.
        let mut ready = ready.iter().copied();
        pending.retain_mut(|p| {
            if !ready.next().unwrap_or(false) {
                return true;
            }
            match p.read() {
                Progress::Waiting => true,
                Progress::Closed => false,
                Progress::Done(head) => {
                    dispatch(tx, &p.stream, head);
                    false
                }
            }
        });
        if listener_ready {
            loop {
                match listener.accept() {
                    Ok((stream, _)) => {
                        if stream.set_nonblocking(true).is_err() {
                            continue;
                        }
                        if pending.len() >= MAX_PENDING {
                            pending.pop_front();
                        }
                        pending.push_back(Pending {
                            stream,
                            buf: Vec::new(),
                            deadline: Instant::now() + REQUEST_DEADLINE,
                        });
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    // A client gone before accept, no descriptor left: none ends
                    // the server; the pending heads go on being read.
                    Err(_) => break,
                }
            }
        }
    }
}

/// Hands a complete request to a worker, or answers 503 when every worker is
/// behind a full queue.
fn dispatch(tx: &SyncSender<(TcpStream, String)>, stream: &TcpStream, head: String) {
    let Ok(stream) = stream.try_clone() else {
        return;
    };
    if stream.set_nonblocking(false).is_err() {
        return;
    }
    match tx.try_send((stream, head)) {
        Ok(()) | Err(TrySendError::Disconnected(_)) => {}
        Err(TrySendError::Full((mut s, _))) => {
            let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
            let _ = s.write_all(&response(503, "text/plain", "busy\n", &[], false));
        }
    }
}

fn worker(rx: &Mutex<Receiver<(TcpStream, String)>>, published: &Published) {
    loop {
        let (stream, head) = {
            let rx = rx.lock().unwrap_or_else(PoisonError::into_inner);
            match rx.recv() {
                Ok(s) => s,
                Err(_) => return,
            }
        };
        serve_one(stream, &head, published);
    }
}

/// Answers one request on one connection, then closes it.
fn serve_one(mut stream: TcpStream, head: &str, published: &Published) {
    let _ = stream.set_write_timeout(Some(WRITE_DEADLINE));
    let reply = match handle(head, published) {
        Some((status, ctype, body, extra, head_only)) => {
            response(status, ctype, &body, &extra, head_only)
        }
        None => response(400, "text/plain", "bad request\n", &[], false),
    };
    let _ = stream.write_all(&reply);
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

type Reply = (
    u16,
    &'static str,
    String,
    Vec<(&'static str, &'static str)>,
    bool,
);

/// Answers a request head; `None` when it is not HTTP.
fn handle(head: &str, published: &Published) -> Option<Reply> {
    let RequestHead {
        method,
        target,
        accept,
        authorization,
    } = parse_head(head)?;
    let head_only = match method {
        "GET" => false,
        "HEAD" => true,
        _ => {
            return Some((
                405,
                "text/plain",
                "only GET and HEAD\n".into(),
                vec![("Allow", "GET, HEAD")],
                false,
            ))
        }
    };
    let path = target.split('?').next().unwrap_or("");
    // A liveness probe (a kubelet's) sends no credentials, and the answer tells
    // nothing about the energy.
    if path == "/healthz" {
        return Some(health(published, head_only));
    }
    if let Some(expected) = &published.auth {
        if !authorized(authorization, expected.header()) {
            return Some((
                401,
                "text/plain",
                "unauthorized\n".into(),
                vec![("WWW-Authenticate", "Basic realm=\"quietwatt\"")],
                head_only,
            ));
        }
    }
    match path {
        "/metrics" => {
            let format = ExpositionFormat::negotiate(accept);
            // The lock is held for a pointer copy; rendering happens outside it.
            let e = Arc::clone(
                &published
                    .exposition
                    .read()
                    .unwrap_or_else(PoisonError::into_inner),
            );
            published.scrapes.fetch_add(1, Ordering::Relaxed);
            Some((
                200,
                format.content_type(),
                render(&e, format),
                Vec::new(),
                head_only,
            ))
        }
        "/" => Some((
            200,
            "text/html; charset=utf-8",
            "<html><body><a href=\"/metrics\">quietwatt metrics</a></body></html>\n".into(),
            Vec::new(),
            head_only,
        )),
        _ => Some((
            404,
            "text/plain",
            "not found: try /metrics\n".into(),
            Vec::new(),
            head_only,
        )),
    }
}

/// `/healthz`: 200 while the exporter publishes (saying when it last did, and
/// why it serves no energy when it cannot read any), 503 once its refreshes
/// stopped ([`STALE_AFTER`]).
fn health(published: &Published, head_only: bool) -> Reply {
    let (at, interval) = *published
        .refreshed
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let age = at.elapsed();
    let limit = interval.map_or(STALE_AFTER, |i| (i * 3).max(STALE_AFTER));
    let unavailable = published
        .exposition
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .unavailable
        .clone();
    let (status, body) = if age > limit {
        (
            503,
            format!(
                "stale: the figures were last refreshed {:.1} s ago\n",
                age.as_secs_f64()
            ),
        )
    } else {
        let without = unavailable.map_or(String::new(), |r| format!("; no energy: {r}"));
        (
            200,
            format!("ok: refreshed {:.3} s ago{without}\n", age.as_secs_f64()),
        )
    };
    (status, "text/plain", body, Vec::new(), head_only)
}

fn response(
    status: u16,
    ctype: &str,
    body: &str,
    extra: &[(&str, &str)],
    head_only: bool,
) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in extra {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    if !head_only {
        out.push_str(body);
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty exposition behind basic auth `u:p`, just published.
    fn published(unavailable: Option<String>) -> Published {
        Published {
            exposition: RwLock::new(Arc::new(Exposition {
                domains: Vec::new(),
                samples: 0,
                missed_deadlines: 0,
                version: "0".into(),
                resolution_j: 0.01,
                families: Vec::new(),
                emulated: false,
                unavailable,
            })),
            scrapes: AtomicU64::new(0),
            auth: Some(BasicAuth::new("u:p").unwrap()),
            refreshed: Mutex::new((Instant::now(), None)),
        }
    }

    #[test]
    fn requests_are_parsed_or_refused() {
        let p = published(None);
        assert!(handle("garbage", &p).is_none());
        assert!(handle("GET /metrics HTTP/1.1\r\nno colon", &p).is_none());
        assert_eq!(handle("GET /metrics HTTP/1.1", &p).unwrap().0, 401);
        let ok = handle("GET /metrics HTTP/1.1\r\nAuthorization: Basic dTpw", &p).unwrap();
        assert_eq!(ok.0, 200);
        let lower = handle("GET /metrics HTTP/1.1\r\nAuthorization: basic dTpw", &p).unwrap();
        assert_eq!(lower.0, 200, "the scheme is case-insensitive");
        let wrong = handle("GET /metrics HTTP/1.1\r\nAuthorization: basic dTpx", &p).unwrap();
        assert_eq!(wrong.0, 401);
        assert_eq!(ok.0, 200);
        assert_eq!(handle("POST /metrics HTTP/1.1", &p).unwrap().0, 405);
        assert_eq!(
            handle("GET /x HTTP/1.1\r\nAuthorization: Basic dTpw", &p)
                .unwrap()
                .0,
            404
        );
    }

    #[test]
    fn healthz_needs_no_credentials_and_turns_503_once_the_refreshes_stop() {
        let p = published(Some("no RAPL here".into()));
        let fresh = handle("GET /healthz HTTP/1.1", &p).unwrap();
        assert_eq!(fresh.0, 200);
        assert!(
            fresh.2.starts_with("ok: refreshed ") && fresh.2.contains("no energy: no RAPL here"),
            "{}",
            fresh.2
        );
        // Published 20 s ago, 1 s after the one before: 3 intervals and 10 s passed.
        let long_ago = Instant::now().checked_sub(Duration::from_secs(20)).unwrap();
        *p.refreshed.lock().unwrap() = (long_ago, Some(Duration::from_secs(1)));
        let stale = handle("HEAD /healthz HTTP/1.1", &p).unwrap();
        assert_eq!((stale.0, stale.4), (503, true));
        assert!(stale.2.starts_with("stale: "), "{}", stale.2);
        // An exporter that refreshes every 60 s is stale after 180 s, not 10 s.
        *p.refreshed.lock().unwrap() = (long_ago, Some(Duration::from_secs(60)));
        assert_eq!(handle("GET /healthz HTTP/1.1", &p).unwrap().0, 200);
        // Everything else still needs them.
        assert_eq!(handle("GET /metrics HTTP/1.1", &p).unwrap().0, 401);
    }
}
