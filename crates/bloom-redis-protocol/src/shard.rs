//! A shard's bytes: `M(s) | B/8 bytes of bits | M(s)`, and for a counted shard (schemas
//! `bloom-redis/4` and `/5`) a write counter `W` after them (`docs/format.md`, "Sharded filters
//! held in Redis", "Write counters"); where each part is, how long a shard is, and what its
//! markers and counter read as.
//!
//! Shard-local position `p` is Redis bit offset `64 + p`; Redis numbers bits from the most
//! significant of each byte.

use crate::marker::{MARKER_BITS, MARKER_BYTES, read_i64};

/// Bytes of a counted shard's write counter (schemas `bloom-redis/4` and `/5`), after its end
/// marker: `M(s) | bits | M(s) | W`, `W` a big-endian two's-complement 64-bit integer, as
/// Redis's `BITFIELD ... i64` reads it.
pub const COUNTER_BYTES: u64 = 8;

/// The counter's bit 62: set once a process found the shard's state older than one it had
/// seen (data put back on a live server), until the filter is declared whole again. Every
/// reader then takes the shard for unverified.
pub const ROLLED_BACK: i64 = 1 << 62;

/// The counter's bits 0 to 61: the shard's write count, advanced by one with every write
/// command, in the same command as its bits. Bit 63 is never set.
pub const WRITE_COUNT: i64 = ROLLED_BACK - 1;

/// What declaring a filter whole adds to each shard's write count (and clears
/// [`ROLLED_BACK`] with): past every count a process can have seen before the state it
/// repairs was put back, unless more than this many writes were lost.
pub const COUNT_JUMP: i64 = 1 << 32;

/// Redis's largest string (`proto-max-bulk-len`'s default, and `SETRANGE`'s limit): a whole
/// shard must fit.
pub const MAX_SHARD_BYTES: u64 = 512 << 20;

/// Where the parts of a shard of `shard_bits` bits are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardLayout {
    shard_bits: u64,
}

impl ShardLayout {
    /// The layout of a shard of `shard_bits` bits (a filter's bits over its shard count).
    #[must_use]
    pub const fn new(shard_bits: u64) -> Self {
        Self { shard_bits }
    }

    /// The shard's bits.
    #[must_use]
    pub const fn shard_bits(self) -> u64 {
        self.shard_bits
    }

    /// The shard's length in bytes, counted or not: both markers, its bits, and the write
    /// counter of a counted shard.
    #[must_use]
    pub const fn len(self, counted: bool) -> u64 {
        let counter = if counted { COUNTER_BYTES } else { 0 };
        2 * MARKER_BYTES + self.shard_bits / 8 + counter
    }

    /// Whether a shard of this layout fits one Redis string ([`MAX_SHARD_BYTES`]).
    #[must_use]
    pub const fn fits(self, counted: bool) -> bool {
        self.len(counted) <= MAX_SHARD_BYTES
    }

    /// The Redis bit offset of the end marker (`GET i64` there reads it).
    #[must_use]
    pub const fn tail_marker_offset(self) -> u64 {
        MARKER_BITS + self.shard_bits
    }

    /// The Redis bit offset of a counted shard's write counter: after both markers and the
    /// bits.
    #[must_use]
    pub const fn counter_offset(self) -> u64 {
        2 * MARKER_BITS + self.shard_bits
    }

    /// Whether a value of `len` bytes is a counted shard (`Some(true)`), an uncounted one
    /// (`Some(false)`), or neither (a lost shard: `None`).
    #[must_use]
    pub fn counted(self, len: u64) -> Option<bool> {
        match len {
            n if n == self.len(false) => Some(false),
            n if n == self.len(true) => Some(true),
            _ => None,
        }
    }

    /// The two markers of a shard's value as `BITFIELD ... GET i64 0 GET i64 (64 + B)` would
    /// read them, except that a value of any other length than a shard's, counted or not,
    /// reads 0 at its end (a shard of another length is lost).
    #[must_use]
    pub fn markers(self, value: &[u8]) -> (i64, i64) {
        let head = at(value, 0);
        let tail = if self.counted(len_of(value)).is_some() {
            at(value, self.len(false) - MARKER_BYTES)
        } else {
            0
        };
        (head, tail)
    }

    /// A counted shard's write counter (`GET i64 (128 + B)`); `None` for a value of any
    /// other length.
    #[must_use]
    pub fn counter(self, value: &[u8]) -> Option<i64> {
        (self.counted(len_of(value)) == Some(true)).then(|| at(value, self.len(false)))
    }
}

/// A value's length as a shard's lengths are counted.
fn len_of(value: &[u8]) -> u64 {
    u64::try_from(value.len()).unwrap_or(u64::MAX)
}

/// The 8 bytes at byte `offset` of `value` as `GET i64` reads them; 0 past its end.
fn at(value: &[u8], offset: u64) -> i64 {
    usize::try_from(offset)
        .ok()
        .and_then(|start| value.get(start..start.checked_add(8)?))
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, read_i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_is_its_markers_its_bits_and_its_counter() {
        let layout = ShardLayout::new(1024);
        assert_eq!(layout.len(false), 8 + 128 + 8);
        assert_eq!(layout.len(true), 8 + 128 + 8 + 8);
        assert_eq!(layout.tail_marker_offset(), 64 + 1024);
        assert_eq!(layout.counter_offset(), 128 + 1024);
        assert_eq!(layout.counted(144), Some(false));
        assert_eq!(layout.counted(152), Some(true));
        assert_eq!(layout.counted(153), None);

        let mut value = vec![0u8; 152];
        value[..8].copy_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
        value[136..144].copy_from_slice(&[0xff; 8]);
        value[144..].copy_from_slice(&[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(layout.markers(&value), (1, -1));
        assert_eq!(layout.counter(&value), Some(0x102));
        assert_eq!(layout.markers(&value[..144]), (1, -1));
        assert_eq!(layout.counter(&value[..144]), None);
        // Another length: lost, its end reads 0.
        assert_eq!(layout.markers(&value[..150]), (1, 0));
        assert_eq!(layout.markers(&value[..3]), (0, 0));
        assert_eq!(layout.counter(&value[..150]), None);
    }

    #[test]
    fn a_shard_fits_a_redis_string_or_not() {
        let largest = (MAX_SHARD_BYTES - 16) * 8;
        assert!(ShardLayout::new(largest).fits(false));
        assert!(!ShardLayout::new(largest).fits(true));
        assert!(!ShardLayout::new(u64::MAX).fits(false));
    }
}
