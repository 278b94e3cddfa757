//! The metadata hash beside a filter's shards (`bloom:{NAME}:meta`, `docs/format.md`,
//! "Metadata fields"): its schemas, what a snapshot header holds, the creation id every
//! shard's markers are bound to, the filter's state and durability; the fields written for a
//! new filter, and every field parsed and checked when one is opened.

use bloom_format::{
    DatasetGeneration, DecodeError, Header, HistoryDigest, Plan, StoreBinding, StoreIdentity, unhex,
};

use crate::config::{self, CONFIG_FIELDS, config_values};
use crate::coverage::coverage_fields;

/// The schema of the metadata hash this build writes; a change gets a new value, refused by
/// older builds. Version 2 adds the epoch records and the `durability` field: a build of
/// version 1 would neither wait as the filter asks nor keep the records, so it must not
/// write.
pub const SCHEMA: &str = "bloom-redis/2";

/// Schema 2 for a filter whose keys were not all encoded with the Unicode tables its
/// metadata records (a filter of other tables, written to by this build with keys outside
/// ASCII): every build must answer *maybe* for such keys, as for a snapshot whose tables are
/// "not recorded". Its own value, so that a build that does not know it refuses the filter
/// rather than trust the recorded tables.
pub const SCHEMA_MIXED: &str = "bloom-redis/3";

/// The schema of new filters: schema 2 whose shards end with a write counter after their
/// end marker (`docs/format.md`, "Write counters"), advanced with every write in the same
/// command as its bits, so that a shard's state going back (older data put back on a live
/// server, an older copy of the key restored) is seen by every process that saw a newer one.
/// A build that does not know it refuses the filter: its writes would not advance the
/// counters.
pub const SCHEMA_COUNTED: &str = "bloom-redis/4";

/// Schema 4 with mixed Unicode tables, as schema 3 is schema 2's.
pub const SCHEMA_COUNTED_MIXED: &str = "bloom-redis/5";

/// The schemas this build reads. A filter of version 1 has no epoch records: it is
/// unverified until bloom-redis's `RedisFilter::restore_whole` records its nodes (which makes
/// it version 2, or 3 for mixed tables).
pub const READS: [&str; 5] = [
    "bloom-redis/1",
    SCHEMA,
    SCHEMA_MIXED,
    SCHEMA_COUNTED,
    SCHEMA_COUNTED_MIXED,
];

/// The schema of a filter with or without write counters, with or without mixed tables.
#[must_use]
pub fn schema(counted: bool, mixed: bool) -> &'static str {
    match (counted, mixed) {
        (false, false) => SCHEMA,
        (false, true) => SCHEMA_MIXED,
        (true, false) => SCHEMA_COUNTED,
        (true, true) => SCHEMA_COUNTED_MIXED,
    }
}

/// The state of a filter whose shards are complete and may be answered from.
pub const READY: &str = "ready";
/// The state while shards are being created or filled (creation, import, rebuild).
pub const BUILDING: &str = "building";

/// A filter's creation id: 16 random bytes, not all zero, drawn when the filter is created
/// (by bloom-redis, from the operating system); in the metadata as 32 lowercase hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Creation([u8; 16]);

impl Creation {
    /// The creation id of these bytes; `None` for all zeros (never a creation: a marker
    /// derived from it could be read from nothing).
    #[must_use]
    pub fn from_bytes(bytes: [u8; 16]) -> Option<Self> {
        (bytes != [0; 16]).then_some(Self(bytes))
    }

    /// Its bytes.
    #[must_use]
    pub fn bytes(self) -> [u8; 16] {
        self.0
    }

    /// Its metadata form: 32 lowercase hex digits.
    #[must_use]
    pub fn hex(self) -> String {
        bloom_format::hex(&self.0)
    }

    /// A creation id from its metadata form: 32 lowercase hex digits, not all zero; `None`
    /// for anything else.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let bytes: [u8; 16] = config::parse_lower_hex(text)?.try_into().ok()?;
        Self::from_bytes(bytes)
    }
}

/// What a filter asks of every writer before an insert returns, recorded in its metadata
/// (field `durability`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Durability {
    /// Nothing: a write is acknowledged once the master has it. A restart or a failover of a
    /// shard's node makes the filter unverified.
    None,
    /// Every write waits (`WAIT`) for this many replicas, up to the timeout (milliseconds);
    /// a failover to a replica keeps the filter verified.
    Replicas {
        /// Replicas that must acknowledge.
        replicas: u32,
        /// How long a writer waits for them, in milliseconds.
        timeout_ms: u64,
    },
    /// Every write waits for the node's AOF to reach disk (`WAITAOF` on Redis 7.2 and later;
    /// before, the node must run `appendfsync always`); a restart keeps the filter verified.
    Aof {
        /// How long a writer waits, in milliseconds.
        timeout_ms: u64,
    },
}

impl Durability {
    /// The metadata field value: `none`, `replicas:N:MS` or `aof:MS`.
    #[must_use]
    pub fn field(self) -> String {
        match self {
            Self::None => "none".into(),
            Self::Replicas {
                replicas,
                timeout_ms,
            } => format!("replicas:{replicas}:{timeout_ms}"),
            Self::Aof { timeout_ms } => format!("aof:{timeout_ms}"),
        }
    }

    /// Parses the metadata field (missing, so empty, in filters made before durability
    /// existed: [`Durability::None`]); `None` for any other text.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let number = |s: &str| s.parse::<u64>().ok().filter(|n| n.to_string() == s);
        let parts: Vec<&str> = text.split(':').collect();
        match parts.as_slice() {
            [] | [""] | ["none"] => Some(Self::None),
            ["replicas", n, ms] => Some(Self::Replicas {
                replicas: u32::try_from(number(n)?).ok().filter(|&n| n > 0)?,
                timeout_ms: number(ms)?,
            }),
            ["aof", ms] => Some(Self::Aof {
                timeout_ms: number(ms)?,
            }),
            _ => None,
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::None => f.write_str("none (a restart or a failover makes the filter unverified)"),
            Self::Replicas {
                replicas,
                timeout_ms,
            } => write!(
                f,
                "every write waits for {replicas} replica(s), up to {timeout_ms} ms (a failover keeps the filter)"
            ),
            Self::Aof { timeout_ms } => write!(
                f,
                "every write waits for the AOF fsync, up to {timeout_ms} ms (a restart keeps the filter)"
            ),
        }
    }
}

/// What the metadata hash holds, every field checked.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Meta {
    /// What a snapshot header would hold (the configuration the markers bind, the plan, the
    /// item count and the coverage), checked as a header is.
    pub header: Header,
    /// The creation the markers are bound to.
    pub creation: Creation,
    /// [`READY`] or [`BUILDING`].
    pub state: String,
    /// What the filter asks of its writers.
    pub durability: Durability,
    /// Schema 3 or 5: the keys' Unicode tables are not all the recorded ones.
    pub tables_mixed: bool,
    /// Schema 4 or 5: every shard ends with a write counter.
    pub counted: bool,
}

/// Why a metadata hash is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MetaError {
    /// The state is neither [`READY`] nor [`BUILDING`]: a filter being deleted, or not one
    /// this build knows.
    #[error("the filter's state is {state:?}, neither ready nor building")]
    NotReady {
        /// The state found.
        state: String,
    },
    /// A field does not hold what it should (its value is the caller's to show: the salt's
    /// must never be).
    #[error("field {field} should be {expected}")]
    Field {
        /// The field.
        field: &'static str,
        /// What it should have held.
        expected: String,
    },
    /// Every field parses, but together they make no filter a snapshot header could hold.
    #[error("the fields make no valid filter")]
    Invalid(#[source] DecodeError),
}

/// The fields of the metadata hash of a new filter made with `header` (a sharded filter's),
/// in the order they are written: schema (this build's, [`SCHEMA_COUNTED`]), creation,
/// state, the configuration ([`CONFIG_FIELDS`]), items, the plan, the coverage, durability.
#[must_use]
pub fn fields(
    header: &Header,
    creation: Creation,
    state: &str,
    durability: Durability,
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
    fields.push(("durability", durability.field()));
    fields
}

/// Parses a metadata hash (`get` gives each field's value, empty when missing); every field
/// is checked, none guessed, in this order: the state, the durability, the schema, the
/// creation, the configuration, the generation, the item count, the plan, the store binding,
/// and then the header they make.
///
/// # Errors
/// The first check that fails.
pub fn parse<'a>(get: impl Fn(&'static str) -> &'a str) -> Result<Meta, MetaError> {
    let bad = |field: &'static str, expected: &str| MetaError::Field {
        field,
        expected: expected.to_owned(),
    };
    let field = |e: config::FieldError| MetaError::Field {
        field: e.field,
        expected: e.expected,
    };
    let state = get("state");
    if state != READY && state != BUILDING {
        return Err(MetaError::NotReady {
            state: state.to_owned(),
        });
    }
    let durability = Durability::parse(get("durability"))
        .ok_or_else(|| bad("durability", "none, replicas:N:MS or aof:MS"))?;
    if !READS.contains(&get("schema")) {
        return Err(bad("schema", &READS.join(" or ")));
    }
    let creation = Creation::parse(get("creation"))
        .ok_or_else(|| bad("creation", "32 lowercase hex digits, not all zero"))?;
    let mut header = config::parse_config(&get).map_err(field)?;
    let number = |name: &'static str| config::parse_number(name, get(name)).map_err(field);
    header.dataset_generation = DatasetGeneration::new(number("generation")?);
    header.item_count = number("items")?;
    header.plan = match (get("capacity"), get("target_fpr")) {
        // Filters created before the plan was recorded, or sized by m and k alone.
        ("", "") => None,
        (capacity, rate) => {
            let capacity = config::parse_number("capacity", capacity).map_err(field)?;
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
    header.check().map_err(MetaError::Invalid)?;
    Ok(Meta {
        header,
        creation,
        state: state.to_owned(),
        durability,
        tables_mixed: matches!(get("schema"), SCHEMA_MIXED | SCHEMA_COUNTED_MIXED),
        counted: matches!(get("schema"), SCHEMA_COUNTED | SCHEMA_COUNTED_MIXED),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use bloom_format::{KeyEncodingId, KeyEncodingSpec, LayoutId, PositionRuleId};

    #[test]
    fn durability_round_trips_through_its_field() {
        for d in [
            Durability::None,
            Durability::Replicas {
                replicas: 2,
                timeout_ms: 500,
            },
            Durability::Aof { timeout_ms: 1000 },
        ] {
            assert_eq!(Durability::parse(&d.field()), Some(d));
        }
        assert_eq!(Durability::parse(""), Some(Durability::None));
        for bad in ["replicas:0:5", "replicas:x:5", "aof", "aof:05", "other"] {
            assert_eq!(Durability::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn creations_are_lowercase_hex_and_not_zero() {
        let parse_creation = |text: &str| Creation::parse(text).map(Creation::bytes);
        assert_eq!(parse_creation(&"01".repeat(16)), Some([1; 16]));
        assert_eq!(parse_creation(&"00".repeat(16)), None);
        assert_eq!(parse_creation(&"AB".repeat(16)), None);
        assert_eq!(parse_creation(&"01".repeat(15)), None);
        assert_eq!(Creation::from_bytes([0; 16]), None);
        let creation = Creation::from_bytes([0xa5; 16]).unwrap();
        assert_eq!(Creation::parse(&creation.hex()), Some(creation));
    }

    fn header() -> Header {
        let spec = KeyEncodingSpec::new(KeyEncodingId::Bytes, 1);
        let mut header = Header::new(4096, 3, PositionRuleId::Xxh3_128, LayoutId::ShardedV2, spec);
        header.layout_parameter = 4;
        header.plan = Plan::new(300, 0.01);
        header.item_count = 12;
        header
    }

    #[test]
    fn the_fields_written_read_back() {
        let creation = Creation::from_bytes([3; 16]).unwrap();
        let durability = Durability::Aof { timeout_ms: 50 };
        let written = fields(&header(), creation, READY, durability);
        let get = |name: &'static str| {
            written
                .iter()
                .find(|(f, _)| *f == name)
                .map_or("", |(_, v)| v.as_str())
        };
        let meta = parse(get).unwrap();
        assert_eq!(meta.header, header());
        assert_eq!(meta.creation, creation);
        assert_eq!(meta.state, READY);
        assert_eq!(meta.durability, durability);
        assert!(meta.counted && !meta.tables_mixed);
    }

    #[test]
    fn every_field_is_checked() {
        let creation = Creation::from_bytes([3; 16]).unwrap();
        let written = fields(&header(), creation, BUILDING, Durability::None);
        let refused = |name: &str, value: &str| {
            let mut map: HashMap<&str, String> = written.iter().cloned().collect();
            map.insert(name, value.to_owned());
            parse(|f| map.get(f).map_or("", String::as_str)).err()
        };
        assert_eq!(
            refused("state", "deleting"),
            Some(MetaError::NotReady {
                state: "deleting".into()
            })
        );
        let field_of = |e: Option<MetaError>| match e {
            Some(MetaError::Field { field, .. }) => Some(field),
            _ => None,
        };
        for (name, value) in [
            ("durability", "some"),
            ("schema", "bloom-redis/9"),
            ("creation", ""),
            ("rule", "sha256-split4x"),
            ("salt", "XY"),
            ("generation", "01"),
            ("items", "-1"),
            ("target_fpr", "2"),
            ("store_identity", "ab"),
        ] {
            assert_eq!(field_of(refused(name, value)), Some(name), "{name}");
        }
        assert!(matches!(
            refused("hashes", "0"),
            Some(MetaError::Invalid(_))
        ));
    }
}
