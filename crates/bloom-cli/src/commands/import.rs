//! `bloom import`: a seed raw file or a Guava stream into the checked format.

use std::io::Read;

use bloom_format::{DecodeOptions, SEED_RAW_LEN, Snapshot, import_guava, import_seed_raw};

use crate::cli::{Funnel, ImportArgs, Legacy};
use crate::error::{CmdResult, Failure};
use crate::files;
use crate::signals::Signals;

pub(crate) fn run(args: &ImportArgs, signals: &Signals) -> CmdResult {
    let name = files::shown(&args.input);
    if args.from != Legacy::Guava && args.funnel.is_some() {
        return Err(Failure::usage("--funnel goes with --from guava"));
    }
    // The stream does not record how keys were hashed; a wrong guess answers "absent" for
    // keys that are there, so there is no default.
    let funnel = match (args.from, args.funnel) {
        (Legacy::Guava, None) => {
            return Err(Failure::usage(
                "--from guava needs --funnel (utf8, chars or bytes): the stream does not record how the JVM side hashed its keys",
            ));
        }
        (_, funnel) => funnel,
    };
    let source: Box<dyn Read> = if files::is_stdio(&args.input) {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            bloom_format::open_regular_file(&args.input)
                .map_err(|e| files::read_failure(&args.input, &e))?,
        )
    };
    let snapshot = match args.from {
        Legacy::SeedRaw => seed_raw(source, &name)?,
        Legacy::Guava => {
            let funnel = funnel.unwrap_or(Funnel::Utf8).guava();
            let options = DecodeOptions::with_max_payload_len(args.limit.max_bytes);
            let snapshot = import_guava(source, funnel, &options).map_err(|e| match e {
                bloom_format::GuavaError::Alloc { .. } | bloom_format::GuavaError::Io(_) => {
                    Failure::environment(format!("{name}: {e}"))
                }
                bloom_format::GuavaError::OverLimit { .. } => {
                    Failure::input(format!("{name}: {e}; raise --max-bytes to import it"))
                }
                other => Failure::input(format!("{name}: {other}")),
            })?;
            // A valid Guava stream this build cannot answer for (k above 64) is refused here,
            // not written as a snapshot nothing can load.
            bloom_core::FilterConfig::from_header(snapshot.header())
                .map_err(|e| Failure::input(format!("{name}: {e}")))?;
            snapshot
        }
    };
    let output = files::output(&args.output, !args.lock.no_wait)?;
    files::write_snapshot_bytes(&output, &snapshot, signals)
}

fn seed_raw(source: Box<dyn Read>, name: &str) -> CmdResult<Snapshot> {
    // One byte more than the layout holds tells "too long" without reading the rest.
    let mut raw = Vec::with_capacity(SEED_RAW_LEN + 1);
    source
        .take(SEED_RAW_LEN as u64 + 1)
        .read_to_end(&mut raw)
        .map_err(|e| Failure::environment(format!("cannot read {name}: {e}")))?;
    if raw.len() > SEED_RAW_LEN {
        return Err(Failure::input(format!(
            "{name}: a seed raw snapshot is exactly {SEED_RAW_LEN} bytes (1024 bits); this input is longer"
        )));
    }
    import_seed_raw(&raw).map_err(|e| Failure::input(format!("{name}: {e}")))
}
