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

/// `HINCRBY` of both fields by `ARGV[2]` and `ARGV[3]`, only if the metadata's `creation` is
/// `ARGV[1]`; -1 otherwise.
const GUARDED_OBSERVED: &str = "if redis.call('HGET', KEYS[1], 'creation') ~= ARGV[1] then return -1 end \
     redis.call('HINCRBY', KEYS[1], 'observed_false_positives', ARGV[2]) \
     return redis.call('HINCRBY', KEYS[1], 'observed_absent_queries', ARGV[3])";

impl RedisFilter {
    /// Adds `false_positives` of `absent_queries` (queries for keys the store did not have,
    /// answered by this filter) to what every process measured on it.
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
        // A field never written (no process recorded yet) is nil: 0.
        let count = |i: usize| -> Result<u64, RedisFilterError> {
            match fields.get(i) {
                None | Some(redis::Value::Nil) => Ok(0),
                Some(value) => text(value)
                    .and_then(|t| t.parse::<u64>().ok())
                    .ok_or_else(|| {
                        RedisFilterError::Protocol(format!(
                            "the metadata's observed counts are not counts: {value:?}"
                        ))
                    }),
            }
        };
        let (false_positives, absent) = (count(0)?, count(1)?);
        // Written together, so a total below its part is damage: counted as no measurement.
        Ok(if false_positives > absent {
            ObservedRate::new(0, 0)
        } else {
            ObservedRate::new(false_positives, absent)
        })
    }
}
