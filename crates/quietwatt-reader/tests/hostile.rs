//! The service is never hurt by a client: over a real Unix socket, garbage, an
//! oversized line, another version, a flood, a client that never reads, a
//! client that never says hello, a thousand connections at once and clients
//! that vanish mid-session each get a clear refusal or are dropped, while a
//! well-behaved client keeps getting fresh readings, and nothing of the others
//! is left behind. (The test runs as root, as CI does: root is never refused by
//! the policy, so what is tested here is the service's own defence.)

use quietwatt_core::domain::Domain;
use quietwatt_reader::protocol::{encode, Reply, Request, VERSION};
use quietwatt_reader::{
    Board, ChannelState, Limits, Names, Policy, Service, ServiceInfo, SocketSource, Want,
};
use quietwatt_sources::{Selection, Source};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A board published every 5 ms by a thread of its own, package and DRAM
/// drawing 1 mJ and 0.25 mJ a millisecond: monotone, as the engine's are.
fn publisher(board: Arc<Board>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let start = Instant::now();
        let mut seq = 0;
        while !stop.load(Ordering::Relaxed) {
            let ms = start.elapsed().as_millis() as u64;
            seq += 1;
            let ch = |domain, uj| ChannelState {
                domain,
                socket: 0,
                die: None,
                energy_uj: uj,
                resets: 0,
                ambiguous: 0,
                up: true,
            };
            board.publish(
                seq,
                quietwatt_sys::clock::monotonic_ns(),
                vec![ch(Domain::Package, ms * 1000), ch(Domain::Dram, ms * 250)],
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    })
}

fn line(stream: &UnixStream) -> Option<Reply> {
    let mut l = String::new();
    let n = BufReader::new(stream).read_line(&mut l).ok()?;
    (n > 0).then(|| serde_json::from_str(&l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
}

fn refusal(stream: &UnixStream) -> String {
    match line(stream) {
        Some(Reply::Error(r)) => r.code.name().to_string(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Whether the service has closed `stream` (EOF, or a reset).
fn closed(stream: &UnixStream) -> bool {
    let mut l = String::new();
    matches!(BufReader::new(stream).read_line(&mut l), Ok(0) | Err(_))
}

fn connect(path: &Path) -> UnixStream {
    let s = UnixStream::connect(path).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s
}

#[test]
fn hostile_clients_are_refused_or_dropped_while_a_good_one_keeps_reading() {
    // A thousand connections and the service's side of 256 need more than the
    // usual soft limit of 1024 descriptors.
    let lim = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    rustix::process::setrlimit(
        rustix::process::Resource::Nofile,
        rustix::process::Rlimit {
            current: lim.maximum.map(|m| m.min(8192)).or(Some(8192)),
            maximum: lim.maximum,
        },
    )
    .expect("raise RLIMIT_NOFILE");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("reader.sock");
    let board = Arc::new(Board::new(ServiceInfo {
        mechanism: "powercap".into(),
        emulated: false,
        staleness: Duration::from_millis(5),
        refresh: Duration::from_millis(5),
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let publishing = publisher(Arc::clone(&board), Arc::clone(&stop));
    while board.latest().is_err() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let limits = Limits {
        hello_within: Duration::from_secs(1),
        ..Limits::default()
    };
    let listener = quietwatt_reader::service::bind(&path).expect("bind");
    let service = Service::new(
        listener,
        Policy::default_for(&Names::system()),
        limits,
        Arc::clone(&board),
        |_| {},
    )
    .unwrap();
    let stats = service.stats();
    let serving = service.spawn(Arc::clone(&stop)).unwrap();

    // The well-behaved client: reads every 2 ms until the others are done.
    let storm_over = Arc::new(AtomicBool::new(false));
    let good = {
        let path = path.clone();
        let over = Arc::clone(&storm_over);
        std::thread::spawn(move || {
            let mut s = SocketSource::connect(&path, Want::default(), &Selection::all())
                .expect("the good client is welcomed");
            assert_eq!(s.welcome().resolution_uj, 1, "root is never coarsened");
            let mut raw = [0u64; 2];
            let mut last = [0u64; 2];
            let mut changes = 0u64;
            let mut reads = 0u64;
            // Until the storm is over, then 20 changes more.
            let mut after = 0;
            while after < 20 {
                s.read(&mut raw).expect("the good client keeps reading");
                reads += 1;
                assert!(
                    raw[0] >= last[0] && raw[1] >= last[1],
                    "{raw:?} after {last:?}"
                );
                if raw != last {
                    changes += 1;
                    if over.load(Ordering::Relaxed) {
                        after += 1;
                    }
                }
                last = raw;
                std::thread::sleep(Duration::from_millis(2));
            }
            (reads, changes)
        })
    };

    // Garbage: an HTTP request.
    let mut g = connect(&path);
    g.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(refusal(&g), "bad_request");
    assert!(closed(&g));
    // A line longer than the protocol allows.
    let mut long = connect(&path);
    long.write_all(&vec![b'a'; 20_000]).unwrap();
    assert_eq!(refusal(&long), "too_long");
    // Another version of the protocol.
    let mut v2 = connect(&path);
    v2.write_all(b"{\"op\":\"hello\",\"v\":2}\n").unwrap();
    assert_eq!(refusal(&v2), "version");
    // A read before the hello.
    let mut early = connect(&path);
    early
        .write_all(&encode(&Request::Read { v: VERSION }))
        .unwrap();
    assert_eq!(refusal(&early), "bad_request");
    // A flood: ten thousand reads in one go.
    let mut flood = connect(&path);
    flood
        .write_all(&encode(&Request::Hello {
            v: VERSION,
            interval_ns: None,
            resolution_uj: None,
        }))
        .unwrap();
    assert!(matches!(line(&flood), Some(Reply::Welcome(_))));
    let reads: Vec<u8> = (0..10_000)
        .flat_map(|_| encode(&Request::Read { v: VERSION }))
        .collect();
    let writer = {
        let mut f = flood.try_clone().unwrap();
        std::thread::spawn(move || {
            let _ = f.write_all(&reads);
        })
    };
    let mut reader = BufReader::new(&flood);
    let mut readings = 0;
    let code = loop {
        let mut l = String::new();
        assert!(
            reader.read_line(&mut l).unwrap() > 0,
            "closed without a refusal after {readings} readings"
        );
        match serde_json::from_str::<Reply>(&l).unwrap() {
            Reply::Reading(_) => readings += 1,
            Reply::Error(r) => break r.code.name(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(code, "flood");
    assert!(readings <= 2_000, "{readings} readings before the refusal");
    writer.join().unwrap();
    // Silent: no hello within the time allowed.
    let silent = connect(&path);
    assert_eq!(refusal(&silent), "timeout");
    // Vanishing mid-session: hello, a read, gone.
    for _ in 0..10 {
        let mut c = connect(&path);
        c.write_all(&encode(&Request::Hello {
            v: VERSION,
            interval_ns: None,
            resolution_uj: None,
        }))
        .unwrap();
        c.write_all(&encode(&Request::Read { v: VERSION })).unwrap();
        drop(c);
    }
    // Never reading: bursts of reads under the flood limit, its replies left
    // unread, until the service drops it.
    let mut deaf = connect(&path);
    deaf.write_all(&encode(&Request::Hello {
        v: VERSION,
        interval_ns: None,
        resolution_uj: None,
    }))
    .unwrap();
    let burst: Vec<u8> = (0..1_500)
        .flat_map(|_| encode(&Request::Read { v: VERSION }))
        .collect();
    deaf.set_write_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut dropped = false;
    for _ in 0..20 {
        if deaf.write_all(&burst).is_err() {
            dropped = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(1_100));
        if stats.dropped.load(Ordering::Relaxed) > 0 {
            dropped = true;
            break;
        }
    }
    assert!(dropped, "a client that never reads was kept");
    assert!(stats.dropped.load(Ordering::Relaxed) >= 1);
    drop(deaf);
    // A thousand connections at once: beyond 256 each is refused as busy;
    // those held are refused when they say nothing.
    let many: Vec<UnixStream> = (0..1_000).map(|_| connect(&path)).collect();
    let mut codes = std::collections::BTreeMap::<String, usize>::new();
    for s in &many {
        *codes.entry(refusal(s)).or_default() += 1;
    }
    assert_eq!(codes.values().sum::<usize>(), 1_000, "{codes:?}");
    assert!(
        codes.get("busy").copied().unwrap_or(0) >= 1_000 - 256,
        "{codes:?}"
    );
    assert!(
        codes.keys().all(|c| c == "busy" || c == "timeout"),
        "{codes:?}"
    );
    drop(many);
    storm_over.store(true, Ordering::Relaxed);

    let (reads, changes) = good.join().expect("the good client never failed");
    assert!(changes >= 20, "{changes} changes in {reads} reads");
    // Nothing of the others is left: the good client's connection is the only
    // one until it goes, then none.
    let until = Instant::now() + Duration::from_secs(30);
    while stats.open.load(Ordering::Relaxed) > 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(
        stats.open.load(Ordering::Relaxed),
        0,
        "connections left behind"
    );
    stop.store(true, Ordering::Relaxed);
    serving.join().unwrap();
    publishing.join().unwrap();
}

#[test]
fn a_coarser_request_is_granted_rounded_down_and_held_back_for_its_interval() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.sock");
    let board = Arc::new(Board::new(ServiceInfo {
        mechanism: "powercap".into(),
        emulated: true,
        staleness: Duration::from_millis(5),
        refresh: Duration::from_millis(5),
    }));
    let stop = Arc::new(AtomicBool::new(false));
    let publishing = publisher(Arc::clone(&board), Arc::clone(&stop));
    while board.latest().is_err() {
        std::thread::sleep(Duration::from_millis(1));
    }
    let service = Service::new(
        quietwatt_reader::service::bind(&path).unwrap(),
        Policy::default_for(&Names::system()),
        Limits::default(),
        Arc::clone(&board),
        |_| {},
    )
    .unwrap();
    let serving = service.spawn(Arc::clone(&stop)).unwrap();
    let want = Want {
        interval: Some(Duration::from_millis(50)),
        resolution_uj: Some(7_000),
    };
    let mut s = SocketSource::connect(&path, want, &Selection::only(vec![Domain::Dram])).unwrap();
    let w = s.welcome().clone();
    assert_eq!(
        (w.interval_ns, w.resolution_uj, w.coarsened),
        (50_000_000, 7_000, false)
    );
    assert!(w.emulated && w.mechanism == "powercap");
    assert_eq!(s.channels().len(), 1);
    assert_eq!(s.channels()[0].id.domain, Domain::Dram);
    assert!(
        s.notes()[0].contains("rounded down to 7000 µJ"),
        "{:?}",
        s.notes()
    );
    let mut last: Option<quietwatt_reader::protocol::Reading> = None;
    let mut distinct = 0;
    while distinct < 5 {
        let r = s.reading().unwrap();
        assert!(r.energy_uj.iter().all(|e| e % 7_000 == 0), "{r:?}");
        if let Some(l) = &last {
            assert!(r.t_ns >= l.t_ns);
            if r.seq != l.seq {
                assert!(
                    r.t_ns - l.t_ns >= 50_000_000,
                    "{} ns apart",
                    r.t_ns - l.t_ns
                );
                assert!(r.energy_uj[0] >= l.energy_uj[0]);
                distinct += 1;
            } else {
                assert_eq!(r, *l, "a held-back reading is the same one again");
            }
        }
        last = Some(r);
        std::thread::sleep(Duration::from_millis(3));
    }
    stop.store(true, Ordering::Relaxed);
    serving.join().unwrap();
    publishing.join().unwrap();
}
