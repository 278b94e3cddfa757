//! `bloom export`: a snapshot in a legacy raw layout.

use bloom_format::{Snapshot, export_seed_raw, seed_raw_header};

use crate::cli::{ExportArgs, Legacy};
use crate::error::{CmdResult, Failure};
use crate::files;

pub(crate) fn run(args: &ExportArgs) -> CmdResult {
    let Legacy::SeedRaw = args.to;
    let path = &args.snapshot;
    // The seed layout's payload is 128 bytes: anything larger is refused before reading.
    let limit = seed_raw_header().payload_len();
    let snapshot = Snapshot::read_file(path, &bloom_format::DecodeOptions::with_max_payload_len(limit))
        .map_err(|e| match e {
            bloom_format::ReadError::Decode(bloom_format::DecodeError::OverLimit { .. }) => {
                Failure::input(format!(
                    "{}: cannot export as seed raw: the payload is larger than the seed layout's {limit} bytes",
                    path.display()
                ))
            }
            other => files::read_failure(path, &other),
        })?;
    let raw = export_seed_raw(&snapshot)
        .map_err(|e| Failure::input(format!("{}: {e}", path.display())))?;
    let output = files::output(&args.output, !args.lock.no_wait)?;
    files::write_raw(&output, &raw)
}
