//! Snapshots are written from and loaded into filters a chunk at a time, with no second copy
//! of the bits; the chunks carry exactly the bytes of the in-memory image.

use bloom_core::{
    AtomicBloomFilter, BitsError, BloomFilter, Filter, FilterConfig, FilterParams, SnapshotError,
};

fn filter(bits: u64) -> BloomFilter {
    let mut f = BloomFilter::new(FilterConfig::new(FilterParams::new(bits, 3).unwrap())).unwrap();
    f.insert_all((0..bits / 4).map(|i| format!("k{i}")));
    f
}

fn chunks_of(filter: &BloomFilter) -> Vec<Vec<u8>> {
    let mut chunks = Vec::new();
    filter
        .for_each_payload_chunk(|c| {
            chunks.push(c.to_vec());
            Ok::<(), ()>(())
        })
        .unwrap();
    chunks
}

#[test]
fn chunks_are_the_byte_image_and_load_back_for_both_filter_kinds() {
    for bits in [1u64, 7, 8, 9, 63, 64, 65, 1000, 131_072 * 8 + 5] {
        let f = filter(bits);
        let chunks = chunks_of(&f);
        assert_eq!(chunks.concat(), f.to_bytes(), "m = {bits}");
        // Re-chunked at odd sizes, as a reader with another buffer size delivers them.
        let image = f.to_bytes();
        for size in [1usize, 3, 8, 4096] {
            let loaded = BloomFilter::from_payload(&f.header(0), |push| {
                image.chunks(size).for_each(&mut *push);
                Ok::<(), SnapshotError>(())
            })
            .unwrap();
            assert_eq!(loaded, f, "m = {bits}, chunks of {size}");
            let atomic = AtomicBloomFilter::from_payload(&f.header(0), |push| {
                image.chunks(size).for_each(&mut *push);
                Ok::<(), SnapshotError>(())
            })
            .unwrap();
            assert_eq!(atomic.to_filter().unwrap().as_words(), f.as_words());
            let mut atomic_image = Vec::new();
            atomic
                .for_each_payload_chunk(|c| {
                    atomic_image.extend_from_slice(c);
                    Ok::<(), ()>(())
                })
                .unwrap();
            assert_eq!(atomic_image, image);
        }
    }
}

#[test]
fn short_long_or_padded_payloads_are_refused() {
    let f = filter(1001);
    let image = f.to_bytes();
    let load = |bytes: Vec<u8>| {
        BloomFilter::from_payload(&f.header(0), |push| {
            push(&bytes);
            Ok::<(), SnapshotError>(())
        })
    };
    assert!(matches!(
        load(image[..image.len() - 1].to_vec()),
        Err(SnapshotError::Bits(BitsError::Length { .. }))
    ));
    let mut longer = image.clone();
    longer.push(0);
    assert!(matches!(
        load(longer),
        Err(SnapshotError::Bits(BitsError::Length { .. }))
    ));
    let mut padded = image.clone();
    *padded.last_mut().unwrap() |= 0x80;
    assert!(matches!(
        load(padded),
        Err(SnapshotError::Bits(BitsError::Padding { bits: 1001 }))
    ));
    // The source's own error comes back as it is.
    let failed = BloomFilter::from_payload(&f.header(0), |_| {
        Err(SnapshotError::Bits(BitsError::Padding { bits: 7 }))
    });
    assert!(matches!(
        failed,
        Err(SnapshotError::Bits(BitsError::Padding { bits: 7 }))
    ));
}
