//! `contains_each` as an iterator, in cache and past the caches: whatever reads its answers
//! (`next`, `fold` and the adapters built on them, after any mix of the two) gets exactly the
//! answers of `contains`, in key order, with a refused key's error in its place; an iterator
//! of keys that ends and resumes is followed; an atomic filter in cache answers each key when
//! it is asked for.

use bloom_core::{
    AtomicBloomFilter, BloomFilter, ContainsEach, FilterConfig, FilterParams, KeyEncoding, Layout,
    PositionRule,
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
        // About 12 MB: past the 10 MiB under which a filter counts as in cache, so its
        // answers are taken a batch of 16 hashed keys at a time.
        BloomFilter::new(FilterConfig::planned(10_000_000, 0.01).unwrap()).unwrap(),
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

/// [`filled`], and its answers for `keys` one key at a time.
fn filled_and_answers(filter: BloomFilter, keys: &[String]) -> (BloomFilter, Vec<bool>) {
    let filter = filled(filter, keys);
    let expected = keys.iter().map(|k| filter.contains(k)).collect();
    (filter, expected)
}

/// The answers of `contains_each()` read by `next` up to each split, then by `fold`, and
/// through `skip` and `peekable`, against `expected`.
fn check_splits<'a>(
    contains_each: &dyn Fn() -> ContainsEach<'a, std::slice::Iter<'a, String>>,
    expected: &[bool],
) {
    let len = expected.len();
    for split in [0, 1, 5, 15, 16, 17, 33, 63, 64, 65, 150, len] {
        let mut each = contains_each();
        let mut answers: Vec<bool> = each.by_ref().take(split).collect();
        assert_eq!(each.size_hint(), (len - split, Some(len - split)));
        // `fold`, which `for_each`, `count` and most adapters run.
        each.for_each(|maybe| answers.push(maybe));
        assert_eq!(answers, expected, "split at {split}");

        let present = expected.iter().skip(split).filter(|&&m| m).count();
        let skipped = contains_each().skip(split);
        assert_eq!(skipped.filter(|&m| m).count(), present, "skip {split}");
        assert_eq!(contains_each().skip(split).count(), len - split);
    }
    let mut peeked = contains_each().peekable();
    assert_eq!(peeked.peek(), expected.first());
    let folded = peeked.fold(Vec::new(), |mut v, m| {
        v.push(m);
        v
    });
    assert_eq!(folded, expected);
}

#[test]
fn answers_taken_by_next_are_kept_for_the_consuming_adapters() {
    let keys = keys();
    for filter in filters() {
        let (filter, expected) = filled_and_answers(filter, &keys);
        assert!(expected.iter().step_by(2).all(|&maybe| maybe));
        check_splits(&|| filter.contains_each(&keys), &expected);
        let atomic = AtomicBloomFilter::from(filter.clone());
        check_splits(&|| atomic.contains_each(&keys), &expected);
    }
}

#[test]
fn a_refused_byte_key_keeps_its_place_whatever_reads_the_answers() {
    let text = keys();
    let mut keys: Vec<Vec<u8>> = text.iter().map(|k| k.clone().into_bytes()).collect();
    for at in [3, 16, 17, 70, 199] {
        keys[at] = b"\xff refused".to_vec();
    }
    for filter in filters() {
        let filter = filled(filter, &text);
        let expected: Vec<Option<bool>> =
            keys.iter().map(|k| filter.contains(&k[..]).ok()).collect();
        assert_eq!(expected.iter().filter(|a| a.is_none()).count(), 5);
        for split in [0, 2, 3, 4, 16, 17, 18, 32, 64, 70, 71, 199] {
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
    let mut items = vec![Some("a"), Some("b"), None, Some("c"), None, None, Some("d")];
    // A run of 40 keys, past two batches, then an end.
    items.extend(std::iter::repeat_n(Some("e"), 40));
    items.extend([None, Some("f")]);
    for filter in filters() {
        let mut filter = filter;
        filter.insert_all(["b", "d"]);
        let want: Vec<Option<bool>> = items
            .iter()
            .map(|item| item.map(|k| filter.contains(k)))
            .chain([None])
            .collect();
        let mut each = filter.contains_each(Resuming(items.clone().into_iter()));
        let answers: Vec<Option<bool>> = (0..want.len()).map(|_| each.next()).collect();
        assert_eq!(answers, want);
        // What a consuming adapter sees: the keys up to the first end.
        let each = filter.contains_each(Resuming(items.clone().into_iter()));
        assert_eq!(each.size_hint().0, 0);
        assert_eq!(each.count(), 2);

        // `insert_all` stops at the first end, in cache and past it.
        let mut copy = filter.clone();
        copy.clear();
        assert_eq!(copy.insert_all(Resuming(items.clone().into_iter())), 2);
        assert!(copy.contains("a") && copy.contains("b"));
        let mut resumed = Resuming(items.clone().into_iter());
        copy.insert_all(&mut resumed);
        assert_eq!(resumed.next(), Some("c"), "nothing read past the end");
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

/// Claims at least `least` and at most `most` keys, and yields all of `inner`'s: a
/// `size_hint` that lies.
struct Claiming<I> {
    inner: I,
    least: usize,
    most: usize,
}

impl<I: Iterator> Iterator for Claiming<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        self.inner.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.least, Some(self.most))
    }
}

/// `collect` takes the answers in one loop where it can (a plain filter in cache, keys with
/// an upper bound). Whatever the keys say of their number, true or not, and whatever
/// collects them, the answers are those of `contains`.
#[test]
fn collect_answers_as_contains_does_whatever_the_keys_say_of_their_number() {
    // Past 256 answers (what `next` takes at a time) several times over.
    let keys: Vec<String> = (0..3_000).map(|i| format!("key-{i}")).collect();
    for filter in filters() {
        let (filter, expected) = filled_and_answers(filter, &keys);
        let each = || filter.contains_each(&keys);
        assert_eq!(each().collect::<Vec<bool>>(), expected, "exact size");
        let filtered = filter.contains_each(keys.iter().filter(|_| true));
        assert_eq!(filtered.collect::<Vec<bool>>(), expected, "no lower bound");
        for most in [0, 10, 256, 2_999] {
            let lying = filter.contains_each(Claiming {
                inner: keys.iter(),
                least: 0,
                most,
            });
            assert_eq!(lying.collect::<Vec<bool>>(), expected, "claims {most}");
        }
        // A lower bound far past the keys: the answers, and not the room claimed.
        let few = filter.contains_each(Claiming {
            inner: keys[..5].iter(),
            least: 1_000_000,
            most: 1_000_000,
        });
        let few: Vec<bool> = few.collect();
        assert_eq!(few, expected[..5]);
        assert!(few.capacity() < 1_000, "capacity {}", few.capacity());
        let mut unbounded = keys.iter();
        let unbounded = filter.contains_each(std::iter::from_fn(|| unbounded.next()));
        assert_eq!(unbounded.collect::<Vec<bool>>(), expected, "no upper bound");
        for read in [1, 255, 256, 257] {
            let mut partly = each();
            let first: Vec<bool> = partly.by_ref().take(read).collect();
            let rest: Vec<bool> = partly.collect();
            assert_eq!([first, rest].concat(), expected, "{read} read first");
        }
        let deque: std::collections::VecDeque<bool> = each().collect();
        assert!(deque.iter().eq(&expected));
        let none: Vec<bool> = filter.contains_each(&keys[..0]).collect();
        assert!(none.is_empty());
        let atomic = AtomicBloomFilter::from(filter.clone());
        assert_eq!(atomic.contains_each(&keys).collect::<Vec<bool>>(), expected);
    }
}

/// A refused byte key stops the loop `collect` takes its answers in: the answers after it
/// are still those of `contains`, and a collection that stops at the refusal (`Result`)
/// has read no key far past it.
#[test]
fn collect_keeps_a_refused_byte_key_in_its_place_and_can_stop_there() {
    let text: Vec<String> = (0..600).map(|i| format!("key-{i}")).collect();
    let mut keys: Vec<Vec<u8>> = text.iter().map(|k| k.clone().into_bytes()).collect();
    for at in [300, 450] {
        keys[at] = b"\xff refused".to_vec();
    }
    for filter in filters() {
        let filter = filled(filter, &text);
        let expected: Vec<Option<bool>> =
            keys.iter().map(|k| filter.contains(&k[..]).ok()).collect();
        let answers: Vec<Result<bool, bloom_core::KeyError>> =
            filter.contains_each(keys.iter().map(|k| &k[..])).collect();
        assert_eq!(
            answers.into_iter().map(Result::ok).collect::<Vec<_>>(),
            expected
        );
        let read = std::cell::Cell::new(0);
        let stopped: Result<Vec<bool>, bloom_core::KeyError> = filter
            .contains_each(
                keys.iter()
                    .inspect(|_| read.set(read.get() + 1))
                    .map(|k| &k[..]),
            )
            .collect();
        assert!(matches!(
            stopped,
            Err(bloom_core::KeyError::InvalidUtf8 { valid_up_to: 0, .. })
        ));
        // The refused key is the 301st; past the caches, two batches of 16 may be read ahead.
        assert!(
            (301..=301 + 32).contains(&read.get()),
            "read {}",
            read.get()
        );
    }
}

/// Panics at its `at`-th key.
struct Panicking<'a> {
    keys: std::slice::Iter<'a, String>,
    taken: usize,
    at: usize,
}

impl<'a> Iterator for Panicking<'a> {
    type Item = &'a String;

    fn next(&mut self) -> Option<&'a String> {
        self.taken += 1;
        assert!(self.taken != self.at, "the keys' own iterator panics");
        self.keys.next()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.keys.size_hint()
    }
}

/// A panic of the keys' own iterator, caught, leaves answers that end where `size_hint`
/// says, never answers out of step with the keys, in cache and past it.
#[test]
fn answers_after_a_caught_panic_of_the_keys_end_as_size_hint_says() {
    let keys = keys();
    for filter in filters() {
        let (filter, expected) = filled_and_answers(filter, &keys);
        let mut each = filter.contains_each(Panicking {
            keys: keys.iter(),
            taken: 0,
            at: 40,
        });
        let mut answers = Vec::new();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for answer in each.by_ref() {
                answers.push(answer);
            }
        }));
        assert!(caught.is_err());
        assert_eq!(answers, expected[..answers.len()]);
        let (least, most) = each.size_hint();
        let rest: Vec<bool> = each.collect();
        assert!(least <= rest.len() && most.is_some_and(|m| rest.len() <= m));
        // Keys taken before the panic may go unanswered; no answer is another key's.
        let all = [answers, rest].concat();
        assert!(all.len() < 40, "{} answers", all.len());
        assert_eq!(all, expected[..all.len()]);
    }
}
