//! The false positives every process measured on the shared filter, kept beside its
//! metadata: each `SharedFilteredStore::metrics` adds what its process measured since its
//! last call, and `bloom redis info` reads the total. They go with the filter: deleted with
//! it, and started afresh by a filter created in its place.

use bloom_core::ObservedRate;

use crate::error::RedisFilterError;
use crate::node::text;

use super::RedisFilter;

/// The metadata fields: false positives, and queries for absent keys the filter answered
/// (each a false positive or a lookup avoided).
const FALSE_POSITIVES: &str = "observed_false_positives";
const ABSENT_QUERIES: &str = "observed_absent_queries";

/// Adds `ARGV[2]` and `ARGV[3]` to the two fields, only if the metadata's `creation` is
/// `ARGV[1]` (-1 otherwise). Fields that are not two counts, the first within the second,
/// both below 2^50 (damaged, or written by hand) start again from zero first, so that the
/// sums can never fail halfway or overflow.
const GUARDED_OBSERVED: &str = "if redis.call('HGET', KEYS[1], 'creation') ~= ARGV[1] then return -1 end \
     local fp = tonumber(redis.call('HGET', KEYS[1], 'observed_false_positives') or '0') \
     local ab = tonumber(redis.call('HGET', KEYS[1], 'observed_absent_queries') or '0') \
     local limit = 1125899906842624 \
     if fp == nil or ab == nil or fp < 0 or ab < fp or ab >= limit or fp ~= math.floor(fp) or ab ~= math.floor(ab) \
         or tonumber(ARGV[3]) >= limit then \
       fp = 0 ab = 0 \
     end \
     redis.call('HSET', KEYS[1], 'observed_false_positives', string.format('%d', fp + tonumber(ARGV[2])), \
       'observed_absent_queries', string.format('%d', ab + tonumber(ARGV[3]))) \
     return 1";

impl RedisFilter {
    /// Adds `false_positives` of `absent_queries` (queries for keys the store did not have,
    /// answered by this filter; at least `false_positives`) to what every process measured
    /// on it.
    ///
    /// # Errors
    /// A Redis error, or [`RedisFilterError::LostState`] when the filter was deleted or
    /// recreated since this handle opened it (nothing is added then).
    pub fn record_observed(
        &self,
        false_positives: u64,
        absent_queries: u64,
    ) -> Result<(), RedisFilterError> {
        let key = self.meta_key();
        let creation = self.creation.hex();
        // A total below its part would read as damage, and wipe every process's record.
        let absent_queries = absent_queries.max(false_positives);
        let (fps, absent) = (false_positives.to_string(), absent_queries.to_string());
        self.guarded(&[
            b"EVAL",
            GUARDED_OBSERVED.as_bytes(),
            b"1",
            key.as_bytes(),
            creation.as_bytes(),
            fps.as_bytes(),
            absent.as_bytes(),
        ])
    }

    /// What every process measured on this filter since it was created
    /// ([`RedisFilter::record_observed`]): its false positives of the queries for absent
    /// keys it answered.
    ///
    /// # Errors
    /// A Redis error.
    pub fn observed(&self) -> Result<ObservedRate, RedisFilterError> {
        let key = self.meta_key();
        let reply = self.conn().query(
            &[
                b"HMGET",
                key.as_bytes(),
                FALSE_POSITIVES.as_bytes(),
                ABSENT_QUERIES.as_bytes(),
            ],
            Some(key.as_bytes()),
        )?;
        let redis::Value::Array(fields) = reply else {
            return Err(RedisFilterError::Protocol(
                "HMGET did not reply with an array".into(),
            ));
        };
        // A field never written (no process recorded yet) is nil: 0. Fields that are not
        // counts, or a total below its part, are damage (the next record starts them again):
        // no measurement, never an error that would keep the filter's other figures from
        // being read.
        let count = |i: usize| match fields.get(i) {
            None | Some(redis::Value::Nil) => Some(0),
            Some(value) => text(value).and_then(|t| t.parse::<u64>().ok()),
        };
        Ok(match (count(0), count(1)) {
            (Some(false_positives), Some(absent)) if false_positives <= absent => {
                ObservedRate::new(false_positives, absent)
            }
            _ => ObservedRate::default(),
        })
    }
}
