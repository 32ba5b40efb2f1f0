//! A read's one commit (issue 26, item 3's cost): [`rpr::BoundRead::dispatch`] records a
//! read's attempt and its outcome together, in one durable commit after the call answered
//! and before the dispatch returns. Only a call whose definition and binding are both
//! read-only gets there ([`rpr::Pathway::into_read`]); every other call keeps its
//! write-ahead attempt record. The events recorded are the two-commit dispatch's, and the
//! ledger verifies.

use std::sync::{Arc, Mutex};

use crate::common;

use common::*;
use rpr::executor::Delivery;
use rpr::store::{ReadDurability, WriteStats};
use rpr::{ActionClass, Outcome, PathwayError, Ready, Runtime, State, StepPoint};
use serde_json::json;

/// A new, allowed and bound pathway of `class`, not stored yet (`propose_and_bind`).
fn bound(rt: &Runtime, key: &str, class: ActionClass) -> rpr::Pathway<rpr::stage::Bound> {
    let ready = rt
        .propose_and_bind(
            &actor("proposer"),
            &actor("decision_owner"),
            definition(key, class),
            rpr::ALLOW_ALL,
            &mut Scripted::ok(),
        )
        .unwrap();
    match ready {
        Ready::Bound(bound) => bound,
        other => panic!("bound: {other:?}"),
    }
}

fn delta(before: WriteStats, after: WriteStats) -> (u64, u64, u64) {
    (
        after.steps - before.steps,
        after.commits - before.commits,
        after.unsynced_commits - before.unsynced_commits,
    )
}

#[test]
fn a_read_is_stored_attempt_and_outcome_in_one_synced_commit_with_the_same_events() {
    let dir = TempDir::new("one-commit-read");
    let rt = Runtime::open(dir.db()).unwrap();
    let execution = actor("execution_actor");

    // The two-commit dispatch of a read, for comparison.
    let before = rt.write_stats();
    let two = match bound(&rt, "two", ActionClass::ReadOnly).dispatch(
        &rt,
        &execution,
        &mut Scripted::ok(),
    ) {
        Outcome::Completed(done) => done,
        other => panic!("{other:?}"),
    };
    let (_, two_commits, _) = delta(before, rt.write_stats());
    assert_eq!(two_commits, 2, "the attempt record, then the outcome");

    let before = rt.write_stats();
    let read = bound(&rt, "one", ActionClass::ReadOnly)
        .into_read()
        .expect("a read-only definition bound to a read-only target is a read");
    let one = match read.dispatch(&rt, &execution, &mut Scripted::ok()) {
        Outcome::Completed(done) => done,
        other => panic!("{other:?}"),
    };
    let (steps, commits, unsynced) = delta(before, rt.write_stats());
    assert_eq!(
        (steps, commits, unsynced),
        (1, 1, 0),
        "one step, one synced commit"
    );
    assert_eq!(rt.load(one.id()).unwrap().state(), State::Completed);
    assert_eq!(
        event_kinds(&rt, one.id()),
        event_kinds(&rt, two.id()),
        "the same events as the two-commit dispatch"
    );
    let attempts = rt.reader().attempts(one.id()).unwrap();
    let [attempt] = attempts.as_slice() else {
        panic!("one attempt: {attempts:?}")
    };
    assert_eq!(attempt.status, rpr::AttemptStatus::Succeeded);
    assert_eq!(attempt.outcome, Some(json!({"ok": true})));
    assert!(rt.verify(None).unwrap().is_ok());
}

#[test]
fn under_process_crash_safe_a_read_is_one_commit_without_a_sync() {
    let dir = TempDir::new("one-commit-read-unsynced");
    let rt = Runtime::builder(dir.db())
        .read_durability(ReadDurability::ProcessCrashSafe)
        .open()
        .unwrap();
    let before = rt.write_stats();
    let read = bound(&rt, "r", ActionClass::ReadOnly).into_read().unwrap();
    let outcome = read.dispatch(&rt, &actor("execution_actor"), &mut Scripted::ok());
    assert!(matches!(outcome, Outcome::Completed(_)), "{outcome:?}");
    assert_eq!(delta(before, rt.write_stats()), (1, 0, 1));
}

#[test]
fn a_failed_read_is_recorded_failed_in_one_commit() {
    let dir = TempDir::new("one-commit-read-failed");
    let rt = Runtime::open(dir.db()).unwrap();
    let before = rt.write_stats();
    let read = bound(&rt, "r", ActionClass::ReadOnly).into_read().unwrap();
    let mut times_out = Scripted::new(vec![Delivery::PossiblyWritten {
        reason: "timed out".into(),
    }]);
    let failed = match read.dispatch(&rt, &actor("execution_actor"), &mut times_out) {
        Outcome::ReadFailed(f) => f,
        other => panic!("{other:?}"),
    };
    assert_eq!(delta(before, rt.write_stats()), (1, 1, 0));
    assert_eq!(rt.load(failed.id()).unwrap().state(), State::Failed);
    assert!(rt.verify(None).unwrap().is_ok());
}

#[test]
fn a_call_that_may_change_something_is_not_a_read_and_keeps_its_write_ahead_record() {
    let dir = TempDir::new("one-commit-read-refused");
    let rt = Runtime::open(dir.db()).unwrap();
    // Bound to a read-only target, but the definition says it may change something.
    let write = bound(&rt, "w", ActionClass::Mutating);
    let write = write
        .into_read()
        .expect_err("only a read-only definition is a read");
    let before = rt.write_stats();
    let outcome = write.dispatch(&rt, &actor("execution_actor"), &mut Scripted::ok());
    assert!(matches!(outcome, Outcome::Returned(_)), "{outcome:?}");
    assert_eq!(
        delta(before, rt.write_stats()).1,
        2,
        "the attempt record before the send, then the reply"
    );
}

#[test]
fn while_a_read_is_out_nothing_of_it_is_stored_and_the_dispatch_returns_after_its_commit() {
    let dir = TempDir::new("one-commit-read-window");
    let db = dir.db();
    // What another connection sees at each point of the dispatch: pathways stored.
    let seen: Arc<Mutex<Vec<(StepPoint, i64)>>> = Arc::default();
    let rt = {
        let (seen, db) = (Arc::clone(&seen), db.clone());
        Runtime::builder(&db)
            .step_hook(move |point| {
                let count = row_count(&db, "pathways");
                seen.lock().unwrap().push((point, count));
            })
            .open()
            .unwrap()
    };
    let read = bound(&rt, "r", ActionClass::ReadOnly).into_read().unwrap();
    let outcome = read.dispatch(&rt, &actor("execution_actor"), &mut Scripted::ok());
    assert!(matches!(outcome, Outcome::Completed(_)), "{outcome:?}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            (StepPoint::BeforeAttemptCommit, 0),
            // The executor answered: a crash here leaves no record at all (and no effect).
            (StepPoint::AfterReply, 0),
            (StepPoint::AfterOutcomeCommit, 1),
        ],
        "no attempt commit before the send; the one commit before the dispatch returns"
    );
}

#[test]
fn a_read_whose_key_was_taken_meanwhile_is_unrecorded_and_stores_nothing() {
    let dir = TempDir::new("one-commit-read-key-taken");
    let rt = Runtime::open(dir.db()).unwrap();
    let execution = actor("execution_actor");
    let first = bound(&rt, "same", ActionClass::ReadOnly)
        .into_read()
        .unwrap();
    let second = bound(&rt, "same", ActionClass::ReadOnly)
        .into_read()
        .unwrap();
    assert!(matches!(
        first.dispatch(&rt, &execution, &mut Scripted::ok()),
        Outcome::Completed(_)
    ));
    let mut executor = Scripted::ok();
    match second.dispatch(&rt, &execution, &mut executor) {
        Outcome::ReadUnrecorded(u) => {
            assert!(
                matches!(u.error, PathwayError::KeyTaken { .. }),
                "{:?}",
                u.error
            );
            assert_eq!(
                rt.reader().pathway(&u.pathway).unwrap().map(|p| p.state),
                None,
                "nothing of the second read is stored"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(executor.executed, 1, "the read was sent and answered");
    assert_eq!(row_count(&dir.db(), "pathways"), 1);
    assert!(rt.verify(None).unwrap().is_ok());
}
