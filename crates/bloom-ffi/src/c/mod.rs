//! The C ABI: opaque handles, explicit free functions, status codes and a per-thread message.
//! `include/bloom.h` is generated from this module by cbindgen (`cargo xtask ffi-header`)
//! and checked current in CI.
//!
//! Every function returns a [`BloomStatus`] (0 for success) unless it cannot fail, catches
//! any panic (reported as [`BLOOM_ERR_INTERNAL`]), checks every pointer it is given for
//! null, and leaves its out-parameters untouched on failure. The message of the last
//! failure on the calling thread is [`bloom_last_error_message`].

// Every raw pointer of the ABI is dereferenced in `ptr.rs`, after a null check.
#![allow(unsafe_code)]

mod filter;
mod ptr;
mod snapshot;
mod status;

pub use filter::{
    BloomFilter, BloomOptions, bloom_filter_contains, bloom_filter_contains_batch,
    bloom_filter_free, bloom_filter_header, bloom_filter_insert, bloom_filter_insert_batch,
    bloom_filter_new, bloom_filter_new_with, bloom_filter_remove, bloom_options_default,
};
pub use snapshot::{
    BLOOM_KEEP_GENERATION, BloomHeaderInfo, BloomName, bloom_buffer_free, bloom_filter_load,
    bloom_filter_load_buffer, bloom_filter_save, bloom_filter_to_buffer, bloom_inspect,
    bloom_inspect_buffer, bloom_verify, bloom_verify_buffer,
};
pub use status::{
    BLOOM_ERR_CORRUPT, BLOOM_ERR_INTERNAL, BLOOM_ERR_INVALID_ARGUMENT, BLOOM_ERR_IO, BLOOM_ERR_KEY,
    BLOOM_ERR_NOT_A_SNAPSHOT, BLOOM_ERR_OUT_OF_MEMORY, BLOOM_ERR_TOO_LARGE, BLOOM_ERR_UNSUPPORTED,
    BLOOM_OK, BloomStatus, bloom_last_error_message, bloom_status_name, bloom_version,
};
