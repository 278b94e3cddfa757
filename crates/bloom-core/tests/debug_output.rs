//! `Debug` output never shows a salt, state derived from it, key hashes or the bit array: a
//! log line must not let anyone compute where keys land, nor be gigabytes long.

use bloom_core::{
    AtomicBloomFilter, BloomFilter, CountingBloomFilter, Filter, FilterConfig, FilterParams, Salt,
};

const SALT: &[u8] = b"0123456789abcdef0123456789abcdef";

fn salted_filter() -> BloomFilter {
    let params = FilterParams::new(1 << 16, 7).unwrap();
    let mut filter = BloomFilter::new(
        FilterConfig::new(params)
            .with_salt(Salt::new(SALT).unwrap())
            .unwrap(),
    )
    .unwrap();
    filter.insert_all((0..1000).map(|i| format!("key-{i}")));
    filter
}

fn assert_redacted(what: &str, text: &str, filter: &BloomFilter) {
    let salt_hex: String = SALT.iter().map(|b| format!("{b:02x}")).collect();
    assert!(
        !text.contains(&salt_hex),
        "{what} shows the salt as hex: {text}"
    );
    assert!(
        !text.contains("0123456789abcdef"),
        "{what} shows the salt: {text}"
    );
    assert!(
        !text.contains("48, 49, 50"),
        "{what} shows the salt bytes: {text}"
    );
    // A hasher's state words, or the bit array, print as long runs of numbers.
    assert!(
        text.len() < 600,
        "{what} is {} bytes long: {text}",
        text.len()
    );
    for word in filter
        .as_words()
        .iter()
        .filter(|w| **w > 1_000_000)
        .take(50)
    {
        assert!(
            !text.contains(&word.to_string()),
            "{what} shows bit words: {text}"
        );
    }
    assert!(text.contains("ones"), "{what} summarises the bits: {text}");
}

#[test]
fn filters_and_iterators_summarise_and_redact() {
    let filter = salted_filter();
    let text = format!("{filter:?}");
    assert_redacted("BloomFilter", &text, &filter);
    assert!(text.contains("Salt(<32 secret bytes>)"), "{text}");
    assert!(
        text.contains(&format!("ones: {}", filter.count_ones())),
        "{text}"
    );

    let atomic = AtomicBloomFilter::from(filter.clone());
    assert_redacted("AtomicBloomFilter", &format!("{atomic:?}"), &filter);

    let mut answers = filter.contains_each(["key-1", "key-2", "other"]);
    assert_eq!(answers.next(), Some(true));
    let text = format!("{answers:?}");
    assert!(text.len() < 200 && !text.contains("0123"), "{text}");
    // A filter this small (8 KiB) stays in cache: its keys are hashed and probed in one
    // step, a few at a time (here all three, one of them returned).
    assert!(text.contains("in_cache: true, buffered: 2"), "{text}");
    let atomic_answers = atomic.contains_each(["key-1"]);
    assert!(format!("{atomic_answers:?}").len() < 200);
}

#[test]
fn headers_and_snapshots_hide_the_salt() {
    let filter = salted_filter();
    let snapshot = filter.to_snapshot(3);
    for (what, text) in [
        ("Header", format!("{:?}", snapshot.header())),
        ("Snapshot", format!("{snapshot:?}")),
    ] {
        let salt_hex: String = SALT.iter().map(|b| format!("{b:02x}")).collect();
        assert!(!text.contains(&salt_hex), "{what}: {text}");
        assert!(!text.contains("48, 49, 50"), "{what}: {text}");
        assert!(text.contains("<32 secret bytes>"), "{what}: {text}");
        assert!(text.len() < 1000, "{what} is {} bytes long", text.len());
    }
}

#[test]
fn counting_filters_summarise_and_redact() {
    let filter = salted_filter();
    let mut counting = CountingBloomFilter::new(filter.config().clone()).unwrap();
    for i in 0..1000 {
        counting.insert(&format!("key-{i}"));
    }
    let text = format!("{counting:?}");
    let salt_hex: String = SALT.iter().map(|b| format!("{b:02x}")).collect();
    assert!(
        !text.contains(&salt_hex) && !text.contains("0123456789abcdef"),
        "{text}"
    );
    assert!(!text.contains("48, 49, 50"), "{text}");
    assert!(text.contains("Salt(<32 secret bytes>)"), "{text}");
    assert!(text.len() < 600, "{} bytes: {text}", text.len());
    assert!(
        text.contains(&format!("nonzero: {}", counting.count_ones())),
        "{text}"
    );
    // The projection of these counters is the plain filter of the same keys.
    assert_eq!(
        counting.to_bloom_filter().unwrap().as_words(),
        filter.as_words()
    );
}
