//! Snapshot decoding, every loader, and the round trips: any bytes either fail with a typed
//! error or are a snapshot whose encoding is those exact bytes, which the streaming reader
//! reads the same, and which every filter kind (a scalable chain among them) loads and writes
//! back bit for bit.

#![no_main]

use bloom_core::{
    AtomicBloomFilter, BloomFilter, CountingBloomFilter, Filter, ScalableBloomFilter,
    SnapshotError,
};
use bloom_format::{DecodeOptions, LayoutId, Snapshot};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let options = DecodeOptions::with_max_payload_len(1 << 24);
    let decoded = Snapshot::decode(data.to_vec(), &options);
    let streamed = Snapshot::read_from(data, &options);
    assert_eq!(
        decoded.is_ok(),
        streamed.is_ok(),
        "{decoded:?} / {streamed:?}"
    );
    let Ok(snapshot) = decoded else { return };
    let streamed = streamed.unwrap();
    assert_eq!(snapshot.header(), streamed.header());
    assert_eq!(snapshot.payload(), streamed.payload());
    // Strict decoding: a valid snapshot has one encoding. An older version's is rewritten
    // in the current version, which reads back as the same header and payload.
    if snapshot.format_version() == bloom_format::FormatVersion::CURRENT {
        assert_eq!(&snapshot.encode()[..], data);
    } else {
        let again = Snapshot::decode(snapshot.encode(), &options).unwrap();
        assert_eq!(again.header(), snapshot.header());
        assert_eq!(again.payload(), snapshot.payload());
    }

    let header = snapshot.header();
    if header.layout == LayoutId::Scalable {
        let Ok(mut chain) = ScalableBloomFilter::from_snapshot(&snapshot) else {
            return;
        };
        let again = chain.to_snapshot(header.dataset_generation);
        assert_eq!(again.payload(), snapshot.payload());
        assert_eq!(again.header().scalable, header.scalable);
        assert_eq!(again.header().plan, header.plan);
        assert_eq!(chain.items_inserted(), header.item_count);
        let rate = chain.estimated_false_positive_rate();
        assert!((0.0..=1.0).contains(&rate), "{rate}");
        let _ = chain.is_over_capacity();
        // Growth within a limit never loses a key, never passes the limit it can keep.
        let limit = chain.payload_len().max(1 << 16);
        chain.set_growth_limit(Some(limit));
        for key in ["key", "", "caf\u{e9}", "\u{1f600}"] {
            chain.insert(key);
            assert!(chain.contains(key));
        }
        assert!(chain.payload_len() <= limit);
        return;
    }
    if header.layout == LayoutId::Counting4 {
        if let Ok(filter) = CountingBloomFilter::from_snapshot(&snapshot) {
            let again = filter.to_snapshot(header.dataset_generation);
            assert_eq!(again.payload(), snapshot.payload());
            let rate = filter.estimated_false_positive_rate();
            assert!(!rate.is_nan() && !filter.estimated_items().is_nan());
            let _ = filter.contains("key");
        }
        return;
    }
    let Ok(filter) = BloomFilter::from_snapshot(&snapshot) else {
        return;
    };
    let again = filter.to_snapshot(header.dataset_generation);
    assert_eq!(again.payload(), snapshot.payload());
    assert_eq!(again.header().bit_count, header.bit_count);
    assert_eq!(again.header().hash_count, header.hash_count);
    assert_eq!(filter.items_inserted(), header.item_count);
    let rate = filter.estimated_false_positive_rate();
    assert!((0.0..=1.0).contains(&rate), "{rate}");
    assert!(!filter.estimated_items().is_nan());
    let atomic = AtomicBloomFilter::from_payload::<SnapshotError>(header, |sink| {
        sink(snapshot.payload());
        Ok(())
    })
    .unwrap();
    assert_eq!(atomic.to_filter().unwrap().to_bytes(), filter.to_bytes());
    for key in ["key", "", "caf\u{e9}", "\u{1f600}"] {
        assert_eq!(atomic.contains(key), filter.contains(key));
    }
    // Inserting never wraps the count and never clears a bit.
    let mut grown = filter.clone();
    grown.insert("fuzz");
    assert!(grown.contains("fuzz"));
    assert!(grown.items_inserted() >= filter.items_inserted());
});
