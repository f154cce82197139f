//! Every typed JSON document (`quietwatt::document`, the sources' listing, the
//! attribution's totals) validates against its JSON Schema in `docs/schemas/`:
//! serialised straight from the library types over a real emulator measurement,
//! and as the CLI prints them (with repeat and bench-energy, the compare crate's). The checker covers what those schemas use (`type`,
//! `required`, `properties`, `items`, `const`, `enum`).

use crate::common::{mount, quietwatt, stderr, stdout};
use quietwatt::document::{Document, RunDocument, UnmeasuredRun};
use quietwatt::source::listing::{DoctorDocument, ListDocument};
use quietwatt::{EngineConfig, Hertz, Meter, Rate, Selection, SysRoot};
use quietwatt_emulator::EmulatorConfig;
use serde_json::Value;

/// The schema of `kind`.
fn schema(kind: &str) -> Value {
    let path = format!(
        "{}/../../docs/schemas/{kind}.schema.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn has_type(v: &Value, t: &str) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => true,
    }
}

/// Appends to `errors` where `v` breaks `s`, `at` naming the place.
fn check(s: &Value, v: &Value, at: &str, errors: &mut Vec<String>) {
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => has_type(v, t),
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| has_type(v, t)),
            _ => true,
        };
        if !ok {
            errors.push(format!("{at}: {v} is not of type {t}"));
            return;
        }
    }
    if let Some(c) = s.get("const") {
        if c != v {
            errors.push(format!("{at}: {v} is not {c}"));
        }
    }
    if let Some(Value::Array(e)) = s.get("enum") {
        if !e.contains(v) {
            errors.push(format!("{at}: {v} is not one of {e:?}"));
        }
    }
    if let (Some(Value::Array(req)), Some(o)) = (s.get("required"), v.as_object()) {
        for k in req.iter().filter_map(Value::as_str) {
            if !o.contains_key(k) {
                errors.push(format!("{at}: `{k}` is missing"));
            }
        }
    }
    if let (Some(Value::Object(props)), Some(o)) = (s.get("properties"), v.as_object()) {
        for (k, ps) in props {
            if let Some(x) = o.get(k) {
                check(ps, x, &format!("{at}/{k}"), errors);
            }
        }
    }
    if let (Some(items), Some(a)) = (s.get("items"), v.as_array()) {
        for (i, x) in a.iter().enumerate() {
            check(items, x, &format!("{at}[{i}]"), errors);
        }
    }
}

/// Panics with every place where `doc` breaks the schema of `kind`.
pub(crate) fn validate(kind: &str, doc: &Value) {
    let mut errors = Vec::new();
    check(&schema(kind), doc, kind, &mut errors);
    assert!(errors.is_empty(), "{}\n{doc}", errors.join("\n"));
    assert_eq!(doc["schema"], format!("quietwatt.{kind}/1"), "{doc}");
    assert_eq!(doc["schema_version"], 1, "{doc}");
}

/// `doc` stamped and serialised, as the CLI prints it and Python receives it.
fn stamped<D: Document>(doc: &D) -> Value {
    serde_json::to_value(doc.stamped()).expect("a document serialises")
}

#[test]
fn each_typed_document_validates_against_its_schema() {
    let m = mount(EmulatorConfig::default());
    let root = SysRoot::new(m.root());
    let probes = quietwatt::source::probe_all(&root);
    let list = stamped(&ListDocument::new(m.root(), true, &probes));
    validate("list", &list);
    assert!(
        list["mechanisms"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["available"] == true)),
        "the emulator lists an available mechanism: {list}"
    );
    let doctor = DoctorDocument::new(m.root(), true, quietwatt::doctor::diagnose(&root));
    assert!(doctor.can_measure, "the emulator can measure");
    validate("doctor", &stamped(&doctor));

    let source =
        quietwatt::source::open(&root, None, &Selection::all()).expect("the emulator opens");
    let mut meter = Meter::new(source);
    let rate = Rate::Fixed(Hertz::new(100.0).unwrap());
    let mut cmd = std::process::Command::new("sleep");
    cmd.arg("0.05");
    let measured = quietwatt::command::measure(&mut meter, &mut cmd, &EngineConfig::new(rate))
        .expect("a measured command");
    let mut run = RunDocument::new(&measured, 0, true, &rate);
    run.notes = Some(vec!["a note".into()]);
    // The stamp comes first, then the document's own fields.
    let text = serde_json::to_string(&run.stamped()).unwrap();
    assert!(
        text.starts_with(r#"{"schema":"quietwatt.run/1","schema_version":1,"#),
        "{text}"
    );
    let run = stamped(&run);
    validate("run", &run);
    assert_eq!(run["freq_hz"], 100.0, "{run}");
    assert!(
        run["total_energy_j"].as_f64().is_some_and(|j| j > 0.0),
        "{run}"
    );
    // `run --json` is the measurement (the type Python's reports serialise) with
    // the command's fields beside it: each of the measurement's keys, its value.
    let measurement = serde_json::to_value(&measured.measurement).unwrap();
    for (k, v) in measurement.as_object().unwrap() {
        assert_eq!(run.get(k), Some(v), "`{k}` of the measurement in {run}");
    }
    assert!(run["overhead"].is_object(), "{run}");

    let auto = Rate::Auto {
        min: Hertz::new(5.0).unwrap(),
        max: Hertz::new(200.0).unwrap(),
    };
    let run = stamped(&RunDocument::new(&measured, 3, true, &auto));
    validate("run", &run);
    assert_eq!(run["freq_auto"]["max_hz"], 200.0, "{run}");
    assert!(run.get("freq_hz").is_none(), "{run}");

    let unmeasured = stamped(&UnmeasuredRun::new("no RAPL here".into(), 0, 0.01));
    validate("run", &unmeasured);
    assert_eq!(unmeasured["energy_supported"], false);
    assert!(unmeasured["total_energy_j"].is_null());
}

#[test]
fn each_document_the_cli_prints_validates_against_its_schema() {
    let m = mount(EmulatorConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("r.csv");
    let csv = csv.to_str().unwrap();
    let cases: [(&str, &[&str]); 7] = [
        ("run", &["run", "--json", "--", "true"]),
        ("run", &["run", "--json", "-f", "auto", "--", "true"]),
        (
            "record",
            &["record", "--json", "-o", csv, "--duration", "0.1"],
        ),
        ("doctor", &["doctor", "--json"]),
        ("list", &["list", "--json"]),
        ("repeat", &["run", "-r", "2", "--json", "--", "true"]),
        (
            "bench-energy",
            &["bench", "energy", "-r", "2", "--json", "true", "sleep 0.01"],
        ),
    ];
    for (kind, args) in cases {
        let o = quietwatt(m.root(), args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        let v: Value = serde_json::from_str(stdout(&o).trim())
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}", stdout(&o)));
        validate(kind, &v);
    }
}

#[test]
fn the_report_python_receives_has_the_run_documents_keys_and_types() {
    // Python's reports cross as a session's `Measurement` serialised: the type
    // `RunDocument` flattens, so each of its keys is a key of run's schema, of the
    // same type (a region has no exit code: `required` aside).
    let m = mount(EmulatorConfig::default());
    let config = quietwatt::SessionConfig::default().root(SysRoot::new(m.root()));
    let (_, report) = quietwatt::measure(config, || {
        std::thread::sleep(std::time::Duration::from_millis(20));
    })
    .expect("a measured region");
    let v = serde_json::to_value(&report).unwrap();
    let mut run = schema("run");
    run.as_object_mut().unwrap().remove("required");
    let props = run["properties"].as_object().unwrap();
    for k in v.as_object().unwrap().keys() {
        assert!(
            props.contains_key(k) || k == "window" || k == "samples",
            "`{k}` is not a key of run's schema: {v}"
        );
    }
    let mut errors = Vec::new();
    check(&run, &v, "report", &mut errors);
    assert!(errors.is_empty(), "{}\n{v}", errors.join("\n"));
    assert!(v["total_energy_j"].as_f64().is_some_and(|j| j > 0.0), "{v}");
}
