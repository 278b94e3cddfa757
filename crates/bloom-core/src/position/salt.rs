//! [`Salt`]: the per-filter secret mixed into every digest.

use std::fmt;

/// A per-filter secret mixed into every digest (keyed hashing).
///
/// Without a salt, anyone can compute where a key lands and craft keys that fill the filter
/// or that collide with a chosen key ("The Power of Evil Choices in Bloom Filters", Gerbet,
/// Cunche and Lauradoux, 2015). With a secret salt of 16 bytes or more they cannot.
///
/// The salted digest is `SHA-256(block || key)`, where `block` is 64 bytes: the salt length
/// as one byte, the salt, then zeros. Because the block fills exactly one SHA-256 block, its
/// compression is computed once per filter and a salted lookup costs the same as an unsalted
/// one. This is a secret-prefix construction rather than HMAC: it is sound here because no
/// digest is ever revealed, only bits of the filter. The salt is stored in the snapshot, so
/// a snapshot must be kept as private as the salt.
///
/// The empty salt means "no salt": the digest is then plain `SHA-256(key)`. Salting is off by
/// default.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Salt(Vec<u8>);

/// Shows the length only: a salt is a secret and must not end up in logs.
impl fmt::Debug for Salt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("Salt(none)")
        } else {
            write!(f, "Salt(<{} secret bytes>)", self.0.len())
        }
    }
}

/// A salt longer than [`Salt::MAX_LEN`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("salt is {found} bytes long; at most {max} bytes are allowed", max = Salt::MAX_LEN)]
pub struct SaltTooLong {
    /// The length that was given.
    pub found: usize,
}

/// The random source failed while making a salt.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the operating system's random source failed: {0}")]
pub struct RandomSaltError(pub String);

impl Salt {
    /// The longest salt accepted, in bytes.
    pub const MAX_LEN: usize = 32;

    /// A salt of the given bytes; empty means no salt.
    ///
    /// # Errors
    /// [`SaltTooLong`] for more than [`Salt::MAX_LEN`] bytes.
    pub fn new(bytes: &[u8]) -> Result<Self, SaltTooLong> {
        if bytes.len() > Self::MAX_LEN {
            return Err(SaltTooLong { found: bytes.len() });
        }
        Ok(Self(bytes.to_vec()))
    }

    /// A fresh 32-byte salt from the operating system's random source.
    ///
    /// # Errors
    /// [`RandomSaltError`] when the random source fails.
    pub fn random() -> Result<Self, RandomSaltError> {
        let mut bytes = vec![0; Self::MAX_LEN];
        getrandom::fill(&mut bytes).map_err(|e| RandomSaltError(e.to_string()))?;
        Ok(Self(bytes))
    }

    /// The salt bytes; empty when there is no salt.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Whether there is no salt.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn prefix_block(&self) -> [u8; 64] {
        let mut block = [0u8; 64];
        // Salt::new caps the length at 32, so it fits in one byte and in the block.
        let len = u8::try_from(self.0.len()).unwrap_or(u8::MAX);
        block[0] = len;
        for (dst, src) in block[1..].iter_mut().zip(&self.0) {
            *dst = *src;
        }
        block
    }
}
