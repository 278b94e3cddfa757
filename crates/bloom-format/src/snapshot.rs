//! [`Snapshot`]: a header plus its payload in memory, encoding, and strict decoding of a
//! whole byte string.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, Section};
use crate::header::{self, DecodeOptions, Header};
use crate::ids::FormatVersion;

/// A decoded (or to-be-encoded) snapshot: the header and the opaque payload bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Snapshot {
    version: FormatVersion,
    header: Header,
    /// The header's length and CRC as stored (decoded) or as encoding will write them.
    header_len: u16,
    header_crc: u32,
    payload: Bytes,
}

/// The header (salt hidden) and the payload's size and checksum; never the payload, which
/// can be gigabytes.
impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("version", &self.version)
            .field("header", &self.header)
            .field("payload_len", &self.payload.len())
            .field(
                "payload_crc32",
                &format_args!("{:#010x}", self.payload_crc32()),
            )
            .finish_non_exhaustive()
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
    /// A snapshot of `header` and `payload` in the current format version, validated exactly
    /// as a decoder would validate it, so that everything that can be encoded can be decoded.
    ///
    /// # Errors
    /// [`EncodeError::Invalid`] with the [`DecodeError`] a reader would report.
    pub fn new(header: Header, payload: impl Into<Bytes>) -> Result<Self, EncodeError> {
        let payload = payload.into();
        check_parts(&header, &payload)?;
        let encoded = header::encode(&header, payload.len() as u64, crc32fast::hash(&payload));
        Ok(Self::from_checked(
            FormatVersion::CURRENT,
            header,
            stored_len_and_crc(&encoded),
            payload,
        ))
    }

    /// The format version the snapshot was decoded from ([`FormatVersion::CURRENT`] for one
    /// made with [`Snapshot::new`]). Encoding always writes the current version.
    #[must_use]
    pub fn format_version(&self) -> FormatVersion {
        self.version
    }

    /// The length of the header as the file holds it (the current version's for a snapshot
    /// made with [`Snapshot::new`]).
    #[must_use]
    pub fn header_len(&self) -> u16 {
        self.header_len
    }

    /// The header CRC32 as the file holds it.
    #[must_use]
    pub fn header_crc32(&self) -> u32 {
        self.header_crc
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
        self.header.encoded_len() + self.payload.len() as u64
    }

    /// The encoded header bytes in the current format version, ending with the header CRC.
    #[must_use]
    pub fn encode_header(&self) -> Bytes {
        header::encode(
            &self.header,
            self.payload.len() as u64,
            self.payload_crc32(),
        )
    }

    /// The complete encoded snapshot, in the current format version.
    #[must_use]
    pub fn encode(&self) -> Bytes {
        let header = self.encode_header();
        let mut buf = BytesMut::with_capacity(header.len() + self.payload.len());
        buf.put_slice(&header);
        buf.put_slice(&self.payload);
        buf.freeze()
    }

    /// Decodes a snapshot of any version this build reads, checking everything
    /// `docs/format.md` requires, in its order. The payload is a zero-copy slice of `input`.
    ///
    /// # Errors
    /// The first [`DecodeError`] found.
    pub fn decode(input: impl Into<Bytes>, options: &DecodeOptions) -> Result<Self, DecodeError> {
        let input: Bytes = input.into();
        let decoded = header::decode(&input, options)?;
        check_payload_size(
            decoded.header_len,
            decoded.payload_len,
            input.len() as u64,
            options,
        )?;
        // check_payload_size proved that the payload is exactly the rest of the input.
        let payload = input.slice(usize::from(decoded.header_len)..);
        check_padding(&decoded.header, &payload)?;
        let computed = crc32fast::hash(&payload);
        check_payload_crc(decoded.payload_crc, computed)?;
        Ok(Self::from_checked(
            decoded.version,
            decoded.header,
            (decoded.header_len, decoded.header_crc),
            payload,
        ))
    }

    /// Assembles a snapshot whose header and payload were checked separately.
    pub(crate) fn from_checked(
        version: FormatVersion,
        header: Header,
        (header_len, header_crc): (u16, u32),
        payload: Bytes,
    ) -> Self {
        Self {
            version,
            header,
            header_len,
            header_crc,
            payload,
        }
    }
}

/// The length and the trailing CRC of an encoded header.
fn stored_len_and_crc(encoded: &[u8]) -> (u16, u32) {
    let len = encoded.len();
    let crc = len
        .checked_sub(4)
        .and_then(|at| encoded.get(at..))
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map_or(0, u32::from_le_bytes);
    (u16::try_from(len).unwrap_or(u16::MAX), crc)
}

/// Validates a header and payload for encoding: the checks a decoder would make.
pub(crate) fn check_parts(header: &Header, payload: &[u8]) -> Result<(), DecodeError> {
    header::validate(header, FormatVersion::CURRENT, payload.len() as u64)?;
    check_padding(header, payload)
}

/// Step 6: the payload against the caller's limit and the input length.
pub(crate) fn check_payload_size(
    header_len: u16,
    payload_len: u64,
    input_len: u64,
    options: &DecodeOptions,
) -> Result<(), DecodeError> {
    check_limit(payload_len, options)?;
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

/// The first check of step 6, which stream readers make before reading the payload.
pub(crate) fn check_limit(payload_len: u64, options: &DecodeOptions) -> Result<(), DecodeError> {
    match options.max_payload_len {
        Some(limit) if payload_len > limit => Err(DecodeError::OverLimit { payload_len, limit }),
        _ => Ok(()),
    }
}

/// Step 7: the bits past the data (`m` bits, or `4 m` counter bits) in the last payload byte
/// must be zero.
pub(crate) fn check_padding(header: &Header, payload: &[u8]) -> Result<(), DecodeError> {
    check_last_byte(header, payload.last().copied().unwrap_or(0))
}

/// Step 7 for the payload's last byte alone, for readers that never hold the whole payload.
pub(crate) fn check_last_byte(header: &Header, last_byte: u8) -> Result<(), DecodeError> {
    let data_bits = header.payload_bits();
    let used = data_bits % 8;
    if used != 0 && last_byte >> used != 0 {
        return Err(DecodeError::NonZeroPadding {
            bit_count: data_bits,
            last_byte,
        });
    }
    Ok(())
}

/// Step 8.
pub(crate) fn check_payload_crc(stored: u32, computed: u32) -> Result<(), DecodeError> {
    if stored != computed {
        return Err(DecodeError::PayloadChecksumMismatch { stored, computed });
    }
    Ok(())
}
