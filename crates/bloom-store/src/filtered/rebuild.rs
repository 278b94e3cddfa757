//! [`FilteredStore::rebuild`]: a new filter from the store, built off to the side.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use bloom_core::EncodedKey;
use bloom_format::DatasetGeneration;

use crate::claim::ClaimStatus;
use crate::error::StoreError;
use crate::history::ChangeKind;
use crate::kind::StoreFilter;
use crate::outcome::{BypassReason, Mode, RebuildReport};
use crate::primary::PrimaryStore;

use super::FilteredStore;
use super::changes::Batcher;

impl<S: PrimaryStore> FilteredStore<S> {
    /// Builds a new filter from the store, off to the side, and switches to it once it covers
    /// the store. While it runs, a bypassed filter stays bypassed (queries go to the store)
    /// and a trusted one keeps answering. Inserts made during the rebuild set bits in the new
    /// filter too, so none is missed.
    ///
    /// A counting filter is rebuilt by replaying the store's change log up to the rebuild's
    /// start (so that its counts are exact there), which takes time in proportion to every
    /// change the store ever committed, removals included; a plain filter reads the keys in
    /// the store.
    ///
    /// If the estimated item count passed the capacity, the new filter is planned for twice
    /// the estimate, which brings the false-positive rate back to the target, but never
    /// larger than `max_snapshot_bytes` ([`RebuildReport::capacity_limited`] then says so).
    ///
    /// # Errors
    /// A store error; the previous filter and mode are then kept. [`StoreError::ClaimLost`]
    /// once the store was replaced under the wrapper: it is never trusted again.
    pub fn rebuild(&self) -> Result<RebuildReport, StoreError<S::Error>> {
        let telemetry = &self.counters.telemetry;
        let _span =
            tracing::info_span!(target: "bloom", "bloom.rebuild", filter = telemetry.filter())
                .entered();
        let report = self.rebuild_filter();
        match &report {
            Ok(report) => {
                telemetry.rebuilt(report);
                // The gauges of the new filter's standing (the drift flag cleared), now.
                self.metrics();
            }
            Err(e) => telemetry.rebuild_failed(e),
        }
        report
    }

    /// [`FilteredStore::rebuild`]'s work.
    fn rebuild_filter(&self) -> Result<RebuildReport, StoreError<S::Error>> {
        // A store that is no longer the one opened is never covered again.
        self.check_claim()?;
        // Holds no data, so a panic in another rebuild leaves nothing inconsistent.
        let _one_at_a_time = self
            .rebuilding
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // No removal runs during a rebuild: the scan could miss a key removed at the same
        // time, and the removal would then take it off the new filter too.
        let _no_removals = self
            .removal_gate
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        // The store's generation bounds its key count: a filter rebuilt after a bypass is
        // sized for the store, not for the empty filter it replaces.
        let stored = match self.store.generation() {
            Ok(generation) => generation.get(),
            Err(e) => {
                let mut state = self.write();
                if let Mode::Bypassed(_) = state.mode {
                    state.set_mode(
                        Mode::Bypassed(BypassReason::RebuildFailed),
                        &self.counters.telemetry,
                    );
                }
                return Err(StoreError::Store(e));
            }
        };
        let wanted = {
            let state = self.read();
            // The generation counts removals too; a trusted filter's estimate (less the
            // removed keys a plain filter still holds) is the better count then.
            let estimate = match state.mode {
                Mode::Trusted => (state.active.estimated_items()
                    - self.counters.stale_removals.load(Ordering::Relaxed) as f64)
                    .max(0.0),
                Mode::Bypassed(_) => stored as f64,
            };
            if estimate > state.capacity as f64 {
                (estimate * 2.0).ceil() as u64
            } else {
                state.capacity
            }
        };
        let plan = self.options.plan(wanted)?;
        let new = Arc::new(StoreFilter::new(plan.config, self.options.counting)?);
        let start = {
            let mut state = self.write();
            state.building = Some(Arc::clone(&new));
            if let Mode::Bypassed(_) = state.mode {
                state.set_mode(
                    Mode::Bypassed(BypassReason::Rebuilding),
                    &self.counters.telemetry,
                );
            }
            // Every insert that missed `building` has committed (it held the read lock).
            let head = self.store.head();
            state.building_start = head.as_ref().ok().map(|point| point.generation);
            head
        };
        let start_point = start.as_ref().ok().copied();
        let start = start.map(|point| point.generation);
        let scan = start.and_then(|start| {
            let mut keys = 0u64;
            let reached = if new.is_counting() {
                // Counts must match the store exactly at `start`: replay its history up to
                // there (a scan of the keys now could miss one removed behind the wrapper's
                // back after `start`, whose removal a later catch-up would then take off
                // again).
                self.store
                    .changes_since(DatasetGeneration::ZERO, &mut |change| {
                        if change.generation > start {
                            return;
                        }
                        let key = EncodedKey::from_encoded(change.key);
                        match change.kind {
                            ChangeKind::Inserted => {
                                new.insert(&key);
                                keys += 1;
                            }
                            ChangeKind::Removed => {
                                let _ = new.remove(&key);
                            }
                        }
                    })?
                    .min(start)
            } else {
                let mut batch = Batcher::new(&new);
                let reached = self
                    .store
                    .keys_since(DatasetGeneration::ZERO, &mut |key| batch.push(key))?;
                keys = batch.finish();
                reached
            };
            Ok((start, reached, keys))
        });
        let mut state = self.write();
        state.building = None;
        state.building_start = None;
        let (start, reached, keys) = match scan {
            Ok(v) => v,
            Err(e) => {
                if matches!(state.mode, Mode::Bypassed(BypassReason::Rebuilding)) {
                    state.set_mode(
                        Mode::Bypassed(BypassReason::RebuildFailed),
                        &self.counters.telemetry,
                    );
                }
                return Err(StoreError::Store(e));
            }
        };
        if let ClaimStatus::Lost { why } = self.claim.status() {
            // Lost while the rebuild ran: what it scanned may be another store's.
            state.set_mode(
                Mode::Bypassed(BypassReason::ClaimLost { why: why.clone() }),
                &self.counters.telemetry,
            );
            return Err(StoreError::ClaimLost { why });
        }
        // Keys committed after the scan started had their bits set directly, so covering the
        // generation at the start is covering the store.
        state.active = new;
        state.measured_since = self.counters.lookups.tally();
        state.synced = start.min(reached);
        if let Some(point) = start_point {
            state.verified = point;
        }
        state.capacity = plan.capacity;
        state.capacity_limited = plan.limited;
        state.set_mode(Mode::Trusted, &self.counters.telemetry);
        self.applied().rebuilt(state.synced);
        // Writes made behind the wrapper's back up to here are in the new filter.
        self.claim.caught_up(state.synced);
        self.counters.stale_removals.store(0, Ordering::Relaxed);
        Ok(RebuildReport {
            keys_scanned: keys,
            generation: reached.max(start),
            capacity: plan.capacity,
            capacity_limited: plan.limited,
        })
    }
}
