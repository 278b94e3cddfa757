//! The planning and estimate math on any numbers: every call returns (no hang), no NaN
//! reaches a caller, rates lie in [0, 1], and a plan meets its own target.

#![no_main]

use bloom_core::{FilterParams, Layout, PositionRule, estimate};
use libfuzzer_sys::fuzz_target;

fn take<const N: usize>(data: &mut &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let n = data.len().min(N);
    out[..n].copy_from_slice(&data[..n]);
    *data = &data[n..];
    out
}

fuzz_target!(|data: &[u8]| {
    let mut data = data;
    let items = u64::from_le_bytes(take(&mut data));
    let fpr = f64::from_bits(u64::from_le_bytes(take(&mut data)));
    // The rule caps k: 64 positions, or 4 for sha256-split4.
    let rule = match u32::from_le_bytes(take(&mut data)) % 2 {
        0 => PositionRule::Xxh3_128,
        _ => PositionRule::Sha256Split4,
    };
    let [selector] = take::<1>(&mut data);
    let shards = u16::from_le_bytes(take(&mut data));
    let bits = u64::from_le_bytes(take(&mut data));
    let hashes = u32::from_le_bytes(take(&mut data));
    let ones = u64::from_le_bytes(take(&mut data));
    let layout = match selector % 5 {
        0 => Layout::Standard,
        1 => Layout::Blocked512,
        2 => Layout::SplitBlock256,
        3 => Layout::SplitBlock512,
        _ => match Layout::sharded(u32::from(shards)) {
            Ok(layout) => layout,
            Err(_) => return,
        },
    };
    let rate_ok = |rate: f64| (0.0..=1.0).contains(&rate);
    if let Ok(plan) = FilterParams::planned_for(rule, layout, items, fpr) {
        let predicted = plan.predicted_false_positive_rate(items);
        assert!(predicted <= fpr, "{layout} {items} {fpr}: {predicted}");
        assert!(rate_ok(predicted));
    }
    if let Ok(params) = FilterParams::with_layout(layout, bits, hashes) {
        for n in [items, 0, 1, u64::MAX] {
            let rate = params.predicted_false_positive_rate(n);
            assert!(rate_ok(rate), "{params:?} {n}: {rate}");
            assert!(!params.bits_per_key(n).is_nan());
        }
        let ones = if params.bits() == 0 {
            0
        } else {
            ones % (params.bits() + 1)
        };
        let (m, k) = (params.bits(), params.hashes());
        assert!(rate_ok(estimate::fill_ratio(ones, m)));
        let estimated = estimate::estimated_items(ones, m, k);
        assert!(!estimated.is_nan() && estimated >= 0.0, "{estimated}");
        assert!(rate_ok(estimate::current_false_positive_rate(ones, m, k)));
    }
    if let Ok(params) = FilterParams::for_false_positive_rate(items, fpr) {
        assert!(rate_ok(params.predicted_false_positive_rate(items)));
    }
});
