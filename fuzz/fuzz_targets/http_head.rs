//! A request head from anyone who can connect to `serve`: where it ends, what it
//! asks for, whether its credentials match. Must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use quietwatt_exporter::http::{authorized, head_end, parse_head};

fuzz_target!(|data: &[u8]| {
    let end = head_end(data).unwrap_or(data.len());
    let head = String::from_utf8_lossy(&data[..end]);
    if let Some(h) = parse_head(&head) {
        assert!(!h.method.is_empty());
        let _ = authorized(h.authorization, "Basic dTpw");
    }
});
