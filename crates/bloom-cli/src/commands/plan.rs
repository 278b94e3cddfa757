//! `bloom plan`: the parameters a filter needs.

use bloom_core::{FilterParams, Layout, ParamsError};
use serde_json::{Value, json};

use crate::cli::PlanArgs;
use crate::error::{CmdResult, Failure};
use crate::output::{Out, layout_json, layout_of, number, show};

/// One column of the plan: a layout and what it needs.
struct Column {
    name: String,
    layout: Value,
    params: Result<FilterParams, ParamsError>,
    /// Counters of 4 bits instead of bits (the counting filter, placed as the standard
    /// layout places bits).
    counting: bool,
}

impl Column {
    fn of(layout: Layout, args: &PlanArgs) -> Self {
        Self {
            name: layout.to_string(),
            layout: layout_of(layout),
            params: FilterParams::planned(layout, args.items, args.fpr),
            counting: false,
        }
    }

    /// A cell of the column: `value` of its plan, or `-` without one.
    fn cell(&self, value: impl Fn(&FilterParams, bool) -> String) -> String {
        self.params
            .as_ref()
            .map_or_else(|_| "-".to_owned(), |p| value(p, self.counting))
    }
}

pub(crate) fn run(args: &PlanArgs) -> CmdResult {
    let columns = match args.layout {
        Some(layout) => vec![Column::of(layout, args)],
        None => {
            let standard = Column::of(Layout::Standard, args);
            // The counting filter (`build --counting`) has the standard layout's m and k,
            // with four bits per position: its cells come from the standard plan.
            let counting = Column {
                name: "counting-4bit".to_owned(),
                layout: layout_json(bloom_format::LayoutId::Counting4, 0),
                params: standard.params.clone(),
                counting: true,
            };
            vec![
                standard,
                Column::of(Layout::Blocked512, args),
                Column::of(Layout::SplitBlock256, args),
                Column::of(Layout::SplitBlock512, args),
                counting,
            ]
        }
    };
    // No layout can reach the target: the first one's reason.
    if columns.iter().all(|c| c.params.is_err())
        && let Err(e) = &columns[0].params
    {
        return Err(Failure::usage(format!("cannot plan: {e}")));
    }
    let line = |name: &str, cells: Vec<String>| {
        let mut line = format!("{name:<32}");
        let last = cells.len().saturating_sub(1);
        for (i, cell) in cells.into_iter().enumerate() {
            if i == last {
                line.push_str(&cell);
            } else {
                line.push_str(&format!("{cell:<18}"));
            }
        }
        line.push('\n');
        line
    };
    let row = |name: &str, value: &dyn Fn(&FilterParams, bool) -> String| {
        line(name, columns.iter().map(|c| c.cell(value)).collect())
    };
    let items = args.items;
    let mut text = format!(
        "items: {items}\ntarget false-positive rate: {}\n\n",
        show(args.fpr)
    );
    text += &line("layout", columns.iter().map(|c| c.name.clone()).collect());
    text += &row("bits (m)", &|p, counting| {
        if counting {
            format!("{} counters", p.bits())
        } else {
            p.bits().to_string()
        }
    });
    text += &row("positions per key (k)", &|p, _| p.hashes().to_string());
    text += &row("bytes", &|p, counting| bytes(p, counting).to_string());
    text += &row("bits per key", &|p, counting| {
        show(per_key(p, counting, items))
    });
    text += &row("predicted false-positive rate", &|p, _| {
        show(p.predicted_false_positive_rate(items))
    });
    text += &row("cache lines per key", &|p, counting| {
        cache_lines(p, counting).to_string()
    });
    for column in &columns {
        if let (Err(e), false) = (&column.params, column.counting) {
            text += &format!("{}: {e}\n", column.name);
        }
    }
    let (_, default) = bloom_core::default_rule_and_layout(args.fpr);
    text += &format!("default layout for this rate: {default}\n");
    let mut out = Out::new();
    if args.json {
        let plans: Vec<Value> = columns
            .iter()
            .map(|c| match &c.params {
                Ok(p) => json!({
                    "layout": c.layout,
                    "bit_count": p.bits(),
                    "hash_count": p.hashes(),
                    "bytes": bytes(p, c.counting),
                    "bits_per_key": number(per_key(p, c.counting, items)),
                    "predicted_false_positive_rate": number(p.predicted_false_positive_rate(items)),
                    "cache_lines_per_key": cache_lines(p, c.counting),
                }),
                Err(e) => json!({"layout": c.layout, "error": e.to_string()}),
            })
            .collect();
        let value = json!({
            "items": items,
            "target_false_positive_rate": number(args.fpr),
            "default_layout": default.to_string(),
            "plans": plans,
        });
        out.text(&format!("{value:#}\n"))?;
    } else {
        out.text(&text)?;
    }
    out.flush()
}

/// The payload bytes: a bit per position, or 4 for a counting filter.
fn bytes(p: &FilterParams, counting: bool) -> u64 {
    if counting {
        p.bits().div_ceil(2)
    } else {
        p.byte_len()
    }
}

fn per_key(p: &FilterParams, counting: bool, items: u64) -> f64 {
    let bits = p.bits_per_key(items);
    if counting { 4.0 * bits } else { bits }
}

/// Cache lines a probe touches: one for the blocked layout, `k` otherwise.
fn cache_lines(p: &FilterParams, counting: bool) -> u32 {
    match (counting, p.layout()) {
        (false, Layout::Blocked512 | Layout::SplitBlock256 | Layout::SplitBlock512) => 1,
        _ => p.hashes(),
    }
}
