//! The store's contract against a real PostgreSQL (started by each test, on 127.0.0.1 and a
//! random port): identity, history digests, the change log, guards against edits behind its
//! back, the versioned schema in its own namespace, and many writers at once.

use std::sync::Arc;

use bloom_format::DatasetGeneration;
use bloom_postgres::testing::TempServer;
use bloom_postgres::{PostgresStore, PostgresStoreError, Settings};
use bloom_store::history::{self, ChangeKind, HistoryPoint, KeyGeneration};
use bloom_store::{FilterOptions, FilteredStore, PrimaryStore, StoreError};

fn server() -> TempServer {
    TempServer::start_with(&[("fsync", "off")])
        .expect("a PostgreSQL server (cargo xtask test installs it)")
}

fn g(n: u64) -> DatasetGeneration {
    DatasetGeneration::new(n)
}

/// Replays the whole log with the documented chain, checking every digest the store reports.
fn assert_history_is_the_chain(store: &PostgresStore) -> u64 {
    let mut point = HistoryPoint::genesis(store.identity().unwrap());
    let mut changes = Vec::new();
    let reached = store
        .changes_since(DatasetGeneration::ZERO, &mut |c| {
            changes.push((c.generation, c.kind, c.key.to_vec()));
        })
        .unwrap();
    for (generation, kind, key) in &changes {
        assert_eq!(*generation, point.generation.next().unwrap());
        point = HistoryPoint {
            generation: *generation,
            digest: history::after_change(point.digest, *generation, *kind, key),
        };
        assert_eq!(store.history_at(*generation).unwrap(), Some(point.digest));
    }
    assert_eq!(reached, point.generation);
    assert_eq!(store.head().unwrap(), point);
    point.generation.get()
}

#[test]
fn a_store_keeps_an_identity_a_history_and_its_removals() {
    let server = server();
    let store = PostgresStore::connect(&server.params("postgres")).unwrap();
    let identity = store.identity().unwrap();
    assert!(!identity.is_zero());
    assert_eq!(store.head().unwrap(), HistoryPoint::genesis(identity));
    assert_eq!(store.history_at(g(1)).unwrap(), None);

    assert_eq!(store.insert(b"a").unwrap(), Some(g(1)));
    assert_eq!(store.insert(b"a").unwrap(), None);
    assert_eq!(
        store.insert_all(&[b"b", b"a", b"c", b"b"]).unwrap(),
        [Some(g(2)), None, Some(g(3)), None]
    );
    assert_eq!(
        store.contains_each(&[b"c", b"zz", b"a"]).unwrap(),
        [true, false, true]
    );
    assert_eq!(
        store.generation_of(b"c").unwrap(),
        KeyGeneration::Since(g(3))
    );
    assert_eq!(store.generation_of(b"zz").unwrap(), KeyGeneration::Absent);

    let removal = store.remove(b"a").unwrap().unwrap();
    assert_eq!((removal.generation, removal.inserted_at), (g(4), g(1)));
    assert_eq!(store.remove(b"a").unwrap(), None);
    assert!(!store.contains(b"a").unwrap());
    assert_eq!(store.insert(b"a").unwrap(), Some(g(5)));
    // A long key (more than a B-tree entry holds) is a key like any other.
    let long = vec![7u8; 100_000];
    assert_eq!(store.insert(&long).unwrap(), Some(g(6)));
    assert!(store.contains(&long).unwrap());
    assert_eq!(store.key_count().unwrap(), 4);

    let mut kinds = Vec::new();
    store
        .changes_since(g(2), &mut |c| kinds.push((c.generation.get(), c.kind)))
        .unwrap();
    assert_eq!(
        kinds,
        [
            (3, ChangeKind::Inserted),
            (4, ChangeKind::Removed),
            (5, ChangeKind::Inserted),
            (6, ChangeKind::Inserted)
        ]
    );
    let mut keys = Vec::new();
    let reached = store
        .keys_since(DatasetGeneration::ZERO, &mut |k| keys.push(k.len()))
        .unwrap();
    assert_eq!(reached, g(6));
    assert_eq!(keys, [1, 1, 1, 100_000]); // b, c, a again, the long one; not the removed a
    assert_eq!(assert_history_is_the_chain(&store), 6);
    // Keys already there at the end of a batch (the long one too) are skipped in one step.
    assert_eq!(
        store.insert_all(&[b"d", b"c", &long]).unwrap(),
        [Some(g(7)), None, None]
    );
    assert_eq!(assert_history_is_the_chain(&store), 7);
    // Keys already there at the start of a batch: the first attempt is refused by the
    // guard (its rows would not follow the head), the second looks the keys up.
    assert_eq!(
        store.insert_all(&[b"a", b"b", b"e", b"f"]).unwrap(),
        [None, None, Some(g(8)), Some(g(9))]
    );
    assert_eq!(assert_history_is_the_chain(&store), 9);

    // Opened again: the same store. Another database: another identity.
    let again = PostgresStore::connect(&server.params("postgres")).unwrap();
    assert_eq!(again.identity().unwrap(), identity);
    assert_eq!(again.head().unwrap(), store.head().unwrap());
    server.create_database("other").unwrap();
    let other = PostgresStore::connect(&server.params("other")).unwrap();
    assert_ne!(other.identity().unwrap(), identity);
    assert!(!other.contains(b"b").unwrap());
}

#[test]
fn it_lives_beside_an_applications_tables_in_a_namespace_of_its_own() {
    let server = server();
    let mut app = server.client("postgres").unwrap();
    app.batch_execute(
        "CREATE TABLE changes (id int); CREATE TABLE head (x text); INSERT INTO head VALUES ('app');
         CREATE SCHEMA crm; CREATE TABLE crm.contacts (id int);",
    )
    .unwrap();
    let params = server.params("postgres");
    let sessions = PostgresStore::connect_in(&params, "bloom_sessions").unwrap();
    let records = PostgresStore::connect(&params).unwrap();
    assert_ne!(sessions.identity().unwrap(), records.identity().unwrap());
    sessions.insert(b"s-1").unwrap();
    assert!(!records.contains(b"s-1").unwrap());
    let app_head: String = app
        .query_one("SELECT x FROM public.head", &[])
        .unwrap()
        .get(0);
    assert_eq!(app_head, "app");

    // A schema with someone else's tables is left alone; a bad name is refused before SQL.
    assert!(matches!(
        PostgresStore::connect_in(&params, "crm"),
        Err(PostgresStoreError::ForeignObject { .. })
    ));
    let count: i64 = app
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'crm'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(count, 1);
    for bad in ["x; DROP TABLE head", "user", "select"] {
        assert!(matches!(
            PostgresStore::connect_in(&params, bad),
            Err(PostgresStoreError::InvalidNamespace(_))
        ));
    }

    // A newer store is refused untouched.
    app.batch_execute(
        "ALTER TABLE bloom.store_meta DISABLE TRIGGER meta_is_written_once;
         UPDATE bloom.store_meta SET value = convert_to('2', 'UTF8') WHERE name = 'schema';
         ALTER TABLE bloom.store_meta ENABLE ALWAYS TRIGGER meta_is_written_once;",
    )
    .unwrap();
    assert!(matches!(
        PostgresStore::connect(&params),
        Err(PostgresStoreError::NewerSchema {
            found: 2,
            supported: 1,
            ..
        })
    ));
}

#[test]
fn edits_behind_the_stores_back_are_refused_and_a_weakened_store_is_not_opened() {
    let server = server();
    let params = server.params("postgres");
    let store = PostgresStore::connect(&params).unwrap();
    store.insert_all(&[b"a", b"b", b"c"]).unwrap();
    store.remove(b"b").unwrap();
    let mut sql = server.client("postgres").unwrap();
    for edit in [
        "DELETE FROM bloom.changes WHERE seq = 1",
        "UPDATE bloom.changes SET key = 'x' WHERE seq = 1",
        "UPDATE bloom.changes SET removed_at = 4 WHERE seq = 3",
        "UPDATE bloom.changes SET removed_at = NULL WHERE seq = 2",
        "TRUNCATE bloom.changes",
        "UPDATE bloom.head SET seq = 1",
        "DELETE FROM bloom.head",
        "TRUNCATE bloom.head",
        "UPDATE bloom.store_meta SET value = '\\x00' WHERE name = 'identity'",
        "DELETE FROM bloom.store_meta",
        // Appends that do not extend the head, or leave a gap.
        "INSERT INTO bloom.changes (seq, kind, key, history) VALUES (3, 1, 'd', '\\x00000000000000000000000000000000')",
        "INSERT INTO bloom.changes (seq, kind, key, history) VALUES (6, 1, 'd', '\\x00000000000000000000000000000000')",
    ] {
        let refused = sql.batch_execute(edit).unwrap_err();
        let text = refused
            .as_db_error()
            .map(|db| db.message().to_owned())
            .unwrap_or_default();
        assert!(
            text.starts_with("bloom-postgres:") || text.contains("violates"),
            "{edit}: {text}"
        );
    }
    assert_eq!(assert_history_is_the_chain(&store), 4);

    // A row appended by hand that extends the head is a write behind the back; with a wrong
    // digest, the replay that catch-up runs refuses it.
    sql.batch_execute(
        "INSERT INTO bloom.changes (seq, kind, key, history) VALUES (5, 1, 'd', '\\x00000000000000000000000000000000')",
    )
    .unwrap();
    assert!(store.contains(b"d").unwrap());
    let replay = store.changes_since(g(3), &mut |_| {});
    assert!(
        matches!(replay, Err(PostgresStoreError::Damaged { .. })),
        "{replay:?}"
    );

    // A disabled or replaced guard, or a changed index: the store is not opened.
    for (weaken, restore) in [
        (
            "ALTER TABLE bloom.changes DISABLE TRIGGER changes_are_append_only",
            "ALTER TABLE bloom.changes ENABLE ALWAYS TRIGGER changes_are_append_only",
        ),
        (
            "CREATE OR REPLACE FUNCTION bloom.head_moves_with_changes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
            "",
        ),
    ] {
        sql.batch_execute(weaken).unwrap();
        let opened = PostgresStore::connect(&params);
        assert!(
            matches!(opened, Err(PostgresStoreError::Damaged { .. })),
            "{weaken}: {opened:?}"
        );
        if !restore.is_empty() {
            sql.batch_execute(restore).unwrap();
        }
    }
    sql.batch_execute("DROP INDEX bloom.keys").unwrap();
    assert!(matches!(
        PostgresStore::connect(&params),
        Err(PostgresStoreError::Damaged { .. })
    ));
}

#[test]
fn many_writers_at_once_keep_one_gapless_history() {
    let server = server();
    let params = server.params("postgres");
    // First opens at once: one store is created, and every writer has its identity.
    let stores: Vec<Arc<PostgresStore>> = std::thread::scope(|s| {
        let opening: Vec<_> = (0..8)
            .map(|_| s.spawn(|| PostgresStore::connect(&params).map(Arc::new)))
            .collect();
        opening
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    });
    let identity = stores[0].identity().unwrap();
    assert!(stores.iter().all(|s| s.identity().unwrap() == identity));

    // Each writer inserts its own keys and shared ones, in batches and one by one, and
    // removes some of its own.
    let new_counts: Vec<u64> = std::thread::scope(|s| {
        let writers: Vec<_> = stores
            .iter()
            .enumerate()
            .map(|(w, store)| {
                s.spawn(move || {
                    let mut new = 0u64;
                    for round in 0..20 {
                        let keys: Vec<Vec<u8>> = (0..25)
                            .map(|i| format!("w{w}-{round}-{i}").into_bytes())
                            .chain((0..5).map(|i| format!("shared-{round}-{i}").into_bytes()))
                            .collect();
                        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                        new += store.insert_all(&refs).unwrap().iter().flatten().count() as u64;
                        if store
                            .insert(format!("single-{w}-{round}").as_bytes())
                            .unwrap()
                            .is_some()
                        {
                            new += 1;
                        }
                        if store
                            .remove(format!("w{w}-{round}-0").as_bytes())
                            .unwrap()
                            .is_some()
                        {
                            new += 1;
                        }
                    }
                    new
                })
            })
            .collect();
        writers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Every change got exactly one generation: the head is the sum, with no gap, and every
    // shared key was new exactly once.
    let total: u64 = new_counts.iter().sum();
    assert_eq!(total, 8 * 20 * (25 + 1 + 1) + 20 * 5);
    assert_eq!(assert_history_is_the_chain(&stores[3]), total);
    assert_eq!(stores[0].key_count().unwrap(), 8 * 20 * (24 + 1) + 20 * 5);
}

#[test]
fn a_writer_that_holds_the_head_never_stalls_the_others_for_long() {
    let server = server();
    let params = server.params("postgres");
    let config: bloom_postgres::postgres::Config = params.parse().unwrap();
    let impatient = PostgresStore::open(
        config.clone(),
        "bloom",
        Settings {
            lock_timeout: std::time::Duration::from_millis(200),
            ..Settings::default()
        },
    )
    .unwrap();
    // A transaction holding the head (a writer paused mid-batch): a writer waiting for it
    // fails after its lock timeout instead of hanging, and commits nothing.
    let mut stuck = server.client("postgres").unwrap();
    let mut tx = stuck.transaction().unwrap();
    tx.query_one("SELECT seq FROM bloom.head FOR UPDATE", &[])
        .unwrap();
    let waited = impatient.insert(b"k");
    assert!(
        matches!(waited, Err(PostgresStoreError::Postgres(_))),
        "{waited:?}"
    );
    tx.rollback().unwrap();
    assert!(!impatient.contains(b"k").unwrap());
    assert_eq!(impatient.insert(b"k").unwrap(), Some(g(1)));

    // Idle in its transaction past the timeout: the server ends it, freeing the head.
    let patient = PostgresStore::open(
        config,
        "bloom",
        Settings {
            idle_in_transaction_timeout: std::time::Duration::from_millis(300),
            ..Settings::default()
        },
    )
    .unwrap();
    let mut idle = server.client("postgres").unwrap();
    idle.batch_execute("SET idle_in_transaction_session_timeout = 300; BEGIN; SELECT seq FROM bloom.head FOR UPDATE;")
        .unwrap();
    assert_eq!(patient.insert(b"after").unwrap(), Some(g(2)));
    assert!(idle.batch_execute("COMMIT").is_err());
}

#[test]
fn one_filtered_store_per_store_on_any_connection() {
    let server = server();
    let params = server.params("postgres");
    let a = PostgresStore::connect(&params).unwrap();
    let b = PostgresStore::connect(&params).unwrap();
    let (first, _) = FilteredStore::open_and_recover(&a, FilterOptions::new(1000, 0.01)).unwrap();
    first.insert("k").unwrap();
    let second = FilteredStore::open_and_recover(&b, FilterOptions::new(1000, 0.01));
    assert!(
        matches!(second, Err(StoreError::InUse)),
        "{:?}",
        second.err()
    );
    drop(first);
    let (again, _) = FilteredStore::open_and_recover(&b, FilterOptions::new(1000, 0.01)).unwrap();
    assert!(again.contains("k").unwrap().is_present());
}

#[test]
fn no_password_reaches_an_error_or_debug() {
    let server = server();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unreachable = format!(
        "host=127.0.0.1 port={port} user=postgres password=hunter2-secret connect_timeout=5"
    );
    let error = PostgresStore::connect(&unreachable).unwrap_err();
    assert!(error.is_connection(), "{error}");
    for text in [error.to_string(), format!("{error:?}")] {
        assert!(!text.contains("hunter2"), "{text}");
    }
    let store = PostgresStore::connect(&format!(
        "{} password=hunter2-secret",
        server.params("postgres")
    ))
    .unwrap();
    assert!(!format!("{store:?}").contains("hunter2"));
}

#[test]
fn a_store_replaced_under_a_running_process_is_never_written_or_answered_for() {
    let server = server();
    server.create_database("app").unwrap();
    let store = PostgresStore::connect(&server.params("app")).unwrap();
    store.insert(b"before").unwrap();
    // Recreated under the running process (its connections are ended): every call now
    // refuses, on a new connection, instead of writing this store's history into another.
    server.drop_database("app").unwrap();
    server.create_database("app").unwrap();
    let other = PostgresStore::connect(&server.params("app")).unwrap();
    other.insert(b"theirs").unwrap();
    for _ in 0..2 {
        assert!(matches!(
            store.insert(b"k"),
            Err(PostgresStoreError::Replaced { .. } | PostgresStoreError::Postgres(_))
        ));
    }
    assert!(matches!(
        store.contains(b"theirs"),
        Err(PostgresStoreError::Replaced { .. })
    ));
    assert!(!other.contains(b"k").unwrap());

    // Replaced on a live connection (the schema dropped and made again by another store):
    // the next write finds another identity under the head it takes, and writes nothing.
    let live = PostgresStore::connect(&server.params("app")).unwrap();
    live.insert(b"mine").unwrap();
    let mut sql = server.client("app").unwrap();
    sql.batch_execute("DROP SCHEMA bloom CASCADE").unwrap();
    let newer = PostgresStore::connect(&server.params("app")).unwrap();
    assert!(matches!(
        live.insert(b"after"),
        Err(PostgresStoreError::Replaced { .. })
    ));
    assert!(!newer.contains(b"after").unwrap());
    assert_eq!(newer.head().unwrap().generation.get(), 0);
}

/// Every way of weakening a store behind its back that an open can see: each is applied to
/// a store of its own (with a few changes in it), which then no longer opens.
#[test]
fn a_store_weakened_or_rewritten_behind_its_back_is_not_opened() {
    let server = server();
    let params = server.params("postgres");
    let weakenings = [
        "ALTER TABLE {ns}.changes ALTER COLUMN removed_at SET DEFAULT 0",
        "ALTER TABLE {ns}.changes ALTER COLUMN key DROP NOT NULL",
        "ALTER TABLE {ns}.changes DROP CONSTRAINT changes_seq_check",
        "CREATE INDEX extra ON {ns}.changes (kind)",
        "CREATE UNIQUE INDEX extra ON {ns}.changes (seq, kind)",
        "CREATE FUNCTION {ns}.evil() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.removed_at := 0; RETURN NEW; END $$;
         CREATE TRIGGER aaa BEFORE INSERT ON {ns}.changes FOR EACH ROW EXECUTE FUNCTION {ns}.evil()",
        "DROP TRIGGER changes_are_append_only ON {ns}.changes;
         CREATE TRIGGER changes_are_append_only BEFORE UPDATE OR DELETE ON {ns}.changes FOR EACH ROW
             WHEN (false) EXECUTE FUNCTION {ns}.changes_are_append_only();
         ALTER TABLE {ns}.changes ENABLE ALWAYS TRIGGER changes_are_append_only",
        "CREATE SCHEMA {ns}_evil;
         CREATE FUNCTION {ns}_evil.head_moves_with_changes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
         DROP TRIGGER head_moves_with_changes ON {ns}.head;
         CREATE TRIGGER head_moves_with_changes BEFORE INSERT OR UPDATE OR DELETE ON {ns}.head
             FOR EACH ROW EXECUTE FUNCTION {ns}_evil.head_moves_with_changes();
         ALTER TABLE {ns}.head ENABLE ALWAYS TRIGGER head_moves_with_changes",
        "ALTER TABLE {ns}.changes ENABLE TRIGGER changes_are_append_only",
        "ALTER TABLE {ns}.changes DISABLE TRIGGER changes_extend_head",
        "CREATE RULE nothing AS ON INSERT TO {ns}.changes DO INSTEAD NOTHING",
        "ALTER TABLE {ns}.changes ENABLE ROW LEVEL SECURITY",
        "ALTER FUNCTION {ns}.changes_extend_head() SECURITY DEFINER",
        "ALTER FUNCTION {ns}.changes_are_append_only() SET search_path = public",
        "ALTER FUNCTION {ns}.changes_extend_head() STABLE",
        "ALTER TABLE {ns}.changes SET UNLOGGED",
        "ALTER TABLE {ns}.store_meta ALTER COLUMN name TYPE text COLLATE \"C\"",
        // Rows rewritten or edited with the guards off.
        "ALTER TABLE {ns}.changes ALTER COLUMN key TYPE bytea USING CASE WHEN seq = 2 THEN '\\x01'::bytea ELSE key END",
        "ALTER TABLE {ns}.changes DISABLE TRIGGER changes_are_append_only;
         DELETE FROM {ns}.changes WHERE seq = 2;
         ALTER TABLE {ns}.changes ENABLE ALWAYS TRIGGER changes_are_append_only",
        "ALTER TABLE {ns}.head DISABLE TRIGGER head_moves_with_changes;
         UPDATE {ns}.head SET seq = 1;
         ALTER TABLE {ns}.head ENABLE ALWAYS TRIGGER head_moves_with_changes",
    ];
    let mut sql = server.client("postgres").unwrap();
    for (i, weaken) in weakenings.iter().enumerate() {
        let ns = format!("w{i}");
        let store = PostgresStore::connect_in(&params, &ns).unwrap();
        store.insert_all(&[b"a", b"b", b"c"]).unwrap();
        drop(store);
        sql.batch_execute(&weaken.replace("{ns}", &ns)).unwrap();
        let opened = PostgresStore::connect_in(&params, &ns);
        assert!(
            matches!(opened, Err(PostgresStoreError::Damaged { .. })),
            "{weaken}: {opened:?}"
        );
    }
    // A trigger of someone else's cannot move the head either.
    let refused = sql.batch_execute(
        "CREATE TABLE mover (x int);
         CREATE FUNCTION mover_f() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN UPDATE w0.head SET seq = 5; RETURN NEW; END $$;
         CREATE TRIGGER mover_t AFTER INSERT ON mover FOR EACH ROW EXECUTE FUNCTION mover_f();
         INSERT INTO mover VALUES (1);",
    );
    assert!(refused.is_err());
    // The guards fire under `session_replication_role = replica` too.
    let store = PostgresStore::connect_in(&params, "replica").unwrap();
    store.insert(b"a").unwrap();
    let refused = sql.batch_execute(
        "SET session_replication_role = replica; DELETE FROM replica.changes; UPDATE replica.head SET seq = 0;",
    );
    assert!(refused.is_err());
    sql.batch_execute("SET session_replication_role = origin")
        .unwrap();
    assert_eq!(assert_history_is_the_chain(&store), 1);
}

#[test]
fn a_port_that_is_not_postgresql_fails_the_open_instead_of_hanging() {
    // A listener that never answers (its backlog takes the connection), and one that
    // answers as another protocol does.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::Write as _;
        for stream in other.incoming().flatten() {
            let mut stream = stream;
            let _ = stream.write_all(b"-ERR unknown command\r\n");
        }
    });
    let silent_port = silent.local_addr().unwrap().port();
    let server = server();
    for params in [
        format!("host=127.0.0.1 port={silent_port}"),
        format!("host=127.0.0.1 port={other_port}"),
        format!("hostaddr=127.0.0.1 port={silent_port}"),
        // The client tries the silent one first: it would hang there.
        format!(
            "host=127.0.0.1,127.0.0.1 port={silent_port},{}",
            server.port()
        ),
    ] {
        let params = format!("{params} user=postgres connect_timeout=1");
        let opened = PostgresStore::connect(&params);
        assert!(
            matches!(opened, Err(PostgresStoreError::Unreachable(_))),
            "{params}: {opened:?}"
        );
        assert!(opened.unwrap_err().is_connection());
    }
}

#[test]
fn a_claim_ended_by_a_server_restart_is_taken_again_or_given_up() {
    let mut server = server();
    let params = server.params("postgres");
    let options = || FilterOptions::new(1000, 0.01);
    let a = PostgresStore::connect(&params).unwrap();
    let (first, _) = FilteredStore::open_and_recover(&a, options()).unwrap();
    first.insert("k1").unwrap();

    // Restarted: the claim's connection is gone. The next connection takes the claim again,
    // so a second wrapper is still refused.
    server.stop().unwrap();
    server.start_again().unwrap();
    while first.insert("k2").is_err() {} // the pooled connections fail, once each
    let b = PostgresStore::connect(&params).unwrap();
    assert!(matches!(
        FilteredStore::open_and_recover(&b, options()),
        Err(StoreError::InUse)
    ));

    // The claim's connection ended while another session waits for its lock (another
    // wrapper that got there first): the claim is given up, and the first wrapper stops
    // answering instead of answering "absent" for the other's keys.
    let find_claim = "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2
                      AND classid = 1651273571::oid AND granted";
    let mut admin = server.client("postgres").unwrap();
    let holder: i32 = admin.query_one(find_claim, &[]).unwrap().get(0);
    let name = format!("bloom:{}", a.identity().unwrap());
    let waiter = std::thread::spawn({
        let params = params.clone();
        move || {
            let mut other = postgres::Client::connect(&params, postgres::NoTls).unwrap();
            other
                .execute(
                    "SELECT pg_advisory_lock(1651273571, hashtext($1))",
                    &[&name],
                )
                .unwrap();
            other
        }
    });
    while admin
        .query_opt(
            "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 AND NOT granted",
            &[],
        )
        .unwrap()
        .is_none()
    {
        std::thread::yield_now();
    }
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&holder])
        .unwrap();
    let _other = waiter.join().unwrap();
    let lost = loop {
        match first.contains("never-inserted") {
            Err(StoreError::Store(e @ PostgresStoreError::ClaimLost { .. })) => break e,
            Err(e) => panic!("{e}"),
            Ok(_) => std::thread::yield_now(),
        }
    };
    assert!(
        lost.to_string()
            .contains("another wrapper took the store's claim"),
        "{lost}"
    );
    assert!(matches!(
        first.insert("k3"),
        Err(StoreError::Store(PostgresStoreError::ClaimLost { .. }))
    ));
}

#[test]
fn after_a_server_restart_the_next_calls_reconnect_without_failing() {
    let mut server = server();
    let store = PostgresStore::connect(&server.params("postgres")).unwrap();
    store.insert_all(&[b"a", b"b"]).unwrap();
    for (immediate, key) in [(false, b"c"), (true, b"d")] {
        if immediate {
            server.stop_immediate().unwrap();
        } else {
            server.stop().unwrap();
        }
        server.start_again().unwrap();
        // The idle connections are dead; a call that failed on one before it wrote anything
        // is run again on a new connection.
        assert!(store.contains(b"a").unwrap());
        server.stop().unwrap();
        server.start_again().unwrap();
        assert_eq!(
            store.insert(key).unwrap().map(|g| g.get()),
            Some(if immediate { 4 } else { 3 })
        );
    }
    assert_eq!(store.key_count().unwrap(), 4);
}
