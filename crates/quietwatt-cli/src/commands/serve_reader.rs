//! `serve --socket`: the local reader service's flags and words; and the
//! client's (`run --socket`, and `run` reading through the service where the
//! counters cannot be opened). The
//! protocol, the policy and the connections are the `quietwatt-reader`
//! crate's; the figures it answers from are the exporter's refreshes
//! (`quietwatt_exporter::reader`).

use crate::exit::{Failure, USAGE};
use quietwatt::reader::{policy::SAFE_INTERVAL, Board, Limits, Names, Policy, Service};
use quietwatt_exporter::Exporter;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// A running reader service.
pub struct Reader {
    /// What the exporter publishes on.
    pub board: Arc<Board>,
    /// How often the exporter refreshes for it.
    pub every: Duration,
    path: PathBuf,
    /// Bound here, so removed here (systemd removes the sockets it made).
    owned: bool,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Reader {
    /// Loads the policy, binds `path` (or takes the socket systemd passed),
    /// publishes the exporter's first figures
    /// and starts the service's thread.
    pub fn start(
        path: &Path,
        policy: Option<&Path>,
        exporter: &mut Exporter,
    ) -> Result<Reader, Failure> {
        let names = Names::system();
        let policy = match policy {
            Some(p) => Policy::load(p, &names).map_err(|e| Failure::usage(e.to_string()))?,
            None => Policy::default_for(&names),
        };
        for w in policy.warnings() {
            eprintln!("quietwatt: warning: --policy: {w}");
        }
        // Every refresh the finest rule can use, but no faster than the
        // counters are read.
        let every = policy
            .finest_interval()
            .unwrap_or(SAFE_INTERVAL)
            .max(exporter.freq().period());
        let board = Arc::new(Board::new(exporter.service_info(every)));
        let first = exporter.refresh();
        exporter.publish_to(&board, 1, &first);
        // Under systemd the socket unit made the socket (its mode, its group)
        // and passed it; otherwise it is bound here.
        let (listener, path, owned) = match quietwatt::reader::service::activated() {
            Some(Ok((l, at))) => (l, at, false),
            Some(Err(e)) => {
                return Err(Failure::new(
                    USAGE,
                    format!("the socket passed by systemd: {e}"),
                ))
            }
            None => {
                let l = quietwatt::reader::service::bind(path).map_err(|e| {
                    Failure::new(
                        USAGE,
                        format!(
                            "--socket {}: {e}; give a path in a directory you may write (the service's default is {}, which needs root)",
                            path.display(),
                            quietwatt::reader::DEFAULT_SOCKET
                        ),
                    )
                })?;
                (l, path.to_path_buf(), true)
            }
        };
        let service = Service::new(listener, policy, Limits::default(), Arc::clone(&board), log)
            .map_err(|e| Failure::new(1, format!("--socket {}: {e}", path.display())))?;
        let stop = Arc::new(AtomicBool::new(false));
        let thread = service.spawn(Arc::clone(&stop)).map_err(|e| {
            Failure::new(1, format!("cannot start the reader service's thread: {e}"))
        })?;
        Ok(Reader {
            board,
            every,
            path,
            owned,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Reader {
    /// Stops the service and removes the socket it bound.
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if self.owned {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The service's refusals and drops, on stderr.
fn log(line: &str) {
    eprintln!("quietwatt: reader: {line}");
}

/// A source to measure with, and whether it reads quietwatt's emulator
/// through the service (the reports say EMULATED then too).
pub type Opened = (Box<dyn quietwatt::Source>, bool);

/// `--socket PATH`: the service at `path`, as the source to measure with.
pub fn connect(
    path: &Path,
    selection: &quietwatt::Selection,
    freq: Option<quietwatt::FreqArg>,
) -> Result<Opened, Failure> {
    let s = quietwatt::reader::SocketSource::connect(path, want(freq), selection)
        .map_err(|e| Failure::from(quietwatt::SourceError::from(e)))?;
    let emulated = s.welcome().emulated;
    Ok((Box::new(s), emulated))
}

/// What `run` asks the service for: a reading as often as `--freq` reads (the
/// policy may coarsen it; the note says so), at the policy's resolution.
pub fn want(freq: Option<quietwatt::FreqArg>) -> quietwatt::reader::Want {
    quietwatt::reader::Want {
        interval: match freq {
            Some(quietwatt::FreqArg::Fixed(f)) => Some(f.period()),
            _ => None,
        },
        resolution_uj: None,
    }
}
