//! The stand-in source: a real file pread per channel where no RAPL opens, so the
//! sampling loop's benchmarks and the lab's `pread-stand-in` monitor cost real
//! syscalls on any machine. Public as [`crate::bench::StandIn`]: the command line's
//! `bench sampler --stand-in` opens it too.

use quietwatt::domain::{Domain, DomainId};
use quietwatt::error::{Result, SourceError, SourceResult};
use quietwatt::root::SysRoot;
use quietwatt::source::{Channel, Mechanism, Source};
use quietwatt::ticker::monotonic_ns;
use quietwatt::units::EnergyUnit;
use quietwatt::Wrap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Files the stand-in source can pread, cheapest first: a sysfs counter like
/// `energy_uj`, else a procfs file every Linux has.
const STAND_IN_FILES: [&str; 2] = [
    "/sys/devices/system/cpu/cpu0/cpuidle/state0/usage",
    "/proc/self/stat",
];

/// A source that is not RAPL: it preads a real file once per channel per read (the
/// syscall a powercap read costs) and reports a synthetic counter of 1 W per
/// channel index + 1. For benchmarking the sampling loop where no RAPL opens.
#[derive(Debug)]
pub struct StandIn {
    channels: Vec<Channel>,
    file: File,
    start_ns: u64,
}

impl StandIn {
    /// Opens the first readable stand-in file under `root`, with `n` channels
    /// (package and dram of socket 0 for 2).
    pub fn open(root: &SysRoot, n: usize) -> Result<StandIn> {
        let mut last_err = None;
        for rel in STAND_IN_FILES {
            let path = root.path(rel);
            match File::open(&path) {
                Ok(file) => {
                    let domains = [Domain::Package, Domain::Dram, Domain::Core, Domain::Uncore];
                    let channels = (0..n)
                        .map(|i| Channel {
                            id: DomainId::new(
                                (i / domains.len()) as u32,
                                domains[i % domains.len()],
                            ),
                            unit: EnergyUnit::Microjoule,
                            wrap: Wrap::PERF,
                            origin: path.clone(),
                            limit: None,
                        })
                        .collect();
                    return Ok(StandIn {
                        channels,
                        file,
                        start_ns: monotonic_ns(),
                    });
                }
                Err(e) => last_err = Some(SourceError::io(&path, e)),
            }
        }
        Err(last_err
            .unwrap_or_else(|| SourceError::NoDomains {
                mechanism: "stand-in",
                root: root.dir().to_path_buf(),
                why: "no file to read".into(),
            })
            .into())
    }

    /// The file read on every tick.
    pub fn path(&self) -> &Path {
        &self.channels[0].origin
    }
}

impl Source for StandIn {
    fn mechanism(&self) -> Mechanism {
        // It costs what a powercap read costs: one pread of a small text file.
        Mechanism::Powercap
    }

    fn label(&self) -> &'static str {
        "stand-in (cpuidle usage files, not energy)"
    }

    fn channels(&self) -> &[Channel] {
        &self.channels
    }

    fn read(&mut self, out: &mut [u64]) -> SourceResult<()> {
        let mut buf = [0u8; 64];
        for (i, slot) in out.iter_mut().enumerate() {
            self.file
                .read_at(&mut buf, 0)
                .map_err(|e| SourceError::io(&self.channels[i].origin, e))?;
            // µJ at (i + 1) W: ns / 1000 * (i + 1).
            *slot = (monotonic_ns() - self.start_ns) / 1000 * (i as u64 + 1);
        }
        Ok(())
    }
}
