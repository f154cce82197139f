//! Function names for sampled frames, after the process is gone.
//!
//! A spawned command has exited before its stacks are named, so its
//! `/proc/PID/maps` is gone by then. The sampler keeps what the kernel reported
//! as the processes mapped files (`PERF_RECORD_MMAP2`, forks copied) in a
//! [`MapTable`], with `/proc/PID/maps` read for processes that ran before the
//! profile. [`Symbols`] then names each frame with blazesym:
//!
//! - a user frame by the mapped ELF file and the offset in it (ELF symbols;
//!   DWARF `file:line` with [`SymbolOptions::lines`], inlined functions as
//!   frames of their own with [`SymbolOptions::inlined`]; Rust and C++
//!   demangled);
//! - JIT code by the process's perf map, `/tmp/perf-PID.map` (`START SIZE name`
//!   lines, hex: Node's `--perf-basic-prof`, Python 3.12's `-X perf`, Java's
//!   perf-map-agent), which outlives the process;
//! - a kernel frame by `/proc/kallsyms`, unless it shows only zeros
//!   (`kernel.kptr_restrict`), when names would be made up: then `[kernel] 0x...`.
//!
//! A frame that cannot be named keeps its module and offset (`libfoo.so+0x1234`)
//! or its address (`[unknown] 0x...`): frames never vanish. Each distinct frame
//! is named once (cached); [`SymbolCounts`] says how many were named and how many
//! fell outside every known mapping.

use crate::folded::Symbolizer;
use crate::stack::Stack;
use blazesym::symbolize::source::{Elf, Kernel, Source};
use blazesym::symbolize::{CodeInfo, Input, Symbolized, Symbolizer as Blaze};
use blazesym::MaybeDefault;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

/// One mapping of a process: `len` bytes at `start` map the file `path` from
/// byte `pgoff`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// Its first address.
    pub start: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The offset in the file of its first byte.
    pub pgoff: u64,
    /// The file (`/usr/lib/libc.so.6`) or pseudo-path (`[vdso]`, `//anon`).
    pub path: Arc<str>,
}

impl Mapping {
    /// The last component of its path (`libc.so.6`, `[vdso]`).
    pub fn module(&self) -> &str {
        if self.path.starts_with("//") {
            // The kernel's `//anon` (JIT code, anonymous executable memory).
            return "[anon]";
        }
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    /// Whether `path` names a file (not `[vdso]`, `//anon`, `[heap]`).
    pub fn is_file(&self) -> bool {
        self.path.starts_with('/') && !self.path.starts_with("//")
    }
}

/// The mappings of each process (thread group id), as the kernel reported them
/// or `/proc/PID/maps` listed them. A later mapping wins over an earlier one at
/// the same address (records carry no time here: a library unloaded and another
/// loaded at its place is named after the later).
#[derive(Debug, Default, Clone)]
pub struct MapTable {
    procs: HashMap<u32, Vec<Mapping>>,
    snapshotted: HashSet<u32>,
    paths: HashSet<Arc<str>>,
}

impl MapTable {
    /// No process yet.
    pub fn new() -> MapTable {
        MapTable::default()
    }

    /// Adds a mapping of `pid` (its path shared with equal paths already seen).
    pub fn insert(&mut self, pid: u32, start: u64, len: u64, pgoff: u64, path: &str) {
        let path = match self.paths.get(path) {
            Some(p) => p.clone(),
            None => {
                let p: Arc<str> = Arc::from(path);
                self.paths.insert(p.clone());
                p
            }
        };
        self.procs.entry(pid).or_default().push(Mapping {
            start,
            len,
            pgoff,
            path,
        });
    }

    /// `child` was forked from `parent`: it starts with the parent's mappings
    /// (the kernel reports no mapping for what a fork inherits).
    pub fn fork(&mut self, parent: u32, child: u32) {
        if parent == child {
            return;
        }
        if let Some(maps) = self.procs.get(&parent).cloned() {
            self.procs.entry(child).or_default().splice(0..0, maps);
        }
    }

    /// Reads `pid`'s mappings from `/proc/PID/maps` once (later calls do
    /// nothing), before those reported since; returns how many it added (0 for a
    /// process that is gone).
    pub fn snapshot(&mut self, pid: u32) -> usize {
        if !self.snapshotted.insert(pid) {
            return 0;
        }
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return 0;
        };
        let later = self.procs.remove(&pid).unwrap_or_default();
        for m in parse_maps(&text) {
            self.insert(pid, m.0, m.1, m.2, m.3);
        }
        let maps = self.procs.entry(pid).or_default();
        let n = maps.len();
        maps.extend(later);
        n
    }

    /// Whether `pid`'s maps were read (or tried) already.
    pub fn snapshotted(&self, pid: u32) -> bool {
        self.snapshotted.contains(&pid)
    }

    /// Whether any mapping of `pid` is known.
    pub fn knows(&self, pid: u32) -> bool {
        self.procs.get(&pid).is_some_and(|m| !m.is_empty())
    }

    /// The mapping of `pid` that holds `ip` (the latest added).
    pub fn find(&self, pid: u32, ip: u64) -> Option<&Mapping> {
        self.procs
            .get(&pid)?
            .iter()
            .rev()
            .find(|m| m.start <= ip && ip - m.start < m.len)
    }

    /// How many processes have mappings.
    pub fn processes(&self) -> usize {
        self.procs.len()
    }

    /// How many mappings in all.
    pub fn len(&self) -> usize {
        self.procs.values().map(Vec::len).sum()
    }

    /// Whether no mapping is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `(start, len, offset, path)` of each line of a `/proc/PID/maps` text that has
/// a path: `start-end perms offset dev inode path`.
fn parse_maps(text: &str) -> Vec<(u64, u64, u64, &str)> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.splitn(6, ' ');
            let (start, end) = f.next()?.split_once('-')?;
            let offset = f.nth(1)?;
            let path = f.nth(2)?.trim_start();
            let path = path.strip_suffix(" (deleted)").unwrap_or(path);
            if path.is_empty() {
                return None;
            }
            let start = u64::from_str_radix(start, 16).ok()?;
            let end = u64::from_str_radix(end, 16).ok()?;
            let offset = u64::from_str_radix(offset, 16).ok()?;
            Some((start, end.checked_sub(start)?, offset, path))
        })
        .collect()
}

/// What [`Symbols`] names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SymbolOptions {
    /// `func (file:line)` from DWARF line info where the file has it
    /// (`--lines`): slower, the debug info is read.
    pub lines: bool,
    /// Functions inlined at a frame's address, from DWARF, as frames of their
    /// own in [`Symbols::stack`] (the caller first, as `addr2line -i`): slower,
    /// the debug info is read. [`Symbols::name`] gives the caller only.
    pub inlined: bool,
    /// Kernel frames by `/proc/kallsyms`.
    pub kernel: bool,
    /// JIT frames by `/tmp/perf-PID.map`.
    pub perf_maps: bool,
}

impl Default for SymbolOptions {
    /// Functions only (no lines, no inlined), kernel and perf maps on.
    fn default() -> SymbolOptions {
        SymbolOptions {
            lines: false,
            inlined: false,
            kernel: true,
            perf_maps: true,
        }
    }
}

/// How the distinct frames named so far were named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SymbolCounts {
    /// Distinct frames named (each is looked up once).
    pub frames: u64,
    /// Named by a function (ELF, DWARF, perf map or kallsyms).
    pub named: u64,
    /// User frames in a known mapping but without a function: named by module
    /// and offset.
    pub module_only: u64,
    /// User frames outside every known mapping and perf map: `[unknown] 0x...`.
    pub unmapped: u64,
    /// Kernel frames left as addresses (kallsyms unreadable or hidden).
    pub kernel_unnamed: u64,
}

/// One process's perf map, sorted by start: `(start, end, name)`.
type PerfMap = Vec<(u64, u64, String)>;

/// Names frames with blazesym from a [`MapTable`]: see the [module](self) docs.
pub struct Symbols {
    blaze: Blaze,
    maps: MapTable,
    options: SymbolOptions,
    /// `None`: kallsyms shows no addresses (or kernel names are off).
    kallsyms: Option<PathBuf>,
    perf_maps: HashMap<u32, Option<PerfMap>>,
    /// Each frame's names: its function, then the functions inlined there.
    frames: HashMap<(u32, u64, bool), Vec<String>>,
    files: HashMap<(Arc<str>, u64), Option<Vec<String>>>,
    counts: SymbolCounts,
}

impl std::fmt::Debug for Symbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbols")
            .field("options", &self.options)
            .field("kallsyms", &self.kallsyms)
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl Symbols {
    /// Names frames of the processes in `maps`; processes not in it are read
    /// from `/proc/PID/maps` on their first frame while they still run.
    pub fn new(maps: MapTable, options: SymbolOptions) -> Symbols {
        let blaze = Blaze::builder()
            // Inlined functions come only with code info (what `lines` shows).
            .enable_code_info(options.lines || options.inlined)
            .enable_inlined_fns(options.inlined)
            .enable_demangling(true)
            .build();
        let kallsyms = (options.kernel && kallsyms_has_addresses("/proc/kallsyms"))
            .then(|| PathBuf::from("/proc/kallsyms"));
        Symbols {
            blaze,
            maps,
            options,
            kallsyms,
            perf_maps: HashMap::new(),
            frames: HashMap::new(),
            files: HashMap::new(),
            counts: SymbolCounts::default(),
        }
    }

    /// Whether kernel frames get names: `/proc/kallsyms` was readable with its
    /// addresses (root, or `kernel.kptr_restrict` 0).
    pub fn kernel_names(&self) -> bool {
        self.kallsyms.is_some()
    }

    /// How the frames were named so far.
    pub fn counts(&self) -> SymbolCounts {
        self.counts
    }

    /// The mappings it names user frames by.
    pub fn maps(&self) -> &MapTable {
        &self.maps
    }

    /// The names of `stack`'s frames, root first (as [`Stack::root_first`]): one
    /// per frame, and with [`SymbolOptions::inlined`] one more for each function
    /// inlined at a frame, after it. Return addresses (every frame of a part but its leaf) are looked up one
    /// byte before, inside the call, so that a call that ends a function or a
    /// line is named after its own function and line.
    pub fn stack(&mut self, stack: &Stack) -> Vec<String> {
        let mut out = Vec::with_capacity(stack.user.len() + stack.kernel.len());
        let inlined = self.options.inlined;
        for (ip, k, leaf) in stack.root_first_with_leaves() {
            let names = self.names(stack.pid, ip, k, leaf);
            match inlined {
                true => out.extend_from_slice(names),
                false => out.extend(names.first().cloned()),
            }
        }
        out
    }

    /// The name of the frame at `ip` of process `pid` (`kernel` for a kernel
    /// address); `leaf` when `ip` is where the sample was taken, not a return
    /// address.
    pub fn name(&mut self, pid: u32, ip: u64, kernel: bool, leaf: bool) -> String {
        let names = self.names(pid, ip, kernel, leaf);
        names.first().cloned().unwrap_or_default()
    }

    /// The frame's names, its function first (never empty), looked up once.
    fn names(&mut self, pid: u32, ip: u64, kernel: bool, leaf: bool) -> &[String] {
        let at = if leaf { ip } else { ip.saturating_sub(1) };
        let key = (if kernel { 0 } else { pid }, at, kernel);
        if !self.frames.contains_key(&key) {
            self.counts.frames += 1;
            let names = if kernel {
                vec![self.kernel_frame(ip, at)]
            } else {
                self.user_frame(pid, ip, at)
            };
            self.frames.insert(key, names);
        }
        self.frames.get(&key).map_or(&[], Vec::as_slice)
    }

    fn kernel_frame(&mut self, ip: u64, at: u64) -> String {
        let named = self.kallsyms.as_ref().and_then(|path| {
            let src = Source::Kernel(Kernel {
                kallsyms: MaybeDefault::Some(path.clone()),
                // No search for a vmlinux: kallsyms has the names, fast.
                vmlinux: MaybeDefault::None,
                debug_syms: false,
                ..Kernel::default()
            });
            let syms = self.blaze.symbolize(&src, Input::AbsAddr(&[at])).ok()?;
            match syms.into_iter().next()? {
                Symbolized::Sym(s) => Some(s.name.into_owned()),
                Symbolized::Unknown(_) => None,
            }
        });
        match named {
            Some(n) => {
                self.counts.named += 1;
                n
            }
            None => {
                self.counts.kernel_unnamed += 1;
                format!("[kernel] {ip:#x}")
            }
        }
    }

    fn user_frame(&mut self, pid: u32, ip: u64, at: u64) -> Vec<String> {
        if !self.maps.knows(pid) && !self.maps.snapshotted(pid) {
            self.maps.snapshot(pid);
        }
        let mapping = self.maps.find(pid, at).cloned();
        if let Some(m) = mapping.as_ref().filter(|m| m.is_file()) {
            let offset = at - m.start + m.pgoff;
            if let Some(n) = self.file_name(&m.path, offset) {
                self.counts.named += 1;
                return n;
            }
        }
        // JIT code lives in anonymous memory; a perf map names it.
        if let Some(n) = self.perf_map_name(pid, at) {
            self.counts.named += 1;
            return vec![n];
        }
        vec![match mapping {
            Some(m) => {
                self.counts.module_only += 1;
                format!("{}+{:#x}", m.module(), ip - m.start + m.pgoff)
            }
            None => {
                self.counts.unmapped += 1;
                format!("[unknown] {ip:#x}")
            }
        }]
    }

    /// The function at `offset` in the ELF file `path` (and those inlined
    /// there), through blazesym.
    fn file_name(&mut self, path: &Arc<str>, offset: u64) -> Option<Vec<String>> {
        let key = (path.clone(), offset);
        if let Some(n) = self.files.get(&key) {
            return n.clone();
        }
        let mut elf = Elf::new(&**path);
        elf.debug_syms = self.options.lines || self.options.inlined;
        let src = Source::Elf(elf);
        let lines = self.options.lines;
        // `func (file:line)` with lines, `func` otherwise.
        let named = |name: &str, code: Option<&CodeInfo<'_>>| match code
            .and_then(|c| Some((c.file.to_string_lossy(), c.line?)))
        {
            Some((file, line)) if lines => format!("{name} ({file}:{line})"),
            _ => name.to_string(),
        };
        let name = match self.blaze.symbolize(&src, Input::FileOffset(&[offset])) {
            Ok(syms) => match syms.into_iter().next() {
                Some(Symbolized::Sym(s)) => {
                    let mut names = vec![named(&s.name, s.code_info.as_deref())];
                    for f in &s.inlined {
                        names.push(named(&f.name, f.code_info.as_ref()));
                    }
                    Some(names)
                }
                _ => None,
            },
            // A file that is gone or not ELF: named by module and offset.
            Err(_) => None,
        };
        self.files.insert(key, name.clone());
        name
    }

    fn perf_map_name(&mut self, pid: u32, ip: u64) -> Option<String> {
        if !self.options.perf_maps {
            return None;
        }
        let map = self.perf_maps.entry(pid).or_insert_with(|| {
            std::fs::read_to_string(format!("/tmp/perf-{pid}.map"))
                .ok()
                .map(|t| parse_perf_map(&t))
        });
        let map = map.as_ref()?;
        // The last entry starting at or before ip (of equal starts, the later
        // line: JIT code replaced at the same address is the newer).
        let i = map.partition_point(|e| e.0 <= ip);
        let e = map.get(i.checked_sub(1)?)?;
        (ip < e.1).then(|| e.2.clone())
    }
}

impl Symbolizer for Symbols {
    /// As [`Symbols::name`] of a leaf: `ip` looked up as given.
    fn frame(&mut self, pid: u32, ip: u64, kernel: bool) -> String {
        self.name(pid, ip, kernel, true)
    }

    /// As [`Symbols::name`] of a return address: looked up at `ip - 1`.
    fn caller(&mut self, pid: u32, ip: u64, kernel: bool) -> String {
        self.name(pid, ip, kernel, false)
    }

    /// The sampler's mapping of `ip` in `pid` (none for the kernel's frames).
    fn mapping(&mut self, pid: u32, ip: u64, kernel: bool) -> Option<Mapping> {
        if kernel {
            return None;
        }
        self.maps.find(pid, ip).cloned()
    }
}

/// Whether a kallsyms file lists real addresses: with `kptr_restrict` (or
/// without CAP_SYSLOG) every address reads 0, and any lookup would name a
/// frame after a wrong symbol.
fn kallsyms_has_addresses(path: &str) -> bool {
    use std::io::{BufRead, BufReader};
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    BufReader::new(f)
        .lines()
        .take(64)
        .map_while(Result::ok)
        .any(|l| {
            l.split_whitespace()
                .next()
                .and_then(|a| u64::from_str_radix(a, 16).ok())
                .is_some_and(|a| a != 0)
        })
}

/// A perf map's `START SIZE name` lines (hex, `0x` optional; the name may hold
/// spaces), sorted by start, the file's order kept among equal starts.
fn parse_perf_map(text: &str) -> PerfMap {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let mut map: PerfMap = text
        .lines()
        .filter_map(|line| {
            let mut f = line.trim().splitn(3, ' ');
            let start = hex(f.next()?)?;
            let size = hex(f.next()?)?;
            let name = f.next()?.trim();
            (!name.is_empty()).then(|| (start, start.saturating_add(size), name.to_string()))
        })
        .collect();
    map.sort_by_key(|e| e.0);
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_keep_paths_with_spaces_and_drop_anonymous_ones() {
        let m = parse_maps(
            "55d0c0000000-55d0c0021000 r-xp 00002000 08:01 123   /opt/my app/spin (deleted)\n\
             7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n\
             7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0                  [vdso]\n",
        );
        assert_eq!(
            m,
            vec![
                (0x55d0_c000_0000, 0x21000, 0x2000, "/opt/my app/spin"),
                (0x7ffd_0000_0000, 0x2000, 0, "[vdso]")
            ]
        );
    }

    #[test]
    fn a_later_mapping_wins_and_a_fork_inherits_its_parents() {
        let mut t = MapTable::new();
        t.insert(1, 0x1000, 0x1000, 0, "/lib/a.so");
        t.insert(1, 0x1800, 0x1000, 0x4000, "/lib/b.so");
        assert_eq!(t.find(1, 0x1100).unwrap().module(), "a.so");
        assert_eq!(t.find(1, 0x1900).unwrap().module(), "b.so");
        assert!(t.find(1, 0x2800).is_none());
        t.fork(1, 2);
        assert_eq!(t.find(2, 0x1900).unwrap().pgoff, 0x4000);
        assert!(Arc::ptr_eq(
            &t.find(1, 0x1100).unwrap().path,
            &t.find(2, 0x1100).unwrap().path
        ));
        assert_eq!((t.processes(), t.len()), (2, 4));
    }

    #[test]
    fn perf_map_lines_are_hex_ranges_with_names_that_may_hold_spaces() {
        let m = parse_perf_map(
            "7f00a000 40 LazyCompile:*fib /app/fib.js:1\n\
             0x7f009000 100 py::spin:/app/x.py\n\
             garbage\n\
             7f00b000 zz bad\n",
        );
        assert_eq!(
            m,
            vec![
                (0x7f00_9000, 0x7f00_9100, "py::spin:/app/x.py".to_string()),
                (
                    0x7f00_a000,
                    0x7f00_a040,
                    "LazyCompile:*fib /app/fib.js:1".to_string()
                ),
            ]
        );
    }

    #[test]
    fn zeroed_kallsyms_is_not_taken_for_names() {
        let dir = std::env::temp_dir().join(format!("qw-kallsyms-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let hidden = dir.join("hidden");
        std::fs::write(
            &hidden,
            "0000000000000000 T _stext\n0000000000000000 T do_sys_open\n",
        )
        .unwrap();
        let shown = dir.join("shown");
        std::fs::write(&shown, "ffffffff81000000 T _stext\n").unwrap();
        assert!(!kallsyms_has_addresses(hidden.to_str().unwrap()));
        assert!(kallsyms_has_addresses(shown.to_str().unwrap()));
        assert!(!kallsyms_has_addresses("/nonexistent/kallsyms"));
        std::fs::remove_dir_all(dir).ok();
    }
}
