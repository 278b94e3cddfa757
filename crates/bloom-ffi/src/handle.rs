//! [`Handle`]: a filter as every binding holds it, with the header it was loaded with (or
//! last saved as), so that saving again keeps its generation and store binding as
//! `bloom add` does. Keys go in and out here, with a refused key named by its index.

use std::path::Path;

use bloom_core::{AnyFilter, Filter, Key, RemoveError};
use bloom_format::{GuavaFunnel, Header};

use crate::create::{FilterOptions, create};
use crate::error::Error;
use crate::snapshots::{self, HeaderInfo, Source};

/// A filter as the C ABI and the Python package hold it.
#[derive(Debug)]
pub struct Handle {
    filter: AnyFilter,
    /// The header it was loaded with or last saved as; `None` for a new filter.
    header: Option<Header>,
}

/// A refused key's error, naming its index among `keys`: the first of them the filter
/// refuses.
fn refused_at<I>(filter: &AnyFilter, keys: I, error: bloom_core::KeyError) -> Error
where
    I: IntoIterator,
    I::Item: Key,
{
    let at = keys
        .into_iter()
        .position(|key| <I::Item as Key>::into_result(filter.contains(&key)).is_err());
    let error = Error::from(error);
    match at {
        Some(i) => error.at_key(i),
        None => error,
    }
}

impl Handle {
    /// A new, empty filter planned as `options` say ([`create`]).
    ///
    /// # Errors
    /// As [`create`].
    pub fn create(options: &FilterOptions) -> Result<Self, Error> {
        Ok(Self {
            filter: create(options)?,
            header: None,
        })
    }

    /// The filter a snapshot holds, its header kept ([`snapshots::load`]).
    ///
    /// # Errors
    /// As [`snapshots::load`].
    pub fn load(source: Source<'_>, max_payload_bytes: u64) -> Result<Self, Error> {
        let loaded = snapshots::load(source, max_payload_bytes)?;
        Ok(Self {
            filter: loaded.filter,
            header: Some(loaded.header),
        })
    }

    /// A handle for a filter made elsewhere (a Parquet file's, say): no header yet.
    #[must_use]
    pub fn from_filter(filter: AnyFilter) -> Self {
        Self {
            filter,
            header: None,
        }
    }

    /// The filter a Guava stream holds ([`crate::from_guava`]).
    ///
    /// # Errors
    /// As [`crate::from_guava`].
    pub fn from_guava(
        source: Source<'_>,
        funnel: GuavaFunnel,
        max_payload_bytes: u64,
    ) -> Result<Self, Error> {
        Ok(Self {
            filter: crate::guava::from_guava(source, funnel, max_payload_bytes)?,
            header: None,
        })
    }

    /// The filter.
    #[must_use]
    pub fn filter(&self) -> &AnyFilter {
        &self.filter
    }

    /// The dataset generation it was loaded with or last saved at (0 for a new filter).
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.header
            .as_ref()
            .map_or(0, |h| h.dataset_generation.get())
    }

    /// The header a snapshot of it would have: at `dataset_generation`, or the one it was
    /// loaded with (or last saved at) when `None`; bound to the store it was bound to while
    /// that generation is kept ([`Filter::header_replacing`]).
    #[must_use]
    pub fn header(&self, dataset_generation: Option<u64>) -> Header {
        match &self.header {
            Some(loaded) => self.filter.header_replacing(loaded, dataset_generation),
            None => self.filter.header(dataset_generation.unwrap_or(0)),
        }
    }

    /// [`Handle::header`] as plain values, with `None`.
    #[must_use]
    pub fn info(&self) -> HeaderInfo {
        HeaderInfo::new(bloom_format::FormatVersion::CURRENT, &self.header(None))
    }

    /// Inserts a key; whether it changed the filter.
    ///
    /// # Errors
    /// [`ErrorKind::Key`](crate::ErrorKind::Key) for a byte key a text encoding refuses.
    pub fn insert<K: Key + ?Sized>(&mut self, key: &K) -> Result<bool, Error> {
        Ok(K::into_result(self.filter.insert(key))?)
    }

    /// Whether a key may have been inserted.
    ///
    /// # Errors
    /// [`ErrorKind::Key`](crate::ErrorKind::Key) for a byte key a text encoding refuses.
    pub fn contains<K: Key + ?Sized>(&self, key: &K) -> Result<bool, Error> {
        Ok(K::into_result(self.filter.contains(key))?)
    }

    /// Inserts every key (a batch at a time); how many changed the filter. A refused key
    /// stops the call, after every key before it was inserted; the error names its index.
    ///
    /// # Errors
    /// [`ErrorKind::Key`](crate::ErrorKind::Key).
    pub fn insert_all<I>(&mut self, keys: I) -> Result<u64, Error>
    where
        I: IntoIterator + Clone,
        I::Item: Key,
    {
        <I::Item as Key>::into_result(self.filter.insert_all(keys.clone()))
            .map_err(|e| refused_at(&self.filter, keys, e))
    }

    /// Hands `answer` each key's answer, in order, as [`Handle::contains`] gives it (a batch
    /// at a time). A refused key stops the call; the error names its index.
    ///
    /// # Errors
    /// [`ErrorKind::Key`](crate::ErrorKind::Key).
    pub fn contains_each<I>(&self, keys: I, mut answer: impl FnMut(bool)) -> Result<(), Error>
    where
        I: IntoIterator + Clone,
        I::Item: Key,
    {
        for maybe in self.filter.contains_each(keys.clone()) {
            match <I::Item as Key>::into_result(maybe) {
                Ok(maybe) => answer(maybe),
                Err(e) => return Err(refused_at(&self.filter, keys, e)),
            }
        }
        Ok(())
    }

    /// Removes a key from a counting filter. The store binding it was loaded with is dropped:
    /// as far as that history says, the store still holds the key.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a filter of another kind, or a key it says is
    /// absent (or cannot tell: foreign Unicode tables, a saturated counter); [`ErrorKind::Key`](crate::ErrorKind::Key).
    pub fn remove<K: Key + ?Sized>(&mut self, key: &K) -> Result<(), Error> {
        let AnyFilter::Counting(counting) = &mut self.filter else {
            return Err(Error::invalid(format!(
                "only a counting filter removes keys; this one is {}",
                self.filter.kind()
            )));
        };
        counting.remove(key).map_err(|e| match e {
            RemoveError::Key(e) => Error::from(e),
            other => Error::invalid(format!("the key was not removed: {other}")),
        })?;
        if let Some(header) = &mut self.header {
            header.store = None;
        }
        Ok(())
    }

    /// Writes a snapshot to `path` atomically, with [`Handle::header`]'s header; returns it
    /// (give it to [`Handle::saved`] to save at that generation from now on).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an empty path, [`ErrorKind::Io`](crate::ErrorKind::Io).
    pub fn save(&self, path: &Path, dataset_generation: Option<u64>) -> Result<Header, Error> {
        if path.as_os_str().is_empty() {
            return Err(Error::invalid("the path is empty"));
        }
        let header = self.header(dataset_generation);
        snapshots::save(&self.filter, header.clone(), path)?;
        Ok(header)
    }

    /// Records that the filter was saved with `header`: later saves keep its generation and
    /// store binding. A binding dropped since the header was made (by a removal while the
    /// file was written) stays dropped.
    pub fn saved(&mut self, mut header: Header) {
        let still_bound = self.header.as_ref().is_some_and(|h| h.store.is_some());
        if !still_bound {
            header.store = None;
        }
        self.header = Some(header);
    }

    /// The snapshot's bytes, with [`Handle::header`]'s header.
    ///
    /// # Errors
    /// [`ErrorKind::OutOfMemory`](crate::ErrorKind::OutOfMemory).
    pub fn to_bytes(&self, dataset_generation: Option<u64>) -> Result<Vec<u8>, Error> {
        snapshots::to_bytes(&self.filter, self.header(dataset_generation))
    }

    /// The Guava stream of a filter of Guava's rules ([`crate::to_guava`]).
    ///
    /// # Errors
    /// As [`crate::to_guava`].
    pub fn to_guava(&self) -> Result<Vec<u8>, Error> {
        crate::guava::to_guava(&self.filter)
    }
}
