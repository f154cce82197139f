//! Folded stacks (`frame;frame;frame COUNT`, root first), the input of
//! `inferno-flamegraph` and Brendan Gregg's `flamegraph.pl`, with each stack's
//! energy in µJ as its count.
//!
//! Frames are named by a [`Symbolizer`]: the seam where function names come in
//! (blazesym, in the next phase). Here two: [`Addresses`] (`[unknown] 0x...`,
//! `[kernel] 0x...`) and [`Modules`], which names a user frame by the file
//! mapped at its address and the offset in that file (`libc.so.6+0x2a1c9`), from
//! `/proc/PID/maps` read while the process lives.

use crate::split::StackEnergy;
use crate::stack::StackTable;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Write};

/// Names a frame: the seam where a symbolizer (blazesym) comes in. A frame that
/// cannot be named must still get a name (its address, its module and offset):
/// frames never vanish.
pub trait Symbolizer {
    /// The name of the frame at `ip` in process `pid`, where the sample was taken
    /// (a part's leaf); `kernel` for a kernel address.
    fn frame(&mut self, pid: u32, ip: u64, kernel: bool) -> String;

    /// The name of a frame that is a return address (every frame of a part but
    /// its leaf), one instruction past its call. A symbolizer that resolves
    /// functions or lines looks up `ip - 1`, inside the call: a call that ends a
    /// function would otherwise be named after the next one. By default, as
    /// [`Symbolizer::frame`] (addresses and module offsets show the address as
    /// the stack holds it, as perf does).
    fn caller(&mut self, pid: u32, ip: u64, kernel: bool) -> String {
        self.frame(pid, ip, kernel)
    }

    /// The mapping (module) `ip` of process `pid` lies in, for pprof's `Mapping`;
    /// `None` where unknown (by default, and for kernel frames).
    fn mapping(&mut self, _pid: u32, _ip: u64, _kernel: bool) -> Option<crate::Mapping> {
        None
    }
}

/// Frames as bare addresses.
#[derive(Debug, Default, Clone, Copy)]
pub struct Addresses;

impl Symbolizer for Addresses {
    fn frame(&mut self, _pid: u32, ip: u64, kernel: bool) -> String {
        if kernel {
            format!("[kernel] {ip:#x}")
        } else {
            format!("[unknown] {ip:#x}")
        }
    }
}

/// One mapping of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Map {
    start: u64,
    end: u64,
    offset: u64,
    /// The file's name (its last path component), or the pseudo-path
    /// (`[vdso]`, `[heap]`).
    module: String,
}

/// User frames named `module+0xOFFSET` (the offset in the mapped file, what a
/// symbolizer looks the address up by) from each process's mappings; other
/// frames as [`Addresses`] names them. Mappings are read on a process's first
/// frame, or earlier with [`Modules::snapshot`] (a process that exited before
/// has none: its frames keep their addresses).
#[derive(Debug, Default, Clone)]
pub struct Modules {
    maps: HashMap<u32, Vec<Map>>,
}

impl Modules {
    /// No process read yet.
    pub fn new() -> Modules {
        Modules::default()
    }

    /// Reads `pid`'s mappings now, while it lives; returns how many have a file or
    /// a pseudo-path.
    pub fn snapshot(&mut self, pid: u32) -> usize {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps"))
            .map(|t| parse_maps(&t))
            .unwrap_or_default();
        let n = maps.len();
        self.maps.insert(pid, maps);
        n
    }
}

impl Symbolizer for Modules {
    fn frame(&mut self, pid: u32, ip: u64, kernel: bool) -> String {
        if kernel {
            return Addresses.frame(pid, ip, kernel);
        }
        if !self.maps.contains_key(&pid) {
            self.snapshot(pid);
        }
        let maps = self.maps.get(&pid).map_or(&[][..], Vec::as_slice);
        match maps.iter().find(|m| m.start <= ip && ip < m.end) {
            Some(m) => format!("{}+{:#x}", m.module, ip - m.start + m.offset),
            None => Addresses.frame(pid, ip, kernel),
        }
    }
}

/// The mappings of a `/proc/PID/maps` text that have a path: `start-end perms
/// offset dev inode path`.
fn parse_maps(text: &str) -> Vec<Map> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (start, end) = f.next()?.split_once('-')?;
            let offset = f.nth(1)?;
            let path = f.nth(2)?;
            let module = path.rsplit('/').next().unwrap_or(path).to_string();
            Some(Map {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                offset: u64::from_str_radix(offset, 16).ok()?,
                module,
            })
        })
        .collect()
}

/// The name a frame line may hold: `;` separates frames and a line break ends
/// the line, so both become `:` and a space.
fn clean(name: &str) -> String {
    name.replace(';', ":").replace(['\n', '\r'], " ")
}

/// `stack`'s frame names, root first (as [`crate::Stack::root_first`]): each
/// part's leaf (index 0, where the sample was taken in that space) named with
/// [`Symbolizer::frame`], its return addresses with [`Symbolizer::caller`].
pub(crate) fn frame_names(stack: &crate::Stack, sym: &mut dyn Symbolizer) -> Vec<String> {
    stack
        .root_first_with_leaves()
        .map(|(ip, k, leaf)| match leaf {
            true => clean(&sym.frame(stack.pid, ip, k)),
            false => clean(&sym.caller(stack.pid, ip, k)),
        })
        .collect()
}

/// Each distinct named stack (frames root first, joined by `;`) with its µJ and
/// its stack samples; stacks that got no energy are left out. Stacks whose
/// frames are named alike are merged.
pub(crate) fn named_lines(
    table: &StackTable,
    energy: &StackEnergy,
    sym: &mut dyn Symbolizer,
) -> BTreeMap<String, (u64, u64)> {
    let mut lines: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (id, t) in &energy.stacks {
        let uj = t.total_uj();
        if uj == 0 {
            continue;
        }
        let name = match table.get(*id) {
            Some(s) if !s.is_empty() => frame_names(s, sym).join(";"),
            Some(_) => "[no call chain]".to_string(),
            None => "[unknown stack]".to_string(),
        };
        let line = lines.entry(name).or_default();
        line.0 += uj;
        line.1 += t.samples;
    }
    lines
}

/// Each frame name of the stacks that got energy with the mapping its address
/// lies in (the first seen, when one name is in several: a function of a library
/// two processes map at different addresses).
pub(crate) fn frame_mappings(
    table: &StackTable,
    energy: &StackEnergy,
    sym: &mut dyn Symbolizer,
) -> BTreeMap<String, crate::Mapping> {
    let mut out = BTreeMap::new();
    for (id, t) in &energy.stacks {
        if t.total_uj() == 0 {
            continue;
        }
        let Some(stack) = table.get(*id) else {
            continue;
        };
        let names = frame_names(stack, sym);
        for ((ip, k, _), name) in stack.root_first_with_leaves().zip(names) {
            if out.contains_key(&name) {
                continue;
            }
            if let Some(m) = sym.mapping(stack.pid, ip, k) {
                out.insert(name, m);
            }
        }
    }
    out
}

/// Writes the folded stacks of `energy`, frames named by `sym`, one line per
/// distinct named stack (stacks whose names are equal are added), sorted, with
/// µJ counts; stacks with 0 µJ are left out. With `unattributed`, a last
/// `[unattributed]` line holds what no stack got, so the lines add up to the
/// measured energy. Returns the µJ written.
pub fn write_folded(
    out: &mut dyn Write,
    table: &StackTable,
    energy: &StackEnergy,
    sym: &mut dyn Symbolizer,
    unattributed: bool,
) -> io::Result<u64> {
    let lines = named_lines(table, energy, sym);
    let mut written = 0;
    for (name, (uj, _)) in &lines {
        writeln!(out, "{name} {uj}")?;
        written += uj;
    }
    let un = energy.unattributed.total_uj();
    if unattributed && un > 0 {
        writeln!(out, "[unattributed] {un}")?;
        written += un;
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::StackTotal;
    use crate::stack::Stack;
    use quietwatt_attribution::Part;

    #[test]
    fn maps_name_a_user_frame_by_its_file_and_offset() {
        let maps = parse_maps(
            "55d0c0000000-55d0c0021000 r-xp 00002000 08:01 123 /usr/bin/spin\n\
             7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n\
             7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]\n",
        );
        assert_eq!(maps.len(), 2);
        let mut m = Modules::new();
        m.maps.insert(5, maps);
        assert_eq!(m.frame(5, 0x55d0_c000_0010, false), "spin+0x2010");
        assert_eq!(m.frame(5, 0x7ffd_0000_0001, false), "[vdso]+0x1");
        assert_eq!(m.frame(5, 0x10, false), "[unknown] 0x10");
        assert_eq!(
            m.frame(5, 0xffff_ffff_8100_0000, true),
            "[kernel] 0xffffffff81000000"
        );
    }

    /// Names each frame by how it was asked for: `f` for a leaf, `c` for a
    /// return address.
    struct Asked;

    impl Symbolizer for Asked {
        fn frame(&mut self, _pid: u32, ip: u64, kernel: bool) -> String {
            format!("f{}{ip:x}", if kernel { "k" } else { "" })
        }
        fn caller(&mut self, _pid: u32, ip: u64, kernel: bool) -> String {
            format!("c{}{ip:x}", if kernel { "k" } else { "" })
        }
    }

    #[test]
    fn only_each_parts_leaf_is_named_as_the_sampled_address_and_the_rest_as_return_addresses() {
        // A sample taken in the kernel during a syscall: the user part's first
        // frame is where user space entered the kernel (its own leaf), the rest
        // of both parts are return addresses, looked up one byte before.
        let mut table = StackTable::new();
        let s = table.intern(&Stack {
            pid: 1,
            kernel: vec![0xa1, 0xa2],
            user: vec![0x11, 0x12, 0x13],
        });
        let energy = StackEnergy {
            stacks: [(
                s,
                StackTotal {
                    dynamic_uj: 7,
                    ..StackTotal::default()
                },
            )]
            .into_iter()
            .collect(),
            measured_uj: 7,
            ..StackEnergy::default()
        };
        let mut out = Vec::new();
        write_folded(&mut out, &table, &energy, &mut Asked, false).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "c13;c12;f11;cka2;fka1 7\n");
    }

    #[test]
    fn folded_lines_are_root_first_merged_and_add_up_to_the_measured_energy() {
        let mut table = StackTable::new();
        let a = table.intern(&Stack {
            pid: 1,
            kernel: vec![0xff01],
            user: vec![0x12, 0x11],
        });
        // Another process, same addresses: the same line once named.
        let b = table.intern(&Stack {
            pid: 2,
            kernel: vec![0xff01],
            user: vec![0x12, 0x11],
        });
        let c = table.intern(&Stack {
            pid: 1,
            kernel: vec![],
            user: vec![0x13],
        });
        let total = |uj| StackTotal {
            dynamic_uj: uj,
            ..StackTotal::default()
        };
        let energy = StackEnergy {
            stacks: [(a, total(5)), (b, total(6)), (c, total(0))]
                .into_iter()
                .collect(),
            unattributed: Part {
                dynamic_uj: 3,
                idle_uj: 1,
            },
            measured_uj: 15,
            ..StackEnergy::default()
        };
        let mut out = Vec::new();
        let n = write_folded(&mut out, &table, &energy, &mut Addresses, true).unwrap();
        assert_eq!(n, energy.measured_uj);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "[unknown] 0x11;[unknown] 0x12;[kernel] 0xff01 11\n[unattributed] 4\n"
        );
    }
}
