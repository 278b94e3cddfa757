//! `max_snapshot_bytes` bounds every filter the store makes and every snapshot it reads, so
//! that what is saved can always be read back: growth stops at the limit and says so.

mod support;

use bloom_format::{DecodeError, ReadError};
use bloom_store::{
    BypassReason, FilterOptions, FilteredStore, OpenOutcome, OptionsError, StoreError,
};
use support::{Harness, assert_every_committed_key_present, insert_all, keys};

#[test]
fn growth_stops_at_the_snapshot_limit_and_is_reported() {
    let h = support::Memory::new();
    // 100 keys at 1% need 120 bytes; the limit allows about 250 keys.
    let options = FilterOptions::new(100, 0.01).with_max_snapshot_bytes(300);
    let (w, _) = FilteredStore::open_and_recover(h.open(), options.clone()).unwrap();
    insert_all(&w, &keys(0..600));
    assert!(w.metrics().over_capacity);
    let report = w.rebuild().unwrap();
    assert!(report.capacity_limited, "{report:?}");
    assert!(report.capacity < 600 && report.capacity > 200, "{report:?}");
    let m = w.metrics();
    assert!(m.capacity_limited && m.over_capacity, "{m:?}");
    assert!(m.bits.div_ceil(8) <= 300, "{m:?}");
    assert_every_committed_key_present(&w);

    // What it saves, it reads back: trusted at the next open, not refused as over the limit.
    w.save_snapshot(h.snapshot()).unwrap();
    drop(w);
    let (w, outcome) = FilteredStore::open(h.open(), options.with_snapshot(h.snapshot())).unwrap();
    assert!(
        matches!(outcome, OpenOutcome::Trusted { .. }),
        "{outcome:?}"
    );
    assert_eq!(assert_every_committed_key_present(&w), 600);
}

#[test]
fn options_whose_filter_would_not_fit_are_refused() {
    let options = FilterOptions::new(1_000_000, 0.01).with_max_snapshot_bytes(1 << 20);
    // The default at 1 %: the split block of 512 bits with xxh3-64.
    let needed =
        bloom_core::FilterParams::planned(bloom_core::Layout::SplitBlock512, 1_000_000, 0.01)
            .unwrap()
            .byte_len();
    let err = FilteredStore::open(bloom_store::MemoryStore::new(), options).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::Options(OptionsError::OverSnapshotLimit {
                capacity: 1_000_000,
                bytes,
                limit: 1_048_576
            }) if bytes == needed
        ),
        "{err:?}"
    );
    let err = FilteredStore::open(bloom_store::MemoryStore::new(), FilterOptions::new(10, 1.5))
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Options(OptionsError::Params(_))),
        "{err:?}"
    );
}

#[test]
fn a_snapshot_over_the_limit_is_not_read_and_is_rebuilt_within_it() {
    let h = support::Memory::new();
    let big = FilterOptions::new(10_000, 0.01);
    let (w, _) = FilteredStore::open_and_recover(h.open(), big).unwrap();
    insert_all(&w, &keys(0..50));
    w.save_snapshot(h.snapshot()).unwrap();
    drop(w);
    let small = FilterOptions::new(100, 0.01).with_max_snapshot_bytes(1000);
    let (w, outcome) = FilteredStore::open(h.open(), small.with_snapshot(h.snapshot())).unwrap();
    let OpenOutcome::Bypassed(BypassReason::Unreadable(e)) = &outcome else {
        panic!("{outcome:?}");
    };
    assert!(
        matches!(
            &**e,
            ReadError::Decode(DecodeError::OverLimit { limit: 1000, .. })
        ),
        "{e:?}"
    );
    assert_every_committed_key_present(&w);
}

#[test]
fn debug_output_shows_the_state_but_never_the_salt() {
    let salt = bloom_core::Salt::new(b"super secret salt value").unwrap();
    let options = FilterOptions::new(100, 0.01).with_salt(bloom_store::SaltPolicy::Fixed(salt));
    let (w, _) = FilteredStore::open_and_recover(bloom_store::MemoryStore::new(), options).unwrap();
    w.insert("key").unwrap();
    let text = format!("{w:?}");
    assert!(text.contains("Trusted") && text.contains("bits"), "{text}");
    assert!(!text.contains("super secret"), "{text}");
    assert!(!text.contains("73757065"), "{text}");
    assert!(text.len() < 1000, "{text}");
}

#[test]
fn a_rebuild_after_a_bypass_is_sized_for_the_store() {
    let h = support::Memory::new();
    let (w, _) = FilteredStore::open_and_recover(h.open(), FilterOptions::new(100, 0.01)).unwrap();
    insert_all(&w, &keys(0..5_000));
    drop(w);
    // The snapshot is lost; the configured capacity is far below the store's size.
    let (w, outcome) =
        FilteredStore::open_and_recover(h.open(), FilterOptions::new(100, 0.01)).unwrap();
    let OpenOutcome::Rebuilt { report, .. } = outcome else {
        panic!("{outcome:?}");
    };
    assert!(report.capacity >= 5_000, "{report:?}");
    let m = w.metrics();
    assert!(
        !m.over_capacity && m.predicted_false_positive_rate < 0.01,
        "{m:?}"
    );
}

#[test]
fn capacity_limited_survives_a_restart() {
    let h = support::Memory::new();
    let options = FilterOptions::new(100, 0.01).with_max_snapshot_bytes(300);
    let (w, _) = FilteredStore::open_and_recover(h.open(), options.clone()).unwrap();
    insert_all(&w, &keys(0..600));
    assert!(w.rebuild().unwrap().capacity_limited);
    w.save_snapshot(h.snapshot()).unwrap();
    drop(w);
    let (w, _) = FilteredStore::open(h.open(), options.with_snapshot(h.snapshot())).unwrap();
    let m = w.metrics();
    assert!(m.capacity_limited && m.over_capacity, "{m:?}");
}

#[test]
fn capacity_zero_is_refused_and_a_capped_rule_gets_the_bits_it_needs() {
    let err = FilteredStore::open(bloom_store::MemoryStore::new(), FilterOptions::new(0, 0.01))
        .unwrap_err();
    assert!(
        matches!(err, StoreError::Options(OptionsError::Params(_))),
        "{err:?}"
    );
    // sha256-split4 has at most 4 positions; at 1e-6 it needs more bits than the optimum.
    let options = FilterOptions::new(10_000, 1e-6)
        .with_rule(bloom_core::PositionRule::Sha256Split4)
        .with_layout(bloom_core::Layout::Standard);
    let (w, _) = FilteredStore::open_and_recover(bloom_store::MemoryStore::new(), options).unwrap();
    let m = w.metrics();
    assert_eq!(m.hashes, 4);
    let params = bloom_core::FilterParams::new(m.bits, m.hashes).unwrap();
    let at_capacity = params.predicted_false_positive_rate(10_000);
    assert!(at_capacity <= 1.01e-6, "{at_capacity}");
}
