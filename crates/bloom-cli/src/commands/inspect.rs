//! `bloom inspect`: every header field, and estimates from the bits, counted while the payload
//! streams past (constant memory).

use bloom_core::{Capacity, FilterConfig, estimate};
use bloom_format::Header;
use serde_json::json;

use crate::cli::InspectArgs;
use crate::error::CmdResult;
use crate::files::{self, Configs};
use crate::output::{Out, encoding_json, layout_json, number, rule_json, show};

pub(crate) fn run(args: &InspectArgs) -> CmdResult {
    let path = &args.snapshot;
    let (reader, configs) = files::open(path, Some(args.limit.max_bytes))?;
    let dump = reader.dump_header();
    let version = reader.format_version();
    let (header_len, header_crc, payload_crc) = (
        reader.header_len(),
        reader.header_crc32(),
        reader.payload_crc32(),
    );
    let counting = reader.header().layout == bloom_format::LayoutId::Counting4;
    let mut parts = Parts::new(&configs, counting);
    let (_, h) = reader
        .read_payload_with(|chunk| {
            parts.feed(chunk);
            Ok::<(), bloom_format::ReadError>(())
        })
        .map_err(|e| files::read_failure(path, &e))?;
    let (m, k) = (h.bit_count, h.hash_count);
    let stages = parts.finish();
    // For a counting filter the "set bits" are the counters above zero: its projection's.
    let ones: u64 = stages.iter().map(|s| s.ones).sum();
    let saturated: u64 = stages.iter().map(|s| s.saturated).sum();
    let fill = estimate::fill_ratio(ones, m);
    let items: f64 = stages.iter().map(|s| s.items).sum();
    let fpr = match stages.as_slice() {
        [one] => one.fpr,
        // A chain's rate: a key is a false positive when any stage says maybe.
        _ => 1.0 - stages.iter().map(|s| 1.0 - s.fpr).product::<f64>(),
    };
    let first = match &configs {
        Configs::One(config) => Some(config),
        Configs::Stages(stages) => stages.first(),
    };
    // The format refuses a chain without stages before this point.
    let Some(first) = first else {
        return Err(crate::error::Failure::input(format!(
            "{}: a scalable filter without stages",
            files::shown(path)
        )));
    };
    let foreign = first.has_foreign_tables();
    let tables = if foreign {
        format!(
            "differ from this build's ({}): keys outside ASCII answer maybe",
            first.encoding().build_tables()
        )
    } else {
        "this build's".to_owned()
    };
    let standing = Standing::of(&h, &configs, fpr);
    // Guava's strategy and funnel, for a filter that `export --to guava` can write.
    let guava = bloom_format::guava_parameters(&h).ok();
    let mut out = Out::new();
    if args.json {
        let unicode = |v: Option<bloom_format::UnicodeVersion>| v.map(|v| v.to_string());
        let scalable = h.scalable.as_ref().map(|chain| {
            json!({
                "growth_factor": chain.growth,
                // Header fields: exactly as stored.
                "tightening_ratio": chain.tightening,
                "stage_count": chain.stages.len(),
                "capacity_so_far": standing.as_ref().map(|s| s.capacity_so_far),
                "stages": chain.stages.iter().zip(&stages).map(|(stage, counted)| json!({
                    "bit_count": stage.bit_count,
                    "hash_count": stage.hash_count,
                    "layout": layout_json(stage.layout, 0),
                    "planned_capacity": stage.plan.capacity,
                    "target_false_positive_rate": stage.plan.false_positive_rate,
                    "item_count": stage.item_count,
                    "set_bits": counted.ones,
                    "fill_ratio": number(estimate::fill_ratio(counted.ones, stage.bit_count)),
                    "estimated_items": number(counted.items),
                    "estimated_false_positive_rate": number(counted.fpr),
                })).collect::<Vec<_>>(),
            })
        });
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
            "unicode_tables_match_this_build": !foreign,
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
            "saturated_counters": counting.then_some(saturated),
            "fill_ratio": number(fill),
            "estimated_items": number(items),
            "estimated_false_positive_rate": number(fpr),
            "planned_capacity": h.plan.map(|p| p.capacity),
            "target_false_positive_rate": h.plan.map(|p| p.false_positive_rate),
            "false_positive_rate_limit": standing.as_ref().map(|s| number(s.rate_limit)),
            "remaining_capacity": standing.as_ref().map(|s| s.remaining),
            "over_capacity": standing.as_ref().map(|s| s.over),
            "scalable": scalable,
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
                "counters above zero: {ones}\nsaturated counters (at 15, never decremented): {saturated}"
            )
        } else {
            format!("set bits: {ones}")
        };
        let per_stage: String = stages
            .iter()
            .enumerate()
            .filter(|_| h.scalable.is_some())
            .map(|(i, s)| {
                format!(
                    "stage {i} bits: {} set, fill ratio {}, estimated items {}, estimated false-positive rate {}\n",
                    s.ones,
                    show(estimate::fill_ratio(s.ones, s.bits)),
                    show(s.items),
                    show(s.fpr),
                )
            })
            .collect();
        let capacity = standing.as_ref().map_or_else(
            || "capacity: not recorded (no plan in the snapshot)\n".to_owned(),
            |s| s.text(&h, fpr),
        );
        out.text(&format!(
            "{dump}{ones}\nfill ratio: {}\nestimated items: {}\nestimated false-positive rate: {}\n{per_stage}{capacity}unicode tables: {tables}\n{guava}checksums: ok (header and payload)\n",
            show(fill),
            show(items),
            show(fpr),
        ))?;
    }
    out.flush()
}

/// How a snapshot stands against the plan it records, judged as the filters judge
/// themselves ([`Capacity`], [`Capacity::of_chain`]).
struct Standing {
    /// Keys that fit before the plan is passed (for a chain: before it grows).
    remaining: u64,
    /// The estimated rate past which it is over, the estimate's noise allowed for.
    rate_limit: f64,
    over: bool,
    /// A chain's stages' capacities added up; a plain filter's capacity.
    capacity_so_far: u64,
    /// For a chain: the newest stage is past its capacity (the chain could not grow).
    over_items: bool,
    /// The estimated rate judged.
    rate: f64,
}

impl Standing {
    fn of(h: &Header, configs: &Configs, fpr: f64) -> Option<Self> {
        let plan = h.plan?;
        match (configs, &h.scalable) {
            (Configs::Stages(configs), Some(chain)) => {
                let items = chain.stages.iter().map(|s| s.item_count);
                let capacity =
                    Capacity::of_chain(plan.false_positive_rate, configs.iter().zip(items), fpr)?;
                Some(Self {
                    remaining: capacity.remaining(),
                    rate_limit: capacity.rate_limit,
                    over: capacity.is_over(),
                    rate: fpr,
                    capacity_so_far: chain
                        .stages
                        .iter()
                        .fold(0u64, |n, s| n.saturating_add(s.plan.capacity)),
                    over_items: capacity.is_over_items(),
                })
            }
            (Configs::One(config), _) => {
                let (layout, bits, k) = (config.layout(), config.bits(), config.hashes());
                let capacity = Capacity::from_estimate(plan, h.item_count, fpr, layout, bits, k);
                Some(Self {
                    remaining: capacity.remaining(),
                    rate_limit: capacity.rate_limit,
                    over: capacity.is_over(),
                    capacity_so_far: plan.capacity,
                    over_items: capacity.is_over_items(),
                    rate: fpr,
                })
            }
            // The header is a chain's exactly when its configurations are stages'.
            (Configs::Stages(_), None) => None,
        }
    }

    fn text(&self, h: &Header, fpr: f64) -> String {
        let verdict = if !self.over {
            "within plan"
        } else if h.scalable.is_none() {
            "OVER CAPACITY, rebuild it larger"
        } else if self.over_items && self.rate_limit >= self.rate {
            "OVER CAPACITY: its newest stage is past its plan, the chain could not grow (`bloom add` says why)"
        } else {
            "OVER CAPACITY: its rate is past its bound, and stays so until the chain is rebuilt from its keys"
        };
        let target = h.plan.map_or(0.0, |p| p.false_positive_rate);
        if h.scalable.is_some() {
            format!(
                "capacity: {} items in stages of {} in all ({} more before the chain grows); estimated false-positive rate {} against a bound of {}: {verdict}\n",
                h.item_count,
                self.capacity_so_far,
                self.remaining,
                show(fpr),
                show(target),
            )
        } else {
            format!(
                "capacity: {} of {} items ({} remaining); estimated false-positive rate {} against a target of {}: {verdict}\n",
                h.item_count,
                self.capacity_so_far,
                self.remaining,
                show(fpr),
                show(target),
            )
        }
    }
}

/// What was counted in one filter, or in one stage of a chain.
struct Counted {
    bits: u64,
    ones: u64,
    saturated: u64,
    items: f64,
    fpr: f64,
}

/// The counters of each part of the payload: one for a filter, one per stage of a chain,
/// each taking its own bytes of the stream in order.
struct Parts {
    parts: Vec<Part>,
    /// The part being fed, and the bytes it still takes.
    at: usize,
    left: u64,
}

struct Part {
    config: FilterConfig,
    /// Bytes of payload this part takes (`u64::MAX` for a lone filter: all of it).
    len: u64,
    counter: Counter,
}

enum Counter {
    Bits(estimate::FillCounter),
    Counters(Counters),
}

impl Parts {
    fn new(configs: &Configs, counting: bool) -> Self {
        let part = |config: &FilterConfig, len: u64| Part {
            config: config.clone(),
            len,
            counter: if counting {
                Counter::Counters(Counters::default())
            } else {
                Counter::Bits(estimate::FillCounter::new(
                    config.layout(),
                    config.bits(),
                    config.hashes(),
                ))
            },
        };
        let parts: Vec<Part> = match configs {
            Configs::One(config) => vec![part(config, u64::MAX)],
            Configs::Stages(stages) => stages.iter().map(|c| part(c, c.bits() / 8)).collect(),
        };
        let left = parts.first().map_or(0, |p| p.len);
        Self { parts, at: 0, left }
    }

    fn feed(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            let Some(part) = self.parts.get_mut(self.at) else {
                // More bytes than the stages take: the reader refuses the file at its end.
                return;
            };
            let take = usize::try_from(self.left).map_or(chunk.len(), |l| l.min(chunk.len()));
            let (now, rest) = chunk.split_at(take);
            match &mut part.counter {
                Counter::Bits(counter) => counter.feed(now),
                Counter::Counters(counters) => counters.feed(now),
            }
            chunk = rest;
            self.left -= take as u64;
            if self.left == 0 {
                self.at += 1;
                self.left = self.parts.get(self.at).map_or(0, |p| p.len);
            }
        }
    }

    fn finish(self) -> Vec<Counted> {
        self.parts
            .into_iter()
            .map(|part| {
                let (m, k) = (part.config.bits(), part.config.hashes());
                let (ones, saturated, fpr) = match &part.counter {
                    Counter::Bits(counter) => (counter.ones(), 0, counter.false_positive_rate()),
                    Counter::Counters(c) => (
                        c.nonzero,
                        c.saturated,
                        estimate::current_false_positive_rate(c.nonzero, m, k),
                    ),
                };
                Counted {
                    bits: m,
                    ones,
                    saturated,
                    items: estimate::estimated_items(ones, m, k),
                    fpr,
                }
            })
            .collect()
    }
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
