//! What a counting filter's wrapper remembers between saves: the generations whose change
//! it applied itself (`Applied`), and the inserts between their commit and that record
//! (`Flights`).

use std::collections::BTreeSet;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use bloom_format::DatasetGeneration;

/// For a counting filter: the generations whose change the wrapper applied itself, so that a
/// save takes in exactly the changes made behind its back (counts must be neither missed
/// nor taken off twice).
#[derive(Debug, Default)]
pub(super) struct Applied {
    /// Every change up to here is in the filter.
    pub(super) through: DatasetGeneration,
    /// Changes past `through` that the wrapper applied (past a gap left by a change made
    /// behind its back).
    pub(super) ahead: BTreeSet<u64>,
    /// More than [`Applied::MAX_AHEAD`] were pending: the next save rebuilds instead.
    pub(super) overflowed: bool,
}

impl Applied {
    const MAX_AHEAD: usize = 1 << 20;

    pub(super) fn record(&mut self, generation: DatasetGeneration) {
        if generation <= self.through {
            return;
        }
        if self.ahead.len() >= Self::MAX_AHEAD {
            self.overflowed = true;
            self.ahead.clear();
            return;
        }
        self.ahead.insert(generation.get());
        self.compact();
    }

    pub(super) fn compact(&mut self) {
        while let Some(next) = self.through.next()
            && self.ahead.remove(&next.get())
        {
            self.through = next;
        }
    }

    /// Every change up to `through` is now in the filter (and, as before, those recorded).
    /// `through` may already be behind: changes recorded past it while a rebuild or a save
    /// ran are in the filter too, so it never moves back.
    pub(super) fn reset(&mut self, through: DatasetGeneration) {
        self.through = self.through.max(through);
        let through = self.through.get();
        self.ahead.retain(|&g| g > through);
        self.compact();
    }

    /// After a rebuild counted afresh up to `start`: an overflow is forgotten. Records lost
    /// to an overflow during the rebuild were inserts only (removals wait for rebuilds), so
    /// at worst a later save counts one of them twice: a stale "maybe", never a lost key.
    pub(super) fn rebuilt(&mut self, start: DatasetGeneration) {
        self.overflowed = false;
        self.reset(start);
    }

    pub(super) fn applied(&self, generation: DatasetGeneration) -> bool {
        generation <= self.through || self.ahead.contains(&generation.get())
    }
}

/// Counting inserts in flight: taken off before the store commit, landed once its
/// generation is recorded (or it committed nothing).
#[derive(Default)]
pub(super) struct Flights {
    pub(super) open: Mutex<(u64, BTreeSet<u64>)>,
    pub(super) landed: Condvar,
}

impl Flights {
    pub(super) fn lock(&self) -> MutexGuard<'_, (u64, BTreeSet<u64>)> {
        // Only numbers are kept; a panic elsewhere leaves them usable.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn take_off(&self) -> u64 {
        let mut open = self.lock();
        let ticket = open.0;
        open.0 += 1;
        open.1.insert(ticket);
        ticket
    }

    pub(super) fn land(&self, ticket: u64) {
        self.lock().1.remove(&ticket);
        self.landed.notify_all();
    }

    /// Waits until every insert in flight now has landed. A landed insert waits for no
    /// other, and one in flight only commits and records, so this never waits for itself.
    pub(super) fn wait_for_those_in_flight(&self) {
        let mut open = self.lock();
        let waiting: Vec<u64> = open.1.iter().copied().collect();
        while waiting.iter().any(|t| open.1.contains(t)) {
            open = self
                .landed
                .wait(open)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn g(n: u64) -> DatasetGeneration {
        DatasetGeneration::new(n)
    }

    #[test]
    pub(super) fn the_applied_record_tracks_gaps_and_never_moves_back() {
        let mut applied = Applied::default();
        applied.record(g(1));
        applied.record(g(3)); // 2 was made behind the wrapper's back
        assert_eq!(applied.through, g(1));
        assert!(applied.applied(g(3)) && !applied.applied(g(2)));
        applied.reset(g(2)); // a save took 2 in
        assert_eq!(applied.through, g(3));
        assert!(applied.ahead.is_empty());
        applied.reset(g(1)); // never back
        assert_eq!(applied.through, g(3));
    }

    #[test]
    pub(super) fn an_overflowed_record_stays_overflowed_until_a_rebuild() {
        let mut applied = Applied::default();
        // A gap at 1, then more changes than the record keeps.
        for n in 2..(Applied::MAX_AHEAD as u64 + 3) {
            applied.record(g(n));
        }
        assert!(applied.overflowed);
        // A save's reset does not clear it: the save must rebuild instead.
        applied.reset(g(5));
        assert!(applied.overflowed);
        applied.rebuilt(g(10));
        assert!(!applied.overflowed);
        assert_eq!(applied.through, g(10));
    }
}
