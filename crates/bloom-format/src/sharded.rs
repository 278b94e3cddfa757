//! The configuration of a sharded filter held in Redis, as `docs/format.md` ("Sharded filters
//! held in Redis") writes it: the ten configuration fields of its metadata hash, their
//! parsing, and the markers at both ends of every shard, which bind the filter's creation,
//! that configuration and the shard's number.
//!
//! Both ways of writing such a filter use it: `bloom-redis`, which sends `BITFIELD`s, and the
//! Redis module `bloom-redis-module`, which is given the configuration fields as one text
//! ([`config_text`]) and checks them against the markers before it touches a shard.
//!
//! ```
//! use bloom_format::sharded::{ShardMarkers, config_text};
//! use bloom_format::{Header, KeyEncodingId, KeyEncodingSpec, LayoutId, PositionRuleId};
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
//! let markers = ShardMarkers::new(&[1; 16], text.as_bytes());
//! assert_ne!(markers.of(0), markers.of(1));
//! assert_ne!(markers.of(0), 0);
//! ```

use crate::{Header, KeyEncodingId, KeyEncodingSpec, LayoutId, PositionRuleId, UnicodeVersion};

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

/// Bits before a shard's own bits: its first marker.
pub const MARKER_BITS: u64 = 64;

/// Bytes of a counted shard's write counter (schemas `bloom-redis/4` and `/5`), after its end
/// marker: `M(s) | bits | M(s) | W`, `W` a big-endian two's-complement 64-bit integer, as
/// Redis's `BITFIELD ... i64` reads it.
pub const COUNTER_BYTES: u64 = 8;

/// The counter's bit 62: set once a process found the shard's state older than one it had
/// seen (data put back on a live server), until the filter is declared whole again. Every
/// reader then takes the shard for unverified.
pub const ROLLED_BACK: i64 = 1 << 62;

/// The counter's bits 0 to 61: the shard's write count, advanced by one with every write
/// command, in the same command as its bits. Bit 63 is never set.
pub const WRITE_COUNT: i64 = ROLLED_BACK - 1;

/// What declaring a filter whole adds to each shard's write count (and clears
/// [`ROLLED_BACK`] with): past every count a process can have seen before the state it
/// repairs was put back, unless more than this many writes were lost.
pub const COUNT_JUMP: i64 = 1 << 32;

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
        crate::hex(&header.salt),
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
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Lowercase hex bytes (the empty text is no bytes).
pub fn parse_lower_hex(text: &str) -> Option<Vec<u8>> {
    if text.bytes().any(|b| b.is_ascii_uppercase()) {
        return None;
    }
    crate::unhex(text)
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
    if !matches!(layout, LayoutId::Sharded | LayoutId::ShardedV2) {
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

/// A filter's creation id from its metadata form: 32 lowercase hex digits, not all zero.
#[must_use]
pub fn parse_creation(text: &str) -> Option<[u8; 16]> {
    let bytes: [u8; 16] = parse_lower_hex(text)?.try_into().ok()?;
    (bytes != [0; 16]).then_some(bytes)
}

/// splitmix64's finalizer: a bijection of u64 that mixes every bit.
const fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// FNV-1a, 64 bits.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The markers of a filter's shards: each shard's depends on the creation, on the
/// configuration the shards were made for, and on the shard's number, so that a shard that
/// is missing, emptied, of another filter, of another shard, or read with another
/// configuration reads a marker other than the expected one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardMarkers {
    creation: u64,
    config: u64,
}

impl ShardMarkers {
    /// The markers of the filter created as `creation` with the configuration `config_text`
    /// (see [`config_text`]).
    #[must_use]
    pub fn new(creation: &[u8; 16], config_text: &[u8]) -> Self {
        let [a, b, c, d, e, f, g, h, ..] = *creation;
        Self {
            creation: u64::from_le_bytes([h, g, f, e, d, c, b, a]),
            config: fnv1a(config_text),
        }
    }

    /// The marker of shard `shard`, as `BITFIELD key GET i64 offset` reads it: never 0 (what
    /// a missing or emptied key reads).
    #[must_use]
    pub fn of(self, shard: u32) -> i64 {
        let m = mix(self.creation ^ mix(self.config.wrapping_add(u64::from(shard) + 1)));
        i64::from_le_bytes(if m == 0 { 1 } else { m }.to_le_bytes())
    }

    /// The marker's 8 bytes as stored in the shard (Redis reads them most significant first).
    #[must_use]
    pub fn bytes(self, shard: u32) -> [u8; 8] {
        let [a, b, c, d, e, f, g, h] = self.of(shard).to_le_bytes();
        [h, g, f, e, d, c, b, a]
    }
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
    fn creations_are_lowercase_hex_and_not_zero() {
        assert_eq!(parse_creation(&"01".repeat(16)), Some([1; 16]));
        assert_eq!(parse_creation(&"00".repeat(16)), None);
        assert_eq!(parse_creation(&"AB".repeat(16)), None);
        assert_eq!(parse_creation(&"01".repeat(15)), None);
    }
}
