//! quietwatt's Prometheus / OpenMetrics exporter, as a library: what
//! `quietwatt serve` runs, and what a program that embeds quietwatt can serve.
//!
//! - [`exposition`]: the text format (0.0.4) and OpenMetrics 1.0, rendered from
//!   an [`Exposition`]: the energy series the exporter reads, and the
//!   [`Family`]s that collectors contribute.
//! - [`collector`]: the open side, the [`Collector`] trait: anything that adds
//!   families at each refresh (the events and attribution crates implement it),
//!   and [`ProcessCollector`], what the exporting process costs.
//! - [`Exporter`] (`exporter`, `slots`): the mechanism chosen, one sampler
//!   session per domain when polled (so that a vanished counter ends its own
//!   session only) or one sampled in the kernel, drained at each refresh; a
//!   failed session is marked down, opened again every [`RETRY`], and its
//!   counters go on from where they stopped ([`Continuity`]).
//! - [`reader`]: the figures of each refresh published for the local reader
//!   service (`serve --socket`, the `quietwatt-reader` crate), and the loop
//!   that refreshes at the service's pace ([`Exporter::run_serving`]).
//! - [`server`]: a small HTTP/1.x server that a slow, silent or malformed client
//!   cannot starve; [`http`]: the request-head parsing and basic auth it uses,
//!   pure and fuzzed.
//!
//! A caller (the command line's `serve`) builds an [`ExporterConfig`], opens the
//! [`Exporter`], registers its collectors, starts a [`Server`] on the first
//! refresh, and [`Exporter::run`]s until it is told to stop.
#![deny(missing_docs)]

pub mod collector;
mod config;
mod exporter;
pub mod exposition;
pub mod http;
pub mod reader;
pub mod server;
mod slots;

pub use collector::{CollectError, Collector, ProcessCollector};
pub use config::{Error, ExporterConfig, Notice, RETRY};
pub use exporter::Exporter;
pub use exposition::{
    render, DomainSeries, Exposition, ExpositionFormat, Family, Kind, Sample, Unit, Value,
};
pub use server::Server;
pub use slots::{Continuity, Plan};
