//! [`Count`]: one count a wrapper keeps for its own `metrics()` and exports through the
//! `metrics` facade, in one place.

use std::sync::atomic::{AtomicU64, Ordering};

use metrics::{Counter, Label};

/// A count one wrapper keeps for its `metrics()` and exports through the facade.
#[derive(Debug)]
pub struct Count {
    local: AtomicU64,
    exported: Counter,
}

impl Default for Count {
    /// A count exported nowhere.
    fn default() -> Self {
        Self {
            local: AtomicU64::new(0),
            exported: Counter::noop(),
        }
    }
}

impl Count {
    /// The count `name`, labelled `labels`, registered with the recorder installed now.
    pub(crate) fn registered(name: &'static str, labels: &[Label]) -> Self {
        Self {
            local: AtomicU64::new(0),
            exported: metrics::counter!(name, labels.to_vec()),
        }
    }

    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        self.local.fetch_add(n, Ordering::Relaxed);
        self.exported.increment(n);
    }

    /// The count so far.
    #[inline]
    #[must_use]
    pub fn get(&self) -> u64 {
        self.local.load(Ordering::Relaxed)
    }
}
