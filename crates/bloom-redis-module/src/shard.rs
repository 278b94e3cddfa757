//! The work of every command on one shard, on the shard's bytes: no Redis type here, so it is
//! tested without a server.
//!
//! A shard is `M(s)`, `B/8` bytes of bits, `M(s)` (`docs/format.md`, "Sharded filters held in
//! Redis"); the shard-local position `p` is Redis bit offset `64 + p`, which numbers bits from
//! the most significant of each byte. The keys, the configuration text, the markers and where
//! each part of a shard is are `bloom_redis_protocol`'s; this is the work done on them.

use std::cell::RefCell;

pub(crate) use crate::dirty::Dirty;
use std::rc::Rc;

use bloom_core::{EncodedKey, FilterConfig, Layout};
use bloom_redis_protocol::config::{RULES, parse_config_text};
use bloom_redis_protocol::keys::parse_shard_key;
use bloom_redis_protocol::marker::{self, ShardMarkers, read_i64};
use bloom_redis_protocol::meta::Creation;
use bloom_redis_protocol::module;
use bloom_redis_protocol::shard::{COUNTER_BYTES, ShardLayout};

/// Bytes of one marker.
const MARKER_BYTES: usize = marker::MARKER_BYTES as usize;
/// The write counter's bytes after a counted shard's end marker.
const COUNTER: usize = COUNTER_BYTES as usize;
/// The most positions one command hashes (keys times `k`): 8 MiB of positions, so that no
/// command makes the module allocate more, whatever its arguments. bloom-redis sends about
/// 1,000 keys per command.
pub(crate) const MAX_POSITIONS: usize = 1 << 20;

pub(crate) use crate::error::CommandError;

/// How keys travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Already in the filter's encoding: hashed as they are.
    Encoded,
    /// As the application has them: encoded by the module with the filter's encoding.
    Raw,
}

impl Mode {
    pub(crate) fn parse(arg: &[u8]) -> Result<Self, CommandError> {
        if arg.eq_ignore_ascii_case(module::ENCODED) {
            Ok(Self::Encoded)
        } else if arg.eq_ignore_ascii_case(module::RAW) {
            Ok(Self::Raw)
        } else {
            Err(CommandError::Mode)
        }
    }
}

/// What a command needs to work on one shard: the filter's configuration, the shard's
/// number and size, and its marker.
#[derive(Debug)]
pub(crate) struct Plan {
    filter: Rc<Filter>,
    shard: u32,
    shard_bits: u64,
    marker: [u8; 8],
}

/// A filter's configuration as a command uses it, made from its creation and configuration
/// text.
#[derive(Debug)]
struct Filter {
    config: FilterConfig,
    shards: u32,
    shard_bits: u64,
    markers: ShardMarkers,
}

/// Filters most recently used, by their creation and configuration text: a batch sends one
/// command per shard of one filter, and parsing the configuration for each would cost more
/// than hashing its keys.
const CACHED: usize = 8;

thread_local! {
    // Commands run on Redis's main thread; the cache is that thread's.
    static FILTERS: RefCell<Vec<(Vec<u8>, Rc<Filter>)>> = const { RefCell::new(Vec::new()) };
}

impl Filter {
    /// The filter `creation` and `config` describe, from the cache when it was seen lately.
    fn cached(creation: &[u8], config: &[u8]) -> Result<Rc<Self>, CommandError> {
        let mut id = Vec::with_capacity(creation.len() + 1 + config.len());
        id.extend_from_slice(creation);
        id.push(b' ');
        id.extend_from_slice(config);
        let hit = FILTERS.with_borrow_mut(|filters| {
            let at = filters.iter().position(|(k, _)| *k == id)?;
            let entry = filters.remove(at);
            let filter = Rc::clone(&entry.1);
            filters.push(entry);
            Some(filter)
        });
        if let Some(filter) = hit {
            return Ok(filter);
        }
        let filter = Rc::new(Self::parse(creation, config)?);
        FILTERS.with_borrow_mut(|filters| {
            if filters.len() >= CACHED {
                filters.remove(0);
            }
            filters.push((id, Rc::clone(&filter)));
        });
        Ok(filter)
    }

    fn parse(creation: &[u8], config: &[u8]) -> Result<Self, CommandError> {
        let creation = std::str::from_utf8(creation)
            .ok()
            .and_then(Creation::parse)
            .ok_or(CommandError::Creation)?;
        let text =
            std::str::from_utf8(config).map_err(|_| CommandError::Config("is not UTF-8".into()))?;
        let header = parse_config_text(text).map_err(|e| CommandError::Config(e.to_string()))?;
        header
            .check()
            .map_err(|e| CommandError::Config(format!("makes no filter: {e}")))?;
        let filter = FilterConfig::from_header(&header)
            .map_err(|e| CommandError::Config(format!("makes no filter: {e}")))?;
        let (Layout::Sharded { shards } | Layout::ShardedV2 { shards }) = filter.layout() else {
            return Err(CommandError::Config("is not of a sharded layout".into()));
        };
        if !RULES.contains(&filter.rule().id()) {
            return Err(CommandError::Config(
                "has a rule Redis filters are not made with".into(),
            ));
        }
        let shard_bits = filter.bits() / u64::from(shards);
        if !ShardLayout::new(shard_bits).fits(false) {
            return Err(CommandError::Config(
                "has shards over Redis's 512 MiB per key".into(),
            ));
        }
        Ok(Self {
            config: filter,
            shards,
            shard_bits,
            markers: ShardMarkers::new(&creation.bytes(), config),
        })
    }
}

impl Plan {
    /// The plan for shard key `key` of the filter created as `creation` (its metadata form)
    /// with the configuration `config` (see `bloom_redis_protocol::config::config_text`).
    pub(crate) fn new(key: &[u8], creation: &[u8], config: &[u8]) -> Result<Self, CommandError> {
        let shard = parse_shard_key(key)
            .map_err(|_| CommandError::NotAShard)?
            .shard;
        let filter = Filter::cached(creation, config)?;
        let shard = u32::try_from(shard)
            .ok()
            .filter(|&s| s < filter.shards)
            .ok_or(CommandError::ShardNumber {
                shard,
                shards: filter.shards,
            })?;
        Ok(Self {
            marker: filter.markers.bytes(shard),
            shard_bits: filter.shard_bits,
            shard,
            filter,
        })
    }

    /// Where the parts of the shard are.
    fn layout(&self) -> ShardLayout {
        ShardLayout::new(self.shard_bits)
    }

    /// The shard's length in bytes without a counter (schemas 2 and 3): both markers and
    /// its bits.
    pub(crate) fn shard_len(&self) -> usize {
        self.len_of(false)
    }

    /// The shard's length in bytes as `counted` or not (schemas 4 and 5 end with a write
    /// counter).
    pub(crate) fn len_of(&self, counted: bool) -> usize {
        // At most 512 MiB and a counter: checked in `new`.
        usize::try_from(self.layout().len(counted)).unwrap_or(usize::MAX)
    }

    /// Whether a value of this length is a counted shard (`Some(true)`), an uncounted one
    /// (`Some(false)`), or neither (a lost shard: `None`).
    pub(crate) fn counted(&self, value: &[u8]) -> Option<bool> {
        self.layout()
            .counted(u64::try_from(value.len()).unwrap_or(u64::MAX))
    }

    /// The shard's value when created: its marker, zeros, its marker (and a zero counter
    /// after it, for a value of the counted length).
    pub(crate) fn write_markers(&self, value: &mut [u8]) {
        let end = match self.counted(value) {
            Some(true) => value.len() - COUNTER,
            _ => value.len(),
        };
        if end >= 2 * MARKER_BYTES {
            value[..MARKER_BYTES].copy_from_slice(&self.marker);
            value[end - MARKER_BYTES..end].copy_from_slice(&self.marker);
        }
    }

    /// The two markers of a shard's value as `BITFIELD ... GET i64 0 GET i64 (64 + B)`
    /// would read them, except that a value of any other length than a shard's, counted or
    /// not, reads 0 at its end (a shard of another length is lost).
    pub(crate) fn markers(&self, value: &[u8]) -> (i64, i64) {
        self.layout().markers(value)
    }

    /// A counted shard's write counter (`GET i64 (128 + B)`), `None` for an uncounted one.
    pub(crate) fn counter(&self, value: &[u8]) -> Option<i64> {
        self.layout().counter(value)
    }

    /// Advances a counted shard's write counter by one (wrapping, as `BITFIELD ... INCRBY
    /// i64` does) and marks its bytes dirty; returns the counter after. `None` (and nothing
    /// written) for an uncounted shard.
    pub(crate) fn advance(&self, value: &mut [u8], dirty: &mut Dirty) -> Option<i64> {
        let after = self.counter(value)?.wrapping_add(1);
        let end = self.shard_len();
        let [a, b, c, d, e, f, g, h] = after.to_le_bytes();
        value
            .get_mut(end..end + COUNTER)?
            .copy_from_slice(&[h, g, f, e, d, c, b, a]);
        dirty.mark(end);
        dirty.mark(end + COUNTER - 1);
        Some(after)
    }

    /// Whether both markers are this shard's.
    pub(crate) fn is_whole(&self, value: &[u8]) -> bool {
        let own = read_i64(self.marker);
        self.markers(value) == (own, own)
    }

    /// The shard-local positions of every key, `k` per key, into `out`; and per key
    /// whether it must be answered *maybe* whatever its bits say (a raw key outside ASCII
    /// when the filter records other Unicode tables than the module's). With `adding`, such
    /// a key is refused instead. Nothing is written either way.
    pub(crate) fn positions<'k>(
        &self,
        keys: impl Iterator<Item = &'k [u8]>,
        mode: Mode,
        adding: bool,
        out: &mut Vec<u64>,
        maybe: &mut Vec<bool>,
    ) -> Result<(), CommandError> {
        let foreign = self.filter.config.has_foreign_tables();
        for (index, key) in keys.enumerate() {
            if out.len() + self.hashes() > MAX_POSITIONS {
                return Err(CommandError::TooManyKeys {
                    most: MAX_POSITIONS / self.hashes().max(1),
                });
            }
            let encoded = match mode {
                Mode::Encoded => EncodedKey::from_encoded(key),
                Mode::Raw => self
                    .filter
                    .config
                    .encoding()
                    .encode_bytes(key)
                    .map_err(|e| CommandError::Key {
                        index,
                        reason: e.to_string(),
                    })?,
            };
            // An encoded key is hashed as given: its sender encoded it, and answers for the
            // tables it used (a client of other tables records that in the metadata, and
            // answers *maybe* itself). A raw key is encoded here, with the module's tables.
            let sensitive = foreign && mode == Mode::Raw && !key.is_ascii();
            if sensitive && adding {
                return Err(CommandError::ForeignTables { index });
            }
            maybe.push(sensitive && !adding);
            for p in self.filter.config.positions(&encoded).as_slice() {
                let shard = p / self.shard_bits;
                if shard != u64::from(self.shard) {
                    return Err(CommandError::WrongShard { index, shard });
                }
                out.push(p % self.shard_bits);
            }
        }
        Ok(())
    }

    /// Positions per key.
    pub(crate) fn hashes(&self) -> usize {
        self.filter.config.hashes() as usize
    }
}

/// The byte and the mask of shard-local position `p` in the shard's value.
fn bit(p: u64) -> (usize, u8) {
    // `p` is below the shard's bits, which fit a Redis string: no truncation.
    let byte = MARKER_BYTES + (p / 8) as usize;
    (byte, 0x80 >> (p % 8))
}

/// Sets the bits of every key (`k` positions each, in order) in a whole shard's value;
/// per key whether all its bits were set before (keys in order, so a key given twice finds
/// its bits set the second time, as `BITFIELD` would). Every block it changed is marked in
/// `dirty`.
pub(crate) fn set_bits(
    value: &mut [u8],
    positions: &[u64],
    k: usize,
    all_set: &mut Vec<bool>,
    dirty: &mut Dirty,
) {
    for key in positions.chunks(k.max(1)) {
        let mut set = true;
        for &p in key {
            let (byte, mask) = bit(p);
            if let Some(b) = value.get_mut(byte)
                && *b & mask == 0
            {
                set = false;
                *b |= mask;
                dirty.mark(byte);
            }
        }
        all_set.push(set);
    }
}

/// Per key whether all its bits are set in a whole shard's value.
pub(crate) fn test_bits(value: &[u8], positions: &[u64], k: usize, all_set: &mut Vec<bool>) {
    for key in positions.chunks(k.max(1)) {
        all_set.push(key.iter().all(|&p| {
            let (byte, mask) = bit(p);
            value.get(byte).is_some_and(|b| b & mask != 0)
        }));
    }
}

/// The count of set bits between the markers of a whole shard's value (of its plain length
/// `plain_len`: a counted shard's counter is not a bit of the filter).
pub(crate) fn count_bits(value: &[u8], plain_len: usize) -> u64 {
    let end = plain_len.saturating_sub(MARKER_BYTES);
    value
        .get(MARKER_BYTES..end)
        .unwrap_or_default()
        .iter()
        .map(|b| u64::from(b.count_ones()))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloom_core::{FilterParams, KeyEncoding};
    use bloom_redis_protocol::config::config_text;

    fn plan_for(shard: u32) -> (Plan, FilterConfig) {
        let params = FilterParams::planned(Layout::sharded(4).unwrap(), 1000, 0.01).unwrap();
        let config = FilterConfig::new(params).with_encoding(KeyEncoding::Nfc);
        let text = config_text(&config.to_header(bloom_format::DatasetGeneration::ZERO, 0));
        let key = format!("bloom:{{seen:{shard}}}");
        let plan = Plan::new(key.as_bytes(), "01".repeat(16).as_bytes(), text.as_bytes()).unwrap();
        (plan, config)
    }

    /// Arguments damaged at random (a fixed seed: the same cases every run) are refused or
    /// taken, never a panic; a configuration that parses is one the header rules accept.
    #[test]
    fn damaged_arguments_never_panic() {
        let (_, config) = plan_for(0);
        let text = config_text(&config.to_header(bloom_format::DatasetGeneration::ZERO, 0));
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let alphabet = b"0123456789\nabcdefx-.:{}\xff";
        let mut taken = 0;
        for _ in 0..20_000 {
            let mut damaged = text.clone().into_bytes();
            for _ in 0..=(next() % 3) {
                let at = (next() as usize) % (damaged.len() + 1);
                let byte = alphabet[(next() as usize) % alphabet.len()];
                match next() % 3 {
                    0 if at < damaged.len() => damaged[at] = byte,
                    1 if at < damaged.len() => {
                        damaged.remove(at);
                    }
                    _ => damaged.insert(at, byte),
                }
            }
            let key = format!("bloom:{{seen:{}}}", next() % 6);
            if let Ok(plan) = Plan::new(key.as_bytes(), "01".repeat(16).as_bytes(), &damaged) {
                taken += 1;
                let (mut out, mut maybe) = (Vec::new(), Vec::new());
                let keys = [&damaged[..], b"k", b"\xff\xfe"];
                let _ = plan.positions(keys.into_iter(), Mode::Raw, true, &mut out, &mut maybe);
                let mut value = vec![0; plan.shard_len().min(1 << 20)];
                plan.write_markers(&mut value);
                let _ = plan.markers(&value);
            }
        }
        assert!(
            taken > 0,
            "some damage leaves a valid configuration (a changed salt)"
        );
    }

    #[test]
    fn a_fresh_shard_has_its_markers_and_nothing_else() {
        let (plan, _) = plan_for(2);
        let mut value = vec![0; plan.shard_len()];
        assert_eq!(plan.markers(&value), (0, 0));
        plan.write_markers(&mut value);
        assert!(plan.is_whole(&value));
        assert_eq!(count_bits(&value, plan.shard_len()), 0);
        let mut longer = value.clone();
        longer.push(0);
        assert!(!plan.is_whole(&longer));
        assert!(!plan.is_whole(&value[..value.len() - 1]));
        let (other, _) = plan_for(1);
        assert!(!other.is_whole(&value));
    }

    #[test]
    fn keys_of_other_shards_and_bad_raw_keys_are_refused() {
        let (plan, config) = plan_for(0);
        let (mut out, mut maybe) = (Vec::new(), Vec::new());
        let foreign = (0..100)
            .map(|i| format!("key-{i}"))
            .find(|k| {
                config
                    .positions(&config.encoding().encode_str(k))
                    .as_slice()[0]
                    >= plan.shard_bits
            })
            .unwrap();
        let refused = plan.positions(
            [foreign.as_bytes()].into_iter(),
            Mode::Raw,
            true,
            &mut out,
            &mut maybe,
        );
        assert!(matches!(
            refused,
            Err(CommandError::WrongShard { index: 0, .. })
        ));
        let refused = plan.positions(
            [&b"\xff"[..]].into_iter(),
            Mode::Raw,
            false,
            &mut out,
            &mut maybe,
        );
        assert!(matches!(refused, Err(CommandError::Key { index: 0, .. })));
    }

    #[test]
    fn raw_keys_outside_ascii_of_foreign_tables_are_maybe_or_refused() {
        let old = bloom_format::UnicodeVersion::new(15, 0, 0);
        let params = FilterParams::planned(Layout::sharded(1).unwrap(), 1000, 0.01).unwrap();
        let config = FilterConfig::new(params)
            .with_encoding(KeyEncoding::Nfc)
            .with_tables(bloom_core::UnicodeTables::new(Some(old), None));
        assert!(config.has_foreign_tables());
        let text = config_text(&config.to_header(bloom_format::DatasetGeneration::ZERO, 0));
        let plan = Plan::new(b"bloom:{t:0}", "01".repeat(16).as_bytes(), text.as_bytes()).unwrap();
        let (mut out, mut maybe) = (Vec::new(), Vec::new());
        let keys = ["ascii".as_bytes(), "naïve".as_bytes()];
        plan.positions(keys.into_iter(), Mode::Raw, false, &mut out, &mut maybe)
            .unwrap();
        assert_eq!(maybe, [false, true]);
        let refused = plan.positions(keys.into_iter(), Mode::Raw, true, &mut out, &mut maybe);
        assert_eq!(refused, Err(CommandError::ForeignTables { index: 1 }));
        maybe.clear();
        plan.positions(keys.into_iter(), Mode::Encoded, true, &mut out, &mut maybe)
            .unwrap();
        assert_eq!(
            maybe,
            [false, false],
            "encoded keys are the sender's business"
        );
    }

    #[test]
    fn bits_are_set_most_significant_first_and_reported_per_key() {
        let (plan, config) = plan_for(0);
        let mut value = vec![0; plan.shard_len()];
        plan.write_markers(&mut value);
        let keys: Vec<String> = (0..400)
            .map(|i| format!("key-{i}"))
            .filter(|k| {
                config
                    .positions(&config.encoding().encode_str(k))
                    .as_slice()[0]
                    < plan.shard_bits
            })
            .collect();
        let (mut positions, mut maybe) = (Vec::new(), Vec::new());
        plan.positions(
            keys.iter().map(|k| k.as_bytes()),
            Mode::Raw,
            true,
            &mut positions,
            &mut maybe,
        )
        .unwrap();
        let mut before = Vec::new();
        let mut dirty = Dirty::new(value.len());
        let untouched = value.clone();
        set_bits(
            &mut value,
            &positions,
            plan.hashes(),
            &mut before,
            &mut dirty,
        );
        let ranges = dirty.ranges(value.len());
        // Ranges are in order, apart, within the value, and cover every changed byte.
        assert!(
            ranges
                .windows(2)
                .all(|w| w[1].0 > w[0].1 + crate::dirty::MERGE_BLOCKS * crate::dirty::BLOCK)
        );
        assert!(ranges.iter().all(|&(s, e)| s < e && e <= value.len()));
        for (i, (a, b)) in untouched.iter().zip(&value).enumerate() {
            if a != b {
                assert!(ranges.iter().any(|&(s, e)| (s..e).contains(&i)), "byte {i}");
            }
        }
        let mut fresh = vec![0; plan.shard_len()];
        plan.write_markers(&mut fresh);
        for &(start, end) in &ranges {
            fresh[start..end].copy_from_slice(&value[start..end]);
        }
        assert!(
            fresh == value,
            "the ranges rebuild the shard from its empty state"
        );
        assert!(before.iter().filter(|&&set| !set).count() > keys.len() / 2);
        let mut after = Vec::new();
        test_bits(&value, &positions, plan.hashes(), &mut after);
        assert!(after.iter().all(|&set| set));
        assert!(plan.is_whole(&value));
        // Position p is bit 0x80 >> (p % 8) of byte 8 + p / 8, as Redis's SETBIT numbers it.
        let p = positions[0];
        assert_ne!(value[8 + (p / 8) as usize] & (0x80 >> (p % 8)), 0);
        assert!(count_bits(&value, plan.shard_len()) <= positions.len() as u64);
    }

    #[test]
    fn a_counted_shard_keeps_its_counter_after_its_end_marker_and_advances_it() {
        let (plan, _) = plan_for(3);
        let mut value = vec![0; plan.len_of(true)];
        plan.write_markers(&mut value);
        // The end marker where BITFIELD reads it (64 + B), the counter after it.
        assert!(plan.is_whole(&value));
        assert_eq!(plan.counted(&value), Some(true));
        assert_eq!(plan.counter(&value), Some(0));
        let mut dirty = Dirty::new(value.len());
        assert_eq!(plan.advance(&mut value, &mut dirty), Some(1));
        assert_eq!(plan.advance(&mut value, &mut dirty), Some(2));
        let end = plan.shard_len();
        assert_eq!(value[end..], [0, 0, 0, 0, 0, 0, 0, 2]);
        assert!(plan.is_whole(&value), "the markers are untouched");
        assert_eq!(count_bits(&value, plan.shard_len()), 0);
        // Its bytes are replicated with the bits.
        assert!(
            dirty
                .ranges(value.len())
                .iter()
                .any(|&(s, e)| s <= end && end + 8 <= e)
        );
        // Flagged rolled back (bit 62) by a client: the count goes on below the flag.
        value[end] |= 0x40;
        assert_eq!(
            plan.advance(&mut value, &mut dirty),
            Some(bloom_redis_protocol::shard::ROLLED_BACK + 3)
        );
        // An uncounted shard has none, and is not advanced.
        let mut plain = vec![0; plan.shard_len()];
        plan.write_markers(&mut plain);
        assert_eq!(plan.counter(&plain), None);
        let mut clean = Dirty::new(plain.len());
        assert_eq!(plan.advance(&mut plain, &mut clean), None);
        // Neither length: lost (its end reads 0).
        let mut odd = value.clone();
        odd.push(0);
        assert_eq!(plan.counted(&odd), None);
        assert!(!plan.is_whole(&odd));
        assert_eq!(plan.counter(&odd), None);
    }
}
