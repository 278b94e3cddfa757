//! [`FilterConfig`]: everything that decides where a key's bits land.

use crate::bits::AllocError;
use crate::encoding::{EncodedKey, KeyEncoding, UnicodeTables};
use crate::layout::Layout;
use crate::params::{FilterParams, ParamsError};
use crate::position::{PositionHasher, PositionRule, Positions, Salt, SaltTooLong};
use bloom_format::Plan;

/// The complete description of a filter's bit mapping: size, position rule, key encoding (with
/// the Unicode tables its bits were built with) and salt. Two filters with equal
/// configurations put every key on the same bits, in any process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FilterConfig {
    params: FilterParams,
    rule: PositionRule,
    encoding: KeyEncoding,
    /// The tables the bits were built with: this build's for a new filter, the snapshot's
    /// record for a loaded one.
    tables: UnicodeTables,
    salt: Salt,
    /// The capacity and rate the filter was sized for, when known. Recorded in snapshots; it
    /// does not change where a key's bits land.
    plan: Option<Plan>,
}

/// Why a configuration was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The size parameters were invalid.
    #[error(transparent)]
    Params(#[from] ParamsError),
    /// The rule does not work with the layout (`sha256-split4` is standard only).
    #[error("position rule {rule} does not work with the {layout} layout")]
    RuleLayout {
        /// The rule.
        rule: PositionRule,
        /// The layout.
        layout: crate::layout::Layout,
    },
    /// The rule cannot produce that many positions per key.
    #[error("position rule {rule} supports at most {max} positions per key, got {found}")]
    TooManyHashesForRule {
        /// The rule.
        rule: PositionRule,
        /// The requested `k`.
        found: u32,
        /// The rule's maximum.
        max: u32,
    },
    /// The salt was too long.
    #[error(transparent)]
    Salt(#[from] SaltTooLong),
    /// The rule takes no salt (Guava's rules hash with murmur3 seed 0, as Guava does).
    #[error("position rule {rule} takes no salt")]
    SaltNotSupported {
        /// The rule.
        rule: PositionRule,
    },
    /// Guava's rules need `m` to be a whole number of 64-bit words that a Guava stream can
    /// hold.
    #[error(
        "position rule {rule} needs m to be a multiple of 64 of at most {max}, got {bits} (plan with FilterParams::for_guava)"
    )]
    GuavaBits {
        /// The rule.
        rule: PositionRule,
        /// The bit count.
        bits: u64,
        /// [`bloom_format::GUAVA_MAX_BITS`].
        max: u64,
    },
}

impl FilterConfig {
    /// A configuration of `params` (with their layout) and the default rule
    /// ([`PositionRule::Xxh3_128`], which works with every layout), the [`KeyEncoding::Nfc`]
    /// encoding and no salt.
    ///
    /// For a new filter, [`FilterConfig::planned`] also picks the fastest layout. For keys an
    /// adversary chooses, use [`PositionRule::Sha256Double`] with a secret [`Salt`].
    #[must_use]
    pub fn new(params: FilterParams) -> Self {
        Self {
            params,
            rule: PositionRule::default(),
            encoding: KeyEncoding::Nfc,
            tables: KeyEncoding::Nfc.build_tables(),
            salt: Salt::default(),
            plan: None,
        }
    }

    /// The configuration of a new filter for `items` keys at false-positive rate `fpr`, with
    /// the defaults measured fastest ([`default_rule_and_layout`](crate::default_rule_and_layout)):
    /// from about 0.0861 % to 3.48 % the [`Layout::SplitBlock512`](crate::Layout::SplitBlock512)
    /// layout (one bit in each of eight words of one cache line, about 5 % more bits than
    /// the standard layout at 1 %) with the `xxh3-64` rule; at other rates the
    /// [`Layout::Blocked512`](crate::Layout::Blocked512) layout with `xxh3-128`. NFC keys, no
    /// salt.
    ///
    /// ```
    /// let config = bloom_core::FilterConfig::planned(1_000_000, 0.01)?;
    /// assert_eq!(config.layout(), bloom_core::Layout::SplitBlock512);
    /// assert_eq!(config.rule(), bloom_core::PositionRule::Xxh3_64);
    /// assert!(config.params().predicted_false_positive_rate(1_000_000) <= 0.01);
    /// # Ok::<(), bloom_core::ParamsError>(())
    /// ```
    ///
    /// # Errors
    /// As [`FilterParams::planned`].
    pub fn planned(items: u64, fpr: f64) -> Result<Self, ParamsError> {
        let (rule, layout) = crate::default_rule_and_layout(fpr);
        let params = FilterParams::planned_for(rule, layout, items, fpr)?;
        let mut config = Self::new(params);
        // The default rule takes the default layout, and takes no salt.
        config.rule = rule;
        config.plan = Plan::new(items, fpr);
        Ok(config)
    }

    /// The configuration of the reference article's teaching filter: 1024 bits, 4 positions,
    /// [`PositionRule::Sha256Split4`], [`KeyEncoding::Utf8`], no salt.
    #[must_use]
    pub fn seed_teaching() -> Self {
        Self {
            params: FilterParams::new(1024, 4).unwrap_or_else(|_| unreachable!("1024/4 is valid")),
            rule: PositionRule::Sha256Split4,
            encoding: KeyEncoding::Utf8,
            tables: UnicodeTables::default(),
            salt: Salt::default(),
            plan: None,
        }
    }

    /// Replaces the position rule.
    ///
    /// # Errors
    /// [`ConfigError::RuleLayout`] when the rule does not work with the layout,
    /// [`ConfigError::TooManyHashesForRule`] when `k` is above the rule's maximum, and for
    /// Guava's rules [`ConfigError::SaltNotSupported`] or [`ConfigError::GuavaBits`].
    pub fn with_rule(mut self, rule: PositionRule) -> Result<Self, ConfigError> {
        if rule.is_guava() {
            if !self.salt.is_empty() {
                return Err(ConfigError::SaltNotSupported { rule });
            }
            let bits = self.params.bits();
            if !bits.is_multiple_of(64) || bits > bloom_format::GUAVA_MAX_BITS {
                return Err(ConfigError::GuavaBits {
                    rule,
                    bits,
                    max: bloom_format::GUAVA_MAX_BITS,
                });
            }
        }
        if !rule.supports(self.params.layout()) {
            return Err(ConfigError::RuleLayout {
                rule,
                layout: self.params.layout(),
            });
        }
        if self.params.hashes() > rule.max_hashes() {
            return Err(ConfigError::TooManyHashesForRule {
                rule,
                found: self.params.hashes(),
                max: rule.max_hashes(),
            });
        }
        self.rule = rule;
        Ok(self)
    }

    /// Replaces the key encoding; the filter's tables become this build's.
    #[must_use]
    pub fn with_encoding(mut self, encoding: KeyEncoding) -> Self {
        self.encoding = encoding;
        self.tables = encoding.build_tables();
        self
    }

    /// Records that the bits were built with other Unicode tables than this build's (as a
    /// snapshot says). See [`UnicodeTables`] for how such a filter answers.
    #[must_use]
    pub fn with_tables(mut self, tables: UnicodeTables) -> Self {
        self.tables = tables;
        self
    }

    /// Replaces the salt.
    ///
    /// # Errors
    /// [`ConfigError::SaltNotSupported`] for a salt under one of Guava's rules, which take
    /// none.
    pub fn with_salt(mut self, salt: Salt) -> Result<Self, ConfigError> {
        if self.rule.is_guava() && !salt.is_empty() {
            return Err(ConfigError::SaltNotSupported { rule: self.rule });
        }
        self.salt = salt;
        Ok(self)
    }

    /// Records the capacity and false-positive rate the filter is sized for (or none): what
    /// [`Filter::capacity`](crate::Filter::capacity) measures the filter against,
    /// and what snapshots record. Where the bits land does not depend on it.
    #[must_use]
    pub const fn with_plan(mut self, plan: Option<Plan>) -> Self {
        self.plan = plan;
        self
    }

    /// The capacity and rate the filter was sized for, if recorded.
    #[must_use]
    pub const fn plan(&self) -> Option<Plan> {
        self.plan
    }

    /// Builds a configuration from all its parts, checking that they fit together.
    ///
    /// # Errors
    /// [`ConfigError::TooManyHashesForRule`].
    pub fn from_parts(
        params: FilterParams,
        rule: PositionRule,
        encoding: KeyEncoding,
        salt: Salt,
    ) -> Result<Self, ConfigError> {
        Self::new(params)
            .with_encoding(encoding)
            .with_salt(salt)?
            .with_rule(rule)
    }

    /// The size parameters.
    #[must_use]
    pub const fn params(&self) -> FilterParams {
        self.params
    }

    /// The bit count `m`.
    #[must_use]
    pub const fn bits(&self) -> u64 {
        self.params.bits()
    }

    /// The positions per key `k`.
    #[must_use]
    pub const fn hashes(&self) -> u32 {
        self.params.hashes()
    }

    /// The layout.
    #[must_use]
    pub const fn layout(&self) -> crate::layout::Layout {
        self.params.layout()
    }

    /// The position rule.
    #[must_use]
    pub const fn rule(&self) -> PositionRule {
        self.rule
    }

    /// The key encoding.
    #[must_use]
    pub const fn encoding(&self) -> KeyEncoding {
        self.encoding
    }

    /// The Unicode tables the filter's bits were built with.
    #[must_use]
    pub const fn tables(&self) -> UnicodeTables {
        self.tables
    }

    /// Records that keys went into bits built with other Unicode tables under this build's:
    /// their keys follow this build's tables, the others' the recorded ones, so no single
    /// version describes the bits any more. Returns [`FilterConfig::has_foreign_tables`]
    /// after the change, for the filter to keep at hand.
    pub(crate) fn mark_tables_mixed(&mut self) -> bool {
        self.tables = UnicodeTables::default();
        self.has_foreign_tables()
    }

    /// Whether the filter's bits were built with other Unicode tables than this build's, or
    /// with tables nobody recorded. Such a filter answers *maybe* for every key with a
    /// character outside ASCII, and for every already-encoded key, since this build cannot
    /// tell whether it would have encoded those the same way.
    #[must_use]
    pub fn has_foreign_tables(&self) -> bool {
        self.tables != self.encoding.build_tables()
    }

    /// The salt (empty when unsalted).
    #[must_use]
    pub const fn salt(&self) -> &Salt {
        &self.salt
    }

    /// The bit positions of an encoded key. Prefer the filter methods; this is for tools and
    /// tests that need to see where a key lands.
    #[must_use]
    pub fn positions(&self, key: &EncodedKey<'_>) -> Positions {
        self.hasher().positions(key)
    }

    /// Where this configuration puts keys, prepared once: the positions of many keys without
    /// preparing the rule and salt again for each (what a caller placing keys itself, such as
    /// a filter held in Redis, needs).
    ///
    /// ```
    /// use bloom_core::FilterConfig;
    ///
    /// let config = FilterConfig::planned(1_000, 0.01)?;
    /// let placer = config.placer();
    /// let key = config.encoding().encode_str("café");
    /// let mut seen = Vec::new();
    /// placer.for_each_position(&key, |position| seen.push(position));
    /// assert_eq!(seen, config.positions(&key).as_slice());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn placer(&self) -> KeyPlacer {
        KeyPlacer {
            hasher: self.hasher(),
        }
    }

    pub(crate) fn hasher(&self) -> PositionHasher {
        PositionHasher::new(
            self.rule,
            self.params.layout(),
            self.bits(),
            self.hashes(),
            &self.salt,
        )
    }

    /// The first difference that makes two configurations incompatible, if any.
    /// The first part in which `other` differs from this configuration (layout, bits,
    /// positions per key, rule, encoding, salt), or `None` when filters of the two answer
    /// alike and can be combined. The plans may differ.
    #[must_use]
    pub fn mismatch(&self, other: &Self) -> Option<Mismatch> {
        if self.params.layout() != other.params.layout() {
            Some(Mismatch::Layout)
        } else if self.bits() != other.bits() {
            Some(Mismatch::Bits)
        } else if self.hashes() != other.hashes() {
            Some(Mismatch::Hashes)
        } else if self.rule != other.rule {
            Some(Mismatch::Rule)
        } else if self.encoding != other.encoding {
            Some(Mismatch::Encoding)
        } else if self.salt != other.salt {
            Some(Mismatch::Salt)
        } else {
            None
        }
    }
}

/// The part of two configurations that differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mismatch {
    /// Different layouts.
    Layout,
    /// Different bit counts.
    Bits,
    /// Different positions per key.
    Hashes,
    /// Different position rules.
    Rule,
    /// Different key encodings.
    Encoding,
    /// Different salts.
    Salt,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Layout => "layout",
            Self::Bits => "bit count (m)",
            Self::Hashes => "positions per key (k)",
            Self::Rule => "position rule",
            Self::Encoding => "key encoding",
            Self::Salt => "salt",
        })
    }
}

/// Two filters cannot be combined because their configurations differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "filters are incompatible: their {mismatch} differs; only filters with identical configurations can be combined"
)]
pub struct IncompatibleFilters {
    /// What differs.
    pub mismatch: Mismatch,
}

/// Why a configuration cannot make a counting filter.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CountingError {
    /// Counting filters place counters as the standard layout places bits; a blocked or
    /// sharded configuration has no counting form.
    #[error(
        "a counting filter uses the standard layout's positions; the {0} layout has no counting form"
    )]
    Layout(Layout),
    /// Guava's rules describe Guava's bit arrays, which have no counting form.
    #[error("the {0} rule describes Guava's bit arrays and has no counting form")]
    Rule(crate::PositionRule),
    /// The counters cannot be allocated.
    #[error(transparent)]
    Alloc(#[from] AllocError),
}

/// Where a [`FilterConfig`] puts keys, prepared once ([`FilterConfig::placer`]). Its `Debug`
/// shows nothing derived from the salt.
#[derive(Clone)]
pub struct KeyPlacer {
    hasher: PositionHasher,
}

impl KeyPlacer {
    /// Calls `visit` with each of the encoded key's `k` bit positions, in the order
    /// [`FilterConfig::positions`] lists them, with no buffer in between.
    pub fn for_each_position(&self, key: &EncodedKey<'_>, visit: impl FnMut(u64)) {
        self.hasher.each_position(self.hasher.hash(key), visit);
    }

    /// The first of the encoded key's bit positions in the order
    /// [`FilterConfig::positions`] lists them, computing no other: in a blocked, split-block
    /// or sharded layout it names the key's block, where all its positions lie.
    #[must_use]
    pub fn first_position(&self, key: &EncodedKey<'_>) -> u64 {
        self.hasher.first_position(self.hasher.hash(key))
    }

    /// The encoded key's bit positions: [`FilterConfig::positions`].
    #[must_use]
    pub fn positions(&self, key: &EncodedKey<'_>) -> Positions {
        self.hasher.positions(key)
    }
}

impl std::fmt::Debug for KeyPlacer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyPlacer(..)")
    }
}
