//! The lab without its default features stays lean: `cargo tree` of
//! `quietwatt-lab --no-default-features` (normal and build dependencies) holds
//! neither the PNG renderer nor libbpf (the engine is used without `bpf`); the
//! default `png` feature brings the renderer and still no libbpf.

#[path = "../../quietwatt/tests/support/cargo_tree.rs"]
mod cargo_tree;

use cargo_tree::heavy;

fn tree(args: &[&str]) -> Vec<String> {
    cargo_tree::tree("quietwatt-lab", args)
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
