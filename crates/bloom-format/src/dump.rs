//! Human-readable renderings for review: a field-by-field header dump and a hex dump.

use std::fmt::Write;

use crate::header::{Header, UnicodeVersion};
use crate::ids::FormatVersion;
use crate::snapshot::Snapshot;

impl Snapshot {
    /// A field-by-field dump of the header as the file holds it, one `name: value` line each,
    /// as committed next to the golden fixtures and reviewed in snapshot diffs. The fields
    /// are those of the file's format version.
    #[must_use]
    pub fn dump_header(&self) -> String {
        dump(&Stored {
            version: self.format_version(),
            header: self.header(),
            header_len: self.header_len(),
            payload_len: self.payload().len() as u64,
            payload_crc: self.payload_crc32(),
            header_crc: self.header_crc32(),
        })
    }
}

/// What a header dump shows: the decoded header and the values stored around it.
pub(crate) struct Stored<'a> {
    pub(crate) version: FormatVersion,
    pub(crate) header: &'a Header,
    pub(crate) header_len: u16,
    pub(crate) payload_len: u64,
    pub(crate) payload_crc: u32,
    pub(crate) header_crc: u32,
}

/// The field-by-field dump; see [`Snapshot::dump_header`].
pub(crate) fn dump(stored: &Stored<'_>) -> String {
    let h = stored.header;
    let version = stored.version;
    let salt = if h.salt.is_empty() {
        "none".to_owned()
    } else {
        format!("{} ({} bytes)", hex(&h.salt), h.salt.len())
    };
    let unicode =
        |v: Option<UnicodeVersion>| v.map_or_else(|| "none".to_owned(), |v| v.to_string());
    let mut out = String::new();
    let mut line = |name: &str, value: String| {
        let _ = writeln!(out, "{name}: {value}");
    };
    line("format version", version.to_string());
    line("header length", stored.header_len.to_string());
    line("bit count (m)", h.bit_count.to_string());
    line("positions per key (k)", h.hash_count.to_string());
    line(
        "position rule",
        format!("{} ({})", h.position_rule.value(), h.position_rule),
    );
    line("layout", format!("{} ({})", h.layout.value(), h.layout));
    if version >= FormatVersion::V2 {
        line("layout parameter", h.layout_parameter.to_string());
    }
    line(
        "key encoding",
        format!(
            "{} ({}) version {}",
            h.key_encoding.id.value(),
            h.key_encoding.id,
            h.key_encoding.version
        ),
    );
    if version == FormatVersion::V1 {
        line(
            "unicode version",
            unicode(h.key_encoding.normalization_unicode),
        );
    } else {
        let recorded = |v: Option<UnicodeVersion>, used: bool| match v {
            None if used => "not recorded".to_owned(),
            other => unicode(other),
        };
        line(
            "unicode version (normalization)",
            recorded(
                h.key_encoding.normalization_unicode,
                h.key_encoding.id.uses_normalization_tables(),
            ),
        );
        line(
            "unicode version (casing)",
            recorded(
                h.key_encoding.casing_unicode,
                h.key_encoding.id.uses_casing_tables(),
            ),
        );
    }
    line("salt", salt);
    line("dataset generation", h.dataset_generation.to_string());
    line("item count", h.item_count.to_string());
    if version >= FormatVersion::V2 {
        let (identity, history) = h.store.map_or_else(
            || ("none".to_owned(), "none".to_owned()),
            |b| (b.identity.to_string(), b.history.to_string()),
        );
        line("store identity", identity);
        line("history digest", history);
    }
    line("payload length", stored.payload_len.to_string());
    line("payload crc32", format!("{:#010x}", stored.payload_crc));
    line("header crc32", format!("{:#010x}", stored.header_crc));
    out
}

/// Lower-case hex without separators.
#[must_use]
pub fn hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// The bytes of `text`, an even number of hex digits (either case; nothing else, not even a
/// sign): the inverse of [`hex`].
#[must_use]
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// An `xxd`-style hex dump: offset, 16 bytes in hex, and their printable ASCII.
#[must_use]
pub fn hex_dump(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (row, chunk) in bytes.chunks(16).enumerate() {
        let _ = write!(out, "{:08x}: ", row * 16);
        for i in 0..16 {
            match chunk.get(i) {
                Some(b) => {
                    let _ = write!(out, "{b:02x}");
                }
                None => out.push_str("  "),
            }
            if i % 2 == 1 {
                out.push(' ');
            }
        }
        out.push(' ');
        out.extend(chunk.iter().map(|&b| {
            if b.is_ascii_graphic() || b == b' ' {
                char::from(b)
            } else {
                '.'
            }
        }));
        out.push('\n');
    }
    out
}
