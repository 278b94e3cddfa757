//! Standard output and how values are shown: keys escaped so that one answer is one line,
//! numbers formatted the same in text and JSON.

use std::io::{self, BufWriter, Write};

use bloom_core::Layout;
use bloom_format::{KeyEncodingId, LayoutId, PositionRuleId};
use serde_json::{Value, json};

use crate::error::{CmdResult, Failure};

/// Buffered standard output whose errors become [`Failure`]s (a closed pipe is quiet).
pub(crate) struct Out(BufWriter<io::StdoutLock<'static>>);

impl Out {
    pub(crate) fn new() -> Self {
        Self(BufWriter::with_capacity(1 << 18, io::stdout().lock()))
    }

    pub(crate) fn bytes(&mut self, bytes: &[u8]) -> CmdResult {
        self.0.write_all(bytes).map_err(|e| Failure::stdout(&e))
    }

    pub(crate) fn text(&mut self, text: &str) -> CmdResult {
        self.bytes(text.as_bytes())
    }

    /// One complete JSON value and a newline.
    pub(crate) fn json_line(&mut self, value: &Value) -> CmdResult {
        serde_json::to_writer(&mut self.0, value)
            .map_err(|e| Failure::stdout(&io::Error::from(e)))?;
        self.bytes(b"\n")
    }

    pub(crate) fn flush(&mut self) -> CmdResult {
        self.0.flush().map_err(|e| Failure::stdout(&e))
    }
}

/// A key for text output, where one answer is one line: backslash, control characters and
/// bytes that are not UTF-8 are written as escapes (`\\`, `\t`, `\r`, `\n`, `\xNN`), so
/// a key can never break the line or the column. `--json` gives keys exactly.
pub(crate) fn escape_key(key: &[u8]) -> String {
    let mut out = String::with_capacity(key.len());
    for chunk in key.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                '\n' => out.push_str("\\n"),
                // Line and paragraph separators end lines for some readers.
                '\u{2028}' => out.push_str("\\u{2028}"),
                '\u{2029}' => out.push_str("\\u{2029}"),
                c if c.is_control() => {
                    for unit in c.to_string().bytes() {
                        out.push_str(&format!("\\x{unit:02x}"));
                    }
                }
                c => out.push(c),
            }
        }
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

/// A key for JSON output: `{"key": text}` when it is UTF-8, `{"key_hex": hex}` otherwise.
pub(crate) fn json_key(key: &[u8], object: &mut serde_json::Map<String, Value>) {
    match std::str::from_utf8(key) {
        Ok(text) => {
            object.insert("key".into(), Value::from(text));
        }
        Err(_) => {
            object.insert("key_hex".into(), Value::from(bloom_format::hex(key)));
        }
    }
}

/// A measured or estimated number, rounded to 6 significant digits: the same digits in the
/// text output and the JSON output (`0.010039`, `8.6e-9`, never a 300-digit decimal).
pub(crate) fn number(x: f64) -> Value {
    if !x.is_finite() || x == 0.0 {
        return Value::from(if x.is_finite() { 0.0 } else { x });
    }
    // The double nearest to the 6-digit decimal, which prints back as that decimal.
    Value::from(format!("{x:.5e}").parse::<f64>().unwrap_or(x))
}

/// [`number`] as text: the same digits as the JSON output (`0.0` for zero, as JSON has it).
pub(crate) fn show(x: f64) -> String {
    number(x).to_string()
}

/// Prints the answers of `check` (text, or JSON Lines with `--json`) and remembers whether
/// any key was absent.
pub(crate) struct Answers {
    out: Out,
    json: bool,
    any_absent: bool,
    /// Whether every key is answered even once standard output is closed: the exit status
    /// (`--exit-status`) is then the verdict on every key, as with an open output.
    every_key: bool,
    /// Standard output was closed: nothing more is written.
    closed: bool,
    /// The lines of the answers being written, reused.
    lines: Vec<u8>,
}

impl Answers {
    pub(crate) fn new(json: bool) -> Self {
        Self {
            out: Out::new(),
            json,
            any_absent: false,
            every_key: false,
            closed: false,
            lines: Vec::new(),
        }
    }

    /// Answers every key even once standard output is closed (for `--exit-status`: `bloom
    /// check … --exit-status | head -1` still exits 4 when a key is absent).
    pub(crate) fn every_key(mut self, every_key: bool) -> Self {
        self.every_key = every_key;
        self
    }

    /// `maybe<TAB>KEY` or `absent<TAB>KEY` (the key escaped), or one JSON object.
    pub(crate) fn answer(&mut self, key: &[u8], maybe: bool) -> CmdResult {
        self.answer_all([key], [maybe])
    }

    /// [`Answers::answer`] for each key with its answer, in order, written in one piece.
    pub(crate) fn answer_all<'k>(
        &mut self,
        keys: impl IntoIterator<Item = &'k [u8]>,
        maybe: impl IntoIterator<Item = bool>,
    ) -> CmdResult {
        let mut lines = std::mem::take(&mut self.lines);
        lines.clear();
        let (mut keys, mut maybe) = (keys.into_iter(), maybe.into_iter());
        loop {
            let (key, maybe) = match (keys.next(), maybe.next()) {
                (Some(key), Some(maybe)) => (key, maybe),
                (None, None) => break,
                // Never a key without its line: a count that differs is a fault, reported.
                _ => {
                    self.lines = lines;
                    return Err(Failure::environment(
                        "internal error: a batch came back with a different number of answers than keys; no answer was printed for it",
                    ));
                }
            };
            self.any_absent |= !maybe;
            if !self.closed {
                if self.json {
                    json_answer(&mut lines, key, maybe);
                } else {
                    text_answer(&mut lines, key, maybe);
                }
            }
        }
        let written = if self.closed {
            Ok(())
        } else {
            self.out.bytes(&lines)
        };
        self.lines = lines;
        self.closed_or(written)
    }

    /// `written`, or nothing once output closed when every key is answered.
    fn closed_or(&mut self, written: CmdResult) -> CmdResult {
        written_or_closed(written, self.every_key, &mut self.closed)
    }

    /// Flushes; returns whether any key was absent.
    pub(crate) fn finish(mut self) -> CmdResult<bool> {
        if !self.closed {
            let flushed = self.out.flush();
            self.closed_or(flushed)?;
        }
        Ok(self.any_absent)
    }
}

/// Appends `maybe<TAB>KEY` or `absent<TAB>KEY` (the key escaped) and a newline to `lines`.
fn text_answer(lines: &mut Vec<u8>, key: &[u8], maybe: bool) {
    // Eight bytes and a cut, rather than a copy of six or seven: a fixed-size copy is two
    // instructions, a variable one a call.
    lines.extend_from_slice(if maybe { b"maybe\t__" } else { b"absent\t_" });
    lines.truncate(lines.len() - if maybe { 2 } else { 1 });
    if needs_escapes(key) {
        lines.extend_from_slice(escape_key(key).as_bytes());
    } else {
        // Printable ASCII other than the backslash is its own escape.
        lines.extend_from_slice(key);
    }
    lines.push(b'\n');
}

/// Whether `key` holds a byte that [`escape_key`] may change: a backslash, or one outside
/// printable ASCII (text outside ASCII is kept, but only `escape_key` tells). Without an early
/// exit, so that the test runs many bytes at a time.
fn needs_escapes(key: &[u8]) -> bool {
    key.iter().fold(false, |found, &b| {
        found | !(b' '..=b'~').contains(&b) | (b == b'\\')
    })
}

/// Appends `{"answer":"maybe"|"absent","key":text}` (or `"key_hex":hex` for a key that is not
/// UTF-8: the members in the order a JSON object of both prints them) and a newline to
/// `lines`, with no value made per key.
fn json_answer(lines: &mut Vec<u8>, key: &[u8], maybe: bool) {
    lines.extend_from_slice(if maybe {
        &br#"{"answer":"maybe","#[..]
    } else {
        br#"{"answer":"absent","#
    });
    match std::str::from_utf8(key) {
        Ok(text) => {
            lines.extend_from_slice(br#""key":"#);
            // Writing to a `Vec` cannot fail.
            let _ = serde_json::to_writer(&mut *lines, text);
        }
        Err(_) => {
            lines.extend_from_slice(br#""key_hex":""#);
            lines.extend_from_slice(bloom_format::hex(key).as_bytes());
            lines.push(b'"');
        }
    }
    lines.extend_from_slice(b"}\n");
}

/// The result of writing an answer: with `every_key` (`--exit-status`), standard output
/// closed is noted in `closed` (nothing more is written) and the keys are answered on, so
/// that the exit status is the verdict on all of them; otherwise it ends the command.
pub(crate) fn written_or_closed(
    written: CmdResult,
    every_key: bool,
    closed: &mut bool,
) -> CmdResult {
    match written {
        Err(crate::error::Failure::OutputClosed) if every_key => {
            *closed = true;
            Ok(())
        }
        other => other,
    }
}

/// A layout in JSON, the same object in every command's output (`docs/cli.md`): its id and
/// name in the format's table, and its parameter (the shard count of `sharded`, else 0).
pub(crate) fn layout_json(id: LayoutId, parameter: u64) -> Value {
    json!({"id": id.value(), "name": id.name(), "parameter": parameter})
}

/// [`layout_json`] of a layout.
pub(crate) fn layout_of(layout: Layout) -> Value {
    layout_json(layout.id(), layout.parameter())
}

/// A position rule in JSON: its id and name.
pub(crate) fn rule_json(id: PositionRuleId) -> Value {
    json!({"id": id.value(), "name": id.name()})
}

/// A key encoding in JSON: its id, name and version.
pub(crate) fn encoding_json(id: KeyEncodingId, version: u16) -> Value {
    json!({"id": id.value(), "name": id.name(), "version": version})
}

/// A message made one field of one line: tabs and line breaks become spaces.
pub(crate) fn one_line(text: &str) -> String {
    text.replace(['\t', '\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_never_break_a_line() {
        assert_eq!(escape_key(b"plain key"), "plain key");
        assert_eq!(escape_key(b"a\tb\r\nc\\d"), "a\\tb\\r\\nc\\\\d");
        assert_eq!(escape_key(b"nul\0bell\x07"), "nul\\x00bell\\x07");
        assert_eq!(escape_key("café 中文".as_bytes()), "café 中文");
        assert_eq!(escape_key(b"bad\xff\xfeutf8"), "bad\\xff\\xfeutf8");
        assert_eq!(escape_key("\u{85}".as_bytes()), "\\xc2\\x85");
        assert_eq!(escape_key("a\u{2028}b".as_bytes()), "a\\u{2028}b");
    }

    #[test]
    fn needs_escapes_finds_every_byte_escape_key_may_change() {
        for byte in 0..=255u8 {
            for len in 1..20 {
                for at in 0..len {
                    let mut key = vec![b'a'; len];
                    key[at] = byte;
                    let expected = escape_key(&key).as_bytes() != key.as_slice();
                    assert_eq!(needs_escapes(&key), expected, "{key:?}");
                }
            }
        }
        assert!(!needs_escapes(b""));
        assert!(!needs_escapes(b" ~~~~~~~~ !}|{"));
    }

    #[test]
    fn answers_are_one_line_each_in_text_and_json() {
        let mut text = Vec::new();
        for (key, maybe) in [
            (&b"plain"[..], true),
            (b"tab\there", false),
            (b"\xff", true),
        ] {
            text_answer(&mut text, key, maybe);
        }
        assert_eq!(text, b"maybe\tplain\nabsent\ttab\\there\nmaybe\t\\xff\n");
        for (key, maybe) in [
            (&b"a\"b\\"[..], true),
            ("café".as_bytes(), false),
            (b"\xff", true),
        ] {
            let mut line = Vec::new();
            json_answer(&mut line, key, maybe);
            let mut object = serde_json::Map::new();
            json_key(key, &mut object);
            object.insert(
                "answer".into(),
                Value::from(if maybe { "maybe" } else { "absent" }),
            );
            let expected = format!("{}\n", Value::Object(object));
            assert_eq!(String::from_utf8(line).unwrap(), expected);
        }
    }

    #[test]
    fn numbers_have_six_significant_digits_everywhere() {
        assert_eq!(show(0.010_039_4), "0.0100394");
        assert_eq!(show(8.6e-9), "8.6e-9");
        assert_eq!(show(1e-300), "1e-300");
        assert_eq!(show(0.273_437_5), "0.273438");
        assert_eq!(show(81.791_2), "81.7912");
        assert_eq!(show(0.0), "0.0");
        assert_eq!(show(1.0), "1.0");
        assert_eq!(show(1e20), "1e+20");
        assert_eq!(show(5e-324), "5e-324");
    }
}
