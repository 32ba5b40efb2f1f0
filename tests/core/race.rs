//! Races between processes sharing one database.
//!
//! Two child processes (this test binary, re-executed; see `child_entry`) load the
//! same admitted pathway, bind it, wait for a common start signal and dispatch.
//! Exactly one attempt is recorded and exactly one effect happens; the loser gets
//! `NotSent` (a compare-and-set conflict) and then sees the winner's attempt as
//! `InFlightElsewhere`. Separately: an attempt in flight in a live process (another
//! process, or another runtime in this process) is never flipped to unknown.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use rpr::executor::{Binding, Delivery, Executor, Refusal, Request};
use rpr::store::StoreError;
use rpr::{AttemptStatus, Outcome, PathwayError, Runtime, State, StoredPathway};

const ROUNDS: usize = 10;
const FILE: &str = "race.txt";
const CONTENT: &str = "written once";

fn env(k: &str) -> String {
    std::env::var(k).unwrap()
}

fn wait_for_file(path: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::path::Path::new(path).exists() {
        assert!(Instant::now() < deadline, "{path} never appeared");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The winner holds its attempt in flight (inside the executor, before the write)
/// until the parent releases it.
fn wait_for_release() {
    wait_for_file(&env("RPR_RACE_RELEASE"));
}

fn hold_forever() {
    block_until_killed("inside the executor");
}

fn kind(s: &StoredPathway) -> &'static str {
    match s {
        StoredPathway::Approved(_) => "approved",
        StoredPathway::Returned(_) => "returned",
        StoredPathway::Unknown(_) => "unknown",
        StoredPathway::InFlightElsewhere { .. } => "in_flight_elsewhere",
        StoredPathway::Completed(_) => "completed",
        _ => "other",
    }
}

fn load(rt: &Runtime, id: &str, via_recover: bool) -> StoredPathway {
    if via_recover {
        let mut all = rt.recover().unwrap();
        assert_eq!(all.len(), 1);
        all.pop().unwrap()
    } else {
        rt.load(id).unwrap()
    }
}

/// The children's lease, renewed by their heartbeat while they live. On SQLite a dead
/// owner is seen at once (its process is gone); on PostgreSQL, where an owner may be on any
/// machine, only the lapse of its lease by the database's clock lets another take over.
const CHILD_LEASE: std::time::Duration = std::time::Duration::from_millis(1500);

/// A child process. `RPR_RACE_MODE`: `race` (bind, wait for the start signal,
/// dispatch, report) or `hold` (dispatch and block inside the executor until killed).
#[test]
fn child_entry() {
    let Ok(mode) = std::env::var("RPR_RACE_MODE") else {
        return;
    };
    let id = env("RPR_RACE_PATHWAY");
    let via_recover = env("RPR_RACE_VIA") == "recover";
    let rt = Runtime::builder(env("RPR_RACE_DB"))
        .lease(CHILD_LEASE)
        .open()
        .unwrap();
    let mut ex = CountingFile::new(env("RPR_RACE_ROOT").as_ref(), env("RPR_RACE_LOG").as_ref());
    let StoredPathway::Approved(p) = load(&rt, &id, via_recover) else {
        panic!("expected an approved pathway")
    };
    let bound = p.bind(&mut ex).unwrap();
    if mode == "hold" {
        ex.before_write = Some(hold_forever);
        let outcome = bound.dispatch(&rt, &actor("execution_actor"), &mut ex);
        panic!("not blocked: {outcome:?}");
    }
    ex.before_write = Some(wait_for_release);
    say("RPR-BOUND", "");
    wait_for_file(&env("RPR_RACE_GO"));
    match bound.dispatch(&rt, &actor("execution_actor"), &mut ex) {
        Outcome::Returned(_) => say("RPR-RESULT", "dispatched"),
        Outcome::NotSent(n) => {
            assert!(
                matches!(
                    n.error(),
                    PathwayError::Store(StoreError::Conflict {
                        expected: State::Approved,
                        ..
                    })
                ),
                "{:?}",
                n.error()
            );
            // The winner is inside its executor: its attempt is not ours to touch.
            let now = load(&rt, &id, via_recover);
            say("RPR-RESULT", &format!("conflict {}", kind(&now)));
        }
        other => panic!("unexpected outcome {other:?}"),
    }
}

struct Setup {
    dir: TempDir,
    id: String,
}

impl Setup {
    fn new(tag: &str) -> Self {
        let (dir, id) = admitted_file_pathway(tag, "race", FILE, CONTENT);
        Self { dir, id }
    }
    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
    fn spawn(&self, mode: &str, via: &str) -> ChildProc {
        ChildProc::spawn(
            "race::child_entry",
            &[
                ("RPR_RACE_MODE", mode.to_owned()),
                ("RPR_RACE_VIA", via.to_owned()),
                ("RPR_RACE_DB", self.dir.db().display().to_string()),
                ("RPR_RACE_ROOT", self.path("root")),
                ("RPR_RACE_LOG", self.path("effects.log")),
                ("RPR_RACE_PATHWAY", self.id.clone()),
                ("RPR_RACE_GO", self.path("go")),
                ("RPR_RACE_RELEASE", self.path("release")),
            ],
        )
    }
}

/// Waits until one of `children` prints `prefix`; returns its index and the rest of the line.
fn first_report(children: &mut [ChildProc], prefix: &str, skip: Option<usize>) -> (usize, String) {
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        for (i, c) in children.iter_mut().enumerate() {
            if Some(i) == skip {
                continue;
            }
            if let Some(rest) = c.poll(prefix) {
                return (i, rest);
            }
        }
        if Instant::now() > deadline {
            let d: Vec<String> = children.iter_mut().map(ChildProc::diagnostics).collect();
            panic!("no child printed {prefix}:\n{}", d.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn two_processes_racing_to_dispatch_send_exactly_once() {
    for round in 0..ROUNDS {
        let s = Setup::new(&format!("race-{round}"));
        let via = if round % 2 == 0 { "load" } else { "recover" };
        let mut children = vec![s.spawn("race", via), s.spawn("race", via)];
        for c in &mut children {
            c.expect("RPR-BOUND");
        }
        // Both hold a bound pathway at the same version: start them together.
        std::fs::write(s.path("go"), "").unwrap();
        let (loser, result) = first_report(&mut children, "RPR-RESULT", None);
        assert_eq!(
            result, "conflict in_flight_elsewhere",
            "round {round}: the loser sent nothing and saw the winner's attempt"
        );
        // Nothing has been written yet: the winner is held inside its executor.
        assert_eq!(effects(s.path("effects.log").as_ref()), 0);
        std::fs::write(s.path("release"), "").unwrap();
        let (winner, result) = first_report(&mut children, "RPR-RESULT", Some(loser));
        assert_ne!(winner, loser);
        assert_eq!(result, "dispatched", "round {round}");
        for c in children {
            c.finish();
        }

        assert_eq!(
            effects(s.path("effects.log").as_ref()),
            1,
            "round {round}: exactly one effect"
        );
        let rt = Runtime::open(s.dir.db()).unwrap();
        let attempts = rt.attempt_records(&s.id).unwrap();
        assert_eq!(attempts.len(), 1, "round {round}: exactly one attempt row");
        assert_eq!(attempts[0].status, AttemptStatus::Returned);
        let started = rt
            .pathway_events(&s.id)
            .unwrap()
            .iter()
            .filter(|e| e.event.contains("\"kind\":\"attempt_started\""))
            .count();
        assert_eq!(started, 1, "round {round}: one attempt_started event");
        let report = rt.verify(None).unwrap();
        assert!(report.is_ok(), "round {round}: {:?}", report.problems);
        // And it finishes normally.
        let StoredPathway::Returned(p) = rt.load(&s.id).unwrap() else {
            panic!()
        };
        let rb =
            CountingFile::new(s.path("root").as_ref(), s.path("effects.log").as_ref()).readback();
        p.confirm(&rt, &actor("evidence_owner"), &mut { rb })
            .unwrap()
            .into_completed()
            .unwrap();
    }
}

#[test]
fn live_owner_process_keeps_its_attempt_in_flight() {
    let s = Setup::new("race-live");
    let mut holder = s.spawn("hold", "load");
    holder.expect(READY);
    let child_pid = holder.pid();

    let rt = Runtime::open(s.dir.db()).unwrap();
    // Everything recovery could write, but the lease the owner's heartbeat renews meanwhile.
    let written = || {
        let attempts: Vec<_> = rt
            .attempt_records(&s.id)
            .unwrap()
            .into_iter()
            .map(|a| (a.id, a.status, a.owner, a.outcome, a.updated_at))
            .collect();
        (
            rt.ledger_rows(0, usize::MAX).unwrap(),
            rt.pathway_record(&s.id).unwrap(),
            attempts,
        )
    };
    let before = written();
    let mut all = rt.recover().unwrap();
    assert_eq!(all.len(), 1);
    let StoredPathway::InFlightElsewhere { pathway, attempt } = all.pop().unwrap() else {
        panic!("an attempt in flight in a live process must not be flipped to unknown")
    };
    assert_eq!(pathway.state, State::Running);
    assert_eq!(attempt.status, AttemptStatus::InFlight);
    let owner = attempt.owner.as_deref().unwrap();
    assert!(
        owner.contains(&format!("/{child_pid}/")),
        "owner {owner} names the child process"
    );
    assert!(matches!(
        rt.load(&s.id).unwrap(),
        StoredPathway::InFlightElsewhere { .. }
    ));
    assert_eq!(
        written(),
        before,
        "recovery wrote nothing while the owner was alive"
    );

    // Alive past its first lease: the heartbeat renewed it.
    std::thread::sleep(CHILD_LEASE * 2);
    assert!(
        matches!(
            rt.recover().unwrap().as_slice(),
            [StoredPathway::InFlightElsewhere { .. }]
        ),
        "a live owner keeps its attempt past its first lease"
    );
    // Once the owner is dead, the same scan reports the attempt as unknown (on
    // PostgreSQL once its lease has lapsed).
    holder.kill();
    if common::pg::on() {
        assert!(
            matches!(
                rt.recover().unwrap().as_slice(),
                [StoredPathway::InFlightElsewhere { .. }]
            ),
            "on PostgreSQL not taken over while the lease runs"
        );
        std::thread::sleep(CHILD_LEASE + std::time::Duration::from_millis(300));
    }
    let all = rt.recover().unwrap();
    assert!(
        matches!(all.as_slice(), [StoredPathway::Unknown(_)]),
        "{all:?}"
    );
    assert_eq!(effects(s.path("effects.log").as_ref()), 0);
    assert!(rt.verify(None).unwrap().is_ok());
}

/// An executor that waits inside `execute` until the test lets it go.
struct Gate {
    entered: std::sync::mpsc::Sender<()>,
    go: std::sync::mpsc::Receiver<()>,
}

impl Executor for Gate {
    fn bind(&mut self, _request: &Request) -> Result<Binding, Refusal> {
        Ok(Binding::new("gate", serde_json::json!({"executor": "gate"})).unwrap())
    }
    fn prepare(&mut self, _request: &Request, _binding: &Binding) -> Result<(), Refusal> {
        Ok(())
    }
    fn execute(&mut self, _request: &Request) -> Delivery {
        self.entered.send(()).unwrap();
        self.go.recv().unwrap();
        Delivery::Succeeded {
            reply: serde_json::json!({"ok": true}),
        }
    }
}

#[test]
fn another_runtime_in_a_live_process_sees_in_flight_elsewhere() {
    let s = Setup::new("race-thread");
    let db = s.dir.db();
    let id = s.id.clone();
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let (go, go_rx) = std::sync::mpsc::channel();
    let a = std::thread::spawn(move || {
        let rt = Runtime::open(&db).unwrap();
        let StoredPathway::Approved(p) = rt.load(&id).unwrap() else {
            panic!()
        };
        let mut ex = Gate {
            entered: entered_tx,
            go: go_rx,
        };
        let outcome = p
            .bind(&mut ex)
            .unwrap()
            .dispatch(&rt, &actor("execution_actor"), &mut ex);
        assert!(matches!(outcome, Outcome::Returned(_)), "{outcome:?}");
    });
    entered.recv_timeout(Duration::from_secs(30)).unwrap();

    let rt = Runtime::open(s.dir.db()).unwrap();
    let before = db_dump(&s.dir.db());
    let all = rt.recover().unwrap();
    assert!(
        matches!(all.as_slice(), [StoredPathway::InFlightElsewhere { .. }]),
        "not Unknown: {all:?}"
    );
    assert_eq!(db_dump(&s.dir.db()), before);

    go.send(()).unwrap();
    a.join().unwrap();
    let all = rt.recover().unwrap();
    assert!(
        matches!(all.as_slice(), [StoredPathway::Returned(_)]),
        "{all:?}"
    );
    assert!(rt.verify(None).unwrap().is_ok());
}
