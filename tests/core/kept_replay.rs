//! The replay a step leaves for its pathway's next step (issue 27, item 2;
//! `src/store/replays.rs`): used only while the stored version and the pathway's last event
//! are the ones it was left under, and the rows are checked against it either way. On
//! either store (`RPR_TEST_BACKEND`).

use crate::common;

use common::*;
use rpr::store::StoreError;
use rpr::{
    ActionClass, Admission, Decision, Outcome, Pathway, PathwayError, Proposal, Runtime,
    StoredPathway, stage,
};

fn propose(rt: &Runtime, key: &str) -> Pathway<stage::Proposed> {
    match rt
        .propose(&actor("proposer"), definition(key, ActionClass::Mutating))
        .unwrap()
    {
        Proposal::New(p) => p,
        other => panic!("{other:?}"),
    }
}

fn admit(rt: &Runtime, p: Pathway<stage::Proposed>) -> Pathway<stage::Approved> {
    match p
        .admit(rt, &actor("decision_owner"), &|_| Decision::Allow)
        .unwrap()
    {
        Admission::Approved(p) => p,
        other => panic!("{other:?}"),
    }
}

fn reused(rt: &Runtime) -> u64 {
    rt.write_stats().reused_replays
}

fn unexplained(e: &PathwayError) -> bool {
    matches!(e, PathwayError::Store(StoreError::Unexplained { .. }))
}

#[test]
fn every_step_after_the_first_uses_the_replay_its_previous_step_left() {
    let dir = TempDir::new("kept-whole-call");
    let rt = runtime(&dir.db());
    let (steps, kept) = (rt.write_stats().steps, reused(&rt));
    let p = admit(&rt, propose(&rt, "whole"));
    let mut ex = Scripted::ok();
    let Outcome::Returned(p) =
        p.bind(&mut ex)
            .unwrap()
            .dispatch(&rt, &actor("execution_actor"), &mut ex)
    else {
        panic!()
    };
    p.confirm(&rt, &actor("evidence_owner"), &mut Sees("applied"))
        .unwrap()
        .into_completed()
        .unwrap();
    let steps = rt.write_stats().steps - steps;
    assert_eq!(steps, 5, "propose, admit, attempt record, reply, readback");
    assert_eq!(
        reused(&rt) - kept,
        steps - 1,
        "every step after the proposal used the kept replay"
    );
    assert!(rt.verify(None).unwrap().is_ok());
}

#[test]
fn a_step_after_its_pathways_last_event_was_deleted_replays_in_full_and_is_refused() {
    let dir = TempDir::new("kept-truncated");
    let rt = runtime(&dir.db());
    let p = propose(&rt, "truncated");
    let id = p.id().to_owned();
    // The version stays; only the pathway's last event (its admission's first) goes.
    let sql = Sql::open(&dir.db());
    let deleted = sql.execute(
        "DELETE FROM ledger WHERE seq = (SELECT max(seq) FROM ledger WHERE pathway_id = $1)",
        &[Arg::Text(&id)],
    );
    assert_eq!(deleted, 1);
    let kept = reused(&rt);
    let e = p
        .admit(&rt, &actor("decision_owner"), &|_| Decision::Allow)
        .unwrap_err();
    assert!(unexplained(e.error()), "{:?}", e.error());
    assert_eq!(reused(&rt), kept, "the kept replay was not used");
}

#[test]
fn a_step_after_another_runtimes_step_replays_in_full() {
    let dir = TempDir::new("kept-two-runtimes");
    let first = runtime(&dir.db());
    let p = admit(&first, propose(&first, "two"));
    let id = p.id().to_owned();
    drop(p);
    // Another runtime (another host, say) takes the pathway through its dispatch.
    let other = Runtime::open(dir.db()).unwrap();
    let StoredPathway::Approved(p) = other.load(&id).unwrap() else {
        panic!()
    };
    let mut ex = Scripted::ok();
    let Outcome::Returned(_) =
        p.bind(&mut ex)
            .unwrap()
            .dispatch(&other, &actor("execution_actor"), &mut ex)
    else {
        panic!()
    };
    // The first runtime still keeps the replay its admission left (the pathway approved):
    // used now, it would not explain the returned pathway's rows.
    let StoredPathway::Returned(p) = first.load(&id).unwrap() else {
        panic!()
    };
    let kept = reused(&first);
    p.confirm(&first, &actor("evidence_owner"), &mut Sees("applied"))
        .unwrap()
        .into_completed()
        .unwrap();
    assert_eq!(reused(&first), kept, "the stale replay was not used");
    assert!(first.verify(None).unwrap().is_ok());
}

#[test]
fn a_row_edited_after_a_step_is_refused_by_the_next_step_that_uses_the_kept_replay() {
    let dir = TempDir::new("kept-row-edit");
    let rt = runtime(&dir.db());
    let p = propose(&rt, "edited");
    // The stored definition changes; its digest in the proposal event does not.
    let sql = Sql::open(&dir.db());
    let changed = sql.execute(
        "UPDATE pathways SET definition = definition || ' ' WHERE id = $1",
        &[Arg::Text(p.id())],
    );
    assert_eq!(changed, 1);
    let kept = reused(&rt);
    let e = p
        .admit(&rt, &actor("decision_owner"), &|_| Decision::Allow)
        .unwrap_err();
    assert!(unexplained(e.error()), "{:?}", e.error());
    assert_eq!(
        reused(&rt),
        kept + 1,
        "the kept replay was used, and the row checked"
    );
}
