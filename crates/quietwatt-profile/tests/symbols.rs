//! Names for sampled frames against the real kernel: a command profiled from its
//! exec, named after it has exited (its mappings kept from the kernel's MMAP2
//! records, its functions read with blazesym), with DWARF lines on request;
//! kernel frames by kallsyms; JIT frames by a perf map. Needs perf_event_open on
//! a child with kernel stacks (root, CAP_PERFMON or perf_event_paranoid <= 1);
//! cpu-clock works in a VM without a PMU.

use quietwatt_profile::{
    MapTable, Options, Profiler, StackSample, StackTable, SymbolOptions, Symbols, Target,
};
use quietwatt_sys::clock::process_cpu_ns;
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::Command;
use std::time::Duration;

const CHILD_ENV: &str = "QUIETWATT_SYMBOLS_CHILD";

/// Not a test: the child's body, run by the tests with the variable set to what
/// it should do for 300 ms of CPU: `spin` in [`qw_symbol_spin_marker`], or
/// `syscalls` (reads of /proc/self/stat: time in the kernel). Run by hand it
/// does nothing.
#[test]
#[ignore = "the child process of the other tests"]
fn symbols_child() {
    match std::env::var(CHILD_ENV).as_deref() {
        Ok("spin") => {
            // For a parent that profiles a running process: it runs now.
            println!("\nqw-ready");
            let cpu0 = process_cpu_ns();
            while process_cpu_ns() < cpu0 + 300_000_000 {
                std::hint::black_box(qw_symbol_spin_marker(std::hint::black_box(1)));
            }
        }
        Ok("syscalls") => {
            let cpu0 = process_cpu_ns();
            while process_cpu_ns() < cpu0 + 300_000_000 {
                for _ in 0..100 {
                    std::hint::black_box(std::fs::read("/proc/self/stat").ok());
                }
            }
        }
        _ => {}
    }
}

/// The function whose name the profile must find: xorshift steps, all inline
/// arithmetic (no call in a debug build: no range iterator), so the samples
/// land here.
#[inline(never)]
fn qw_symbol_spin_marker(seed: u64) -> u64 {
    let mut x = seed | 1;
    let mut i = 0u32;
    while i < 200_000 {
        x = qw_symbol_inlined_step(x);
        i += 1;
    }
    x
}

/// One xorshift step, inlined into the marker even in a debug build: DWARF
/// says so, and [`SymbolOptions::inlined`] shows it as a frame of its own.
#[inline(always)]
fn qw_symbol_inlined_step(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// Profiles this binary re-run as a child doing `what`, from its exec to its
/// exit; returns the stacks and the mappings the kernel reported.
fn profile_child(what: &str) -> (StackTable, Vec<StackSample>, MapTable, u32) {
    let mut profiler = match Profiler::open(Options::new(Target::Spawned)) {
        Ok(p) => p,
        Err(e) => panic!(
            "NEEDS perf_event_open on a child with kernel stacks (root, CAP_PERFMON or perf_event_paranoid <= 1): {e}"
        ),
    };
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "symbols_child", "--ignored", "--nocapture"])
        .env(CHILD_ENV, what)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("the test binary runs again");
    let pid = child.id();
    let (mut table, mut samples) = (StackTable::new(), Vec::new());
    while child.try_wait().unwrap().is_none() {
        profiler.drain(&mut table, &mut samples);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(child.wait().unwrap().success());
    profiler.stop().unwrap();
    profiler.drain(&mut table, &mut samples);
    assert!(!samples.is_empty(), "no sample of 300 ms of CPU");
    assert!(profiler.counts().mappings > 0, "{:?}", profiler.counts());
    (table, samples, profiler.take_maps(), pid)
}

/// Every stack's frames, named root first: as many names as frames, none empty.
fn named(sym: &mut Symbols, table: &StackTable, samples: &[StackSample]) -> Vec<Vec<String>> {
    samples
        .iter()
        .map(|s| {
            let stack = table.get(s.stack).unwrap();
            let names = sym.stack(stack);
            assert_eq!(names.len(), stack.user.len() + stack.kernel.len());
            assert!(names.iter().all(|n| !n.is_empty()), "{names:?}");
            names
        })
        .collect()
}

#[test]
fn an_exited_command_is_named_by_its_functions_and_with_lines_by_file_and_line() {
    let (table, samples, maps, pid) = profile_child("spin");
    // The process is gone: only the kept mappings can name it.
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    assert!(maps.knows(pid), "no mapping kept for {pid}");

    let mut sym = Symbols::new(maps.clone(), SymbolOptions::default());
    let stacks = named(&mut sym, &table, &samples);
    let hits = stacks
        .iter()
        .filter(|s| s.iter().any(|f| f.ends_with("qw_symbol_spin_marker")))
        .count();
    assert!(
        hits * 2 > samples.len(),
        "qw_symbol_spin_marker named in {hits} of {} stacks, such as {:#?}; {:?}",
        samples.len(),
        &stacks[..stacks.len().min(5)],
        sym.counts()
    );
    // Demangled: a Rust path, not a mangled symbol.
    let marker = stacks
        .iter()
        .flatten()
        .find(|f| f.contains("qw_symbol_spin_marker"));
    assert_eq!(
        marker.map(String::as_str),
        Some("symbols::qw_symbol_spin_marker")
    );
    let c = sym.counts();
    assert!(c.named > 0 && c.frames >= c.named, "{c:?}");

    let mut lines = Symbols::new(
        maps,
        SymbolOptions {
            lines: true,
            ..SymbolOptions::default()
        },
    );
    let stacks = named(&mut lines, &table, &samples);
    let with_line = stacks
        .iter()
        .flatten()
        .find(|f| f.starts_with("symbols::qw_symbol_spin_marker ("));
    let with_line =
        with_line.unwrap_or_else(|| panic!("no line for the marker: {:#?}", &stacks[..3]));
    // `symbols::qw_symbol_spin_marker (symbols.rs:53)`: this file, a line in
    // the function.
    let (_, at) = with_line.split_once(" (").unwrap();
    let (file, line) = at.trim_end_matches(')').rsplit_once(':').unwrap();
    assert!(file.ends_with("symbols.rs"), "{with_line}");
    assert!(line.parse::<u32>().unwrap() > 0, "{with_line}");

    // Inlined functions as frames of their own, after their caller.
    let mut inlined = Symbols::new(
        lines.maps().clone(),
        SymbolOptions {
            inlined: true,
            ..SymbolOptions::default()
        },
    );
    let stacks: Vec<Vec<String>> = samples
        .iter()
        .map(|s| inlined.stack(table.get(s.stack).unwrap()))
        .collect();
    let pair = [
        "symbols::qw_symbol_spin_marker",
        "symbols::qw_symbol_inlined_step",
    ];
    let found = stacks.iter().any(|s| s.windows(2).any(|w| w == pair));
    assert!(
        found,
        "no inlined step under the marker: {:#?}",
        &stacks[..stacks.len().min(3)]
    );
}

#[test]
fn a_process_that_ran_before_the_profile_is_named_after_it_exits() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "symbols_child", "--ignored", "--nocapture"])
        .env(CHILD_ENV, "spin")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the test binary runs again");
    let pid = child.id();
    // Its exec is done and its code mapped: no record will report those
    // mappings, /proc/PID/maps read at the open has them.
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut lines = out.lines();
    assert!(lines.any(|l| l.unwrap().contains("qw-ready")));
    let mut profiler = Profiler::open(Options::new(Target::Process { pid: pid as i32 }))
        .unwrap_or_else(|e| panic!("NEEDS perf_event_open on a child (root or CAP_PERFMON): {e}"));
    profiler.start().unwrap();
    let (mut table, mut samples) = (StackTable::new(), Vec::new());
    while child.try_wait().unwrap().is_none() {
        profiler.drain(&mut table, &mut samples);
        std::thread::sleep(Duration::from_millis(10));
    }
    profiler.stop().unwrap();
    profiler.drain(&mut table, &mut samples);
    assert!(!samples.is_empty(), "no sample of its spin");
    let mut sym = Symbols::new(profiler.take_maps(), SymbolOptions::default());
    let stacks = named(&mut sym, &table, &samples);
    let hits = stacks
        .iter()
        .filter(|s| s.iter().any(|f| f == "symbols::qw_symbol_spin_marker"))
        .count();
    assert!(
        hits * 2 > samples.len(),
        "qw_symbol_spin_marker named in {hits} of {} stacks, such as {:#?}",
        samples.len(),
        &stacks[..stacks.len().min(3)]
    );
}

#[test]
fn kernel_frames_are_named_by_kallsyms_or_honestly_left_as_addresses() {
    let (table, samples, maps, _) = profile_child("syscalls");
    let mut sym = Symbols::new(maps, SymbolOptions::default());
    let stacks = named(&mut sym, &table, &samples);
    let kernel: Vec<&String> = samples
        .iter()
        .zip(&stacks)
        .flat_map(|(s, names)| {
            let k = table.get(s.stack).unwrap().kernel.len();
            names[names.len() - k..].iter()
        })
        .collect();
    assert!(!kernel.is_empty(), "no kernel frame in a syscall loop");
    if sym.kernel_names() {
        let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
        let known: HashSet<&str> = kallsyms
            .lines()
            .filter_map(|l| l.split_whitespace().nth(2))
            .collect();
        let real = kernel.iter().filter(|n| known.contains(n.as_str())).count();
        assert!(
            real * 2 > kernel.len(),
            "{real} of {} kernel frames named by kallsyms, such as {:?}",
            kernel.len(),
            &kernel[..kernel.len().min(10)]
        );
    } else {
        // kptr_restrict (or no CAP_SYSLOG): kallsyms reads zeros, and a name
        // found there would be a wrong one.
        assert!(
            kernel.iter().all(|n| n.starts_with("[kernel] 0x")),
            "kallsyms hides its addresses here, so kernel frames must stay addresses: {kernel:?}"
        );
    }
}

#[test]
fn jit_code_is_named_by_the_perf_map_and_nothing_else_vanishes() {
    // No process has this pid (above the kernel's largest pid_max): only the
    // files name its frames.
    let pid = 999_999_937u32;
    let path = format!("/tmp/perf-{pid}.map");
    std::fs::write(
        &path,
        "7f0000001000 100 LazyCompile:*fib /app/fib.js:3\n7f0000002000 0x40 py::spin:/app/x.py\n",
    )
    .unwrap();
    let mut maps = MapTable::new();
    maps.insert(pid, 0x7f00_0000_0000, 0x10_0000, 0, "//anon");
    maps.insert(
        pid,
        0x5555_0000_0000,
        0x1000,
        0x2000,
        "/nonexistent/libgone.so",
    );
    let mut sym = Symbols::new(maps, SymbolOptions::default());
    let names = [
        sym.name(pid, 0x7f00_0000_1010, false, true),
        sym.name(pid, 0x7f00_0000_2011, false, false),
        // In the JIT's memory, in no perf map entry: its module and offset.
        sym.name(pid, 0x7f00_0000_3000, false, true),
        // A library that is gone: module and offset in the file.
        sym.name(pid, 0x5555_0000_0010, false, true),
        // Nowhere: the address.
        sym.name(pid, 0x10, false, true),
    ];
    std::fs::remove_file(&path).ok();
    assert_eq!(
        names,
        [
            "LazyCompile:*fib /app/fib.js:3",
            "py::spin:/app/x.py",
            "[anon]+0x3000",
            "libgone.so+0x2010",
            "[unknown] 0x10",
        ]
    );
    let c = sym.counts();
    assert_eq!((c.frames, c.named, c.module_only, c.unmapped), (5, 2, 2, 1));
    // Each distinct frame is looked up once.
    sym.name(pid, 0x7f00_0000_1010, false, true);
    assert_eq!(sym.counts().frames, 5);
}
