//! `bloom measure`: the false-positive rate of a fixed inserted set on a disjoint query set.

use bloom_core::{BloomFilter, Filter, FilterConfig};

use crate::cli::MeasureArgs;
use crate::error::{CmdResult, Failure};
use crate::output::{Out, layout_of, number, rule_json, show};
use crate::progress;

/// Wilson score interval at 95%.
fn wilson(hits: u64, n: u64) -> (f64, f64) {
    let z = 1.959_963_984_540_054_f64;
    let n = n as f64;
    let p = hits as f64 / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

pub(crate) fn run(args: &MeasureArgs) -> CmdResult {
    let rule = crate::cli::rule_for(args.rule, args.layout, false, Some(args.fpr));
    let layout = crate::cli::planned_layout(args.layout, rule, args.fpr);
    let params = crate::cli::plan_params(Some(layout), rule, args.items, args.fpr)
        .map_err(|e| Failure::usage(format!("cannot plan: {e}")))?;
    if params.byte_len() > args.limit.max_bytes {
        return Err(Failure::usage(format!(
            "the filter would be {} bytes, over --max-bytes {}",
            params.byte_len(),
            args.limit.max_bytes
        )));
    }
    let config = FilterConfig::new(params)
        .with_rule(rule)
        .map_err(|e| Failure::usage(format!("invalid parameters: {e}")))?;
    let mut filter = BloomFilter::new(config).map_err(Failure::environment)?;
    let total = args.items.saturating_add(args.queries);
    let bar = progress::keys_bar(progress::Total::Keys(total));
    let seed = args.seed;
    let tick = |done: u64| {
        if done.is_multiple_of(4096) {
            progress::advance(&bar, false, done, 0);
        }
    };
    filter.insert_all((0..args.items).map(|i| {
        tick(i);
        format!("inserted/{seed}/{i}")
    }));
    // The query keys have another prefix, so the two sets are disjoint.
    let hits = filter
        .contains_each((0..args.queries).map(|i| {
            tick(args.items + i);
            format!("query/{seed}/{i}")
        }))
        .filter(|&maybe| maybe)
        .count() as u64;
    bar.finish_and_clear();
    let (low, high) = wilson(hits, args.queries);
    let mut out = Out::new();
    if args.json {
        let value = serde_json::json!({
            "position_rule": rule_json(rule.id()),
            "layout": layout_of(layout),
            "format_version": bloom_format::FormatVersion::CURRENT.value(),
            "bit_count": filter.config().bits(),
            "hash_count": filter.config().hashes(),
            "items": args.items,
            "queries": args.queries,
            "seed": args.seed,
            "false_positives": hits,
            "measured_false_positive_rate": number(hits as f64 / args.queries as f64),
            "interval_95": [number(low), number(high)],
            "predicted_false_positive_rate": number(
                filter.config().params().predicted_false_positive_rate(args.items)
            ),
        });
        out.text(&format!("{value:#}\n"))?;
        return out.flush();
    }
    out.text(&format!(
        "rule: {}\nlayout: {}\nformat version: {}\nbits (m): {}\npositions per key (k): {}\ninserted keys: {}\nqueries (disjoint): {}\nfalse positives: {hits}\nmeasured false-positive rate: {} (95% Wilson interval {} .. {}, query sampling only; the fill of one filter also varies with --seed)\npredicted false-positive rate: {}\n",
        rule,
        layout,
        bloom_format::FormatVersion::CURRENT.value(),
        filter.config().bits(),
        filter.config().hashes(),
        args.items,
        args.queries,
        show(hits as f64 / args.queries as f64),
        show(low),
        show(high),
        show(filter.config().params().predicted_false_positive_rate(args.items)),
    ))?;
    out.flush()
}
