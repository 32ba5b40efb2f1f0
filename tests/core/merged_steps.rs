//! The merged steps (issue 13): `Runtime::propose_and_admit` stores a proposal and its
//! admission in one commit, `Pathway<Bound>::dispatch_and_confirm` records a reply and
//! its readback in one commit. Each must record exactly what the separate steps record,
//! refuse what they refuse without writing anything, and never send twice.
//! Their crash boundaries are in tests/core/crash.rs. On either store (`RPR_TEST_BACKEND`).

use crate::common;

use common::*;
use rpr::executor::{Delivery, Observation, Readback, Request};
use rpr::{
    ALLOW_ALL, ActionClass, Admission, AttemptStatus, Decided, Decision, Definition, Outcome,
    Pathway, PathwayError, State, StoredPathway,
};
use serde_json::{Value, json};

/// `(kind, from, to, attempt_status, data)` of every event, in order; `at` is left out
/// (it differs by the number of clock readings) but checked separately where it matters,
/// and so is the attempt's owner.
fn events(rt: &rpr::Runtime) -> Vec<(String, Value, Value, Value, Value)> {
    rt.ledger_rows(0, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|row| {
            let mut e: Value = serde_json::from_str(&row.event).unwrap();
            // The owner names the runtime instance, which differs between the two databases.
            if let Some(data) = e["data"].as_object_mut() {
                data.remove("owner");
            }
            (
                e["kind"].as_str().unwrap().to_owned(),
                e["from"].clone(),
                e["to"].clone(),
                e["attempt_status"].clone(),
                e["data"].clone(),
            )
        })
        .collect()
}

fn at_of(rt: &rpr::Runtime) -> Vec<i64> {
    rt.ledger_rows(0, usize::MAX)
        .unwrap()
        .into_iter()
        .map(|row| {
            let e: Value = serde_json::from_str(&row.event).unwrap();
            e["at"].as_i64().unwrap()
        })
        .collect()
}

fn decisions() -> Vec<(Decision, State)> {
    vec![
        (Decision::Allow, State::Approved),
        (Decision::Hold, State::AwaitingApproval),
        (Decision::HumanGate, State::HumanGate),
        (Decision::Deny("not today".into()), State::Denied),
    ]
}

fn stage(a: &Admission) -> State {
    match a {
        Admission::Approved(_) => State::Approved,
        Admission::AwaitingApproval(_) => State::AwaitingApproval,
        Admission::HumanGate(_) => State::HumanGate,
        Admission::Denied(_) => State::Denied,
        other => panic!("unexpected admission {other:?}"),
    }
}

#[test]
fn propose_and_admit_records_what_propose_then_admit_records() {
    for (decision, state) in decisions() {
        let (d1, d2) = (TempDir::new("merged-sep"), TempDir::new("merged-one"));
        let (separate, merged) = (runtime(&d1.db()), runtime(&d2.db()));
        let policy = move |_: &Definition| decision.clone();

        let p = separate
            .propose(&actor("proposer"), definition("k", ActionClass::Mutating))
            .unwrap()
            .into_new()
            .expect("replayed");
        let a = p
            .admit(&separate, &actor("decision_owner"), &policy)
            .unwrap();
        assert_eq!(stage(&a), state);

        let Decided::New(b) = merged
            .propose_and_admit(
                &actor("proposer"),
                &actor("decision_owner"),
                definition("k", ActionClass::Mutating),
                &policy,
            )
            .unwrap()
        else {
            panic!("replayed")
        };
        assert_eq!(stage(&b), state);

        assert_eq!(
            events(&separate),
            events(&merged),
            "{state}: the same events"
        );
        let ats = at_of(&merged);
        assert!(
            ats.windows(2).all(|w| w[0] == w[1]),
            "{state}: one step, one time: {ats:?}"
        );
        let row = merged.pathway_record("pw_000001").unwrap().unwrap();
        assert_eq!(row.state, state);
        assert!(merged.verify(None).unwrap().is_ok(), "{state}");
        // What is stored loads as the stage the policy decided.
        let loaded = merged.load("pw_000001").unwrap();
        let loaded_state = match loaded {
            StoredPathway::Approved(_) => State::Approved,
            StoredPathway::AwaitingApproval(_) => State::AwaitingApproval,
            StoredPathway::HumanGate(_) => State::HumanGate,
            StoredPathway::Denied(_) => State::Denied,
            other => panic!("{other:?}"),
        };
        assert_eq!(loaded_state, state);
    }
}

#[test]
fn propose_and_admit_by_an_actor_who_is_not_the_decision_owner_writes_nothing() {
    let dir = TempDir::new("merged-unauth");
    let rt = runtime(&dir.db());
    let before = db_dump(&dir.db());
    let err = rt
        .propose_and_admit(
            &actor("proposer"),
            &actor("proposer"),
            definition("k", ActionClass::Mutating),
            &|_| Decision::Allow,
        )
        .unwrap_err();
    assert!(matches!(err, PathwayError::NotAuthorized { .. }), "{err:?}");
    assert_eq!(db_dump(&dir.db()), before, "nothing was written");
    assert_eq!(row_count(&dir.db(), "pathways"), 0);
}

#[test]
fn propose_and_admit_replays_the_same_key_and_refuses_other_content() {
    let dir = TempDir::new("merged-replay");
    let rt = runtime(&dir.db());
    let (p, d) = (actor("proposer"), actor("decision_owner"));
    let first = rt
        .propose_and_admit(&p, &d, definition("k", ActionClass::Mutating), ALLOW_ALL)
        .unwrap()
        .into_new()
        .expect("not admitted")
        .into_approved()
        .expect("not admitted");
    let Decided::Existing(StoredPathway::Approved(again)) = rt
        .propose_and_admit(&p, &d, definition("k", ActionClass::Mutating), ALLOW_ALL)
        .unwrap()
    else {
        panic!("the same key must replay the stored pathway")
    };
    assert_eq!(again.id(), first.id());
    // The policy is not asked again, and a replay writes nothing.
    let before = db_dump(&dir.db());
    let deny = |_: &Definition| Decision::Deny("changed my mind".into());
    let Decided::Existing(StoredPathway::Approved(_)) = rt
        .propose_and_admit(&p, &d, definition("k", ActionClass::Mutating), &deny)
        .unwrap()
    else {
        panic!("replay")
    };
    assert_eq!(db_dump(&dir.db()), before);
    let mut other = definition("k", ActionClass::Mutating);
    other.request = Request::new("put", json!({"key": "k", "value": "other"}));
    let err = rt.propose_and_admit(&p, &d, other, ALLOW_ALL).unwrap_err();
    assert!(
        matches!(err, PathwayError::IdempotencyConflict { .. }),
        "{err:?}"
    );
    assert_eq!(db_dump(&dir.db()), before);
}

/// A mutating executor (it binds a mutating target) that succeeds and counts.
struct Mutating(Scripted);

impl rpr::executor::Executor for Mutating {
    fn bind(&mut self, _r: &Request) -> Result<rpr::executor::Binding, rpr::executor::Refusal> {
        Ok(rpr::executor::Binding::new("mutating", json!({"executor": "mutating"})).unwrap())
    }
    fn prepare(
        &mut self,
        r: &Request,
        b: &rpr::executor::Binding,
    ) -> Result<(), rpr::executor::Refusal> {
        self.0.prepare(r, b)
    }
    fn execute(&mut self, r: &Request) -> Delivery {
        self.0.execute(r)
    }
}

fn approved(rt: &rpr::Runtime, key: &str, class: ActionClass) -> Pathway<rpr::stage::Approved> {
    rt.propose_and_admit(
        &actor("proposer"),
        &actor("decision_owner"),
        definition(key, class),
        &|_| Decision::Allow,
    )
    .unwrap()
    .into_new()
    .expect("not admitted")
    .into_approved()
    .expect("not admitted")
}

#[test]
fn dispatch_and_confirm_records_the_reply_and_readback_of_dispatch_then_confirm_in_one_step() {
    let (d1, d2) = (TempDir::new("dc-sep"), TempDir::new("dc-one"));
    let (separate, merged) = (runtime(&d1.db()), runtime(&d2.db()));
    let exec = actor("execution_actor");

    let mut ex = Mutating(Scripted::ok());
    let p = approved(&separate, "k", ActionClass::Mutating);
    let Outcome::Returned(r) = p.bind(&mut ex).unwrap().dispatch(&separate, &exec, &mut ex) else {
        panic!("a mutating success must wait for readback")
    };
    r.confirm(&separate, &exec, &mut Sees("applied"))
        .unwrap()
        .into_completed()
        .expect("not confirmed");

    let mut ex2 = Mutating(Scripted::ok());
    let p = approved(&merged, "k", ActionClass::Mutating);
    let done = p
        .bind(&mut ex2)
        .unwrap()
        .dispatch_and_confirm(&merged, &exec, &mut ex2, &mut Sees("applied"))
        .into_completed()
        .expect("a verified effect completes at once");
    assert_eq!(ex2.0.executed, 1);
    assert_eq!(events(&separate), events(&merged), "the same events");
    // The reply and the readback are one step: one time.
    let ats = at_of(&merged);
    let n = ats.len();
    assert_eq!(ats[n - 1], ats[n - 2], "{ats:?}");
    assert_ne!(
        ats[n - 2],
        ats[n - 3],
        "the attempt record is its own, earlier step"
    );
    let attempts = merged.attempt_records(done.id()).unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].status, AttemptStatus::Applied);
    assert_eq!(
        attempts[0].outcome,
        separate.attempt_records("pw_000001").unwrap()[0].outcome,
        "the reply is kept as the attempt's outcome"
    );
    assert!(merged.verify(None).unwrap().is_ok());
    assert!(merged.recover().unwrap().is_empty());
}

#[test]
fn dispatch_and_confirm_leaves_an_unverified_effect_unknown_and_never_resends() {
    for seen in ["not_applied", "inconclusive"] {
        let dir = TempDir::new("dc-unknown");
        let rt = runtime(&dir.db());
        let exec = actor("execution_actor");
        let mut ex = Mutating(Scripted::ok());
        let p = approved(&rt, "k", ActionClass::Mutating);
        let Outcome::Unknown(u) =
            p.bind(&mut ex)
                .unwrap()
                .dispatch_and_confirm(&rt, &exec, &mut ex, &mut Sees(seen))
        else {
            panic!("{seen}: a success reply without a verified effect is unknown")
        };
        assert_eq!(ex.0.executed, 1);
        let attempts = rt.attempt_records(u.id()).unwrap();
        assert_eq!(attempts[0].status, AttemptStatus::Unknown, "{seen}");
        assert!(rt.verify(None).unwrap().is_ok(), "{seen}");
        // It comes back unknown: reconciliation, not a second send.
        let StoredPathway::Unknown(_) = rt.load(u.id()).unwrap() else {
            panic!("{seen}: must load as unknown")
        };
        assert_eq!(ex.0.executed, 1);
    }
}

/// A readback that must not be asked.
struct MustNotObserve;

impl Readback for MustNotObserve {
    fn observe(&mut self, _request: &Request) -> Observation {
        panic!("a read-only call or a failed one needs no readback")
    }
}

#[test]
fn dispatch_and_confirm_reads_back_only_a_returned_mutating_call() {
    let dir = TempDir::new("dc-readonly");
    let rt = runtime(&dir.db());
    let exec = actor("execution_actor");
    // Read-only: a success reply completes it, as with dispatch.
    let mut ex = Scripted::ok();
    let p = approved(&rt, "ro", ActionClass::ReadOnly);
    p.bind(&mut ex)
        .unwrap()
        .dispatch_and_confirm(&rt, &exec, &mut ex, &mut MustNotObserve)
        .into_completed()
        .expect("read-only success completes");
    // A tool failure and a lost request are what dispatch makes of them: unknown (a tool
    // error does not prove the call did nothing), never read back in the same step.
    for (key, delivery, want) in [
        (
            "failed",
            Delivery::ToolFailed {
                reply: json!({"isError": true}),
            },
            State::WriteStatusUnknown,
        ),
        (
            "lost",
            Delivery::PossiblyWritten {
                reason: "pipe closed".into(),
            },
            State::WriteStatusUnknown,
        ),
    ] {
        let mut ex = Mutating(Scripted::new(vec![delivery]));
        let p = approved(&rt, key, ActionClass::Mutating);
        let outcome =
            p.bind(&mut ex)
                .unwrap()
                .dispatch_and_confirm(&rt, &exec, &mut ex, &mut MustNotObserve);
        let got = match outcome {
            Outcome::Failed(_) => State::RepairRequired,
            Outcome::Unknown(_) => State::WriteStatusUnknown,
            other => panic!("{key}: {other:?}"),
        };
        assert_eq!(got, want, "{key}");
    }
    assert!(rt.verify(None).unwrap().is_ok());
}

#[test]
fn dispatch_and_confirm_by_an_actor_who_may_not_confirm_sends_nothing() {
    let dir = TempDir::new("dc-unauth");
    let rt = runtime(&dir.db());
    let exec = actor("execution_actor");
    // Fail once, repair, and reach ReadyToResume: the resume authority may dispatch it,
    // but may not confirm it, so it may not dispatch_and_confirm it.
    let mut ex = Mutating(Scripted::new(vec![
        Delivery::NothingWritten {
            reason: "refused at the door".into(),
        },
        Delivery::Succeeded {
            reply: json!({"ok": true}),
        },
    ]));
    let p = approved(&rt, "k", ActionClass::Mutating);
    let Outcome::Failed(f) = p.bind(&mut ex).unwrap().dispatch(&rt, &exec, &mut ex) else {
        panic!("nothing written fails")
    };
    let ready = f
        .repair(
            &rt,
            &actor("repair_owner"),
            &json!({"checked": "nothing"}),
            None,
        )
        .unwrap();
    let before = db_dump(&dir.db());
    let Outcome::NotSent(n) = ready.bind(&mut ex).unwrap().dispatch_and_confirm(
        &rt,
        &actor("resume_authority"),
        &mut ex,
        &mut MustNotObserve,
    ) else {
        panic!("must be refused before anything is sent")
    };
    assert!(
        matches!(n.error(), PathwayError::NotAuthorized { .. }),
        "{:?}",
        n.error()
    );
    assert_eq!(ex.0.executed, 1, "nothing sent");
    assert_eq!(db_dump(&dir.db()), before, "nothing written");
    // The execution actor may.
    let bound = n.into_pathway();
    bound
        .dispatch_and_confirm(&rt, &exec, &mut ex, &mut Sees("applied"))
        .into_completed()
        .expect("resumed and confirmed");
    assert_eq!(ex.0.executed, 2);
    assert!(rt.verify(None).unwrap().is_ok());
}
