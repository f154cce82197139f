//! The small part of HTTP/1.x an exporter reads from a client: where a request's
//! head ends, its request line and the two headers that matter (`Accept`,
//! `Authorization`), and basic auth compared in constant time. These read bytes from
//! anyone who can connect, so they are pure functions, fuzzed (`fuzz/`), and never
//! panic.

/// The `Authorization` header a server with basic auth expects.
#[derive(Clone, PartialEq, Eq)]
pub struct BasicAuth {
    header: String,
}

/// Why a `user:password` cannot be basic auth's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("basic auth needs user:password, with a user before the colon")]
pub struct NotUserPassword;

impl BasicAuth {
    /// Basic auth with `user:password` (RFC 7617): the user is not empty and has no
    /// colon, the password may be empty. Only the header value is kept, never the
    /// password alone.
    pub fn new(user_password: &str) -> Result<BasicAuth, NotUserPassword> {
        if !user_password.contains(':') || user_password.starts_with(':') {
            return Err(NotUserPassword);
        }
        Ok(BasicAuth {
            header: format!("Basic {}", base64(user_password.as_bytes())),
        })
    }

    /// The expected header value: `Basic ` and the credentials in base64.
    pub fn header(&self) -> &str {
        &self.header
    }
}

impl std::fmt::Debug for BasicAuth {
    // The credentials stay out of logs and panics.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BasicAuth(..)")
    }
}

/// Standard base64 with padding (RFC 4648), for the basic auth header.
pub fn base64(data: &[u8]) -> String {
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

/// What an exporter needs of a request head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHead<'a> {
    /// `GET`, `HEAD`, ...
    pub method: &'a str,
    /// The request target (`/metrics?x=1`).
    pub target: &'a str,
    /// The `Accept` header's value, if any.
    pub accept: Option<&'a str>,
    /// The `Authorization` header's value, if any.
    pub authorization: Option<&'a str>,
}

/// Where the head in `buf` ends (the offset of its blank line), if it has arrived:
/// `\r\n\r\n`, or `\n\n` from a lenient client.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| buf.windows(2).position(|w| w == b"\n\n"))
}

/// Parses a request head: `METHOD TARGET HTTP/1.x` and header lines. `None` when it
/// is not HTTP/1.x (a malformed request line or a header line without `:`).
pub fn parse_head(head: &str) -> Option<RequestHead<'_>> {
    let mut lines = head.lines();
    let mut parts = lines.next()?.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || !version.starts_with("HTTP/1.") || method.is_empty() {
        return None;
    }
    let mut r = RequestHead {
        method,
        target,
        accept: None,
        authorization: None,
    };
    for line in lines {
        let (k, v) = line.split_once(':')?;
        let k = k.trim();
        if k.eq_ignore_ascii_case("accept") {
            r.accept = Some(v.trim());
        } else if k.eq_ignore_ascii_case("authorization") {
            r.authorization = Some(v.trim());
        }
    }
    Some(r)
}

/// Whether an `Authorization` value matches the `expected` one (`Scheme
/// credentials`): the scheme case-insensitively (RFC 7235: `basic` is `Basic`), the
/// credentials in constant time.
pub fn authorized(header: Option<&str>, expected: &str) -> bool {
    let Some(h) = header else { return false };
    match (h.split_once(' '), expected.split_once(' ')) {
        (Some((scheme, cred)), Some((want_scheme, want))) => {
            scheme.eq_ignore_ascii_case(want_scheme)
                && constant_time_eq(cred.trim_start().as_bytes(), want.as_bytes())
        }
        _ => false,
    }
}

/// Equality whose time depends on the lengths only, not on where the bytes differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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
    fn basic_auth_needs_a_user_and_a_colon() {
        assert_eq!(BasicAuth::new("u:p").unwrap().header(), "Basic dTpw");
        assert!(BasicAuth::new("u:").is_ok());
        assert_eq!(BasicAuth::new("nocolon"), Err(NotUserPassword));
        assert_eq!(BasicAuth::new(":p"), Err(NotUserPassword));
        assert_eq!(
            format!("{:?}", BasicAuth::new("u:p").unwrap()),
            "BasicAuth(..)"
        );
    }

    #[test]
    fn heads_are_parsed_or_refused() {
        let h =
            parse_head("GET /metrics HTTP/1.1\r\nAccept: text/plain\r\nauthorization: Basic dTpw")
                .unwrap();
        assert_eq!(
            (h.method, h.target, h.accept, h.authorization),
            ("GET", "/metrics", Some("text/plain"), Some("Basic dTpw"))
        );
        for bad in [
            "",
            "GET",
            "GET /x",
            "GET /x HTTP/2",
            "GET /x HTTP/1.1 extra",
            "GET /x HTTP/1.1\r\nno colon",
            " /x HTTP/1.1",
        ] {
            assert_eq!(parse_head(bad), None, "{bad:?}");
        }
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest"), Some(14));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\n"), Some(14));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }

    #[test]
    fn basic_auth_takes_any_case_of_the_scheme_and_only_the_credentials() {
        assert!(authorized(Some("Basic dTpw"), "Basic dTpw"));
        assert!(authorized(Some("basic dTpw"), "Basic dTpw"));
        assert!(!authorized(Some("Basic dTpx"), "Basic dTpw"));
        assert!(!authorized(Some("Bearer dTpw"), "Basic dTpw"));
        assert!(!authorized(Some("dTpw"), "Basic dTpw"));
        assert!(!authorized(None, "Basic dTpw"));
    }
}
