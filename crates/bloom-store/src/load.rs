//! Loading a snapshot for a store: read the header, check it against the options and the
//! store's identity and history, and only then read the payload into a filter.

use std::path::Path;
use std::sync::Arc;

use bloom_core::{Filter, FilterConfig, SnapshotError};
use bloom_format::{DatasetGeneration, DecodeOptions, Header, ReadError, SnapshotReader};

use crate::history::HistoryPoint;
use crate::kind::StoreFilter;
use crate::options::FilterOptions;
use crate::outcome::{BypassReason, Incompatibility};
use crate::primary::PrimaryStore;

/// A snapshot that matches the store's history.
pub(crate) struct Matched {
    pub(crate) filter: StoreFilter,
    /// The generation the snapshot covers; the store's history up to it is the snapshot's.
    pub(crate) generation: DatasetGeneration,
}

/// Either a failure to read the payload or the filter's refusal of it.
enum PayloadError {
    Read(ReadError),
    Refused(SnapshotError),
}

impl From<ReadError> for PayloadError {
    fn from(e: ReadError) -> Self {
        Self::Read(e)
    }
}

impl From<SnapshotError> for PayloadError {
    fn from(e: SnapshotError) -> Self {
        Self::Refused(e)
    }
}

/// The filter of `header`, its payload streamed from `reader` as it is read.
fn load<F: Filter<LoadError = SnapshotError>>(
    header: &Header,
    reader: SnapshotReader<std::fs::File>,
) -> Result<F, PayloadError> {
    F::from_payload(header, |push| {
        reader
            .read_payload_with(|chunk| {
                push(chunk);
                Ok::<(), ReadError>(())
            })
            .map(|_| ())
            .map_err(PayloadError::from)
    })
}

/// Opens the snapshot at `path` for `store`, whose identity and head were read just before.
///
/// Everything that can be decided from the header is decided before the payload is read:
/// format, binding, identity, generation, history, then the options (so that a snapshot of
/// another store or history says so, whatever its rules). The outer error is the
/// store's; the inner one is why the snapshot cannot be trusted.
pub(crate) fn open_snapshot<S: PrimaryStore>(
    path: &Path,
    options: &FilterOptions,
    store: &S,
    head: HistoryPoint,
) -> Result<Result<Matched, BypassReason>, S::Error> {
    let decode = DecodeOptions::with_max_payload_len(options.max_snapshot_bytes);
    let reader = match SnapshotReader::open(path, &decode) {
        Ok(reader) => reader,
        Err(ReadError::Io { cause, .. }) if cause.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Err(BypassReason::NoSnapshot));
        }
        Err(e) => return Ok(Err(BypassReason::Unreadable(Arc::new(e)))),
    };
    let header = reader.header();
    let counting = header.layout == bloom_format::LayoutId::Counting4;
    let config = match FilterConfig::from_any_header(header) {
        Ok(config) => config,
        Err(e) => {
            return Ok(Err(BypassReason::Incompatible(
                Incompatibility::Unsupported(e),
            )));
        }
    };
    let Some(binding) = header.store else {
        return Ok(Err(BypassReason::NotBound));
    };
    let identity = store.identity()?;
    if binding.identity != identity {
        return Ok(Err(BypassReason::OtherStore {
            snapshot: binding.identity,
            store: identity,
        }));
    }
    let generation = header.dataset_generation;
    if generation > head.generation {
        return Ok(Err(BypassReason::NewerThanStore {
            snapshot: generation,
            store: head.generation,
        }));
    }
    if store.history_at(generation)? != Some(binding.history) {
        return Ok(Err(BypassReason::HistoryDiverged { generation }));
    }
    // The history matches: the snapshot could be used, if its rules are the configured ones.
    if counting != options.counting {
        return Ok(Err(BypassReason::Incompatible(Incompatibility::Counting {
            snapshot: counting,
        })));
    }
    if let Some(why) = options.incompatibility(&config) {
        return Ok(Err(BypassReason::Incompatible(why)));
    }
    let header = header.clone();
    let loaded = if counting {
        load(&header, reader).map(|f| StoreFilter::Counting(std::sync::RwLock::new(f)))
    } else {
        load(&header, reader).map(StoreFilter::Plain)
    };
    Ok(match loaded {
        Ok(filter) => Ok(Matched { filter, generation }),
        Err(PayloadError::Read(e)) => Err(BypassReason::Unreadable(Arc::new(e))),
        Err(PayloadError::Refused(e)) => {
            Err(BypassReason::Incompatible(Incompatibility::Unsupported(e)))
        }
    })
}
