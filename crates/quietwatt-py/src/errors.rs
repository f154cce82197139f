//! Library errors as the Python exceptions of `quietwatt/_errors.py`, with the
//! library's explanation and the fix in Python's terms.

use pyo3::prelude::*;
use quietwatt::{Error, ErrorKind, SourceError};

/// The exception class, in `quietwatt._errors`, for an error of `kind`.
fn class_name(e: &Error) -> &'static str {
    if matches!(e.as_source(), Some(SourceError::Permission { .. })) {
        return "PermissionDenied";
    }
    match e.kind() {
        ErrorKind::Usage => "BadArgument",
        ErrorKind::Unavailable => "NoRapl",
        ErrorKind::CounterVanished => "CounterVanished",
        ErrorKind::Output => "OutputError",
        ErrorKind::Fatal | ErrorKind::CanRetry => "MeasurementError",
        // A kind newer than this module: the measurement failed; the message says why.
        _ => "MeasurementError",
    }
}

/// A Python exception of class `name` (from `quietwatt._errors`) with `message`.
pub fn raise(py: Python<'_>, name: &str, message: String) -> PyErr {
    match py
        .import("quietwatt._errors")
        .and_then(|m| m.getattr(name))
        .and_then(|class| class.call1((message.clone(),)))
    {
        Ok(exc) => PyErr::from_value(exc),
        // Only when the package is broken: still say what happened.
        Err(_) => pyo3::exceptions::PyRuntimeError::new_err(message),
    }
}

/// `e` as the exception a Python caller catches, its message the library's with the
/// fix named in this package's terms.
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let hint = match (&e, e.kind()) {
        (Error::TooManyChannels { .. }, _) => " (choose fewer with domains=)",
        (Error::NeedsRate { .. }, _) => {
            "\n  in Python: quietwatt.Monitor(freq=..., mechanism=...) samples in the kernel; \
             measure() and measure_energy read with mechanism='perf', 'powercap' or 'msr'"
        }
        (Error::Source(SourceError::Permission { .. }), _) | (_, ErrorKind::Unavailable) => {
            "\n  quietwatt.doctor() says what each mechanism needs here; \
             emulate='auto' measures against the built-in emulator instead"
        }
        _ => "",
    };
    raise(py, class_name(&e), format!("{e}{hint}"))
}

/// A bad argument from the caller.
pub fn bad_argument(py: Python<'_>, message: impl Into<String>) -> PyErr {
    raise(py, "BadArgument", message.into())
}

/// Maps a library result into a Python one.
pub trait IntoPy<T> {
    /// The value, or the error as its Python exception.
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for quietwatt::Result<T> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}
