//! `bloom export`: a snapshot as a seed raw file or a Guava stream.

use bloom_format::{
    DecodeOptions, export_guava, export_seed_raw, guava_parameters, guava_stream_len,
    seed_raw_header,
};

use crate::cli::{ExportArgs, Legacy};
use crate::error::{CmdResult, Failure};
use crate::files::{self, Replaceable};
use crate::signals::Signals;

pub(crate) fn run(args: &ExportArgs, signals: &Signals) -> CmdResult {
    let path = &args.snapshot;
    // The header first, within --max-bytes: a chain is refused by what it is, and a seed
    // raw export by its payload's size, before any of the payload is read.
    let reader = files::open_input(
        path,
        &DecodeOptions::with_max_payload_len(args.limit.max_bytes),
    )
    .map_err(|e| files::read_failure(path, &e))?;
    if reader.header().layout == bloom_format::LayoutId::Scalable {
        return Err(Failure::input(format!(
            "{}: a scalable filter (a chain of stages) has no {} form: export works on single filters",
            files::shown(path),
            match args.to {
                Legacy::SeedRaw => "seed raw",
                Legacy::Guava => "Guava",
            }
        )));
    }
    let seed_len = seed_raw_header().payload_len();
    if args.to == Legacy::SeedRaw && reader.payload_len() > seed_len {
        return Err(Failure::input(format!(
            "{}: cannot export as seed raw: the payload is larger than the seed layout's {seed_len} bytes",
            files::shown(path)
        )));
    }
    let snapshot = reader
        .read_payload()
        .map_err(|e| files::read_failure(path, &e))?;
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
