//! Whether a shard's node may have lost acknowledged writes: the node that answers for a shard,
//! judged against the shard's epoch record.
//!
//! Every shard has an epoch record beside it, `bloom:{NAME:S}:epoch` (same hash tag, so the
//! same node, and the same snapshot of that node's data): the node that held it when the
//! filter last knew it to be whole (its `run_id`, `master_replid` and cluster node id), and
//! the point of the primary store the shard covered then. Writers never rewrite the node
//! fields; they are recorded at creation, and again only when the filter is known whole
//! (every key added again, or a rebuild) or when a change of node cannot have lost a write.
//! The record's form is `bloom_redis_protocol::epoch`'s; the filter's [`Durability`] is in
//! its metadata (`bloom_redis_protocol::meta`).
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

use bloom_redis_protocol::epoch::Record;
use bloom_redis_protocol::meta::Durability;

use crate::node::NodeIdentity;

/// The record that names `node`.
pub(crate) fn record_of(node: &NodeIdentity) -> Record {
    Record {
        run_id: node.run_id.clone(),
        replid: node.replid.clone(),
        node_id: node.node_id.clone().unwrap_or_default(),
    }
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
