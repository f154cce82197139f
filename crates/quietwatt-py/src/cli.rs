//! The `quietwatt` command of the Python package: the CLI itself, run in this
//! process (`python -m quietwatt`, and the `quietwatt` script the wheel installs).

use pyo3::prelude::*;
use std::ffi::OsString;

/// Runs the CLI on `args` (the program's name first) and returns its exit status.
/// `self_command` is how it runs itself (`[python, -m, quietwatt]`). The GIL is
/// released while it runs; the CLI handles the signals it needs itself.
#[pyfunction]
pub fn cli_main(py: Python<'_>, args: Vec<OsString>, self_command: Vec<OsString>) -> u8 {
    quietwatt_cli::set_self_command(self_command);
    py.detach(|| quietwatt_cli::exit_status(quietwatt_cli::run(args)))
}
