//! `bloom verify`: every snapshot checked completely, streaming in constant memory.

use serde_json::json;

use crate::cli::VerifyArgs;
use crate::error::{CmdResult, Exit, Failure};
use crate::files;
use crate::output::{Out, escape_key, one_line};

/// What `verify` found about one file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Status {
    /// Every check passed.
    Ok,
    /// Intact as far as the header goes, but its payload is over `--max-bytes`: not read,
    /// which is not the same as damaged.
    Unverified,
    /// The bytes are not a valid snapshot.
    Damaged,
    /// The file was never a snapshot: it does not begin with the format's magic (or is
    /// empty).
    NotASnapshot,
    /// No file at the path.
    Missing,
    /// The path could not be read: not a regular file, no permission, an I/O error.
    Unreadable,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Unverified => "unverified",
            Self::Damaged => "damaged",
            Self::NotASnapshot => "not-a-snapshot",
            Self::Missing => "missing",
            Self::Unreadable => "unreadable",
        }
    }
}

/// The status of one snapshot, and what is wrong (without the path) unless it is intact.
fn check(path: &std::path::Path, max_bytes: u64) -> (Status, Option<String>) {
    use bloom_format::{DecodeError, ReadError};
    let options = bloom_format::DecodeOptions::with_max_payload_len(max_bytes);
    let checked = files::open_input(path, &options).and_then(bloom_format::SnapshotReader::verify);
    match checked {
        Ok(_) => (Status::Ok, None),
        Err(ReadError::Decode(DecodeError::OverLimit { payload_len, limit })) => (
            Status::Unverified,
            Some(format!(
                "payload of {payload_len} bytes is over --max-bytes {limit}"
            )),
        ),
        Err(ReadError::Io { cause, .. }) if cause.kind() == std::io::ErrorKind::NotFound => {
            (Status::Missing, Some("no such file".to_owned()))
        }
        Err(ReadError::Io { cause, .. }) => (Status::Unreadable, Some(cause.to_string())),
        Err(ReadError::NotARegularFile { kind, .. }) => (
            Status::Unreadable,
            Some(format!("it is {kind}; a snapshot is a regular file")),
        ),
        Err(ReadError::Alloc { bytes }) => (
            Status::Unreadable,
            Some(format!("cannot allocate {bytes} bytes on this machine")),
        ),
        // Not bloom's magic at its start (or nothing at all): another kind of file.
        Err(ReadError::Decode(e @ DecodeError::BadMagic { .. })) => {
            (Status::NotASnapshot, Some(e.to_string()))
        }
        Err(e @ ReadError::Decode(DecodeError::Truncated { got: 0, .. })) => {
            (Status::NotASnapshot, Some(crate::files::described(&e)))
        }
        // The bytes are not a valid snapshot.
        Err(e) => (Status::Damaged, Some(e.to_string())),
    }
}

/// Returns the exit code: 0 when every file is intact; 1 when one is damaged or was not
/// verified (its payload is over `--max-bytes`); otherwise 3 when one is missing or could
/// not be read. The report goes to standard output, one line (or, with `--json`, one JSON
/// object) per file; if it cannot be written (other than a closed pipe, which ends the report
/// quietly), every file is still checked and the failure is reported, exit 3.
pub(crate) fn run(args: &VerifyArgs) -> CmdResult<u8> {
    if args.snapshots.iter().filter(|p| files::is_stdio(p)).count() > 1 {
        return Err(Failure::usage(
            "standard input (-) can be verified once: it is read to its end",
        ));
    }
    let mut out = Out::new();
    let (mut bad, mut unreadable) = (0usize, 0usize);
    let mut output_failure = None;
    for path in &args.snapshots {
        let (status, detail) = check(path, args.max_bytes);
        match status {
            Status::Ok => {}
            Status::Unverified | Status::Damaged | Status::NotASnapshot => bad += 1,
            Status::Missing | Status::Unreadable => unreadable += 1,
        }
        let shown = if files::is_stdio(path) {
            "-".to_owned()
        } else {
            path.display().to_string()
        };
        let written = if args.json {
            out.json_line(&json!({
                "path": shown,
                "status": status.name(),
                "detail": detail,
            }))
        } else {
            // The path's own bytes, escaped as keys are (a name that is not UTF-8 stays exact).
            let bytes = if files::is_stdio(path) {
                b"-".as_slice()
            } else {
                path.as_os_str().as_encoded_bytes()
            };
            let mut line = format!("{}\t{}", status.name(), escape_key(bytes));
            if let Some(detail) = &detail {
                line.push('\t');
                line.push_str(&one_line(detail));
            }
            line.push('\n');
            out.text(&line)
        };
        if output_failure.is_none()
            && let Err(e) = written.and_then(|()| out.flush())
        {
            output_failure = Some(e);
        }
    }
    match output_failure {
        None | Some(Failure::OutputClosed) => {}
        Some(Failure::Report { message, .. }) => {
            return Err(Failure::environment(format!(
                "{message}; {bad} of {} files are damaged, unverified or not snapshots, {unreadable} missing or unreadable",
                args.snapshots.len()
            )));
        }
        Some(other) => return Err(other),
    }
    Ok(if bad > 0 {
        Exit::Input as u8
    } else if unreadable > 0 {
        Exit::Environment as u8
    } else {
        0
    })
}
