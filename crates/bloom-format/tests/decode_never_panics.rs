//! Decoding arbitrary bytes never panics and never allocates more than a small multiple of
//! the input. A counting global allocator measures the largest allocation the decoding
//! thread makes.

#![allow(
    unsafe_code,
    reason = "a counting allocator that only forwards to System"
)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bloom_format::{DecodeOptions, Snapshot};
use proptest::prelude::*;

mod common;

struct Counting;

thread_local! {
    /// The largest allocation this thread made since `bounded` reset it. Per thread, because
    /// the test harness and proptest allocate on other threads at the same time.
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn record(size: usize) {
    // `try_with`: during thread teardown the slot may be gone; such allocations are not ours.
    let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
}

// SAFETY: every method forwards to `System` unchanged and only records sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        record(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn bounded(input: &[u8]) {
    let bytes = input.to_vec();
    LARGEST.with(|largest| largest.set(0));
    let _ = Snapshot::decode(bytes, &DecodeOptions::unlimited());
    let _ = Snapshot::read_from(input, &DecodeOptions::unlimited());
    let largest = LARGEST.with(Cell::get);
    // Buffers grow with the data actually read; the constant covers the fixed-size header
    // buffer and the reader's first small read.
    let allowed = 4 * input.len() + 8192;
    assert!(
        largest <= allowed,
        "allocated {largest} bytes for {} bytes of input",
        input.len()
    );
}

/// Valid snapshots with some bytes overwritten: these get past the magic and often past the
/// checksums, unlike purely random bytes.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let base = common::small().encode().to_vec();
    let len = base.len();
    (
        prop::collection::vec((0..len + 8, any::<u8>()), 1..8),
        0..len + 8,
    )
        .prop_map(move |(edits, cut)| {
            let mut bytes = base.clone();
            bytes.resize(len + 8, 0);
            for (at, value) in edits {
                bytes[at] = value;
            }
            bytes.truncate(cut);
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes(input in prop::collection::vec(any::<u8>(), 0..300)) {
        bounded(&input);
    }

    #[test]
    fn arbitrary_bytes_after_the_magic(tail in prop::collection::vec(any::<u8>(), 0..300)) {
        let mut input = bloom_format::MAGIC.to_vec();
        input.extend(tail);
        bounded(&input);
    }

    #[test]
    fn mutated_snapshots(input in mutated()) {
        bounded(&input);
        if let Ok(snapshot) = Snapshot::decode(input.clone(), &DecodeOptions::unlimited()) {
            // Whatever decodes re-encodes to the same bytes.
            prop_assert_eq!(snapshot.encode().to_vec(), input);
        }
    }
}

#[test]
fn resealed_header_claiming_an_enormous_payload_allocates_little() {
    let mut bytes = common::full(8).encode().to_vec();
    bytes[16..24].copy_from_slice(&(u64::MAX - 7).to_le_bytes());
    bytes[56..64].copy_from_slice(&(u64::MAX / 8).to_le_bytes());
    common::reseal(&mut bytes);
    bounded(&bytes);
}
