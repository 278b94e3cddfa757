//! How the wrapper's outcomes read for people: `Display` for modes, lookups, open and
//! rebuild outcomes, in words an operator can act on (no `Debug` form needs to reach a log).

use std::fmt;

use crate::outcome::{Lookup, Mode, OpenOutcome, RebuildReport, SnapshotRefresh};

/// `trusted`, or `bypassed: <why>`.
impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Trusted => f.write_str("trusted (the filter answers \"absent\" on its own)"),
            Self::Bypassed(reason) => write!(f, "bypassed (every lookup asks the store): {reason}"),
        }
    }
}

/// `present`, or `absent` with how it was found.
impl fmt::Display for Lookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::AbsentByFilter => "absent (the filter ruled it out; the store was not asked)",
            Self::FalsePositive => "absent (the filter said maybe; the store said no)",
            Self::AbsentBypassed => "absent (the store said no; the filter is bypassed)",
            Self::Present => "present",
        })
    }
}

impl fmt::Display for SnapshotRefresh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Saved(generation) => {
                write!(f, "a fresh snapshot was saved at generation {generation}")
            }
            Self::NoPath => f.write_str("no snapshot path was given, so none was saved"),
            Self::Failed(e) => write!(
                f,
                "writing the fresh snapshot failed ({e}); the rebuilt filter is used all the same"
            ),
        }
    }
}

impl fmt::Display for RebuildReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rebuilt from {} keys of the store, covering generation {}",
            self.keys_scanned, self.generation
        )?;
        // A shared filter created without a plan records no capacity.
        if self.capacity > 0 {
            write!(f, ", for {} keys", self.capacity)?;
        }
        if self.capacity_limited {
            f.write_str(" (cut to fit max_snapshot_bytes)")?;
        }
        Ok(())
    }
}

impl fmt::Display for OpenOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Trusted { generation } => write!(
                f,
                "the snapshot matches the store at generation {generation} and is trusted"
            ),
            Self::CaughtUp {
                from,
                to,
                keys,
                removals,
            } => write!(
                f,
                "the snapshot of generation {from} was caught up to the store's {to} \
                 ({keys} keys added, {removals} removals replayed) and is trusted"
            ),
            Self::Bypassed(reason) => write!(
                f,
                "the snapshot cannot be trusted ({reason}); every lookup asks the store until a rebuild"
            ),
            Self::Rebuilt {
                reason,
                report,
                snapshot,
            } => write!(
                f,
                "the snapshot could not be used ({reason}); {report}; {snapshot}"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bloom_format::DatasetGeneration;

    use super::*;
    use crate::outcome::BypassReason;

    #[test]
    fn outcomes_read_as_sentences() {
        let g = DatasetGeneration::new;
        assert_eq!(
            OpenOutcome::Trusted { generation: g(7) }.to_string(),
            "the snapshot matches the store at generation 7 and is trusted"
        );
        let rebuilt = OpenOutcome::Rebuilt {
            reason: BypassReason::NoSnapshot,
            report: RebuildReport {
                keys_scanned: 3,
                generation: g(4),
                capacity: 100,
                capacity_limited: true,
            },
            snapshot: SnapshotRefresh::Saved(g(4)),
        };
        assert_eq!(
            rebuilt.to_string(),
            "the snapshot could not be used (no snapshot); rebuilt from 3 keys of the store, \
             covering generation 4, for 100 keys (cut to fit max_snapshot_bytes); a fresh \
             snapshot was saved at generation 4"
        );
        let failed = SnapshotRefresh::Failed(Arc::new(std::io::Error::other("disk full")));
        assert!(failed.to_string().contains("disk full"), "{failed}");
        assert_eq!(
            Mode::Bypassed(BypassReason::Rebuilding).to_string(),
            "bypassed (every lookup asks the store): rebuilding"
        );
        for lookup in [
            Lookup::AbsentByFilter,
            Lookup::FalsePositive,
            Lookup::AbsentBypassed,
            Lookup::Present,
        ] {
            let text = lookup.to_string();
            assert!(text.starts_with("absent") || text == "present", "{text}");
            assert!(
                !text.contains("Absent") && !text.contains("False"),
                "{text}"
            );
        }
    }
}
