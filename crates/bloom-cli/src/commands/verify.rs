//! `bloom verify`: every snapshot checked completely, streaming in constant memory.

use crate::cli::VerifyArgs;
use crate::error::{CmdResult, Exit, Failure};
use crate::files;
use crate::output::{Out, escape_key};

/// A path as one field of one line: escaped like keys.
fn shown(path: &std::path::Path) -> String {
    escape_key(path.as_os_str().as_encoded_bytes())
}

/// Returns the exit code: 0 when every file is intact, 1 when one is damaged or was not
/// verified (its payload is over `--max-bytes`). The report goes to standard output; if it
/// cannot be written (other than a closed pipe, which ends the report quietly), every file
/// is still checked and the failure is reported, exit 3.
pub(crate) fn run(args: &VerifyArgs) -> CmdResult<u8> {
    let mut out = Out::new();
    let mut damaged = 0usize;
    let mut output_failure = None;
    for path in &args.snapshots {
        let options = bloom_format::DecodeOptions::with_max_payload_len(args.max_bytes);
        let checked = bloom_format::SnapshotReader::open(path, &options)
            .and_then(bloom_format::SnapshotReader::verify);
        let line = match checked {
            Ok(_) => format!("ok\t{}\n", shown(path)),
            // Intact as far as the header goes, but larger than the limit: not verified,
            // which is not the same as damaged.
            Err(bloom_format::ReadError::Decode(bloom_format::DecodeError::OverLimit {
                payload_len,
                limit,
            })) => {
                damaged += 1;
                format!(
                    "unverified\t{}\tpayload of {payload_len} bytes is over --max-bytes {limit}\n",
                    shown(path)
                )
            }
            Err(e) => match files::read_failure(path, &e) {
                Failure::Report { message, .. } => {
                    damaged += 1;
                    format!("damaged\t{}\n", escape_key(message.as_bytes()))
                }
                other => return Err(other),
            },
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
                "{message}; {damaged} of {} snapshots are damaged or unverified",
                args.snapshots.len()
            )));
        }
        Some(other) => return Err(other),
    }
    Ok(if damaged == 0 { 0 } else { Exit::Input as u8 })
}
