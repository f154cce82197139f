//! `quietwatt serve`: a Prometheus / OpenMetrics exporter. The flags, their
//! wording and the exit codes are here; the exporter itself (the mechanism
//! chosen, the samplers and their failures, the refresh, the HTTP server) is the
//! `quietwatt-exporter` crate's, and the events and attribution series are
//! collectors of their own crates, registered here.
//!
//! Three kinds of threads, none waiting on another for long:
//! - the samplers (each a [`quietwatt::Session`] with a rate). Where the kernel can
//!   sample the counters itself (ebpf, else perf-ring: `--mechanism`, or the
//!   automatic choice when it finds perf), one session reads every domain and its
//!   thread wakes once per drain period (`--drain-hz`, 1 s): about one user-space
//!   wake-up a second whatever `--freq`. Otherwise one polled session per domain,
//!   each reading at `--freq`, so that a counter that vanishes (a powercap zone, an
//!   MSR) ends its own session only, and the others go on;
//! - the main thread, which every `--min-interval` refreshes the exporter and
//!   publishes one exposition: values change at most that often, whatever the
//!   scrapers do. It sleeps in `sigtimedwait` between refreshes, so that a stop
//!   signal ends it at once and nothing else wakes it;
//! - the HTTP side ([`quietwatt_exporter::server`]): a head reader and a fixed
//!   pool of workers, so slow or malformed clients never reach the sessions.

use super::attribute::{attribution, ByArg};
use super::{parse_duration, selection};
use crate::emulated::Environment;
use crate::exit::{Failure, USAGE};
use crate::signals;
use quietwatt::inkernel::DEFAULT_DRAIN_HZ;
use quietwatt::{Domain, Hertz, Joules, Mechanism};
use quietwatt_attribution::exporter::{AttributionCollector, CollectorOptions};
use quietwatt_attribution::Options;
use quietwatt_events::exporter::{IdleCollector, OpenError};
use quietwatt_exporter::http::BasicAuth;
use quietwatt_exporter::{Exporter, ExporterConfig, Notice, Plan, Server};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The default address: loopback only, and 9885, a port not claimed on
/// Prometheus's list of default exporter ports.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9885";

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
    /// With --attribute by cgroup: the kubelet's pod log directory
    /// (`<namespace>_<pod>_<uid>` entries), which names a pod's namespace and name
    /// on its series beside the pod UID and container id read from the cgroup
    /// path; mount the host's read-only in a container.
    #[arg(long, value_name = "DIR", default_value = quietwatt_attribution::kubernetes::POD_LOGS, requires = "attribute")]
    pod_logs: PathBuf,
    /// Also serve local users without privilege over a Unix socket (the reader
    /// service: docs/reader.md), at PATH or, without one, at
    /// /run/quietwatt/reader.sock. Each client is identified by the kernel and
    /// gets what --policy allows it; `--listen none` serves the socket alone.
    #[arg(long, value_name = "PATH", num_args = 0..=1,
          default_missing_value = quietwatt::reader::DEFAULT_SOCKET)]
    socket: Option<PathBuf>,
    /// With --socket: the access policy (TOML: who may read which domains, at
    /// what finest interval and resolution). Default: the group
    /// quietwatt-readers, every 100 ms, to 1 mJ (against PLATYPUS); root is
    /// never coarsened.
    #[arg(long, value_name = "FILE", requires = "socket")]
    policy: Option<PathBuf>,
    #[command(flatten)]
    estimate: super::estimate::EstimateArgs,
    /// For tests and benchmarks on machines without RAPL: serve software counters
    /// of CPU 0 (cpu-clock as "package", task-clock as "core", nanoseconds counted
    /// as nanojoules) through --mechanism ebpf, perf-ring or perf.
    #[arg(long, hide = true)]
    stand_in_events: bool,
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

    let mut config = ExporterConfig::new(env.root.clone());
    config.mechanism = args.mechanism;
    config.domains = selection(&args.domains)?;
    config.freq = freq;
    config.drain = drain;
    config.min_interval = args.min_interval;
    config.resolution = Joules(args.resolution);
    config.emulated = env.is_emulated();
    config.stand_in = args.stand_in_events;
    config.version = env!("CARGO_PKG_VERSION").to_string();
    config.power_model = args.estimate.choice();
    let mut exporter = match Exporter::open(config.clone(), Box::new(say)) {
        Ok(e) => e,
        // A node without RAPL (a fleet's DaemonSet runs everywhere) keeps being
        // served, saying why, rather than exiting and being restarted in a loop.
        Err(quietwatt_exporter::Error::Engine(e))
            if e.kind() == quietwatt::ErrorKind::Unavailable =>
        {
            let x = Exporter::unavailable(config, e.to_string(), Box::new(say));
            eprintln!(
                "quietwatt: warning: no energy counter can be read here: {e}\n  serving quietwatt_up{{reason=\"...\"}} 0 with this reason and the process's own metrics instead; the counters are tried again every {} s (`quietwatt doctor` says what each mechanism needs)",
                x.config().retry.as_secs()
            );
            x
        }
        Err(e) => return Err(failure(e)),
    };
    if exporter.plan().mechanism() == Mechanism::Estimate {
        eprintln!(
            "quietwatt: warning: nothing can measure here: serving the power model's ESTIMATE, not measurements (every energy series says mechanism=\"estimate\" and estimated=\"true\")"
        );
    }

    let attribution = match args.attribute {
        Some(_) if exporter.unavailable_reason().is_some() => {
            eprintln!("quietwatt: warning: --attribute splits the package energy, which cannot be read here: no attribution is exported");
            None
        }
        Some(by) => {
            let channels = exporter.channels_reading(Domain::Package).ok_or_else(|| {
                Failure::usage(
                    "--attribute splits the package energy, which is not read here: \
                     add package to --domains, or leave out --attribute",
                )
            })?;
            let what = "--attribute";
            let idle = args
                .idle_watts
                .unwrap_or(quietwatt_attribution::IdlePower::None);
            let by = quietwatt_attribution::By::from(by);
            let split = attribution(env, &Options::new(by, idle), what)?;
            Some(AttributionCollector::new(
                split,
                &channels,
                CollectorOptions {
                    by,
                    idle,
                    top: usize::from(args.attribute_top),
                    refresh: args.min_interval,
                    freq: exporter.freq(),
                    pod_logs: args.pod_logs.clone(),
                    estimated: exporter.plan().mechanism() == Mechanism::Estimate,
                },
            ))
        }
        None => None,
    };
    if args.events {
        let events = IdleCollector::open(&env.root).map_err(|e| match e {
            OpenError::Open(e) => Failure::new(
                crate::exit::NO_RAPL,
                format!("--events: the C-state counters cannot be opened: {e}; leave out --events to export the energy alone"),
            ),
            e => Failure::new(crate::exit::MEASUREMENT, format!("--events: {e}")),
        })?;
        for n in events.notes() {
            eprintln!("quietwatt: note: --events: {n}");
        }
        exporter.register(Box::new(events)).map_err(failure)?;
    }
    if let Some(a) = attribution {
        exporter.register(Box::new(a)).map_err(failure)?;
    }
    let reader = match &args.socket {
        Some(path) => Some(super::serve_reader::Reader::start(
            path,
            args.policy.as_deref(),
            &mut exporter,
        )?),
        None => None,
    };
    if args.listen == "none" {
        let Some(reader) = reader else {
            return Err(Failure::usage(
                "--listen none serves nothing without --socket: give --socket PATH, or an address to --listen",
            ));
        };
        return serve_socket_only(&mut exporter, &reader, &stop_set);
    }
    let listen = resolve_listen(&args.listen)?;
    let listener = TcpListener::bind(listen)
        .map_err(|e| Failure::new(USAGE, format!("cannot listen on {}: {e}", args.listen)))?;
    let addr = listener.local_addr().unwrap_or(listen);
    let server = Server::start(listener, auth, exporter.refresh())
        .map_err(|e| Failure::new(1, format!("cannot start the HTTP threads: {e}")))?;
    if let Some(r) = &reader {
        say_reader(r, &exporter);
    }
    let how = match exporter.plan() {
        Plan::Buffered { drain, .. } => format!(
            " in the kernel, collected every {:.3} s",
            drain.period().as_secs_f64()
        ),
        _ => String::new(),
    };
    if let Some(by) = args.attribute {
        eprintln!(
            "quietwatt: attributing the package energy by {} at each context switch: the {} that used the most lately are exported, the rest as id=\"other\"",
            quietwatt_attribution::By::from(by).name(),
            args.attribute_top
        );
    }
    let auth = if server.has_auth() {
        ", basic auth"
    } else {
        ""
    };
    if exporter.unavailable_reason().is_some() {
        eprintln!(
            "quietwatt: serving http://{addr}/metrics without energy (health: /healthz){auth}"
        );
    } else {
        eprintln!(
        "quietwatt: serving http://{addr}/metrics ({} at {} Hz{how}, {}; values every {:.3} s, to {} J){}",
        exporter.plan().mechanism().name(),
        exporter.freq().hz(),
        exporter
            .sessions()
            .iter()
            .map(|d| names(d))
            .collect::<Vec<_>>()
            .join(","),
        args.min_interval.as_secs_f64(),
        args.resolution,
        auth
    );
    }

    let started = Instant::now();
    let mut wait = |timeout| {
        // One wake-up per refresh: the wait ends early only for a stop signal.
        if !signals::STOP.load(Ordering::Relaxed) && wait_for_stop(&stop_set, timeout) {
            signals::STOP.store(true, Ordering::Relaxed);
        }
        signals::STOP.load(Ordering::Relaxed)
    };
    match &reader {
        Some(r) => exporter.run_serving(Some(&server), &r.board, r.every, &mut wait),
        None => exporter.run(&server, &mut wait),
    }
    drop(reader);
    let samples = exporter.samples();
    // Stopping joins each sampler; the HTTP threads end with the process.
    exporter.stop();
    eprintln!(
        "quietwatt: stopped after {:.1} s: {} samples, {} scrapes served",
        started.elapsed().as_secs_f64(),
        samples,
        server.scrapes()
    );
    Ok(ExitCode::SUCCESS)
}

/// `serve --socket --listen none`: the reader service alone, until a stop
/// signal.
fn serve_socket_only(
    exporter: &mut Exporter,
    reader: &super::serve_reader::Reader,
    stop_set: &libc::sigset_t,
) -> Result<ExitCode, Failure> {
    say_reader(reader, exporter);
    let started = Instant::now();
    exporter.run_serving(None, &reader.board, reader.every, &mut |timeout| {
        if !signals::STOP.load(Ordering::Relaxed) && wait_for_stop(stop_set, timeout) {
            signals::STOP.store(true, Ordering::Relaxed);
        }
        signals::STOP.load(Ordering::Relaxed)
    });
    eprintln!(
        "quietwatt: stopped after {:.1} s: {} samples",
        started.elapsed().as_secs_f64(),
        exporter.samples()
    );
    Ok(ExitCode::SUCCESS)
}

/// The line that says where the reader service listens.
fn say_reader(r: &super::serve_reader::Reader, exporter: &Exporter) {
    eprintln!(
        "quietwatt: reader service on {} ({}, refreshed every {:.3} s; docs/reader.md)",
        r.path().display(),
        match exporter.unavailable_reason() {
            Some(why) => format!("no counter read: {why}"),
            None => format!("{} counters", exporter.plan().mechanism().name()),
        },
        r.every.as_secs_f64()
    );
}

/// Domains' names, comma-separated.
fn names(domains: &[Domain]) -> String {
    domains
        .iter()
        .map(|d| d.name())
        .collect::<Vec<_>>()
        .join(",")
}

/// What the exporter says as it goes, in the command line's words.
fn say(notice: Notice) {
    match notice {
        Notice::PollingNotPerf(m) => eprintln!(
            "quietwatt: note: polling {m}: sampling in the kernel (ebpf, perf-ring) reads the perf RAPL events, which do not measure here"
        ),
        Notice::InKernelRefused(refused) => eprintln!(
            "quietwatt: note: polling perf: the kernel cannot sample the counters itself here ({})",
            refused
                .iter()
                .map(|(m, e)| format!("{m}: {e}"))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        Notice::Fallback { mechanism, reason } => eprintln!(
            "quietwatt: warning: {mechanism}: {reason}; polling the same events through the perf mechanism instead"
        ),
        Notice::RateRaised { from, to } => eprintln!(
            "quietwatt: note: --freq {} raised to {:.0} so that no counter can wrap twice between reads",
            from.hz(),
            to.hz()
        ),
        Notice::DomainFailed {
            domains,
            error,
            others_served,
            retry,
        } => eprintln!(
            "quietwatt: warning: {} is no longer read ({error}); {}retrying every {} s",
            names(&domains),
            if others_served {
                "the other domains are still served, "
            } else {
                ""
            },
            retry.as_secs()
        ),
        Notice::DomainBack { domains } => {
            eprintln!("quietwatt: {} is read again", names(&domains));
        }
        Notice::CollectorFailed { collector, error } if collector == "events" => eprintln!(
            "quietwatt: warning: --events: {error}; they are no longer exported"
        ),
        Notice::CollectorFailed { collector, error } => eprintln!(
            "quietwatt: warning: {collector}: {error}; its series are no longer exported"
        ),
        other => eprintln!("quietwatt: note: {other:?}"),
    }
}

/// The exporter's errors as the command line's failures.
fn failure(e: quietwatt_exporter::Error) -> Failure {
    match e {
        quietwatt_exporter::Error::Engine(e) => e.into(),
        quietwatt_exporter::Error::StandInNeedsPerf => Failure::usage(
            "--stand-in-events reads perf software counters: use it with --mechanism perf, ebpf or perf-ring",
        ),
        e => Failure::usage(e.to_string()),
    }
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
fn read_auth_file(path: &std::path::Path) -> Result<BasicAuth, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::usage(format!("--basic-auth-file {}: {e}", path.display())))?;
    let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
    let auth = BasicAuth::new(line).map_err(|_| {
        Failure::usage(format!(
            "--basic-auth-file {}: the first line must be user:password",
            path.display()
        ))
    })?;
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
    Ok(auth)
}
