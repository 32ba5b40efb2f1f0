//! What `tests/pg/pg_runtime.rs` (hosts as child processes) and `tests/pg/pg_netns.rs` (the same
//! hosts, each in a network namespace of its own) share: the host a test cuts off in the
//! middle of its call, the hosts of the kill test, and the kill test itself.
#![allow(
    unreachable_pub,
    reason = "shared by two modules of tests/pg; pub is for them, not for a crate"
)]

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;
use rpr::executor::{Binding, Delivery, Executor, Observation, Readback, Refusal, Request};
use rpr::token::Reconciled;
use rpr::{Decided, Outcome, Ready, Runtime, State, StoredPathway};
use serde_json::{Value, json};

pub fn env(k: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"))
}

fn allow(_: &rpr::Definition) -> rpr::Decision {
    rpr::Decision::Allow
}

fn wait_for_file(path: &str) {
    let deadline = Instant::now() + Duration::from_mins(1);
    while !std::path::Path::new(path).exists() {
        assert!(Instant::now() < deadline, "{path} never appeared");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Inside the executor, before the write: tell the parent, then wait for its release.
fn stop_before_write() {
    say("RPR-IN-EXECUTOR", "");
    wait_for_file(&env("RPR_PG_RELEASE"));
}

/// The host a test cuts off (in a child process): opens `db` with `lease` (and, when
/// given, `busy` as its busy timeout), proposes, binds and dispatches one file write
/// (`RPR_PG_ROOT`, effects counted in `RPR_PG_LOG`), stopping inside the executor until the
/// file `RPR_PG_RELEASE` appears, then prints how its outcome was recorded.
pub fn cut_off_host(db: &str, lease: Duration, busy: Option<Duration>) {
    let mut builder = Runtime::builder(db).lease(lease);
    if let Some(busy) = busy {
        builder = builder.busy_timeout(busy);
    }
    let rt = builder.open().unwrap();
    let mut ex = CountingFile::new(env("RPR_PG_ROOT").as_ref(), env("RPR_PG_LOG").as_ref());
    ex.before_write = Some(stop_before_write);
    let ready = rt
        .propose_and_bind(
            &actor("proposer"),
            &actor("decision_owner"),
            file_definition("cut-off", "out.txt", "once"),
            &allow,
            &mut ex,
        )
        .unwrap();
    let Ready::Bound(p) = ready else {
        panic!("{ready:?}")
    };
    say("RPR-PATHWAY", p.id());
    let started = Instant::now();
    match p.dispatch(&rt, &actor("execution_actor"), &mut ex) {
        Outcome::Unrecorded(u) => say(
            "RPR-OUTCOME",
            &format!(
                "unrecorded after {} ms: {}",
                started.elapsed().as_millis(),
                u.error
            ),
        ),
        other => say("RPR-OUTCOME", &format!("recorded: {other:?}")),
    }
}

/// The hosts of the kill test: how many pathways, how short their lease.
pub const PATHWAYS: usize = 24;
pub const HOST_LEASE: Duration = Duration::from_millis(800);

/// The kill test's effect: one line appended to `root/<path>` (one `write(2)` with
/// `O_APPEND`, which a SIGKILL cannot split), so the lines in the file count exactly the
/// times the call took effect. Readback: the line is there or it is not.
pub struct Append(pub std::path::PathBuf);

impl Append {
    pub fn target(&self, request: &Request) -> (std::path::PathBuf, String) {
        let path = request.arguments["path"]
            .as_str()
            .unwrap_or_else(|| panic!("{request:?}"));
        let line = request.arguments["line"]
            .as_str()
            .unwrap_or_else(|| panic!("{request:?}"));
        (self.0.join(path), format!("{line}\n"))
    }
}

impl Executor for Append {
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal> {
        Ok(Binding::new("append", json!({"tool": request.action, "root": self.0})).unwrap())
    }
    fn prepare(&mut self, _: &Request, _: &Binding) -> Result<(), Refusal> {
        Ok(())
    }
    fn execute(&mut self, request: &Request) -> Delivery {
        // Long enough for most kills to land in the middle of a call, before or after the
        // effect.
        std::thread::sleep(Duration::from_millis(40));
        let (file, line) = self.target(request);
        append_line(&file, &line);
        std::thread::sleep(Duration::from_millis(40));
        Delivery::Succeeded {
            reply: json!({"appended": true}),
        }
    }
}

impl Readback for Append {
    fn observe(&mut self, request: &Request) -> Observation {
        let (file, line) = self.target(request);
        let text = std::fs::read_to_string(file).unwrap_or_default();
        if text.contains(&line) {
            Observation::Applied {
                evidence: json!({"line": "present"}),
            }
        } else {
            Observation::NotApplied {
                evidence: json!({"line": "absent"}),
            }
        }
    }
}

fn append_definition(i: usize) -> rpr::Definition {
    let mut d = definition(&format!("k{i}"), rpr::ActionClass::Mutating);
    d.request = Request::new(
        "append_line",
        json!({"path": format!("out_{i}.txt"), "line": format!("c{i}")}),
    );
    d
}

/// Append pathway `i`, proposed and admitted (an allow policy) in one step.
pub fn admitted(rt: &Runtime, i: usize) -> rpr::Pathway<rpr::stage::Approved> {
    let Decided::New(rpr::Admission::Approved(p)) = rt
        .propose_and_admit(
            &actor("proposer"),
            &actor("decision_owner"),
            append_definition(i),
            &allow,
        )
        .unwrap()
    else {
        panic!("admitted at once")
    };
    p
}

/// Takes one step of pathway `id` as far as this host can, whatever stage it is in.
/// Refusals (another host took the step first, the call is in flight elsewhere) are fine:
/// the next round loads it again. Returns whether it is completed. `root` is where the
/// readback looks for the line.
pub fn drive(rt: &Runtime, id: &str, ex: &mut dyn Executor, root: &Path) -> bool {
    let exec = actor("execution_actor");
    let repair = actor("repair_owner");
    let checked = json!({"checked": "line absent"});
    let Ok(stored) = rt.load(id) else {
        return false;
    };
    match stored {
        StoredPathway::Completed(_) => return true,
        StoredPathway::Approved(p) => {
            if let Ok(b) = p.bind(ex) {
                let _ = b.dispatch(rt, &exec, ex);
            }
        }
        StoredPathway::ReadyToResume(p) => {
            if let Ok(b) = p.bind(ex) {
                let _ = b.dispatch(rt, &exec, ex);
            }
        }
        StoredPathway::Returned(p) => {
            let mut readback = Append(root.to_owned());
            let _ = p.confirm(rt, &actor("evidence_owner"), &mut readback);
        }
        StoredPathway::Unknown(p) => {
            let mut readback = Append(root.to_owned());
            match rt.reconcile(&p, &mut readback) {
                Reconciled::Applied(t) => {
                    let _ = p.complete(rt, t);
                }
                Reconciled::NotApplied(t) => {
                    if let Ok(p) = p.require_repair(rt, t) {
                        let _ = p.repair(rt, &repair, &checked, None);
                    }
                }
                _ => {}
            }
        }
        StoredPathway::RepairRequired(p) => {
            let _ = p.repair(rt, &repair, &checked, None);
        }
        StoredPathway::InFlightElsewhere { .. } => {}
        other => panic!("pathway {id}: a stage this test never makes: {other:?}"),
    }
    false
}

/// A host's clock, off by a fixed amount (an hour either way in the kill test): it stamps
/// the host's events and decides nothing.
pub struct Skewed(pub i64);

impl rpr::Clock for Skewed {
    fn now_ms(&self) -> i64 {
        rpr::SystemClock::default().now_ms() + self.0
    }
}

/// A host of the kill test (in a child process, with the environment [`sigkill_hosts`]
/// gives it): drives every pathway on `db` until all are completed.
pub fn run_host(db: &str) {
    let skew: i64 = env("RPR_PG_SKEW_MS").parse().unwrap();
    let rt = Runtime::builder(db)
        .lease(HOST_LEASE)
        .clock(Skewed(skew))
        .open()
        .unwrap();
    let mut ex = Append(env("RPR_PG_ROOT").into());
    let ids: Vec<String> = env("RPR_PG_IDS").split(',').map(str::to_owned).collect();
    let start: usize = env("RPR_PG_START").parse().unwrap();
    let deadline = Instant::now() + Duration::from_mins(2);
    loop {
        let mut done = 0;
        for k in 0..ids.len() {
            let root = ex.0.clone();
            if drive(&rt, &ids[(start + k) % ids.len()], &mut ex, &root) {
                done += 1;
            }
        }
        if done == ids.len() {
            say("RPR-DONE", "");
            return;
        }
        assert!(Instant::now() < deadline, "not all completed: {done}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The places of the hosts that own an attempt in flight now (by the pid in its owner,
/// `host/pid/start/runtime/boot/pidns`).
fn in_flight_hosts(rt: &Runtime, ids: &[String], hosts: &[ChildProc]) -> Vec<usize> {
    let mut pids = Vec::new();
    for id in ids {
        for a in rt.attempt_records(id).unwrap() {
            if a.status == rpr::AttemptStatus::InFlight
                && let Some(pid) = a.owner.as_deref().and_then(|o| o.split('/').nth(1))
            {
                pids.push(pid.to_owned());
            }
        }
    }
    (0..hosts.len())
        .filter(|&i| pids.contains(&hosts[i].pid().to_string()))
        .collect()
}

/// What a kill run did.
#[derive(Debug)]
pub struct KillRun {
    pub kills: usize,
    pub spawned: usize,
    /// The `recovered_unknown` events: each a takeover after a lapsed lease.
    pub takeovers: Vec<Value>,
}

/// The kill test: [`PATHWAYS`] admitted pathways on `rt`'s database; 4 hosts at a time,
/// each started by `spawn(slot, environment)` (slot 0 to 3: the place of the host it
/// replaces; the environment is what [`run_host`] reads, its database URL excepted), and
/// `check(slot, host, killed)` called on each host just before it is killed (`killed`: it
/// may not have got far yet, do not wait for it) or waited for, while
/// this thread SIGKILLs a host at random moments (a fixed seed; every other time one with
/// a call in flight, when there is one) and starts another in its slot. Then asserts what the kill test's name states: every pathway completed,
/// each effect exactly once, a second attempt only after a recorded not-applied verdict,
/// every takeover after its lease lapsed by the database's clock, at least one takeover
/// (else the test proved less than it says), `verify` clean.
pub fn sigkill_hosts(
    rt: &Runtime,
    root: &Path,
    mut spawn: impl FnMut(usize, Vec<(&'static str, String)>) -> ChildProc,
    mut check: impl FnMut(usize, &mut ChildProc, bool),
) -> KillRun {
    let mut ids = Vec::new();
    for i in 0..PATHWAYS {
        ids.push(admitted(rt, i).id().to_owned());
    }
    let mut start = |slot: usize, n: usize| {
        spawn(
            slot,
            vec![
                ("RPR_PG_ROOT", root.display().to_string()),
                ("RPR_PG_IDS", ids.join(",")),
                ("RPR_PG_START", (n * 4).to_string()),
                // Hosts an hour behind, on time, an hour ahead.
                (
                    "RPR_PG_SKEW_MS",
                    ((i64::try_from(n % 3).unwrap() - 1) * 3_600_000).to_string(),
                ),
            ],
        )
    };
    let mut hosts: Vec<ChildProc> = (0..4).map(|n| start(n, n)).collect();
    // A fixed-seed generator: the same kill schedule each run.
    let mut seed: u64 = 0x5eed_0011;
    let mut next = |n: u64| {
        seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (seed >> 33) % n
    };
    let mut kills = 0;
    let mut spawned = 4;
    for round in 0..12 {
        std::thread::sleep(Duration::from_millis(40 + next(160)));
        // Every other round the victim is a host with a call in flight, if there is one
        // (a kill in the middle of a call, which only a takeover settles); else any host.
        let calling = if round % 2 == 0 {
            // Watched for a while, not read once: a call is in flight for ~80 ms of each
            // host's turn, and a single look can fall between calls (the run then proves less).
            let until = Instant::now() + Duration::from_secs(1);
            loop {
                let calling = in_flight_hosts(rt, &ids, &hosts);
                if !calling.is_empty() || Instant::now() >= until {
                    break calling;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        } else {
            Vec::new()
        };
        let victim = if calling.is_empty() {
            usize::try_from(next(hosts.len() as u64)).unwrap()
        } else {
            calling[usize::try_from(next(calling.len() as u64)).unwrap()]
        };
        check(victim, &mut hosts[victim], true);
        let mut old = std::mem::replace(&mut hosts[victim], start(victim, spawned));
        spawned += 1;
        // A host that already finished everything has exited; the others are killed.
        if old.child.try_wait().unwrap().is_none() {
            old.kill();
            kills += 1;
        }
    }
    for (slot, mut h) in hosts.into_iter().enumerate() {
        check(slot, &mut h, false);
        h.expect("RPR-DONE");
        h.finish();
    }

    for (i, id) in ids.iter().enumerate() {
        assert_eq!(
            rt.pathway_record(id).unwrap().unwrap().state,
            State::Completed,
            "pathway {i} completed"
        );
        let lines = std::fs::read_to_string(root.join(format!("out_{i}.txt"))).unwrap();
        assert_eq!(
            lines,
            format!("c{i}\n"),
            "out_{i}.txt: took effect exactly once"
        );
    }
    let mut takeovers = Vec::new();
    for row in rt.ledger_rows(0, usize::MAX).unwrap() {
        let e: Value = serde_json::from_str(&row.event).unwrap();
        if e["kind"] == "recovered_unknown" {
            let (lease, now) = (&e["data"]["lease_until"], &e["data"]["database_now"]);
            assert!(
                lease.as_i64().unwrap() < now.as_i64().unwrap(),
                "taken over only after its lease lapsed: {e}"
            );
            takeovers.push(e);
        } else if e["kind"] == "attempt_started" {
            // A second attempt of a pathway only after a recorded not-applied verdict.
            let attempts = rt.attempt_records(e["pathway"].as_str().unwrap()).unwrap();
            for pair in attempts.windows(2) {
                assert_eq!(
                    pair[0].status,
                    rpr::AttemptStatus::NotApplied,
                    "{attempts:?}"
                );
            }
        }
    }
    let report = rt.verify(None).unwrap();
    assert!(report.is_ok(), "{report:?}");
    assert!(
        !takeovers.is_empty(),
        "no kill landed in the middle of a call: the test proved less than it says"
    );
    KillRun {
        kills,
        spawned,
        takeovers,
    }
}

/// After a cut-off host `host_a` (its call taken over by `host_b` while it was away) is back
/// and has sent its one request: its outcome was refused and recorded as such, the effect
/// happened once (`log`), the pathway stays unknown for a reconciliation to decide, and the
/// ledger verifies.
pub fn late_outcome_refused(mut host_a: ChildProc, host_b: &Runtime, id: &str, log: &Path) {
    let outcome = host_a.expect("RPR-OUTCOME");
    assert!(
        outcome.contains("unrecorded") && outcome.contains("late outcome"),
        "the late outcome is refused: {outcome}"
    );
    host_a.finish();
    assert_eq!(effects(log), 1, "one send in all");
    assert_eq!(
        event_kinds(host_b, id),
        [
            "proposed",
            "admitted",
            "attempt_started",
            "recovered_unknown",
            "late_outcome_refused"
        ]
    );
    assert_eq!(
        host_b.pathway_record(id).unwrap().unwrap().state,
        State::WriteStatusUnknown,
        "still unknown: a reconciliation decides it"
    );
    let attempts = host_b.attempt_records(id).unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].status, rpr::AttemptStatus::Unknown);
    assert!(host_b.verify(None).unwrap().is_ok());
}

/// A host cut off at `cut_at` with its call `id` in flight under a `lease`: another host
/// (`host_b`) finds the call in flight elsewhere and takes nothing over while the lease
/// runs; once it has lapsed by the database's clock, it takes the call over as unknown.
pub fn taken_over_only_after_the_lease(
    host_b: &Runtime,
    id: &str,
    cut_at: Instant,
    lease: Duration,
) {
    let seen = host_b.recover().unwrap();
    assert!(
        matches!(seen.as_slice(), [StoredPathway::InFlightElsewhere { .. }]),
        "not taken over while the lease runs: {seen:?}"
    );
    assert_eq!(
        event_kinds(host_b, id),
        ["proposed", "admitted", "attempt_started"]
    );

    // The lease lapses by the database's clock: now it is taken over, as unknown.
    std::thread::sleep(lease + Duration::from_millis(500));
    let seen = host_b.recover().unwrap();
    let [StoredPathway::Unknown(unknown)] = seen.as_slice() else {
        panic!("taken over as unknown after the lease: {seen:?}")
    };
    assert!(cut_at.elapsed() >= lease);
    assert_eq!(unknown.id(), id);
}

/// The effect of [`Append`]: `line` appended to `file` (`O_APPEND`, so lines never mix) and
/// synced.
pub fn append_line(file: &Path, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .unwrap();
    f.write_all(line.as_bytes()).unwrap();
    f.sync_all().unwrap();
}
