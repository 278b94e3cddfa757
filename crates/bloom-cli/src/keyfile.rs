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

    /// Calls `each` with every key and its line number, in order, as [`KeyReader::next_key`]
    /// gives them, until the input ends (`Ok(Ok(()))`), a line is bad (`Err`, and the reader
    /// is done) or `each` fails (`Ok(Err(_))`, the reader left just past that key's line).
    /// Plain lines that the reader's buffer holds whole (all but the first, which may start
    /// with a byte order mark, and those the buffer cuts) are lent from it: no copy, and no
    /// call per key but `each`.
    ///
    /// # Errors
    /// [`KeyFileError`], naming the line.
    pub fn for_each_key<E>(
        &mut self,
        mut each: impl FnMut(&[u8], u64) -> Result<(), E>,
    ) -> Result<Result<(), E>, KeyFileError> {
        loop {
            if self.done {
                return Ok(Ok(()));
            }
            if self.format == LineFormat::Plain && self.number > 0 {
                let buffered = match self.reader.fill_buf() {
                    Ok(buffered) => buffered,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        self.done = true;
                        return Err(e.into());
                    }
                };
                let mut taken = 0;
                let mut stopped = None;
                while let Some((line, end)) = buffered.get(taken..).and_then(whole_line) {
                    self.number += 1;
                    let key = line.strip_suffix(b"\r").unwrap_or(line);
                    if key.len() > self.max_key_bytes {
                        stopped = Some(Err(KeyFileError::TooLong {
                            line: self.number,
                            what: "key",
                            limit: self.max_key_bytes,
                        }));
                        break;
                    }
                    if end.nul {
                        stopped = Some(Err(KeyFileError::Nul { line: self.number }));
                        break;
                    }
                    taken += end.feed + 1;
                    if !key.is_empty()
                        && let Err(e) = each(key, self.number)
                    {
                        stopped = Some(Ok(e));
                        break;
                    }
                }
                self.reader.consume(taken);
                match stopped {
                    Some(Ok(failed)) => return Ok(Err(failed)),
                    Some(Err(bad)) => {
                        self.done = true;
                        return Err(bad);
                    }
                    None if taken > 0 => continue,
                    None => {}
                }
            }
            // A line the buffer cuts, the first line, a JSON line: read the general way.
            match self.next_key()? {
                Some((key, line)) => {
                    if let Err(failed) = each(key, line) {
                        return Ok(Err(failed));
                    }
                }
                None => return Ok(Ok(())),
            }
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
                    if find_byte(&self.line, 0).is_some() {
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

/// Where a line held whole in a buffer ends.
struct WholeLine {
    /// Where its line feed is.
    feed: usize,
    /// Whether it holds a NUL byte.
    nul: bool,
}

/// The first line of `buffered` (without its line feed) and where it ends, when its line feed
/// is there; one pass over it finds the line feed, unless a NUL comes first.
#[inline]
fn whole_line(buffered: &[u8]) -> Option<(&[u8], WholeLine)> {
    let stop = find_line_feed_or_nul(buffered)?;
    let nul = buffered.get(stop) == Some(&0);
    let feed = if nul {
        stop + find_byte(buffered.get(stop..)?, b'\n')?
    } else {
        stop
    };
    Some((buffered.get(..feed)?, WholeLine { feed, nul }))
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
        let (take, found) = match find_byte(available, b'\n') {
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

const ONES: u64 = u64::from_le_bytes([1; 8]);
const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);

/// The high bit of each byte of `x` that is zero, and perhaps of bytes above the lowest such:
/// the lowest bit it sets, if any, is in the first zero byte.
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// Where the first byte of `bytes` that `flags` flags in its word is (eight bytes at a time;
/// `flags` of a word flags its first such byte, and maybe others after it), or else the first
/// byte of the tail that `is` says is one.
fn find_by(bytes: &[u8], flags: impl Fn(u64) -> u64, is: impl Fn(u8) -> bool) -> Option<usize> {
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in &mut words {
        let found = flags(u64::from_le_bytes(word.try_into().unwrap_or([0; 8])));
        if found != 0 {
            return Some(at + (found.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let tail = words.remainder();
    tail.iter().position(|&b| is(b)).map(|i| at + i)
}

/// Where `byte` first is in `bytes`.
fn find_byte(bytes: &[u8], byte: u8) -> Option<usize> {
    let repeated = ONES * u64::from(byte);
    find_by(bytes, |x| zero_bytes(x ^ repeated), |b| b == byte)
}

/// Where the first line feed or NUL of `bytes` is.
fn find_line_feed_or_nul(bytes: &[u8]) -> Option<usize> {
    let feeds = ONES * u64::from(b'\n');
    find_by(
        bytes,
        |x| zero_bytes(x ^ feeds) | zero_bytes(x),
        |b| b == b'\n' || b == 0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `next_key` reads of `input`, one key at a time: the keys with their lines, then
    /// the error, if any.
    fn one_at_a_time(
        input: &[u8],
        format: LineFormat,
        max: usize,
    ) -> (Vec<(Vec<u8>, u64)>, String) {
        let mut reader = KeyReader::new(input, format, max);
        let mut keys = Vec::new();
        loop {
            match reader.next_key() {
                Ok(Some((key, line))) => keys.push((key.to_vec(), line)),
                Ok(None) => return (keys, String::new()),
                Err(e) => return (keys, e.to_string()),
            }
        }
    }

    /// `for_each_key` reads what `next_key` reads, whatever lines the reader's buffer cuts,
    /// and stops where its callback fails, just past that key.
    #[test]
    fn for_each_key_reads_as_next_key_does() {
        let inputs: [&[u8]; 9] = [
            b"\xEF\xBB\xBFalice\r\n\nbob\n\r\ncarol\r",
            b"a\nbb\nccc\n\n\ndddd\neeeee\nffffff\n",
            b"one\ntoo long a key\nthree\n",
            b"x\r\r\ny\rz\n\r",
            b"ok\nnul\0here\nafter\n",
            b"ok\nlong and nul\0 here\n",
            b"\"a\"\n{\"key_hex\": \"ff\"}\n\"b\nc\"\n",
            b"",
            b"last line without a feed",
        ];
        for input in inputs {
            for format in [LineFormat::Plain, LineFormat::Json] {
                let expected = one_at_a_time(input, format, 10);
                for capacity in [1, 2, 3, 5, 8, 13, 64] {
                    let buffered = io::BufReader::with_capacity(capacity, input);
                    let mut reader = KeyReader::new(buffered, format, 10);
                    let mut keys = Vec::new();
                    let outcome = reader.for_each_key(|key, line| {
                        keys.push((key.to_vec(), line));
                        Ok::<(), ()>(())
                    });
                    let error = match outcome {
                        Ok(Ok(())) => String::new(),
                        Ok(Err(())) => unreachable!(),
                        Err(e) => e.to_string(),
                    };
                    assert_eq!((keys, error), expected, "{input:?} {format:?} {capacity}");
                }
                // A callback that fails stops the reading there; the next key follows it.
                for at in 0..expected.0.len().saturating_sub(1) {
                    let mut reader = KeyReader::new(input, format, 10);
                    let stop = expected.0[at].1;
                    let stopped = reader
                        .for_each_key(|_, line| if line == stop { Err(line) } else { Ok(()) });
                    assert_eq!(stopped.unwrap(), Err(stop));
                    let next = reader.next_key().unwrap().map(|(k, l)| (k.to_vec(), l));
                    assert_eq!(next.as_ref(), expected.0.get(at + 1), "{input:?}");
                }
            }
        }
    }

    #[test]
    fn find_byte_finds_the_first() {
        for len in 0..40 {
            for at in 0..=len {
                let mut bytes = vec![b'a'; len];
                // Bytes that a borrow could mistake for the one sought, around it.
                for (i, b) in bytes.iter_mut().enumerate() {
                    *b = [b'a', 0x0b, 0x09, 0x8a, 0xff, 0x01][i % 6];
                }
                if let Some(b) = bytes.get_mut(at) {
                    *b = b'\n';
                }
                let expected = bytes.iter().position(|&b| b == b'\n');
                assert_eq!(find_byte(&bytes, b'\n'), expected, "{bytes:?}");
                if let Some(b) = bytes.get_mut(at) {
                    *b = 0;
                }
                let expected = bytes.iter().position(|&b| b == 0);
                assert_eq!(find_byte(&bytes, 0), expected, "{bytes:?}");
                let expected = bytes.iter().position(|&b| b == 0 || b == b'\n');
                assert_eq!(find_line_feed_or_nul(&bytes), expected, "{bytes:?}");
                if let Some(b) = bytes.get_mut(at / 2) {
                    *b = b'\n';
                }
                let expected = bytes.iter().position(|&b| b == 0 || b == b'\n');
                assert_eq!(find_line_feed_or_nul(&bytes), expected, "{bytes:?}");
            }
        }
    }
}
