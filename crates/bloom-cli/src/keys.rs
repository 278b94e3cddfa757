//! Reading keys from files or standard input, one per line or one JSON string per line,
//! streaming, so that memory stays at one line no matter how many keys there are.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use crate::Failure;

/// How each line holds a key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum LineFormat {
    /// The line is the key; `\n` or `\r\n` is not part of it.
    Plain,
    /// The line is a JSON string.
    Json,
}

/// Opens `path` (`-` for standard input).
pub(crate) fn open(path: &Path) -> Result<Box<dyn BufRead>, Failure> {
    if path == Path::new("-") {
        return Ok(Box::new(BufReader::new(io::stdin())));
    }
    let file = File::open(path)
        .map_err(|e| Failure::new(format!("cannot open key file {}: {e}", path.display())))?;
    Ok(Box::new(BufReader::with_capacity(1 << 16, file)))
}

/// Calls `each` with every key (as bytes) and its 1-based line number. Stops at the first bad
/// line with an error that names it.
pub(crate) fn for_each(
    mut reader: impl BufRead,
    source: &str,
    format: LineFormat,
    mut each: impl FnMut(&[u8], u64) -> Result<(), Failure>,
) -> Result<u64, Failure> {
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        let read = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| Failure::new(format!("cannot read {source}: {e}")))?;
        if read == 0 {
            return Ok(number);
        }
        number += 1;
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        match format {
            LineFormat::Plain => each(&line, number)?,
            LineFormat::Json => {
                let key: String = serde_json::from_slice(&line).map_err(|e| {
                    Failure::new(format!(
                        "{source} line {number}: not a JSON string ({e}); with --jsonl each line must be a JSON string such as \"key\""
                    ))
                })?;
                each(key.as_bytes(), number)?;
            }
        }
    }
}
