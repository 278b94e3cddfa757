//! Converting filters to and from `bloom-format` headers and snapshots.

use bloom_format::{DatasetGeneration, Header, IdKind, KeyEncodingSpec, LayoutId};

use crate::bits::BitsError;
use crate::config::{ConfigError, CountingError, FilterConfig};
use crate::encoding::{KeyEncoding, UnicodeTables};
use crate::layout::Layout;
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
    /// The parameters are outside what this build accepts: m above
    /// [`MAX_BITS`](crate::MAX_BITS), k above [`MAX_HASHES`](crate::MAX_HASHES), or k above
    /// the rule's maximum (4 for `sha256-split4`).
    #[error("snapshot parameters are not usable: {0}")]
    Config(ConfigError),
    /// The payload could not become a bit array.
    #[error("snapshot payload is not usable: {0}")]
    Bits(BitsError),
    /// The snapshot holds a counting filter ([`LayoutId::Counting4`]): load it with
    /// [`Filter::from_snapshot`](crate::Filter::from_snapshot) as a
    /// [`CountingBloomFilter`](crate::CountingBloomFilter)
    /// (and project it with `to_bloom_filter` for a plain one).
    #[error(
        "snapshot holds a counting filter (layout counting-4bit); load it as a counting filter"
    )]
    IsCounting,
    /// The snapshot holds a scalable filter ([`LayoutId::Scalable`], a chain of stages):
    /// load it with [`Filter::from_snapshot`](crate::Filter::from_snapshot) as a
    /// [`ScalableBloomFilter`](crate::ScalableBloomFilter).
    #[error(
        "snapshot holds a scalable filter (layout scalable, a chain of stages), not a single filter; load it as a scalable filter"
    )]
    IsScalable,
    /// A counting filter was asked for, and the snapshot holds a plain filter.
    #[error("snapshot holds a plain filter (layout {layout}), not a counting filter")]
    NotCounting {
        /// The snapshot's layout.
        layout: LayoutId,
    },
    /// The snapshot's configuration has no counting form.
    #[error("snapshot parameters are not usable: {0}")]
    Counting(CountingError),
}

impl From<CountingError> for SnapshotError {
    fn from(e: CountingError) -> Self {
        match e {
            CountingError::Alloc(a) => Self::Bits(BitsError::Alloc(a)),
            other => Self::Counting(other),
        }
    }
}

impl FilterConfig {
    /// The configuration a snapshot header describes, with the Unicode tables the header
    /// records (see [`UnicodeTables`] for what differing tables mean).
    ///
    /// # Errors
    /// [`SnapshotError::Unsupported`] for rules, encodings or layouts this build does not
    /// implement, [`SnapshotError::Config`] for parameters it does not accept,
    /// [`SnapshotError::IsCounting`] for a counting filter's header (see
    /// [`FilterConfig::from_any_header`]), and
    /// [`SnapshotError::IsScalable`] for a chain's (see
    /// [`ScalableBloomFilter::stage_configs`](crate::ScalableBloomFilter::stage_configs)).
    pub fn from_header(header: &Header) -> Result<Self, SnapshotError> {
        match header.layout {
            LayoutId::Counting4 => return Err(SnapshotError::IsCounting),
            LayoutId::Scalable => return Err(SnapshotError::IsScalable),
            _ => {}
        }
        let layout = Layout::from_id(header.layout, header.layout_parameter).ok_or_else(|| {
            SnapshotError::Unsupported {
                kind: IdKind::Layout,
                found: header.layout.to_string(),
            }
        })?;
        Self::from_header_placed(header, layout)
    }

    /// The configuration of a snapshot of either kind: a plain filter's, as
    /// [`FilterConfig::from_header`], or a counting filter's, whose positions are the
    /// standard layout's. Whether
    /// it is a counting filter is the header's layout id.
    ///
    /// # Errors
    /// As [`FilterConfig::from_header`], never [`SnapshotError::IsCounting`].
    pub fn from_any_header(header: &Header) -> Result<Self, SnapshotError> {
        if header.layout == LayoutId::Counting4 {
            Self::from_header_placed(header, Layout::Standard)
        } else {
            Self::from_header(header)
        }
    }

    /// [`FilterConfig::from_header`] with the positions of `layout` (a counting snapshot's
    /// are the standard layout's).
    pub(crate) fn from_header_placed(
        header: &Header,
        layout: Layout,
    ) -> Result<Self, SnapshotError> {
        let unsupported = |kind, found: &dyn std::fmt::Display| SnapshotError::Unsupported {
            kind,
            found: found.to_string(),
        };
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
        let params = FilterParams::with_layout(layout, header.bit_count, header.hash_count)
            .map_err(ConfigError::from)?;
        let salt = Salt::new(&header.salt).map_err(ConfigError::from)?;
        let tables = UnicodeTables::new(spec.normalization_unicode, spec.casing_unicode);
        Ok(Self::from_parts(params, rule, encoding, salt)?
            .with_tables(tables)
            .with_plan(header.plan))
    }

    /// The header fields for this configuration: the generation the bits cover and the
    /// recorded item count; not bound to a store (set [`Header::store`] for that).
    #[must_use]
    pub fn to_header(&self, dataset_generation: DatasetGeneration, item_count: u64) -> Header {
        let encoding = self.encoding();
        let tables = self.tables();
        let mut header = Header::new(
            self.bits(),
            self.hashes(),
            self.rule().id(),
            self.layout().id(),
            KeyEncodingSpec::new(encoding.id(), encoding.version())
                .with_normalization_unicode(tables.normalization)
                .with_casing_unicode(tables.casing),
        );
        header.layout_parameter = self.layout().parameter();
        header.salt = self.salt().as_bytes().to_vec();
        header.dataset_generation = dataset_generation;
        header.item_count = item_count;
        header.plan = self.plan();
        header
    }
}

// The variants above show their cause in their message, so they do not also return it as
// their `source` (a report would show it twice); the conversions are written out.
impl From<ConfigError> for SnapshotError {
    fn from(e: ConfigError) -> Self {
        Self::Config(e)
    }
}

impl From<BitsError> for SnapshotError {
    fn from(e: BitsError) -> Self {
        Self::Bits(e)
    }
}

/// Why [`Filter::read_snapshot`](crate::Filter::read_snapshot) or
/// [`Filter::read_file`](crate::Filter::read_file) gave no filter: the snapshot could not be
/// read or failed a check of the format, or the filter type cannot hold it (`E`, the type's
/// [`Filter::LoadError`](crate::Filter::LoadError)).
///
/// The two variants are the whole split, so a `match` needs no wildcard arm.
#[derive(Debug, thiserror::Error)]
pub enum ReadSnapshotError<E> {
    /// Reading failed, or the bytes are not a valid snapshot: an I/O error, a truncated
    /// file, a checksum that does not match. [`ReadError`](bloom_format::ReadError) says
    /// which, and names the file. Nothing of it was trusted.
    #[error(transparent)]
    Read(bloom_format::ReadError),
    /// The type cannot hold the snapshot: its header names another kind of filter (load it
    /// as [`AnyFilter`](crate::AnyFilter) to take any kind) or rules this build does not
    /// implement, or the bit array cannot be allocated. A refusal from the header is made
    /// before the payload is read, so the payload was not checked.
    #[error(transparent)]
    Load(E),
}

impl<E> From<E> for ReadSnapshotError<E> {
    fn from(e: E) -> Self {
        Self::Load(e)
    }
}

impl<E> ReadSnapshotError<E> {
    /// The same error, a refusal of the snapshot converted by `into` (a plain filter's
    /// refusal as [`AnyFilter`](crate::AnyFilter)'s, say).
    ///
    /// ```
    /// use bloom_core::{ReadSnapshotError, ScalableError, SnapshotError};
    ///
    /// let plain: ReadSnapshotError<SnapshotError> = SnapshotError::IsCounting.into();
    /// let any: ReadSnapshotError<ScalableError> = plain.map_load(ScalableError::from);
    /// assert!(matches!(
    ///     any,
    ///     ReadSnapshotError::Load(ScalableError::Snapshot(SnapshotError::IsCounting))
    /// ));
    /// ```
    pub fn map_load<F>(self, into: impl FnOnce(E) -> F) -> ReadSnapshotError<F> {
        match self {
            Self::Read(e) => ReadSnapshotError::Read(e),
            Self::Load(e) => ReadSnapshotError::Load(into(e)),
        }
    }
}
