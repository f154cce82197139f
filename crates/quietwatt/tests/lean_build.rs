//! The library without its default features stays lean: `cargo tree` of
//! `quietwatt --no-default-features` (normal and build dependencies) holds neither
//! libbpf (whose build needs clang, libelf and zlib) nor the PNG renderer (which is
//! the lab's, in quietwatt-lab: its own `tests/lean_build.rs` checks it), nor the
//! parquet crate; and the `parquet` feature brings parquet without arrow or a
//! compression codec.

#[path = "support/cargo_tree.rs"]
mod cargo_tree;

use cargo_tree::heavy;

fn tree(args: &[&str]) -> Vec<String> {
    cargo_tree::tree("quietwatt", args)
}

#[test]
fn without_default_features_there_is_no_libbpf_resvg_or_png() {
    let lean = tree(&["--no-default-features"]);
    // The tree is really there: the crate itself and what it always uses.
    assert!(
        lean.iter().any(|l| l.starts_with("quietwatt v")),
        "{lean:?}"
    );
    assert!(lean.iter().any(|l| l.starts_with("rustix v")), "{lean:?}");
    assert_eq!(heavy(&lean), Vec::<&String>::new(), "{lean:#?}");
}

#[test]
fn the_default_features_bring_libbpf_and_no_png_renderer() {
    // The same filter does see libbpf when it is there: the lean check above can fail.
    let full = tree(&[]);
    let found: Vec<&str> = heavy(&full)
        .iter()
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect();
    for name in ["libbpf-rs", "libbpf-sys", "libbpf-cargo"] {
        assert!(found.contains(&name), "{name} missing from {found:?}");
    }
    // The engine never brings the lab's PNG renderer, whatever its features.
    assert!(
        heavy(&full).iter().all(|l| l.starts_with("libbpf")),
        "{full:#?}"
    );
    let bpf = tree(&["--no-default-features", "--features", "bpf"]);
    assert!(
        heavy(&bpf).iter().all(|l| l.starts_with("libbpf")),
        "{bpf:#?}"
    );
}

#[test]
fn parquet_comes_only_with_its_feature_and_without_arrow_or_codecs() {
    let name = |l: &String| l.split(' ').next().unwrap_or("").to_owned();
    let lean = tree(&["--no-default-features"]);
    assert!(!lean.iter().any(|l| l.starts_with("parquet ")), "{lean:#?}");
    let default = tree(&[]);
    assert!(
        !default.iter().any(|l| l.starts_with("parquet ")),
        "{default:#?}"
    );
    let with = tree(&["--no-default-features", "--features", "parquet"]);
    assert!(with.iter().any(|l| l.starts_with("parquet ")), "{with:#?}");
    // What the parquet crate's default features would bring: the arrow crates and
    // every codec (their C builds and their compile time are the cost avoided).
    let heavy: Vec<String> = with
        .iter()
        .map(name)
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
                .contains(&n.as_str())
        })
        .collect();
    assert_eq!(heavy, Vec::<String>::new());
}
