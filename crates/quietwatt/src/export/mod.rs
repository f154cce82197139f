//! Energy exported to monitoring systems. [`prometheus`]: the Prometheus text
//! format (0.0.4) and OpenMetrics 1.0, rendered from plain figures that a caller
//! builds from a [`crate::Session`]'s [`crate::Report`]s; no HTTP here, so that any
//! server (the command line tool's, an embedding program's) can serve them.

pub mod prometheus;
