//! Moving a SQLite database into PostgreSQL (`rpr::store::pg::copy_from_sqlite`,
//! `rpr copy-to-postgres`) against a real server.
//!
//! Needs `RPR_PG_URL` (an owner role that may create schemas): `eval "$(bash .ci/postgres)"`
//! starts a server on loopback and prints it. With the feature on and the variable unset,
//! every test fails and says so: nothing is skipped. Each test copies into schemas of its
//! own, dropped at its end when it passed, kept for a look when it failed.
#![cfg(feature = "postgres")]

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use common::*;
use postgres::{Client, NoTls};
use rpr::executor::{Binding, Delivery, Executor, Refusal, Request};
use rpr::store::pg::{CopyError, CopyOutcome, Progress, copy_from_sqlite};
use rpr::store::{ReadStore, StoreError};
use rpr::{ActionClass, Admission, Outcome, PathwayError, Proposal, Runtime, StoredPathway};
use serde_json::{Value, json};

fn url() -> String {
    std::env::var("RPR_PG_URL").unwrap_or_else(|_| {
        panic!(
            "RPR_PG_URL is not set: the `postgres` feature's tests need a PostgreSQL server. \
             Start one with `eval \"$(bash .ci/postgres)\"` (it prints RPR_PG_URL and RPR_PG_READER_URL)"
        )
    })
}

/// A schema name for one test, dropped (if it was made) when the test passed.
struct Schema {
    name: String,
}

impl Schema {
    fn new(tag: &str) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("c_{tag}_{}_{nanos}", std::process::id());
        assert!(name.len() <= 63, "{name}");
        Self { name }
    }

    fn client(&self) -> Client {
        let mut c = Client::connect(&url(), NoTls).expect("connect with RPR_PG_URL");
        c.batch_execute(&format!("SET search_path TO {}", self.name))
            .unwrap();
        c
    }

    /// The copied store, read through the public read side.
    fn open(&self) -> Copied<'_> {
        Copied {
            store: ReadStore::open_read_only(Path::new(&common::pg::location(&self.name)))
                .expect("open the copied store"),
            schema: self,
        }
    }

    fn count(&self, table: &str) -> i64 {
        self.client()
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .unwrap()
            .get(0)
    }

    fn copy(&self, db: &Path) -> Result<rpr::store::pg::CopyReport, CopyError> {
        copy_from_sqlite(db, &url(), Some(&self.name), &mut |_| {})
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept PostgreSQL schema {} of a failing test", self.name);
            return;
        }
        if let Ok(mut c) = Client::connect(&url(), NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
        }
    }
}

const TABLES: [(&str, &str); 6] = [
    ("meta", "key"),
    ("pathways", "id"),
    ("attempts", "id"),
    ("approvals", "id"),
    ("ledger", "seq"),
    ("pins", "server, tool"),
];

/// Every row of `table` in SQLite, each cell as text (`None` for NULL), in key order.
fn sqlite_rows(db: &Path, table: &str, order: &str) -> Vec<Vec<Option<String>>> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let mut stmt = conn
        .prepare(&format!("SELECT * FROM {table} ORDER BY {order}"))
        .unwrap();
    let names: Vec<String> = stmt.column_names().map(str::to_owned).collect();
    let mut rows = stmt.query([]).unwrap();
    let mut out = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        out.push(
            (0..names.len())
                .map(|i| match row.get::<_, rusqlite::types::Value>(i).unwrap() {
                    rusqlite::types::Value::Null => None,
                    rusqlite::types::Value::Integer(n) => Some(n.to_string()),
                    rusqlite::types::Value::Text(t) => Some(t),
                    other => panic!("{table}: unexpected cell {other:?}"),
                })
                .collect(),
        );
    }
    out
}

/// The same rows in PostgreSQL (the columns in SQLite's order), each cell as text.
fn pg_rows(schema: &Schema, db: &Path, table: &str, order: &str) -> Vec<Vec<Option<String>>> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    let names: Vec<String> = conn
        .prepare(&format!("SELECT * FROM {table}"))
        .unwrap()
        .column_names()
        .enumerate()
        .map(|(i, s)| format!("{s}::text AS c{i}"))
        .collect();
    schema
        .client()
        .query(
            &format!("SELECT {} FROM {table} ORDER BY {order}", names.join(", ")),
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (0..names.len()).map(|i| r.get(i)).collect())
        .collect()
}

/// The SQLite ledger's verified head, as `(events, hash)`.
fn sqlite_head(db: &Path) -> (i64, Option<String>) {
    let store = ReadStore::open_read_only(db).unwrap();
    let report = rpr::store::verify(&store, None).unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    (report.events, report.head)
}

fn moved_to(db: &Path) -> Option<Value> {
    let conn =
        rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap();
    conn.query_row("SELECT value FROM meta WHERE key = 'moved_to'", [], |r| {
        r.get::<_, String>(0)
    })
    .ok()
    .map(|v| serde_json::from_str(&v).unwrap())
}

fn propose_new(rt: &Runtime, key: &str) -> Result<Proposal, PathwayError> {
    rt.propose(&actor("proposer"), definition(key, ActionClass::Mutating))
}

fn assert_moved(e: &StoreError, schema: &Schema) {
    match e {
        StoreError::Moved { to } => assert!(to.contains(&schema.name), "{to}"),
        other => panic!("expected Moved, got {other:?}"),
    }
}

#[test]
fn every_table_is_copied_byte_for_byte_and_the_copy_verifies_at_the_same_head() {
    let dir = TempDir::new("copy-all");
    let db = dir.path().join("rpr.db");
    let rt = filled(&dir);
    let database_id = rt.database_id().to_owned();
    drop(rt);
    let (events, head) = sqlite_head(&db);
    assert!(events > 40, "the database has a real ledger: {events}");
    let before: Vec<_> = TABLES.iter().map(|(t, o)| sqlite_rows(&db, t, o)).collect();
    assert!(before.iter().all(|rows| !rows.is_empty()));

    let s = Schema::new("all");
    let mut stages = Vec::new();
    let report = copy_from_sqlite(&db, &url(), Some(&s.name), &mut |p| {
        stages.push(match p {
            Progress::SourceVerified { .. } => "source_verified".to_owned(),
            Progress::Rows { table, done, total } => {
                assert!(done <= total);
                format!("rows {table} {done}/{total}")
            }
            Progress::CopyVerified => "copy_verified".into(),
            Progress::SourceMarked => "source_marked".into(),
            Progress::TargetCommitted => "target_committed".into(),
            _ => "other".into(),
        });
    })
    .unwrap();
    assert_eq!(report.outcome, CopyOutcome::Copied);
    assert_eq!(report.database_id, database_id);
    assert_eq!((report.events, report.head.clone()), (events, head.clone()));
    assert!(!report.target.contains("rpr_owner_pw"), "{}", report.target);
    assert_eq!(stages.first().map(String::as_str), Some("source_verified"));
    assert_eq!(
        stages[stages.len() - 3..],
        ["copy_verified", "source_marked", "target_committed"]
    );
    assert_eq!(stages.iter().filter(|s| s.starts_with("rows ")).count(), 5);

    // The PostgreSQL store verifies, at the same head, with the same identity.
    let pg = s.open();
    assert_eq!(pg.database_id(), database_id);
    let verified = pg.verify(head.as_deref()).unwrap();
    assert!(verified.is_ok(), "{:?}", verified.problems);
    assert_eq!((verified.events, verified.head), (events, head.clone()));
    assert_eq!(
        pg.recorded_head().unwrap(),
        Some((events, head.clone().unwrap()))
    );

    // Every row of every table, cell for cell (meta: the source's, less the move mark).
    for ((table, order), rows) in TABLES.iter().zip(&before) {
        let copied = pg_rows(&s, &db, table, order);
        if *table == "meta" {
            let mut rows = rows.clone();
            rows.retain(|r| r[0].as_deref() != Some("moved_to"));
            assert_eq!(copied, rows, "meta");
        } else {
            assert_eq!(&copied, rows, "{table}");
            assert_eq!(s.count(table), i64::try_from(rows.len()).unwrap());
        }
    }
    assert_eq!(
        usize::try_from(report.rows.ledger).unwrap(),
        before[4].len()
    );

    // The source is marked moved to this target, finished; it still verifies.
    let mark = moved_to(&db).expect("the source is marked moved");
    assert_eq!(mark["finished"], json!(true), "{mark}");
    assert!(
        mark["to"]
            .as_str()
            .unwrap()
            .ends_with(&format!("schema {}", s.name)),
        "{mark}"
    );
    assert_eq!(sqlite_head(&db), (events, head));

    // Copied again to the same target: nothing to do. Elsewhere: refused.
    assert_eq!(s.copy(&db).unwrap().outcome, CopyOutcome::AlreadyMoved);
    let other = Schema::new("elsewhere");
    match other.copy(&db) {
        Err(e @ CopyError::MovedElsewhere { .. }) => {
            assert!(e.to_string().contains(&s.name), "{e}");
        }
        other => panic!("expected MovedElsewhere, got {other:?}"),
    }
    assert_eq!(other.count("ledger"), 0);
}

#[test]
fn after_the_copy_every_step_on_the_sqlite_database_is_refused_and_writes_nothing() {
    let dir = TempDir::new("copy-moved");
    let db = dir.path().join("rpr.db");
    let rt = filled(&dir);
    let s = Schema::new("moved");
    // The runtime stays open across the copy, as a host that was not told would.
    s.copy(&db).unwrap();
    let dump = db_dump(&db);

    // A new proposal, a pin, and the dispatch of an approved pathway: all refused.
    match propose_new(&rt, "after-the-move") {
        Err(PathwayError::Store(e)) => assert_moved(&e, &s),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let binding = Binding::new("server-b", json!({"server": "b"})).unwrap();
    assert_moved(
        &rt.check_pin("b", "read", &binding, &json!({}), &actor("gate"))
            .unwrap_err(),
        &s,
    );
    let approved = rt
        .reader()
        .list_pathways(None, 100, Some(rpr::State::Approved))
        .unwrap();
    let id = approved.first().expect("an approved pathway").id.clone();
    let StoredPathway::Approved(p) = rt.load(&id).unwrap() else {
        panic!("{id} is approved")
    };
    let mut ex = Scripted::ok();
    let bound = p.bind(&mut ex).unwrap();
    match bound.dispatch(&rt, &actor("execution_actor"), &mut ex) {
        Outcome::NotSent(n) => match n.error() {
            PathwayError::Store(e) => assert_moved(e, &s),
            other => panic!("{other:?}"),
        },
        other => panic!("expected NotSent, got {other:?}"),
    }
    assert_eq!(ex.executed, 0, "nothing was sent");
    // Recovery only reads here (the attempt in flight is this live process's, so nothing
    // is taken over); it loads every pathway and, like the refused steps, writes nothing.
    let loaded = rt.recover().expect("recovery reads a moved database");
    assert!(!loaded.is_empty());
    assert_eq!(db_dump(&db), dump, "the refused steps wrote nothing");
    drop(rt);

    // Opening it for steps is refused the same way; reading it still works.
    assert_moved(&Runtime::open(&db).unwrap_err(), &s);
    let store = ReadStore::open_read_only(&db).unwrap();
    assert!(rpr::store::verify(&store, None).unwrap().is_ok());
    assert!(store.status().unwrap().ledger_len > 0);
    assert_eq!(db_dump(&db), dump);
}

#[test]
fn a_target_that_is_not_empty_is_refused_and_nothing_is_merged() {
    let (a, b) = (TempDir::new("copy-a"), TempDir::new("copy-b"));
    drop(filled(&a));
    let rt_b = filled(&b);
    let s = Schema::new("full");
    s.copy(&a.path().join("rpr.db")).unwrap();
    let head = s.open().verify(None).unwrap().head;

    match s.copy(&b.path().join("rpr.db")) {
        Err(e @ CopyError::TargetNotEmpty { .. }) => {
            assert_eq!(e.kind(), "target_not_empty");
            assert!(e.to_string().contains("pathways"), "{e}");
        }
        other => panic!("expected TargetNotEmpty, got {other:?}"),
    }
    // The target holds A alone; B is not marked and still takes steps.
    let after = s.open().verify(None).unwrap();
    assert!(after.is_ok());
    assert_eq!(after.head, head);
    assert_eq!(moved_to(&b.path().join("rpr.db")), None);
    assert!(matches!(
        propose_new(&rt_b, "still-here").unwrap(),
        Proposal::New(_)
    ));

    // A target with only a tool pin is not empty either.
    let pins_only = Schema::new("pins");
    rpr::store::pg::prepare_schema(&url(), &pins_only.name).unwrap();
    pins_only
        .client()
        .batch_execute(
            "INSERT INTO pins (server, tool, digest, binding, definition, pinned_by, pinned_at)
             VALUES ('s', 't', 'd', '{}', '{}', 'x', 1)",
        )
        .unwrap();
    assert!(matches!(
        pins_only.copy(&b.path().join("rpr.db")),
        Err(CopyError::TargetNotEmpty { .. })
    ));
    assert_eq!(pins_only.count("pathways"), 0);
}

/// A copied store, read as a user of the crate reads one.
struct Copied<'s> {
    store: ReadStore,
    schema: &'s Schema,
}

impl Copied<'_> {
    fn database_id(&self) -> String {
        self.schema
            .client()
            .query_one("SELECT value FROM meta WHERE key = 'database_id'", &[])
            .unwrap()
            .get(0)
    }

    fn verify(&self, head: Option<&str>) -> Result<rpr::ledger::Report, StoreError> {
        rpr::store::verify(&self.store, head)
    }

    fn recorded_head(&self) -> Result<Option<(i64, String)>, StoreError> {
        self.store.recorded_head()
    }
}

/// An executor that, while its request is in flight, tries the copy.
struct CopyWhileInFlight {
    schema: String,
    db: std::path::PathBuf,
    result: Option<Result<rpr::store::pg::CopyReport, CopyError>>,
    /// `rpr copy-to-postgres` run at the same moment: exit status and stderr.
    cli: Option<(Option<i32>, String)>,
}

impl Executor for CopyWhileInFlight {
    fn bind(&mut self, _request: &Request) -> Result<Binding, Refusal> {
        Ok(Binding::new("x", json!({"x": 1})).unwrap())
    }
    fn prepare(&mut self, _request: &Request, _binding: &Binding) -> Result<(), Refusal> {
        Ok(())
    }
    fn execute(&mut self, _request: &Request) -> Delivery {
        self.result = Some(copy_from_sqlite(
            &self.db,
            &url(),
            Some(&self.schema),
            &mut |_| {},
        ));
        let db = self.db.display().to_string();
        let (code, _, err) = rpr(&[
            "copy-to-postgres",
            "--database",
            &db,
            "--to",
            &url(),
            "--schema",
            &self.schema,
        ]);
        self.cli = Some((code, err));
        Delivery::Succeeded {
            reply: json!({"ok": true}),
        }
    }
}

#[test]
fn a_source_with_an_attempt_in_flight_is_refused() {
    let dir = TempDir::new("copy-in-flight");
    let db = dir.path().join("rpr.db");
    let rt = runtime(&db);
    let s = Schema::new("inflight");
    let Proposal::New(p) = propose_new(&rt, "in-flight").unwrap() else {
        panic!()
    };
    let Admission::Approved(p) = p
        .admit(&rt, &actor("decision_owner"), &|_| rpr::Decision::Allow)
        .unwrap()
    else {
        panic!()
    };
    let mut ex = CopyWhileInFlight {
        schema: s.name.clone(),
        db: db.clone(),
        result: None,
        cli: None,
    };
    let bound = p.bind(&mut ex).unwrap();
    let Outcome::Returned(_) = bound.dispatch(&rt, &actor("execution_actor"), &mut ex) else {
        panic!("the dispatch goes on")
    };
    match ex.result.expect("the executor ran") {
        Err(e @ CopyError::InFlight { .. }) => {
            assert_eq!(e.kind(), "in_flight");
            let text = e.to_string();
            assert!(text.contains("1 attempt(s) in flight"), "{text}");
            assert!(text.contains("rpr unresolved"), "{text}");
            let CopyError::InFlight { attempts, .. } = e else {
                unreachable!()
            };
            assert_eq!(attempts.len(), 1);
            assert!(attempts[0].owner.is_some());
        }
        other => panic!("expected InFlight, got {other:?}"),
    }
    let (code, err) = ex.cli.expect("the command ran");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("attempt(s) in flight"), "{err}");
    assert_eq!(s.count("ledger"), 0, "nothing copied");
    assert_eq!(moved_to(&db), None, "the source is not marked");
    // Once the attempt returned, the copy goes through.
    drop(rt);
    assert_eq!(s.copy(&db).unwrap().outcome, CopyOutcome::Copied);
}

#[test]
fn a_source_that_does_not_verify_is_refused() {
    let dir = TempDir::new("copy-tampered");
    let db = dir.path().join("rpr.db");
    drop(filled(&dir));
    let conn = rusqlite::Connection::open(&db).unwrap();
    let n = conn
        .execute(
            "UPDATE ledger SET event = replace(event, '\"actor\":\"proposer\"', '\"actor\":\"someone\"') WHERE seq = 1",
            [],
        )
        .unwrap();
    assert_eq!(n, 1);
    drop(conn);
    let s = Schema::new("tampered");
    match s.copy(&db) {
        Err(e @ CopyError::SourceDoesNotVerify { .. }) => {
            assert_eq!(e.kind(), "source_does_not_verify");
            assert!(e.to_string().contains("rpr verify"), "{e}");
            let CopyError::SourceDoesNotVerify { problems, .. } = e else {
                unreachable!()
            };
            assert!(problems.iter().any(|p| p.seq == Some(1)), "{problems:?}");
        }
        other => panic!("expected SourceDoesNotVerify, got {other:?}"),
    }
    assert_eq!(s.count("ledger"), 0);
    assert_eq!(s.count("pathways"), 0);
    assert_eq!(moved_to(&db), None);
}

/// The child of the crash test: copies, and dies (SIGABRT, no unwinding, nothing closed)
/// the moment the copy reports the stage named by `RPR_COPY_CRASH_AT`.
#[test]
fn crash_child_entry() {
    let Ok(at) = std::env::var("RPR_COPY_CRASH_AT") else {
        return;
    };
    let db = std::env::var("RPR_COPY_CRASH_DB").unwrap();
    let schema = std::env::var("RPR_COPY_CRASH_SCHEMA").unwrap();
    let _ = copy_from_sqlite(Path::new(&db), &url(), Some(&schema), &mut |p| {
        let stage = match p {
            Progress::CopyVerified => "copy_verified",
            Progress::SourceMarked => "source_marked",
            Progress::TargetCommitted => "target_committed",
            _ => "",
        };
        if stage == at {
            std::process::abort();
        }
    });
    panic!("the child was not stopped at {at}");
}

fn crash_at(stage: &str, db: &Path, schema: &Schema) {
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "pg_copy::crash_child_entry",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RPR_COPY_CRASH_AT", stage)
        .env("RPR_COPY_CRASH_DB", db)
        .env("RPR_COPY_CRASH_SCHEMA", &schema.name)
        .output()
        .unwrap();
    // SIGABRT from `abort()` at the stage, not a panic (exit 101) or a clean end.
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status.status),
        Some(6),
        "the child did not die at {stage}: {:?}\n{}",
        status.status,
        String::from_utf8_lossy(&status.stderr)
    );
}

#[test]
fn a_copy_killed_in_each_window_is_finished_or_redone_by_the_rerun_and_never_two_stores_take_steps()
{
    for stage in ["copy_verified", "source_marked", "target_committed"] {
        let dir = TempDir::new("copy-crash");
        let db = dir.path().join("rpr.db");
        drop(filled(&dir));
        let (events, head) = sqlite_head(&db);
        let s = Schema::new("crash");
        crash_at(stage, &db, &s);

        let copied = s.count("ledger") > 0;
        let mark = moved_to(&db);
        match stage {
            // Before the mark: nothing happened anywhere; the source takes steps.
            "copy_verified" => {
                assert!(!copied && mark.is_none(), "{stage}: {mark:?}");
                let rt = Runtime::open(&db).unwrap();
                assert!(matches!(
                    propose_new(&rt, "still-mine").unwrap(),
                    Proposal::New(_)
                ));
            }
            // Marked, target not committed: neither store holds steps to take but the
            // source, and it refuses them.
            "source_marked" => {
                assert!(!copied, "{stage}: the target's transaction rolled back");
                assert_eq!(mark.as_ref().unwrap()["finished"], json!(false));
                assert_moved(&Runtime::open(&db).unwrap_err(), &s);
            }
            // Committed, the mark unfinished: the source refuses steps, the copy is whole.
            _ => {
                assert!(copied, "{stage}: the target committed");
                assert_eq!(mark.as_ref().unwrap()["finished"], json!(false));
                let e = Runtime::open(&db).unwrap_err();
                assert_moved(&e, &s);
                assert!(e.to_string().contains("unfinished"), "{e}");
                let pg = s.open();
                let report = pg.verify(None).unwrap();
                assert!(report.is_ok(), "{:?}", report.problems);
                assert_eq!((report.events, report.head), (events, head.clone()));
            }
        }

        let (events_now, head_now) = sqlite_head(&db);
        let rerun = s.copy(&db).unwrap();
        let expected = if stage == "target_committed" {
            CopyOutcome::FinishedEarlierCopy
        } else {
            CopyOutcome::Copied
        };
        assert_eq!(rerun.outcome, expected, "{stage}");
        assert_eq!(
            (rerun.events, rerun.head.clone()),
            (events_now, head_now.clone())
        );
        let report = s.open().verify(None).unwrap();
        assert!(report.is_ok(), "{stage}: {:?}", report.problems);
        assert_eq!((report.events, report.head), (events_now, head_now));
        assert_eq!(moved_to(&db).unwrap()["finished"], json!(true), "{stage}");
        assert_moved(&Runtime::open(&db).unwrap_err(), &s);
        assert_eq!(s.copy(&db).unwrap().outcome, CopyOutcome::AlreadyMoved);
    }
}

fn rpr(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rpr"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_rpr_command_copies_reports_and_refuses_each_bad_input() {
    let dir = TempDir::new("copy-cli");
    let db = dir.path().join("rpr.db");
    let db_s = db.display().to_string();
    drop(filled(&dir));
    let (events, head) = sqlite_head(&db);
    let s = Schema::new("cli");
    let u = url();

    // A missing file, a file that is not an rpr database.
    let missing = dir.path().join("nope.db").display().to_string();
    let (code, _, err) = rpr(&["copy-to-postgres", "--database", &missing, "--to", &u]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no such database file"), "{err}");
    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, b"this is not a database at all, just text").unwrap();
    let junk = junk.display().to_string();
    let (code, out, err) = rpr(&[
        "copy-to-postgres",
        "--database",
        &junk,
        "--to",
        &u,
        "--json",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("not an rpr database"), "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["kind"], "source_not_rpr_database", "{doc}");

    // A server that is not there, and a URL that does not parse.
    let (code, out, err) = rpr(&[
        "copy-to-postgres",
        "--database",
        &db_s,
        "--to",
        "postgres://rpr_owner:secret@127.0.0.1:1/rpr",
        "--json",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("cannot open the PostgreSQL target"), "{err}");
    assert!(
        !err.contains("secret") && !out.contains("secret"),
        "{err}{out}"
    );
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["kind"], "target_unreachable");
    let (code, _, err) = rpr(&[
        "copy-to-postgres",
        "--database",
        &db_s,
        "--to",
        "postgres://h:port/db",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("target URL"), "{err}");
    assert_eq!(moved_to(&db), None, "nothing marked by the refusals");

    // The copy itself, with --json: the document on stdout, progress on stderr.
    let (code, out, err) = rpr(&[
        "copy-to-postgres",
        "--database",
        &db_s,
        "--to",
        &u,
        "--schema",
        &s.name,
        "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["copied"], true, "{doc}");
    assert_eq!(doc["outcome"], "copied");
    assert_eq!(doc["events"], json!(events));
    assert_eq!(doc["head"], json!(head));
    assert!(err.contains("ledger: "), "{err}");
    assert!(err.contains("the source is marked moved"), "{err}");
    assert!(!out.contains("rpr_owner_pw") && !err.contains("rpr_owner_pw"));
    let report = s.open().verify(None).unwrap();
    assert!(report.is_ok());
    assert_eq!(report.head, head);

    // Again, as text: already moved. Reading the source works; a step on it is refused.
    let (code, out, err) = rpr(&[
        "copy-to-postgres",
        "--database",
        &db_s,
        "--to",
        &u,
        "--schema",
        &s.name,
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("already moved there"), "{out}");
    // Found there, not copied now: checked when it was copied, not said verified now.
    assert!(!out.contains("verified in the target"), "{out}");
    assert!(
        out.contains("check it as it is now with `rpr verify`"),
        "{out}"
    );
    let (code, out, err) = rpr(&["status", "--database", &db_s]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("ledger: "), "{out}");
    let (code, _, err) = rpr(&["verify", "--database", &db_s]);
    assert_eq!(code, Some(0), "{err}");
    let gate = ReadStore::open_read_only(&db)
        .unwrap()
        .list_pathways(None, 100, Some(rpr::State::HumanGate))
        .unwrap();
    let id = gate[0].id.clone();
    let (code, _, err) = rpr(&[
        "deny",
        "--database",
        &db_s,
        "--pathway",
        &id,
        "--as",
        "decision_owner",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("was moved to"), "{err}");

    // Another database into the same schema: not empty. One changed by hand: refused.
    let other = TempDir::new("copy-cli-other");
    drop(filled(&other));
    let other_db = other.path().join("rpr.db").display().to_string();
    let (code, out, err) = rpr(&[
        "copy-to-postgres",
        "--database",
        &other_db,
        "--to",
        &u,
        "--schema",
        &s.name,
        "--json",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("is not empty"), "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["kind"],
        "target_not_empty"
    );
    let conn = rusqlite::Connection::open(other.path().join("rpr.db")).unwrap();
    conn.execute(
        "UPDATE attempts SET status = 'in_flight', owner = 'host-x', lease_until = 1
         WHERE rowid = (SELECT min(rowid) FROM attempts)",
        [],
    )
    .unwrap();
    drop(conn);
    let fresh = Schema::new("cli_fresh");
    let (code, _, err) = rpr(&[
        "copy-to-postgres",
        "--database",
        &other_db,
        "--to",
        &u,
        "--schema",
        &fresh.name,
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("does not verify"), "{err}");
}

/// A signed log moves with its database: the copy keeps the identity (the checkpoint's
/// origin) and `meta.log_checkpoint`, so the copy verifies with the same key and a runtime
/// with that key steps on it; without the key, none does.
#[test]
fn a_signed_log_is_copied_and_verifies_and_signs_on_postgresql() {
    use rpr::evidence::note::SignerKey;
    use rpr::store::log::{self, Signing};
    let key = SignerKey::from_seed("rpr-copy-log", &[3; 32]).unwrap();
    let dir = TempDir::new("copy-signed");
    let db = dir.path().join("rpr.db");
    {
        let rt = Runtime::builder(&db)
            .signing(Signing::new(key.clone()))
            .open()
            .unwrap();
        for k in ["a", "b"] {
            let _ = propose_new(&rt, k).unwrap();
        }
    }
    let s = Schema::new("signed");
    s.copy(&db).unwrap();
    let copied = s.open();
    let report = log::verify_log(&copied.store, &key.verifier(), None).unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(
        report.checkpoint.unwrap().size,
        u64::try_from(s.count("ledger")).unwrap()
    );
    let location = common::pg::location(&s.name);
    assert!(matches!(
        Runtime::open(&location),
        Err(StoreError::Log(log::LogError::SigningKeyNeeded { .. }))
    ));
    let rt = Runtime::builder(&location)
        .signing(Signing::new(key.clone()))
        .open()
        .unwrap();
    let _ = propose_new(&rt, "c").unwrap();
    let after = log::verify_log(&copied.store, &key.verifier(), None).unwrap();
    assert!(after.is_ok(), "{:?}", after.problems);
    assert!(after.checkpoint.unwrap().size > report.events);
}
