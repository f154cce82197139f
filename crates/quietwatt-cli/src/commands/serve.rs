//! `quietwatt serve`: a Prometheus / OpenMetrics exporter.
//!
//! Three kinds of threads, none waiting on another for long:
//! - the samplers (each a [`Session`] with a rate). Where the kernel can sample
//!   the counters itself (ebpf, else perf-ring: `--mechanism`, or the automatic
//!   choice when it finds perf), one session reads every domain and its thread wakes once per drain
//!   period (`--drain-hz`, 1 s): about one user-space wake-up a second whatever
//!   `--freq`. Otherwise one polled session per domain, each reading at `--freq`,
//!   so that a counter that vanishes (a powercap zone, an MSR) ends its own
//!   session only, and the others go on;
//! - the main thread, which every `--min-interval` drains the sessions, takes
//!   their snapshots and publishes one [`Exposition`] (an `Arc` swapped under a
//!   lock held for a pointer copy): values change at most that often, whatever
//!   the scrapers do. It sleeps in `sigtimedwait` between refreshes, so that a
//!   stop signal ends it at once and nothing else wakes it;
//! - the HTTP side: an acceptor and a fixed pool of workers fed through a bounded
//!   queue, each connection with read and write timeouts, so slow or malformed
//!   clients cost a worker for seconds at most and never reach the sessions.
//!
//! The server is a small HTTP/1.x subset written here (GET and HEAD of one path,
//! `Connection: close`) rather than a crate: tiny_http, the smallest well-kept
//! one, sets no timeouts on its connections and starts a thread per client,
//! which is what a slow client must not be able to cause; the subset needs no
//! dependency and its limits are plain below.

use super::attribute::ByArg;
use super::serve_attribution::ServeAttribution;
use super::serve_http::{base64, start_http, Published};
use super::{parse_duration, selection};
use crate::emulated::Environment;
use crate::exit::{Failure, USAGE};
use crate::signals;
use quietwatt::export::prometheus::{DomainSeries, Exposition};
use quietwatt::inkernel::{self, Opened, DEFAULT_DRAIN_HZ};
use quietwatt::source::perf::PerfEvents;
use quietwatt::source::Mode;
use quietwatt::{Domain, Hertz, Mechanism, Meter, Selection, Session, SessionConfig, SysRoot};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// The default address: loopback only, and 9885, a port not claimed on
/// Prometheus's list of default exporter ports.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9885";

/// How long a failed domain waits before it is opened again.
const RETRY: Duration = Duration::from_secs(10);

/// Arguments of `serve`.
#[derive(clap::Args)]
pub struct Args {
    /// Address and port to serve /metrics on; port 0 picks a free one (printed on
    /// stderr). Loopback by default: expose it wider only behind auth or a proxy.
    /// A host name is resolved (`localhost:9885`) and the first address bound.
    #[arg(long, value_name = "ADDR:PORT", default_value = DEFAULT_LISTEN)]
    listen: String,
    /// Mechanism to read. Default: the best polled one that works here (perf,
    /// powercap or msr) and, when it is perf, those events sampled in the kernel
    /// instead where that works (ebpf, else perf-ring: about one wake-up a second).
    #[arg(short, long)]
    mechanism: Option<Mechanism>,
    /// Also export each CPU's idle states (entries and seconds, from cpuidle) and
    /// wake-ups from idle (power:cpu_idle exits): one series per CPU and state.
    #[arg(long)]
    events: bool,
    /// Domains to export, comma-separated (package,core,uncore,dram,psys; default: all).
    #[arg(short, long)]
    domains: Option<String>,
    /// Reads per second of each counter (taken by the kernel for ebpf and
    /// perf-ring), raised when a counter could wrap twice between reads.
    #[arg(short, long, value_name = "HZ", default_value_t = 10.0)]
    freq: f64,
    /// ebpf, perf-ring: how often the kernel's readings are collected, in wake-ups
    /// a second; the exported values are at most this much older.
    #[arg(long, value_name = "HZ", default_value_t = DEFAULT_DRAIN_HZ)]
    drain_hz: f64,
    /// The exported values change at most this often (seconds): a scraper cannot
    /// watch energy at RAPL's 1 ms resolution.
    #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = parse_duration)]
    min_interval: Duration,
    /// Energies are rounded down to a multiple of this many joules.
    #[arg(long, value_name = "JOULES", default_value_t = 0.01)]
    resolution: f64,
    /// Require HTTP basic auth with the `user:password` on the first line of FILE.
    #[arg(long, value_name = "FILE")]
    basic_auth_file: Option<PathBuf>,
    /// Also export the package energy split among cgroups (the default) or
    /// processes at each context switch: the --attribute-top that used the most
    /// lately get series of their own, the rest add up as id="other". Needs root
    /// (or CAP_BPF and CAP_PERFMON) and a kernel with BTF.
    #[arg(
        long,
        value_enum,
        value_name = "cgroup|process",
        num_args = 0..=1,
        default_missing_value = "cgroup"
    )]
    attribute: Option<ByArg>,
    /// With --attribute: how many cgroups or processes get series of their own.
    #[arg(long, value_name = "N", default_value_t = 20, requires = "attribute",
          value_parser = clap::value_parser!(u16).range(1..=1000))]
    attribute_top: u16,
    /// With --attribute: each package's idle power in watts, set apart before the
    /// split and shared by CPU time over the package's capacity, or `fit` to fit it
    /// as the exporter runs (default: none, every joule is split as dynamic).
    #[arg(long, value_name = "W|fit", requires = "attribute", value_parser = super::attribute::parse_idle)]
    idle_watts: Option<quietwatt_attribution::IdlePower>,
    /// For tests and benchmarks on machines without RAPL: serve software counters
    /// of CPU 0 (cpu-clock as "package", task-clock as "core", nanoseconds counted
    /// as nanojoules) through --mechanism ebpf, perf-ring or perf.
    #[arg(long, hide = true)]
    stand_in_events: bool,
}

/// How the counters are read.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Plan {
    /// One polled session per domain.
    Polled(Mechanism),
    /// One session for every domain, sampled in the kernel and drained.
    Buffered(Mechanism),
}

/// Opens the session of a slot, the first time and after a failure.
struct Opener {
    root: SysRoot,
    plan: Plan,
    freq: Hertz,
    drain: Hertz,
    kept: usize,
    stand_in: bool,
    /// Whether the root is an emulator (the exposition says so on every series).
    emulated: bool,
}

impl Opener {
    /// A session over the domains of `sel` as the plan says. perf-ring's group
    /// refused by the kernel gives a polled session of the same events (said on
    /// stderr).
    fn open(&self, sel: &Selection) -> quietwatt::Result<Session> {
        let config = SessionConfig::default()
            .root(self.root.clone())
            .rate(self.freq)
            .drain(self.drain)
            .samples_kept(self.kept);
        let stand_ins = || sel.apply(inkernel::stand_in_specs(0), |s| s.id);
        match self.plan {
            Plan::Polled(_) if self.stand_in => {
                let source = PerfEvents::from_specs(stand_ins()?)?;
                Session::start_on(Box::new(source), config)
            }
            Plan::Polled(m) => Session::start(config.mechanism(m).domains(sel.clone())),
            Plan::Buffered(m) => {
                let opened = if self.stand_in {
                    inkernel::open_specs(m, stand_ins()?, self.freq, self.drain)?
                } else {
                    inkernel::open(&self.root, m, sel, self.freq, self.drain)?
                };
                match opened {
                    Opened::InKernel(s) => Session::start_on(Box::new(s), config),
                    Opened::Fallback { source, reason } => {
                        eprintln!(
                            "quietwatt: warning: {m}: {reason}; polling the same events through the perf mechanism instead"
                        );
                        Session::start_on(source, config)
                    }
                }
            }
        }
    }
}

/// `freq`, raised (with a note) when a counter could wrap twice in a period longer
/// than `safe`.
fn wrap_safe(freq: Hertz, safe: Option<Duration>) -> Hertz {
    match safe {
        Some(s) if freq.period() > s => {
            let raised = Hertz::clamped((1.0 / s.as_secs_f64()).ceil());
            eprintln!(
                "quietwatt: note: --freq {} raised to {} so that no counter can wrap twice between reads",
                freq.hz(),
                raised.hz()
            );
            raised
        }
        _ => freq,
    }
}

/// Each domain once, in order.
fn domains_of(ids: impl Iterator<Item = Domain>) -> Vec<Domain> {
    let mut domains: Vec<Domain> = Vec::new();
    for d in ids {
        if !domains.contains(&d) {
            domains.push(d);
        }
    }
    domains
}

/// Chooses how to read and opens the slots: `--mechanism` when given; otherwise
/// the best polled mechanism that measures here (as `source::open` chooses it,
/// counters that never move refused) and, when that is perf, the in-kernel
/// mechanisms on the same events first: ebpf (whose energy stays whole when perf
/// throttles an idle CPU's clock), then perf-ring.
fn open_slots(env: &Environment, args: &Args, opener: &mut Opener) -> Result<Vec<Slot>, Failure> {
    let sel = selection(&args.domains)?;
    let mut probe: Option<Box<dyn quietwatt::Source>> = None;
    let in_kernel: &[Mechanism] = match args.mechanism {
        Some(m @ (Mechanism::Ebpf | Mechanism::PerfRing)) => &[m][..],
        Some(_) => &[],
        None => {
            let p = quietwatt::source::open(&env.root, None, &sel)?;
            let perf = p.mechanism() == Mechanism::Perf;
            if !perf {
                eprintln!(
                    "quietwatt: note: polling {}: sampling in the kernel (ebpf, perf-ring) reads the perf RAPL events, which do not measure here",
                    p.mechanism()
                );
            }
            probe = Some(p);
            if perf {
                &[Mechanism::Ebpf, Mechanism::PerfRing]
            } else {
                &[]
            }
        }
    };
    let mut polled = args
        .mechanism
        .filter(|m| !matches!(m, Mechanism::Ebpf | Mechanism::PerfRing));
    let mut refused = Vec::new();
    for &m in in_kernel {
        opener.plan = Plan::Buffered(m);
        let session = match opener.open(&sel) {
            Ok(s) => s,
            Err(e) if args.mechanism.is_some() => return Err(e.into()),
            Err(e) => {
                refused.push(format!("{m}: {e}"));
                continue;
            }
        };
        if session.mode() == Mode::Polled {
            // perf-ring's group refused here: the same events polled, one session
            // per domain as for perf.
            let _ = session.stop();
            polled = Some(Mechanism::Perf);
            probe = None;
            break;
        }
        let freq = wrap_safe(opener.freq, session.safe_period());
        let session = if freq == opener.freq {
            session
        } else {
            let _ = session.stop();
            opener.freq = freq;
            opener.open(&sel)?
        };
        let domains = domains_of(session.channels().iter().map(|c| c.domain));
        return Ok(vec![Slot::new(sel, domains, session)]);
    }
    if !refused.is_empty() {
        eprintln!(
            "quietwatt: note: polling perf: the kernel cannot sample the counters itself here ({})",
            refused.join("; ")
        );
    }
    // One opening to learn the mechanism, the domains and how fast a counter can
    // wrap; then one session per domain on that mechanism.
    let probe = match probe {
        Some(p) => p,
        None if opener.stand_in => Box::new(PerfEvents::from_specs(
            sel.apply(inkernel::stand_in_specs(0), |s| s.id)?,
        )?),
        None => quietwatt::source::open(&env.root, polled, &sel)?,
    };
    opener.plan = Plan::Polled(probe.mechanism());
    let domains = domains_of(probe.channels().iter().map(|c| c.id.domain));
    opener.freq = wrap_safe(opener.freq, Meter::new(probe).max_safe_period());
    domains
        .into_iter()
        .map(|d| {
            let only = Selection::only(vec![d]);
            let session = opener.open(&only)?;
            Ok(Slot::new(only, vec![d], session))
        })
        .collect()
}

/// One session's domains and what they have exported so far.
struct Slot {
    /// What the session reads: one domain when polled, all of them when buffered.
    selection: Selection,
    /// Its domains, for messages.
    domains: Vec<Domain>,
    session: Option<Session>,
    /// Energy and resets of earlier sessions of these domains (before a failure),
    /// added to the current one's so the exported counter never goes back.
    base: Vec<(f64, u64)>,
    /// The last series published (kept, marked down, after a failure).
    last: Vec<DomainSeries>,
    failed_at: Option<Instant>,
}

impl Slot {
    fn new(selection: Selection, domains: Vec<Domain>, session: Session) -> Slot {
        Slot {
            selection,
            domains,
            base: vec![(0.0, 0); session.channels().len()],
            session: Some(session),
            last: Vec::new(),
            failed_at: None,
        }
    }

    /// Its domains' names, comma-separated.
    fn name(&self) -> String {
        self.domains
            .iter()
            .map(|d| d.name())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Samples until SIGTERM/SIGINT, serving the latest figures.
pub fn run(env: &Environment, args: Args) -> Result<ExitCode, Failure> {
    if args.resolution.is_nan() || args.resolution <= 0.0 || args.resolution > 1000.0 {
        return Err(Failure::usage(format!(
            "--resolution {}: give a number of joules above 0 and at most 1000, e.g. 0.01",
            args.resolution
        )));
    }
    let hertz = |flag: &str, v: f64| {
        Hertz::new(v).map_err(|_| {
            Failure::usage(format!(
                "invalid {flag} {v}: give a number of hertz from 0.001 to 100000"
            ))
        })
    };
    let freq = hertz("--freq", args.freq)?;
    let drain = hertz("--drain-hz", args.drain_hz)?;
    if args.stand_in_events
        && !matches!(
            args.mechanism,
            Some(Mechanism::Perf | Mechanism::Ebpf | Mechanism::PerfRing)
        )
    {
        return Err(Failure::usage(
            "--stand-in-events reads perf software counters: use it with --mechanism perf, ebpf or perf-ring",
        ));
    }
    let auth = args
        .basic_auth_file
        .as_deref()
        .map(read_auth_file)
        .transpose()?;
    signals::install();
    // Blocked here, before any thread of serve starts, so that every thread
    // started below inherits the mask and a stop signal stays pending for the
    // main thread's sigtimedwait (a thread started earlier, an --emulate mount's,
    // may still take one: its handler raises STOP, seen at the next refresh).
    let stop_set = block_stop_signals();

    // Enough rows for two refreshes and a drain: drained every refresh, the
    // buffer never drops.
    let kept =
        (freq.hz() * (args.min_interval + drain.period()).as_secs_f64() * 2.0).ceil() as usize + 16;
    let mut opener = Opener {
        root: env.root.clone(),
        plan: Plan::Polled(Mechanism::Perf),
        freq,
        drain,
        kept,
        stand_in: args.stand_in_events,
        emulated: env.is_emulated(),
    };
    let mut slots = open_slots(env, &args, &mut opener)?;

    let mut attribution = match args.attribute {
        Some(by) => {
            let slot = slots
                .iter()
                .position(|s| s.domains.contains(&Domain::Package))
                .ok_or_else(|| {
                    Failure::usage(
                        "--attribute splits the package energy, which is not read here: \
                         add package to --domains, or leave out --attribute",
                    )
                })?;
            let channels = slots[slot]
                .session
                .as_ref()
                .map(|s| s.channels().to_vec())
                .unwrap_or_default();
            let a = ServeAttribution::open(
                env,
                by,
                args.idle_watts
                    .unwrap_or(quietwatt_attribution::IdlePower::None),
                usize::from(args.attribute_top),
                &channels,
                opener.freq.hz(),
                args.min_interval,
            )?;
            Some((slot, a))
        }
        None => None,
    };
    let mut events = if args.events {
        Some(super::serve_events::IdleEvents::open(&env.root)?)
    } else {
        None
    };
    let listen = resolve_listen(&args.listen)?;
    let listener = TcpListener::bind(listen)
        .map_err(|e| Failure::new(USAGE, format!("cannot listen on {}: {e}", args.listen)))?;
    let addr = listener.local_addr().unwrap_or(listen);
    let mut totals = (0u64, 0u64);
    let published = Arc::new(Published {
        exposition: RwLock::new(Arc::new(refresh(
            &mut slots,
            &mut totals,
            args.resolution,
            &opener,
            &mut events,
            &mut attribution,
        ))),
        scrapes: AtomicU64::new(0),
        auth,
    });
    start_http(listener, Arc::clone(&published))?;
    let (mechanism, how) = match opener.plan {
        Plan::Polled(m) => (m, String::new()),
        Plan::Buffered(m) => (
            m,
            format!(
                " in the kernel, collected every {:.3} s",
                opener.drain.period().as_secs_f64()
            ),
        ),
    };
    if let Some(by) = args.attribute {
        eprintln!(
            "quietwatt: attributing the package energy by {} at each context switch: the {} that used the most lately are exported, the rest as id=\"other\"",
            quietwatt_attribution::By::from(by).name(),
            args.attribute_top
        );
    }
    eprintln!(
        "quietwatt: serving http://{addr}/metrics ({} at {} Hz{how}, {}; values every {:.3} s, to {} J){}",
        mechanism.name(),
        opener.freq.hz(),
        slots.iter().map(Slot::name).collect::<Vec<_>>().join(","),
        args.min_interval.as_secs_f64(),
        args.resolution,
        if published.auth.is_some() {
            ", basic auth"
        } else {
            ""
        }
    );

    let started = Instant::now();
    let mut next = Instant::now() + args.min_interval;
    while !signals::STOP.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            // One wake-up per refresh: the wait ends early only for a stop signal.
            if wait_for_stop(&stop_set, next - now) {
                signals::STOP.store(true, Ordering::Relaxed);
            }
            continue;
        }
        next += args.min_interval;
        if next < now {
            next = now + args.min_interval;
        }
        let e = refresh(
            &mut slots,
            &mut totals,
            args.resolution,
            &opener,
            &mut events,
            &mut attribution,
        );
        *published
            .exposition
            .write()
            .unwrap_or_else(|p| p.into_inner()) = Arc::new(e);
    }
    // Stopping joins each sampler; the HTTP threads end with the process.
    for s in &mut slots {
        if let Some(session) = s.session.take() {
            let _ = session.stop();
        }
    }
    eprintln!(
        "quietwatt: stopped after {:.1} s: {} samples, {} scrapes served",
        started.elapsed().as_secs_f64(),
        totals.0,
        published.scrapes.load(Ordering::Relaxed)
    );
    Ok(ExitCode::SUCCESS)
}

/// The stop signals (those [`signals::install`] handles), blocked in the calling
/// thread and so in every thread it starts afterwards.
fn block_stop_signals() -> libc::sigset_t {
    // SAFETY: the set is initialised by sigemptyset before use and outlives the
    // calls; pthread_sigmask only changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Sleeps until `timeout` has passed or a signal of `set` (blocked, see
/// [`block_stop_signals`]) is pending; whether one was.
fn wait_for_stop(set: &libc::sigset_t, timeout: Duration) -> bool {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: both pointers are to values that live for the call; a null siginfo
    // is allowed.
    let sig = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    // -1: the timeout (EAGAIN), or another signal's handler ran (EINTR).
    sig > 0
}

/// `--listen`'s address: `ADDR:PORT`, `[v6]:PORT` or `HOST:PORT` (resolved; the
/// first address is bound).
fn resolve_listen(listen: &str) -> Result<SocketAddr, Failure> {
    use std::net::ToSocketAddrs;
    let bad = |why: String| {
        Failure::usage(format!(
            "--listen {listen}: {why}; give ADDR:PORT, e.g. 127.0.0.1:9885, [::1]:9885 or localhost:9885"
        ))
    };
    let mut addrs = listen.to_socket_addrs().map_err(|e| bad(e.to_string()))?;
    addrs
        .next()
        .ok_or_else(|| bad("the name resolves to no address".into()))
}

/// Reads `user:password` from the first line of `path`; the expected
/// `Authorization` header value is kept, never the password alone.
fn read_auth_file(path: &std::path::Path) -> Result<String, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::usage(format!("--basic-auth-file {}: {e}", path.display())))?;
    let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if !line.contains(':') || line.starts_with(':') {
        return Err(Failure::usage(format!(
            "--basic-auth-file {}: the first line must be user:password",
            path.display()
        )));
    }
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(m) = std::fs::metadata(path) {
            if m.permissions().mode() & 0o077 != 0 {
                eprintln!(
                    "quietwatt: warning: {} is readable by others than its owner: chmod 600 it",
                    path.display()
                );
            }
        }
    }
    Ok(format!("Basic {}", base64(line.as_bytes())))
}

/// Drains every session and builds the exposition; a session whose sampler
/// failed is stopped and its domain marked down (its energy kept), and reopened
/// after [`RETRY`], counting on from where it stopped.
fn refresh(
    slots: &mut [Slot],
    totals: &mut (u64, u64),
    resolution: f64,
    opener: &Opener,
    events: &mut Option<super::serve_events::IdleEvents>,
    attribution: &mut Option<(usize, ServeAttribution)>,
) -> Exposition {
    let mut domains = Vec::new();
    let others = if slots.len() > 1 {
        "the other domains are still served, "
    } else {
        ""
    };
    for (i, slot) in slots.iter_mut().enumerate() {
        if slot.session.is_none() && slot.failed_at.is_some_and(|t| t.elapsed() >= RETRY) {
            match opener.open(&slot.selection) {
                Ok(s) if s.channels().len() == slot.base.len() => {
                    // The energy between the failure and now is lost; the counter
                    // goes on from its last value, and the gap counts as a reset.
                    for (b, l) in slot.base.iter_mut().zip(&slot.last) {
                        *b = (l.energy_j, l.resets + 1);
                    }
                    eprintln!("quietwatt: {} is read again", slot.name());
                    slot.session = Some(s);
                    slot.failed_at = None;
                }
                _ => slot.failed_at = Some(Instant::now()),
            }
        }
        if let Some(session) = &slot.session {
            let mut split = attribution
                .as_mut()
                .and_then(|(at, a)| (*at == i).then_some(a));
            for row in session.drain_samples() {
                totals.0 += 1;
                totals.1 += row.missed;
                if let Some(a) = split.as_deref_mut() {
                    a.feed(&row);
                }
            }
            if let Ok(report) = session.snapshot() {
                let mut series = DomainSeries::of_report(&report);
                for (s, (e, r)) in series.iter_mut().zip(&slot.base) {
                    s.energy_j += e;
                    s.resets += r;
                }
                slot.last = series;
            }
            if let Some(e) = session.sampling_error() {
                eprintln!(
                    "quietwatt: warning: {} is no longer read ({e}); {others}retrying every {} s",
                    slot.name(),
                    RETRY.as_secs()
                );
                slot.failed_at = Some(Instant::now());
            }
        }
        if slot.failed_at.is_some() {
            if let Some(s) = slot.session.take() {
                let _ = s.stop();
            }
        }
        let up = slot.session.is_some();
        domains.extend(slot.last.iter().cloned().map(|mut s| {
            s.up = up;
            s
        }));
    }
    let (cpu_seconds, wakeups) = own_usage();
    let (idle, cpu_wakeups) = match events.as_mut().map(|e| e.read()) {
        Some(Ok(figures)) => figures,
        Some(Err(e)) => {
            // The energy goes on without them.
            eprintln!("quietwatt: warning: --events: reading the C-state counters failed ({e}); they are no longer exported");
            *events = None;
            (Vec::new(), Vec::new())
        }
        None => (Vec::new(), Vec::new()),
    };
    Exposition {
        domains,
        samples: totals.0,
        missed_deadlines: totals.1,
        cpu_seconds,
        wakeups,
        version: env!("CARGO_PKG_VERSION").to_string(),
        resolution_j: resolution,
        idle,
        cpu_wakeups,
        attribution: attribution.as_mut().map(|(_, a)| a.figures()),
        emulated: opener.emulated,
    }
}

/// The process's CPU seconds and voluntary context switches (getrusage).
fn own_usage() -> (Option<f64>, Option<u64>) {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return (None, None);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    (
        Some(secs(ru.ru_utime) + secs(ru.ru_stime)),
        Some(ru.ru_nvcsw as u64),
    )
}
