// Invariant: the intended flows compile with no warnings at all (no `must_use` noise) and run:
// propose -> admit -> Human Gate approval -> bind -> dispatch -> returned -> readback -> completed;
// unknown -> reconcile (applied) -> complete; unknown -> reconcile (not applied) -> repair -> resume -> completed.
#![deny(warnings)]

use std::path::Path;

use rpr::executor::file::{FileExecutor, FileReadback, WRITE_FILE};
use rpr::executor::{Binding, Delivery, Executor, Refusal, Request};
use rpr::stage::{Approved, Completed};
use rpr::token::Reconciled;
use rpr::{
    ActionClass, Actor, Admission, Authority, Decision, Definition, Outcome, Pathway, Role, Runtime, State, ALLOW_ALL,
};
use serde_json::json;

/// Carries the request like the file executor, but the reply is lost on the way back.
struct LostReply {
    inner: FileExecutor,
    /// Whether the write reaches the disk before the reply is lost.
    writes: bool,
}

impl Executor for LostReply {
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal> {
        self.inner.bind(request)
    }
    fn prepare(&mut self, request: &Request, binding: &Binding) -> Result<(), Refusal> {
        self.inner.prepare(request, binding)
    }
    fn execute(&mut self, request: &Request) -> Delivery {
        if self.writes {
            match self.inner.execute(request) {
                Delivery::Succeeded { .. } => {}
                other => return other,
            }
        }
        Delivery::PossiblyWritten { reason: "the connection dropped before the reply was read".into() }
    }
}

struct People {
    proposer: Actor,
    decider: Actor,
    approver: Actor,
    executor: Actor,
    evidence: Actor,
    repairer: Actor,
}

fn authority(p: &People) -> Authority {
    Authority::single(&p.decider)
        .with(Role::ApprovalAuthority, &p.approver)
        .with(Role::ExecutionActor, &p.executor)
        .with(Role::EvidenceOwner, &p.evidence)
        .with(Role::RepairOwner, &p.repairer)
        .with(Role::ResumeAuthority, &p.repairer)
}

fn write(path: &str, content: &str, key: &str, p: &People) -> Definition {
    let request = Request::new(WRITE_FILE, json!({"path": path, "content": content}));
    Definition::new(request, ActionClass::Mutating, key, authority(p))
}

fn admitted(rt: &Runtime, definition: Definition, p: &People) -> Pathway<Approved> {
    let proposed = rt.propose(&p.proposer, definition).expect("propose");
    let proposed = proposed.into_new().expect("a fresh idempotency key makes a new pathway");
    proposed.admit(rt, &p.decider, ALLOW_ALL).expect("admit").into_approved().expect("the policy allows")
}

/// Human Gate, approval, dispatch, success reply, readback.
fn gated_write(rt: &Runtime, files: &FileExecutor, p: &People) -> Pathway<Completed> {
    let proposed = rt.propose(&p.proposer, write("gated.txt", "hello", "gated", p)).expect("propose");
    let proposed = proposed.into_new().expect("a fresh idempotency key makes a new pathway");
    let gate = |_: &Definition| Decision::HumanGate;
    let Admission::HumanGate(gated) = proposed.admit(rt, &p.decider, &gate).expect("admit") else {
        panic!("the policy asks for a Human Gate")
    };
    let approval = rt.grant_approval(&gated, &p.approver).expect("grant");
    let approved = gated.approve(rt, approval.quorum(rt).expect("quorum")).expect("approve");
    let mut executor = files.clone();
    let bound = approved.bind(&mut executor).expect("bind");
    let Outcome::Returned(returned) = bound.dispatch(rt, &p.executor, &mut executor) else {
        panic!("a mutating success returns and waits for readback")
    };
    let mut readback = FileReadback::new(files);
    returned.confirm(rt, &p.evidence, &mut readback).expect("confirm").into_completed().expect("the file is there")
}

/// The reply is lost after the write: unknown, reconciled as applied, completed.
fn lost_reply_applied(rt: &Runtime, files: &FileExecutor, p: &People) -> Pathway<Completed> {
    let approved = admitted(rt, write("lost.txt", "written", "lost", p), p);
    let mut executor = LostReply { inner: files.clone(), writes: true };
    let bound = approved.bind(&mut executor).expect("bind");
    let Outcome::Unknown(unknown) = bound.dispatch(rt, &p.executor, &mut executor) else {
        panic!("a lost reply is unknown")
    };
    let Reconciled::Applied(token) = rt.reconcile(&unknown, &mut FileReadback::new(files)) else {
        panic!("readback finds the file")
    };
    unknown.complete(rt, token).expect("complete")
}

/// The request is lost before the write: unknown, reconciled as not applied, repaired, resumed.
fn lost_request_retried(rt: &Runtime, files: &FileExecutor, p: &People) -> Pathway<Completed> {
    let approved = admitted(rt, write("retry.txt", "second try", "retry", p), p);
    let mut lossy = LostReply { inner: files.clone(), writes: false };
    let bound = approved.bind(&mut lossy).expect("bind");
    let Outcome::Unknown(unknown) = bound.dispatch(rt, &p.executor, &mut lossy) else {
        panic!("a lost request is unknown")
    };
    let Reconciled::NotApplied(token) = rt.reconcile(&unknown, &mut FileReadback::new(files)) else {
        panic!("readback finds no file")
    };
    let repair = unknown.require_repair(rt, token).expect("require repair");
    let ready = repair.repair(rt, &p.repairer, &json!({"checked": "nothing was written"}), None).expect("repair");
    let mut executor = files.clone();
    let bound = ready.bind(&mut executor).expect("bind again");
    let Outcome::Returned(returned) = bound.dispatch(rt, &p.repairer, &mut executor) else {
        panic!("the resumed attempt returns")
    };
    let confirmed = returned.confirm(rt, &p.evidence, &mut FileReadback::new(files)).expect("confirm");
    confirmed.into_completed().expect("the file is there")
}

fn run(dir: &Path) {
    let files_dir = dir.join("files");
    std::fs::create_dir_all(&files_dir).expect("files dir");
    let rt = Runtime::open(dir.join("rpr.db")).expect("open");
    let files = FileExecutor::new(&files_dir).expect("file executor");
    let people = People {
        proposer: Actor::new("pat"),
        decider: Actor::new("dora"),
        approver: Actor::new("ada"),
        executor: Actor::new("exa"),
        evidence: Actor::new("eve"),
        repairer: Actor::new("rey"),
    };
    for done in [
        gated_write(&rt, &files, &people),
        lost_reply_applied(&rt, &files, &people),
        lost_request_retried(&rt, &files, &people),
    ] {
        assert_eq!(done.state(), State::Completed);
    }
    assert_eq!(std::fs::read_to_string(files_dir.join("retry.txt")).expect("read"), "second try");
    assert!(rt.verify(None).expect("verify").is_ok());
}

fn main() {
    let dir = std::env::temp_dir().join(format!("rpr-ui-happy-path-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    run(&dir);
    std::fs::remove_dir_all(&dir).expect("remove temp dir");
}
