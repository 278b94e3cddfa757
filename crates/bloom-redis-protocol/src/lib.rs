//! The Redis protocol of bloom's sharded filters, as `docs/format.md` ("Sharded filters held
//! in Redis") specifies it: one home for what `bloom-redis` (which sends `BITFIELD`s) and the
//! Redis module `bloom-redis-module` (which hashes keys inside the server) must agree on bit
//! for bit.
//!
//! Pure code: key strings, byte layouts, field texts, and their parsing and validation with
//! typed errors. No I/O, no Redis client, no randomness (a creation id is drawn by the
//! caller); nothing here panics on any input, and nothing is allocated from a size the input
//! announces before it is checked. It depends on `bloom-format` for the header it describes.
//!
//! - [`keys`]: the key scheme (`bloom:{NAME}:meta`, `bloom:{NAME:S}`,
//!   `bloom:{NAME:S}:epoch`) and the name rules.
//! - [`config`]: the ten configuration fields and their one-text form, which the markers
//!   bind and the module takes as an argument; the layouts and rules a Redis filter may have.
//! - [`marker`]: the shards' markers.
//! - [`shard`]: a shard's bytes (markers, bits, write counter) and its size limit.
//! - [`meta`]: the metadata hash (schemas, state, creation id, durability, every field).
//! - [`epoch`]: the epoch record beside every shard.
//! - [`coverage`]: what the bits cover, in the metadata and in every epoch record.
//! - [`module`]: the module's name, versions and argument words.
//!
//! ```
//! use bloom_format::{Header, KeyEncodingId, KeyEncodingSpec, LayoutId, PositionRuleId};
//! use bloom_redis_protocol::config::{config_text, parse_config_text};
//! use bloom_redis_protocol::keys::{parse_shard_key, shard_key};
//! use bloom_redis_protocol::marker::ShardMarkers;
//! use bloom_redis_protocol::meta::Creation;
//! use bloom_redis_protocol::shard::ShardLayout;
//!
//! // A filter of 2^20 bits in 16 shards.
//! let mut header = Header::new(
//!     1 << 20,
//!     7,
//!     PositionRuleId::Xxh3_128,
//!     LayoutId::ShardedV2,
//!     KeyEncodingSpec::new(KeyEncodingId::Bytes, 1),
//! );
//! header.layout_parameter = 16;
//!
//! // Shard 3's key, and what the module reads back from it.
//! let key = shard_key("seen", 3);
//! assert_eq!(key, "bloom:{seen:3}");
//! assert_eq!(parse_shard_key(key.as_bytes())?.shard, 3);
//!
//! // The configuration travels as one text, and parses back to the same header.
//! let text = config_text(&header);
//! assert_eq!(parse_config_text(&text)?, header);
//!
//! // A fresh shard: its marker at both ends, zeros between, nothing else.
//! let creation = Creation::parse("0102030405060708090a0b0c0d0e0f10").unwrap();
//! let markers = ShardMarkers::for_filter(creation, &header);
//! let layout = ShardLayout::new((1 << 20) / 16);
//! let mut shard = vec![0u8; layout.len(false) as usize];
//! let end = shard.len() - 8;
//! shard[..8].copy_from_slice(&markers.bytes(3));
//! shard[end..].copy_from_slice(&markers.bytes(3));
//! assert_eq!(layout.markers(&shard), (markers.of(3), markers.of(3)));
//! // Shard 4's marker is another: a shard read under the wrong key is caught.
//! assert_ne!(markers.of(4), markers.of(3));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
// Parsing never panics; unit tests may.
#![cfg_attr(
    not(test),
    deny(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)
)]

pub mod config;
pub mod coverage;
pub mod epoch;
pub mod keys;
pub mod marker;
pub mod meta;
pub mod module;
pub mod shard;
