//! Why a command was refused: the error codes clients match, and the messages after them.

use std::fmt;

/// Why a command was refused before it touched a shard. Its `Display` is the reply's error
/// text, after the code [`CommandError::code`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CommandError {
    /// The key is not a shard key (`bloom:{NAME:s}`).
    NotAShard,
    /// The creation is not 32 lowercase hex digits, not all zero.
    Creation,
    /// The configuration text does not parse, or does not make a sharded filter.
    Config(String),
    /// The shard number is not below the configuration's shard count.
    ShardNumber { shard: u64, shards: u32 },
    /// The mode is neither `ENCODED` nor `RAW`.
    Mode,
    /// A raw key the filter's encoding refuses (a text encoding and bytes that are not
    /// UTF-8); nothing was written.
    Key { index: usize, reason: String },
    /// A raw key outside ASCII for a filter of other Unicode tables than the module's: only
    /// a client that records that in the metadata (schema 3) may add it, encoded.
    ForeignTables { index: usize },
    /// A key whose positions are in another shard.
    WrongShard { index: usize, shard: u64 },
    /// More keys than one command may carry: their positions would be over
    /// [`MAX_POSITIONS`](crate::shard::MAX_POSITIONS).
    TooManyKeys { most: usize },
    /// `BLOOM.RESERVE` of a shard that is already this filter's shard, whole: it would empty
    /// it.
    Exists,
    /// `BLOOM.RESERVE`'s fourth argument is not `COUNTED`.
    Shape,
}

impl CommandError {
    /// The reply's error code: the first word of the error, which clients match.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::WrongShard { .. } => "WRONGSHARD",
            Self::ForeignTables { .. } => "FOREIGNTABLES",
            Self::Exists => "EXISTS",
            _ => "ERR",
        }
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAShard => write!(f, "bloom: the key is not a shard key bloom:{{NAME:s}}"),
            Self::Creation => write!(
                f,
                "bloom: the creation is not 32 lowercase hex digits, not all zero"
            ),
            Self::Config(why) => write!(f, "bloom: the configuration {why}"),
            Self::ShardNumber { shard, shards } => {
                write!(f, "bloom: shard {shard} of a filter of {shards} shards")
            }
            Self::Mode => write!(f, "bloom: the mode is ENCODED or RAW"),
            Self::Key { index, reason } => write!(f, "bloom: key {index} is refused: {reason}"),
            Self::ForeignTables { index } => write!(
                f,
                "bloom: key {index} is outside ASCII and the filter records other Unicode tables than the module's; send it encoded"
            ),
            Self::WrongShard { index, shard } => {
                write!(f, "bloom: key {index} belongs to shard {shard}")
            }
            Self::TooManyKeys { most } => write!(
                f,
                "bloom: too many keys in one command: at most {most} for this filter (send them in several)"
            ),
            Self::Exists => write!(
                f,
                "bloom: the shard exists, whole, with these markers; delete it first to empty it"
            ),
            Self::Shape => write!(
                f,
                "bloom: the shard's shape is COUNTED (a write counter after its end marker) or nothing"
            ),
        }
    }
}
