//! The client: the reader service's socket as a [`Source`], so that the engine
//! (a `Session`, `quietwatt run`) measures through it exactly as it measures
//! through a local mechanism: the same meter, wrap and reset handling,
//! uncertainty and counter events.
//!
//! Each channel's raw value is the service's energy since it started in steps
//! of the granted resolution (the [`EnergyUnit`] of the channel), so that the
//! meter's quantum, and with it every reported uncertainty, includes the
//! policy's coarsening. A reading changes at most every granted interval: the
//! client asks again only once a newer one can exist, and the readings in
//! between repeat the last one, which the meter sees as a counter that stood
//! still (its update interval, and so the uncertainty, grows to match).

use crate::protocol::{encode, Reading, Reply, Request, Welcome, MAX_LINE, VERSION};
use crate::ReaderError;
use quietwatt_core::counter::Wrap;
use quietwatt_core::domain::{Domain, DomainId, Socket};
use quietwatt_core::units::EnergyUnit;
use quietwatt_sources::{Channel, Mechanism, Selection, Source, Via};
use quietwatt_sys::clock::monotonic_ns;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a reply may take before the service is taken to be stuck.
const REPLY_WITHIN: Duration = Duration::from_secs(5);

/// What a client asks for beyond the policy's defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Want {
    /// The finest interval between two readings it would like (`None`: the
    /// policy's).
    pub interval: Option<Duration>,
    /// The finest energy step it would like, µJ (`None`: the policy's).
    pub resolution_uj: Option<u64>,
}

/// A connection to the reader service, read as a [`Source`].
#[derive(Debug)]
pub struct SocketSource {
    path: PathBuf,
    stream: BufReader<UnixStream>,
    welcome: Welcome,
    channels: Vec<Channel>,
    /// For each channel, its index in the service's readings.
    index: Vec<usize>,
    /// The last reading's raw values and its time, and when to ask again.
    last: Option<(u64, Vec<u64>)>,
    ask_at_ns: u64,
    notes: Vec<String>,
    via: Option<Via>,
    line: String,
}

impl SocketSource {
    /// Connects to the service at `path`, says hello with `want`, and keeps the
    /// channels `selection` names among those granted.
    pub fn connect(
        path: &Path,
        want: Want,
        selection: &Selection,
    ) -> Result<SocketSource, ReaderError> {
        let stream = UnixStream::connect(path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                ReaderError::NotFound {
                    path: path.to_path_buf(),
                }
            } else {
                ReaderError::Connect {
                    path: path.to_path_buf(),
                    source,
                }
            }
        })?;
        let io = |source| ReaderError::Io {
            path: path.to_path_buf(),
            source,
        };
        stream.set_read_timeout(Some(REPLY_WITHIN)).map_err(io)?;
        stream.set_write_timeout(Some(REPLY_WITHIN)).map_err(io)?;
        let mut s = SocketSource {
            path: path.to_path_buf(),
            stream: BufReader::new(stream),
            welcome: Welcome {
                v: VERSION,
                uid: 0,
                gid: 0,
                interval_ns: 0,
                resolution_uj: 1,
                coarsened: false,
                channels: Vec::new(),
                mechanism: String::new(),
                emulated: false,
                staleness_ns: 0,
                refresh_ns: 0,
            },
            channels: Vec::new(),
            index: Vec::new(),
            last: None,
            ask_at_ns: 0,
            notes: Vec::new(),
            via: None,
            line: String::new(),
        };
        let hello = Request::Hello {
            v: VERSION,
            interval_ns: want.interval.map(|d| d.as_nanos() as u64),
            resolution_uj: want.resolution_uj,
        };
        let welcome = match s.ask(&hello)? {
            Reply::Welcome(w) => w,
            other => return Err(s.unexpected(&other)),
        };
        let resolution = welcome.resolution_uj.max(1);
        let mut granted = Vec::new();
        for (k, c) in welcome.channels.iter().enumerate() {
            let domain: Domain = c.domain.parse().map_err(|_| ReaderError::Protocol {
                path: path.to_path_buf(),
                why: format!(
                    "the service reads a domain this quietwatt does not know: {}",
                    c.domain
                ),
            })?;
            let id = DomainId {
                socket: Socket(c.socket),
                die: c.die,
                domain,
            };
            granted.push((k, id));
        }
        let kept = selection
            .apply(granted, |(_, id)| *id)
            .map_err(ReaderError::Selection)?;
        s.index = kept.iter().map(|(k, _)| *k).collect();
        s.channels = kept
            .iter()
            .map(|(_, id)| Channel {
                id: *id,
                // The granted resolution is the counter's step: the meter's
                // quantum, and so the uncertainty, include the coarsening.
                unit: EnergyUnit::Scale(resolution as f64 * 1e-6),
                // µJ since the service started, in 64 bits: it never wraps.
                wrap: Wrap::Modulus(u64::MAX),
                origin: path.to_path_buf(),
                limit: None,
            })
            .collect();
        s.notes.push(format!(
            "read through the reader service at {} ({} counters{}), as uid {}: a new reading at most every {} ms, rounded down to {} µJ{}",
            path.display(),
            welcome.mechanism,
            if welcome.emulated { " of quietwatt's emulator" } else { "" },
            welcome.uid,
            welcome.interval_ns.max(welcome.refresh_ns) as f64 / 1e6,
            resolution,
            if welcome.coarsened {
                " (finer was asked for: the service's policy coarsened it)"
            } else {
                ""
            }
        ));
        s.via = Some(Via::new(
            path.to_path_buf(),
            welcome.mechanism.clone(),
            welcome.emulated,
            welcome.uid,
            welcome.interval_ns.max(welcome.refresh_ns) as f64 / 1e9,
            resolution,
            welcome.coarsened,
        ));
        s.welcome = welcome;
        Ok(s)
    }

    /// What the service granted.
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The finest interval between two different readings.
    pub fn interval(&self) -> Duration {
        Duration::from_nanos(self.welcome.interval_ns)
    }

    /// The latest reading the service sends (asked for now, whatever the
    /// interval).
    pub fn reading(&mut self) -> Result<Reading, ReaderError> {
        match self.ask(&Request::Read { v: VERSION })? {
            Reply::Reading(r) => {
                let n = self.welcome.channels.len();
                if r.energy_uj.len() != n || r.resets.len() != n || r.up.len() != n {
                    return Err(ReaderError::Protocol {
                        path: self.path.clone(),
                        why: format!(
                            "a reading of {} counters where {n} were granted",
                            r.energy_uj.len()
                        ),
                    });
                }
                Ok(r)
            }
            other => Err(self.unexpected(&other)),
        }
    }

    /// Sends one request and reads its reply.
    fn ask(&mut self, req: &Request) -> Result<Reply, ReaderError> {
        let path = &self.path;
        let gone = |source: std::io::Error| ReaderError::Io {
            path: path.clone(),
            source,
        };
        self.stream
            .get_mut()
            .write_all(&encode(req))
            .map_err(gone)?;
        self.line.clear();
        let n = (&mut self.stream)
            .take(MAX_LINE as u64)
            .read_line(&mut self.line)
            .map_err(gone)?;
        if n == 0 {
            return Err(ReaderError::Closed { path: path.clone() });
        }
        let reply: Reply =
            serde_json::from_str(self.line.trim_end()).map_err(|e| ReaderError::Protocol {
                path: path.clone(),
                why: format!("an unreadable reply ({e})"),
            })?;
        if let Reply::Error(r) = reply {
            return Err(ReaderError::Refused {
                path: path.clone(),
                code: r.code,
                message: r.message,
            });
        }
        Ok(reply)
    }

    fn unexpected(&self, reply: &Reply) -> ReaderError {
        ReaderError::Protocol {
            path: self.path.clone(),
            why: format!("an unexpected reply: {reply:?}"),
        }
    }
}

use std::io::Read as _;

impl Source for SocketSource {
    fn mechanism(&self) -> Mechanism {
        Mechanism::Socket
    }

    fn channels(&self) -> &[Channel] {
        &self.channels
    }

    fn notes(&self) -> &[String] {
        &self.notes
    }

    fn via(&self) -> Option<&Via> {
        self.via.as_ref()
    }

    /// A reading is published at least every refresh, sent at most every
    /// granted interval, and was taken up to the staleness before: each
    /// reading may lag the truth by the larger of the first two plus the third.
    fn update_interval(&self) -> Option<Duration> {
        let w = &self.welcome;
        Some(Duration::from_nanos(
            w.interval_ns
                .max(w.refresh_ns)
                .saturating_add(w.staleness_ns),
        ))
    }

    /// The service's latest reading; between two readings the service may send
    /// (the granted interval), the last one again without asking.
    fn read(&mut self, out: &mut [u64]) -> quietwatt_sources::Result<()> {
        let now = monotonic_ns();
        if let Some((_, raw)) = &self.last {
            if now < self.ask_at_ns {
                out.copy_from_slice(raw);
                return Ok(());
            }
        }
        let r = self.reading()?;
        let res = self.welcome.resolution_uj.max(1);
        for (o, &k) in out.iter_mut().zip(&self.index) {
            *o = r.energy_uj[k] / res;
        }
        let interval = self.welcome.interval_ns;
        let newer = self.last.as_ref().is_none_or(|(t, _)| r.t_ns > *t);
        // A new reading: the next can exist one interval after it. The same one
        // again: soon (a twentieth of the interval, at least 1 ms).
        self.ask_at_ns = if newer {
            r.t_ns.saturating_add(interval)
        } else {
            now.saturating_add((interval / 20).max(1_000_000))
        };
        // The last reading's buffer is reused: allocated once, at the first.
        match &mut self.last {
            Some((t, raw)) => {
                *t = r.t_ns;
                raw.copy_from_slice(out);
            }
            None => self.last = Some((r.t_ns, out.to_vec())),
        }
        Ok(())
    }
}
