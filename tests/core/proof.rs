//! What may settle an attempt that may have taken effect: a *not applied* verdict opens the
//! way to a second send, so it must rest on proof that nobody can still send the first.
//!
//! - An owner whose lease lapsed is taken over, but a lapse is not death: while it is not
//!   proven gone, no readback says "not applied" (it may still send).
//! - An owner seen from another PID namespace is not judged by its pid.
//! - A reconciliation is bound to the pathway version it saw: evidence recorded after it
//!   was made voids it.
//! - A panic inside an executor is not a crash: the process lives on, and so may the
//!   write it handed to a worker; the attempt stays in flight here until the process ends.
//!
//! Every test counts effects at the executor (one line per real write), not by rpr's
//! report, and follows whatever verdict rpr gives as far as it allows: when a test fails,
//! the count shows the second send. Runs on both stores (`RPR_TEST_BACKEND`).

use crate::common;

use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rpr::executor::{Binding, Delivery, Executor, Refusal, Request};
use rpr::token::{Attestation, Reconciled};
use rpr::{Outcome, Runtime, StoredPathway};
use serde_json::json;

const FILE: &str = "proof.txt";
const CONTENT: &str = "written once";

fn env(k: &str) -> String {
    std::env::var(k).unwrap()
}

fn wait_for_file(path: &str) {
    let deadline = Instant::now() + Duration::from_mins(1);
    while !std::path::Path::new(path).exists() {
        assert!(Instant::now() < deadline, "{path} never appeared");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// In the child host: inside the executor, after the attempt record committed and before
/// the write, report and wait for the parent's release.
fn report_then_wait_for_release() {
    say("RPR-IN-EXECUTOR", "");
    wait_for_file(&env("RPR_PROOF_RELEASE"));
}

/// A child host: loads the admitted pathway, dispatches it and holds inside the executor
/// until released; then reports how its outcome was recorded. `RPR_PROOF_HOST` renames its
/// host (it runs in a UTS namespace of its own).
#[test]
fn child_host() {
    let Ok(db) = std::env::var("RPR_PROOF_DB") else {
        return;
    };
    if let Ok(host) = std::env::var("RPR_PROOF_HOST") {
        nix::unistd::sethostname(&host).unwrap();
    }
    let lease = Duration::from_millis(env("RPR_PROOF_LEASE_MS").parse().unwrap());
    let rt = Runtime::builder(db).lease(lease).open().unwrap();
    let mut ex = CountingFile::new(
        env("RPR_PROOF_ROOT").as_ref(),
        env("RPR_PROOF_LOG").as_ref(),
    );
    ex.before_write = Some(report_then_wait_for_release);
    let StoredPathway::Approved(p) = rt.load(&env("RPR_PROOF_PATHWAY")).unwrap() else {
        panic!("expected an approved pathway")
    };
    let bound = p.bind(&mut ex).unwrap();
    // `RPR_PROOF_CONFIRM`: the reply and its readback in one commit (its late status then
    // `applied` when the readback finds the write).
    let outcome = if std::env::var_os("RPR_PROOF_CONFIRM").is_some() {
        let mut readback = ex.readback();
        bound.dispatch_and_confirm(&rt, &actor("execution_actor"), &mut ex, &mut readback)
    } else {
        bound.dispatch(&rt, &actor("execution_actor"), &mut ex)
    };
    let how = match &outcome {
        Outcome::Returned(_) => "returned".to_owned(),
        Outcome::Unrecorded(u) => format!("unrecorded: {}", u.error),
        other => format!("{other:?}"),
    };
    say("RPR-OUTCOME", &how);
}

struct Setup {
    dir: TempDir,
    id: String,
}

impl Setup {
    fn new(tag: &str) -> Self {
        let (dir, id) = admitted_file_pathway(tag, "proof", FILE, CONTENT);
        Self { dir, id }
    }
    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
    fn log(&self) -> std::path::PathBuf {
        self.dir.path().join("effects.log")
    }
    fn executor(&self) -> CountingFile {
        CountingFile::new(&self.dir.path().join("root"), &self.log())
    }
    fn spawn(&self, launcher: &[&str], host: Option<&str>, lease: Duration) -> ChildProc {
        self.spawn_with(launcher, host, lease, &[])
    }
    fn spawn_with(
        &self,
        launcher: &[&str],
        host: Option<&str>,
        lease: Duration,
        more: &[(&str, String)],
    ) -> ChildProc {
        let mut envs = vec![
            ("RPR_PROOF_DB", self.dir.db().display().to_string()),
            ("RPR_PROOF_ROOT", self.path("root")),
            ("RPR_PROOF_LOG", self.log().display().to_string()),
            ("RPR_PROOF_PATHWAY", self.id.clone()),
            ("RPR_PROOF_RELEASE", self.path("release")),
            ("RPR_PROOF_LEASE_MS", lease.as_millis().to_string()),
        ];
        if let Some(h) = host {
            envs.push(("RPR_PROOF_HOST", h.to_owned()));
        }
        envs.extend(more.iter().cloned());
        ChildProc::spawn_via(launcher, "proof::child_host", &envs)
    }
    fn release(&self) {
        std::fs::write(self.path("release"), "").unwrap();
    }
}

/// Follows the verdict as far as rpr allows: a not-applied verdict is repaired and the call
/// sent again (the second send the test must never see); returns the verdict's name and
/// its evidence as text.
fn follow(rt: &Runtime, p: rpr::Pathway<rpr::stage::Unknown>, s: &Setup) -> (String, String) {
    let mut ex = s.executor();
    let mut readback = ex.readback();
    match rt.reconcile(&p, &mut readback) {
        Reconciled::NotApplied(t) => {
            let evidence = t.evidence().to_string();
            let repaired = p
                .require_repair(rt, t)
                .unwrap()
                .repair(rt, &actor("repair_owner"), &json!({"by": "test"}), None)
                .unwrap();
            let bound = repaired.bind(&mut ex).unwrap();
            let _ = bound.dispatch(rt, &actor("resume_authority"), &mut ex);
            ("not_applied".into(), evidence)
        }
        Reconciled::Unresolved(t) => {
            let evidence = t.evidence().to_string();
            p.keep_unknown(rt, t).unwrap();
            ("unresolved".into(), evidence)
        }
        Reconciled::Applied(t) => ("applied".into(), t.evidence().to_string()),
        other => panic!("{other:?}"),
    }
}

fn stop(child: &ChildProc, signal: Signal) {
    kill(Pid::from_raw(i32::try_from(child.pid()).unwrap()), signal).unwrap();
}

/// Whether this machine can make the namespaces a test needs (root and util-linux's
/// `unshare`). CI runs as root: there a missing namespace fails the test.
fn namespaces(args: &[&str]) -> bool {
    let ok = std::process::Command::new("unshare")
        .args(args)
        .arg("true")
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok || std::env::var_os("CI").is_none(),
        "unshare {args:?} failed; CI must be able to make namespaces"
    );
    ok
}

/// A host on another host name, stopped (SIGSTOP) inside its executor until its lease
/// lapsed, and the pathway taken over as unknown by a runtime here. Continue the host with
/// [`Stopped::resume`].
struct Stopped {
    child: ChildProc,
    rt: Runtime,
}

impl Stopped {
    fn past_its_lease(s: &Setup) -> (Self, rpr::Pathway<rpr::stage::Unknown>) {
        Self::past_its_lease_with(s, &[])
    }
    /// [`Stopped::past_its_lease`], the host given `more` environment.
    fn past_its_lease_with(
        s: &Setup,
        more: &[(&str, String)],
    ) -> (Self, rpr::Pathway<rpr::stage::Unknown>) {
        let lease = Duration::from_millis(600);
        let mut child = s.spawn_with(
            &["unshare", "--uts", "--"],
            Some("another-host"),
            lease,
            more,
        );
        child.expect("RPR-IN-EXECUTOR");
        stop(&child, Signal::SIGSTOP);
        std::thread::sleep(lease * 2 + Duration::from_millis(400));
        let rt = Runtime::open(s.dir.db()).unwrap();
        let p = match rt.load(&s.id).unwrap() {
            StoredPathway::Unknown(p) => p,
            other => panic!("expected a takeover after the lapse, got {other:?}"),
        };
        (Self { child, rt }, p)
    }

    /// Releases and continues the host; how it says its outcome was recorded.
    fn resume(self, s: &Setup) -> (Runtime, String) {
        let Self { mut child, rt } = self;
        s.release();
        stop(&child, Signal::SIGCONT);
        let late = child.expect("RPR-OUTCOME");
        child.finish();
        (rt, late)
    }
}

/// A host stopped inside its executor past its lease is taken over as unknown, but a lapse
/// proves nothing: the readback finds no effect, and still the verdict is unresolved (the
/// owner may send). The host is continued and writes; exactly one write in the end, and a
/// readback then settles it as applied.
#[test]
fn a_lapsed_lease_is_not_death_and_no_readback_says_not_applied_after_it() {
    if !namespaces(&["--uts"]) {
        return;
    }
    let s = Setup::new("proof-lapsed");
    let (stopped, p) = Stopped::past_its_lease(&s);
    let (verdict, evidence) = follow(&stopped.rt, p, &s);
    let (rt, late) = stopped.resume(&s);
    assert_eq!(
        effects(&s.log()),
        1,
        "verdict {verdict} ({evidence}); the owner's late outcome: {late}"
    );
    assert_eq!(verdict, "unresolved", "{evidence}");
    assert!(evidence.contains("lapsed"), "{evidence}");

    // The owner's write landed: a readback now proves it applied.
    let StoredPathway::Unknown(p) = rt.load(&s.id).unwrap() else {
        panic!("still unknown")
    };
    let (verdict, evidence) = follow(&rt, p, &s);
    assert_eq!(verdict, "applied", "{evidence}");
    assert_eq!(effects(&s.log()), 1);
    assert!(rt.verify(None).unwrap().is_ok());
}

/// The owner's late outcome is evidence both ways: an owner taken over after its lease
/// lapsed that then verified its write by its own readback reported it applied. A readback
/// that finds nothing later (the target changed since, or is behind) does not make the
/// attempt "not applied", nor does an attestation: no second send.
#[test]
fn an_owners_late_applied_outcome_is_not_undone_by_a_later_readback() {
    if !namespaces(&["--uts"]) {
        return;
    }
    let s = Setup::new("proof-late-applied");
    let (stopped, p) = Stopped::past_its_lease_with(&s, &[("RPR_PROOF_CONFIRM", "1".into())]);
    drop(p);
    let (rt, late) = stopped.resume(&s);
    assert_eq!(effects(&s.log()), 1, "the owner's late outcome: {late}");
    let kinds = event_kinds(&rt, &s.id);
    assert!(
        kinds.iter().any(|k| k == "late_outcome_refused"),
        "{kinds:?}"
    );

    // The effect is gone from the target now.
    std::fs::remove_file(s.dir.path().join("root").join(FILE)).unwrap();
    let (verdict, evidence) = follow(&rt, load_unknown(&rt, &s.id), &s);
    assert_eq!(verdict, "unresolved", "{evidence}");
    assert!(evidence.contains("reported it applied"), "{evidence}");
    assert_eq!(effects(&s.log()), 1, "not sent again");
    let refused = rt
        .attest(
            &load_unknown(&rt, &s.id),
            &actor("repair_owner"),
            Attestation::NotApplied,
            &json!({"checked": "the target is empty"}),
        )
        .unwrap_err();
    assert!(
        matches!(refused, rpr::PathwayError::FoundApplied { .. }),
        "{refused:?}"
    );
    assert!(rt.verify(None).unwrap().is_ok());
}

/// A verdict made while the owner was stopped past its lease (here the repair owner's
/// attestation, accepting the risk) is void once the owner's late outcome is recorded: the
/// owner came back and reported, and what the verdict saw no longer holds.
#[test]
fn an_owners_late_outcome_voids_a_verdict_made_before_it() {
    if !namespaces(&["--uts"]) {
        return;
    }
    let s = Setup::new("proof-late");
    let (stopped, p) = Stopped::past_its_lease(&s);
    let Reconciled::NotApplied(risky) = stopped
        .rt
        .attest(
            &p,
            &actor("repair_owner"),
            Attestation::NotApplied,
            &json!({"checked": "the target is empty"}),
        )
        .unwrap()
    else {
        panic!("attested not applied")
    };
    assert!(
        risky.evidence()["accepted_risk"].is_string(),
        "{:?}",
        risky.evidence()
    );
    drop(p);
    let (rt, late) = stopped.resume(&s);

    let p = load_unknown(&rt, &s.id);
    let sent_again = match p.require_repair(&rt, risky) {
        Ok(repaired) => {
            let mut ex = s.executor();
            let ready = repaired
                .repair(&rt, &actor("repair_owner"), &json!({"by": "test"}), None)
                .unwrap();
            let bound = ready.bind(&mut ex).unwrap();
            let _ = bound.dispatch(&rt, &actor("resume_authority"), &mut ex);
            true
        }
        Err(refused) => {
            assert!(
                format!("{:?}", refused.error()).starts_with("StaleToken"),
                "{:?}",
                refused.error()
            );
            false
        }
    };
    assert_eq!(
        effects(&s.log()),
        1,
        "sent again: {sent_again}; the late outcome: {late}"
    );
    assert!(late.contains("refused"), "the owner's late outcome: {late}");
    let kinds = event_kinds(&rt, &s.id);
    assert!(
        kinds.iter().any(|k| k == "late_outcome_refused"),
        "{kinds:?}"
    );
    assert!(rt.verify(None).unwrap().is_ok());
}

/// An owner in another PID namespace, with the same host name and a running lease, is not
/// judged by a pid that means another process here: it stays in flight elsewhere.
#[test]
fn an_owner_in_another_pid_namespace_is_judged_by_its_lease_not_its_pid() {
    if !namespaces(&["--pid", "--fork", "--mount-proc"]) {
        return;
    }
    let s = Setup::new("proof-pidns");
    let child = s.spawn(
        &[
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            "--kill-child",
            "--",
        ],
        None,
        Duration::from_secs(30),
    );
    live_owner_stays_in_flight_elsewhere(&s, child);
}

/// An owner in a time namespace whose boot time is moved (same host name, boot and PID
/// namespace) records its start as the kernel shows it there, moved by the offset, which no
/// process has as seen from here: it is not judged by that start (here it would be "gone"
/// while it runs) but by its lease, and stays in flight elsewhere.
#[test]
fn an_owner_in_another_time_namespace_is_judged_by_its_lease_not_its_start() {
    if !namespaces(&["--time", "--fork", "--boottime", "100000"]) {
        return;
    }
    let s = Setup::new("proof-timens");
    let child = s.spawn(
        &["unshare", "--time", "--fork", "--boottime", "100000", "--"],
        None,
        Duration::from_secs(30),
    );
    live_owner_stays_in_flight_elsewhere(&s, child);
}

/// With `child`, a live owner holding the attempt inside its executor under a running
/// lease, judged from here: it must stay in flight elsewhere (nothing taken over, nothing
/// sent twice, whatever a taken-over pathway's verdict would have led to).
fn live_owner_stays_in_flight_elsewhere(s: &Setup, mut child: ChildProc) {
    child.expect("RPR-IN-EXECUTOR");

    let rt = Runtime::open(s.dir.db()).unwrap();
    let taken = match rt.load(&s.id).unwrap() {
        StoredPathway::InFlightElsewhere { .. } => None,
        StoredPathway::Unknown(p) => Some(follow(&rt, p, s)),
        other => panic!("{other:?}"),
    };
    s.release();
    child.expect("RPR-OUTCOME");
    child.finish();
    assert_eq!(effects(&s.log()), 1, "taken over as {taken:?}");
    assert!(taken.is_none(), "a live owner was taken over: {taken:?}");
}

/// An unknown pathway, recorded so by its own owner (the reply was lost).
fn unknown_pathway(rt: &Runtime, s: &Setup) -> String {
    let StoredPathway::Approved(p) = rt.load(&s.id).unwrap() else {
        panic!("approved")
    };
    let mut ex = s.executor();
    ex.report = Report::DropThenPossiblyWritten;
    let bound = p.bind(&mut ex).unwrap();
    match bound.dispatch(rt, &actor("execution_actor"), &mut ex) {
        Outcome::Unknown(p) => p.id().to_owned(),
        other => panic!("{other:?}"),
    }
}

fn load_unknown(rt: &Runtime, id: &str) -> rpr::Pathway<rpr::stage::Unknown> {
    match rt.load(id).unwrap() {
        StoredPathway::Unknown(p) => p,
        other => panic!("{other:?}"),
    }
}

/// A not-applied verdict made before later evidence was recorded on its pathway is refused
/// when used after it, on a freshly loaded handle too: reconcile again.
#[test]
fn a_verdict_is_void_once_later_evidence_is_recorded() {
    let s = Setup::new("proof-stale");
    let rt = Runtime::open(s.dir.db()).unwrap();
    let id = unknown_pathway(&rt, &s);

    let early = load_unknown(&rt, &id);
    let Reconciled::NotApplied(stale) = rt
        .attest(
            &early,
            &actor("repair_owner"),
            Attestation::NotApplied,
            &json!({"checked": "the target, before the late evidence"}),
        )
        .unwrap()
    else {
        panic!("attested not applied")
    };
    drop(early);

    // Later evidence: an observation recorded on the pathway after the verdict was made.
    let later = load_unknown(&rt, &id);
    let Reconciled::Unresolved(t) = rt
        .attest(
            &later,
            &actor("evidence_owner"),
            Attestation::Unresolved,
            &json!({"seen": "the server's log shows the request arrived"}),
        )
        .unwrap()
    else {
        panic!("attested unresolved")
    };
    later.keep_unknown(&rt, t).unwrap();

    let fresh = load_unknown(&rt, &id);
    let refused = fresh.require_repair(&rt, stale).unwrap_err();
    assert!(
        format!("{:?}", refused.error()).starts_with("StaleToken"),
        "{:?}",
        refused.error()
    );
    assert!(refused.error().to_string().contains("reconcile again"));
    assert_eq!(
        rt.pathway_record(&id).unwrap().unwrap().state,
        rpr::State::WriteStatusUnknown
    );
    assert!(rt.verify(None).unwrap().is_ok());
}

/// An executor that hands the write to a worker thread and then panics: the worker writes
/// once it is released, whatever happened to the thread that dispatched.
struct HandsOffThenPanics {
    root: std::path::PathBuf,
    log: std::path::PathBuf,
    release: Option<mpsc::Receiver<()>>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl Executor for HandsOffThenPanics {
    fn bind(&mut self, _: &Request) -> Result<Binding, Refusal> {
        Binding::new("hands-off", json!({"executor": "hands-off"}))
            .map_err(|e| Refusal::new("binding", e.to_string()))
    }
    fn prepare(&mut self, _: &Request, _: &Binding) -> Result<(), Refusal> {
        Ok(())
    }
    fn execute(&mut self, request: &Request) -> Delivery {
        let release = self.release.take().expect("one execute");
        let (root, log) = (self.root.clone(), self.log.clone());
        let request = request.clone();
        self.worker = Some(std::thread::spawn(move || {
            let _ = release.recv();
            let mut ex = CountingFile::new(&root, &log);
            let _ = ex.execute(&request);
        }));
        panic!("the executor panicked after handing its write to a worker (test)")
    }
}

fn dispatch_and_panic(rt: &Runtime, s: &Setup) -> (mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let StoredPathway::Approved(p) = rt.load(&s.id).unwrap() else {
        panic!("approved")
    };
    let (go, release) = mpsc::channel();
    let mut ex = HandsOffThenPanics {
        root: s.dir.path().join("root"),
        log: s.log(),
        release: Some(release),
        worker: None,
    };
    let joined = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let bound = p.bind(&mut ex).unwrap();
                let _ = bound.dispatch(rt, &actor("execution_actor"), &mut ex);
            })
            .join()
    });
    assert!(joined.is_err(), "the executor panicked");
    (go, ex.worker.take().expect("the worker started"))
}

/// A panic in an executor whose write lives on in a worker keeps the attempt in flight in
/// this process: neither the runtime that dispatched nor another one opened here (after
/// the first was dropped) takes it over, and nothing is sent twice.
#[test]
fn a_panic_in_an_executor_keeps_its_attempt_in_flight_while_the_process_lives() {
    let s = Setup::new("proof-panic");
    let lease = Duration::from_millis(300);
    let first = Runtime::builder(s.dir.db()).lease(lease).open().unwrap();
    let (go, worker) = dispatch_and_panic(&first, &s);

    let mut seen = Vec::new();
    let mut follow_up = |rt: &Runtime| match rt.load(&s.id).unwrap() {
        StoredPathway::InFlightElsewhere { .. } => seen.push("in flight".to_owned()),
        StoredPathway::Unknown(p) => {
            let (verdict, evidence) = follow(rt, p, &s);
            seen.push(format!("{verdict}: {evidence}"));
        }
        StoredPathway::Returned(_) => seen.push("returned: it was sent again".to_owned()),
        other => panic!("{other:?}"),
    };
    follow_up(&first);
    // The runtime is dropped too (as a panic unwinding through its owner would): its lease
    // is no longer renewed and lapses.
    drop(first);
    std::thread::sleep(lease * 2 + Duration::from_millis(300));
    let second = Runtime::open(s.dir.db()).unwrap();
    follow_up(&second);

    go.send(()).unwrap();
    worker.join().unwrap();
    assert_eq!(effects(&s.log()), 1, "{seen:?}");
    assert_eq!(seen[0], "in flight", "{seen:?}");
    assert!(
        seen[1] == "in flight" || seen[1].starts_with("unresolved"),
        "{seen:?}"
    );
}

/// Runs `during` inside `execute`, then lets the file executor write (or not).
struct StopsThenWrites<'a> {
    inner: CountingFile,
    during: Option<Box<dyn FnOnce() + 'a>>,
    write: bool,
}

impl Executor for StopsThenWrites<'_> {
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal> {
        self.inner.bind(request)
    }
    fn prepare(&mut self, request: &Request, binding: &Binding) -> Result<(), Refusal> {
        self.inner.prepare(request, binding)
    }
    fn execute(&mut self, request: &Request) -> Delivery {
        if let Some(during) = self.during.take() {
            during();
        }
        if self.write {
            self.inner.execute(request)
        } else {
            Delivery::NothingWritten {
                reason: "gave up".into(),
            }
        }
    }
}

/// Found by the model-based test (tests/core/model.rs), on SQLite. An owner that no process can
/// judge (`simulated_owner`: as on another machine) is stopped inside its executor past its
/// lease (its heartbeat frozen, as SIGSTOP freezes it); another runtime takes the attempt
/// over as unknown, and the repair owner attests *not applied*, accepting the risk that the
/// owner may still send. The owner resumes, writes, and reports success. That outcome is
/// evidence recorded after the verdict: the verdict must be refused now (`StaleToken`), and
/// a readback then finds the write. One write in the end.
#[test]
fn a_risk_accepted_before_the_owners_late_outcome_is_void_after_it() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let s = Setup::new("proof-late-outcome");
    let lease = Duration::from_millis(if pg::on() { 300 } else { 50 });
    let frozen = Arc::new(AtomicBool::new(false));
    let owner = Runtime::builder(s.dir.db())
        .lease(lease)
        .simulated_owner(true, Arc::clone(&frozen))
        .open()
        .unwrap();
    let other = Runtime::builder(s.dir.db()).lease(lease).open().unwrap();
    let StoredPathway::Approved(p) = owner.load(&s.id).unwrap() else {
        panic!("approved")
    };
    let risky = std::cell::RefCell::new(None);
    let during = || {
        frozen.store(true, Ordering::Relaxed);
        std::thread::sleep(lease * 3);
        let StoredPathway::Unknown(u) = other.load(&s.id).unwrap() else {
            panic!("a frozen, unverifiable owner past its lease is taken over")
        };
        let Reconciled::NotApplied(t) = other
            .attest(
                &u,
                &actor("repair_owner"),
                Attestation::NotApplied,
                &json!({"checked": "the target: nothing yet"}),
            )
            .unwrap()
        else {
            panic!("the repair owner may accept the risk")
        };
        assert!(
            t.evidence().get("accepted_risk").is_some(),
            "{}",
            t.evidence()
        );
        *risky.borrow_mut() = Some(t);
        frozen.store(false, Ordering::Relaxed);
    };
    let mut ex = StopsThenWrites {
        inner: s.executor(),
        during: Some(Box::new(during)),
        write: true,
    };
    let bound = p.bind(&mut ex).unwrap();
    let late = match bound.dispatch(&owner, &actor("execution_actor"), &mut ex) {
        Outcome::Unrecorded(u) => u.error.to_string(),
        other => {
            panic!("the late outcome of a taken-over attempt is not recorded as one: {other:?}")
        }
    };
    assert_eq!(effects(&s.log()), 1);

    let t = risky.borrow_mut().take().unwrap();
    let u = load_unknown(&other, &s.id);
    let used = match u.require_repair(&other, t) {
        Err(refused) => format!("refused: {}", refused.error()),
        Ok(repaired) => {
            let ready = repaired
                .repair(&other, &actor("repair_owner"), &json!({"by": "test"}), None)
                .unwrap();
            let mut ex = s.executor();
            let bound = ready.bind(&mut ex).unwrap();
            let _ = bound.dispatch(&other, &actor("resume_authority"), &mut ex);
            "accepted".to_owned()
        }
    };
    assert_eq!(
        effects(&s.log()),
        1,
        "the risky verdict was {used} after the owner's late outcome ({late})"
    );
    assert!(
        used.contains("StaleToken") || used.contains("reconcile again"),
        "{used}"
    );
    let u = load_unknown(&other, &s.id);
    let (verdict, evidence) = follow(&other, u, &s);
    assert_eq!(verdict, "applied", "{evidence}");
    assert!(other.verify(None).unwrap().is_ok());
}

/// A child made by `fork` that steps with (or loads through) its parent's runtime is
/// refused before anything is recorded or sent: its attempt would name the parent as its owner, so the parent's
/// death would be taken for the child's while the child may still be sending, and the call
/// taken over and sent again.
#[test]
#[expect(unsafe_code, reason = "the test forks, as a host that forks would")]
fn a_forked_child_may_not_step_with_its_parents_runtime() {
    use nix::unistd::{ForkResult, fork, pipe};
    use std::io::Read;
    let s = Setup::new("proof-fork");
    let rt = Runtime::open(s.dir.db()).unwrap();
    let StoredPathway::Approved(p) = rt.load(&s.id).unwrap() else {
        panic!("an admitted pathway")
    };
    let mut ex = s.executor();
    let bound = p.bind(&mut ex).unwrap();
    let before = db_dump(&s.dir.db());
    let (read, write) = pipe().unwrap();
    // SAFETY: the child only makes the step (refused before it reaches the store or the
    // executor), writes what it was told to the pipe and exits at once.
    match unsafe { fork() }.unwrap() {
        ForkResult::Child => {
            let said = match bound.dispatch(&rt, &actor("execution_actor"), &mut ex) {
                Outcome::NotSent(n) => n.error().to_string(),
                other => format!("not refused: {other:?}"),
            };
            // Loading (which may take an attempt over, a write) is refused as well.
            let said = match rt.load(&s.id) {
                Err(e) => format!("{said}\n{e}"),
                Ok(other) => format!("{said}\nload not refused: {other:?}"),
            };
            let _ = nix::unistd::write(&write, said.as_bytes());
            std::process::exit(0);
        }
        ForkResult::Parent { child } => {
            drop(write);
            let mut said = String::new();
            std::fs::File::from(read).read_to_string(&mut said).unwrap();
            nix::sys::wait::waitpid(child, None).unwrap();
            assert_eq!(
                said.matches("(a child made by fork) may not use it")
                    .count(),
                2,
                "{said}"
            );
        }
    }
    assert_eq!(effects(&s.log()), 0, "nothing was sent");
    assert_eq!(db_dump(&s.dir.db()), before, "nothing was recorded");
    // The process that opened the runtime sends it, once.
    let Outcome::Returned(_) = bound.dispatch(&rt, &actor("execution_actor"), &mut ex) else {
        panic!("the parent dispatches")
    };
    assert_eq!(effects(&s.log()), 1);
}

/// While the attempt's owner is proven running on this host (stopped inside its executor,
/// past its lease), no *not applied* is accepted for it, attested or not: SQLite never
/// takes such an owner over (it stays in flight elsewhere); PostgreSQL's takeover goes by
/// the lease alone, and the repair owner's attestation of *not applied* is then refused,
/// where before it was accepted "with the risk" and let the call be sent again while the
/// owner held it.
#[test]
fn a_not_applied_attestation_is_refused_while_the_owner_runs_here() {
    let s = Setup::new("proof-running");
    let lease = Duration::from_millis(600);
    let mut child = s.spawn(&[], None, lease);
    child.expect("RPR-IN-EXECUTOR");
    stop(&child, Signal::SIGSTOP);
    std::thread::sleep(lease * 2 + Duration::from_millis(400));
    let rt = Runtime::open(s.dir.db()).unwrap();
    match rt.load(&s.id).unwrap() {
        StoredPathway::InFlightElsewhere { .. } => assert!(!rt.is_postgres()),
        StoredPathway::Unknown(p) => {
            assert!(rt.is_postgres(), "SQLite took a live owner over");
            let refused = rt
                .attest(
                    &p,
                    &actor("repair_owner"),
                    Attestation::NotApplied,
                    &json!({"checked": "the target is empty"}),
                )
                .unwrap_err();
            assert!(
                matches!(refused, rpr::PathwayError::SenderRunning { .. }),
                "{refused:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    s.release();
    stop(&child, Signal::SIGCONT);
    let late = child.expect("RPR-OUTCOME");
    child.finish();
    assert_eq!(effects(&s.log()), 1, "the owner's outcome: {late}");
}
