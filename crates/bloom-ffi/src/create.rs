//! [`FilterOptions`] and [`create`]: a new filter from a plan, planned exactly as
//! `bloom build` plans it, so that the same keys and options give the same snapshot bytes in
//! every language.

use bloom_core::{
    AnyFilter, BloomFilter, KeyEncoding, Layout, PositionRule, Salt, ScalableBloomFilter,
};

use crate::error::Error;

/// Which filter type [`create`] makes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FilterKind {
    /// A plain filter (`bloom build`).
    #[default]
    Plain,
    /// A counting filter, which can also remove keys (`bloom build --counting`).
    Counting,
    /// A scalable chain, which grows past its first plan (`bloom build --scalable`).
    Scalable,
}

impl FilterKind {
    /// `"plain"`, `"counting"` or `"scalable"`, as [`AnyFilter::kind`] names them.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Plain => "plain",
            Self::Counting => "counting",
            Self::Scalable => "scalable",
        }
    }
}

impl std::str::FromStr for FilterKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "plain" => Ok(Self::Plain),
            "counting" => Ok(Self::Counting),
            "scalable" => Ok(Self::Scalable),
            other => Err(Error::invalid(format!(
                "unknown filter kind {other:?}; expected one of: plain, counting, scalable"
            ))),
        }
    }
}

/// What a new filter is planned for and how it hashes keys: the builder's options, with the
/// builder's (and `bloom build`'s) defaults.
#[derive(Clone, Debug)]
pub struct FilterOptions {
    /// The keys the filter is planned to hold (a chain: its first stage).
    pub expected_items: u64,
    /// The false-positive rate planned for (a chain: the whole chain's bound).
    pub false_positive_rate: f64,
    /// The filter type.
    pub kind: FilterKind,
    /// The position rule; `None` for the default (`sha256-double` when salted).
    pub rule: Option<PositionRule>,
    /// The layout; `None` for the default for the rate. A chain chooses each stage's.
    pub layout: Option<Layout>,
    /// The key encoding (default NFC).
    pub encoding: KeyEncoding,
    /// A secret salt; empty for none.
    pub salt: Salt,
    /// The most payload bytes a scalable filter may grow to (0: 1 GiB, what a load reads by
    /// default), so that what it saves can be loaded again. Only a chain grows: for another
    /// kind it must be 0 (a filter of a plan has the plan's size).
    pub max_payload_bytes: u64,
}

impl FilterOptions {
    /// The defaults for `expected_items` keys at `false_positive_rate`.
    #[must_use]
    pub fn new(expected_items: u64, false_positive_rate: f64) -> Self {
        Self {
            expected_items,
            false_positive_rate,
            kind: FilterKind::Plain,
            rule: None,
            layout: None,
            encoding: KeyEncoding::Nfc,
            salt: Salt::default(),
            max_payload_bytes: 0,
        }
    }

    /// Sets the rule by its name (`xxh3-128`, `sha256-double`, ...).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an unknown name.
    pub fn rule_named(&mut self, name: &str) -> Result<(), Error> {
        self.rule = Some(name.parse().map_err(|e| Error::invalid(format!("{e}")))?);
        Ok(())
    }

    /// Sets the layout by its name (`standard`, `blocked-512`, `split-block-512`, ...).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an unknown name.
    pub fn layout_named(&mut self, name: &str) -> Result<(), Error> {
        self.layout = Some(name.parse().map_err(|e| Error::invalid(format!("{e}")))?);
        Ok(())
    }

    /// Sets the encoding by its name (`nfc`, `utf8`, `bytes`, `nfc-trim-lower`,
    /// `utf16le`).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an unknown name.
    pub fn encoding_named(&mut self, name: &str) -> Result<(), Error> {
        self.encoding = name.parse().map_err(|e| Error::invalid(format!("{e}")))?;
        Ok(())
    }

    /// Sets the salt.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a salt longer
    /// than the format allows.
    pub fn salt_bytes(&mut self, salt: &[u8]) -> Result<(), Error> {
        self.salt = Salt::new(salt).map_err(|e| Error::invalid(e.to_string()))?;
        Ok(())
    }
}

/// An empty filter planned as `options` say: the plan, rule, layout and encoding that
/// `bloom build --items N --fpr P` (with the same options) chooses, so that the same keys
/// make the same snapshot bytes.
///
/// # Errors
/// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a plan or options
/// that cannot be built, [`ErrorKind::OutOfMemory`](crate::ErrorKind::OutOfMemory) when the
/// bits cannot be allocated.
pub fn create(options: &FilterOptions) -> Result<AnyFilter, Error> {
    let (items, fpr) = (options.expected_items, options.false_positive_rate);
    if options.kind == FilterKind::Scalable {
        if let Some(layout) = options.layout {
            return Err(Error::invalid(format!(
                "a scalable filter chooses each stage's layout; leave out the layout ({layout})"
            )));
        }
        let mut builder = ScalableBloomFilter::builder(items)
            .false_positive_rate(fpr)
            .encoding(options.encoding)
            .salt(options.salt.clone())
            .growth_limit(crate::snapshots::payload_limit(options.max_payload_bytes));
        if let Some(rule) = options.rule {
            builder = builder.rule(rule);
        }
        return builder
            .build()
            .map(AnyFilter::Scalable)
            .map_err(|e| Error::build(&e));
    }
    if options.max_payload_bytes != 0 {
        // Not ignored in silence: a caller who set it expects a bound it would not get.
        return Err(Error::invalid(format!(
            "max_bytes (max_payload_bytes in C) limits how far a scalable filter grows; a {} filter's size is its plan: leave it out, or build a scalable filter",
            options.kind.name()
        )));
    }
    let mut builder = BloomFilter::builder(items)
        .false_positive_rate(fpr)
        .encoding(options.encoding)
        .salt(options.salt.clone());
    if let Some(rule) = options.rule {
        builder = builder.rule(rule);
    }
    if let Some(layout) = options.layout {
        builder = builder.layout(layout);
    }
    Ok(match options.kind {
        FilterKind::Counting => AnyFilter::Counting(builder.build_counting()?),
        _ => AnyFilter::Plain(builder.build()?),
    })
}
