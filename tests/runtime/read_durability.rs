//! `ReadDurability::ProcessCrashSafe`: the steps of read-only pathways are committed without
//! a sync of their own; the steps of every other pathway are still synced before they
//! return (the write-ahead rule for calls that change the world is unchanged); and a
//! read's committed steps survive a SIGKILL of the process that made them.

use crate::common;

use common::*;
use rpr::store::{ReadDurability, WriteStats};
use rpr::{ActionClass, Outcome, Runtime, State};

/// One whole call of `class` through `rt` (propose, admit, bind, dispatch); its state.
fn whole_call(rt: &Runtime, key: &str, class: ActionClass) -> State {
    let p = allowed(rt, definition(key, class));
    let bound = p.bind(&mut Scripted::ok()).expect("binds");
    match bound.dispatch(rt, &actor("execution_actor"), &mut Scripted::ok()) {
        Outcome::Completed(done) => done.state(),
        Outcome::Returned(returned) => returned.state(),
        other => panic!("unexpected outcome {other:?}"),
    }
}

fn delta(before: WriteStats, after: WriteStats) -> (u64, u64, u64) {
    (
        after.steps - before.steps,
        after.commits - before.commits,
        after.unsynced_commits - before.unsynced_commits,
    )
}

#[test]
fn read_only_steps_skip_their_sync_and_mutating_steps_never_do() {
    let dir = TempDir::new("read-durability");
    let rt = Runtime::builder(dir.db())
        .read_durability(ReadDurability::ProcessCrashSafe)
        .open()
        .unwrap();

    let before = rt.write_stats();
    assert_eq!(
        whole_call(&rt, "read", ActionClass::ReadOnly),
        State::Completed
    );
    let (steps, synced, unsynced) = delta(before, rt.write_stats());
    // Propose, admit, the attempt record, the outcome: every commit without its own sync.
    assert!(steps >= 3, "{steps} steps");
    assert_eq!(synced, 0, "a read-only pathway's step was synced");
    assert_eq!(unsynced, steps, "one commit per step, none synced");

    let before = rt.write_stats();
    assert_eq!(
        whole_call(&rt, "write", ActionClass::Mutating),
        State::Running,
        "a mutating call that replied waits for its readback"
    );
    let (steps, synced, unsynced) = delta(before, rt.write_stats());
    assert!(steps >= 3, "{steps} steps");
    assert_eq!(synced, steps, "every step of a mutating pathway is synced");
    assert_eq!(unsynced, 0, "a mutating pathway's step skipped its sync");

    assert!(rt.verify(None).unwrap().is_ok());
}

#[test]
fn by_default_read_only_steps_are_synced_too() {
    let dir = TempDir::new("read-durability-default");
    let rt = Runtime::open(dir.db()).unwrap();
    let before = rt.write_stats();
    assert_eq!(
        whole_call(&rt, "read", ActionClass::ReadOnly),
        State::Completed
    );
    let (steps, synced, unsynced) = delta(before, rt.write_stats());
    assert_eq!(synced, steps);
    assert_eq!(unsynced, 0);
}

const READS: usize = 5;

/// The child: `READS` read-only calls under `ProcessCrashSafe`, then it waits to be killed.
#[test]
fn child_entry() {
    let Ok(db) = std::env::var("RPR_READS_DB") else {
        return;
    };
    let rt = Runtime::builder(&db)
        .read_durability(ReadDurability::ProcessCrashSafe)
        .open()
        .unwrap();
    for i in 0..READS {
        assert_eq!(
            whole_call(&rt, &format!("read-{i}"), ActionClass::ReadOnly),
            State::Completed
        );
    }
    let stats = rt.write_stats();
    assert_eq!(stats.commits, 0, "the child's reads were synced: {stats:?}");
    block_until_killed("reads done");
}

#[test]
fn a_killed_process_keeps_its_unsynced_read_records() {
    let dir = TempDir::new("read-durability-kill");
    let db = dir.db();
    let mut child = ChildProc::spawn(
        "read_durability::child_entry",
        &[("RPR_READS_DB", db.display().to_string())],
    );
    child.expect(READY);
    child.kill();

    let rt = Runtime::open(&db).unwrap();
    let pathways = rt.reader().list_pathways(None, 100, None).unwrap();
    let mut completed: Vec<&str> = pathways
        .iter()
        .filter(|p| p.state == State::Completed)
        .map(|p| p.idempotency_key.as_str())
        .collect();
    completed.sort_unstable();
    let expected: Vec<String> = (0..READS).map(|i| format!("read-{i}")).collect();
    assert_eq!(
        completed, expected,
        "every read the child finished is recorded"
    );
    assert!(rt.verify(None).unwrap().is_ok());
}
