//! What callers ask of a [`RedisFilter`]: keys inserted and looked up (encoded, their Unicode
//! tables noted in the metadata first), through the batches of `bits`.

use bloom_core::{EncodedKey, Key};
use bloom_redis_protocol::meta;

use super::{Inserts, Lookups};
use crate::error::RedisFilterError;
use crate::filter::RedisFilter;

impl RedisFilter {
    /// Inserts a key (text, bytes or already encoded: see [`Key`]), encoded by the filter's
    /// encoding; returns whether a bit changed.
    ///
    /// # Errors
    /// [`RedisFilterError::Key`] for a byte key a text encoding refuses (nothing is sent);
    /// [`RedisFilterError::LostState`], [`RedisFilterError::Unverified`],
    /// [`RedisFilterError::NotAcknowledged`], [`RedisFilterError::NotDurable`], or a Redis
    /// error: the key's bits may then not be set (or not be durable), and a caller must not
    /// commit the key.
    pub fn insert<K: Key + ?Sized>(&self, key: &K) -> Result<bool, RedisFilterError> {
        Ok(self.insert_all([key])? == 1)
    }

    /// Inserts many keys (any form [`RedisFilter::insert`] takes), a batch of keys per
    /// pipeline, within one deadline; returns how many changed a bit. It returns only once
    /// every shard written was judged and the writes are as durable as the filter asks.
    ///
    /// # Errors
    /// [`RedisFilterError::Key`] for a byte key a text encoding refuses, before anything is
    /// sent; otherwise as [`RedisFilter::insert`], and keys of earlier batches are inserted.
    pub fn insert_all<I>(&self, keys: I) -> Result<u64, RedisFilterError>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let keys: Vec<I::Item> = keys.into_iter().collect();
        let encoded = self.encode_keys(&keys)?;
        self.note_mixed_tables(&keys)?;
        self.insert_keys(&encoded, true).map(|(changed, _)| changed)
    }

    /// Every key in the filter's encoding.
    pub(crate) fn encode_keys<'k, K: Key>(
        &self,
        keys: &'k [K],
    ) -> Result<Vec<EncodedKey<'k>>, RedisFilterError> {
        let encoding = self.config.encoding();
        keys.iter()
            .map(|k| {
                k.encode(encoding)
                    .map_err(|e| RedisFilterError::Key(e.into()))
            })
            .collect()
    }

    /// Before the bits of a key outside ASCII go into a filter of other Unicode tables than
    /// this build's: the metadata says (schema 3) that its keys' tables are not all the
    /// recorded ones, so that no build trusts them for such keys again (a local filter does
    /// the same: see `FilterConfig::mark_tables_mixed`).
    /// The keys are those given (text, bytes, or encoded: an encoded key may come from any
    /// text, and counts as outside ASCII), as a local filter judges them.
    pub(crate) fn note_mixed_tables<K: Key>(&self, keys: &[K]) -> Result<(), RedisFilterError> {
        self.note_mixed_tables_when(|| keys.iter().any(Key::depends_on_tables))
    }

    /// [`RedisFilter::note_mixed_tables`] when `depends` says that a key's encoding depends on
    /// the Unicode tables.
    pub(crate) fn note_mixed_tables_when(
        &self,
        depends: impl FnOnce() -> bool,
    ) -> Result<(), RedisFilterError> {
        if self.tables_mixed.load(std::sync::atomic::Ordering::Acquire)
            || !self.config.has_foreign_tables()
            || !depends()
        {
            return Ok(());
        }
        self.set_fields([("schema", meta::schema(self.counted, true))])?;
        self.tables_mixed
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Inserts keys (judging their shards' nodes with `verify`), counts them in the metadata
    /// and makes the writes durable; returns how many changed a bit and which connection
    /// took each shard's writes.
    pub(crate) fn insert_keys<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        verify: bool,
    ) -> Result<(u64, Vec<(u64, u32)>), RedisFilterError> {
        let mut inserts = Inserts::new(self, verify, Some(self.deadline()));
        for batch in keys.chunks(inserts.batch_len()) {
            inserts.send_slice(batch)?;
        }
        inserts.finish_writes()
    }

    /// Whether a key (text, bytes or already encoded: see [`Key`]) may have been inserted
    /// (`false` is definite). With Unicode tables other than this build's, a key outside
    /// ASCII and every already-encoded key is *maybe*, as for a local filter.
    ///
    /// # Errors
    /// [`RedisFilterError::Key`] for a byte key a text encoding refuses;
    /// [`RedisFilterError::LostState`], [`RedisFilterError::Unverified`] or a Redis error:
    /// never treat the key as absent then.
    pub fn contains<K: Key + ?Sized>(&self, key: &K) -> Result<bool, RedisFilterError> {
        Ok(self.contains_each([key])?.first().copied().unwrap_or(true))
    }

    /// Whether each key may have been inserted, a batch per pipeline, within one deadline;
    /// the answers are given only once every shard that answered was judged.
    ///
    /// # Errors
    /// As [`RedisFilter::contains`]: no answer is returned for any key then.
    pub fn contains_each<I>(&self, keys: I) -> Result<Vec<bool>, RedisFilterError>
    where
        I: IntoIterator,
        I::Item: Key,
    {
        let keys: Vec<I::Item> = keys.into_iter().collect();
        let mut lookups = Lookups::new(self, Some(self.deadline()));
        let mut answers = Vec::with_capacity(keys.len());
        for batch in keys.chunks(lookups.batch_len()) {
            answers.extend(lookups.send(batch)?.unwrap_or_default());
        }
        while let Some(answered) = lookups.next_answers()? {
            answers.extend(answered);
        }
        Ok(answers)
    }
}
