//! The `bloom` Redis module as its clients find and call it (`docs/format.md`, "The Redis
//! module"): its name and versions in `MODULE LIST`, and the words its commands take besides
//! keys. The commands' work on a shard is the module's; which version a client needs is
//! said here, next to the version the module reports.

/// The module's name in `MODULE LIST`.
pub const NAME: &str = "bloom";

/// The version the module reports (`MODULE LIST`, `BLOOM.INFO`): the newest of this protocol.
pub const VERSION: i64 = 2;

/// The first module version with `BLOOM.MADD`, `BLOOM.MEXISTS`, `BLOOM.RESERVE` and
/// `BLOOM.SHARD`.
pub const MIN_VERSION: i64 = 1;

/// The first module version that knows counted shards (schemas `bloom-redis/4` and `/5`: a
/// write counter after the end marker); an older one would take them for lost.
pub const MIN_COUNTED_VERSION: i64 = 2;

/// The mode of `BLOOM.MADD` and `BLOOM.MEXISTS` whose keys are already in the filter's
/// encoding (the module takes it in any case).
pub const ENCODED: &[u8] = b"ENCODED";

/// The mode whose keys are as the application has them, encoded by the module (in any case).
pub const RAW: &[u8] = b"RAW";

/// `BLOOM.RESERVE`'s fourth argument for a counted shard (exactly this).
pub const COUNTED: &[u8] = b"COUNTED";
