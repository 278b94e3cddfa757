//! The values of the command line that clap cannot check alone (rates, salts, sizes,
//! timeouts), and the defaults a command picks from them (rule, layout, planned `m` and `k`).

use bloom_core::{FilterParams, Layout, PositionRule, Salt};

/// A rate strictly between 0 and 1 (NaN and infinities refused).
pub(super) fn parse_rate(text: &str) -> Result<f64, String> {
    let rate: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number"))?;
    if rate > 0.0 && rate < 1.0 {
        Ok(rate)
    } else if rate == 0.0 && text.bytes().any(|b| matches!(b, b'1'..=b'9')) {
        // A positive rate too small for a double (1e-400) reads as 0.
        Err(format!(
            "{text} is below the smallest rate a double can hold (about 5e-324)"
        ))
    } else {
        Err(format!("{text} is not strictly between 0 and 1"))
    }
}

/// `none`, `random`, or up to 32 bytes of hex.
pub(super) fn parse_salt(text: &str) -> Result<Salt, String> {
    match text {
        "none" => Ok(Salt::default()),
        "random" => Salt::random().map_err(|e| e.to_string()),
        hex => {
            let bad = || format!("{hex:?} is not `none`, `random` or an even number of hex digits");
            let bytes = bloom_format::unhex(hex)
                .filter(|b| !b.is_empty())
                .ok_or_else(bad)?;
            Salt::new(&bytes).map_err(|e| e.to_string())
        }
    }
}

/// A byte count with an optional K, M, G or T suffix (powers of 1024), optionally followed
/// by `B` or `iB`: `4096`, `64K`, `1G`, `8GiB`.
pub(super) fn parse_size(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not a size such as 4096, 64K, 1G or 8GiB");
    let lower = text.trim().to_ascii_lowercase();
    let digits_end = lower
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(lower.len());
    let (digits, unit) = lower.split_at(digits_end);
    let shift = match unit {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad()),
    };
    let value: u64 = digits.parse().map_err(|_| bad())?;
    value
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{text} is too large"))
}

/// `--timeout`: seconds, more than 0 and at most a day.
pub(super) fn parse_timeout(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 86_400.0 => Ok(s),
        _ => Err(format!(
            "{text} is not a number of seconds above 0 and at most 86400 (a day)"
        )),
    }
}

/// `--max-key-bytes`: a size, at most 1 GiB (a key is a record id, not a file).
pub(super) fn parse_key_limit(text: &str) -> Result<u64, String> {
    let size = parse_size(text)?;
    if size == 0 || size > 1 << 30 {
        return Err(format!("{text} is not between 1 byte and 1G"));
    }
    Ok(size)
}

/// Plans `m` and `k` for `items` keys at `fpr`: as Guava 31 sizes for Guava's rules (so the
/// JVM side gets the filter it would have made), otherwise with the layout's own formula, in
/// the layout asked for or [`planned_layout`].
pub(crate) fn plan_params(
    layout: Option<Layout>,
    rule: PositionRule,
    items: u64,
    fpr: f64,
) -> Result<FilterParams, String> {
    if rule.is_guava() {
        if let Some(layout) = layout.filter(|&l| l != Layout::Standard) {
            return Err(format!(
                "position rule {rule} works with the standard layout only, not {layout}"
            ));
        }
        return FilterParams::for_guava(items, fpr).map_err(|e| e.to_string());
    }
    FilterParams::planned_for(rule, planned_layout(layout, rule, fpr), items, fpr)
        .map_err(|e| e.to_string())
}

/// The layout asked for, or the default for `rule` planned for `fpr`
/// ([`Layout::default_for`]: split-block-512 where it costs at most 10% more bits than
/// standard, else blocked-512 where a block reaches the rate, else standard).
pub(crate) fn planned_layout(asked: Option<Layout>, rule: PositionRule, fpr: f64) -> Layout {
    asked.unwrap_or_else(|| Layout::default_for(rule, fpr))
}

/// The rule asked for, or the default: sha256-double for a salted filter, the fastest for
/// the layout asked for, or for the rate when it is planned (`fpr`), else xxh3-128.
pub(crate) fn rule_for(
    asked: Option<PositionRule>,
    layout: Option<Layout>,
    salted: bool,
    fpr: Option<f64>,
) -> PositionRule {
    match (asked, layout, fpr) {
        (Some(rule), _, _) => rule,
        (None, _, _) if salted => PositionRule::Sha256Double,
        (None, Some(layout), _) => PositionRule::fastest_for(layout),
        (None, None, Some(fpr)) => bloom_core::default_rule_and_layout(fpr).0,
        (None, None, None) => PositionRule::Xxh3_128,
    }
}

/// The layout asked for, or the default for `rule` with explicit m and k: blocked-512 where
/// the rule works with it (the split-block layouts take k = 8 only).
pub(crate) fn layout_for(asked: Option<Layout>, rule: PositionRule) -> Layout {
    asked.unwrap_or(if rule.is_64_bit() {
        // The 64-bit rules take only split blocks (k = 8), whatever the rate.
        Layout::default_for(rule, bloom_core::DEFAULT_FALSE_POSITIVE_RATE)
    } else if rule.supports(Layout::Blocked512) {
        Layout::Blocked512
    } else {
        Layout::Standard
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_rates_and_salts() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("8GiB"), Ok(8 << 30));
        assert_eq!(parse_size("2tb"), Ok(2 << 40));
        assert!(parse_size("lots").is_err());
        for bad in ["1bbbbb", "1KiBiB", "1 K", "K", "1Q", "-1"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(parse_key_limit("2G").is_err());
        assert!(parse_key_limit("0").is_err());
        assert!(parse_size("99999999T").is_err());
        assert!(parse_rate("0.5").is_ok());
        for bad in ["0", "1", "1.5", "-0.1", "NaN", "inf", "x"] {
            assert!(parse_rate(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_salt("0aff").unwrap().as_bytes(), [0x0a, 0xff]);
        for bad in ["xyz", "abc", "", &"00".repeat(33)] {
            assert!(parse_salt(bad).is_err(), "{bad}");
        }
    }
}
