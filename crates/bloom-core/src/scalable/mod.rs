//! [`ScalableBloomFilter`]: a chain of filters that grows past any capacity while its
//! compound false-positive rate stays under the target (Almeida et al., "Scalable Bloom
//! Filters", 2007), persisted as one snapshot of the `scalable` layout (`snapshot.rs`);
//! `builder.rs` plans a new chain.

mod builder;
mod snapshot;

use bloom_format::Plan;

use crate::config::FilterConfig;
use crate::encoding::KeyEncoding;
use crate::filter::BloomFilter;
use crate::key::{self, Key};
use crate::layout::Layout;
use crate::params::{FilterParams, ParamsError};
use crate::position::PositionRule;

pub use builder::{DEFAULT_GROWTH, DEFAULT_TIGHTENING, ScalableBuilder, ScalableError};

/// A Bloom filter that grows: a chain of stages, each a [`BloomFilter`] of its own size.
/// When the newest stage holds its capacity, the next key starts a new stage `growth` times
/// larger with a rate `tightening` times lower. A key is in the chain if it is in any stage.
///
/// **The bound.** Stage `i` is planned for `n g^i` keys at rate `p_i = P (1 - r) r^i`, where
/// `n` and `P` are the plan, `g` the growth and `r` the tightening. A key that was never
/// inserted is a false positive when some stage says maybe, so by the union bound the chain's
/// rate is at most `sum p_i = P (1 - r^s) < P` for `s` stages, with every stage within its
/// capacity. `docs/format.md` ("Scalable filters") gives the proof.
///
/// Keys are checked against every stage before they are inserted, so a key already in the
/// chain takes no room; each stage's item count is exact. A stage that cannot be added (the
/// 64th stage is the last, a capacity past `2^64`, a plan past [`crate::MAX_BITS`], a stage
/// that would take the chain past its [growth limit](ScalableBloomFilter::set_growth_limit)
/// or an allocation the system refuses) is not an error: the key goes into the newest stage, which
/// then fills past its plan, and [`ScalableBloomFilter::is_over_capacity`] says so. No key is
/// ever dropped.
///
/// Lookups hash a key once and probe one stage after another, newest first: a key that is
/// absent costs one probe per stage.
#[derive(Clone, Debug)]
pub struct ScalableBloomFilter {
    plan: Plan,
    growth: u32,
    tightening: f64,
    stages: Vec<BloomFilter>,
    /// The most payload bytes growth may reach; not persisted.
    growth_limit: Option<u64>,
}

/// Equal plans, growth, tightening (by its bits) and stages; the growth limit, which belongs
/// to the process and not the filter, is not compared.
impl PartialEq for ScalableBloomFilter {
    fn eq(&self, other: &Self) -> bool {
        self.plan == other.plan
            && self.growth == other.growth
            && self.tightening.to_bits() == other.tightening.to_bits()
            && self.stages == other.stages
    }
}

impl Eq for ScalableBloomFilter {}

impl ScalableBloomFilter {
    /// A builder for a chain whose first stage holds `capacity` keys.
    pub fn builder(capacity: u64) -> ScalableBuilder {
        ScalableBuilder::new(capacity)
    }

    /// A chain with the defaults: `capacity` keys in the first stage, rate `fpr` for the
    /// whole chain, growth 2, tightening 0.5, `xxh3-128`, NFC keys, no salt.
    ///
    /// # Errors
    /// As [`ScalableBuilder::build`].
    pub fn with_capacity(capacity: u64, fpr: f64) -> Result<Self, ScalableError> {
        ScalableBuilder::new(capacity)
            .false_positive_rate(fpr)
            .build()
    }

    /// The first stage's capacity and the whole chain's target rate.
    #[must_use]
    pub const fn plan(&self) -> Plan {
        self.plan
    }

    /// Each stage's capacity over the one before it.
    #[must_use]
    pub const fn growth(&self) -> u32 {
        self.growth
    }

    /// Each stage's rate over the one before it.
    #[must_use]
    pub const fn tightening(&self) -> f64 {
        self.tightening
    }

    /// The stages, oldest first; never empty.
    #[must_use]
    pub fn stages(&self) -> &[BloomFilter] {
        &self.stages
    }

    /// The position rule of every stage.
    #[must_use]
    pub fn rule(&self) -> PositionRule {
        self.newest().config().rule()
    }

    /// The key encoding of every stage.
    #[must_use]
    pub fn encoding(&self) -> KeyEncoding {
        self.newest().config().encoding()
    }

    /// The newest stage: the one new keys go into, whose configuration (encoding, tables,
    /// rule, salt) every stage shares but for its size and plan.
    #[must_use]
    pub fn newest_stage(&self) -> &BloomFilter {
        self.newest()
    }

    fn newest(&self) -> &BloomFilter {
        // Never empty: built with one stage, and a snapshot has at least one.
        self.stages
            .last()
            .unwrap_or_else(|| unreachable!("a chain has a stage"))
    }

    /// The planned capacity and rate of stage `i`: `n g^i` (`None` past `2^64`) and
    /// `P (1 - r) r^i`, each rate the one before times `r` in binary64, as the format checks.
    fn stage_plan(&self, i: usize) -> Option<Plan> {
        let mut capacity = self.plan.capacity;
        let mut rate = self.plan.false_positive_rate * (1.0 - self.tightening);
        for _ in 0..i {
            capacity = capacity.checked_mul(u64::from(self.growth))?;
            rate *= self.tightening;
        }
        Plan::new(capacity, rate)
    }

    /// The configuration of stage `i`: `template`'s encoding, tables and salt, `rule`, and
    /// [`Layout::default_for`] the rule and the stage's rate, planned for the stage's plan.
    fn stage_config(
        &self,
        i: usize,
        template: &FilterConfig,
        rule: PositionRule,
    ) -> Result<FilterConfig, ScalableError> {
        let plan = self
            .stage_plan(i)
            .ok_or(ParamsError::InvalidFalsePositiveRate { found: 0.0 })?;
        let layout = Layout::default_for(rule, plan.false_positive_rate);
        let params =
            FilterParams::planned_for(rule, layout, plan.capacity, plan.false_positive_rate)?;
        // Every stage is whole 64-bit words (the format's rule), so the stages' payloads
        // follow one another with no padding: round the standard layout up.
        let params =
            FilterParams::with_layout(layout, params.bits().next_multiple_of(64), params.hashes())?;
        let config = FilterConfig::new(params)
            .with_encoding(template.encoding())
            .with_salt(template.salt().clone())?
            .with_rule(rule)?
            .with_tables(template.tables())
            .with_plan(Some(plan));
        Ok(config)
    }

    /// Adds a stage if the newest is full and another can be made; otherwise the newest
    /// stage takes the key (see the type's documentation).
    fn grow_if_full(&mut self) {
        let newest = self.newest();
        let full = newest
            .config()
            .plan()
            .is_some_and(|p| newest.items_inserted() >= p.capacity);
        if !full || self.stages.len() >= bloom_format::MAX_STAGES {
            return;
        }
        let template = newest.config().clone();
        let limit = self.growth_limit.unwrap_or(u64::MAX);
        let next = self
            .stage_config(self.stages.len(), &template, template.rule())
            .ok()
            .filter(|config| {
                self.payload_len()
                    .checked_add(config.bits() / 8)
                    .is_some_and(|total| total <= limit)
            })
            .and_then(|config| BloomFilter::new(config).ok());
        if let Some(stage) = next {
            self.stages.push(stage);
        }
    }

    /// Whether the chain's tables are foreign, as its newest stage records them.
    fn foreign_tables(&self) -> bool {
        self.stages.iter().any(BloomFilter::foreign_tables)
    }

    /// Inserts a key unless some stage already says maybe for it. Returns whether it was
    /// added, so that before the call `insert(k) == !contains(k)`. Grows the chain when the
    /// newest stage is full. A byte key is answered with a `Result`, as in
    /// [`BloomFilter::insert`].
    pub fn insert<K: Key + ?Sized>(&mut self, key: &K) -> K::Answer<bool> {
        K::answer(self.insert_key(key))
    }

    fn insert_key<K: Key + ?Sized>(&mut self, key: &K) -> Result<bool, K::Error> {
        let (encoded, sensitive) = key::prepare(key, self.encoding(), self.foreign_tables())?;
        // One hash for every stage: they share the rule and the salt. (A chain always has a
        // stage; the `else` branches keep a panic path out of the hot loop.)
        let Some(newest) = self.stages.last() else {
            return Ok(false);
        };
        let hash = newest.key_hash(&encoded);
        if !sensitive && self.stages.iter().rev().any(|s| s.probe_hash(hash)) {
            return Ok(false);
        }
        self.grow_if_full();
        let Some(stage) = self.stages.last_mut() else {
            return Ok(false);
        };
        Ok(stage.insert_hash(hash, sensitive))
    }

    /// Inserts every key, as `insert` in a loop; returns how many were added. Byte keys are
    /// answered with a `Result`: the first key a text encoding refuses stops the call, after
    /// every key before it was inserted.
    pub fn insert_all<I>(&mut self, keys: I) -> <I::Item as Key>::Answer<u64>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let mut added = 0u64;
        let outcome = keys.into_iter().try_for_each(|key| {
            added += u64::from(self.insert_key(&key)?);
            Ok(())
        });
        <I::Item as Key>::answer(outcome.map(|()| added))
    }

    /// Whether a key may have been inserted: `false` is definite. One probe per stage, newest
    /// first, for a key that is absent.
    #[must_use]
    #[inline]
    pub fn contains<K: Key + ?Sized>(&self, key: &K) -> K::Answer<bool> {
        K::answer(
            key::prepare(key, self.encoding(), self.foreign_tables()).map(
                |(encoded, sensitive)| {
                    if sensitive {
                        return true;
                    }
                    // One hash for every stage: they share the rule and the salt. (A chain
                    // always has a stage; the `else` keeps a panic path, which stops the
                    // compiler hoisting the rule's dispatch out of a caller's loop, away.)
                    let mut stages = self.stages.iter().rev();
                    let Some(newest) = stages.next() else {
                        return true;
                    };
                    let hash = newest.key_hash(&encoded);
                    newest.probe_hash(hash) || stages.any(|s| s.probe_hash(hash))
                },
            ),
        )
    }

    /// The items inserted, over all stages.
    #[must_use]
    pub fn items_inserted(&self) -> u64 {
        self.stages.iter().map(BloomFilter::items_inserted).sum()
    }

    /// The bits of all stages.
    #[must_use]
    pub fn bits(&self) -> u64 {
        self.stages.iter().map(|s| s.config().bits()).sum()
    }

    /// The chain's capacity so far: the stages' capacities added up. It grows with the
    /// chain.
    #[must_use]
    pub fn capacity_so_far(&self) -> u64 {
        self.stages
            .iter()
            .filter_map(|s| s.config().plan())
            .fold(0u64, |total, p| total.saturating_add(p.capacity))
    }

    /// The chain's false-positive rate estimated from the stages' bits:
    /// `1 - prod (1 - f_i)` over the stages' estimates `f_i`.
    #[must_use]
    pub fn estimated_false_positive_rate(&self) -> f64 {
        1.0 - self
            .stages
            .iter()
            .map(|s| 1.0 - s.estimated_false_positive_rate())
            .product::<f64>()
    }

    /// The payload's length in bytes: every stage's bits.
    #[must_use]
    pub fn payload_len(&self) -> u64 {
        self.bits() / 8
    }

    /// Sets the most payload bytes the chain may grow to, or `None` for no limit (the
    /// default, and what a chain loaded from a snapshot starts with). A stage that would take
    /// the payload past the limit is not added: the newest stage takes the keys past its
    /// capacity instead, and the chain is then over capacity. A reader with a size limit
    /// (`DecodeOptions::with_max_payload_len`) sets the same limit here, so that it can read
    /// back whatever it writes. The limit belongs to this process: it is not persisted.
    pub fn set_growth_limit(&mut self, max_payload_bytes: Option<u64>) {
        self.growth_limit = max_payload_bytes;
    }

    /// The growth limit ([`ScalableBloomFilter::set_growth_limit`]).
    #[must_use]
    pub const fn growth_limit(&self) -> Option<u64> {
        self.growth_limit
    }

    /// Keys that still fit before the chain grows: the newest stage's capacity less its
    /// items (0 once it is full or over).
    #[must_use]
    pub fn remaining_capacity(&self) -> u64 {
        let newest = self.newest();
        newest
            .config()
            .plan()
            .map_or(0, |p| p.capacity.saturating_sub(newest.items_inserted()))
    }

    /// The estimated rate past which the chain is over its target: the target plus four
    /// standard deviations of the chain's estimate at the stages' own rates (as
    /// [`Capacity::rate_limit`](crate::Capacity::rate_limit) for one filter), so that a chain
    /// whose stages sit exactly at their plans is not called over by chance.
    #[must_use]
    pub fn rate_limit(&self) -> f64 {
        let configs: Vec<&FilterConfig> = self.stages.iter().map(BloomFilter::config).collect();
        Self::rate_limit_for(self.plan.false_positive_rate, configs)
    }

    /// [`ScalableBloomFilter::rate_limit`] for a chain of target `target` whose stages have
    /// the configurations `stages` ([`ScalableBloomFilter::stage_configs`]): for readers
    /// that stream a chain's payload and estimate its rate themselves.
    #[must_use]
    pub fn rate_limit_for<'c>(
        target: f64,
        stages: impl IntoIterator<Item = &'c FilterConfig>,
    ) -> f64 {
        let variance: f64 = stages
            .into_iter()
            .map(|config| {
                let p = config.plan().map_or(target, |p| p.false_positive_rate);
                crate::capacity::rate_sigma(p, config.bits(), config.hashes()).powi(2)
            })
            .sum();
        target + 4.0 * variance.sqrt()
    }

    /// Whether the newest stage holds more keys than its plan: the chain could not grow
    /// (see the type's documentation).
    #[must_use]
    pub fn is_over_items(&self) -> bool {
        let newest = self.newest();
        newest
            .config()
            .plan()
            .is_some_and(|p| newest.items_inserted() > p.capacity)
    }

    /// Whether the chain cannot keep its promise any more: it could not add a stage, so its
    /// newest stage went past its capacity ([`ScalableBloomFilter::is_over_items`]), or the
    /// rate estimated from the bits passed [`ScalableBloomFilter::rate_limit`]. Full older
    /// stages are what a chain is made of, not a sign of trouble. Counts every stage's set
    /// bits (a pass over the chain).
    #[must_use]
    pub fn is_over_capacity(&self) -> bool {
        self.is_over_items() || self.estimated_false_positive_rate() > self.rate_limit()
    }
}
