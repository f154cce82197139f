//! The native half of the `quietwatt` Python package: [`quietwatt::Session`], the
//! diagnosis, the domain list and [`quietwatt_emulator::Emulator`] as a Python
//! extension module (`quietwatt._quietwatt`), built by maturin from the repository's
//! `pyproject.toml`.
//!
//! It is deliberately thin: reports cross as the JSON of `quietwatt run --json`
//! (one shape for the CLI, Rust and Python), samples as flat lists, errors as the
//! exception classes of `quietwatt/_errors.py`. Everything Pythonic (context
//! managers, decorators, DataFrames, the pytest plugin) is in `python/quietwatt/`.
//! Every call that reads counters or waits releases the GIL.
//!
//! ```python
//! import quietwatt as qw
//! with qw.measure() as m:
//!     sum(range(10**7))
//! print(m.total_j, "J ±", m.uncertainty_j)
//! ```

#[cfg(feature = "cli")]
mod cli;
mod emulator;
mod errors;
mod info;
mod profile;
mod recording;
mod session;
mod share;

use pyo3::prelude::*;

/// The extension module (`quietwatt._quietwatt`).
#[pymodule]
fn _quietwatt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<session::Session>()?;
    m.add_class::<emulator::Emulator>()?;
    m.add_class::<emulator::BuiltInEmulator>()?;
    m.add_class::<share::Share>()?;
    m.add_class::<profile::Profiler>()?;
    m.add_function(wrap_pyfunction!(info::doctor_json, m)?)?;
    m.add_function(wrap_pyfunction!(info::domains_json, m)?)?;
    m.add_function(wrap_pyfunction!(info::can_measure, m)?)?;
    m.add_function(wrap_pyfunction!(info::is_emulator, m)?)?;
    m.add_function(wrap_pyfunction!(info::compare_json, m)?)?;
    m.add_function(wrap_pyfunction!(recording::record_json, m)?)?;
    #[cfg(feature = "cli")]
    m.add_function(wrap_pyfunction!(cli::cli_main, m)?)?;
    Ok(())
}
