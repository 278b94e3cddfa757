//! The coverage fields: what a filter's bits cover (the generation of the primary store and
//! the store binding at it, as a snapshot header records them), written in the metadata hash
//! and in every shard's epoch record, so that a shard put back from an older copy says how
//! far it covers.

use bloom_format::{DatasetGeneration, HistoryDigest, StoreBinding, StoreIdentity};

/// The coverage fields, in the metadata hash and in every epoch record, in the order
/// [`coverage_fields`] writes them and [`coverage_from_fields`] takes them.
pub const COVERAGE_FIELDS: [&str; 3] = ["generation", "store_identity", "history_digest"];

/// The fields that say what the bits cover ([`COVERAGE_FIELDS`]): the generation, and the
/// store binding's identity and history digest in hex (both empty for none).
#[must_use]
pub fn coverage_fields(
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

/// The coverage recorded in an epoch record, from `HMGET key generation store_identity
/// history_digest` ([`COVERAGE_FIELDS`]); `None` when it is missing or does not parse.
#[must_use]
pub fn coverage_from_fields(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coverage_reads_back_what_it_writes() {
        let binding = StoreBinding::new(
            StoreIdentity::from_bytes([7; 16]),
            HistoryDigest::from_bytes([9; 16]),
        );
        for coverage in [
            (DatasetGeneration::new(12), Some(binding)),
            (DatasetGeneration::ZERO, None),
        ] {
            let written = coverage_fields(coverage.0, coverage.1);
            assert_eq!(written.each_ref().map(|(f, _)| *f), COVERAGE_FIELDS);
            let fields: Vec<Option<String>> = written.into_iter().map(|(_, v)| Some(v)).collect();
            assert_eq!(coverage_from_fields(&fields), Some(coverage));
        }
        assert_eq!(coverage_from_fields(&[None, None, None]), None);
        let torn = [Some("3".into()), Some("ab".into()), None];
        assert_eq!(coverage_from_fields(&torn), None);
    }
}
