//! The CLI's integration tests, one binary: each module is a feature's tests, run
//! against the built `quietwatt` binary and quietwatt's emulator. One binary links
//! once where 21 linked each their own copy of the dependencies.

#[path = "../../../quietwatt/tests/support/busy.rs"]
mod busy;
mod common;

mod attribute_cli;
mod auto_rate;
mod bad_input;
mod bench_sampler;
mod cli_habits;
mod compare_profile;
mod documents;
mod edges;
mod emulate_cli;
mod energy_bench;
mod estimate;
mod estimate_inputs;
mod events_cli;
mod inkernel_cli;
mod lab;
mod measurement;
mod model_cli;
mod model_warning;
mod parquet;
mod profile;
mod profile_edges;
mod profile_pprof;
mod profile_trace;
mod profile_truth;
mod reader;
mod reader_systemd;
mod record_stop;
mod recording_edges;
mod serve;
mod session_api;
mod top;
mod totals;
