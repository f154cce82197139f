//! Writing to stdout and stderr without ever panicking.
//!
//! std's `println!` and `eprintln!` panic when the write fails ("failed printing to
//! stderr: Broken pipe", exit 101): `quietwatt record ... 2>&1 | head -1` would die
//! mid-recording and `quietwatt run -- CMD 2>&1 | head -1` would lose the command's
//! exit code. This crate's `println!`, `print!`, `eprintln!` and `eprint!` (defined
//! here, ahead of every other module, so they shadow std's in the whole crate) go
//! through [`stdout`] and [`stderr`] instead:
//!
//! - stderr: a failed write is dropped (nobody is left to read a message about it);
//! - stdout: the first failed write (a reader that went away, a full disk) closes
//!   it for the rest of the process: nothing more is written there, and the
//!   command finishes its work (a recording its file, `run` its command) and exits
//!   with the code it would have had.
//!
//! SIGPIPE stays ignored, as Rust sets it up before `main`: a reader closing a pipe
//! must not kill quietwatt while it records to a file or waits for a command. The
//! measured command itself starts with SIGPIPE at its default (std restores it in
//! the child before exec), as under a shell.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set at the first failed write to stdout.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes to stdout until a write fails, then never again.
pub fn stdout(args: fmt::Arguments<'_>) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if out.write_fmt(args).is_err() || (out.flush().is_err()) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Writes to stderr; a failed write is dropped. Formatted first, then written at
/// once: stderr is unbuffered, so `write_fmt` made one `write` per piece (a record's
/// summary was 415 system calls, 284 of them one byte).
pub fn stderr(args: fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = match args.as_str() {
        Some(s) => err.write_all(s.as_bytes()),
        None => err.write_all(args.to_string().as_bytes()),
    };
}

/// `println!` that never panics: see the module's documentation.
macro_rules! println {
    () => {
        $crate::out::stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that never panics.
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::out::stdout(format_args!($($arg)*))
    };
}

/// `eprintln!` that never panics.
macro_rules! eprintln {
    () => {
        $crate::out::stderr(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` that never panics.
macro_rules! eprint {
    ($($arg:tt)*) => {
        $crate::out::stderr(format_args!($($arg)*))
    };
}
