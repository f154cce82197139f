//! Text the kernel (or an emulator, or a broken driver) puts in sysfs and perf's
//! event directories: scales, event terms, format bit ranges, CPU lists; and the
//! frequencies users type. Must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use quietwatt::source::perf::{parse_event_config, parse_format, parse_scale};
use quietwatt::topology::parse_cpu_list;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = parse_scale(&text);
    let _ = parse_format(&text);
    let _ = parse_event_config(&text, |t| parse_format(t).or(Some((0, 7))));
    let _ = parse_cpu_list(&text);
    if let Ok(f) = text.parse::<quietwatt::Hertz>() {
        let _ = f.period();
    }
    let _ = text.parse::<quietwatt::FreqArg>();
});
