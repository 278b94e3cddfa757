//! Scalable filters: the compound false-positive rate stays within its bound on fixed key
//! sets (binomial tolerance), a chain never reports an inserted key absent (property test),
//! growth stops safely, and a chain's snapshot answers as the chain.

use bloom_core::{
    BloomFilter, Filter, GrowthStop, PositionRule, Salt, ScalableBloomFilter, ScalableError,
    SnapshotError,
};
use bloom_format::{DecodeOptions, LayoutId, MAX_STAGES, Snapshot};
use proptest::prelude::*;

/// One-sided 99.9 % normal quantile.
const Z_999: f64 = 3.090_232_306_167_813;

/// Builds a chain of `keys` inserted keys, then counts false positives among `queries`
/// disjoint keys and checks them against the bound: the stages' planned rates added up,
/// `P (1 - r^s)` for `s` stages. The count is at most binomial with that rate, so it
/// stays below its mean plus `Z_999` standard deviations.
fn check_bound(mut filter: ScalableBloomFilter, keys: u64, queries: u64) -> ScalableBloomFilter {
    for i in 0..keys {
        filter.insert(&format!("member-{i}"));
    }
    let stages = filter.stages().len() as i32;
    let target = filter.plan().false_positive_rate;
    let bound: f64 = filter
        .stages()
        .iter()
        .map(|s| s.config().plan().unwrap().false_positive_rate)
        .sum();
    let closed_form = target * (1.0 - filter.tightening().powi(stages));
    assert!(
        (bound - closed_form).abs() <= 1e-12 * target,
        "{bound} {closed_form}"
    );
    assert!(bound < target);
    let hits = (0..queries)
        .filter(|i| filter.contains(&format!("stranger-{i}")))
        .count() as f64;
    let q = queries as f64;
    let sigma = (q * bound * (1.0 - bound)).sqrt();
    assert!(
        hits <= bound * q + Z_999 * sigma + 0.5,
        "{stages} stages: {hits} false positives in {queries}, bound {bound} (at most {:.1})",
        bound * q + Z_999 * sigma
    );
    // Every member is still there.
    assert!((0..keys).all(|i| filter.contains(&format!("member-{i}"))));
    assert!(!filter.is_over_capacity(), "within its stages' capacities");
    filter
}

#[test]
fn the_compound_rate_stays_within_its_bound() {
    // 1,000 keys at 1 %, growth 2: 20,000 keys need five stages (31,000 keys of room).
    let filter = check_bound(
        ScalableBloomFilter::with_capacity(1_000, 0.01).unwrap(),
        20_000,
        200_000,
    );
    assert_eq!(filter.stages().len(), 5);
    // Each stage at its own rate and capacity: n g^i and P (1 - r) r^i.
    for (i, stage) in filter.stages().iter().enumerate() {
        let plan = stage.config().plan().unwrap();
        assert_eq!(plan.capacity, 1_000 << i);
        let expected = 0.01 * 0.5 * 0.5f64.powi(i as i32);
        assert!((plan.false_positive_rate - expected).abs() < 1e-15, "{i}");
        assert!(stage.items_inserted() <= plan.capacity);
    }
}

#[test]
fn chains_with_small_first_stages_stay_under_their_target_over_many_key_sets() {
    // The first stages carry most of the budget and are the smallest, so their real rates
    // spread the most: sized with ten deviations of chance, no chain of 60 fixed key sets
    // passes its target, by the rate its bits give (which the binomial tests above tie to
    // queries).
    let mut worst: f64 = 0.0;
    for seed in 0..60 {
        let mut chain = ScalableBloomFilter::builder(100)
            .false_positive_rate(0.001)
            .build()
            .unwrap();
        chain.insert_all((0..6_000).map(|i| format!("set{seed}-{i}")));
        assert!(chain.stages().len() >= 6);
        let rate = chain.estimated_false_positive_rate();
        worst = worst.max(rate);
        assert!(rate < 0.001, "seed {seed}: {rate}");
    }
    assert!(
        worst > 0.0001,
        "the chains are not trivially empty: {worst}"
    );
}

#[test]
fn the_bound_holds_for_other_growths_tightenings_and_rules() {
    for (growth, tightening, rule, salt) in [
        (4, 0.8, PositionRule::Sha256Double, Some(&b"secret"[..])),
        (1, 0.9, PositionRule::Xxh3_64, None),
        (3, 0.3, PositionRule::Xxh3_128, Some(&b"pepper"[..])),
        (2, 0.5, PositionRule::Sha256Split4, None),
    ] {
        let mut builder = ScalableBloomFilter::builder(500)
            .false_positive_rate(0.02)
            .growth(growth)
            .tightening(tightening)
            .rule(rule);
        if let Some(salt) = salt {
            builder = builder.salt(Salt::new(salt).unwrap());
        }
        let filter = check_bound(builder.build().unwrap(), 6_000, 100_000);
        assert!(filter.stages().len() >= 3, "{rule} grew");
        assert!(filter.stages().iter().all(|s| s.config().rule() == rule));
        // The stages' layouts follow the rule and each stage's rate.
        if rule == PositionRule::Xxh3_64 {
            assert!(
                filter
                    .stages()
                    .iter()
                    .all(|s| s.config().layout() == bloom_core::Layout::SplitBlock512)
            );
        }
    }
}

#[test]
fn a_key_already_in_the_chain_takes_no_room() {
    let mut filter = ScalableBloomFilter::with_capacity(100, 0.01).unwrap();
    for _ in 0..5 {
        for i in 0..100 {
            filter.insert(&format!("k{i}"));
        }
    }
    assert_eq!(filter.stages().len(), 1);
    assert!(filter.items_inserted() <= 100);
    assert!(!filter.insert("k1"));
    let before = filter.contains("new");
    assert_eq!(filter.insert("new"), !before);
    assert!(filter.contains("new"));
}

#[test]
fn growth_stops_at_the_last_stage_and_no_key_is_lost() {
    // Capacity 1, growth 1: each key fills a stage.
    let mut filter = ScalableBloomFilter::builder(1)
        .growth(1)
        .tightening(0.9)
        .false_positive_rate(0.5)
        .build()
        .unwrap();
    let keys: Vec<String> = (0..(MAX_STAGES as u64 * 3))
        .map(|i| format!("key-{i}"))
        .collect();
    for key in &keys {
        filter.insert(key);
    }
    assert_eq!(filter.stages().len(), MAX_STAGES);
    assert!(keys.iter().all(|k| filter.contains(k)), "no key is lost");
    assert!(filter.is_over_capacity(), "the last stage is past its plan");
    // Its snapshot is valid and answers alike.
    let snapshot = filter.to_snapshot(3);
    let back = ScalableBloomFilter::from_snapshot(
        &Snapshot::decode(snapshot.encode(), &DecodeOptions::unlimited()).unwrap(),
    )
    .unwrap();
    assert_eq!(back, filter);
    assert!(keys.iter().all(|k| back.contains(k)));
}

#[test]
fn a_chain_round_trips_through_its_snapshot_in_chunks_of_any_size() {
    let mut filter = ScalableBloomFilter::builder(300)
        .salt(Salt::new(b"salt").unwrap())
        .build()
        .unwrap();
    filter.insert_all((0..2_000).map(|i| format!("r{i}")));
    let snapshot = filter.to_snapshot(9);
    let header = snapshot.header();
    assert_eq!(header.layout, LayoutId::Scalable);
    assert_eq!(header.stages().len(), filter.stages().len());
    assert_eq!(header.item_count, filter.items_inserted());
    assert_eq!(header.bit_count, filter.positions());
    let bytes = snapshot.encode();
    let decoded = Snapshot::decode(bytes, &DecodeOptions::unlimited()).unwrap();
    assert_eq!(
        ScalableBloomFilter::from_snapshot(&decoded).unwrap(),
        filter
    );
    // Streamed in chunks of 1, 7 and 4096 bytes: the same chain.
    let payload = decoded.payload().to_vec();
    for size in [1usize, 7, 4096] {
        let back = ScalableBloomFilter::from_payload(header, |sink| {
            payload.chunks(size).for_each(sink);
            Ok::<(), ScalableError>(())
        })
        .unwrap();
        assert_eq!(back, filter, "chunks of {size}");
    }
    // Refused for its length: `bytes` as the payload of `header`.
    let refused_length = |header: &bloom_format::Header, bytes: &[u8]| {
        let result = ScalableBloomFilter::from_payload(header, |sink| {
            sink(bytes);
            Ok::<(), ScalableError>(())
        });
        assert!(
            matches!(
                result,
                Err(ScalableError::Snapshot(SnapshotError::Bits(
                    bloom_core::BitsError::Length { .. }
                )))
            ),
            "{result:?}"
        );
    };
    // Too few or too many bytes are refused.
    refused_length(header, &payload[..payload.len() - 1]);
    refused_length(header, &[payload.as_slice(), &[0]].concat());
    // A header built by hand whose total disagrees with its stages is held to the stages:
    // the first stage's bytes alone do not make the chain.
    assert!(filter.stages().len() > 1);
    let mut short = header.clone();
    let first = filter.stages()[0].payload_len();
    short.bit_count = first * 8;
    refused_length(&short, &payload[..usize::try_from(first).unwrap()]);
    // The same bytes for the same chain; writing streams exactly the payload.
    let mut streamed = Vec::new();
    filter
        .for_each_payload_chunk(|c| {
            streamed.extend_from_slice(c);
            Ok::<(), ()>(())
        })
        .unwrap();
    assert_eq!(streamed, payload);
    // A chain is not a plain filter, and a plain filter is not a chain.
    assert!(matches!(
        BloomFilter::from_snapshot(&decoded),
        Err(SnapshotError::IsScalable)
    ));
    let plain = BloomFilter::with_capacity(10, 0.01).unwrap().to_snapshot(0);
    assert!(matches!(
        ScalableBloomFilter::from_snapshot(&plain),
        Err(ScalableError::NotScalable { .. })
    ));
}

#[test]
fn impossible_chains_are_refused_by_name() {
    assert!(matches!(
        ScalableBloomFilter::builder(10).growth(0).build(),
        Err(ScalableError::Growth { found: 0, .. })
    ));
    assert!(matches!(
        ScalableBloomFilter::builder(10).growth(1025).build(),
        Err(ScalableError::Growth { .. })
    ));
    for r in [0.0, 1.0, f64::NAN, -1.0] {
        assert!(matches!(
            ScalableBloomFilter::builder(10).tightening(r).build(),
            Err(ScalableError::Tightening { .. })
        ));
    }
    assert!(matches!(
        ScalableBloomFilter::builder(0).build(),
        Err(ScalableError::Build(bloom_core::BuildError::Params(_)))
    ));
    assert!(matches!(
        ScalableBloomFilter::builder(10)
            .false_positive_rate(1.0)
            .build(),
        Err(ScalableError::Build(bloom_core::BuildError::Params(_)))
    ));
    assert!(matches!(
        ScalableBloomFilter::builder(10)
            .rule(PositionRule::GuavaMitz64)
            .build(),
        Err(ScalableError::Rule { .. })
    ));
    assert!(matches!(
        ScalableBloomFilter::builder(u64::MAX).build(),
        Err(ScalableError::Build(bloom_core::BuildError::Params(_)))
    ));
}

#[test]
fn a_planned_filter_knows_its_capacity() {
    let mut filter = BloomFilter::with_capacity(1_000, 0.01).unwrap();
    assert_eq!(filter.remaining_capacity(), Some(1_000));
    assert!(!filter.is_over_capacity());
    filter.insert_all((0..900).map(|i| format!("a{i}")));
    let capacity = filter.capacity().unwrap();
    assert_eq!(capacity.remaining(), 1_000 - filter.items_inserted());
    assert!(!capacity.is_over());
    filter.insert_all((0..5_000).map(|i| format!("b{i}")));
    let capacity = filter.capacity().unwrap();
    assert!(capacity.is_over_items() && capacity.is_over_rate() && capacity.is_over());
    assert_eq!(filter.remaining_capacity(), Some(0));
    assert!(filter.is_over_capacity());
    // The plan survives a snapshot.
    let back = BloomFilter::from_snapshot(&filter.to_snapshot(0)).unwrap();
    assert_eq!(back.config().plan(), filter.config().plan());
    assert!(back.is_over_capacity());
    // A filter planned by bits alone has no plan.
    let bare = BloomFilter::new(bloom_core::FilterConfig::new(
        bloom_core::FilterParams::new(1024, 3).unwrap(),
    ))
    .unwrap();
    assert_eq!((bare.remaining_capacity(), bare.capacity()), (None, None));
    assert!(!bare.is_over_capacity());
}

#[test]
fn filters_filled_exactly_to_their_plan_are_not_called_over_in_any_layout() {
    // Small blocked and split-block filters, whose fullest blocks dominate the rate, stray
    // far from their plan by chance: the limit allows for their layout's spread. 40 fixed
    // key sets each; with four standard deviations none may be called over.
    use bloom_core::{Layout, PositionRule};
    for (layout, rule, fpr) in [
        (Layout::Blocked512, PositionRule::Xxh3_128, 1e-4),
        (Layout::SplitBlock256, PositionRule::Xxh64, 1e-5),
        (Layout::SplitBlock512, PositionRule::Xxh3_64, 0.01),
        (Layout::Standard, PositionRule::Xxh3_128, 0.01),
    ] {
        let mut limits = Vec::new();
        for seed in 0..40 {
            let mut filter = BloomFilter::builder(1_000)
                .false_positive_rate(fpr)
                .layout(layout)
                .rule(rule)
                .build()
                .unwrap();
            filter.insert_all((0..1_000).map(|i| format!("s{seed}-{i}")));
            let capacity = filter.capacity().unwrap();
            assert!(
                !capacity.is_over_rate(),
                "{layout} seed {seed}: {capacity:?}"
            );
            limits.push(capacity.rate_limit);
        }
        // And the limit still catches a filter at twice its plan.
        let mut over = BloomFilter::builder(1_000)
            .false_positive_rate(fpr)
            .layout(layout)
            .rule(rule)
            .build()
            .unwrap();
        over.insert_all((0..2_000).map(|i| format!("over-{i}")));
        assert!(
            over.capacity().unwrap().is_over_rate(),
            "{layout}: {limits:?}"
        );
    }
}

#[test]
fn a_union_past_the_plan_is_over_by_its_rate() {
    // A union's keys are estimated, not counted: the rate says it is over.
    let mut a = BloomFilter::with_capacity(1_000, 0.01).unwrap();
    let mut b = a.clone();
    a.insert_all((0..1_000).map(|i| format!("a{i}")));
    b.insert_all((0..1_000).map(|i| format!("b{i}")));
    a.union(&b).unwrap();
    assert!(a.capacity().unwrap().is_over_rate());
}

#[test]
fn a_chain_answers_as_its_stages_do_for_every_rule_and_layout() {
    // The chain hashes a key once for all its stages; each stage alone hashes it itself.
    for (rule, salt, fpr) in [
        (PositionRule::Xxh3_128, None, 0.01),
        (PositionRule::Xxh3_128, Some(&b"salt"[..]), 0.2),
        (PositionRule::Xxh3_64, None, 0.01),
        (PositionRule::Xxh64, None, 0.01),
        (PositionRule::Sha256Double, Some(&b"pepper"[..]), 0.05),
        (PositionRule::Sha256Split4, None, 0.3),
    ] {
        let mut builder = ScalableBloomFilter::builder(50)
            .false_positive_rate(fpr)
            .tightening(0.3)
            .rule(rule);
        if let Some(salt) = salt {
            builder = builder.salt(Salt::new(salt).unwrap());
        }
        let mut chain = builder.build().unwrap();
        for i in 0..2_000 {
            let key = format!("k{i}");
            let before = chain.stages().iter().any(|s| s.contains(key.as_str()));
            assert_eq!(chain.insert(key.as_str()), !before, "{rule}");
        }
        let layouts: Vec<_> = chain.stages().iter().map(|s| s.config().layout()).collect();
        assert!(chain.stages().len() >= 5, "{rule}");
        for i in 0..20_000 {
            let key = format!("q{i}");
            let alone = chain.stages().iter().any(|s| s.contains(key.as_str()));
            assert_eq!(
                chain.contains(key.as_str()),
                alone,
                "{rule} {layouts:?} {key}"
            );
        }
    }
}

#[test]
fn growth_stops_at_the_growth_limit_and_no_key_is_lost() {
    let plain = ScalableBloomFilter::with_capacity(1_000, 0.01).unwrap();
    let first = plain.payload_len();
    // Room for the first two stages, not the third.
    let mut grown = plain.clone();
    grown.insert_all((0..1_500).map(|i| format!("k{i}")));
    let limit = grown.payload_len() + 1;
    let mut filter = ScalableBloomFilter::builder(1_000)
        .false_positive_rate(0.01)
        .growth_limit(limit)
        .build()
        .unwrap();
    assert_eq!(
        (filter.payload_len(), filter.growth_limit()),
        (first, Some(limit))
    );
    let keys: Vec<String> = (0..6_000).map(|i| format!("k{i}")).collect();
    filter.insert_all(keys.iter().map(String::as_str));
    assert_eq!(
        filter.stages().len(),
        2,
        "the third stage would pass the limit"
    );
    assert!(filter.payload_len() <= limit);
    assert!(keys.iter().all(|k| filter.contains(k)), "no key is lost");
    assert!(filter.capacity().unwrap().is_over_items() && filter.is_over_capacity());
    assert_eq!(filter.remaining_capacity(), Some(0));
    // Lifted, the chain grows again with the next key.
    filter.set_growth_limit(None);
    filter.insert("one more");
    assert_eq!(filter.stages().len(), 3);
    // The limit is the process's, not the snapshot's.
    let back = ScalableBloomFilter::from_snapshot(&filter.to_snapshot(0)).unwrap();
    assert_eq!(back.growth_limit(), None);
    assert_eq!(back, filter);
}

#[test]
fn remaining_capacity_counts_down_to_the_next_stage() {
    let mut filter = ScalableBloomFilter::with_capacity(100, 0.01).unwrap();
    assert_eq!(filter.remaining_capacity(), Some(100));
    let mut added = 0;
    let mut i = 0;
    while added < 60 {
        added += u64::from(filter.insert(&format!("a{i}")));
        i += 1;
    }
    assert_eq!(filter.remaining_capacity(), Some(40));
    while filter.stages().len() == 1 {
        filter.insert(&format!("a{i}"));
        i += 1;
    }
    // The second stage took one key and has room for 199 more.
    assert_eq!(filter.remaining_capacity(), Some(199));
    assert!(!filter.capacity().unwrap().is_over_items());
}

#[test]
fn stage_configs_are_the_loaded_stages_configs() {
    let mut filter = ScalableBloomFilter::builder(200)
        .growth(3)
        .salt(Salt::new(b"s").unwrap())
        .build()
        .unwrap();
    filter.insert_all((0..2_000).map(|i| format!("k{i}")));
    let snapshot = filter.to_snapshot(9);
    let configs = ScalableBloomFilter::stage_configs(snapshot.header()).unwrap();
    let loaded = ScalableBloomFilter::from_snapshot(&snapshot).unwrap();
    assert_eq!(configs.len(), loaded.stages().len());
    for (config, stage) in configs.iter().zip(loaded.stages()) {
        assert_eq!(config, stage.config());
    }
    let plain = BloomFilter::with_capacity(10, 0.01).unwrap().to_snapshot(0);
    assert!(matches!(
        ScalableBloomFilter::stage_configs(plain.header()),
        Err(ScalableError::NotScalable { .. })
    ));
}

#[test]
fn a_chain_filled_to_its_stages_plans_is_within_its_rate_limit() {
    // Every stage exactly at capacity, over several seeds of keys: the estimate's noise
    // never calls the chain over, and the limit stays within a fraction of the target.
    for seed in 0..8 {
        let mut filter = ScalableBloomFilter::builder(500)
            .false_positive_rate(0.01)
            .tightening(0.9)
            .build()
            .unwrap();
        let mut i = 0u64;
        while filter.stages().len() < 4 || filter.remaining_capacity() > Some(0) {
            filter.insert(&format!("s{seed}-{i}"));
            i += 1;
        }
        let limit = filter.capacity().unwrap().rate_limit;
        assert!(limit > 0.01 && limit < 0.015, "{limit}");
        assert!(
            !filter.is_over_capacity(),
            "seed {seed}: {}",
            filter.estimated_false_positive_rate()
        );
    }
}

#[test]
fn growth_stops_say_why_and_no_key_is_lost() {
    // The growth limit: the next stage's size, and the total it would make.
    let mut limited = ScalableBloomFilter::builder(1_000)
        .growth_limit(4_096)
        .build()
        .unwrap();
    assert_eq!(
        limited.growth_stop().map(|_| ()),
        Some(()),
        "stage 1 is over 4 KiB"
    );
    let Some(GrowthStop::OverLimit {
        stage_bytes,
        total_bytes,
        limit,
    }) = limited.growth_stop()
    else {
        panic!("{:?}", limited.growth_stop())
    };
    assert_eq!(limit, 4_096);
    assert_eq!(total_bytes, limited.payload_len() + stage_bytes);
    assert!(total_bytes > limit);
    limited.set_growth_limit(Some(total_bytes));
    assert_eq!(limited.growth_stop(), None, "exactly enough room");

    // A rate that underflows: stage 1 is at 8e-303, and stage 2 cannot be planned.
    let mut tiny = ScalableBloomFilter::builder(100)
        .tightening(1e-300)
        .build()
        .unwrap();
    let keys: Vec<String> = (0..500).map(|i| format!("k{i}")).collect();
    tiny.insert_all(keys.iter().map(String::as_str));
    assert_eq!(tiny.stages().len(), 2);
    assert_eq!(tiny.growth_stop(), Some(GrowthStop::Unplannable));
    assert!(
        tiny.capacity().unwrap().is_over_items() && keys.iter().all(|k| tiny.contains(k.as_str()))
    );

    // The 64th stage is the last.
    let mut long = ScalableBloomFilter::builder(1)
        .growth(1)
        .tightening(0.9)
        .false_positive_rate(0.5)
        .build()
        .unwrap();
    long.insert_all((0..200).map(|i| format!("l{i}")));
    assert_eq!(long.growth_stop(), Some(GrowthStop::MaxStages));
    assert!(GrowthStop::MaxStages.to_string().contains("64 stages"));
}

#[test]
fn a_first_stage_over_the_limit_or_below_a_double_is_refused_before_allocation() {
    // 10^11 keys would need over a hundred gigabytes: refused by the limit, nothing
    // allocated.
    let result = ScalableBloomFilter::builder(100_000_000_000)
        .growth_limit(1 << 20)
        .build();
    let Err(ScalableError::OverLimit { bytes, limit }) = result else {
        panic!("{result:?}")
    };
    assert!(bytes > 100_000_000_000 && limit == 1 << 20);
    assert!(matches!(
        ScalableBloomFilter::builder(10)
            .false_positive_rate(5e-324)
            .build(),
        Err(ScalableError::FirstStageRate { .. })
    ));
}

#[test]
fn a_chain_from_another_writer_that_spent_its_budget_never_grows_past_it() {
    // Stage 0 planned at the whole target (the format allows it: the rates add up to at
    // most the target): growth would pass the target, so the chain stops and says so, and
    // its snapshot stays valid.
    let chain = ScalableBloomFilter::with_capacity(100, 0.01).unwrap();
    let snapshot = chain.to_snapshot(1);
    let mut header = snapshot.header().clone();
    let scalable = header.scalable.as_mut().unwrap();
    scalable.stages[0].plan = bloom_format::Plan::new(100, 0.01).unwrap();
    let crafted = bloom_format::Snapshot::new(header, snapshot.payload().to_vec()).unwrap();
    let mut loaded = ScalableBloomFilter::from_snapshot(&crafted).unwrap();
    let keys: Vec<String> = (0..400).map(|i| format!("k{i}")).collect();
    loaded.insert_all(keys.iter().map(String::as_str));
    assert_eq!(loaded.stages().len(), 1);
    assert_eq!(loaded.growth_stop(), Some(GrowthStop::RateBudget));
    assert!(loaded.is_over_capacity());
    let written = loaded.to_snapshot(2);
    let back = ScalableBloomFilter::from_snapshot(
        &bloom_format::Snapshot::decode(written.encode(), &DecodeOptions::unlimited()).unwrap(),
    )
    .unwrap();
    assert!(keys.iter().all(|k| back.contains(k.as_str())));
}

#[test]
fn item_counts_near_the_top_of_u64_never_break_a_snapshot() {
    let chain = ScalableBloomFilter::with_capacity(100, 0.01).unwrap();
    let snapshot = chain.to_snapshot(1);
    let mut header = snapshot.header().clone();
    header.scalable.as_mut().unwrap().stages[0].item_count = u64::MAX - 2;
    header.item_count = u64::MAX - 2;
    let crafted = bloom_format::Snapshot::new(header, snapshot.payload().to_vec()).unwrap();
    let mut loaded = ScalableBloomFilter::from_snapshot(&crafted).unwrap();
    // Past its capacity at once: the chain grows, and the counts cannot add up past 2^64.
    loaded.insert_all((0..50).map(|i| format!("k{i}")));
    assert_eq!(loaded.items_inserted(), u64::MAX);
    let written = loaded.to_snapshot(2);
    let decoded =
        bloom_format::Snapshot::decode(written.encode(), &DecodeOptions::unlimited()).unwrap();
    assert_eq!(decoded.header().item_count, u64::MAX);
    assert!(ScalableBloomFilter::from_snapshot(&decoded).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the plan, growth, tightening and keys: every inserted key answers maybe,
    /// before and after a snapshot.
    #[test]
    fn a_chain_never_reports_an_inserted_key_absent(
        capacity in 1u64..200,
        growth in 1u32..5,
        tightening in 0.05f64..0.95,
        fpr in 0.001f64..0.3,
        keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..12), 0..600),
    ) {
        let mut filter = ScalableBloomFilter::builder(capacity)
            .growth(growth)
            .tightening(tightening)
            .false_positive_rate(fpr)
            .encoding(bloom_core::KeyEncoding::Bytes)
            .build()
            .unwrap();
        for key in &keys {
            filter.insert(key.as_slice()).unwrap();
        }
        for key in &keys {
            prop_assert!(filter.contains(key.as_slice()).unwrap());
        }
        let snapshot = Snapshot::decode(filter.to_snapshot(1).encode(), &DecodeOptions::default()).unwrap();
        let back = ScalableBloomFilter::from_snapshot(&snapshot).unwrap();
        for key in &keys {
            prop_assert!(back.contains(key.as_slice()).unwrap());
        }
        prop_assert!(back.stages().len() <= MAX_STAGES);
    }
}

#[test]
fn every_stage_holds_its_rate_at_ten_deviations_even_at_tiny_rates() {
    // One key per stage at 1 %, growth 1: the rates halve with every stage, down to 1e-17
    // and below, where the deviation is a Poisson tail far past the weights' peak. Every
    // stage the chain adds keeps its layout's expected rate plus ten deviations within its
    // share; a stage that cannot is not added (growth stops instead).
    let mut chain = ScalableBloomFilter::builder(1)
        .false_positive_rate(0.01)
        .growth(1)
        .build()
        .unwrap();
    for i in 0..100 {
        chain.insert(&format!("key-{i}"));
    }
    assert!(chain.stages().len() > 40, "{} stages", chain.stages().len());
    for (i, stage) in chain.stages().iter().enumerate() {
        let config = stage.config();
        let plan = config.plan().unwrap();
        let (m, k, n) = (config.bits(), config.hashes(), plan.capacity);
        let layout = config.layout();
        let high = layout.false_positive_rate(m, k, n)
            + bloom_core::CHANCE_SIGMAS * layout.false_positive_rate_deviation(m, k, n);
        assert!(
            high <= plan.false_positive_rate,
            "stage {i} ({layout}, m = {m}, k = {k}): {high:e} over {:e}",
            plan.false_positive_rate
        );
    }
}

/// A small first stage of the split-block layout, whose size moves in whole blocks: the
/// documented 40 rounds of small steps kept one size that did not hold its rate, and the
/// build failed with a misleading rate error. Found by the property above (capacity 72,
/// growth 1, tightening 0.9126, rate 0.1585: a first stage of 72 keys at 1.39 %).
#[test]
fn a_small_split_block_stage_is_sized_past_its_block_steps() {
    let filter = ScalableBloomFilter::builder(72)
        .growth(1)
        .tightening(0.912_592_422_118_079_7)
        .false_positive_rate(0.158_475_698_741_638_64)
        .encoding(bloom_core::KeyEncoding::Bytes)
        .build()
        .unwrap();
    let stage = &filter.stages()[0];
    let (m, k) = (
        stage.config().params().bits(),
        stage.config().params().hashes(),
    );
    let layout = stage.config().params().layout();
    let bound = layout.false_positive_rate(m, k, 72)
        + bloom_core::CHANCE_SIGMAS * layout.false_positive_rate_deviation(m, k, 72);
    assert!(
        bound <= 0.158_475_698_741_638_64 * (1.0 - 0.912_592_422_118_079_7),
        "{bound}"
    );
}
