//! The measured false-positive rate lies within a binomial 99.9% interval of the prediction.
//!
//! The inserted set and the query set are fixed and disjoint, so the test is deterministic:
//! it either always passes or always fails for a given build. The tolerance is derived from
//! the binomial distribution of the number of false positives among the queries.

use bloom_core::{
    BloomFilter, Filter, FilterConfig, FilterParams, KeyEncoding, Layout, PositionRule, Salt,
};

const QUERIES: u64 = 200_000;
/// Two-sided 99.9% normal quantile.
const Z_999: f64 = 3.290_526_731_491_926;

/// What the measured rate is compared with.
#[derive(Clone, Copy)]
enum Prediction {
    /// The a-priori rate `(1 - e^(-kn/m))^k` of the plan.
    Planned,
    /// The rate given this filter's actual fill, `(X/m)^k`. Far past capacity the a-priori
    /// approximation drifts by more than the sampling error; conditioned on the fill, the
    /// number of false positives among the queries is binomial again.
    FromFill,
}

fn check(config: FilterConfig, items: u64, prediction: Prediction) {
    check_with(config, items, prediction, QUERIES);
}

fn check_with(config: FilterConfig, items: u64, prediction: Prediction, queries: u64) {
    let mut filter = BloomFilter::new(config.clone()).unwrap();
    filter.insert_all((0..items).map(|i| format!("inserted-{i}")));
    let hits = filter
        .contains_each((0..queries).map(|i| format!("absent-{i}")))
        .filter(|&maybe| maybe)
        .count() as f64;
    let q = queries as f64;
    let observed = hits / q;
    let predicted = match prediction {
        Prediction::Planned => config.params().predicted_false_positive_rate(items),
        Prediction::FromFill => filter.estimated_false_positive_rate(),
    };
    let sigma = (q * predicted * (1.0 - predicted)).sqrt();
    println!(
        "{} {} m={} k={} n={items}: observed {observed:.6}, predicted {predicted:.6}",
        config.rule(),
        config.layout(),
        config.bits(),
        config.hashes()
    );
    // Half a count of continuity correction on top of the normal approximation.
    let tolerance = (Z_999 * sigma + 0.5) / q;
    assert!(
        (observed - predicted).abs() <= tolerance,
        "{} {} m={} k={} n={items}: observed {observed:.5} vs predicted {predicted:.5} (±{tolerance:.5})",
        config.rule(),
        config.layout(),
        config.bits(),
        config.hashes(),
    );
}

#[test]
fn double_hashing_at_one_percent() {
    let params = FilterParams::for_false_positive_rate(20_000, 0.01).unwrap();
    check(FilterConfig::new(params), 20_000, Prediction::Planned);
}

#[test]
fn double_hashing_at_a_tenth_of_a_percent_with_salt() {
    let params = FilterParams::for_false_positive_rate(10_000, 0.001).unwrap();
    let config = FilterConfig::new(params)
        .with_salt(Salt::new(b"fixed-salt-for-the-test").unwrap())
        .unwrap()
        .with_encoding(KeyEncoding::NfcTrimLowercase);
    check(config, 10_000, Prediction::Planned);
}

#[test]
fn split4_teaching_configuration() {
    // 1024 bits and 4 positions: at 100 keys the predicted rate is about 1.2%.
    let config = FilterConfig::seed_teaching();
    assert_eq!(config.rule(), PositionRule::Sha256Split4);
    check(config, 100, Prediction::Planned);
}

#[test]
fn overfilled_filter_still_matches_the_prediction() {
    let params = FilterParams::for_false_positive_rate(1_000, 0.01).unwrap();
    check(FilterConfig::new(params), 3_000, Prediction::FromFill);
    check(FilterConfig::new(params), 1_000, Prediction::FromFill);
}

/// The estimate from the bits of a blocked filter (the mean over blocks of `(X_b / 512)^k`)
/// at 0.01%, where the whole-filter `(X / m)^k` would be about a quarter of the truth; and in
/// a small filter whose 64 blocks fill unevenly.
#[test]
fn blocked_estimate_from_the_fill() {
    let params = FilterParams::planned(Layout::Blocked512, 100_000, 0.0001).unwrap();
    check_with(
        FilterConfig::new(params),
        100_000,
        Prediction::FromFill,
        2_000_000,
    );
    let sparse = FilterParams::with_layout(Layout::Blocked512, 512 * 64, 8).unwrap();
    check_with(
        FilterConfig::new(sparse),
        2_000,
        Prediction::FromFill,
        2_000_000,
    );
}

/// The blocked layout's own formula (a Poisson sum over block loads), over 10^6 disjoint
/// queries: at 1% with the fast rule, at 0.1% with salted SHA-256.
#[test]
fn blocked_layout_at_one_percent() {
    let params = FilterParams::planned(Layout::Blocked512, 500_000, 0.01).unwrap();
    let config = FilterConfig::new(params).with_encoding(KeyEncoding::Utf8);
    assert_eq!(config.rule(), PositionRule::Xxh3_128);
    check_with(config, 500_000, Prediction::Planned, 1_000_000);
}

#[test]
fn blocked_layout_at_a_tenth_of_a_percent_with_salted_sha256() {
    let params = FilterParams::planned(Layout::Blocked512, 200_000, 0.001).unwrap();
    let config = FilterConfig::new(params)
        .with_rule(PositionRule::Sha256Double)
        .unwrap()
        .with_salt(Salt::new(b"fixed-salt-for-the-test").unwrap())
        .unwrap();
    check_with(config, 200_000, Prediction::Planned, 1_000_000);
}

#[test]
fn xxh3_in_the_standard_layout_at_one_percent() {
    let params = FilterParams::for_false_positive_rate(50_000, 0.01).unwrap();
    check(FilterConfig::new(params), 50_000, Prediction::Planned);
}

/// The sharded layout planned as the standard one and rounded to whole shards: its rate (the
/// mixture over shard loads) stays at the target with shards of thousands of keys.
#[test]
fn sharded_layout_at_one_percent() {
    let layout = Layout::sharded(16).unwrap();
    let params = FilterParams::planned(layout, 200_000, 0.01).unwrap();
    assert_eq!(params.bits() % (64 * 16), 0);
    let predicted = params.predicted_false_positive_rate(200_000);
    assert!((predicted - 0.01).abs() < 0.0002, "{predicted}");
    check_with(
        FilterConfig::new(params),
        200_000,
        Prediction::Planned,
        1_000_000,
    );
    check_with(
        FilterConfig::new(params),
        200_000,
        Prediction::FromFill,
        1_000_000,
    );
}

/// The sharded layout of new filters (`sharded-v2`) meets the prediction with shards of many
/// keys, and stays within a small factor of it with shards of a few hundred bits, where the
/// superseded `sharded` layout measured 1.2 % for a planned 0.1 %: its in-shard step no
/// longer shares the shard's top bits.
#[test]
fn sharded_v2_meets_the_prediction() {
    let sharded = |shards: u32, items: u64, fpr: f64| {
        let layout = Layout::sharded(shards).unwrap();
        assert_eq!(layout.id(), bloom_format::LayoutId::ShardedV2);
        FilterConfig::new(FilterParams::planned(layout, items, fpr).unwrap())
    };
    // ~780 keys and ~7,600 bits a shard: under `sharded`, 3 times the prediction.
    check(sharded(256, 200_000, 0.01), 200_000, Prediction::Planned);
    // 4 keys and 128 bits a shard: the formula assumes independent positions, which a
    // shard this small cannot give; bounded at 4 times the plan's target.
    let config = sharded(256, 1000, 0.001);
    let mut filter = BloomFilter::new(config).unwrap();
    filter.insert_all((0..1000).map(|i| format!("inserted-{i}")));
    let queries = 400_000u64;
    let hits = filter
        .contains_each((0..queries).map(|i| format!("absent-{i}")))
        .filter(|&maybe| maybe)
        .count() as f64;
    let bound = 0.004;
    let sigma = (queries as f64 * bound * (1.0 - bound)).sqrt();
    assert!(
        hits <= bound * queries as f64 + Z_999 * sigma,
        "{hits} false positives in {queries} queries"
    );
}

/// The split-block layouts' own formula (a Poisson sum over block loads, one bit per word),
/// over 10^6 disjoint queries: Parquet's 256-bit blocks with its hash at 1%, and 512-bit
/// blocks with XXH3-64 at 0.1%; and the estimate from the fill of a filter past capacity.
#[test]
fn split_block_layouts_meet_their_formula() {
    let params = FilterParams::planned(Layout::SplitBlock256, 500_000, 0.01).unwrap();
    assert_eq!(params.hashes(), 8);
    let config = FilterConfig::new(params)
        .with_rule(PositionRule::Xxh64)
        .unwrap()
        .with_encoding(KeyEncoding::Utf8);
    check_with(config, 500_000, Prediction::Planned, 1_000_000);

    let params = FilterParams::planned(Layout::SplitBlock512, 200_000, 0.001).unwrap();
    let config = FilterConfig::new(params)
        .with_rule(PositionRule::Xxh3_64)
        .unwrap();
    check_with(config, 200_000, Prediction::Planned, 1_000_000);

    let params = FilterParams::planned(Layout::SplitBlock256, 20_000, 0.01).unwrap();
    let config = FilterConfig::new(params)
        .with_rule(PositionRule::Xxh64)
        .unwrap();
    check_with(config, 40_000, Prediction::FromFill, 1_000_000);
}
