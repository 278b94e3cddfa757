//! Guava's `BloomFilter.writeTo` streams in and out, for every binding: [`from_guava`] and
//! [`to_guava`], as `bloom import --from guava` and `bloom export --to guava` do.

use bloom_core::{AnyFilter, Filter};
use bloom_format::{DecodeOptions, GuavaError, GuavaFunnel};

use crate::error::{Error, ErrorKind};
use crate::snapshots::Source;

/// A Guava error, classified.
fn guava_error(e: &GuavaError) -> Error {
    let kind = match e {
        GuavaError::OverLimit { .. } => ErrorKind::TooLarge,
        GuavaError::Alloc { .. } => ErrorKind::OutOfMemory,
        GuavaError::Incompatible { .. } => ErrorKind::InvalidArgument,
        GuavaError::Io(_) => ErrorKind::Io,
        _ => ErrorKind::Corrupt,
    };
    Error::new(kind, e.to_string())
}

/// The funnel named `utf8` (`Funnels.stringFunnel(UTF_8)`), `chars`
/// (`Funnels.unencodedCharsFunnel()`) or `bytes` (`Funnels.byteArrayFunnel()`, and the
/// integer and long funnels over little-endian bytes).
///
/// # Errors
/// [`ErrorKind::InvalidArgument`] for another name.
pub fn funnel_named(name: &str) -> Result<GuavaFunnel, Error> {
    match name {
        "utf8" => Ok(GuavaFunnel::Utf8),
        "chars" => Ok(GuavaFunnel::Chars),
        "bytes" => Ok(GuavaFunnel::Bytes),
        other => Err(Error::invalid(format!(
            "unknown Guava funnel {other:?}; expected one of: utf8, chars, bytes (the stream does not record it: use the JVM side's)"
        ))),
    }
}

/// The filter a Guava stream holds, its keys hashed as `funnel` turns them into bytes.
/// Strict and bounded as `bloom_format::import_guava` is: a bit array over
/// `max_payload_bytes` (0: the default, 1 GiB) is refused before anything is allocated.
///
/// # Errors
/// `Io`, `Corrupt` (a malformed or truncated stream), `TooLarge`, `OutOfMemory`.
pub fn from_guava(
    source: Source<'_>,
    funnel: GuavaFunnel,
    max_payload_bytes: u64,
) -> Result<AnyFilter, Error> {
    let options = DecodeOptions::with_max_payload_len(crate::payload_limit(max_payload_bytes));
    let snapshot = match source {
        Source::Path(path) => {
            let file = bloom_format::open_regular_file(path).map_err(|e| source.read_error(&e))?;
            bloom_format::import_guava(std::io::BufReader::new(file), funnel, &options)
                .map_err(|e| source.about(guava_error(&e)))?
        }
        Source::Bytes(bytes) => {
            bloom_format::import_guava(bytes, funnel, &options).map_err(|e| guava_error(&e))?
        }
    };
    AnyFilter::from_snapshot(&snapshot).map_err(|e| Error::load(&e))
}

/// The Guava stream of a filter of Guava's rules (`guava-mitz32` or `guava-mitz64`, the standard
/// layout, an encoding a Guava funnel has): what the JVM's `BloomFilter.readFrom` reads.
///
/// # Errors
/// `InvalidArgument` for a filter Guava cannot represent (the message says which field).
pub fn to_guava(filter: &AnyFilter) -> Result<Vec<u8>, Error> {
    let AnyFilter::Plain(_) = filter else {
        return Err(Error::invalid(format!(
            "a {} filter has no Guava form; Guava streams hold plain filters of its rules",
            filter.kind()
        )));
    };
    let mut out = Vec::new();
    bloom_format::export_guava(&filter.to_snapshot(0), &mut out).map_err(|e| guava_error(&e))?;
    Ok(out)
}
