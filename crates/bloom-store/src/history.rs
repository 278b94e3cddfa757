//! Store identities and history digests: what binds a snapshot to the one history of one
//! store. For implementers of [`PrimaryStore`](crate::PrimaryStore); `FilteredStore` only
//! compares the values.
//!
//! A store's history is the sequence of its committed changes. Its digest at generation `g`
//! is a hash chain over that sequence:
//!
//! ```text
//! digest(0) = SHA-256("bloom-store history v1" || 0x00 || identity)[0..16]
//! digest(g) = SHA-256(digest(p) || g as u64 little-endian || tag || key)[0..16]
//! ```
//!
//! where `p` is the generation of the change before (normally `g - 1`), `tag` is `0x01` for
//! an inserted key and `0x02` for a removed one, and `key` is the key's encoded bytes. Two stores agree on `digest(g)` only
//! if they have the same identity and the same changes, in the same order, up to `g` (a
//! 128-bit truncation of SHA-256: an accidental match is not a practical concern). A store
//! that lost commits, was restored from an older copy, was recreated, or was cloned and then
//! diverged no longer has a snapshot's digest at the snapshot's generation, whatever its
//! generation is now.

use bloom_format::{DatasetGeneration, HistoryDigest, StoreIdentity};
use sha2::{Digest, Sha256};

/// Tags the genesis digest, so that no key change can produce it.
const GENESIS_TAG: &[u8] = b"bloom-store history v1\0";
/// Marks an inserted key in a history step.
const INSERTED: u8 = 0x01;
/// Marks a removed key in a history step.
const REMOVED: u8 = 0x02;

/// The operating system's random source failed while making a store identity.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot make a store identity: the operating system's random source failed: {0}")]
pub struct IdentityError(String);

/// A new random store identity (never all zero), for a store being created.
///
/// # Errors
/// [`IdentityError`] when the random source fails.
pub fn new_identity() -> Result<StoreIdentity, IdentityError> {
    let mut bytes = [0u8; StoreIdentity::LEN];
    getrandom::fill(&mut bytes).map_err(|e| IdentityError(e.to_string()))?;
    if bytes == [0; StoreIdentity::LEN] {
        // All zero means "not bound"; 2^-128 odds, but never hand it out.
        bytes[0] = 1;
    }
    Ok(StoreIdentity::from_bytes(bytes))
}

/// The digest of the empty history of the store `identity`: generation 0.
#[must_use]
pub fn genesis(identity: StoreIdentity) -> HistoryDigest {
    let mut hasher = Sha256::new();
    hasher.update(GENESIS_TAG);
    hasher.update(identity.to_bytes());
    truncate(&hasher.finalize())
}

/// The digest after inserting `key` (its encoded bytes) at `generation`, given the digest
/// of the change before it.
#[must_use]
pub fn after_insert(
    previous: HistoryDigest,
    generation: DatasetGeneration,
    key: &[u8],
) -> HistoryDigest {
    after_change(previous, generation, ChangeKind::Inserted, key)
}

/// The digest after removing `key` (its encoded bytes) at `generation`, given the digest of
/// the change before it.
#[must_use]
pub fn after_remove(
    previous: HistoryDigest,
    generation: DatasetGeneration,
    key: &[u8],
) -> HistoryDigest {
    after_change(previous, generation, ChangeKind::Removed, key)
}

/// The digest after a change of `kind` to `key` at `generation`.
#[must_use]
pub fn after_change(
    previous: HistoryDigest,
    generation: DatasetGeneration,
    kind: ChangeKind,
    key: &[u8],
) -> HistoryDigest {
    let mut hasher = Sha256::new();
    hasher.update(previous.to_bytes());
    hasher.update(generation.get().to_le_bytes());
    hasher.update([match kind {
        ChangeKind::Inserted => INSERTED,
        ChangeKind::Removed => REMOVED,
    }]);
    hasher.update(key);
    truncate(&hasher.finalize())
}

/// What a change of a store's history did to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// The key was committed (it was not in the store).
    Inserted,
    /// The key was removed (it was in the store).
    Removed,
}

/// What a store knows of the insert that put a key in it, as
/// [`PrimaryStore::generation_of`](crate::PrimaryStore::generation_of) reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyGeneration {
    /// The key is not in the store.
    Absent,
    /// The key is in the store since the insert at this generation.
    Since(DatasetGeneration),
    /// The store cannot tell (the default of the trait method).
    Unknown,
}

/// A committed removal, as [`PrimaryStore::remove`](crate::PrimaryStore::remove) reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Removal {
    /// The generation the removal got.
    pub generation: DatasetGeneration,
    /// The generation of the key's insert that it undoes (the key's newest insert).
    pub inserted_at: DatasetGeneration,
}

/// One committed change, as [`PrimaryStore::changes_since`](crate::PrimaryStore::changes_since)
/// reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change<'a> {
    /// The generation the change got.
    pub generation: DatasetGeneration,
    /// Inserted or removed.
    pub kind: ChangeKind,
    /// The key's encoded bytes.
    pub key: &'a [u8],
}

fn truncate(digest: &[u8]) -> HistoryDigest {
    let mut bytes = [0u8; HistoryDigest::LEN];
    for (dst, src) in bytes.iter_mut().zip(digest) {
        *dst = *src;
    }
    HistoryDigest::from_bytes(bytes)
}

/// A point of a store's history: a generation and the digest of the history up to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HistoryPoint {
    /// The generation.
    pub generation: DatasetGeneration,
    /// The digest of every change up to and including `generation`.
    pub digest: HistoryDigest,
}

impl HistoryPoint {
    /// The empty history of the store `identity`.
    #[must_use]
    pub fn genesis(identity: StoreIdentity) -> Self {
        Self {
            generation: DatasetGeneration::ZERO,
            digest: genesis(identity),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_is_the_documented_one() {
        let identity = StoreIdentity::from_bytes([7; 16]);
        let mut expected = Sha256::new();
        expected.update(b"bloom-store history v1\0");
        expected.update([7u8; 16]);
        assert_eq!(genesis(identity).to_bytes(), expected.finalize()[..16]);

        let g0 = genesis(identity);
        let mut expected = Sha256::new();
        expected.update(g0.to_bytes());
        expected.update(1u64.to_le_bytes());
        expected.update([1u8]);
        expected.update(b"key");
        let g1 = after_insert(g0, DatasetGeneration::new(1), b"key");
        assert_eq!(g1.to_bytes(), expected.finalize()[..16]);

        let mut expected = Sha256::new();
        expected.update(g1.to_bytes());
        expected.update(2u64.to_le_bytes());
        expected.update([2u8]);
        expected.update(b"key");
        let g2 = after_remove(g1, DatasetGeneration::new(2), b"key");
        assert_eq!(g2.to_bytes(), expected.finalize()[..16]);
        assert_ne!(g2, after_insert(g1, DatasetGeneration::new(2), b"key"));
    }

    #[test]
    fn digests_separate_identities_orders_and_generations() {
        let a = genesis(StoreIdentity::from_bytes([1; 16]));
        let b = genesis(StoreIdentity::from_bytes([2; 16]));
        assert_ne!(a, b);
        let g = DatasetGeneration::new;
        let ab = after_insert(after_insert(a, g(1), b"a"), g(2), b"b");
        let ba = after_insert(after_insert(a, g(1), b"b"), g(2), b"a");
        assert_ne!(ab, ba);
        assert_ne!(after_insert(a, g(1), b"a"), after_insert(a, g(2), b"a"));
        assert_ne!(after_insert(a, g(1), b"a"), after_insert(b, g(1), b"a"));
        let one = new_identity().unwrap();
        assert!(!one.is_zero());
        assert_ne!(one, new_identity().unwrap());
    }
}
