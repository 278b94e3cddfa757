//! Converting filters to and from `bloom-format` snapshots.

use bloom_format::{Header, IdKind, KeyEncodingSpec, LayoutId, Snapshot};

use crate::bits::BitsError;
use crate::config::{ConfigError, FilterConfig};
use crate::encoding::KeyEncoding;
use crate::filter::BloomFilter;
use crate::params::FilterParams;
use crate::position::{PositionRule, Salt};

/// Why a snapshot cannot become a filter in this build.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The snapshot names a rule, encoding, encoding version or layout that this build does not
    /// implement. Rebuild the filter from the primary data instead of guessing.
    #[error(
        "snapshot uses {kind} {found}, which this build does not implement; rebuild the filter from the primary data"
    )]
    Unsupported {
        /// Which table.
        kind: IdKind,
        /// The identifier found.
        found: String,
    },
    /// The parameters are outside what this build accepts (for example m above `MAX_BITS`,
    /// or k above the rule's maximum).
    #[error("snapshot parameters are not usable: {0}")]
    Config(#[from] ConfigError),
    /// The payload could not become a bit array.
    #[error("snapshot payload is not usable: {0}")]
    Bits(#[from] BitsError),
}

impl FilterConfig {
    /// The configuration a snapshot header describes.
    ///
    /// # Errors
    /// [`SnapshotError::Unsupported`] for rules, encodings or layouts this build does not
    /// implement, [`SnapshotError::Config`] for parameters it does not accept.
    pub fn from_header(header: &Header) -> Result<Self, SnapshotError> {
        let unsupported = |kind, found: &dyn std::fmt::Display| SnapshotError::Unsupported {
            kind,
            found: found.to_string(),
        };
        if header.layout != LayoutId::Standard {
            return Err(unsupported(IdKind::Layout, &header.layout));
        }
        let rule = PositionRule::from_id(header.position_rule)
            .ok_or_else(|| unsupported(IdKind::PositionRule, &header.position_rule))?;
        let spec = header.key_encoding;
        let encoding = KeyEncoding::from_id(spec.id)
            .ok_or_else(|| unsupported(IdKind::KeyEncoding, &spec.id))?;
        if spec.version != encoding.version() {
            return Err(unsupported(
                IdKind::KeyEncodingVersion,
                &format!("{} version {}", spec.id, spec.version),
            ));
        }
        let params =
            FilterParams::new(header.bit_count, header.hash_count).map_err(ConfigError::from)?;
        let salt = Salt::new(&header.salt).map_err(ConfigError::from)?;
        Ok(Self::from_parts(params, rule, encoding, salt)?)
    }

    /// The header fields for this configuration (item count and generation as given).
    #[must_use]
    pub fn to_header(&self, dataset_generation: u64, item_count: u64) -> Header {
        let encoding = self.encoding();
        Header {
            bit_count: self.bits(),
            hash_count: self.hashes(),
            position_rule: self.rule().id(),
            layout: LayoutId::Standard,
            key_encoding: KeyEncodingSpec {
                id: encoding.id(),
                version: encoding.version(),
                unicode: encoding.unicode_version(),
            },
            salt: self.salt().as_bytes().to_vec(),
            dataset_generation,
            item_count,
        }
    }
}

impl BloomFilter {
    /// A snapshot of this filter, recording `dataset_generation`: the generation of the
    /// primary store that these bits fully cover (0 when the filter is not tied to a store).
    #[must_use]
    pub fn to_snapshot(&self, dataset_generation: u64) -> Snapshot {
        let header = self
            .config()
            .to_header(dataset_generation, self.items_inserted());
        // The header comes from a valid configuration and the payload from its bit array, so
        // the format's validation cannot fail; the fallback keeps this path panic-free.
        Snapshot::new(header.clone(), self.to_bytes()).unwrap_or_else(|_| {
            unreachable!("a filter's own header and bit array are always a valid snapshot")
        })
    }

    /// The filter a snapshot holds. It answers every query exactly as the filter that wrote
    /// the snapshot.
    ///
    /// The snapshot's Unicode version is provenance and is not compared here; see
    /// `KeyEncoding::unicode_version` and `bloom-store`, which rebuilds on a difference.
    ///
    /// # Errors
    /// [`SnapshotError`] when the snapshot uses rules this build does not implement.
    pub fn from_snapshot(snapshot: &Snapshot) -> Result<Self, SnapshotError> {
        let header = snapshot.header();
        let config = FilterConfig::from_header(header)?;
        Ok(Self::from_bytes(
            config,
            snapshot.payload(),
            header.item_count,
        )?)
    }
}
