//! Compiles the ebpf mechanism's BPF program (`src/bpf/*.bpf.c`) and generates its
//! skeleton, through `quietwatt-bpf-build` (clang and libbpf-cargo): only with the
//! `bpf` feature. Without it this script does nothing, and neither the helper nor
//! libbpf-cargo is built.

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
