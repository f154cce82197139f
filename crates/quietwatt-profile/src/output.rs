//! A profile's outputs: folded stacks ([`crate::write_folded`]), an energy flame
//! graph as SVG (inferno's plotting, widths in µJ), and the top functions by
//! energy for a terminal summary; [`crate::pprof`] writes pprof from the same
//! named stacks. Frames are named by a [`Symbolizer`], once, and
//! every output is made from the same named lines.

use crate::folded::{frame_mappings, named_lines, Symbolizer};
use crate::split::StackEnergy;
use crate::stack::StackTable;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::Path;

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Folded stacks, µJ counts (`.folded`).
    Folded,
    /// An energy flame graph (`.svg`).
    Svg,
    /// pprof's gzipped `profile.proto` (`.pb.gz`): µJ and sample counts.
    Pprof,
}

impl Format {
    /// The format a path's extension names (`.folded`, `.svg`, `.pb.gz`), if any.
    pub fn from_path(path: &Path) -> Option<Format> {
        if path.to_str()?.ends_with(".pb.gz") {
            return Some(Format::Pprof);
        }
        match path.extension()?.to_str()? {
            "folded" => Some(Format::Folded),
            "svg" => Some(Format::Svg),
            _ => None,
        }
    }

    /// The format of a `--format` word (`folded`, `svg`, `pprof`).
    pub fn from_name(name: &str) -> Option<Format> {
        match name {
            "folded" => Some(Format::Folded),
            "svg" => Some(Format::Svg),
            "pprof" => Some(Format::Pprof),
            _ => None,
        }
    }

    /// Its word.
    pub fn name(self) -> &'static str {
        match self {
            Format::Folded => "folded",
            Format::Svg => "svg",
            Format::Pprof => "pprof",
        }
    }
}

/// A profile's stacks, named: each distinct named stack (root first, frames
/// joined by `;`) with its µJ, plus the `[unattributed]` line. Made once, every
/// output comes from it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamedStacks {
    /// `frame;frame;frame COUNT` lines, sorted, as [`crate::write_folded`]
    /// writes them.
    pub folded: String,
    /// The stack samples of each named stack (the `folded` line's stack, without
    /// its count); `[unattributed]` has none.
    pub samples: BTreeMap<String, u64>,
    /// The mapping (module, its addresses and file offset) of each frame name
    /// whose address the symbolizer placed in one, for pprof's `Mapping`s.
    pub mappings: BTreeMap<String, crate::Mapping>,
}

impl NamedStacks {
    /// Names every stack of `energy` with `sym`; with `unattributed`, a last
    /// `[unattributed]` line holds what no stack got (so the counts add up to the
    /// measured energy).
    pub fn new(
        table: &StackTable,
        energy: &StackEnergy,
        sym: &mut dyn Symbolizer,
        unattributed: bool,
    ) -> NamedStacks {
        let lines = named_lines(table, energy, sym);
        let mut folded = String::new();
        for (name, (uj, _)) in &lines {
            folded.push_str(&format!("{name} {uj}\n"));
        }
        let un = energy.unattributed.total_uj();
        if unattributed && un > 0 {
            folded.push_str(&format!("[unattributed] {un}\n"));
        }
        let samples = lines.into_iter().map(|(k, (_, n))| (k, n)).collect();
        let mappings = frame_mappings(table, energy, sym);
        NamedStacks {
            folded,
            samples,
            mappings,
        }
    }

    /// Each line's stack and µJ.
    pub fn lines(&self) -> impl Iterator<Item = (&str, u64)> {
        self.folded.lines().filter_map(|l| {
            let (stack, n) = l.rsplit_once(' ')?;
            Some((stack, n.parse().ok()?))
        })
    }

    /// Writes the folded stacks.
    pub fn write_folded(&self, out: &mut dyn Write) -> io::Result<()> {
        out.write_all(self.folded.as_bytes())
    }

    /// Writes an energy flame graph: widths in µJ, `title` above it (say the total
    /// and the mechanism), `subtitle` below the title.
    pub fn write_svg(&self, out: &mut dyn Write, title: &str, subtitle: &str) -> io::Result<()> {
        let mut opt = inferno::flamegraph::Options::default();
        opt.title = title.to_string();
        opt.subtitle = (!subtitle.is_empty()).then(|| subtitle.to_string());
        opt.count_name = "µJ".to_string();
        // Colours from the names, not random: the same profile gives the same file.
        opt.hash = true;
        opt.deterministic = true;
        if self.folded.is_empty() {
            // inferno refuses an empty profile; a profile with no energy is still one.
            return inferno::flamegraph::from_lines(&mut opt, ["[no energy] 1"], out)
                .map_err(io::Error::other);
        }
        inferno::flamegraph::from_lines(&mut opt, self.folded.lines(), out)
            .map_err(io::Error::other)
    }

    /// The `n` functions with the most self energy (their frame is a stack's
    /// leaf), each with its total energy (any frame of the stack: counted once per
    /// stack, however often it recurs there). `[unattributed]` is not a function.
    pub fn top_functions(&self, n: usize) -> Vec<FunctionEnergy> {
        let mut by: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        let mut self_samples: BTreeMap<&str, u64> = BTreeMap::new();
        for (stack, uj) in self.lines() {
            if stack == "[unattributed]" {
                continue;
            }
            if let Some(leaf) = stack.rsplit(';').next() {
                *self_samples.entry(leaf).or_default() +=
                    self.samples.get(stack).copied().unwrap_or(0);
            }
            let frames: Vec<&str> = stack.split(';').collect();
            let mut once: Vec<&str> = frames.clone();
            once.sort_unstable();
            once.dedup();
            for f in once {
                by.entry(f).or_default().1 += uj;
            }
            if let Some(leaf) = frames.last() {
                by.entry(leaf).or_default().0 += uj;
            }
        }
        let mut top: Vec<FunctionEnergy> = by
            .into_iter()
            .map(|(name, (self_uj, total_uj))| FunctionEnergy {
                name: name.to_string(),
                self_uj,
                total_uj,
                self_samples: self_samples.get(name).copied().unwrap_or(0),
            })
            .filter(|f| f.self_uj > 0)
            .collect();
        top.sort_by(|a, b| b.self_uj.cmp(&a.self_uj).then(a.name.cmp(&b.name)));
        top.truncate(n);
        top
    }

    /// The stack samples of every stack that got energy (the `n` of each
    /// function's share of the samples).
    pub fn sample_count(&self) -> u64 {
        self.samples.values().sum()
    }
}

/// A function's energy in a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionEnergy {
    /// Its frame's name.
    pub name: String,
    /// µJ of the stacks it is the leaf of.
    pub self_uj: u64,
    /// µJ of the stacks it is in.
    pub total_uj: u64,
    /// The stack samples of the stacks it is the leaf of.
    pub self_samples: u64,
}

/// Renders `named` as `format` (the flame graph with `title` and `subtitle`;
/// pprof with `header`) and writes it to `path` whole or not at all
/// ([`write_whole`]): what `quietwatt profile -o` and Python's
/// `quietwatt.profile(path)` write.
pub fn write_output(
    path: &Path,
    format: Format,
    named: &NamedStacks,
    title: &str,
    subtitle: &str,
    header: &crate::PprofHeader,
) -> io::Result<()> {
    let mut bytes = Vec::new();
    match format {
        Format::Folded => named.write_folded(&mut bytes),
        Format::Svg => named.write_svg(&mut bytes, title, subtitle),
        Format::Pprof => crate::write_pprof(&mut bytes, named, header),
    }?;
    write_whole(path, &bytes)
}

/// Writes `bytes` to `path` whole or not at all: into a temporary file beside
/// it, renamed over it once complete, so that a full disk or a signal never
/// leaves a cut file at `path` (a file already there stays as it was). Only a
/// regular file, or a path where nothing is yet, is replaced so: anything else
/// (`/dev/null`, a FIFO, `/dev/stdout`, a symbolic link, which stays one) is
/// written in place, since a rename would put a file where the device or the
/// link was.
pub fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => return std::fs::write(path, bytes),
        _ => {}
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::Builder::new()
        .prefix(".quietwatt-profile-")
        // As a plain create would leave it (tempfile's own is 0600).
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Why writing `path` failed, for a person: a full disk (or quota) says what
/// [`write_whole`] left there and what to do; another error as it is. The
/// caller names its own flag or argument.
pub fn why_not_written(path: &Path, e: &io::Error) -> String {
    // The temporary file's error carries its own path: the kind is what counts.
    let full = e.kind() == io::ErrorKind::StorageFull
        || matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT));
    if full {
        format!(
            "the disk is full (no space left on device); nothing was left at {} (a file already there is unchanged). Free space on that filesystem, or write to a path on another one",
            path.display()
        )
    } else {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_device_or_a_link_is_written_in_place_and_a_file_is_replaced_whole() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.svg");
        std::fs::write(&target, "old").unwrap();
        let link = dir.path().join("link.svg");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_whole(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        let fresh = dir.path().join("fresh.folded");
        write_whole(&fresh, b"x 1\n").unwrap();
        assert_eq!(std::fs::read_to_string(&fresh).unwrap(), "x 1\n");
        // /dev/null stays the device (a rename over it, as root, replaced it
        // with a regular file).
        write_whole(Path::new("/dev/null"), b"nothing").unwrap();
        let null = std::fs::symlink_metadata("/dev/null").unwrap();
        assert!(
            null.file_type().is_char_device(),
            "/dev/null is no longer a device"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }

    use super::*;

    fn named(text: &str) -> NamedStacks {
        NamedStacks {
            folded: text.to_string(),
            ..NamedStacks::default()
        }
    }

    #[test]
    fn formats_come_from_the_extension_or_the_word() {
        assert_eq!(Format::from_path(Path::new("a/b.svg")), Some(Format::Svg));
        assert_eq!(
            Format::from_path(Path::new("p.folded")),
            Some(Format::Folded)
        );
        assert_eq!(Format::from_path(Path::new("p.txt")), None);
        assert_eq!(Format::from_name("svg"), Some(Format::Svg));
        assert_eq!(Format::from_path(Path::new("x.pb.gz")), Some(Format::Pprof));
        assert_eq!(Format::from_path(Path::new("x.gz")), None);
        assert_eq!(Format::from_name("pprof"), Some(Format::Pprof));
        assert_eq!(Format::from_name("json"), None);
    }

    #[test]
    fn top_functions_count_self_at_the_leaf_and_total_once_per_stack() {
        let n = named("main;f;f 30\nmain;g 10\nmain 5\n[unattributed] 100\n");
        let top = n.top_functions(10);
        let got: Vec<(&str, u64, u64)> = top
            .iter()
            .map(|f| (f.name.as_str(), f.self_uj, f.total_uj))
            .collect();
        assert_eq!(got, vec![("f", 30, 30), ("g", 10, 10), ("main", 5, 45)]);
        let mut counted = n.clone();
        counted.samples = [("main;f;f", 6), ("main;g", 2), ("main", 1)]
            .into_iter()
            .map(|(s, k)| (s.to_string(), k))
            .collect();
        let samples: Vec<u64> = counted
            .top_functions(10)
            .iter()
            .map(|f| f.self_samples)
            .collect();
        assert_eq!(samples, vec![6, 2, 1]);
        assert_eq!(counted.sample_count(), 9);
        assert_eq!(n.top_functions(1).len(), 1);
    }

    #[test]
    fn the_svg_names_the_title_and_counts_in_microjoules() {
        let n = named("main;f 750\nmain;g 250\n");
        let mut out = Vec::new();
        n.write_svg(&mut out, "energy: 0.001 J package (powercap)", "sub")
            .unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert!(svg.contains("energy: 0.001 J package (powercap)"));
        assert!(svg.contains("µJ"), "count name");
        assert!(svg.contains(">f<") || svg.contains("f (750"), "{svg}");
        let mut empty = Vec::new();
        named("").write_svg(&mut empty, "t", "").unwrap();
        assert!(String::from_utf8(empty).unwrap().contains("<svg"));
    }
}
