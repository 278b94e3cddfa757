//! The verdicts of one process about the shared filter, each told to the telemetry as it is
//! made: which filter is installed and whether it is trusted, a filter distrusted after it
//! failed, and whether the store's claim holds.

use bloom_store::PrimaryStore;

use crate::error::RedisFilterError;
use crate::filter::RedisFilter;

use super::SharedFilteredStore;

/// What an attach or a rebuild decided about the filter it installs.
pub(super) enum Verdict {
    /// Trusted: how.
    Trusted(String),
    /// Rebuilt from the store, and trusted: how. Its measurements start afresh.
    Rebuilt(String),
    /// Not trusted: the reason's code (the `reason` label of `bloom_bypasses_total`), and
    /// why.
    Bypassed(&'static str, String),
}

/// The reason code of a filter that failed with `e`: `not_found`, `unverified`, `lost`,
/// `unreachable` (no connection, a timeout, a connection that ended), `refused` (an error reply: a permission, the
/// server's memory, a module missing) or `incompatible` (metadata this build cannot use).
pub(super) fn reason_code(e: &RedisFilterError) -> &'static str {
    use RedisFilterError as E;
    match e {
        E::NotFound { .. } => "not_found",
        e if e.is_unverified() => "unverified",
        e if e.is_lost_state() => "lost",
        E::Redis(e) if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() => {
            "unreachable"
        }
        // Protocol: a connection that ended, a pipeline lost with it, a cluster's map that
        // could not be read.
        E::Timeout { .. }
        | E::Unavailable(_)
        | E::NodeChanged
        | E::NotAcknowledged { .. }
        | E::Protocol(_) => "unreachable",
        E::Redis(_) | E::Server { .. } | E::ModuleMissing | E::NotDurable { .. } => "refused",
        _ => "incompatible",
    }
}

impl<S: PrimaryStore> SharedFilteredStore<S> {
    /// Installs a filter (or none) and the verdict about it, together, and tells the
    /// telemetry.
    pub(super) fn install(&self, filter: Option<RedisFilter>, verdict: Verdict) {
        // Told under the lock, so that the telemetry sees the verdicts in their order.
        let mut state = self.write();
        // A bypass counts when it ends trust, or is the first verdict of the wrapper.
        let first = state.epoch == 0;
        if let Some(filter) = &filter {
            state.seen = Some(filter.seen());
        }
        self.counters
            .installed(filter.as_ref(), matches!(verdict, Verdict::Rebuilt(_)));
        let installed = filter.is_some();
        state.filter = filter;
        state.unusable = match &verdict {
            Verdict::Bypassed(_, why) if !installed => why.clone(),
            _ => String::new(),
        };
        state.epoch += 1;
        let trusted = matches!(verdict, Verdict::Trusted(_) | Verdict::Rebuilt(_));
        let newly = std::mem::replace(&mut state.trusted, trusted) || first;
        let telemetry = &self.counters.telemetry;
        match verdict {
            Verdict::Trusted(how) | Verdict::Rebuilt(how) => telemetry.trusted(&how),
            Verdict::Bypassed(code, why) => telemetry.bypassed(code, &why, newly),
        }
    }

    /// Stops trusting the filter of `epoch`, if it is still the one installed: `error` is
    /// what it answered.
    pub(super) fn distrust(&self, epoch: u64, error: &dyn std::fmt::Display, code: &'static str) {
        let mut state = self.write();
        if state.epoch == epoch && std::mem::replace(&mut state.trusted, false) {
            self.counters.telemetry.bypassed(code, error, true);
        }
    }

    /// Whether the store's claim holds now (a change is told to the telemetry).
    pub(super) fn claim_holds(&self) -> bool {
        let valid = self.claim.is_valid();
        // A shared claim is never behind: every wrapper writes the shared filter.
        self.counters.telemetry.claim_checked(valid, || None);
        valid
    }
}
