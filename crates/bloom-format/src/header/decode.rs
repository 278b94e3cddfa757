//! The strict checks of steps 1 to 5 of `docs/format.md`, and the limits a caller adds
//! ([`DecodeOptions`]).

use crate::binding::{DatasetGeneration, HistoryDigest, StoreBinding, StoreIdentity};
use crate::error::{DecodeError, Section};
use crate::ids::{FormatVersion, IdKind, KeyEncodingId, LayoutId, PositionRuleId};
use crate::unicode::UnicodeVersion;

use super::layout::{
    STAGE_LEN, V2_CASING, V2_HISTORY, V2_IDENTITY, V2_LAYOUT_PARAMETER, V3_STAGES, layout_of,
};
use super::stages::{decode_plan, decode_scalable, validate_plan, validate_stages};
use super::{GUAVA_MAX_BITS, Header, KeyEncodingSpec, MAGIC, MAX_SALT_LEN, MAX_SHARDS, PREFIX_LEN};

/// A little-endian field reader over the header bytes that never panics: a read past the end
/// yields zeros, which cannot happen once the header length was checked.
pub(super) struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    pub(super) fn bytes<const N: usize>(&self, offset: usize) -> [u8; N] {
        self.0
            .get(offset..offset + N)
            .and_then(|s| <[u8; N]>::try_from(s).ok())
            .unwrap_or([0; N])
    }
    pub(super) fn u8(&self, offset: usize) -> u8 {
        self.0.get(offset).copied().unwrap_or(0)
    }
    pub(super) fn u16(&self, offset: usize) -> u16 {
        u16::from_le_bytes(self.bytes(offset))
    }
    pub(super) fn u32(&self, offset: usize) -> u32 {
        u32::from_le_bytes(self.bytes(offset))
    }
    pub(super) fn u64(&self, offset: usize) -> u64 {
        u64::from_le_bytes(self.bytes(offset))
    }
}

/// The limits a decoder applies on top of the format's own rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeOptions {
    /// The largest payload accepted, in bytes; `None` for no limit beyond the input length.
    pub max_payload_len: Option<u64>,
    /// The newest format version accepted. Defaults to [`FormatVersion::CURRENT`]; a lower
    /// value makes this build answer as an older release would (for example, to check what
    /// a version-1-only reader says about a file).
    pub max_version: FormatVersion,
}

/// The largest payload [`DecodeOptions::default`] accepts: 1 GiB (a filter of about 900
/// million keys at 1 %), the CLI's default too. A larger filter is read with
/// [`DecodeOptions::with_max_payload_len`] or [`DecodeOptions::unlimited`].
pub const DEFAULT_MAX_PAYLOAD_LEN: u64 = 1 << 30;

/// A payload limit of [`DEFAULT_MAX_PAYLOAD_LEN`] and every version this build reads: a
/// hostile header cannot make a reader with the defaults allocate more than 1 GiB.
impl Default for DecodeOptions {
    fn default() -> Self {
        Self::with_max_payload_len(DEFAULT_MAX_PAYLOAD_LEN)
    }
}

impl DecodeOptions {
    /// No limit beyond the input itself; every version this build reads.
    #[must_use]
    pub const fn unlimited() -> Self {
        Self {
            max_payload_len: None,
            max_version: FormatVersion::CURRENT,
        }
    }

    /// Refuse payloads over `bytes` bytes.
    #[must_use]
    pub const fn with_max_payload_len(bytes: u64) -> Self {
        Self {
            max_payload_len: Some(bytes),
            max_version: FormatVersion::CURRENT,
        }
    }

    /// Refuse format versions newer than `version`.
    #[must_use]
    pub const fn with_max_version(mut self, version: FormatVersion) -> Self {
        self.max_version = version;
        self
    }
}

/// A header that passed steps 1 to 5, with what the steps after it need.
#[derive(Clone, Debug)]
pub(crate) struct DecodedHeader {
    pub(crate) version: FormatVersion,
    pub(crate) header: Header,
    pub(crate) header_len: u16,
    pub(crate) header_crc: u32,
    pub(crate) payload_len: u64,
    pub(crate) payload_crc: u32,
}

/// Steps 1 to 3: magic, version, header length and its presence in the input. Returns the
/// version and the header length.
pub(crate) fn check_prefix(
    input: &[u8],
    options: &DecodeOptions,
) -> Result<(FormatVersion, u16), DecodeError> {
    let (version, header_len) = parse_prefix(input, options)?;
    let got = input.len() as u64;
    if got < u64::from(header_len) {
        return Err(DecodeError::Truncated {
            section: Section::Header,
            needed: u64::from(header_len),
            got,
        });
    }
    Ok((version, header_len))
}

/// Steps 1 to 3 without the presence of the whole header: what a stream reader checks before
/// it reads the rest of the header.
pub(crate) fn parse_prefix(
    input: &[u8],
    options: &DecodeOptions,
) -> Result<(FormatVersion, u16), DecodeError> {
    let got = input.len() as u64;
    let magic_len = input.len().min(MAGIC.len());
    let head = input.get(..magic_len).unwrap_or_default();
    if head != MAGIC.get(..magic_len).unwrap_or_default() {
        return Err(DecodeError::BadMagic {
            found: head.to_vec(),
            expected: MAGIC,
        });
    }
    if input.len() < PREFIX_LEN {
        return Err(DecodeError::Truncated {
            section: Section::Header,
            needed: PREFIX_LEN as u64,
            got,
        });
    }
    let fields = Fields(input);
    let found = fields.u16(8);
    let version = FormatVersion::try_from(found)
        .ok()
        .filter(|v| *v <= options.max_version)
        .ok_or(DecodeError::UnsupportedVersion {
            found,
            supported: FormatVersion::OLDEST.value()..=options.max_version.value(),
        })?;
    let header_len = fields.u16(10);
    let valid = version.header_len_range();
    if !valid.contains(&header_len) {
        return Err(DecodeError::InvalidHeaderLength {
            version: version.value(),
            found: header_len,
            min: *valid.start(),
            max: *valid.end(),
        });
    }
    Ok((version, header_len))
}

/// Steps 1 to 5: everything about the header, in the order `docs/format.md` gives.
pub(crate) fn decode(input: &[u8], options: &DecodeOptions) -> Result<DecodedHeader, DecodeError> {
    let (version, header_len) = check_prefix(input, options)?;
    let layout = layout_of(version);
    let fields = Fields(input);

    // Step 4: the header CRC, stored in the header's last four bytes.
    let crc_at = usize::from(header_len) - 4;
    let stored = fields.u32(crc_at);
    let computed = crc32fast::hash(input.get(..crc_at).unwrap_or_default());
    if stored != computed {
        return Err(DecodeError::HeaderChecksumMismatch { stored, computed });
    }

    // Step 5a: reserved bytes.
    for &(start, len) in layout.reserved {
        for offset in start..start + len {
            let found = fields.u8(offset);
            if found != 0 {
                return Err(DecodeError::NonZeroReserved {
                    offset: offset as u64,
                    found,
                });
            }
        }
    }
    // 5b: the stage count (version 3) and the salt length agree with the header length.
    let stage_count = if layout.stage_directory {
        usize::from(fields.u16(V3_STAGES))
    } else {
        0
    };
    let directory_len = STAGE_LEN * stage_count;
    if directory_len > layout.max_directory_len() || layout.fixed_len + directory_len > crc_at {
        return Err(DecodeError::InvalidParameter {
            field: "stage count",
            found: stage_count as u64,
            expected: format!(
                "at most {} and at most (header length - {}) / {STAGE_LEN}",
                crate::plan::MAX_STAGES,
                layout.min_header_len()
            ),
        });
    }
    let salt_at = layout.fixed_len + directory_len;
    let salt_len = usize::from(fields.u16(68));
    let expected_salt_len = crc_at - salt_at;
    if salt_len != expected_salt_len {
        return Err(DecodeError::InvalidParameter {
            field: "salt length",
            found: salt_len as u64,
            expected: if layout.stage_directory {
                format!(
                    "header length - {} - {STAGE_LEN} x stage count = {expected_salt_len}",
                    layout.min_header_len()
                )
            } else {
                format!(
                    "header length - {} = {expected_salt_len}",
                    layout.min_header_len()
                )
            },
        });
    }
    check_salt_len(salt_len)?;
    // 5c to 5f: identifiers.
    let position_rule = PositionRuleId::try_from(fields.u16(28))
        .map_err(|found| unknown(IdKind::PositionRule, found, PositionRuleId::ALL))?;
    let layout_id = LayoutId::try_from(fields.u16(30))
        .map_err(|found| unknown(IdKind::Layout, found, LayoutId::ALL))?;
    let encoding = KeyEncodingId::try_from(fields.u16(32))
        .map_err(|found| unknown(IdKind::KeyEncoding, found, KeyEncodingId::ALL))?;
    let normalization = UnicodeVersion::from_bytes(fields.bytes(36));
    let (store, casing, layout_parameter) = match version {
        FormatVersion::V1 => (None, None, 0),
        FormatVersion::V2 | FormatVersion::V3 => {
            let identity = StoreIdentity::from_bytes(fields.bytes(V2_IDENTITY));
            let history = HistoryDigest::from_bytes(fields.bytes(V2_HISTORY));
            // 5j, checked here because only version 2 has the fields: an unbound snapshot
            // has no history digest.
            if identity.is_zero() && !history.is_zero() {
                return Err(DecodeError::InvalidParameter {
                    field: "history digest",
                    found: 1,
                    expected: "all zero when the store identity is all zero".into(),
                });
            }
            let store = (!identity.is_zero()).then_some(StoreBinding::new(identity, history));
            (
                store,
                UnicodeVersion::from_bytes(fields.bytes(V2_CASING)),
                fields.u64(V2_LAYOUT_PARAMETER),
            )
        }
    };
    let (plan, scalable) = if version >= FormatVersion::V3 {
        (
            decode_plan(&fields)?,
            decode_scalable(&fields, stage_count)?,
        )
    } else {
        (None, None)
    };
    let header = Header {
        bit_count: fields.u64(16),
        hash_count: fields.u32(24),
        position_rule,
        layout: layout_id,
        layout_parameter,
        key_encoding: KeyEncodingSpec {
            id: encoding,
            version: fields.u16(34),
            normalization_unicode: normalization,
            casing_unicode: casing,
        },
        salt: input
            .get(salt_at..salt_at + salt_len)
            .unwrap_or_default()
            .to_vec(),
        dataset_generation: DatasetGeneration::new(fields.u64(40)),
        item_count: fields.u64(48),
        store,
        plan,
        scalable,
    };
    let payload_len = fields.u64(56);
    validate(&header, version, payload_len)?;
    Ok(DecodedHeader {
        version,
        header,
        header_len,
        header_crc: stored,
        payload_len,
        payload_crc: fields.u32(64),
    })
}

/// A Guava rule's filter is always a valid Guava stream: standard layout, no salt, `m` a
/// whole number of 64-bit words that Guava's `int` word count can hold, `k` in one byte.
pub(super) fn validate_guava(header: &Header) -> Result<(), DecodeError> {
    let rule = header.position_rule;
    if header.layout != LayoutId::Standard {
        return Err(DecodeError::InvalidParameter {
            field: "layout id",
            found: u64::from(header.layout.value()),
            expected: format!("1 (standard) for the {rule} rule"),
        });
    }
    if !header.salt.is_empty() {
        return Err(DecodeError::InvalidParameter {
            field: "salt length",
            found: header.salt.len() as u64,
            expected: format!("0: the {rule} rule takes no salt"),
        });
    }
    if !header.bit_count.is_multiple_of(64) || header.bit_count > GUAVA_MAX_BITS {
        return Err(DecodeError::InvalidParameter {
            field: "bit count (m)",
            found: header.bit_count,
            expected: format!(
                "a multiple of 64 up to {} for the {rule} rule",
                GUAVA_MAX_BITS
            ),
        });
    }
    if header.hash_count > 255 {
        return Err(DecodeError::InvalidParameter {
            field: "positions per key (k)",
            found: u64::from(header.hash_count),
            expected: format!("at most 255 for the {rule} rule"),
        });
    }
    Ok(())
}

pub(super) fn unknown<T: Into<u16> + Copy>(kind: IdKind, found: u16, known: &[T]) -> DecodeError {
    let known = known
        .iter()
        .map(|&id| id.into().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    DecodeError::UnknownId { kind, found, known }
}

/// Steps 5f to 5l, shared by the decoder and the encoder so that everything that can be
/// encoded can be decoded.
pub(crate) fn validate(
    header: &Header,
    version: FormatVersion,
    payload_len: u64,
) -> Result<(), DecodeError> {
    let spec = header.key_encoding;
    if spec.version == 0 || spec.version > spec.id.latest_version() {
        return Err(DecodeError::UnknownId {
            kind: IdKind::KeyEncodingVersion,
            found: spec.version,
            known: format!("1..={} for {}", spec.id.latest_version(), spec.id),
        });
    }
    if header.bit_count == 0 {
        return Err(DecodeError::InvalidParameter {
            field: "bit count (m)",
            found: 0,
            expected: "at least 1".into(),
        });
    }
    if header.hash_count == 0 {
        return Err(DecodeError::InvalidParameter {
            field: "positions per key (k)",
            found: 0,
            expected: "at least 1".into(),
        });
    }
    // The decoder checked it at 5.2; the encoder's headers are checked here.
    check_salt_len(header.salt.len())?;
    validate_unicode(spec, version)?;
    if version == FormatVersion::V1 && header.store.is_some() {
        return Err(DecodeError::InvalidParameter {
            field: "store identity",
            found: 1,
            expected: "none: format version 1 cannot bind a snapshot to a store".into(),
        });
    }
    if header.store.is_some_and(|b| b.identity.is_zero()) {
        return Err(DecodeError::InvalidParameter {
            field: "store identity",
            found: 0,
            expected: "not all zero for a snapshot bound to a store".into(),
        });
    }
    if header.layout == LayoutId::Blocked512 && !header.bit_count.is_multiple_of(512) {
        return Err(DecodeError::InvalidParameter {
            field: "bit count (m)",
            found: header.bit_count,
            expected: "a multiple of 512 for the blocked-512 layout".into(),
        });
    }
    // 5.11 to 5.14, in the order docs/format.md gives.
    if header.position_rule.is_guava() {
        validate_guava(header)?;
    }
    if header.layout != LayoutId::Scalable {
        // A chain's stages are checked one by one in 5.14, each as a header of its own.
        validate_split_block(header)?;
    }
    validate_plan(header, version)?;
    if header.layout == LayoutId::Scalable {
        validate_stages(header, version)?;
    } else if let Some(scalable) = &header.scalable {
        return Err(DecodeError::InvalidParameter {
            field: "stage count",
            found: scalable.stages.len() as u64,
            expected: format!(
                "0, with growth and tightening 0, for the {} layout",
                header.layout
            ),
        });
    }
    if matches!(header.layout, LayoutId::Sharded | LayoutId::ShardedV2) {
        let shards = header.layout_parameter;
        if !(1..=MAX_SHARDS).contains(&shards) {
            return Err(DecodeError::InvalidParameter {
                field: "layout parameter",
                found: shards,
                expected: format!("a shard count from 1 to {MAX_SHARDS} for the sharded layout"),
            });
        }
        if !header.bit_count.is_multiple_of(64 * shards) {
            return Err(DecodeError::InvalidParameter {
                field: "bit count (m)",
                found: header.bit_count,
                expected: format!(
                    "a multiple of 64 x {shards} shards for the sharded layout (whole 64-bit words per shard)"
                ),
            });
        }
    } else if header.layout_parameter != 0 {
        return Err(DecodeError::InvalidParameter {
            field: "layout parameter",
            found: header.layout_parameter,
            expected: format!("0 for the {} layout", header.layout),
        });
    }
    if payload_len != header.payload_len() {
        return Err(DecodeError::InvalidParameter {
            field: "payload length",
            found: payload_len,
            expected: format!(
                "{} for {} {} in the {} layout",
                header.payload_len(),
                header.bit_count,
                if header.layout == LayoutId::Counting4 {
                    "counters"
                } else {
                    "bits"
                },
                header.layout
            ),
        });
    }
    Ok(())
}

/// A salt of at most [`MAX_SALT_LEN`] bytes (step 5.2).
fn check_salt_len(len: usize) -> Result<(), DecodeError> {
    if len > MAX_SALT_LEN {
        return Err(DecodeError::InvalidParameter {
            field: "salt length",
            found: len as u64,
            expected: format!("at most {MAX_SALT_LEN}"),
        });
    }
    Ok(())
}

/// The most blocks of a split-block layout: the block index is computed in 32 bits.
pub const MAX_SPLIT_BLOCKS: u64 = 1 << 32;

/// 5.12: a split-block layout has `k = 8` and whole blocks, at most [`MAX_SPLIT_BLOCKS`];
/// the 64-bit rules go with the split-block layouts only.
fn validate_split_block(header: &Header) -> Result<(), DecodeError> {
    let Some(block) = header.layout.split_block_bits() else {
        if header.position_rule.is_64_bit() {
            return Err(DecodeError::InvalidParameter {
                field: "layout id",
                found: u64::from(header.layout.value()),
                expected: format!(
                    "a split-block layout (6 or 7) for the {} rule",
                    header.position_rule
                ),
            });
        }
        return Ok(());
    };
    if header.hash_count != 8 {
        return Err(DecodeError::InvalidParameter {
            field: "positions per key (k)",
            found: u64::from(header.hash_count),
            expected: format!("8 for the {} layout (one bit per word)", header.layout),
        });
    }
    if !header.bit_count.is_multiple_of(block) || header.bit_count / block > MAX_SPLIT_BLOCKS {
        return Err(DecodeError::InvalidParameter {
            field: "bit count (m)",
            found: header.bit_count,
            expected: format!(
                "a multiple of {block} of at most 2^32 blocks for the {} layout",
                header.layout
            ),
        });
    }
    if !matches!(
        header.position_rule,
        PositionRuleId::Xxh64
            | PositionRuleId::Xxh3_64
            | PositionRuleId::Xxh3_128
            | PositionRuleId::Sha256Double
    ) {
        return Err(DecodeError::InvalidParameter {
            field: "position rule id",
            found: u64::from(header.position_rule.value()),
            expected: format!(
                "xxh64, xxh3-64, xxh3-128 or sha256-double for the {} layout",
                header.layout
            ),
        });
    }
    Ok(())
}

/// 5i: the recorded Unicode versions fit the encoding. 0.0.0 means "none": an encoding that
/// uses no tables records none; in version 2, an encoding that uses tables may record 0.0.0
/// for "not recorded" (bits built with mixed or unknown tables), which readers treat as
/// tables other than their own.
pub(super) fn validate_unicode(
    spec: KeyEncodingSpec,
    version: FormatVersion,
) -> Result<(), DecodeError> {
    let bad = |table, found: Option<UnicodeVersion>, expected: String| {
        Err(DecodeError::InvalidUnicodeVersion {
            table,
            found: found.unwrap_or(UnicodeVersion::new(0, 0, 0)),
            expected,
        })
    };
    let uses_normalization = spec.id.uses_normalization_tables();
    match spec.normalization_unicode {
        None if uses_normalization && version == FormatVersion::V1 => {
            return bad(
                "normalization",
                None,
                format!("at least 1.0.0 for the {} encoding", spec.id),
            );
        }
        // Version 1 recorded a real Unicode version (1.0.0 or later) whenever it used the
        // tables: 0.x.y is no Unicode version at all.
        Some(found) if uses_normalization && version == FormatVersion::V1 && found.major == 0 => {
            return bad(
                "normalization",
                Some(found),
                format!("at least 1.0.0 for the {} encoding", spec.id),
            );
        }
        Some(found) if !uses_normalization => {
            return bad(
                "normalization",
                Some(found),
                format!("0.0.0 for the {} encoding", spec.id),
            );
        }
        _ => {}
    }
    match spec.casing_unicode {
        Some(found) if version == FormatVersion::V1 => bad(
            "casing",
            Some(found),
            "none: format version 1 records one Unicode version".into(),
        ),
        Some(found) if !spec.id.uses_casing_tables() => bad(
            "casing",
            Some(found),
            format!("0.0.0 for the {} encoding", spec.id),
        ),
        _ => Ok(()),
    }
}
