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
