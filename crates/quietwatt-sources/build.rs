//! Compiles the ebpf mechanism's BPF program (`src/bpf/sampler.bpf.c`) and generates
//! its skeleton through `quietwatt-bpf-build` (clang and libbpf-cargo), only with
//! the `bpf` feature.

fn main() -> std::process::ExitCode {
    quietwatt_bpf_build::build_programs("src/bpf")
}
