//! A governed read through `rpr gate` makes one durable commit (its attempt and its outcome
//! together, after the server answered), and its record is durable when the client has its
//! answer. Counted by the gate itself: its last words on stderr give the steps and the
//! commits it made (synced, and without a sync of their own).

use std::io::{Read, Write};

use rpr::State;
use serde_json::{Value, json};

use super::{
    fault_gate, fault_policy, initialized_with_stderr, interop_support::TempDir, next_reply, store,
};

/// The gate's count from its last line: (steps, synced commits, commits without a sync).
fn counted(stderr: &str) -> (u64, u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.contains("synced commits"))
        .unwrap_or_else(|| panic!("no count in: {stderr}"));
    let numbers: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [steps, synced, unsynced] = numbers.as_slice() else {
        panic!("{line}")
    };
    (*steps, *synced, *unsynced)
}

/// `reads` reads of `get` through a gate run with `--read-records RECORDS`; after each
/// answer, the pathway it names is already stored completed with its one attempt. Returns
/// the gate's count.
fn reads_through_the_gate(tag: &str, records: &str, reads: u64) -> (u64, u64, u64) {
    let dir = TempDir::new(tag);
    let policy = fault_policy(&dir);
    let argv = fault_gate(&dir, &policy, "none", &[]);
    let (mut child, mut stdin, mut stdout, mut stderr) =
        initialized_with_stderr(&argv, &["--read-records", records]);
    for i in 1..=reads {
        let call = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "get", "arguments": {"key": format!("k{i}")}}});
        writeln!(stdin, "{call}").unwrap();
        let reply = next_reply(&mut stdout, &json!(i));
        let result: &Value = &reply["result"];
        assert_ne!(result["isError"], true, "{reply}");
        let id = result["_meta"]["dev.rpr/pathway"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("{reply}"));
        // The client has its answer: the read's record is already there, whole.
        let store = store(&dir);
        let stored = store
            .pathway(id)
            .unwrap()
            .expect("recorded before the answer");
        assert_eq!(stored.state, State::Completed, "{reply}");
        let attempts = store.attempts(id).unwrap();
        let [attempt] = attempts.as_slice() else {
            panic!("one attempt: {attempts:?}")
        };
        assert_eq!(attempt.status, rpr::AttemptStatus::Succeeded);
        assert!(attempt.outcome.is_some(), "{attempt:?}");
    }
    drop(stdin);
    let mut said = String::new();
    stderr.read_to_string(&mut said).unwrap();
    assert!(child.wait().unwrap().success(), "{said}");
    counted(&said)
}

#[test]
fn a_governed_read_makes_one_synced_commit_and_is_recorded_when_answered() {
    let reads: u64 = 4;
    let (steps, synced, unsynced) =
        reads_through_the_gate("gate-one-commit-synced", "synced", reads);
    // The first call pins `get` (one synced commit of its own); then one commit per read.
    assert_eq!(
        (steps, synced, unsynced),
        (1 + reads, 1 + reads, 0),
        "one commit per read (two before: the attempt record, then the outcome)"
    );
}

#[test]
fn under_process_crash_safe_a_governed_read_is_one_commit_without_a_sync() {
    let reads: u64 = 4;
    let (steps, synced, unsynced) =
        reads_through_the_gate("gate-one-commit-unsynced", "process-crash-safe", reads);
    assert_eq!(
        (steps, synced, unsynced),
        (1 + reads, 1, reads),
        "the pin synced; each read one commit without a sync of its own"
    );
}
