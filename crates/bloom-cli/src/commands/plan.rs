//! `bloom plan`: the parameters a filter needs.

use bloom_core::{FilterParams, Layout, MAX_HASHES};

use crate::cli::PlanArgs;
use crate::error::{CmdResult, Failure};
use crate::output::{Out, show};

pub(crate) fn run(args: &PlanArgs) -> CmdResult {
    let plan = |layout| FilterParams::planned(layout, args.items, args.fpr, MAX_HASHES);
    let (standard, blocked) = (plan(Layout::Standard), plan(Layout::Blocked512));
    if let (Err(e), Err(_)) = (&standard, &blocked) {
        return Err(Failure::usage(format!("cannot plan: {e}")));
    }
    let cell = |params: &Result<FilterParams, _>, value: &dyn Fn(&FilterParams) -> String| {
        params.as_ref().map_or_else(|_| "-".to_owned(), value)
    };
    let row = |name: &str, value: &dyn Fn(&FilterParams) -> String| {
        format!(
            "{name:<32}{:<18}{}\n",
            cell(&standard, value),
            cell(&blocked, value)
        )
    };
    let mut text = format!(
        "items: {}\ntarget false-positive rate: {}\n\n",
        args.items,
        show(args.fpr)
    );
    text += &format!("{:<32}{:<18}{}\n", "layout", "standard", "blocked-512");
    text += &row("bits (m)", &|p| p.bits().to_string());
    text += &row("positions per key (k)", &|p| p.hashes().to_string());
    text += &row("bytes", &|p| p.byte_len().to_string());
    text += &row("bits per key", &|p| show(p.bits_per_key(args.items)));
    text += &row("predicted false-positive rate", &|p| {
        show(p.predicted_false_positive_rate(args.items))
    });
    text += &row("cache lines per key", &|p| match p.layout() {
        Layout::Standard => p.hashes().to_string(),
        _ => "1".to_owned(),
    });
    for (layout, params) in [("standard", &standard), ("blocked-512", &blocked)] {
        if let Err(e) = params {
            text += &format!("{layout}: {e}\n");
        }
    }
    let mut out = Out::new();
    out.text(&text)?;
    out.flush()
}
