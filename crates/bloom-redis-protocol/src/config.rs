//! The configuration text: the ten metadata fields that say where a filter's bits land, in
//! the order the markers bind them, their values for a header, and their parsing
//! (`docs/format.md`, "Sharded filters held in Redis").
//!
//! bloom-redis writes the fields into the metadata hash and reads them back; the Redis module
//! is given them as one text ([`config_text`]), from which it derives the shards' markers and
//! checks them before it touches a shard. The layouts and rules a filter held in Redis may have
//! ([`LAYOUTS`], [`RULES`]) are here too.
//!
//! ```
//! use bloom_format::{Header, KeyEncodingId, KeyEncodingSpec, LayoutId, PositionRuleId};
//! use bloom_redis_protocol::config::{config_text, parse_config_text};
//!
//! let mut header = Header::new(
//!     1 << 20,
//!     7,
//!     PositionRuleId::Xxh3_128,
//!     LayoutId::ShardedV2,
//!     KeyEncodingSpec::new(KeyEncodingId::Bytes, 1),
//! );
//! header.layout_parameter = 16;
//! let text = config_text(&header);
//! assert!(text.starts_with("1048576\n7\nxxh3-128\nsharded-v2\n16\n"));
//! assert_eq!(parse_config_text(&text), Ok(header));
//! ```

use bloom_format::{
    Header, KeyEncodingId, KeyEncodingSpec, LayoutId, PositionRuleId, UnicodeVersion,
};

/// The metadata fields that configure a filter, in the order the markers bind them.
pub const CONFIG_FIELDS: [&str; 10] = [
    "bits",
    "hashes",
    "rule",
    "layout",
    "shards",
    "encoding",
    "encoding_version",
    "unicode_normalization",
    "unicode_casing",
    "salt",
];

/// The layouts a filter held in Redis may have, newest first.
pub const LAYOUTS: [LayoutId; 2] = [LayoutId::ShardedV2, LayoutId::Sharded];

/// The position rules a filter held in Redis is made with (and the module hashes with).
pub const RULES: [PositionRuleId; 2] = [PositionRuleId::Sha256Double, PositionRuleId::Xxh3_128];

/// The values of [`CONFIG_FIELDS`] for `header`, in that order and in the metadata's form:
/// canonical decimals, identifier names, `18.0.0`-style Unicode versions (empty for none),
/// the salt in lowercase hex.
#[must_use]
pub fn config_values(header: &Header) -> [String; 10] {
    let spec = header.key_encoding;
    let unicode = |v: Option<UnicodeVersion>| v.map(|v| v.to_string()).unwrap_or_default();
    [
        header.bit_count.to_string(),
        header.hash_count.to_string(),
        header.position_rule.name().to_owned(),
        header.layout.name().to_owned(),
        header.layout_parameter.to_string(),
        spec.id.name().to_owned(),
        spec.version.to_string(),
        unicode(spec.normalization_unicode),
        unicode(spec.casing_unicode),
        bloom_format::hex(&header.salt),
    ]
}

/// The configuration as one text: every value of [`config_values`] followed by `"\n"`. The
/// markers are derived from it, and the Redis module takes it as an argument.
#[must_use]
pub fn config_text(header: &Header) -> String {
    config_values(header)
        .into_iter()
        .fold(String::new(), |mut text, value| {
            text.push_str(&value);
            text.push('\n');
            text
        })
}

/// A configuration field that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field {field} should be {expected}")]
pub struct FieldError {
    /// The field, one of [`CONFIG_FIELDS`].
    pub field: &'static str,
    /// What it should have held.
    pub expected: String,
}

/// A field's name and what it should hold, as an error.
fn bad(field: &'static str, expected: &str) -> FieldError {
    FieldError {
        field,
        expected: expected.to_owned(),
    }
}

/// A canonical decimal (no sign, no leading zero): what the metadata writes, nothing else.
///
/// # Errors
/// Any other text, reported against `field`.
pub fn parse_number(field: &'static str, text: &str) -> Result<u64, FieldError> {
    text.parse::<u64>()
        .ok()
        .filter(|n| n.to_string() == text)
        .ok_or_else(|| bad(field, "a decimal number without sign or leading zeros"))
}

/// A name among the identifiers of `T`.
fn named<T: Copy>(
    field: &'static str,
    text: &str,
    all: &[T],
    name: impl Fn(T) -> &'static str,
) -> Result<T, FieldError> {
    all.iter()
        .copied()
        .find(|&id| name(id) == text)
        .ok_or_else(|| {
            let known: Vec<&str> = all.iter().map(|&id| name(id)).collect();
            bad(field, &format!("one of {}", known.join(", ")))
        })
}

/// A `16.0.0`-style Unicode version, or `None` for the empty text.
fn parse_unicode(field: &'static str, text: &str) -> Result<Option<UnicodeVersion>, FieldError> {
    if text.is_empty() {
        return Ok(None);
    }
    let expected = "a version such as 16.0.0, or empty";
    let parts: Vec<u8> = text
        .split('.')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .map_err(|_| bad(field, expected))?;
    match parts.as_slice() {
        &[major, minor, update] => Ok(Some(UnicodeVersion::new(major, minor, update))),
        _ => Err(bad(field, expected)),
    }
}

/// Lowercase hex bytes (the empty text is no bytes); `None` for any other text.
#[must_use]
pub fn parse_lower_hex(text: &str) -> Option<Vec<u8>> {
    if text.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    bloom_format::unhex(text)
}

/// The header the ten configuration fields describe (`get` gives each field's value; the
/// generation, item count and store binding are left at their defaults). Only the fields'
/// forms are checked here: [`Header::check`] checks that they make a filter, and a sharded
/// layout is required.
///
/// # Errors
/// The first field that does not parse.
pub fn parse_config<'a>(get: impl Fn(&'static str) -> &'a str) -> Result<Header, FieldError> {
    let number = |field: &'static str| parse_number(field, get(field));
    let rule = named(
        "rule",
        get("rule"),
        PositionRuleId::ALL,
        PositionRuleId::name,
    )?;
    let layout = named("layout", get("layout"), LayoutId::ALL, LayoutId::name)?;
    if !LAYOUTS.contains(&layout) {
        return Err(bad("layout", "sharded-v2 or sharded"));
    }
    let encoding = named(
        "encoding",
        get("encoding"),
        KeyEncodingId::ALL,
        KeyEncodingId::name,
    )?;
    let version = u16::try_from(number("encoding_version")?)
        .map_err(|_| bad("encoding_version", "a version"))?;
    let hashes =
        u32::try_from(number("hashes")?).map_err(|_| bad("hashes", "a k that fits 32 bits"))?;
    let mut spec = KeyEncodingSpec::new(encoding, version);
    spec.normalization_unicode =
        parse_unicode("unicode_normalization", get("unicode_normalization"))?;
    spec.casing_unicode = parse_unicode("unicode_casing", get("unicode_casing"))?;
    let mut header = Header::new(number("bits")?, hashes, rule, layout, spec);
    header.layout_parameter = number("shards")?;
    header.salt = parse_lower_hex(get("salt")).ok_or_else(|| bad("salt", "lowercase hex bytes"))?;
    Ok(header)
}

/// The header a [`config_text`] describes: exactly ten lines, each ended by `"\n"`.
///
/// # Errors
/// A text of another shape (reported against the first field it lacks, or `salt` for extra
/// lines), or a field that does not parse.
pub fn parse_config_text(text: &str) -> Result<Header, FieldError> {
    let Some(body) = text.strip_suffix('\n') else {
        return Err(bad("bits", "ten fields, each ended by a newline"));
    };
    let values: Vec<&str> = body.split('\n').collect();
    if values.len() != CONFIG_FIELDS.len() {
        let field = CONFIG_FIELDS.get(values.len()).copied().unwrap_or("salt");
        return Err(bad(field, "ten fields, each ended by a newline"));
    }
    parse_config(|field| {
        CONFIG_FIELDS
            .iter()
            .position(|&f| f == field)
            .and_then(|i| values.get(i))
            .copied()
            .unwrap_or("")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        let mut spec = KeyEncodingSpec::new(KeyEncodingId::Nfc, 1);
        spec.normalization_unicode = Some(UnicodeVersion::new(18, 0, 0));
        let mut header = Header::new(96_256, 7, PositionRuleId::Xxh3_128, LayoutId::Sharded, spec);
        header.layout_parameter = 16;
        header.salt = vec![0xab, 0x01];
        header
    }

    #[test]
    fn config_text_parses_back() {
        let header = header();
        let text = config_text(&header);
        assert_eq!(
            text,
            "96256\n7\nxxh3-128\nsharded\n16\nnfc\n1\n18.0.0\n\nab01\n"
        );
        assert_eq!(parse_config_text(&text), Ok(header));
    }

    #[test]
    fn misshapen_config_texts_are_refused() {
        let text = config_text(&header());
        let short = text.replacen("96256\n", "", 1);
        assert_eq!(parse_config_text(&short).map_err(|e| e.field), Err("salt"));
        let long = format!("{text}x\n");
        assert_eq!(parse_config_text(&long).map_err(|e| e.field), Err("salt"));
        let unended = text.trim_end_matches('\n');
        assert_eq!(parse_config_text(unended).map_err(|e| e.field), Err("bits"));
        let padded = text.replacen("96256", "096256", 1);
        assert_eq!(parse_config_text(&padded).map_err(|e| e.field), Err("bits"));
        let upper = text.replacen("ab01", "AB01", 1);
        assert_eq!(parse_config_text(&upper).map_err(|e| e.field), Err("salt"));
        let flat = text.replacen("sharded", "standard", 1);
        assert_eq!(parse_config_text(&flat).map_err(|e| e.field), Err("layout"));
    }

    #[test]
    fn the_layouts_and_rules_are_named_as_the_module_reports_them() {
        assert_eq!(LAYOUTS.map(LayoutId::name), ["sharded-v2", "sharded"]);
        assert_eq!(
            RULES.map(PositionRuleId::name),
            ["sha256-double", "xxh3-128"]
        );
    }
}
