//! Measures the energy of a child command from its start to its end, on the same
//! sampler thread as a recording (samples go nowhere: the result is the summary).

use crate::error::{Error, Result};
use crate::meter::{EnergyReport, Meter};
use crate::overhead::Overhead;
use crate::record::{drive, EngineConfig};
use crate::sink::NullSink;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::process::{pidfd_open, Pid, PidfdFlags};
use std::process::{Command, ExitStatus};
use std::time::Duration;

/// The outcome of a measured command.
#[derive(Debug)]
pub struct MeasuredCommand {
    /// Energy from just before the spawn to just after the exit.
    pub report: EnergyReport,
    /// How the command ended.
    pub status: ExitStatus,
    /// What measuring cost.
    pub overhead: Overhead,
    /// Things refused that did not stop the measurement (`--rt` without permission).
    pub warnings: Vec<String>,
    /// A reading that failed mid-way: the report covers up to the last good sample.
    pub error: Option<Error>,
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
    let program = cmd.get_program().to_string_lossy().into_owned();
    let spawn_err = |source| Error::Spawn {
        program: program.clone(),
        source,
    };
    let mut config = config.clone();
    config.duration = None;
    let (run, status) = drive(meter, &mut NullSink, &config, None, |_| {
        let mut child = cmd.spawn().map_err(spawn_err)?;
        let pid = Pid::from_raw(child.id() as i32);
        match pid.and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok()) {
            Some(fd) => loop {
                let mut fds = [PollFd::new(&fd, PollFlags::IN)];
                // EINTR (Ctrl-C reaches the child too) just polls again.
                if matches!(poll(&mut fds, None), Ok(n) if n > 0) {
                    break;
                }
            },
            // No pidfd (kernel < 5.3): look every 10 ms.
            None => {
                while matches!(child.try_wait(), Ok(None)) {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
        child.wait().map_err(spawn_err)
    })?;
    Ok(MeasuredCommand {
        report: meter.report(),
        status,
        overhead: Overhead::new(&run.counts, run.writer_usage, run.written)
            .with_waiter(run.waiter_usage),
        warnings: run.warnings,
        error: run.read_error,
    })
}
