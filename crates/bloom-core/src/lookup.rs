//! [`AnyFilter::contains_in_payload`]: a few keys answered straight from a snapshot's payload
//! as it streams past, keeping only the bytes their positions name. A check of a handful of
//! keys against a snapshot of any size then takes memory in proportion to the keys, never to
//! the filter, and costs one pass over the file (what verifying its checksum costs anyway).
//!
//! The answers are the loaded filter's: the same configurations from the header (and the
//! same refusals), the same key rules ([`key::prepare`]), and each layout's positions from
//! its [`PositionHasher`](crate::position::PositionHasher), the rule every kernel is tested
//! against.

use std::ops::Range;

use bloom_format::{Header, LayoutId};

use crate::any::AnyFilter;
use crate::bits::{self, BitsError};
use crate::config::FilterConfig;
use crate::counting::{self, CountingBloomFilter};
use crate::encoding::KeyError;
use crate::key::{self, Key};
use crate::scalable::{ScalableBloomFilter, ScalableError};

/// One bit a key needs set (or one counter it needs above zero): the payload byte that holds
/// it, and its mask in that byte.
#[derive(Clone, Copy)]
struct Test {
    at: u64,
    mask: u8,
}

/// What a key's answer rests on.
enum Pending {
    /// The key's form was refused by the encoding.
    Refused(KeyError),
    /// *Maybe* whatever the bits: a key outside ASCII in a filter with foreign Unicode tables.
    Maybe,
    /// The groups of tests, one per stage, any of which answers *maybe* when all its tests
    /// pass.
    Groups(Range<usize>),
}

/// What the kind of filter a header holds makes of its payload.
struct Parts {
    /// Each part's configuration and the payload bytes it starts at, in payload order: one
    /// for a plain or counting filter, one per stage for a chain.
    parts: Vec<(FilterConfig, u64)>,
    /// Whether the positions name 4-bit counters (`counting-4bit`) rather than bits.
    counters: bool,
    /// The payload's length in bytes.
    len: u64,
    /// For a plain or counting filter, the bits its payload holds, whose padding in the last
    /// byte must be zero; `None` for a chain, whose loader checks none.
    padded: Option<u64>,
}

impl Parts {
    /// The parts of the filter `header` describes, refused as its loader refuses them.
    fn of(header: &Header) -> Result<Self, ScalableError> {
        let (configs, counters) = match header.layout {
            LayoutId::Scalable => (ScalableBloomFilter::stage_configs(header)?, false),
            LayoutId::Counting4 => (vec![CountingBloomFilter::config_of(header)?], true),
            _ => (vec![FilterConfig::from_header(header)?], false),
        };
        let bits_of = |config: &FilterConfig| {
            if counters {
                counting::counter_bits(config.bits())
            } else {
                config.bits()
            }
        };
        // A chain's loader checks no stage's padding; a single filter's checks its own.
        let padded = match configs.as_slice() {
            [single] if header.layout != LayoutId::Scalable => Some(bits_of(single)),
            _ => None,
        };
        let mut len = 0u64;
        let mut parts = Vec::with_capacity(configs.len());
        for config in configs {
            let start = len;
            len = len.saturating_add(bits_of(&config).div_ceil(8));
            parts.push((config, start));
        }
        Ok(Self {
            parts,
            counters,
            len,
            padded,
        })
    }

    /// The test of position `p` of the part starting at byte `start`.
    fn test(&self, start: u64, p: u64) -> Test {
        if self.counters {
            let mask = if p.is_multiple_of(2) { 0x0F } else { 0xF0 };
            Test {
                at: start + p / 2,
                mask,
            }
        } else {
            Test {
                at: start + p / 8,
                mask: 1 << (p % 8),
            }
        }
    }
}

/// The payload bytes a lookup keeps as they stream past: offsets ascending and distinct.
struct Kept {
    at: Vec<u64>,
    bytes: Vec<u8>,
    /// The next offset to keep.
    next: usize,
    /// Payload bytes seen so far.
    received: u64,
}

impl Kept {
    fn new(mut at: Vec<u64>) -> Self {
        at.sort_unstable();
        at.dedup();
        let bytes = vec![0; at.len()];
        Self {
            at,
            bytes,
            next: 0,
            received: 0,
        }
    }

    /// The next `chunk` of the payload.
    fn push(&mut self, chunk: &[u8]) {
        let start = self.received;
        let end = start.saturating_add(chunk.len() as u64);
        while let Some(&at) = self.at.get(self.next) {
            if at >= end {
                break;
            }
            // Offsets before `start` were kept from earlier chunks.
            let byte = usize::try_from(at - start)
                .ok()
                .and_then(|i| chunk.get(i))
                .copied()
                .unwrap_or(0);
            if let Some(slot) = self.bytes.get_mut(self.next) {
                *slot = byte;
            }
            self.next += 1;
        }
        self.received = end;
    }

    /// The payload byte at `at` (zero for one never kept, which no test names).
    fn byte(&self, at: u64) -> u8 {
        self.at
            .binary_search(&at)
            .ok()
            .and_then(|i| self.bytes.get(i))
            .copied()
            .unwrap_or(0)
    }
}

impl AnyFilter {
    /// What [`AnyFilter::contains`] of the filter `header` describes would answer for each
    /// of `keys`, in order, read from its payload as `fill` delivers it (in order, in chunks
    /// of any size, typically `bloom_format::SnapshotReader::read_payload_with`), without
    /// loading the filter: only the payload bytes the keys' positions name are kept.
    ///
    /// Memory is in proportion to the keys (for each, its positions in each stage), not to
    /// the filter, so this answers a few keys from a snapshot of any size, even one too large
    /// for this machine's memory, in one pass. For many keys, load the filter
    /// ([`Filter::from_payload`](crate::Filter::from_payload)) and ask it.
    ///
    /// `fill` may deliver bytes whose checksum it has not checked yet, but it must check it
    /// before it returns, and return `Err` when it fails (as `read_payload_with` does): the
    /// answers are returned only once `fill` returned `Ok`, so that no answer from damaged
    /// bytes gets out.
    ///
    /// Each answer is a `Result`, whatever the form of the keys: for text and encoded keys it
    /// is always `Ok` (where [`AnyFilter::contains`] answers a plain `bool`); a byte key a
    /// text encoding refuses is answered with its [`KeyError`].
    ///
    /// ```
    /// use bloom_core::{AnyFilter, BloomFilter, Filter};
    ///
    /// let mut seen = BloomFilter::with_capacity(1_000, 0.01)?;
    /// seen.insert("order-1");
    /// let snapshot = seen.to_snapshot(0);
    ///
    /// let answers = AnyFilter::contains_in_payload(snapshot.header(), ["order-1", "order-2"], |sink| {
    ///     sink(snapshot.payload());
    ///     Ok::<(), bloom_core::ScalableError>(())
    /// })?;
    /// assert_eq!(answers, [Ok(true), Ok(false)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// The error `fill` returns, or (converted into `E`) what loading the filter would
    /// refuse: a header this build cannot use, a payload whose length does not match it, or
    /// set padding bits.
    pub fn contains_in_payload<'k, K, E>(
        header: &Header,
        keys: impl IntoIterator<Item = &'k K>,
        fill: impl FnOnce(&mut dyn FnMut(&[u8])) -> Result<(), E>,
    ) -> Result<Vec<Result<bool, KeyError>>, E>
    where
        K: Key + ?Sized + 'k,
        E: From<ScalableError>,
    {
        let parts = Parts::of(header)?;
        let encoding = parts.parts.first().map(|(c, _)| c.encoding());
        let foreign = parts.parts.iter().any(|(c, _)| c.has_foreign_tables());
        let hashers: Vec<_> = parts
            .parts
            .iter()
            .map(|(config, start)| (config.hasher(), *start))
            .collect();
        let mut pending = Vec::new();
        let mut groups = Vec::new();
        let mut tests = Vec::new();
        for key in keys {
            // A chain always has a stage; one without would answer maybe, as its `contains`.
            let Some(encoding) = encoding else {
                pending.push(Pending::Maybe);
                continue;
            };
            pending.push(match key::prepare(key, encoding, foreign) {
                Err(e) => Pending::Refused(e.into()),
                Ok((_, true)) => Pending::Maybe,
                Ok((encoded, false)) => {
                    let first = groups.len();
                    for (hasher, start) in &hashers {
                        let from = tests.len();
                        hasher.each_position(hasher.hash(&encoded), |p| {
                            tests.push(parts.test(*start, p));
                        });
                        groups.push(from..tests.len());
                    }
                    Pending::Groups(first..groups.len())
                }
            });
        }
        let mut wanted: Vec<u64> = tests.iter().map(|t| t.at).collect();
        if parts.padded.is_some() && parts.len > 0 {
            wanted.push(parts.len - 1);
        }
        let mut kept = Kept::new(wanted);
        fill(&mut |chunk| kept.push(chunk))?;
        if kept.received != parts.len {
            let error = BitsError::Length {
                bits: parts.padded.unwrap_or(parts.len.saturating_mul(8)),
                expected: parts.len,
                found: kept.received,
            };
            return Err(ScalableError::from(error).into());
        }
        if let Some(bits) = parts.padded {
            let last = kept.byte(parts.len.saturating_sub(1));
            bits::check_padding(bits, last).map_err(ScalableError::from)?;
        }
        let passes = |group: &Range<usize>| {
            tests
                .get(group.clone())
                .unwrap_or_default()
                .iter()
                .all(|t| kept.byte(t.at) & t.mask != 0)
        };
        Ok(pending
            .into_iter()
            .map(|p| match p {
                Pending::Refused(e) => Err(e),
                Pending::Maybe => Ok(true),
                Pending::Groups(range) => {
                    Ok(groups.get(range).unwrap_or_default().iter().any(passes))
                }
            })
            .collect())
    }
}
