//! One `Runtime` shared by many threads (issue 9): the type guarantees, exactly-once
//! dispatch of distinct pathways from N threads, a race of N threads on one admitted
//! pathway, an attempt in flight on one thread seen as in flight here by the others, and
//! threads of one process beside a second process on the same database.

use crate::common;

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::*;
use rpr::executor::file::{FileReadback, WRITE_FILE};
use rpr::executor::{Delivery, Executor, Request};
use rpr::store::StoreError;
use rpr::token::{Approval, NotApplied, Reconciliation};
use rpr::{
    Admission, Decision, Definition, Outcome, Pathway, PathwayError, Runtime, State, StoredPathway,
    stage,
};

fn allow(_: &Definition) -> Decision {
    Decision::Allow
}

/// The compile-time guarantee: a runtime is shared, a handle moves.
#[test]
fn runtime_is_send_and_sync_and_every_stage_and_token_is_send() {
    fn shared<T: Send + Sync>() {}
    fn movable<T: Send>() {}
    shared::<Runtime>();
    shared::<Arc<Runtime>>();
    movable::<Pathway<stage::Proposed>>();
    movable::<Pathway<stage::Approved>>();
    movable::<Pathway<stage::Bound>>();
    movable::<Pathway<stage::Returned>>();
    movable::<Pathway<stage::Unknown>>();
    movable::<Pathway<stage::Completed>>();
    movable::<Pathway<stage::RepairRequired>>();
    movable::<Pathway<stage::ReadyToResume>>();
    movable::<Pathway<stage::AwaitingApproval>>();
    movable::<Pathway<stage::HumanGate>>();
    movable::<StoredPathway>();
    movable::<Outcome>();
    movable::<Approval>();
    movable::<Reconciliation<NotApplied>>();
    movable::<PathwayError>();
}

/// Proposes, admits, binds, dispatches and confirms one file write per thread, all
/// through one runtime, the threads started together.
fn distinct_calls_from_threads(threads: usize) {
    let dir = TempDir::new(&format!("threads-{threads}"));
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let log = dir.path().join("effects.log");
    let rt = Runtime::open(dir.db()).unwrap();
    let start = Barrier::new(threads);
    let ids: Vec<String> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|i| {
                let (rt, start, root, log) = (&rt, &start, &root, &log);
                s.spawn(move || {
                    let who = actor("execution_actor");
                    let mut files = CountingFile::new(root, log);
                    let def = file_definition(
                        &format!("call-{i}"),
                        &format!("f{i}.txt"),
                        &format!("content {i}"),
                    );
                    start.wait();
                    let p = rt
                        .propose_and_admit(
                            &actor("proposer"),
                            &actor("decision_owner"),
                            def,
                            &allow,
                        )
                        .unwrap()
                        .into_new()
                        .expect("not admitted")
                        .into_approved()
                        .expect("not admitted");
                    let id = p.id().to_owned();
                    let bound = p.bind(&mut files).unwrap();
                    let mut readback = files.readback();
                    match bound.dispatch_and_confirm(rt, &who, &mut files, &mut readback) {
                        Outcome::Completed(_) => {}
                        other => panic!("thread {i}: {other:?}"),
                    }
                    id
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(effects(&log), threads, "every call executed exactly once");
    for (i, id) in ids.iter().enumerate() {
        let content = std::fs::read_to_string(root.join(format!("f{i}.txt"))).unwrap();
        assert_eq!(content, format!("content {i}"));
        assert_eq!(
            rt.reader().pathway(id).unwrap().unwrap().state,
            State::Completed
        );
        assert_eq!(
            rt.reader().attempts(id).unwrap().len(),
            1,
            "{id}: one attempt"
        );
    }
    let report = rt.verify(None).unwrap();
    assert!(report.is_ok(), "{:#?}", report.problems);
}

#[test]
fn two_threads_dispatch_distinct_pathways_through_one_runtime_exactly_once() {
    distinct_calls_from_threads(2);
}

#[test]
fn eight_threads_dispatch_distinct_pathways_through_one_runtime_exactly_once() {
    distinct_calls_from_threads(8);
}

#[test]
fn thirty_two_threads_dispatch_distinct_pathways_through_one_runtime_exactly_once() {
    distinct_calls_from_threads(32);
}

/// An executor that holds the call until told to go on (each thread owns one).
struct Gate {
    inner: CountingFile,
    entered: std::sync::mpsc::Sender<()>,
    go: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
}

impl Executor for Gate {
    fn bind(&mut self, r: &Request) -> Result<rpr::executor::Binding, rpr::executor::Refusal> {
        self.inner.bind(r)
    }
    fn prepare(
        &mut self,
        r: &Request,
        b: &rpr::executor::Binding,
    ) -> Result<(), rpr::executor::Refusal> {
        self.inner.prepare(r, b)
    }
    fn execute(&mut self, r: &Request) -> Delivery {
        self.entered.send(()).unwrap();
        let (lock, cv) = &*self.go;
        let mut go = lock.lock().unwrap();
        while !*go {
            go = cv.wait(go).unwrap();
        }
        self.inner.execute(r)
    }
}

#[test]
fn threads_racing_on_one_admitted_pathway_dispatch_it_once() {
    const THREADS: usize = 8;
    for round in 0..5 {
        let (dir, id) =
            admitted_file_pathway(&format!("threads-race-{round}"), "race", "r.txt", "once");
        let root = dir.path().join("root");
        let log = dir.path().join("effects.log");
        let rt = Runtime::open(dir.db()).unwrap();
        let go = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
        let (entered_tx, entered_rx) = std::sync::mpsc::channel();
        let bound_all = Barrier::new(THREADS);
        let results: Vec<&'static str> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..THREADS)
                .map(|_| {
                    let mut gate = Gate {
                        inner: CountingFile::new(&root, &log),
                        entered: entered_tx.clone(),
                        go: Arc::clone(&go),
                    };
                    let (rt, id, bound_all) = (&rt, &id, &bound_all);
                    s.spawn(move || {
                        let StoredPathway::Approved(p) = rt.load(id).unwrap() else {
                            panic!("expected approved")
                        };
                        let bound = p.bind(&mut gate).unwrap();
                        // Every thread holds a bound handle at the same version.
                        bound_all.wait();
                        match bound.dispatch(rt, &actor("execution_actor"), &mut gate) {
                            Outcome::Returned(_) => "dispatched",
                            Outcome::NotSent(n) => {
                                assert!(
                                    matches!(
                                        n.error(),
                                        PathwayError::Store(StoreError::Conflict { .. })
                                    ),
                                    "{:?}",
                                    n.error()
                                );
                                "conflict"
                            }
                            other => panic!("unexpected {other:?}"),
                        }
                    })
                })
                .collect();
            // Exactly one thread reaches its executor; while it is held there, the
            // pathway is in flight here for every other thread.
            entered_rx.recv_timeout(Duration::from_secs(30)).unwrap();
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let finished = workers.iter().filter(|w| w.is_finished()).count();
                if finished == THREADS - 1 {
                    break;
                }
                assert!(Instant::now() < deadline, "the losers never finished");
                std::thread::sleep(Duration::from_millis(5));
            }
            assert!(
                matches!(
                    rt.load(&id).unwrap(),
                    StoredPathway::InFlightElsewhere { .. }
                ),
                "held by a thread of this runtime: in flight, not unknown"
            );
            let recovered = rt.recover().unwrap();
            assert!(
                matches!(
                    recovered.as_slice(),
                    [StoredPathway::InFlightElsewhere { .. }]
                ),
                "recover from another thread sees it in flight here"
            );
            assert_eq!(effects(&log), 0, "nothing written while held");
            *go.0.lock().unwrap() = true;
            go.1.notify_all();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        assert!(
            entered_rx.try_recv().is_err(),
            "round {round}: one executor entered"
        );
        assert_eq!(
            results.iter().filter(|r| **r == "dispatched").count(),
            1,
            "round {round}"
        );
        assert_eq!(
            results.iter().filter(|r| **r == "conflict").count(),
            THREADS - 1
        );
        assert_eq!(effects(&log), 1, "round {round}: exactly one effect");
        assert_eq!(rt.reader().attempts(&id).unwrap().len(), 1);
        let StoredPathway::Returned(returned) = rt.load(&id).unwrap() else {
            panic!("expected returned")
        };
        let files = rpr::executor::file::FileExecutor::new(&root).unwrap();
        returned
            .confirm(
                &rt,
                &actor("evidence_owner"),
                &mut FileReadback::new(&files),
            )
            .unwrap()
            .into_completed()
            .expect("not confirmed");
        assert!(rt.verify(None).unwrap().is_ok());
    }
}

/// A second process on the same database, while threads of this one dispatch: each
/// process writes its own calls, every call once, and the shared ledger verifies.
#[test]
fn threads_beside_a_second_process_on_one_database() {
    const THREADS: usize = 4;
    const CALLS: usize = 10;
    let dir = TempDir::new("threads-and-process");
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let log = dir.path().join("effects.log");
    let rt = Runtime::open(dir.db()).unwrap();
    let mut other = ChildProc::spawn(
        "threads::second_process_entry",
        &[
            ("RPR_THREADS_DB", dir.db().display().to_string()),
            ("RPR_THREADS_ROOT", root.display().to_string()),
            ("RPR_THREADS_LOG", log.display().to_string()),
            ("RPR_THREADS_CALLS", CALLS.to_string()),
        ],
    );
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (rt, root, log) = (&rt, &root, &log);
            s.spawn(move || {
                for c in 0..CALLS {
                    whole_call(rt, root, log, &format!("here-{t}-{c}"));
                }
            });
        }
    });
    other.expect("RPR-DONE");
    other.finish();
    let total = THREADS * CALLS + CALLS;
    assert_eq!(
        effects(&log),
        total,
        "every call of both processes exactly once"
    );
    for i in 0..CALLS {
        assert!(root.join(format!("there-{i}.txt")).exists());
    }
    let report = rt.verify(None).unwrap();
    assert!(report.is_ok(), "{:#?}", report.problems);
    // proposed, approved, attempt_started, attempt_returned, attempt_completed
    assert_eq!(
        report.events,
        i64::try_from(total * 5).unwrap(),
        "5 events per whole call"
    );
}

fn whole_call(rt: &Runtime, root: &std::path::Path, log: &std::path::Path, key: &str) {
    let mut files = CountingFile::new(root, log);
    let def = file_definition(key, &format!("{key}.txt"), key);
    let p = rt
        .propose_and_admit(&actor("proposer"), &actor("decision_owner"), def, &allow)
        .unwrap()
        .into_new()
        .expect("not admitted")
        .into_approved()
        .expect("not admitted");
    let bound = p.bind(&mut files).unwrap();
    let mut readback = files.readback();
    match bound.dispatch_and_confirm(rt, &actor("execution_actor"), &mut files, &mut readback) {
        Outcome::Completed(_) => {}
        other => panic!("{key}: {other:?}"),
    }
}

/// The second process of `threads_beside_a_second_process_on_one_database`.
#[test]
fn second_process_entry() {
    let Ok(db) = std::env::var("RPR_THREADS_DB") else {
        return;
    };
    let var = |k: &str| std::env::var(k).unwrap();
    let rt = Runtime::open(db).unwrap();
    let calls: usize = var("RPR_THREADS_CALLS").parse().unwrap();
    let (root, log) = (var("RPR_THREADS_ROOT"), var("RPR_THREADS_LOG"));
    for i in 0..calls {
        whole_call(&rt, root.as_ref(), log.as_ref(), &format!("there-{i}"));
    }
    say("RPR-DONE", "");
}

#[test]
fn a_runtime_moves_to_another_thread_and_a_handle_follows_it() {
    let dir = TempDir::new("threads-move");
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let rt = Arc::new(Runtime::open(dir.db()).unwrap());
    let def = file_definition("moved", "m.txt", "moved");
    let p = rt
        .propose_and_admit(&actor("proposer"), &actor("decision_owner"), def, &allow)
        .unwrap()
        .into_new()
        .expect("not admitted")
        .into_approved()
        .expect("not admitted");
    let there = Arc::clone(&rt);
    let state = std::thread::spawn(move || {
        let mut files = rpr::executor::file::FileExecutor::new(&root).unwrap();
        let bound = p.bind(&mut files).unwrap();
        let mut readback = FileReadback::new(&files);
        let mut files = rpr::executor::file::FileExecutor::new(&root).unwrap();
        match bound.dispatch_and_confirm(
            &there,
            &actor("execution_actor"),
            &mut files,
            &mut readback,
        ) {
            Outcome::Completed(done) => done.state(),
            other => panic!("{other:?}"),
        }
    })
    .join()
    .unwrap();
    assert_eq!(state, State::Completed);
    let _ = WRITE_FILE;
    assert!(rt.verify(None).unwrap().is_ok());
}

/// An executor that panics inside the call.
struct Panics;

impl Executor for Panics {
    fn bind(&mut self, r: &Request) -> Result<rpr::executor::Binding, rpr::executor::Refusal> {
        let _ = r;
        Ok(
            rpr::executor::Binding::new("panics", serde_json::json!({"executor": "panics"}))
                .unwrap()
                .read_only(),
        )
    }
    fn prepare(
        &mut self,
        _: &Request,
        _: &rpr::executor::Binding,
    ) -> Result<(), rpr::executor::Refusal> {
        Ok(())
    }
    fn execute(&mut self, _: &Request) -> Delivery {
        panic!("executor panicked (test)")
    }
}

/// A thread whose executor panics leaves its attempt in flight: the process lives on, and a
/// write the executor handed elsewhere may too, so the threads that share the runtime see
/// it in flight, never as unknown (which a readback could settle as not applied).
#[test]
fn an_executor_panic_on_one_thread_keeps_its_attempt_in_flight_for_the_others() {
    let dir = TempDir::new("threads-panic");
    let rt = Runtime::open(dir.db()).unwrap();
    let def = definition("panics", rpr::ActionClass::Mutating);
    let p = rt
        .propose_and_admit(&actor("proposer"), &actor("decision_owner"), def, &allow)
        .unwrap()
        .into_new()
        .expect("not admitted")
        .into_approved()
        .expect("not admitted");
    let id = p.id().to_owned();
    let joined = std::thread::scope(|s| {
        s.spawn(|| {
            let mut ex = Panics;
            let bound = p.bind(&mut ex).unwrap();
            let _ = bound.dispatch(&rt, &actor("execution_actor"), &mut ex);
        })
        .join()
    });
    assert!(joined.is_err(), "the executor panicked");
    match rt.load(&id).unwrap() {
        StoredPathway::InFlightElsewhere { .. } => {}
        other => panic!("expected in flight, got {other:?}"),
    }
    assert!(rt.verify(None).unwrap().is_ok());
}

// ---------------------------------------------------------------------------
// Group commit.

/// Waits (up to 30 s) until `rt` has been handed `n` steps in all.
fn wait_submitted(rt: &Runtime, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while rt.write_stats().submitted < n {
        assert!(
            Instant::now() < deadline,
            "only {:?} submitted",
            rt.write_stats()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// `n` new proposed pathways, keys `prefix-0`….
fn proposed_pathways(rt: &Runtime, prefix: &str, n: usize) -> Vec<Pathway<stage::Proposed>> {
    (0..n)
        .map(|i| {
            let def = definition(&format!("{prefix}-{i}"), rpr::ActionClass::Mutating);
            match rt.propose(&actor("proposer"), def).unwrap() {
                rpr::Proposal::New(p) => p,
                other => panic!("{other:?}"),
            }
        })
        .collect()
}

/// Steps queued while the connection is busy are committed together: one durable commit.
#[test]
fn steps_queued_while_the_connection_is_busy_share_one_commit() {
    const THREADS: usize = 16;
    let dir = TempDir::new("threads-batch");
    let rt = Runtime::open(dir.db()).unwrap();
    let proposed = proposed_pathways(&rt, "batched", THREADS);
    let before = rt.write_stats();
    let ids: Vec<String> = std::thread::scope(|s| {
        // This thread holds the connection (a reader), so every step queues behind it.
        let busy = rt.reader();
        let workers: Vec<_> = proposed
            .into_iter()
            .map(|p| {
                let rt = &rt;
                s.spawn(
                    move || match p.admit(rt, &actor("decision_owner"), &allow) {
                        Ok(Admission::Approved(p)) => p.id().to_owned(),
                        Ok(other) => panic!("{other:?}"),
                        Err(r) => panic!("{:?}", r.error()),
                    },
                )
            })
            .collect();
        wait_submitted(&rt, before.submitted + THREADS as u64);
        drop(busy);
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let after = rt.write_stats();
    assert_eq!(
        after.steps - before.steps,
        THREADS as u64,
        "every step durable"
    );
    assert_eq!(
        after.commits - before.commits,
        1,
        "in one commit: {after:?}"
    );
    for id in &ids {
        assert_eq!(
            rt.reader().pathway(id).unwrap().unwrap().state,
            State::Approved
        );
    }
    let report = rt.verify(None).unwrap();
    assert!(report.is_ok(), "{:#?}", report.problems);
}

/// A thread that holds the connection (a `Reader`) and takes a step while another thread
/// leads a batch (blocked on that connection) commits the queued steps itself: no deadlock,
/// and every step durable.
#[test]
fn a_step_taken_while_holding_the_reader_does_not_wait_for_a_blocked_leader() {
    const THREADS: usize = 4;
    let dir = TempDir::new("threads-reentrant");
    let rt = Runtime::open(dir.db()).unwrap();
    let mut proposed = proposed_pathways(&rt, "reentrant", THREADS + 1);
    let mine = proposed.pop().unwrap();
    let before = rt.write_stats();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let busy = rt.reader();
        for p in proposed {
            let (rt, tx) = (&rt, tx.clone());
            s.spawn(move || {
                let admitted = matches!(
                    p.admit(rt, &actor("decision_owner"), &allow),
                    Ok(Admission::Approved(_))
                );
                tx.send(admitted).unwrap();
            });
        }
        // Every worker has queued its step; one of them leads and waits for the connection.
        wait_submitted(&rt, before.submitted + THREADS as u64);
        std::thread::sleep(Duration::from_millis(50));
        // This thread, still holding the reader, steps: it must commit, not wait. A deadlock
        // here would hang the test, so a watchdog fails the process instead.
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if done_rx.recv_timeout(Duration::from_mins(1)).is_err() {
                eprintln!("deadlock: a step taken while holding the reader never returned");
                std::process::exit(101);
            }
        });
        let outcome = mine.admit(&rt, &actor("decision_owner"), &allow);
        done_tx.send(()).unwrap();
        assert!(matches!(outcome, Ok(Admission::Approved(_))), "{outcome:?}");
        drop(busy);
        for _ in 0..THREADS {
            assert!(
                rx.recv_timeout(Duration::from_secs(30)).unwrap(),
                "a worker's step was refused"
            );
        }
    });
    let after = rt.write_stats();
    assert_eq!(after.steps - before.steps, THREADS as u64 + 1);
    let report = rt.verify(None).unwrap();
    assert!(report.is_ok(), "{:#?}", report.problems);
}

/// In one batch, a step that loses its compare-and-set is refused alone: the other steps of
/// the batch, including the one that won the same pathway, are committed.
#[test]
fn a_refused_step_in_a_batch_leaves_its_neighbours_committed() {
    const PATHWAYS: usize = 8;
    let dir = TempDir::new("threads-batch-refusal");
    let rt = Runtime::open(dir.db()).unwrap();
    let mut handles = Vec::new();
    for i in 0..PATHWAYS {
        let def = definition(&format!("twice-{i}"), rpr::ActionClass::Mutating);
        let p = rt
            .propose(&actor("proposer"), def)
            .unwrap()
            .into_new()
            .unwrap();
        // A second handle to the same pathway, at the same version.
        let StoredPathway::Proposed(twin) = rt.load(p.id()).unwrap() else {
            panic!("expected proposed")
        };
        handles.push(p);
        handles.push(twin);
    }
    let before = rt.write_stats();
    let results: Vec<(String, bool)> = std::thread::scope(|s| {
        let busy = rt.reader();
        let workers: Vec<_> = handles
            .into_iter()
            .map(|p| {
                let rt = &rt;
                s.spawn(move || {
                    let id = p.id().to_owned();
                    let admitted = match p.admit(rt, &actor("decision_owner"), &allow) {
                        Ok(Admission::Approved(_)) => true,
                        Ok(other) => panic!("{other:?}"),
                        Err(refused) => {
                            assert!(
                                matches!(
                                    refused.error(),
                                    PathwayError::Store(StoreError::Conflict { .. })
                                ),
                                "{:?}",
                                refused.error()
                            );
                            false
                        }
                    };
                    (id, admitted)
                })
            })
            .collect();
        wait_submitted(&rt, before.submitted + 2 * PATHWAYS as u64);
        drop(busy);
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let after = rt.write_stats();
    assert_eq!(after.commits - before.commits, 1, "one batch: {after:?}");
    assert_eq!(
        after.steps - before.steps,
        PATHWAYS as u64,
        "the winners are durable"
    );
    for i in 0..PATHWAYS {
        let wins: Vec<_> = results.iter().skip(2 * i).take(2).map(|r| r.1).collect();
        assert_eq!(
            wins.iter().filter(|w| **w).count(),
            1,
            "exactly one admission of each: {wins:?}"
        );
        let state = rt
            .reader()
            .pathway(&results[2 * i].0)
            .unwrap()
            .unwrap()
            .state;
        assert_eq!(state, State::Approved);
    }
    let report = rt.verify(None).unwrap();
    assert!(report.is_ok(), "{:#?}", report.problems);
}

/// A process with many threads in whole calls is killed (`SIGKILL`) at a random moment: every step
/// that returned to its caller is durable, no step is half-applied (the ledger and rows
/// verify), and no call took effect twice.
#[test]
fn a_sigkill_in_the_middle_of_batches_keeps_every_returned_step_and_no_half_step() {
    for round in 0..3_usize {
        let dir = TempDir::new(&format!("threads-kill-{round}"));
        let root = dir.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        let log = dir.path().join("effects.log");
        drop(Runtime::open(dir.db()).unwrap());
        let mut child = ChildProc::spawn(
            "threads::batch_kill_entry",
            &[
                ("RPR_BATCH_DB", dir.db().display().to_string()),
                ("RPR_BATCH_ROOT", root.display().to_string()),
                ("RPR_BATCH_LOG", log.display().to_string()),
            ],
        );
        // Let it get going, then kill it mid-flight (after 10 to 40 completed calls).
        let mut lines = Vec::new();
        let wanted = 10 + round * 15;
        let deadline = Instant::now() + Duration::from_mins(1);
        while lines
            .iter()
            .filter(|l: &&String| l.ends_with(" completed"))
            .count()
            < wanted
        {
            assert!(Instant::now() < deadline, "{}", child.diagnostics());
            match child.poll("RPR-STEP") {
                Some(l) => lines.push(l),
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        }
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.pid()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
        let _ = child.child.wait();
        std::thread::sleep(Duration::from_millis(50));
        while let Some(l) = child.poll("RPR-STEP") {
            lines.push(l);
        }
        drop(child);

        let rt = Runtime::open(dir.db()).unwrap();
        let sql = rusqlite::Connection::open(dir.db()).unwrap();
        for line in &lines {
            let (key, what) = line.split_once(' ').unwrap();
            let found: Option<String> = sql
                .query_row(
                    "SELECT id FROM pathways WHERE idempotency_key = ?1",
                    [key],
                    |r| r.get(0),
                )
                .ok();
            let id = found
                .and_then(|id| rt.reader().pathway(&id).unwrap())
                .unwrap_or_else(|| {
                    panic!("round {round}: {key} returned `{what}` but is not stored")
                });
            match what {
                "admitted" => assert_ne!(id.state, State::Proposed, "{key}"),
                "completed" => {
                    assert_eq!(id.state, State::Completed, "{key}");
                    assert!(root.join(format!("{key}.txt")).exists(), "{key}");
                }
                other => panic!("{other}"),
            }
        }
        let report = rt.verify(None).unwrap();
        assert!(report.is_ok(), "round {round}: {:#?}", report.problems);
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let mut seen = std::collections::BTreeSet::new();
        for l in text.lines() {
            assert!(
                seen.insert(l.to_owned()),
                "round {round}: an effect happened twice: {l}"
            );
        }
        // What the dead process left in flight is unknown now, to be settled by readback.
        for p in rt.recover().unwrap() {
            assert!(
                !matches!(p, StoredPathway::InFlightElsewhere { .. }),
                "round {round}: a dead process's attempt is not in flight"
            );
        }
    }
}

/// The child of `a_sigkill_in_the_middle_of_batches_keeps_every_returned_step_and_no_half_step`:
/// 8 threads in whole calls until killed, printing each step that returned.
#[test]
fn batch_kill_entry() {
    let Ok(db) = std::env::var("RPR_BATCH_DB") else {
        return;
    };
    let var = |k: &str| std::env::var(k).unwrap();
    let (root, log) = (var("RPR_BATCH_ROOT"), var("RPR_BATCH_LOG"));
    let rt = Runtime::open(db).unwrap();
    std::thread::scope(|s| {
        for t in 0..8 {
            let (rt, root, log) = (&rt, &root, &log);
            s.spawn(move || {
                for c in 0.. {
                    let key = format!("k{t}-{c}");
                    let mut files = CountingFile::new(root.as_ref(), log.as_ref());
                    let def = file_definition(&key, &format!("{key}.txt"), &key);
                    let p = rt
                        .propose_and_admit(
                            &actor("proposer"),
                            &actor("decision_owner"),
                            def,
                            &allow,
                        )
                        .unwrap()
                        .into_new()
                        .expect("not admitted")
                        .into_approved()
                        .expect("not admitted");
                    say("RPR-STEP", &format!("{key} admitted"));
                    let bound = p.bind(&mut files).unwrap();
                    let mut readback = files.readback();
                    match bound.dispatch_and_confirm(
                        rt,
                        &actor("execution_actor"),
                        &mut files,
                        &mut readback,
                    ) {
                        Outcome::Completed(_) => say("RPR-STEP", &format!("{key} completed")),
                        other => panic!("{key}: {other:?}"),
                    }
                }
            });
        }
    });
}

/// `load` reads a pathway's row and its attempts in one snapshot: while another thread
/// confirms (`running` to `completed`, the attempt `returned` to `applied`, one step), a
/// load sees the pathway before or after that step, never half of it ("corrupt row:
/// running pathway has attempt status applied" was what the chaos soak's hosts saw).
#[test]
fn load_never_sees_half_of_a_step_another_thread_commits() {
    let dir = TempDir::new("threads-torn-read");
    let rt = Runtime::open(dir.db()).unwrap();
    for round in 0..150 {
        let def = definition(&format!("torn-{round}"), rpr::ActionClass::Mutating);
        let p = rt
            .propose_and_admit(&actor("proposer"), &actor("decision_owner"), def, &allow)
            .unwrap()
            .into_new()
            .expect("not admitted")
            .into_approved()
            .expect("not admitted");
        let id = p.id().to_owned();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut ex = Scripted::ok();
                let bound = p.bind(&mut ex).unwrap();
                let Outcome::Returned(r) = bound.dispatch(&rt, &actor("execution_actor"), &mut ex)
                else {
                    panic!("not returned")
                };
                r.confirm(&rt, &actor("evidence_owner"), &mut Sees("applied"))
                    .unwrap()
                    .into_completed()
                    .expect("not completed");
                done.store(true, std::sync::atomic::Ordering::SeqCst);
            });
            s.spawn(|| {
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    if let Err(e) = rt.load(&id) {
                        panic!("round {round}: load saw a half-committed step: {e}");
                    }
                }
            });
        });
    }
}
