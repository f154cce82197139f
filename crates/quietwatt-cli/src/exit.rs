//! Exit codes and the wording of errors at the edge.

use quietwatt::{Error, ErrorKind};
use std::process::ExitCode;

/// Bad arguments or input (clap uses 2 as well).
pub const USAGE: u8 = 2;
/// No mechanism can measure here: no RAPL, or no permission (sysexits EX_UNAVAILABLE).
pub const NO_RAPL: u8 = 69;
/// Writing the output failed (sysexits EX_IOERR).
pub const OUTPUT: u8 = 74;
/// A measurement failed part-way (a counter vanished, froze or read garbage).
pub const MEASUREMENT: u8 = 1;
/// The command to run was found but cannot be executed (as a shell says it).
pub const NOT_EXECUTABLE: u8 = 126;
/// The command to run does not exist (as a shell says it).
pub const NOT_FOUND: u8 = 127;

/// An error explained for a person, with its exit code.
#[derive(Debug)]
pub struct Failure {
    message: String,
    code: u8,
}

impl Failure {
    /// A failure with an explicit code.
    pub fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code,
        }
    }

    /// Bad input from the user.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::new(USAGE, message)
    }

    /// The exit code.
    pub fn code(&self) -> u8 {
        self.code
    }

    /// The message, without the `quietwatt: error: ` before it.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Prints the message and returns the exit code.
    pub fn report(self) -> ExitCode {
        if !self.message.is_empty() {
            eprintln!("quietwatt: error: {}", self.message);
        }
        ExitCode::from(self.code)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        if let Error::Spawn { program, source } = &e {
            return spawn(program, source);
        }
        let code = code(e.kind());
        // The library says what to do in its own terms; the flag that does it is
        // the CLI's to name.
        let hint = match (&e, code) {
            (Error::TooManyChannels { .. }, _) => " (--domains)",
            (_, NO_RAPL) => "\n  run `quietwatt doctor` to see what each mechanism needs here, add `--emulate auto` to try the built-in emulator, \
                             or estimate with `--power-model FILE` (a model `quietwatt calibrate` made on a machine of this CPU with RAPL: labelled ESTIMATED)",
            _ => "",
        };
        Failure::new(code, format!("{e}{hint}"))
    }
}

impl From<quietwatt::SourceError> for Failure {
    fn from(e: quietwatt::SourceError) -> Failure {
        Failure::from(Error::from(e))
    }
}

impl From<quietwatt_model::Error> for Failure {
    fn from(e: quietwatt_model::Error) -> Failure {
        match e {
            // A measurement's failure keeps the engine's wording and flag hints.
            quietwatt_model::Error::Measure(e) => Failure::from(e),
            e => Failure::new(code(e.kind()), e.to_string()),
        }
    }
}

/// The exit code of an error of `kind` (README's table): bad input 2, nothing can
/// measure here 69, output refused 74; a measurement that broke, whether for good,
/// for a moment or because a counter vanished, 1.
pub fn code(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Usage => USAGE,
        ErrorKind::Unavailable => NO_RAPL,
        ErrorKind::Output => OUTPUT,
        ErrorKind::Fatal | ErrorKind::CanRetry | ErrorKind::CounterVanished => MEASUREMENT,
        // A kind added after this CLI: the measurement broke, for a reason the
        // message (not the code) explains.
        _ => MEASUREMENT,
    }
}

/// A command that could not be started, with a shell's exit codes: 127 when it
/// does not exist, 126 when it exists but cannot be executed.
pub fn spawn(program: &str, e: &std::io::Error) -> Failure {
    if e.kind() == std::io::ErrorKind::NotFound {
        let where_ = if program.contains('/') {
            "no such file"
        } else {
            "not in PATH"
        };
        return Failure::new(
            NOT_FOUND,
            format!("{program}: command not found ({where_})"),
        );
    }
    let why = match e.raw_os_error() {
        Some(libc::EACCES) => "permission denied: not an executable file, or no execute permission",
        Some(libc::ENOEXEC) => "not a program this system can run (no #! line?)",
        Some(libc::EISDIR) => "is a directory",
        _ => "cannot be executed",
    };
    Failure::new(NOT_EXECUTABLE, format!("{program}: {why} ({e})"))
}
