//! `bloom build`: a new snapshot from keys.

use bloom_core::{
    BloomFilter, CountingBloomFilter, Filter as _, FilterConfig, FilterParams, KeyEncoding, Layout,
    PositionRule, Salt, ScalableBloomFilter, ScalableError,
};

use crate::cli::{BuildArgs, Size};
use crate::commands::insert_from;
use crate::error::{CmdResult, Failure};
use crate::files::{self, AnyFilter, Reported as _};
use crate::signals::Signals;

pub(crate) fn run(args: &BuildArgs, signals: &Signals) -> CmdResult {
    if args.scalable {
        return run_scalable(args, signals);
    }
    let planned_fpr = match args.size.size()? {
        Size::Planned { fpr, .. } => Some(fpr),
        Size::Explicit { .. } => None,
    };
    let layout_asked = if args.counting {
        Some(Layout::Standard)
    } else {
        args.layout
    };
    let rule = crate::cli::rule_for(args.rule, layout_asked, !args.salt.is_empty(), planned_fpr);
    warn_if_salt_does_not_protect(rule, &args.salt);
    // Counters are placed as the standard layout places bits.
    let layout = if args.counting {
        match args.layout {
            None | Some(Layout::Standard) => Some(Layout::Standard),
            Some(other) => {
                return Err(Failure::usage(format!(
                    "--counting uses the standard layout's positions; the {other} layout has no counting form"
                )));
            }
        }
    } else {
        args.layout
    };
    if args.counting && rule.is_guava() {
        return Err(Failure::usage(format!(
            "--counting cannot use the {rule} rule: Guava's filters have no counting form"
        )));
    }
    let params = match args.size.size()? {
        Size::Planned { items, fpr } => crate::cli::plan_params(layout, rule, items, fpr),
        Size::Explicit { bits, hashes } => {
            FilterParams::with_layout(crate::cli::layout_for(layout, rule), bits, hashes)
                .map_err(|e| e.to_string())
        }
    }
    .map_err(|e| Failure::usage(format!("invalid parameters: {e}")))?;
    let encoding = match args.encoding {
        Some(encoding) => encoding,
        None if rule.is_guava() => KeyEncoding::Utf8,
        None => KeyEncoding::Nfc,
    };
    if rule.is_guava() && bloom_format::GuavaFunnel::from_encoding(encoding.id()).is_none() {
        return Err(Failure::usage(format!(
            "the {} rule needs the encoding of a Guava funnel (utf8, utf16le or bytes), not {encoding}",
            rule
        )));
    }
    let plan = match args.size.size()? {
        Size::Planned { items, fpr } => bloom_core::Plan::new(items, fpr),
        Size::Explicit { .. } => None,
    };
    let config = FilterConfig::new(params)
        .with_plan(plan)
        .with_encoding(encoding)
        .with_salt(args.salt.clone())
        .and_then(|c| c.with_rule(rule))
        .map_err(|e| Failure::usage(format!("invalid parameters: {e}")))?;
    // A counting filter holds 4 bits per position.
    let bytes = if args.counting {
        params.bits().div_ceil(2)
    } else {
        params.byte_len()
    };
    if bytes > args.limit.max_bytes {
        return Err(Failure::usage(format!(
            "the filter would be {bytes} bytes, over --max-bytes {}; raise --max-bytes to build it (and to read it later)",
            args.limit.max_bytes
        )));
    }
    // Taken before the work, so that a concurrent `add` to the same file waits for the new
    // file instead of being overwritten by it.
    let output = files::output(&args.output, !args.lock.no_wait)?;
    let mut filter = if args.counting {
        AnyFilter::Counting(CountingBloomFilter::new(config).map_err(Failure::environment)?)
    } else {
        AnyFilter::Plain(BloomFilter::new(config).map_err(Failure::environment)?)
    };
    let keys = match args.input.source() {
        Some(source) => insert_from(&mut filter, &source)?,
        None => 0,
    };
    finish(args, &output, &filter, keys, signals)
}

/// A salt is asked for against chosen keys, which only the salted SHA-256 rule resists: says
/// so when it is given to an xxHash rule.
fn warn_if_salt_does_not_protect(rule: PositionRule, salt: &Salt) {
    if matches!(
        rule,
        PositionRule::Xxh3_128 | PositionRule::Xxh3_64 | PositionRule::Xxh64
    ) && !salt.is_empty()
    {
        crate::warn(&format!(
            "warning: a salt does not protect {rule} against chosen keys (xxHash has seed-independent collisions); use --rule sha256-double for keys an adversary picks"
        ));
    }
}

/// Writes the new filter, after its plan is checked (a warning, or with `--strict` a
/// refusal), and says what was built.
fn finish(
    args: &BuildArgs,
    output: &files::Output,
    filter: &AnyFilter,
    keys: u64,
    signals: &Signals,
) -> CmdResult {
    let header = filter.header(args.generation);
    filter.check_capacity(&output.name(), args.full.strict, args.limit.max_bytes)?;
    files::write(output, filter, header, signals)?;
    crate::warn(&filter.summary(&format!(
        "built {} from {keys} key{}",
        output.name(),
        if keys == 1 { "" } else { "s" }
    )));
    Ok(())
}

/// `build --scalable`: a chain of one stage, grown by the keys given, up to `--max-bytes`.
fn run_scalable(args: &BuildArgs, signals: &Signals) -> CmdResult {
    let Size::Planned { items, fpr } = args.size.size()? else {
        return Err(Failure::usage(
            "--scalable is planned with --items N --fpr P (the first stage's capacity and the whole chain's rate)",
        ));
    };
    // No layout: each stage gets the one that suits its rate.
    let rule = crate::cli::rule_for(args.rule, None, !args.salt.is_empty(), None);
    warn_if_salt_does_not_protect(rule, &args.salt);
    let mut builder = ScalableBloomFilter::builder(items)
        .false_positive_rate(fpr)
        .rule(rule)
        .encoding(args.encoding.unwrap_or(KeyEncoding::Nfc))
        .salt(args.salt.clone())
        .growth_limit(args.limit.max_bytes);
    if let Some(growth) = args.growth {
        builder = builder.growth(growth);
    }
    if let Some(tightening) = args.tightening {
        builder = builder.tightening(tightening);
    }
    // The first stage is checked against --max-bytes before it is allocated.
    let chain = builder.build().map_err(|e| match e {
        ScalableError::Build(bloom_core::BuildError::Alloc(e)) => Failure::environment(e),
        ScalableError::OverLimit { bytes, limit } => Failure::usage(format!(
            "the first stage would be {bytes} bytes, over --max-bytes {limit}; raise --max-bytes to build it (and to read it later)"
        )),
        other => Failure::usage(format!("invalid parameters: {other}")),
    })?;
    let output = files::output(&args.output, !args.lock.no_wait)?;
    let mut filter = AnyFilter::Scalable(chain);
    let keys = match args.input.source() {
        Some(source) => insert_from(&mut filter, &source)?,
        None => 0,
    };
    finish(args, &output, &filter, keys, signals)
}
