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
        Self(BufWriter::with_capacity(1 << 16, io::stdout().lock()))
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
}

impl Answers {
    pub(crate) fn new(json: bool) -> Self {
        Self {
            out: Out::new(),
            json,
            any_absent: false,
            every_key: false,
            closed: false,
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
        self.any_absent |= !maybe;
        if self.closed {
            return Ok(());
        }
        let verdict = if maybe { "maybe" } else { "absent" };
        let written = if self.json {
            let mut object = serde_json::Map::new();
            json_key(key, &mut object);
            object.insert("answer".into(), Value::from(verdict));
            self.out.json_line(&Value::Object(object))
        } else {
            self.out.text(&format!("{verdict}\t{}\n", escape_key(key)))
        };
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
