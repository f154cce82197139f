//! The `quietwatt` binary: [`quietwatt_cli::run`] on the process's arguments.

fn main() -> std::process::ExitCode {
    quietwatt_cli::run(std::env::args_os())
}
