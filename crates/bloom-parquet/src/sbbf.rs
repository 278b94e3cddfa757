//! A Parquet Bloom filter as bytes: its Thrift `BloomFilterHeader`, then its bitset.

use bloom_core::{
    BloomFilter, Filter, FilterConfig, FilterParams, KeyEncoding, Layout, PositionRule,
    SPLIT_BLOCK_HASHES, Salt,
};

use crate::error::SbbfError;
use crate::thrift::{self, Reader};

/// The largest bitset Parquet writers make (arrow-rs and parquet-mr cap it at 128 MiB), and
/// the default limit of [`parse_header`].
pub const MAX_BITSET_BYTES: u64 = 128 << 20;

/// The most bytes a `BloomFilterHeader` is read from: the four fields take 16; the rest
/// leaves room for fields a later `parquet-format` may add.
pub const MAX_HEADER_BYTES: usize = 4096;

/// A decoded `BloomFilterHeader`: a split-block, XXH64, uncompressed bitset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SbbfHeader {
    /// The bitset's length in bytes: a positive multiple of 32.
    pub num_bytes: u64,
    /// The header's own length: the bitset starts this many bytes after it.
    pub header_len: usize,
}

impl SbbfHeader {
    /// The filter's bits (`m`): eight per bitset byte.
    #[must_use]
    pub const fn bits(&self) -> u64 {
        self.num_bytes * 8
    }
}

/// Decodes the `BloomFilterHeader` at the start of `bytes` (more bytes may follow: the
/// bitset). Refuses, with a typed error, anything but a split-block, XXH64, uncompressed
/// filter of whole 32-byte blocks of at most `max_bytes` bytes, and the deprecated binary
/// header.
///
/// # Errors
/// An [`SbbfError`] saying what is wrong.
pub fn parse_header(bytes: &[u8], max_bytes: u64) -> Result<SbbfHeader, SbbfError> {
    let window = bytes.get(..MAX_HEADER_BYTES).unwrap_or(bytes);
    if is_deprecated(bytes) {
        return Err(SbbfError::Deprecated);
    }
    let mut reader = Reader::new(window);
    let (mut num_bytes, mut algorithm, mut hash, mut compression) = (None, None, None, None);
    let mut last = 0;
    while let Some((id, kind)) = reader.field(&mut last)? {
        match id {
            1 if Reader::is_i32(kind) => num_bytes = Some(reader.i32()?),
            2 if Reader::is_struct(kind) => algorithm = Some(reader.union_member()?),
            3 if Reader::is_struct(kind) => hash = Some(reader.union_member()?),
            4 if Reader::is_struct(kind) => compression = Some(reader.union_member()?),
            1..=4 => return Err(SbbfError::MalformedHeader("a field of the wrong type")),
            _ => reader.skip(kind, 0)?,
        }
    }
    let num_bytes = num_bytes.ok_or(SbbfError::MissingField("numBytes"))?;
    match algorithm.ok_or(SbbfError::MissingField("algorithm"))? {
        1 => {}
        other => return Err(SbbfError::UnsupportedAlgorithm(other)),
    }
    match hash.ok_or(SbbfError::MissingField("hash"))? {
        1 => {}
        other => return Err(SbbfError::UnsupportedHash(other)),
    }
    match compression.ok_or(SbbfError::MissingField("compression"))? {
        1 => {}
        other => return Err(SbbfError::UnsupportedCompression(other)),
    }
    let num_bytes = u64::try_from(num_bytes)
        .ok()
        .filter(|&n| n > 0 && n.is_multiple_of(32))
        .ok_or(SbbfError::InvalidSize(i64::from(num_bytes)))?;
    if num_bytes > max_bytes {
        return Err(SbbfError::TooLarge {
            found: num_bytes,
            limit: max_bytes,
        });
    }
    Ok(SbbfHeader {
        num_bytes,
        header_len: reader.position(),
    })
}

/// Whether `bytes` start with the deprecated binary header of `parquet-format` before 2.7:
/// three little-endian i32s, the bitset's bytes (a positive multiple of 32), algorithm 0 and
/// hash 0 (murmur3). A Thrift header cannot start so: its first byte would be a field of
/// type 0, a stop, which ends an empty header.
fn is_deprecated(bytes: &[u8]) -> bool {
    let word = |i: usize| {
        bytes
            .get(4 * i..4 * i + 4)
            .and_then(|w| <[u8; 4]>::try_from(w).ok())
            .map(i32::from_le_bytes)
    };
    matches!(
        (word(0), word(1), word(2)),
        (Some(n), Some(0), Some(0)) if n > 0 && n % 32 == 0
    )
}

/// The configuration of a Parquet filter of `bits` bits whose keys are encoded by
/// `encoding`: the split-block layout of 256-bit blocks, eight bits per key, the `xxh64`
/// rule, no salt.
///
/// # Errors
/// [`bloom_core::ConfigError::Params`] if `bits` is not a whole number of blocks within
/// bloom-core's limits.
pub fn parquet_config(
    bits: u64,
    encoding: KeyEncoding,
) -> Result<FilterConfig, bloom_core::ConfigError> {
    let params = FilterParams::with_layout(Layout::SplitBlock256, bits, SPLIT_BLOCK_HASHES)?;
    FilterConfig::from_parts(params, PositionRule::Xxh64, encoding, Salt::default())
}

/// A filter of Parquet's bits: `bitset` is the bytes after the header, byte for byte the
/// filter's payload (bit `i` of 32-bit word `j` of block `b` is payload bit
/// `256 b + 32 j + i`). The item count, which Parquet does not record, is the estimate from
/// the fill.
///
/// # Errors
/// [`SbbfError::InvalidSize`] if `bitset` is not whole blocks, or an allocation failure.
pub fn filter_from_bitset(
    bitset: &[u8],
    encoding: KeyEncoding,
) -> Result<BloomFilter, FilterError> {
    let len = bitset.len() as u64;
    let invalid = || {
        FilterError::Sbbf(SbbfError::InvalidSize(
            i64::try_from(len).unwrap_or(i64::MAX),
        ))
    };
    if len == 0 || !len.is_multiple_of(32) {
        return Err(invalid());
    }
    let config = parquet_config(len * 8, encoding).map_err(|_| {
        FilterError::Sbbf(SbbfError::TooLarge {
            found: len,
            limit: bloom_core::MAX_BITS / 8,
        })
    })?;
    let mut fill =
        bloom_core::estimate::FillCounter::new(Layout::SplitBlock256, len * 8, SPLIT_BLOCK_HASHES);
    fill.feed(bitset);
    let items =
        bloom_core::estimate::estimated_items(fill.ones(), len * 8, SPLIT_BLOCK_HASHES).round();
    BloomFilter::from_bytes(config, bitset, items as u64).map_err(|e| match e {
        bloom_core::BitsError::Alloc(e) => FilterError::Alloc(e),
        // The length was checked above, and whole blocks have no padding.
        _ => invalid(),
    })
}

/// A Parquet filter blob (header and bitset, as parquet-testing's `bloom_filter.xxhash.bin`
/// or a column chunk's filter) as a filter.
///
/// # Errors
/// As [`parse_header`], [`SbbfError::BitsetLength`] unless exactly the announced bitset
/// follows, or an allocation failure.
pub fn decode(
    bytes: &[u8],
    encoding: KeyEncoding,
    max_bytes: u64,
) -> Result<BloomFilter, FilterError> {
    let header = parse_header(bytes, max_bytes)?;
    let bitset = &bytes[header.header_len..];
    if bitset.len() as u64 != header.num_bytes {
        return Err(FilterError::Sbbf(SbbfError::BitsetLength {
            expected: header.num_bytes,
            found: bitset.len() as u64,
        }));
    }
    filter_from_bitset(bitset, encoding)
}

/// A filter as a Parquet filter blob: the `BloomFilterHeader`, then the bitset.
///
/// # Errors
/// [`NotParquet`] unless the filter is what Parquet can read: the `split-block-256` layout,
/// the `xxh64` rule, no salt, and at most 2^31 - 1 bytes.
pub fn encode(filter: &BloomFilter) -> Result<Vec<u8>, NotParquet> {
    let config = filter.config();
    match i32::try_from(config.bits() / 8) {
        Ok(num_bytes)
            if config.layout() == Layout::SplitBlock256
                && config.rule() == PositionRule::Xxh64
                && config.salt().is_empty() =>
        {
            let mut out = thrift::encode_header(num_bytes);
            out.extend_from_slice(&filter.to_bytes());
            Ok(out)
        }
        _ => Err(NotParquet {
            layout: config.layout(),
            rule: config.rule(),
            salted: !config.salt().is_empty(),
            bits: config.bits(),
        }),
    }
}

/// Why bits could not become a filter.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterError {
    /// The blob was refused.
    #[error(transparent)]
    Sbbf(#[from] SbbfError),
    /// The bits could not be held.
    #[error(transparent)]
    Alloc(bloom_core::AllocError),
}

/// A filter that is not one Parquet reads.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error(
    "only an unsalted split-block-256 filter with the xxh64 rule, of at most 2^31 - 1 bytes, is a Parquet filter; this one is {layout}, {rule}{}, {bits} bits",
    if *salted { ", salted" } else { "" }
)]
pub struct NotParquet {
    /// Its layout.
    pub layout: Layout,
    /// Its rule.
    pub rule: PositionRule,
    /// Whether it has a salt.
    pub salted: bool,
    /// Its bits.
    pub bits: u64,
}
