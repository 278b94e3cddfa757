//! Claims on a store: how a wrapper holds a store it answers for ([`StoreClaim`], taken by
//! [`PrimaryStore::claim_wrapper`](crate::PrimaryStore::claim_wrapper)), and how the store tells it that the claim holds, is
//! behind or unconfirmed for now, or is lost for good ([`ClaimWatch`], [`ClaimStatus`]).

use std::sync::{Arc, PoisonError};

use bloom_format::DatasetGeneration;

/// Which claim a wrapper takes on a store ([`PrimaryStore::claim_wrapper`](crate::PrimaryStore::claim_wrapper)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClaimKind {
    /// One wrapper alone, whose own filter answers "absent": a
    /// [`FilteredStore`](crate::FilteredStore).
    Exclusive,
    /// Wrappers that share one filter every writer sets bits in (bloom-redis's
    /// `SharedFilteredStore`): any number of them, and no exclusive one.
    Shared,
}

/// What a store says about a claim it made ([`StoreClaim::status`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClaimStatus {
    /// The claim holds, on the store the wrapper opened: its filter may answer alone.
    Held,
    /// The store cannot be checked now (its server is unreachable, the claim's connection
    /// is being made again, someone else's change to it is being checked): the wrapper asks
    /// the store for every lookup until the claim is confirmed or lost.
    Unconfirmed,
    /// The store's history went past what the wrapper saw, by writes that did not pass
    /// through it (another program writing the store's tables, say): its filter lacks their
    /// keys. The claim still holds, but the wrapper asks the store for every lookup until a
    /// save or a rebuild takes those changes in
    /// ([`FilteredStore::save_snapshot`](crate::FilteredStore::save_snapshot),
    /// [`FilteredStore::rebuild`](crate::FilteredStore::rebuild)). Only an exclusive claim
    /// is behind: a shared filter is written by every wrapper.
    Behind {
        /// The newest generation found that the filter may lack.
        head: DatasetGeneration,
    },
    /// The claim is over for good: the store was replaced under the wrapper (another
    /// database or file under its name, another identity, a history that went back or
    /// another way), or another wrapper took it. The wrapper never answers from its filter
    /// again; reopen it.
    Lost {
        /// What happened, in words.
        why: String,
    },
}

const HELD: u8 = 0;
const UNCONFIRMED: u8 = 1;
const LOST: u8 = 2;

/// The store's side of a claim: how the store (or a thread it runs) tells the wrapper that
/// the claim holds, is unconfirmed for now, or is lost for good. Cheap to clone; every clone
/// is the same claim. A lost claim never holds again.
#[derive(Clone, Default)]
pub struct ClaimWatch(Arc<Watched>);

/// A check that a claim still holds, made with every answer: `false` while something the
/// store's watcher has not looked at yet may have changed the store (inotify events queued,
/// say). It must be cheap (a system call at most) and never block.
type Probe = Box<dyn Fn() -> bool + Send + Sync>;

#[derive(Default)]
struct Watched {
    status: std::sync::atomic::AtomicU8,
    /// The newest generation the wrapper's filter may lack (written behind its back), or 0.
    behind: std::sync::atomic::AtomicU64,
    why: std::sync::Mutex<Option<String>>,
    probe: std::sync::OnceLock<Probe>,
}

impl ClaimWatch {
    /// A watch whose claim holds.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The claim holds again (after [`ClaimWatch::suspend`]); nothing once it is lost.
    pub fn confirm(&self) {
        use std::sync::atomic::Ordering;
        let _ =
            self.0
                .status
                .compare_exchange(UNCONFIRMED, HELD, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The claim cannot be confirmed for now: the wrapper asks the store for every lookup.
    /// Nothing once it is lost.
    pub fn suspend(&self) {
        use std::sync::atomic::Ordering;
        let _ =
            self.0
                .status
                .compare_exchange(HELD, UNCONFIRMED, Ordering::AcqRel, Ordering::Acquire);
    }

    /// The claim is over for good, for the reason `why` (the first reason given is kept).
    pub fn lose(&self, why: impl Into<String>) {
        use std::sync::atomic::Ordering;
        {
            let mut kept = self.0.why.lock().unwrap_or_else(PoisonError::into_inner);
            if kept.is_none() {
                *kept = Some(why.into());
            }
        }
        self.0.status.store(LOST, Ordering::Release);
    }

    /// The store's history reached `head` without the wrapper (see [`ClaimStatus::Behind`]):
    /// its filter does not answer alone until [`ClaimWatch::caught_up`] with a generation at
    /// least as new.
    pub fn fall_behind(&self, head: DatasetGeneration) {
        self.0
            .behind
            .fetch_max(head.get().max(1), std::sync::atomic::Ordering::AcqRel);
    }

    /// The wrapper's filter took in every change up to `through`: a claim behind by no more
    /// than that is no longer behind.
    pub fn caught_up(&self, through: DatasetGeneration) {
        use std::sync::atomic::Ordering;
        let _ = self
            .0
            .behind
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |behind| {
                (behind != 0 && behind <= through.get()).then_some(0)
            });
    }

    /// Adds a check made with every answer ([`ClaimWatch::is_held`]): the claim holds only
    /// while it returns `true`. For a store whose watcher learns of changes through events
    /// the kernel queues as they happen: the probe sees events not yet handled, so that no
    /// answer falls between a change and the watcher's reaction to it. Set once; a second
    /// probe is ignored.
    pub fn set_probe(&self, probe: impl Fn() -> bool + Send + Sync + 'static) {
        let _ = self.0.probe.set(Box::new(probe));
    }

    /// Whether the claim holds: one load, and the probe if one is set.
    #[must_use]
    pub fn is_held(&self) -> bool {
        use std::sync::atomic::Ordering;
        // The probe first: it may wait for the watcher's verdict, which the loads then see.
        self.0.probe.get().is_none_or(|probe| probe())
            && self.0.status.load(Ordering::Acquire) == HELD
            && self.0.behind.load(Ordering::Acquire) == 0
    }

    /// Whether the claim is lost for good.
    #[must_use]
    pub fn is_lost(&self) -> bool {
        self.0.status.load(std::sync::atomic::Ordering::Acquire) == LOST
    }

    /// The newest generation written behind the wrapper's back that its filter may lack, as
    /// last recorded ([`ClaimStatus::Behind`]): two loads, no probe.
    #[must_use]
    pub fn behind(&self) -> Option<DatasetGeneration> {
        use std::sync::atomic::Ordering;
        let behind = self.0.behind.load(Ordering::Acquire);
        (behind != 0 && self.0.status.load(Ordering::Acquire) != LOST)
            .then(|| DatasetGeneration::new(behind))
    }

    /// The claim's status (a probe that fails makes a held claim unconfirmed).
    #[must_use]
    pub fn status(&self) -> ClaimStatus {
        use std::sync::atomic::Ordering;
        // The probe first: it may wait for the watcher's verdict, which the loads then see.
        let probed = self.0.probe.get().is_none_or(|probe| probe());
        let status = self.0.status.load(Ordering::Acquire);
        let behind = self.0.behind.load(Ordering::Acquire);
        if status != LOST && behind != 0 {
            return ClaimStatus::Behind {
                head: DatasetGeneration::new(behind),
            };
        }
        match status {
            HELD if probed => ClaimStatus::Held,
            HELD => ClaimStatus::Unconfirmed,
            UNCONFIRMED => ClaimStatus::Unconfirmed,
            _ => ClaimStatus::Lost {
                why: self
                    .0
                    .why
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone()
                    .unwrap_or_default(),
            },
        }
    }
}

impl std::fmt::Debug for ClaimWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ClaimWatch").field(&self.status()).finish()
    }
}

/// A store claimed by a wrapper ([`PrimaryStore::claim_wrapper`](crate::PrimaryStore::claim_wrapper)): released when dropped
/// (and by the operating system when the process ends, for a lock on a file).
pub struct StoreClaim {
    held: Option<Box<dyn Send + Sync>>,
    /// Told by the store when the claim stops holding behind the holder's back: the claim
    /// holds while all of them do.
    watches: Vec<ClaimWatch>,
}

/// Why a wrapper could not claim a store ([`StoreClaim::for_wrapper`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClaimRefused {
    /// Another wrapper holds a claim this one cannot share.
    #[error(
        "another wrapper holds this store in a way this one cannot share (a FilteredStore holds it alone; shared filters' wrappers share it with each other): close it first"
    )]
    InUse,
    /// The store's keys are in another encoding than the wrapper's: they could not be
    /// compared.
    #[error(
        "the store's keys are in the {store} key encoding, but the wrapper uses {wrapper}; open it with {store}, or start a new store"
    )]
    EncodingMismatch {
        /// The encoding the store recorded at its first open.
        store: String,
        /// The wrapper's.
        wrapper: String,
    },
}

impl StoreClaim {
    /// A claim that holds `held` (a locked file, a guard that clears a flag on drop) until it
    /// is dropped.
    #[must_use]
    pub fn holding(held: impl Send + Sync + 'static) -> Self {
        Self {
            held: Some(Box::new(held)),
            watches: Vec::new(),
        }
    }

    /// A claim that holds `held` while `watch` says so: the store (or a thread it runs)
    /// suspends it while it cannot check the store, and loses it for good when the store
    /// was replaced or another wrapper took it. A wrapper answers from its filter alone only
    /// while the claim is [`ClaimStatus::Held`].
    #[must_use]
    pub fn holding_while(held: impl Send + Sync + 'static, watch: ClaimWatch) -> Self {
        Self {
            held: Some(Box::new(held)),
            watches: vec![watch],
        }
    }

    /// The claim, holding only while `watch` holds too: a store keeps one watch of its own
    /// (lost once the store itself is found replaced, whichever call finds it) beside each
    /// claim's.
    #[must_use]
    pub fn also_watching(mut self, watch: ClaimWatch) -> Self {
        self.watches.push(watch);
        self
    }

    /// A claim that holds nothing: the store cannot tell wrappers apart.
    #[must_use]
    pub fn unenforced() -> Self {
        Self {
            held: None,
            watches: Vec::new(),
        }
    }

    /// Whether the claim holds ([`ClaimStatus::Held`]); always `true` for a claim without
    /// a watch.
    #[must_use]
    pub fn is_valid(&self) -> bool {
        self.watches.iter().all(ClaimWatch::is_held)
    }

    /// Whether the claim is lost for good.
    #[must_use]
    pub fn is_lost(&self) -> bool {
        self.watches.iter().any(ClaimWatch::is_lost)
    }

    /// [`ClaimWatch::behind`] of the first watch that is behind: no probe, so cheap enough
    /// for every lookup.
    #[must_use]
    pub fn behind(&self) -> Option<DatasetGeneration> {
        self.watches.iter().find_map(ClaimWatch::behind)
    }

    /// The claim's status: lost if any of its watches is (with the first one's reason),
    /// unconfirmed if any is, held otherwise ([`ClaimStatus::Held`] for a claim without a
    /// watch).
    #[must_use]
    pub fn status(&self) -> ClaimStatus {
        let mut status = ClaimStatus::Held;
        for watch in &self.watches {
            match watch.status() {
                lost @ ClaimStatus::Lost { .. } => return lost,
                ClaimStatus::Unconfirmed => status = ClaimStatus::Unconfirmed,
                behind @ ClaimStatus::Behind { .. } if status == ClaimStatus::Held => {
                    status = behind;
                }
                ClaimStatus::Held | ClaimStatus::Behind { .. } => {}
            }
        }
        status
    }

    /// The wrapper's filter took in every change up to `through` (a save, a rebuild): see
    /// [`ClaimWatch::caught_up`].
    pub fn caught_up(&self, through: DatasetGeneration) {
        for watch in &self.watches {
            watch.caught_up(through);
        }
    }

    /// Whether the claim holds anything (`false` for [`StoreClaim::unenforced`]).
    #[must_use]
    pub fn is_enforced(&self) -> bool {
        self.held.is_some()
    }
}

impl std::fmt::Debug for StoreClaim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreClaim")
            .field("enforced", &self.is_enforced())
            .field("status", &self.status())
            .finish()
    }
}

/// The claims on a store that lives in one process (a `MemoryStore`, an in-memory
/// database): how many shared claims are held, or that the exclusive one is.
#[derive(Debug, Default)]
pub(crate) struct ClaimFlag(Arc<std::sync::atomic::AtomicI64>);

impl ClaimFlag {
    /// The claim of `kind`, or `None` while a conflicting one is held.
    pub(crate) fn claim(&self, kind: ClaimKind) -> Option<StoreClaim> {
        use std::sync::atomic::Ordering;
        let count = &self.0;
        match kind {
            // -1 while the exclusive claim is held.
            ClaimKind::Exclusive => {
                count
                    .compare_exchange(0, -1, Ordering::AcqRel, Ordering::Acquire)
                    .ok()?;
            }
            ClaimKind::Shared => {
                count
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                        (n >= 0).then_some(n + 1)
                    })
                    .ok()?;
            }
        }
        Some(StoreClaim::holding(Release(Arc::clone(&self.0), kind)))
    }
}

/// Gives the claim back when it is dropped.
struct Release(Arc<std::sync::atomic::AtomicI64>, ClaimKind);

impl Drop for Release {
    fn drop(&mut self) {
        use std::sync::atomic::Ordering;
        match self.1 {
            ClaimKind::Exclusive => self.0.store(0, Ordering::Release),
            ClaimKind::Shared => {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}
