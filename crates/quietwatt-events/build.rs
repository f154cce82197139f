//! Compiles the BPF event programs (`src/bpf/*.bpf.c`: power:cpu_idle counted in the kernel, and the full trace) and generates
//! its skeleton through `quietwatt-bpf-build` (clang and libbpf-cargo), only with
//! the `bpf` feature.

fn main() -> std::process::ExitCode {
    quietwatt_bpf_build::build_programs("src/bpf")
}
