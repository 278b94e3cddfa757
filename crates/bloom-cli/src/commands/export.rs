//! `bloom export`: a snapshot as a seed raw file or a Guava stream.

use bloom_format::{
    DecodeError, DecodeOptions, ReadError, export_guava, export_seed_raw, guava_parameters,
    guava_stream_len, seed_raw_header,
};

use crate::cli::{ExportArgs, Legacy};
use crate::error::{CmdResult, Failure};
use crate::files::{self, Replaceable};
use crate::signals::Signals;

pub(crate) fn run(args: &ExportArgs, signals: &Signals) -> CmdResult {
    let path = &args.snapshot;
    let limit = match args.to {
        // The seed layout's payload is 128 bytes: anything larger is refused before reading.
        Legacy::SeedRaw => seed_raw_header().payload_len(),
        Legacy::Guava => args.limit.max_bytes,
    };
    let snapshot = files::open_input(path, &DecodeOptions::with_max_payload_len(limit))
        .and_then(bloom_format::SnapshotReader::read_payload)
        .map_err(|e| match e {
            ReadError::Decode(DecodeError::OverLimit { .. }) if args.to == Legacy::SeedRaw => {
                Failure::input(format!(
                    "{}: cannot export as seed raw: the payload is larger than the seed layout's {limit} bytes",
                    files::shown(path)
                ))
            }
            other => files::read_failure(path, &other),
        })?;
    let refuse =
        |e: bloom_format::GuavaError| Failure::input(format!("{}: {e}", files::shown(path)));
    match args.to {
        Legacy::SeedRaw => {
            let raw = export_seed_raw(&snapshot)
                .map_err(|e| Failure::input(format!("{}: {e}", files::shown(path))))?;
            let output = files::output(&args.output, !args.lock.no_wait)?;
            files::write_foreign(&output, Replaceable::SeedRaw, signals, |out| {
                out.write_all(&raw).map_err(bloom_format::GuavaError::from)
            })
        }
        Legacy::Guava => {
            let (strategy, funnel) = guava_parameters(snapshot.header()).map_err(refuse)?;
            let output = files::output(&args.output, !args.lock.no_wait)?;
            files::write_foreign(&output, Replaceable::GuavaStream, signals, |out| {
                export_guava(&snapshot, out)
            })?;
            crate::warn(&format!(
                "wrote a {strategy} stream of {} bytes; read it with BloomFilter.readFrom(in, {funnel})",
                guava_stream_len(snapshot.header())
            ));
            Ok(())
        }
    }
}
