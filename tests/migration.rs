//! Migrations from every schema that shipped (issue 27 item 3), on databases written by the
//! code that shipped each one (tests/fixtures/, made by tests/fixtures/make-fixtures.sh): an
//! old database opens, migrates in one transaction to schema 4, verifies, keeps its
//! pathways in their states and takes new ones; a database whose ledger does not verify, or
//! whose recorded version and tables disagree, is refused and left byte for byte as it was.
//! And schema 4's ledger, which has no UNIQUE index on its hashes, still has its forks
//! reported by verify.

mod common;

use std::path::{Path, PathBuf};

use common::TempDir;
use rpr::executor::Request;
use rpr::executor::file::{FileExecutor, FileReadback, WRITE_FILE};
use rpr::ledger::ProblemKind;
use rpr::store::{SCHEMA_VERSION, StoreError};
use rpr::{ALLOW_ALL, ActionClass, Actor, Authority, Definition, Outcome, Runtime, StoredPathway};
use rusqlite::Connection;
use serde_json::json;

/// The events every fixture holds: completed (6), human gate with its approval (4), denied
/// (2), an attempt in flight (4, with its attempt record).
const FIXTURE_EVENTS: i64 = 14;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A copy of fixture `name` in a fresh directory.
fn copy_of(name: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new("migration");
    let db = dir.sqlite_db();
    std::fs::copy(fixture(name), &db).unwrap();
    (dir, db)
}

fn text(db: &Path, sql: &str) -> String {
    Connection::open(db)
        .unwrap()
        .query_row(sql, [], |r| r.get::<_, String>(0))
        .unwrap()
}

fn int(db: &Path, sql: &str) -> i64 {
    Connection::open(db)
        .unwrap()
        .query_row(sql, [], |r| r.get::<_, i64>(0))
        .unwrap()
}

fn id_of(db: &Path, key: &str) -> String {
    text(
        db,
        &format!("SELECT id FROM pathways WHERE idempotency_key = '{key}'"),
    )
}

fn state_of(db: &Path, key: &str) -> String {
    text(
        db,
        &format!("SELECT state FROM pathways WHERE idempotency_key = '{key}'"),
    )
}

/// A new pathway, proposed and completed through `rt`.
fn complete_one(rt: &Runtime, dir: &Path, key: &str) -> String {
    let alice = Actor::new("alice");
    let request = Request::new(
        WRITE_FILE,
        json!({"path": format!("{key}.txt"), "content": key}),
    );
    let definition = Definition::new(
        request,
        ActionClass::Mutating,
        key,
        Authority::single(&alice),
    );
    let mut files = FileExecutor::new(dir).unwrap();
    let mut readback = FileReadback::new(&files);
    let bound = rt
        .propose_and_bind(&alice, &alice, definition, ALLOW_ALL, &mut files)
        .unwrap()
        .into_bound()
        .unwrap();
    match bound.dispatch_and_confirm(rt, &alice, &mut files, &mut readback) {
        Outcome::Completed(done) => done.id().to_owned(),
        other => panic!("{key}: not completed: {other:?}"),
    }
}

/// Opens the copy of fixture `name` with today's code and checks everything the migration
/// promises.
fn migrates(name: &str, version: i64, has_pin: bool) {
    let (dir, db) = copy_of(name);
    assert_eq!(
        text(&db, "SELECT value FROM meta WHERE key = 'schema_version'"),
        version.to_string(),
        "{name} is not the schema it claims"
    );
    let ids: Vec<String> = ["fx-completed", "fx-gate", "fx-denied", "fx-in-flight"]
        .iter()
        .map(|k| id_of(&db, k))
        .collect();
    let old_ledger: Vec<(i64, String, String, String, String)> = {
        let c = Connection::open(&db).unwrap();
        let mut st = c
            .prepare("SELECT seq, pathway_id, event, prev_hash, hash FROM ledger ORDER BY seq")
            .unwrap();
        st.query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
    };
    assert_eq!(old_ledger.len(), usize::try_from(FIXTURE_EVENTS).unwrap());

    let rt = Runtime::open(&db).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(
        text(&db, "SELECT value FROM meta WHERE key = 'schema_version'"),
        SCHEMA_VERSION.to_string()
    );
    assert_eq!(
        int(
            &db,
            "SELECT count(*) FROM pragma_index_list('ledger') WHERE origin = 'u'"
        ),
        0,
        "{name}: the ledger still has a UNIQUE index"
    );
    assert_eq!(
        int(
            &db,
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN ('ledger_by_pathway', 'pathways_by_request')"
        ),
        2,
        "{name}: an index is missing after the migration"
    );
    assert_eq!(
        int(
            &db,
            "SELECT count(*) FROM sqlite_master WHERE name = 'ledger_new'"
        ),
        0
    );
    // The ledger, byte for byte.
    {
        let c = Connection::open(&db).unwrap();
        let mut st = c
            .prepare("SELECT seq, pathway_id, event, prev_hash, hash FROM ledger ORDER BY seq")
            .unwrap();
        let now: Vec<(i64, String, String, String, String)> = st
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(now, old_ledger, "{name}: the ledger rows changed");
    }
    let report = rt.verify(None).unwrap();
    assert!(report.is_ok(), "{name}: {:?}", report.problems);
    assert_eq!(report.events, FIXTURE_EVENTS);

    // The pathways, in their states.
    assert_eq!(state_of(&db, "fx-completed"), "completed");
    assert_eq!(state_of(&db, "fx-gate"), "human_gate");
    assert_eq!(state_of(&db, "fx-denied"), "denied");
    assert_eq!(state_of(&db, "fx-in-flight"), "running");
    assert_eq!(
        int(
            &db,
            &format!(
                "SELECT count(*) FROM approvals WHERE pathway_id = '{}' AND used_at IS NULL AND revoked_at IS NULL",
                ids[1]
            )
        ),
        1,
        "{name}: the granted approval"
    );
    assert_eq!(
        int(&db, "SELECT count(*) FROM pins"),
        i64::from(has_pin),
        "{name}: the pin"
    );
    assert!(matches!(
        rt.load(&ids[0]).unwrap(),
        StoredPathway::Completed(_)
    ));
    assert!(matches!(
        rt.load(&ids[1]).unwrap(),
        StoredPathway::HumanGate(_)
    ));
    assert!(matches!(
        rt.load(&ids[2]).unwrap(),
        StoredPathway::Denied(_)
    ));
    // The fixture's process is gone: its attempt is taken over as unknown, never re-sent.
    // (Owners recorded before the boot id was part of them are judged by their lease, ten
    // minutes, long lapsed for a committed fixture.)
    let loaded = rt.load(&ids[3]).unwrap();
    assert!(
        matches!(loaded, StoredPathway::Unknown(_)),
        "{name}: the in-flight attempt: {loaded:?}"
    );
    assert_eq!(state_of(&db, "fx-in-flight"), "write_status_unknown");

    // A new pathway, with a time-ordered id, alongside the old ones.
    let new = complete_one(&rt, dir.path(), "after-migration");
    assert!(new.starts_with("pw_") && new.len() == 27, "{new}");
    let report = rt.verify(None).unwrap();
    assert!(report.is_ok(), "{name}: {:?}", report.problems);
    assert!(report.events > FIXTURE_EVENTS + 1);
    drop(rt);

    // Opening it again migrates nothing and keeps it verified.
    let rt = Runtime::open(&db).unwrap();
    assert!(rt.verify(None).unwrap().is_ok());
}

#[test]
fn schema_1_made_by_its_code_migrates_to_4() {
    migrates("schema1.db", 1, false);
}

#[test]
fn schema_2_made_by_its_code_migrates_to_4() {
    migrates("schema2.db", 2, false);
}

#[test]
fn schema_3_as_first_shipped_without_pathways_by_request_migrates_to_4() {
    assert_eq!(
        int(
            &fixture("schema3-noindex.db"),
            "SELECT count(*) FROM sqlite_master WHERE name = 'pathways_by_request'"
        ),
        0
    );
    migrates("schema3-noindex.db", 3, true);
}

#[test]
fn schema_3_migrates_to_4() {
    migrates("schema3.db", 3, true);
}

/// The file and its `-wal` (if any), as bytes.
fn bytes(db: &Path) -> (Vec<u8>, Option<Vec<u8>>) {
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    (
        std::fs::read(db).unwrap(),
        std::fs::read(wal).ok().filter(|w| !w.is_empty()),
    )
}

/// Changes one ledger event of a copy of `name` by hand (its hash left as it was).
fn tampered(name: &str) -> (TempDir, PathBuf) {
    let (dir, db) = copy_of(name);
    {
        let c = Connection::open(&db).unwrap();
        let changed = c
            .execute(
                "UPDATE ledger SET event = replace(event, '\"actor\":\"alice\"', '\"actor\":\"mallory\"') WHERE seq = 3",
                [],
            )
            .unwrap();
        assert_eq!(changed, 1);
    }
    (dir, db)
}

#[test]
fn a_changed_ledger_event_is_refused_before_migration_and_the_file_is_unchanged() {
    for (name, version) in [("schema1.db", 1), ("schema3.db", 3)] {
        let (_dir, db) = tampered(name);
        let before = bytes(&db);
        let err = Runtime::open(&db).unwrap_err();
        match &err {
            StoreError::MigrationRefused {
                from,
                to,
                problems,
                first,
                ..
            } => {
                assert_eq!((*from, *to), (version, SCHEMA_VERSION));
                assert!(*problems >= 1);
                assert!(first.contains("HashMismatch at seq 3"), "{first}");
            }
            other => panic!("{name}: expected a refused migration, got {other:?}"),
        }
        let text = err.to_string();
        assert!(
            text.contains("does not verify") && text.contains("nothing was written"),
            "{text}"
        );
        assert_eq!(
            bytes(&db),
            before,
            "{name}: the refused migration changed the file"
        );
        assert_eq!(
            self::text(&db, "SELECT value FROM meta WHERE key = 'schema_version'"),
            version.to_string()
        );
        // Refused again, the same way: nothing half done in between.
        assert!(matches!(
            Runtime::open(&db),
            Err(StoreError::MigrationRefused { .. })
        ));
        assert_eq!(bytes(&db), before);
    }
}

#[test]
fn a_recorded_version_its_tables_disagree_with_is_refused_by_name() {
    // Schema 3's tables recorded as 2 (pins exist), and as 4 (the UNIQUE indexes exist).
    for (claimed, expect) in [("2", "a pins table"), ("4", "UNIQUE")] {
        let (_dir, db) = copy_of("schema3.db");
        Connection::open(&db)
            .unwrap()
            .execute(
                "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
                [claimed],
            )
            .unwrap();
        let before = bytes(&db);
        match Runtime::open(&db) {
            Err(StoreError::SchemaMismatch {
                recorded, detail, ..
            }) => {
                assert_eq!(recorded.to_string(), claimed);
                assert!(detail.contains(expect), "{detail}");
            }
            other => panic!("recorded {claimed}: expected a schema mismatch, got {other:?}"),
        }
        assert_eq!(bytes(&db), before);
    }
    // A migration 4 stopped half-way (it cannot be, in one transaction; by hand it can).
    let (_dir, db) = copy_of("schema3.db");
    Connection::open(&db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE ledger_new (seq INTEGER PRIMARY KEY NOT NULL, pathway_id TEXT NOT NULL,
                 event TEXT NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL) STRICT",
        )
        .unwrap();
    match Runtime::open(&db) {
        Err(StoreError::SchemaMismatch { detail, .. }) => {
            assert!(detail.contains("ledger_new"), "{detail}");
        }
        other => panic!("expected a schema mismatch, got {other:?}"),
    }
}

/// Appends, by hand, an event at the end of the chain whose `prev_hash` is `prev` and whose
/// hash is its true chain hash: a copy of the last event with the next seq.
fn append_by_hand(db: &Path, prev: &str) -> Result<i64, rusqlite::Error> {
    let c = Connection::open(db)?;
    let (seq, pathway, event): (i64, String, String) = c.query_row(
        "SELECT seq, pathway_id, event FROM ledger ORDER BY seq DESC LIMIT 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let next = seq + 1;
    let event = event.replace(&format!("\"seq\":{seq}"), &format!("\"seq\":{next}"));
    let hash = rpr::ledger::chain_hash(prev, &event);
    c.execute(
        "INSERT INTO ledger (seq, pathway_id, event, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5)",
        rusqlite::params![next, pathway, event, prev, hash],
    )?;
    Ok(next)
}

#[test]
fn a_fork_written_by_hand_into_schema_4_is_reported_by_verify() {
    let dir = TempDir::new("migration-fork");
    let db = dir.sqlite_db();
    let rt = Runtime::open(&db).unwrap();
    complete_one(&rt, dir.path(), "one");
    complete_one(&rt, dir.path(), "two");
    drop(rt);
    // Two events with one prev_hash: the new one links to what the last one links to.
    let last_prev = text(
        &db,
        "SELECT prev_hash FROM ledger ORDER BY seq DESC LIMIT 1",
    );
    let forked = append_by_hand(&db, &last_prev).expect("schema 4 stores a fork");
    assert_eq!(
        int(
            &db,
            &format!("SELECT count(*) FROM ledger WHERE prev_hash = '{last_prev}'")
        ),
        2
    );
    let rt = Runtime::open(&db).unwrap();
    let report = rt.verify(None).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.kind == ProblemKind::BrokenLink && p.seq == Some(forked)),
        "the fork at seq {forked} is not reported: {:?}",
        report.problems
    );
    drop(rt);
    // The command line says so too, and fails.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rpr"))
        .args(["verify", "--database"])
        .arg(&db)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{said}");
    assert!(said.contains(&format!("seq {forked}")), "{said}");

    // The same fork could not be stored in schema 3 (its UNIQUE index on prev_hash).
    let (_old, v3) = copy_of("schema3.db");
    let prev = text(
        &v3,
        "SELECT prev_hash FROM ledger ORDER BY seq DESC LIMIT 1",
    );
    let refused = append_by_hand(&v3, &prev).unwrap_err();
    assert!(refused.to_string().contains("UNIQUE"), "{refused}");
}

#[test]
fn a_hash_that_does_not_chain_is_reported_by_verify_in_schema_4() {
    let dir = TempDir::new("migration-hash");
    let db = dir.sqlite_db();
    let rt = Runtime::open(&db).unwrap();
    complete_one(&rt, dir.path(), "one");
    drop(rt);
    // Linked to the right event, but its stored hash is another event's (a duplicate hash,
    // which schema 3's UNIQUE index refused and schema 4 stores).
    let last_hash = text(&db, "SELECT hash FROM ledger ORDER BY seq DESC LIMIT 1");
    let seq = append_by_hand(&db, &last_hash).unwrap();
    Connection::open(&db)
        .unwrap()
        .execute(
            "UPDATE ledger SET hash = ?1 WHERE seq = ?2",
            rusqlite::params![last_hash, seq],
        )
        .unwrap();
    let rt = Runtime::open(&db).unwrap();
    let report = rt.verify(None).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.kind == ProblemKind::HashMismatch && p.seq == Some(seq)),
        "{:?}",
        report.problems
    );
}

/// PostgreSQL: only schema 3 shipped (its first migration); tests/fixtures/pg-schema3.sql is
/// a schema written by that code (e1bcd74), dumped as SQL, loaded here into a fresh schema.
#[cfg(feature = "postgres")]
mod pg {
    use super::{FIXTURE_EVENTS, complete_one, fixture};
    use postgres::{Client, NoTls};
    use rpr::store::{SCHEMA_VERSION, StoreError};
    use rpr::{Runtime, StoredPathway};

    fn url() -> String {
        std::env::var("RPR_PG_URL").unwrap_or_else(|_| {
            panic!(
                "RPR_PG_URL is not set: the `postgres` feature's tests need a PostgreSQL server. \
                 Start one with `eval \"$(bash .ci/postgres)\"`"
            )
        })
    }

    /// The fixture, loaded into a new schema; returns the schema and a client in it.
    fn load(tag: &str) -> (String, Client) {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("t_mig_{tag}_{}_{nanos}", std::process::id());
        let sql = std::fs::read_to_string(fixture("pg-schema3.sql"))
            .unwrap()
            .replace("rpr_fixture_v3", &name);
        let mut c = Client::connect(&url(), NoTls).unwrap();
        c.batch_execute(&sql).unwrap();
        c.batch_execute(&format!("SET search_path TO {name}"))
            .unwrap();
        (name, c)
    }

    fn location(schema: &str) -> String {
        let url = url();
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}options=-csearch_path%3D{schema}")
    }

    fn one_text(c: &mut Client, sql: &str) -> String {
        c.query_one(sql, &[]).unwrap().get(0)
    }

    fn one_int(c: &mut Client, sql: &str) -> i64 {
        c.query_one(sql, &[]).unwrap().get(0)
    }

    fn drop_schema(c: &mut Client, name: &str) {
        c.batch_execute(&format!("DROP SCHEMA {name} CASCADE"))
            .unwrap();
    }

    fn state_of(c: &mut Client, key: &str) -> String {
        one_text(
            c,
            &format!("SELECT state FROM pathways WHERE idempotency_key = '{key}'"),
        )
    }

    #[test]
    fn pg_schema_3_made_by_its_code_migrates_to_4() {
        let (name, mut c) = load("v3");
        assert_eq!(
            one_text(
                &mut c,
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ),
            "3"
        );
        let unique = "SELECT count(*) FROM pg_constraint WHERE conrelid = 'ledger'::regclass AND contype = 'u'";
        assert_eq!(one_int(&mut c, unique), 2);
        let ledger = "SELECT string_agg(seq || ' ' || pathway_id || ' ' || event || ' ' || prev_hash || ' ' || hash, E'\\n' ORDER BY seq) FROM ledger";
        let old_ledger = one_text(&mut c, ledger);
        let ids: Vec<String> = ["fx-completed", "fx-gate", "fx-denied", "fx-in-flight"]
            .iter()
            .map(|k| {
                one_text(
                    &mut c,
                    &format!("SELECT id FROM pathways WHERE idempotency_key = '{k}'"),
                )
            })
            .collect();

        let rt = Runtime::open(location(&name)).unwrap();
        assert_eq!(
            one_text(
                &mut c,
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ),
            SCHEMA_VERSION.to_string()
        );
        let versions: Vec<i64> = c
            .query("SELECT version FROM rpr_migrations ORDER BY version", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(versions, vec![3, 4]);
        assert_eq!(one_int(&mut c, unique), 0);
        assert_eq!(
            one_text(&mut c, ledger),
            old_ledger,
            "the ledger rows changed"
        );
        let report = rt.verify(None).unwrap();
        assert!(report.is_ok(), "{:?}", report.problems);
        assert_eq!(report.events, FIXTURE_EVENTS);

        assert_eq!(state_of(&mut c, "fx-completed"), "completed");
        assert_eq!(state_of(&mut c, "fx-gate"), "human_gate");
        assert_eq!(state_of(&mut c, "fx-denied"), "denied");
        assert_eq!(state_of(&mut c, "fx-in-flight"), "running");
        assert_eq!(
            one_int(
                &mut c,
                "SELECT count(*) FROM approvals WHERE used_at IS NULL AND revoked_at IS NULL"
            ),
            1
        );
        assert_eq!(one_int(&mut c, "SELECT count(*) FROM pins"), 1);
        assert!(matches!(
            rt.load(&ids[0]).unwrap(),
            StoredPathway::Completed(_)
        ));
        assert!(matches!(
            rt.load(&ids[1]).unwrap(),
            StoredPathway::HumanGate(_)
        ));
        assert!(matches!(
            rt.load(&ids[2]).unwrap(),
            StoredPathway::Denied(_)
        ));
        let loaded = rt.load(&ids[3]).unwrap();
        assert!(
            matches!(loaded, StoredPathway::Unknown(_)),
            "the in-flight attempt: {loaded:?}"
        );

        let dir = super::TempDir::new("migration-pg");
        let new = complete_one(&rt, dir.path(), "after-migration");
        assert!(new.starts_with("pw_") && new.len() == 27, "{new}");
        let report = rt.verify(None).unwrap();
        assert!(report.is_ok(), "{:?}", report.problems);
        drop(rt);
        // Again: nothing more to migrate.
        let rt = Runtime::open(location(&name)).unwrap();
        assert!(rt.verify(None).unwrap().is_ok());
        drop(rt);
        assert_eq!(one_int(&mut c, "SELECT count(*) FROM rpr_migrations"), 2);
        drop_schema(&mut c, &name);
    }

    #[test]
    fn pg_a_changed_ledger_event_is_refused_before_migration_and_nothing_changes() {
        let (name, mut c) = load("tampered");
        c.batch_execute(
            "UPDATE ledger SET event = replace(event, '\"actor\":\"alice\"', '\"actor\":\"mallory\"') WHERE seq = 3",
        )
        .unwrap();
        let dump = |c: &mut Client| {
            let mut out = String::new();
            for t in [
                "meta",
                "pathways",
                "attempts",
                "approvals",
                "ledger",
                "pins",
                "rpr_migrations",
            ] {
                let q = if t == "rpr_migrations" {
                    "SELECT string_agg(version || ' ' || description, E'\\n' ORDER BY version) FROM rpr_migrations".to_owned()
                } else {
                    format!(
                        "SELECT coalesce(string_agg(x::text, E'\\n' ORDER BY x::text), '') FROM {t} x"
                    )
                };
                out.push_str(&one_text(c, &q));
                out.push('\n');
            }
            out.push_str(&one_int(c, "SELECT count(*) FROM pg_constraint WHERE conrelid = 'ledger'::regclass AND contype = 'u'").to_string());
            out
        };
        let before = dump(&mut c);
        match Runtime::open(location(&name)) {
            Err(StoreError::MigrationRefused {
                from, to, first, ..
            }) => {
                assert_eq!((from, to), (3, SCHEMA_VERSION));
                assert!(first.contains("HashMismatch at seq 3"), "{first}");
            }
            other => panic!("expected a refused migration, got {:?}", other.err()),
        }
        assert_eq!(
            dump(&mut c),
            before,
            "the refused migration changed the schema"
        );
        drop_schema(&mut c, &name);
    }

    #[test]
    fn pg_a_recorded_version_its_constraints_disagree_with_is_refused() {
        let (name, mut c) = load("mismatch");
        // Schema 3's ledger (its UNIQUE constraints) recorded as 4.
        c.batch_execute(
            "INSERT INTO rpr_migrations (version, description) VALUES (4, 'by hand');
             UPDATE meta SET value = '4' WHERE key = 'schema_version'",
        )
        .unwrap();
        match Runtime::open(location(&name)) {
            Err(StoreError::SchemaMismatch {
                recorded, detail, ..
            }) => {
                assert_eq!(recorded, 4);
                assert!(detail.contains("UNIQUE"), "{detail}");
            }
            other => panic!("expected a schema mismatch, got {:?}", other.err()),
        }
        drop_schema(&mut c, &name);
    }
}

#[test]
fn read_only_opens_read_schema_3_as_it_is_and_refuse_1_and_2_by_name() {
    use rpr::store::ReadStore;
    let (_dir, db) = copy_of("schema3.db");
    let before = bytes(&db);
    let store = ReadStore::open_read_only(&db).unwrap();
    assert_eq!(store.status().unwrap().schema_version, 3);
    let report = rpr::store::verify(&store, None).unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    drop(store);
    assert_eq!(bytes(&db), before, "a read-only opening changed the file");
    for (name, version) in [("schema1.db", 1), ("schema2.db", 2)] {
        let (_dir, db) = copy_of(name);
        let before = bytes(&db);
        match ReadStore::open_read_only(&db) {
            Err(StoreError::SchemaTooOld { found, oldest, .. }) => {
                assert_eq!((found, oldest), (version, 3));
            }
            other => panic!("{name}: expected SchemaTooOld, got {:?}", other.err()),
        }
        assert_eq!(bytes(&db), before);
    }
}
