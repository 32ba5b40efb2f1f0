//! The identical-call lookup a governing proxy makes before each call
//! (`ReadStore::open_and_count_with_request`), on either store: one query that gives what
//! `open_with_request` and `count_with_request` give apart: the open pathways of a request
//! digest, by id, and how many pathways of any state it has.

use crate::common;

use common::*;
use rpr::executor::Request;
use rpr::{ActionClass, Decision, Definition, Runtime};
use serde_json::json;

/// A pathway of the same request under `key`, admitted by `decision` (`None`: completed).
fn pathway(rt: &Runtime, key: &str, decision: Option<Decision>) -> String {
    let mut definition = definition(key, ActionClass::ReadOnly);
    definition.request = Request::new("get", json!({"key": "same"}));
    let proposed = rt
        .propose(&actor("proposer"), definition)
        .unwrap()
        .into_new()
        .unwrap();
    if let Some(decision) = decision {
        let admitted = proposed
            .admit(rt, &actor("decision_owner"), &move |_: &Definition| {
                decision.clone()
            })
            .unwrap();
        return admitted.id().to_owned();
    }
    let approved = proposed
        .admit(rt, &actor("decision_owner"), rpr::ALLOW_ALL)
        .unwrap()
        .into_approved()
        .unwrap();
    let bound = approved.bind(&mut Scripted::ok()).unwrap();
    let done = bound
        .dispatch(rt, &actor("execution_actor"), &mut Scripted::ok())
        .into_completed()
        .unwrap();
    done.id().to_owned()
}

#[test]
fn the_lookup_in_one_query_gives_the_open_pathways_and_the_count() {
    let dir = TempDir::new("identical-lookup");
    let rt = runtime(&dir.db());
    let digest = Request::new("get", json!({"key": "same"}))
        .digest()
        .unwrap();
    let lookup = |rt: &Runtime| {
        let reader = rt.reader();
        let one = reader.open_and_count_with_request(&digest).unwrap();
        let apart = (
            reader.open_with_request(&digest).unwrap(),
            reader.count_with_request(&digest).unwrap(),
        );
        let ids = |v: &[rpr::store::PathwayRecord]| -> Vec<String> {
            v.iter().map(|p| p.id.clone()).collect()
        };
        assert_eq!(ids(&one.0), ids(&apart.0), "the same open pathways");
        assert_eq!(one.1, apart.1, "the same count");
        (ids(&one.0), one.1)
    };
    assert_eq!(lookup(&rt), (vec![], 0), "none yet");
    pathway(&rt, "done-1", None);
    assert_eq!(lookup(&rt), (vec![], 1), "closed pathways count, none open");
    let held = pathway(&rt, "held", Some(Decision::Hold));
    pathway(&rt, "done-2", None);
    let gated = pathway(&rt, "gated", Some(Decision::HumanGate));
    pathway(&rt, "denied", Some(Decision::Deny("no".into())));
    let mut open = vec![held, gated];
    open.sort();
    assert_eq!(lookup(&rt), (open, 5));
}

/// A definition as `rpr gate` proposes it: the server and the gate in its metadata.
fn gate_call(key: &str, server: &str, class: ActionClass) -> Definition {
    let mut definition = definition(key, class);
    definition.request = Request::new("put", json!({"key": "k", "value": "v"}));
    definition.with_metadata(json!({"server": server, "gate": {"command": ["server"]}}))
}

fn identical_open(e: &rpr::PathwayError) -> Option<&str> {
    match e {
        rpr::PathwayError::Store(rpr::store::StoreError::IdenticalOpen { open, .. }) => {
            Some(open.as_str())
        }
        _ => None,
    }
}

/// One open call per identity (`rpr::store`'s rule, issue 30's `gate` finding carried
/// across processes): a call `rpr gate` proposed that may change something is not stored
/// while an identical one (same server, same request) is open, whatever the two keys, on
/// either store, from any runtime on the database. Its lookup before the proposal proves
/// nothing by the time it stores: another gate may store one in between.
#[test]
fn a_gate_call_is_not_stored_while_an_identical_one_is_open_whatever_its_key() {
    let dir = TempDir::new("identical-one-open");
    let db = dir.db();
    let first = runtime(&db);
    // Another process's runtime: ids of its own.
    let other = Runtime::builder(&db).open().unwrap();
    let gated = first
        .propose(
            &actor("proposer"),
            gate_call("a", "fz", ActionClass::Mutating),
        )
        .unwrap()
        .into_new()
        .unwrap()
        .admit(&first, &actor("decision_owner"), &|_: &Definition| {
            Decision::HumanGate
        })
        .unwrap();
    let open = match &gated {
        rpr::Admission::HumanGate(p) => p.id().to_owned(),
        _ => panic!("at the Human Gate"),
    };

    // Stored at its proposal: refused, nothing written.
    let refused = other
        .propose(
            &actor("proposer"),
            gate_call("b", "fz", ActionClass::Mutating),
        )
        .map(|_| ())
        .unwrap_err();
    assert_eq!(identical_open(&refused), Some(open.as_str()), "{refused}");

    // Stored at its dispatch (approved and bound in memory first, as the gate sends an
    // allowed call): refused at that commit, and never sent.
    let ready = other
        .propose_and_bind(
            &actor("proposer"),
            &actor("decision_owner"),
            gate_call("c", "fz", ActionClass::Mutating),
            rpr::ALLOW_ALL,
            &mut Scripted::ok(),
        )
        .unwrap();
    let rpr::Ready::Bound(bound) = ready else {
        panic!("approved and bound, not stored yet")
    };
    let mut executor = Scripted::ok();
    match bound.dispatch(&other, &actor("execution_actor"), &mut executor) {
        rpr::Outcome::NotSent(n) => {
            assert_eq!(
                identical_open(n.error()),
                Some(open.as_str()),
                "{}",
                n.error()
            );
        }
        _ => panic!("not sent"),
    }
    assert_eq!(executor.executed, 0, "nothing reached the executor");

    // Not the same identity: another server, a read, a call no gate proposed.
    for (key, server, class) in [
        ("d", "other-server", ActionClass::Mutating),
        ("e", "fz", ActionClass::ReadOnly),
    ] {
        let _stored = other
            .propose(&actor("proposer"), gate_call(key, server, class))
            .unwrap();
    }
    let mut plain = definition("f", ActionClass::Mutating);
    plain.request = Request::new("put", json!({"key": "k", "value": "v"}));
    let _stored = other.propose(&actor("proposer"), plain).unwrap();
    let digest = Request::new("put", json!({"key": "k", "value": "v"}))
        .digest()
        .unwrap();
    assert_eq!(
        other.reader().count_with_request(&digest).unwrap(),
        4,
        "the gated call and the three other identities; nothing of the refused two"
    );

    // Once the open one is closed, an identical call is a new one.
    let rpr::Admission::HumanGate(gated) = gated else {
        panic!("at the Human Gate")
    };
    gated
        .deny(&first, &actor("approval_authority"), "no")
        .unwrap();
    let _stored = other
        .propose(
            &actor("proposer"),
            gate_call("g", "fz", ActionClass::Mutating),
        )
        .unwrap();
}

/// `Runtime::propose_one_open` (what `rpr call` proposes with): the same rule for a host
/// that names the server in its metadata. An open call to the server holds an identical one
/// under another key, from another runtime, whether either was proposed by a gate or not;
/// `Runtime::propose` is not held.
#[test]
fn propose_one_open_is_refused_while_an_identical_call_to_the_server_is_open() {
    let dir = TempDir::new("identical-propose-one-open");
    let db = dir.db();
    let first = runtime(&db);
    let other = Runtime::builder(&db).open().unwrap();
    let call = |key: &str| {
        let mut d = definition(key, ActionClass::Mutating);
        d.request = Request::new("put", json!({"key": "k", "value": "v"}));
        d.with_metadata(json!({"server": "fz"}))
    };
    let rpr::Proposal::New(open) = first
        .propose_one_open(&actor("proposer"), call("a"))
        .unwrap()
    else {
        panic!("a new pathway")
    };
    let refused = other
        .propose_one_open(&actor("proposer"), call("b"))
        .map(|_| ())
        .unwrap_err();
    assert_eq!(identical_open(&refused), Some(open.id()), "{refused}");
    let refused = other
        .propose(
            &actor("proposer"),
            gate_call("c", "fz", ActionClass::Mutating),
        )
        .map(|_| ())
        .unwrap_err();
    assert_eq!(
        identical_open(&refused),
        Some(open.id()),
        "a gate's call is held by it too: {refused}"
    );
    // A host that did not ask is not held.
    let _stored = other.propose(&actor("proposer"), call("d")).unwrap();
    // A read is never held.
    let mut read = call("e");
    read.class = ActionClass::ReadOnly;
    let _stored = other.propose_one_open(&actor("proposer"), read).unwrap();
}
