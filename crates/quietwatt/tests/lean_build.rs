//! The library as `cargo add quietwatt` gets it stays lean: its default features are
//! empty, and `cargo tree` of `quietwatt` (normal and build dependencies) with them
//! holds no libbpf (whose build needs clang, libelf and zlib), no crate of a C
//! toolchain (cc, pkg-config, cmake, bindgen, clang-sys) and no crate that links a
//! system library, nor the PNG renderer (which is the lab's, in quietwatt-lab: its
//! own `tests/lean_build.rs` checks it), nor the parquet crate. The `bpf` feature
//! brings libbpf with its C toolchain, and the `parquet` feature brings parquet
//! without arrow or a compression codec.

#[path = "support/cargo_tree.rs"]
mod cargo_tree;

use cargo_tree::heavy;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn tree(args: &[&str]) -> Vec<String> {
    cargo_tree::tree("quietwatt", args)
}

/// `cargo metadata` of the workspace, resolved offline from the lock file.
fn metadata(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .args(["metadata", "--format-version", "1", "--offline", "--locked"])
        .args(args)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// The name of a `cargo tree` line (`name vX.Y.Z ...`).
fn name(line: &str) -> &str {
    line.split(' ').next().unwrap_or("")
}

/// Lines of `tree` for crates that need a C toolchain or a system library to build:
/// libbpf, the crates that drive a C compiler or find native libraries, and every
/// package that declares `links` (a native library) anywhere in the lock file.
fn c_toolchain(tree: &[String]) -> Vec<&String> {
    let meta = metadata(&[]);
    let links: Vec<&str> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| p["links"].is_string())
        .filter_map(|p| p["name"].as_str())
        .collect();
    // The filter can see what it looks for: libbpf-sys links libbpf.
    assert!(links.contains(&"libbpf-sys"), "{links:?}");
    const C_TOOLCHAIN: [&str; 6] = ["cc", "cmake", "pkg-config", "bindgen", "clang-sys", "vcpkg"];
    tree.iter()
        .filter(|l| {
            let n = name(l);
            n.starts_with("libbpf") || C_TOOLCHAIN.contains(&n) || links.contains(&n)
        })
        .collect()
}

#[test]
fn the_default_features_are_empty() {
    let meta = metadata(&["--no-deps"]);
    let engine = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .find(|p| p["name"] == "quietwatt")
        .expect("the workspace has the quietwatt package");
    assert_eq!(
        engine["features"]["default"],
        Value::Array(Vec::new()),
        "{}",
        engine["features"]
    );
    // The feature that builds the ebpf mechanism is still there, to be asked for.
    assert!(
        engine["features"]["bpf"].is_array(),
        "{}",
        engine["features"]
    );
}

#[test]
fn the_default_tree_needs_a_rust_toolchain_only() {
    let default = tree(&[]);
    // The tree is really there: the crate itself and what it always uses.
    assert!(
        default.iter().any(|l| l.starts_with("quietwatt v")),
        "{default:?}"
    );
    assert!(
        default.iter().any(|l| l.starts_with("rustix v")),
        "{default:?}"
    );
    assert_eq!(c_toolchain(&default), Vec::<&String>::new(), "{default:#?}");
    assert_eq!(heavy(&default), Vec::<&String>::new(), "{default:#?}");
    // `cargo add quietwatt` and `default-features = false` are the same build.
    assert_eq!(default, tree(&["--no-default-features"]));
}

#[test]
fn the_bpf_feature_brings_libbpf_and_its_c_toolchain_and_no_png_renderer() {
    // The same filters do see libbpf and the C toolchain when they are there: the
    // lean checks above can fail.
    let bpf = tree(&["--features", "bpf"]);
    let found: Vec<&str> = c_toolchain(&bpf).iter().map(|l| name(l)).collect();
    for n in [
        "libbpf-rs",
        "libbpf-sys",
        "libbpf-cargo",
        "cc",
        "pkg-config",
    ] {
        assert!(found.contains(&n), "{n} missing from {found:?}");
    }
    // The engine never brings the lab's PNG renderer, whatever its features.
    assert!(
        heavy(&bpf).iter().all(|l| l.starts_with("libbpf")),
        "{bpf:#?}"
    );
}

#[test]
fn parquet_comes_only_with_its_feature_and_without_arrow_or_codecs() {
    let default = tree(&[]);
    assert!(
        !default.iter().any(|l| l.starts_with("parquet ")),
        "{default:#?}"
    );
    let with = tree(&["--features", "parquet"]);
    assert!(with.iter().any(|l| l.starts_with("parquet ")), "{with:#?}");
    // Parquet is Rust: its feature adds no C toolchain either.
    assert_eq!(c_toolchain(&with), Vec::<&String>::new(), "{with:#?}");
    // What the parquet crate's default features would bring: the arrow crates and
    // every codec (their C builds and their compile time are the cost avoided).
    let heavy: Vec<&str> = with
        .iter()
        .map(|l| name(l))
        .filter(|n| {
            n.starts_with("arrow")
                || [
                    "snap",
                    "brotli",
                    "flate2",
                    "lz4_flex",
                    "zstd",
                    "zstd-sys",
                    "libz-rs-sys",
                ]
                .contains(n)
        })
        .collect();
    assert_eq!(heavy, Vec::<&str>::new());
}
