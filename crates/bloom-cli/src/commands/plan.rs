//! `bloom plan`: the parameters a filter needs.

use bloom_core::{FilterParams, Layout};

use crate::cli::PlanArgs;
use crate::error::{CmdResult, Failure};
use crate::output::{Out, show};

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
    out.text(&text)?;
    out.flush()
}
