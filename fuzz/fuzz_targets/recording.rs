//! A recording `trace` and `read_recording` read: whatever the bytes (a cut file, a
//! foreign CSV, a damaged Parquet footer), a typed error or a recording, never a
//! panic; and what is read holds no NaN.
#![no_main]

use libfuzzer_sys::fuzz_target;
use quietwatt_events::trace::{EnergyFile, EventsFile};

fuzz_target!(|data: &[u8]| {
    // libfuzzer-sys aborts on any panic from its hook, even one the reader catches:
    // the Parquet reader turns the parquet crate's asserts into errors
    // (catch_unwind), so only a panic that escapes it may count. libfuzzer-sys
    // still aborts on those, from its own catch_unwind around this closure.
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let dir = tempfile::tempdir().expect("a temporary directory");
    // The name's extension does not choose the reader (the first bytes do), but
    // try both kinds of name all the same.
    let name = if data.first().is_some_and(|b| b & 1 == 1) { "r.parquet" } else { "r.csv" };
    let path = dir.path().join(name);
    std::fs::write(&path, data).expect("write the input");
    if let Ok(f) = EnergyFile::read(&path) {
        for r in &f.rows {
            assert!(r.energy_j.is_finite() && r.power_w.is_finite(), "{r:?}");
        }
    }
    let _ = EventsFile::read(&path);
});
