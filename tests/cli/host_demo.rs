//! The example host's demo (`cargo run --example host -- demo`), its trail checked in the
//! database it leaves: a call completed by readback, a call whose reply was lost (unknown,
//! never re-sent) and reconciled by readback, and a ledger that verifies.
//!
//! The demo's module is compiled into this test (`#[path]`) and run in-process against a
//! temporary database, with `rpr-fault-server` as its server (the example starts itself in
//! `serve-demo` mode, which runs the same server), so no example is built here. The demo
//! fails unless the server performed exactly one effect per call. Its printed story is
//! checked by CI's main job, which runs the example itself.

#[path = "../../examples/host/demo.rs"]
mod demo;
use crate::host_support;

use host_support::{attempts, event, events, kinds, pathways, verified};
use rpr::mcp::ServerCommand;

fn server() -> ServerCommand {
    ServerCommand::new(env!("CARGO_BIN_EXE_rpr-fault-server"))
}

#[test]
fn the_demo_tells_the_whole_story_and_leaves_a_verified_trail() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rpr.db");
    demo::run(Some(&db), &server()).unwrap();

    let all = pathways(&db);
    assert_eq!(all.len(), 2, "{all:?}");
    let state = |key: &str| all.iter().find(|(_, k, _)| k == key).unwrap().clone();

    // 1. Completed: Human Gate approved by alice, then readback verified the reply.
    let (first, _, s) = state("invoice-42-paid");
    assert_eq!(s, "completed");
    let ev = events(&db, &first);
    assert_eq!(
        kinds(&ev),
        [
            "proposed",
            "admitted",
            "human_gate",
            "approval_granted",
            "approved",
            "attempt_started",
            "attempt_returned",
            "readback"
        ]
    );
    assert_eq!(event(&ev, "approval_granted")["actor"], "alice");
    assert_eq!(event(&ev, "readback")["data"]["verdict"], "applied");
    assert_eq!(attempts(&db, &first), 1);

    // 2. Unknown (the server died after the effect), never re-sent: one attempt only;
    //    then completed by a reconciliation whose readback found the effect.
    let (second, _, s) = state("invoice-43-paid");
    assert_eq!(s, "completed");
    let ev = events(&db, &second);
    assert_eq!(
        kinds(&ev),
        [
            "proposed",
            "admitted",
            "human_gate",
            "approval_granted",
            "approved",
            "attempt_started",
            "attempt_unknown",
            "reconciled"
        ]
    );
    assert_eq!(event(&ev, "attempt_unknown")["to"], "write_status_unknown");
    let reconciled = event(&ev, "reconciled");
    assert_eq!(reconciled["data"]["verdict"], "applied");
    assert_eq!(reconciled["data"]["source"], "readback");
    assert_eq!(attempts(&db, &second), 1, "the unknown call was re-sent");

    assert!(verified(&db));
}

#[test]
fn the_demo_refuses_an_existing_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rpr.db");
    std::fs::write(&db, b"").unwrap();
    let error = demo::run(Some(&db), &server()).unwrap_err();
    assert!(error.to_string().contains("already exists"), "{error}");
    assert_eq!(std::fs::read(&db).unwrap(), b"", "the database was touched");
}
