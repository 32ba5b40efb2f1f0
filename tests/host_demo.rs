//! The example host's demo (`cargo run --example host -- demo`), run as a process, and
//! its trail checked in the database it leaves: a call completed by readback, a call
//! whose reply was lost (unknown, never re-sent) and reconciled by readback, and a
//! ledger that verifies.

mod host_support;

use host_support::{
    Scratch, attempts, event, events, kinds, pathways, run_example, text, verified,
};

#[test]
fn the_demo_tells_the_whole_story_and_leaves_a_verified_trail() {
    let dir = Scratch::new("demo");
    let db = dir.join("rpr.db");
    let output = run_example(["demo".as_ref(), "--database".as_ref(), db.as_os_str()]);
    let out = text(&output);
    assert!(output.status.success(), "{out}");
    for line in [
        "is COMPLETED — readback verified the effect",
        "is WRITE_STATUS_UNKNOWN",
        "nothing was re-sent",
        "verdict applied",
        "chain and states verified: true",
        "effects on the server: 2 — each call happened exactly once",
        "rpr-mcp -- --database",
    ] {
        assert!(out.contains(line), "the demo output lacks {line:?}:\n{out}");
    }

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
    let dir = Scratch::new("demo-exists");
    let db = dir.join("rpr.db");
    std::fs::write(&db, b"").unwrap();
    let output = run_example(["demo".as_ref(), "--database".as_ref(), db.as_os_str()]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(text(&output).contains("already exists"));
}
