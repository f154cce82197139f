//! The Chrome JSON trace format ("Trace Event Format", the JSON Object Format:
//! `{"traceEvents": [...], "displayTimeUnit": ..., "otherData": {...}}`), which
//! Perfetto UI and `chrome://tracing` open.
//!
//! Tracks:
//! - process 1 `energy`: one counter track (`"ph":"C"`) per domain, `power
//!   <socket>/<domain>` with series `W`;
//! - process 2 `events`: one counter track per CPU and event, events per second,
//!   and one per CPU `cpuidle residency cpuN` whose series are the states (percent
//!   of the window spent in each, from cpuidle `time`; on a CPU without a cpuidle
//!   driver `idle residency cpuN (power:cpu_idle, BPF)`, from the BPF program);
//! - process 3 `cpus`: one thread per CPU with a complete slice (`"ph":"X"`) per
//!   idle period and an instant event (`"ph":"i"`, thread scope) per traced fault,
//!   when the events file holds events recorded one by one (`trace:` rows).
//!
//! - process 4 `stacks`: one thread per CPU (`cpuN stacks`) with a complete
//!   slice per stack sample of a profile (`quietwatt profile --record`), named
//!   by its leaf frame, as wide as the CPU time it stands for (its period for
//!   cpu-clock, `1 / frequency_hz` otherwise, never past the CPU's next sample),
//!   its whole stack, µJ, pid, tid and period in `args`. One slice per sample
//!   rather than a flame chart of frames: a sample is the unit the energy was
//!   split into, so selecting a range in Perfetto sums its µJ and counts its
//!   leaves (the slices' aggregate) directly, and a 1 kHz profile stays one
//!   event per sample instead of one per frame.
//!
//! Timestamps are CLOCK_MONOTONIC in microseconds (fractional: nanoseconds kept).
//! A counter value holds from its timestamp to the next, so a row that covers
//! `(previous read, this read]` is placed at the previous read.

use super::{EnergyFile, EventsFile, StacksFile, TRACED};
use crate::Event;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Process ids of the three groups of tracks.
pub const PID_ENERGY: u32 = 1;
/// Events counters.
pub const PID_EVENTS: u32 = 2;
/// Per-CPU slices and instants.
pub const PID_CPUS: u32 = 3;
/// A profile's stack samples, per CPU.
pub const PID_STACKS: u32 = 4;

/// The thread id of CPU `cpu`'s track in [`PID_CPUS`]. Never 0 and never a pid:
/// Perfetto UI (checked in v52) turns a JSON `tid` 0 into `tid = pid`, which would
/// merge CPU 0's track with the CPU whose number equals the pid.
pub fn cpu_tid(cpu: u32) -> u32 {
    CPU_TID_BASE + cpu
}

/// See [`cpu_tid`].
pub const CPU_TID_BASE: u32 = 1000;

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn meta(pid: u32, tid: Option<u32>, what: &str, name: &str) -> Value {
    let mut v = json!({
        "name": what, "ph": "M", "pid": pid, "tid": tid.unwrap_or(0), "ts": 0,
        "args": {"name": name},
    });
    if what == "process_sort_index" || what == "thread_sort_index" {
        v["args"] = json!({"sort_index": name.parse::<i64>().unwrap_or(0)});
    }
    v
}

fn counter(pid: u32, name: &str, ts_ns: u64, args: Value) -> Value {
    json!({"name": name, "cat": "quietwatt", "ph": "C", "ts": us(ts_ns), "pid": pid, "tid": 0, "args": args})
}

/// Converts an energy recording (and its events, if any) into a Chrome JSON trace.
pub fn convert(energy: &EnergyFile, events: Option<&EventsFile>) -> Value {
    convert_with_stacks(energy, events, None)
}

/// [`convert`], with a profile's stack samples (`<stem>.stacks.csv`) on per-CPU
/// tracks of their own ([`PID_STACKS`]).
pub fn convert_with_stacks(
    energy: &EnergyFile,
    events: Option<&EventsFile>,
    stacks: Option<&StacksFile>,
) -> Value {
    let mut out: Vec<Value> = vec![
        meta(PID_ENERGY, None, "process_name", "energy (RAPL)"),
        meta(PID_ENERGY, None, "process_sort_index", "1"),
    ];
    // Energy: a row's power covers (previous row of the domain, this row].
    let mut prev: BTreeMap<(u32, &str), u64> = BTreeMap::new();
    for r in &energy.rows {
        let key = (r.socket, r.domain.as_str());
        if let Some(&p) = prev.get(&key) {
            out.push(counter(
                PID_ENERGY,
                &format!("power {}/{}", r.socket, r.domain),
                p,
                json!({"W": r.power_w}),
            ));
        }
        prev.insert(key, r.t_ns);
    }
    // The last value holds until the end: close each track with its last value.
    for r in energy.rows.iter().rev() {
        let key = (r.socket, r.domain.as_str());
        if prev.remove(&key).is_some() {
            out.push(counter(
                PID_ENERGY,
                &format!("power {}/{}", r.socket, r.domain),
                r.t_ns,
                json!({"W": r.power_w}),
            ));
        }
    }
    if let Some(ev) = events {
        out.extend(event_tracks(ev));
    }
    if let Some(st) = stacks {
        out.extend(stack_tracks(st));
    }
    // Metadata first, then by time: viewers do not need it, people reading the file do.
    out.sort_by(|a, b| {
        let key = |v: &Value| (v["ph"] != "M", v["ts"].as_f64().unwrap_or(0.0));
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    });
    let mut other = Map::new();
    // A key a CSV header repeats (`# channel:`, one per counter) keeps every value,
    // as an array, as the Parquet and JSON Lines metadata do.
    for (k, v) in &energy.meta {
        match other.get_mut(k) {
            None => {
                other.insert(k.clone(), Value::from(v.as_str()));
            }
            Some(Value::Array(a)) => a.push(Value::from(v.as_str())),
            Some(first) => {
                let was = first.take();
                *first = Value::Array(vec![was, Value::from(v.as_str())]);
            }
        }
    }
    other.insert(
        "converted_by".into(),
        format!("quietwatt {} trace", env!("CARGO_PKG_VERSION")).into(),
    );
    other.insert(
        "timestamps".into(),
        "CLOCK_MONOTONIC microseconds (fractional)".into(),
    );
    json!({"traceEvents": out, "displayTimeUnit": "ns", "otherData": other})
}

fn event_tracks(ev: &EventsFile) -> Vec<Value> {
    let names = ev.state_names();
    let mut out = vec![
        meta(PID_EVENTS, None, "process_name", "OS events (counted)"),
        meta(PID_EVENTS, None, "process_sort_index", "2"),
    ];
    // Counted rows: one read = one timestamp for every counter; a row covers
    // (previous read, this read].
    let reads = ev.read_times();
    let previous = |t: u64| -> Option<u64> {
        let k = reads.partition_point(|&x| x < t);
        (k >= 1).then(|| reads[k - 1])
    };
    // Residency per CPU: all states of one read in one counter event; from cpuidle's
    // `time`, or from the BPF program's nanoseconds on a CPU without cpuidle.
    let mut residency: BTreeMap<(u32, u64), Map<String, Value>> = BTreeMap::new();
    let mut bpf_residency: BTreeMap<(u32, u64), Map<String, Value>> = BTreeMap::new();
    for r in ev.rows.iter().filter(|r| !r.event.starts_with(TRACED)) {
        let Some(p) = previous(r.t_ns) else { continue };
        let secs = (r.t_ns - p) as f64 / 1e9;
        if secs <= 0.0 {
            continue;
        }
        // Percent of the interval: cpuidle counts µs, the BPF program ns.
        let (map, s, percent) = match Event::parse(&r.event) {
            Some(Event::CpuidleTimeUs(s)) => (&mut residency, s, r.count as f64 / 1e4 / secs),
            Some(Event::BpfIdleNs(s)) => (&mut bpf_residency, s, r.count as f64 / 1e7 / secs),
            _ => {
                out.push(counter(
                    PID_EVENTS,
                    &format!("cpu{} {} /s", r.cpu, r.event),
                    p,
                    json!({"per_s": r.count as f64 / secs}),
                ));
                continue;
            }
        };
        let name = names
            .get(&(r.cpu, s))
            .cloned()
            .unwrap_or_else(|| format!("state{s}"));
        map.entry((r.cpu, p))
            .or_default()
            .insert(format!("{s} {name} %"), json!(percent));
    }
    let with_cpuidle: std::collections::BTreeSet<u32> = residency.keys().map(|k| k.0).collect();
    for ((cpu, t), series) in residency {
        out.push(counter(
            PID_EVENTS,
            &format!("cpuidle residency cpu{cpu}"),
            t,
            Value::Object(series),
        ));
    }
    for ((cpu, t), series) in bpf_residency {
        if !with_cpuidle.contains(&cpu) {
            out.push(counter(
                PID_EVENTS,
                &format!("idle residency cpu{cpu} (power:cpu_idle, BPF)"),
                t,
                Value::Object(series),
            ));
        }
    }
    // Traced rows: slices per idle period, instants per fault.
    let traced: Vec<_> = ev
        .rows
        .iter()
        .filter(|r| r.event.starts_with(TRACED))
        .collect();
    if !traced.is_empty() {
        out.push(meta(PID_CPUS, None, "process_name", "CPUs (traced)"));
        out.push(meta(PID_CPUS, None, "process_sort_index", "3"));
        let mut cpus: Vec<u32> = traced.iter().map(|r| r.cpu).collect();
        cpus.sort_unstable();
        cpus.dedup();
        for c in &cpus {
            out.push(meta(
                PID_CPUS,
                Some(cpu_tid(*c)),
                "thread_name",
                &format!("cpu{c}"),
            ));
        }
        let mut open: BTreeMap<u32, (u64, u32)> = BTreeMap::new();
        let mut sorted = traced;
        sorted.sort_by_key(|r| r.t_ns);
        for r in sorted {
            let name = &r.event[TRACED.len()..];
            match Event::parse(name) {
                Some(Event::IdleEnter(s)) => {
                    open.insert(r.cpu, (r.t_ns, s));
                }
                Some(Event::IdleExit) => {
                    if let Some((t0, s)) = open.remove(&r.cpu) {
                        let state = names
                            .get(&(r.cpu, s))
                            .cloned()
                            .unwrap_or_else(|| format!("state{s}"));
                        out.push(json!({
                            "name": format!("C{s} {state}"), "cat": "cstate", "ph": "X",
                            "ts": us(t0), "dur": us(r.t_ns - t0),
                            "pid": PID_CPUS, "tid": cpu_tid(r.cpu), "args": {"state": s},
                        }));
                    }
                }
                _ => out.push(json!({
                    "name": name, "cat": "event", "ph": "i", "s": "t",
                    "ts": us(r.t_ns), "pid": PID_CPUS, "tid": cpu_tid(r.cpu), "args": {},
                })),
            }
        }
    }
    out
}

/// A slice per stack sample on its CPU's track (see the module doc).
fn stack_tracks(st: &StacksFile) -> Vec<Value> {
    let mut out = vec![
        meta(
            PID_STACKS,
            None,
            "process_name",
            "stacks (profile samples, µJ)",
        ),
        meta(PID_STACKS, None, "process_sort_index", "4"),
    ];
    let cpu_clock = st.meta_value("event") == Some("cpu-clock");
    // Without CPU time in the period (cycles), a sample stands for one sampling period.
    let default_ns = st
        .meta_value("frequency_hz")
        .and_then(|f| f.parse::<f64>().ok())
        .filter(|f| *f > 0.0)
        .map_or(1_000_000, |f| (1e9 / f) as u64);
    let mut rows: Vec<_> = st.rows.iter().collect();
    rows.sort_by_key(|r| (r.cpu, r.t_ns));
    let mut cpus: Vec<u32> = rows.iter().map(|r| r.cpu).collect();
    cpus.dedup();
    for c in &cpus {
        out.push(meta(
            PID_STACKS,
            Some(cpu_tid(*c)),
            "thread_name",
            &format!("cpu{c} stacks"),
        ));
    }
    // The slice ends at its sample and starts no earlier than the CPU's previous one.
    let mut prev: Option<(u32, u64)> = None;
    for r in rows {
        let width = if cpu_clock { r.period } else { default_ns };
        let floor = match prev {
            Some((c, t)) if c == r.cpu => t,
            _ => 0,
        };
        let start = r.t_ns.saturating_sub(width).max(floor);
        prev = Some((r.cpu, r.t_ns));
        out.push(json!({
            "name": r.leaf(), "cat": "stack", "ph": "X",
            "ts": us(start), "dur": us(r.t_ns - start),
            "pid": PID_STACKS, "tid": cpu_tid(r.cpu),
            "args": {
                "energy_uj": r.energy_uj, "stack": r.stack, "pid": r.pid, "tid": r.tid,
                "period": r.period, "sample_ns": r.t_ns,
            },
        }));
    }
    out
}

/// Checks `trace` against the format's rules for the phases quietwatt writes; returns
/// every violation (empty: valid). Used by the tests and by `quietwatt trace
/// --check`.
pub fn validate(trace: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    let Some(events) = trace.get("traceEvents").and_then(Value::as_array) else {
        return vec!["no traceEvents array".into()];
    };
    if let Some(u) = trace.get("displayTimeUnit") {
        if u != "ms" && u != "ns" {
            errs.push(format!("displayTimeUnit {u} is neither \"ms\" nor \"ns\""));
        }
    }
    let mut last: BTreeMap<(u64, u64, String), f64> = BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let mut err = |w: String| errs.push(format!("event {i}: {w}: {e}"));
        let Some(ph) = e.get("ph").and_then(Value::as_str) else {
            err("no ph".into());
            continue;
        };
        if e.get("name").and_then(Value::as_str).is_none() {
            err("no name string".into());
        }
        let pid = e.get("pid").and_then(Value::as_u64);
        let tid = e.get("tid").and_then(Value::as_u64);
        if pid.is_none() || tid.is_none() {
            err("pid and tid must be integers".into());
        }
        let ts = e.get("ts").and_then(Value::as_f64);
        match ts {
            Some(t) if t >= 0.0 && t.is_finite() => {}
            _ => err("ts must be a non-negative number of microseconds".into()),
        }
        match ph {
            "M" => {
                if e.pointer("/args/name").is_none() && e.pointer("/args/sort_index").is_none() {
                    err("metadata without args.name or args.sort_index".into());
                }
                continue;
            }
            "C" => match e.get("args").and_then(Value::as_object) {
                Some(a) if !a.is_empty() && a.values().all(Value::is_number) => {}
                _ => err("a counter needs args with numeric values only".into()),
            },
            "X" => match e.get("dur").and_then(Value::as_f64) {
                Some(d) if d >= 0.0 => {}
                _ => err("a complete event needs dur >= 0".into()),
            },
            "i" | "I" => match e.get("s").and_then(Value::as_str) {
                None | Some("g") | Some("p") | Some("t") => {}
                Some(s) => err(format!("instant scope {s:?} is not g, p or t")),
            },
            "B" | "E" => {}
            other => err(format!("phase {other:?} is not one quietwatt writes")),
        }
        // Within one track, time never goes back.
        let name = e.get("name").and_then(Value::as_str).unwrap_or("");
        let track = if ph == "C" {
            name.to_string()
        } else {
            String::new()
        };
        let key = (pid.unwrap_or(0), tid.unwrap_or(0), track);
        let t = ts.unwrap_or(0.0);
        if let Some(&p) = last.get(&key) {
            if t < p {
                errs.push(format!(
                    "event {i}: ts {t} goes back from {p} on track {key:?}"
                ));
            }
        }
        last.insert(key, t);
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{EnergyRow, EventRow};

    fn files() -> (EnergyFile, EventsFile) {
        let mut e = EnergyFile::default();
        let mut v = EventsFile::default();
        v.meta.push((
            "cpuidle".into(),
            "cpu0 state1 name=\"haltpoll idle\" latency_us=1 residency_us=1".into(),
        ));
        for k in 0..5u64 {
            let t = 1_000_000_000 + k * 10_000_000;
            for d in ["package", "dram"] {
                e.rows.push(EnergyRow {
                    t_ns: t,
                    socket: 0,
                    domain: d.into(),
                    energy_j: 0.1,
                    power_w: 10.0 + k as f64,
                });
            }
            for (ev, n) in [("page_faults_min", 3), ("cpuidle_time_us.state1", 5000)] {
                v.rows.push(EventRow {
                    t_ns: t,
                    cpu: 0,
                    event: ev.into(),
                    count: n,
                });
            }
        }
        for (t, ev) in [
            (1_001_000_000, "trace:cpu_idle_enter.state1"),
            (1_002_000_000, "trace:page_fault"),
            (1_003_500_000, "trace:cpu_idle_exit"),
        ] {
            v.rows.push(EventRow {
                t_ns: t,
                cpu: 0,
                event: ev.into(),
                count: 1,
            });
        }
        (e, v)
    }

    #[test]
    fn tracks_slices_and_instants_are_valid() {
        let (e, v) = files();
        let t = convert(&e, Some(&v));
        assert_eq!(validate(&t), Vec::<String>::new());
        let evs = t["traceEvents"].as_array().unwrap();
        let named = |n: &str| evs.iter().filter(|x| x["name"] == n).count();
        // 5 rows per domain: 4 interval values + the closing one.
        assert_eq!(named("power 0/package"), 5);
        assert_eq!(named("cpu0 page_faults_min /s"), 4);
        assert_eq!(named("cpuidle residency cpu0"), 4);
        let slice = evs.iter().find(|x| x["ph"] == "X").unwrap();
        assert_eq!(slice["name"], "C1 haltpoll idle");
        assert!((slice["dur"].as_f64().unwrap() - 2500.0).abs() < 1e-9);
        let res = evs
            .iter()
            .find(|x| x["name"] == "cpuidle residency cpu0")
            .unwrap();
        // 5000 µs in a 10 ms window = 50 %.
        assert!((res["args"]["1 haltpoll idle %"].as_f64().unwrap() - 50.0).abs() < 1e-9);
        assert!(evs
            .iter()
            .any(|x| x["ph"] == "i" && x["name"] == "page_fault"));
        // CPU tracks use tids that are neither 0 nor a pid (Perfetto merges those).
        let process_meta = |x: &Value| x["ph"] == "M" && x["name"] != "thread_name";
        for x in evs
            .iter()
            .filter(|x| x["pid"] == PID_CPUS && !process_meta(x))
        {
            let tid = x["tid"].as_u64().unwrap();
            assert!(tid >= u64::from(CPU_TID_BASE), "{x}");
        }
        assert!(evs.iter().any(|x| x["ph"] == "M"
            && x["name"] == "thread_name"
            && x["tid"] == cpu_tid(0)
            && x["args"]["name"] == "cpu0"));
    }

    #[test]
    fn validation_catches_what_a_viewer_rejects() {
        let bad = json!({"traceEvents": [
            {"name": "a", "ph": "C", "ts": 5, "pid": 1, "tid": 0, "args": {"W": "high"}},
            {"name": "b", "ph": "X", "ts": 1, "pid": 1, "tid": 0},
            {"name": "c", "ph": "i", "ts": -1, "pid": 1, "tid": 0, "s": "x"},
            {"ph": "C", "ts": 1, "pid": 1, "tid": 0, "args": {"W": 1}},
            {"name": "a", "ph": "C", "ts": 4, "pid": 1, "tid": 0, "args": {"W": 1}},
        ]});
        let errs = validate(&bad);
        // Bad args; no dur; negative ts, bad scope, and time going back on the thread
        // track; no name; counter "a" going back from 5 to 4.
        assert_eq!(errs.len(), 7, "{errs:#?}");
        assert!(
            errs.iter().any(|e| e.contains("goes back from 5")),
            "{errs:#?}"
        );
    }

    fn stacks(event: &str, rows: &[(u64, u32, u64, u64, &str)]) -> StacksFile {
        let mut f = StacksFile::default();
        f.meta.push(("event".into(), event.into()));
        f.meta.push(("frequency_hz".into(), "1000".into()));
        for &(t_ns, cpu, period, energy_uj, stack) in rows {
            f.rows.push(crate::trace::StackRow {
                t_ns,
                cpu,
                pid: 9,
                tid: 10,
                period,
                energy_uj,
                stack: stack.into(),
            });
        }
        f
    }

    fn slices(v: &Value) -> Vec<(u32, String, f64, f64, u64)> {
        v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["pid"] == PID_STACKS && e["ph"] == "X")
            .map(|e| {
                (
                    e["tid"].as_u64().unwrap() as u32,
                    e["name"].as_str().unwrap().to_string(),
                    e["ts"].as_f64().unwrap(),
                    e["dur"].as_f64().unwrap(),
                    e["args"]["energy_uj"].as_u64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn stack_samples_are_slices_on_their_cpu_named_by_their_leaf_never_overlapping() {
        let (e, _) = files();
        // cpu-clock: as wide as the period, cut at the CPU's previous sample.
        let st = stacks(
            "cpu-clock",
            &[
                (1_002_000_000, 0, 1_000_000, 40, "main;spin"),
                (1_002_500_000, 0, 1_000_000, 20, "main;spin;memcpy"),
                (1_002_000_000, 1, 300_000, 7, "main;other"),
            ],
        );
        let v = convert_with_stacks(&e, None, Some(&st));
        assert_eq!(validate(&v), Vec::<String>::new());
        let got = slices(&v);
        let on = |cpu: u32| -> Vec<_> {
            got.iter()
                .filter(|s| s.0 == cpu_tid(cpu))
                .map(|s| (s.1.as_str(), s.2, s.3, s.4))
                .collect()
        };
        assert_eq!(
            on(0),
            vec![
                ("spin", 1_001_000.0, 1_000.0, 40),
                ("memcpy", 1_002_000.0, 500.0, 20)
            ]
        );
        assert_eq!(on(1), vec![("other", 1_001_700.0, 300.0, 7)]);
        // cycles: one sampling period (1 ms at 1000 Hz), the period being no time.
        let cyc = stacks("cycles", &[(1_002_000_000, 0, 3_000_000_000, 5, "f")]);
        let v = convert_with_stacks(&e, None, Some(&cyc));
        assert_eq!(
            slices(&v),
            vec![(cpu_tid(0), "f".into(), 1_001_000.0, 1_000.0, 5)]
        );
        // Without stacks the trace is convert's.
        assert_eq!(convert_with_stacks(&e, None, None), convert(&e, None));
    }
}
