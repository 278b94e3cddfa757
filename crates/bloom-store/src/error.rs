//! [`StoreError`]: the errors of the wrapper's operations.

use bloom_core::{AllocError, CountingError, KeyError};
use bloom_format::WriteError;

use crate::options::OptionsError;
use crate::outcome::BypassReason;

/// Errors of [`FilteredStore`](crate::FilteredStore). A store error never leaves a wrong
/// answer behind: the operation simply did not happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError<E> {
    /// The primary store failed.
    #[error("primary store failed: {0}")]
    Store(E),
    /// The key could not be encoded.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// The filter options cannot be used.
    #[error(transparent)]
    Options(#[from] OptionsError),
    /// The filter could not be allocated.
    #[error(transparent)]
    Alloc(#[from] AllocError),
    /// The snapshot could not be written; the previous snapshot file is unchanged.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// Another wrapper holds the store ([`PrimaryStore::claim_wrapper`]), in this process or
    /// another: a `FilteredStore`, or a shared filter's wrappers (bloom-redis's
    /// `SharedFilteredStore`). One `FilteredStore` per store, and none beside shared ones, or
    /// the other would commit keys this one answers "absent" for.
    ///
    /// [`PrimaryStore::claim_wrapper`]: crate::PrimaryStore::claim_wrapper
    #[error(
        "another wrapper has this store open (in this process or another: a FilteredStore, or a SharedFilteredStore of bloom-redis): one FilteredStore per store and none beside shared ones; close it first, or share one filter between processes with bloom-redis"
    )]
    InUse,
    /// The wrapper's claim on the store is lost for good: the store was replaced under it
    /// (another database or file under its name, another identity, a history that went back
    /// or another way) or another wrapper took it. Nothing is answered from the filter again,
    /// and it cannot be rebuilt or saved: drop the wrapper and open it again.
    #[error(
        "the store is no longer the one this wrapper opened ({why}); the filter is bypassed for good: drop the wrapper and open the store again"
    )]
    ClaimLost {
        /// What happened, as the store reported it.
        why: String,
    },
    /// A snapshot was requested while the filter is bypassed: its bits do not cover the store.
    #[error("the filter is bypassed ({0}); rebuild before saving a snapshot")]
    NotTrusted(BypassReason),
}

/// A counting filter that cannot be made: memory, or options with no counting form.
impl<E> From<CountingError> for StoreError<E> {
    fn from(e: CountingError) -> Self {
        match e {
            CountingError::Alloc(e) => Self::Alloc(e),
            other => Self::Options(OptionsError::Counting(other)),
        }
    }
}
