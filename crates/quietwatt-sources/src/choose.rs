//! Which mechanism reads the counters: a typed request (one named, or the best
//! that works here) opened at the rates a recording or an exporter asks for. The
//! one place the choice is made: `record` (through `quietwatt-recording`) calls
//! [`open`], and an exporter can.
//!
//! `Auto` tries the polled mechanisms in the documented order perf, powercap, msr
//! ([`crate::open`] with `None`: each must open and its counters move); ebpf and
//! perf-ring are never chosen for the user (they read the same perf events, at a
//! cost worth it only when asked for). A named in-kernel mechanism that the kernel
//! refuses in its in-kernel form (perf-ring's group) falls back to polling the
//! same events through perf, and says why ([`Chosen::fallback`]).

use crate::inkernel::{self, Opened};
use crate::perf::PerfEvents;
use crate::{Error, Mechanism, Selection, Source, SysRoot};
use quietwatt_core::Hertz;

/// Which mechanism to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MechanismRequest {
    /// The best polled mechanism that works here: perf, then powercap, then msr.
    #[default]
    Auto,
    /// This one, or an error saying why not.
    Named(Mechanism),
}

impl From<Option<Mechanism>> for MechanismRequest {
    fn from(m: Option<Mechanism>) -> Self {
        m.map_or(MechanismRequest::Auto, MechanismRequest::Named)
    }
}

impl MechanismRequest {
    /// The named mechanism, `None` for `Auto`.
    pub fn named(self) -> Option<Mechanism> {
        match self {
            MechanismRequest::Auto => None,
            MechanismRequest::Named(m) => Some(m),
        }
    }

    /// Whether the named mechanism samples in the kernel (ebpf, perf-ring).
    pub fn in_kernel(self) -> bool {
        matches!(
            self,
            MechanismRequest::Named(Mechanism::Ebpf | Mechanism::PerfRing)
        )
    }
}

/// What to open and how: the request, the domains, and for the in-kernel
/// mechanisms their sampling rate and drain rate.
#[derive(Debug, Clone)]
pub struct Choice {
    /// Which mechanism.
    pub mechanism: MechanismRequest,
    /// Which domains.
    pub selection: Selection,
    /// ebpf, perf-ring: the kernel's sampling rate; `None` (an adaptive rate) is
    /// refused for them ([`ChooseError::NeedsFixedRate`]).
    pub kernel_rate: Option<Hertz>,
    /// ebpf, perf-ring: how often user space drains the kernel's ring.
    pub drain: Hertz,
    /// For tests and benchmarks without RAPL: perf software counters of CPU 0
    /// (cpu-clock as "package", task-clock as "core") instead of the RAPL events,
    /// through perf, ebpf or perf-ring.
    pub stand_in_events: bool,
}

impl Choice {
    /// `mechanism` on every domain, at the in-kernel defaults.
    pub fn new(mechanism: MechanismRequest) -> Choice {
        Choice {
            mechanism,
            selection: Selection::all(),
            kernel_rate: Some(Hertz::clamped(inkernel::DEFAULT_FREQ_HZ)),
            drain: Hertz::clamped(inkernel::DEFAULT_DRAIN_HZ),
            stand_in_events: false,
        }
    }
}

/// An opened source and, when the kernel refused the in-kernel form, why the same
/// events are polled instead.
pub struct Chosen {
    /// The source.
    pub source: Box<dyn Source>,
    /// `Some(reason)` when a named ebpf/perf-ring fell back to perf polling.
    pub fallback: Option<String>,
}

impl std::fmt::Debug for Chosen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chosen")
            .field("fallback", &self.fallback)
            .finish_non_exhaustive()
    }
}

/// Why no source was opened.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChooseError {
    /// The mechanism could not open (its own typed error).
    #[error(transparent)]
    Source(#[from] Error),
    /// An in-kernel mechanism was asked for without a fixed rate: the kernel's
    /// clocks are set once.
    #[error("{mechanism} samples in the kernel at a fixed rate: give a rate in hertz")]
    NeedsFixedRate {
        /// The mechanism asked for.
        mechanism: Mechanism,
    },
    /// Stand-in events were asked for through a mechanism that does not read perf
    /// events.
    #[error("stand-in events are perf software counters: use them with perf, ebpf or perf-ring")]
    StandInNeedsPerf,
    /// Stand-in events were asked for in a build without them (feature `testing`).
    #[error("stand-in events are not in this build (feature `testing`)")]
    StandInUnavailable,
}

/// The stand-in events, where the build has them.
fn stand_ins() -> Result<Vec<crate::perf::EventSpec>, ChooseError> {
    #[cfg(any(test, feature = "testing"))]
    return Ok(inkernel::stand_in_specs(0));
    #[cfg(not(any(test, feature = "testing")))]
    Err(ChooseError::StandInUnavailable)
}

/// Opens the source `choice` asks for (see the module's doc for the order).
pub fn open(root: &SysRoot, choice: &Choice) -> Result<Chosen, ChooseError> {
    let polled = |source: Box<dyn Source>| Chosen {
        source,
        fallback: None,
    };
    let m = match choice.mechanism {
        MechanismRequest::Named(m @ (Mechanism::Ebpf | Mechanism::PerfRing)) => m,
        request => {
            if choice.stand_in_events {
                if request != MechanismRequest::Named(Mechanism::Perf) {
                    return Err(ChooseError::StandInNeedsPerf);
                }
                // The polling twin of the in-kernel stand-ins, for side-by-side figures.
                let s = PerfEvents::from_specs(stand_ins()?)?;
                return Ok(polled(Box::new(s)));
            }
            return Ok(polled(crate::open(
                root,
                request.named(),
                &choice.selection,
            )?));
        }
    };
    let freq = choice
        .kernel_rate
        .ok_or(ChooseError::NeedsFixedRate { mechanism: m })?;
    let opened = if choice.stand_in_events {
        inkernel::open_specs(m, stand_ins()?, freq, choice.drain)?
    } else {
        inkernel::open(root, m, &choice.selection, freq, choice.drain)?
    };
    Ok(match opened {
        Opened::InKernel(s) => polled(Box::new(s)),
        Opened::Fallback { source, reason } => Chosen {
            source,
            fallback: Some(reason),
        },
    })
}
