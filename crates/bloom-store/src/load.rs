//! Loading a snapshot for a store: read the header, check it against the options and the
//! store's identity and history, and only then read the payload into a filter.

use std::path::Path;
use std::sync::Arc;

use bloom_core::{AtomicBloomFilter, CountingBloomFilter, Filter, FilterConfig, ReadSnapshotError};
use bloom_format::{DatasetGeneration, DecodeOptions, ReadError, SnapshotReader};

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
    // The payload is read straight into the filter's words and checked before it is used.
    let loaded = if counting {
        CountingBloomFilter::read_snapshot(reader)
            .map(|f| StoreFilter::Counting(std::sync::RwLock::new(f)))
    } else {
        AtomicBloomFilter::read_snapshot(reader).map(StoreFilter::Plain)
    };
    Ok(match loaded {
        Ok(filter) => Ok(Matched { filter, generation }),
        Err(ReadSnapshotError::Read(e)) => Err(BypassReason::Unreadable(Arc::new(e))),
        Err(ReadSnapshotError::Load(e)) => {
            Err(BypassReason::Incompatible(Incompatibility::Unsupported(e)))
        }
    })
}
