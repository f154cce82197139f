//! pprof output: a gzipped `profile.proto` (github.com/google/pprof,
//! `proto/profile.proto`) that `go tool pprof` (`-top`, `-diff_base`), Grafana
//! Pyroscope and speedscope read.
//!
//! Two sample types: `energy/microjoules` (the default) and `samples/count`; one
//! Sample per distinct named stack of a [`NamedStacks`], its locations leaf first
//! as pprof wants; a Location and a Function per named frame, with the file and
//! line when the frame was named `func (file:line)` (`--lines`). A frame whose
//! address lies in a mapping the sampler kept points to a Mapping (the module's
//! file, addresses and offset: `go tool pprof -raw` lists them). The
//! `[unattributed]` energy (intervals no stack was sampled in) is a Sample of its
//! own with a single `[unattributed]` location and 0 samples, so the energy
//! values add up to the measured energy exactly, as the folded lines do.
//!
//! The messages are written by hand with prost's derive (only the fields used;
//! the field numbers are profile.proto's), so no protoc and no build script.

use crate::output::NamedStacks;
use prost::Message;
use std::collections::HashMap;
use std::io::{self, Write};
use std::time::{Duration, SystemTime};

/// profile.proto's messages, the fields quietwatt writes (numbers as upstream).
pub mod proto {
    /// `perftools.profiles.Profile`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        /// What each of a Sample's values is.
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        /// The samples.
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        /// The modules the locations lie in (by id).
        #[prost(message, repeated, tag = "3")]
        pub mapping: Vec<Mapping>,
        /// The locations the samples point to (by id).
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        /// The functions the locations point to (by id).
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        /// Every string, indexed by the other fields; `""` first.
        #[prost(string, repeated, tag = "6")]
        pub string_table: Vec<String>,
        /// When the profile started, ns since the Unix epoch.
        #[prost(int64, tag = "9")]
        pub time_nanos: i64,
        /// How long it lasted, ns.
        #[prost(int64, tag = "10")]
        pub duration_nanos: i64,
        /// What a period counts.
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        /// Events between samples, in `period_type`'s unit.
        #[prost(int64, tag = "12")]
        pub period: i64,
        /// Free-form comments (string table indices).
        #[prost(int64, repeated, tag = "13")]
        pub comment: Vec<i64>,
        /// The sample type shown by default (string table index of its type).
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
    }

    /// `ValueType`: a type and its unit, string table indices.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueType {
        /// The type (`energy`).
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        /// The unit (`microjoules`).
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }

    /// `Sample`: a stack and its values.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        /// Location ids, leaf first.
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        /// One value per sample type.
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
    }

    /// `Mapping`: a module mapped into a process.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Mapping {
        /// Its id (1 and up).
        #[prost(uint64, tag = "1")]
        pub id: u64,
        /// Its first address.
        #[prost(uint64, tag = "2")]
        pub memory_start: u64,
        /// One past its last address.
        #[prost(uint64, tag = "3")]
        pub memory_limit: u64,
        /// The file offset mapped at `memory_start`.
        #[prost(uint64, tag = "4")]
        pub file_offset: u64,
        /// Its file (string table index).
        #[prost(int64, tag = "5")]
        pub filename: i64,
        /// Whether its locations have function names.
        #[prost(bool, tag = "7")]
        pub has_functions: bool,
    }

    /// `Location`: one frame.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        /// Its id (1 and up).
        #[prost(uint64, tag = "1")]
        pub id: u64,
        /// The mapping it lies in (0: unknown).
        #[prost(uint64, tag = "2")]
        pub mapping_id: u64,
        /// Its function and line.
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
    }

    /// `Line`: a function and a line in it.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        /// The function's id.
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        /// The source line (0: unknown).
        #[prost(int64, tag = "2")]
        pub line: i64,
    }

    /// `Function`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        /// Its id (1 and up).
        #[prost(uint64, tag = "1")]
        pub id: u64,
        /// Its name (string table index).
        #[prost(int64, tag = "2")]
        pub name: i64,
        /// Its name as the symbol table has it (here the same).
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        /// Its source file (string table index; 0: unknown).
        #[prost(int64, tag = "4")]
        pub filename: i64,
    }
}

/// What a pprof file says about the profile beside its stacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PprofHeader {
    /// When the profile started (pprof's `time_nanos`).
    pub start: SystemTime,
    /// How long it lasted (`duration_nanos`).
    pub duration: Duration,
    /// Comments, shown by `go tool pprof -comments`: say the total, the
    /// mechanism, and that the figures are emulated when they are.
    pub comments: Vec<String>,
}

/// A frame named `func (file:line)` split into its function, file and line;
/// any other name is a function with no file.
fn split_frame(frame: &str) -> (&str, &str, i64) {
    let parsed = frame
        .strip_suffix(')')
        .and_then(|f| f.rsplit_once(" ("))
        .and_then(|(func, at)| {
            let (file, line) = at.rsplit_once(':')?;
            Some((func, file, line.parse::<i64>().ok()?))
        });
    parsed.unwrap_or((frame, "", 0))
}

/// Strings and ids, interned as a profile is built.
#[derive(Default)]
struct Builder {
    strings: Vec<String>,
    string_ids: HashMap<String, i64>,
    functions: Vec<proto::Function>,
    function_ids: HashMap<(i64, i64), u64>,
    locations: Vec<proto::Location>,
    location_ids: HashMap<String, u64>,
    mappings: Vec<proto::Mapping>,
    mapping_ids: HashMap<(u64, u64, std::sync::Arc<str>), u64>,
}

impl Builder {
    fn new() -> Builder {
        let mut b = Builder::default();
        // pprof requires the empty string at index 0.
        b.string("");
        b
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.string_ids.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.string_ids.insert(s.to_string(), i);
        i
    }

    fn mapping(&mut self, m: &crate::Mapping) -> u64 {
        let key = (m.start, m.len, m.path.clone());
        if let Some(&id) = self.mapping_ids.get(&key) {
            return id;
        }
        let id = self.mappings.len() as u64 + 1;
        let filename = self.string(&m.path);
        self.mappings.push(proto::Mapping {
            id,
            memory_start: m.start,
            memory_limit: m.start.saturating_add(m.len),
            file_offset: m.pgoff,
            filename,
            has_functions: true,
        });
        self.mapping_ids.insert(key, id);
        id
    }

    fn location(&mut self, frame: &str, mapping: Option<&crate::Mapping>) -> u64 {
        if let Some(&id) = self.location_ids.get(frame) {
            return id;
        }
        let mapping_id = mapping.map_or(0, |m| self.mapping(m));
        let (func, file, line) = split_frame(frame);
        let (name, filename) = (self.string(func), self.string(file));
        let function_id = match self.function_ids.get(&(name, filename)) {
            Some(&id) => id,
            None => {
                let id = self.functions.len() as u64 + 1;
                self.functions.push(proto::Function {
                    id,
                    name,
                    system_name: name,
                    filename,
                });
                self.function_ids.insert((name, filename), id);
                id
            }
        };
        let id = self.locations.len() as u64 + 1;
        self.locations.push(proto::Location {
            id,
            mapping_id,
            line: vec![proto::Line { function_id, line }],
        });
        self.location_ids.insert(frame.to_string(), id);
        id
    }
}

/// The nanoseconds of a duration, saturated at `i64::MAX` (292 years).
fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// The profile of `named`: values `[µJ, samples]` per distinct named stack.
pub fn profile(named: &NamedStacks, header: &PprofHeader) -> proto::Profile {
    let mut b = Builder::new();
    let value_type = |b: &mut Builder, t: &str, u: &str| proto::ValueType {
        r#type: b.string(t),
        unit: b.string(u),
    };
    let energy = value_type(&mut b, "energy", "microjoules");
    let count = value_type(&mut b, "samples", "count");
    let mut sample = Vec::new();
    for (stack, uj) in named.lines() {
        // Folded stacks are root first; pprof's locations leaf first.
        let location_id = stack
            .rsplit(';')
            .map(|f| b.location(f, named.mappings.get(f)))
            .collect();
        let n = named.samples.get(stack).copied().unwrap_or(0);
        sample.push(proto::Sample {
            location_id,
            value: vec![
                i64::try_from(uj).unwrap_or(i64::MAX),
                i64::try_from(n).unwrap_or(i64::MAX),
            ],
        });
    }
    let comment = header.comments.iter().map(|c| b.string(c)).collect();
    let start = header
        .start
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    proto::Profile {
        default_sample_type: energy.r#type,
        period_type: Some(energy.clone()),
        // A period of 1 µJ: each value is the energy itself, not a count of periods.
        period: 1,
        sample_type: vec![energy, count],
        sample,
        mapping: b.mappings,
        location: b.locations,
        function: b.functions,
        string_table: b.strings,
        time_nanos: nanos(start),
        duration_nanos: nanos(header.duration),
        comment,
    }
}

/// Writes the profile of `named` as a gzipped `profile.proto` (`.pb.gz`).
pub fn write_pprof(
    out: &mut dyn Write,
    named: &NamedStacks,
    header: &PprofHeader,
) -> io::Result<()> {
    let bytes = profile(named, header).encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&bytes)?;
    gz.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn named(text: &str, samples: &[(&str, u64)]) -> NamedStacks {
        NamedStacks {
            folded: text.to_string(),
            samples: samples.iter().map(|(s, n)| (s.to_string(), *n)).collect(),
            ..NamedStacks::default()
        }
    }

    fn header() -> PprofHeader {
        PprofHeader {
            start: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            duration: Duration::from_millis(1500),
            comments: vec![
                "energy: 0.001 J package (powercap)".into(),
                "EMULATED RAPL".into(),
            ],
        }
    }

    fn decode(gz: &[u8]) -> proto::Profile {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(gz)
            .read_to_end(&mut raw)
            .unwrap();
        proto::Profile::decode(raw.as_slice()).unwrap()
    }

    #[test]
    fn a_written_profile_decodes_to_the_energy_and_samples_it_was_given() {
        let n = named(
            "main (m.c:3);f (f.c:10) 700\nmain (m.c:3);g 200\n[unattributed] 100\n",
            &[("main (m.c:3);f (f.c:10)", 7), ("main (m.c:3);g", 2)],
        );
        let mut gz = Vec::new();
        write_pprof(&mut gz, &n, &header()).unwrap();
        let p = decode(&gz);
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(p.string_table[0], "", "pprof wants \"\" first");
        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|t| (s(t.r#type), s(t.unit)))
            .collect();
        assert_eq!(types, [("energy", "microjoules"), ("samples", "count")]);
        assert_eq!(s(p.default_sample_type), "energy");
        let period = p.period_type.as_ref().unwrap();
        assert_eq!(
            (s(period.r#type), s(period.unit)),
            ("energy", "microjoules")
        );
        // Every µJ is there, [unattributed] included: the measured energy.
        let uj: i64 = p.sample.iter().map(|x| x.value[0]).sum();
        assert_eq!(uj, 1000);
        let samples: i64 = p.sample.iter().map(|x| x.value[1]).sum();
        assert_eq!(samples, 9);
        assert_eq!(p.duration_nanos, 1_500_000_000);
        assert_eq!(p.time_nanos, 1_700_000_000_000_000_000);
        let comments: Vec<&str> = p.comment.iter().map(|&c| s(c)).collect();
        assert!(comments.contains(&"EMULATED RAPL"), "{comments:?}");

        // The first stack, leaf first: f at f.c:10, then main at m.c:3.
        let frame = |id: u64| {
            let loc = p.location.iter().find(|l| l.id == id).unwrap();
            let line = &loc.line[0];
            let f = p
                .function
                .iter()
                .find(|f| f.id == line.function_id)
                .unwrap();
            (s(f.name).to_string(), s(f.filename).to_string(), line.line)
        };
        let first = p.sample.iter().find(|x| x.value[0] == 700).unwrap();
        let frames: Vec<_> = first.location_id.iter().map(|&id| frame(id)).collect();
        assert_eq!(
            frames,
            [
                ("f".into(), "f.c".into(), 10),
                ("main".into(), "m.c".into(), 3)
            ]
        );
        // main is one location and one function, shared by both stacks.
        assert_eq!(p.location.len(), 4, "main, f, g, [unattributed]");
        assert_eq!(p.function.len(), 4);
        let un = p.sample.iter().find(|x| x.value[0] == 100).unwrap();
        assert_eq!(un.location_id.len(), 1);
        assert_eq!(frame(un.location_id[0]).0, "[unattributed]");
        assert_eq!(un.value[1], 0, "no stack sample in the unattributed energy");
    }

    #[test]
    fn frames_without_a_line_keep_their_whole_name() {
        assert_eq!(split_frame("f (a/b.rs:12)"), ("f", "a/b.rs", 12));
        assert_eq!(split_frame("[kernel] 0xffff"), ("[kernel] 0xffff", "", 0));
        assert_eq!(split_frame("ns::f(int)"), ("ns::f(int)", "", 0));
        assert_eq!(split_frame("g (x)"), ("g (x)", "", 0));
    }

    #[test]
    fn frames_in_a_known_module_point_to_its_mapping() {
        let mut n = named("main;f 30\nmain;g 10\n", &[("main;f", 3), ("main;g", 1)]);
        let m = crate::Mapping {
            start: 0x1000,
            len: 0x2000,
            pgoff: 0x400,
            path: "/usr/bin/app".into(),
        };
        n.mappings.insert("main".into(), m.clone());
        n.mappings.insert("f".into(), m);
        let p = profile(&n, &header());
        assert_eq!(p.mapping.len(), 1, "one module, one mapping");
        let map = &p.mapping[0];
        assert_eq!(
            (map.memory_start, map.memory_limit, map.file_offset),
            (0x1000, 0x3000, 0x400)
        );
        assert_eq!(p.string_table[map.filename as usize], "/usr/bin/app");
        let of = |name: &str| {
            let f = p
                .function
                .iter()
                .find(|f| p.string_table[f.name as usize] == name)
                .unwrap();
            p.location
                .iter()
                .find(|l| l.line[0].function_id == f.id)
                .unwrap()
                .mapping_id
        };
        assert_eq!((of("main"), of("f"), of("g")), (map.id, map.id, 0));
    }

    #[test]
    fn an_empty_profile_is_still_a_valid_file() {
        let mut gz = Vec::new();
        write_pprof(&mut gz, &NamedStacks::default(), &header()).unwrap();
        let p = decode(&gz);
        assert!(p.sample.is_empty());
        assert_eq!(p.string_table[0], "");
    }
}
