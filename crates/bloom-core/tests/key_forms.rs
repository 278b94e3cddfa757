//! One method per operation: every form of key (text, bytes, already encoded) goes through the
//! same `insert`, `contains`, `remove`, `insert_all` and `contains_each`, on every filter, with
//! the same answers; byte keys a text encoding refuses are typed errors; and the builder, the
//! collecting traits and the snapshot shortcuts do what their names say.

use std::borrow::Cow;

use bloom_core::{
    AtomicBloomFilter, BloomFilter, BuildError, EncodedKey, Filter, FilterConfig, FilterParams,
    KeyEncoding, KeyError, Layout, ParamsError, PositionRule, RemoveError, Salt,
};
use bloom_format::DatasetGeneration;

fn filter(encoding: KeyEncoding) -> BloomFilter {
    BloomFilter::builder(10_000)
        .encoding(encoding)
        .build()
        .unwrap()
}

/// Text in any of its forms, its bytes, and its encoded form are the same key.
#[test]
fn every_form_of_a_key_is_the_same_key() {
    for encoding in KeyEncoding::ALL {
        let text = "Café-1";
        let owned = String::from(text);
        let boxed: Box<str> = text.into();
        let cow: Cow<'_, str> = Cow::Borrowed(text);
        let encoded = encoding.encode_str(text).into_owned();
        let forms: [&dyn Fn(&mut BloomFilter) -> bool; 7] = [
            &|f| f.insert(text),
            &|f| f.insert(&owned),
            &|f| f.insert(&boxed),
            &|f| f.insert(&cow),
            &|f| f.insert(text.as_bytes()).unwrap(),
            &|f| f.insert(&text.as_bytes().to_vec()).unwrap(),
            &|f| f.insert(&encoded),
        ];
        for (i, insert) in forms.iter().enumerate() {
            let mut f = filter(encoding);
            assert!(
                insert(&mut f),
                "{encoding} form {i}: a new key changes a bit"
            );
            assert!(f.contains(text), "{encoding} form {i}");
            assert_eq!(f.contains(text.as_bytes()), Ok(true), "{encoding} form {i}");
            assert!(f.contains(&encoded), "{encoding} form {i}");
            assert!(
                !insert(&mut f),
                "{encoding} form {i}: the second insert changes nothing"
            );
        }
    }
}

/// A text encoding refuses bytes that are not UTF-8, with a typed error, and inserts nothing.
#[test]
fn byte_keys_a_text_encoding_refuses_are_typed_errors() {
    let mut f = filter(KeyEncoding::Nfc);
    let bad = b"ok\xff";
    assert!(matches!(
        f.insert(bad),
        Err(KeyError::InvalidUtf8 {
            valid_up_to: 2,
            encoding: KeyEncoding::Nfc
        })
    ));
    assert!(matches!(f.contains(bad), Err(KeyError::InvalidUtf8 { .. })));
    assert_eq!(f.count_ones(), 0, "nothing was inserted");
    // The bytes rule takes any bytes.
    let mut raw = filter(KeyEncoding::Bytes);
    assert_eq!(raw.insert(bad), Ok(true));
    assert_eq!(raw.contains(bad), Ok(true));
}

/// A many-key insert of byte keys stops at the first refused key, after every key before it,
/// and reports the error; the lookups answer the refused key with its error and go on.
#[test]
fn batches_of_byte_keys_stop_at_a_refused_key_and_answer_around_it() {
    // Large enough that the batched path runs (past the in-cache threshold), and small.
    for items in [100u64, 10_000_000] {
        let mut f = BloomFilter::builder(items).build().unwrap();
        let mut keys: Vec<Vec<u8>> = (0..40).map(|i| format!("k{i}").into_bytes()).collect();
        keys.insert(20, b"\xc3".to_vec());
        assert!(matches!(
            f.insert_all(&keys),
            Err(KeyError::InvalidUtf8 { .. })
        ));
        for (i, key) in keys.iter().enumerate() {
            if i < 20 {
                assert_eq!(
                    f.contains(key),
                    Ok(true),
                    "{items}: key {i} before the refusal"
                );
            }
        }
        assert_eq!(f.items_inserted(), 20);
        let answers: Vec<Result<bool, KeyError>> = f.contains_each(&keys).collect();
        assert_eq!(answers.len(), keys.len());
        assert!(matches!(answers[20], Err(KeyError::InvalidUtf8 { .. })));
        assert!(answers[..20].iter().all(|a| *a == Ok(true)));
        // The keys after the refused one were never inserted: mostly absent.
        let after = answers[21..].iter().filter(|a| **a == Ok(false)).count();
        assert!(after >= 15, "{items}: {after} of 19 absent");
        let atomic = AtomicBloomFilter::new(f.config().clone()).unwrap();
        assert!(matches!(
            atomic.insert_all(&keys),
            Err(KeyError::InvalidUtf8 { .. })
        ));
        let answers: Vec<Result<bool, KeyError>> = atomic.contains_each(&keys).collect();
        assert!(answers[..20].iter().all(|a| *a == Ok(true)));
        assert!(matches!(answers[20], Err(KeyError::InvalidUtf8 { .. })));
    }
}

/// The counting filter takes every form too, and removes by any of them.
#[test]
fn a_counting_filter_takes_every_form() {
    let mut f = BloomFilter::builder(1_000).build_counting().unwrap();
    assert!(f.insert("a"));
    assert_eq!(f.insert(b"b"), Ok(true));
    let c = f.config().encoding().encode_str("c").into_owned();
    assert!(f.insert(&c));
    assert_eq!(f.insert_all(["d", "e"]), 2);
    assert!(f.contains("b") && f.contains(&c) && f.contains("e"));
    assert_eq!(f.remove(b"a"), Ok(()));
    assert_eq!(f.remove(&c), Ok(()));
    assert_eq!(f.remove("c"), Err(RemoveError::Absent));
    assert!(matches!(
        f.remove(b"\xff"),
        Err(RemoveError::Key(KeyError::InvalidUtf8 { .. }))
    ));
    assert!(!f.contains("a"));
}

/// The builder plans what it is asked for and refuses what cannot be, with typed errors.
#[test]
fn the_builder_plans_and_refuses() {
    let f = BloomFilter::builder(100_000)
        .false_positive_rate(0.001)
        .rule(PositionRule::Sha256Double)
        .layout(Layout::Standard)
        .encoding(KeyEncoding::NfcTrimLowercase)
        .salt(Salt::new(b"secret").unwrap())
        .build()
        .unwrap();
    let config = f.config();
    assert_eq!(config.rule(), PositionRule::Sha256Double);
    assert_eq!(config.layout(), Layout::Standard);
    assert_eq!(config.encoding(), KeyEncoding::NfcTrimLowercase);
    assert!(!config.salt().is_empty());
    assert!(config.params().predicted_false_positive_rate(100_000) <= 0.001);
    // The defaults.
    let d = BloomFilter::with_capacity(100_000, 0.01).unwrap();
    assert_eq!(d.config(), &FilterConfig::planned(100_000, 0.01).unwrap());
    // A rule that works with the standard layout only gets it by default.
    let guava = BloomFilter::builder(1_000)
        .rule(PositionRule::Sha256Split4)
        .build()
        .unwrap();
    assert_eq!(guava.config().layout(), Layout::Standard);
    // Guava's rules are sized as Guava sizes, for any item count.
    for items in [1000, 1001, 12_345, 1_000_000] {
        let guava = BloomFilter::builder(items)
            .rule(PositionRule::GuavaMitz64)
            .encoding(KeyEncoding::Utf8)
            .build()
            .unwrap();
        assert_eq!(
            guava.config().params(),
            FilterParams::for_guava(items, 0.01).unwrap()
        );
    }
    assert!(matches!(
        BloomFilter::builder(0).build(),
        Err(BuildError::Params(ParamsError::ZeroItems))
    ));
    assert!(matches!(
        BloomFilter::with_capacity(10, 1.5),
        Err(BuildError::Params(
            ParamsError::InvalidFalsePositiveRate { .. }
        ))
    ));
    assert!(matches!(
        BloomFilter::builder(1_000)
            .layout(Layout::Blocked512)
            .build_counting(),
        Err(BuildError::Counting(_))
    ));
    assert!(matches!(
        BloomFilter::builder(1_000)
            .rule(PositionRule::GuavaMitz64)
            .salt(Salt::new(b"s").unwrap())
            .build(),
        Err(BuildError::Config(_))
    ));
}

/// `Extend` and `FromIterator` insert every key; a collected filter is planned for the keys
/// it got.
#[test]
fn filters_extend_and_collect() {
    let mut f = BloomFilter::with_capacity(1_000, 0.01).unwrap();
    f.extend(["a", "b"]);
    f.extend(vec![String::from("c")]);
    assert!(f.contains("a") && f.contains("b") && f.contains("c"));
    let atomic = AtomicBloomFilter::new(f.config().clone()).unwrap();
    (&atomic).extend(["x"]);
    assert!(atomic.contains("x"));

    let keys: Vec<String> = (0..5_000).map(|i| format!("key-{i}")).collect();
    let collected: BloomFilter = keys.iter().collect();
    assert!(keys.iter().all(|k| collected.contains(k)));
    assert!(
        collected
            .config()
            .params()
            .predicted_false_positive_rate(5_000)
            <= 0.01
    );
    let empty: BloomFilter = std::iter::empty::<&str>().collect();
    assert!(!empty.contains("anything"));
}

/// A snapshot without a generation records generation 0; `_at` records the one given.
#[test]
fn snapshots_need_no_generation() {
    let mut f = BloomFilter::with_capacity(1_000, 0.01).unwrap();
    f.insert("a");
    assert_eq!(
        f.to_snapshot(0).header().dataset_generation,
        DatasetGeneration::ZERO
    );
    assert_eq!(f.header(0).dataset_generation, DatasetGeneration::ZERO);
    let at = f.to_snapshot(7u64);
    assert_eq!(at.header().dataset_generation, DatasetGeneration::new(7));
    let back = BloomFilter::from_snapshot(&f.to_snapshot(0)).unwrap();
    assert!(back.contains("a"));
    assert!(f.is_compatible(&back));
    let other = BloomFilter::with_capacity(2_000, 0.01).unwrap();
    assert!(!f.is_compatible(&other));
}

/// Planning names its cap by rule, not by a bare number.
#[test]
fn plans_are_capped_by_the_rule() {
    let split4 =
        FilterParams::planned_for(PositionRule::Sha256Split4, Layout::Standard, 10_000, 1e-6)
            .unwrap();
    assert_eq!(split4.hashes(), 4);
    let free = FilterParams::planned(Layout::Standard, 10_000, 1e-6).unwrap();
    assert!(free.hashes() > 4);
    let _: EncodedKey<'_> = EncodedKey::from_encoded(b"");
}
