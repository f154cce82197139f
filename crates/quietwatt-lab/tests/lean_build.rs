//! The lab without its default features stays lean: `cargo tree` of
//! `quietwatt-lab --no-default-features` (normal and build dependencies) holds
//! neither the PNG renderer nor libbpf (the engine is used without `bpf`); the
//! default `png` feature brings the renderer and still no libbpf. Cheap: it
//! resolves the locked dependency graph offline and compiles nothing.

use std::path::Path;
use std::process::Command;

/// The dependency crates `cargo tree` lists for `quietwatt-lab` with `args`, one
/// `name vX.Y.Z` line each, deduplicated.
fn tree(args: &[&str]) -> Vec<String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO"))
        .current_dir(&workspace)
        .args(["tree", "-p", "quietwatt-lab", "-e", "normal,build"])
        .args(["--prefix", "none", "--offline", "--locked"])
        .args(args)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines: Vec<String> = String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines.dedup();
    lines
}

/// Lines of `tree` for the crates that need more than a Rust toolchain, or are big.
fn heavy(tree: &[String]) -> Vec<&String> {
    tree.iter()
        .filter(|l| l.starts_with("libbpf") || l.starts_with("resvg") || l.starts_with("png "))
        .collect()
}

#[test]
fn without_default_features_there_is_no_libbpf_resvg_or_png() {
    let lean = tree(&["--no-default-features"]);
    // The tree is really there: the lab, the engine and what they always use.
    assert!(
        lean.iter().any(|l| l.starts_with("quietwatt-lab v")),
        "{lean:?}"
    );
    assert!(
        lean.iter().any(|l| l.starts_with("quietwatt v")),
        "{lean:?}"
    );
    assert_eq!(heavy(&lean), Vec::<&String>::new(), "{lean:#?}");
}

#[test]
fn the_png_feature_brings_the_png_renderer_and_no_libbpf() {
    // The same filter does see them when they are there: the lean check above can fail.
    let full = tree(&[]);
    let found: Vec<&str> = heavy(&full)
        .iter()
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect();
    for name in ["resvg", "png"] {
        assert!(found.contains(&name), "{name} missing from {found:?}");
    }
    assert!(
        heavy(&full).iter().all(|l| !l.starts_with("libbpf")),
        "{full:#?}"
    );
}
