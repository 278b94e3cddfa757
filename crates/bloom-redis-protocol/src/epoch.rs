//! The epoch record beside every shard (`bloom:{NAME:S}:epoch`, `docs/format.md`, "Epoch
//! records"): its fields and their text. It names the node that held the shard when the
//! filter last knew it whole (its `run_id`, `master_replid` and cluster node id), the point of
//! the primary store the shard covered then (the fields of [`crate::coverage`]), and, for a
//! counted shard, the write count that coverage was written at.
//!
//! Judging a live node against a record is bloom-redis's work; this is only the record's form.

use crate::shard::WRITE_COUNT;

/// The fields of an epoch record that name a node, in the order [`Record::from_fields`]
/// takes them (`HMGET key run_id replid node_id`).
pub const NODE_FIELDS: [&str; 3] = ["run_id", "replid", "node_id"];

/// The field of a counted shard's epoch record that holds its write count when the record's
/// coverage was written: a state of the shard with at least this count holds every bit the
/// coverage claims.
pub const WRITES_FIELD: &str = "writes";

/// A record's write count (the value of [`WRITES_FIELD`]); 0 when missing or not a count.
#[must_use]
pub fn writes_from(field: Option<&str>) -> i64 {
    field
        .and_then(|w| w.parse::<i64>().ok())
        .filter(|&w| (0..=WRITE_COUNT).contains(&w))
        .unwrap_or(0)
}

/// The node a shard's epoch record names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The server process (`INFO server` `run_id`).
    pub run_id: String,
    /// The replication history it served (`master_replid`).
    pub replid: String,
    /// Its cluster node id (`CLUSTER MYID`); empty outside a cluster.
    pub node_id: String,
}

impl Record {
    /// From `HMGET key run_id replid node_id` ([`NODE_FIELDS`]); `None` when the record is
    /// missing (no `run_id`).
    #[must_use]
    pub fn from_fields(fields: &[Option<String>]) -> Option<Self> {
        let get = |i: usize| fields.get(i).cloned().flatten();
        let run_id = get(0).filter(|s| !s.is_empty())?;
        Some(Self {
            run_id,
            replid: get(1).unwrap_or_default(),
            node_id: get(2).unwrap_or_default(),
        })
    }

    /// The `HSET` arguments after the key.
    #[must_use]
    pub fn fields(&self) -> [(&'static str, &str); 3] {
        [
            ("run_id", self.run_id.as_str()),
            ("replid", self.replid.as_str()),
            ("node_id", self.node_id.as_str()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_what_they_write() {
        let record = Record {
            run_id: "r1".into(),
            replid: "p1".into(),
            node_id: String::new(),
        };
        let fields: Vec<Option<String>> = record
            .fields()
            .iter()
            .map(|(_, v)| Some((*v).to_owned()))
            .collect();
        assert_eq!(record.fields().map(|(f, _)| f), NODE_FIELDS);
        assert_eq!(Record::from_fields(&fields), Some(record));
        assert_eq!(Record::from_fields(&[None, None, None]), None);
        assert_eq!(Record::from_fields(&[Some(String::new())]), None);
    }

    #[test]
    fn write_counts_are_counts_or_zero() {
        assert_eq!(writes_from(Some("17")), 17);
        assert_eq!(writes_from(None), 0);
        assert_eq!(writes_from(Some("-1")), 0);
        assert_eq!(writes_from(Some(&(WRITE_COUNT + 1).to_string())), 0);
        assert_eq!(writes_from(Some("x")), 0);
    }
}
