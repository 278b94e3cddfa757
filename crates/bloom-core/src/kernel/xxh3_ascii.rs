//! `xxh3-64` (seed 0, the default secret) of a key, with whether the key is ASCII, taken
//! from the loads the hash makes anyway.
//!
//! A text key under NFC or UTF-8 is hashed as it is when it is ASCII (ASCII is its own
//! normal form), so the default kernel must test that before it can use the hash. Up to 128
//! bytes, XXH3 reads every byte of the key (the 1-to-3-byte path reads them all, the others
//! read overlapping words from both ends), so ORing those words gives the ASCII test for a
//! few instructions where a separate scan read the key again. Longer keys take
//! `xxhash-rust`'s hash and the separate scan.
//!
//! The arithmetic is XXH3's as its specification (`xxhash_spec.md`) and reference
//! implementation give it for these lengths; tests compare every length from 0 to 300 with
//! `xxhash-rust`.

use crate::encoding::is_ascii;

/// The first 128 bytes of XXH3's default secret (`kSecret`), all these lengths read.
const SECRET: [u8; 128] = [
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
];

const PRIME64_1: u64 = 0x9e37_79b1_85eb_ca87;
const PRIME64_2: u64 = 0xc2b2_ae3d_27d4_eb4f;
const PRIME64_3: u64 = 0x1656_67b1_9e37_79f9;
const PRIME_MX1: u64 = 0x1656_6791_9e37_79f9;
const PRIME_MX2: u64 = 0x9fb2_1c65_1e98_df25;

/// The high bit of each byte of a word: a word of ASCII bytes has none.
pub(crate) const HIGH: u64 = 0x8080_8080_8080_8080;

/// The little-endian word of the secret at `at`.
const fn secret64(at: usize) -> u64 {
    let mut word = 0;
    let mut i = 8;
    while i > 0 {
        i -= 1;
        word = (word << 8) | SECRET[at + i] as u64;
    }
    word
}

/// The little-endian 32-bit word of the secret at `at`.
const fn secret32(at: usize) -> u64 {
    secret64(at) & 0xffff_ffff
}

/// The hash of a key and whether it is ASCII.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hashed {
    /// `xxh3_64(key)`.
    pub(crate) hash: u64,
    /// A word with one of the high bits of [`HIGH`] set if and only if a byte of the key is
    /// not ASCII (the OR of the words the hash read), as [`Take::admits`] tests it.
    ///
    /// [`Take::admits`]: crate::key::Take::admits
    pub(crate) high: u64,
}

/// `xxh3_64(key)`: [`xxh3_64_ascii`] without the ASCII test, which the compiler drops.
#[inline(always)]
pub(crate) fn xxh3_64(key: &[u8]) -> u64 {
    if key.len() <= 16 {
        up_to_16(key).hash
    } else if key.len() <= 128 {
        up_to_128(key).hash
    } else {
        xxhash_rust::xxh3::xxh3_64(key)
    }
}

/// `xxh3_64(key)` and whether `key` is ASCII.
#[inline(always)]
pub(crate) fn xxh3_64_ascii(key: &[u8]) -> Hashed {
    let len = key.len();
    if len <= 16 {
        return up_to_16(key);
    }
    if len <= 32 {
        // The same function, compiled apart for the usual key length: one pair of lanes,
        // with no branch into code shared with the longer keys.
        return up_to_128(key);
    }
    if len <= 128 {
        return up_to_128(key);
    }
    long(key)
}

/// Keys of 129 bytes or more: `xxhash-rust`'s hash and the separate scan.
#[inline(never)]
fn long(key: &[u8]) -> Hashed {
    Hashed {
        hash: xxhash_rust::xxh3::xxh3_64(key),
        high: if is_ascii(key) { 0 } else { HIGH },
    }
}

/// The little-endian word of `key` at `at` (0 past its end, which the callers' length
/// ranges rule out, so the compiler drops the test).
#[inline(always)]
fn read64(key: &[u8], at: usize) -> u64 {
    key.get(at..)
        .and_then(<[u8]>::first_chunk::<8>)
        .map_or(0, |w| u64::from_le_bytes(*w))
}

/// The little-endian 32-bit word of `key` at `at`.
#[inline(always)]
fn read32(key: &[u8], at: usize) -> u64 {
    key.get(at..)
        .and_then(<[u8]>::first_chunk::<4>)
        .map_or(0, |w| u64::from(u32::from_le_bytes(*w)))
}

/// The 128-bit product of `a` and `b`, its halves XORed.
#[inline(always)]
fn mul_fold(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    (product as u64) ^ ((product >> 64) as u64)
}

/// XXH3's final mix of the 9-to-128-byte paths.
#[inline(always)]
fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 37;
    h = h.wrapping_mul(PRIME_MX1);
    h ^ (h >> 32)
}

/// XXH64's final mix, which XXH3's 0-to-3-byte paths end with.
#[inline(always)]
fn avalanche_xxh64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(PRIME64_2);
    h ^= h >> 29;
    h = h.wrapping_mul(PRIME64_3);
    h ^ (h >> 32)
}

/// XXH3's final mix of the 4-to-8-byte path.
#[inline(always)]
fn rrmxmx(mut h: u64, len: u64) -> u64 {
    h ^= h.rotate_left(49) ^ h.rotate_left(24);
    h = h.wrapping_mul(PRIME_MX2);
    h ^= (h >> 35).wrapping_add(len);
    h = h.wrapping_mul(PRIME_MX2);
    h ^ (h >> 28)
}

/// Keys of 0 to 16 bytes.
#[inline(always)]
fn up_to_16(key: &[u8]) -> Hashed {
    let len = key.len();
    if len > 8 {
        let (lo, hi) = (read64(key, 0), read64(key, len - 8));
        let lo_keyed = lo ^ (secret64(24) ^ secret64(32));
        let hi_keyed = hi ^ (secret64(40) ^ secret64(48));
        let acc = (len as u64)
            .wrapping_add(lo_keyed.swap_bytes())
            .wrapping_add(hi_keyed)
            .wrapping_add(mul_fold(lo_keyed, hi_keyed));
        return Hashed {
            hash: avalanche(acc),
            high: lo | hi,
        };
    }
    if len >= 4 {
        let (lo, hi) = (read32(key, 0), read32(key, len - 4));
        let keyed = (hi | (lo << 32)) ^ (secret64(8) ^ secret64(16));
        return Hashed {
            hash: rrmxmx(keyed, len as u64),
            high: lo | hi,
        };
    }
    let (Some(&c1), Some(&c3)) = (key.first(), key.last()) else {
        return Hashed {
            hash: avalanche_xxh64(secret64(56) ^ secret64(64)),
            high: 0,
        };
    };
    let c2 = key.get(len / 2).copied().unwrap_or(c1);
    let combined =
        (u64::from(c1) << 16) | (u64::from(c2) << 24) | u64::from(c3) | (len << 8) as u64;
    Hashed {
        hash: avalanche_xxh64(combined ^ (secret32(0) ^ secret32(4))),
        high: u64::from(c1 | c2 | c3),
    }
}

/// XXH3's mix of the 16 bytes of `key` at `at` with those of the secret at `secret`; ORs
/// their words into `high`.
#[inline(always)]
fn mix16(key: &[u8], at: usize, secret: usize, high: &mut u64) -> u64 {
    let (lo, hi) = (read64(key, at), read64(key, at + 8));
    *high |= lo | hi;
    mul_fold(lo ^ secret64(secret), hi ^ secret64(secret + 8))
}

/// Keys of 17 to 128 bytes: pairs of 16-byte lanes from the front and the back, as many as
/// cover the key. Up to 32 bytes (the usual key) is one pair, in straight-line code.
#[inline(always)]
fn up_to_128(key: &[u8]) -> Hashed {
    let len = key.len();
    let mut high = 0;
    let mut acc = (len as u64).wrapping_mul(PRIME64_1);
    if len > 32 {
        if len > 64 {
            if len > 96 {
                acc = acc.wrapping_add(mix16(key, 48, 96, &mut high));
                acc = acc.wrapping_add(mix16(key, len - 64, 112, &mut high));
            }
            acc = acc.wrapping_add(mix16(key, 32, 64, &mut high));
            acc = acc.wrapping_add(mix16(key, len - 48, 80, &mut high));
        }
        acc = acc.wrapping_add(mix16(key, 16, 32, &mut high));
        acc = acc.wrapping_add(mix16(key, len - 32, 48, &mut high));
    }
    acc = acc.wrapping_add(mix16(key, 0, 0, &mut high));
    acc = acc.wrapping_add(mix16(key, len - 16, 16, &mut high));
    Hashed {
        hash: avalanche(acc),
        high,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length from 0 to 300, of ASCII keys and of keys with one byte of 0x80 or more
    /// at each position a path reads differently.
    #[test]
    fn hashes_as_xxhash_rust_and_tells_ascii_at_every_length() {
        for len in 0..=300usize {
            let ascii: Vec<u8> = (0..len).map(|i| b'!' + (i * 7 % 90) as u8).collect();
            let hashed = xxh3_64_ascii(&ascii);
            assert_eq!(hashed.hash, xxhash_rust::xxh3::xxh3_64(&ascii), "len {len}");
            assert_eq!(hashed.high & HIGH, 0, "len {len}");
            for at in 0..len {
                let mut key = ascii.clone();
                key[at] = 0x80 | (at as u8);
                let hashed = xxh3_64_ascii(&key);
                assert_eq!(
                    hashed.hash,
                    xxhash_rust::xxh3::xxh3_64(&key),
                    "len {len}, at {at}"
                );
                assert_ne!(hashed.high & HIGH, 0, "len {len}, at {at}");
            }
        }
    }

    /// Keys of every byte value, from a fixed generator, at every length from 0 to 300.
    #[test]
    fn hashes_arbitrary_bytes_as_xxhash_rust() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..=300usize {
            for _ in 0..8 {
                let key: Vec<u8> = (0..len)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        (state >> 56) as u8
                    })
                    .collect();
                let hashed = xxh3_64_ascii(&key);
                assert_eq!(hashed.hash, xxhash_rust::xxh3::xxh3_64(&key), "{key:?}");
                assert_eq!(xxh3_64(&key), hashed.hash);
                assert_eq!(hashed.high & HIGH == 0, key.is_ascii(), "{key:?}");
            }
        }
    }
}
