//! Crash tests: a real child process runs a governed `write_file` pathway and is
//! killed with SIGKILL at each step boundary; a fresh runtime then recovers the
//! database and drives the pathway to its end without ever re-sending an unknown.
//!
//! The test binary re-executes itself as the child (`child_entry`, which does
//! nothing unless `RPR_CRASH_POINT` is set). Each real file write appends one line
//! to `effects.log`, so the number of effects is counted across child and parent.

use crate::common;

use common::*;
use rpr::executor::Readback;
use rpr::executor::file::FileReadback;
use rpr::token::Reconciled;
use rpr::{AttemptStatus, Confirmed, Outcome, Runtime, State, StepPoint, StoredPathway};
use serde_json::json;

const ITERATIONS: usize = 20;
const FILE: &str = "out.txt";
const CONTENT: &str = "the effect, exactly once";

/// Where the child is killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Point {
    /// Step hook: the write-ahead attempt record is about to be committed.
    BeforeAttemptCommit,
    /// Step hook: the attempt record is durable, the executor not yet called.
    AfterAttemptCommit,
    /// Inside the executor, before the file is written (the effect did not happen).
    InsideExecutorBeforeWrite,
    /// Inside the executor, after the file was written (the reply never came back).
    InsideExecutorAfterWrite,
    /// Step hook: the executor replied success; the outcome is not yet recorded.
    AfterReply,
    /// Step hook: the outcome (returned, awaiting readback) is durable.
    AfterOutcomeCommit,
    /// The outcome is recorded as unknown (the write really happened); killed inside the readback.
    InsideReadbackWritten,
    /// The outcome is recorded as unknown (the request was lost); killed inside the readback.
    InsideReadbackLost,
    /// `dispatch_and_confirm`: the executor replied success; neither the reply nor the
    /// readback is recorded.
    MergedAfterReply,
    /// `dispatch_and_confirm`: the readback observed the effect; the merged reply and
    /// readback commit has not happened.
    MergedAfterReadback,
    /// `dispatch_and_confirm`: the merged commit is durable (the pathway is completed).
    MergedAfterOutcomeCommit,
}

impl Point {
    const ALL: [Point; 11] = [
        Point::BeforeAttemptCommit,
        Point::AfterAttemptCommit,
        Point::InsideExecutorBeforeWrite,
        Point::InsideExecutorAfterWrite,
        Point::AfterReply,
        Point::AfterOutcomeCommit,
        Point::InsideReadbackWritten,
        Point::InsideReadbackLost,
        Point::MergedAfterReply,
        Point::MergedAfterReadback,
        Point::MergedAfterOutcomeCommit,
    ];
    fn name(self) -> String {
        format!("{self:?}")
    }
    fn parse(s: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .unwrap_or_else(|| panic!("unknown point {s}"))
    }
    fn hook(self) -> Option<StepPoint> {
        match self {
            Point::BeforeAttemptCommit => Some(StepPoint::BeforeAttemptCommit),
            Point::AfterAttemptCommit => Some(StepPoint::AfterAttemptCommit),
            Point::AfterReply | Point::MergedAfterReply => Some(StepPoint::AfterReply),
            Point::AfterOutcomeCommit | Point::MergedAfterOutcomeCommit => {
                Some(StepPoint::AfterOutcomeCommit)
            }
            Point::MergedAfterReadback => Some(StepPoint::AfterReadback),
            _ => None,
        }
    }
    /// Whether the file was really written before the kill.
    fn effect_before_kill(self) -> bool {
        matches!(
            self,
            Point::InsideExecutorAfterWrite
                | Point::AfterReply
                | Point::AfterOutcomeCommit
                | Point::InsideReadbackWritten
                | Point::MergedAfterReply
                | Point::MergedAfterReadback
                | Point::MergedAfterOutcomeCommit
        )
    }
    /// Whether the child dispatches with `dispatch_and_confirm`.
    fn merged(self) -> bool {
        matches!(
            self,
            Point::MergedAfterReply | Point::MergedAfterReadback | Point::MergedAfterOutcomeCommit
        )
    }
}

fn block_before_write() {
    block_until_killed("inside the executor, before the write");
}
fn block_after_write() {
    block_until_killed("inside the executor, after the write");
}

/// A readback that blocks (to be killed) instead of observing.
struct BlockingReadback;

impl Readback for BlockingReadback {
    fn observe(&mut self, _request: &rpr::executor::Request) -> rpr::executor::Observation {
        block_until_killed("inside the readback")
    }
}

/// The child: loads the admitted pathway, binds and dispatches it, and blocks at its point.
#[test]
fn child_entry() {
    let Ok(point) = std::env::var("RPR_CRASH_POINT") else {
        return;
    };
    let point = Point::parse(&point);
    let var = |k: &str| std::env::var(k).unwrap();
    let (db, root, log, id) = (
        var("RPR_CRASH_DB"),
        var("RPR_CRASH_ROOT"),
        var("RPR_CRASH_LOG"),
        var("RPR_CRASH_PATHWAY"),
    );
    let mut builder = Runtime::builder(&db).lease(CHILD_LEASE);
    if let Some(at) = point.hook() {
        builder = builder.step_hook(move |p| {
            if p == at {
                block_until_killed(&format!("{p:?}"));
            }
        });
    }
    let rt = builder.open().unwrap();
    let mut ex = CountingFile::new(root.as_ref(), log.as_ref());
    match point {
        Point::InsideExecutorBeforeWrite => ex.before_write = Some(block_before_write),
        Point::InsideExecutorAfterWrite => ex.after_write = Some(block_after_write),
        Point::InsideReadbackWritten => ex.report = Report::WriteThenPossiblyWritten,
        Point::InsideReadbackLost => ex.report = Report::DropThenPossiblyWritten,
        _ => {}
    }
    let StoredPathway::Approved(p) = rt.load(&id).unwrap() else {
        panic!("the child expects an approved pathway")
    };
    let bound = p.bind(&mut ex).unwrap();
    let outcome = if point.merged() {
        let mut readback = ex.readback();
        bound.dispatch_and_confirm(&rt, &actor("execution_actor"), &mut ex, &mut readback)
    } else {
        bound.dispatch(&rt, &actor("execution_actor"), &mut ex)
    };
    if let Outcome::Unknown(p) = &outcome {
        let _ = rt.reconcile(p, &mut BlockingReadback);
    }
    panic!("the child was not blocked at {point:?}; outcome {outcome:?}");
}

/// The killed child's lease. On SQLite its death is seen at once (its process is gone); on
/// PostgreSQL, where the owner may be on any machine, only the lapse of its lease by the
/// database's clock lets another runtime take its attempt over.
const CHILD_LEASE: std::time::Duration = std::time::Duration::from_millis(1500);

/// One crash iteration's directory: database, write root, effects log.
struct Setup {
    dir: TempDir,
    /// The database: the backend under test, or SQLite for a test of SQLite's liveness rule.
    db: std::path::PathBuf,
    id: String,
}

impl Setup {
    fn new(tag: &str) -> Self {
        let (dir, id) = admitted_file_pathway(tag, "crash", FILE, CONTENT);
        let db = dir.db();
        Self { dir, db, id }
    }
    /// As [`Setup::new`], on a SQLite file whatever the backend under test.
    fn new_sqlite(tag: &str) -> Self {
        let dir = TempDir::new(tag);
        std::fs::create_dir_all(dir.path().join("root")).unwrap();
        let db = dir.sqlite_db();
        let rt = Runtime::open(&db).unwrap();
        let id = allowed(&rt, file_definition("crash", FILE, CONTENT))
            .id()
            .to_owned();
        Self { dir, db, id }
    }
    fn root(&self) -> std::path::PathBuf {
        self.dir.path().join("root")
    }
    fn log(&self) -> std::path::PathBuf {
        self.dir.path().join("effects.log")
    }
    fn spawn(&self, point: Point) -> ChildProc {
        ChildProc::spawn(
            "crash::child_entry",
            &[
                ("RPR_CRASH_POINT", point.name()),
                ("RPR_CRASH_DB", self.db.display().to_string()),
                ("RPR_CRASH_ROOT", self.root().display().to_string()),
                ("RPR_CRASH_LOG", self.log().display().to_string()),
                ("RPR_CRASH_PATHWAY", self.id.clone()),
            ],
        )
    }
    fn file_written(&self) -> bool {
        std::fs::read_to_string(self.root().join(FILE)).is_ok_and(|s| s == CONTENT)
    }
}

fn kind(s: &StoredPathway) -> &'static str {
    match s {
        StoredPathway::Approved(_) => "approved",
        StoredPathway::Returned(_) => "returned",
        StoredPathway::Unknown(_) => "unknown",
        StoredPathway::ReadyToResume(_) => "ready_to_resume",
        StoredPathway::InFlightElsewhere { .. } => "in_flight_elsewhere",
        StoredPathway::Completed(_) => "completed",
        _ => "other",
    }
}

/// Drives a recovered pathway to completion the only legal way: reconcile an unknown
/// by readback, repair and resume a not-applied one, confirm a returned one. Returns
/// the steps taken.
fn drive(rt: &Runtime, mut stored: StoredPathway, ex: &mut CountingFile) -> Vec<&'static str> {
    let mut steps = Vec::new();
    let mut readback: FileReadback = ex.readback();
    let (exec, evid, repair) = (
        actor("execution_actor"),
        actor("evidence_owner"),
        actor("repair_owner"),
    );
    let from_outcome = |o: Outcome| match o {
        Outcome::Returned(p) => StoredPathway::Returned(p),
        Outcome::Unknown(p) => StoredPathway::Unknown(p),
        other => panic!("unexpected outcome {other:?}"),
    };
    for _ in 0..10 {
        stored = match stored {
            StoredPathway::Approved(p) => {
                steps.push("dispatch");
                from_outcome(p.bind(ex).unwrap().dispatch(rt, &exec, ex))
            }
            StoredPathway::ReadyToResume(p) => {
                steps.push("resume");
                from_outcome(p.bind(ex).unwrap().dispatch(rt, &exec, ex))
            }
            StoredPathway::Returned(p) => {
                steps.push("confirm");
                match p.confirm(rt, &evid, &mut readback).unwrap() {
                    Confirmed::Completed(p) => StoredPathway::Completed(p),
                    Confirmed::Unknown(p) => StoredPathway::Unknown(p),
                    other => panic!("{other:?}"),
                }
            }
            StoredPathway::Unknown(p) => match rt.reconcile(&p, &mut readback) {
                Reconciled::Applied(t) => {
                    steps.push("reconciled_applied");
                    StoredPathway::Completed(p.complete(rt, t).unwrap())
                }
                Reconciled::NotApplied(t) => {
                    steps.push("reconciled_not_applied");
                    let p = p.require_repair(rt, t).unwrap();
                    StoredPathway::ReadyToResume(
                        p.repair(rt, &repair, &json!({"checked": "file absent"}), None)
                            .unwrap(),
                    )
                }
                other => panic!("readback of a local file must decide: {other:?}"),
            },
            StoredPathway::Completed(_) => return steps,
            other => panic!("unexpected stage while driving: {other:?}"),
        };
    }
    panic!("did not complete: {steps:?}");
}

/// What each point must look like after the crash, and how it must end.
struct Expect {
    recovered: &'static str,
    steps: &'static [&'static str],
    attempts: &'static [AttemptStatus],
}

fn expect(point: Point) -> Expect {
    match point {
        Point::BeforeAttemptCommit => Expect {
            recovered: "approved",
            steps: &["dispatch", "confirm"],
            attempts: &[AttemptStatus::Applied],
        },
        Point::AfterAttemptCommit
        | Point::InsideExecutorBeforeWrite
        | Point::InsideReadbackLost => Expect {
            recovered: "unknown",
            steps: &["reconciled_not_applied", "resume", "confirm"],
            attempts: &[AttemptStatus::NotApplied, AttemptStatus::Applied],
        },
        Point::InsideExecutorAfterWrite
        | Point::AfterReply
        | Point::InsideReadbackWritten
        | Point::MergedAfterReply
        | Point::MergedAfterReadback => Expect {
            recovered: "unknown",
            steps: &["reconciled_applied"],
            attempts: &[AttemptStatus::Applied],
        },
        Point::AfterOutcomeCommit => Expect {
            recovered: "returned",
            steps: &["confirm"],
            attempts: &[AttemptStatus::Applied],
        },
        Point::MergedAfterOutcomeCommit => Expect {
            recovered: "nothing",
            steps: &[],
            attempts: &[AttemptStatus::Applied],
        },
    }
}

fn crash_at(point: Point) {
    // Every iteration's child is killed first; then (on PostgreSQL, after one wait for the
    // killed owners' leases to lapse) each is recovered and driven to its end.
    let mut killed = Vec::new();
    for i in 0..ITERATIONS {
        let s = Setup::new(&format!("crash-{}-{i}", point.name()));
        let mut child = s.spawn(point);
        child.expect(READY);
        child.kill();

        // Right after the crash: what the child left is explained by the ledger.
        let rt = Runtime::open(&s.db).unwrap();
        let report = rt.verify(None).unwrap();
        assert!(
            report.is_ok(),
            "{point:?}#{i}: after the kill: {:?}",
            report.problems
        );
        assert_eq!(
            effects(&s.log()),
            usize::from(point.effect_before_kill()),
            "{point:?}#{i}: effects before recovery"
        );
        assert_eq!(
            s.file_written(),
            point.effect_before_kill(),
            "{point:?}#{i}: the file before recovery"
        );
        let before_attempts = rt.attempt_records(&s.id).unwrap();
        assert_eq!(
            before_attempts.len(),
            usize::from(point != Point::BeforeAttemptCommit),
            "{point:?}#{i}"
        );
        let in_flight = before_attempts
            .iter()
            .any(|a| a.status == AttemptStatus::InFlight);
        if in_flight && common::pg::on() {
            // On PostgreSQL the dead owner's attempt is not taken over while its lease runs.
            let recovered = rt.recover().unwrap();
            assert!(
                matches!(recovered[..], [StoredPathway::InFlightElsewhere { .. }]),
                "{point:?}#{i}: on PostgreSQL not taken over while the lease runs: {recovered:?}"
            );
        }
        killed.push((i, s, rt));
    }
    if common::pg::on() {
        std::thread::sleep(CHILD_LEASE + std::time::Duration::from_millis(300));
    }
    for (i, s, rt) in killed {
        recover_and_drive(point, i, &s, &rt);
    }
}

/// Recovery of one killed child's pathway (on SQLite the dead owner is detected at once, on
/// PostgreSQL its lease has lapsed): nothing comes back bindable after the attempt commit;
/// then it is driven to its end without re-sending an unknown.
fn recover_and_drive(point: Point, i: usize, s: &Setup, rt: &Runtime) {
    let mut recovered = rt.recover().unwrap();
    let e = expect(point);
    if e.recovered == "nothing" {
        // The merged commit made it: completed, nothing to recover, nothing to resend.
        assert!(recovered.is_empty(), "{point:?}#{i}: {recovered:?}");
        let record = rt.pathway_record(&s.id).unwrap().unwrap();
        assert_eq!(record.state, State::Completed, "{point:?}#{i}");
        let statuses: Vec<AttemptStatus> = rt
            .attempt_records(&s.id)
            .unwrap()
            .into_iter()
            .map(|a| a.status)
            .collect();
        assert_eq!(statuses, e.attempts, "{point:?}#{i}");
        assert_eq!(effects(&s.log()), 1, "{point:?}#{i}");
        return;
    }
    assert_eq!(recovered.len(), 1, "{point:?}#{i}: the pathway is not lost");
    let stored = recovered.pop().unwrap();
    assert_eq!(stored.id(), s.id);
    assert_eq!(kind(&stored), e.recovered, "{point:?}#{i}: recovered stage");
    assert!(
        rt.attempt_records(&s.id)
            .unwrap()
            .iter()
            .all(|a| a.status != AttemptStatus::InFlight && a.owner.is_none()),
        "{point:?}#{i}"
    );
    assert!(
        rt.verify(None).unwrap().is_ok(),
        "{point:?}#{i}: after recover()"
    );

    // Drive it to the end without re-sending an unknown.
    let mut ex = CountingFile::new(&s.root(), &s.log());
    let steps = drive(rt, stored, &mut ex);
    assert_eq!(steps, e.steps, "{point:?}#{i}: steps");
    assert_eq!(
        effects(&s.log()),
        1,
        "{point:?}#{i}: the effect happened exactly once across child and parent"
    );
    assert!(s.file_written());

    let record = rt.pathway_record(&s.id).unwrap().unwrap();
    assert_eq!(record.state, State::Completed);
    let attempts = rt.attempt_records(&s.id).unwrap();
    let statuses: Vec<AttemptStatus> = attempts.iter().map(|a| a.status).collect();
    assert_eq!(statuses, e.attempts, "{point:?}#{i}: attempt statuses");
    if let [first, second] = attempts.as_slice() {
        assert_eq!(
            second.previous_attempt.as_deref(),
            Some(first.id.as_str()),
            "the new attempt links to the old one"
        );
        assert_eq!(second.seq, 2);
    }
    let report = rt.verify(None).unwrap();
    assert!(report.is_ok(), "{point:?}#{i}: {:?}", report.problems);
    assert!(
        rt.recover().unwrap().is_empty(),
        "nothing unresolved is left"
    );
}

#[test]
fn crash_before_attempt_commit() {
    crash_at(Point::BeforeAttemptCommit);
}

#[test]
fn crash_after_attempt_commit() {
    crash_at(Point::AfterAttemptCommit);
}

#[test]
fn crash_inside_executor_before_write() {
    crash_at(Point::InsideExecutorBeforeWrite);
}

#[test]
fn crash_inside_executor_after_write() {
    crash_at(Point::InsideExecutorAfterWrite);
}

#[test]
fn crash_after_reply_before_outcome_commit() {
    crash_at(Point::AfterReply);
}

#[test]
fn crash_after_outcome_commit() {
    crash_at(Point::AfterOutcomeCommit);
}

#[test]
fn crash_inside_reconciliation_effect_applied() {
    crash_at(Point::InsideReadbackWritten);
}

#[test]
fn crash_inside_reconciliation_effect_lost() {
    crash_at(Point::InsideReadbackLost);
}

#[test]
fn crash_in_merged_dispatch_after_reply() {
    crash_at(Point::MergedAfterReply);
}

#[test]
fn crash_in_merged_dispatch_after_readback_before_commit() {
    crash_at(Point::MergedAfterReadback);
}

#[test]
fn crash_in_merged_dispatch_after_commit() {
    crash_at(Point::MergedAfterOutcomeCommit);
}

/// A killed owner that its parent has not reaped yet (a zombie) is dead too: recovery must
/// not wait for the lease. SQLite's liveness rule (an owner on this host is judged by its
/// process), so on SQLite whatever the backend under test: on PostgreSQL the lease alone
/// decides (`crash_at` shows it).
#[test]
fn unreaped_dead_owner_is_detected_at_once() {
    let s = Setup::new_sqlite("crash-zombie");
    let mut child = s.spawn(Point::AfterAttemptCommit);
    child.expect(READY);
    let pid = child.pid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid.cast_signed()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    // Wait until the kernel has made it a zombie, without reaping it, and its other threads
    // are gone: a zombie leader whose threads are still being torn down is judged alive (its
    // task directory lists them), rightly, and a CI run once loaded it that early.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let state = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .next()
            .unwrap()
            .to_owned();
        let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, Iterator::count);
        if state == "Z" && threads <= 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "child never became a zombie (state {state})"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let rt = Runtime::open(&s.db).unwrap();
    let stored = rt.load(&s.id).unwrap();
    assert_eq!(
        kind(&stored),
        "unknown",
        "a zombie owner holds nothing: {stored:?}"
    );
    drop(child);
}

/// The child for the merged proposal and admission: proposes and admits a `write_file`
/// pathway with `propose_and_admit`, blocking either inside the policy (before the one
/// commit) or at the next step's boundary (after it).
#[test]
fn child_admit_entry() {
    let Ok(point) = std::env::var("RPR_CRASH_ADMIT") else {
        return;
    };
    let db = std::env::var("RPR_CRASH_DB").unwrap();
    let at = point.clone();
    let rt = Runtime::builder(&db)
        .step_hook(move |p| {
            if at == "after_commit" && p == StepPoint::BeforeAttemptCommit {
                block_until_killed("after the merged admission commit");
            }
        })
        .open()
        .unwrap();
    let blocking = |_: &rpr::Definition| -> rpr::Decision {
        if point == "inside_policy" {
            block_until_killed("inside the policy, before the merged commit");
        }
        rpr::Decision::Allow
    };
    let decided = rt
        .propose_and_admit(
            &actor("proposer"),
            &actor("decision_owner"),
            file_definition("crash", FILE, CONTENT),
            &blocking,
        )
        .unwrap();
    let p = decided
        .into_new()
        .unwrap_or_else(|other| panic!("not admitted: {other:?}"))
        .into_approved()
        .unwrap_or_else(|other| panic!("not admitted: {other:?}"));
    let root = std::env::var("RPR_CRASH_ROOT").unwrap();
    let log = std::env::var("RPR_CRASH_LOG").unwrap();
    let mut ex = CountingFile::new(root.as_ref(), log.as_ref());
    let outcome = p
        .bind(&mut ex)
        .unwrap()
        .dispatch(&rt, &actor("execution_actor"), &mut ex);
    panic!("the child was not blocked at {point}; outcome {outcome:?}");
}

/// A crash inside `propose_and_admit` leaves nothing (proposing again starts afresh and
/// the effect happens once); a crash after its commit leaves the pathway admitted, and
/// recovery hands it back to be dispatched once.
#[test]
fn crash_around_the_merged_admission_commit() {
    for (point, recovered) in [("inside_policy", 0), ("after_commit", 1)] {
        for i in 0..ITERATIONS / 4 {
            let dir = TempDir::new(&format!("crash-admit-{point}-{i}"));
            std::fs::create_dir_all(dir.path().join("root")).unwrap();
            let (root, log) = (dir.path().join("root"), dir.path().join("effects.log"));
            // The schema exists before the child starts, as it would for a running host.
            drop(Runtime::open(dir.db()).unwrap());
            let mut child = ChildProc::spawn(
                "crash::child_admit_entry",
                &[
                    ("RPR_CRASH_ADMIT", point.to_owned()),
                    ("RPR_CRASH_DB", dir.db().display().to_string()),
                    ("RPR_CRASH_ROOT", root.display().to_string()),
                    ("RPR_CRASH_LOG", log.display().to_string()),
                ],
            );
            child.expect(READY);
            child.kill();

            let rt = Runtime::open(dir.db()).unwrap();
            assert!(rt.verify(None).unwrap().is_ok(), "{point}#{i}");
            assert_eq!(effects(&log), 0, "{point}#{i}: nothing was sent");
            assert_eq!(
                row_count(&dir.db(), "pathways"),
                recovered,
                "{point}#{i}: the merged commit is all or nothing"
            );
            assert_eq!(row_count(&dir.db(), "attempts"), 0, "{point}#{i}");
            let mut found = rt.recover().unwrap();
            assert_eq!(
                found.len(),
                usize::try_from(recovered).unwrap(),
                "{point}#{i}"
            );
            let p = match found.pop() {
                Some(StoredPathway::Approved(p)) => p,
                Some(other) => panic!("{point}#{i}: recovered {other:?}"),
                None => {
                    // Nothing was stored: the host proposes again with the same key.
                    rt.propose_and_admit(
                        &actor("proposer"),
                        &actor("decision_owner"),
                        file_definition("crash", FILE, CONTENT),
                        &|_| rpr::Decision::Allow,
                    )
                    .unwrap()
                    .into_new()
                    .unwrap_or_else(|_| panic!("{point}#{i}: not admitted afresh"))
                    .into_approved()
                    .unwrap_or_else(|_| panic!("{point}#{i}: not admitted afresh"))
                }
            };
            let mut ex = CountingFile::new(&root, &log);
            let mut readback = ex.readback();
            p.bind(&mut ex)
                .unwrap()
                .dispatch_and_confirm(&rt, &actor("execution_actor"), &mut ex, &mut readback)
                .into_completed()
                .unwrap_or_else(|_| panic!("{point}#{i}: not completed"));
            assert_eq!(effects(&log), 1, "{point}#{i}: exactly once");
            assert_eq!(row_count(&dir.db(), "pathways"), 1, "{point}#{i}");
            assert!(rt.verify(None).unwrap().is_ok(), "{point}#{i}");
        }
    }
}
