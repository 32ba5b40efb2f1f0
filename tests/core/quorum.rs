//! Approvals with a rule (issue 29, item 3): a quorum of distinct approvers, no
//! self-approval unless allowed, break-glass recorded as such, and expiry, both of an
//! approval waiting for its quorum and of an approved pathway not yet dispatched.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use rpr::stage::{Approved, HumanGate};
use rpr::store::StoreError;
use rpr::{
    Admission, ApprovalRule, Clock, Decision, Outcome, Pathway, PathwayError, Proposal, Runtime,
    SequentialIds, State,
};
use serde_json::json;

use crate::common::{Scripted, TempDir, actor, db_dump, definition};

const HOUR: i64 = 3_600_000;

/// A clock the test moves.
#[derive(Clone)]
struct Manual(Arc<AtomicI64>);

impl Clock for Manual {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

struct Env {
    dir: TempDir,
    rt: Runtime,
    clock: Manual,
}

impl Env {
    fn new(tag: &str) -> Self {
        let dir = TempDir::new(tag);
        let clock = Manual(Arc::new(AtomicI64::new(1_700_000_000_000)));
        // Approvals follow the database's clock on PostgreSQL; this test moves time, so
        // it gives its clock for approvals too (on both stores).
        let rt = Runtime::builder(dir.db())
            .clock(clock.clone())
            .approval_clock(clock.clone())
            .ids(SequentialIds::default())
            .open()
            .unwrap();
        Self { dir, rt, clock }
    }

    fn later(&self, ms: i64) {
        self.clock.0.fetch_add(ms, Ordering::SeqCst);
    }

    /// A pathway proposed by `proposer` under `rule`, at its Human Gate.
    fn gated(&self, key: &str, proposer: &str, rule: ApprovalRule) -> Pathway<HumanGate> {
        let mut d = definition(key, rpr::ActionClass::Mutating);
        d.authority = d.authority.with_approval(rule);
        let Proposal::New(p) = self.rt.propose(&actor(proposer), d).unwrap() else {
            panic!("new")
        };
        match p
            .admit(&self.rt, &actor("decision_owner"), &|_| Decision::HumanGate)
            .unwrap()
        {
            Admission::HumanGate(p) => p,
            other => panic!("{other:?}"),
        }
    }

    /// The pathway's ledger events, parsed.
    fn events(&self, id: &str) -> Vec<serde_json::Value> {
        self.rt
            .ledger_rows(0, 10_000)
            .unwrap()
            .into_iter()
            .filter(|r| r.pathway_id == id)
            .map(|r| serde_json::from_str(&r.event).unwrap())
            .collect()
    }

    fn state(&self, id: &str) -> State {
        self.rt.pathway_record(id).unwrap().unwrap().state
    }
}

/// Two of alice, bob and carol (the approval authority is one more approver), one hour.
fn two_of_three() -> ApprovalRule {
    ApprovalRule::new(
        2,
        vec![actor("alice"), actor("bob"), actor("carol")],
        Some(Duration::from_hours(1)),
    )
}

#[test]
fn a_pathway_short_of_its_quorum_is_not_approved_and_two_distinct_approvers_approve_it() {
    let env = Env::new("quorum-two");
    let p = env.gated("q", "proposer", two_of_three());
    env.rt.grant_approval(&p, &actor("alice")).unwrap();
    match env.rt.quorum(&p).unwrap_err() {
        PathwayError::QuorumShort {
            have,
            need,
            granted_by,
            waiting_on,
            ..
        } => {
            assert_eq!((have, need), (1, 2));
            assert_eq!(&*granted_by, [actor("alice")]);
            assert!(waiting_on.contains(&actor("bob")) && !waiting_on.contains(&actor("alice")));
        }
        other => panic!("{other:?}"),
    }
    // The same approver again does not make two.
    let again = env.rt.grant_approval(&p, &actor("alice")).unwrap_err();
    assert!(
        matches!(again, PathwayError::AlreadyApproved { .. }),
        "{again:?}"
    );
    // An actor outside the approvers cannot approve at all.
    let outsider = env.rt.grant_approval(&p, &actor("mallory")).unwrap_err();
    assert!(
        matches!(outsider, PathwayError::NotAuthorized { .. }),
        "{outsider:?}"
    );
    assert_eq!(env.state(p.id()), State::HumanGate);
    // A second, distinct approver makes the quorum, whoever's token it starts from.
    let bob = env.rt.grant_approval(&p, &actor("bob")).unwrap();
    let quorum = bob.quorum(&env.rt).unwrap();
    let mut who: Vec<String> = quorum.approvers().map(ToString::to_string).collect();
    who.sort();
    assert_eq!(who, ["alice", "bob"]);
    let id = p.id().to_owned();
    p.approve(&env.rt, quorum).unwrap();
    assert_eq!(env.state(&id), State::Approved);
    // One `approved` event per approval, by its approver; the chain verifies.
    let approved: Vec<String> = env
        .events(&id)
        .into_iter()
        .filter(|e| e["kind"] == "approved")
        .map(|e| e["actor"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(approved.len(), 2, "{approved:?}");
    assert!(env.rt.verify(None).unwrap().is_ok());
}

#[test]
fn approved_bindings_name_what_each_approval_the_last_approve_used_was_shown() {
    let env = Env::new("quorum-bindings");
    let rule = two_of_three().with_break_glass(vec![actor("oncall")]);
    let p = env.gated("b", "proposer", rule);
    assert!(
        env.rt.approved_bindings(p.id()).unwrap().is_empty(),
        "not approved yet"
    );
    env.rt
        .grant_approval_of_binding(&p, &actor("alice"), "digest-a")
        .unwrap();
    // bob's approval records no binding (a host that showed none).
    let bob = env.rt.grant_approval(&p, &actor("bob")).unwrap();
    let id = p.id().to_owned();
    let approved = p.approve(&env.rt, bob.quorum(&env.rt).unwrap()).unwrap();
    // Who approved, and what each was shown, sorted by approver.
    let used = || {
        let mut used: Vec<(String, Option<String>)> = env
            .rt
            .approved_bindings(&id)
            .unwrap()
            .into_iter()
            .map(|a| (a.approver.to_string(), a.binding_digest))
            .collect();
        used.sort();
        used
    };
    assert_eq!(
        used(),
        [
            ("alice".into(), Some("digest-a".into())),
            ("bob".into(), None)
        ]
    );

    // Held and escalated back to the gate, approved again by break-glass: only that
    // approval counts now.
    let held = approved
        .hold(&env.rt, &actor("stop_authority"), "look again")
        .unwrap();
    let gated = held.escalate(&env.rt, &actor("stop_authority")).unwrap();
    let quorum = env
        .rt
        .break_glass_of_binding(&gated, &actor("oncall"), "outage", "digest-b")
        .unwrap();
    gated.approve(&env.rt, quorum).unwrap();
    assert_eq!(used(), [("oncall".into(), Some("digest-b".into()))]);
}

/// The library holds a send to what its approvers were shown, whoever dispatches: an
/// approval that recorded a binding holds only for that binding, its class aside (the
/// server's annotation or the policy's stricter word); one that recorded none is its
/// host's word.
#[test]
fn an_approval_of_another_binding_is_not_sent_on_whatever_its_class() {
    let env = Env::new("quorum-of-binding");
    // What `Scripted` binds (read-only), and the same target with the other class.
    let scripted = || rpr::executor::Binding::new("scripted", json!({"executor": "scripted"}));
    let read_only = scripted().unwrap().read_only().digest;
    let mutating = scripted()
        .unwrap()
        .with_class(rpr::ActionClass::Mutating)
        .digest;
    assert_ne!(read_only, mutating);

    let p = env.gated("other", "proposer", two_of_three());
    env.rt
        .grant_approval_of_binding(&p, &actor("alice"), "another-server")
        .unwrap();
    let bob = env.rt.grant_approval(&p, &actor("bob")).unwrap();
    let approved = p.approve(&env.rt, bob.quorum(&env.rt).unwrap()).unwrap();
    let mut executor = Scripted::ok();
    let bound = approved.bind(&mut executor).unwrap();
    let before = db_dump(&env.dir.db());
    let Outcome::NotSent(n) = bound.dispatch(&env.rt, &actor("execution_actor"), &mut executor)
    else {
        panic!("sent on an approval of another binding")
    };
    assert!(
        matches!(n.error(), PathwayError::ApprovedAnotherBinding(b)
            if b.approver.as_str() == "alice" && b.approved == "another-server" && b.bound == read_only),
        "{:?}",
        n.error()
    );
    assert_eq!(executor.executed, 0, "nothing sent");
    assert_eq!(db_dump(&env.dir.db()), before, "nothing written");

    // Approved as the target is, one approver shown it with the other class: sent.
    let p = env.gated("same", "proposer", two_of_three());
    env.rt
        .grant_approval_of_binding(&p, &actor("alice"), &mutating)
        .unwrap();
    let bob = env
        .rt
        .grant_approval_of_binding(&p, &actor("bob"), &read_only)
        .unwrap();
    let approved = p.approve(&env.rt, bob.quorum(&env.rt).unwrap()).unwrap();
    let bound = approved.bind(&mut executor).unwrap();
    let out = bound.dispatch(&env.rt, &actor("execution_actor"), &mut executor);
    assert!(!matches!(out, Outcome::NotSent(_)), "{out:?}");
    assert_eq!(executor.executed, 1);
}

/// Alice approves the call bound to X; the server changes to Y; Bob approves Y. Judged
/// for Y (what a host that records the binding it shows asks), Alice's approval of X does
/// not count, and does not keep her from approving Y: before, the two made a quorum that
/// approved a call no send would take, and Alice's approval of Y was refused as given.
#[test]
fn a_quorum_of_a_binding_counts_only_the_approvals_of_that_binding() {
    let env = Env::new("quorum-one-binding");
    // The views read approvals by the store's clock (they cannot be handed one): the
    // test's clock starts at the real time.
    let real = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    env.clock
        .0
        .store(i64::try_from(real.as_millis()).unwrap(), Ordering::SeqCst);
    let scripted = rpr::executor::Binding::new("scripted", json!({"executor": "scripted"}));
    let y = scripted.unwrap().read_only().digest;
    let p = env.gated("moved", "proposer", two_of_three());
    env.rt
        .grant_approval_of_binding(&p, &actor("alice"), "x-before-the-upgrade")
        .unwrap();
    env.rt
        .grant_approval_of_binding(&p, &actor("bob"), &y)
        .unwrap();
    let before = db_dump(&env.dir.db());
    let e = env.rt.quorum_of_binding(&p, &y).unwrap_err();
    let PathwayError::QuorumShort {
        have,
        granted_by,
        waiting_on,
        ..
    } = e
    else {
        panic!("{e:?}")
    };
    assert_eq!(have, 1);
    assert_eq!(granted_by.as_ref(), [actor("bob")]);
    assert!(waiting_on.contains(&actor("alice")), "{waiting_on:?}");
    assert_eq!(db_dump(&env.dir.db()), before, "judging writes nothing");
    // Judged over every approval of the request (no binding asked), the two still count.
    assert!(env.rt.quorum(&p).is_ok());
    // The views say the same as the quorum of the binding shown last: alice may still
    // approve (before, they named carol alone, as if alice's approval of X counted).
    let store = rpr::store::ReadStore::open_read_only(&env.dir.db()).unwrap();
    let record = store.pathway(p.id()).unwrap().unwrap();
    let next = rpr::inspect::next_of(&store, &record).unwrap();
    assert_eq!(
        next.actors,
        ["approval_authority", "alice", "carol"],
        "{next:?}"
    );
    drop(store);

    // Alice approves what she is shown now: a quorum of Y, sent once.
    env.rt
        .grant_approval_of_binding(&p, &actor("alice"), &y)
        .unwrap();
    let e = env
        .rt
        .grant_approval_of_binding(&p, &actor("alice"), &y)
        .unwrap_err();
    assert!(matches!(e, PathwayError::AlreadyApproved { .. }), "{e:?}");
    let quorum = env.rt.quorum_of_binding(&p, &y).unwrap();
    let approved = p.approve(&env.rt, quorum).unwrap();
    let mut executor = Scripted::ok();
    let bound = approved.bind(&mut executor).unwrap();
    let out = bound.dispatch(&env.rt, &actor("execution_actor"), &mut executor);
    assert!(!matches!(out, Outcome::NotSent(_)), "{out:?}");
    assert_eq!(executor.executed, 1);
}

#[test]
fn the_proposer_may_not_approve_unless_the_rule_allows_it() {
    let env = Env::new("quorum-self");
    let p = env.gated("s", "alice", two_of_three());
    let before = db_dump(&env.dir.db());
    let e = env.rt.grant_approval(&p, &actor("alice")).unwrap_err();
    assert!(matches!(e, PathwayError::SelfApproval { .. }), "{e:?}");
    assert_eq!(db_dump(&env.dir.db()), before, "nothing written");
    // Nor does the proposer count among who may still approve.
    env.rt.grant_approval(&p, &actor("bob")).unwrap();
    let PathwayError::QuorumShort { waiting_on, .. } = env.rt.quorum(&p).unwrap_err() else {
        panic!()
    };
    assert!(!waiting_on.contains(&actor("alice")), "{waiting_on:?}");

    let allowed = env.gated("s2", "alice", two_of_three().allowing_self_approval());
    env.rt.grant_approval(&allowed, &actor("alice")).unwrap();
    env.rt.grant_approval(&allowed, &actor("bob")).unwrap();
    let q = env.rt.quorum(&allowed).unwrap();
    allowed.approve(&env.rt, q).unwrap();
}

#[test]
fn a_break_glass_approval_approves_alone_and_is_recorded_as_such() {
    let env = Env::new("quorum-glass");
    let rule = two_of_three().with_break_glass(vec![actor("oncall")]);
    let p = env.gated("g", "proposer", rule);
    // Not a break-glass actor: refused, nothing written.
    let e = env
        .rt
        .break_glass(&p, &actor("alice"), "hurry")
        .unwrap_err();
    assert!(matches!(e, PathwayError::NotAuthorized { .. }), "{e:?}");
    // Nor may oncall approve the ordinary way.
    assert!(env.rt.grant_approval(&p, &actor("oncall")).is_err());
    let q = env
        .rt
        .break_glass(&p, &actor("oncall"), "outage INC-1")
        .unwrap();
    assert!(q.is_break_glass());
    let id = p.id().to_owned();
    p.approve(&env.rt, q).unwrap();
    assert_eq!(env.state(&id), State::Approved);
    let events = env.events(&id);
    let granted = events
        .iter()
        .find(|e| e["kind"] == "approval_granted")
        .unwrap();
    assert_eq!(granted["data"]["break_glass"], true);
    assert_eq!(granted["data"]["reason"], "outage INC-1");
    let approved = events.iter().find(|e| e["kind"] == "approved").unwrap();
    assert_eq!(approved["data"]["break_glass"], true);
    assert_eq!(approved["actor"], "oncall");
    assert!(env.rt.verify(None).unwrap().is_ok());
}

#[test]
fn an_expired_approval_does_not_count_toward_the_quorum_nor_is_used() {
    let env = Env::new("quorum-expired");
    let p = env.gated("e", "proposer", two_of_three());
    // alice's approval, and a quorum made while it counted, kept past the hour.
    env.rt.grant_approval(&p, &actor("alice")).unwrap();
    env.later(HOUR / 2);
    let kept = env
        .rt
        .grant_approval(&p, &actor("bob"))
        .unwrap()
        .quorum(&env.rt)
        .unwrap();
    env.later(HOUR / 2);
    // alice's is an hour old now: bob's alone is short.
    let PathwayError::QuorumShort { have: 1, .. } = env.rt.quorum(&p).unwrap_err() else {
        panic!()
    };
    // The store refuses the kept quorum too: alice's approval in it has expired.
    let before = db_dump(&env.dir.db());
    let r = p.approve(&env.rt, kept).unwrap_err();
    assert!(
        matches!(
            r.error(),
            PathwayError::Store(StoreError::ApprovalUnusable(_))
        ),
        "{:?}",
        r.error()
    );
    assert_eq!(db_dump(&env.dir.db()), before, "nothing written");
    // alice approves again; with bob's (half an hour old) that is the quorum.
    let p = r.into_pathway();
    env.rt.grant_approval(&p, &actor("alice")).unwrap();
    let q = env.rt.quorum(&p).unwrap();
    assert_eq!(q.expires_at(), Some(1_700_000_000_000 + HOUR / 2 + HOUR));
    p.approve(&env.rt, q).unwrap();
}

/// Approved by two, then the call is not made until `wait` later.
fn approved_then(env: &Env, key: &str) -> Pathway<Approved> {
    let p = env.gated(key, "proposer", two_of_three());
    env.rt.grant_approval(&p, &actor("alice")).unwrap();
    env.rt.grant_approval(&p, &actor("bob")).unwrap();
    let q = env.rt.quorum(&p).unwrap();
    p.approve(&env.rt, q).unwrap()
}

#[test]
fn an_approved_pathway_whose_approval_expired_is_not_sent_and_can_be_asked_again() {
    let env = Env::new("quorum-stale");
    let p = approved_then(&env, "late");
    let until = p.approval_expires_at().expect("an expiring approval");
    env.later(HOUR);
    let mut executor = Scripted::ok();
    let bound = p.bind(&mut executor).unwrap();
    let before = db_dump(&env.dir.db());
    let Outcome::NotSent(n) = bound.dispatch(&env.rt, &actor("execution_actor"), &mut executor)
    else {
        panic!("sent on an expired approval")
    };
    assert!(
        matches!(n.error(), PathwayError::ApprovalExpired { expired_at, .. } if *expired_at == until),
        "{:?}",
        n.error()
    );
    assert_eq!(executor.executed, 0, "nothing sent");
    assert_eq!(db_dump(&env.dir.db()), before, "nothing written");
    // Loaded again (another process), it is still refused: the expiry is read from the
    // chain.
    let id = n.into_pathway().id().to_owned();
    let rpr::StoredPathway::Approved(loaded) = env.rt.load(&id).unwrap() else {
        panic!("approved")
    };
    assert_eq!(loaded.approval_expires_at(), Some(until));
    let bound = loaded.bind(&mut executor).unwrap();
    assert!(matches!(
        bound.dispatch(&env.rt, &actor("execution_actor"), &mut executor),
        Outcome::NotSent(_)
    ));
    assert_eq!(executor.executed, 0);
    // Asked again: held and escalated, the old approvals revoked, a new quorum approves.
    let rpr::StoredPathway::Approved(p) = env.rt.load(&id).unwrap() else {
        panic!()
    };
    let gate = p
        .hold(&env.rt, &actor("stop_authority"), "approval expired")
        .unwrap()
        .escalate(&env.rt, &actor("stop_authority"))
        .unwrap();
    assert!(
        env.rt.quorum(&gate).is_err(),
        "the old approvals do not count"
    );
    env.rt.grant_approval(&gate, &actor("carol")).unwrap();
    env.rt.grant_approval(&gate, &actor("bob")).unwrap();
    let q = env.rt.quorum(&gate).unwrap();
    let approved = gate.approve(&env.rt, q).unwrap();
    let bound = approved.bind(&mut executor).unwrap();
    assert!(matches!(
        bound.dispatch(&env.rt, &actor("execution_actor"), &mut executor),
        Outcome::Returned(_) | Outcome::Completed(_)
    ));
    assert_eq!(executor.executed, 1, "sent once, on the fresh approval");
}

#[test]
fn an_approved_pathway_within_its_expiry_is_sent() {
    let env = Env::new("quorum-fresh");
    let p = approved_then(&env, "soon");
    env.later(HOUR - 1);
    let mut executor = Scripted::ok();
    let bound = p.bind(&mut executor).unwrap();
    let out = bound.dispatch(&env.rt, &actor("execution_actor"), &mut executor);
    assert!(!matches!(out, Outcome::NotSent(_)), "{out:?}");
    assert_eq!(executor.executed, 1);
}

#[test]
fn a_pathway_without_a_rule_keeps_one_approver_who_may_propose_and_no_expiry() {
    let env = Env::new("quorum-legacy");
    let d = definition("legacy", rpr::ActionClass::Mutating);
    assert!(d.authority.approval.is_none());
    let Proposal::New(p) = env.rt.propose(&actor("approval_authority"), d).unwrap() else {
        panic!()
    };
    let Admission::HumanGate(p) = p
        .admit(&env.rt, &actor("decision_owner"), &|_| Decision::HumanGate)
        .unwrap()
    else {
        panic!()
    };
    let q = env
        .rt
        .grant_approval(&p, &actor("approval_authority"))
        .unwrap()
        .quorum(&env.rt)
        .unwrap();
    assert_eq!(q.expires_at(), None);
    let p = p.approve(&env.rt, q).unwrap();
    env.later(1000 * HOUR);
    let mut executor = Scripted::ok();
    let out =
        p.bind(&mut executor)
            .unwrap()
            .dispatch(&env.rt, &actor("execution_actor"), &mut executor);
    assert!(!matches!(out, Outcome::NotSent(_)), "{out:?}");
}
