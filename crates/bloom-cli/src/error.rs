//! [`Failure`]: what went wrong, said in one line, and the exit code that goes with it.

use std::fmt;

/// The exit codes, documented in `--help` and the README.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Exit {
    /// Bad input: a damaged or invalid snapshot, an invalid key or key file.
    Input = 1,
    /// A usage error: flags or values that do not make sense together.
    Usage = 2,
    /// The environment failed: a file or standard output could not be written, a lock could
    /// not be taken, memory could not be allocated.
    Environment = 3,
    /// `check --exit-status`: at least one key is absent.
    Absent = 4,
    /// A Redis filter is unverified: Redis may have lost acknowledged writes.
    Unverified = 5,
}

/// A failure to report: one line on standard error, and an exit code.
#[derive(Debug)]
pub(crate) enum Failure {
    /// A message and its exit code.
    Report { exit: Exit, message: String },
    /// Interrupted by a signal during a write; the temporary file was removed. Exits with
    /// 128 + the signal number, as shells do.
    Interrupted(i32),
    /// Standard output was closed by the reader (`| head`): stop quietly, like `rg` and `jq`.
    OutputClosed,
}

impl Failure {
    pub(crate) fn input(message: impl fmt::Display) -> Self {
        Self::Report {
            exit: Exit::Input,
            message: message.to_string(),
        }
    }

    pub(crate) fn usage(message: impl fmt::Display) -> Self {
        Self::Report {
            exit: Exit::Usage,
            message: message.to_string(),
        }
    }

    pub(crate) fn unverified(message: impl fmt::Display) -> Self {
        Self::Report {
            exit: Exit::Unverified,
            message: message.to_string(),
        }
    }

    pub(crate) fn environment(message: impl fmt::Display) -> Self {
        Self::Report {
            exit: Exit::Environment,
            message: message.to_string(),
        }
    }

    /// A failure writing standard output: quiet for a closed pipe, reported otherwise.
    /// A failure to write a file's bytes (a snapshot, an export) to standard output: unlike
    /// a report, a file cut short is an error even when the reader went away (exit 3).
    pub(crate) fn file_to_stdout(error: &std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            Self::environment(
                "standard output was closed before the whole file was written: the output is incomplete",
            )
        } else {
            Self::environment(format!("cannot write to standard output: {error}"))
        }
    }

    pub(crate) fn stdout(error: &std::io::Error) -> Self {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            Self::OutputClosed
        } else {
            Self::environment(format!("cannot write to standard output: {error}"))
        }
    }
}

pub(crate) type CmdResult<T = ()> = Result<T, Failure>;
