//! `bloom import`: a seed raw file, a Guava stream or a Parquet column chunk's Bloom filter
//! into the checked format.

use bloom_core::Filter;
use std::io::Read;

use bloom_format::{DecodeOptions, SEED_RAW_LEN, Snapshot, import_guava, import_seed_raw};

use crate::cli::{Funnel, ImportArgs, ImportForm};
use crate::error::{CmdResult, Failure};
use crate::files;
use crate::signals::Signals;

pub(crate) fn run(args: &ImportArgs, signals: &Signals) -> CmdResult {
    let name = files::shown(&args.input);
    if args.from != ImportForm::Guava && args.funnel.is_some() {
        return Err(Failure::usage("--funnel goes with --from guava"));
    }
    if args.from != ImportForm::Parquet && (args.column.is_some() || args.row_group.is_some()) {
        return Err(Failure::usage(
            "--column and --row-group go with --from parquet",
        ));
    }
    if args.from == ImportForm::Parquet {
        return parquet(args, signals);
    }
    // The stream does not record how keys were hashed; a wrong guess answers "absent" for
    // keys that are there, so there is no default.
    let funnel = match (args.from, args.funnel) {
        (ImportForm::Guava, None) => {
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
        ImportForm::SeedRaw => seed_raw(source, &name)?,
        ImportForm::Parquet => return parquet(args, signals),
        ImportForm::Guava => {
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

/// One column chunk's filter: a split-block-256 `xxh64` snapshot whose key encoding follows
/// the column's type.
fn parquet(args: &ImportArgs, signals: &Signals) -> CmdResult {
    let (Some(column), Some(row_group)) = (&args.column, args.row_group) else {
        return Err(Failure::usage(
            "--from parquet needs --column NAME and --row-group N: a file holds one filter per column chunk",
        ));
    };
    let limits = bloom_parquet::Limits {
        max_filter_bytes: args.limit.max_bytes,
        ..bloom_parquet::Limits::default()
    };
    let path = &args.input;
    let mut file = crate::commands::parquet::open(path, limits)?;
    let fail = |e| crate::commands::parquet::failure(path, e);
    let column = file.column(column).map_err(fail)?;
    let filter = file
        .filter(row_group, &column)
        .map_err(fail)?
        .ok_or_else(|| {
            fail(bloom_parquet::ParquetFileError::NoFilter {
                path: path.clone(),
                column: column.path.clone(),
                row_group,
            })
        })?;
    crate::warn(&format!(
        "column {:?} is {}: the snapshot's keys are {}",
        column.path,
        column.kind.name(),
        match column.kind {
            bloom_parquet::ColumnKind::ByteArray { utf8: true } =>
                "the strings as UTF-8 (key encoding utf8)",
            bloom_parquet::ColumnKind::ByteArray { utf8: false }
            | bloom_parquet::ColumnKind::FixedLenByteArray(_) =>
                "the values' bytes (key encoding bytes)",
            _ =>
                "the values' little-endian bytes, Parquet's plain encoding (key encoding bytes: give such keys as {\"key_hex\": ...} lines of --keys FILE --jsonl)",
        }
    ));
    let output = files::output(&args.output, !args.lock.no_wait)?;
    files::write_snapshot_bytes(&output, &filter.to_snapshot(0), signals)
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
