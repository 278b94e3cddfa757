//! Human-readable renderings for review: a field-by-field header dump and a hex dump.

use std::fmt::Write;

use crate::snapshot::Snapshot;

impl Snapshot {
    /// A field-by-field dump of the header, one `name: value` line each, as committed next to
    /// the golden fixtures and reviewed in snapshot diffs.
    #[must_use]
    pub fn dump_header(&self) -> String {
        let h = self.header();
        let encoded = self.encode_header();
        let header_crc = encoded
            .len()
            .checked_sub(4)
            .and_then(|at| encoded.get(at..))
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map_or(0, u32::from_le_bytes);
        let salt = if h.salt.is_empty() {
            "none".to_owned()
        } else {
            format!("{} ({} bytes)", hex(&h.salt), h.salt.len())
        };
        let unicode = h
            .key_encoding
            .unicode
            .map_or_else(|| "none".to_owned(), |v| v.to_string());
        let mut out = String::new();
        let mut line = |name: &str, value: String| {
            let _ = writeln!(out, "{name}: {value}");
        };
        line("format version", crate::FormatVersion::CURRENT.to_string());
        line("header length", h.header_len().to_string());
        line("bit count (m)", h.bit_count.to_string());
        line("positions per key (k)", h.hash_count.to_string());
        line(
            "position rule",
            format!("{} ({})", h.position_rule.value(), h.position_rule),
        );
        line("layout", format!("{} ({})", h.layout.value(), h.layout));
        line(
            "key encoding",
            format!(
                "{} ({}) version {}",
                h.key_encoding.id.value(),
                h.key_encoding.id,
                h.key_encoding.version
            ),
        );
        line("unicode version", unicode);
        line("salt", salt);
        line("dataset generation", h.dataset_generation.to_string());
        line("item count", h.item_count.to_string());
        line("payload length", self.payload().len().to_string());
        line("payload crc32", format!("{:#010x}", self.payload_crc32()));
        line("header crc32", format!("{header_crc:#010x}"));
        out
    }
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
