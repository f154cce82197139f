//! Measures the energy of a child command from its start to its end, on the same
//! sampler thread as a recording (samples go nowhere: the result is the summary).

use crate::error::{Error, Result};
use crate::measurement::Measurement;
use crate::meter::Meter;
use crate::record::{drive, record_between, EngineConfig, Recording, Stopped};
use crate::sink::{Metadata, NullSink, Sink};
use std::path::Path;
use std::process::{Command, ExitStatus};

/// The outcome of a measured command: the measurement, and what only a command
/// has (how it ended).
#[derive(Debug)]
pub struct MeasuredCommand {
    /// Energy from just before the spawn to just after the exit; what measuring
    /// cost (`overhead`, always present); the kernel side's figures for a
    /// buffered source (ebpf, perf-ring); and every warning, things refused that
    /// did not stop the measurement (`--rt` without permission) included.
    pub measurement: Measurement,
    /// How the command ended.
    pub status: ExitStatus,
    /// A reading that failed mid-way: the measurement covers up to the last good
    /// sample.
    pub error: Option<Error>,
}

/// A command's exit code as a shell gives it: its own, or 128 + the signal that
/// ended it.
pub fn exit_code(status: ExitStatus) -> i32 {
    status.code().unwrap_or_else(|| {
        128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)
    })
}

/// What [`measure_watched`] tells its watcher about the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildEvent {
    /// The command started with this process id (a caller may now signal it: to
    /// forward a SIGTERM sent to the measuring process, as a shell does).
    Spawned(u32),
    /// The command has ended and is about to be reaped: its process id must not be
    /// signalled after this returns (it may be reused).
    Exited,
}

/// Runs `cmd` while the sampler reads `meter` at `config.rate` (often enough to see
/// every wrap). The first reading is taken before the spawn; a pidfd wakes this
/// thread the moment the command exits, and the sampler is woken at once for the
/// last reading, so no energy after the exit is counted.
pub fn measure(
    meter: &mut Meter,
    cmd: &mut Command,
    config: &EngineConfig,
) -> Result<MeasuredCommand> {
    measure_watched(meter, cmd, config, &mut |_| {})
}

/// [`measure`], telling `watch` when the command starts and ends.
pub fn measure_watched(
    meter: &mut Meter,
    cmd: &mut Command,
    config: &EngineConfig,
    watch: &mut dyn FnMut(ChildEvent),
) -> Result<MeasuredCommand> {
    measure_watched_into(meter, &mut NullSink, cmd, config, watch)
}

/// [`measure_watched`], with every sample also handed to `sink` (for a consumer of
/// the samples that writes no file of its own: the split among processes). The
/// caller begins the sink ([`Sink::begin`] with the meter's channels) first.
pub fn measure_watched_into(
    meter: &mut Meter,
    sink: &mut dyn Sink,
    cmd: &mut Command,
    config: &EngineConfig,
    watch: &mut dyn FnMut(ChildEvent),
) -> Result<MeasuredCommand> {
    let mut config = config.clone();
    config.duration = None;
    let (mut run, status) = drive(meter, sink, &config, None, |_| spawn_and_wait(cmd, watch))?;
    Ok(MeasuredCommand {
        measurement: run.measurement(meter),
        status,
        error: run.read_error,
    })
}

/// A recording of the time series while `cmd` runs: [`crate::record::record`] from
/// just before the spawn to the command's exit (not to a stop flag: a signal meant
/// for the command is the caller's to forward through `watch`), with the command's
/// status. A recording whose output fails goes on waiting for the command: the
/// [`Stopped`] error then carries what was kept and the command's status.
pub fn record_command(
    meter: &mut Meter,
    sink: &mut dyn Sink,
    output: &Path,
    meta: &Metadata,
    config: &EngineConfig,
    cmd: &mut Command,
    watch: &mut dyn FnMut(ChildEvent),
) -> std::result::Result<(Recording, ExitStatus), Stopped> {
    let mut config = config.clone();
    config.duration = None;
    let (rec, failed, status) = record_between(meter, sink, output, meta, &config, None, |_| {
        spawn_and_wait(cmd, watch)
    })?;
    match failed {
        None => Ok((rec, status)),
        Some(error) => Err(Stopped {
            error,
            kept: Some(Box::new(rec)),
            status: Some(status),
        }),
    }
}

/// Starts `cmd` and waits for its end (a pidfd; every 10 ms on kernels before
/// 5.3), telling `watch` when it starts and ends: a command run without measuring
/// it (no mechanism here) is handled as a measured one is.
pub fn spawn_and_wait(cmd: &mut Command, watch: &mut dyn FnMut(ChildEvent)) -> Result<ExitStatus> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let spawn_err = |source| Error::Spawn {
        program: program.clone(),
        source,
    };
    let mut child = cmd.spawn().map_err(spawn_err)?;
    watch(ChildEvent::Spawned(child.id()));
    quietwatt_sys::process::wait_exited_unreaped(child.id());
    watch(ChildEvent::Exited);
    child.wait().map_err(spawn_err)
}
