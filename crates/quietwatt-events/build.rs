//! Compiles the BPF event programs (`src/bpf/*.bpf.c`: power:cpu_idle counted in
//! the kernel, and the full trace) and generates their skeletons, through
//! `quietwatt-bpf-build` (clang and libbpf-cargo): only with the `bpf` feature.
//! Without it this script does nothing, and neither the helper nor libbpf-cargo is
//! built.

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
