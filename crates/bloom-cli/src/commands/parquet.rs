//! `bloom parquet`: which row groups of Parquet files may hold a key, from the files' own
//! split-block Bloom filters; and what filters a file has.

use std::path::{Path, PathBuf};

use bloom_core::{BloomFilter, Filter};
use bloom_parquet::{Column, ColumnKind, ParquetFile, ParquetFileError};
use serde_json::{Value, json};

use crate::cli::{ParquetCheckArgs, ParquetCommand, ParquetInspectArgs};
use crate::error::{CmdResult, Exit, Failure};
use crate::files;
use crate::output::{Out, escape_key, json_key, number, show, written_or_closed};

pub(crate) fn run(command: &ParquetCommand, matches: &clap::ArgMatches) -> CmdResult<u8> {
    match command {
        ParquetCommand::Check(args) => {
            let split = matches
                .subcommand_matches("parquet")
                .and_then(|m| m.subcommand_matches("check"))
                .map_or(args.args.len(), files_before_column);
            check(args, split)
        }
        ParquetCommand::Inspect(args) => inspect(args).map(|()| 0),
    }
}

/// How many of the positional arguments come before `--column`: the files.
fn files_before_column(matches: &clap::ArgMatches) -> usize {
    let Some(column) = matches.index_of("column") else {
        return 0;
    };
    matches
        .indices_of("args")
        .map_or(0, |indices| indices.filter(|&i| i < column).count())
}

/// A failure reading a Parquet file: exit 3 for the environment (missing, unreadable, out
/// of memory), 1 for the file itself.
pub(crate) fn failure(path: &Path, error: ParquetFileError) -> Failure {
    match error {
        ParquetFileError::Open(bloom_format::ReadError::NotARegularFile { kind, .. }) => {
            Failure::environment(format!(
                "cannot read {}: it is {kind}; a Parquet file is a regular file",
                files::shown(path)
            ))
        }
        ParquetFileError::Open(e) => files::read_failure(path, &e),
        e @ (ParquetFileError::Io { .. } | ParquetFileError::Alloc { .. }) => {
            Failure::environment(e)
        }
        e => Failure::input(e),
    }
}

/// Opens a Parquet file given as a path (standard input cannot be read from its end).
pub(crate) fn open(path: &Path, limits: bloom_parquet::Limits) -> CmdResult<ParquetFile> {
    if files::is_stdio(path) {
        return Err(Failure::usage(
            "a Parquet file is read from its end (its footer): give its path, not -",
        ));
    }
    ParquetFile::open(path, limits).map_err(|e| failure(path, e))
}

/// One file's filters of the column.
struct FileFilters {
    path: PathBuf,
    kind: ColumnKind,
    filters: Vec<Option<BloomFilter>>,
}

fn check(args: &ParquetCheckArgs, split: usize) -> CmdResult<u8> {
    let (paths, keys) = args.args.split_at(split.min(args.args.len()));
    if paths.is_empty() {
        return Err(Failure::usage(
            "no Parquet file given: files come before --column NAME, keys after it",
        ));
    }
    if keys.is_empty() && args.input.path.is_none() {
        return Err(Failure::usage(
            "no keys given: pass them after --column NAME, or --keys PATH (- for standard input)",
        ));
    }
    crate::progress::reports_on_stdout();
    let mut loaded = Vec::with_capacity(paths.len());
    // Every file's filters stay in memory while keys stream: one budget for all of them.
    let mut read = 0u64;
    for path in paths.iter().map(PathBuf::from) {
        let mut file = open(&path, args.limits.limits(read))?;
        let column = file.column(&args.column).map_err(|e| failure(&path, e))?;
        let filters = file.filters(&column).map_err(|e| failure(&path, e))?;
        read = read.saturating_add(file.filter_bytes_read());
        warn_unfiltered(&path, &column, &filters);
        loaded.push(FileFilters {
            path,
            kind: column.kind,
            filters,
        });
    }
    let mut out = Out::new();
    let mut any_absent = false;
    // Standard output closed under `--exit-status`: the keys are still answered, unprinted.
    let mut closed = false;
    let mut answer = |key: &[u8], line: Option<u64>| -> CmdResult {
        let mut everywhere_absent = true;
        for file in &loaded {
            let value = value_of(file.kind, key, args.hex).map_err(|e| match line {
                Some(n) => Failure::input(format!("{} line {n}: {e}", key_source(args))),
                None => Failure::input(format!("key {}: {e}", escape_key(key))),
            })?;
            // Every filter of the column has the column's key encoding: the value is encoded
            // once per file, not once per row group.
            let encoded = file
                .kind
                .key_encoding()
                .encode_bytes(&value)
                .map_err(|e| Failure::input(format!("key {}: {e}", escape_key(key))))?;
            let (mut maybe, mut unfiltered) = (Vec::new(), Vec::new());
            for (rg, filter) in file.filters.iter().enumerate() {
                match filter {
                    Some(filter) if filter.contains(&encoded) => maybe.push(rg),
                    Some(_) => {}
                    None => unfiltered.push(rg),
                }
            }
            let absent = maybe.is_empty() && unfiltered.is_empty();
            everywhere_absent &= absent;
            let shown = files::shown(&file.path);
            if args.json {
                let mut object = serde_json::Map::new();
                json_key(key, &mut object);
                object.insert("file".into(), Value::from(shown));
                object.insert(
                    "answer".into(),
                    Value::from(if absent { "absent" } else { "maybe" }),
                );
                object.insert("row_groups".into(), json!(maybe));
                object.insert("unfiltered_row_groups".into(), json!(unfiltered));
                if !closed {
                    let written = out.json_line(&Value::Object(object));
                    written_or_closed(written, args.exit_status, &mut closed)?;
                }
            } else if !closed {
                let mut groups: Vec<usize> = maybe.into_iter().chain(unfiltered).collect();
                groups.sort_unstable();
                let groups = if groups.is_empty() {
                    "-".to_owned()
                } else {
                    groups
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let verdict = if absent { "absent" } else { "maybe" };
                let written = out.text(&format!(
                    "{verdict}\t{}\t{groups}\t{}\n",
                    escape_key(shown.as_bytes()),
                    escape_key(key)
                ));
                written_or_closed(written, args.exit_status, &mut closed)?;
            }
        }
        any_absent |= everywhere_absent;
        Ok(())
    };
    for key in keys {
        answer(key.as_bytes(), None)?;
    }
    if let Some(source) = args.input.source() {
        source.for_each(|key, line| answer(key, Some(line)))?;
    }
    if !closed {
        let flushed = out.flush();
        written_or_closed(flushed, args.exit_status, &mut closed)?;
    }
    Ok(if args.exit_status && any_absent {
        Exit::Absent as u8
    } else {
        0
    })
}

fn key_source(args: &ParquetCheckArgs) -> String {
    args.input.source().map(|s| s.name()).unwrap_or_default()
}

/// The bytes Parquet hashes for a key given as text (or as hex with `--hex`).
fn value_of(kind: ColumnKind, key: &[u8], hex: bool) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(key).map_err(|_| {
        "a key of a Parquet column is text (or hex with --hex); this one is not UTF-8".to_owned()
    })?;
    if hex {
        kind.encode_hex(text)
    } else {
        kind.encode_text(text)
    }
    .map_err(|e| format!("{e} (column type {})", kind.name()))
}

/// Names the row groups without a filter: they may hold any key.
fn warn_unfiltered(path: &Path, column: &Column, filters: &[Option<BloomFilter>]) {
    let missing: Vec<String> = filters
        .iter()
        .enumerate()
        .filter(|(_, f)| f.is_none())
        .map(|(rg, _)| rg.to_string())
        .collect();
    if !missing.is_empty() {
        crate::warn(&format!(
            "warning: {}: row groups {} have no Bloom filter for column {:?}: they may hold any key",
            files::shown(path),
            missing.join(", "),
            column.path
        ));
    }
}

fn inspect(args: &ParquetInspectArgs) -> CmdResult {
    let mut out = Out::new();
    for path in &args.files {
        // One filter at a time is held; the budget bounds the reading.
        let mut file = open(path, args.limits.limits(0))?;
        let columns = match &args.column {
            Some(name) => vec![file.column(name).map_err(|e| failure(path, e))?],
            None => file
                .column_paths()
                .iter()
                .map(|name| file.column(name))
                .collect::<Result<_, _>>()
                .map_err(|e| failure(path, e))?,
        };
        let shown = files::shown(path);
        for column in columns {
            for rg in 0..file.row_groups() {
                let rows = file.rows(rg);
                let filter = file.filter(rg, &column).map_err(|e| failure(path, e))?;
                let described = filter.as_ref().map(|f| {
                    (
                        f.config().bits() / 8,
                        f.items_inserted(),
                        f.estimated_false_positive_rate(),
                    )
                });
                if args.json {
                    let mut object = json!({
                        "file": shown,
                        "column": column.path,
                        "type": column.kind.name(),
                        "key_encoding": column.kind.key_encoding().name(),
                        "row_group": rg,
                        "rows": rows,
                        "filter_bytes": Value::Null,
                    });
                    if let Some((bytes, items, fpr)) = described {
                        object["filter_bytes"] = json!(bytes);
                        object["estimated_distinct_values"] = json!(items);
                        object["estimated_false_positive_rate"] = number(fpr);
                    }
                    out.json_line(&object)?;
                } else {
                    let filter = match described {
                        Some((bytes, items, fpr)) => format!(
                            "{bytes} bytes\t~{items} distinct values\tfalse-positive rate {}",
                            show(fpr)
                        ),
                        None => "no filter".to_owned(),
                    };
                    out.text(&format!(
                        "{}\t{}\t{}\trow group {rg}\t{rows} rows\t{filter}\n",
                        escape_key(shown.as_bytes()),
                        escape_key(column.path.as_bytes()),
                        column.kind.name()
                    ))?;
                }
            }
        }
    }
    out.flush()
}
