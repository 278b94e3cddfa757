//! The snapshot header: its fields, how format versions 1 and 2 lay them out, and the strict
//! checks of steps 1 to 5 of `docs/format.md`.

use std::ops::RangeInclusive;

use bytes::{BufMut, Bytes, BytesMut};

use crate::binding::{DatasetGeneration, HistoryDigest, StoreBinding, StoreIdentity};
use crate::error::{DecodeError, Section};
use crate::ids::{FormatVersion, IdKind, KeyEncodingId, LayoutId, PositionRuleId};

/// The eight magic bytes that start every snapshot: `\x89BLM\r\n\x1a\n`.
pub const MAGIC: [u8; 8] = [0x89, b'B', b'L', b'M', b'\r', b'\n', 0x1a, b'\n'];

/// The longest salt a snapshot can carry.
pub const MAX_SALT_LEN: usize = 32;

/// The most shards of the sharded layout (its layout parameter).
pub const MAX_SHARDS: u64 = 1 << 16;

/// The longest header of any version this build reads: enough buffer for any header.
pub const MAX_HEADER_LEN: u16 = layout_of(FormatVersion::V2).max_header_len();

/// Magic, version and header length: what a reader needs before it knows the header length.
pub(crate) const PREFIX_LEN: usize = 12;

/// A Unicode version, as recorded next to a text key encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UnicodeVersion {
    /// Major version.
    pub major: u8,
    /// Minor version.
    pub minor: u8,
    /// Update version.
    pub update: u8,
}

impl UnicodeVersion {
    /// The version `major.minor.update`.
    #[must_use]
    pub const fn new(major: u8, minor: u8, update: u8) -> Self {
        Self {
            major,
            minor,
            update,
        }
    }

    fn from_bytes([major, minor, update]: [u8; 3]) -> Option<Self> {
        let v = Self::new(major, minor, update);
        (v != Self::new(0, 0, 0)).then_some(v)
    }

    fn to_bytes(version: Option<Self>) -> [u8; 3] {
        version.map_or([0; 3], |v| [v.major, v.minor, v.update])
    }
}

impl std::fmt::Display for UnicodeVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.update)
    }
}

/// The key encoding recorded in a header: id, rule version, and the Unicode versions of the
/// tables the writer applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct KeyEncodingSpec {
    /// The encoding.
    pub id: KeyEncodingId,
    /// The version of the encoding rule.
    pub version: u16,
    /// The Unicode version of the normalization tables; `None` for encodings that use none.
    pub normalization_unicode: Option<UnicodeVersion>,
    /// The Unicode version of the case-mapping and `White_Space` tables; `None` for
    /// encodings that use none, and for snapshots that did not record it (format version 1,
    /// which recorded one version for all tables in `normalization_unicode`).
    pub casing_unicode: Option<UnicodeVersion>,
}

impl KeyEncodingSpec {
    /// Encoding `id` at rule `version`, with no Unicode versions recorded.
    #[must_use]
    pub const fn new(id: KeyEncodingId, version: u16) -> Self {
        Self {
            id,
            version,
            normalization_unicode: None,
            casing_unicode: None,
        }
    }

    /// Records the Unicode version of the normalization tables.
    #[must_use]
    pub const fn with_normalization_unicode(mut self, version: Option<UnicodeVersion>) -> Self {
        self.normalization_unicode = version;
        self
    }

    /// Records the Unicode version of the case-mapping and `White_Space` tables.
    #[must_use]
    pub const fn with_casing_unicode(mut self, version: Option<UnicodeVersion>) -> Self {
        self.casing_unicode = version;
        self
    }
}

/// Every header field a writer chooses. Lengths and checksums are computed when encoding.
///
/// Build one with [`Header::new`] and set the other public fields; the struct may gain fields
/// in later versions, so it cannot be built with a struct literal outside this crate.
#[derive(Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Header {
    /// The bit count `m`.
    pub bit_count: u64,
    /// Positions per key `k`.
    pub hash_count: u32,
    /// The position rule.
    pub position_rule: PositionRuleId,
    /// The payload layout.
    pub layout: LayoutId,
    /// A number whose meaning the layout defines; 0 for layouts that define none (all layouts
    /// this build knows). Always 0 in format version 1.
    pub layout_parameter: u64,
    /// The key encoding.
    pub key_encoding: KeyEncodingSpec,
    /// The salt; empty for none. At most [`MAX_SALT_LEN`] bytes.
    pub salt: Vec<u8>,
    /// The generation of the primary store that the bits fully cover; 0 when the filter is
    /// not tied to a store.
    pub dataset_generation: DatasetGeneration,
    /// The number of items inserted, as the writer recorded it.
    pub item_count: u64,
    /// The store the bits were taken from and the point of its history they cover; `None`
    /// for filters not tied to a store, and always `None` in format version 1.
    pub store: Option<StoreBinding>,
}

/// Every field but the salt, which is a secret: only its length is shown.
impl std::fmt::Debug for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Header")
            .field("bit_count", &self.bit_count)
            .field("hash_count", &self.hash_count)
            .field("position_rule", &self.position_rule)
            .field("layout", &self.layout)
            .field("layout_parameter", &self.layout_parameter)
            .field("key_encoding", &self.key_encoding)
            .field("salt", &format_args!("<{} secret bytes>", self.salt.len()))
            .field("dataset_generation", &self.dataset_generation)
            .field("item_count", &self.item_count)
            .field("store", &self.store)
            .finish()
    }
}

impl Header {
    /// A header for an empty, unsalted filter not tied to a store.
    #[must_use]
    pub const fn new(
        bit_count: u64,
        hash_count: u32,
        position_rule: PositionRuleId,
        layout: LayoutId,
        key_encoding: KeyEncodingSpec,
    ) -> Self {
        Self {
            bit_count,
            hash_count,
            position_rule,
            layout,
            layout_parameter: 0,
            key_encoding,
            salt: Vec::new(),
            dataset_generation: DatasetGeneration::ZERO,
            item_count: 0,
            store: None,
        }
    }

    /// The payload length this header's layout requires: `ceil(m / 8)` for the standard
    /// layout.
    #[must_use]
    pub const fn payload_len(&self) -> u64 {
        match self.layout {
            LayoutId::Counting4 => self.bit_count.div_ceil(2),
            LayoutId::Standard | LayoutId::Blocked512 | LayoutId::Sharded => {
                self.bit_count.div_ceil(8)
            }
        }
    }

    /// The bits of the payload that hold data: `m` for the bit layouts, `4 m` for
    /// [`LayoutId::Counting4`]. Bits past them in the last byte are padding and must be zero.
    #[must_use]
    pub const fn payload_bits(&self) -> u64 {
        match self.layout {
            LayoutId::Counting4 => self.bit_count.saturating_mul(4),
            LayoutId::Standard | LayoutId::Blocked512 | LayoutId::Sharded => self.bit_count,
        }
    }

    /// Checks the fields as decoding would (steps 5.1 to 5.13 of `docs/format.md` that
    /// concern field values), for headers that arrive by another route than a snapshot
    /// file, such as a filter's metadata kept beside its bits.
    ///
    /// # Errors
    /// The [`DecodeError`] a snapshot with this header would fail with.
    pub fn check(&self) -> Result<(), DecodeError> {
        validate(self, FormatVersion::CURRENT, self.payload_len())
    }

    /// The length of this header when encoded in the current format version.
    #[must_use]
    pub fn encoded_len(&self) -> u64 {
        u64::from(layout_of(FormatVersion::CURRENT).min_header_len()) + self.salt.len() as u64
    }
}

/// Where one format version keeps its fields. Versions share offsets 0..96; version 2 adds
/// a 48-byte extension before the salt.
#[derive(Debug)]
pub(crate) struct VersionLayout {
    /// Bytes of fixed fields before the salt.
    fixed_len: usize,
    /// `(offset, length)` of every reserved range, in offset order.
    reserved: &'static [(usize, usize)],
}

const V1_LAYOUT: VersionLayout = VersionLayout {
    fixed_len: 96,
    reserved: &[(12, 4), (39, 1), (70, 26)],
};

const V2_LAYOUT: VersionLayout = VersionLayout {
    fixed_len: 144,
    reserved: &[(12, 4), (39, 1), (70, 26), (131, 1), (140, 4)],
};

/// Offsets of the version 2 extension.
const V2_IDENTITY: usize = 96;
const V2_HISTORY: usize = 112;
const V2_CASING: usize = 128;
const V2_LAYOUT_PARAMETER: usize = 132;

pub(crate) const fn layout_of(version: FormatVersion) -> &'static VersionLayout {
    match version {
        FormatVersion::V1 => &V1_LAYOUT,
        FormatVersion::V2 => &V2_LAYOUT,
    }
}

impl VersionLayout {
    /// The header length without a salt: fixed fields plus the header CRC.
    const fn min_header_len(&self) -> u16 {
        // At most 144 + 4: fits in u16.
        (self.fixed_len + 4) as u16
    }

    const fn max_header_len(&self) -> u16 {
        self.min_header_len() + MAX_SALT_LEN as u16
    }
}

impl FormatVersion {
    /// The valid header lengths of this version: its fixed fields and CRC, plus 0 to 32
    /// bytes of salt.
    #[must_use]
    pub const fn header_len_range(self) -> RangeInclusive<u16> {
        let layout = layout_of(self);
        layout.min_header_len()..=layout.max_header_len()
    }
}

/// Encodes `header` in the current format version, with the given payload length and CRC.
/// The caller has validated the header ([`validate`]).
pub(crate) fn encode(header: &Header, payload_len: u64, payload_crc: u32) -> Bytes {
    let layout = layout_of(FormatVersion::CURRENT);
    let h = header;
    // validate() capped the salt at 32 bytes.
    let salt_len = u16::try_from(h.salt.len()).unwrap_or(u16::MAX);
    let mut buf = BytesMut::with_capacity(layout.fixed_len + h.salt.len() + 4);
    buf.put_slice(&MAGIC);
    buf.put_u16_le(FormatVersion::CURRENT.value());
    buf.put_u16_le(layout.min_header_len() + salt_len);
    buf.put_bytes(0, 4);
    buf.put_u64_le(h.bit_count);
    buf.put_u32_le(h.hash_count);
    buf.put_u16_le(h.position_rule.value());
    buf.put_u16_le(h.layout.value());
    buf.put_u16_le(h.key_encoding.id.value());
    buf.put_u16_le(h.key_encoding.version);
    buf.put_slice(&UnicodeVersion::to_bytes(
        h.key_encoding.normalization_unicode,
    ));
    buf.put_u8(0);
    buf.put_u64_le(h.dataset_generation.get());
    buf.put_u64_le(h.item_count);
    buf.put_u64_le(payload_len);
    buf.put_u32_le(payload_crc);
    buf.put_u16_le(salt_len);
    buf.put_bytes(0, 26);
    debug_assert_eq!(buf.len(), V2_IDENTITY);
    let (identity, history) = h.store.map_or(([0; 16], [0; 16]), |b| {
        (b.identity.to_bytes(), b.history.to_bytes())
    });
    buf.put_slice(&identity);
    buf.put_slice(&history);
    buf.put_slice(&UnicodeVersion::to_bytes(h.key_encoding.casing_unicode));
    buf.put_u8(0);
    buf.put_u64_le(h.layout_parameter);
    buf.put_bytes(0, 4);
    debug_assert_eq!(buf.len(), layout.fixed_len);
    buf.put_slice(&h.salt);
    let crc = crc32fast::hash(&buf);
    buf.put_u32_le(crc);
    buf.freeze()
}

/// A little-endian field reader over the header bytes that never panics: a read past the end
/// yields zeros, which cannot happen once the header length was checked.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn bytes<const N: usize>(&self, offset: usize) -> [u8; N] {
        self.0
            .get(offset..offset + N)
            .and_then(|s| <[u8; N]>::try_from(s).ok())
            .unwrap_or([0; N])
    }
    fn u8(&self, offset: usize) -> u8 {
        self.0.get(offset).copied().unwrap_or(0)
    }
    fn u16(&self, offset: usize) -> u16 {
        u16::from_le_bytes(self.bytes(offset))
    }
    fn u32(&self, offset: usize) -> u32 {
        u32::from_le_bytes(self.bytes(offset))
    }
    fn u64(&self, offset: usize) -> u64 {
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
    // 5b: the salt length agrees with the header length.
    let salt_len = usize::from(fields.u16(68));
    let expected_salt_len = crc_at - layout.fixed_len;
    if salt_len != expected_salt_len {
        return Err(DecodeError::InvalidParameter {
            field: "salt length",
            found: salt_len as u64,
            expected: format!(
                "header length - {} = {expected_salt_len}",
                layout.min_header_len()
            ),
        });
    }
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
        FormatVersion::V2 => {
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
            .get(layout.fixed_len..layout.fixed_len + salt_len)
            .unwrap_or_default()
            .to_vec(),
        dataset_generation: DatasetGeneration::new(fields.u64(40)),
        item_count: fields.u64(48),
        store,
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
fn validate_guava(header: &Header) -> Result<(), DecodeError> {
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
    if !header.bit_count.is_multiple_of(64) || header.bit_count > crate::GUAVA_MAX_BITS {
        return Err(DecodeError::InvalidParameter {
            field: "bit count (m)",
            found: header.bit_count,
            expected: format!(
                "a multiple of 64 up to {} for the {rule} rule",
                crate::GUAVA_MAX_BITS
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

fn unknown<T: Into<u16> + Copy>(kind: IdKind, found: u16, known: &[T]) -> DecodeError {
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
    if header.salt.len() > MAX_SALT_LEN {
        return Err(DecodeError::InvalidParameter {
            field: "salt length",
            found: header.salt.len() as u64,
            expected: format!("at most {MAX_SALT_LEN}"),
        });
    }
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
    if header.position_rule.is_guava() {
        validate_guava(header)?;
    }
    if header.layout == LayoutId::Sharded {
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

/// 5i: the recorded Unicode versions fit the encoding. 0.0.0 means "none": an encoding that
/// uses no tables records none; in version 2, an encoding that uses tables may record 0.0.0
/// for "not recorded" (bits built with mixed or unknown tables), which readers treat as
/// tables other than their own.
fn validate_unicode(spec: KeyEncodingSpec, version: FormatVersion) -> Result<(), DecodeError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_layouts_are_what_the_spec_says() {
        assert_eq!(FormatVersion::V1.header_len_range(), 100..=132);
        assert_eq!(FormatVersion::V2.header_len_range(), 148..=180);
        assert_eq!(MAX_HEADER_LEN, 180);
        // Reserved ranges do not overlap any field and are in offset order.
        for layout in [&V1_LAYOUT, &V2_LAYOUT] {
            for pair in layout.reserved.windows(2) {
                assert!(pair[0].0 + pair[0].1 <= pair[1].0);
            }
            let last = layout.reserved.last().unwrap();
            assert!(last.0 + last.1 <= layout.fixed_len);
        }
    }

    #[test]
    fn encoded_header_has_the_v2_length_and_decodes_back() {
        let mut header = Header::new(
            100,
            3,
            PositionRuleId::Sha256Double,
            LayoutId::Standard,
            KeyEncodingSpec::new(KeyEncodingId::NfcTrimLowercase, 1)
                .with_normalization_unicode(Some(UnicodeVersion::new(18, 0, 0)))
                .with_casing_unicode(Some(UnicodeVersion::new(17, 0, 0))),
        );
        header.salt = b"salt".to_vec();
        header.store = Some(StoreBinding::new(
            StoreIdentity::from_bytes([1; 16]),
            HistoryDigest::from_bytes([2; 16]),
        ));
        header.dataset_generation = DatasetGeneration::new(9);
        validate(&header, FormatVersion::CURRENT, 13).unwrap();
        let bytes = encode(&header, 13, 0xdead_beef);
        assert_eq!(bytes.len() as u64, header.encoded_len());
        assert_eq!(bytes.len(), 152);
        let decoded = decode(&bytes, &DecodeOptions::unlimited()).unwrap();
        assert_eq!(decoded.header, header);
        assert_eq!(decoded.version, FormatVersion::V2);
        assert_eq!(
            (decoded.payload_len, decoded.payload_crc),
            (13, 0xdead_beef)
        );
    }
}
