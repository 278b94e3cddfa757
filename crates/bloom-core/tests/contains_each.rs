//! `contains_each` as an iterator: whatever reads its answers (`next`, `fold` and the
//! adapters built on them, after any mix of the two) gets exactly the answers of `contains`,
//! in key order, with a refused key's error in its place; an iterator of keys that ends and
//! resumes is followed; an atomic filter answers each key when it is asked for.

use bloom_core::{
    AtomicBloomFilter, BloomFilter, FilterConfig, FilterParams, KeyEncoding, Layout, PositionRule,
};

/// Filters in cache through each kind of one-key path: the default configuration's kernel,
/// another compiled kernel, and the general code.
fn filters() -> Vec<BloomFilter> {
    let other = |rule, layout| {
        let params = FilterParams::planned_for(rule, layout, 1_000, 0.01).unwrap();
        let config = FilterConfig::new(params)
            .with_rule(rule)
            .unwrap()
            .with_encoding(KeyEncoding::Nfc);
        BloomFilter::new(config).unwrap()
    };
    vec![
        BloomFilter::with_capacity(1_000, 0.01).unwrap(),
        other(PositionRule::Xxh3_128, Layout::Blocked512),
        other(PositionRule::Sha256Double, Layout::Standard),
    ]
}

fn keys() -> Vec<String> {
    (0..200).map(|i| format!("key-{i}")).collect()
}

/// Every other key inserted: the answers alternate, so a shifted answer shows.
fn filled(mut filter: BloomFilter, keys: &[String]) -> BloomFilter {
    filter.insert_all(keys.iter().step_by(2));
    filter
}

#[test]
fn answers_taken_by_next_are_kept_for_the_consuming_adapters() {
    let keys = keys();
    for filter in filters() {
        let filter = filled(filter, &keys);
        let expected: Vec<bool> = keys.iter().map(|k| filter.contains(k)).collect();
        assert!(expected.iter().step_by(2).all(|&maybe| maybe));
        for split in [0, 1, 5, 63, 64, 65, 150, 200] {
            let mut each = filter.contains_each(&keys);
            let mut answers: Vec<bool> = each.by_ref().take(split).collect();
            assert_eq!(each.size_hint(), (200 - split, Some(200 - split)));
            // `fold`, which `for_each`, `count` and most adapters run.
            each.for_each(|maybe| answers.push(maybe));
            assert_eq!(answers, expected, "split at {split}");

            let present = expected.iter().skip(split).filter(|&&m| m).count();
            let skipped = filter.contains_each(&keys).skip(split);
            assert_eq!(skipped.filter(|&m| m).count(), present, "skip {split}");
            assert_eq!(filter.contains_each(&keys).skip(split).count(), 200 - split);
        }
        let mut peeked = filter.contains_each(&keys).peekable();
        assert_eq!(peeked.peek(), expected.first());
        assert_eq!(
            peeked.fold(Vec::new(), |mut v, m| {
                v.push(m);
                v
            }),
            expected
        );
    }
}

#[test]
fn a_refused_byte_key_keeps_its_place_whatever_reads_the_answers() {
    let text = keys();
    let mut keys: Vec<Vec<u8>> = text.iter().map(|k| k.clone().into_bytes()).collect();
    for at in [3, 70, 199] {
        keys[at] = b"\xff refused".to_vec();
    }
    for filter in filters() {
        let filter = filled(filter, &text);
        let expected: Vec<Option<bool>> =
            keys.iter().map(|k| filter.contains(&k[..]).ok()).collect();
        assert_eq!(expected.iter().filter(|a| a.is_none()).count(), 3);
        for split in [0, 2, 3, 4, 64, 70, 71, 199] {
            let mut each = filter.contains_each(keys.iter().map(|k| &k[..]));
            let mut answers: Vec<Option<bool>> =
                each.by_ref().take(split).map(Result::ok).collect();
            each.for_each(|answer| answers.push(answer.ok()));
            assert_eq!(answers, expected, "split at {split}");
        }
    }
}

/// Yields its items in turn, `None` included, and goes on after a `None`.
struct Resuming(std::vec::IntoIter<Option<&'static str>>);

impl Iterator for Resuming {
    type Item = &'static str;

    fn next(&mut self) -> Option<&'static str> {
        self.0.next().flatten()
    }
}

#[test]
fn a_key_iterator_that_ends_and_resumes_is_followed() {
    let items = vec![Some("a"), Some("b"), None, Some("c"), None, None, Some("d")];
    for filter in filters() {
        let mut filter = filter;
        filter.insert_all(["b", "d"]);
        let mut each = filter.contains_each(Resuming(items.clone().into_iter()));
        let answers: Vec<Option<bool>> = (0..8).map(|_| each.next()).collect();
        let want = [
            Some(filter.contains("a")),
            Some(true),
            None,
            Some(filter.contains("c")),
            None,
            None,
            Some(true),
            None,
        ];
        assert_eq!(answers, want);
    }
}

#[test]
fn an_atomic_filter_answers_each_key_when_it_is_asked_for() {
    let atomic = AtomicBloomFilter::new(FilterConfig::planned(1_000, 0.01).unwrap()).unwrap();
    let mut each = atomic.contains_each(["x", "y", "z"]);
    assert_eq!(each.next(), Some(false));
    atomic.insert("y");
    assert_eq!(each.next(), Some(true));
    atomic.insert("z");
    assert_eq!(each.next(), Some(true));
    assert_eq!(each.next(), None);
}
