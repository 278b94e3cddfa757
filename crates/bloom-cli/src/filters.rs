//! What a command says about the filter it holds (bloom-core's [`AnyFilter`]) after it
//! wrote it (the summary line, the verdict against its
//! plan), and [`Answering`], what answers `check`.

use bloom_core::{BloomFilter, Filter, GrowthStop, ScalableBloomFilter};

use crate::error::{CmdResult, Failure};

pub(crate) use bloom_core::AnyFilter;

/// What a command says about the filter it wrote: the summary line, the verdict against its
/// plan, and what answers `check`. The rest ([`Filter`] and the key methods) is
/// [`AnyFilter`]'s own.
pub(crate) trait Reported {
    /// The one-line summary of a command that wrote this filter: `what` (say, "built
    /// seen.bloom from 1000 keys"), then its size and estimates.
    fn summary(&self, what: &str) -> String;

    /// Past its plan: a warning on standard error, or with `strict` a refusal (nothing is
    /// written). `name` is the snapshot as the summary names it; `max_bytes` the
    /// `--max-bytes` a chain may grow to.
    fn check_capacity(&self, name: &str, strict: bool, max_bytes: u64) -> CmdResult;

    /// What answers for this filter: the plain filter that answers as this one does (a
    /// counting filter's projection, a quarter of its size), or the chain.
    fn into_answering(self) -> CmdResult<Answering>;
}

impl Reported for AnyFilter {
    fn summary(&self, what: &str) -> String {
        if let Self::Scalable(chain) = self {
            let stages = chain.stages().len();
            return format!(
                "{what}: a scalable filter of {stages} stage{}, m = {} bits ({} bytes) in all, {} in it ({} more before it grows), estimated false-positive rate {} (bound {})",
                if stages == 1 { "" } else { "s" },
                chain.positions(),
                chain.payload_len(),
                about_keys(self.estimated_items()),
                chain.remaining_capacity().unwrap_or(0),
                crate::output::show(self.estimated_false_positive_rate()),
                crate::output::show(chain.plan().false_positive_rate),
            );
        }
        let config = self.config();
        let bytes = self.payload_len();
        format!(
            "{what}: m = {} bits ({bytes} bytes), k = {}, {} in it, estimated false-positive rate {}",
            config.bits(),
            config.hashes(),
            about_keys(self.estimated_items()),
            crate::output::show(self.estimated_false_positive_rate()),
        )
    }

    fn check_capacity(&self, name: &str, strict: bool, max_bytes: u64) -> CmdResult {
        let over = match self {
            Self::Scalable(chain) => chain_over(name, chain, max_bytes),
            _ => self.capacity().filter(bloom_core::Capacity::is_over).map(|capacity| {
                let plan = capacity.plan;
                let why = format!(
                    "{name} is over its plan: {} items for a capacity of {}, estimated false-positive rate {} against a target of {}",
                    capacity.items,
                    plan.capacity,
                    crate::output::show(capacity.estimated_false_positive_rate),
                    crate::output::show(plan.false_positive_rate),
                );
                let remedy =
                    "build a larger filter, or a scalable one (`bloom build --scalable`)".to_owned();
                (why, remedy)
            }),
        };
        let Some((why, remedy)) = over else {
            return Ok(());
        };
        if strict {
            return Err(Failure::input(format!(
                "{why}; --strict: nothing was written ({remedy}, or leave out --strict)"
            )));
        }
        crate::warn(&format!(
            "warning: {why}; \"maybe\" answers will be more frequent than planned: {remedy}"
        ));
        Ok(())
    }

    fn into_answering(self) -> CmdResult<Answering> {
        match self {
            Self::Plain(f) => Ok(Answering::One(f)),
            Self::Counting(f) => f
                .to_bloom_filter()
                .map(Answering::One)
                .map_err(Failure::environment),
            Self::Scalable(f) => Ok(Answering::Chain(f)),
        }
    }
}

/// A filter that only answers queries: one plain filter, or a chain.
pub(crate) enum Answering {
    One(BloomFilter),
    Chain(ScalableBloomFilter),
}

/// Why a chain is over its plan and what to do about it, or `None` when it is not.
fn chain_over(name: &str, chain: &ScalableBloomFilter, max_bytes: u64) -> Option<(String, String)> {
    // One pass over the bits: the verdict and the rate it judged.
    let capacity = chain.capacity().filter(bloom_core::Capacity::is_over)?;
    let rate = capacity.estimated_false_positive_rate;
    let target = chain.plan().false_positive_rate;
    let rebuild =
        "build a new chain from its keys with a larger --items (or --growth, or --tightening)";
    let over_rate = capacity.is_over_rate();
    let stop = chain.growth_stop();
    let mut why = format!("{name} is over its plan:");
    if capacity.is_over_items() {
        let (items, capacity) = (capacity.items, capacity.plan.capacity);
        let cause = match stop {
            Some(GrowthStop::OverLimit {
                stage_bytes,
                total_bytes,
                ..
            }) => format!(
                "its next stage needs {stage_bytes} bytes, which would make it {total_bytes} bytes, past --max-bytes {max_bytes}"
            ),
            Some(stop) => stop.to_string(),
            None => "memory for its next stage could not be allocated".to_owned(),
        };
        why.push_str(&format!(
            " it could not grow ({cause}), so its newest stage holds {items} items for a capacity of {capacity};",
        ));
    }
    why.push_str(&format!(
        " estimated false-positive rate {} against a bound of {}",
        crate::output::show(rate),
        crate::output::show(target),
    ));
    let remedy = match stop {
        // Past its bound, raising the limit lets the chain grow but not recover: the keys an
        // overfull stage answers "maybe" for are never inserted again.
        _ if over_rate => format!("its rate stays over its bound until it is rebuilt: {rebuild}"),
        Some(GrowthStop::OverLimit { total_bytes, .. }) => format!(
            "raise --max-bytes to at least {total_bytes} on the next `bloom add` to let it grow, or {rebuild}"
        ),
        Some(_) => rebuild.to_owned(),
        None => format!("free memory and add again, or {rebuild}"),
    };
    Some((why, remedy))
}

/// "about N keys" for an estimated count: rounded, and "key" for one.
fn about_keys(estimate: f64) -> String {
    let rounded = format!("{estimate:.0}");
    let s = if rounded == "1" { "" } else { "s" };
    format!("about {rounded} key{s}")
}
