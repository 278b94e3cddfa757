//! The metadata hash beside a filter's shards: what a snapshot header holds, the creation id
//! every shard carries, and the filter's state.

use std::collections::HashMap;

use bloom_format::sharded::{self, CONFIG_FIELDS, ShardMarkers, config_text, config_values};
use bloom_format::{
    DatasetGeneration, Header, HistoryDigest, Plan, StoreBinding, StoreIdentity, unhex,
};

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

/// The schema of new filters: schema 2 whose shards end with a write counter after their
/// end marker (`docs/format.md`, "Write counters"), advanced with every write in the same
/// command as its bits, so that a shard's state going back (older data put back on a live
/// server, an older copy of the key restored) is seen by every process that saw a newer one.
/// A build that does not know it refuses the filter: its writes would not advance the
/// counters.
pub(crate) const SCHEMA_COUNTED: &str = "bloom-redis/4";

/// Schema 4 with mixed Unicode tables, as schema 3 is schema 2's.
pub(crate) const SCHEMA_COUNTED_MIXED: &str = "bloom-redis/5";

/// The schemas this build reads. A filter of version 1 has no epoch records: it is
/// unverified until [`RedisFilter::restore_whole`](crate::RedisFilter::restore_whole) records
/// its nodes (which makes it version 2, or 3 for mixed tables).
const READS: [&str; 5] = [
    "bloom-redis/1",
    SCHEMA,
    SCHEMA_MIXED,
    SCHEMA_COUNTED,
    SCHEMA_COUNTED_MIXED,
];

/// The schema of a filter with or without write counters, with or without mixed tables.
pub(crate) fn schema(counted: bool, mixed: bool) -> &'static str {
    match (counted, mixed) {
        (false, false) => SCHEMA,
        (false, true) => SCHEMA_MIXED,
        (true, false) => SCHEMA_COUNTED,
        (true, true) => SCHEMA_COUNTED_MIXED,
    }
}

/// The state of a filter whose shards are complete and may be answered from.
pub(crate) const READY: &str = "ready";
/// The state while shards are being created or filled (creation, import, rebuild).
pub(crate) const BUILDING: &str = "building";

/// A filter's creation id: 16 random bytes, not all zero.
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
            if bytes != [0; 16] {
                return Ok(Self(bytes));
            }
        }
    }

    pub(crate) fn hex(self) -> String {
        bloom_format::hex(&self.0)
    }

    fn parse(text: &str) -> Option<Self> {
        bloom_format::sharded::parse_creation(text).map(Self)
    }
}

/// The markers of a filter's shards (see [`ShardMarkers`]).
#[derive(Clone, Copy)]
pub(crate) struct Markers(ShardMarkers);

impl Markers {
    /// The markers of the filter `creation` made with `header`'s configuration.
    pub(crate) fn new(creation: Creation, header: &Header) -> Self {
        Self(ShardMarkers::new(
            &creation.0,
            config_text(header).as_bytes(),
        ))
    }

    /// The marker of shard `shard`, as `BITFIELD key GET i64 offset` reads it.
    pub(crate) fn of(self, shard: u32) -> i64 {
        self.0.of(shard)
    }

    /// The marker's 8 bytes as stored in the shard.
    pub(crate) fn bytes(self, shard: u32) -> [u8; 8] {
        self.0.bytes(shard)
    }
}

/// What the metadata hash holds.
pub(crate) struct Meta {
    pub(crate) header: Header,
    pub(crate) creation: Creation,
    pub(crate) state: String,
    /// Schema 3 or 5: the keys' Unicode tables are not all the recorded ones.
    pub(crate) tables_mixed: bool,
    /// Schema 4 or 5: every shard ends with a write counter.
    pub(crate) counted: bool,
}

/// The fields of the metadata hash for `header` (a sharded filter's).
pub(crate) fn fields(
    header: &Header,
    creation: Creation,
    state: &str,
) -> Vec<(&'static str, String)> {
    let mut fields = vec![
        ("schema", SCHEMA_COUNTED.to_owned()),
        ("creation", creation.hex()),
        ("state", state.to_owned()),
    ];
    fields.extend(CONFIG_FIELDS.into_iter().zip(config_values(header)));
    fields.push(("items", header.item_count.to_string()));
    // The plan is not part of the markers: it says what the filter was sized for, never
    // where bits land.
    let (capacity, rate) = header.plan.map_or((String::new(), String::new()), |p| {
        (p.capacity.to_string(), p.false_positive_rate.to_string())
    });
    fields.push(("capacity", capacity));
    fields.push(("target_fpr", rate));
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
    let mut header = sharded::parse_config(get).map_err(|e| bad(e.field, &e.expected))?;
    let number = |field: &'static str| -> Result<u64, RedisFilterError> {
        sharded::parse_number(field, get(field)).map_err(|e| bad(e.field, &e.expected))
    };
    header.dataset_generation = DatasetGeneration::new(number("generation")?);
    header.item_count = number("items")?;
    header.plan = match (get("capacity"), get("target_fpr")) {
        // Filters created before the plan was recorded, or sized by m and k alone.
        ("", "") => None,
        (capacity, rate) => {
            let capacity = sharded::parse_number("capacity", capacity)
                .map_err(|e| bad(e.field, &e.expected))?;
            let plan = rate
                .parse::<f64>()
                .ok()
                .filter(|r| r.to_string() == rate)
                .and_then(|r| Plan::new(capacity, r));
            Some(plan.ok_or_else(|| {
                bad(
                    "target_fpr",
                    "with a capacity of at least 1, a rate strictly between 0 and 1 written as its shortest decimal",
                )
            })?)
        }
    };
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
        tables_mixed: matches!(get("schema"), SCHEMA_MIXED | SCHEMA_COUNTED_MIXED),
        counted: matches!(get("schema"), SCHEMA_COUNTED | SCHEMA_COUNTED_MIXED),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloom_format::{KeyEncodingId, KeyEncodingSpec, LayoutId, PositionRuleId, UnicodeVersion};

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
