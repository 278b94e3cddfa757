//! The metadata hash beside a filter's shards: what a snapshot header holds, the creation id
//! every shard carries, and the filter's state.

use std::collections::HashMap;

use bloom_format::{
    DatasetGeneration, Header, HistoryDigest, KeyEncodingId, KeyEncodingSpec, LayoutId,
    PositionRuleId, StoreBinding, StoreIdentity, UnicodeVersion,
};

use crate::error::RedisFilterError;

/// The schema of the metadata hash; a change gets a new value, refused by older builds.
pub(crate) const SCHEMA: &str = "bloom-redis/1";

/// The state of a filter whose shards are complete and may be answered from.
pub(crate) const READY: &str = "ready";
/// The state while shards are being created or filled (creation, import, rebuild).
pub(crate) const BUILDING: &str = "building";

/// A filter's creation id: 16 random bytes; its first 8 (big-endian, never zero) are the
/// marker at the start of every shard.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Creation([u8; 16]);

impl Creation {
    pub(crate) fn random() -> Result<Self, RedisFilterError> {
        loop {
            let mut bytes = [0u8; 16];
            getrandom::fill(&mut bytes).map_err(|e| {
                RedisFilterError::Protocol(format!(
                    "the operating system's random source failed: {e}"
                ))
            })?;
            let creation = Self(bytes);
            if creation.marker() != 0 {
                return Ok(creation);
            }
        }
    }

    /// The marker: what `BITFIELD key GET i64 0` reads from a shard of this filter (Redis
    /// numbers bits from the most significant, so it is the first 8 bytes big-endian).
    #[allow(clippy::big_endian_bytes)]
    pub(crate) fn marker(self) -> i64 {
        let [a, b, c, d, e, f, g, h, ..] = self.0;
        i64::from_be_bytes([a, b, c, d, e, f, g, h])
    }

    /// The 8 marker bytes as stored at the start of each shard.
    pub(crate) fn marker_bytes(self) -> [u8; 8] {
        let [a, b, c, d, e, f, g, h, ..] = self.0;
        [a, b, c, d, e, f, g, h]
    }

    pub(crate) fn hex(self) -> String {
        bloom_format::hex(&self.0)
    }

    fn parse(text: &str) -> Option<Self> {
        let bytes = unhex(text)?;
        let bytes: [u8; 16] = bytes.try_into().ok()?;
        let creation = Self(bytes);
        (creation.marker() != 0).then_some(creation)
    }
}

/// What the metadata hash holds.
pub(crate) struct Meta {
    pub(crate) header: Header,
    pub(crate) creation: Creation,
    pub(crate) state: String,
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn unicode(version: Option<UnicodeVersion>) -> String {
    version.map(|v| v.to_string()).unwrap_or_default()
}

/// The fields of the metadata hash for `header` (a sharded filter's).
pub(crate) fn fields(
    header: &Header,
    creation: Creation,
    state: &str,
) -> Vec<(&'static str, String)> {
    let spec = header.key_encoding;
    let (identity, history) = header.store.map_or((String::new(), String::new()), |b| {
        (b.identity.to_string(), b.history.to_string())
    });
    vec![
        ("schema", SCHEMA.to_owned()),
        ("creation", creation.hex()),
        ("state", state.to_owned()),
        ("bits", header.bit_count.to_string()),
        ("hashes", header.hash_count.to_string()),
        ("rule", header.position_rule.name().to_owned()),
        ("layout", header.layout.name().to_owned()),
        ("shards", header.layout_parameter.to_string()),
        ("encoding", spec.id.name().to_owned()),
        ("encoding_version", spec.version.to_string()),
        ("unicode_normalization", unicode(spec.normalization_unicode)),
        ("unicode_casing", unicode(spec.casing_unicode)),
        ("salt", bloom_format::hex(&header.salt)),
        ("generation", header.dataset_generation.get().to_string()),
        ("items", header.item_count.to_string()),
        ("store_identity", identity),
        ("history_digest", history),
    ]
}

/// Parses the metadata hash of filter `name`; every field is checked, none guessed.
pub(crate) fn parse(name: &str, map: &HashMap<String, String>) -> Result<Meta, RedisFilterError> {
    let get = |field: &'static str| map.get(field).map_or("", String::as_str);
    let bad = |field: &'static str, expected: &str| RedisFilterError::Metadata {
        name: name.to_owned(),
        field,
        found: get(field).to_owned(),
        expected: expected.to_owned(),
    };
    if get("schema") != SCHEMA {
        return Err(bad("schema", SCHEMA));
    }
    let creation =
        Creation::parse(get("creation")).ok_or_else(|| bad("creation", "32 hex digits"))?;
    let number = |field: &'static str| -> Result<u64, RedisFilterError> {
        get(field)
            .parse()
            .map_err(|_| bad(field, "a decimal number"))
    };
    let named = |field: &'static str, names: &[(&str, u16)]| -> Result<u16, RedisFilterError> {
        names
            .iter()
            .find(|(n, _)| *n == get(field))
            .map(|&(_, id)| id)
            .ok_or_else(|| {
                let known: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
                bad(field, &format!("one of {}", known.join(", ")))
            })
    };
    let rules: Vec<(&str, u16)> = PositionRuleId::ALL
        .iter()
        .map(|r| (r.name(), r.value()))
        .collect();
    let layouts: Vec<(&str, u16)> = LayoutId::ALL
        .iter()
        .map(|l| (l.name(), l.value()))
        .collect();
    let encodings: Vec<(&str, u16)> = KeyEncodingId::ALL
        .iter()
        .map(|e| (e.name(), e.value()))
        .collect();
    let rule =
        PositionRuleId::try_from(named("rule", &rules)?).map_err(|_| bad("rule", "a rule"))?;
    let layout =
        LayoutId::try_from(named("layout", &layouts)?).map_err(|_| bad("layout", "a layout"))?;
    if layout != LayoutId::Sharded {
        return Err(bad("layout", "sharded"));
    }
    let encoding = KeyEncodingId::try_from(named("encoding", &encodings)?)
        .map_err(|_| bad("encoding", "an encoding"))?;
    let version = u16::try_from(number("encoding_version")?)
        .map_err(|_| bad("encoding_version", "a version"))?;
    let hashes =
        u32::try_from(number("hashes")?).map_err(|_| bad("hashes", "a k that fits 32 bits"))?;
    let parse_unicode = |field: &'static str| -> Result<Option<UnicodeVersion>, RedisFilterError> {
        let text = get(field);
        if text.is_empty() {
            return Ok(None);
        }
        let parts: Vec<u8> = text
            .split('.')
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|_| bad(field, "a version such as 16.0.0, or empty"))?;
        match parts.as_slice() {
            &[major, minor, update] => Ok(Some(UnicodeVersion::new(major, minor, update))),
            _ => Err(bad(field, "a version such as 16.0.0, or empty")),
        }
    };
    let mut spec = KeyEncodingSpec::new(encoding, version);
    spec.normalization_unicode = parse_unicode("unicode_normalization")?;
    spec.casing_unicode = parse_unicode("unicode_casing")?;
    let mut header = Header::new(number("bits")?, hashes, rule, layout, spec);
    header.layout_parameter = number("shards")?;
    header.salt = unhex(get("salt")).ok_or_else(|| bad("salt", "hex bytes"))?;
    header.dataset_generation = DatasetGeneration::new(number("generation")?);
    header.item_count = number("items")?;
    header.store = match (get("store_identity"), get("history_digest")) {
        ("", "") => None,
        (identity, history) => {
            let identity: [u8; 16] = unhex(identity)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| bad("store_identity", "32 hex digits, or empty"))?;
            let history: [u8; 16] = unhex(history)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| bad("history_digest", "32 hex digits, or empty"))?;
            Some(StoreBinding::new(
                StoreIdentity::from_bytes(identity),
                HistoryDigest::from_bytes(history),
            ))
        }
    };
    header.check().map_err(|source| RedisFilterError::Invalid {
        name: name.to_owned(),
        source,
    })?;
    Ok(Meta {
        header,
        creation,
        state: get("state").to_owned(),
    })
}
