//! What the package check costs on the hot path: ns per four-channel reading fed
//! to a `Meter` whose channels include core and uncore (each judged against its
//! package: `Tally::check_subdomains`) against the same readings on channels that
//! have no package to be judged by (dram and psys in their place), interleaved in
//! rounds so that the machine's noise hits both alike.
//!
//! `cargo run --release -p quietwatt --example meter_bench -- [rounds] [readings]`

use quietwatt::source::Channel;
use quietwatt::{Domain, DomainId, EnergyUnit, Mechanism, Meter, Wrap};
use std::hint::black_box;
use std::time::Instant;

fn meter(domains: [(u32, Domain); 4]) -> Meter {
    let channels = domains
        .iter()
        .map(|&(s, d)| Channel {
            id: DomainId::new(s, d),
            unit: EnergyUnit::Microjoule,
            wrap: Wrap::Modulus(1 << 40),
            origin: "bench".into(),
            limit: None,
        })
        .collect();
    Meter::for_channels(Mechanism::Powercap, channels, Vec::new())
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(15);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    // 1 kHz at 30 W package, 20 W core, 2 W uncore, 4 W dram.
    let reads: Vec<[u64; 4]> = (0..n)
        .map(|i| [i * 30_000, i * 20_000, i * 2_000, i * 4_000])
        .collect();
    let judged = [
        (0, Domain::Package),
        (0, Domain::Core),
        (0, Domain::Uncore),
        (0, Domain::Dram),
    ];
    let plain = [
        (0, Domain::Package),
        (0, Domain::Psys),
        (1, Domain::Dram),
        (0, Domain::Dram),
    ];
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let run = |domains, out: &mut Vec<f64>| {
        let mut m = meter(domains);
        let t = Instant::now();
        for (i, r) in reads.iter().enumerate() {
            black_box(m.feed(i as u64 * 1_000_000, r).ok());
        }
        out.push(t.elapsed().as_nanos() as f64 / n as f64);
        black_box(m.events().len());
    };
    for _ in 0..rounds {
        run(plain, &mut a);
        run(judged, &mut b);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (a, b) = (median(&mut a), median(&mut b));
    println!("rounds {rounds}, {n} four-channel readings each (medians over rounds)");
    println!("  no subdomain to judge       : {a:.2} ns/reading");
    println!("  core and uncore vs package  : {b:.2} ns/reading");
    println!(
        "  ratio                       : {:.2}x, +{:.2} ns/reading",
        b / a,
        b - a
    );
}
