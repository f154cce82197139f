//! The wire format: one JSON object per line (`\n`-terminated, UTF-8), at most
//! [`MAX_LINE`] bytes, every message carrying the protocol's version `v`
//! ([`VERSION`]). A client says [`Request::Hello`] once, then asks
//! [`Request::Read`] as often as it likes; each request gets exactly one reply,
//! in order. A refusal ([`Reply::Error`]) is the last line before the service
//! closes the connection. `docs/reader.md` is the human-readable version of this
//! module.

use serde::{Deserialize, Serialize};

/// The protocol version this crate speaks; a message of another is refused
/// ([`RefusalCode::Version`]).
pub const VERSION: u32 = 1;

/// The longest line either side sends or accepts, newline included: a request
/// longer than this is refused ([`RefusalCode::TooLong`]). A reply of 32
/// channels fits with room to spare.
pub const MAX_LINE: usize = 8 * 1024;

/// What a client sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// The first message: what the client would like. Everything is optional;
    /// the service grants at most what the policy allows (coarser, never finer)
    /// and says what it granted in [`Welcome`].
    Hello {
        /// The protocol version ([`VERSION`]).
        v: u32,
        /// The finest interval between two different readings the client would
        /// like, in nanoseconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        interval_ns: Option<u64>,
        /// The finest energy step it would like, in µJ.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resolution_uj: Option<u64>,
    },
    /// The latest reading the client may have.
    Read {
        /// The protocol version ([`VERSION`]).
        v: u32,
    },
}

impl Request {
    /// The version the message says it speaks.
    pub fn version(&self) -> u32 {
        match self {
            Request::Hello { v, .. } | Request::Read { v } => *v,
        }
    }
}

/// One counter the service reads, in the order of every [`Reading`]'s vectors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelInfo {
    /// The package.
    pub socket: u32,
    /// The die, on multi-die parts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub die: Option<u32>,
    /// `package`, `core`, `uncore`, `dram` or `psys`.
    pub domain: String,
}

/// The reply to [`Request::Hello`]: who the kernel says the client is and what
/// the policy grants it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    /// The protocol version ([`VERSION`]).
    pub v: u32,
    /// The client's user id, from `SO_PEERCRED`.
    pub uid: u32,
    /// Its group id, from `SO_PEERCRED`.
    pub gid: u32,
    /// The finest interval between two different readings it gets, ns: a
    /// reading newer than the last one sent by less than this is held back.
    pub interval_ns: u64,
    /// Every energy it gets is rounded down to a multiple of this many µJ.
    pub resolution_uj: u64,
    /// Whether the client asked for finer than the policy allows (and got the
    /// policy's instead).
    pub coarsened: bool,
    /// The counters it may read, in the order of each [`Reading`]'s vectors.
    pub channels: Vec<ChannelInfo>,
    /// The mechanism the service reads the counters with (`powercap`, `perf`,
    /// ...).
    pub mechanism: String,
    /// Whether the service reads quietwatt's emulator, not RAPL.
    pub emulated: bool,
    /// How old a reading can be when it is published, ns: the service's
    /// sampling period (its readings are taken at that rate and published at
    /// each refresh).
    pub staleness_ns: u64,
    /// How often the service publishes a new reading, ns: a reading may be this
    /// much older than the moment it is read, beyond its staleness.
    pub refresh_ns: u64,
}

/// The reply to [`Request::Read`]: every granted counter's energy since the
/// service started, already corrected for wraps and resets by its engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading {
    /// The protocol version ([`VERSION`]).
    pub v: u32,
    /// The service's refresh this reading is from (increasing; the same
    /// number for a reading sent again).
    pub seq: u64,
    /// When it was published, CLOCK_MONOTONIC ns (the clock every process of
    /// the machine shares): the counters were read at most
    /// [`Welcome::staleness_ns`] before.
    pub t_ns: u64,
    /// Each counter's energy since the service started, µJ, rounded down to
    /// [`Welcome::resolution_uj`]; never decreasing.
    pub energy_uj: Vec<u64>,
    /// Each counter's resets, steps back and jumps that its energy absorbed
    /// (the energy of those intervals is lost), and restarts of its session.
    pub resets: Vec<u64>,
    /// Each counter's decreases that a wrap and a restart explained equally
    /// well (counted as the wrap).
    pub ambiguous: Vec<u64>,
    /// Whether each counter is still read (a failed one keeps its last energy).
    pub up: Vec<bool>,
}

/// Why the service refuses a client (always followed by closing the
/// connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RefusalCode {
    /// The policy gives this user nothing.
    Denied,
    /// Not a request of this protocol (not JSON, not an object, an unknown op
    /// or field, a read before the hello).
    BadRequest,
    /// A line longer than [`MAX_LINE`].
    TooLong,
    /// Another version of the protocol.
    Version,
    /// More requests a second than any reader needs.
    Flood,
    /// The service holds as many connections as it allows (in all, or for this
    /// user).
    Busy,
    /// No hello within the time allowed.
    Timeout,
    /// The service reads no counter at the moment (it says why).
    Unavailable,
}

impl RefusalCode {
    /// The code as it is sent.
    pub fn name(self) -> &'static str {
        match self {
            RefusalCode::Denied => "denied",
            RefusalCode::BadRequest => "bad_request",
            RefusalCode::TooLong => "too_long",
            RefusalCode::Version => "version",
            RefusalCode::Flood => "flood",
            RefusalCode::Busy => "busy",
            RefusalCode::Timeout => "timeout",
            RefusalCode::Unavailable => "unavailable",
        }
    }
}

/// A refusal: its code for a program, its message (with the fix) for a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    /// The protocol version ([`VERSION`]).
    pub v: u32,
    /// What kind of refusal.
    pub code: RefusalCode,
    /// What happened and what to do about it.
    pub message: String,
}

/// What the service sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Reply {
    /// The answer to a hello.
    Welcome(Welcome),
    /// The answer to a read.
    Reading(Reading),
    /// A refusal; the connection is closed after it.
    Error(Refusal),
}

/// `message` as one line, newline included.
pub fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    // Serialising these types cannot fail: no maps with non-string keys, no
    // custom serialisers.
    let mut line = serde_json::to_vec(message).unwrap_or_default();
    line.push(b'\n');
    line
}

/// Why a line is not a request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Malformed {
    /// Not a request of this protocol: what the parser said.
    Garbage(String),
    /// A well-formed message of another version.
    Version(u32),
}

/// Parses one line (without its newline) as a request.
pub fn parse_request(line: &[u8]) -> Result<Request, Malformed> {
    match serde_json::from_slice::<Request>(line) {
        Ok(r) if r.version() == VERSION => Ok(r),
        Ok(r) => Err(Malformed::Version(r.version())),
        Err(e) => {
            // A message of another version may carry fields this one lacks: its
            // version is still worth naming.
            #[derive(Deserialize)]
            struct Versioned {
                v: u32,
            }
            match serde_json::from_slice::<Versioned>(line) {
                Ok(x) if x.v != VERSION => Err(Malformed::Version(x.v)),
                _ => Err(Malformed::Garbage(e.to_string())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_other_versions_and_garbage_are_told_apart() {
        let hello = Request::Hello {
            v: VERSION,
            interval_ns: Some(1_000_000),
            resolution_uj: None,
        };
        let line = encode(&hello);
        assert_eq!(
            std::str::from_utf8(&line).unwrap(),
            "{\"op\":\"hello\",\"v\":1,\"interval_ns\":1000000}\n"
        );
        assert_eq!(parse_request(&line[..line.len() - 1]), Ok(hello));
        assert_eq!(
            parse_request(br#"{"op":"read","v":1}"#),
            Ok(Request::Read { v: 1 })
        );
        assert_eq!(
            parse_request(br#"{"op":"read","v":2,"new_field":true}"#),
            Err(Malformed::Version(2))
        );
        for garbage in [
            &b"GET / HTTP/1.1"[..],
            b"{\"op\":\"read\"}",
            b"{\"op\":\"write\",\"v\":1}",
            b"{\"op\":\"read\",\"v\":1,\"extra\":1}",
            b"[1,2,3]",
            b"\xff\xfe",
        ] {
            assert!(
                matches!(parse_request(garbage), Err(Malformed::Garbage(_))),
                "{:?}",
                String::from_utf8_lossy(garbage)
            );
        }
    }

    #[test]
    fn a_reading_of_32_channels_fits_in_a_line() {
        let r = Reply::Reading(Reading {
            v: VERSION,
            seq: u64::MAX,
            t_ns: u64::MAX,
            energy_uj: vec![u64::MAX; 32],
            resets: vec![u64::MAX; 32],
            ambiguous: vec![u64::MAX; 32],
            up: vec![false; 32],
        });
        assert!(encode(&r).len() < MAX_LINE);
    }
}
