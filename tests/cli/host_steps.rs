//! `rpr`'s commands for the other library steps (`hold`, `release`, `escalate`, `stop`,
//! `abort`, `attest`, `require-repair`), each driven through the `rpr` binary on a database
//! prepared by the library: the state they leave, the actor the ledger records, and a clear
//! refusal for a wrong state, a wrong actor or an unknown key.

use crate::common;
use crate::host_support;

use std::path::Path;

use common::{Scripted, actor, definition, runtime};
use host_support::{
    Scratch, attempts, by_key, event, events, kinds, pathways, run, text, verified,
};
use rpr::executor::{Delivery, Request};
use rpr::{
    ActionClass, Admission, Decision, Definition, Outcome, Pathway, Proposal, Runtime, stage,
};
use serde_json::json;

fn proposed(rt: &Runtime, key: &str) -> Pathway<stage::Proposed> {
    match rt
        .propose(&actor("proposer"), definition(key, ActionClass::Mutating))
        .unwrap()
    {
        Proposal::New(p) => p,
        other => panic!("expected a new pathway, got {other:?}"),
    }
}

fn admit(rt: &Runtime, key: &str, decision: Decision) -> Admission {
    proposed(rt, key)
        .admit(rt, &actor("decision_owner"), &|_| decision.clone())
        .unwrap()
}

fn dispatched(rt: &Runtime, key: &str, delivery: Delivery) -> Outcome {
    let p = admit(rt, key, Decision::Allow)
        .into_approved()
        .expect("not approved");
    let mut ex = Scripted::new(vec![delivery]);
    p.bind(&mut ex)
        .unwrap()
        .dispatch(rt, &actor("execution_actor"), &mut ex)
}

/// Prepares one pathway per key in the state its name says.
fn prepare(db: &Path) {
    let rt = runtime(db);
    assert!(matches!(
        admit(&rt, "approved", Decision::Allow),
        Admission::Approved(_)
    ));
    assert!(matches!(
        admit(&rt, "awaiting", Decision::Hold),
        Admission::AwaitingApproval(_)
    ));
    let ok = || Delivery::Succeeded { reply: json!({}) };
    assert!(matches!(
        dispatched(&rt, "returned", ok()),
        Outcome::Returned(_)
    ));
    assert!(matches!(
        dispatched(&rt, "partial", Delivery::Partial { reply: json!({}) }),
        Outcome::Partial(_)
    ));
    for key in ["unknown-a", "unknown-n", "unknown-u"] {
        let lost = Delivery::PossiblyWritten {
            reason: "reply lost".into(),
        };
        assert!(matches!(dispatched(&rt, key, lost), Outcome::Unknown(_)));
    }
}

/// Runs one host step on `key` as `who`; returns the exit status and the output.
fn step(db: &str, command: &str, key: &str, who: &str, more: &[&str]) -> (Option<i32>, String) {
    let args = [
        &[command, "--database", db, "--key", key, "--as", who][..],
        more,
    ]
    .concat();
    let output = run(&args);
    let out = text(&output);
    assert!(!out.contains("panicked"), "{args:?}:\n{out}");
    (output.status.code(), out)
}

/// The step succeeds with `code`, leaves `state`, and the ledger's last event names `who`.
fn ok(db: &Path, command: &str, key: &str, who: &str, more: &[&str], code: i32, state: &str) {
    let (got, out) = step(db.to_str().unwrap(), command, key, who, more);
    assert_eq!(got, Some(code), "{command} {key}:\n{out}");
    let (id, now) = by_key(db, key);
    assert_eq!(now, state, "{command} {key}:\n{out}");
    let ev = events(db, &id);
    let last = ev.last().unwrap();
    assert_eq!(last["actor"], who, "{command} {key}: {last:#}");
}

/// The step fails with `code` and says `needle`; nothing changes.
fn refused(db: &Path, command: &str, key: &str, who: &str, more: &[&str], code: i32, needle: &str) {
    let before = pathways(db);
    let (got, out) = step(db.to_str().unwrap(), command, key, who, more);
    assert_eq!(got, Some(code), "{command} {key}:\n{out}");
    assert!(
        out.contains(needle),
        "{command} {key}: lacks {needle:?}:\n{out}"
    );
    assert_eq!(pathways(db), before, "{command} {key} changed the pathway");
}

#[test]
fn hold_release_escalate_abort() {
    let dir = Scratch::new("steps-hold");
    let db = dir.join("rpr.db");
    prepare(&db);
    let db = db.as_path();

    refused(
        db,
        "hold",
        "approved",
        "decision_owner",
        &[],
        1,
        "decision_owner may not hold",
    );
    ok(
        db,
        "hold",
        "approved",
        "stop_authority",
        &["--reason", "wait"],
        0,
        "held",
    );
    refused(
        db,
        "hold",
        "approved",
        "stop_authority",
        &[],
        1,
        "does not apply in state held",
    );
    refused(
        db,
        "release",
        "approved",
        "residual_owner",
        &[],
        1,
        "may not release a hold",
    );
    ok(
        db,
        "release",
        "approved",
        "stop_authority",
        &[],
        0,
        "approved",
    );
    refused(
        db,
        "release",
        "approved",
        "stop_authority",
        &[],
        1,
        "in state approved",
    );
    ok(db, "hold", "approved", "stop_authority", &[], 0, "held");
    ok(
        db,
        "escalate",
        "approved",
        "stop_authority",
        &[],
        0,
        "human_gate",
    );
    ok(
        db,
        "escalate",
        "awaiting",
        "stop_authority",
        &[],
        0,
        "human_gate",
    );
    refused(
        db,
        "escalate",
        "awaiting",
        "stop_authority",
        &[],
        1,
        "in state human_gate",
    );

    let residuals = ["--residuals", "nothing was sent"];
    refused(
        db,
        "abort",
        "approved",
        "stop_authority",
        &residuals,
        1,
        "may not abort",
    );
    ok(
        db,
        "abort",
        "approved",
        "residual_owner",
        &residuals,
        0,
        "aborted",
    );
    refused(
        db,
        "abort",
        "approved",
        "residual_owner",
        &residuals,
        1,
        "in state aborted",
    );
    refused(
        db,
        "abort",
        "unknown-a",
        "residual_owner",
        &residuals,
        1,
        "in state write_status_unknown",
    );
    refused(
        db,
        "abort",
        "approved",
        "residual_owner",
        &[],
        2,
        "the following required arguments were not provided:\n  --residuals <TEXT>",
    );
    let (id, _) = by_key(db, "approved");
    let ev = events(db, &id);
    assert_eq!(
        ev.last().unwrap()["data"]["residuals"]["text"],
        "nothing was sent",
        "{:#}",
        ev.last().unwrap()
    );

    refused(
        db,
        "hold",
        "nope",
        "stop_authority",
        &[],
        1,
        "no pathway with id or key \"nope\"",
    );
    assert!(verified(db));
}

#[test]
fn stop_and_require_repair() {
    let dir = Scratch::new("steps-stop");
    let db = dir.join("rpr.db");
    prepare(&db);
    let db = db.as_path();

    refused(
        db,
        "stop",
        "approved",
        "stop_authority",
        &[],
        1,
        "in state approved",
    );
    refused(
        db,
        "stop",
        "returned",
        "execution_actor",
        &[],
        1,
        "may not stop",
    );
    ok(
        db,
        "stop",
        "returned",
        "stop_authority",
        &["--reason", "halt"],
        0,
        "stopped",
    );
    refused(
        db,
        "require-repair",
        "returned",
        "stop_authority",
        &[],
        1,
        "may not send to repair",
    );
    ok(
        db,
        "require-repair",
        "returned",
        "repair_owner",
        &[],
        0,
        "repair_required",
    );
    // Its attempt returned success unconfirmed: not settled, so it is not repaired (sent
    // again) until a readback or an attestation settles it; the refusal says so.
    refused(
        db,
        "repair",
        "returned",
        "repair_owner",
        &["--evidence", "looked"],
        1,
        "its last attempt is not settled (it may have taken effect); settle it first",
    );
    // An applied verdict is recorded; the pathway stays unsettled, so it is still not
    // repaired (a resume would send the effect again): only an abort ends it.
    ok(
        db,
        "attest",
        "returned",
        "evidence_owner",
        &["--verdict", "applied", "--evidence", "seen at the server"],
        3,
        "repair_required",
    );
    let (id, _) = by_key(db, "returned");
    let last = events(db, &id).pop().unwrap();
    assert_eq!(
        (&last["kind"], &last["data"]["verdict"]),
        (&json!("reconciled"), &json!("applied")),
        "{last:#}"
    );
    assert_eq!(last["data"]["evidence"]["text"], "seen at the server");
    assert_eq!(last["attempt_status"], "applied", "{last:#}");
    refused(
        db,
        "repair",
        "returned",
        "repair_owner",
        &["--evidence", "looked"],
        1,
        "its last attempt was found applied (the effect is there)",
    );
    // A later not-applied verdict cannot undo it (a repair and resume would send the
    // effect again), and what to do next is to abort.
    refused(
        db,
        "attest",
        "returned",
        "repair_owner",
        &[
            "--verdict",
            "not-applied",
            "--evidence",
            "nothing there now",
        ],
        1,
        "was found applied (its effect is there); a not-applied verdict cannot settle it",
    );
    let shown = host_support::run(["show", "--database", db.to_str().unwrap(), "--json", &id]);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(shown["pathway"]["next"]["action"], "abort", "{shown:#}");
    ok(
        db,
        "require-repair",
        "partial",
        "repair_owner",
        &[],
        0,
        "repair_required",
    );
    refused(
        db,
        "require-repair",
        "partial",
        "repair_owner",
        &[],
        1,
        "in state repair_required",
    );
    refused(
        db,
        "require-repair",
        "nope",
        "repair_owner",
        &[],
        1,
        "no pathway with id or key",
    );
    assert!(verified(db));
}

#[test]
fn attest_applies_each_verdict() {
    let dir = Scratch::new("steps-attest");
    let db = dir.join("rpr.db");
    prepare(&db);
    let db = db.as_path();
    let verdict = |v: &'static str| ["--verdict", v, "--evidence", "checked by hand"];

    refused(
        db,
        "attest",
        "unknown-a",
        "stop_authority",
        &verdict("applied"),
        1,
        "may not attest a verdict",
    );
    refused(
        db,
        "attest",
        "unknown-a",
        "evidence_owner",
        &verdict("maybe"),
        2,
        "invalid value 'maybe' for '--verdict <VERDICT>'\n  [possible values: applied, not-applied, unresolved]",
    );
    refused(
        db,
        "attest",
        "unknown-a",
        "evidence_owner",
        &["--verdict", "applied"],
        2,
        "the following required arguments were not provided:\n  --evidence <TEXT>",
    );
    refused(
        db,
        "attest",
        "approved",
        "evidence_owner",
        &verdict("applied"),
        1,
        "in state approved",
    );
    ok(
        db,
        "attest",
        "unknown-a",
        "evidence_owner",
        &verdict("applied"),
        0,
        "completed",
    );
    ok(
        db,
        "attest",
        "unknown-n",
        "repair_owner",
        &verdict("not-applied"),
        3,
        "repair_required",
    );
    ok(
        db,
        "attest",
        "unknown-u",
        "evidence_owner",
        &verdict("unresolved"),
        3,
        "write_status_unknown",
    );
    refused(
        db,
        "attest",
        "unknown-a",
        "evidence_owner",
        &verdict("applied"),
        1,
        "in state completed",
    );
    refused(
        db,
        "attest",
        "nope",
        "evidence_owner",
        &verdict("applied"),
        1,
        "no pathway with id or key",
    );
    assert!(verified(db));
}

/// `call put` on the fault server's `ledger` with key `key`, approved by alice.
fn put_with_key<'a>(config: &'a str, policy: &'a str, db: &'a str, key: &'a str) -> Vec<&'a str> {
    let mut args =
        host_support::call_args(config, policy, db, "put", r#"{"key": "k", "value": "v"}"#);
    args.extend(["--key", key]);
    args
}

#[test]
fn a_pathway_left_proposed_is_admitted_by_the_repeated_call() {
    let dir = Scratch::new("steps-proposed");
    let (config, policy) = (dir.fault_config("none"), dir.policy());
    let db_path = dir.join("rpr.db");
    let db = db_path.to_str().unwrap();

    // A host that stopped between propose and admit (killed, or the disk full) leaves
    // exactly what the library records here: the definition `call` builds for this
    // request under this policy (its server and the directory it runs in, this test's:
    // `run` starts `rpr` here), proposed by the agent, never admitted.
    let here = std::env::current_dir().unwrap();
    let authority = rpr::policy::Policy::load(&policy).unwrap().authority();
    assert_eq!(authority.approval_authority, actor("alice"));
    let definition = Definition::new(
        Request::new("put", json!({"key": "k", "value": "v"})),
        ActionClass::Mutating,
        "left",
        authority,
    )
    .with_metadata(json!({"server": "ledger", "cwd": here.to_str().unwrap()}));
    let rt = Runtime::open(&db_path).unwrap();
    let left = rt
        .propose(&actor("agent"), definition)
        .unwrap()
        .into_new()
        .expect("expected a new pathway");
    let id = left.id().to_owned();
    drop((left, rt));
    assert_eq!(
        by_key(&db_path, "left"),
        (id.clone(), "proposed".to_owned())
    );

    // `unresolved` says who acts next and how to finish it or refuse it.
    let output = run(["unresolved", "--database", db]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    for needle in [
        "proposed",
        "next: admit by decision_owner (host)",
        "to admit it: repeat the same `rpr call` (same --key \"left\"",
        &format!("rpr deny --database {db} --pathway {id} --as host"),
    ] {
        assert!(out.contains(needle), "unresolved lacks {needle:?}:\n{out}");
    }
    // No other step applies to it.
    let files = ["--config", config.as_str(), "--policy", policy.as_str()];
    for (command, who) in [("approve", "alice"), ("resume", "bob")] {
        refused(
            &db_path,
            command,
            "left",
            who,
            &files,
            1,
            "does not apply in state proposed",
        );
    }
    refused(
        &db_path,
        "abort",
        "left",
        "host",
        &["--residuals", "none"],
        1,
        "does not apply in state proposed",
    );

    // The repeated call admits it under the policy (a Human Gate), and carries it out.
    let output = run(put_with_key(&config, &policy, db, "left"));
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(
        out.contains(&format!(
            "pathway {id}, left proposed (never admitted): admitting it now"
        )),
        "{out}"
    );
    assert!(out.contains(&format!("pathway {id} is COMPLETED")), "{out}");
    assert_eq!(
        by_key(&db_path, "left"),
        (id.clone(), "completed".to_owned())
    );
    assert_eq!(dir.effects(), 1, "{out}");
    let ev = events(&db_path, &id);
    assert_eq!(
        kinds(&ev)[..3],
        ["proposed", "admitted", "human_gate"],
        "{ev:#?}"
    );
    assert_eq!(event(&ev, "proposed")["actor"], "agent");
    assert_eq!(event(&ev, "admitted")["actor"], "host");
    assert_eq!(attempts(&db_path, &id), 1);
    assert!(verified(&db_path));

    // Once admitted, the same call again is a replay: nothing is sent again.
    let output = run(put_with_key(&config, &policy, db, "left"));
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(out.contains("replayed, nothing sent again"), "{out}");
    assert_eq!(dir.effects(), 1, "{out}");
    assert_eq!(pathways(&db_path).len(), 1);
    assert!(verified(&db_path));
}

#[test]
fn a_pathway_left_proposed_can_be_denied_by_its_decision_owner() {
    let dir = Scratch::new("steps-proposed-deny");
    let db = dir.join("rpr.db");
    drop(proposed(&runtime(&db), "left"));
    let db = db.as_path();

    refused(
        db,
        "deny",
        "left",
        "approval_authority",
        &[],
        1,
        "approval_authority may not admit",
    );
    ok(
        db,
        "deny",
        "left",
        "decision_owner",
        &["--reason", "not wanted any more"],
        4,
        "denied",
    );
    let (id, _) = by_key(db, "left");
    let ev = events(db, &id);
    assert_eq!(kinds(&ev), ["proposed", "admitted"]);
    assert_eq!(ev[1]["data"]["decision"], "deny");
    assert_eq!(ev[1]["data"]["reason"], "not wanted any more");
    refused(
        db,
        "deny",
        "left",
        "decision_owner",
        &[],
        1,
        "in state denied",
    );
    assert!(verified(db));
}
