//! One module per command, named as on the command line.

pub(crate) mod add;
pub(crate) mod build;
pub(crate) mod check;
pub(crate) mod export;
pub(crate) mod import;
pub(crate) mod inspect;
pub(crate) mod measure;
pub(crate) mod plan;
pub(crate) mod verify;

use bloom_core::BloomFilter;

use crate::error::{CmdResult, Failure};
use crate::keys::KeySource;
use crate::progress;

/// Inserts every key of `source` into `filter`; the caller writes nothing on error.
pub(crate) fn insert_from(filter: &mut BloomFilter, source: &KeySource) -> CmdResult<u64> {
    let name = source.name();
    let bar = progress::bar("inserting");
    let count = source.for_each(|key, line| {
        filter
            .insert_bytes(key)
            .map_err(|e| Failure::input(format!("{name} line {line}: {e}")))?;
        if line % 4096 == 0 {
            bar.set_position(line);
        }
        Ok(())
    })?;
    bar.finish_and_clear();
    Ok(count)
}

/// Inserts keys given on the command line.
pub(crate) fn insert_args(filter: &mut BloomFilter, keys: &[String]) -> CmdResult {
    for key in keys {
        filter
            .insert_bytes(key.as_bytes())
            .map_err(|e| Failure::input(format!("key {key:?}: {e}")))?;
    }
    Ok(())
}

/// A warning for filters whose Unicode tables are not this build's.
pub(crate) fn foreign_tables_warning(
    path: &std::path::Path,
    filter: &BloomFilter,
) -> Option<String> {
    let config = filter.config();
    config.has_foreign_tables().then(|| {
        format!(
            "warning: {} was built with Unicode tables {}; this build has {}: keys with characters outside ASCII answer maybe (rebuild the filter to get exact answers for them)",
            path.display(),
            config.tables(),
            config.encoding().build_tables()
        )
    })
}
