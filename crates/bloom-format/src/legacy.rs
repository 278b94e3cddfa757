//! The reference article's raw 128-byte snapshot: the bit array alone, with no header.

use crate::header::{Header, KeyEncodingSpec};
use crate::ids::{KeyEncodingId, LayoutId, PositionRuleId};
use crate::snapshot::Snapshot;

/// The length of a seed raw snapshot: 1024 bits.
pub const SEED_RAW_LEN: usize = 128;

/// Why a raw seed snapshot could not be imported or exported.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LegacyError {
    /// The input is not 128 bytes long.
    #[error("a seed raw snapshot is exactly {expected} bytes (1024 bits); got {found} bytes")]
    Length {
        /// The input length.
        found: u64,
        /// 128.
        expected: u64,
    },
    /// The snapshot's parameters differ from the seed layout.
    #[error("cannot export as seed raw: {field} is {found}, the seed layout needs {expected}")]
    Incompatible {
        /// The field that differs.
        field: &'static str,
        /// Its value.
        found: String,
        /// The seed layout's value.
        expected: String,
    },
}

/// The header that describes the seed layout: m = 1024, k = 4, `sha256-split4`, `utf8`, no
/// salt. The raw form records neither generation nor item count; both are 0.
#[must_use]
pub fn seed_raw_header() -> Header {
    Header::new(
        1024,
        4,
        PositionRuleId::Sha256Split4,
        LayoutId::Standard,
        KeyEncodingSpec::new(KeyEncodingId::Utf8, 1),
    )
}

/// Imports the raw 128-byte snapshot. The caller states that `raw` is in the seed layout: raw
/// bytes carry nothing that would let a reader recognise them.
///
/// # Errors
/// [`LegacyError::Length`] unless `raw` is exactly 128 bytes.
pub fn import_seed_raw(raw: &[u8]) -> Result<Snapshot, LegacyError> {
    if raw.len() != SEED_RAW_LEN {
        return Err(LegacyError::Length {
            found: raw.len() as u64,
            expected: SEED_RAW_LEN as u64,
        });
    }
    let header = seed_raw_header();
    // 1024 bits have no padding and the header is valid by construction.
    Snapshot::new(header, raw.to_vec()).map_err(|_| LegacyError::Length {
        found: raw.len() as u64,
        expected: SEED_RAW_LEN as u64,
    })
}

/// Exports a snapshot in the seed layout as the raw 128 bytes.
///
/// # Errors
/// [`LegacyError::Incompatible`] naming the first parameter that differs from the seed layout.
pub fn export_seed_raw(snapshot: &Snapshot) -> Result<Vec<u8>, LegacyError> {
    let h = snapshot.header();
    let seed = seed_raw_header();
    let checks: [(&'static str, String, String); 6] = [
        (
            "bit count (m)",
            h.bit_count.to_string(),
            seed.bit_count.to_string(),
        ),
        (
            "positions per key (k)",
            h.hash_count.to_string(),
            seed.hash_count.to_string(),
        ),
        (
            "position rule",
            h.position_rule.to_string(),
            seed.position_rule.to_string(),
        ),
        ("layout", h.layout.to_string(), seed.layout.to_string()),
        (
            "key encoding",
            format!("{} v{}", h.key_encoding.id, h.key_encoding.version),
            format!("{} v{}", seed.key_encoding.id, seed.key_encoding.version),
        ),
        ("salt length", h.salt.len().to_string(), "0".to_owned()),
    ];
    for (field, found, expected) in checks {
        if found != expected {
            return Err(LegacyError::Incompatible {
                field,
                found,
                expected,
            });
        }
    }
    Ok(snapshot.payload().to_vec())
}
