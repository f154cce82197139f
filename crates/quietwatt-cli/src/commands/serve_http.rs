//! `quietwatt serve`'s HTTP side: an acceptor and a fixed pool of workers fed
//! through a bounded queue, each connection with read and write timeouts; GET and
//! HEAD of `/metrics` (and `/`), content negotiation between the Prometheus text
//! format and OpenMetrics, optional basic auth compared in constant time. See
//! `serve.rs` for why this small HTTP/1.x subset is written here.

use crate::exit::Failure;
use quietwatt::export::prometheus::{render, Exposition, ExpositionFormat};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, TrySendError};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// What the HTTP side reads: the latest exposition.
pub(super) struct Published {
    pub(super) exposition: RwLock<Arc<Exposition>>,
    pub(super) scrapes: AtomicU64,
    pub(super) auth: Option<String>,
}

/// HTTP workers; a scrape is a copy and a render, so few are enough.
const WORKERS: usize = 8;
/// Connections accepted and waiting for a worker; beyond, refused with a 503.
const QUEUE: usize = 64;
/// The most a request's head may take to arrive, and its largest size.
const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
const MAX_HEAD: usize = 8192;

/// Standard base64 with padding (RFC 4648), for the basic auth header.
pub(super) fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(A[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// The acceptor and the workers.
pub(super) fn start_http(listener: TcpListener, published: Arc<Published>) -> Result<(), Failure> {
    let (tx, rx) = sync_channel::<TcpStream>(QUEUE);
    let rx = Arc::new(Mutex::new(rx));
    let spawn_err =
        |e: std::io::Error| Failure::new(1, format!("cannot start the HTTP threads: {e}"));
    for i in 0..WORKERS {
        let rx = Arc::clone(&rx);
        let p = Arc::clone(&published);
        std::thread::Builder::new()
            .name(format!("quietwatt-http{i}"))
            .spawn(move || worker(&rx, &p))
            .map_err(spawn_err)?;
    }
    std::thread::Builder::new()
        .name("quietwatt-accept".into())
        .spawn(move || loop {
            match listener.accept() {
                Ok((stream, _)) => match tx.try_send(stream) {
                    Ok(()) => {}
                    Err(TrySendError::Full(mut s)) => {
                        let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
                        let _ = s.write_all(&response(503, "text/plain", "busy\n", &[], false));
                    }
                    Err(TrySendError::Disconnected(_)) => return,
                },
                // EINTR from a signal, a client gone before accept, no descriptor
                // left: none ends the server.
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        })
        .map_err(spawn_err)?;
    Ok(())
}

fn worker(rx: &Mutex<Receiver<TcpStream>>, published: &Published) {
    loop {
        let stream = {
            let rx = rx.lock().unwrap_or_else(|p| p.into_inner());
            match rx.recv() {
                Ok(s) => s,
                Err(_) => return,
            }
        };
        serve_one(stream, published);
    }
}

/// One request on one connection, then close.
fn serve_one(mut stream: TcpStream, published: &Published) {
    let _ = stream.set_write_timeout(Some(REQUEST_DEADLINE));
    let Some(head) = read_head(&mut stream) else {
        return;
    };
    let reply = match handle(&head, published) {
        Some((status, ctype, body, extra, head_only)) => {
            response(status, ctype, &body, &extra, head_only)
        }
        None => response(400, "text/plain", "bad request\n", &[], false),
    };
    let _ = stream.write_all(&reply);
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// The request's head, or `None` when the client sent nothing usable in time
/// (the connection is then closed without an answer, or with a 400 for garbage).
fn read_head(stream: &mut TcpStream) -> Option<String> {
    let deadline = Instant::now() + REQUEST_DEADLINE;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    loop {
        let left = deadline.checked_duration_since(Instant::now())?;
        if stream
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .is_err()
        {
            return None;
        }
        let n = match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find_end(&buf) {
            buf.truncate(end);
            return Some(String::from_utf8_lossy(&buf).into_owned());
        }
        if buf.len() > MAX_HEAD {
            let _ = stream.write_all(&response(
                431,
                "text/plain",
                "request too large\n",
                &[],
                false,
            ));
            return None;
        }
    }
}

fn find_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| buf.windows(2).position(|w| w == b"\n\n"))
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
    let mut lines = head.lines();
    let mut parts = lines.next()?.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !version.starts_with("HTTP/1.") {
        return None;
    }
    let mut accept = None;
    let mut authorization = None;
    for line in lines {
        let (k, v) = line.split_once(':')?;
        match k.trim().to_ascii_lowercase().as_str() {
            "accept" => accept = Some(v.trim()),
            "authorization" => authorization = Some(v.trim()),
            _ => {}
        }
    }
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
    if let Some(expected) = &published.auth {
        if !authorization.is_some_and(|a| constant_time_eq(a.as_bytes(), expected.as_bytes())) {
            return Some((
                401,
                "text/plain",
                "unauthorized\n".into(),
                vec![("WWW-Authenticate", "Basic realm=\"quietwatt\"")],
                head_only,
            ));
        }
    }
    let path = target.split('?').next().unwrap_or("");
    match path {
        "/metrics" => {
            let format = ExpositionFormat::negotiate(accept);
            // The lock is held for a pointer copy; rendering happens outside it.
            let e = Arc::clone(
                &published
                    .exposition
                    .read()
                    .unwrap_or_else(|p| p.into_inner()),
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

/// Compares without stopping at the first difference, so the time taken does not
/// tell how much of a guessed password was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64(b"user:pass"), "dXNlcjpwYXNz");
    }

    #[test]
    fn requests_are_parsed_or_refused() {
        let p = Published {
            exposition: RwLock::new(Arc::new(Exposition {
                domains: Vec::new(),
                samples: 0,
                missed_deadlines: 0,
                cpu_seconds: None,
                wakeups: None,
                version: "0".into(),
                resolution_j: 0.01,
                idle: Vec::new(),
                cpu_wakeups: Vec::new(),
                attribution: None,
            })),
            scrapes: AtomicU64::new(0),
            auth: Some(format!("Basic {}", base64(b"u:p"))),
        };
        assert!(handle("garbage", &p).is_none());
        assert!(handle("GET /metrics HTTP/1.1\r\nno colon", &p).is_none());
        assert_eq!(handle("GET /metrics HTTP/1.1", &p).unwrap().0, 401);
        let ok = handle("GET /metrics HTTP/1.1\r\nAuthorization: Basic dTpw", &p).unwrap();
        assert_eq!(ok.0, 200);
        assert_eq!(handle("POST /metrics HTTP/1.1", &p).unwrap().0, 405);
        assert_eq!(
            handle("GET /x HTTP/1.1\r\nAuthorization: Basic dTpw", &p)
                .unwrap()
                .0,
            404
        );
    }
}
