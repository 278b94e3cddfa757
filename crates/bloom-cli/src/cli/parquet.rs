//! The arguments of `bloom parquet`: its commands, their flags, and the limits on what is
//! read from the files.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::KeyInput;
use super::values::parse_size;

/// The `bloom parquet` commands: the split-block Bloom filters inside Parquet files.
#[derive(Subcommand)]
pub(crate) enum ParquetCommand {
    /// For each key and file, print `maybe<TAB>FILE<TAB>ROW-GROUPS<TAB>KEY` (the row groups
    /// that may hold the key, comma-separated) or `absent<TAB>FILE<TAB>-<TAB>KEY`. A row group
    /// without a filter for the column may hold any key: it is listed, and named on standard
    /// error.
    Check(ParquetCheckArgs),
    /// Print each column's Bloom filters: row group, rows, filter bytes (or none), estimated
    /// distinct values and false-positive rate.
    Inspect(ParquetInspectArgs),
}

/// What is read from the files.
#[derive(Args)]
pub(crate) struct ParquetLimits {
    /// Refuse footers (file metadata) larger than this (K, M, G suffixes).
    #[arg(long, value_name = "BYTES", default_value = "64M", value_parser = parse_size)]
    pub(crate) max_footer_bytes: u64,
    /// Refuse filters larger than this. The default is the most a Parquet writer makes.
    #[arg(long, value_name = "BYTES", default_value = "128M", value_parser = parse_size)]
    pub(crate) max_filter_bytes: u64,
    /// Read at most this many filter bytes in all, over every file (memory stays below it
    /// whatever the files' metadata claims).
    #[arg(long, value_name = "BYTES", default_value = "1G", value_parser = parse_size)]
    pub(crate) max_total_bytes: u64,
}

impl ParquetLimits {
    /// The limits of one file, given the filter bytes already read from the others.
    pub(crate) fn limits(&self, read: u64) -> bloom_parquet::Limits {
        bloom_parquet::Limits {
            max_footer_bytes: self.max_footer_bytes,
            max_filter_bytes: self.max_filter_bytes,
            max_total_filter_bytes: self.max_total_bytes.saturating_sub(read),
        }
    }
}

#[derive(Args)]
#[command(after_long_help = super::KEY_FILES)]
pub(crate) struct ParquetCheckArgs {
    /// Parquet files before --column (paths, not standard input: a footer is read from the
    /// file's end), keys after it (in addition to --keys). A key is a value of the column's
    /// type written as text: a string, an integer (INT32, INT64), a number (FLOAT, DOUBLE),
    /// true or false; with --hex, the bytes Parquet hashes (the plain encoding) in hex, for
    /// any type. Negative numbers are keys; put `--` before keys such as `-inf` that begin
    /// with a dash and are not numbers.
    #[arg(
        required = true,
        allow_negative_numbers = true,
        value_name = "FILE... --column NAME KEY"
    )]
    pub(crate) args: Vec<String>,
    /// The column: its dotted path, or its name if only one column has it. Files come
    /// before it, keys after.
    #[arg(long, value_name = "NAME")]
    pub(crate) column: String,
    #[command(flatten)]
    pub(crate) input: KeyInput,
    /// Keys are the hex of the bytes Parquet hashes (required for INT96).
    #[arg(long)]
    pub(crate) hex: bool,
    /// Print JSON Lines: `{"key": ..., "file": ..., "answer": "maybe"|"absent",
    /// "row_groups": [...], "unfiltered_row_groups": [...]}`.
    #[arg(long)]
    pub(crate) json: bool,
    /// Exit 4 if any key is absent from every file.
    #[arg(long)]
    pub(crate) exit_status: bool,
    #[command(flatten)]
    pub(crate) limits: ParquetLimits,
}

#[derive(Args)]
pub(crate) struct ParquetInspectArgs {
    /// Parquet files.
    #[arg(required = true, value_name = "FILE")]
    pub(crate) files: Vec<PathBuf>,
    /// Only this column (dotted path or unique name).
    #[arg(long, value_name = "NAME")]
    pub(crate) column: Option<String>,
    /// Print JSON Lines, one object per column chunk.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) limits: ParquetLimits,
}
