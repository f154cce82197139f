//! A power trace: the whole profile scaled over time, and its CSV text form.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One step of a power trace: from `time_s` on, every domain draws `scale` times
/// its profile power.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TracePoint {
    /// Emulated time, seconds since emulated time 0 (the mount, less `start_offset`).
    pub time_s: f64,
    /// The factor applied to every domain's power.
    pub scale: f64,
}

/// A piecewise-constant scaling of the whole power profile over time.
///
/// Text form (a CSV file): one `time_s,scale` pair per line, times strictly
/// increasing; blank lines, `#` comments and a non-numeric header line are
/// skipped. Before the first point the scale is 1; after the last it stays.
/// Example: `0,1` / `2,0.5` / `3.5,2` halves the power from 2 s to 3.5 s, then doubles it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Trace {
    /// The steps, in time order.
    pub points: Vec<TracePoint>,
}

impl Trace {
    /// Parses the CSV text form; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Trace> {
        let mut points: Vec<TracePoint> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |why: String| Error::Trace {
                origin: origin.to_string(),
                line: i + 1,
                why,
            };
            let mut fields = line.split([',', ';', '\t', ' ']).filter(|f| !f.is_empty());
            let (Some(t), Some(s), None) = (fields.next(), fields.next(), fields.next()) else {
                return Err(err(format!("'{line}' is not two fields")));
            };
            let (Ok(time_s), Ok(scale)) = (t.parse::<f64>(), s.parse::<f64>()) else {
                if points.is_empty() && t.parse::<f64>().is_err() {
                    continue; // a header line
                }
                return Err(err(format!("'{line}' is not two numbers")));
            };
            if !(time_s.is_finite() && time_s >= 0.0) {
                return Err(err(format!("time {time_s} is not a non-negative number")));
            }
            if !(scale.is_finite() && (0.0..=1000.0).contains(&scale)) {
                return Err(err(format!("scale {scale} is not between 0 and 1000")));
            }
            if points.last().is_some_and(|p| p.time_s >= time_s) {
                return Err(err(format!("time {time_s} does not increase")));
            }
            points.push(TracePoint { time_s, scale });
        }
        Ok(Trace { points })
    }

    /// Reads and parses a trace file.
    pub fn load(path: &Path) -> Result<Trace> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::TraceFile {
            path: path.to_path_buf(),
            source,
        })?;
        Trace::parse(&text, &path.display().to_string())
    }
}
