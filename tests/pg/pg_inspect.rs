//! Read-only inspection of a PostgreSQL store (issue 11): `ReadStore::open_read_only`
//! on a `postgres://` location, through the read-only role `rpr_reader`.
//!
//! A SQLite database made through the public API is copied into PostgreSQL
//! (`copy_from_sqlite`: same ids, same hashes), and every read of `ReadStore`, every
//! `inspect` view `rpr-mcp` serves and `store::verify` must answer the same on both,
//! tampered copies included. Then the proof that the reader cannot write (by the session's
//! read-only transactions, and by the role even when the session turns them off), its
//! snapshots, and `Runtime::reader()` on a PostgreSQL runtime.
//!
//! Needs `RPR_PG_URL` (the owner) and `RPR_PG_READER_URL` (the read-only role):
//! `eval "$(bash .ci/postgres)"`. Each test copies into schemas of its own, dropped when
//! it passed, kept for a look when it failed.
#![cfg(feature = "postgres")]

use crate::common;

use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use postgres::error::SqlState;
use postgres::{Client, NoTls};
use rpr::executor::Request;
use rpr::inspect::{self, InspectError};
use rpr::store::{ReadStore, StoreError};
use rpr::{ActionClass, Definition, Runtime, State};
use serde_json::{Value, json};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: the `postgres` feature's tests need a PostgreSQL server. \
             Start one with `eval \"$(bash .ci/postgres)\"` (it prints RPR_PG_URL and RPR_PG_READER_URL)"
        )
    })
}

/// A SQLite database and its copy in a PostgreSQL schema of its own (dropped on drop,
/// unless the test failed).
struct Pair {
    dir: TempDir,
    schema: String,
}

/// A request several pathways share (one open, two closed), for `open_with_request`.
fn shared(key: &str, class: ActionClass) -> Definition {
    let mut d = definition(key, class);
    d.request = Request::new("put", json!({"key": "shared", "value": "v"}));
    d
}

impl Pair {
    /// [`filled`], three pathways of one request (`shared-open` approved, `shared-done`
    /// completed, `shared-denied` denied), copied into a new schema.
    fn new(tag: &str) -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = TempDir::new(tag);
        let rt = filled(&dir);
        let _ = allowed(&rt, shared("shared-open", ActionClass::Mutating));
        let mut ex = Scripted::ok();
        allowed(&rt, shared("shared-done", ActionClass::ReadOnly))
            .bind(&mut ex)
            .unwrap()
            .dispatch(&rt, &actor("execution_actor"), &mut ex)
            .into_completed()
            .unwrap();
        let denied = rt
            .propose(
                &actor("proposer"),
                shared("shared-denied", ActionClass::Mutating),
            )
            .unwrap()
            .into_new()
            .unwrap()
            .admit(&rt, &actor("decision_owner"), &|_| {
                rpr::Decision::Deny("no".into())
            })
            .unwrap();
        assert!(matches!(denied, rpr::Admission::Denied(_)));
        drop(rt);
        let schema = format!(
            "i_{tag}_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        rpr::store::pg::copy_from_sqlite(
            &dir.sqlite_db(),
            &env("RPR_PG_URL"),
            Some(&schema),
            &mut |_| {},
        )
        .unwrap();
        Self { dir, schema }
    }

    fn sqlite(&self) -> PathBuf {
        self.dir.sqlite_db()
    }

    fn lite(&self) -> ReadStore {
        ReadStore::open_read_only(&self.sqlite()).unwrap()
    }

    /// The copy, through the read-only role.
    fn reader(&self) -> ReadStore {
        ReadStore::open_read_only(Path::new(&pg::reader_location(&self.schema))).unwrap()
    }

    /// The copy, through the owner's URL (a role that may write).
    fn owner_reader(&self) -> ReadStore {
        ReadStore::open_read_only(Path::new(&pg::location(&self.schema))).unwrap()
    }

    /// A plain connection as the owner, in the copy's schema.
    fn owner(&self) -> Client {
        let mut c = Client::connect(&env("RPR_PG_URL"), NoTls).unwrap();
        c.batch_execute(&format!("SET search_path TO {}", self.schema))
            .unwrap();
        c
    }

    /// The same hand edit on both stores, behind rpr's back (the PostgreSQL one as owner).
    fn edit_both(&self, sql: &str) {
        let n = rusqlite::Connection::open(self.sqlite())
            .unwrap()
            .execute(sql, [])
            .unwrap();
        assert_eq!(n, 1, "{sql}: SQLite");
        let n = self.owner().execute(sql, &[]).unwrap();
        assert_eq!(n, 1, "{sql}: PostgreSQL");
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        pg::drop_schema(&self.schema);
    }
}

/// `read` on both stores: equal, and returned.
fn same<T: PartialEq + Debug, E: Debug>(
    what: &str,
    lite: &ReadStore,
    pg: &ReadStore,
    read: impl Fn(&ReadStore) -> Result<T, E>,
) -> T {
    let a = read(lite).unwrap_or_else(|e| panic!("{what} on SQLite: {e:?}"));
    let b = read(pg).unwrap_or_else(|e| panic!("{what} on PostgreSQL: {e:?}"));
    assert_eq!(a, b, "{what}: SQLite (left) and PostgreSQL (right) differ");
    a
}

/// An `inspect` view on both stores, compared as JSON values; the SQLite one returned.
fn same_view<T: serde::Serialize>(
    what: &str,
    lite: &ReadStore,
    pg: &ReadStore,
    view: impl Fn(&ReadStore) -> Result<T, InspectError>,
) -> Value {
    same(what, lite, pg, |s| {
        view(s).map(|v| serde_json::to_value(v).unwrap())
    })
}

/// Every page of a listing of `limit` items, following `after` from each page's last id.
fn pages_same<T: PartialEq + Debug>(
    what: &str,
    lite: &ReadStore,
    pg: &ReadStore,
    limit: usize,
    page: impl Fn(&ReadStore, Option<&str>) -> Result<Vec<T>, StoreError>,
    key: impl Fn(&T) -> String,
) -> Vec<T> {
    let mut all = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let got = same(&format!("{what} after {after:?}"), lite, pg, |s| {
            page(s, after.as_deref())
        });
        assert!(got.len() <= limit, "{what}: a page over its limit");
        let Some(last) = got.last() else { break };
        after = Some(key(last));
        let full = got.len() == limit;
        all.extend(got);
        if !full {
            break;
        }
    }
    all
}

/// Every page of an `inspect` listing, following each side's own `next_cursor`.
fn view_pages_same(
    what: &str,
    lite: &ReadStore,
    pg: &ReadStore,
    page: impl Fn(&ReadStore, Option<&str>) -> Result<Value, InspectError>,
) -> usize {
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let got = same(&format!("{what} at {cursor:?}"), lite, pg, |s| {
            page(s, cursor.as_deref())
        });
        pages += 1;
        match got["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return pages,
        }
        assert!(pages < 1000, "{what}: pages without end");
    }
}

const NO_DIGEST: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[test]
fn every_read_and_every_inspect_view_answer_the_same_on_sqlite_and_its_postgresql_copy() {
    let pair = Pair::new("equal");
    let (lite, pg) = (pair.lite(), pair.reader());
    assert!(!lite.is_postgres());
    assert!(pg.is_postgres());

    // Database-wide figures.
    let status = same("status", &lite, &pg, ReadStore::status);
    assert!(status.ledger_len > 40, "a real ledger: {status:?}");
    let head = same("ledger_head", &lite, &pg, ReadStore::ledger_head).expect("a head");
    assert_eq!(
        same("recorded_head", &lite, &pg, ReadStore::recorded_head),
        Some(head.clone())
    );

    // Every pathway listed, in pages of every size, with and without each state filter.
    let all = same("list_pathways", &lite, &pg, |s| {
        s.list_pathways(None, 1000, None)
    });
    assert_eq!(all.len(), 19, "{all:?}");
    for limit in [1, 2, 3, 7, 1000] {
        let paged = pages_same(
            &format!("list_pathways limit {limit}"),
            &lite,
            &pg,
            limit,
            |s, after| s.list_pathways(after, limit, None),
            |p| p.id.clone(),
        );
        assert_eq!(paged, all, "limit {limit}");
        let mut in_states = 0;
        for state in State::ALL {
            let paged = pages_same(
                &format!("list_pathways {state:?} limit {limit}"),
                &lite,
                &pg,
                limit,
                |s, after| s.list_pathways(after, limit, Some(state)),
                |p| p.id.clone(),
            );
            assert!(paged.iter().all(|p| p.state == state));
            in_states += paged.len();
        }
        assert_eq!(in_states, all.len(), "every pathway under its own state");
        let unresolved = pages_same(
            &format!("list_unresolved limit {limit}"),
            &lite,
            &pg,
            limit,
            |s, after| s.list_unresolved(after, limit),
            |p| p.id.clone(),
        );
        assert_eq!(
            i64::try_from(unresolved.len()).unwrap(),
            status.unresolved,
            "limit {limit}"
        );
    }
    // Past the end, and after an id that sorts before all of them.
    let last = all.last().unwrap().id.clone();
    assert!(
        same("after the last", &lite, &pg, |s| s.list_pathways(
            Some(&last),
            5,
            None
        ))
        .is_empty()
    );
    assert_eq!(
        same("after ''", &lite, &pg, |s| s.list_pathways(
            Some(""),
            1000,
            None
        )),
        all
    );

    // Each pathway: the row, its attempts, its events (whole and in pages of 2); a missing id.
    let mut attempts = 0;
    for p in &all {
        let id = p.id.as_str();
        assert_eq!(same(id, &lite, &pg, |s| s.pathway(id)).as_ref(), Some(p));
        attempts += same(&format!("attempts {id}"), &lite, &pg, |s| s.attempts(id)).len();
        let events = same(&format!("events {id}"), &lite, &pg, |s| {
            s.events(id, 0, 1000)
        });
        assert!(!events.is_empty(), "{id}");
        let paged = pages_same(
            &format!("events {id}"),
            &lite,
            &pg,
            2,
            |s, after| s.events(id, after.map_or(0, |a| a.parse().unwrap()), 2),
            |e| e.seq.to_string(),
        );
        assert_eq!(paged, events, "{id}");
    }
    assert!(attempts >= 8, "attempts of every kind: {attempts}");
    assert_eq!(
        same("missing pathway", &lite, &pg, |s| s.pathway("pw_nope")),
        None
    );
    assert!(same("missing attempts", &lite, &pg, |s| s.attempts("pw_nope")).is_empty());
    assert!(same("missing events", &lite, &pg, |s| s.events("pw_nope", 0, 10)).is_empty());
    // A key with a NUL byte (which a JSON string may carry into rpr-mcp): no PostgreSQL
    // text value holds one, so nothing is found, as on SQLite (not a 22021 error).
    let nul = "pw_000004\0";
    assert_eq!(same("NUL pathway", &lite, &pg, |s| s.pathway(nul)), None);
    assert!(same("NUL attempts", &lite, &pg, |s| s.attempts(nul)).is_empty());
    assert!(same("NUL events", &lite, &pg, |s| s.events(nul, 0, 10)).is_empty());
    assert!(same("NUL open", &lite, &pg, |s| s.open_with_request(nul)).is_empty());
    assert_eq!(
        same("NUL count", &lite, &pg, |s| s.count_with_request(nul)),
        0
    );
    assert!(same("NUL pin", &lite, &pg, |s| s.pin("a\0", "write")).is_none());
    assert!(same("NUL pin tool", &lite, &pg, |s| s.pin("a", "write\0")).is_none());
    assert!(
        same("NUL pin digest", &lite, &pg, |s| s
            .pin_digest("a\0", "write"))
        .is_none()
    );
    for after in [nul, "pw_\0", "\0", "pw_000004\0\u{1}z"] {
        let page = same(&format!("after {after:?}"), &lite, &pg, |s| {
            s.list_pathways(Some(after), 3, None)
        });
        assert!(!page.is_empty(), "{after:?}");
        same(&format!("unresolved after {after:?}"), &lite, &pg, |s| {
            s.list_unresolved(Some(after), 3)
        });
        same(&format!("held after {after:?}"), &lite, &pg, |s| {
            s.list_pathways(Some(after), 3, Some(State::Held))
        });
    }

    // Pathways by request digest: an open one among closed ones, a closed one, an unknown one.
    let digest = |key: &str| {
        all.iter()
            .find(|p| p.idempotency_key == key)
            .unwrap()
            .request_digest
            .clone()
    };
    let open = digest("shared-open");
    assert_eq!(open, digest("shared-done"));
    let found = same("open_with_request shared", &lite, &pg, |s| {
        s.open_with_request(&open)
    });
    assert_eq!(
        found
            .iter()
            .map(|p| p.idempotency_key.as_str())
            .collect::<Vec<_>>(),
        ["shared-open"]
    );
    assert_eq!(
        same("count shared", &lite, &pg, |s| s.count_with_request(&open)),
        3
    );
    let closed = digest("s12");
    assert!(
        same("open_with_request closed", &lite, &pg, |s| s
            .open_with_request(&closed))
        .is_empty()
    );
    assert_eq!(
        same("count closed", &lite, &pg, |s| s
            .count_with_request(&closed)),
        1
    );
    assert!(
        same("open_with_request unknown", &lite, &pg, |s| s
            .open_with_request(NO_DIGEST))
        .is_empty()
    );
    assert_eq!(
        same("count unknown", &lite, &pg, |s| s
            .count_with_request(NO_DIGEST)),
        0
    );

    // The whole ledger, in pages of several sizes, from before the start.
    let ledger = same("ledger", &lite, &pg, |s| s.ledger(-1, 100_000));
    assert_eq!(i64::try_from(ledger.len()).unwrap(), status.ledger_len);
    for limit in [1, 5, 64] {
        let paged = pages_same(
            &format!("ledger limit {limit}"),
            &lite,
            &pg,
            limit,
            |s, after| s.ledger(after.map_or(0, |a| a.parse().unwrap()), limit),
            |e| e.seq.to_string(),
        );
        assert_eq!(paged, ledger, "limit {limit}");
    }

    // Tool pins.
    assert_eq!(same("pins", &lite, &pg, ReadStore::pins).len(), 1);
    assert!(same("pin a/write", &lite, &pg, |s| s.pin("a", "write")).is_some());
    assert!(same("pin a/none", &lite, &pg, |s| s.pin("a", "none")).is_none());
    assert!(same("pin none/write", &lite, &pg, |s| s.pin("none", "write")).is_none());
    // The digest alone (what the gate compares before each call) is the pin's digest.
    let pinned = same("pin a/write", &lite, &pg, |s| s.pin("a", "write")).unwrap();
    assert_eq!(
        same("pin digest a/write", &lite, &pg, |s| s
            .pin_digest("a", "write")),
        Some(pinned.digest)
    );
    assert!(
        same("pin digest a/none", &lite, &pg, |s| s
            .pin_digest("a", "none"))
        .is_none()
    );

    // The ledger verifies, with the same report, at no known head, the head, an earlier
    // event's hash, and a hash the chain never had.
    let report = same("verify", &lite, &pg, |s| rpr::store::verify(s, None));
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(
        (report.events, report.head.as_deref()),
        (status.ledger_len, Some(head.1.as_str()))
    );
    let earlier = ledger[ledger.len() / 2].hash.clone();
    for known in [head.1.as_str(), earlier.as_str()] {
        let r = same(&format!("verify at {known}"), &lite, &pg, |s| {
            rpr::store::verify(s, Some(known))
        });
        assert!(r.is_ok(), "{known}: {:?}", r.problems);
    }
    let r = same("verify at an unknown head", &lite, &pg, |s| {
        rpr::store::verify(s, Some(NO_DIGEST))
    });
    assert!(!r.is_ok(), "a known head the chain lacks is a problem");

    // Every view rpr-mcp serves, as JSON: status, the listings in pages (each filter),
    // each pathway's detail (its attempts and who acts next) and its evidence in pages.
    let view = same_view("inspect::status", &lite, &pg, inspect::status);
    assert_eq!(view["mode"], "read_only");
    for limit in [1, 3, inspect::MAX_LIMIT] {
        for state in std::iter::once(None).chain(State::ALL.map(Some)) {
            view_pages_same(
                &format!("inspect::list_pathways {state:?} {limit}"),
                &lite,
                &pg,
                |s, c| {
                    inspect::list_pathways(s, state, limit, c)
                        .map(|v| serde_json::to_value(v).unwrap())
                },
            );
        }
        let pages = view_pages_same(
            &format!("inspect::list_unresolved {limit}"),
            &lite,
            &pg,
            |s, c| inspect::list_unresolved(s, limit, c).map(|v| serde_json::to_value(v).unwrap()),
        );
        assert!(limit > 1 || pages > 5, "paged: {pages}");
    }
    for p in &all {
        let id = p.id.as_str();
        let detail = same_view(&format!("inspect::pathway {id}"), &lite, &pg, |s| {
            inspect::pathway(s, id)
        });
        assert!(detail["next"]["action"].is_string(), "{detail}");
        for limit in [2, inspect::MAX_LIMIT] {
            view_pages_same(
                &format!("inspect::evidence {id} {limit}"),
                &lite,
                &pg,
                |s, c| {
                    let page = inspect::evidence(s, id, limit, c)?;
                    assert!(page.chain_verified, "{id}: {:?}", page.problems);
                    Ok(serde_json::to_value(page).unwrap())
                },
            );
        }
    }
    for bad in ["pw_nope", "", "pw_000004\0"] {
        let code = |s: &ReadStore| inspect::pathway(s, bad).unwrap_err().code();
        assert_eq!(code(&lite), code(&pg), "{bad:?}");
        let code = |s: &ReadStore| inspect::evidence(s, bad, 5, None).unwrap_err().code();
        assert_eq!(code(&lite), code(&pg), "{bad:?}");
    }

    // A crafted cursor whose key holds a NUL byte pages on as on SQLite.
    let hex = |t: &str| {
        t.bytes().fold(String::new(), |mut out, b| {
            std::fmt::Write::write_fmt(&mut out, format_args!("{b:02x}")).unwrap();
            out
        })
    };
    let cursor = format!("rpr1.{}", hex("pathways\n\npw_000004\0"));
    same_view("inspect::list_pathways NUL cursor", &lite, &pg, |s| {
        inspect::list_pathways(s, None, 3, Some(&cursor))
    });
    let cursor = format!("rpr1.{}", hex("unresolved\n\npw_000004\0"));
    same_view("inspect::list_unresolved NUL cursor", &lite, &pg, |s| {
        inspect::list_unresolved(s, 3, Some(&cursor))
    });

    // `schema()` is each engine's own DDL (SQLite's CREATE statements; PostgreSQL's
    // catalogue, as `TABLE name (column type, …)` and each index's definition), so it
    // differs by design. What must agree: the same tables with the same columns in the
    // same order, plus PostgreSQL's own migration record; every named index of SQLite's.
    let lite_schema = lite.schema().unwrap();
    let pg_schema = pg.schema().unwrap();
    let tables = |objects: &[String], prefix: &str| -> Vec<String> {
        let mut t: Vec<String> = objects
            .iter()
            .filter_map(|o| o.strip_prefix(prefix))
            .map(|o| {
                o.split([' ', '('])
                    .next()
                    .unwrap()
                    .trim_matches('"')
                    .to_owned()
            })
            .collect();
        t.sort();
        t
    };
    let mut expected = tables(&lite_schema, "CREATE TABLE ");
    expected.push("rpr_migrations".into());
    expected.sort();
    assert_eq!(tables(&pg_schema, "TABLE "), expected, "{pg_schema:#?}");
    for index in tables(&lite_schema, "CREATE INDEX ") {
        assert!(
            pg_schema
                .iter()
                .any(|o| o.starts_with(&format!("CREATE INDEX {index} "))),
            "{index} missing from {pg_schema:#?}"
        );
    }
    let conn = rusqlite::Connection::open_with_flags(
        pair.sqlite(),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    for table in tables(&lite_schema, "CREATE TABLE ") {
        let lite_columns: Vec<String> = conn
            .prepare(&format!(
                "SELECT name FROM pragma_table_info('{table}') ORDER BY cid"
            ))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let object = pg_schema
            .iter()
            .find(|o| o.starts_with(&format!("TABLE {table} (")))
            .unwrap();
        let pg_columns: Vec<&str> = object[format!("TABLE {table} (").len()..object.len() - 1]
            .split(", ")
            .map(|c| c.split(' ').next().unwrap())
            .collect();
        assert_eq!(pg_columns, lite_columns, "{table}: {object}");
    }
}

/// What both walks must agree on about each problem: its kind, event and pathway.
fn findings(
    r: &rpr::ledger::Report,
) -> Vec<(rpr::ledger::ProblemKind, Option<i64>, Option<String>)> {
    let mut f: Vec<_> = r
        .problems
        .iter()
        .map(|p| (p.kind, p.seq, p.pathway.clone()))
        .collect();
    f.sort_by_key(|(k, s, p)| (format!("{k:?}"), *s, p.clone()));
    f
}

#[test]
fn a_row_edited_by_hand_in_the_postgresql_copy_is_found_through_the_reader_as_on_sqlite() {
    use rpr::ledger::ProblemKind::{AttemptMismatch, HashMismatch, StateMismatch, Truncated};
    for (what, edit, kind) in [
        (
            "a ledger event's text",
            "UPDATE ledger SET event = replace(event, '\"actor\":\"proposer\"', '\"actor\":\"someone\"') WHERE seq = 1",
            HashMismatch,
        ),
        (
            "a pathway's state",
            "UPDATE pathways SET state = 'completed' WHERE idempotency_key = 's04'",
            StateMismatch,
        ),
        (
            "an attempt's status",
            "UPDATE attempts SET status = 'applied' WHERE pathway_id = (SELECT id FROM pathways WHERE idempotency_key = 's06')",
            AttemptMismatch,
        ),
        (
            "the ledger's last event",
            "DELETE FROM ledger WHERE seq = (SELECT max(seq) FROM ledger)",
            Truncated,
        ),
    ] {
        let pair = Pair::new("tamper");
        pair.edit_both(edit);
        let (lite, pg) = (pair.lite(), pair.reader());
        let a = rpr::store::verify(&lite, None).unwrap();
        let b = rpr::store::verify(&pg, None).unwrap();
        assert!(
            findings(&a).iter().any(|f| f.0 == kind),
            "{what}: SQLite finds {kind:?}: {:?}",
            a.problems
        );
        assert_eq!(
            findings(&a),
            findings(&b),
            "{what}: SQLite (left), PostgreSQL (right)"
        );
        assert_eq!((a.events, &a.head), (b.events, &b.head), "{what}");
        // The evidence views of every pathway agree too (the edited chain shown unverified).
        let all = same("list", &lite, &pg, |s| s.list_pathways(None, 1000, None));
        let mut unverified = 0;
        for p in &all {
            let page = same_view(&format!("{what}: evidence {}", p.id), &lite, &pg, |s| {
                inspect::evidence(s, &p.id, inspect::MAX_LIMIT, None)
            });
            unverified += usize::from(page["chain_verified"] == false);
            same_view(&format!("{what}: detail {}", p.id), &lite, &pg, |s| {
                inspect::pathway(s, &p.id)
            });
        }
        assert_eq!(unverified, usize::from(kind == HashMismatch), "{what}");
        same_view(&format!("{what}: status"), &lite, &pg, inspect::status);
    }
}

/// Every table of the PostgreSQL store.
const TABLES: [&str; 7] = [
    "meta",
    "pathways",
    "attempts",
    "approvals",
    "ledger",
    "pins",
    "rpr_migrations",
];

/// Statements that write or would let the session write, each one the owner can run (see
/// `owner_can_run`). `{owner}` and `{reader}` are the roles' names.
fn writes(owner: &str, reader: &str) -> Vec<String> {
    let mut w = Vec::new();
    for t in TABLES {
        let key = match t {
            "meta" => "key",
            "ledger" => "seq",
            "pins" => "server",
            "rpr_migrations" => "version",
            _ => "id",
        };
        w.push(format!(
            "INSERT INTO {t} SELECT * FROM {t} ON CONFLICT DO NOTHING"
        ));
        w.push(format!("UPDATE {t} SET {key} = {key}"));
        let only_unreferenced = if t == "pathways" {
            " WHERE id NOT IN (SELECT pathway_id FROM attempts UNION ALL SELECT pathway_id FROM approvals)"
        } else {
            ""
        };
        w.push(format!("DELETE FROM {t}{only_unreferenced}"));
        w.push(format!("TRUNCATE {t} CASCADE"));
    }
    w.extend(
        [
            "INSERT INTO meta (key, value) VALUES ('probe', 'written')",
            "CREATE TABLE probe (x int)",
            "CREATE TEMP TABLE probe (x int)",
            "CREATE INDEX probe_idx ON meta (value)",
            "CREATE VIEW probe_view AS SELECT * FROM meta",
            "CREATE FUNCTION probe_fn() RETURNS int LANGUAGE sql AS 'SELECT 1'",
            "DROP TABLE pins",
            "DROP INDEX ledger_by_pathway",
            "ALTER TABLE meta ADD COLUMN probe int",
            "SELECT nextval('probe_seq')",
            "LOCK TABLE ledger IN EXCLUSIVE MODE",
            "SELECT * FROM pathways FOR UPDATE",
            "SELECT * FROM ledger ORDER BY seq DESC LIMIT 1 FOR NO KEY UPDATE",
            "SET default_transaction_read_only = off; INSERT INTO meta (key, value) VALUES ('probe', 'written')",
            "SET transaction_read_only = off; INSERT INTO meta (key, value) VALUES ('probe', 'written')",
            "CREATE SCHEMA probe_schema",
        ]
        .map(str::to_owned),
    );
    w.push("SET transaction_read_only = off".into());
    w.push(format!("SET ROLE {owner}"));
    w.push(format!("GRANT INSERT ON meta TO {reader}"));
    w.push(format!(
        "SET ROLE {owner}; INSERT INTO meta (key, value) VALUES ('probe', 'written')"
    ));
    w
}

/// Probes that end the `ReadStore`'s transaction and open a writable one of their own.
const ESCAPES: [&str; 3] = [
    "COMMIT; INSERT INTO meta (key, value) VALUES ('probe', 'escaped')",
    "COMMIT; BEGIN READ WRITE; INSERT INTO meta (key, value) VALUES ('probe', 'escaped'); COMMIT",
    "COMMIT; BEGIN READ WRITE; INSERT INTO meta (key, value) VALUES ('probe', 'escaped'); COMMIT; \
     BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SAVEPOINT rpr_probe",
];

/// Reads like the read API's: none may be refused.
const READS: [&str; 10] = [
    "SELECT state, count(*) FROM pathways GROUP BY state",
    "SELECT value FROM meta WHERE key = 'schema_version'",
    "SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1",
    "SELECT * FROM pathways WHERE id > '' ORDER BY id LIMIT 5",
    "SELECT * FROM attempts ORDER BY pathway_id, seq",
    "SELECT * FROM approvals ORDER BY id",
    "SELECT * FROM ledger WHERE pathway_id = 'x' AND seq > 0 ORDER BY seq LIMIT 10",
    "SELECT * FROM pins ORDER BY server, tool",
    "SELECT count(*) FROM pathways WHERE request_digest = 'x'",
    "SELECT version, description FROM rpr_migrations",
];

/// `sql` runs as the owner (in a transaction rolled back): a refusal elsewhere is the
/// connection's doing, not a statement that cannot run.
fn owner_can_run(owner: &mut Client, sql: &str) {
    let mut tx = owner.transaction().unwrap();
    if let Err(e) = tx.batch_execute(sql) {
        panic!("the owner cannot run {sql:?} either: {e}");
    }
    tx.rollback().unwrap();
}

/// Every row of every table and what the schema, the roles and the database hold, as text.
fn fingerprint(pair: &Pair) -> String {
    let mut c = pair.owner();
    let mut out = db_dump(Path::new(&pg::location(&pair.schema)));
    for sql in TABLES
        .map(|t| format!("SELECT '{t}: ' || t::text FROM {t} t ORDER BY 1"))
        .into_iter()
        .chain([
            format!(
                "SELECT relname || ' ' || relkind::text || ' ' || coalesce(relacl::text, '') FROM pg_class \
                 WHERE relnamespace = '{}'::regnamespace ORDER BY 1",
                pair.schema
            ),
            format!(
                "SELECT proname FROM pg_proc WHERE pronamespace = '{}'::regnamespace ORDER BY 1",
                pair.schema
            ),
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'probe%' ORDER BY 1".into(),
            "SELECT rolname || ' ' || coalesce(rolconfig::text, '') FROM pg_roles WHERE rolname LIKE 'rpr%' ORDER BY 1".into(),
            "SELECT roleid::regrole::text || ' ' || member::regrole::text FROM pg_auth_members ORDER BY 1".into(),
        ])
    {
        for row in c.query(&sql, &[]).unwrap() {
            out.push_str(&row.get::<_, String>(0));
            out.push('\n');
        }
    }
    out
}

/// The error `sql` fails with, in a transaction of its own (rolled back).
fn refused(c: &mut Client, sql: &str) -> postgres::Error {
    let mut tx = c.transaction().unwrap();
    match tx.batch_execute(sql) {
        Ok(()) => panic!("{sql:?} ran"),
        Err(e) => e,
    }
}

/// Asserts two fingerprints are equal, naming only the lines that differ.
fn unchanged(before: &str, after: &str, what: &str) {
    if before != after {
        let gone: Vec<&str> = before
            .lines()
            .filter(|l| !after.lines().any(|a| a == *l))
            .collect();
        let new: Vec<&str> = after
            .lines()
            .filter(|l| !before.lines().any(|b| b == *l))
            .collect();
        panic!("{what} changed the database: lines gone {gone:#?}, lines new {new:#?}");
    }
}

fn role(url: &str) -> String {
    url.parse::<postgres::Config>()
        .unwrap()
        .get_user()
        .unwrap()
        .to_owned()
}

#[test]
fn the_reader_cannot_write_by_its_read_only_session_nor_by_its_role() {
    let pair = Pair::new("nowrite");
    let (owner, reader) = (role(&env("RPR_PG_URL")), role(&env("RPR_PG_READER_URL")));
    let mut admin = pair.owner();
    // rpr's schema has no sequence; one for `nextval`.
    admin.batch_execute("CREATE SEQUENCE probe_seq").unwrap();
    let before = fingerprint(&pair);
    let writes = writes(&owner, &reader);
    for sql in &writes {
        owner_can_run(&mut admin, sql);
    }
    let mut copy = admin.copy_in("COPY meta FROM STDIN").unwrap();
    std::io::Write::write_all(&mut copy, b"probe\twritten\n").unwrap();
    drop(copy); // not finished: the copy is abandoned
    unchanged(
        &before,
        &fingerprint(&pair),
        "the owner's probes, rolled back",
    );

    // (a) Through the reader role's ReadStore: every write refused, every read allowed.
    let store = pair.reader();
    for sql in writes
        .iter()
        .map(String::as_str)
        .chain(ESCAPES)
        .chain(["COPY meta FROM STDIN"])
    {
        assert!(
            store.would_refuse(sql),
            "the reader's ReadStore ran {sql:?}"
        );
    }
    for sql in READS {
        assert!(
            !store.would_refuse(sql),
            "the reader's ReadStore refused {sql:?}"
        );
    }
    // The store still reads after all of it.
    assert!(rpr::store::verify(&store, None).unwrap().is_ok());

    // (b) The role's own connection, its read-only default turned off: no privilege.
    let mut raw = Client::connect(&pg::reader_location(&pair.schema), NoTls).unwrap();
    raw.batch_execute("SET default_transaction_read_only = off")
        .unwrap();
    let read_only: String = raw
        .query_one("SHOW transaction_read_only", &[])
        .unwrap()
        .get(0);
    assert_eq!(
        read_only, "off",
        "the session may write as far as the setting goes"
    );
    for sql in [
        "INSERT INTO meta (key, value) VALUES ('probe', 'written')",
        "UPDATE pathways SET state = 'completed'",
        "DELETE FROM ledger",
        "TRUNCATE ledger",
        "CREATE TABLE probe (x int)",
        "CREATE TEMP TABLE probe (x int)",
        "CREATE SCHEMA probe_schema",
        "DROP TABLE pins",
        "ALTER TABLE meta ADD COLUMN probe int",
        "SELECT nextval('probe_seq')",
        "LOCK TABLE ledger IN EXCLUSIVE MODE",
        "SELECT * FROM pathways FOR UPDATE",
        &format!("SET ROLE {owner}"),
    ] {
        let e = refused(&mut raw, sql);
        assert_eq!(
            e.code(),
            Some(&SqlState::INSUFFICIENT_PRIVILEGE),
            "{sql}: {e}"
        );
    }
    let e = raw.copy_in("COPY meta FROM STDIN").map(drop).unwrap_err();
    assert_eq!(
        e.code(),
        Some(&SqlState::INSUFFICIENT_PRIVILEGE),
        "COPY: {e}"
    );
    drop(raw);

    // (c) With the owner's URL (privileges to write), the session's read-only transactions
    // alone refuse the same writes: each fails with 25006 on such a session, and the
    // ReadStore refuses it.
    let owner_store = pair.owner_reader();
    let mut ro = pair.owner();
    ro.batch_execute("SET default_transaction_read_only = on")
        .unwrap();
    for sql in &writes {
        if sql.starts_with("LOCK TABLE") || *sql == format!("SET ROLE {owner}") {
            // Not writes, so not refused here: a read-only transaction may take any lock
            // (PostgreSQL allows LOCK TABLE in one; the probe's rollback gives it back at
            // once), and the owner may become itself. The reader role refuses both (a, b).
            assert!(!owner_store.would_refuse(sql), "{sql}");
            continue;
        }
        assert!(
            owner_store.would_refuse(sql),
            "the owner's ReadStore ran {sql:?}"
        );
        // A session that turns its own transaction read-write is not well-behaved: there
        // only the role stops it (b). The owner may become itself.
        if sql.starts_with("SET transaction_read_only") || sql.starts_with("SET ROLE") {
            continue;
        }
        let e = refused(&mut ro, sql);
        assert_eq!(
            e.code(),
            Some(&SqlState::READ_ONLY_SQL_TRANSACTION),
            "{sql}: {e}"
        );
    }
    assert!(owner_store.would_refuse("COPY meta FROM STDIN"));
    let e = ro.copy_in("COPY meta FROM STDIN").map(drop).unwrap_err();
    assert_eq!(
        e.code(),
        Some(&SqlState::READ_ONLY_SQL_TRANSACTION),
        "COPY: {e}"
    );
    for sql in READS {
        assert!(
            !owner_store.would_refuse(sql),
            "the owner's ReadStore refused {sql:?}"
        );
    }
    for sql in ESCAPES {
        assert!(
            owner_store.would_refuse(sql),
            "the owner's ReadStore ran {sql:?}"
        );
        unchanged(&before, &fingerprint(&pair), sql);
    }
    // A statement that is not a write but streams (COPY TO): whatever the answer, the
    // store reads on after it.
    let _ = owner_store.would_refuse("COPY meta TO STDOUT");
    let _ = store.would_refuse("COPY meta TO STDOUT");
    assert!(rpr::store::verify(&owner_store, None).unwrap().is_ok());
    assert!(rpr::store::verify(&store, None).unwrap().is_ok());

    // (d) Nothing changed, byte for byte.
    unchanged(&before, &fingerprint(&pair), "all of it");
}

/// A migrated schema of its own with a deterministic runtime on it (the owner), and the
/// reader role's location.
struct Fresh {
    schema: String,
}

impl Fresh {
    fn new(tag: &str) -> Self {
        Self {
            schema: pg::schema(tag),
        }
    }
    fn runtime(&self) -> Runtime {
        runtime(Path::new(&pg::location(&self.schema)))
    }
    fn reader(&self) -> ReadStore {
        ReadStore::open_read_only(Path::new(&pg::reader_location(&self.schema))).unwrap()
    }
}

impl Drop for Fresh {
    fn drop(&mut self) {
        pg::drop_schema(&self.schema);
    }
}

/// As `a_snapshot_holds_one_view_nests_and_ends_on_error_and_panic` (`tests/core/snapshot_reads.rs`)
/// on SQLite: every read in a snapshot sees the database as of its start, commits made
/// meanwhile by a runtime on another connection are not seen, a nested snapshot sees the
/// same, and the snapshot ends (later reads see the commits) whether `f` returns `Ok`,
/// returns `Err` or panics.
#[test]
fn a_postgresql_snapshot_holds_one_view_nests_and_ends_on_error_and_panic() {
    let fresh = Fresh::new("snapshot");
    let rt = fresh.runtime();
    let store = fresh.reader();
    let propose = |key: &str| {
        rt.propose(&actor("proposer"), definition(key, ActionClass::Mutating))
            .unwrap()
            .into_new()
            .unwrap()
            .id()
            .to_owned()
    };
    let len = |s: &ReadStore| s.status().unwrap().ledger_len;
    let a = propose("a");
    let start = store.status().unwrap();
    assert_eq!(start.ledger_len, 1);

    let (seen, b) = store
        .snapshot(|s| {
            let first = s.status()?;
            let b = propose("b");
            let nested = s.snapshot(|s| Ok::<_, StoreError>((s.status()?, s.pathway(&b)?)))?;
            // A refused probe inside the snapshot leaves it usable, and the same.
            assert!(s.would_refuse("INSERT INTO meta (key, value) VALUES ('x', 'y')"));
            // An error inside a nested snapshot ends only that level.
            let inner = s.snapshot(|s| {
                let _ = s.status()?;
                Err::<(), _>(StoreError::Corrupt("inner".into()))
            });
            assert!(matches!(inner, Err(StoreError::Corrupt(_))));
            Ok::<_, StoreError>(((first, nested, s.status()?, s.pathway(&b)?), b))
        })
        .unwrap();
    assert_eq!(
        seen,
        (start.clone(), (start.clone(), None), start.clone(), None),
        "one view for the whole snapshot"
    );
    let after_ok = store.status().unwrap();
    assert_eq!(after_ok.ledger_len, 2, "the snapshot ended with Ok");
    assert!(store.pathway(&b).unwrap().is_some());
    assert!(store.pathway(&a).unwrap().is_some());

    let err = store.snapshot(|s| {
        let _ = len(s);
        propose("c");
        Err::<(), _>(StoreError::Corrupt("stop here".into()))
    });
    assert!(matches!(err, Err(StoreError::Corrupt(_))));
    assert_eq!(len(&store), 3, "the snapshot ended with Err");

    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        store.snapshot(|s| -> Result<(), StoreError> {
            let _ = len(s);
            propose("d");
            s.snapshot(|s| -> Result<(), StoreError> {
                let _ = len(s);
                panic!("inside a nested snapshot (expected by the test)")
            })
        })
    }));
    assert!(panicked.is_err());
    assert_eq!(len(&store), 4, "the snapshot ended with the panic");
    // And a new snapshot after it is a new view.
    let view = store
        .snapshot(|s| {
            let before = len(s);
            propose("e");
            Ok::<_, StoreError>((before, len(s)))
        })
        .unwrap();
    assert_eq!(view, (4, 4));
    assert_eq!(len(&store), 5);
}

/// `would_refuse` runs its statement on PostgreSQL (SQLite only prepares it), inside the
/// caller's snapshot when one is open. A statement that ends that transaction (`COMMIT`,
/// `ROLLBACK`, with or without `AND CHAIN`, or one that releases the probe's savepoint)
/// ends the snapshot: its later reads fail instead of reading outside it, and the store
/// reads again once the snapshot is over.
#[test]
fn a_probe_that_ends_the_transaction_fails_the_rest_of_the_snapshot_instead_of_leaving_it() {
    let fresh = Fresh::new("probe_end");
    let rt = fresh.runtime();
    let store = fresh.reader();
    let propose = |key: &str| {
        let _ = rt
            .propose(&actor("proposer"), definition(key, ActionClass::Mutating))
            .unwrap();
    };
    propose("a");
    for (n, probe) in [
        "COMMIT",
        "ROLLBACK",
        "END",
        "COMMIT AND CHAIN",
        "ROLLBACK AND CHAIN",
        "RELEASE SAVEPOINT rpr_probe",
    ]
    .into_iter()
    .enumerate()
    {
        let start = store.status().unwrap().ledger_len;
        let (refused, nested, later) = store
            .snapshot(|s| {
                assert_eq!(s.status()?.ledger_len, start);
                let refused = s.would_refuse(probe);
                propose(&format!("p{n}"));
                let nested = s.snapshot(ReadStore::status).map(|st| st.ledger_len);
                Ok::<_, StoreError>((refused, nested, s.status().map(|st| st.ledger_len)))
            })
            .unwrap();
        assert!(refused, "{probe}");
        assert!(
            later.is_err(),
            "{probe}: read outside the snapshot: {later:?}"
        );
        assert!(
            nested.is_err(),
            "{probe}: read outside the snapshot: {nested:?}"
        );
        assert_eq!(store.status().unwrap().ledger_len, start + 1, "{probe}");
        // Outside a snapshot the probe has its own, and the next read is fine.
        assert!(store.would_refuse(probe), "{probe}");
        assert_eq!(store.status().unwrap().ledger_len, start + 1, "{probe}");
    }
}

#[test]
fn runtime_reader_on_postgresql_reads_what_the_runtime_wrote_and_cannot_write() {
    let fresh = Fresh::new("rt_reader");
    let rt = fresh.runtime();
    scripted_states(&rt);
    let reader = rt.reader();
    assert!(reader.is_postgres());
    let all = reader.list_pathways(None, 1000, None).unwrap();
    assert_eq!(all.len(), 14);
    let mut counts = std::collections::BTreeMap::new();
    for p in &all {
        assert_eq!(rt.pathway_record(&p.id).unwrap().as_ref(), Some(p));
        assert_eq!(
            reader.attempts(&p.id).unwrap(),
            rt.attempt_records(&p.id).unwrap()
        );
        assert_eq!(
            reader.events(&p.id, 0, 1000).unwrap(),
            rt.pathway_events(&p.id).unwrap()
        );
        *counts.entry(p.state.as_str().to_owned()).or_insert(0) += 1;
    }
    let status = inspect::status(&reader).unwrap();
    counts.retain(|_, n| *n > 0);
    let mut shown = status.counts.clone();
    shown.retain(|_, n| *n > 0);
    assert_eq!(shown, counts);
    assert_eq!(
        reader.ledger(0, 100_000).unwrap(),
        rt.ledger_rows(0, 100_000).unwrap()
    );
    let report = rpr::store::verify(&reader, None).unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report, rt.verify(None).unwrap());
    assert_eq!(status.ledger_length, report.events);
    assert!(reader.would_refuse("INSERT INTO meta (key, value) VALUES ('x', 'y')"));
    drop(reader);

    // A step committed after is seen by the next read.
    let id = rt
        .propose(
            &actor("proposer"),
            definition("later", ActionClass::Mutating),
        )
        .unwrap()
        .into_new()
        .unwrap()
        .id()
        .to_owned();
    assert_eq!(
        rt.reader().pathway(&id).unwrap(),
        rt.pathway_record(&id).unwrap()
    );
    assert_eq!(
        inspect::status(&rt.reader()).unwrap().ledger_length,
        status.ledger_length + 1
    );
}

/// A snapshot's connection ended by the server (an administrator, a failover, a cut
/// network) while the snapshot is open: its later reads fail, never read outside it on the
/// connection the store opens in its place, and once it ends the store reads again.
#[test]
fn a_snapshot_whose_connection_is_lost_fails_its_later_reads_instead_of_reading_outside_it() {
    let fresh = Fresh::new("snapshot_lost");
    let rt = fresh.runtime();
    let name = format!("rpr_lost_{}", std::process::id());
    // Through the owner role (still a read-only session): the test ends it as that role.
    let location = format!("{}&application_name={name}", pg::location(&fresh.schema));
    let store = ReadStore::open_read_only(Path::new(&location)).unwrap();
    let propose = |key: &str| {
        rt.propose(&actor("proposer"), definition(key, ActionClass::Mutating))
            .unwrap()
            .into_new()
            .unwrap();
    };
    propose("a");
    let mut admin = Client::connect(&env("RPR_PG_URL"), NoTls).unwrap();
    let seen = std::cell::RefCell::new(None);
    let inside = store.snapshot(|s| {
        let before = s.status()?.ledger_len;
        propose("b");
        let ended = admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
                &[&name],
            )
            .unwrap()
            .get::<_, i64>(0);
        assert_eq!(ended, 1, "the snapshot's session was found and ended");
        // The next read fails (the connection is gone); the one after must not read the
        // new commit on a replacement connection as if it were this snapshot.
        let first = s.status().map(|st| st.ledger_len);
        let second = s.status().map(|st| st.ledger_len);
        seen.replace(Some((before, first, second)));
        Ok::<_, StoreError>(())
    });
    assert!(inside.is_err(), "the lost snapshot could not end well");
    let (before, first, second) = seen.take().unwrap();
    assert_eq!(before, 1);
    assert!(first.is_err(), "read on a lost connection: {first:?}");
    assert!(
        second.is_err(),
        "a later read of the lost snapshot read outside it: {second:?}"
    );
    assert_eq!(
        store.status().unwrap().ledger_len,
        2,
        "a new snapshot reads again"
    );
}
