//! What attribution costs: the accounting program's own run time per context
//! switch (the kernel's `run_time_ns` with BPF statistics on), the user-space cost
//! of reading its slices, and the slowdown of a context-switch-heavy workload (two
//! threads ping-ponging a byte over pipes) with the program attached and not,
//! interleaved, compared by the overhead lab's protocol (`quietwatt_stats::compare`:
//! outliers out by IQR, one-sided Mann-Whitney U, Hodges-Lehmann shift with its
//! 95 % interval).
//!
//! Run as root: `cargo run --release -p quietwatt-attribution --example cost [ROUNDS] [TRIPS] [nostats]`;
//! `cost workload TRIPS` runs the workload alone and prints its time as JSON
//! (`{"solve_s": ...}`) for the overhead lab.

use quietwatt_attribution::{Timeline, Tracker};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Instant;

/// `trips` round trips of one byte between two threads: two context switches each
/// when both share a CPU, a wake-up each way otherwise.
fn ping_pong(trips: u32) -> f64 {
    let (mut a, mut b) = UnixStream::pair().expect("socketpair");
    let t = Instant::now();
    let h = std::thread::spawn(move || {
        let mut buf = [0u8; 1];
        for _ in 0..trips {
            b.read_exact(&mut buf).unwrap();
            b.write_all(&buf).unwrap();
        }
    });
    let mut buf = [7u8; 1];
    for _ in 0..trips {
        a.write_all(&buf).unwrap();
        a.read_exact(&mut buf).unwrap();
    }
    h.join().unwrap();
    t.elapsed().as_secs_f64()
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    // `workload TRIPS`: only the workload, its time as the lab reads it (for
    // `quietwatt bench overhead --command-workload`).
    if args.peek().map(String::as_str) == Some("workload") {
        let trips = args.nth(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
        println!("{{\"solve_s\": {:.6}}}", ping_pong(trips));
        return;
    }
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let trips: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(20_000);
    // `nostats`: the slowdown without the kernel's run-time statistics, whose two
    // clock reads per run are part of the cost measured otherwise.
    let stats = args.next().as_deref() != Some("nostats");
    ping_pong(trips); // warm-up
    let (mut on, mut off) = (Vec::new(), Vec::new());
    let (mut runs, mut run_ns, mut slices, mut drain_ns) = (0u64, 0u64, 0u64, 0u128);
    let mut dropped = 0u64;
    for r in 0..rounds {
        // Alternate the order so that drift in the machine's load hits both alike.
        for attached in if r % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        } {
            if !attached {
                off.push(ping_pong(trips));
                continue;
            }
            let mut tracker = match Tracker::open_with(stats) {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("cost: {e} (run as root on a kernel with BTF)");
                    std::process::exit(2);
                }
            };
            let before = tracker.cost().unwrap_or_default();
            on.push(ping_pong(trips));
            let after = tracker.cost().unwrap_or_default();
            runs += after.runs - before.runs;
            run_ns += after.run_time_ns - before.run_time_ns;
            let mut timeline = Timeline::new();
            let t = Instant::now();
            tracker.drain(&mut timeline);
            drain_ns += t.elapsed().as_nanos();
            slices += tracker.slices();
            dropped += tracker.dropped();
        }
    }
    let c = quietwatt_stats::compare(&on, &off);
    let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.2} ms", v * 1e3));
    println!("workload: {trips} round trips over a socketpair between two threads, {rounds} rounds each way, interleaved");
    println!("median off {}, on {}", ms(c.median_y), ms(c.median_x));
    match (c.overhead_pct, c.overhead_ci_pct, &c.test) {
        (Some(p), Some((lo, hi)), Ok(t)) => println!(
            "slowdown with the program attached: {p:+.2} % (95 % CI {lo:+.2} % to {hi:+.2} %), one-sided Mann-Whitney p = {:.4}",
            t.p_value
        ),
        _ => println!("slowdown: no estimate ({:?})", c.shift.as_ref().err()),
    }
    if runs > 0 {
        println!(
            "program: {runs} runs (context switches), {:.0} ns per run (kernel run_time_ns, BPF stats on)",
            run_ns as f64 / runs as f64
        );
    } else {
        println!(
            "program: no run-time statistics ({})",
            if stats {
                "they need CAP_SYS_ADMIN"
            } else {
                "not asked for: nostats"
            }
        );
    }
    if slices > 0 {
        println!(
            "user space: {slices} slices drained, {:.1} ns per slice (ring read into the timeline), {dropped} lost",
            drain_ns as f64 / slices as f64
        );
    }
}
