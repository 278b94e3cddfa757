//! Reading keys from a file or standard input, streaming, with bounded memory.
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

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::{Path, PathBuf};

use crate::error::{CmdResult, Failure};

/// The default longest key: large enough for any real record id, small enough that an
/// endless line is refused quickly.
pub(crate) const DEFAULT_MAX_KEY_BYTES: usize = 64 << 10;

/// A JSON string escapes a byte in at most 6 characters (`\u0000`).
const JSON_EXPANSION: usize = 6;

/// How each line holds a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LineFormat {
    /// The line is the key.
    Plain,
    /// The line is a JSON string.
    Json,
}

/// Where keys come from.
#[derive(Clone, Debug)]
pub(crate) struct KeySource {
    /// A file, or `-` for standard input.
    pub(crate) path: PathBuf,
    pub(crate) format: LineFormat,
    pub(crate) max_key_bytes: usize,
}

impl KeySource {
    /// How errors name the source.
    pub(crate) fn name(&self) -> String {
        if self.path == Path::new("-") {
            "standard input".to_owned()
        } else {
            self.path.display().to_string()
        }
    }

    fn open(&self) -> CmdResult<Box<dyn BufRead>> {
        if self.path == Path::new("-") {
            return Ok(Box::new(BufReader::with_capacity(1 << 16, io::stdin())));
        }
        let file = File::open(&self.path).map_err(|e| {
            Failure::input(format!("cannot open key file {}: {e}", self.path.display()))
        })?;
        Ok(Box::new(BufReader::with_capacity(1 << 16, file)))
    }

    /// Calls `each` with every key (as bytes) and its 1-based line number, in order. Stops at
    /// the first bad line with an error that names it.
    pub(crate) fn for_each(&self, mut each: impl FnMut(&[u8], u64) -> CmdResult) -> CmdResult<u64> {
        let source = self.name();
        let mut reader = self.open()?;
        let line_limit = match self.format {
            LineFormat::Plain => self.max_key_bytes,
            // Room for the escapes of the longest key, its quotes, and an object's field name.
            LineFormat::Json => self
                .max_key_bytes
                .saturating_mul(JSON_EXPANSION)
                .saturating_add(32),
        };
        let what = match self.format {
            LineFormat::Plain => "key",
            LineFormat::Json => "line",
        };
        let mut line = Vec::new();
        let mut number = 0u64;
        let mut keys = 0u64;
        loop {
            line.clear();
            // Room for a byte order mark and a CR on top of the key itself.
            let ended = read_line(&mut reader, &mut line, line_limit.saturating_add(4))
                .map_err(|e| Failure::input(format!("cannot read {source}: {e}")))?;
            let line_too_long = matches!(ended, LineEnd::TooLong);
            if matches!(ended, LineEnd::Eof) && line.is_empty() {
                return Ok(keys);
            }
            number += 1;
            if line_too_long {
                return Err(Failure::input(format!(
                    "{source} line {number}: {what} longer than {line_limit} bytes; raise --max-key-bytes if that is really a key"
                )));
            }
            if number == 1 && line.starts_with(b"\xEF\xBB\xBF") {
                line.drain(..3);
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.len() > line_limit {
                return Err(Failure::input(format!(
                    "{source} line {number}: {what} longer than {line_limit} bytes; raise --max-key-bytes if that is really a key"
                )));
            }
            if line.is_empty() {
                if matches!(ended, LineEnd::Eof) {
                    return Ok(keys);
                }
                continue;
            }
            match self.format {
                LineFormat::Plain => {
                    if line.contains(&0) {
                        return Err(Failure::input(format!(
                            "{source} line {number}: contains a NUL byte; this looks like a binary or UTF-16 file (key files are UTF-8 or bytes, one key per line; use --jsonl for keys with control characters)"
                        )));
                    }
                    each(&line, number)?;
                }
                LineFormat::Json => {
                    let key = json_key(&line).map_err(|e| {
                        Failure::input(format!(
                            "{source} line {number}: {e}; with --jsonl each line is a JSON string such as \"key\", or an object {{\"key_hex\": \"6b6579\"}} for keys that are not UTF-8"
                        ))
                    })?;
                    if key.len() > self.max_key_bytes {
                        return Err(Failure::input(format!(
                            "{source} line {number}: key longer than {} bytes; raise --max-key-bytes if that is really a key",
                            self.max_key_bytes
                        )));
                    }
                    each(&key, number)?;
                }
            }
            keys += 1;
            if matches!(ended, LineEnd::Eof) {
                return Ok(keys);
            }
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
fn read_line(reader: &mut dyn BufRead, line: &mut Vec<u8>, limit: usize) -> io::Result<LineEnd> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_of(input: &[u8], format: LineFormat, max: usize) -> Result<Vec<Vec<u8>>, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys");
        std::fs::write(&path, input).unwrap();
        let source = KeySource {
            path,
            format,
            max_key_bytes: max,
        };
        let mut keys = Vec::new();
        source
            .for_each(|k, _| {
                keys.push(k.to_vec());
                Ok(())
            })
            .map_err(|e| format!("{e:?}"))?;
        Ok(keys)
    }

    fn plain(input: &[u8]) -> Vec<Vec<u8>> {
        keys_of(input, LineFormat::Plain, 100).unwrap()
    }

    #[test]
    fn the_grammar() {
        let ab = vec![b"a".to_vec(), b"b".to_vec()];
        for input in [
            &b"a\nb\n"[..],
            b"a\nb",
            b"a\r\nb\r\n",
            b"a\r\nb\r",
            b"\xEF\xBB\xBFa\nb",
            b"\n\na\n\n\nb\n\n",
            b"a\r\n\r\nb",
        ] {
            assert_eq!(plain(input), ab, "{input:?}");
        }
        assert_eq!(plain(b"a\rb\n"), vec![b"a\rb".to_vec()]);
        assert_eq!(plain(b" a \n"), vec![b" a ".to_vec()]);
        assert!(plain(b"").is_empty());
        assert!(plain(b"\xEF\xBB\xBF").is_empty());
        assert!(
            keys_of(b"a\nb\0c\n", LineFormat::Plain, 100)
                .unwrap_err()
                .contains("line 2")
        );
        assert_eq!(
            keys_of(b"\"\"\n\"a\\nb\\u0000\"\r\n", LineFormat::Json, 100).unwrap(),
            vec![b"".to_vec(), b"a\nb\0".to_vec()]
        );
        assert_eq!(
            keys_of(b"{\"key_hex\": \"fffe00\"}\n", LineFormat::Json, 100).unwrap(),
            vec![vec![0xff, 0xfe, 0]]
        );
        assert!(keys_of(b"{\"key_hex\": \"f\"}\n", LineFormat::Json, 100).is_err());
        assert!(keys_of(b"{\"other\": 1}\n", LineFormat::Json, 100).is_err());
        // Huge limits do not overflow.
        assert!(
            !keys_of(b"a\n", LineFormat::Json, usize::MAX)
                .unwrap_err()
                .is_empty()
        );
        assert_eq!(
            keys_of(b"a\n", LineFormat::Plain, usize::MAX).unwrap(),
            vec![b"a".to_vec()]
        );
    }

    #[test]
    fn long_keys_are_refused_by_line_without_reading_them_whole() {
        let mut input = vec![b'x'; 10];
        input.push(b'\n');
        assert_eq!(keys_of(&input, LineFormat::Plain, 10).unwrap().len(), 1);
        let mut crlf = vec![b'x'; 10];
        crlf.extend_from_slice(b"\r\n");
        assert_eq!(
            keys_of(&crlf, LineFormat::Plain, 10).unwrap(),
            vec![vec![b'x'; 10]]
        );
        let mut long = b"ok\n".to_vec();
        long.extend(vec![b'y'; 11]);
        let err = keys_of(&long, LineFormat::Plain, 10).unwrap_err();
        assert!(
            err.contains("line 2") && err.contains("longer than 10"),
            "{err}"
        );
        long.push(b'\n');
        assert!(keys_of(&long, LineFormat::Plain, 10).is_err());
        let json = format!("\"{}\"\n", "z".repeat(11));
        assert!(keys_of(json.as_bytes(), LineFormat::Json, 10).is_err());
    }
}
