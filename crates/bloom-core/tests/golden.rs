//! The golden fixtures, read by a process other than the one that wrote them (`cargo xtask
//! fixtures`). Every fixture of every format version must decode, match its committed header
//! dump field by field, and find every listed key.

use std::fs;
use std::path::{Path, PathBuf};

use bloom_core::{BloomFilter, CountingBloomFilter, Filter, ScalableBloomFilter};
use bloom_format::{DecodeOptions, LayoutId, Snapshot};

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn snapshots() -> Vec<PathBuf> {
    let mut found = Vec::new();
    for version in fs::read_dir(fixtures_root()).expect("fixtures/ exists") {
        let version = version.unwrap().path();
        for entry in fs::read_dir(&version).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "bloom") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// Checks one fixture; returns every mismatch found.
fn check(path: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let name = path.display();
    let snapshot = match Snapshot::read_file(path, &DecodeOptions::unlimited()) {
        Ok(s) => s,
        Err(e) => return vec![format!("{name}: does not decode: {e}")],
    };
    // Each directory holds its own format version.
    let dir_version = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|d| d.to_str())
        .and_then(|d| d.strip_prefix('v'))
        .and_then(|v| v.parse::<u16>().ok());
    if dir_version != Some(snapshot.format_version().value()) {
        problems.push(format!(
            "{name}: format version {} in directory {dir_version:?}",
            snapshot.format_version()
        ));
    }

    let dump_path = path.with_extension("header.txt");
    match fs::read_to_string(&dump_path) {
        Ok(expected) => {
            let actual = snapshot.dump_header();
            for (want, got) in expected.lines().zip(actual.lines()) {
                if want != got {
                    problems.push(format!("{name}: header field `{want}` decodes as `{got}`"));
                }
            }
            if expected.lines().count() != actual.lines().count() {
                problems.push(format!(
                    "{name}: header dump has a different number of fields"
                ));
            }
        }
        Err(e) => problems.push(format!("{}: {e}", dump_path.display())),
    }

    let counting = snapshot.header().layout == LayoutId::Counting4;
    if snapshot.header().layout == LayoutId::Scalable {
        return match ScalableBloomFilter::from_snapshot(&snapshot) {
            Ok(chain) => {
                problems.extend(check_keys(path, |k| chain.contains(k)));
                problems
            }
            Err(e) => {
                problems.push(format!("{name}: not usable by this build: {e}"));
                problems
            }
        };
    }
    let filter = if counting {
        CountingBloomFilter::from_snapshot(&snapshot).map(|f| {
            // The projection must answer as the counters do; the keys are checked on it.
            let plain = f.to_bloom_filter().unwrap();
            assert_eq!(f.count_ones(), plain.count_ones());
            plain
        })
    } else {
        BloomFilter::from_snapshot(&snapshot)
    };
    let filter = match filter {
        Ok(f) => f,
        Err(e) => {
            problems.push(format!("{name}: not usable by this build: {e}"));
            return problems;
        }
    };
    if counting != path.with_extension("removed").exists() {
        problems.push(format!(
            "{name}: a counting fixture lists its removed keys, and only a counting one"
        ));
    }
    problems.extend(check_keys(path, |k| filter.contains(k)));
    problems
}

/// Every key the fixture lists is found by `contains`.
fn check_keys(path: &Path, contains: impl Fn(&str) -> bool) -> Vec<String> {
    let mut problems = Vec::new();
    let name = path.display();
    let keys_path = path.with_extension("keys");
    match fs::read_to_string(&keys_path) {
        Ok(keys) => {
            let mut count = 0;
            for (line, json) in keys.lines().enumerate() {
                let key: String = serde_json::from_str(json).unwrap();
                count += 1;
                if !contains(&key) {
                    problems.push(format!("{name}: key on line {} not found", line + 1));
                }
            }
            if count == 0 {
                problems.push(format!("{name}: no keys listed"));
            }
        }
        Err(e) => problems.push(format!("{}: {e}", keys_path.display())),
    }
    problems
}

#[test]
fn every_golden_fixture_decodes_matches_its_dump_and_finds_its_keys() {
    let snapshots = snapshots();
    for (version, at_least) in [("v1", 6), ("v2", 18), ("v3", 23)] {
        let found = snapshots
            .iter()
            .filter(|p| p.parent().and_then(Path::file_name) == Some(version.as_ref()))
            .count();
        assert!(
            found >= at_least,
            "expected the {version} fixtures, found {snapshots:?}"
        );
    }
    let problems: Vec<String> = snapshots.iter().flat_map(|p| check(p)).collect();
    assert!(
        problems.is_empty(),
        "{} golden fixture problems:\n{}\n(if the change is intended and the format version is \
         unreleased, run `cargo xtask fixtures` and commit; released versions are frozen)",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn counting_fixtures_hold_counts_and_saturated_counters() {
    let read = |name: &str| {
        let path = fixtures_root().join("v2").join(name);
        let s = Snapshot::read_file(path, &DecodeOptions::unlimited()).unwrap();
        CountingBloomFilter::from_snapshot(&s).unwrap()
    };
    let mut counted = read("counting-xxh3.bloom");
    // "record-0" went in three times: it survives two removes.
    for _ in 0..2 {
        counted.remove("record-0").unwrap();
        assert!(counted.contains("record-0"));
    }
    let saturated = read("counting-sha256-salted-saturated.bloom");
    assert!(saturated.saturated_counters() > 0);
}

#[test]
fn nfc_fixture_unifies_spellings_that_the_utf8_fixture_keeps_apart() {
    for version in ["v1", "v2", "v3"] {
        let root = fixtures_root().join(version);
        let read = |name: &str| {
            let s = Snapshot::read_file(root.join(name), &DecodeOptions::unlimited()).unwrap();
            BloomFilter::from_snapshot(&s).unwrap()
        };
        let nfc = read("unicode-nfc.bloom");
        let utf8 = read("unicode-utf8.bloom");
        // Both spellings were inserted into both; NFC merged them into one key.
        assert!(nfc.items_inserted() < utf8.items_inserted());
    }
}

#[test]
fn version_3_records_plans_and_keeps_the_bits_of_version_2() {
    let read = |p: &Path| Snapshot::read_file(p, &DecodeOptions::unlimited()).unwrap();
    // Format version 3 changed the header, never the payload or the positions.
    for entry in fs::read_dir(fixtures_root().join("v2")).unwrap() {
        let v2 = entry.unwrap().path();
        if v2.extension().is_none_or(|e| e != "bloom") {
            continue;
        }
        let (a, b) = (
            read(&v2),
            read(&fixtures_root().join("v3").join(v2.file_name().unwrap())),
        );
        assert_eq!(a.payload(), b.payload(), "{}", v2.display());
        assert_eq!(a.header().plan, None);
    }
    let root = fixtures_root().join("v3");
    let within = BloomFilter::from_snapshot(&read(&root.join("planned-split-512.bloom"))).unwrap();
    let plan = within.config().plan().unwrap();
    assert_eq!((plan.capacity, plan.false_positive_rate), (500, 0.01));
    assert_eq!(
        within.remaining_capacity(),
        Some(500 - within.items_inserted())
    );
    assert!(!within.is_over_capacity());
    let over =
        BloomFilter::from_snapshot(&read(&root.join("planned-over-capacity.bloom"))).unwrap();
    assert!(over.capacity().unwrap().is_over_items());
    assert!(over.is_over_capacity());
    let chain =
        ScalableBloomFilter::from_snapshot(&read(&root.join("scalable-xxh3.bloom"))).unwrap();
    assert_eq!(chain.stages().len(), 4);
    assert!(!chain.is_over_capacity());
    let salted =
        ScalableBloomFilter::from_snapshot(&read(&root.join("scalable-sha256-salted.bloom")))
            .unwrap();
    // 8 keys, then 24: growth 3.
    let capacities: Vec<u64> = salted
        .stages()
        .iter()
        .map(|s| s.config().plan().unwrap().capacity)
        .collect();
    assert_eq!(capacities[..2], [8, 24]);
    assert_eq!(salted.growth(), 3);
}

#[test]
fn the_same_filter_has_the_same_bits_in_both_versions() {
    // Format version 2 changed the header, never the payload or the positions.
    for entry in fs::read_dir(fixtures_root().join("v1")).unwrap() {
        let v1 = entry.unwrap().path();
        if v1.extension().is_none_or(|e| e != "bloom") {
            continue;
        }
        let v2 = fixtures_root().join("v2").join(v1.file_name().unwrap());
        let read = |p: &Path| Snapshot::read_file(p, &DecodeOptions::unlimited()).unwrap();
        let (a, b) = (read(&v1), read(&v2));
        assert_eq!(a.payload(), b.payload(), "{}", v1.display());
        assert_eq!(a.header().dataset_generation, b.header().dataset_generation);
    }
}

#[test]
fn the_store_bound_fixture_carries_its_binding() {
    let s = Snapshot::read_file(
        fixtures_root().join("v2/store-bound.bloom"),
        &DecodeOptions::unlimited(),
    )
    .unwrap();
    let binding = s.header().store.unwrap();
    assert_eq!(&binding.identity.to_bytes(), b"golden-store-id!");
    assert_eq!(&binding.history.to_bytes(), b"history@gen-120!");
    assert_eq!(s.header().dataset_generation.get(), 120);
}

#[test]
fn nearly_saturated_fixture_is_nearly_saturated() {
    let s = Snapshot::read_file(
        fixtures_root().join("v1/nearly-saturated.bloom"),
        &DecodeOptions::unlimited(),
    )
    .unwrap();
    let filter = BloomFilter::from_snapshot(&s).unwrap();
    assert!(filter.fill_ratio() > 0.9, "{}", filter.fill_ratio());
    assert!(filter.estimated_items().is_finite());
}
