//! Reading keys from any byte stream, one line at a time, with bounded memory.
//!
//! The key-file grammar (also in `--help` and the README):
//!
//! - The input is bytes. A UTF-8 byte order mark (`EF BB BF`) at the very start is not part
//!   of the first key.
//! - Keys are separated by line feeds (LF). A carriage return right before a line feed, or
//!   at the very end of the input, belongs to the line ending (CRLF files read like LF
//!   files). The last line needs no line feed.
//! - Empty lines are skipped, so a blank line never becomes the empty key. With `--jsonl`,
//!   every non-empty line is one JSON string (`"key"`), which can hold any text key: empty,
//!   with line breaks, tabs or NUL; or `{"key_hex": "..."}` for a key that is not UTF-8 (as
//!   `check --json` prints such keys).
//! - Outside `--jsonl`, a NUL byte is refused: it means a binary or UTF-16 file, not a list
//!   of keys.
//! - A key (and, with `--jsonl`, a line) longer than `--max-key-bytes` (default 64 KiB) is
//!   refused, naming its line, before more of it is read.

use std::io::{self, BufRead};

/// A JSON string escapes a byte in at most 6 characters (`\u0000`).
const JSON_EXPANSION: usize = 6;

/// How each line holds a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineFormat {
    /// The line is the key.
    Plain,
    /// The line is a JSON string, or `{"key_hex": "..."}`.
    Json,
}

/// A bad line of a key file; every variant names the line (from 1).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyFileError {
    /// The input could not be read.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A key (or, with JSON lines, a line) is longer than the limit; the rest of it was not
    /// read.
    #[error(
        "line {line}: {what} longer than {limit} bytes; raise --max-key-bytes if that is really a key"
    )]
    TooLong {
        /// The line.
        line: u64,
        /// `key` or `line`.
        what: &'static str,
        /// The limit in bytes.
        limit: usize,
    },
    /// A plain line holds a NUL byte.
    #[error(
        "line {line}: contains a NUL byte; this looks like a binary or UTF-16 file (key files are UTF-8 or bytes, one key per line; use --jsonl for keys with control characters)"
    )]
    Nul {
        /// The line.
        line: u64,
    },
    /// A JSON line is not a JSON string or a `key_hex` object.
    #[error(
        "line {line}: {detail}; with --jsonl each line is a JSON string such as \"key\", or an object {{\"key_hex\": \"6b6579\"}} for keys that are not UTF-8"
    )]
    Json {
        /// The line.
        line: u64,
        /// What is wrong with it.
        detail: String,
    },
}

/// Reads keys from `reader`, one line at a time: never more than the limit (and a few bytes)
/// of a line is held, whatever the input.
#[derive(Debug)]
pub struct KeyReader<R> {
    reader: R,
    format: LineFormat,
    max_key_bytes: usize,
    line: Vec<u8>,
    key: Vec<u8>,
    number: u64,
    done: bool,
}

impl<R: BufRead> KeyReader<R> {
    /// A reader of `format` lines whose keys are at most `max_key_bytes` long.
    pub fn new(reader: R, format: LineFormat, max_key_bytes: usize) -> Self {
        Self {
            reader,
            format,
            max_key_bytes,
            line: Vec::new(),
            key: Vec::new(),
            number: 0,
            done: false,
        }
    }

    /// The longest line read, by format: the key itself, or room for a key's JSON escapes.
    fn line_limit(&self) -> usize {
        match self.format {
            LineFormat::Plain => self.max_key_bytes,
            // Room for the escapes of the longest key, its quotes, and an object's field name.
            LineFormat::Json => self
                .max_key_bytes
                .saturating_mul(JSON_EXPANSION)
                .saturating_add(32),
        }
    }

    /// The next key and its line number, `None` at the end of the input. After an error the
    /// reader is done (it returns `None`).
    ///
    /// # Errors
    /// [`KeyFileError`], naming the line.
    pub fn next_key(&mut self) -> Result<Option<(&[u8], u64)>, KeyFileError> {
        if self.done {
            return Ok(None);
        }
        let result = self.advance();
        if !matches!(result, Ok(true)) {
            self.done = true;
        }
        match result {
            Ok(true) => Ok(Some((
                match self.format {
                    LineFormat::Plain => &self.line,
                    LineFormat::Json => &self.key,
                },
                self.number,
            ))),
            Ok(false) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads up to the next key: `true` when there is one (in `line` or `key`).
    fn advance(&mut self) -> Result<bool, KeyFileError> {
        let line_limit = self.line_limit();
        let what = match self.format {
            LineFormat::Plain => "key",
            LineFormat::Json => "line",
        };
        loop {
            self.line.clear();
            // Room for a byte order mark and a CR on top of the key itself.
            let ended = read_line(
                &mut self.reader,
                &mut self.line,
                line_limit.saturating_add(4),
            )?;
            if matches!(ended, LineEnd::Eof) && self.line.is_empty() {
                return Ok(false);
            }
            self.number += 1;
            let line = self.number;
            let too_long = KeyFileError::TooLong {
                line,
                what,
                limit: line_limit,
            };
            if matches!(ended, LineEnd::TooLong) {
                return Err(too_long);
            }
            if line == 1 && self.line.starts_with(b"\xEF\xBB\xBF") {
                self.line.drain(..3);
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            if self.line.len() > line_limit {
                return Err(too_long);
            }
            if self.line.is_empty() {
                if matches!(ended, LineEnd::Eof) {
                    return Ok(false);
                }
                continue;
            }
            match self.format {
                LineFormat::Plain => {
                    if self.line.contains(&0) {
                        return Err(KeyFileError::Nul { line });
                    }
                }
                LineFormat::Json => {
                    self.key = json_key(&self.line)
                        .map_err(|detail| KeyFileError::Json { line, detail })?;
                    if self.key.len() > self.max_key_bytes {
                        return Err(KeyFileError::TooLong {
                            line,
                            what: "key",
                            limit: self.max_key_bytes,
                        });
                    }
                }
            }
            return Ok(true);
        }
    }
}

/// The key a `--jsonl` line holds: a JSON string, or `{"key_hex": "..."}` for bytes that are
/// not UTF-8 (what `check --json` prints for them).
fn json_key(line: &[u8]) -> Result<Vec<u8>, String> {
    let value: serde_json::Value =
        serde_json::from_slice(line).map_err(|e| format!("not JSON ({e})"))?;
    let key_hex = match value {
        serde_json::Value::String(text) => return Ok(text.into_bytes()),
        serde_json::Value::Object(object) if object.len() == 1 => match object.get("key_hex") {
            Some(serde_json::Value::String(hex)) => hex.clone(),
            _ => return Err("an object other than {\"key_hex\": \"...\"}".into()),
        },
        _ => return Err("not a JSON string or key_hex object".into()),
    };
    bloom_format::unhex(&key_hex)
        .ok_or_else(|| format!("key_hex {key_hex:?} is not an even number of hex digits"))
}

/// How a call to [`read_line`] ended.
enum LineEnd {
    /// At a line feed (not stored).
    Newline,
    /// At the end of the input.
    Eof,
    /// The line passed the limit; the rest of it was not read.
    TooLong,
}

/// Reads one line into `line` (without its LF), never holding more than `limit` + 1 bytes of
/// it.
fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>, limit: usize) -> io::Result<LineEnd> {
    loop {
        let available = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(LineEnd::Eof);
        }
        let (take, found) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (at, true),
            None => (available.len(), false),
        };
        if line.len().saturating_add(take) > limit.saturating_add(1) {
            return Ok(LineEnd::TooLong);
        }
        line.extend_from_slice(available.get(..take).unwrap_or_default());
        reader.consume(take + usize::from(found));
        if found {
            return Ok(LineEnd::Newline);
        }
    }
}
