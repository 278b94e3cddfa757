//! The observed false-positive rate against the plan (`Metrics::observed_over_target`), with
//! fixed key sets, both ways: a filter filled to its plan is never called over in 600 runs,
//! and an overfilled one is, once its count is past chance.

use bloom_store::{FilterOptions, FilteredStore, MemoryStore};

/// A wrapper over a new store holding `inserted` keys of run `run`, planned for 2,000 at 1 %,
/// after `absent` queries for keys it never held.
fn run(run: u32, inserted: u32, absent: u32) -> bloom_store::Metrics {
    let options = FilterOptions::new(2_000, 0.01);
    let (w, _) = FilteredStore::open_and_recover(MemoryStore::new(), options).unwrap();
    let keys: Vec<String> = (0..inserted)
        .map(|i| format!("run-{run}-key-{i}"))
        .collect();
    w.insert_all(&keys).unwrap();
    let probes: Vec<String> = (0..absent)
        .map(|i| format!("run-{run}-absent-{i}"))
        .collect();
    let answers = w.contains_each(&probes).unwrap();
    assert!(
        answers.iter().all(|l| !l.is_present()),
        "the store confirms every maybe"
    );
    w.metrics()
}

#[test]
fn a_filter_at_its_plan_is_never_called_over() {
    let mut false_positives = 0;
    for r in 0..600 {
        let m = run(r, 2_000, 1_000);
        false_positives += m.false_positives;
        assert!(
            !m.observed_over_target,
            "run {r}: {} false positives of 1,000 called over 1 %",
            m.false_positives
        );
    }
    // The runs did see false positives: the check had counts to judge (about 1 % of 600,000).
    assert!(
        (3_000..9_000).contains(&false_positives),
        "{false_positives}"
    );
}

#[test]
fn an_overfilled_filter_is_called_over_once_past_chance() {
    // Ten times its plan: a rate far above 1 %.
    let m = run(0, 20_000, 2_000);
    assert!(m.observed_over_target, "{} of 2,000", m.false_positives);
    assert!(m.over_capacity);
    // Few queries: however high the rate, a handful of false positives is never enough.
    let few = run(2, 20_000, 5);
    assert!(few.over_capacity && few.false_positives > 0);
    assert!(!few.observed_over_target, "{} of 5", few.false_positives);
}
