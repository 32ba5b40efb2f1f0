//! [`super::insert_together`]: a new pathway's steps written at once leave exactly the rows
//! and events that the same steps one after another leave; steps that do not fit take the
//! step-by-step path and are refused as it refuses them.

use std::time::Duration;

use parking_lot::ReentrantMutex;
use rusqlite::types::Value as Sql;
use serde_json::json;

use crate::store::batch::Batcher;
use crate::store::sqlite::SqliteBackend;
use crate::store::steps_for_tests::{Pw, new_pathway, outcome_step, start_step};
use crate::store::{Backend, EventDraft, NewPathway, Step, StoreError};
use crate::{AttemptStatus, State};

/// A SQLite store of its own, written through the group commit as the runtime writes.
struct Db {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    backend: ReentrantMutex<SqliteBackend>,
    batcher: Batcher,
}

impl Db {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rpr.db");
        let backend = SqliteBackend::open(&path, Duration::from_secs(5)).unwrap();
        Self {
            _dir: dir,
            path,
            backend: ReentrantMutex::new(backend),
            batcher: Batcher::default(),
        }
    }

    fn write<T: Send + 'static>(
        &self,
        op: impl FnOnce(&SqliteBackend) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.batcher.write(&self.backend, true, op)
    }

    /// Every row of the tables a step writes, every column, in order.
    fn dump(&self) -> Vec<Vec<Sql>> {
        let conn = rusqlite::Connection::open(&self.path).unwrap();
        let mut all = Vec::new();
        for sql in [
            "SELECT * FROM pathways ORDER BY id",
            "SELECT * FROM attempts ORDER BY id",
            "SELECT * FROM ledger ORDER BY seq",
            "SELECT * FROM meta WHERE key = 'ledger_head'",
        ] {
            let mut stmt = conn.prepare(sql).unwrap();
            let n = stmt.column_count();
            let rows = stmt
                .query_map([], |r| (0..n).map(|i| r.get::<_, Sql>(i)).collect())
                .unwrap();
            all.extend(rows.map(Result::unwrap));
        }
        all
    }
}

/// A read's one commit: the new pathway (`approved`, v2), its attempt started at 1001 and
/// finished at 1002 with `status`, moving it to `to`.
fn read_call(
    key: &str,
    status: AttemptStatus,
    to: State,
) -> (NewPathway, Vec<EventDraft>, Vec<Step>) {
    let (new, events, pw) = new_pathway(key, State::Approved, 1000);
    let attempt = format!("at_{key}");
    let start = start_step(&pw, &attempt, 1, None, "host", 60_000, 1001);
    let running = Pw {
        state: State::Running,
        version: pw.version + 1,
        ..pw
    };
    let kind = if to == State::Completed {
        "attempt_completed"
    } else {
        "attempt_failed"
    };
    let finish = outcome_step(
        &running,
        &attempt,
        kind,
        status,
        to,
        &json!({"value": key}),
        1002,
    );
    (new, events, vec![start, finish])
}

/// The same steps through the step-by-step path: the insert, then each step in a unit of
/// its own.
fn one_by_one(db: &Db, new: NewPathway, events: Vec<EventDraft>, steps: Vec<Step>) {
    db.write(move |b| b.insert_pathway(new, events)).unwrap();
    for step in steps {
        db.write(move |b| b.apply(step)).unwrap();
    }
}

#[test]
fn a_read_written_at_once_leaves_the_rows_and_events_of_its_steps_one_by_one() {
    for (key, status, to) in [
        ("ok", AttemptStatus::Succeeded, State::Completed),
        ("bad", AttemptStatus::Failed, State::Failed),
    ] {
        let (at_once, stepwise) = (Db::new(), Db::new());
        // A pathway before it, so the new events chain to a head that is not the genesis.
        for db in [&at_once, &stepwise] {
            let (new, events, steps) =
                read_call("before", AttemptStatus::Succeeded, State::Completed);
            one_by_one(db, new, events, steps);
        }
        let (new, events, steps) = read_call(key, status, to);
        assert!(
            super::settle(&new, &events, &steps).unwrap().is_some(),
            "{key}: the steps are written at once"
        );
        let version = at_once
            .write({
                let (new, events, steps) = (new.clone(), events.clone(), steps.clone());
                move |b| b.apply_together(Some((new, events)), steps)
            })
            .unwrap();
        assert_eq!(version, 4, "{key}: two steps after the insert's v2");
        one_by_one(&stepwise, new, events, steps);
        let (a, s) = (at_once.dump(), stepwise.dump());
        assert_eq!(a, s, "{key}: the rows differ");
        assert_eq!(
            a.len(),
            2 + 2 + 8 + 1,
            "{key}: two pathways, two attempts, eight events, the head"
        );
        let reads = crate::store::ReadStore::open_read_only(&at_once.path).unwrap();
        let report = crate::store::Reads::verify_all(&reads, None).unwrap();
        assert!(report.is_ok(), "{key}: {:#?}", report.problems);
    }
}

#[test]
fn steps_that_do_not_follow_each_other_are_refused_and_leave_nothing() {
    let (new, events, mut steps) = read_call("r", AttemptStatus::Succeeded, State::Completed);
    // The outcome of an attempt this pathway never started.
    let mut foreign = steps.clone();
    if let Some(crate::store::AttemptWrite::Finish { id, .. }) = &mut foreign[1].attempt {
        *id = "at_other".into();
    }
    // A first step that expects another version than the insert leaves.
    steps[0].expected_version = 7;
    for (what, steps) in [("stale version", steps), ("foreign attempt", foreign)] {
        assert!(
            super::settle(&new, &events, &steps).unwrap().is_none(),
            "{what}"
        );
        let db = Db::new();
        let (new, events) = (new.clone(), events.clone());
        let refused = db.write(move |b| b.apply_together(Some((new, events)), steps));
        assert!(
            matches!(
                refused,
                Err(StoreError::Conflict { .. } | StoreError::Corrupt(_))
            ),
            "{what}: {refused:?}"
        );
        assert!(
            db.dump().is_empty(),
            "{what}: nothing of the unit is stored"
        );
    }
}

mod event_text {
    use super::super::event_text;
    use crate::ledger::EventKind;
    use crate::store::EventDraft;
    use crate::{AttemptStatus, State};
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// The event as it was built before its members were moved in: `json!`, which
    /// serializes each value it is given.
    fn by_json(seq: i64, at: i64, pathway: &str, draft: EventDraft) -> Option<String> {
        let event = json!({
            "v": 2,
            "seq": seq,
            "at": at,
            "pathway": pathway,
            "kind": draft.kind.as_str(),
            "actor": draft.actor,
            "from": draft.from.map(State::as_str),
            "to": draft.to.as_str(),
            "attempt": draft.attempt,
            "attempt_status": draft.attempt_status,
            "data": draft.data,
        });
        crate::canonical::to_string(&event).ok()
    }

    fn data() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map("\\PC{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn draft() -> impl Strategy<Value = EventDraft> {
        (
            proptest::sample::select(EventKind::ALL.to_vec()),
            "\\PC{0,10}",
            proptest::option::of(proptest::sample::select(State::ALL.to_vec())),
            proptest::sample::select(State::ALL.to_vec()),
            proptest::option::of("\\PC{0,10}"),
            proptest::option::of(proptest::sample::select(
                AttemptStatus::ALL
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>(),
            )),
            data(),
        )
            .prop_map(|(kind, actor, from, to, attempt, attempt_status, data)| {
                EventDraft {
                    kind,
                    actor,
                    from,
                    to,
                    attempt,
                    attempt_status,
                    data,
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Byte for byte the text the `json!` construction gave, or an error where it had
        /// none to give (a seq or time beyond 2^53, a number without a canonical form).
        #[test]
        fn an_event_text_is_the_one_json_gave(
            seq in prop_oneof![1..1_000_000i64, any::<i64>()],
            at in prop_oneof![0..2_000_000_000_000i64, any::<i64>()],
            pathway in "\\PC{0,12}",
            draft in draft(),
        ) {
            let expected = by_json(seq, at, &pathway, draft.clone());
            let got = event_text(seq, at, &pathway, draft).ok();
            prop_assert_eq!(got, expected);
        }
    }
}

/// A takeover is judged again inside the unit that writes it
/// ([`crate::store::AttemptWrite::TakeOver`]): a recoverer that read the attempt before
/// its owner renewed the lease (or paused past it) takes over no live owner, nor an
/// attempt another owner holds now, nor one whose lease is missing (a damaged row).
#[test]
fn a_takeover_is_judged_again_in_the_unit_that_writes_it() {
    use crate::store::steps_for_tests::{attempt_ev, ev, step};
    let db = Db::new();
    let (new, events, pw) = new_pathway("t", State::Approved, 1000);
    let start = start_step(&pw, "at_t", 1, None, "host-a", 60_000, 1001);
    one_by_one(&db, new, events, vec![start]);
    let running = Pw {
        state: State::Running,
        version: pw.version + 1,
        ..pw
    };
    let take = |owner: &str, lease_lapsed: bool| {
        let fate = if lease_lapsed { "lapsed" } else { "gone" };
        let e = attempt_ev(
            ev(
                "recovered_unknown",
                "rpr-recovery",
                State::Running,
                State::WriteStatusUnknown,
                json!({"owner": owner, "owner_fate": fate, "reason": "test"}),
            ),
            "at_t",
            AttemptStatus::Unknown,
        );
        let mut s = step(&running, Some(State::WriteStatusUnknown), vec![e], 2000);
        s.attempt = Some(crate::store::AttemptWrite::TakeOver {
            id: "at_t".into(),
            owner: owner.into(),
            lease_lapsed,
        });
        s
    };
    let set_lease = |sql: &str| {
        rusqlite::Connection::open(&db.path)
            .unwrap()
            .execute(&format!("UPDATE attempts SET lease_until = {sql}"), [])
            .unwrap();
    };
    let before = db.dump();

    // Its lease runs for a minute by the database's clock: not taken over.
    let s = take("host-a", true);
    let e = db.write(move |b| b.apply(s)).unwrap_err();
    assert!(matches!(e, StoreError::LeaseHeld { .. }), "{e:?}");
    assert_eq!(db.dump(), before, "nothing written");
    // Held by another owner than the one judged: a conflict, whatever its fate.
    let s = take("host-b", false);
    let e = db.write(move |b| b.apply(s)).unwrap_err();
    assert!(matches!(e, StoreError::Conflict { .. }), "{e:?}");
    // No lease at all: a damaged row, never a lapse.
    set_lease("NULL");
    let before = db.dump();
    let s = take("host-a", true);
    let e = db.write(move |b| b.apply(s)).unwrap_err();
    assert!(matches!(e, StoreError::Corrupt(_)), "{e:?}");
    assert_eq!(db.dump(), before, "nothing written");
    // Lapsed: taken over, the attempt unknown and ownerless.
    set_lease("1");
    let s = take("host-a", true);
    db.write(move |b| b.apply(s)).unwrap();
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    let (status, owner): (String, Option<String>) = conn
        .query_row("SELECT status, owner FROM attempts", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((status.as_str(), owner), ("unknown", None));
}
