//! The long format: a [`quietwatt::transform::RowSink`] that writes the rows of the
//! [`Attribution`] transform, one per entity per sample, and the header that says
//! what they are. Joined to the transform ([`Attributed`], a
//! [`quietwatt::transform::Transformed`]) it is a recording's [`quietwatt::Sink`].
//!
//! Columns (CSV header, or the keys of each JSON Lines object):
//! `t_ns` (CLOCK_MONOTONIC ns of the sample), `interval_ns`, `package`, `kind`
//! (`process`, `cgroup`, `unattributed`, `total`, `dram`), `id` (tgid, cgroup id,
//! or empty), `name`, `joules` (= `dynamic_j + idle_j`), `dynamic_j`, `idle_j`,
//! `cpu_ns`. For each `(t_ns, package)`, the `process`/`cgroup` rows plus the
//! `unattributed` row add up to the `total` row exactly (joules are whole µJ,
//! written with six decimals). `dram` rows carry the package's DRAM energy, which
//! is not split (see docs/attribution.md). `cpu_ns` of `unattributed` is the idle
//! task's time plus time the accounting did not see; of `total`, the package's
//! capacity (CPUs × interval).

use crate::model::Part;
use crate::names::Names;
use crate::splitter::{Row, RowKind};
use crate::timeline::Entity;
use crate::transform::{Attribution, Options};
use crate::Result;
use quietwatt::sink::Metadata;
use quietwatt::transform::{RowSink, Transformed};
use quietwatt::SysRoot;
use std::fmt::Write as _;
use std::io::{self, Write};

pub use crate::splitter::{EntityTotal, Totals};
pub use crate::transform::SliceSource;

/// What each column holds, written into the output's metadata.
pub const COLUMNS: &str =
    "t_ns: CLOCK_MONOTONIC ns of the sample; interval_ns: since the previous \
sample; package: the socket; kind: process, cgroup, unattributed (idle CPUs and time not seen), \
total (the measured package energy) or dram (not split); id: tgid or cgroup id; name: comm or \
the cgroup's unit/container/path; joules = dynamic_j + idle_j, whole microjoules: per (t_ns, \
package) the process/cgroup rows plus unattributed equal total exactly; cpu_ns: CPU time in the \
interval (total: CPUs x interval)";

/// The output format of the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongFormat {
    /// CSV with a header, metadata as leading `#` lines.
    Csv,
    /// JSON Lines, metadata as the first line (`{"meta": {...}}`).
    Jsonl,
}

/// A recording's sink that attributes each sample and writes its rows in the long
/// format; the totals are read from it directly after the recording
/// (`sink.transform().totals()`).
pub type Attributed<W> = Transformed<Attribution, LongFormatSink<W>>;

/// A recording's attribution, composed: the accounting program loaded, the
/// topology under `root` read, the rows written to `out` in `format`. What `record
/// --attribute` calls with the options its flags give.
pub fn open_sink<W: Write + Send>(
    options: &Options,
    root: &SysRoot,
    out: W,
    format: LongFormat,
) -> Result<Attributed<W>> {
    let attribution = Attribution::open(options, root)?;
    Ok(Transformed::new(
        attribution,
        LongFormatSink::new(out, format, Names::new()),
    ))
}

/// Writes the [`Attribution`]'s rows in the long format, naming each entity
/// through its [`Names`].
#[derive(Debug)]
pub struct LongFormatSink<W> {
    out: W,
    format: LongFormat,
    names: Names,
    /// One sample's rows, written whole.
    text: String,
}

impl<W: Write + Send> LongFormatSink<W> {
    /// Rows in `format` to `out`, entities named through `names`.
    pub fn new(out: W, format: LongFormat, names: Names) -> LongFormatSink<W> {
        LongFormatSink {
            out,
            format,
            names,
            text: String::new(),
        }
    }

    /// The output, back.
    pub fn into_inner(self) -> W {
        self.out
    }

    fn put_row(&mut self, row: &Row<Entity>, name: &str) {
        let (kind, id) = match row.kind {
            RowKind::Entity(e) => {
                let (by, id) = e.by_and_id();
                (by.name(), Some(id))
            }
            RowKind::Unattributed => ("unattributed", None),
            RowKind::Total => ("total", None),
            RowKind::Dram => ("dram", None),
        };
        let Row {
            t_ns,
            interval_ns,
            package,
            part,
            cpu_ns,
            ..
        } = *row;
        let j = |uj: u64| format!("{}.{:06}", uj / 1_000_000, uj % 1_000_000);
        let Part {
            dynamic_uj,
            idle_uj,
        } = part;
        let r = &mut self.text;
        match self.format {
            LongFormat::Csv => {
                let id_s = id.map(|i| i.to_string()).unwrap_or_default();
                let name = if name.contains([',', '"', '\n']) {
                    format!("\"{}\"", name.replace('"', "\"\"").replace('\n', " "))
                } else {
                    name.to_string()
                };
                let _ = writeln!(
                    r,
                    "{t_ns},{interval_ns},{package},{kind},{id_s},{name},{},{},{},{cpu_ns}",
                    j(part.total_uj()),
                    j(dynamic_uj),
                    j(idle_uj)
                );
            }
            LongFormat::Jsonl => {
                let id_v = id.map_or("null".to_string(), |i| i.to_string());
                let name = serde_json::to_string(name).unwrap_or_else(|_| "\"?\"".into());
                let _ = writeln!(
                    r,
                    "{{\"t_ns\":{t_ns},\"interval_ns\":{interval_ns},\"package\":{package},\
                     \"kind\":\"{kind}\",\"id\":{id_v},\"name\":{name},\"joules\":{},\
                     \"dynamic_j\":{},\"idle_j\":{},\"cpu_ns\":{cpu_ns}}}",
                    j(part.total_uj()),
                    j(dynamic_uj),
                    j(idle_uj)
                );
            }
        }
    }
}

impl<W: Write + Send> RowSink<Attribution> for LongFormatSink<W> {
    fn begin(&mut self, meta: &Metadata, a: &Attribution) -> io::Result<()> {
        // The recording's own column notes describe the energy rows this file replaces.
        let mut fields = meta.fields_except("units");
        fields.push(("units".into(), COLUMNS.into()));
        fields.push(("attribution".into(), a.by().name().into()));
        fields.push(("idle_power".into(), a.idle().label()));
        fields.push(("attribution_weight".into(), crate::weight_label().into()));
        fields.push((
            "attribution_model".into(),
            "each package interval's energy less its idle part is split by CPU time among \
             what ran on its CPUs; the idle part by CPU time over the package's capacity; \
             DRAM is not split (docs/attribution.md)"
                .into(),
        ));
        let mut head = String::new();
        match self.format {
            LongFormat::Csv => {
                for (k, v) in &fields {
                    let _ = writeln!(head, "# {k}: {}", v.replace('\n', " "));
                }
                head.push_str(
                    "t_ns,interval_ns,package,kind,id,name,joules,dynamic_j,idle_j,cpu_ns\n",
                );
            }
            LongFormat::Jsonl => {
                let m: serde_json::Map<String, serde_json::Value> = fields
                    .into_iter()
                    .map(|(k, v)| (k, serde_json::Value::String(v)))
                    .collect();
                let _ = writeln!(head, "{}", serde_json::json!({ "meta": m }));
            }
        }
        self.out.write_all(head.as_bytes())?;
        self.out.flush()
    }

    fn rows(&mut self, rows: &[Row<Entity>], a: &Attribution) -> io::Result<()> {
        self.text.clear();
        for row in rows {
            let name = match row.kind {
                RowKind::Entity(e) => a.name_of(&mut self.names, e),
                _ => String::new(),
            };
            self.put_row(row, &name);
        }
        // One write per sample: a full disk keeps whole samples.
        self.out.write_all(self.text.as_bytes())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::IdlePower;
    use crate::timeline::{By, Running, Slice, Timeline};
    use quietwatt::counter::Wrap;
    use quietwatt::domain::{Domain, DomainId};
    use quietwatt::sink::{ClockAnchor, Sample, Sink};
    use quietwatt::source::Channel;
    use quietwatt::units::{EnergyUnit, Joules};
    use std::sync::{Arc, Mutex};

    /// Above any pid_max (2^22): no live process has it, so its name is the one
    /// the accounting saw.
    const GONE: u32 = 4_000_000_000;

    /// Slices a test scripts: process GONE runs on CPU 0 throughout, CPU 1 idles.
    struct Scripted {
        given: bool,
    }

    impl SliceSource for Scripted {
        fn drain(&mut self, t: &mut Timeline) {
            if !self.given {
                self.given = true;
                let comm = *b"busy\0\0\0\0\0\0\0\0\0\0\0\0";
                t.push(Slice {
                    start_ns: 0,
                    end_ns: 1_000,
                    cgid: 1,
                    tgid: GONE,
                    cpu: 0,
                    comm,
                });
                t.set_running(
                    0,
                    Running {
                        start_ns: 1_000,
                        cgid: 1,
                        idle_from_ns: 0,
                        tgid: GONE,
                    },
                );
                t.push(Slice {
                    start_ns: 0,
                    end_ns: 1_000,
                    cgid: 1,
                    tgid: 0,
                    cpu: 1,
                    comm,
                });
                t.set_running(
                    1,
                    Running {
                        start_ns: 1_000,
                        cgid: 1,
                        idle_from_ns: 0,
                        tgid: 0,
                    },
                );
            }
        }
        fn dropped(&self) -> u64 {
            5
        }
    }

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn channel(domain: Domain) -> Channel {
        Channel {
            id: DomainId::new(0, domain),
            unit: EnergyUnit::Microjoule,
            wrap: Wrap::PERF,
            origin: "/test".into(),
            limit: None,
        }
    }

    /// The attribution transform, with no I/O but the output, a buffer.
    fn sink(buf: Buf, format: LongFormat) -> Attributed<Buf> {
        let attribution = Attribution::new(
            By::Process,
            IdlePower::Configured(10.0),
            vec![Some(0), Some(0)],
            Box::new(Scripted { given: false }),
        );
        Transformed::new(
            attribution,
            LongFormatSink::new(buf, format, Names::under(None)),
        )
    }

    /// One busy CPU of two at 15 W with 10 W idle: the busy process gets the 5 W
    /// dynamic part and half the idle part; the rows add up; DRAM is not split; the
    /// kernel's lost slices reach the totals at the end.
    #[test]
    fn rows_split_and_conserve_a_scripted_interval() {
        let buf = Buf::default();
        let mut sink = sink(buf.clone(), LongFormat::Csv);
        let meta = Metadata {
            fields: vec![
                ("tool".into(), "test".into()),
                ("units".into(), "old".into()),
            ],
            anchor: ClockAnchor {
                unix_ns: 0,
                monotonic_ns: 0,
            },
        };
        sink.begin(&meta, &[channel(Domain::Package), channel(Domain::Dram)])
            .unwrap();
        for i in 1..=3u64 {
            let energy = [Joules(0.015), Joules(0.004)];
            sink.sample(&Sample {
                t_ns: 1_000 + i * 1_000_000,
                interval_ns: 1_000_000,
                missed: 0,
                merged: 0,
                freq_hz: 1000.0,
                marks: Default::default(),
                energy: &energy,
            })
            .unwrap();
        }
        sink.finish().unwrap();
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert!(text.contains("# idle_power: configured: 10 W per package"));
        assert!(
            !text.contains("# units: old"),
            "the energy rows' notes are replaced"
        );
        let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            rows[0],
            "t_ns,interval_ns,package,kind,id,name,joules,dynamic_j,idle_j,cpu_ns"
        );
        assert_eq!(
            rows[1],
            "1001000,1000000,0,process,4000000000,busy,0.010000,0.005000,0.005000,1000000"
        );
        assert_eq!(
            rows[2],
            "1001000,1000000,0,unattributed,,,0.005000,0.000000,0.005000,1000000"
        );
        assert_eq!(
            rows[3],
            "1001000,1000000,0,total,,,0.015000,0.005000,0.010000,2000000"
        );
        assert_eq!(
            rows[4],
            "1001000,1000000,0,dram,,,0.004000,0.004000,0.000000,0"
        );
        assert_eq!(rows.len(), 1 + 3 * 4);
        let t = sink.transform().totals().clone();
        assert_eq!(
            (t.energy_uj, t.accounted_uj(), t.dram_uj),
            (45_000, 45_000, 12_000)
        );
        assert_eq!(t.entities[&Entity::Process(GONE)].total_uj(), 30_000);
        assert_eq!(t.dropped_slices, 5);
    }

    /// JSON Lines: the metadata on the first line, then one object per row, each
    /// parsing, with the same figures as the CSV.
    #[test]
    fn jsonl_rows_parse_and_carry_the_same_split() {
        let buf = Buf::default();
        let mut sink = sink(buf.clone(), LongFormat::Jsonl);
        let meta = Metadata {
            fields: vec![("tool".into(), "test".into())],
            anchor: ClockAnchor {
                unix_ns: 0,
                monotonic_ns: 0,
            },
        };
        sink.begin(&meta, &[channel(Domain::Package)]).unwrap();
        let energy = [Joules(0.015)];
        sink.sample(&Sample {
            t_ns: 1_001_000,
            interval_ns: 1_000_000,
            missed: 0,
            merged: 0,
            freq_hz: 1000.0,
            marks: Default::default(),
            energy: &energy,
        })
        .unwrap();
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["meta"]["attribution"], "process");
        assert_eq!(lines[1]["kind"], "process");
        assert_eq!(lines[1]["id"], u64::from(GONE));
        assert_eq!(lines[1]["name"], "busy");
        assert_eq!(lines[1]["joules"].as_f64(), Some(0.01));
        assert_eq!(lines[2]["kind"], "unattributed");
        assert!(lines[2]["id"].is_null());
        assert_eq!(lines[3]["kind"], "total");
        assert_eq!(lines[3]["cpu_ns"], 2_000_000);
        assert_eq!(lines.len(), 4, "no dram rows without a DRAM channel");
    }
}
