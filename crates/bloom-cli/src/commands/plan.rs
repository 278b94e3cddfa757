//! `bloom plan`: the parameters a filter needs.

use bloom_core::FilterParams;

use crate::cli::PlanArgs;
use crate::error::{CmdResult, Failure};
use crate::output::{Out, show};

pub(crate) fn run(args: &PlanArgs) -> CmdResult {
    let params = FilterParams::for_false_positive_rate(args.items, args.fpr)
        .map_err(|e| Failure::usage(format!("cannot plan: {e}")))?;
    let mut out = Out::new();
    out.text(&format!(
        "items: {}\ntarget false-positive rate: {}\nbits (m): {}\npositions per key (k): {}\nbytes: {}\nbits per key: {}\npredicted false-positive rate: {}\n",
        args.items,
        show(args.fpr),
        params.bits(),
        params.hashes(),
        params.byte_len(),
        show(params.bits_per_key(args.items)),
        show(params.predicted_false_positive_rate(args.items)),
    ))?;
    out.flush()
}
