//! [`ScalableBloomFilter`]: a chain of filters that grows past any capacity while its
//! compound false-positive rate stays under the target (Almeida et al., "Scalable Bloom
//! Filters", 2007), persisted as one snapshot of the `scalable` layout (`snapshot.rs`);
//! `builder.rs` plans a new chain.

mod builder;
mod snapshot;

use std::sync::OnceLock;

use bloom_format::{DatasetGeneration, Header, Plan};

use crate::capacity::Capacity;
use crate::config::FilterConfig;
use crate::filter::Filter;
use crate::key::{self, Key};
use crate::layout::Layout;
use crate::params::{FilterParams, ParamsError};
use crate::plain::BloomFilter;
use crate::position::PositionRule;

pub use builder::{DEFAULT_GROWTH, DEFAULT_TIGHTENING, ScalableBuilder, ScalableError};

/// Why a chain cannot add a stage now ([`ScalableBloomFilter::growth_stop`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GrowthStop {
    /// It has the most stages a chain can have ([`bloom_format::MAX_STAGES`]).
    MaxStages,
    /// The next stage cannot be planned: its capacity would pass `2^64 - 1`, its rate would
    /// fall below what a binary64 holds, or its bits would pass [`crate::MAX_BITS`].
    Unplannable,
    /// The stages' rates would add up to more than the target (a chain written by another
    /// program may spend its whole budget in its first stages).
    RateBudget,
    /// The system refused the memory for the next stage, of `bytes`.
    Alloc {
        /// The next stage's payload bytes.
        bytes: u64,
    },
    /// The next stage, of `stage_bytes`, would take the payload to `total_bytes`, past the
    /// growth limit `limit` ([`ScalableBloomFilter::set_growth_limit`]).
    OverLimit {
        /// The next stage's payload bytes.
        stage_bytes: u64,
        /// The chain's payload bytes with it.
        total_bytes: u64,
        /// The growth limit.
        limit: u64,
    },
}

impl std::fmt::Display for GrowthStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::MaxStages => write!(
                f,
                "a chain has at most {} stages",
                bloom_format::MAX_STAGES
            ),
            Self::Unplannable => f.write_str(
                "its next stage cannot be planned (its capacity, rate or size would be past what a filter can have)",
            ),
            Self::RateBudget => f.write_str(
                "its stages already spend its whole false-positive budget",
            ),
            Self::Alloc { bytes } => write!(
                f,
                "the system refused the {bytes} bytes of its next stage"
            ),
            Self::OverLimit {
                stage_bytes,
                total_bytes,
                limit,
            } => write!(
                f,
                "its next stage needs {stage_bytes} bytes, which would make it {total_bytes} bytes, past the limit of {limit}"
            ),
        }
    }
}

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
/// **Chance.** A real filter's rate strays from the expectation its layout's formula gives
/// (by half or more for a small blocked or split-block filter), and a chain's first stages,
/// which carry most of its budget, are its smallest. So each stage gets the bits at which its
/// expected rate plus [`crate::CHANCE_SIGMAS`] standard deviations
/// ([`Layout::false_positive_rate_deviation`]) is at most `p_i`: a few more bits per key for
/// the small stages, next to none for the large ones, and a chain whose real rate passes `P`
/// less than 1 % of the time whatever the distribution (far less in practice).
///
/// Keys are checked against every stage before they are inserted, so a key already in the
/// chain takes no room; each stage's item count is exact. A stage that cannot be added
/// ([`GrowthStop`], or an allocation the system refuses) is not an error: the key goes into
/// the newest stage, which then fills past its plan, and
/// [`ScalableBloomFilter::is_over_capacity`] says so. No key is ever dropped. Keys that such
/// an overfull stage already answers "maybe" for are not inserted again, so once a stage is
/// far past its plan the chain's rate stays over its bound: only a chain rebuilt from the
/// keys brings it back.
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
    /// The stage growth would add next, planned, or why none can be: it depends on the
    /// stages alone, so it is planned once per newest stage, not on every insert into a full
    /// chain that cannot grow. Emptied when a stage is added.
    next_stage: OnceLock<Result<FilterConfig, GrowthStop>>,
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
        ScalableBloomFilter::builder(capacity)
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

    fn newest(&self) -> &BloomFilter {
        // Never empty: built with one stage, and a snapshot has at least one.
        self.stages
            .last()
            .unwrap_or_else(|| unreachable!("a chain has a stage"))
    }

    /// The plan of the first stage of a chain planned for `plan` with tightening `r`:
    /// `n` keys at `P (1 - r)`.
    fn first_stage_plan(plan: Plan, tightening: f64) -> Option<Plan> {
        Plan::new(plan.capacity, plan.false_positive_rate * (1.0 - tightening))
    }

    /// The size of a stage planned for `plan` in `layout`: the bits at which the layout's
    /// expected rate for the stage's capacity plus [`crate::CHANCE_SIGMAS`] standard
    /// deviations is at most the stage's rate, in whole 64-bit words (the format's rule, so
    /// that the stages' payloads follow one another with no padding).
    fn stage_params(
        rule: PositionRule,
        layout: Layout,
        plan: Plan,
    ) -> Result<FilterParams, ScalableError> {
        let (n, p) = (plan.capacity, plan.false_positive_rate);
        let mut sized_for = p;
        // The deviation shrinks with the rate: a few rounds reach a size that holds. A size
        // that moves in whole blocks (split block, blocked) can stay the same for many
        // rounds of small steps: after the 40 rounds docs/format.md gives, the rate planned
        // for is halved, at most 60 more times (which only sizes stages the 40 could not).
        for round in 0..100 {
            let planned = FilterParams::planned_for(rule, layout, n, sized_for)?;
            let params = FilterParams::with_layout(
                layout,
                planned.bits().next_multiple_of(64),
                planned.hashes(),
            )?;
            let (m, k) = (params.bits(), params.hashes());
            let high = layout.false_positive_rate(m, k, n)
                + crate::CHANCE_SIGMAS * layout.false_positive_rate_deviation(m, k, n);
            if high <= p {
                return Ok(params);
            }
            sized_for *= if round < 40 {
                (p / high).clamp(0.05, 0.95)
            } else {
                0.5
            };
            if sized_for <= 0.0 || sized_for.is_nan() {
                break;
            }
        }
        // Past what a rate or a size can be: no size holds the bound, so there is no stage
        // (growth stops with `GrowthStop::Unplannable`) rather than one that breaks it.
        Err(ParamsError::InvalidFalsePositiveRate { found: p }.into())
    }

    /// The configuration of a stage planned for `plan`: `template`'s encoding, tables and
    /// salt, `rule`, [`Layout::default_for`] the rule and the stage's rate, and
    /// [`ScalableBloomFilter::stage_params`]'s size.
    fn stage_config(
        plan: Plan,
        template: &FilterConfig,
        rule: PositionRule,
    ) -> Result<FilterConfig, ScalableError> {
        let layout = Layout::default_for(rule, plan.false_positive_rate);
        let params = Self::stage_params(rule, layout, plan)?;
        let config = FilterConfig::new(params)
            .with_encoding(template.encoding())
            .with_salt(template.salt().clone())?
            .with_rule(rule)?
            .with_tables(template.tables())
            .with_plan(Some(plan));
        Ok(config)
    }

    /// The configuration of the stage growth would add next, within the growth limit, or
    /// why there is none.
    fn next_stage_config(&self) -> Result<&FilterConfig, GrowthStop> {
        let config = self
            .next_stage
            .get_or_init(|| self.plan_next_stage())
            .as_ref()
            .map_err(|stop| *stop)?;
        let stage_bytes = config.bits() / 8;
        let limit = self.growth_limit.unwrap_or(u64::MAX);
        match self.payload_len().checked_add(stage_bytes) {
            Some(total) if total <= limit => Ok(config),
            total => Err(GrowthStop::OverLimit {
                stage_bytes,
                total_bytes: total.unwrap_or(u64::MAX),
                limit,
            }),
        }
    }

    /// Plans the stage growth would add next, whatever the growth limit: `g` times the
    /// newest stage's capacity at `r` times its rate (each product in binary64, as the
    /// format checks), or why there is none.
    fn plan_next_stage(&self) -> Result<FilterConfig, GrowthStop> {
        if self.stages.len() >= bloom_format::MAX_STAGES {
            return Err(GrowthStop::MaxStages);
        }
        let newest = self.newest().config();
        let previous = newest.plan().ok_or(GrowthStop::Unplannable)?;
        let plan = previous
            .capacity
            .checked_mul(u64::from(self.growth))
            .and_then(|capacity| {
                Plan::new(capacity, previous.false_positive_rate * self.tightening)
            })
            .ok_or(GrowthStop::Unplannable)?;
        // The format's check: the stage rates, added in binary64 in stage order, are at most
        // the target (1 + 10^-9).
        let spent = self
            .stages
            .iter()
            .filter_map(|s| s.config().plan())
            .fold(0.0, |sum, p| sum + p.false_positive_rate)
            + plan.false_positive_rate;
        if spent > self.plan.false_positive_rate * (1.0 + 1e-9) {
            return Err(GrowthStop::RateBudget);
        }
        Self::stage_config(plan, newest, newest.rule()).map_err(|_| GrowthStop::Unplannable)
    }

    /// Why the chain cannot add a stage now, or `None` when it can (growth then waits only
    /// for the newest stage to fill, and for the system to allocate the stage).
    #[must_use]
    pub fn growth_stop(&self) -> Option<GrowthStop> {
        self.next_stage_config().err()
    }

    /// Adds a stage now if the newest one is full (it holds its capacity or more) and another
    /// can be made: what an insert does before it puts a key into a full stage. A chain that
    /// could not grow when it filled (its growth limit was reached, say) grows here once the
    /// limit allows, without waiting for a key it does not hold yet: its newest stage is then
    /// within its plan again. Returns why it could not grow, or `Ok(())` when the newest stage
    /// is not full or a stage was added.
    ///
    /// # Errors
    /// The [`GrowthStop`] that kept a full chain from growing.
    pub fn grow_if_full(&mut self) -> Result<(), GrowthStop> {
        let newest = self.newest();
        let full = newest
            .config()
            .plan()
            .is_some_and(|p| newest.items_inserted() >= p.capacity);
        if !full {
            return Ok(());
        }
        let config = self.next_stage_config()?.clone();
        let bytes = config.bits() / 8;
        let stage = BloomFilter::new(config).map_err(|_| GrowthStop::Alloc { bytes })?;
        self.stages.push(stage);
        self.next_stage = OnceLock::new();
        Ok(())
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
        let (encoded, sensitive) =
            key::prepare(key, self.config().encoding(), self.foreign_tables())?;
        // One hash for every stage: they share the rule and the salt. (A chain always has a
        // stage; the `else` branches keep a panic path out of the hot loop.)
        let Some(newest) = self.stages.last() else {
            return Ok(false);
        };
        let hash = newest.key_hash(&encoded);
        if !sensitive && self.stages.iter().rev().any(|s| s.probe_hash(hash)) {
            return Ok(false);
        }
        // A chain that cannot grow puts the key into its newest stage (see the type's
        // documentation): never an error.
        let _ = self.grow_if_full();
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
            key::prepare(key, self.config().encoding(), self.foreign_tables()).map(
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
}

/// A chain answers for all its stages: its configuration is the newest stage's (whose
/// encoding, tables, rule and salt every stage shares), its counts and estimates the stages'
/// together, and its capacity that of [`Capacity::of_chain`]: the newest stage's room before
/// the chain grows, and the chain's rate against its bound. Full older stages are what a
/// chain is made of, not a sign of trouble.
impl Filter for ScalableBloomFilter {
    type LoadError = ScalableError;

    fn config(&self) -> &FilterConfig {
        self.newest().config()
    }

    /// The items inserted, over all stages (at most `2^64 - 1`).
    fn items_inserted(&self) -> u64 {
        self.stages
            .iter()
            .fold(0u64, |sum, s| sum.saturating_add(s.items_inserted()))
    }

    fn count_ones(&self) -> u64 {
        self.stages.iter().map(Filter::count_ones).sum()
    }

    /// The bits of all stages.
    fn positions(&self) -> u64 {
        self.stages.iter().map(|s| s.config().bits()).sum()
    }

    /// The stages' estimates added up.
    fn estimated_items(&self) -> f64 {
        self.stages.iter().map(Filter::estimated_items).sum()
    }

    /// `1 - prod (1 - f_i)` over the stages' estimates `f_i`.
    fn estimated_false_positive_rate(&self) -> f64 {
        1.0 - self
            .stages
            .iter()
            .map(|s| 1.0 - s.estimated_false_positive_rate())
            .product::<f64>()
    }

    fn capacity(&self) -> Option<Capacity> {
        let stages = self.stages.iter().map(|s| (s.config(), s.items_inserted()));
        Capacity::of_chain(
            self.plan.false_positive_rate,
            stages,
            self.estimated_false_positive_rate(),
        )
    }

    /// Keys that still fit before the chain grows: the newest stage's capacity less its
    /// items (0 once it is full or over).
    fn remaining_capacity(&self) -> Option<u64> {
        self.newest().remaining_capacity()
    }

    fn header(&self, dataset_generation: impl Into<DatasetGeneration>) -> Header {
        self.chain_header(dataset_generation.into())
    }

    /// Every stage's bits.
    fn payload_len(&self) -> u64 {
        self.positions() / 8
    }

    /// Each stage's bits, oldest first.
    fn for_each_payload_chunk<E>(
        &self,
        mut each: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        self.stages
            .iter()
            .try_for_each(|s| s.for_each_payload_chunk(&mut each))
    }

    /// Each stage is allocated once and its bytes land in it: one copy. A header of another
    /// layout is refused with [`ScalableError::NotScalable`].
    fn from_payload<E: From<ScalableError>>(
        header: &Header,
        fill: impl FnOnce(&mut dyn FnMut(&[u8])) -> Result<(), E>,
    ) -> Result<Self, E> {
        Self::load(header, fill)
    }
}
