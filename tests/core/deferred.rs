//! `Runtime::propose_and_bind`: an approved, bound pathway is stored by its dispatch, in
//! the same commit as its write-ahead attempt record. Each way a second send or a lost
//! record could come of it is tried here: a crash on either side of that commit, two
//! proposals of one key racing unstored, another database, a refused dispatch, a refused
//! bind, a handle dropped undispatched.

use crate::common;

use common::*;
use rpr::executor::Refusal;
use rpr::{
    ActionClass, Admission, Decision, Definition, Outcome, Ready, Runtime, State, StepPoint,
    StoredPathway,
};

fn allow(_: &Definition) -> Decision {
    Decision::Allow
}

fn bind(rt: &Runtime, definition: Definition, executor: &mut Scripted) -> Ready {
    rt.propose_and_bind(
        &actor("proposer"),
        &actor("decision_owner"),
        definition,
        &allow,
        executor,
    )
    .unwrap()
}

fn bound(ready: Ready) -> rpr::Pathway<rpr::stage::Bound> {
    match ready {
        Ready::Bound(p) => p,
        other => panic!("not bound: {other:?}"),
    }
}

#[test]
fn the_pathway_is_stored_with_its_attempt_record_in_one_commit() {
    let dir = TempDir::new("deferred-one-commit");
    let rt = runtime(&dir.db());
    let before = rt.write_stats();
    let p = bound(bind(
        &rt,
        definition("k", ActionClass::ReadOnly),
        &mut Scripted::ok(),
    ));
    assert_eq!(
        rt.write_stats(),
        before,
        "proposing and binding wrote nothing"
    );
    assert!(
        rt.pathway_record(p.id()).unwrap().is_none(),
        "not stored before its dispatch"
    );
    let id = p.id().to_owned();
    let mut executor = Scripted::ok();
    let outcome = p.dispatch(&rt, &actor("execution_actor"), &mut executor);
    assert!(matches!(outcome, Outcome::Completed(_)), "{outcome:?}");
    let after = rt.write_stats();
    assert_eq!(
        after.commits - before.commits,
        2,
        "the attempt record (with the pathway) and the outcome"
    );
    assert_eq!(
        event_kinds(&rt, &id),
        [
            "proposed",
            "admitted",
            "attempt_started",
            "attempt_completed"
        ],
        "what propose_and_admit, bind and dispatch record"
    );
    assert_eq!(rt.attempt_records(&id).unwrap().len(), 1);
    assert!(rt.verify(None).unwrap().is_ok());

    // The same call through propose_and_admit, bind and dispatch: one commit more.
    let before = rt.write_stats();
    let p = rt
        .propose_and_admit(
            &actor("proposer"),
            &actor("decision_owner"),
            definition("k2", ActionClass::ReadOnly),
            &allow,
        )
        .unwrap()
        .into_new()
        .unwrap()
        .into_approved()
        .unwrap();
    let outcome = p.bind(&mut Scripted::ok()).unwrap().dispatch(
        &rt,
        &actor("execution_actor"),
        &mut Scripted::ok(),
    );
    assert!(matches!(outcome, Outcome::Completed(_)), "{outcome:?}");
    assert_eq!(rt.write_stats().commits - before.commits, 3);
}

#[test]
fn a_bound_pathway_dropped_undispatched_leaves_nothing() {
    let dir = TempDir::new("deferred-dropped");
    let rt = runtime(&dir.db());
    let before = db_dump(&dir.db());
    let mut executor = Scripted::ok();
    drop(bound(bind(
        &rt,
        definition("k", ActionClass::Mutating),
        &mut executor,
    )));
    assert_eq!(executor.executed, 0);
    assert_eq!(db_dump(&dir.db()), before, "nothing was written");
    // The key is free: the same proposal again is new, not a replay.
    assert!(matches!(
        bind(
            &rt,
            definition("k", ActionClass::Mutating),
            &mut Scripted::ok()
        ),
        Ready::Bound(_)
    ));
}

#[test]
fn two_unstored_proposals_of_one_key_send_once() {
    let dir = TempDir::new("deferred-race");
    let rt = runtime(&dir.db());
    let other = runtime(&dir.db());
    let first = bound(bind(
        &rt,
        definition("same", ActionClass::Mutating),
        &mut Scripted::ok(),
    ));
    let second = bound(bind(
        &other,
        definition("same", ActionClass::Mutating),
        &mut Scripted::ok(),
    ));
    let (mut a, mut b) = (Scripted::ok(), Scripted::ok());
    let won = first.dispatch(&rt, &actor("execution_actor"), &mut a);
    assert!(matches!(won, Outcome::Returned(_)), "{won:?}");
    let lost = second.dispatch(&other, &actor("execution_actor"), &mut b);
    let Outcome::NotSent(not_sent) = lost else {
        panic!("the second was sent: {lost:?}")
    };
    assert!(
        matches!(not_sent.error(), rpr::PathwayError::KeyTaken { .. }),
        "{}",
        not_sent.error()
    );
    assert_eq!(
        (a.executed, b.executed),
        (1, 0),
        "exactly one of them was sent"
    );
    let stored = pathway_ids(&dir.db());
    assert_eq!(stored.len(), 1, "one pathway for the key: {stored:?}");
    assert!(rt.verify(None).unwrap().is_ok());
    // The loser, dispatched again, still sends nothing.
    let again = not_sent
        .into_pathway()
        .dispatch(&other, &actor("execution_actor"), &mut b);
    assert!(matches!(again, Outcome::NotSent(_)), "{again:?}");
    assert_eq!(b.executed, 0);
}

#[test]
fn an_unstored_pathway_is_refused_by_a_runtime_on_another_database() {
    let (one, two) = (
        TempDir::new("deferred-db-one"),
        TempDir::new("deferred-db-two"),
    );
    let (rt1, rt2) = (runtime(&one.db()), runtime(&two.db()));
    let (before1, before2) = (db_dump(&one.db()), db_dump(&two.db()));
    let p = bound(bind(
        &rt1,
        definition("k", ActionClass::Mutating),
        &mut Scripted::ok(),
    ));
    let mut executor = Scripted::ok();
    let outcome = p.dispatch(&rt2, &actor("execution_actor"), &mut executor);
    let Outcome::NotSent(not_sent) = outcome else {
        panic!("sent through another database: {outcome:?}")
    };
    assert!(
        matches!(not_sent.error(), rpr::PathwayError::ForeignPathway { .. }),
        "{}",
        not_sent.error()
    );
    assert_eq!(executor.executed, 0);
    assert_eq!(db_dump(&one.db()), before1);
    assert_eq!(db_dump(&two.db()), before2);
}

#[test]
fn a_refused_dispatch_stores_the_pathway_with_its_refusal_and_sends_nothing() {
    let dir = TempDir::new("deferred-refused");
    let rt = runtime(&dir.db());
    let p = bound(bind(
        &rt,
        definition("k", ActionClass::Mutating),
        &mut Scripted::ok(),
    ));
    let id = p.id().to_owned();
    let mut executor = Scripted::ok();
    executor.refuse_prepare = Some(Refusal::new("binding_changed", "the target changed"));
    let outcome = p.dispatch(&rt, &actor("execution_actor"), &mut executor);
    assert!(matches!(outcome, Outcome::NotSent(_)), "{outcome:?}");
    assert_eq!(executor.executed, 0);
    assert_eq!(
        event_kinds(&rt, &id),
        ["proposed", "admitted", "dispatch_refused"]
    );
    let Ok(StoredPathway::Approved(stored)) = rt.load(&id) else {
        panic!("not stored approved")
    };
    // Dispatched again from the store: sent once.
    executor.refuse_prepare = None;
    let outcome = stored.bind(&mut Scripted::ok()).unwrap().dispatch(
        &rt,
        &actor("execution_actor"),
        &mut executor,
    );
    assert!(!matches!(outcome, Outcome::NotSent(_)), "{outcome:?}");
    assert_eq!(executor.executed, 1, "sent once");
    assert!(rt.verify(None).unwrap().is_ok());
}

#[test]
fn a_refused_bind_stores_the_approved_pathway() {
    let dir = TempDir::new("deferred-not-bound");
    let rt = runtime(&dir.db());
    // A read-only definition does not bind to a mutating target.
    std::fs::create_dir_all(dir.path().join("root")).unwrap();
    let mut executor = CountingFile::new(&dir.path().join("root"), &dir.path().join("effects.log"));
    let mut definition = file_definition("k", "a.txt", "x");
    definition.class = ActionClass::ReadOnly;
    let ready = rt
        .propose_and_bind(
            &actor("proposer"),
            &actor("decision_owner"),
            definition,
            &allow,
            &mut executor,
        )
        .unwrap();
    let Ready::NotBound(refused) = ready else {
        panic!("bound: {ready:?}")
    };
    let id = refused.into_pathway().id().to_owned();
    assert!(matches!(rt.load(&id), Ok(StoredPathway::Approved(_))));
    assert_eq!(event_kinds(&rt, &id), ["proposed", "admitted"]);
    assert_eq!(effects(&dir.path().join("effects.log")), 0);
}

#[test]
fn not_approved_at_once_it_is_stored_as_propose_and_admit_stores_it() {
    let dir = TempDir::new("deferred-held");
    let rt = runtime(&dir.db());
    let mut executor = Scripted::ok();
    let ready = rt
        .propose_and_bind(
            &actor("proposer"),
            &actor("decision_owner"),
            definition("k", ActionClass::Mutating),
            &|_| Decision::HumanGate,
            &mut executor,
        )
        .unwrap();
    let Ready::Admitted(Admission::HumanGate(p)) = ready else {
        panic!("{ready:?}")
    };
    assert_eq!(
        rt.pathway_record(p.id()).unwrap().unwrap().state,
        State::HumanGate
    );
    // The same key again replays the stored pathway.
    let again = rt
        .propose_and_bind(
            &actor("proposer"),
            &actor("decision_owner"),
            definition("k", ActionClass::Mutating),
            &allow,
            &mut executor,
        )
        .unwrap();
    assert!(matches!(again, Ready::Existing(_)), "{again:?}");
    assert_eq!(executor.executed, 0);
}

// ---------------------------------------------------------------------------
// Crashes on either side of the commit that stores the pathway with its attempt.

/// The child: `propose_and_bind` a file write, dispatch it, and block at `RPR_DEFERRED_POINT`.
#[test]
fn child_entry() {
    let Ok(point) = std::env::var("RPR_DEFERRED_POINT") else {
        return;
    };
    let at = match point.as_str() {
        "before" => StepPoint::BeforeAttemptCommit,
        "after" => StepPoint::AfterAttemptCommit,
        other => panic!("unknown point {other}"),
    };
    let var = |k: &str| std::env::var(k).unwrap();
    let (db, root, log) = (
        var("RPR_DEFERRED_DB"),
        var("RPR_DEFERRED_ROOT"),
        var("RPR_DEFERRED_LOG"),
    );
    let rt = Runtime::builder(&db)
        .lease(CHILD_LEASE)
        .step_hook(move |p| {
            if p == at {
                block_until_killed(&format!("{p:?}"));
            }
        })
        .open()
        .unwrap();
    let mut executor = CountingFile::new(root.as_ref(), log.as_ref());
    let ready = rt
        .propose_and_bind(
            &actor("proposer"),
            &actor("decision_owner"),
            file_definition("crash", "out.txt", "once"),
            &allow,
            &mut executor,
        )
        .unwrap();
    let Ready::Bound(p) = ready else {
        panic!("{ready:?}")
    };
    let _ = p.dispatch(&rt, &actor("execution_actor"), &mut executor);
    panic!("the child was not stopped at {point}");
}

/// The killed child's lease. On SQLite its death is seen at once (its process is gone); on
/// PostgreSQL, where the owner may be on any machine, only the lapse of its lease by the
/// database's clock lets another runtime take its attempt over.
const CHILD_LEASE: std::time::Duration = std::time::Duration::from_millis(1500);

fn crash_at(point: &str) -> (TempDir, Runtime) {
    let dir = TempDir::new(&format!("deferred-crash-{point}"));
    std::fs::create_dir_all(dir.path().join("root")).unwrap();
    drop(Runtime::open(dir.db()).unwrap());
    let mut child = ChildProc::spawn(
        "deferred::child_entry",
        &[
            ("RPR_DEFERRED_POINT", point.to_owned()),
            ("RPR_DEFERRED_DB", dir.db().display().to_string()),
            (
                "RPR_DEFERRED_ROOT",
                dir.path().join("root").display().to_string(),
            ),
            (
                "RPR_DEFERRED_LOG",
                dir.path().join("effects.log").display().to_string(),
            ),
        ],
    );
    child.expect(READY);
    child.kill();
    let rt = Runtime::open(dir.db()).unwrap();
    (dir, rt)
}

#[test]
fn killed_before_the_commit_nothing_is_stored_and_nothing_was_sent() {
    let (dir, rt) = crash_at("before");
    assert!(pathway_ids(&dir.db()).is_empty());
    assert!(rt.recover().unwrap().is_empty());
    assert_eq!(effects(&dir.path().join("effects.log")), 0);
    assert!(!dir.path().join("root/out.txt").exists());
}

#[test]
fn killed_after_the_commit_the_attempt_is_unknown_and_never_resent() {
    let (dir, rt) = crash_at("after");
    let stored = pathway_ids(&dir.db());
    assert_eq!(stored.len(), 1, "stored with its attempt: {stored:?}");
    let id = stored[0].clone();
    assert_eq!(
        event_kinds(&rt, &id),
        ["proposed", "admitted", "attempt_started"]
    );
    let mut recovered = rt.recover().unwrap();
    if common::pg::on() {
        assert!(
            matches!(recovered[..], [StoredPathway::InFlightElsewhere { .. }]),
            "on PostgreSQL the attempt is not taken over while its lease runs: {recovered:?}"
        );
        std::thread::sleep(CHILD_LEASE + std::time::Duration::from_millis(300));
        recovered = rt.recover().unwrap();
    }
    assert_eq!(recovered.len(), 1);
    assert!(
        matches!(recovered[0], StoredPathway::Unknown(_)),
        "{:?}",
        recovered[0]
    );
    assert_eq!(
        effects(&dir.path().join("effects.log")),
        0,
        "recovery sent nothing"
    );
    assert!(rt.verify(None).unwrap().is_ok());
}

/// A read's one-commit dispatch (`BoundRead::dispatch`), on either store: the unstored
/// pathway, its attempt and its outcome in one unit; a read whose key another read took
/// meanwhile stores nothing of itself (`Outcome::ReadUnrecorded`) and leaves the ledger
/// whole.
#[test]
fn a_read_is_stored_with_its_attempt_and_outcome_in_one_commit_or_not_at_all() {
    let dir = TempDir::new("deferred-one-commit-read");
    let rt = runtime(&dir.db());
    let execution = actor("execution_actor");
    let first = bound(bind(
        &rt,
        definition("k", ActionClass::ReadOnly),
        &mut Scripted::ok(),
    ))
    .into_read()
    .expect("a read");
    let second = bound(bind(
        &rt,
        definition("k", ActionClass::ReadOnly),
        &mut Scripted::ok(),
    ))
    .into_read()
    .expect("a read");
    let before = rt.write_stats();
    let id = first.id().to_owned();
    let outcome = first.dispatch(&rt, &execution, &mut Scripted::ok());
    assert!(matches!(outcome, Outcome::Completed(_)), "{outcome:?}");
    let after = rt.write_stats();
    assert_eq!(after.steps - before.steps, 1, "{after:?}");
    assert_eq!(after.commits - before.commits, 1, "{after:?}");
    assert_eq!(rt.load(&id).unwrap().state(), State::Completed);
    assert_eq!(
        event_kinds(&rt, &id),
        [
            "proposed",
            "admitted",
            "attempt_started",
            "attempt_completed"
        ]
    );

    let mut executor = Scripted::ok();
    let lost = second.id().to_owned();
    match second.dispatch(&rt, &execution, &mut executor) {
        Outcome::ReadUnrecorded(u) => {
            assert!(
                matches!(u.error, rpr::PathwayError::KeyTaken { .. }),
                "{}",
                u.error
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(executor.executed, 1, "sent and answered");
    assert!(
        rt.pathway_record(&lost).unwrap().is_none(),
        "nothing stored"
    );
    assert!(rt.verify(None).unwrap().is_ok());
}
