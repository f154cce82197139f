//! `quietwatt.record()`: a recording to a file, composed by the same library
//! builder as `quietwatt record` ([`quietwatt_recording::RecordingBuilder`]), its
//! summary the same typed document as `record --json`.

use crate::errors::{bad_argument, raise, to_py};
use crate::session::{parse_mechanism, selection};
use pyo3::prelude::*;
use quietwatt::document::{Document, RecordDocument};
use quietwatt::source::choose::{ChooseError, MechanismRequest};
use quietwatt::{Format, Hertz, Rate, SysRoot};
use quietwatt_recording::{Output, RecordingBuilder, RecordingError};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How often a waiting `record()` looks for a Ctrl-C (Python runs signal handlers
/// only in its own thread, between bytecodes).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Records `root`'s counters to `output` for `duration_s` seconds (until Ctrl-C
/// without one) and returns `record --json`'s document as JSON text. A Ctrl-C
/// stops the recording, keeps the file whole, then raises `KeyboardInterrupt`.
#[pyfunction]
#[pyo3(signature = (root, output, duration_s=None, mechanism=None, domains=None, freq=100.0, format=None, emulated=false))]
#[allow(clippy::too_many_arguments)]
pub fn record_json(
    py: Python<'_>,
    root: &str,
    output: PathBuf,
    duration_s: Option<f64>,
    mechanism: Option<&str>,
    domains: Option<Vec<String>>,
    freq: f64,
    format: Option<&str>,
    emulated: bool,
) -> PyResult<String> {
    let format = match format {
        Some(f) => f
            .parse::<Format>()
            .map_err(|e| bad_argument(py, format!("format={f:?}: {e}")))?,
        None => Format::from_extension(&output)
            .map_err(|e| bad_argument(py, format!("{e}")))?
            .unwrap_or(Format::Csv),
    };
    let hz = Hertz::new(freq).map_err(|e| bad_argument(py, format!("freq={freq}: {e}")))?;
    let mut b = RecordingBuilder::new()
        .root(SysRoot::new(root))
        .rate(Rate::Fixed(hz))
        .output(Output::File(output.clone()), format)
        .emulated(emulated);
    if let Some(m) = mechanism {
        b = b.mechanism(MechanismRequest::Named(parse_mechanism(py, m)?));
    }
    if let Some(names) = domains {
        b = b.domains(selection(py, &names)?);
    }
    if let Some(s) = duration_s {
        let d = Duration::try_from_secs_f64(s)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                bad_argument(
                    py,
                    format!("duration={s}: give a positive number of seconds"),
                )
            })?;
        b = b.duration(d);
    }
    b.validate().map_err(|e| recording_error(py, e))?;
    let stop = AtomicBool::new(false);
    let (done, interrupted) = std::thread::scope(|scope| {
        let stop = &stop;
        let running = scope.spawn(move || b.run(stop, &mut ()));
        let mut interrupted = None;
        while !running.is_finished() {
            py.detach(|| std::thread::sleep(SIGNAL_POLL));
            if interrupted.is_none() {
                if let Err(e) = py.check_signals() {
                    // Stop, let the recording end whole, then raise.
                    stop.store(true, Ordering::Release);
                    interrupted = Some(e);
                }
            }
        }
        let done = running
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        (done, interrupted)
    });
    let done = done.map_err(|e| recording_error(py, e))?;
    if let Some(e) = interrupted {
        return Err(e);
    }
    let rec = &done.recording;
    let mut doc = RecordDocument::new(
        rec,
        output.display().to_string(),
        done.format.name(),
        emulated,
        &Rate::Fixed(hz),
        done.error
            .as_ref()
            .map(|e| quietwatt_recording::stopped_early(e, rec.samples)),
    );
    doc.notes = Some(done.notes.clone());
    Ok(serde_json::to_string(&doc.stamped()).unwrap_or_default())
}

/// A recording's error as the exception a Python caller catches.
fn recording_error(py: Python<'_>, e: RecordingError) -> PyErr {
    match e {
        RecordingError::Engine(e) => to_py(py, e),
        RecordingError::Mechanism(ChooseError::Source(e)) => to_py(py, e.into()),
        RecordingError::CreateOutput { .. }
        | RecordingError::Sink { .. }
        | RecordingError::OutputIsPipe { .. } => raise(py, "OutputError", e.to_string()),
        RecordingError::Mechanism(_) | RecordingError::NotStreamable { .. } => {
            bad_argument(py, e.to_string())
        }
        e => raise(py, "MeasurementError", e.to_string()),
    }
}
