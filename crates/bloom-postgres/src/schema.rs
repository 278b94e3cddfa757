//! The store's tables and guards in PostgreSQL, how its version is recorded, and the checks
//! an open makes before trusting them. `docs/postgres-schema.md` is the same contract for
//! readers of the database.
//!
//! Everything lives in one PostgreSQL schema of its own (the namespace, `bloom` unless told
//! otherwise), so a store sits beside an application's tables in its database, and several
//! stores can share one database under different namespaces.

use postgres::GenericClient;

use bloom_format::StoreIdentity;
use bloom_store::history;

use crate::PostgresStoreError;

/// The version of the store's tables this build writes, and the newest it reads.
pub(crate) const SCHEMA_VERSION: i64 = 1;

/// The advisory-lock class of the creation of a store (with `hashtext(namespace)` as the
/// second key), held for the creating transaction only.
pub(crate) const CREATE_LOCK_CLASS: i32 = 0x626c_6f6f; // "bloo"
/// The advisory-lock class of the claim of one `FilteredStore` on a store (session-level).
pub(crate) const CLAIM_LOCK_CLASS: i32 = 0x626c_6f63; // "bloc"

/// A PostgreSQL schema name for the store: checked, so that it can be written into SQL
/// unquoted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Namespace(String);

impl Namespace {
    pub(crate) fn new(name: &str) -> Result<Self, PostgresStoreError> {
        let bytes = name.as_bytes();
        let ok = !bytes.is_empty()
            && bytes.len() <= 63
            && !bytes[0].is_ascii_digit()
            && !name.starts_with("pg_")
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_');
        if ok {
            Ok(Self(name.to_owned()))
        } else {
            Err(PostgresStoreError::InvalidNamespace(name.to_owned()))
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// `sql` with every `{ns}` replaced by the namespace.
    pub(crate) fn sql(&self, sql: &str) -> String {
        sql.replace("{ns}", &self.0)
    }
}

/// The tables of version 1.
///
/// - `store_meta(name, value)`: `identity` (16 random bytes, written in the transaction that
///   creates the tables), `schema` (the version, as text) and `key_encoding`.
/// - `changes`: the change log, one row per change. `seq` is the generation (1, 2, 3, …
///   without gaps), `kind` 1 for an insert and 2 for a removal, `key` the encoded key,
///   `history` the history digest at `seq`; an insert's `removed_at` is the generation of
///   the removal that undid it, a removal's `undoes` the generation of that insert.
/// - `head`: one row, the newest generation and its digest. Every append takes it
///   `FOR UPDATE` first: the one lock that orders every writer's appends.
/// - `keys` and `long_keys`: the keys in the store (inserts not removed), one entry each:
///   keys of up to 2,000 bytes as they are, longer ones by their SHA-256 (a B-tree entry
///   holds about 2,700 bytes).
const TABLES: &str = r"
CREATE TABLE {ns}.store_meta (
    name text PRIMARY KEY,
    value bytea NOT NULL
);
CREATE TABLE {ns}.changes (
    seq bigint PRIMARY KEY CHECK (seq > 0),
    kind smallint NOT NULL CHECK (kind IN (1, 2)),
    key bytea NOT NULL,
    history bytea NOT NULL CHECK (octet_length(history) = 16),
    removed_at bigint,
    undoes bigint,
    CHECK ((kind = 1 AND undoes IS NULL) OR (kind = 2 AND undoes IS NOT NULL AND removed_at IS NULL))
);
CREATE UNIQUE INDEX keys ON {ns}.changes (key)
    WHERE kind = 1 AND removed_at IS NULL AND octet_length(key) <= 2000;
CREATE UNIQUE INDEX long_keys ON {ns}.changes (sha256(key))
    WHERE kind = 1 AND removed_at IS NULL AND octet_length(key) > 2000;
CREATE TABLE {ns}.head (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    seq bigint NOT NULL CHECK (seq >= 0),
    history bytea NOT NULL CHECK (octet_length(history) = 16)
);
";

/// The guards: trigger functions, by name, with their bodies exactly as created (an open
/// compares them with `pg_proc.prosrc`, so a function replaced by hand is caught).
const FUNCTIONS: [(&str, &str); 4] = [
    (
        // After every statement that appends to the log: the rows must extend the head
        // without a gap, and the head moves to the newest of them. A row appended by hand
        // must do the same (and a concurrent one waits for the head, then finds it moved).
        "changes_extend_head",
        r"
DECLARE
    lo bigint;
    hi bigint;
    n bigint;
    top bytea;
BEGIN
    SELECT min(seq), max(seq), count(*) INTO lo, hi, n FROM appended;
    IF n = 0 THEN
        RETURN NULL;
    END IF;
    IF hi - lo + 1 <> n THEN
        RAISE EXCEPTION USING ERRCODE = 'BL001', MESSAGE = format('bloom-postgres: the change log takes rows without gaps (got %s rows for generations %s to %s)', n, lo, hi);
    END IF;
    SELECT history INTO top FROM appended WHERE seq = hi;
    -- The head's guard lets this update through, and no other (a mark for this statement).
    PERFORM set_config('bloom_postgres.extending', '{ns}', true);
    UPDATE {ns}.head SET seq = hi, history = top WHERE seq = lo - 1;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'BL001', MESSAGE = format('bloom-postgres: rows appended to the change log must extend its head (generations %s to %s do not follow it)', lo, hi);
    END IF;
    PERFORM set_config('bloom_postgres.extending', '', true);
    RETURN NULL;
END
",
    ),
    (
        // Before an update of a log row: only the `removed_at` of a live insert, set once, to
        // the removal of the same key that was just appended (the head) and names it.
        "changes_are_append_only",
        r"
BEGIN
    IF TG_OP = 'UPDATE'
        AND OLD.kind = 1 AND OLD.removed_at IS NULL AND NEW.removed_at IS NOT NULL
        AND NEW.seq = OLD.seq AND NEW.kind = OLD.kind AND NEW.key = OLD.key
        AND NEW.history = OLD.history AND NEW.undoes IS NULL
        AND EXISTS (SELECT 1 FROM {ns}.changes r, {ns}.head h
                    WHERE r.seq = NEW.removed_at AND r.kind = 2 AND r.key = OLD.key
                      AND r.undoes = OLD.seq AND h.seq = r.seq)
    THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'bloom-postgres: the change log is append-only (% refused): an edited or deleted row breaks the history every snapshot is checked against', TG_OP;
END
",
    ),
    (
        // The head moves only with the log (from `changes_extend_head`).
        "head_moves_with_changes",
        r"
BEGIN
    IF TG_OP = 'UPDATE' AND pg_trigger_depth() > 1
        AND current_setting('bloom_postgres.extending', true) = '{ns}' THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION 'bloom-postgres: the head of the change log moves only with the log (% refused)', TG_OP;
END
",
    ),
    (
        // The identity, version and key encoding are written once.
        "meta_is_written_once",
        r"
BEGIN
    RAISE EXCEPTION 'bloom-postgres: the store metadata is written once (% refused)', TG_OP;
END
",
    ),
];

/// The triggers: name, table, `pg_trigger.tgtype` (the timing, level and events, as
/// PostgreSQL encodes them), function, and the statement that creates it.
const TRIGGERS: [(&str, &str, i16, &str, &str); 7] = [
    (
        "changes_extend_head",
        "changes",
        TG_INSERT,
        "changes_extend_head",
        "AFTER INSERT ON {ns}.changes REFERENCING NEW TABLE AS appended FOR EACH STATEMENT",
    ),
    (
        "changes_are_append_only",
        "changes",
        TG_ROW | TG_BEFORE | TG_UPDATE | TG_DELETE,
        "changes_are_append_only",
        "BEFORE UPDATE OR DELETE ON {ns}.changes FOR EACH ROW",
    ),
    (
        "changes_are_never_truncated",
        "changes",
        TG_BEFORE | TG_TRUNCATE,
        "changes_are_append_only",
        "BEFORE TRUNCATE ON {ns}.changes FOR EACH STATEMENT",
    ),
    (
        "head_moves_with_changes",
        "head",
        TG_ROW | TG_BEFORE | TG_INSERT | TG_UPDATE | TG_DELETE,
        "head_moves_with_changes",
        "BEFORE INSERT OR UPDATE OR DELETE ON {ns}.head FOR EACH ROW",
    ),
    (
        "head_is_never_truncated",
        "head",
        TG_BEFORE | TG_TRUNCATE,
        "head_moves_with_changes",
        "BEFORE TRUNCATE ON {ns}.head FOR EACH STATEMENT",
    ),
    (
        "meta_is_written_once",
        "store_meta",
        TG_ROW | TG_BEFORE | TG_UPDATE | TG_DELETE,
        "meta_is_written_once",
        "BEFORE UPDATE OR DELETE ON {ns}.store_meta FOR EACH ROW",
    ),
    (
        "meta_is_never_truncated",
        "store_meta",
        TG_BEFORE | TG_TRUNCATE,
        "meta_is_written_once",
        "BEFORE TRUNCATE ON {ns}.store_meta FOR EACH STATEMENT",
    ),
];

// `pg_trigger.tgtype` bits (PostgreSQL's `catalog/pg_trigger.h`).
const TG_ROW: i16 = 1 << 0;
const TG_BEFORE: i16 = 1 << 1;
const TG_INSERT: i16 = 1 << 2;
const TG_DELETE: i16 = 1 << 3;
const TG_UPDATE: i16 = 1 << 4;
const TG_TRUNCATE: i16 = 1 << 5;

/// What each table must look like, as the catalog describes it (see [`shape_of`]): its
/// columns (type, `NOT NULL`, default), its constraints, every index on it, and every
/// trigger on it. Compared after [`normalized`], so that PostgreSQL versions that print an
/// expression with other parentheses or spacing agree.
struct Shape {
    table: &'static str,
    columns: &'static str,
    constraints: &'static str,
    indexes: &'static str,
}

const SHAPES: [Shape; 3] = [
    Shape {
        table: "store_meta",
        columns: "name text not null,value bytea not null",
        constraints: "p PRIMARY KEY (name)",
        indexes: "CREATE UNIQUE INDEX store_meta_pkey ON {ns}.store_meta USING btree (name)",
    },
    Shape {
        table: "changes",
        columns: "seq bigint not null,kind smallint not null,key bytea not null,history bytea not null,removed_at bigint,undoes bigint",
        constraints: "c CHECK ((((kind = 1) AND (undoes IS NULL)) OR ((kind = 2) AND (undoes IS NOT NULL) AND (removed_at IS NULL))));c CHECK ((kind = ANY (ARRAY[1, 2])));c CHECK ((octet_length(history) = 16));c CHECK ((seq > 0));p PRIMARY KEY (seq)",
        indexes: "CREATE UNIQUE INDEX changes_pkey ON {ns}.changes USING btree (seq);CREATE UNIQUE INDEX keys ON {ns}.changes USING btree (key) WHERE ((kind = 1) AND (removed_at IS NULL) AND (octet_length(key) <= 2000));CREATE UNIQUE INDEX long_keys ON {ns}.changes USING btree (sha256(key)) WHERE ((kind = 1) AND (removed_at IS NULL) AND (octet_length(key) > 2000))",
    },
    Shape {
        table: "head",
        columns: "one boolean not null default true,seq bigint not null,history bytea not null",
        constraints: "c CHECK ((octet_length(history) = 16));c CHECK ((seq >= 0));c CHECK (one);p PRIMARY KEY (one)",
        indexes: "CREATE UNIQUE INDEX head_pkey ON {ns}.head USING btree (one)",
    },
];

/// One query for a table's shape: columns, constraints, indexes (an invalid one marked),
/// triggers (name, type, enabled state, function, a `WHEN` or arguments or columns marked),
/// rules, row security, inheritance.
const SHAPE_OF: &str = "
SELECT
  (SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || COALESCE(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
       || CASE WHEN a.attgenerated::text <> '' THEN ' generated' ELSE '' END
       || CASE WHEN a.attidentity::text <> '' THEN ' identity' ELSE '' END
       || CASE WHEN a.attcollation NOT IN (0, 100) THEN ' collate ' || a.attcollation::regcollation::text ELSE '' END,
       ',' ORDER BY a.attnum)
   FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
   WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
  (SELECT string_agg(co.contype::text || ' ' || pg_get_constraintdef(co.oid), ';'
       ORDER BY co.contype::text, pg_get_constraintdef(co.oid))
   FROM pg_constraint co WHERE co.conrelid = c.oid),
  (SELECT string_agg(pg_get_indexdef(i.indexrelid)
       || CASE WHEN i.indisvalid AND i.indisready THEN '' ELSE ' (not valid)' END, ';'
       ORDER BY pg_get_indexdef(i.indexrelid))
   FROM pg_index i WHERE i.indrelid = c.oid),
  (SELECT string_agg(t.tgname || ' ' || t.tgtype::text || ' ' || t.tgenabled::text || ' '
       || pn.nspname || '.' || p.proname
       || CASE WHEN t.tgqual IS NULL THEN '' ELSE ' when' END
       || CASE WHEN t.tgnargs = 0 THEN '' ELSE ' args' END
       || CASE WHEN t.tgattr::text = '' THEN '' ELSE ' of' END, ';' ORDER BY t.tgname)
   FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid JOIN pg_namespace pn ON pn.oid = p.pronamespace
   WHERE t.tgrelid = c.oid AND NOT t.tgisinternal),
  (SELECT count(*) FROM pg_rewrite r WHERE r.ev_class = c.oid),
  c.relrowsecurity OR c.relforcerowsecurity,
  EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = c.oid OR h.inhparent = c.oid),
  c.relpersistence::text || ' ' || COALESCE((SELECT amname::text FROM pg_am WHERE oid = c.relam), '')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = $1 AND c.relname = $2 AND c.relkind = 'r'";

/// Lower case, without blanks and parentheses.
fn normalized(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_whitespace() && *c != '(' && *c != ')')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The triggers a table must have, as [`SHAPE_OF`] lists them.
fn triggers_of(ns: &Namespace, table: &str) -> String {
    let mut found: Vec<String> = TRIGGERS
        .iter()
        .filter(|(_, on, _, _, _)| *on == table)
        .map(|(name, _, tgtype, function, _)| {
            format!("{name} {tgtype} A {}.{function}", ns.as_str())
        })
        .collect();
    found.sort();
    found.join(";")
}

/// Checks a table's shape against [`SHAPES`].
fn check_shape(
    client: &mut impl GenericClient,
    ns: &Namespace,
    shape: &Shape,
) -> Result<(), PostgresStoreError> {
    let damaged = |detail: String| PostgresStoreError::Damaged {
        what: "a table",
        detail: format!("{}.{}: {detail}", ns.as_str(), shape.table),
    };
    let row = client
        .query_opt(SHAPE_OF, &[&ns.as_str(), &shape.table])?
        .ok_or_else(|| damaged("missing".into()))?;
    let text = |i: usize| -> Result<String, PostgresStoreError> {
        Ok(crate::values::field::<Option<String>>(&row, i, "the catalog")?.unwrap_or_default())
    };
    for (what, found, wanted) in [
        ("columns", text(0)?, shape.columns.to_owned()),
        ("constraints", text(1)?, shape.constraints.to_owned()),
        ("indexes", text(2)?, ns.sql(shape.indexes)),
        ("triggers", text(3)?, triggers_of(ns, shape.table)),
    ] {
        if normalized(&found) != normalized(&wanted) {
            return Err(damaged(format!(
                "its {what} are not bloom-postgres's: {found}"
            )));
        }
    }
    let rules: i64 = crate::values::field(&row, 4, "the catalog")?;
    let secured: bool = crate::values::field(&row, 5, "the catalog")?;
    let inherits: bool = crate::values::field(&row, 6, "the catalog")?;
    if rules != 0 || secured || inherits {
        return Err(damaged(
            "it has rules, row security or inheritance bloom-postgres never gives it".into(),
        ));
    }
    // Logged, on the heap: an unlogged table loses its rows in a crash (and is not
    // replicated), another access method is not the one the guards were written for.
    let storage = text(7)?;
    if storage != "p heap" {
        return Err(damaged(format!(
            "it is stored as {storage:?} (persistence, access method), not as a logged heap table"
        )));
    }
    Ok(())
}

/// What the database holds of the store, read without writing.
pub(crate) struct SchemaState {
    /// Whether the PostgreSQL schema exists.
    namespace_exists: bool,
    /// The relations in it (tables, indexes, sequences, views), by name.
    relations: Vec<String>,
    /// The recorded version (`None` without `store_meta` or its row).
    version: Option<i64>,
    /// The recorded identity.
    identity: Option<Vec<u8>>,
}

impl SchemaState {
    pub(crate) fn is_created(&self) -> bool {
        self.relations.iter().any(|r| r == "store_meta")
    }
}

pub(crate) fn read_state(
    client: &mut impl GenericClient,
    ns: &Namespace,
) -> Result<SchemaState, PostgresStoreError> {
    let namespace_exists = client
        .query_opt(
            "SELECT 1 FROM pg_namespace WHERE nspname = $1",
            &[&ns.as_str()],
        )?
        .is_some();
    let relations: Vec<String> = client
        .query(
            "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 ORDER BY c.relname",
            &[&ns.as_str()],
        )?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let mut state = SchemaState {
        namespace_exists,
        relations,
        version: None,
        identity: None,
    };
    if state.is_created() {
        for row in client.query(&ns.sql("SELECT name, value FROM {ns}.store_meta"), &[])? {
            let name: &str = row.get(0);
            let value: Vec<u8> = row.get(1);
            match name {
                "schema" => {
                    state.version = Some(
                        std::str::from_utf8(&value)
                            .ok()
                            .and_then(|v| v.parse().ok())
                            .ok_or_else(|| PostgresStoreError::Damaged {
                                what: "the schema version",
                                detail: format!("{value:?} is not a number"),
                            })?,
                    );
                }
                "identity" => state.identity = Some(value),
                _ => {}
            }
        }
    }
    Ok(state)
}

/// Checks a created store: its version, identity, tables, index and guards are this build's.
/// Returns the identity.
pub(crate) fn check(
    client: &mut impl GenericClient,
    ns: &Namespace,
    state: &SchemaState,
) -> Result<StoreIdentity, PostgresStoreError> {
    let damaged = |what, detail: String| PostgresStoreError::Damaged { what, detail };
    let version = state
        .version
        .ok_or_else(|| damaged("the schema version", "missing".into()))?;
    if version > SCHEMA_VERSION {
        return Err(PostgresStoreError::NewerSchema {
            namespace: ns.as_str().to_owned(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    let identity = state
        .identity
        .as_deref()
        .ok_or_else(|| damaged("the store identity", "missing".into()))?;
    let identity = <[u8; 16]>::try_from(identity)
        .map_err(|_| damaged("the store identity", format!("{} bytes", identity.len())))?;
    if identity == [0; 16] {
        return Err(damaged("the store identity", "all zero".into()));
    }
    for shape in &SHAPES {
        check_shape(client, ns, shape)?;
    }
    for (name, body) in FUNCTIONS {
        let found: Option<String> = client
            .query_opt(
                "SELECT p.prosrc || CASE WHEN p.prosecdef OR p.proconfig IS NOT NULL
                         OR l.lanname <> 'plpgsql' OR p.provolatile <> 'v'
                         THEN ' (altered)' ELSE '' END
                 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                 JOIN pg_language l ON l.oid = p.prolang
                 WHERE n.nspname = $1 AND p.proname = $2",
                &[&ns.as_str(), &name],
            )?
            .map(|row| row.get(0));
        if found.as_deref() != Some(ns.sql(body).as_str()) {
            return Err(damaged(
                "a guard",
                format!(
                    "the function {}.{name} is {}",
                    ns.as_str(),
                    if found.is_some() {
                        "not the one bloom-postgres made"
                    } else {
                        "missing"
                    }
                ),
            ));
        }
    }
    Ok(StoreIdentity::from_bytes(identity))
}

/// Creates the store in `tx`, which holds the creation lock and read `state` under it.
pub(crate) fn create(
    tx: &mut impl GenericClient,
    ns: &Namespace,
    state: &SchemaState,
) -> Result<StoreIdentity, PostgresStoreError> {
    if !state.relations.is_empty() {
        let shown: Vec<&str> = state.relations.iter().take(5).map(String::as_str).collect();
        return Err(PostgresStoreError::ForeignObject {
            namespace: ns.as_str().to_owned(),
            detail: format!(
                "{} relation(s) ({}) and no store metadata",
                state.relations.len(),
                shown.join(", ")
            ),
        });
    }
    if !state.namespace_exists {
        tx.batch_execute(&ns.sql("CREATE SCHEMA {ns}"))?;
    }
    tx.batch_execute(&ns.sql(TABLES))?;
    let identity = history::new_identity()?;
    let genesis = history::genesis(identity);
    tx.execute(
        &ns.sql("INSERT INTO {ns}.head (seq, history) VALUES (0, $1)"),
        &[&genesis.to_bytes().as_slice()],
    )?;
    tx.execute(
        &ns.sql(
            "INSERT INTO {ns}.store_meta (name, value) VALUES ('identity', $1), ('schema', $2)",
        ),
        &[
            &identity.to_bytes().as_slice(),
            &SCHEMA_VERSION.to_string().as_bytes(),
        ],
    )?;
    for (name, body) in FUNCTIONS {
        // Dollar quoting with a tag no body contains.
        tx.batch_execute(&format!(
            "CREATE FUNCTION {}.{name}() RETURNS trigger LANGUAGE plpgsql AS $bloom_guard${}$bloom_guard$",
            ns.as_str(),
            ns.sql(body)
        ))?;
    }
    for (name, table, _, function, when) in TRIGGERS {
        // ENABLE ALWAYS: the guards fire under `session_replication_role = replica` too.
        tx.batch_execute(&format!(
            "CREATE TRIGGER {name} {} EXECUTE FUNCTION {ns}.{function}();
             ALTER TABLE {ns}.{table} ENABLE ALWAYS TRIGGER {name};",
            ns.sql(when),
            ns = ns.as_str()
        ))?;
    }
    Ok(identity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_plain_lowercase_identifiers() {
        for good in ["bloom", "bloom_2", "_x", "a"] {
            assert!(Namespace::new(good).is_ok(), "{good}");
        }
        let long = "a".repeat(64);
        for bad in [
            "",
            "Bloom",
            "2bloom",
            "bloom-x",
            "bloom; DROP TABLE x",
            "pg_bloom",
            "\"q\"",
            long.as_str(),
        ] {
            assert!(
                matches!(
                    Namespace::new(bad),
                    Err(PostgresStoreError::InvalidNamespace(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn every_trigger_runs_a_guard_function() {
        for (_, _, _, function, _) in TRIGGERS {
            assert!(FUNCTIONS.iter().any(|(name, _)| *name == function));
        }
        for (_, body) in FUNCTIONS {
            assert!(!body.contains("$bloom_guard$"));
        }
    }
}
