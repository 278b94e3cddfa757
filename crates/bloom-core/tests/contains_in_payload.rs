//! `AnyFilter::contains_in_payload` answers every key exactly as the loaded filter does, for
//! every kind of filter, rule, layout, salt and key form, however the payload is chunked, and
//! refuses what loading refuses.

use bloom_core::{
    AnyFilter, BitsError, BloomFilter, CountingBloomFilter, Filter, KeyEncoding, KeyError, Layout,
    PositionRule, Salt, ScalableBloomFilter, ScalableError, SnapshotError,
};
use bloom_format::{Snapshot, UnicodeVersion};

/// Keys inserted, then keys never inserted (ASCII and not).
fn keys() -> (Vec<String>, Vec<String>) {
    let present = (0..300)
        .map(|i| format!("present-{i}"))
        .chain(["Café".into(), "中文".into(), " Spaced ".into()])
        .collect();
    let absent = (0..2_000)
        .map(|i| format!("absent-{i}"))
        .chain((0..200).map(|i| format!("absent-é-{i}")))
        .collect();
    (present, absent)
}

/// The answers read from the payload, delivered in chunks of `size` bytes.
fn streamed(snapshot: &Snapshot, keys: &[String], size: usize) -> Vec<Result<bool, KeyError>> {
    AnyFilter::contains_in_payload(snapshot.header(), keys.iter().map(String::as_str), |sink| {
        snapshot.payload().chunks(size.max(1)).for_each(sink);
        Ok::<(), ScalableError>(())
    })
    .unwrap()
}

/// Every key answered from the payload as the loaded filter answers it, in several chunkings.
fn assert_same(snapshot: &Snapshot, what: &str) {
    let loaded = AnyFilter::from_snapshot(snapshot).unwrap();
    let (present, absent) = keys();
    let all: Vec<String> = present.iter().chain(&absent).cloned().collect();
    let expected: Vec<Result<bool, KeyError>> =
        all.iter().map(|k| Ok(loaded.contains(k))).collect();
    assert!(
        present.iter().all(|k| loaded.contains(k)),
        "{what}: inserted keys are maybe"
    );
    assert!(
        absent.iter().any(|k| !loaded.contains(k)),
        "{what}: the filter is not saturated, so absent answers are tested"
    );
    for size in [1, 7, 64, 4096, usize::MAX] {
        assert_eq!(
            streamed(snapshot, &all, size),
            expected,
            "{what}, chunks of {size}"
        );
    }
}

#[test]
fn every_rule_and_layout_answers_as_the_loaded_filter() {
    let (present, _) = keys();
    for rule in PositionRule::ALL {
        for layout in Layout::ALL.into_iter().chain([Layout::sharded(4).unwrap()]) {
            for salt in [None, Some(Salt::new(b"pepper").unwrap())] {
                let mut builder = BloomFilter::builder(2_000)
                    .false_positive_rate(0.01)
                    .rule(rule)
                    .layout(layout);
                if let Some(salt) = salt.clone() {
                    builder = builder.salt(salt);
                }
                let Ok(mut filter) = builder.build() else {
                    continue; // a rule and layout that do not go together
                };
                filter.insert_all(&present);
                let what = format!("{rule} {layout} salted {}", salt.is_some());
                assert_same(&filter.to_snapshot(0), &what);
            }
        }
    }
}

#[test]
fn counting_filters_and_chains_answer_as_loaded() {
    let (present, _) = keys();
    let params = bloom_core::FilterParams::new(20_000, 7).unwrap();
    let mut counting = CountingBloomFilter::new(bloom_core::FilterConfig::new(params)).unwrap();
    for key in &present {
        counting.insert(key);
    }
    // A counter brought back to zero reads absent again.
    counting.insert("removed");
    counting.remove("removed").unwrap();
    assert_same(&counting.to_snapshot(0), "counting");

    let mut chain = ScalableBloomFilter::builder(40)
        .false_positive_rate(0.01)
        .build()
        .unwrap();
    chain.insert_all(&present);
    assert!(chain.stages().len() >= 3, "several stages are probed");
    assert_same(&chain.to_snapshot(0), "scalable");
}

#[test]
fn encodings_and_foreign_tables_answer_as_loaded() {
    let (present, absent) = keys();
    for encoding in [
        KeyEncoding::Bytes,
        KeyEncoding::Utf8,
        KeyEncoding::Nfc,
        KeyEncoding::NfcTrimLowercase,
    ] {
        let mut filter = BloomFilter::builder(2_000)
            .encoding(encoding)
            .build()
            .unwrap();
        filter.insert_all(&present);
        let snapshot = filter.to_snapshot(0);
        assert_same(&snapshot, &format!("{encoding}"));
        // The same bits read by a build with other Unicode tables: maybe outside ASCII.
        if encoding.build_tables().normalization.is_some() {
            let (mut header, payload) = snapshot.into_parts();
            header.key_encoding.normalization_unicode = Some(UnicodeVersion::new(99, 0, 0));
            let foreign = Snapshot::new(header, payload).unwrap();
            assert_same(&foreign, &format!("{encoding} with foreign tables"));
            let answers = streamed(&foreign, &absent, 4096);
            assert!(
                absent
                    .iter()
                    .zip(&answers)
                    .all(|(k, a)| k.is_ascii() || *a == Ok(true)),
                "{encoding}: keys outside ASCII are maybe under foreign tables"
            );
        }
    }
}

#[test]
fn byte_keys_a_text_encoding_refuses_are_answered_with_their_error() {
    let mut filter = BloomFilter::with_capacity(100, 0.01).unwrap();
    filter.insert("a");
    let snapshot = filter.to_snapshot(0);
    let keys: [&[u8]; 3] = [b"a", b"\xff", b"b"];
    let answers = AnyFilter::contains_in_payload(snapshot.header(), keys, |sink| {
        sink(snapshot.payload());
        Ok::<(), ScalableError>(())
    })
    .unwrap();
    assert_eq!(answers[0], Ok(true));
    assert!(matches!(answers[1], Err(KeyError::InvalidUtf8 { .. })));
    assert_eq!(answers[2], filter.contains(b"b"));
}

#[test]
fn short_long_and_padded_payloads_and_foreign_headers_are_refused() {
    let mut filter = BloomFilter::new(bloom_core::FilterConfig::new(
        bloom_core::FilterParams::new(1001, 3).unwrap(),
    ))
    .unwrap();
    filter.insert_all(["x", "y", "z"]);
    let (header, payload) = filter.to_snapshot(0).into_parts();
    let answer = |bytes: &[u8]| {
        AnyFilter::contains_in_payload(&header, ["x"], |sink| {
            sink(bytes);
            Ok::<(), ScalableError>(())
        })
    };
    assert_eq!(answer(&payload).unwrap(), [Ok(true)]);
    assert!(matches!(
        answer(&payload[..payload.len() - 1]),
        Err(ScalableError::Snapshot(SnapshotError::Bits(
            BitsError::Length { .. }
        )))
    ));
    let mut longer = payload.to_vec();
    longer.push(0);
    assert!(matches!(
        answer(&longer),
        Err(ScalableError::Snapshot(SnapshotError::Bits(
            BitsError::Length { .. }
        )))
    ));
    let mut padded = payload.to_vec();
    *padded.last_mut().unwrap() |= 0x80;
    assert!(matches!(
        answer(&padded),
        Err(ScalableError::Snapshot(SnapshotError::Bits(
            BitsError::Padding { bits: 1001 }
        )))
    ));

    // The caller's error comes back as it is, and no answer with it.
    let failed = AnyFilter::contains_in_payload(&header, ["x"], |sink| {
        sink(&payload);
        Err(ScalableError::Snapshot(SnapshotError::Bits(
            BitsError::Padding { bits: 0 },
        )))
    });
    assert!(failed.is_err());

    // A header this build cannot use is refused as loading refuses it.
    let mut unknown = header.clone();
    unknown.hash_count = 0;
    let refused = AnyFilter::contains_in_payload(&unknown, ["x"], |sink| {
        sink(&payload);
        Ok::<(), ScalableError>(())
    });
    let loaded = AnyFilter::from_payload(&unknown, |sink| {
        sink(&payload);
        Ok::<(), ScalableError>(())
    });
    assert!(refused.is_err() && loaded.is_err());
    assert_eq!(
        refused.unwrap_err().to_string(),
        loaded.unwrap_err().to_string()
    );
}

#[test]
fn a_chain_with_a_short_payload_is_refused() {
    let mut chain = ScalableBloomFilter::builder(40).build().unwrap();
    chain.insert_all((0..200).map(|i| format!("k{i}")));
    let (header, payload) = chain.to_snapshot(0).into_parts();
    let refused = AnyFilter::contains_in_payload(&header, ["k1"], |sink| {
        sink(&payload[..payload.len() - 1]);
        Ok::<(), ScalableError>(())
    });
    assert!(matches!(
        refused,
        Err(ScalableError::Snapshot(SnapshotError::Bits(
            BitsError::Length { .. }
        )))
    ));
}
