//! Exit codes and the wording of errors at the edge.

use quietwatt::Error;
use std::process::ExitCode;

/// Bad arguments or input (clap uses 2 as well).
pub const USAGE: u8 = 2;
/// No mechanism can measure here: no RAPL, or no permission (sysexits EX_UNAVAILABLE).
pub const NO_RAPL: u8 = 69;
/// Writing the output failed (sysexits EX_IOERR).
pub const OUTPUT: u8 = 74;
/// A measurement failed part-way (a counter vanished, froze or read garbage).
pub const MEASUREMENT: u8 = 1;

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
        let code = match &e {
            Error::NoDomains { .. }
            | Error::MechanismUnavailable { .. }
            | Error::Permission { .. } => NO_RAPL,
            Error::UnknownDomain { .. } | Error::Spawn { .. } => USAGE,
            Error::Output { .. } => OUTPUT,
            _ => MEASUREMENT,
        };
        let hint = match code {
            NO_RAPL => "\n  run `quietwatt doctor` to see what each mechanism needs here, or add `--emulate auto` to try the built-in emulator",
            _ => "",
        };
        Failure::new(code, format!("{e}{hint}"))
    }
}
