//! What the Parquet sink's row-group rules give over a long recording: bytes per
//! sample, row groups, the final footer, and the most a SIGKILL would have lost (the
//! rows still in memory at a flush) over the last ten minutes. Synthetic samples
//! of four domains, flushed every half second as the writer does; no clock runs, so
//! an hour takes seconds.
//!
//! `cargo run --release -p quietwatt --no-default-features --features parquet --example parquet_figures -- [seconds]`
//!
//! Two kinds of energies: `steps` takes a few values (as the emulator's, whose
//! counters move once a millisecond at constant power: the dictionary encodes them in
//! a few bits), `varied` thousands (as a real counter's under a changing load).

use quietwatt::counter::{Marks, Wrap};
use quietwatt::domain::{Domain, DomainId};
use quietwatt::sink::parquet::read;
use quietwatt::sink::{Metadata, ParquetSink, Sample, Sink};
use quietwatt::source::Channel;
use quietwatt::{EnergyUnit, Hertz, Joules, Rate, SysRoot};
use std::process::ExitCode;

fn run(hz: u64, secs: u64, varied: bool) -> std::io::Result<()> {
    let dir =
        std::env::temp_dir().join(format!("quietwatt-parquet-figures-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("r.parquet");
    let mut sink = ParquetSink::create(&path)?;
    let domains = [Domain::Package, Domain::Core, Domain::Uncore, Domain::Dram];
    let channels: Vec<Channel> = domains
        .iter()
        .enumerate()
        .map(|(i, &d)| Channel {
            id: DomainId::new(0, d),
            unit: EnergyUnit::Microjoule,
            wrap: Wrap::PERF,
            origin: format!("/sys/class/powercap/intel-rapl:0/intel-rapl:0:{i}/energy_uj").into(),
            limit: None,
        })
        .collect();
    let rate = Rate::Fixed(Hertz::new(hz as f64).expect("a rate"));
    sink.begin(
        &Metadata::new("powercap", &rate, &SysRoot::default()),
        &channels,
    )?;
    let period = 1_000_000_000 / hz;
    let mut energy = vec![Joules(0.0); 4];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let n = hz * secs;
    let mut worst_s = 0.0f64;
    for k in 0..n {
        for (i, e) in energy.iter_mut().enumerate() {
            // xorshift: the varied part of each reading.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let spread = if varied { x % 4000 } else { k % 7 };
            *e = Joules((4 - i) as f64 * (5_000 + spread) as f64 * 1e-6 * 1000.0 / hz as f64);
        }
        sink.sample(&Sample {
            t_ns: 1_000_000_000 + k * period,
            interval_ns: period,
            missed: 0,
            merged: 0,
            freq_hz: hz as f64,
            marks: Marks::default(),
            energy: &energy,
        })?;
        if (k + 1) % (hz / 2).max(1) == 0 {
            sink.flush()?;
            if k + hz * 600 >= n {
                let held = k + 1 - sink.kept().unwrap_or(0);
                worst_s = worst_s.max(held as f64 / hz as f64);
            }
        }
    }
    sink.finish()?;
    let bytes = std::fs::read(&path)?;
    let footer = u32::from_le_bytes(
        bytes[bytes.len() - 8..bytes.len() - 4]
            .try_into()
            .expect("4 bytes"),
    );
    let groups = read(&path)?.row_groups;
    std::fs::remove_dir_all(&dir)?;
    println!(
        "| {hz} | {secs} | {} | {:.1} | {groups} | {:.0} | {worst_s:.1} |",
        if varied { "varied" } else { "steps" },
        bytes.len() as f64 / n as f64,
        footer as f64 / 1024.0,
    );
    Ok(())
}

fn main() -> ExitCode {
    let secs: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3600);
    println!("| Hz | seconds | energies | bytes / sample | row groups | footer (KiB) | most lost to a kill, last 10 min (s) |");
    println!("|---:|---:|---|---:|---:|---:|---:|");
    for (hz, varied) in [(1000, false), (1000, true), (100, true), (10, true)] {
        if let Err(e) = run(hz, secs, varied) {
            eprintln!("parquet_figures: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
