//! The code agrees with `src/state_machine.json`: the edge table, the typed
//! transition list, and the edges the typed methods actually record.

use crate::common;

use std::collections::BTreeSet;

use common::*;
use rpr::executor::Delivery;
use rpr::token::{Attestation, Reconciled};
use rpr::{ActionClass, Admission, Decision, Outcome, Pathway, Proposal, Runtime, State};
use serde_json::{Value, json};

fn spec() -> Value {
    serde_json::from_str(include_str!("../../src/state_machine.json")).unwrap()
}

fn spec_edges() -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (from, tos) in spec()["edges"].as_object().unwrap() {
        for to in tos.as_array().unwrap() {
            out.insert((from.clone(), to.as_str().unwrap().to_owned()));
        }
    }
    out
}

fn names(edges: impl IntoIterator<Item = (State, State)>) -> BTreeSet<(String, String)> {
    edges
        .into_iter()
        .map(|(f, t)| (f.as_str().to_owned(), t.as_str().to_owned()))
        .collect()
}

#[test]
fn states_match_the_spec_file() {
    let spec = spec();
    let states: Vec<&str> = spec["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let code: Vec<&str> = State::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(states, code);
    let terminal: BTreeSet<&str> = spec["terminal"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    let code_terminal: BTreeSet<&str> = State::ALL
        .iter()
        .filter(|s| s.is_terminal())
        .map(|s| s.as_str())
        .collect();
    assert_eq!(terminal, code_terminal);
    for s in State::ALL {
        assert_eq!(s.as_str().parse::<State>().unwrap(), s);
    }
}

#[test]
fn edge_table_matches_the_spec_file() {
    assert_eq!(names(rpr::EDGES.iter().copied()), spec_edges());
}

#[test]
fn typed_transition_list_matches_the_spec_file() {
    assert_eq!(
        names(rpr::TRANSITIONS.iter().map(|&(f, t, _)| (f, t))),
        spec_edges()
    );
}

#[test]
fn no_state_outside_the_table_is_allowed() {
    for from in State::ALL {
        for to in State::ALL {
            let in_spec =
                spec_edges().contains(&(from.as_str().to_owned(), to.as_str().to_owned()));
            assert_eq!(from.allows(to), in_spec, "{from} -> {to}");
        }
    }
}

fn propose(rt: &Runtime, key: &str, class: ActionClass) -> Pathway<rpr::stage::Proposed> {
    match rt
        .propose(&actor("proposer"), definition(key, class))
        .unwrap()
    {
        Proposal::New(p) => p,
        other => panic!("expected a new pathway, got {other:?}"),
    }
}

fn admitted(rt: &Runtime, key: &str, class: ActionClass) -> Pathway<rpr::stage::Approved> {
    match propose(rt, key, class)
        .admit(rt, &actor("decision_owner"), &|_| Decision::Allow)
        .unwrap()
    {
        Admission::Approved(p) => p,
        other => panic!("{other:?}"),
    }
}

fn dispatch(rt: &Runtime, p: Pathway<rpr::stage::Approved>, d: Delivery) -> Outcome {
    let mut ex = Scripted::new(vec![d]);
    p.bind(&mut ex)
        .unwrap()
        .dispatch(rt, &actor("execution_actor"), &mut ex)
}

fn possibly() -> Delivery {
    Delivery::PossiblyWritten {
        reason: "timeout".into(),
    }
}

/// Drives every typed method and collects the edges the ledger records.
#[test]
fn every_typed_method_records_exactly_the_spec_edges() {
    let dir = TempDir::new("edges");
    let rt = runtime(&dir.db());
    let (dec, appr, stop, resid, repair, resume, evid) = (
        actor("decision_owner"),
        actor("approval_authority"),
        actor("stop_authority"),
        actor("residual_owner"),
        actor("repair_owner"),
        actor("resume_authority"),
        actor("evidence_owner"),
    );
    let hold = |_: &rpr::Definition| Decision::Hold;
    let gate = |_: &rpr::Definition| Decision::HumanGate;
    let deny = |_: &rpr::Definition| Decision::Deny("no".into());

    // A: allow, dispatch, returned, confirm by readback.
    let Outcome::Returned(p) = dispatch(
        &rt,
        admitted(&rt, "a", ActionClass::Mutating),
        Delivery::Succeeded { reply: json!({}) },
    ) else {
        panic!()
    };
    p.confirm(&rt, &evid, &mut Sees("applied"))
        .unwrap()
        .into_completed()
        .unwrap();

    // B: hold -> approve -> hold -> escalate -> approve -> hold -> release -> abort.
    let Admission::AwaitingApproval(p) = propose(&rt, "b", ActionClass::Mutating)
        .admit(&rt, &dec, &hold)
        .unwrap()
    else {
        panic!()
    };
    let ap = rt.grant_approval(&p, &appr).unwrap();
    let p = p
        .approve(&rt, ap.quorum(&rt).expect("quorum"))
        .unwrap()
        .hold(&rt, &stop, "wait")
        .unwrap()
        .escalate(&rt, &stop)
        .unwrap();
    let ap = rt.grant_approval(&p, &appr).unwrap();
    let p = p
        .approve(&rt, ap.quorum(&rt).expect("quorum"))
        .unwrap()
        .hold(&rt, &stop, "again")
        .unwrap()
        .release(&rt, &stop)
        .unwrap();
    p.abort(&rt, &resid, &json!({"left": "nothing"})).unwrap();

    // C: human gate, denied.
    let Admission::HumanGate(p) = propose(&rt, "c", ActionClass::Mutating)
        .admit(&rt, &dec, &gate)
        .unwrap()
    else {
        panic!()
    };
    p.deny(&rt, &appr, "no").unwrap();
    // D: denied by policy.
    let Admission::Denied(_) = propose(&rt, "d", ActionClass::Mutating)
        .admit(&rt, &dec, &deny)
        .unwrap()
    else {
        panic!()
    };
    // E: awaiting -> escalate -> abort.
    let Admission::AwaitingApproval(p) = propose(&rt, "e", ActionClass::Mutating)
        .admit(&rt, &dec, &hold)
        .unwrap()
    else {
        panic!()
    };
    p.escalate(&rt, &stop)
        .unwrap()
        .abort(&rt, &resid, &json!({}))
        .unwrap();
    // F: awaiting -> deny.
    let Admission::AwaitingApproval(p) = propose(&rt, "f", ActionClass::Mutating)
        .admit(&rt, &dec, &hold)
        .unwrap()
    else {
        panic!()
    };
    p.deny(&rt, &appr, "no").unwrap();
    // G: held -> abort.
    admitted(&rt, "g", ActionClass::Mutating)
        .hold(&rt, &stop, "x")
        .unwrap()
        .abort(&rt, &resid, &json!({}))
        .unwrap();
    // H: unknown -> reconciled applied.
    let Outcome::Unknown(p) = dispatch(&rt, admitted(&rt, "h", ActionClass::Mutating), possibly())
    else {
        panic!()
    };
    let Reconciled::Applied(t) = rt.reconcile(&p, &mut Sees("applied")) else {
        panic!()
    };
    p.complete(&rt, t).unwrap();
    // I: unknown -> not applied -> repair -> resume -> returned -> stop -> repair -> abort.
    let Outcome::Unknown(p) = dispatch(&rt, admitted(&rt, "i", ActionClass::Mutating), possibly())
    else {
        panic!()
    };
    let Reconciled::NotApplied(t) = rt.reconcile(&p, &mut Sees("not_applied")) else {
        panic!()
    };
    let p = p
        .require_repair(&rt, t)
        .unwrap()
        .repair(&rt, &repair, &json!({"fixed": true}), None)
        .unwrap();
    let mut ex = Scripted::ok();
    let Outcome::Returned(p) = p.bind(&mut ex).unwrap().dispatch(&rt, &resume, &mut ex) else {
        panic!()
    };
    let p = p
        .stop(&rt, &stop, "halt")
        .unwrap()
        .require_repair(&rt, &repair)
        .unwrap();
    p.abort(&rt, &resid, &json!({})).unwrap();
    // J: partial -> repair -> ready -> abort.
    let Outcome::Partial(p) = dispatch(
        &rt,
        admitted(&rt, "j", ActionClass::Mutating),
        Delivery::Partial { reply: json!({}) },
    ) else {
        panic!()
    };
    // Part of the effect happened: only a not-applied verdict (here attested by the
    // repair owner after compensating) makes it repairable.
    let p = p.require_repair(&rt, &repair).unwrap();
    let Reconciled::NotApplied(t) = rt
        .attest(
            &p,
            &repair,
            Attestation::NotApplied,
            &json!({"compensated": true}),
        )
        .unwrap()
    else {
        panic!()
    };
    let p = p
        .settle(&rt, t)
        .unwrap()
        .repair(&rt, &repair, &json!({}), Some(&json!({"undo": 1})))
        .unwrap();
    p.abort(&rt, &resid, &json!({})).unwrap();
    // K: tool failed: unknown (a tool error proves nothing), then read back not applied.
    let Outcome::Unknown(p) = dispatch(
        &rt,
        admitted(&rt, "k", ActionClass::Mutating),
        Delivery::ToolFailed { reply: json!({}) },
    ) else {
        panic!()
    };
    let Reconciled::NotApplied(t) = rt.reconcile(&p, &mut Sees("not_applied")) else {
        panic!()
    };
    p.require_repair(&rt, t).unwrap();
    // K2: rejected as not applied: straight to repair.
    let Outcome::Failed(_) = dispatch(
        &rt,
        admitted(&rt, "k2", ActionClass::Mutating),
        Delivery::Rejected {
            error: json!({"code": -32000, "message": "refused"}),
            class: rpr::executor::RejectionClass::NotApplied,
        },
    ) else {
        panic!()
    };
    // L: returned -> stop -> abort.
    let Outcome::Returned(p) = dispatch(
        &rt,
        admitted(&rt, "l", ActionClass::Mutating),
        Delivery::Succeeded { reply: json!({}) },
    ) else {
        panic!()
    };
    p.stop(&rt, &stop, "x")
        .unwrap()
        .abort(&rt, &resid, &json!({}))
        .unwrap();
    // M: read-only success completes directly. N: approved -> abort.
    dispatch(
        &rt,
        admitted(&rt, "m", ActionClass::ReadOnly),
        Delivery::Succeeded { reply: json!({}) },
    )
    .into_completed()
    .unwrap();
    admitted(&rt, "n", ActionClass::Mutating)
        .abort(&rt, &resid, &json!({}))
        .unwrap();
    // O: a read-only call that timed out ends failed (a read changes nothing).
    let Outcome::ReadFailed(_) =
        dispatch(&rt, admitted(&rt, "o", ActionClass::ReadOnly), possibly())
    else {
        panic!()
    };

    let observed: BTreeSet<(String, String)> = ledger_edges(&rt).into_iter().collect();
    assert_eq!(
        observed,
        spec_edges(),
        "the typed methods must record exactly the spec's edges"
    );
    assert!(rt.verify(None).unwrap().is_ok());
}

/// Issue 26: a read-only call that errors, is rejected, times out or is cut off ends in the
/// terminal state `failed`, its reason in the attempt's outcome and the ledger; the same
/// deliveries leave a call that may change something `repair_required` or unknown, never
/// failed (here its target even claims to be read-only: the definition decides).
#[test]
fn a_read_that_errors_times_out_or_is_cut_off_ends_failed_and_a_write_never_does() {
    let dir = TempDir::new("read-failed");
    let rt = runtime(&dir.db());
    let rejected = |class| Delivery::Rejected {
        error: json!({"code": -32000, "message": "no such key"}),
        class,
    };
    let cases = [
        (
            Delivery::ToolFailed {
                reply: json!({"content": [{"type": "text", "text": "ENOENT: no such file"}], "isError": true}),
            },
            "ENOENT: no such file",
            State::WriteStatusUnknown,
        ),
        (possibly(), "timeout", State::WriteStatusUnknown),
        (
            Delivery::PossiblyWritten {
                reason: "the server closed its stdout".into(),
            },
            "the server closed its stdout",
            State::WriteStatusUnknown,
        ),
        (
            rejected(rpr::executor::RejectionClass::Unknown),
            "no such key",
            State::WriteStatusUnknown,
        ),
        (
            rejected(rpr::executor::RejectionClass::NotApplied),
            "no such key",
            State::RepairRequired,
        ),
        (
            Delivery::NothingWritten {
                reason: "the pipe was closed before the request".into(),
            },
            "the pipe was closed before the request",
            State::RepairRequired,
        ),
    ];
    for (i, (delivery, reason, write_ends)) in cases.into_iter().enumerate() {
        let read = dispatch(
            &rt,
            admitted(&rt, &format!("read-{i}"), ActionClass::ReadOnly),
            delivery.clone(),
        );
        let Outcome::ReadFailed(failed) = read else {
            panic!("case {i}: a read ended {read}")
        };
        assert_eq!(failed.state(), State::Failed);
        let stored = rt.reader().pathway(failed.id()).unwrap().unwrap();
        assert_eq!(stored.state, State::Failed, "case {i}");
        let attempt = rt.reader().attempts(failed.id()).unwrap().pop().unwrap();
        assert_eq!(attempt.id, failed.attempt());
        let outcome = attempt.outcome.unwrap().to_string();
        assert!(outcome.contains(reason), "case {i}: {outcome}");
        let loaded = rt.load(failed.id()).unwrap();
        assert!(
            matches!(loaded, rpr::StoredPathway::Failed(_)),
            "case {i}: {loaded}"
        );

        let write = dispatch(
            &rt,
            admitted(&rt, &format!("write-{i}"), ActionClass::Mutating),
            delivery,
        );
        let state = match &write {
            Outcome::Failed(p) => p.state(),
            Outcome::Unknown(p) => p.state(),
            other => panic!("case {i}: a write ended {other}"),
        };
        assert_eq!(state, write_ends, "case {i}");
    }
    let failed_reads = rt
        .reader()
        .list_pathways(None, 100, Some(State::Failed))
        .unwrap();
    assert_eq!(failed_reads.len(), 6);
    assert!(
        rt.reader()
            .list_unresolved(None, 100)
            .unwrap()
            .iter()
            .all(|p| p.state != State::Failed),
        "a failed read is closed: not unresolved"
    );
    let report = rt.verify(None).unwrap();
    assert!(report.is_ok(), "{:#?}", report.problems);
}
