//! The metadata hash beside a filter's shards: what a snapshot header holds, the creation id
//! every shard carries, and the filter's state.

use std::collections::HashMap;

use bloom_format::{
    DatasetGeneration, Header, HistoryDigest, KeyEncodingId, KeyEncodingSpec, LayoutId,
    PositionRuleId, StoreBinding, StoreIdentity, UnicodeVersion,
};

use bloom_format::unhex;

use crate::error::RedisFilterError;

/// The schema of the metadata hash this build writes; a change gets a new value, refused by
/// older builds. Version 2 adds the epoch records and the `durability` field: a build of
/// version 1 would neither wait as the filter asks nor keep the records, so it must not
/// write.
pub(crate) const SCHEMA: &str = "bloom-redis/2";

/// Schema 2 for a filter whose keys were not all encoded with the Unicode tables its
/// metadata records (a filter of other tables, written to by this build with keys outside
/// ASCII): every build must answer *maybe* for such keys, as for a snapshot whose tables are
/// "not recorded". Its own value, so that a build that does not know it refuses the filter
/// rather than trust the recorded tables.
pub(crate) const SCHEMA_MIXED: &str = "bloom-redis/3";

/// The schemas this build reads. A filter of version 1 has no epoch records: it is
/// unverified until [`RedisFilter::restore_whole`](crate::RedisFilter::restore_whole) records
/// its nodes (which makes it version 2, or 3 for mixed tables).
const READS: [&str; 3] = ["bloom-redis/1", SCHEMA, SCHEMA_MIXED];

/// The state of a filter whose shards are complete and may be answered from.
pub(crate) const READY: &str = "ready";
/// The state while shards are being created or filled (creation, import, rebuild).
pub(crate) const BUILDING: &str = "building";

/// A filter's creation id: 16 random bytes, not all zero.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Creation([u8; 16]);

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

impl Creation {
    pub(crate) fn random() -> Result<Self, RedisFilterError> {
        loop {
            let mut bytes = [0u8; 16];
            getrandom::fill(&mut bytes).map_err(|e| {
                RedisFilterError::Protocol(format!(
                    "the operating system's random source failed: {e}"
                ))
            })?;
            if bytes != [0; 16] {
                return Ok(Self(bytes));
            }
        }
    }

    pub(crate) fn hex(self) -> String {
        bloom_format::hex(&self.0)
    }

    fn parse(text: &str) -> Option<Self> {
        if text.bytes().any(|b| b.is_ascii_uppercase()) {
            return None;
        }
        let bytes: [u8; 16] = unhex(text)?.try_into().ok()?;
        (bytes != [0; 16]).then_some(Self(bytes))
    }
}

/// The markers of a filter's shards: each shard's depends on the creation, on the
/// configuration the shards were made for, and on the shard's number, so that a shard that
/// is missing, emptied, of another filter, of another shard, or read with another
/// configuration reads a marker other than the expected one.
#[derive(Clone, Copy)]
pub(crate) struct Markers {
    creation: u64,
    config: u64,
}

impl Markers {
    /// `header`'s configuration fields, in the order and form of the metadata hash, one per
    /// line: what the markers bind.
    pub(crate) fn new(creation: Creation, header: &Header) -> Self {
        let [a, b, c, d, e, f, g, h, ..] = creation.0;
        let config: String = fields(header, creation, "")
            .into_iter()
            .filter(|(field, _)| CONFIG_FIELDS.contains(field))
            .map(|(_, value)| value + "\n")
            .collect();
        Self {
            creation: u64::from_le_bytes([h, g, f, e, d, c, b, a]),
            config: fnv1a(config.as_bytes()),
        }
    }

    /// The marker of shard `shard`, as `BITFIELD key GET i64 offset` reads it: never 0 (what
    /// a missing or emptied key reads).
    pub(crate) fn of(self, shard: u32) -> i64 {
        let m = mix(self.creation ^ mix(self.config.wrapping_add(u64::from(shard) + 1)));
        i64::from_le_bytes(if m == 0 { 1 } else { m }.to_le_bytes())
    }

    /// The marker's 8 bytes as stored in the shard (Redis reads them most significant first).
    pub(crate) fn bytes(self, shard: u32) -> [u8; 8] {
        let [a, b, c, d, e, f, g, h] = self.of(shard).to_le_bytes();
        [h, g, f, e, d, c, b, a]
    }
}

/// The metadata fields that configure a filter (and so its markers).
const CONFIG_FIELDS: [&str; 10] = [
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

/// What the metadata hash holds.
pub(crate) struct Meta {
    pub(crate) header: Header,
    pub(crate) creation: Creation,
    pub(crate) state: String,
    /// Schema 3: the keys' Unicode tables are not all the recorded ones.
    pub(crate) tables_mixed: bool,
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
    let mut fields = vec![
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
        ("items", header.item_count.to_string()),
    ];
    fields.extend(coverage_fields(header.dataset_generation, header.store));
    fields
}

/// The fields that say what the bits cover: `generation`, `store_identity`,
/// `history_digest`.
pub(crate) fn coverage_fields(
    generation: DatasetGeneration,
    binding: Option<StoreBinding>,
) -> [(&'static str, String); 3] {
    let (identity, history) = binding.map_or((String::new(), String::new()), |b| {
        (b.identity.to_string(), b.history.to_string())
    });
    [
        ("generation", generation.get().to_string()),
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
        // The salt is a secret: never echoed, even when malformed.
        found: if field == "salt" {
            format!("<{} characters>", get(field).len())
        } else {
            get(field).to_owned()
        },
        expected: expected.to_owned(),
    };
    if !READS.contains(&get("schema")) {
        return Err(bad("schema", &READS.join(" or ")));
    }
    let creation = Creation::parse(get("creation"))
        .ok_or_else(|| bad("creation", "32 lowercase hex digits, not all zero"))?;
    // Canonical decimals only: what `fields` writes, nothing else (no sign, no leading zero).
    let number = |field: &'static str| -> Result<u64, RedisFilterError> {
        get(field)
            .parse::<u64>()
            .ok()
            .filter(|n| n.to_string() == get(field))
            .ok_or_else(|| bad(field, "a decimal number without sign or leading zeros"))
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
    if !matches!(layout, LayoutId::Sharded | LayoutId::ShardedV2) {
        return Err(bad("layout", "sharded-v2 or sharded"));
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
    header.salt = unhex(get("salt"))
        .filter(|_| !get("salt").bytes().any(|b| b.is_ascii_uppercase()))
        .ok_or_else(|| bad("salt", "lowercase hex bytes"))?;
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
        tables_mixed: get("schema") == SCHEMA_MIXED,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloom_format::{KeyEncodingId, KeyEncodingSpec, LayoutId, PositionRuleId};

    /// Computed independently from docs/format.md (a few lines of Python: splitmix64's
    /// finalizer and FNV-1a over the field values).
    #[test]
    fn markers_follow_the_spec() {
        let mut spec = KeyEncodingSpec::new(KeyEncodingId::Nfc, 1);
        spec.normalization_unicode = Some(UnicodeVersion::new(18, 0, 0));
        let mut header = Header::new(96_256, 7, PositionRuleId::Xxh3_128, LayoutId::Sharded, spec);
        header.layout_parameter = 16;
        let creation = Creation(core::array::from_fn(|i| i as u8 + 1));
        let markers = Markers::new(creation, &header);
        let hex = |s| bloom_format::hex(&markers.bytes(s));
        assert_eq!(hex(0), "023b1fea9385d3f8");
        assert_eq!(hex(1), "4488b1e542d65303");
        assert_eq!(hex(15), "e10573572fd54728");
        // Generation, items and the binding are not part of the configuration.
        header.dataset_generation = DatasetGeneration::new(5);
        header.item_count = 9;
        assert_eq!(
            bloom_format::hex(&Markers::new(creation, &header).bytes(0)),
            hex(0)
        );
        header.hash_count = 8;
        assert_ne!(
            bloom_format::hex(&Markers::new(creation, &header).bytes(0)),
            hex(0)
        );
    }
}
