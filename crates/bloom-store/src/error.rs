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
    Store(#[source] E),
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
    /// Another `FilteredStore` holds the store ([`PrimaryStore::claim_wrapper`]), in this
    /// process or another: one wrapper per store, or the second would answer "absent" for
    /// the first one's keys.
    ///
    /// [`PrimaryStore::claim_wrapper`]: crate::PrimaryStore::claim_wrapper
    #[error(
        "another FilteredStore has this store open (in this process or another): one wrapper per store; close it first, or share one filter between processes with bloom-redis"
    )]
    InUse,
    /// A snapshot was requested while the filter is bypassed: its bits do not cover the store.
    #[error("the filter is bypassed ({0}); rebuild before saving a snapshot")]
    NotTrusted(#[source] BypassReason),
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
