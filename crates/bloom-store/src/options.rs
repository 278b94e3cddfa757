//! [`FilterOptions`]: how the filter for a store is planned, and which snapshots fit it.

use std::path::{Path, PathBuf};

use bloom_core::{
    ConfigError, CountingError, FilterConfig, FilterParams, KeyEncoding, Layout, ParamsError,
    PositionRule, RandomSaltError, Salt,
};

use crate::outcome::Incompatibility;

/// How the filter for a store is made. Start from [`FilterOptions::new`] and change what you
/// need with the `with_*` methods.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct FilterOptions {
    /// The number of keys the filter is planned for. Past it, the false-positive rate climbs
    /// above the target and [`Metrics::over_capacity`](crate::Metrics::over_capacity)
    /// reports it; [`FilteredStore::rebuild`](crate::FilteredStore::rebuild) then grows the
    /// filter.
    pub capacity: u64,
    /// The target false-positive rate at capacity.
    pub false_positive_rate: f64,
    /// The position rule, if pinned. Unpinned (`None`, the default), new filters get the
    /// fastest rule for their layout (`xxh3-64` for the split-block layouts, `xxh3-128`
    /// otherwise), or `sha256-double` when the salt policy gives them a salt (the setup for
    /// keys an adversary picks: a salt does not protect the xxHash rules); and a snapshot
    /// with any rule is used. Pinned, a snapshot with another rule is rebuilt.
    pub rule: Option<PositionRule>,
    /// The layout, if pinned. Unpinned (`None`, the default), new filters get
    /// [`Layout::default_for`] their rule and rate: [`Layout::SplitBlock512`] (one cache line
    /// per key, one bit per word) where it costs at most 10 % more bits than the standard
    /// layout, else [`Layout::Blocked512`] where a block reaches the rate, else
    /// [`Layout::Standard`]; and a snapshot with any layout is used, so that snapshots
    /// written before this default keep loading. Pinned, a snapshot with another layout is
    /// rebuilt.
    pub layout: Option<Layout>,
    /// The key encoding, applied to every key before it reaches the filter or the store.
    pub encoding: KeyEncoding,
    /// Which salt a filter gets, and which salts a snapshot may carry.
    pub salt: SaltPolicy,
    /// The largest filter, in payload bytes: snapshots over it are not read, and a growth
    /// rebuild stops at it (reported by
    /// [`Metrics::capacity_limited`](crate::Metrics::capacity_limited)), so every filter
    /// this store makes can be saved and read back. Default 4 GiB (about 3.5 billion keys at
    /// 1%).
    pub max_snapshot_bytes: u64,
    /// Whether the filter is a counting filter (4-bit counters, four times the bytes of a
    /// plain filter at the same rate), so that [`FilteredStore::remove`] takes removed keys
    /// out of it. A plain filter (the default) keeps a removed key's bits: removals leave
    /// stale bits, counted in [`Metrics::stale_removals`], and the filter is rebuilt once
    /// its estimated false-positive rate passes the target. A counting filter is placed as
    /// the standard layout; a snapshot of the other kind is rebuilt.
    ///
    /// [`FilteredStore::remove`]: crate::FilteredStore::remove
    /// [`Metrics::stale_removals`]: crate::Metrics::stale_removals
    pub counting: bool,
    /// The snapshot file the filter is loaded from when it opens (and saved to by
    /// [`FilteredStore::open_and_recover`] after a rebuild), if any. Default none: the
    /// filter is built from the store.
    ///
    /// [`FilteredStore::open_and_recover`]: crate::FilteredStore::open_and_recover
    pub snapshot: Option<PathBuf>,
    /// The filter's name in its events and metrics (their `filter` label; see
    /// [`crate::telemetry`]): 1 to 64 ASCII letters, digits, `.`, `_` or `-`, one per
    /// wrapper open in a process (two of one name share their series). Default `default`.
    pub name: String,
}

/// Which salt new filters get and which snapshots are accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SaltPolicy {
    /// No salt; salted snapshots are incompatible.
    None,
    /// A fresh random salt for every new filter; a snapshot's salt, whatever it is, is kept.
    Random,
    /// This salt exactly.
    Fixed(Salt),
}

/// Why filter options cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OptionsError {
    /// The capacity or false-positive rate cannot be planned.
    #[error("invalid filter options: {0}")]
    Params(ParamsError),
    /// The rule, encoding and salt do not fit together.
    #[error("invalid filter options: {0}")]
    Config(ConfigError),
    /// A counting filter was asked for with a layout or rule that has no counting form.
    #[error("invalid filter options: {0}")]
    Counting(CountingError),
    /// The filter planned for the capacity is larger than `max_snapshot_bytes`, so it could
    /// never be saved and read back.
    #[error(
        "a filter for {capacity} keys needs {bytes} bytes, over max_snapshot_bytes = {limit}; lower the capacity or raise the limit"
    )]
    OverSnapshotLimit {
        /// The capacity asked for.
        capacity: u64,
        /// The bytes its filter needs.
        bytes: u64,
        /// `max_snapshot_bytes`.
        limit: u64,
    },
    /// The store's keys are in another key encoding than configured: they could not be
    /// compared with keys encoded this way.
    #[error(
        "the store's keys are in the {store} key encoding, but {configured} is configured; configure {store}, or start a new store"
    )]
    EncodingMismatch {
        /// The encoding the store recorded.
        store: String,
        /// The configured one.
        configured: String,
    },
    /// No random salt could be made.
    #[error(transparent)]
    Salt(#[from] RandomSaltError),
    /// The filter's name ([`FilterOptions::name`]) is not 1 to 64 ASCII letters, digits,
    /// `.`, `_` or `-`: it goes into every event and metric label as it is.
    #[error(
        "invalid filter name ({length} bytes): use 1 to 64 ASCII letters, digits, '.', '_' or '-'"
    )]
    InvalidName {
        /// Its length in bytes (the name itself is not echoed).
        length: usize,
    },
}

/// Whether `name` may name a filter in events and metrics: 1 to 64 ASCII letters, digits,
/// `.`, `_` or `-` (a shared filter's Redis name always is).
fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A filter configuration planned for a capacity.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) config: FilterConfig,
    /// The capacity the configuration is planned for.
    pub(crate) capacity: u64,
    /// Whether the wanted capacity was cut to fit `max_snapshot_bytes`.
    pub(crate) limited: bool,
}

impl FilterOptions {
    /// Options for `capacity` keys at false-positive rate `fpr`, with rule and layout
    /// unpinned (new filters: `xxh3-128` and `blocked-512`; see [`FilterOptions::rule`]),
    /// NFC keys, no salt and a 4 GiB snapshot limit.
    #[must_use]
    pub fn new(capacity: u64, fpr: f64) -> Self {
        Self {
            capacity,
            false_positive_rate: fpr,
            rule: None,
            layout: None,
            encoding: KeyEncoding::Nfc,
            salt: SaltPolicy::None,
            max_snapshot_bytes: 1 << 32,
            counting: false,
            snapshot: None,
            name: "default".to_owned(),
        }
    }

    /// The filter's name in its events and metrics; see [`FilterOptions::name`].
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The snapshot file to load the filter from when it opens; see
    /// [`FilterOptions::snapshot`].
    #[must_use]
    pub fn with_snapshot(mut self, path: impl AsRef<Path>) -> Self {
        self.snapshot = Some(path.as_ref().to_path_buf());
        self
    }

    /// A counting filter (or a plain one); see [`FilterOptions::counting`].
    #[must_use]
    pub fn with_counting(mut self, counting: bool) -> Self {
        self.counting = counting;
        self
    }

    /// The snapshot payload bytes of a filter of `bits` bits (or counters).
    pub(crate) fn payload_bytes(&self, bits: u64) -> u64 {
        if self.counting {
            bits.div_ceil(2)
        } else {
            bits.div_ceil(8)
        }
    }

    /// Pins the position rule: new filters use it, and a snapshot with another is rebuilt.
    #[must_use]
    pub fn with_rule(mut self, rule: PositionRule) -> Self {
        self.rule = Some(rule);
        self
    }

    /// Pins the layout: new filters use it, and a snapshot with another is rebuilt.
    #[must_use]
    pub fn with_layout(mut self, layout: Layout) -> Self {
        self.layout = Some(layout);
        self
    }

    /// The rule of new filters: the pinned one; `sha256-double` when the salt policy gives a
    /// salt; `xxh3-128` for a counting filter; otherwise the fastest for the pinned layout,
    /// or for the rate ([`bloom_core::default_rule_and_layout`]).
    pub(crate) fn new_rule(&self) -> PositionRule {
        self.rule.unwrap_or(match (&self.salt, self.layout) {
            (SaltPolicy::Random | SaltPolicy::Fixed(_), _) => PositionRule::Sha256Double,
            (SaltPolicy::None, _) if self.counting => PositionRule::Xxh3_128,
            (SaltPolicy::None, Some(layout)) => PositionRule::fastest_for(layout),
            (SaltPolicy::None, None) => {
                bloom_core::default_rule_and_layout(self.false_positive_rate).0
            }
        })
    }

    /// The layout of new filters: the pinned one; the standard one for a counting filter;
    /// otherwise [`Layout::default_for`] the rule and rate (split-block-512 where it costs at
    /// most 10 % more bits than the standard layout, else blocked-512 where a block reaches
    /// the rate, else standard).
    pub(crate) fn new_layout(&self) -> Layout {
        self.layout.unwrap_or_else(|| {
            if self.counting {
                return Layout::Standard;
            }
            Layout::default_for(self.new_rule(), self.false_positive_rate)
        })
    }

    /// Replaces the key encoding.
    #[must_use]
    pub fn with_encoding(mut self, encoding: KeyEncoding) -> Self {
        self.encoding = encoding;
        self
    }

    /// Replaces the salt policy.
    #[must_use]
    pub fn with_salt(mut self, salt: SaltPolicy) -> Self {
        self.salt = salt;
        self
    }

    /// Replaces the snapshot size limit.
    #[must_use]
    pub fn with_max_snapshot_bytes(mut self, bytes: u64) -> Self {
        self.max_snapshot_bytes = bytes;
        self
    }

    fn params_for(&self, capacity: u64) -> Result<FilterParams, OptionsError> {
        // A rule with fewer positions than the optimum (sha256-split4: 4) uses all it has,
        // with the bits that this k needs to reach the target.
        let rule = self.new_rule();
        if rule.is_guava() {
            return Ok(FilterParams::for_guava(
                capacity.max(1),
                self.false_positive_rate,
            )?);
        }
        Ok(FilterParams::planned_for(
            rule,
            self.new_layout(),
            capacity.max(1),
            self.false_positive_rate,
        )?)
    }

    /// The bits per key this plan spends.
    fn bits_per_key(&self) -> f64 {
        let probe = 1_000_000;
        self.params_for(probe)
            .map_or(f64::INFINITY, |p| p.bits() as f64 / probe as f64)
    }

    /// The most keys a filter within `max_snapshot_bytes` is planned for at the target rate.
    pub(crate) fn largest_capacity(&self) -> u64 {
        let bits = self
            .max_snapshot_bytes
            .saturating_mul(if self.counting { 2 } else { 8 });
        (bits as f64 / self.bits_per_key()).floor() as u64
    }

    /// Checks that the options can be planned and that the filter for `capacity` fits the
    /// snapshot limit.
    pub(crate) fn validate(&self) -> Result<(), OptionsError> {
        if !is_valid_name(&self.name) {
            return Err(OptionsError::InvalidName {
                length: self.name.len(),
            });
        }
        if self.capacity == 0 {
            return Err(ParamsError::ZeroItems.into());
        }
        let params = self.params_for(self.capacity)?;
        if self.counting {
            if let Some(layout) = self.layout.filter(|&l| l != Layout::Standard) {
                return Err(CountingError::Layout(layout).into());
            }
            if self.new_rule().is_guava() {
                return Err(CountingError::Rule(self.new_rule()).into());
            }
        }
        let bytes = self.payload_bytes(params.bits());
        if bytes > self.max_snapshot_bytes {
            return Err(OptionsError::OverSnapshotLimit {
                capacity: self.capacity,
                bytes,
                limit: self.max_snapshot_bytes,
            });
        }
        FilterConfig::new(params)
            .with_encoding(self.encoding)
            .with_rule(self.new_rule())?;
        Ok(())
    }

    /// A new filter's configuration planned for `wanted` keys, or for fewer if that would not
    /// fit `max_snapshot_bytes`.
    pub(crate) fn plan(&self, wanted: u64) -> Result<Plan, OptionsError> {
        let mut capacity = wanted.max(1);
        let mut params = self.params_for(capacity)?;
        let mut limited = false;
        if self.payload_bytes(params.bits()) > self.max_snapshot_bytes {
            capacity = self.largest_capacity().clamp(1, capacity);
            params = self.params_for(capacity)?;
            limited = true;
            // Rounding in the formula can leave the plan a few bits over; trim it.
            while self.payload_bytes(params.bits()) > self.max_snapshot_bytes && capacity > 1 {
                capacity -= capacity / 1024 + 1;
                params = self.params_for(capacity)?;
            }
        }
        let salt = match &self.salt {
            SaltPolicy::None => Salt::default(),
            SaltPolicy::Fixed(salt) => salt.clone(),
            SaltPolicy::Random => Salt::random()?,
        };
        // Recorded in the snapshot, so that `bloom inspect` judges it as the metrics do.
        let config = FilterConfig::new(params)
            .with_plan(bloom_core::Plan::new(capacity, self.false_positive_rate))
            .with_encoding(self.encoding)
            .with_salt(salt)?
            .with_rule(self.new_rule())?;
        Ok(Plan {
            config,
            capacity,
            limited,
        })
    }

    /// The capacity a filter of `bits` bits was planned for at the target rate.
    pub(crate) fn capacity_of(&self, bits: u64) -> u64 {
        (bits as f64 / self.bits_per_key()).floor() as u64
    }

    /// Why a snapshot's configuration cannot be used with these options, if it cannot.
    pub(crate) fn incompatibility(&self, config: &FilterConfig) -> Option<Incompatibility> {
        if let Some(layout) = self.layout
            && config.layout() != layout
        {
            return Some(Incompatibility::Layout {
                snapshot: config.layout(),
                configured: layout,
            });
        }
        if let Some(rule) = self.rule
            && config.rule() != rule
        {
            return Some(Incompatibility::Rule {
                snapshot: config.rule(),
                configured: rule,
            });
        }
        if config.encoding() != self.encoding {
            return Some(Incompatibility::Encoding {
                snapshot: config.encoding(),
                configured: self.encoding,
            });
        }
        if config.has_foreign_tables() {
            return Some(Incompatibility::UnicodeTables {
                snapshot: config.tables(),
                build: self.encoding.build_tables(),
            });
        }
        match &self.salt {
            SaltPolicy::None if !config.salt().is_empty() => Some(Incompatibility::Salted),
            SaltPolicy::Fixed(salt) if salt != config.salt() => Some(Incompatibility::SaltDiffers),
            _ => None,
        }
    }
}

// The variants show their cause in their message, so they do not also return it as their
// `source` (a report would show it twice); the conversions are written out.
impl From<ParamsError> for OptionsError {
    fn from(e: ParamsError) -> Self {
        Self::Params(e)
    }
}

impl From<ConfigError> for OptionsError {
    fn from(e: ConfigError) -> Self {
        Self::Config(e)
    }
}

impl From<CountingError> for OptionsError {
    fn from(e: CountingError) -> Self {
        Self::Counting(e)
    }
}
