//! Energy exported to monitoring systems. [`prometheus`]: the Prometheus text
//! format (0.0.4) and OpenMetrics 1.0, rendered from plain figures that a caller
//! builds from a [`crate::Session`]'s [`crate::Report`]s; no HTTP server here, so
//! that any server (the command line tool's, an embedding program's) can serve
//! them. [`http`]: the request-head parsing and basic auth such a server needs,
//! pure and fuzzed.

pub mod http;
pub mod prometheus;
