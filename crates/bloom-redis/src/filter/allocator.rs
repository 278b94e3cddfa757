//! Shards sized to the allocation Redis makes for them: jemalloc rounds a string up to one
//! of four sizes per power of two, so a shard can be grown to fill its allocation, and the
//! shard count chosen so that the shards waste least of it.

use bloom_core::{FilterParams, Layout, PositionRule};

use super::{SHARD_FRAME_BYTES, WHOLE_SHARD_BYTES};

/// The size of the allocation jemalloc (Redis's allocator) makes for `n` bytes: four size
/// classes per power of two.
fn allocation(n: u64) -> u64 {
    if n <= 16 {
        return n.max(8).next_power_of_two();
    }
    let step = 1u64 << ((63 - (n - 1).leading_zeros()).saturating_sub(2));
    n.div_ceil(step) * step
}

/// Bytes of a shard's allocation that are not its value: the string header and its NUL, and
/// the two bytes a value sent in one piece keeps from the request buffer.
const STRING_OVERHEAD: u64 = 9 + 1 + 2;

/// `params` with every shard grown to fill the allocation Redis makes for it anyway (jemalloc
/// rounds a string up to one of four sizes per power of two, so a shard can waste up to a
/// fifth of its memory): more bits, the same `k`, a lower false-positive rate, and Redis
/// memory within a few bytes per shard of the bits. Shards over 8 MiB (grown by `APPEND`,
/// whose own rounding differs) and plans that cannot grow are returned unchanged.
#[must_use]
pub fn fit_to_allocator(params: FilterParams) -> FilterParams {
    let (Layout::Sharded { shards } | Layout::ShardedV2 { shards }) = params.layout() else {
        return params;
    };
    let shard_bytes = params.bits() / u64::from(shards) / 8;
    let value = shard_bytes + SHARD_FRAME_BYTES;
    if value > WHOLE_SHARD_BYTES {
        return params;
    }
    let room = allocation(value + STRING_OVERHEAD) - STRING_OVERHEAD - SHARD_FRAME_BYTES;
    // Shards hold a multiple of 64 bits (the layout's granularity).
    let fitted = (room / 8) * 64 * u64::from(shards);
    if fitted <= params.bits() {
        return params;
    }
    FilterParams::with_layout(params.layout(), fitted, params.hashes()).unwrap_or(params)
}

/// Bytes each shard costs Redis besides its value's allocation: its key's entry, object and
/// name, and its epoch record (a small hash) with its own.
const SHARD_KEYS_OVERHEAD: u64 = 256;

/// The memory Redis allocates for a filter of `params` (sharded): every shard's allocation
/// and the keys around it.
fn allocated(params: &FilterParams) -> u64 {
    let shards = u64::from(params.layout().shards());
    let value = params.bits() / shards / 8 + SHARD_FRAME_BYTES;
    shards * (allocation(value + STRING_OVERHEAD) + SHARD_KEYS_OVERHEAD)
}

/// The plan for `items` keys at `fpr` (at most, with rule `rule`) that takes the least Redis
/// memory: each shard count in `shards` is planned ([`FilterParams::planned_for`]) and its
/// shards grown to their allocation ([`fit_to_allocator`]), and the plan whose shards and keys
/// take the least memory wins (the fewest shards among equals). jemalloc rounds a shard up to
/// one of four sizes per power of two, so one shard count can waste a fifth of the memory
/// that another wastes almost none of; the bits never fall below what `fpr` needs.
///
/// ```
/// use bloom_core::PositionRule;
/// use bloom_redis::plan_for_allocator;
///
/// let params = plan_for_allocator(PositionRule::Xxh3_128, 1_000_000, 0.01, 16..=32)?;
/// assert!((16..=32).contains(&params.layout().shards()));
/// # Ok::<(), bloom_core::ParamsError>(())
/// ```
///
/// # Errors
/// As [`FilterParams::planned_for`], when no shard count in `shards` can be planned.
pub fn plan_for_allocator(
    rule: PositionRule,
    items: u64,
    fpr: f64,
    shards: std::ops::RangeInclusive<u32>,
) -> Result<FilterParams, bloom_core::ParamsError> {
    let mut best: Option<(u64, FilterParams)> = None;
    let mut last_error = None;
    let shards_start = shards.start();
    for count in shards.clone() {
        let planned = Layout::sharded(count)
            .and_then(|layout| FilterParams::planned_for(rule, layout, items, fpr));
        match planned {
            Ok(params) => {
                let params = fit_to_allocator(params);
                let memory = allocated(&params);
                if best.as_ref().is_none_or(|(least, _)| memory < *least) {
                    best = Some((memory, params));
                }
            }
            Err(e) => last_error = Some(e),
        }
    }
    match (best, last_error) {
        (Some((_, params)), _) => Ok(params),
        (None, Some(e)) => Err(e),
        (None, None) => {
            FilterParams::planned_for(rule, Layout::sharded(*shards_start)?, items, fpr)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_follow_jemallocs_size_classes() {
        for (n, class) in [
            (1, 8),
            (9, 16),
            (17, 20),
            (100, 112),
            (4097, 5120),
            (65_536, 65_536),
            (65_537, 81_920),
            (74_916, 81_920),
            (81_921, 98_304),
        ] {
            assert_eq!(allocation(n), class, "{n}");
        }
    }

    #[test]
    fn fitted_shards_fill_their_allocation_and_only_grow() {
        for (items, shards) in [(1_000_000, 16), (10_000, 16), (123_457, 7), (5_000_000, 64)] {
            let planned =
                FilterParams::planned(Layout::sharded(shards).unwrap(), items, 0.01).unwrap();
            let fitted = fit_to_allocator(planned);
            assert!(fitted.bits() >= planned.bits());
            assert_eq!(fitted.hashes(), planned.hashes());
            assert_eq!(fitted.bits() % (64 * u64::from(shards)), 0);
            let value = fitted.bits() / u64::from(shards) / 8 + SHARD_FRAME_BYTES;
            let used = allocation(value + STRING_OVERHEAD);
            // The allocation is what the planned shard got anyway, and the bits fill it.
            assert_eq!(
                used,
                allocation(
                    planned.bits() / u64::from(shards) / 8 + SHARD_FRAME_BYTES + STRING_OVERHEAD
                )
            );
            assert!(used - value - STRING_OVERHEAD < 8, "{items} {shards}");
            assert!(
                fitted.predicted_false_positive_rate(items)
                    <= planned.predicted_false_positive_rate(items)
            );
        }
    }

    #[test]
    fn the_shard_count_that_wastes_least_is_chosen() {
        for (items, fpr) in [(1_000_000, 0.0099), (1_000_000, 0.005), (250_000, 0.001)] {
            let chosen = plan_for_allocator(PositionRule::Xxh3_128, items, fpr, 16..=32).unwrap();
            let shards = chosen.layout().shards();
            assert!((16..=32).contains(&shards));
            let mut least = u64::MAX;
            for count in 16..=32 {
                let planned = FilterParams::planned_for(
                    PositionRule::Xxh3_128,
                    Layout::sharded(count).unwrap(),
                    items,
                    fpr,
                )
                .unwrap();
                least = least.min(allocated(&fit_to_allocator(planned)));
                if count == shards {
                    assert!(
                        chosen.bits() >= planned.bits(),
                        "never fewer bits than needed"
                    );
                }
            }
            assert_eq!(allocated(&chosen), least);
            assert!(chosen.predicted_false_positive_rate(items) <= fpr * 1.0001);
        }
        // An empty range plans its start.
        #[allow(clippy::reversed_empty_ranges)]
        let empty = plan_for_allocator(PositionRule::Xxh3_128, 1_000, 0.01, 8..=7).unwrap();
        assert_eq!(empty.layout().shards(), 8);
    }
}
