//! `bloom inspect`: every header field, and estimates from the bits, counted while the payload
//! streams past (constant memory).

use bloom_core::estimate;
use serde_json::json;

use crate::cli::InspectArgs;
use crate::error::CmdResult;
use crate::files;
use crate::output::{Out, encoding_json, layout_json, number, rule_json, show};

pub(crate) fn run(args: &InspectArgs) -> CmdResult {
    let path = &args.snapshot;
    let (reader, config) = files::open(path, Some(args.limit.max_bytes))?;
    let dump = reader.dump_header();
    let version = reader.format_version();
    let (header_len, header_crc, payload_crc) = (
        reader.header_len(),
        reader.header_crc32(),
        reader.payload_crc32(),
    );
    let counting = reader.header().layout == bloom_format::LayoutId::Counting4;
    let mut counter = estimate::FillCounter::new(config.layout(), config.bits(), config.hashes());
    let mut counters = Counters::default();
    let (_, h) = reader
        .read_payload_with(|chunk| {
            if counting {
                counters.feed(chunk);
            } else {
                counter.feed(chunk);
            }
            Ok::<(), bloom_format::ReadError>(())
        })
        .map_err(|e| files::read_failure(path, &e))?;
    let (m, k) = (h.bit_count, h.hash_count);
    // For a counting filter the "set bits" are the counters above zero: its projection's.
    let ones = if counting {
        counters.nonzero
    } else {
        counter.ones()
    };
    let fill = estimate::fill_ratio(ones, m);
    let items = estimate::estimated_items(ones, m, k);
    let fpr = if counting {
        estimate::current_false_positive_rate(ones, m, k)
    } else {
        counter.false_positive_rate()
    };
    let tables = if config.has_foreign_tables() {
        format!(
            "differ from this build's ({}): keys outside ASCII answer maybe",
            config.encoding().build_tables()
        )
    } else {
        "this build's".to_owned()
    };
    // Against the plan the snapshot records (format version 3): over once more items went
    // in than planned, or once the estimated rate passed the target.
    let plan = h.plan;
    let over = plan.map(|p| h.item_count > p.capacity || fpr > p.false_positive_rate);
    // Guava's strategy and funnel, for a filter that `export --to guava` can write.
    let guava = bloom_format::guava_parameters(&h).ok();
    let mut out = Out::new();
    if args.json {
        let unicode = |v: Option<bloom_format::UnicodeVersion>| v.map(|v| v.to_string());
        let value = json!({
            "path": path.display().to_string(),
            "format_version": version.value(),
            "header_length": header_len,
            "bit_count": m,
            "hash_count": k,
            "position_rule": rule_json(h.position_rule),
            "layout": layout_json(h.layout, h.layout_parameter),
            "key_encoding": encoding_json(h.key_encoding.id, h.key_encoding.version),
            "unicode_version_normalization": unicode(h.key_encoding.normalization_unicode),
            "unicode_version_casing": unicode(h.key_encoding.casing_unicode),
            "unicode_tables_match_this_build": !config.has_foreign_tables(),
            "salt_hex": bloom_format::hex(&h.salt),
            "dataset_generation": h.dataset_generation.get(),
            "item_count": h.item_count,
            "store_identity": h.store.map(|b| b.identity.to_string()),
            "history_digest": h.store.map(|b| b.history.to_string()),
            "payload_length": h.payload_len(),
            "payload_crc32": format!("{payload_crc:#010x}"),
            "header_crc32": format!("{header_crc:#010x}"),
            "guava": guava.map(|(strategy, funnel)| json!({
                "strategy": strategy.java_name(),
                "ordinal": strategy.ordinal(),
                "funnel": funnel.java_name(),
            })),
            "checksums": "ok",
            "counting": counting,
            "set_bits": (!counting).then_some(ones),
            "nonzero_counters": counting.then_some(ones),
            "saturated_counters": counting.then_some(counters.saturated),
            "fill_ratio": number(fill),
            "estimated_items": number(items),
            "estimated_false_positive_rate": number(fpr),
            "planned_capacity": plan.map(|p| p.capacity),
            "target_false_positive_rate": plan.map(|p| number(p.false_positive_rate)),
            "remaining_capacity": plan.map(|p| p.capacity.saturating_sub(h.item_count)),
            "over_capacity": over,
        });
        out.text(&format!("{value:#}\n"))?;
    } else {
        let guava = guava.map_or_else(String::new, |(strategy, funnel)| {
            format!(
                "guava: strategy {strategy} (ordinal {}), funnel {funnel}\n",
                strategy.ordinal()
            )
        });
        let ones = if counting {
            format!(
                "counters above zero: {ones}\nsaturated counters (at 15, never decremented): {}",
                counters.saturated
            )
        } else {
            format!("set bits: {ones}")
        };
        let capacity = plan.map_or_else(
            || "capacity: not recorded (no plan in the snapshot)\n".to_owned(),
            |p| {
                format!(
                    "capacity: {} of {} items ({} remaining); estimated false-positive rate {} against a target of {}: {}\n",
                    h.item_count,
                    p.capacity,
                    p.capacity.saturating_sub(h.item_count),
                    show(fpr),
                    show(p.false_positive_rate),
                    if over == Some(true) {
                        "OVER CAPACITY, rebuild it larger"
                    } else {
                        "within plan"
                    }
                )
            },
        );
        out.text(&format!(
            "{dump}{ones}\nfill ratio: {}\nestimated items: {}\nestimated false-positive rate: {}\n{capacity}unicode tables: {tables}\n{guava}checksums: ok (header and payload)\n",
            show(fill),
            show(items),
            show(fpr),
        ))?;
    }
    out.flush()
}

/// Counts a counting payload's counters above zero and at 15, two per byte. The padding
/// nibble of an odd `m` was checked to be zero, so it counts as neither.
#[derive(Default)]
struct Counters {
    nonzero: u64,
    saturated: u64,
}

impl Counters {
    fn feed(&mut self, chunk: &[u8]) {
        for &byte in chunk {
            for nibble in [byte & 0x0F, byte >> 4] {
                self.nonzero += u64::from(nibble != 0);
                self.saturated += u64::from(nibble == 0x0F);
            }
        }
    }
}
