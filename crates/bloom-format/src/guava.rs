//! Guava's `BloomFilter` stream, as `BloomFilter.writeTo` writes it and `readFrom` reads it:
//! import into a checked snapshot, and export back byte for byte.
//!
//! The stream has no magic, version or checksum, and does not record the funnel (how keys
//! became bytes): the caller states it. Its layout (all integers big-endian):
//!
//! ```text
//! offset  size  field
//!      0     1  strategy ordinal (signed byte): 0 = MURMUR128_MITZ_32, 1 = MURMUR128_MITZ_64
//!      1     1  k, positions per key (unsigned byte)
//!      2     4  N, the number of 64-bit words (signed int)
//!      6    8N  the words; bit b is bit (b mod 64) of word b / 64
//! ```
//!
//! A snapshot of such a filter has `m = 64 N`, the strategy's position rule, the standard
//! layout and the funnel's key encoding; its payload is the same words, little-endian.

// Guava's stream is big-endian by definition (Java's DataOutputStream); the snapshot format's
// little-endian rule does not apply to it.
#![allow(clippy::big_endian_bytes)]

use std::io::{self, Read, Write};

use crate::header::{DecodeOptions, Header, KeyEncodingSpec};
use crate::ids::{KeyEncodingId, LayoutId, PositionRuleId};
use crate::read::read_full;
use crate::snapshot::Snapshot;

/// The stream's fixed prefix: strategy, k, word count.
const PREFIX_LEN: usize = 6;

/// A Guava hashing strategy (`BloomFilterStrategies`), by its ordinal in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GuavaStrategy {
    /// `MURMUR128_MITZ_32`, ordinal 0: Guava before version 17.
    Mitz32,
    /// `MURMUR128_MITZ_64`, ordinal 1: the default since Guava 17.
    Mitz64,
}

impl GuavaStrategy {
    /// The strategy of an ordinal byte.
    #[must_use]
    pub const fn from_ordinal(ordinal: i8) -> Option<Self> {
        match ordinal {
            0 => Some(Self::Mitz32),
            1 => Some(Self::Mitz64),
            _ => None,
        }
    }

    /// The ordinal written to the stream.
    #[must_use]
    pub const fn ordinal(self) -> i8 {
        match self {
            Self::Mitz32 => 0,
            Self::Mitz64 => 1,
        }
    }

    /// The Java name of the strategy.
    #[must_use]
    pub const fn java_name(self) -> &'static str {
        match self {
            Self::Mitz32 => "MURMUR128_MITZ_32",
            Self::Mitz64 => "MURMUR128_MITZ_64",
        }
    }

    /// The position rule that answers as this strategy does.
    #[must_use]
    pub const fn rule(self) -> PositionRuleId {
        match self {
            Self::Mitz32 => PositionRuleId::GuavaMitz32,
            Self::Mitz64 => PositionRuleId::GuavaMitz64,
        }
    }

    /// The strategy behind a position rule, if it is one of Guava's.
    #[must_use]
    pub const fn from_rule(rule: PositionRuleId) -> Option<Self> {
        match rule {
            PositionRuleId::GuavaMitz32 => Some(Self::Mitz32),
            PositionRuleId::GuavaMitz64 => Some(Self::Mitz64),
            _ => None,
        }
    }
}

impl std::fmt::Display for GuavaStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.java_name())
    }
}

/// How the JVM side turned its keys into bytes: a Guava `Funnel`. The stream does not record
/// it, so an import must be told.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GuavaFunnel {
    /// `Funnels.stringFunnel(StandardCharsets.UTF_8)`: the UTF-8 bytes, no length prefix.
    Utf8,
    /// `Funnels.unencodedCharsFunnel()`: each UTF-16 code unit as two little-endian bytes.
    Chars,
    /// `Funnels.byteArrayFunnel()`: the bytes. `Funnels.integerFunnel()` and `longFunnel()`
    /// are this funnel over the 4 or 8 little-endian bytes of the number.
    Bytes,
}

impl GuavaFunnel {
    /// The key encoding that produces the bytes this funnel hashes.
    #[must_use]
    pub const fn encoding(self) -> KeyEncodingId {
        match self {
            Self::Utf8 => KeyEncodingId::Utf8,
            Self::Chars => KeyEncodingId::Utf16Le,
            Self::Bytes => KeyEncodingId::Bytes,
        }
    }

    /// The funnel whose bytes a key encoding produces, if Guava has one.
    #[must_use]
    pub const fn from_encoding(encoding: KeyEncodingId) -> Option<Self> {
        match encoding {
            KeyEncodingId::Utf8 => Some(Self::Utf8),
            KeyEncodingId::Utf16Le => Some(Self::Chars),
            KeyEncodingId::Bytes => Some(Self::Bytes),
            _ => None,
        }
    }

    /// The Java expression of the funnel.
    #[must_use]
    pub const fn java_name(self) -> &'static str {
        match self {
            Self::Utf8 => "Funnels.stringFunnel(UTF_8)",
            Self::Chars => "Funnels.unencodedCharsFunnel()",
            Self::Bytes => "Funnels.byteArrayFunnel()",
        }
    }
}

impl std::fmt::Display for GuavaFunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.java_name())
    }
}

/// Why a Guava stream could not be imported, or a snapshot exported as one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuavaError {
    /// The input ends before the stream does.
    #[error("Guava stream is truncated: it needs {needed} bytes, the input has {got}")]
    Truncated {
        /// The stream length the header calls for (at least the 6-byte prefix).
        needed: u64,
        /// The bytes available.
        got: u64,
    },
    /// The strategy ordinal is not 0 or 1.
    #[error(
        "unknown Guava strategy ordinal {found}: 0 (MURMUR128_MITZ_32) and 1 (MURMUR128_MITZ_64) are known"
    )]
    UnknownStrategy {
        /// The ordinal found.
        found: i8,
    },
    /// k is 0.
    #[error("Guava stream has 0 positions per key (k); Guava writes at least 1")]
    ZeroHashes,
    /// The word count is 0 or negative.
    #[error("Guava stream has {found} words; a Guava filter has at least 1")]
    InvalidWordCount {
        /// The word count found.
        found: i32,
    },
    /// The bit array is larger than the caller's limit.
    #[error("Guava stream holds {payload_len} bytes of bits, over the limit of {limit} bytes")]
    OverLimit {
        /// The bit array's size in bytes.
        payload_len: u64,
        /// The limit.
        limit: u64,
    },
    /// Bytes follow the stream.
    #[error("Guava stream is followed by more bytes (the stream is {len} bytes)")]
    TrailingBytes {
        /// The stream's length.
        len: u64,
    },
    /// Memory for the bit array could not be allocated.
    #[error("cannot allocate {bytes} bytes for the Guava bit array")]
    Alloc {
        /// The size requested.
        bytes: u64,
    },
    /// The snapshot cannot be written as a Guava stream.
    #[error("cannot export as a Guava stream: {field} is {found}; Guava needs {expected}")]
    Incompatible {
        /// The field that Guava cannot represent.
        field: &'static str,
        /// Its value.
        found: String,
        /// What Guava needs.
        expected: String,
    },
    /// Reading or writing failed.
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Reads a Guava stream into a snapshot whose keys are encoded as `funnel` encodes them.
///
/// Strict and bounded: the prefix is checked (strategy, k, word count) and the bit array's
/// size is checked against `options.max_payload_len` before anything is allocated; memory
/// then grows only as the input really delivers bytes, so a stream that claims 2^31 words
/// over ten bytes of input costs nothing. The input must end exactly where the stream does.
/// The snapshot's dataset generation and item count are 0: the stream records neither.
///
/// # Errors
/// Every [`GuavaError`] variant but `Incompatible`.
pub fn import_guava(
    mut input: impl Read,
    funnel: GuavaFunnel,
    options: &DecodeOptions,
) -> Result<Snapshot, GuavaError> {
    let mut prefix = [0u8; PREFIX_LEN];
    let got = read_full(&mut input, &mut prefix)?;
    if got < PREFIX_LEN {
        return Err(GuavaError::Truncated {
            needed: PREFIX_LEN as u64,
            got: got as u64,
        });
    }
    let [ordinal, k, n0, n1, n2, n3] = prefix;
    let strategy = GuavaStrategy::from_ordinal(i8::from_be_bytes([ordinal])).ok_or(
        GuavaError::UnknownStrategy {
            found: i8::from_be_bytes([ordinal]),
        },
    )?;
    if k == 0 {
        return Err(GuavaError::ZeroHashes);
    }
    let words = i32::from_be_bytes([n0, n1, n2, n3]);
    let Ok(words @ 1..) = u64::try_from(words) else {
        return Err(GuavaError::InvalidWordCount { found: words });
    };
    let payload_len = words * 8;
    if let Some(limit) = options.max_payload_len
        && payload_len > limit
    {
        return Err(GuavaError::OverLimit { payload_len, limit });
    }
    let stream_len = PREFIX_LEN as u64 + payload_len;

    // Grow with the input, a chunk at a time, never past what the prefix announced.
    let mut payload: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    let mut limited = (&mut input).take(payload_len);
    loop {
        let read = match limited.read(&mut chunk) {
            Ok(0) => break,
            Ok(read) => read,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        let data = chunk.get(..read).unwrap_or_default();
        payload
            .try_reserve(data.len())
            .map_err(|_| GuavaError::Alloc {
                bytes: (payload.len() + data.len()) as u64,
            })?;
        payload.extend_from_slice(data);
    }
    if (payload.len() as u64) < payload_len {
        return Err(GuavaError::Truncated {
            needed: stream_len,
            got: PREFIX_LEN as u64 + payload.len() as u64,
        });
    }
    if read_full(&mut input, &mut [0u8; 1])? != 0 {
        return Err(GuavaError::TrailingBytes { len: stream_len });
    }
    // Guava's words are big-endian; the snapshot's are little-endian.
    for word in payload.chunks_exact_mut(8) {
        word.reverse();
    }
    let header = Header::new(
        words * 64,
        u32::from(k),
        strategy.rule(),
        LayoutId::Standard,
        KeyEncodingSpec::new(funnel.encoding(), 1),
    );
    Snapshot::new(header, payload).map_err(|e| GuavaError::Incompatible {
        field: "header",
        found: e.to_string(),
        expected: "a valid snapshot".into(),
    })
}

/// The strategy and funnel a snapshot would be exported with, or why it cannot be.
///
/// # Errors
/// [`GuavaError::Incompatible`] naming the first field Guava cannot represent: a rule that
/// is not one of Guava's, an encoding no funnel produces (NFC, for example), a salt.
pub fn guava_parameters(header: &Header) -> Result<(GuavaStrategy, GuavaFunnel), GuavaError> {
    let incompatible = |field, found: String, expected: &str| GuavaError::Incompatible {
        field,
        found,
        expected: expected.to_owned(),
    };
    let strategy = GuavaStrategy::from_rule(header.position_rule).ok_or_else(|| {
        incompatible(
            "the position rule",
            header.position_rule.to_string(),
            "guava-mitz64 or guava-mitz32 (a filter built with the rule guava-mitz64)",
        )
    })?;
    let funnel = GuavaFunnel::from_encoding(header.key_encoding.id).ok_or_else(|| {
        incompatible(
            "the key encoding",
            header.key_encoding.id.to_string(),
            "utf8, utf16le or bytes (a Funnel hashes no normalized form)",
        )
    })?;
    // The format guarantees the rest for Guava rules (standard layout, no salt, m a multiple
    // of 64 within an int's words, k in a byte); checked again so that a hand-built header
    // cannot produce a stream Guava would misread.
    let words = header.bit_count / 64;
    if header.layout != LayoutId::Standard
        || !header.salt.is_empty()
        || !header.bit_count.is_multiple_of(64)
        || i32::try_from(words).is_err()
        || u8::try_from(header.hash_count).is_err()
    {
        return Err(incompatible(
            "the header",
            format!(
                "m = {}, k = {}, layout {}, salt of {} bytes",
                header.bit_count,
                header.hash_count,
                header.layout,
                header.salt.len()
            ),
            "the standard layout, no salt, m a multiple of 64, k below 256",
        ));
    }
    Ok((strategy, funnel))
}

/// The length of the Guava stream of `header`'s filter.
#[must_use]
pub fn guava_stream_len(header: &Header) -> u64 {
    PREFIX_LEN as u64 + header.bit_count.div_ceil(64) * 8
}

/// The length of the Guava stream that begins with `prefix` (its first six bytes), if they
/// are a valid prefix: a known strategy, k at least 1, a positive word count. For telling
/// whether an existing file is a Guava stream before replacing it.
#[must_use]
pub fn guava_announced_len(prefix: [u8; PREFIX_LEN]) -> Option<u64> {
    let [ordinal, k, n0, n1, n2, n3] = prefix;
    GuavaStrategy::from_ordinal(i8::from_be_bytes([ordinal]))?;
    let words = u64::try_from(i32::from_be_bytes([n0, n1, n2, n3])).ok()?;
    (k >= 1 && words >= 1).then_some(PREFIX_LEN as u64 + 8 * words)
}

/// Writes a snapshot as the Guava stream that `BloomFilter.readFrom` reads (with the funnel
/// [`guava_parameters`] names), streaming the words without copying the payload.
///
/// # Errors
/// [`GuavaError::Incompatible`] as [`guava_parameters`], or [`GuavaError::Io`].
pub fn export_guava(snapshot: &Snapshot, mut out: impl Write) -> Result<(), GuavaError> {
    let header = snapshot.header();
    let (strategy, _) = guava_parameters(header)?;
    let words = i32::try_from(header.bit_count / 64).unwrap_or(i32::MAX);
    let k = u8::try_from(header.hash_count).unwrap_or(u8::MAX);
    let [ordinal] = strategy.ordinal().to_be_bytes();
    let [n0, n1, n2, n3] = words.to_be_bytes();
    out.write_all(&[ordinal, k, n0, n1, n2, n3])?;
    let mut buffer = [0u8; 64 * 1024];
    for block in snapshot.payload().chunks(buffer.len()) {
        let out_block = buffer.get_mut(..block.len()).unwrap_or_default();
        for (to, from) in out_block.chunks_exact_mut(8).zip(block.chunks_exact(8)) {
            to.copy_from_slice(from);
            to.reverse();
        }
        out.write_all(out_block)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(ordinal: u8, k: u8, words: i32, body: &[u8]) -> Vec<u8> {
        let mut s = vec![ordinal, k];
        s.extend_from_slice(&words.to_be_bytes());
        s.extend_from_slice(body);
        s
    }

    fn import(bytes: &[u8]) -> Result<Snapshot, GuavaError> {
        import_guava(bytes, GuavaFunnel::Utf8, &DecodeOptions::unlimited())
    }

    #[test]
    fn words_are_big_endian_in_the_stream_and_little_endian_in_the_snapshot() {
        let body = [0x80, 0, 0, 0, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0x01, 0x02];
        let bytes = stream(1, 3, 2, &body);
        let snapshot = import(&bytes).unwrap();
        let h = snapshot.header();
        assert_eq!(
            (h.bit_count, h.hash_count, h.position_rule, h.layout),
            (128, 3, PositionRuleId::GuavaMitz64, LayoutId::Standard)
        );
        assert_eq!(h.key_encoding.id, KeyEncodingId::Utf8);
        // Word 0 = 0x8000000000000001: bits 0 and 63. Word 1 = 0x0102: bits 65 and 72.
        let payload = snapshot.payload();
        assert_eq!(payload[0], 0x01);
        assert_eq!(payload[7], 0x80);
        assert_eq!(payload[8], 0x02);
        assert_eq!(payload[9], 0x01);
        let mut back = Vec::new();
        export_guava(&snapshot, &mut back).unwrap();
        assert_eq!(back, bytes);
    }

    #[test]
    fn hostile_prefixes_are_refused_before_allocating() {
        // 2^31 - 1 words announced over ten bytes of input.
        let err = import(&stream(1, 7, i32::MAX, &[0; 4])).unwrap_err();
        assert!(matches!(
            err,
            GuavaError::Truncated { needed, got: 10 } if needed == 6 + 8 * i32::MAX as u64
        ));
        assert!(matches!(
            import(&stream(1, 7, -5, &[])),
            Err(GuavaError::InvalidWordCount { found: -5 })
        ));
        assert!(matches!(
            import(&stream(1, 7, 0, &[])),
            Err(GuavaError::InvalidWordCount { found: 0 })
        ));
        assert!(matches!(
            import(&stream(2, 7, 1, &[0; 8])),
            Err(GuavaError::UnknownStrategy { found: 2 })
        ));
        assert!(matches!(
            import(&stream(0xff, 7, 1, &[0; 8])),
            Err(GuavaError::UnknownStrategy { found: -1 })
        ));
        assert!(matches!(
            import(&stream(1, 0, 1, &[0; 8])),
            Err(GuavaError::ZeroHashes)
        ));
        assert!(matches!(
            import(&stream(1, 7, 1, &[0; 9])),
            Err(GuavaError::TrailingBytes { len: 14 })
        ));
        for short in 0..6 {
            assert!(matches!(
                import(&stream(1, 7, 1, &[])[..short]),
                Err(GuavaError::Truncated { needed: 6, got }) if got == short as u64
            ));
        }
        let limited = import_guava(
            &stream(1, 7, 1 << 20, &[])[..],
            GuavaFunnel::Utf8,
            &DecodeOptions::with_max_payload_len(1 << 20),
        );
        assert!(matches!(
            limited,
            Err(GuavaError::OverLimit { payload_len, limit }) if payload_len == 8 << 20 && limit == 1 << 20
        ));
    }

    #[test]
    fn k_up_to_255_is_a_valid_stream() {
        let snapshot = import(&stream(0, 255, 1, &[0; 8])).unwrap();
        assert_eq!(snapshot.header().hash_count, 255);
        assert_eq!(snapshot.header().position_rule, PositionRuleId::GuavaMitz32);
    }

    #[test]
    fn only_guava_shaped_snapshots_export() {
        let mut header = Header::new(
            128,
            3,
            PositionRuleId::Sha256Double,
            LayoutId::Standard,
            KeyEncodingSpec::new(KeyEncodingId::Utf8, 1),
        );
        let snapshot = Snapshot::new(header.clone(), vec![0; 16]).unwrap();
        assert!(matches!(
            export_guava(&snapshot, Vec::new()),
            Err(GuavaError::Incompatible {
                field: "the position rule",
                ..
            })
        ));
        header.position_rule = PositionRuleId::GuavaMitz64;
        header.key_encoding = KeyEncodingSpec::new(KeyEncodingId::Nfc, 1);
        header.key_encoding.normalization_unicode = Some(crate::UnicodeVersion::new(16, 0, 0));
        let snapshot = Snapshot::new(header, vec![0; 16]).unwrap();
        assert!(matches!(
            export_guava(&snapshot, Vec::new()),
            Err(GuavaError::Incompatible {
                field: "the key encoding",
                ..
            })
        ));
    }

    #[test]
    fn the_format_keeps_guava_rules_exportable() {
        let base = Header::new(
            128,
            3,
            PositionRuleId::GuavaMitz64,
            LayoutId::Standard,
            KeyEncodingSpec::new(KeyEncodingId::Utf8, 1),
        );
        let mut odd = base.clone();
        odd.bit_count = 100;
        assert!(Snapshot::new(odd, vec![0; 13]).is_err());
        let mut salted = base.clone();
        salted.salt = vec![1; 8];
        assert!(Snapshot::new(salted, vec![0; 16]).is_err());
        let mut blocked = base.clone();
        blocked.bit_count = 512;
        blocked.layout = LayoutId::Blocked512;
        assert!(Snapshot::new(blocked, vec![0; 64]).is_err());
        let mut wide = base;
        wide.hash_count = 256;
        assert!(Snapshot::new(wide, vec![0; 16]).is_err());
    }
}
