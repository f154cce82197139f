//! `cargo tree` of one workspace package, for the lean-build tests of the engine and
//! of the lab (the lab's includes this file by path). Cheap: it resolves the locked
//! dependency graph offline and compiles nothing.

use std::path::Path;
use std::process::Command;

/// The dependency crates `cargo tree` lists for `package` (normal and build
/// dependencies) with `args`, one `name vX.Y.Z` line each, sorted and deduplicated.
pub fn tree(package: &str, args: &[&str]) -> Vec<String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO"))
        .current_dir(&workspace)
        .args(["tree", "-p", package, "-e", "normal,build"])
        .args(["--prefix", "none", "--offline", "--locked"])
        .args(args)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package} {args:?} failed: {}",
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

/// Lines of `tree` for the crates that need more than a Rust toolchain, or are big:
/// libbpf (clang, libelf, zlib) and the PNG renderer.
pub fn heavy(tree: &[String]) -> Vec<&String> {
    tree.iter()
        .filter(|l| l.starts_with("libbpf") || l.starts_with("resvg") || l.starts_with("png "))
        .collect()
}
