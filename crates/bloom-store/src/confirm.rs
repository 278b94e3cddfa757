//! Check-then-confirm, written once for every wrapper ([`FilteredStore`](crate::FilteredStore)
//! with a filter of its own, `bloom_redis::SharedFilteredStore` with one in Redis): the
//! filter rules keys out, the primary store confirms the rest, and the answers are merged
//! and counted here.
//!
//! A wrapper says what its filter answers through [`Bits`], and whether it may answer at all
//! (a filter not trusted, a claim on the store that does not hold, a Redis that failed):
//! [`Bits::maybe_each`] returns `None`, and then the store answers every key.

use std::slice;
use std::sync::atomic::{AtomicU64, Ordering};

use bloom_core::EncodedKey;

use crate::outcome::Lookup;
use crate::primary::PrimaryStore;

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

/// The lookup counts of one wrapper, kept by [`LookupCounts::lookup_each`].
#[derive(Debug, Default)]
pub struct LookupCounts {
    queries: AtomicU64,
    store_lookups: AtomicU64,
    lookups_avoided: AtomicU64,
    false_positives: AtomicU64,
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
    /// `false_positives / (false_positives + lookups_avoided)`: the filter's observed rate on
    /// keys that were absent, while it answered. `None` before any such query.
    #[must_use]
    pub fn observed_false_positive_rate(&self) -> Option<f64> {
        let negatives = self.false_positives + self.lookups_avoided;
        (negatives > 0).then(|| self.false_positives as f64 / negatives as f64)
    }
}

impl LookupCounts {
    /// Whether `key` is in `store`: "absent" from `bits` alone when it rules the key out,
    /// otherwise the store's answer.
    ///
    /// # Errors
    /// The store's, when it is asked and fails.
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
        add(&self.store_lookups, 1);
        let present = store.contains(key.as_bytes())?;
        Ok(self.merge(present, maybe.is_some()))
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
        let present = if ask.is_empty() {
            Vec::new()
        } else {
            store.contains_each(&ask)?
        };
        let mut present = present.into_iter();
        Ok((0..keys.len())
            .map(|i| {
                if !asked(i) {
                    return Lookup::AbsentByFilter;
                }
                // A store that answered for fewer keys than it was asked counts as "present"
                // for the rest: never "absent" without an answer.
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
            queries: self.queries.load(Ordering::Relaxed),
            store_lookups: self.store_lookups.load(Ordering::Relaxed),
            lookups_avoided: self.lookups_avoided.load(Ordering::Relaxed),
            false_positives: self.false_positives.load(Ordering::Relaxed),
        }
    }
}

fn add(counter: &AtomicU64, n: usize) {
    counter.fetch_add(n as u64, Ordering::Relaxed);
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

    /// A filter that answers for fewer keys than it was asked is asked about none, and a
    /// store that answers for fewer is "present" for the rest: never "absent" unanswered.
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
}
