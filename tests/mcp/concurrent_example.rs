//! `examples/concurrent.rs` (issue 9, item 4) against the real `server-filesystem`: 16
//! governed calls at once through one runtime and one server session, every one completed by
//! readback, each sent exactly once, group commit at work, and a ledger that verifies.
//!
//! The example's source is compiled into this test (`#[path]`) and its calls run in-process
//! against a temporary directory, with the server command of the installed peers, so no
//! example is built here. The figures the example prints, the test checks in the summary they
//! are printed from.

#[allow(
    dead_code,
    reason = "the example's command line (`main`, `run`, finding the peers, printing) is not run here"
)]
#[path = "../../examples/concurrent.rs"]
mod concurrent;
use crate::host_support;
use crate::interop_support;

use host_support::{Scratch, attempts, events, kinds, pathways, verified};

#[test]
fn sixteen_concurrent_governed_calls_through_one_runtime_complete_once_each() {
    let peers = interop_support::peers();
    let dir = Scratch::new("concurrent");
    let summary =
        concurrent::governed_calls(16, &dir.join("run"), |root| Ok(peers.filesystem(root)))
            .unwrap();
    assert!(summary.all_done());
    assert_eq!(
        (summary.completed, summary.on_disk),
        (16, 16),
        "completed, files with their content"
    );
    assert!(summary.report.is_ok(), "chain and states verified");

    let db = dir.join("run/rpr.db");
    assert_eq!(summary.db, db);
    let all = pathways(&db);
    assert_eq!(all.len(), 16, "{all:?}");
    for (id, key, state) in &all {
        assert_eq!(state, "completed", "{key}");
        assert_eq!(attempts(&db, id), 1, "{key}: sent once");
        assert_eq!(
            kinds(&events(&db, id)),
            [
                "proposed",
                "admitted",
                "attempt_started",
                "attempt_returned",
                "readback"
            ],
            "{key}"
        );
    }
    assert!(verified(&db));
    // 16 calls of 3 steps each: 48 steps; fewer commits than steps only if some steps
    // shared a commit. The figure is printed, not asserted: batching depends on timing.
    assert_eq!(summary.stats.steps, 48, "steps made durable");
}
