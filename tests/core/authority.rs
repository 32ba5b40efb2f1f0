//! Every authority rule: the wrong actor is refused with `NotAuthorized`, the
//! pathway is handed back (and then goes on with the right actor), and nothing is
//! written: every row of every table (ledger, pathways with state and version,
//! attempts, approvals, meta) is identical before and after the refusal.
//! Also: approvals and reconciliation tokens are bound to their pathway and attempt,
//! approvals are used once, and idempotency keys replay or conflict without writing.
#![allow(
    clippy::result_large_err,
    reason = "closures hand the library's Refused<Returned> through unchanged"
)]

use crate::common;

use std::fmt::Debug;
use std::path::Path;

use common::*;
use rpr::executor::{Delivery, RejectionClass};
use rpr::stage::{
    Approved, AwaitingApproval, Bound, Held, HumanGate, PartiallyCompleted, Proposed,
    ReadyToResume, RepairRequired, Returned, Stage, Stopped, Unknown,
};
use rpr::store::StoreError;
use rpr::token::{Attestation, Reconciled};
use rpr::{
    ALLOW_ALL, ActionClass, Actor, Admission, Decision, Outcome, Pathway, PathwayError, Proposal,
    Refused, Runtime, State,
};
use serde_json::json;

const EVERYONE: [&str; 10] = [
    "decision_owner",
    "approval_authority",
    "execution_actor",
    "stop_authority",
    "evidence_owner",
    "repair_owner",
    "resume_authority",
    "residual_owner",
    "proposer",
    "mallory",
];

fn wrong(allowed: &[&str]) -> Vec<Actor> {
    EVERYONE
        .iter()
        .filter(|a| !allowed.contains(a))
        .map(|a| actor(a))
        .collect()
}

fn assert_not_authorized(e: &PathwayError, who: &Actor, what: &str) {
    match e {
        PathwayError::NotAuthorized { actor, .. } => assert_eq!(actor, who, "{what}"),
        other => panic!("{what}: {who} should be NotAuthorized, got {other:?}"),
    }
}

/// Tries `step` with every actor outside `allowed`: each is refused, nothing is
/// written, and the pathway is handed back. Returns it for the right actor.
fn refuse_all<S: Stage, T: Debug>(
    db: &Path,
    mut p: Pathway<S>,
    allowed: &[&str],
    what: &str,
    step: impl Fn(Pathway<S>, &Actor) -> Result<T, Refused<S>>,
) -> Pathway<S> {
    let id = p.id().to_owned();
    for a in wrong(allowed) {
        let before = db_dump(db);
        match step(p, &a) {
            Ok(t) => panic!("{a} was allowed to {what}: {t:?}"),
            Err(r) => {
                assert_not_authorized(r.error(), &a, what);
                assert_eq!(db_dump(db), before, "{what} by {a} wrote something");
                p = r.into_pathway();
                assert_eq!(p.id(), id);
                assert_eq!(p.state(), S::STATE);
            }
        }
    }
    p
}

/// The same for steps that borrow the pathway and return a plain error.
fn refuse_all_borrowed<T: Debug>(
    db: &Path,
    allowed: &[&str],
    what: &str,
    step: impl Fn(&Actor) -> Result<T, PathwayError>,
) {
    for a in wrong(allowed) {
        let before = db_dump(db);
        match step(&a) {
            Ok(t) => panic!("{a} was allowed to {what}: {t:?}"),
            Err(e) => assert_not_authorized(&e, &a, what),
        }
        assert_eq!(db_dump(db), before, "{what} by {a} wrote something");
    }
}

/// Tries to dispatch with every actor outside `allowed`: `NotSent`, the executor is
/// never called, nothing is written, and the bound pathway comes back.
fn refuse_dispatch(
    db: &Path,
    rt: &Runtime,
    mut b: Pathway<Bound>,
    allowed: &[&str],
    ex: &mut Scripted,
) -> Pathway<Bound> {
    for a in wrong(allowed) {
        let before = db_dump(db);
        match b.dispatch(rt, &a, ex) {
            Outcome::NotSent(n) => {
                assert_not_authorized(n.error(), &a, "dispatch");
                b = n.into_pathway();
            }
            other => panic!("{a} was allowed to dispatch: {other:?}"),
        }
        assert_eq!(db_dump(db), before, "dispatch by {a} wrote something");
        assert_eq!(ex.executed, 0, "the executor was called for {a}");
    }
    b
}

struct Env {
    dir: TempDir,
    rt: Runtime,
}

impl Env {
    fn new(tag: &str) -> Self {
        let dir = TempDir::new(tag);
        let rt = runtime(&dir.db());
        Self { dir, rt }
    }
    fn db(&self) -> std::path::PathBuf {
        self.dir.db()
    }
    fn proposed(&self, key: &str) -> Pathway<Proposed> {
        match self
            .rt
            .propose(&actor("proposer"), definition(key, ActionClass::Mutating))
            .unwrap()
        {
            Proposal::New(p) => p,
            other => panic!("{other:?}"),
        }
    }
    fn admit(&self, key: &str, d: Decision) -> Admission {
        self.proposed(key)
            .admit(&self.rt, &actor("decision_owner"), &move |_| d.clone())
            .unwrap()
    }
    fn awaiting(&self, key: &str) -> Pathway<AwaitingApproval> {
        let Admission::AwaitingApproval(p) = self.admit(key, Decision::Hold) else {
            panic!()
        };
        p
    }
    fn gate(&self, key: &str) -> Pathway<HumanGate> {
        let Admission::HumanGate(p) = self.admit(key, Decision::HumanGate) else {
            panic!()
        };
        p
    }
    fn approved(&self, key: &str) -> Pathway<Approved> {
        self.admit(key, Decision::Allow).into_approved().unwrap()
    }
    fn held(&self, key: &str) -> Pathway<Held> {
        self.approved(key)
            .hold(&self.rt, &actor("stop_authority"), "wait")
            .unwrap()
    }
    fn dispatch(&self, key: &str, d: Delivery) -> Outcome {
        let mut ex = Scripted::new(vec![d]);
        self.approved(key).bind(&mut ex).unwrap().dispatch(
            &self.rt,
            &actor("execution_actor"),
            &mut ex,
        )
    }
    fn returned(&self, key: &str) -> Pathway<Returned> {
        let Outcome::Returned(p) = self.dispatch(
            key,
            Delivery::Succeeded {
                reply: json!({"ok": true}),
            },
        ) else {
            panic!()
        };
        p
    }
    fn unknown(&self, key: &str) -> Pathway<Unknown> {
        let Outcome::Unknown(p) = self.dispatch(
            key,
            Delivery::PossiblyWritten {
                reason: "timeout".into(),
            },
        ) else {
            panic!()
        };
        p
    }
    fn stopped(&self, key: &str) -> Pathway<Stopped> {
        self.returned(key)
            .stop(&self.rt, &actor("stop_authority"), "halt")
            .unwrap()
    }
    fn partial(&self, key: &str) -> Pathway<PartiallyCompleted> {
        let Outcome::Partial(p) = self.dispatch(
            key,
            Delivery::Partial {
                reply: json!({"half": true}),
            },
        ) else {
            panic!()
        };
        p
    }
    fn repair_required(&self, key: &str) -> Pathway<RepairRequired> {
        let Outcome::Failed(p) = self.dispatch(
            key,
            Delivery::Rejected {
                error: json!({"code": -32000, "message": "refused"}),
                class: RejectionClass::NotApplied,
            },
        ) else {
            panic!()
        };
        p
    }
    fn ready(&self, key: &str) -> Pathway<ReadyToResume> {
        self.repair_required(key)
            .repair(
                &self.rt,
                &actor("repair_owner"),
                &json!({"fixed": true}),
                None,
            )
            .unwrap()
    }
    fn state(&self, id: &str) -> State {
        self.rt.pathway_record(id).unwrap().unwrap().state
    }
}

#[test]
fn admit_needs_the_decision_owner() {
    let env = Env::new("auth-admit");
    let p = refuse_all(
        &env.db(),
        env.proposed("a"),
        &["decision_owner"],
        "admit",
        |p, a| p.admit(&env.rt, a, ALLOW_ALL),
    );
    let p = p
        .admit(&env.rt, &actor("decision_owner"), ALLOW_ALL)
        .unwrap()
        .into_approved()
        .unwrap();
    assert_eq!(env.state(p.id()), State::Approved);
}

#[test]
fn grant_approval_needs_the_approval_authority() {
    let env = Env::new("auth-grant");
    let p = env.awaiting("a");
    refuse_all_borrowed(
        &env.db(),
        &["approval_authority"],
        "grant an approval (awaiting)",
        |a| env.rt.grant_approval(&p, a),
    );
    let ap = env
        .rt
        .grant_approval(&p, &actor("approval_authority"))
        .unwrap();
    assert_eq!(ap.approver(), &actor("approval_authority"));
    assert_eq!(
        env.state(
            p.approve(&env.rt, ap.quorum(&env.rt).expect("quorum"))
                .unwrap()
                .id()
        ),
        State::Approved
    );

    let g = env.gate("b");
    refuse_all_borrowed(
        &env.db(),
        &["approval_authority"],
        "grant an approval (human gate)",
        |a| env.rt.grant_approval(&g, a),
    );
    let ap = env
        .rt
        .grant_approval(&g, &actor("approval_authority"))
        .unwrap();
    assert_eq!(
        env.state(
            g.approve(&env.rt, ap.quorum(&env.rt).expect("quorum"))
                .unwrap()
                .id()
        ),
        State::Approved
    );
}

#[test]
fn deny_needs_the_approval_authority() {
    let env = Env::new("auth-deny");
    let p = refuse_all(
        &env.db(),
        env.awaiting("a"),
        &["approval_authority"],
        "deny (awaiting)",
        |p, a| p.deny(&env.rt, a, "no"),
    );
    assert_eq!(
        env.state(
            p.deny(&env.rt, &actor("approval_authority"), "no")
                .unwrap()
                .id()
        ),
        State::Denied
    );
    let g = refuse_all(
        &env.db(),
        env.gate("b"),
        &["approval_authority"],
        "deny (human gate)",
        |p, a| p.deny(&env.rt, a, "no"),
    );
    assert_eq!(
        env.state(
            g.deny(&env.rt, &actor("approval_authority"), "no")
                .unwrap()
                .id()
        ),
        State::Denied
    );
}

#[test]
fn escalate_needs_the_stop_authority() {
    let env = Env::new("auth-escalate");
    let p = refuse_all(
        &env.db(),
        env.awaiting("a"),
        &["stop_authority"],
        "escalate (awaiting)",
        |p, a| p.escalate(&env.rt, a),
    );
    assert_eq!(
        env.state(p.escalate(&env.rt, &actor("stop_authority")).unwrap().id()),
        State::HumanGate
    );
    let h = refuse_all(
        &env.db(),
        env.held("b"),
        &["stop_authority"],
        "escalate (held)",
        |p, a| p.escalate(&env.rt, a),
    );
    assert_eq!(
        env.state(h.escalate(&env.rt, &actor("stop_authority")).unwrap().id()),
        State::HumanGate
    );
}

#[test]
fn hold_and_release_need_the_stop_authority() {
    let env = Env::new("auth-hold");
    let p = refuse_all(
        &env.db(),
        env.approved("a"),
        &["stop_authority"],
        "hold",
        |p, a| p.hold(&env.rt, a, "x"),
    );
    let h = p.hold(&env.rt, &actor("stop_authority"), "x").unwrap();
    assert_eq!(env.state(h.id()), State::Held);
    let h = refuse_all(&env.db(), h, &["stop_authority"], "release", |p, a| {
        p.release(&env.rt, a)
    });
    assert_eq!(
        env.state(h.release(&env.rt, &actor("stop_authority")).unwrap().id()),
        State::Approved
    );
}

#[test]
fn dispatch_needs_the_execution_actor() {
    let env = Env::new("auth-dispatch");
    let mut ex = Scripted::ok();
    let b = env.approved("a").bind(&mut ex).unwrap();
    // The resume authority may not make a first dispatch: it is not in `allowed`.
    let b = refuse_dispatch(&env.db(), &env.rt, b, &["execution_actor"], &mut ex);
    let Outcome::Returned(p) = b.dispatch(&env.rt, &actor("execution_actor"), &mut ex) else {
        panic!()
    };
    assert_eq!(ex.executed, 1);
    assert_eq!(env.state(p.id()), State::Running);
}

#[test]
fn resumed_dispatch_needs_the_execution_actor_or_the_resume_authority() {
    let env = Env::new("auth-resume");
    for (key, who) in [("a", "execution_actor"), ("b", "resume_authority")] {
        let mut ex = Scripted::ok();
        let b = env.ready(key).bind(&mut ex).unwrap();
        let b = refuse_dispatch(
            &env.db(),
            &env.rt,
            b,
            &["execution_actor", "resume_authority"],
            &mut ex,
        );
        let Outcome::Returned(p) = b.dispatch(&env.rt, &actor(who), &mut ex) else {
            panic!("{who} may resume")
        };
        assert_eq!(ex.executed, 1);
        let attempts = env.rt.attempt_records(p.id()).unwrap();
        assert_eq!(attempts.len(), 2);
        assert_eq!(
            attempts[1].previous_attempt.as_deref(),
            Some(attempts[0].id.as_str())
        );
    }
}

#[test]
fn confirm_needs_the_execution_actor_or_the_evidence_owner() {
    let env = Env::new("auth-confirm");
    for (key, who) in [("a", "execution_actor"), ("b", "evidence_owner")] {
        let p = refuse_all(
            &env.db(),
            env.returned(key),
            &["execution_actor", "evidence_owner"],
            "confirm",
            |p, a| p.confirm(&env.rt, a, &mut Sees("applied")),
        );
        let p = p
            .confirm(&env.rt, &actor(who), &mut Sees("applied"))
            .unwrap()
            .into_completed()
            .unwrap();
        assert_eq!(env.state(p.id()), State::Completed);
    }
}

#[test]
fn stop_needs_the_stop_authority() {
    let env = Env::new("auth-stop");
    let p = refuse_all(
        &env.db(),
        env.returned("a"),
        &["stop_authority"],
        "stop",
        |p, a| p.stop(&env.rt, a, "halt"),
    );
    assert_eq!(
        env.state(
            p.stop(&env.rt, &actor("stop_authority"), "halt")
                .unwrap()
                .id()
        ),
        State::Stopped
    );
}

#[test]
fn attest_needs_the_evidence_owner_or_the_repair_owner() {
    let env = Env::new("auth-attest");
    for (key, who) in [("a", "evidence_owner"), ("b", "repair_owner")] {
        let p = env.unknown(key);
        refuse_all_borrowed(
            &env.db(),
            &["evidence_owner", "repair_owner"],
            "attest",
            |a| {
                env.rt
                    .attest(&p, a, Attestation::Applied, &json!({"looked": "yes"}))
            },
        );
        let before = db_dump(&env.db());
        let Reconciled::Applied(t) = env
            .rt
            .attest(
                &p,
                &actor(who),
                Attestation::Applied,
                &json!({"looked": "yes"}),
            )
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(
            db_dump(&env.db()),
            before,
            "attesting writes nothing until the token is used"
        );
        assert_eq!(t.source(), "attested");
        assert_eq!(
            env.state(p.complete(&env.rt, t).unwrap().id()),
            State::Completed
        );
    }
}

#[test]
fn require_repair_needs_the_repair_owner() {
    let env = Env::new("auth-require-repair");
    let s = refuse_all(
        &env.db(),
        env.stopped("a"),
        &["repair_owner"],
        "require repair (stopped)",
        |p, a| p.require_repair(&env.rt, a),
    );
    assert_eq!(
        env.state(
            s.require_repair(&env.rt, &actor("repair_owner"))
                .unwrap()
                .id()
        ),
        State::RepairRequired
    );
    let p = refuse_all(
        &env.db(),
        env.partial("b"),
        &["repair_owner"],
        "require repair (partial)",
        |p, a| p.require_repair(&env.rt, a),
    );
    assert_eq!(
        env.state(
            p.require_repair(&env.rt, &actor("repair_owner"))
                .unwrap()
                .id()
        ),
        State::RepairRequired
    );
}

#[test]
fn repair_needs_the_repair_owner() {
    let env = Env::new("auth-repair");
    let p = refuse_all(
        &env.db(),
        env.repair_required("a"),
        &["repair_owner"],
        "repair",
        |p, a| p.repair(&env.rt, a, &json!({"fixed": true}), None),
    );
    let r = p
        .repair(
            &env.rt,
            &actor("repair_owner"),
            &json!({"fixed": true}),
            None,
        )
        .unwrap();
    assert_eq!(env.state(r.id()), State::ReadyToResume);
}

#[test]
fn abort_needs_the_residual_owner_from_every_abortable_stage() {
    let env = Env::new("auth-abort");
    let residuals = json!({"left": "nothing"});
    macro_rules! check {
        ($p:expr, $what:literal) => {{
            let p = refuse_all(&env.db(), $p, &["residual_owner"], $what, |p, a| {
                p.abort(&env.rt, a, &residuals)
            });
            let done = p
                .abort(&env.rt, &actor("residual_owner"), &residuals)
                .unwrap();
            assert_eq!(env.state(done.id()), State::Aborted, $what);
        }};
    }
    check!(env.approved("a"), "abort (approved)");
    check!(env.held("b"), "abort (held)");
    check!(env.gate("c"), "abort (human gate)");
    check!(env.stopped("d"), "abort (stopped)");
    check!(env.repair_required("e"), "abort (repair required)");
    check!(env.ready("f"), "abort (ready to resume)");
}

#[test]
fn an_approval_for_one_pathway_cannot_approve_another() {
    let env = Env::new("auth-approval-x-y");
    // Y carries exactly the same request as X: only the pathway differs.
    let x = env.awaiting("x");
    let y = match env.rt.propose(&actor("proposer"), {
        let mut d = definition("x", ActionClass::Mutating);
        d.idempotency_key = "y".into();
        d
    }) {
        Ok(Proposal::New(p)) => p,
        other => panic!("{other:?}"),
    };
    let Admission::HumanGate(y) = y
        .admit(&env.rt, &actor("decision_owner"), &|_| Decision::HumanGate)
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(x.request_digest(), y.request_digest());
    let for_x = env
        .rt
        .grant_approval(&x, &actor("approval_authority"))
        .unwrap();
    let before = db_dump(&env.db());
    let r = y
        .approve(&env.rt, for_x.quorum(&env.rt).expect("quorum"))
        .unwrap_err();
    assert!(
        matches!(r.error(), PathwayError::TokenMismatch(_)),
        "{:?}",
        r.error()
    );
    assert_eq!(db_dump(&env.db()), before, "nothing written");
    let y = r.into_pathway();
    assert_eq!(env.state(y.id()), State::HumanGate);
    // Its own approval works.
    let for_y = env
        .rt
        .grant_approval(&y, &actor("approval_authority"))
        .unwrap();
    assert_eq!(
        env.state(
            y.approve(&env.rt, for_y.quorum(&env.rt).expect("quorum"))
                .unwrap()
                .id()
        ),
        State::Approved
    );
    assert_eq!(env.state(x.id()), State::AwaitingApproval);
}

#[test]
fn an_approval_is_marked_used_once_in_the_database() {
    let env = Env::new("auth-approval-once");
    let p = env.awaiting("a");
    let used = env
        .rt
        .grant_approval(&p, &actor("approval_authority"))
        .unwrap();
    let spare = env
        .rt
        .grant_approval(&p, &actor("approval_authority"))
        .unwrap();
    let db = env.db();
    let used_at = || ints(&db, "SELECT used_at FROM approvals ORDER BY id");
    assert_eq!(used_at(), vec![None, None]);
    let p = p
        .approve(&env.rt, used.quorum(&env.rt).expect("quorum"))
        .unwrap();
    let after = used_at();
    assert!(
        after[0].is_some(),
        "the consumed approval is marked used: {after:?}"
    );
    assert_eq!(after[1], None, "the other grant is untouched");
    drop(spare);

    // The database side of "usable once": an approval row marked used (here by a hand
    // edit the chain does not explain) is refused, even if the token came back; the
    // step's check of the pathway's rows against its events refuses it first.
    let p = p
        .hold(&env.rt, &actor("stop_authority"), "again")
        .unwrap()
        .escalate(&env.rt, &actor("stop_authority"))
        .unwrap();
    let again = env
        .rt
        .grant_approval(&p, &actor("approval_authority"))
        .unwrap();
    hand_edit(
        &db,
        "UPDATE approvals SET used_at = 1 WHERE used_at IS NULL",
    );
    let before = db_dump(&env.db());
    let r = p
        .approve(&env.rt, again.quorum(&env.rt).expect("quorum"))
        .unwrap_err();
    assert!(
        matches!(
            r.error(),
            PathwayError::Store(StoreError::ApprovalUnusable(_) | StoreError::Unexplained { .. })
        ),
        "{:?}",
        r.error()
    );
    assert_eq!(
        db_dump(&env.db()),
        before,
        "the refused approval wrote nothing"
    );
    assert_eq!(env.state(r.into_pathway().id()), State::HumanGate);
}

#[test]
fn a_reconciliation_for_another_pathway_or_attempt_is_refused() {
    let env = Env::new("auth-token");
    // Another pathway.
    let p = env.unknown("p");
    let q = env.unknown("q");
    let Reconciled::Applied(for_p) = env.rt.reconcile(&p, &mut Sees("applied")) else {
        panic!()
    };
    let before = db_dump(&env.db());
    let r = q.complete(&env.rt, for_p).unwrap_err();
    assert!(
        matches!(r.error(), PathwayError::TokenMismatch(_)),
        "{:?}",
        r.error()
    );
    assert_eq!(db_dump(&env.db()), before);
    let q = r.into_pathway();
    assert_eq!(env.state(q.id()), State::WriteStatusUnknown);

    // Another attempt of the same pathway: a verdict about attempt 1 cannot settle attempt 2.
    let Reconciled::Applied(stale) = env.rt.reconcile(&q, &mut Sees("applied")) else {
        panic!()
    };
    let Reconciled::NotApplied(t) = env.rt.reconcile(&q, &mut Sees("not_applied")) else {
        panic!()
    };
    let q = q
        .require_repair(&env.rt, t)
        .unwrap()
        .repair(&env.rt, &actor("repair_owner"), &json!({}), None)
        .unwrap();
    let mut ex = Scripted::new(vec![Delivery::PossiblyWritten {
        reason: "timeout again".into(),
    }]);
    let Outcome::Unknown(q) =
        q.bind(&mut ex)
            .unwrap()
            .dispatch(&env.rt, &actor("execution_actor"), &mut ex)
    else {
        panic!()
    };
    let before = db_dump(&env.db());
    let r = q.complete(&env.rt, stale).unwrap_err();
    assert!(
        matches!(r.error(), PathwayError::TokenMismatch(_)),
        "{:?}",
        r.error()
    );
    assert_eq!(db_dump(&env.db()), before);
    assert_eq!(env.state(r.into_pathway().id()), State::WriteStatusUnknown);
}

#[test]
fn same_idempotency_key_and_content_replays_the_stored_pathway() {
    let env = Env::new("auth-idem-replay");
    let p = env.approved("k");
    let before = db_dump(&env.db());
    match env
        .rt
        .propose(&actor("proposer"), definition("k", ActionClass::Mutating))
        .unwrap()
    {
        Proposal::Existing(rpr::StoredPathway::Approved(q)) => assert_eq!(q.id(), p.id()),
        other => panic!("expected a replay of the approved pathway, got {other:?}"),
    }
    assert_eq!(db_dump(&env.db()), before, "a replay writes nothing");
}

#[test]
fn same_idempotency_key_with_other_content_conflicts_and_writes_nothing() {
    let env = Env::new("auth-idem-conflict");
    let p = env.proposed("k");
    let before = db_dump(&env.db());
    let mut other = definition("k", ActionClass::Mutating);
    other.request.arguments = json!({"key": "k", "value": "something else"});
    match env.rt.propose(&actor("proposer"), other) {
        Err(PathwayError::IdempotencyConflict { key, existing }) => {
            assert_eq!(key, "k");
            assert_eq!(existing, p.id());
        }
        other => panic!("expected IdempotencyConflict, got {other:?}"),
    }
    // A different class or authority under the same key conflicts too.
    let other = definition("k", ActionClass::ReadOnly);
    assert!(matches!(
        env.rt.propose(&actor("proposer"), other),
        Err(PathwayError::IdempotencyConflict { .. })
    ));
    assert_eq!(db_dump(&env.db()), before, "a conflict writes nothing");
}

/// A second handle to the same pathway (from `load`) that went stale cannot grant an
/// approval: the grant is a step like any other, fenced by the stored state and
/// version, so the ledger never records an approval for a stage the pathway has left.
#[test]
fn a_stale_handle_cannot_grant_an_approval() {
    let env = Env::new("auth-stale-grant");
    let p = env.awaiting("a");
    let rpr::StoredPathway::AwaitingApproval(stale) = env.rt.load(p.id()).unwrap() else {
        panic!()
    };
    p.deny(&env.rt, &actor("approval_authority"), "no").unwrap();
    let before = db_dump(&env.db());
    match env.rt.grant_approval(&stale, &actor("approval_authority")) {
        Err(PathwayError::Store(StoreError::Conflict { .. })) => {}
        other => panic!("a grant on a denied pathway must conflict, got {other:?}"),
    }
    assert_eq!(db_dump(&env.db()), before, "nothing written");
    let report = env.rt.verify(None).unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
}

#[test]
fn an_approval_granted_before_an_escalation_cannot_decide_the_human_gate() {
    let env = Env::new("auth-approval-escalated");
    let p = env.awaiting("esc");
    // A quorum made before the escalation, kept.
    let early = env
        .rt
        .grant_approval(&p, &actor("approval_authority"))
        .unwrap()
        .quorum(&env.rt)
        .expect("quorum");
    let gate = p.escalate(&env.rt, &actor("stop_authority")).unwrap();
    // Read now, the approval no longer counts.
    assert!(matches!(
        env.rt.quorum(&gate).unwrap_err(),
        PathwayError::QuorumShort {
            have: 0,
            need: 1,
            ..
        }
    ));
    let before = db_dump(&env.db());
    let r = gate.approve(&env.rt, early).unwrap_err();
    assert!(
        matches!(
            r.error(),
            PathwayError::Store(StoreError::ApprovalUnusable(_) | StoreError::Unexplained { .. })
        ),
        "{:?}",
        r.error()
    );
    assert_eq!(db_dump(&env.db()), before, "nothing written");
    let gate = r.into_pathway();
    // A decision taken at the gate itself works.
    let fresh = env
        .rt
        .grant_approval(&gate, &actor("approval_authority"))
        .unwrap();
    assert_eq!(
        env.state(
            gate.approve(&env.rt, fresh.quorum(&env.rt).expect("quorum"))
                .unwrap()
                .id()
        ),
        State::Approved
    );
}
