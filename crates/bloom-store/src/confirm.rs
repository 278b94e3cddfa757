//! Check-then-confirm, written once for every wrapper ([`FilteredStore`](crate::FilteredStore)
//! with a filter of its own, `bloom_redis::SharedFilteredStore` with one in Redis): the
//! filter rules keys out, the primary store confirms the rest, and the answers are merged
//! and counted here.
//!
//! A wrapper says what its filter answers through [`Bits`], and whether it may answer at all
//! (a filter not trusted, a claim on the store that does not hold, a Redis that failed):
//! [`Bits::maybe_each`] returns `None`, and then the store answers every key.

use std::slice;

use bloom_core::{EncodedKey, ObservedRate};

use crate::outcome::Lookup;
use crate::primary::PrimaryStore;
use crate::telemetry::{Count, Telemetry, names};

/// What a wrapper's filter answers in check-then-confirm.
pub trait Bits {
    /// Whether each key may be in the filter, in key order, or `None` when the filter must
    /// not answer now (not trusted, the store's claim does not hold, the filter failed).
    /// Fewer answers than keys count as none.
    fn maybe_each(&self, keys: &[EncodedKey<'_>]) -> Option<Vec<bool>>;

    /// [`Bits::maybe_each`] for one key; a wrapper with a cheaper single probe says so here.
    fn maybe(&self, key: &EncodedKey<'_>) -> Option<bool> {
        self.maybe_each(slice::from_ref(key))
            .and_then(|answers| answers.first().copied())
    }
}

/// The lookup counts of one wrapper, kept by [`LookupCounts::lookup_each`], and exported
/// through the `metrics` facade when made by [`LookupCounts::exported`].
#[derive(Debug, Default)]
pub struct LookupCounts {
    queries: Count,
    store_lookups: Count,
    lookups_avoided: Count,
    false_positives: Count,
}

/// What [`LookupCounts`] counted so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct LookupTally {
    /// Membership queries answered.
    pub queries: u64,
    /// Queries that went to the store.
    pub store_lookups: u64,
    /// Queries answered "absent" by the filter alone.
    pub lookups_avoided: u64,
    /// Filter "maybe" answers that the store refuted.
    pub false_positives: u64,
}

impl LookupTally {
    /// What was counted since `earlier` (a tally taken before this one).
    #[must_use]
    pub const fn since(&self, earlier: &Self) -> Self {
        Self {
            queries: self.queries.saturating_sub(earlier.queries),
            store_lookups: self.store_lookups.saturating_sub(earlier.store_lookups),
            lookups_avoided: self.lookups_avoided.saturating_sub(earlier.lookups_avoided),
            false_positives: self.false_positives.saturating_sub(earlier.false_positives),
        }
    }

    /// The false positives observed on keys that were absent, while the filter answered.
    #[must_use]
    pub fn observed(&self) -> ObservedRate {
        ObservedRate::of_lookups(self.false_positives, self.lookups_avoided)
    }

    /// `false_positives / (false_positives + lookups_avoided)`: the filter's observed rate on
    /// keys that were absent, while it answered. `None` before any such query.
    #[must_use]
    pub fn observed_false_positive_rate(&self) -> Option<f64> {
        self.observed().rate()
    }
}

impl LookupCounts {
    /// Counts exported as the metrics of `telemetry`'s filter
    /// ([`names::QUERIES`](crate::telemetry::names::QUERIES) and the three after it).
    #[must_use]
    pub fn exported(telemetry: &Telemetry) -> Self {
        let labels = telemetry.labels();
        Self {
            queries: Count::registered(names::QUERIES, labels),
            store_lookups: Count::registered(names::STORE_LOOKUPS, labels),
            lookups_avoided: Count::registered(names::LOOKUPS_AVOIDED, labels),
            false_positives: Count::registered(names::FALSE_POSITIVES, labels),
        }
    }

    /// Whether `key` is in `store`: "absent" from `bits` alone when it rules the key out,
    /// otherwise the store's answer.
    ///
    /// # Errors
    /// The store's, when it is asked and fails.
    #[inline]
    pub fn lookup<S: PrimaryStore>(
        &self,
        bits: &impl Bits,
        store: &S,
        key: &EncodedKey<'_>,
    ) -> Result<Lookup, S::Error> {
        add(&self.queries, 1);
        let maybe = bits.maybe(key);
        if maybe == Some(false) {
            add(&self.lookups_avoided, 1);
            return Ok(Lookup::AbsentByFilter);
        }
        self.ask_store(store, key, maybe.is_some())
    }

    /// [`LookupCounts::lookup`]'s store lookup, out of line: the path the filter answers
    /// alone stays small enough to inline.
    fn ask_store<S: PrimaryStore>(
        &self,
        store: &S,
        key: &EncodedKey<'_>,
        answered: bool,
    ) -> Result<Lookup, S::Error> {
        add(&self.store_lookups, 1);
        let present = {
            let _span =
                tracing::debug_span!(target: "bloom", "bloom.store.contains", keys = 1).entered();
            store.contains(key.as_bytes())?
        };
        Ok(self.merge(present, answered))
    }

    /// Whether each key is in `store`: one pass over `bits`, then one
    /// [`PrimaryStore::contains_each`] for the keys it could not rule out. The answers, in
    /// key order, are those of [`LookupCounts::lookup`].
    ///
    /// # Errors
    /// The store's, when it is asked and fails.
    pub fn lookup_each<S: PrimaryStore>(
        &self,
        bits: &impl Bits,
        store: &S,
        keys: &[EncodedKey<'_>],
    ) -> Result<Vec<Lookup>, S::Error> {
        add(&self.queries, keys.len());
        // A filter that answered for fewer keys than it was asked is asked about none.
        let maybe = bits.maybe_each(keys).filter(|m| m.len() == keys.len());
        let asked = |i: usize| maybe.as_ref().is_none_or(|m| m.get(i) != Some(&false));
        let ask: Vec<&[u8]> = keys
            .iter()
            .enumerate()
            .filter(|&(i, _)| asked(i))
            .map(|(_, key)| key.as_bytes())
            .collect();
        add(&self.lookups_avoided, keys.len() - ask.len());
        add(&self.store_lookups, ask.len());
        let mut present = store_answers(store, &ask)?.into_iter();
        Ok((0..keys.len())
            .map(|i| {
                if !asked(i) {
                    return Lookup::AbsentByFilter;
                }
                self.merge(present.next().unwrap_or(true), maybe.is_some())
            })
            .collect())
    }

    /// The answer for a key the store was asked about; `answered` says the filter answered
    /// "maybe" for it (rather than not answering at all).
    fn merge(&self, present: bool, answered: bool) -> Lookup {
        match (present, answered) {
            (true, _) => Lookup::Present,
            (false, true) => {
                add(&self.false_positives, 1);
                Lookup::FalsePositive
            }
            (false, false) => Lookup::AbsentBypassed,
        }
    }

    /// What was counted so far.
    #[must_use]
    pub fn tally(&self) -> LookupTally {
        LookupTally {
            queries: self.queries.get(),
            store_lookups: self.store_lookups.get(),
            lookups_avoided: self.lookups_avoided.get(),
            false_positives: self.false_positives.get(),
        }
    }
}

/// The store's answer for each key, in order: one [`PrimaryStore::contains_each`], or, when
/// that answers for another number of keys than it was asked (a store that drops repeated
/// keys, say), one [`PrimaryStore::contains`] per key: answers are never matched to the
/// wrong keys.
fn store_answers<S: PrimaryStore>(store: &S, keys: &[&[u8]]) -> Result<Vec<bool>, S::Error> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let _span =
        tracing::debug_span!(target: "bloom", "bloom.store.contains", keys = keys.len()).entered();
    let answers = store.contains_each(keys)?;
    if answers.len() == keys.len() {
        return Ok(answers);
    }
    keys.iter().map(|key| store.contains(key)).collect()
}

/// Which of `keys` the store has already, found the cheap way, for a batch insert: the
/// filter rules most new keys out, and only its "maybe"s are read from the store (one
/// read, far cheaper than committing a key the store has), so that the insert commits
/// only the others. `None` when the filter does not answer: then every key goes to the
/// commit, which finds the store's copies itself. Not counted as lookups.
///
/// # Errors
/// The store's, when it is asked and fails.
pub fn present_by_probe<S: PrimaryStore>(
    bits: &impl Bits,
    store: &S,
    keys: &[EncodedKey<'_>],
) -> Result<Option<Vec<bool>>, S::Error> {
    let Some(maybe) = bits.maybe_each(keys).filter(|m| m.len() == keys.len()) else {
        return Ok(None);
    };
    let ask: Vec<&[u8]> = keys
        .iter()
        .zip(&maybe)
        .filter(|(_, maybe)| **maybe)
        .map(|(key, _)| key.as_bytes())
        .collect();
    let mut found = store_answers(store, &ask)?.into_iter();
    Ok(Some(
        maybe
            .iter()
            .map(|&maybe| maybe && found.next().unwrap_or(true))
            .collect(),
    ))
}

/// Commits, through `commit`, only the keys [`present_by_probe`] found absent
/// (`present` is its answer), and answers for every key whether it was new: a key the store
/// had is not. `commit` answers for the keys it was given, in order.
///
/// # Errors
/// `commit`'s.
pub fn commit_absent<E>(
    keys: &[EncodedKey<'_>],
    present: &[bool],
    commit: impl FnOnce(&[EncodedKey<'_>]) -> Result<Vec<bool>, E>,
) -> Result<Vec<bool>, E> {
    let absent: Vec<EncodedKey<'_>> = keys
        .iter()
        .zip(present)
        .filter(|(_, present)| !**present)
        .map(|(key, _)| EncodedKey::from_encoded(key.as_bytes()))
        .collect();
    let mut new = commit(&absent)?.into_iter();
    Ok(present
        .iter()
        .map(|&present| !present && new.next().unwrap_or(false))
        .collect())
}

#[inline]
fn add(count: &Count, n: usize) {
    count.add(n as u64);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryStore;

    /// A filter that says "maybe" for keys starting with `m`, or does not answer.
    struct Fixed(bool);

    impl Bits for Fixed {
        fn maybe_each(&self, keys: &[EncodedKey<'_>]) -> Option<Vec<bool>> {
            self.0
                .then(|| keys.iter().map(|k| k.as_bytes()[0] == b'm').collect())
        }
    }

    #[test]
    fn answers_merge_filter_and_store_and_are_counted() {
        let store = MemoryStore::new();
        store.insert(b"m-in").unwrap();
        let keys: Vec<EncodedKey<'_>> = ["m-in", "m-out", "absent"]
            .iter()
            .map(|k| EncodedKey::from_encoded(k.as_bytes()))
            .collect();
        let counts = LookupCounts::default();
        let answers = counts.lookup_each(&Fixed(true), &store, &keys).unwrap();
        assert_eq!(
            answers,
            [
                Lookup::Present,
                Lookup::FalsePositive,
                Lookup::AbsentByFilter
            ]
        );
        let one = counts.lookup(&Fixed(false), &store, &keys[2]).unwrap();
        assert_eq!(one, Lookup::AbsentBypassed);
        let tally = counts.tally();
        assert_eq!(
            (tally.queries, tally.store_lookups, tally.lookups_avoided),
            (4, 3, 1)
        );
        assert_eq!(tally.false_positives, 1);
        assert_eq!(tally.observed_false_positive_rate(), Some(0.5));
    }

    /// A filter that answers for fewer keys than it was asked is asked about none.
    #[test]
    fn short_answers_never_make_an_absent() {
        struct Short;
        impl Bits for Short {
            fn maybe_each(&self, _: &[EncodedKey<'_>]) -> Option<Vec<bool>> {
                Some(vec![false])
            }
        }
        let store = MemoryStore::new();
        let keys = [
            EncodedKey::from_encoded(b"a"),
            EncodedKey::from_encoded(b"b"),
        ];
        let answers = LookupCounts::default()
            .lookup_each(&Short, &store, &keys)
            .unwrap();
        assert_eq!(answers, [Lookup::AbsentBypassed, Lookup::AbsentBypassed]);
    }

    /// A store whose `contains_each` answers once per distinct key (as a `WHERE key IN (..)`
    /// would): its answers are not matched to the wrong keys, for lookups nor for the probe
    /// of a batch insert.
    #[test]
    fn a_store_that_answers_for_another_number_of_keys_is_asked_key_by_key() {
        struct Distinct(MemoryStore);
        impl PrimaryStore for Distinct {
            type Error = <MemoryStore as PrimaryStore>::Error;
            fn identity(&self) -> Result<bloom_format::StoreIdentity, Self::Error> {
                self.0.identity()
            }
            fn contains(&self, key: &[u8]) -> Result<bool, Self::Error> {
                self.0.contains(key)
            }
            fn contains_each(&self, keys: &[&[u8]]) -> Result<Vec<bool>, Self::Error> {
                let mut seen = std::collections::BTreeSet::new();
                let distinct: Vec<&[u8]> =
                    keys.iter().copied().filter(|k| seen.insert(*k)).collect();
                self.0.contains_each(&distinct)
            }
            fn head(&self) -> Result<crate::HistoryPoint, Self::Error> {
                self.0.head()
            }
            fn history_at(
                &self,
                generation: bloom_format::DatasetGeneration,
            ) -> Result<Option<bloom_format::HistoryDigest>, Self::Error> {
                self.0.history_at(generation)
            }
            fn keys_since(
                &self,
                after: bloom_format::DatasetGeneration,
                visit: &mut dyn FnMut(&[u8]),
            ) -> Result<bloom_format::DatasetGeneration, Self::Error> {
                self.0.keys_since(after, visit)
            }
            fn changes_since(
                &self,
                after: bloom_format::DatasetGeneration,
                visit: &mut dyn FnMut(crate::Change<'_>),
            ) -> Result<bloom_format::DatasetGeneration, Self::Error> {
                self.0.changes_since(after, visit)
            }
            fn insert(
                &self,
                key: &[u8],
            ) -> Result<Option<bloom_format::DatasetGeneration>, Self::Error> {
                self.0.insert(key)
            }
            fn remove(&self, key: &[u8]) -> Result<Option<crate::Removal>, Self::Error> {
                self.0.remove(key)
            }
            fn claim_key_encoding(&self, proposed: &str) -> Result<String, Self::Error> {
                self.0.claim_key_encoding(proposed)
            }
        }
        let store = Distinct(MemoryStore::new());
        store.insert(b"m-b").unwrap();
        let keys: Vec<EncodedKey<'_>> = ["m-b", "m-b", "m-a"]
            .iter()
            .map(|k| EncodedKey::from_encoded(k.as_bytes()))
            .collect();
        let answers = LookupCounts::default()
            .lookup_each(&Fixed(false), &store, &keys)
            .unwrap();
        assert_eq!(
            answers,
            [Lookup::Present, Lookup::Present, Lookup::AbsentBypassed]
        );
        let present = present_by_probe(&Fixed(true), &store, &keys).unwrap();
        assert_eq!(present, Some(vec![true, true, false]));
    }
}
