//! [`FilteredStore::save_snapshot`]: snapshots bound to the store's history.

use std::path::Path;
use std::sync::{Arc, PoisonError};

use bloom_core::EncodedKey;
use bloom_format::DatasetGeneration;

use crate::error::StoreError;
use crate::history::{ChangeKind, HistoryPoint};
use crate::kind::{StoreFilter, write_snapshot};
use crate::outcome::{BypassReason, Mode};
use crate::primary::PrimaryStore;

use super::FilteredStore;
use super::changes::{Batcher, apply_change};

impl<S: PrimaryStore> FilteredStore<S> {
    /// Writes a snapshot atomically, bound to the store: its identity and the point of its
    /// history (generation and digest) are read first, the filter takes in every key committed
    /// since it last caught up with the store (which covers keys written behind the wrapper's
    /// back too), then the bits are streamed to the file while inserts continue (no copy of the
    /// filter is made). The snapshot therefore covers every key committed at that generation.
    /// Returns the generation.
    ///
    /// The path may be a symbolic link (the file it names is replaced, in its directory); an
    /// existing path that is not a regular file, or a file that is not a snapshot (a mistyped
    /// path naming the database, say), is refused and left alone. Temporary files left by an
    /// earlier writer that was killed are removed. A new salted snapshot is readable by its
    /// owner only.
    ///
    /// A counting filter is copied and the copy written, so saving one holds its counters
    /// twice for a moment. Inserts wait while the head is read and the counters copied (one
    /// memory copy), removals until the changes made behind the wrapper's back are taken in
    /// (exactly once, removals included); lookups go on. Every change the wrapper makes after
    /// one made behind its back is remembered until that save (8 bytes or so each, up to
    /// about a million; past that the save rebuilds the filter from the store's history).
    ///
    /// Before anything is written, the store must still have the history the filter follows:
    /// a store that lost commits it had acknowledged while the wrapper was open (a failover to
    /// a lagging replica, say) fails the save with [`StoreError::NotTrusted`]
    /// ([`BypassReason::HistoryDiverged`]) and the filter is bypassed until a rebuild. A
    /// primary store must not lose acknowledged commits; this catches it at the next save,
    /// not before: between the loss and that save, a key whose removal was lost may read
    /// absent from a counting filter.
    ///
    /// # Errors
    /// [`StoreError::NotTrusted`] while bypassed, a store error, or a write error (the
    /// previous file is then unchanged).
    pub fn save_snapshot(
        &self,
        path: impl AsRef<Path>,
    ) -> Result<DatasetGeneration, StoreError<S::Error>> {
        let path = path.as_ref();
        let telemetry = &self.counters.telemetry;
        let _span = tracing::info_span!(target: "bloom", "bloom.save", filter = telemetry.filter())
            .entered();
        self.check_claim()?;
        if self.options.counting {
            return self.save_counting(path);
        }
        let (filter, synced, head, identity) = {
            // The read lock keeps a rebuild from switching filters between reading the
            // history and taking the filter.
            let state = self.read();
            if let Mode::Bypassed(reason) = &state.mode {
                return Err(StoreError::NotTrusted(reason.clone()));
            }
            let identity = self.store.identity().map_err(StoreError::Store)?;
            let head = self.store.head().map_err(StoreError::Store)?;
            let verified = state.verified;
            let filter = Arc::clone(&state.active);
            let synced = state.synced;
            drop(state);
            self.check_history(&filter, verified, head, synced)?;
            (filter, synced, head, identity)
        };
        if head.generation > synced {
            let mut batch = Batcher::new(&filter);
            self.store
                .keys_since(synced, &mut |key| batch.push(key))
                .map_err(StoreError::Store)?;
            batch.finish();
            let mut state = self.write();
            if Arc::ptr_eq(&state.active, &filter) && state.synced < head.generation {
                state.synced = head.generation;
                state.verified = head;
            }
        }
        self.took_in(&filter, head.generation);
        filter.write_snapshot(path, identity, head)?;
        tracing::debug!(target: "bloom", filter = telemetry.filter(), generation = head.generation.get(), path = %path.display(), "snapshot saved");
        Ok(head.generation)
    }

    /// `filter`, if it is still the active one, holds every change up to `through`: a claim
    /// behind by writes made behind the wrapper's back
    /// ([`ClaimStatus::Behind`](crate::ClaimStatus::Behind)) is caught up.
    pub(super) fn took_in(&self, filter: &Arc<StoreFilter>, through: DatasetGeneration) {
        let state = self.read();
        if Arc::ptr_eq(&state.active, filter) {
            self.claim.caught_up(through);
        }
    }

    /// Checks, before a save, that the store still has the history the filter follows: the
    /// verified point, and nothing behind what the filter already holds. A store that lost
    /// commits it had acknowledged fails this; the filter is then bypassed until a rebuild.
    pub(super) fn check_history(
        &self,
        filter: &Arc<StoreFilter>,
        verified: HistoryPoint,
        head: HistoryPoint,
        holds: DatasetGeneration,
    ) -> Result<(), StoreError<S::Error>> {
        let reason = if head.generation < holds.max(verified.generation) {
            BypassReason::RolledBack {
                holds: holds.max(verified.generation),
                store: head.generation,
            }
        } else if self
            .store
            .history_at(verified.generation)
            .map_err(StoreError::Store)?
            != Some(verified.digest)
        {
            BypassReason::HistoryDiverged {
                generation: verified.generation,
            }
        } else {
            return Ok(());
        };
        let mut state = self.write();
        if Arc::ptr_eq(&state.active, filter) {
            state.set_mode(Mode::Bypassed(reason.clone()), &self.counters.telemetry);
        }
        Err(StoreError::NotTrusted(reason))
    }

    pub(super) fn save_counting(
        &self,
        path: &Path,
    ) -> Result<DatasetGeneration, StoreError<S::Error>> {
        let gate = self
            .removal_gate
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let (filter, mut copy, head, identity) = {
            // No insert is in flight while the inserts' gate is held: each has recorded the
            // generation it committed at, so the head read here splits the history exactly
            // into changes the filter holds and changes made behind the wrapper's back, and
            // the copy holds exactly the former. Lookups go on meanwhile.
            let _no_inserts = self
                .insert_gate
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let state = self.read();
            if let Mode::Bypassed(reason) = &state.mode {
                return Err(StoreError::NotTrusted(reason.clone()));
            }
            let identity = self.store.identity().map_err(StoreError::Store)?;
            let head = self.store.head().map_err(StoreError::Store)?;
            let filter = Arc::clone(&state.active);
            let verified = state.verified;
            drop(state);
            let through = self.applied().through;
            self.check_history(&filter, verified, head, through)?;
            let Some(copy) = filter.counting_copy() else {
                return Err(StoreError::NotTrusted(BypassReason::Rebuilding));
            };
            (filter, copy, head, identity)
        };
        // The changes made behind the wrapper's back, up to the head: into the filter and
        // the copy alike, each once.
        let mut diverged = None;
        {
            let mut applied = self.applied();
            if applied.overflowed {
                // Too many changes behind the wrapper's back to tell apart (checked under the
                // record's lock, which inserts also take): count afresh.
                drop(applied);
                drop(gate);
                self.rebuild()?;
                return self.save_counting(path);
            }
            if head.generation > applied.through {
                let from = applied.through;
                // Each change is recorded as it is applied, so that a replay that fails
                // halfway (a store error) is resumed, never applied twice, by the next save.
                self.store
                    .changes_since(from, &mut |change| {
                        if change.generation > head.generation || applied.applied(change.generation)
                        {
                            return;
                        }
                        applied.record(change.generation);
                        let key = EncodedKey::from_encoded(change.key);
                        let refused = match change.kind {
                            ChangeKind::Inserted => {
                                copy.insert(&key);
                                false
                            }
                            ChangeKind::Removed => copy.remove(&key).is_err(),
                        };
                        if apply_change(&filter, change).is_err() || refused {
                            diverged.get_or_insert(change.generation);
                        }
                    })
                    .map_err(StoreError::Store)?;
                applied.reset(head.generation);
            }
        }
        drop(gate);
        if let Some(generation) = diverged {
            let reason = BypassReason::CountsDiverged { generation };
            let mut state = self.write();
            if Arc::ptr_eq(&state.active, &filter) {
                state.set_mode(Mode::Bypassed(reason.clone()), &self.counters.telemetry);
            }
            return Err(StoreError::NotTrusted(reason));
        }
        {
            let mut state = self.write();
            if Arc::ptr_eq(&state.active, &filter) && state.synced < head.generation {
                state.synced = head.generation;
                state.verified = head;
            }
        }
        self.took_in(&filter, head.generation);
        write_snapshot(path, &copy, identity, head)?;
        Ok(head.generation)
    }
}
