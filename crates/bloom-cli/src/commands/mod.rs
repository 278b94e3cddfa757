//! What each command does, one module per command (named as on the command line), and the
//! key handling they share: required keys, keys read and encoded a batch at a time, and
//! inserts from the command line or a key file.

pub(crate) mod add;
pub(crate) mod build;
pub(crate) mod check;
pub(crate) mod export;
pub(crate) mod generated;
pub(crate) mod import;
pub(crate) mod inspect;
pub(crate) mod measure;
pub(crate) mod parquet;
pub(crate) mod plan;
pub(crate) mod redis;
pub(crate) mod redis_at;
pub(crate) mod remove;
pub(crate) mod verify;

use bloom_core::{EncodedKey, Filter, FilterConfig};

use crate::files::AnyFilter;

use crate::cli::KeyInput;
use crate::error::{CmdResult, Failure};
use crate::keys::KeySource;
use crate::output::escape_key;

/// Keys are required: checked before a snapshot is loaded or Redis is asked anything.
pub(crate) fn require_keys(keys: &[String], input: &KeyInput) -> CmdResult {
    if keys.is_empty() && input.path.is_none() {
        return Err(Failure::usage(
            "no keys given: pass KEY... or --keys PATH (- for standard input)",
        ));
    }
    Ok(())
}

/// Calls `each` with batches of keys from the command line and `--keys`, as given and encoded
/// by `config` (`each` may take the batch, leaving an empty one in its place; the last batch
/// may be empty). A bad key is reported with its line after the batches before it were
/// handled, so that output stays complete up to the line the error names.
pub(crate) fn key_batches(
    config: &FilterConfig,
    keys: &[String],
    input: &KeyInput,
    each: impl FnMut(&mut KeyBatch) -> CmdResult,
) -> CmdResult {
    key_batches_of(Batch::KEYS, config, keys, input, each)
}

/// [`key_batches`] with batches of `size` keys.
pub(crate) fn key_batches_of(
    size: usize,
    config: &FilterConfig,
    keys: &[String],
    input: &KeyInput,
    mut each: impl FnMut(&mut KeyBatch) -> CmdResult,
) -> CmdResult {
    let mut batch = KeyBatch::with_size(size);
    let source = input.source().map(|s| s.name()).unwrap_or_default();
    let mut push =
        |key: &[u8], line: Option<u64>, each: &mut dyn FnMut(&mut KeyBatch) -> CmdResult| {
            let encoded = config
                .encoding()
                .encode_bytes(key)
                .map_err(|e| match line {
                    Some(n) => Failure::input(format!("{source} line {n}: {e}")),
                    None => Failure::input(format!("key {}: {e}", escape_key(key))),
                })?;
            batch.push(key, encoded.as_bytes());
            if batch.is_full() {
                each(&mut batch)?;
                batch.clear();
            }
            Ok::<(), Failure>(())
        };
    let read = (|| -> CmdResult {
        for key in keys {
            push(key.as_bytes(), None, &mut each)?;
        }
        if let Some(source) = input.source() {
            source.for_each(|key, line| push(key, Some(line), &mut each))?;
        }
        Ok(())
    })();
    // What was read before a failure is handled first.
    let last = each(&mut batch);
    read?;
    last
}

/// A batch of keys as given and as encoded. The encoded keys are held apart only once one of
/// them differs from its key as given: most keys are their own encoding (ASCII under NFC,
/// every key under `bytes`), and are then copied once.
pub(crate) struct KeyBatch {
    given: Batch,
    /// The encoded keys, when `apart`.
    encoded: Batch,
    apart: bool,
}

impl KeyBatch {
    /// A batch of `size` keys.
    pub(crate) fn with_size(size: usize) -> Self {
        Self {
            given: Batch::with_size(size),
            encoded: Batch::with_size(size),
            apart: false,
        }
    }

    fn push(&mut self, given: &[u8], encoded: &[u8]) {
        let same = std::ptr::eq(given, encoded) || given == encoded;
        if !same && !self.apart {
            self.apart = true;
            self.encoded.bytes.clone_from(&self.given.bytes);
            self.encoded.ends.clone_from(&self.given.ends);
        }
        self.given.push(given);
        if self.apart {
            self.encoded.push(encoded);
        }
    }

    fn is_full(&self) -> bool {
        self.given.is_full() || (self.apart && self.encoded.is_full())
    }

    fn clear(&mut self) {
        self.given.clear();
        self.encoded.clear();
        self.apart = false;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.given.is_empty()
    }

    /// How many keys it holds.
    pub(crate) fn len(&self) -> usize {
        self.given.ends.len()
    }

    /// The keys as given, in order.
    pub(crate) fn given(&self) -> impl Iterator<Item = &[u8]> {
        self.given.keys()
    }

    /// The keys as encoded, in order.
    pub(crate) fn encoded(&self) -> impl Iterator<Item = EncodedKey<'_>> {
        if self.apart {
            &self.encoded
        } else {
            &self.given
        }
        .encoded()
    }
}

/// Keys encoded and waiting to go into a filter a batch at a time (hashed together, so that
/// their cache misses overlap), in one reused buffer.
pub(crate) struct Batch {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    size: usize,
}

impl Batch {
    /// Keys per batch.
    pub(crate) const KEYS: usize = 256;
    /// Key bytes past which a batch is full, whatever its number of keys (long keys).
    pub(crate) const MAX_BYTES: usize = 16 << 20;

    pub(crate) fn new() -> Self {
        Self::with_size(Self::KEYS)
    }

    /// A batch of `size` keys.
    pub(crate) fn with_size(size: usize) -> Self {
        Self {
            bytes: Vec::new(),
            ends: Vec::with_capacity(size),
            size,
        }
    }

    pub(crate) fn push(&mut self, encoded: &[u8]) {
        self.bytes.extend_from_slice(encoded);
        self.ends.push(self.bytes.len());
    }

    pub(crate) fn is_full(&self) -> bool {
        self.ends.len() >= self.size || self.bytes.len() >= Self::MAX_BYTES
    }

    /// The keys, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &[u8]> {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let key = self.bytes.get(start..end).unwrap_or_default();
            start = end;
            key
        })
    }

    /// The keys, as keys already encoded with the filter's encoding.
    pub(crate) fn encoded(&self) -> impl Iterator<Item = EncodedKey<'_>> {
        self.keys().map(EncodedKey::from_encoded)
    }

    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// Inserts every key of `source` into `filter`, a batch at a time; the caller writes nothing
/// on error (a bad key is reported with its line).
pub(crate) fn insert_from(filter: &mut AnyFilter, source: &KeySource) -> CmdResult<u64> {
    let name = source.name();
    // With foreign Unicode tables, a key is inserted with its raw text, so that only keys
    // outside ASCII mark the tables as mixed; that path is one key at a time.
    let one_by_one = filter.config().has_foreign_tables();
    let mut batch = Batch::new();
    let count = source.for_each(|key, line| {
        if one_by_one {
            filter
                .insert(key)
                .map_err(|e| Failure::input(format!("{name} line {line}: {e}")))?;
        } else {
            let encoded = filter
                .config()
                .encoding()
                .encode_bytes(key)
                .map_err(|e| Failure::input(format!("{name} line {line}: {e}")))?;
            batch.push(encoded.as_bytes());
            if batch.is_full() {
                let _added = filter.insert_all(batch.encoded());
                batch.clear();
            }
        }
        Ok(())
    })?;
    let _added = filter.insert_all(batch.encoded());
    Ok(count)
}

/// Inserts keys given on the command line.
pub(crate) fn insert_args(filter: &mut AnyFilter, keys: &[String]) -> CmdResult {
    for key in keys {
        filter
            .insert(key.as_bytes())
            .map_err(|e| Failure::input(format!("key {key:?}: {e}")))?;
    }
    Ok(())
}

/// Warns when a filter's Unicode tables are not this build's.
pub(crate) fn warn_foreign_tables(path: &std::path::Path, config: &FilterConfig) {
    if config.has_foreign_tables() {
        crate::warn(&format!(
            "warning: {} was built with Unicode tables {}; this build has {}: keys with characters outside ASCII answer maybe (rebuild the filter to get exact answers for them)",
            crate::files::shown(path),
            config.tables(),
            config.encoding().build_tables()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys that are their own encoding are held once; the first that is not puts every
    /// encoded key apart, and a cleared batch starts over.
    #[test]
    fn a_key_batch_holds_encoded_keys_apart_only_when_one_differs() {
        let encoding = bloom_core::KeyEncoding::Nfc;
        let mut batch = KeyBatch::with_size(8);
        let encoded = |batch: &KeyBatch| -> Vec<Vec<u8>> {
            batch.encoded().map(|k| k.as_bytes().to_vec()).collect()
        };
        for round in 0..2 {
            for key in ["plain", "caf\u{e9}"] {
                let bytes = encoding.encode_bytes(key.as_bytes()).unwrap();
                batch.push(key.as_bytes(), bytes.as_bytes());
            }
            assert!(!batch.apart, "round {round}");
            let decomposed = "cafe\u{301}";
            let bytes = encoding.encode_bytes(decomposed.as_bytes()).unwrap();
            batch.push(decomposed.as_bytes(), bytes.as_bytes());
            assert!(batch.apart);
            let given: Vec<&[u8]> = batch.given().collect();
            assert_eq!(
                given,
                [&b"plain"[..], "caf\u{e9}".as_bytes(), decomposed.as_bytes()]
            );
            assert_eq!(
                encoded(&batch),
                [b"plain".to_vec(), "caf\u{e9}".into(), "caf\u{e9}".into()]
            );
            assert_eq!(batch.len(), 3);
            batch.clear();
            assert!(batch.is_empty() && encoded(&batch).is_empty());
        }
    }
}
