//! [`PostgresStoreError`]: what can go wrong with the PostgreSQL store.

use bloom_store::history::IdentityError;

/// Errors of [`PostgresStore`](crate::PostgresStore).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PostgresStoreError {
    /// PostgreSQL failed, or could not be reached (the server's own message is kept; no
    /// password is ever part of it).
    #[error("PostgreSQL: {}", describe(.0))]
    Postgres(postgres::Error),
    /// No PostgreSQL server answered at the address given, within the connect timeout (a
    /// port of another service, a listener that never answers, a host that cannot be
    /// reached).
    #[error("no PostgreSQL server answers: {0}")]
    Unreachable(String),
    /// Every connection the store may open ([`Settings::max_connections`]) stayed in use
    /// for [`Settings::pool_timeout`]: the store is busier than its pool. Raise
    /// `max_connections` (within the server's), batch keys (`insert_all`, `contains_each`), or
    /// coalesce callers (`bloom_store::Coalesced`).
    ///
    /// [`Settings::max_connections`]: crate::Settings::max_connections
    /// [`Settings::pool_timeout`]: crate::Settings::pool_timeout
    #[error(
        "every connection of the store (Settings::max_connections = {max}) stayed in use for {waited:.1?}: raise max_connections (within the server's own limit), batch the keys, or coalesce callers"
    )]
    PoolExhausted {
        /// The pool's bound.
        max: usize,
        /// How long the caller waited.
        waited: std::time::Duration,
    },
    /// The server refused a new connection because it has as many as it allows (SQLSTATE
    /// 53300, its `max_connections`, or a role's or database's connection limit): the
    /// server is reachable. Lower `Settings::max_connections` across the fleet, or raise the
    /// server's limit.
    #[error(
        "PostgreSQL refused a new connection: it has as many clients as it allows ({0}); lower Settings::max_connections across the fleet or raise the server's max_connections"
    )]
    ServerFull(String),
    /// A thread could not be started to run a blocking call outside the async runtime it
    /// was made from (the system is out of threads).
    #[error("could not start a thread to run the call outside the async runtime: {0}")]
    Thread(String),
    /// The name given for the store's PostgreSQL schema is not one bloom-postgres uses.
    #[error(
        "{0:?} is not a usable schema name: 1 to 63 characters of a-z, 0-9 and _, not starting with a digit, not pg_…, and not a word PostgreSQL reserves"
    )]
    InvalidNamespace(String),
    /// The store was written by a newer bloom-postgres.
    #[error(
        "the store in schema {namespace} was written by a newer bloom-postgres (store schema {found}); this build reads versions up to {supported}"
    )]
    NewerSchema {
        /// The PostgreSQL schema the store is in.
        namespace: String,
        /// The version recorded there.
        found: i64,
        /// The newest this build reads.
        supported: i64,
    },
    /// The PostgreSQL schema holds objects bloom-postgres did not create (and no store): it
    /// belongs to someone else and is left alone.
    #[error(
        "the schema {namespace} holds {detail}, which bloom-postgres did not create; refusing to change it (choose another schema for the store)"
    )]
    ForeignObject {
        /// The PostgreSQL schema.
        namespace: String,
        /// What is there.
        detail: String,
    },
    /// A table, guard or value of the store is not what bloom-postgres made: it was changed
    /// behind its back, and the store refuses to be read or written through it.
    #[error("{what} of the store is damaged ({detail}); it was changed outside bloom-postgres")]
    Damaged {
        /// What is damaged.
        what: &'static str,
        /// How.
        detail: String,
    },
    /// The store was replaced while it was open: another store (or none) is in its place
    /// (the database dropped and recreated, renamed and another renamed into its place, the
    /// schema replaced), or its history went back or another way (an older backup or a
    /// diverged copy restored into it). Nothing more is read or written through this handle,
    /// and a wrapper's claim is lost for good; open the store again (its filters and
    /// snapshots are then judged afresh).
    #[error(
        "the store in schema {namespace} was replaced while it was open ({why}); open it again"
    )]
    Replaced {
        /// The PostgreSQL schema.
        namespace: String,
        /// What was found.
        why: String,
    },
    /// The claim a wrapper took on the store through this handle was lost for good (its
    /// session ended, with a server restart say, and another wrapper took the store before
    /// it could be taken again). This store answers nothing more: drop the wrapper and open
    /// the store again.
    #[error(
        "the claim of a wrapper on the store in schema {namespace} was lost ({why}); drop the wrapper and open the store again"
    )]
    ClaimLost {
        /// The PostgreSQL schema.
        namespace: String,
        /// What happened.
        why: String,
    },
    /// No identity could be made for a new store.
    #[error(transparent)]
    Identity(#[from] IdentityError),
}

/// The message shows the server's error, so it is not also the `source` (a report would show
/// it twice); the conversion is written out.
impl From<postgres::Error> for PostgresStoreError {
    fn from(e: postgres::Error) -> Self {
        Self::Postgres(e)
    }
}

/// The server's message, detail and hint for a database error (`postgres::Error`'s own
/// `Display` says only "db error"), the error itself otherwise.
fn describe(error: &postgres::Error) -> String {
    let Some(db) = error.as_db_error() else {
        return match std::error::Error::source(error) {
            Some(source) => format!("{error}: {source}"),
            None => error.to_string(),
        };
    };
    let mut text = format!("{} ({})", db.message(), db.code().code());
    if let Some(detail) = db.detail() {
        text.push_str(": ");
        text.push_str(detail);
    }
    if let Some(hint) = db.hint() {
        text.push_str(" (hint: ");
        text.push_str(hint);
        text.push(')');
    }
    text
}

impl PostgresStoreError {
    /// Whether the log's guard refused appended rows that do not follow its head without a
    /// gap (SQLSTATE `BL001`): what a batch's first attempt meets when a key it took for new
    /// is in the store.
    pub(crate) fn is_gap(&self) -> bool {
        matches!(self, Self::Postgres(e) if e.code().is_some_and(|c| c.code() == "BL001"))
    }

    /// Whether the error is the connection's (the server could not be reached, restarted,
    /// closed it, or had no room for another), rather than the store's: retrying once the
    /// server is back may succeed. ([`PostgresStoreError::PoolExhausted`] is not: the server
    /// answers, and this store is busier than its pool.)
    #[must_use]
    pub fn is_connection(&self) -> bool {
        match self {
            Self::Unreachable(_) | Self::ServerFull(_) => true,
            Self::Postgres(e) => {
                e.is_closed()
                    || e.as_db_error().is_some_and(|db| {
                        // Class 08 (connection exception), 57P01-57P03 (shutdown, crash
                        // recovery, cannot connect now).
                        let code = db.code().code();
                        code.starts_with("08") || code.starts_with("57P")
                    })
                    || (e.as_db_error().is_none() && std::error::Error::source(e).is_some())
            }
            _ => false,
        }
    }
}
