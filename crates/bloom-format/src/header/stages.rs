//! The fields format version 3 adds: the plan and the scalable layout's growth, tightening
//! and stage directory, decoded (step 5.6) and checked (steps 5.13 and 5.14).

use crate::error::DecodeError;
use crate::ids::{FormatVersion, IdKind, LayoutId};
use crate::plan::{MAX_GROWTH, MAX_STAGES, Plan, Scalable, Stage};

use super::Header;
use super::decode::{Fields, unknown, validate};
use super::layout::{self, STAGE_LEN, V3_CAPACITY, V3_GROWTH, V3_RATE, V3_TIGHTENING};

/// The version 3 plan: both fields zero for "not recorded", else both set (their values are
/// checked by [`validate`]).
pub(super) fn decode_plan(fields: &Fields<'_>) -> Result<Option<Plan>, DecodeError> {
    let capacity = fields.u64(V3_CAPACITY);
    let rate = fields.u64(V3_RATE);
    match (capacity, rate) {
        (0, 0) => Ok(None),
        (0, _) => Err(DecodeError::InvalidParameter {
            field: "planned capacity",
            found: 0,
            expected: "at least 1 when a target false-positive rate is recorded".into(),
        }),
        (_, 0) => Err(DecodeError::InvalidRate {
            field: "target false-positive rate",
            found_bits: 0,
            expected: "above 0 and below 1 when a planned capacity is recorded".into(),
        }),
        (capacity, rate) => Ok(Some(Plan {
            capacity,
            false_positive_rate: f64::from_bits(rate),
        })),
    }
}

/// The version 3 growth, tightening and stage directory: all zero for a filter that is not
/// scalable (their values are checked by [`validate`]).
pub(super) fn decode_scalable(
    fields: &Fields<'_>,
    stage_count: usize,
) -> Result<Option<Scalable>, DecodeError> {
    let growth = fields.u32(V3_GROWTH);
    let tightening = fields.u64(V3_TIGHTENING);
    if growth == 0 && tightening == 0 && stage_count == 0 {
        return Ok(None);
    }
    let mut stages = Vec::with_capacity(stage_count);
    for i in 0..stage_count {
        let at = layout::V3_LAYOUT.fixed_len + STAGE_LEN * i;
        let layout = LayoutId::try_from(fields.u16(at + 12))
            .map_err(|found| unknown(IdKind::Layout, found, LayoutId::ALL))?;
        for offset in at + 14..at + 16 {
            let found = fields.u8(offset);
            if found != 0 {
                return Err(DecodeError::NonZeroReserved {
                    offset: offset as u64,
                    found,
                });
            }
        }
        stages.push(Stage {
            bit_count: fields.u64(at),
            hash_count: fields.u32(at + 8),
            layout,
            plan: Plan {
                capacity: fields.u64(at + 16),
                false_positive_rate: f64::from_bits(fields.u64(at + 24)),
            },
            item_count: fields.u64(at + 32),
        });
    }
    Ok(Some(Scalable {
        growth,
        tightening: f64::from_bits(tightening),
        stages,
    }))
}

/// 5.13: a recorded plan has a capacity of at least 1 and a rate above 0 and below 1; only
/// version 3 records one.
pub(super) fn validate_plan(header: &Header, version: FormatVersion) -> Result<(), DecodeError> {
    let Some(plan) = header.plan else {
        return Ok(());
    };
    if version < FormatVersion::V3 {
        return Err(DecodeError::InvalidParameter {
            field: "planned capacity",
            found: plan.capacity,
            expected: format!("none: format version {version} cannot record a plan"),
        });
    }
    check_plan(plan, "planned capacity", "target false-positive rate")
}

fn check_plan(
    plan: Plan,
    capacity_field: &'static str,
    rate_field: &'static str,
) -> Result<(), DecodeError> {
    if plan.capacity == 0 {
        return Err(DecodeError::InvalidParameter {
            field: capacity_field,
            found: 0,
            expected: "at least 1".into(),
        });
    }
    if !crate::plan::is_rate(plan.false_positive_rate) {
        return Err(DecodeError::InvalidRate {
            field: rate_field,
            found_bits: plan.false_positive_rate.to_bits(),
            expected: "a number above 0 and below 1".into(),
        });
    }
    Ok(())
}

/// 5.14: a scalable filter's growth, tightening and stages, each stage checked as a filter
/// of its own layout, and the totals the header records.
pub(super) fn validate_stages(header: &Header, version: FormatVersion) -> Result<(), DecodeError> {
    let invalid = |field, found, expected: String| {
        Err(DecodeError::InvalidParameter {
            field,
            found,
            expected,
        })
    };
    let Some(scalable) = &header.scalable else {
        return invalid(
            "stage count",
            0,
            format!("1 to {MAX_STAGES} for the scalable layout"),
        );
    };
    // Check 1, in the order docs/format.md gives: the stage count first.
    let stages = &scalable.stages;
    if stages.is_empty() || stages.len() > MAX_STAGES {
        return invalid(
            "stage count",
            stages.len() as u64,
            format!("1 to {MAX_STAGES} for the scalable layout"),
        );
    }
    if version < FormatVersion::V3 {
        return invalid(
            "layout id",
            u64::from(LayoutId::Scalable.value()),
            format!("a layout of format version {version}: the scalable layout needs version 3"),
        );
    }
    let Some(plan) = header.plan else {
        return invalid(
            "planned capacity",
            0,
            "the first stage's capacity for the scalable layout".into(),
        );
    };
    if !(1..=MAX_GROWTH).contains(&scalable.growth) {
        return invalid(
            "growth factor",
            u64::from(scalable.growth),
            format!("1 to {MAX_GROWTH} for the scalable layout"),
        );
    }
    if !crate::plan::is_rate(scalable.tightening) {
        return Err(DecodeError::InvalidRate {
            field: "tightening ratio",
            found_bits: scalable.tightening.to_bits(),
            expected: "a number above 0 and below 1 for the scalable layout".into(),
        });
    }
    if header.layout_parameter != 0 {
        return invalid(
            "layout parameter",
            header.layout_parameter,
            "0 for the scalable layout".into(),
        );
    }
    // Totals that overflow are no total: `None` matches no header field.
    let (mut bits, mut hashes, mut items) = (Some(0u64), Some(0u64), Some(0u64));
    let mut rates = 0.0f64;
    let mut capacity = Some(plan.capacity);
    for stage in stages {
        if !stage.layout.is_stage_layout() {
            return invalid(
                "stage layout id",
                u64::from(stage.layout.value()),
                "1, 2, 6 or 7 (a plain bit layout) for a stage".into(),
            );
        }
        if stage.bit_count == 0 || !stage.bit_count.is_multiple_of(64) {
            return invalid(
                "stage bit count",
                stage.bit_count,
                "a multiple of 64, at least 64".into(),
            );
        }
        check_plan(stage.plan, "stage capacity", "stage false-positive rate")?;
        if Some(stage.plan.capacity) != capacity {
            return invalid(
                "stage capacity",
                stage.plan.capacity,
                "the planned capacity times the growth factor to the stage's number".into(),
            );
        }
        capacity = stage.plan.capacity.checked_mul(u64::from(scalable.growth));
        let mut alone = Header::new(
            stage.bit_count,
            stage.hash_count,
            header.position_rule,
            stage.layout,
            header.key_encoding,
        );
        alone.salt.clone_from(&header.salt);
        validate(&alone, version, stage.bit_count / 8)?;
        bits = bits.and_then(|t| t.checked_add(stage.bit_count));
        hashes = hashes.and_then(|t| t.checked_add(u64::from(stage.hash_count)));
        items = items.and_then(|t| t.checked_add(stage.item_count));
        rates += stage.plan.false_positive_rate;
    }
    if rates > plan.false_positive_rate * (1.0 + 1e-9) {
        return Err(DecodeError::InvalidRate {
            field: "stage false-positive rate",
            found_bits: rates.to_bits(),
            expected: format!(
                "stage rates summing to at most the target rate {}",
                plan.false_positive_rate
            ),
        });
    }
    for (field, found, total) in [
        ("bit count (m)", header.bit_count, bits),
        (
            "positions per key (k)",
            u64::from(header.hash_count),
            hashes,
        ),
        ("item count", header.item_count, items),
    ] {
        if Some(found) != total {
            let total = total.map_or_else(|| "over 2^64".to_owned(), |t| t.to_string());
            return invalid(field, found, format!("the stages' total, {total}"));
        }
    }
    Ok(())
}
