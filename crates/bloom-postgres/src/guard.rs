//! What ties a [`PostgresStore`](crate::PostgresStore) to the store it opened, shared by
//! every call of the store and by its claims' threads: the store's identity, the newest point
//! of its history this process saw (and commits in flight, not recorded yet), and whether the
//! store was found replaced.

use std::sync::{Mutex, PoisonError};

use bloom_format::{DatasetGeneration, StoreIdentity};
use bloom_store::{ClaimWatch, HistoryPoint};

use crate::PostgresStoreError;

/// What ties a [`PostgresStore`](crate::PostgresStore) to the store it opened: its identity, the newest point of
/// its history this process saw, and whether it was found replaced (another database under
/// its name, another store in its schema, an older backup or a diverged copy restored into
/// it). Shared with the claim's thread, which checks the store when its session ends or
/// someone waits for its tables.
#[derive(Debug)]
pub(crate) struct Guard {
    pub(crate) identity: StoreIdentity,
    namespace: String,
    seen: Mutex<HistoryPoint>,
    /// Commits of this process between their `COMMIT` and the record of their head.
    in_flight: std::sync::atomic::AtomicU32,
    /// Lost for good once the store is found replaced; every claim watches it.
    pub(crate) watch: ClaimWatch,
    /// What was found when the store was found replaced (the first reason).
    why: Mutex<Option<String>>,
}

/// A commit in flight ([`Guard::committing`]).
pub(crate) struct Committing<'g>(&'g Guard);

impl Drop for Committing<'_> {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl Guard {
    pub(crate) fn new(identity: StoreIdentity, namespace: &str) -> Self {
        Self {
            identity,
            namespace: namespace.to_owned(),
            seen: Mutex::new(bloom_store::HistoryPoint::genesis(identity)),
            in_flight: std::sync::atomic::AtomicU32::new(0),
            watch: ClaimWatch::new(),
            why: Mutex::new(None),
        }
    }

    /// The newest point of the history seen.
    pub(crate) fn seen(&self) -> HistoryPoint {
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the store was found replaced.
    pub(crate) fn is_lost(&self) -> bool {
        self.watch.is_lost()
    }

    /// The store is not the one opened any more, for good: every claim is lost with it.
    pub(crate) fn replaced(&self, why: impl Into<String>) -> PostgresStoreError {
        let why = why.into();
        self.why
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| why.clone());
        self.watch.lose(format!(
            "the store in schema {} was replaced: {why}",
            self.namespace
        ));
        PostgresStoreError::Replaced {
            namespace: self.namespace.clone(),
            why,
        }
    }

    /// `Replaced` once the store was found replaced.
    pub(crate) fn check(&self) -> Result<(), PostgresStoreError> {
        match self.watch.status() {
            bloom_store::ClaimStatus::Lost { why: told } => Err(PostgresStoreError::Replaced {
                namespace: self.namespace.clone(),
                why: self
                    .why
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
                    .unwrap_or(told),
            }),
            _ => Ok(()),
        }
    }

    /// Marks a commit of this process in flight until the returned guard is dropped (after
    /// its head was recorded).
    pub(crate) fn committing(&self) -> Committing<'_> {
        self.in_flight
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Committing(self)
    }

    /// Whether a commit of this process may have landed without being recorded yet.
    pub(crate) fn commits_in_flight(&self) -> bool {
        self.in_flight.load(std::sync::atomic::Ordering::Acquire) > 0
    }

    /// The newest generation seen, before an operation that reads the head.
    pub(crate) fn floor(&self) -> DatasetGeneration {
        self.seen().generation
    }

    /// Records a head read by an operation that began once `floor` was seen: the store's
    /// history never goes back, so a head behind it is another history (an older backup
    /// restored into the store while it was open).
    pub(crate) fn saw_after(
        &self,
        floor: DatasetGeneration,
        point: HistoryPoint,
    ) -> Result<(), PostgresStoreError> {
        if point.generation < floor {
            return Err(self.replaced(format!(
                "its history went back from generation {floor} to {}",
                point.generation
            )));
        }
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if point.generation > seen.generation {
            *seen = point;
        }
        Ok(())
    }
}
