//! The key scheme and the name rules: which Redis keys hold filter `NAME`, and which names a
//! filter may have (`docs/format.md`, "Sharded filters held in Redis", "Names").
//!
//! | key | holds |
//! | --- | --- |
//! | `bloom:{NAME}:meta` | the metadata hash ([`crate::meta`]) |
//! | `bloom:{NAME:S}` | shard `S` ([`crate::shard`]) |
//! | `bloom:{NAME:S}:epoch` | shard `S`'s epoch record ([`crate::epoch`]) |
//!
//! A shard's hash tag is the name and the shard number, so Redis Cluster spreads the shards
//! over its slots, and a shard and its epoch record are always in one slot (on one node, in
//! one snapshot of that node's data).

use crate::config::parse_number;

/// The longest filter name, in bytes.
pub const MAX_NAME_LEN: usize = 200;

/// Why a name or a key is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// A name that is not 1 to [`MAX_NAME_LEN`] ASCII letters, digits, `.`, `_` or `-`.
    #[error("a filter name is 1 to 200 ASCII letters, digits, '.', '_' or '-'")]
    InvalidName,
    /// A key that is not a shard key `bloom:{NAME:S}` of a valid name and a canonical shard
    /// number.
    #[error("the key is not a shard key bloom:{{NAME:S}}")]
    NotAShardKey,
}

/// Whether `name` is a valid filter name: 1 to [`MAX_NAME_LEN`] ASCII letters, digits, `.`,
/// `_` or `-` (so that it never holds a hash tag's braces or the scheme's colons).
#[must_use]
pub fn is_valid_name(name: &[u8]) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Checks a filter name ([`is_valid_name`]).
///
/// # Errors
/// [`KeyError::InvalidName`].
pub fn check_name(name: &str) -> Result<(), KeyError> {
    if is_valid_name(name.as_bytes()) {
        Ok(())
    } else {
        Err(KeyError::InvalidName)
    }
}

/// The metadata key of filter `name`: `bloom:{NAME}:meta`.
#[must_use]
pub fn meta_key(name: &str) -> String {
    format!("bloom:{{{name}}}:meta")
}

/// The key of shard `shard` of filter `name`: `bloom:{NAME:S}`. The hash tag is the name and
/// the shard number, so Redis Cluster spreads shards over its slots, and every key of one
/// shard (the bits, the epoch record) is in one slot.
#[must_use]
pub fn shard_key(name: &str, shard: u32) -> String {
    format!("bloom:{{{name}:{shard}}}")
}

/// The key of shard `shard`'s epoch record: `bloom:{NAME:S}:epoch`, in the shard's slot.
#[must_use]
pub fn epoch_key(name: &str, shard: u32) -> String {
    format!("bloom:{{{name}:{shard}}}:epoch")
}

/// A shard key taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardKey<'a> {
    /// The filter's name (a valid one).
    pub name: &'a str,
    /// The shard's number, as written (not yet checked against a shard count).
    pub shard: u64,
}

/// The name and shard number of a shard key `bloom:{NAME:S}`, with `NAME` a valid filter name
/// and `S` a canonical decimal.
///
/// # Errors
/// [`KeyError::NotAShardKey`] for any other key (a metadata key, an epoch record's, a name
/// that is not valid, a number with a sign or leading zeros).
pub fn parse_shard_key(key: &[u8]) -> Result<ShardKey<'_>, KeyError> {
    let parse = || -> Option<ShardKey<'_>> {
        let inner = key.strip_prefix(b"bloom:{")?.strip_suffix(b"}")?;
        let colon = inner.iter().rposition(|&b| b == b':')?;
        let (name, number) = (inner.get(..colon)?, inner.get(colon + 1..)?);
        if !is_valid_name(name) {
            return None;
        }
        let shard = parse_number("shards", std::str::from_utf8(number).ok()?).ok()?;
        Some(ShardKey {
            name: std::str::from_utf8(name).ok()?,
            shard,
        })
    };
    parse().ok_or(KeyError::NotAShardKey)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_of_a_filter() {
        assert_eq!(meta_key("seen"), "bloom:{seen}:meta");
        assert_eq!(shard_key("seen", 3), "bloom:{seen:3}");
        assert_eq!(epoch_key("seen", 3), "bloom:{seen:3}:epoch");
    }

    #[test]
    fn names_are_checked() {
        assert_eq!(check_name("seen-2024_v1.0"), Ok(()));
        assert_eq!(check_name(&"a".repeat(200)), Ok(()));
        for bad in ["", "a:b", "a{b}", "a b", "é", &"a".repeat(201)] {
            assert_eq!(check_name(bad), Err(KeyError::InvalidName), "{bad}");
        }
    }

    #[test]
    fn shard_keys_are_checked() {
        let shard_number = |key: &[u8]| parse_shard_key(key).ok().map(|k| k.shard);
        assert_eq!(shard_number(b"bloom:{seen:3}"), Some(3));
        assert_eq!(shard_number(b"bloom:{a:b:12}"), None);
        assert_eq!(shard_number(b"bloom:{seen:03}"), None);
        assert_eq!(shard_number(b"bloom:{:3}"), None);
        assert_eq!(shard_number(b"bloom:{seen}:meta"), None);
        assert_eq!(shard_number(b"bloom:{seen:3}:epoch"), None);
        assert_eq!(
            parse_shard_key(shard_key("seen", 7).as_bytes()),
            Ok(ShardKey {
                name: "seen",
                shard: 7
            })
        );
        assert_eq!(
            parse_shard_key(b"bloom:{\xff:1}"),
            Err(KeyError::NotAShardKey)
        );
    }
}
