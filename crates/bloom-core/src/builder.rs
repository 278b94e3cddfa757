//! [`FilterBuilder`]: a filter planned and configured in one expression, and the collecting
//! traits built on it.

use std::convert::Infallible;

use crate::atomic::AtomicBloomFilter;
use crate::bits::AllocError;
use crate::config::{ConfigError, CountingError, FilterConfig};
use crate::counting::CountingBloomFilter;
use crate::encoding::{EncodedKey, KeyEncoding};
use crate::key::Key;
use crate::layout::Layout;
use crate::params::{FilterParams, ParamsError};
use crate::plain::BloomFilter;
use crate::position::{PositionRule, Salt};

/// The false-positive rate a builder plans for unless told otherwise, and the one
/// [`BloomFilter::from_iter`] plans for: 1 %.
pub const DEFAULT_FALSE_POSITIVE_RATE: f64 = 0.01;

/// Why a builder could not make its filter.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The plan is impossible (no items, a rate outside `(0, 1)`, too many bits).
    #[error(transparent)]
    Params(#[from] ParamsError),
    /// The rule, layout, salt and plan do not go together.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The filter cannot be a counting filter (a layout or rule without one).
    #[error(transparent)]
    Counting(#[from] CountingError),
    /// The bit array cannot be allocated.
    #[error(transparent)]
    Alloc(#[from] AllocError),
}

/// A filter planned and configured in one expression: the item count and false-positive rate
/// to plan for, and any rule, layout, encoding or salt other than the defaults.
///
/// ```
/// use bloom_core::{BloomFilter, KeyEncoding, PositionRule, Salt};
///
/// let mut seen = BloomFilter::builder(1_000_000)
///     .false_positive_rate(0.001)
///     .rule(PositionRule::Sha256Double)
///     .salt(Salt::new(b"a secret of this deployment")?)
///     .encoding(KeyEncoding::NfcTrimLowercase)
///     .build()?;
/// seen.insert(" Record-1");
/// assert!(seen.contains("record-1"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Defaults: 1 % ([`DEFAULT_FALSE_POSITIVE_RATE`]); the rule and layout measured fastest for
/// the rate ([`default_rule_and_layout`](crate::default_rule_and_layout): `xxh3-64` with
/// [`Layout::SplitBlock512`] from about 0.0861 % to 3.48 %, `xxh3-128` with [`Layout::Blocked512`]
/// elsewhere); with a rule asked for, [`Layout::default_for`] it; with a layout asked for,
/// [`PositionRule::fastest_for`] it; [`Layout::Standard`] and `xxh3-128` for a counting
/// filter, the only layout it has; NFC keys, no salt. With a salt and no rule asked for,
/// `sha256-double`: the one rule a salt protects against chosen keys (as the CLI chooses).
#[derive(Clone, Debug)]
#[must_use = "a builder makes nothing until `build` is called"]
pub struct FilterBuilder {
    items: u64,
    layout: Option<Layout>,
    keys: KeyOptions,
}

/// What [`FilterBuilder`] and [`ScalableBuilder`](crate::ScalableBuilder) take alike: the
/// rate to plan for, and how keys become positions.
#[derive(Clone, Debug)]
pub(crate) struct KeyOptions {
    pub(crate) fpr: f64,
    /// The rule asked for; each builder has its own default.
    pub(crate) rule: Option<PositionRule>,
    pub(crate) encoding: KeyEncoding,
    pub(crate) salt: Salt,
}

impl KeyOptions {
    /// The rule asked for, or `sha256-double` for a salted filter: a salt is asked for
    /// against chosen keys, which only the salted SHA-256 rule resists (the CLI's default
    /// too).
    pub(crate) fn rule_or_salted(&self) -> Option<PositionRule> {
        self.rule
            .or((!self.salt.is_empty()).then_some(PositionRule::Sha256Double))
    }
}

impl Default for KeyOptions {
    fn default() -> Self {
        Self {
            fpr: DEFAULT_FALSE_POSITIVE_RATE,
            rule: None,
            encoding: KeyEncoding::Nfc,
            salt: Salt::default(),
        }
    }
}

/// The setters of [`KeyOptions`], for a builder whose field `keys` holds them.
macro_rules! key_option_setters {
    () => {
        /// The false-positive rate to plan for (default 1 %,
        /// [`DEFAULT_FALSE_POSITIVE_RATE`](crate::DEFAULT_FALSE_POSITIVE_RATE)); for a
        /// scalable filter, the rate of the whole chain however many stages it grows.
        pub fn false_positive_rate(mut self, fpr: f64) -> Self {
            self.keys.fpr = fpr;
            self
        }

        /// The position rule (`sha256-double` with a secret salt for keys an adversary
        /// picks).
        pub fn rule(mut self, rule: $crate::PositionRule) -> Self {
            self.keys.rule = Some(rule);
            self
        }

        /// The key encoding (default NFC).
        pub fn encoding(mut self, encoding: $crate::KeyEncoding) -> Self {
            self.keys.encoding = encoding;
            self
        }

        /// A secret salt (see [`Salt`](crate::Salt)).
        pub fn salt(mut self, salt: $crate::Salt) -> Self {
            self.keys.salt = salt;
            self
        }
    };
}
pub(crate) use key_option_setters;

impl FilterBuilder {
    /// A builder planning for `expected_items` keys.
    pub(crate) fn new(expected_items: u64) -> Self {
        Self {
            items: expected_items,
            layout: None,
            keys: KeyOptions::default(),
        }
    }

    key_option_setters!();

    /// The layout of the bits.
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = Some(layout);
        self
    }

    /// The configuration the builder plans: for a counting filter (standard layout only) or a
    /// plain one.
    fn config_with(&self, counting: bool) -> Result<FilterConfig, BuildError> {
        let (keys, fpr) = (&self.keys, self.keys.fpr);
        let (rule, layout) = match (keys.rule_or_salted(), self.layout) {
            (rule, Some(layout)) => (rule.unwrap_or(PositionRule::fastest_for(layout)), layout),
            (Some(rule), None) if counting => (rule, Layout::Standard),
            (Some(rule), None) => (rule, Layout::default_for(rule, fpr)),
            (None, None) if counting => (PositionRule::Xxh3_128, Layout::Standard),
            (None, None) => crate::default_rule_and_layout(fpr),
        };
        // Guava's rules size as Guava does (whole 64-bit words), in Guava's standard layout.
        let params = if rule.is_guava() && layout == Layout::Standard {
            FilterParams::for_guava(self.items, fpr)?
        } else {
            FilterParams::planned_for(rule, layout, self.items, fpr)?
        };
        let mut config = FilterConfig::new(params)
            .with_encoding(keys.encoding)
            .with_plan(bloom_format::Plan::new(self.items, fpr));
        config = config.with_rule(rule)?;
        if !keys.salt.is_empty() {
            config = config.with_salt(keys.salt.clone())?;
        }
        Ok(config)
    }

    /// The configuration the builder plans for a plain or atomic filter.
    ///
    /// # Errors
    /// [`BuildError::Params`] or [`BuildError::Config`].
    pub fn config(&self) -> Result<FilterConfig, BuildError> {
        self.config_with(false)
    }

    /// An empty [`BloomFilter`].
    ///
    /// # Errors
    /// [`BuildError::Params`], [`BuildError::Config`] or [`BuildError::Alloc`].
    pub fn build(&self) -> Result<BloomFilter, BuildError> {
        Ok(BloomFilter::new(self.config()?)?)
    }

    /// An empty [`CountingBloomFilter`] (standard layout unless another was asked for, and
    /// then refused with [`BuildError::Counting`]).
    ///
    /// # Errors
    /// As [`FilterBuilder::build`], and [`BuildError::Counting`].
    pub fn build_counting(&self) -> Result<CountingBloomFilter, BuildError> {
        Ok(CountingBloomFilter::new(self.config_with(true)?)?)
    }
}

impl BloomFilter {
    /// A builder planning for `expected_items` keys; see [`FilterBuilder`].
    pub fn builder(expected_items: u64) -> FilterBuilder {
        FilterBuilder::new(expected_items)
    }

    /// An empty filter with the defaults, planned for `expected_items` keys at
    /// false-positive rate `fpr`: the common case in one call.
    ///
    /// ```
    /// let mut seen = bloom_core::BloomFilter::with_capacity(10_000, 0.01)?;
    /// assert!(seen.insert("record-1"));
    /// assert!(seen.contains("record-1"));
    /// # Ok::<(), bloom_core::BuildError>(())
    /// ```
    ///
    /// # Errors
    /// As [`FilterBuilder::build`].
    pub fn with_capacity(expected_items: u64, fpr: f64) -> Result<Self, BuildError> {
        BloomFilter::builder(expected_items)
            .false_positive_rate(fpr)
            .build()
    }
}

/// Inserts every key, as [`BloomFilter::insert_all`]. Only keys that cannot be refused (text
/// and encoded keys): give byte keys to `insert_all`, which reports a refused one.
impl<K: Key<Error = Infallible>> Extend<K> for BloomFilter {
    fn extend<I: IntoIterator<Item = K>>(&mut self, keys: I) {
        // A text or encoded key is never refused: the answer is the count of changed keys.
        let _changed = self.insert_all(keys);
    }
}

/// Inserts every key, as [`AtomicBloomFilter::insert_all`], for text and encoded keys.
impl<K: Key<Error = Infallible>> Extend<K> for &AtomicBloomFilter {
    fn extend<I: IntoIterator<Item = K>>(&mut self, keys: I) {
        let _changed = self.insert_all(keys);
    }
}

/// A filter of the defaults holding every key (text or encoded), planned for as many keys
/// as were collected at [`DEFAULT_FALSE_POSITIVE_RATE`]. The keys are encoded and held until
/// they are counted, then inserted: collecting `n` keys holds their encoded bytes once.
///
/// An iterator has no way to return an error, so a plan that cannot be made (more bits than
/// [`MAX_BITS`](crate::MAX_BITS)) or a bit array that cannot be allocated gives the
/// saturated filter instead: one block with every bit set, which says *maybe* for every key,
/// never a false *absent*. If even that block cannot be allocated, the allocation failure is
/// handled as the standard library's collections handle theirs.
///
/// ```
/// use bloom_core::{BloomFilter, Filter};
///
/// let seen: BloomFilter = ["a", "b", "c"].into_iter().collect();
/// assert!(seen.contains("b"));
/// assert!(seen.config().params().predicted_false_positive_rate(3) <= 0.01);
/// ```
impl<K: Key<Error = Infallible>> FromIterator<K> for BloomFilter {
    fn from_iter<I: IntoIterator<Item = K>>(keys: I) -> Self {
        let encoding = KeyEncoding::Nfc;
        let keys: Vec<EncodedKey<'static>> = keys
            .into_iter()
            .map(|key| {
                let Ok(encoded) = key.encode(encoding);
                encoded.into_owned()
            })
            .collect();
        let items = u64::try_from(keys.len()).unwrap_or(u64::MAX).max(1);
        if let Ok(mut filter) = BloomFilter::builder(items).encoding(encoding).build() {
            let _changed = filter.insert_all(&keys);
            return filter;
        }
        drop(keys);
        saturated()
    }
}

/// One block of the defaults with every bit set.
fn saturated() -> BloomFilter {
    let block = FilterParams::with_layout(Layout::Blocked512, crate::BLOCK_BITS, 1)
        .map(FilterConfig::new)
        .map(|config| BloomFilter::from_bytes(config, &[0xFF; 64], 0));
    match block {
        Ok(Ok(filter)) => filter,
        _ => std::alloc::handle_alloc_error(std::alloc::Layout::new::<[u64; 8]>()),
    }
}
