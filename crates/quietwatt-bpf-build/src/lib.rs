//! Compiles every BPF program in a crate's BPF directory (`NAME.bpf.c`) with clang
//! and generates its skeleton into `OUT_DIR/NAME.skel.rs`, through libbpf-cargo: the
//! object is embedded in the crate, and the C structs its maps use become Rust
//! types. A module includes it with
//! `include!(concat!(env!("OUT_DIR"), "/NAME.skel.rs"))`.
//!
//! The programs include only `<linux/bpf.h>` (linux-libc-dev) and libbpf's
//! `bpf_helpers.h` (which libbpf-cargo extracts from libbpf-sys): no bpftool, no
//! vmlinux.h, no network. `scripts/setup-deps.sh` installs clang.
//!
//! Nothing is built unless the crate being built has its `bpf` feature on (cargo
//! tells the build script through `CARGO_FEATURE_BPF`), and that feature turns on
//! this crate's `compile` (libbpf-cargo): one build script for every crate.
//!
//! # Example
//!
//! A crate's whole `build.rs`, with `bpf = ["dep:libbpf-rs",
//! "quietwatt-bpf-build/compile"]` among its features:
//!
//! ```no_run
//! fn main() -> std::process::ExitCode {
//!     quietwatt_bpf_build::build_programs("src/bpf")
//! }
//! ```
#![deny(missing_docs)]

use std::process::ExitCode;

/// Compiles `bpf_dir/*.bpf.c` of the crate being built (a path relative to its
/// manifest) into skeletons in `OUT_DIR` when that crate's `bpf` feature is on;
/// does nothing otherwise. On failure, says what to install and returns a failing
/// exit code for the build script to return.
pub fn build_programs(bpf_dir: &str) -> ExitCode {
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_BPF").is_none() {
        return ExitCode::SUCCESS;
    }
    compile(bpf_dir)
}

#[cfg(not(feature = "compile"))]
fn compile(bpf_dir: &str) -> ExitCode {
    eprintln!(
        "quietwatt build: {bpf_dir} has BPF programs and the crate's `bpf` feature is on, but \
         quietwatt-bpf-build's `compile` is not: add \"quietwatt-bpf-build/compile\" to the \
         crate's `bpf` feature"
    );
    ExitCode::FAILURE
}

#[cfg(feature = "compile")]
fn compile(bpf_dir: &str) -> ExitCode {
    use std::env;
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};

    // The directory too: a program added there is built without touching this file.
    println!("cargo:rerun-if-changed={bpf_dir}");
    let Some(out_dir) = env::var_os("OUT_DIR").map(PathBuf::from) else {
        eprintln!("quietwatt build: OUT_DIR is not set (this script runs under cargo only)");
        return ExitCode::FAILURE;
    };
    let mut sources: Vec<PathBuf> = match std::fs::read_dir(bpf_dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.to_string_lossy().ends_with(".bpf.c"))
            .collect(),
        Err(e) => {
            eprintln!("quietwatt build: cannot list {bpf_dir}: {e}");
            return ExitCode::FAILURE;
        }
    };
    sources.sort();

    let mut clang_args: Vec<OsString> = Vec::new();
    // `-target bpf` drops the multiarch include directory, where <asm/types.h>
    // (included by <linux/bpf.h>) lives on Debian and Ubuntu.
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let multiarch = Path::new("/usr/include").join(format!("{arch}-linux-gnu"));
    if multiarch.join("asm").is_dir() {
        clang_args.push("-I".into());
        clang_args.push(multiarch.into_os_string());
    }
    // Warnings in our own program are errors: it is small and runs in the kernel.
    clang_args.push("-Wall".into());
    clang_args.push("-Werror".into());

    let clang = env::var_os("CLANG").unwrap_or_else(|| "clang".into());
    println!("cargo:rerun-if-env-changed=CLANG");
    for src in &sources {
        println!("cargo:rerun-if-changed={}", src.display());
        let file = src.file_name().map(|f| f.to_string_lossy().into_owned());
        let name = file
            .as_deref()
            .and_then(|f| f.strip_suffix(".bpf.c"))
            .unwrap_or("bpf");
        let out = out_dir.join(format!("{name}.skel.rs"));
        if let Err(e) = libbpf_cargo::SkeletonBuilder::new()
            .source(src)
            .clang(&clang)
            .clang_args(clang_args.clone())
            .build_and_generate(&out)
        {
            eprintln!(
                "quietwatt build: compiling {} with {} failed: {e:#}\n\
                 The BPF programs need clang and the Linux UAPI headers: run ./scripts/setup-deps.sh \
                 (Debian/Ubuntu: apt-get install clang libelf-dev zlib1g-dev pkg-config), or set CLANG \
                 to a clang that targets bpf.",
                src.display(),
                Path::new(&clang).display()
            );
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
