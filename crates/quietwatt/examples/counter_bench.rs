//! What the plausibility check costs on the hot path: ns per counter update of the
//! new `Counter::update` (wrap, reset and glitch judged against the domain's
//! plausible power) against the bare wrap correction it replaced, interleaved in
//! rounds on the same readings so that the machine's noise hits both alike.
//!
//! `cargo run --release -p quietwatt --example counter_bench -- [rounds] [updates]`

use quietwatt::counter::{Counter, Plausible, Wrap};
use quietwatt::{EnergyUnit, Watts};
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(15);
    let n: u64 = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    // A 32-bit MSR counter at 2^-16 J read every 1 ms at 20 W: 1310 steps a read.
    let wrap = Wrap::Modulus(1 << 32);
    let unit = EnergyUnit::PowerOfTwo(16);
    let reads: Vec<(u64, u64)> = (0..n)
        .map(|i| ((i * 1310) & 0xFFFF_FFFF, i * 1_000_000))
        .collect();
    let (mut bare, mut judged) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        // The previous code: delta across one wrap, integer accumulation.
        let t = Instant::now();
        let (mut last, mut total) = (reads[0].0, 0u128);
        for &(raw, _) in &reads[1..] {
            total += black_box(wrap.delta(last, raw)) as u128;
            last = raw;
        }
        black_box(total);
        bare.push(t.elapsed().as_nanos() as f64 / n as f64);

        let t = Instant::now();
        let mut c = Counter::new(wrap, unit, Plausible::at(Watts(500.0)));
        for &(raw, ts) in &reads {
            black_box(c.update(raw, ts).ok());
        }
        black_box(c.total_steps());
        judged.push(t.elapsed().as_nanos() as f64 / n as f64);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (b, j) = (median(&mut bare), median(&mut judged));
    println!("rounds {rounds}, {n} updates each (medians over rounds)");
    println!("  bare wrap correction : {b:.2} ns/update");
    println!("  Counter::update      : {j:.2} ns/update");
    println!(
        "  ratio                : {:.2}x, +{:.2} ns/update",
        j / b,
        j - b
    );
}
