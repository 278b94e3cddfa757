//! Whether a shard's node may have lost acknowledged writes, and the durability a filter asks
//! of its writers.
//!
//! Every shard has an epoch record beside it, `bloom:{NAME:S}:epoch` (same hash tag, so the
//! same node, and the same snapshot of that node's data): the node that held it when the
//! filter last knew it to be whole (its `run_id`, `master_replid` and cluster node id), and
//! the point of the primary store the shard covered then. Writers never rewrite the node
//! fields; they are recorded at creation, and again only when the filter is known whole
//! (every key added again, or a rebuild) or when a change of node cannot have lost a write.
//!
//! A node that answers for a shard is judged against the record:
//!
//! | what changed | what it means | may lose acknowledged writes |
//! | --- | --- | --- |
//! | nothing | the same server process, the same history | no |
//! | the replication history, from the same lineage (`master_replid2` is the recorded id) | a replica took over (a failover) | yes, unless every write waited for replicas (`replicas` durability) |
//! | the cluster node id, the recorded node still a healthy master | the shard moved (a reshard) | no |
//! | the process, nothing else to go by | a restart, or another server | yes, unless every write waited for an AOF fsync (`aof` durability) |
//!
//! A shard whose node may have lost writes is *unverified*: nothing is answered from it.

use bloom_format::{DatasetGeneration, HistoryDigest, StoreBinding, StoreIdentity};

use crate::node::NodeIdentity;

/// The key of shard `shard`'s epoch record.
pub(crate) fn epoch_key(name: &str, shard: u32) -> String {
    format!("bloom:{{{name}:{shard}}}:epoch")
}

/// What a filter asks of every writer before an insert returns, recorded in its metadata.
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
    /// The metadata field value.
    pub(crate) fn field(self) -> String {
        match self {
            Self::None => "none".into(),
            Self::Replicas {
                replicas,
                timeout_ms,
            } => format!("replicas:{replicas}:{timeout_ms}"),
            Self::Aof { timeout_ms } => format!("aof:{timeout_ms}"),
        }
    }

    /// Parses the metadata field (missing in filters made before durability existed).
    pub(crate) fn parse(text: &str) -> Option<Self> {
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

/// The fields of an epoch record.
pub(crate) const NODE_FIELDS: [&str; 3] = ["run_id", "replid", "node_id"];
/// The field of a counted shard's epoch record that holds its write count when the record's
/// coverage was written: a state of the shard with at least this count holds every bit the
/// coverage claims.
pub(crate) const WRITES_FIELD: &str = "writes";

/// A record's write count (`HMGET` of [`WRITES_FIELD`]); 0 when missing or not a count.
pub(crate) fn writes_from(field: Option<&Option<String>>) -> i64 {
    field
        .and_then(Option::as_deref)
        .and_then(|w| w.parse::<i64>().ok())
        .filter(|&w| (0..=bloom_format::sharded::WRITE_COUNT).contains(&w))
        .unwrap_or(0)
}

/// The coverage fields of an epoch record.
pub(crate) const COVERAGE_FIELDS: [&str; 3] = ["generation", "store_identity", "history_digest"];

/// A shard's epoch record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) run_id: String,
    pub(crate) replid: String,
    pub(crate) node_id: String,
}

impl Record {
    pub(crate) fn of(node: &NodeIdentity) -> Self {
        Self {
            run_id: node.run_id.clone(),
            replid: node.replid.clone(),
            node_id: node.node_id.clone().unwrap_or_default(),
        }
    }

    /// From `HMGET key run_id replid node_id`; `None` when the record is missing.
    pub(crate) fn from_fields(fields: &[Option<String>]) -> Option<Self> {
        let get = |i: usize| fields.get(i).cloned().flatten();
        let run_id = get(0).filter(|s| !s.is_empty())?;
        Some(Self {
            run_id,
            replid: get(1).unwrap_or_default(),
            node_id: get(2).unwrap_or_default(),
        })
    }

    /// The `HSET` arguments after the key.
    pub(crate) fn fields(&self) -> [(&'static str, &str); 3] {
        [
            ("run_id", self.run_id.as_str()),
            ("replid", self.replid.as_str()),
            ("node_id", self.node_id.as_str()),
        ]
    }
}

/// The coverage recorded in an epoch record, from `HMGET key generation store_identity
/// history_digest`.
pub(crate) fn coverage_from_fields(
    fields: &[Option<String>],
) -> Option<(DatasetGeneration, Option<StoreBinding>)> {
    let get = |i: usize| fields.get(i).cloned().flatten().unwrap_or_default();
    let generation = get(0).parse::<u64>().ok()?;
    let binding = match (get(1).as_str(), get(2).as_str()) {
        ("", "") => None,
        (identity, history) => {
            let identity: [u8; 16] = bloom_format::unhex(identity)?.try_into().ok()?;
            let history: [u8; 16] = bloom_format::unhex(history)?.try_into().ok()?;
            Some(StoreBinding::new(
                StoreIdentity::from_bytes(identity),
                HistoryDigest::from_bytes(history),
            ))
        }
    };
    Some((DatasetGeneration::new(generation), binding))
}

/// What a node answering for a shard means for the shard's writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The node the shard recorded.
    Same,
    /// Another node, which cannot have lost an acknowledged write (a reshard, or a change the
    /// filter's durability covers): the record may name it now.
    Covered(&'static str),
    /// Acknowledged writes may be lost; why.
    MayHaveLost(String),
}

/// Judges `node` against the shard's `record`. `healthy_master` says whether a cluster node
/// id is a master that is not failing (the node a shard moved away from must be one).
pub(crate) fn judge(
    record: Option<&Record>,
    node: &NodeIdentity,
    durability: Durability,
    healthy_master: impl Fn(&str) -> bool,
) -> Verdict {
    if !node.master {
        return Verdict::MayHaveLost(
            "the node answering for it is a replica, which may lag behind its master".into(),
        );
    }
    let Some(record) = record else {
        return Verdict::MayHaveLost(
            "it has no record of the node that holds it (a filter made by an earlier bloom-redis, or the record was deleted)".into(),
        );
    };
    if record.run_id == node.run_id && record.replid == node.replid {
        return Verdict::Same;
    }
    // Promoted: the history it served before is the recorded one. The same process under a
    // new history is not enough: it may have followed another server (and taken its data)
    // before it was promoted again. A master that kept the recorded history under another
    // process restarted, which a replica does not cover.
    let same_lineage = !record.replid.is_empty() && node.replid2 == record.replid;
    if same_lineage {
        return match durability {
            Durability::Replicas { .. } => {
                Verdict::Covered("a failover to a replica that acknowledged every write")
            }
            _ => Verdict::MayHaveLost(
                "its node failed over to a replica since the filter last knew it whole, and a replica may miss acknowledged writes".into(),
            ),
        };
    }
    if let Some(id) = &node.node_id
        && !record.node_id.is_empty()
        && *id != record.node_id
        && healthy_master(&record.node_id)
    {
        return Verdict::Covered("a reshard moved it to another master");
    }
    match durability {
        // Every write waited for the AOF's fsync; a server that came back without AOF on
        // loaded something else (an RDB, nothing).
        Durability::Aof { .. } if node.aof_enabled => {
            Verdict::Covered("a restart from an AOF that holds every acknowledged write")
        }
        _ => Verdict::MayHaveLost(
            "its node restarted (or was replaced) since the filter last knew it whole, and may have come back without acknowledged writes".into(),
        ),
    }
}

/// Whether `node_id` is a master that is not failing, per `CLUSTER NODES`.
pub(crate) fn is_healthy_master(cluster_nodes: &str, node_id: &str) -> bool {
    cluster_nodes.lines().any(|line| {
        let mut parts = line.split_whitespace();
        let id = parts.next();
        let _addr = parts.next();
        let flags = parts.next().unwrap_or("");
        id == Some(node_id)
            && flags.split(',').any(|f| f == "master")
            && !flags.split(',').any(|f| f == "fail" || f == "fail?")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(run: &str, replid: &str, replid2: &str, id: Option<&str>) -> NodeIdentity {
        NodeIdentity {
            run_id: run.into(),
            replid: replid.into(),
            replid2: replid2.into(),
            master: true,
            version: (7, 0, 15),
            aof_always: false,
            aof_enabled: false,
            node_id: id.map(Into::into),
            module: None,
        }
    }

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
    fn changes_of_node_are_judged_by_what_they_can_lose() {
        let rec = Record {
            run_id: "r1".into(),
            replid: "p1".into(),
            node_id: "n1".into(),
        };
        let none = Durability::None;
        let replicas = Durability::Replicas {
            replicas: 1,
            timeout_ms: 100,
        };
        let aof = Durability::Aof { timeout_ms: 100 };
        let any = |_: &str| true;
        let nobody = |_: &str| false;
        assert_eq!(
            judge(Some(&rec), &node("r1", "p1", "", Some("n1")), none, any),
            Verdict::Same
        );
        // A replica promoted: its old history is the recorded one.
        let promoted = node("r2", "p2", "p1", Some("n2"));
        assert!(matches!(
            judge(Some(&rec), &promoted, none, any),
            Verdict::MayHaveLost(_)
        ));
        assert!(matches!(
            judge(Some(&rec), &promoted, replicas, any),
            Verdict::Covered(_)
        ));
        // The recorded process under a new history it did not have before (it followed
        // another server, took its data, and was promoted again): not covered by replicas.
        let refollowed = node("r1", "p9", "p8", Some("n1"));
        assert!(matches!(
            judge(Some(&rec), &refollowed, replicas, any),
            Verdict::MayHaveLost(_)
        ));
        // A restart: new process, new history, same cluster node.
        let restarted = node("r3", "p3", "", Some("n1"));
        assert!(matches!(
            judge(Some(&rec), &restarted, none, any),
            Verdict::MayHaveLost(_)
        ));
        assert!(matches!(
            judge(Some(&rec), &restarted, replicas, any),
            Verdict::MayHaveLost(_)
        ));
        // With AOF durability, a restart that loaded the AOF loses nothing; one that came
        // back without AOF on loaded something else.
        assert!(matches!(
            judge(Some(&rec), &restarted, aof, any),
            Verdict::MayHaveLost(_)
        ));
        let with_aof = NodeIdentity {
            aof_enabled: true,
            ..restarted.clone()
        };
        assert!(matches!(
            judge(Some(&rec), &with_aof, aof, any),
            Verdict::Covered(_)
        ));
        // A reshard: another master, the recorded one still healthy.
        let other = node("r4", "p4", "", Some("n4"));
        assert!(matches!(
            judge(Some(&rec), &other, none, any),
            Verdict::Covered(_)
        ));
        assert!(matches!(
            judge(Some(&rec), &other, none, nobody),
            Verdict::MayHaveLost(_)
        ));
        // No record, or a replica answering.
        assert!(matches!(
            judge(None, &restarted, aof, any),
            Verdict::MayHaveLost(_)
        ));
        let mut replica = node("r1", "p1", "", Some("n1"));
        replica.master = false;
        assert!(matches!(
            judge(Some(&rec), &replica, replicas, any),
            Verdict::MayHaveLost(_)
        ));
    }

    #[test]
    fn cluster_nodes_lines_name_healthy_masters() {
        let nodes = "n1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460\n\
                     n2 127.0.0.1:7001@17001 master,fail - 0 0 2 connected\n\
                     n3 127.0.0.1:7002@17002 slave n1 0 0 3 connected\n";
        assert!(is_healthy_master(nodes, "n1"));
        assert!(!is_healthy_master(nodes, "n2"));
        assert!(!is_healthy_master(nodes, "n3"));
        assert!(!is_healthy_master(nodes, "n9"));
    }
}
