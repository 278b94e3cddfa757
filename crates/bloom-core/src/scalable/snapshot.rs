//! A chain as a snapshot of the `scalable` layout: its header (the stage directory), its
//! payload (the stages' bits, oldest first), and the chain a snapshot holds, its stages filled
//! in place as the payload streams.

use bloom_format::{DatasetGeneration, Header, IdKind, LayoutId, Scalable, Stage};

use crate::bits::BitsError;
use crate::config::FilterConfig;
use crate::encoding::UnicodeTables;
use crate::filter::Filter;
use crate::plain::BloomFilter;
use crate::snapshot::SnapshotError;

use super::builder::check_growth;
use super::{ScalableBloomFilter, ScalableError};

impl ScalableBloomFilter {
    /// The configuration of every stage a scalable header describes, oldest first, checked
    /// as [`ScalableBloomFilter::from_snapshot`] checks them but with no bits allocated: for
    /// readers that stream a chain's payload (the stages' payloads follow one another, stage
    /// `i` taking its `bits() / 8` bytes).
    ///
    /// # Errors
    /// As [`Filter::from_payload`], but for [`ScalableError::Build`] (allocation).
    pub fn stage_configs(header: &Header) -> Result<Vec<FilterConfig>, ScalableError> {
        let Some(scalable) = &header.scalable else {
            return Err(ScalableError::NotScalable {
                layout: header.layout,
            });
        };
        if header.plan.is_none() {
            return Err(SnapshotError::Unsupported {
                kind: IdKind::Layout,
                found: "scalable without a plan".into(),
            }
            .into());
        }
        check_growth(scalable.growth, scalable.tightening)?;
        scalable
            .stages
            .iter()
            .map(|stage| {
                let mut alone = header.clone();
                alone.scalable = None;
                alone.layout = stage.layout;
                alone.bit_count = stage.bit_count;
                alone.hash_count = stage.hash_count;
                alone.plan = Some(stage.plan);
                Ok(FilterConfig::from_header(&alone)?)
            })
            .collect()
    }

    /// The header of a snapshot of the chain: layout `scalable`, the stages in its
    /// directory, `m`, `k` and the item count their totals.
    pub(super) fn chain_header(&self, dataset_generation: DatasetGeneration) -> Header {
        let first = self
            .stages
            .first()
            .unwrap_or_else(|| unreachable!("a chain has a stage"));
        let mut header = first.config().to_header(dataset_generation, 0);
        // The counts add up without overflow, as the format requires: a stage's count is
        // cut to what is left of 2^64 - 1 (only a chain loaded with counts near it can get
        // there; counts are a record, never used to place bits).
        let mut total = 0u64;
        let stages: Vec<Stage> = self
            .stages
            .iter()
            .map(|s| {
                let config = s.config();
                let plan = config.plan().unwrap_or(self.plan);
                let mut stage =
                    Stage::new(config.bits(), config.hashes(), config.layout().id(), plan);
                stage.item_count = s.items_inserted().min(u64::MAX - total);
                total += stage.item_count;
                stage
            })
            .collect();
        header.layout = LayoutId::Scalable;
        header.layout_parameter = 0;
        header.bit_count = self.positions();
        header.hash_count = stages.iter().map(|s| s.hash_count).sum();
        header.item_count = total;
        header.plan = Some(self.plan);
        // One record of the tables for all stages: "not recorded" once a stage's differ
        // from the first's (keys outside ASCII went into a stage of foreign tables).
        if self
            .stages
            .iter()
            .any(|s| s.config().tables() != first.config().tables())
        {
            let mixed = UnicodeTables::default();
            header.key_encoding.normalization_unicode = mixed.normalization;
            header.key_encoding.casing_unicode = mixed.casing;
        }
        header.scalable = Some(Scalable::new(self.growth, self.tightening, stages));
        header
    }

    /// The stages' empty filters as a scalable header describes them, and their item counts.
    fn empty_stages(header: &Header) -> Result<(Self, Vec<u64>), ScalableError> {
        let configs = Self::stage_configs(header)?;
        // Both present: stage_configs checked them.
        let (Some(scalable), Some(plan)) = (&header.scalable, header.plan) else {
            return Err(ScalableError::NotScalable {
                layout: header.layout,
            });
        };
        let mut stages = Vec::with_capacity(configs.len());
        for config in configs {
            stages.push(BloomFilter::new(config)?);
        }
        let items = scalable.stages.iter().map(|s| s.item_count).collect();
        let filter = Self {
            plan,
            growth: scalable.growth,
            tightening: scalable.tightening,
            stages,
            growth_limit: None,
            next_stage: std::sync::OnceLock::new(),
        };
        Ok((filter, items))
    }

    /// The chain a header describes, its payload delivered by `fill` ([`Filter::from_payload`]).
    ///
    /// # Errors
    /// [`ScalableError::NotScalable`] for another layout, [`ScalableError::Snapshot`] for
    /// rules this build does not implement, [`ScalableError::Build`] (allocation), the error `fill`
    /// returns, or [`BitsError::Length`] when the chunks do not add up to the stages.
    pub(super) fn load<E: From<ScalableError>>(
        header: &Header,
        fill: impl FnOnce(&mut dyn FnMut(&[u8])) -> Result<(), E>,
    ) -> Result<Self, E> {
        let (mut filter, items) = Self::empty_stages(header)?;
        let (mut stage, mut at, mut received) = (0usize, 0usize, 0u64);
        let stages = &mut filter.stages;
        fill(&mut |mut chunk: &[u8]| {
            received = received.saturating_add(chunk.len() as u64);
            while !chunk.is_empty() {
                let Some(image) = stages.get_mut(stage).map(BloomFilter::image_mut) else {
                    return;
                };
                let room = image.len() - at;
                let take = room.min(chunk.len());
                let (now, rest) = chunk.split_at(take);
                if let Some(dest) = image.get_mut(at..at + take) {
                    dest.copy_from_slice(now);
                }
                chunk = rest;
                at += take;
                if at == image.len() {
                    stage += 1;
                    at = 0;
                }
            }
        })?;
        // The stages' sizes, not the header's total: a header built by hand may disagree.
        let expected: u64 = filter.stages.iter().map(Filter::payload_len).sum();
        if received != expected {
            return Err(ScalableError::from(BitsError::Length {
                bits: expected.saturating_mul(8),
                expected,
                found: received,
            })
            .into());
        }
        for (s, items) in filter.stages.iter_mut().zip(items) {
            s.words_from_le(items);
        }
        Ok(filter)
    }
}
