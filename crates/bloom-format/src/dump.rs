//! Human-readable renderings for review: a field-by-field header dump and a hex dump.

use std::fmt::Write;

use crate::header::Header;
use crate::hex::hex;
use crate::ids::FormatVersion;
use crate::snapshot::Snapshot;
use crate::unicode::UnicodeVersion;

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
    if version >= FormatVersion::V3 {
        match h.plan {
            Some(plan) => {
                line("planned capacity", plan.capacity.to_string());
                line(
                    "target false-positive rate",
                    format!("{:?}", plan.false_positive_rate),
                );
            }
            None => {
                line("planned capacity", "not recorded".to_owned());
                line("target false-positive rate", "not recorded".to_owned());
            }
        }
        if let Some(scalable) = &h.scalable {
            line("growth factor", scalable.growth.to_string());
            line("tightening ratio", format!("{:?}", scalable.tightening));
            line("stage count", scalable.stages.len().to_string());
            for (i, stage) in scalable.stages.iter().enumerate() {
                line(
                    &format!("stage {i}"),
                    format!(
                        "m = {}, k = {}, layout {} ({}), capacity {}, rate {:?}, items {}",
                        stage.bit_count,
                        stage.hash_count,
                        stage.layout.value(),
                        stage.layout,
                        stage.plan.capacity,
                        stage.plan.false_positive_rate,
                        stage.item_count
                    ),
                );
            }
        }
    }
    line("payload length", stored.payload_len.to_string());
    line("payload crc32", format!("{:#010x}", stored.payload_crc));
    line("header crc32", format!("{:#010x}", stored.header_crc));
    out
}
