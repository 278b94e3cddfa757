//! The statements of the store, and the connections that prepare them.

use postgres::{Client, Statement};

use crate::PostgresStoreError;

/// The statements of the store, by number (each connection prepares one the first time it
/// runs it).
#[derive(Clone, Copy)]
pub(crate) enum Q {
    /// `$1` key: whether it is in the store.
    Contains = 0,
    /// `$1` keys: the 1-based positions of those in the store, as one array.
    PresentOf,
    /// The head, read.
    Head,
    /// `$1` generation: its digest.
    HistoryAt,
    /// `$1` after, `$2` up to, `$3` limit: `seq, live insert, key`.
    KeysPage,
    /// `$1` after, `$2` up to, `$3` limit: `seq, kind, key, history, replayed`.
    ChangesPage,
    /// `$1` generations, `$2` keys, `$3` digests: inserts appended, but for keys in the
    /// store; the generations of those appended returned.
    Append,
    /// `$1` key: the generation of its live insert.
    LiveInsert,
    /// `$1` seq, `$2` key, `$3` digest, `$4` undone insert: a removal appended.
    AppendRemoval,
    /// `$1` removal, `$2` insert: the insert marked removed.
    MarkRemoved,
    /// `$1` value: the key encoding recorded unless one is.
    ClaimEncoding,
    /// The key encoding recorded.
    Encoding,
    /// The number of keys in the store.
    KeyCount,
    /// The head's generation and the largest in the log, read together.
    LastSeq,
}

impl Q {
    /// The statement's name: the `operation` label of its latency
    /// ([`bloom_store::telemetry::names::POSTGRES_QUERY_SECONDS`]) and its span's field.
    const fn name(self) -> &'static str {
        match self {
            Self::Contains => "contains",
            Self::PresentOf => "present_of",
            Self::Head => "head",
            Self::HistoryAt => "history_at",
            Self::KeysPage => "keys_page",
            Self::ChangesPage => "changes_page",
            Self::Append => "append",
            Self::LiveInsert => "live_insert",
            Self::AppendRemoval => "append_removal",
            Self::MarkRemoved => "mark_removed",
            Self::ClaimEncoding => "claim_encoding",
            Self::Encoding => "encoding",
            Self::KeyCount => "key_count",
            Self::LastSeq => "last_seq",
        }
    }
}

/// Runs one statement, `operation` ([`Q::name`], or `begin_holding_head`, `commit`),
/// through `run`, in a span, and records its time.
pub(crate) fn timed<T>(
    operation: &'static str,
    run: impl FnOnce() -> Result<T, postgres::Error>,
) -> Result<T, PostgresStoreError> {
    let _span = tracing::debug_span!(target: "bloom", "bloom.postgres.query", operation).entered();
    let started = std::time::Instant::now();
    let result = run();
    metrics::histogram!(
        bloom_store::telemetry::names::POSTGRES_QUERY_SECONDS,
        "operation" => operation
    )
    .record(started.elapsed().as_secs_f64());
    Ok(result?)
}

/// The identity of the store the statement ran on: every read returns it, so that a store
/// replaced under a running process (the schema dropped and made again by another store,
/// whose tables PostgreSQL silently re-plans a prepared statement against) is never
/// answered for.
pub(crate) const IDENTITY: &str = "(SELECT value FROM {ns}.store_meta WHERE name = 'identity')";

/// Begins a writing transaction and takes the head of the log, in one round trip (a simple
/// query), with the identity of the store it ran on.
pub(crate) const BEGIN_HOLDING_HEAD: &str = "BEGIN ISOLATION LEVEL READ COMMITTED;
     SELECT h.seq, encode(h.history, 'hex'), encode(m.value, 'hex')
     FROM {ns}.head h, {ns}.store_meta m WHERE m.name = 'identity' FOR UPDATE OF h";

pub(crate) const STATEMENTS: [&str; 14] = [
    // Keys of up to 2,000 bytes are indexed as they are, longer ones by their SHA-256
    // (a B-tree entry holds about 2,700 bytes): each lookup asks both indexes.
    "SELECT {identity}, EXISTS (SELECT 1 FROM {ns}.changes
             WHERE key = $1::bytea AND kind = 1 AND removed_at IS NULL AND octet_length(key) <= 2000)
         OR EXISTS (SELECT 1 FROM {ns}.changes
             WHERE sha256(key) = sha256($1::bytea) AND key = $1::bytea AND kind = 1
               AND removed_at IS NULL AND octet_length(key) > 2000)",
    // A lateral probe with LIMIT 1 per key: one index lookup each, whatever the planner
    // guesses of the array's length (a semi-join would hash the whole log).
    "SELECT {identity}, ARRAY(SELECT k.i FROM unnest($1::bytea[]) WITH ORDINALITY AS k(key, i)
     CROSS JOIN LATERAL (
         (SELECT 1 FROM {ns}.changes c
          WHERE c.key = k.key AND c.kind = 1 AND c.removed_at IS NULL AND octet_length(c.key) <= 2000)
         UNION ALL
         (SELECT 1 FROM {ns}.changes c
          WHERE sha256(c.key) = sha256(k.key) AND c.key = k.key AND c.kind = 1
            AND c.removed_at IS NULL AND octet_length(c.key) > 2000)
         LIMIT 1) AS hit)",
    "SELECT {identity}, seq, history FROM {ns}.head",
    "SELECT {identity}, (SELECT history FROM {ns}.changes WHERE seq = $1)",
    "SELECT seq, kind = 1 AND removed_at IS NULL, key, {identity} FROM {ns}.changes
     WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3",
    "SELECT c.seq, c.kind, c.key, c.history,
         c.kind = 1 OR EXISTS (SELECT 1 FROM {ns}.changes i
             WHERE i.seq = c.undoes AND i.removed_at = c.seq AND i.key = c.key),
         {identity}
     FROM {ns}.changes c WHERE c.seq > $1 AND c.seq <= $2 ORDER BY c.seq LIMIT $3",
    // Every column given: a default added by hand cannot change what a row means.
    "INSERT INTO {ns}.changes (seq, kind, key, history, removed_at, undoes)
     SELECT s, 1, k, h, NULL, NULL FROM unnest($1::int8[], $2::bytea[], $3::bytea[]) AS t(s, k, h)
     ON CONFLICT DO NOTHING
     RETURNING seq",
    "SELECT {identity}, (SELECT seq FROM (
         (SELECT seq FROM {ns}.changes
          WHERE key = $1::bytea AND kind = 1 AND removed_at IS NULL AND octet_length(key) <= 2000)
         UNION ALL
         (SELECT seq FROM {ns}.changes
          WHERE sha256(key) = sha256($1::bytea) AND key = $1::bytea AND kind = 1
            AND removed_at IS NULL AND octet_length(key) > 2000)) AS live LIMIT 1)",
    "INSERT INTO {ns}.changes (seq, kind, key, history, removed_at, undoes)
     VALUES ($1, 2, $2, $3, NULL, $4)",
    "UPDATE {ns}.changes SET removed_at = $1 WHERE seq = $2",
    // Only into this very store (`$2`, its identity).
    "INSERT INTO {ns}.store_meta (name, value)
     SELECT 'key_encoding', convert_to($1, 'UTF8') WHERE {identity} = $2::bytea
     ON CONFLICT (name) DO NOTHING",
    "SELECT {identity}, (SELECT convert_from(value, 'UTF8') FROM {ns}.store_meta WHERE name = 'key_encoding')",
    "SELECT {identity}, count(*) FROM {ns}.changes WHERE kind = 1 AND removed_at IS NULL",
    "SELECT {identity}, h.seq, (SELECT max(seq) FROM {ns}.changes) FROM {ns}.head h",
];

/// A connection of the pool, with the statements it prepared.
pub(crate) struct Conn {
    pub(crate) client: Client,
    pub(crate) prepared: [Option<Statement>; STATEMENTS.len()],
    /// Whether the current call began a writing transaction on it (then a failure is never
    /// retried: its commit may have landed).
    pub(crate) wrote: bool,
}

impl Conn {
    fn statement(&mut self, sql: &[String], q: Q) -> Result<Statement, PostgresStoreError> {
        prepare(&mut self.client, &mut self.prepared, sql, q)
    }

    pub(crate) fn query(
        &mut self,
        sql: &[String],
        q: Q,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>, PostgresStoreError> {
        let statement = self.statement(sql, q)?;
        timed(q.name(), || self.client.query(&statement, params))
    }
}

pub(crate) fn prepare(
    client: &mut impl postgres::GenericClient,
    prepared: &mut [Option<Statement>],
    sql: &[String],
    q: Q,
) -> Result<Statement, PostgresStoreError> {
    let slot = &mut prepared[q as usize];
    if let Some(statement) = slot {
        return Ok(statement.clone());
    }
    let statement = client.prepare(&sql[q as usize])?;
    *slot = Some(statement.clone());
    Ok(statement)
}

/// A writing transaction that holds the head of the log (on a connection inside `BEGIN`).
pub(crate) struct Writing<'c, 's> {
    pub(crate) client: &'c mut Client,
    pub(crate) prepared: &'c mut [Option<Statement>; STATEMENTS.len()],
    pub(crate) sql: &'s [String],
}

impl Writing<'_, '_> {
    pub(crate) fn query(
        &mut self,
        q: Q,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<Vec<postgres::Row>, PostgresStoreError> {
        let statement = prepare(self.client, self.prepared, self.sql, q)?;
        timed(q.name(), || self.client.query(&statement, params))
    }

    pub(crate) fn execute(
        &mut self,
        q: Q,
        params: &[&(dyn postgres::types::ToSql + Sync)],
    ) -> Result<u64, PostgresStoreError> {
        let statement = prepare(self.client, self.prepared, self.sql, q)?;
        timed(q.name(), || self.client.execute(&statement, params))
    }
}
