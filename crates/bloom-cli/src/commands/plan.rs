//! `bloom plan`: the parameters a filter needs.

use bloom_core::{FilterParams, Layout};

use crate::cli::PlanArgs;
use crate::error::{CmdResult, Failure};
use crate::output::{Out, layout_json, layout_of, number, show};

pub(crate) fn run(args: &PlanArgs) -> CmdResult {
    let plan = |layout| FilterParams::planned(layout, args.items, args.fpr);
    let (standard, blocked) = (plan(Layout::Standard), plan(Layout::Blocked512));
    if let (Err(e), Err(_)) = (&standard, &blocked) {
        return Err(Failure::usage(format!("cannot plan: {e}")));
    }
    let cell = |params: &Result<FilterParams, _>, value: &dyn Fn(&FilterParams) -> String| {
        params.as_ref().map_or_else(|_| "-".to_owned(), value)
    };
    // The counting filter (`build --counting`) has the standard layout's m and k, with four
    // bits per position: its cells come from the standard plan.
    let row = |name: &str,
               value: &dyn Fn(&FilterParams) -> String,
               counting: &dyn Fn(&FilterParams) -> String| {
        format!(
            "{name:<32}{:<18}{:<18}{}\n",
            cell(&standard, value),
            cell(&blocked, value),
            cell(&standard, counting)
        )
    };
    let mut text = format!(
        "items: {}\ntarget false-positive rate: {}\n\n",
        args.items,
        show(args.fpr)
    );
    text += &format!(
        "{:<32}{:<18}{:<18}{}\n",
        "layout", "standard", "blocked-512", "counting-4bit"
    );
    let bits = |p: &FilterParams| p.bits().to_string();
    let hashes = |p: &FilterParams| p.hashes().to_string();
    let rate = |p: &FilterParams| show(p.predicted_false_positive_rate(args.items));
    text += &row("bits (m)", &bits, &|p| format!("{} counters", p.bits()));
    text += &row("positions per key (k)", &hashes, &hashes);
    text += &row("bytes", &|p| p.byte_len().to_string(), &|p| {
        p.bits().div_ceil(2).to_string()
    });
    text += &row(
        "bits per key",
        &|p| show(p.bits_per_key(args.items)),
        &|p| show(4.0 * p.bits_per_key(args.items)),
    );
    text += &row("predicted false-positive rate", &rate, &rate);
    text += &row(
        "cache lines per key",
        &|p| match p.layout() {
            Layout::Standard => p.hashes().to_string(),
            _ => "1".to_owned(),
        },
        &hashes,
    );
    for (layout, params) in [("standard", &standard), ("blocked-512", &blocked)] {
        if let Err(e) = params {
            text += &format!("{layout}: {e}\n");
        }
    }
    let mut out = Out::new();
    if args.json {
        out.text(&format!("{:#}\n", plan_json(args, &standard, &blocked)))?;
    } else {
        out.text(&text)?;
    }
    out.flush()
}

/// `plan --json`: the target and one object per layout, each a plan or why there is none.
fn plan_json(
    args: &PlanArgs,
    standard: &Result<FilterParams, bloom_core::ParamsError>,
    blocked: &Result<FilterParams, bloom_core::ParamsError>,
) -> serde_json::Value {
    let items = args.items;
    let entry = |layout: serde_json::Value,
                 params: &Result<FilterParams, bloom_core::ParamsError>,
                 counting: bool| match params {
        Ok(p) => {
            let rate = number(p.predicted_false_positive_rate(items));
            let (bytes, per_key) = if counting {
                (p.bits().div_ceil(2), 4.0 * p.bits_per_key(items))
            } else {
                (p.byte_len(), p.bits_per_key(items))
            };
            let lines = match (counting, p.layout()) {
                (false, Layout::Blocked512) => 1,
                _ => p.hashes(),
            };
            serde_json::json!({
                "layout": layout,
                "bit_count": p.bits(),
                "hash_count": p.hashes(),
                "bytes": bytes,
                "bits_per_key": number(per_key),
                "predicted_false_positive_rate": rate,
                "cache_lines_per_key": lines,
            })
        }
        Err(e) => serde_json::json!({"layout": layout, "error": e.to_string()}),
    };
    serde_json::json!({
        "items": items,
        "target_false_positive_rate": number(args.fpr),
        "plans": [
            entry(layout_of(Layout::Standard), standard, false),
            entry(layout_of(Layout::Blocked512), blocked, false),
            entry(layout_json(bloom_format::LayoutId::Counting4, 0), standard, true),
        ],
    })
}
