//! `quietwatt profile`'s edges (issue 25, item 9): code built without frame
//! pointers is named as such, with how to rebuild it.

use crate::common;
use crate::profile::{profiled, u};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A hot path three calls deep (`outer` → `middle` → `leaf`), each kept out of
/// line, spinning about a second.
const DEEP_RS: &str = r#"
#[inline(never)]
fn leaf(n: u64) -> u64 {
    let mut x = 0u64;
    for i in 0..n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i ^ (x >> 7));
    }
    x
}
#[inline(never)]
fn middle(n: u64) -> u64 {
    let mut s = 0;
    for _ in 0..20 {
        s ^= std::hint::black_box(leaf(std::hint::black_box(n)));
    }
    s
}
#[inline(never)]
fn outer(n: u64) -> u64 {
    let mut s = 0;
    for _ in 0..10 {
        s ^= middle(n);
    }
    s
}
fn main() {
    let start = std::time::Instant::now();
    let mut s = 0;
    while start.elapsed().as_millis() < 800 {
        s ^= outer(std::hint::black_box(200_000));
    }
    println!("{s}");
}
"#;

/// The program above, optimised, with or without frame pointers.
fn build(dir: &Path, frame_pointers: bool) -> PathBuf {
    let src = dir.join("deep.rs");
    std::fs::write(&src, DEEP_RS).unwrap();
    let exe = dir.join(if frame_pointers {
        "deep-fp"
    } else {
        "deep-nofp"
    });
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let o = Command::new(&rustc)
        .args(["--edition", "2021", "-C", "opt-level=2", "-C"])
        .arg(format!(
            "force-frame-pointers={}",
            if frame_pointers { "yes" } else { "no" }
        ))
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {rustc} to build the test program: {e}"));
    assert!(
        o.status.success(),
        "building it failed:\n{}",
        common::stderr(&o)
    );
    exe
}

/// Whether the document warns that `module` has no frame pointers.
fn warns_of(doc: &serde_json::Value, module: &str) -> bool {
    doc["warnings"].as_array().unwrap().iter().any(|w| {
        let m = w.as_str().unwrap_or_default();
        m.contains("without frame pointers") && m.contains(module)
    })
}

/// The same program built both ways: the one without frame pointers is said to
/// be (its chains stop at `leaf ← main`, inside the executable), with how to
/// rebuild; the one with them is not (its chains reach `outer` and libc).
#[test]
fn code_without_frame_pointers_is_named_with_how_to_rebuild_it() {
    let dir = tempfile::tempdir().unwrap();
    let m = common::mount(quietwatt_emulator::EmulatorConfig::default());
    let out = dir.path().join("p.folded");
    let out = out.to_str().unwrap();
    for fp in [false, true] {
        let exe = build(dir.path(), fp);
        let doc = profiled(m.root(), &["-o", out, "--", exe.to_str().unwrap()]);
        let module = exe.file_name().unwrap().to_str().unwrap();
        assert!(u(&doc, "samples") >= 200, "too few samples to judge: {doc}");
        assert_eq!(
            warns_of(&doc, module),
            !fp,
            "frame pointers {fp}: {}",
            doc["warnings"]
        );
        if !fp {
            let w = doc["warnings"].to_string();
            assert!(
                w.contains("force-frame-pointers=yes") && w.contains("-fno-omit-frame-pointer"),
                "{w}"
            );
        }
    }
}
