//! `bloom verify`: every snapshot checked completely, streaming in constant memory.

use crate::cli::VerifyArgs;
use crate::error::{CmdResult, Exit, Failure};
use crate::files;
use crate::output::{Out, escape_key};

/// A path as one field of one line: escaped like keys.
fn shown(path: &std::path::Path) -> String {
    escape_key(path.as_os_str().as_encoded_bytes())
}

/// Returns the exit code: 0 when every file is intact, 1 when one is damaged. The report
/// goes to standard output; if it cannot be written (other than a closed pipe, which ends
/// the report quietly), every file is still checked and the failure is reported, exit 3.
pub(crate) fn run(args: &VerifyArgs) -> CmdResult<u8> {
    let mut out = Out::new();
    let mut damaged = 0usize;
    let mut output_failure = None;
    for path in &args.snapshots {
        let line = match files::open(path, Some(args.max_bytes))
            .and_then(|(reader, _)| reader.verify().map_err(|e| files::read_failure(path, &e)))
        {
            Ok(_) => format!("ok\t{}\n", shown(path)),
            Err(Failure::Report { message, .. }) => {
                damaged += 1;
                format!("damaged\t{}\n", escape_key(message.as_bytes()))
            }
            Err(other) => return Err(other),
        };
        if output_failure.is_none()
            && let Err(e) = out.text(&line).and_then(|()| out.flush())
        {
            output_failure = Some(e);
        }
    }
    match output_failure {
        None | Some(Failure::OutputClosed) => {}
        Some(Failure::Report { message, .. }) => {
            return Err(Failure::environment(format!(
                "{message}; {damaged} of {} snapshots are damaged",
                args.snapshots.len()
            )));
        }
        Some(other) => return Err(other),
    }
    Ok(if damaged == 0 { 0 } else { Exit::Input as u8 })
}
