//! Compiles the accounting program (`src/bpf/attribution.bpf.c`) and generates its
//! skeleton through `quietwatt-bpf-build` (clang and libbpf-cargo): only with the
//! `bpf` feature. Without it this script does nothing.

use std::process::ExitCode;

#[cfg(not(feature = "bpf"))]
fn main() -> ExitCode {
    println!("cargo:rerun-if-changed=build.rs");
    ExitCode::SUCCESS
}

#[cfg(feature = "bpf")]
fn main() -> ExitCode {
    println!("cargo:rerun-if-changed=build.rs");
    quietwatt_bpf_build::build_programs("src/bpf")
}
