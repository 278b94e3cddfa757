//! The snapshot codec: header fields, encoding, and strict, bounded decoding.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, Section};
use crate::ids::{FormatVersion, IdKind, KeyEncodingId, LayoutId, PositionRuleId};

/// The eight magic bytes that start every snapshot: `\x89BLM\r\n\x1a\n`.
pub const MAGIC: [u8; 8] = [0x89, b'B', b'L', b'M', b'\r', b'\n', 0x1a, b'\n'];

/// Length of the header without the salt: fixed fields (96 bytes) plus the header CRC.
pub const MIN_HEADER_LEN: u16 = 100;
/// The longest salt a snapshot can carry.
pub const MAX_SALT_LEN: usize = 32;
/// Length of the header with the longest salt.
pub const MAX_HEADER_LEN: u16 = MIN_HEADER_LEN + MAX_SALT_LEN as u16;

const FIXED_LEN: usize = 96;
const PREFIX_LEN: usize = 12;
/// Offsets and lengths of the reserved byte ranges.
const RESERVED: [(usize, usize); 3] = [(12, 4), (39, 1), (70, 26)];

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

impl std::fmt::Display for UnicodeVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.update)
    }
}

/// The key encoding recorded in a header: id, rule version, and the Unicode version of the
/// tables for encodings that use them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyEncodingSpec {
    /// The encoding.
    pub id: KeyEncodingId,
    /// The version of the encoding rule.
    pub version: u16,
    /// The Unicode version of the tables; `None` for encodings that use none.
    pub unicode: Option<UnicodeVersion>,
}

/// Every header field a writer chooses. The lengths and checksums are computed when encoding.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// The bit count `m`.
    pub bit_count: u64,
    /// Positions per key `k`.
    pub hash_count: u32,
    /// The position rule.
    pub position_rule: PositionRuleId,
    /// The payload layout.
    pub layout: LayoutId,
    /// The key encoding.
    pub key_encoding: KeyEncodingSpec,
    /// The salt; empty for none. At most [`MAX_SALT_LEN`] bytes.
    pub salt: Vec<u8>,
    /// The generation of the primary store that the bits fully cover.
    pub dataset_generation: u64,
    /// The number of items inserted, as the writer recorded it.
    pub item_count: u64,
}

impl Header {
    /// The payload length this header requires, `ceil(m / 8)`.
    #[must_use]
    pub const fn payload_len(&self) -> u64 {
        self.bit_count.div_ceil(8)
    }

    /// The encoded header length, `100 + salt length`.
    #[must_use]
    pub fn header_len(&self) -> u64 {
        u64::from(MIN_HEADER_LEN) + self.salt.len() as u64
    }
}

/// A decoded (or to-be-encoded) snapshot: the header and the opaque payload bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    header: Header,
    payload: Bytes,
}

/// Options for decoding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeOptions {
    /// The largest payload accepted, in bytes; `None` for no limit beyond the input length.
    pub max_payload_len: Option<u64>,
}

impl DecodeOptions {
    /// No limit beyond the input itself.
    #[must_use]
    pub const fn unlimited() -> Self {
        Self {
            max_payload_len: None,
        }
    }

    /// Refuse payloads over `bytes` bytes.
    #[must_use]
    pub const fn with_max_payload_len(bytes: u64) -> Self {
        Self {
            max_payload_len: Some(bytes),
        }
    }
}

/// Why [`Snapshot::new`] refused its parts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A field is invalid; the same rules as for decoding apply.
    #[error(transparent)]
    Invalid(#[from] DecodeError),
}

impl Snapshot {
    /// A snapshot of `header` and `payload`, validated exactly as a decoder would validate it,
    /// so that everything that can be encoded can be decoded.
    ///
    /// # Errors
    /// [`EncodeError::Invalid`] with the [`DecodeError`] a reader would report.
    pub fn new(header: Header, payload: impl Into<Bytes>) -> Result<Self, EncodeError> {
        let payload = payload.into();
        validate_fields(&header, header.payload_len(), header.salt.len())?;
        if payload.len() as u64 != header.payload_len() {
            return Err(DecodeError::InvalidParameter {
                field: "payload length",
                found: payload.len() as u64,
                expected: format!("ceil(m / 8) = {}", header.payload_len()),
            }
            .into());
        }
        check_padding(header.bit_count, &payload)?;
        Ok(Self { header, payload })
    }

    /// The header.
    #[must_use]
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The payload bytes.
    #[must_use]
    pub fn payload(&self) -> &Bytes {
        &self.payload
    }

    /// The header and payload, by value.
    #[must_use]
    pub fn into_parts(self) -> (Header, Bytes) {
        (self.header, self.payload)
    }

    /// The CRC32 of the payload, as stored in the header.
    #[must_use]
    pub fn payload_crc32(&self) -> u32 {
        crc32fast::hash(&self.payload)
    }

    /// The total encoded length, header plus payload.
    #[must_use]
    pub fn encoded_len(&self) -> u64 {
        self.header.header_len() + self.payload.len() as u64
    }

    /// The encoded header bytes, ending with the header CRC.
    #[must_use]
    pub fn encode_header(&self) -> Bytes {
        let h = &self.header;
        let salt_len = u16::try_from(h.salt.len()).unwrap_or(u16::MAX);
        let mut buf = BytesMut::with_capacity(usize::from(MIN_HEADER_LEN) + h.salt.len());
        buf.put_slice(&MAGIC);
        buf.put_u16_le(FormatVersion::CURRENT.value());
        buf.put_u16_le(MIN_HEADER_LEN + salt_len);
        buf.put_bytes(0, 4);
        buf.put_u64_le(h.bit_count);
        buf.put_u32_le(h.hash_count);
        buf.put_u16_le(h.position_rule.value());
        buf.put_u16_le(h.layout.value());
        buf.put_u16_le(h.key_encoding.id.value());
        buf.put_u16_le(h.key_encoding.version);
        let unicode = h.key_encoding.unicode.unwrap_or(UnicodeVersion {
            major: 0,
            minor: 0,
            update: 0,
        });
        buf.put_slice(&[unicode.major, unicode.minor, unicode.update, 0]);
        buf.put_u64_le(h.dataset_generation);
        buf.put_u64_le(h.item_count);
        buf.put_u64_le(self.payload.len() as u64);
        buf.put_u32_le(self.payload_crc32());
        buf.put_u16_le(salt_len);
        buf.put_bytes(0, 26);
        debug_assert_eq!(buf.len(), FIXED_LEN);
        buf.put_slice(&h.salt);
        let crc = crc32fast::hash(&buf);
        buf.put_u32_le(crc);
        buf.freeze()
    }

    /// The complete encoded snapshot.
    #[must_use]
    pub fn encode(&self) -> Bytes {
        let header = self.encode_header();
        let mut buf = BytesMut::with_capacity(header.len() + self.payload.len());
        buf.put_slice(&header);
        buf.put_slice(&self.payload);
        buf.freeze()
    }

    /// Decodes a snapshot, checking everything `docs/format.md` requires, in its order. The
    /// payload is a zero-copy slice of `input`.
    ///
    /// # Errors
    /// The first [`DecodeError`] found.
    pub fn decode(input: impl Into<Bytes>, options: &DecodeOptions) -> Result<Self, DecodeError> {
        let input: Bytes = input.into();
        let header_len = check_prefix(&input)?;
        let header = decode_header(&input, header_len)?;
        let payload_len = header.payload_len();
        check_payload_size(header_len, payload_len, input.len() as u64, options)?;
        let start = usize::from(header_len);
        // check_payload_size proved start + payload_len == input.len().
        let payload = input.slice(start..);
        check_padding(header.bit_count, &payload)?;
        let stored = stored_payload_crc(&input);
        let computed = crc32fast::hash(&payload);
        if stored != computed {
            return Err(DecodeError::PayloadChecksumMismatch { stored, computed });
        }
        Ok(Self { header, payload })
    }
}

/// A little-endian field reader over the header bytes that never panics: a read past the end
/// yields zero, which cannot happen once the header length was checked.
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

fn stored_payload_crc(input: &[u8]) -> u32 {
    Fields(input).u32(64)
}

/// Steps 1 to 3: magic, version, header length (and its presence). Returns the header length.
pub(crate) fn check_prefix(input: &[u8]) -> Result<u16, DecodeError> {
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
    let version = fields.u16(8);
    if FormatVersion::try_from(version).is_err() {
        return Err(DecodeError::UnsupportedVersion {
            found: version,
            supported: FormatVersion::V1.value()..=FormatVersion::CURRENT.value(),
        });
    }
    let header_len = fields.u16(10);
    if !(MIN_HEADER_LEN..=MAX_HEADER_LEN).contains(&header_len) {
        return Err(DecodeError::InvalidHeaderLength {
            found: header_len,
            min: MIN_HEADER_LEN,
            max: MAX_HEADER_LEN,
        });
    }
    if got < u64::from(header_len) {
        return Err(DecodeError::Truncated {
            section: Section::Header,
            needed: u64::from(header_len),
            got,
        });
    }
    Ok(header_len)
}

/// Steps 4 and 5: header checksum, then field validation.
pub(crate) fn decode_header(input: &[u8], header_len: u16) -> Result<Header, DecodeError> {
    let crc_at = usize::from(header_len) - 4;
    let covered = input.get(..crc_at).unwrap_or_default();
    let fields = Fields(input);
    let stored = fields.u32(crc_at);
    let computed = crc32fast::hash(covered);
    if stored != computed {
        return Err(DecodeError::HeaderChecksumMismatch { stored, computed });
    }

    for (start, len) in RESERVED {
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

    let salt_len = usize::from(fields.u16(68));
    let expected_salt_len = usize::from(header_len - MIN_HEADER_LEN);
    if salt_len != expected_salt_len {
        return Err(DecodeError::InvalidParameter {
            field: "salt length",
            found: salt_len as u64,
            expected: format!("header length - {MIN_HEADER_LEN} = {expected_salt_len}"),
        });
    }

    let unicode = UnicodeVersion {
        major: fields.u8(36),
        minor: fields.u8(37),
        update: fields.u8(38),
    };
    let raw_rule = fields.u16(28);
    let raw_layout = fields.u16(30);
    let raw_encoding = fields.u16(32);
    let encoding_version = fields.u16(34);
    let position_rule = PositionRuleId::try_from(raw_rule)
        .map_err(|found| unknown(IdKind::PositionRule, found, PositionRuleId::ALL))?;
    let layout = LayoutId::try_from(raw_layout)
        .map_err(|found| unknown(IdKind::Layout, found, LayoutId::ALL))?;
    let encoding = KeyEncodingId::try_from(raw_encoding)
        .map_err(|found| unknown(IdKind::KeyEncoding, found, KeyEncodingId::ALL))?;

    let header = Header {
        bit_count: fields.u64(16),
        hash_count: fields.u32(24),
        position_rule,
        layout,
        key_encoding: KeyEncodingSpec {
            id: encoding,
            version: encoding_version,
            unicode: encoding.uses_unicode_tables().then_some(unicode),
        },
        salt: input
            .get(FIXED_LEN..FIXED_LEN + salt_len)
            .unwrap_or_default()
            .to_vec(),
        dataset_generation: fields.u64(40),
        item_count: fields.u64(48),
    };
    if !encoding.uses_unicode_tables() && unicode.major | unicode.minor | unicode.update != 0 {
        return Err(DecodeError::InvalidParameter {
            field: "Unicode version",
            found: u64::from(u32::from_le_bytes([
                unicode.major,
                unicode.minor,
                unicode.update,
                0,
            ])),
            expected: format!("0.0.0 for the {encoding} encoding, which uses no Unicode tables"),
        });
    }
    validate_fields(&header, fields.u64(56), salt_len)?;
    Ok(header)
}

fn unknown<T: Into<u16> + Copy>(kind: IdKind, found: u16, known: &[T]) -> DecodeError {
    let known = known
        .iter()
        .map(|&id| id.into().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    DecodeError::UnknownId { kind, found, known }
}

/// The field rules shared by the encoder and the decoder.
fn validate_fields(header: &Header, payload_len: u64, salt_len: usize) -> Result<(), DecodeError> {
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
    if salt_len > MAX_SALT_LEN {
        return Err(DecodeError::InvalidParameter {
            field: "salt length",
            found: salt_len as u64,
            expected: format!("at most {MAX_SALT_LEN}"),
        });
    }
    if payload_len != header.payload_len() {
        return Err(DecodeError::InvalidParameter {
            field: "payload length",
            found: payload_len,
            expected: format!("ceil(m / 8) = {}", header.payload_len()),
        });
    }
    let spec = header.key_encoding;
    if spec.version == 0 || spec.version > spec.id.latest_version() {
        return Err(DecodeError::UnknownId {
            kind: IdKind::KeyEncodingVersion,
            found: spec.version,
            known: format!("1..={} for {}", spec.id.latest_version(), spec.id),
        });
    }
    match spec.unicode {
        Some(v) if spec.id.uses_unicode_tables() && v.major == 0 => {
            Err(DecodeError::InvalidParameter {
                field: "Unicode version",
                found: 0,
                expected: format!("at least 1.0.0 for the {} encoding", spec.id),
            })
        }
        None if spec.id.uses_unicode_tables() => Err(DecodeError::InvalidParameter {
            field: "Unicode version",
            found: 0,
            expected: format!("a Unicode version for the {} encoding", spec.id),
        }),
        Some(_) if !spec.id.uses_unicode_tables() => Err(DecodeError::InvalidParameter {
            field: "Unicode version",
            found: 1,
            expected: format!("none for the {} encoding", spec.id),
        }),
        _ => Ok(()),
    }
}

/// Step 6: the payload against the caller's limit and the input length.
pub(crate) fn check_payload_size(
    header_len: u16,
    payload_len: u64,
    input_len: u64,
    options: &DecodeOptions,
) -> Result<(), DecodeError> {
    if let Some(limit) = options.max_payload_len
        && payload_len > limit
    {
        return Err(DecodeError::OverLimit { payload_len, limit });
    }
    let expected = u64::from(header_len).saturating_add(payload_len);
    if input_len < expected {
        return Err(DecodeError::Truncated {
            section: Section::Payload,
            needed: expected,
            got: input_len,
        });
    }
    if input_len > expected {
        return Err(DecodeError::TrailingBytes {
            expected,
            found: input_len,
        });
    }
    Ok(())
}

/// Step 7: bits past `m` in the last byte must be zero.
fn check_padding(bit_count: u64, payload: &[u8]) -> Result<(), DecodeError> {
    let used = bit_count % 8;
    if used == 0 {
        return Ok(());
    }
    let last_byte = payload.last().copied().unwrap_or(0);
    if last_byte >> used != 0 {
        return Err(DecodeError::NonZeroPadding {
            bit_count,
            last_byte,
        });
    }
    Ok(())
}
