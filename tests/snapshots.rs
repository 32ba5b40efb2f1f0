//! Snapshots (insta) of the schema and of full ledgers for scripted stories, on the
//! deterministic runtime (sequential ids, ticking clock), so that every event, every
//! digest is reproducible. The owner of each attempt (host, pid, process start) is in
//! the chain and varies between runs; it is redacted, and with it the hashes that
//! cover it (tests/core/ledger.rs recomputes every hash).
//!
//! The ledgers are the same on either store (`RPR_TEST_BACKEND`), but for the event of a
//! takeover, which on PostgreSQL names the lapsed lease (its own snapshot). The schema is
//! SQLite's DDL, on SQLite whatever the backend under test.

// A test binary of its own, not a module of tests/core (which holds the other suites that
// run on both stores): `ledger_abandoned_attempt_recovered_as_unknown` panics inside a
// 500 ms lease on PostgreSQL, and with RUST_BACKTRACE=1 (as in .ci/run) the panic's
// backtrace is symbolized from the binary's debug info within that lease. From the
// 170 MB core binary that took long enough for the lease to lapse in 4 of 10 runs on a
// loaded machine (0 of 10 with RUST_BACKTRACE=0).

mod common;

use common::*;
use rpr::executor::Delivery;
use rpr::token::Reconciled;
use rpr::{
    ActionClass, Admission, Decision, Outcome, Pathway, Proposal, Runtime, SequentialIds,
    StepPoint, StoredPathway,
};
use serde_json::{Value, json};

fn propose(rt: &Runtime, key: &str) -> Pathway<rpr::stage::Proposed> {
    match rt
        .propose(&actor("proposer"), definition(key, ActionClass::Mutating))
        .unwrap()
    {
        Proposal::New(p) => p,
        other => panic!("{other:?}"),
    }
}

fn allowed(rt: &Runtime, key: &str) -> Pathway<rpr::stage::Approved> {
    match propose(rt, key)
        .admit(rt, &actor("decision_owner"), &|_| Decision::Allow)
        .unwrap()
    {
        Admission::Approved(p) => p,
        other => panic!("{other:?}"),
    }
}

/// The whole ledger, each event parsed from its canonical text.
fn ledger(rt: &Runtime) -> Value {
    let report = rt.verify(None).unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    Value::Array(
        rt.ledger_rows(0, usize::MAX)
            .unwrap()
            .into_iter()
            .map(|r| {
                json!({
                    "seq": r.seq,
                    "pathway_id": r.pathway_id,
                    "event": serde_json::from_str::<Value>(&r.event).unwrap(),
                    "prev_hash": r.prev_hash,
                    "hash": r.hash,
                })
            })
            .collect(),
    )
}

#[test]
fn schema() {
    let dir = TempDir::new("snap-schema");
    let rt = runtime(&dir.sqlite_db());
    insta::assert_snapshot!("schema", rt.reader().schema().unwrap().join(";\n\n"));
}

/// Held for approval, approved by the approval authority, dispatched, returned,
/// confirmed by readback.
#[test]
fn ledger_happy_path() {
    let dir = TempDir::new("snap-happy");
    let rt = runtime(&dir.db());
    let Admission::AwaitingApproval(p) = propose(&rt, "happy")
        .admit(&rt, &actor("decision_owner"), &|_| Decision::Hold)
        .unwrap()
    else {
        panic!()
    };
    let ap = rt.grant_approval(&p, &actor("approval_authority")).unwrap();
    let p = p.approve(&rt, ap.quorum(&rt).expect("quorum")).unwrap();
    let mut ex = Scripted::new(vec![Delivery::Succeeded {
        reply: json!({"written": 1}),
    }]);
    let Outcome::Returned(p) =
        p.bind(&mut ex)
            .unwrap()
            .dispatch(&rt, &actor("execution_actor"), &mut ex)
    else {
        panic!()
    };
    p.confirm(&rt, &actor("evidence_owner"), &mut Sees("applied"))
        .unwrap()
        .into_completed()
        .unwrap();
    insta::assert_json_snapshot!("ledger_happy_path", ledger(&rt), {
        "[].event.data.owner" => "[owner: host/pid/start/nonce]",
        "[].hash" => "[hash]",
        "[].prev_hash" => "[hash]",
    });
}

/// A timeout leaves the write unknown; a readback finds it applied; completed.
#[test]
fn ledger_unknown_then_reconciled_applied() {
    let dir = TempDir::new("snap-unknown-applied");
    let rt = runtime(&dir.db());
    let mut ex = Scripted::new(vec![Delivery::PossiblyWritten {
        reason: "timeout after the request was written".into(),
    }]);
    let Outcome::Unknown(p) = allowed(&rt, "unknown").bind(&mut ex).unwrap().dispatch(
        &rt,
        &actor("execution_actor"),
        &mut ex,
    ) else {
        panic!()
    };
    let Reconciled::Applied(t) = rt.reconcile(&p, &mut Sees("applied")) else {
        panic!()
    };
    p.complete(&rt, t).unwrap();
    insta::assert_json_snapshot!("ledger_unknown_then_reconciled_applied", ledger(&rt), {
        "[].event.data.owner" => "[owner: host/pid/start/nonce]",
        "[].hash" => "[hash]",
        "[].prev_hash" => "[hash]",
    });
}

/// A timeout leaves the write unknown; a readback is inconclusive (still unknown), a
/// second finds it not applied; repaired; resumed with a new attempt linked to the
/// old one; returned; confirmed.
#[test]
fn ledger_unknown_then_not_applied_repaired_and_resumed() {
    let dir = TempDir::new("snap-unknown-resumed");
    let rt = runtime(&dir.db());
    let mut ex = Scripted::new(vec![
        Delivery::PossiblyWritten {
            reason: "connection closed after the request was written".into(),
        },
        Delivery::Succeeded {
            reply: json!({"written": 1}),
        },
    ]);
    let Outcome::Unknown(p) = allowed(&rt, "resumed").bind(&mut ex).unwrap().dispatch(
        &rt,
        &actor("execution_actor"),
        &mut ex,
    ) else {
        panic!()
    };
    let Reconciled::Unresolved(t) = rt.reconcile(&p, &mut Sees("inconclusive")) else {
        panic!()
    };
    let p = p.keep_unknown(&rt, t).unwrap();
    let Reconciled::NotApplied(t) = rt.reconcile(&p, &mut Sees("not_applied")) else {
        panic!()
    };
    let p = p.require_repair(&rt, t).unwrap();
    let p = p
        .repair(
            &rt,
            &actor("repair_owner"),
            &json!({"checked": "target unchanged"}),
            None,
        )
        .unwrap();
    let Outcome::Returned(p) =
        p.bind(&mut ex)
            .unwrap()
            .dispatch(&rt, &actor("resume_authority"), &mut ex)
    else {
        panic!()
    };
    p.confirm(&rt, &actor("execution_actor"), &mut Sees("applied"))
        .unwrap()
        .into_completed()
        .unwrap();
    insta::assert_json_snapshot!(
        "ledger_unknown_then_not_applied_repaired_and_resumed",
        ledger(&rt),
        {
            "[].event.data.owner" => "[owner: host/pid/start/nonce]",
            "[].hash" => "[hash]",
            "[].prev_hash" => "[hash]",
        }
    );
}

/// A host abandons an attempt in flight (its runtime is gone); another runtime's
/// recovery records it as unknown; the evidence owner attests it applied.
#[test]
fn ledger_abandoned_attempt_recovered_as_unknown() {
    let dir = TempDir::new("snap-recovered");
    let start = 1_700_000_000_000;
    let host_a = Runtime::builder(dir.db())
        .clock(TickClock::at(start))
        .ids(SequentialIds::default())
        .lease(HOST_A_LEASE)
        .step_hook(|point| {
            // The host stops here (simulated by unwinding out of dispatch).
            assert_ne!(
                point,
                StepPoint::AfterAttemptCommit,
                "the host stops here (simulated)"
            );
        })
        .open()
        .unwrap();
    let mut ex = Scripted::ok();
    let bound = allowed(&host_a, "abandoned").bind(&mut ex).unwrap();
    let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = bound.dispatch(&host_a, &actor("execution_actor"), &mut ex);
    }));
    assert!(crashed.is_err());
    assert_eq!(ex.executed, 0, "the executor was never called");
    // The host is gone: its runtime is dropped, so nothing in this process holds the
    // attempt any more (owner liveness does not depend on the injected clock).
    drop(host_a);

    // An hour later, another runtime recovers it.
    let host_b = Runtime::builder(dir.db())
        .clock(TickClock::at(start + 3_600_000))
        .open()
        .unwrap();
    let mut all = host_b.recover().unwrap();
    if host_b.is_postgres() {
        // On PostgreSQL liveness is the lease alone, judged by the database's clock.
        assert!(
            matches!(all[..], [StoredPathway::InFlightElsewhere { .. }]),
            "not taken over while the lease runs: {all:?}"
        );
        std::thread::sleep(HOST_A_LEASE + std::time::Duration::from_millis(200));
        all = host_b.recover().unwrap();
    }
    let Some(StoredPathway::Unknown(unknown)) = all.pop() else {
        panic!("{all:?}")
    };
    let Reconciled::Applied(token) = host_b
        .attest(
            &unknown,
            &actor("evidence_owner"),
            rpr::token::Attestation::Applied,
            &json!({"ticket": "checked by hand"}),
        )
        .unwrap()
    else {
        panic!()
    };
    unknown.complete(&host_b, token).unwrap();
    if host_b.is_postgres() {
        // The takeover names the lapsed lease, the database's time and the new owner.
        insta::assert_json_snapshot!("ledger_abandoned_attempt_recovered_as_unknown_postgres", ledger(&host_b), {
            "[].event.data.owner" => "[owner: host/pid/start/nonce]",
            "[].event.data.taken_over_by" => "[owner: host/pid/start/nonce]",
            "[].event.data.lease_until" => "[database time]",
            "[].event.data.database_now" => "[database time]",
            "[].hash" => "[hash]",
            "[].prev_hash" => "[hash]",
        });
    } else {
        insta::assert_json_snapshot!("ledger_abandoned_attempt_recovered_as_unknown", ledger(&host_b), {
            "[].event.data.owner" => "[owner: host/pid/start/nonce]",
            "[].hash" => "[hash]",
            "[].prev_hash" => "[hash]",
        });
    }
}

/// Host A's lease: on PostgreSQL, host B takes its attempt over once this has lapsed. Long
/// enough that host B's first look (which must find it leased) comes before it lapses on a
/// loaded machine (500 ms did not, once, with CI and the model suite on two cores).
const HOST_A_LEASE: std::time::Duration = std::time::Duration::from_secs(2);
