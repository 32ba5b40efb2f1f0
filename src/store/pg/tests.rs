//! The PostgreSQL store's backend against a real server (unit tests: the backend is
//! crate-private; every write of the public API goes through a pathway's stage).
//!
//! Needs `RPR_PG_URL` (an owner role that may create schemas) and `RPR_PG_READER_URL` (a
//! role with `default_transaction_read_only = on` and no write privilege): `eval "$(bash
//! .ci/postgres)"` starts a server on loopback and prints both. With the feature on and the
//! variables unset, every test fails and says so: nothing is skipped.
//!
//! Each test works in a schema of its own (`PgBackend::open_in_schema`), dropped at its end
//! when it passed, kept for a look when it failed.

use std::sync::{Arc, Barrier, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{PgBackend, PgError};
use crate::ledger::ProblemKind;
use crate::store::StoreError;
use crate::store::pins::Candidate as PinCandidate;
use crate::store::steps_for_tests::{
    Pw, attempt_ev, ev, new_pathway, outcome_step, start_step, step,
};
use crate::store::{ApprovalWrite, AttemptWrite, Fence, Grant, Step};
use crate::store::{PinCheck, SCHEMA_VERSION};
use crate::{AttemptStatus, State};
use postgres::error::SqlState;
use postgres::{Client, NoTls};
use serde_json::{Value, json};

/// Tests share the server; the throughput measurement takes this for writing, so it runs
/// alone. A failed test poisons it; the others go on (each reports its own result).
static SERVER: RwLock<()> = RwLock::new(());

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!(
            "{name} is not set: the `postgres` feature's tests need a PostgreSQL server. \
             Start one with `eval \"$(bash .ci/postgres)\"` (it prints RPR_PG_URL and RPR_PG_READER_URL)"
        )
    })
}

fn url() -> String {
    env("RPR_PG_URL")
}

fn wall_ms() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// A fresh schema for one test, with an admin connection whose `search_path` is it.
struct Schema {
    name: String,
    admin: Client,
}

impl Schema {
    fn new(test: &str) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("t_{test}_{}_{nanos}", std::process::id());
        assert!(name.len() <= 63, "{name}");
        let mut admin = Client::connect(&url(), NoTls).expect("connect with RPR_PG_URL");
        admin
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS {name} CASCADE; CREATE SCHEMA {name}; SET search_path TO {name}"
            ))
            .unwrap();
        Self { name, admin }
    }

    fn open(&self) -> PgBackend {
        PgBackend::open_in_schema(&url(), &self.name).expect("open the store")
    }

    fn count(&mut self, sql: &str) -> i64 {
        self.admin.query_one(sql, &[]).unwrap().get(0)
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = self
                .admin
                .batch_execute(&format!("DROP SCHEMA {} CASCADE", self.name));
        }
    }
}

/// Proposes a pathway with key `key` and admits it in the same step (`approved`, v2), or
/// leaves it `awaiting_approval` (v2).
fn propose_in(b: &PgBackend, key: &str, state: State, at: i64) -> Result<Pw, StoreError> {
    let (new, events, pw) = new_pathway(key, state, at);
    b.insert_pathway(&new, events)?;
    Ok(pw)
}

/// Another session holding the rows of `ids` in `schema` locked (`FOR UPDATE` in an open
/// transaction, released by `ROLLBACK` or by dropping the client). The server ends the
/// session after `idle` seconds idle in its transaction, so a test that would wait on it
/// forever fails instead.
fn hold_rows(schema: &str, ids: &[&str], idle: u32) -> Client {
    let mut c = Client::connect(&url(), NoTls).unwrap();
    let list = ids
        .iter()
        .map(|id| format!("'{id}'"))
        .collect::<Vec<_>>()
        .join(", ");
    c.batch_execute(&format!(
        "SET idle_in_transaction_session_timeout = '{idle}s'; \
         BEGIN; SELECT 1 FROM {schema}.pathways WHERE id IN ({list}) FOR UPDATE"
    ))
    .unwrap();
    c
}

fn propose(b: &PgBackend, key: &str) -> Pw {
    propose_in(b, key, State::Approved, wall_ms()).unwrap()
}

/// Applies the step `make` builds from the handle, and moves the handle along.
fn advance(b: &PgBackend, pw: &mut Pw, make: impl FnOnce(&Pw) -> Step) {
    let s = make(pw);
    let to = s.to.unwrap_or(pw.state);
    pw.version = b.apply(s).unwrap();
    pw.state = to;
}

fn assert_verifies(b: &PgBackend) -> crate::ledger::Report {
    let report = b.verify(None).unwrap();
    assert!(report.is_ok(), "{:#?}", report.problems);
    report
}

fn store_error(e: impl Into<StoreError>) -> StoreError {
    e.into()
}

#[test]
fn migrates_from_empty_records_the_version_and_reopens_idempotently() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let mut s = Schema::new("migrate");
    let b = s.open();
    let (version, applied) = b.migrations().unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    assert_eq!(applied.len(), 1);
    assert_eq!(applied[0].0, SCHEMA_VERSION);
    let id = b.database_id().to_owned();
    assert!(id.starts_with("db_") && id.len() == 35, "{id}");
    assert_eq!(b.recorded_head().unwrap(), None);
    let pw = propose(&b, "m1");
    drop(b);

    // Re-open: nothing applied again, same identity, the data is there.
    let b = s.open();
    assert_eq!(b.database_id(), id);
    assert_eq!(b.migrations().unwrap(), (version, applied.clone()));
    assert_eq!(s.count("SELECT count(*) FROM rpr_migrations"), 1);
    assert_eq!(b.pathway(&pw.id).unwrap().unwrap().state, State::Approved);
    assert_eq!(assert_verifies(&b).events, 2);

    // Four hosts opening a fresh schema at once: one migrates, all see one identity.
    let fresh = Schema::new("migrate_race");
    let barrier = Arc::new(Barrier::new(4));
    let ids: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let barrier = Arc::clone(&barrier);
                let name = fresh.name.clone();
                scope.spawn(move || {
                    barrier.wait();
                    PgBackend::open_in_schema(&url(), &name)
                        .unwrap()
                        .database_id()
                        .to_owned()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(ids.iter().all(|i| i == &ids[0]), "{ids:?}");
    assert_ne!(ids[0], id, "each store has its own identity");

    // A schema written by a newer rpr is refused, and so is a schema of something else.
    s.admin
        .batch_execute("INSERT INTO rpr_migrations (version, description) VALUES (99, 'future')")
        .unwrap();
    match PgBackend::open_in_schema(&url(), &s.name).map_err(store_error) {
        Err(StoreError::SchemaTooNew { found: 99, .. }) => {}
        other => panic!("{other:?}"),
    }
    let mut other = Schema::new("not_rpr");
    other
        .admin
        .batch_execute("CREATE TABLE customers (id int)")
        .unwrap();
    match PgBackend::open_in_schema(&url(), &other.name).map_err(store_error) {
        Err(StoreError::NotRprDatabase(_)) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(
        other.count("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"),
        1
    );
    assert!(matches!(
        PgBackend::open_in_schema(&url(), "Bad-Name"),
        Err(PgError::SchemaName(_))
    ));
}

#[test]
fn a_stale_version_or_foreign_fence_is_refused_and_writes_nothing() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let mut s = Schema::new("cas");
    let b = s.open();
    let mut pw = propose(&b, "c1");
    let head = b.ledger_head().unwrap();
    let hold = |pw: &Pw| {
        step(
            pw,
            Some(State::Held),
            vec![ev("held", "ops", State::Approved, State::Held, json!({}))],
            wall_ms(),
        )
    };

    let mut stale = pw.clone();
    stale.version = 1;
    assert!(matches!(
        b.apply(hold(&stale)).map_err(store_error),
        Err(StoreError::Conflict { version: 1, .. })
    ));
    let mut foreign = pw.clone();
    foreign.fence.request_digest = "0".repeat(64);
    assert!(matches!(
        b.apply(hold(&foreign)).map_err(store_error),
        Err(StoreError::Conflict { .. })
    ));
    let illegal = step(
        &pw,
        Some(State::Completed),
        vec![ev(
            "readback",
            "agent",
            State::Approved,
            State::Completed,
            json!({}),
        )],
        wall_ms(),
    );
    assert!(matches!(
        b.apply(illegal).map_err(store_error),
        Err(StoreError::IllegalEdge { .. })
    ));
    let stored = b.pathway(&pw.id).unwrap().unwrap();
    assert_eq!((stored.state, stored.version), (State::Approved, 2));
    assert_eq!(b.ledger_head().unwrap(), head, "no event was appended");
    assert_eq!(s.count("SELECT count(*) FROM ledger"), 2);

    // The right handle moves it, once.
    advance(&b, &mut pw, hold);
    assert_eq!(pw.version, 3);
    let again = hold(&Pw {
        state: State::Approved,
        version: 2,
        ..pw.clone()
    });
    assert!(matches!(
        b.apply(again).map_err(store_error),
        Err(StoreError::Conflict { .. })
    ));
    assert_eq!(b.events(&pw.id).unwrap().len(), 3);
    assert_verifies(&b);
}

#[test]
fn two_connections_racing_one_step_exactly_one_wins() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let s = Schema::new("race");
    let hosts = [s.open(), s.open()];
    for round in 0..20 {
        let pw = propose(&hosts[0], &format!("r{round}"));
        let barrier = Barrier::new(2);
        let results: Vec<Result<i64, StoreError>> = std::thread::scope(|scope| {
            let handles: Vec<_> = hosts
                .iter()
                .enumerate()
                .map(|(h, b)| {
                    let pw = pw.clone();
                    let barrier = &barrier;
                    scope.spawn(move || {
                        let st = start_step(
                            &pw,
                            &format!("at_{round}_{h}"),
                            1,
                            None,
                            &format!("host{h}"),
                            60_000,
                            wall_ms(),
                        );
                        barrier.wait();
                        b.apply(st)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let won = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(won, 1, "round {round}: {results:?}");
        for r in results.into_iter().filter_map(Result::err) {
            assert!(matches!(store_error(r), StoreError::Conflict { .. }));
        }
        assert_eq!(hosts[1].attempts(&pw.id).unwrap().len(), 1);
    }
    // Two hosts proposing one idempotency key: one row, the other gets a unique violation.
    let barrier = Barrier::new(2);
    let results: Vec<Result<Pw, StoreError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = hosts
            .iter()
            .map(|b| {
                let barrier = &barrier;
                scope.spawn(move || {
                    barrier.wait();
                    propose_in(b, "same-key", State::Approved, wall_ms())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1);
    assert!(
        results
            .iter()
            .any(|r| r.as_ref().is_err_and(StoreError::is_unique_violation))
    );
    assert_verifies(&hosts[0]);
}

#[test]
fn a_new_attempt_only_after_the_previous_one_certainly_settled() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let s = Schema::new("attempt_rule");
    let b = s.open();
    let mut pw = propose(&b, "a1");
    advance(&b, &mut pw, |p| {
        start_step(p, "at_1", 1, None, "host0", 60_000, wall_ms())
    });

    // While at_1 is in flight, a second attempt is refused, whatever it names as previous
    // (the step's compare-and-set would succeed: this is the store's own rule).
    for previous in [None, Some("at_1")] {
        let second = start_step(&pw, "at_2", 2, previous, "host1", 60_000, wall_ms());
        match b.apply(second).map_err(store_error) {
            Err(StoreError::UnsettledAttempt {
                attempt, status, ..
            }) => {
                assert_eq!((attempt.as_str(), status.as_str()), ("at_1", "in_flight"));
            }
            other => panic!("{other:?}"),
        }
    }
    // Returned (a reply: it may have taken effect): still refused.
    advance(&b, &mut pw, |p| {
        outcome_step(
            p,
            "at_1",
            "attempt_returned",
            AttemptStatus::Returned,
            State::Running,
            &json!({"ok": true}),
            wall_ms(),
        )
    });
    match b
        .apply(start_step(
            &pw,
            "at_2",
            2,
            Some("at_1"),
            "host1",
            60_000,
            wall_ms(),
        ))
        .map_err(store_error)
    {
        Err(StoreError::UnsettledAttempt { status, .. }) => assert_eq!(status, "returned"),
        other => panic!("{other:?}"),
    }
    assert_eq!(b.attempts(&pw.id).unwrap().len(), 1);

    // A not-applied verdict, a repair: now a new attempt may follow at_1.
    let mut verdict = step(
        &pw,
        Some(State::RepairRequired),
        vec![attempt_ev(
            ev(
                "readback",
                "agent",
                State::Running,
                State::RepairRequired,
                json!({"verdict": "not_applied"}),
            ),
            "at_1",
            AttemptStatus::NotApplied,
        )],
        wall_ms(),
    );
    verdict.attempt = Some(AttemptWrite::Finish {
        id: "at_1".into(),
        status: "not_applied",
        outcome: None,
    });
    advance(&b, &mut pw, |_| verdict);
    advance(&b, &mut pw, |p| {
        step(
            p,
            Some(State::ReadyToResume),
            vec![ev(
                "repaired",
                "repair",
                State::RepairRequired,
                State::ReadyToResume,
                json!({}),
            )],
            wall_ms(),
        )
    });
    match b
        .apply(start_step(&pw, "at_2", 2, None, "host1", 60_000, wall_ms()))
        .map_err(store_error)
    {
        Err(StoreError::UnsettledAttempt { .. }) => {}
        other => panic!("a new attempt must name the settled one: {other:?}"),
    }
    advance(&b, &mut pw, |p| {
        start_step(p, "at_2", 2, Some("at_1"), "host1", 60_000, wall_ms())
    });
    let attempts = b.attempts(&pw.id).unwrap();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[1].previous_attempt.as_deref(), Some("at_1"));
    assert_eq!(attempts[1].status, AttemptStatus::InFlight);
    assert_verifies(&b);
}

/// One pathway's whole call: proposal and admission, attempt record, completion.
fn whole_call(b: &PgBackend, key: &str) {
    let mut pw = propose(b, key);
    let attempt = format!("at_{key}");
    advance(b, &mut pw, |p| {
        start_step(p, &attempt, 1, None, "host", 60_000, wall_ms())
    });
    advance(b, &mut pw, |p| {
        outcome_step(
            p,
            &attempt,
            "attempt_completed",
            AttemptStatus::Succeeded,
            State::Completed,
            &json!({"written": key}),
            wall_ms(),
        )
    });
}

#[test]
fn events_from_8_connections_form_one_chain_that_verifies_and_tampering_is_found() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let mut s = Schema::new("chain");
    let hosts: Vec<PgBackend> = (0..8).map(|_| s.open()).collect();
    std::thread::scope(|scope| {
        for (h, b) in hosts.iter().enumerate() {
            scope.spawn(move || {
                for i in 0..25 {
                    whole_call(b, &format!("h{h}_{i}"));
                }
            });
        }
    });
    let b = &hosts[0];
    let report = assert_verifies(b);
    assert_eq!(report.events, 8 * 25 * 4);
    assert_eq!(s.count("SELECT count(*) FROM ledger"), 800);
    assert_eq!(s.count("SELECT max(seq) FROM ledger"), 800);
    assert_eq!(
        s.count("SELECT count(*) FROM pathways WHERE state = 'completed'"),
        200
    );
    // The events of one pathway interleave with the others' in the one chain.
    let seqs: Vec<i64> = b.events("pw_h3_7").unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(seqs.len(), 4);
    let head = report.head.clone().unwrap();
    assert_eq!(b.recorded_head().unwrap(), Some((800, head.clone())));

    // A changed event: its hash no longer matches; a step on that pathway is refused.
    let (seq, pathway): (i64, String) = {
        let r = s
            .admin
            // An event in the middle of the chain that the edit below changes (which kind
            // lands at a given seq depends on how the hosts interleaved).
            .query_one(
                "SELECT seq, pathway_id FROM ledger WHERE seq >= 400 AND event LIKE '%\"actor\":\"agent\"%' ORDER BY seq LIMIT 1",
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    let changed = s
        .admin
        .execute(
            "UPDATE ledger SET event = replace(event, '\"actor\":\"agent\"', '\"actor\":\"mallory\"') WHERE seq = $1",
            &[&seq],
        )
        .unwrap();
    assert_eq!(changed, 1);
    let tampered = b.verify(Some(&head)).unwrap();
    assert!(
        tampered
            .problems
            .iter()
            .any(|p| p.kind == ProblemKind::HashMismatch && p.seq == Some(seq)),
        "{:#?}",
        tampered.problems
    );
    let last = b.pathway(&pathway).unwrap().unwrap();
    let pw = Pw {
        id: pathway.clone(),
        fence: Fence {
            definition_digest: String::new(),
            request_digest: last.request_digest.clone(),
        },
        state: last.state,
        version: last.version,
    };
    let any = step(
        &pw,
        None,
        vec![ev("readback", "ops", last.state, last.state, json!({}))],
        wall_ms(),
    );
    // Taken by a process that did not write the pathway's last step: one that did keeps
    // the pathway's replay (`store::replays`, checked against the stored version, which an
    // edit of an event's text leaves as it was), and which host wrote the edited event
    // depends on how the hosts interleaved. `verify` above finds the edit either way.
    let fresh = s.open();
    assert!(matches!(
        fresh.apply(any).map_err(store_error),
        Err(StoreError::Unexplained { .. })
    ));
    drop(fresh);
    s.admin
        .execute(
            "UPDATE ledger SET event = replace(event, '\"actor\":\"mallory\"', '\"actor\":\"agent\"') WHERE seq = $1",
            &[&seq],
        )
        .unwrap();
    assert_verifies(b);

    // A stored row the chain does not explain.
    s.admin
        .batch_execute("UPDATE attempts SET status = 'not_applied' WHERE id = 'at_h5_5'")
        .unwrap();
    let report = b.verify(None).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.kind == ProblemKind::AttemptMismatch),
        "{:#?}",
        report.problems
    );
    s.admin
        .batch_execute("UPDATE attempts SET status = 'succeeded' WHERE id = 'at_h5_5'")
        .unwrap();

    // A cut tail: the recorded head and the kept head both say so.
    s.admin
        .batch_execute("DELETE FROM ledger WHERE seq = 800")
        .unwrap();
    let cut = b.verify(Some(&head)).unwrap();
    let truncated = cut
        .problems
        .iter()
        .filter(|p| p.kind == ProblemKind::Truncated)
        .count();
    assert_eq!(truncated, 2, "{:#?}", cut.problems);
}

/// A read taken over after its lease lapsed ends `failed` (the runtime decides it is a read:
/// `Runtime::recover`), in the same transaction and ledger event as an unknown would be,
/// and the ledger checks clean.
#[test]
fn a_read_taken_over_after_its_lease_ends_failed() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let s = Schema::new("lease_read");
    let (owner, taker) = (s.open(), s.open());
    let mut pw = propose(&owner, "r1");
    advance(&owner, &mut pw, |p| {
        start_step(p, "at_r1", 1, None, "host-a/1", 200, wall_ms())
    });
    let lease = owner.attempts(&pw.id).unwrap()[0].lease_until.unwrap();
    let start = Instant::now();
    while taker.now_ms().unwrap() <= lease {
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(50));
    }
    let v = taker
        .take_over(&pw.id, "at_r1", "host-b/2", wall_ms(), true)
        .unwrap();
    let stored = taker.pathway(&pw.id).unwrap().unwrap();
    assert_eq!((stored.state, stored.version), (State::Failed, v));
    assert_eq!(
        taker.attempts(&pw.id).unwrap()[0].status,
        AttemptStatus::Unknown
    );
    let report = taker.verify(None).unwrap();
    assert!(report.problems.is_empty(), "{:#?}", report.problems);
}

#[test]
fn leases_are_judged_by_the_database_clock_and_a_late_outcome_is_fenced() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let s = Schema::new("lease");
    let (owner, taker) = (s.open(), s.open());
    let hour = 3_600_000;
    let mut pw = propose(&owner, "l1");
    // The owner's clock is an hour fast, the taker's two hours: neither enters the lease.
    advance(&owner, &mut pw, |p| {
        start_step(p, "at_l1", 1, None, "host-a/1", 1_500, wall_ms() + hour)
    });
    let lease = owner.attempts(&pw.id).unwrap()[0].lease_until.unwrap();
    let db_now = taker.now_ms().unwrap();
    assert!(
        lease > db_now && lease <= db_now + 1_500,
        "lease {lease}, database now {db_now}"
    );
    match taker.take_over(&pw.id, "at_l1", "host-b/2", wall_ms() + 2 * hour, false) {
        Err(PgError::LeaseHeld {
            lease_until,
            database_now,
            ..
        }) => {
            assert_eq!(lease_until, lease);
            assert!(database_now < lease_until);
        }
        other => panic!("{other:?}"),
    }
    // Renewed by the owner (by the database's clock), the lease outlives its first term.
    std::thread::sleep(Duration::from_millis(900));
    assert_eq!(
        owner
            .renew_leases("host-a/1", &["at_l1".into()], 1_500)
            .unwrap(),
        Vec::<String>::new()
    );
    std::thread::sleep(Duration::from_millis(900));
    assert!(taker.now_ms().unwrap() > lease, "past the first term");
    assert!(matches!(
        taker.take_over(&pw.id, "at_l1", "host-b/2", wall_ms() + 2 * hour, false),
        Err(PgError::LeaseHeld { .. })
    ));
    // The owner stops renewing (cut off): once the database's clock passes the lease, the
    // attempt is taken over, as unknown, in the ledger.
    let renewed = owner.attempts(&pw.id).unwrap()[0].lease_until.unwrap();
    let start = Instant::now();
    while taker.now_ms().unwrap() <= renewed {
        assert!(start.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(50));
    }
    let v = taker
        .take_over(&pw.id, "at_l1", "host-b/2", wall_ms() + 2 * hour, false)
        .unwrap();
    let stored = taker.pathway(&pw.id).unwrap().unwrap();
    assert_eq!(
        (stored.state, stored.version),
        (State::WriteStatusUnknown, v)
    );
    let attempt = &taker.attempts(&pw.id).unwrap()[0];
    assert_eq!(
        (
            attempt.status,
            attempt.owner.as_deref(),
            attempt.lease_until
        ),
        (AttemptStatus::Unknown, None, None)
    );
    let events = taker.events(&pw.id).unwrap();
    let takeover: Value = serde_json::from_str(&events.last().unwrap().event).unwrap();
    assert_eq!(takeover["kind"], "recovered_unknown");
    assert_eq!(takeover["data"]["owner"], "host-a/1");
    assert_eq!(takeover["data"]["taken_over_by"], "host-b/2");
    assert_eq!(takeover["data"]["lease_until"], renewed);
    // Taking over twice finds nothing in flight.
    assert!(matches!(
        taker.take_over(&pw.id, "at_l1", "host-b/2", wall_ms(), false),
        Err(PgError::NotInFlight { .. })
    ));

    // The owner comes back: its lease is gone, and its late outcome is refused and recorded.
    assert_eq!(
        owner
            .renew_leases("host-a/1", &["at_l1".into()], 1_500)
            .unwrap(),
        vec!["at_l1".to_owned()]
    );
    let late = outcome_step(
        &pw,
        "at_l1",
        "attempt_completed",
        AttemptStatus::Succeeded,
        State::Completed,
        &json!({"written": "l1"}),
        wall_ms() + hour,
    );
    let seq = match owner.apply(late) {
        Err(StoreError::Fenced {
            attempt,
            status,
            recorded_seq,
            ..
        }) => {
            assert_eq!((attempt.as_str(), status.as_str()), ("at_l1", "unknown"));
            recorded_seq
        }
        other => panic!("{other:?}"),
    };
    let events = owner.events(&pw.id).unwrap();
    let refusal = events.last().unwrap();
    assert_eq!(refusal.seq, seq);
    let refusal: Value = serde_json::from_str(&refusal.event).unwrap();
    assert_eq!(refusal["kind"], "late_outcome_refused");
    assert_eq!(refusal["from"], "write_status_unknown");
    assert_eq!(refusal["to"], "write_status_unknown");
    assert_eq!(refusal["data"]["late_status"], "succeeded");
    assert_eq!(refusal["data"]["late_evidence"], json!({"written": "l1"}));
    let stored = owner.pathway(&pw.id).unwrap().unwrap();
    assert_eq!(
        stored.state,
        State::WriteStatusUnknown,
        "the late outcome changed nothing"
    );
    // An outcome for an attempt the pathway never had is refused, and not recorded.
    let bogus = outcome_step(
        &pw,
        "at_never",
        "attempt_completed",
        AttemptStatus::Succeeded,
        State::Completed,
        &json!({}),
        wall_ms(),
    );
    assert!(matches!(
        owner.apply(bogus).map_err(store_error),
        Err(StoreError::Corrupt(_))
    ));
    assert_eq!(owner.events(&pw.id).unwrap().len(), events.len());
    let attempt = &owner.attempts(&pw.id).unwrap()[0];
    assert_eq!(
        (attempt.status, &attempt.outcome),
        (AttemptStatus::Unknown, &None)
    );
    assert_verifies(&owner);
}

#[test]
fn the_read_only_role_reads_and_cannot_write() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let mut s = Schema::new("reader");
    let b = s.open();
    let pw = propose(&b, "ro1");
    let reader_url = env("RPR_PG_READER_URL");
    let reader_role = reader_url
        .parse::<postgres::Config>()
        .unwrap()
        .get_user()
        .unwrap()
        .to_owned();
    // What .ci/postgres's default privileges give it, said explicitly for any server.
    s.admin
        .batch_execute(&format!(
            "GRANT USAGE ON SCHEMA {0} TO {reader_role}; GRANT SELECT ON ALL TABLES IN SCHEMA {0} TO {reader_role}",
            s.name
        ))
        .unwrap();

    let r = PgBackend::open_read_only(&reader_url, Some(&s.name)).unwrap();
    assert_eq!(r.database_id(), b.database_id());
    assert_eq!(r.pathway(&pw.id).unwrap().unwrap().state, State::Approved);
    assert_eq!(assert_verifies(&r).events, 2);
    let refused = propose_in(&r, "ro2", State::Approved, wall_ms()).unwrap_err();
    let StoreError::Postgres(refused) = refused else {
        panic!("expected the server's refusal, got {refused:?}");
    };
    assert_eq!(
        refused.code(),
        Some(&SqlState::READ_ONLY_SQL_TRANSACTION),
        "{refused:?}"
    );
    assert!(
        PgBackend::open_in_schema(&reader_url, &s.name).is_err(),
        "the reader cannot migrate"
    );

    // The role's own connection: read-only by default, and without the privilege when it
    // turns that off.
    let mut raw = Client::connect(&reader_url, NoTls).unwrap();
    raw.batch_execute(&format!("SET search_path TO {}", s.name))
        .unwrap();
    let insert = "INSERT INTO meta (key, value) VALUES ('x', 'y')";
    let e = raw.batch_execute(insert).unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::READ_ONLY_SQL_TRANSACTION), "{e}");
    raw.batch_execute("SET default_transaction_read_only = off")
        .unwrap();
    for sql in [
        insert,
        "UPDATE pathways SET state = 'completed'",
        "DELETE FROM ledger",
        "CREATE TABLE x (y int)",
    ] {
        let e = raw.batch_execute(sql).unwrap_err();
        assert_eq!(
            e.code(),
            Some(&SqlState::INSUFFICIENT_PRIVILEGE),
            "{sql}: {e}"
        );
    }
    assert_eq!(s.count("SELECT count(*) FROM meta WHERE key = 'x'"), 0);
    assert_eq!(b.pathway(&pw.id).unwrap().unwrap().state, State::Approved);
}

#[test]
fn approvals_are_fenced_and_used_once() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let s = Schema::new("approval");
    let b = s.open();
    let mut pw = propose_in(&b, "ap1", State::AwaitingApproval, wall_ms()).unwrap();
    let grant = |pw: &Pw, version: i64| {
        b.grant_approval(Grant {
            pathway: pw.id.clone(),
            expected: State::AwaitingApproval,
            version,
            fence: pw.fence.clone(),
            id: "ap_1".into(),
            request_digest: pw.fence.request_digest.clone(),
            approver: "alice".into(),
            at: wall_ms(),
            event: ev(
                "approval_granted",
                "alice",
                State::AwaitingApproval,
                State::AwaitingApproval,
                json!({"approval": "ap_1", "request_digest": pw.fence.request_digest}),
            ),
        })
    };
    assert!(matches!(
        grant(&pw, 1).map_err(store_error),
        Err(StoreError::Conflict { .. })
    ));
    grant(&pw, 2).unwrap();
    let approve = |pw: &Pw, id: &str| {
        let mut s = step(
            pw,
            Some(State::Approved),
            vec![ev(
                "approved",
                "alice",
                State::AwaitingApproval,
                State::Approved,
                json!({"approval": id, "request_digest": pw.fence.request_digest}),
            )],
            wall_ms(),
        );
        s.approval = Some(ApprovalWrite::Use {
            ids: vec![id.into()],
            request_digest: pw.fence.request_digest.clone(),
            not_before: None,
        });
        s
    };
    assert!(matches!(
        b.apply(approve(&pw, "ap_unknown")).map_err(store_error),
        Err(StoreError::ApprovalUnusable(_))
    ));
    advance(&b, &mut pw, |p| approve(p, "ap_1"));
    assert_eq!(pw.state, State::Approved);
    assert_verifies(&b);
}

#[test]
fn tool_pins_first_sight_match_change_and_accept() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let s = Schema::new("pins");
    let b = s.open();
    let candidate = |digest: &str| PinCandidate {
        server: "files".into(),
        tool: "write".into(),
        digest: digest.into(),
        binding: format!("{{\"d\":\"{digest}\"}}"),
        definition: "{\"name\":\"write\"}".into(),
    };
    assert!(matches!(
        b.check_pin(&candidate("d1"), "gate", 1).unwrap(),
        PinCheck::FirstSight(_)
    ));
    assert!(matches!(
        b.check_pin(&candidate("d1"), "gate", 2).unwrap(),
        PinCheck::Matches(_)
    ));
    match b.check_pin(&candidate("d2"), "gate", 3).unwrap() {
        PinCheck::Changed(pin) => {
            assert_eq!(pin.digest, "d1");
            assert_eq!(pin.seen.unwrap().digest, "d2");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        b.accept_pin("files", "write", "d3", "ops", 4)
            .map_err(store_error),
        Err(StoreError::NoSuchPin { .. })
    ));
    let pin = b.accept_pin("files", "write", "d2", "ops", 5).unwrap();
    assert_eq!(
        (pin.digest.as_str(), pin.pinned_by.as_str(), pin.seen),
        ("d2", "ops", None)
    );
    assert!(matches!(
        b.check_pin(&candidate("d2"), "gate", 6).unwrap(),
        PinCheck::Matches(_)
    ));
}

/// The measurement behind docs/storage.md's "One global chain, measured": whole calls (4
/// events in 3 transactions each) from 1 connection, from 8 connections on one store (one
/// chain: every transaction takes the head lock), and from 8 connections on 8 stores (8
/// schemas: the same transactions with no head shared, which is what the lock costs).
/// Prints events and transactions per second; asserts only that every chain verifies. Runs
/// alone (it takes the server lock for writing).
#[test]
fn ledger_append_rate_with_1_and_8_connections() {
    let _server = SERVER.write().unwrap_or_else(PoisonError::into_inner);
    let shared = Schema::new("rate");
    let own: Vec<Schema> = (0..8).map(|i| Schema::new(&format!("rate{i}"))).collect();
    let runs: [(&str, Vec<&Schema>, usize); 3] = [
        ("1 connection, one chain", vec![&shared], 300),
        ("8 connections, one chain", vec![&shared; 8], 60),
        (
            "8 connections, 8 chains (no shared head)",
            own.iter().collect(),
            60,
        ),
    ];
    let mut lines = Vec::new();
    for (run, (label, schemas, calls)) in runs.iter().enumerate() {
        let hosts: Vec<PgBackend> = schemas.iter().map(|s| s.open()).collect();
        let started = Instant::now();
        std::thread::scope(|scope| {
            for (h, b) in hosts.iter().enumerate() {
                scope.spawn(move || {
                    for i in 0..*calls {
                        whole_call(b, &format!("run{run}_h{h}_{i}"));
                    }
                });
            }
        });
        let seconds = started.elapsed().as_secs_f64();
        let events = 4 * calls * hosts.len();
        #[expect(clippy::cast_precision_loss, reason = "a rate for people")]
        let rate = events as f64 / seconds;
        lines.push(format!(
            "{label}: {events} events in {seconds:.2} s = {rate:.0} events/s, {:.0} transactions/s",
            rate * 3.0 / 4.0
        ));
        for b in &hosts {
            assert_verifies(b);
        }
    }
    for line in &lines {
        eprintln!("pg ledger rate: {line}");
    }
}

/// The backend pid of `client`'s session.
fn backend_pid(client: &mut Client) -> i32 {
    client
        .query_one("SELECT pg_backend_pid()", &[])
        .unwrap()
        .get(0)
}

/// One `PgBackend` with a pool of 3: two steps on two pathways whose rows another session
/// holds both wait **in the database at once** (two connections of the one backend, each
/// blocked by the holder), a read meanwhile takes the third, and both steps give up after
/// the `lock_timeout` set before those connections were opened: it applies to every
/// connection of the pool. Only one connection was opened until steps overlapped.
#[test]
fn a_pooled_backend_runs_steps_of_two_pathways_at_once_with_its_lock_timeout_on_each_connection() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let mut s = Schema::new("pool_overlap");
    let b = s.open().connections(3);
    // Long enough for both steps to be seen blocked on a loaded machine (two test threads
    // starting and taking their connections took over 4.5 s there once, in a CI run beside
    // two idle-priority fuzzers).
    b.set_lock_timeout(Duration::from_secs(10)).unwrap();
    let (one, two) = (propose(&b, "x"), propose(&b, "y"));
    assert_eq!(
        b.open_connections(),
        1,
        "opened lazily: one thread, one connection"
    );

    // Were a connection without the lock_timeout, the server ends the holder after 25 s and
    // its step goes through: the test fails instead of waiting forever.
    let mut holder = hold_rows(&s.name, &[&one.id, &two.id], 25);
    let holder_pid = backend_pid(&mut holder);
    let results: Vec<Result<i64, StoreError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = [&one, &two]
            .into_iter()
            .enumerate()
            .map(|(i, pw)| {
                let b = &b;
                scope.spawn(move || {
                    b.apply(start_step(
                        pw,
                        &format!("at_{i}"),
                        1,
                        None,
                        "host",
                        60_000,
                        wall_ms(),
                    ))
                })
            })
            .collect();
        // Both steps wait on the holder's row locks at the same time (each gives up after
        // its 10 s lock_timeout, so both are seen blocked within 9.5 s or never).
        let deadline = Instant::now() + Duration::from_millis(9500);
        let mut waiting = 0;
        while waiting < 2 && Instant::now() < deadline {
            waiting = s.count(&format!(
                "SELECT count(*) FROM pg_stat_activity WHERE {holder_pid} = ANY(pg_blocking_pids(pid))"
            ));
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(waiting, 2, "two connections of one backend blocked at once");
        // A third connection serves a read meanwhile.
        assert!(b.now_ms().is_ok());
        assert_eq!(b.open_connections(), 3);
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in results {
        let err = r.unwrap_err();
        // The server's LOCK_NOT_AVAILABLE, which the store reports as busy (nothing written,
        // the step can be taken again).
        assert!(
            matches!(err, StoreError::Busy { .. }),
            "each connection waited its lock_timeout: {err:?}"
        );
    }
    holder.batch_execute("ROLLBACK").unwrap();
    assert_eq!(b.attempts(&one.id).unwrap().len(), 0, "nothing written");
    assert_eq!(b.attempts(&two.id).unwrap().len(), 0, "nothing written");
    assert_eq!(b.open_connections(), 3, "healthy connections are kept");
    assert_verifies(&b);
}

/// A pooled connection that the server ends (`pg_terminate_backend`, as a failover or an
/// administrator would) is not given back: at most the one step that was using it fails,
/// with a connection error; the next step opens a new connection and goes through.
#[test]
fn a_connection_the_server_ended_is_replaced_not_reused() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let mut s = Schema::new("pool_broken");
    let app = format!("rpr_pool_broken_{}", wall_ms());
    let b = PgBackend::open_in_schema(&format!("{}?application_name={app}", url()), &s.name)
        .unwrap()
        .connections(1);
    for round in 0..3 {
        let ended = s.count(&format!(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '{app}'"
        ));
        assert_eq!(ended, 1, "round {round}: the pool's one connection");
        // Give the client a moment to see the end (or not: either way at most one failure).
        std::thread::sleep(Duration::from_millis(50));
        if let Err(e) = b.now_ms() {
            let PgError::Postgres(pg) = &e else {
                panic!("round {round}: {e:?}")
            };
            assert!(
                pg.is_closed() || pg.as_db_error().is_some_and(|d| d.severity() == "FATAL"),
                "round {round}: a connection error: {e:?}"
            );
        }
        whole_call(&b, &format!("k{round}"));
        assert_eq!(b.open_connections(), 1);
    }
    assert_verifies(&b);
}

/// Group commit (`batch.rs`): steps of concurrent callers on one backend share commits,
/// every one of them is durable and in the one chain, and the chain verifies.
#[test]
fn concurrent_steps_share_commits_and_form_one_chain() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let mut s = Schema::new("group_commit");
    let b = s.open();
    let (threads, calls) = (16, 8);
    let start = Barrier::new(threads);
    std::thread::scope(|scope| {
        for t in 0..threads {
            let (b, start) = (&b, &start);
            scope.spawn(move || {
                start.wait();
                for i in 0..calls {
                    whole_call(b, &format!("gc_{t}_{i}"));
                }
            });
        }
    });
    // whole_call: the pathway (with its admission), then two steps.
    let steps = u64::try_from(threads * calls * 3).unwrap();
    let (done, commits, _) = b.batch_stats();
    assert_eq!(done, steps, "every step durable");
    assert!(
        commits < steps,
        "{commits} commits for {steps} steps: concurrent steps share commits"
    );
    let report = assert_verifies(&b);
    assert_eq!(
        s.count("SELECT count(*) FROM ledger"),
        i64::try_from(threads * calls * 4).unwrap(),
        "four events a call, in one chain ({report:?})"
    );
}

/// A step whose pathway's row another transaction holds waits in a batch of its own (a
/// later step of a batch asks with `NOWAIT` and is put back, so a batch never waits for a
/// row lock while it holds the ledger head): the other callers' steps are committed
/// meanwhile, and the held step goes through once the row is free.
#[test]
fn a_step_waiting_for_a_row_lock_held_elsewhere_holds_up_no_other_step() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let s = Schema::new("group_commit_lock");
    let b = s.open();
    b.set_lock_timeout(Duration::from_secs(30)).unwrap();
    let held = propose(&b, "held");
    let others: Vec<Pw> = (0..12).map(|i| propose(&b, &format!("free{i}"))).collect();
    let mut holder = hold_rows(&s.name, &[&held.id], 60);
    let released = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (b, released) = (&b, &released);
        let waiting = scope.spawn(move || {
            let r = b.apply(start_step(
                &held,
                "at_held",
                1,
                None,
                "host",
                60_000,
                wall_ms(),
            ));
            (r, released.load(std::sync::atomic::Ordering::SeqCst))
        });
        // Let the held step reach its lock (first of its batch, or put back and then first).
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        let handles: Vec<_> = others
            .iter()
            .enumerate()
            .map(|(i, pw)| {
                scope.spawn(move || {
                    b.apply(start_step(
                        pw,
                        &format!("at_free{i}"),
                        1,
                        None,
                        "host",
                        60_000,
                        wall_ms(),
                    ))
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap().expect("a step on a free pathway");
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the free steps waited {:?}",
            started.elapsed()
        );
        assert!(!waiting.is_finished(), "the held step waits for its row");
        released.store(true, std::sync::atomic::Ordering::SeqCst);
        holder.batch_execute("ROLLBACK").unwrap();
        let (r, after_release) = waiting.join().unwrap();
        r.expect("the held step, once its row is free");
        assert!(
            after_release,
            "the held step went through only after the release"
        );
    });
    assert_verifies(&b);
}

/// In one batch, a step refused after it appended events (a new pathway whose first step
/// loses its compare-and-set: the pathway's events were chained, then rolled back to the
/// savepoint) leaves the ledger head as it was before it, so the next step of the batch
/// chains after the previous kept step, not after the rolled-back events. The batch is
/// made by holding both leaders (`LEADERS`) on rows another transaction locks while three
/// steps queue.
#[test]
fn a_step_rolled_back_inside_a_batch_leaves_the_head_to_the_next_step() {
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let s = Schema::new("group_commit_rollback");
    let b = s.open();
    b.set_lock_timeout(Duration::from_secs(30)).unwrap();
    let held: Vec<Pw> = (0..2).map(|i| propose(&b, &format!("held{i}"))).collect();
    let free: Vec<Pw> = (0..2).map(|i| propose(&b, &format!("free{i}"))).collect();
    let mut holder = hold_rows(&s.name, &[&held[0].id, &held[1].id], 60);
    let (new, events, refused) = new_pathway("refused", State::Approved, wall_ms());
    let mut wrong = start_step(&refused, "at_refused", 1, None, "host", 60_000, wall_ms());
    wrong.expected_version = 99;
    std::thread::scope(|scope| {
        let b = &b;
        // Each step is started only once the one before it waits where it should (a leader
        // on its row, a queued step in the queue): sleeps alone let a loaded machine (CI's
        // run on ca0bbe4) start a queued step before both leaders were held, so that a
        // leader's batch took it.
        let state = |want: (usize, usize)| {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while b.waiting_steps() != want {
                assert!(
                    std::time::Instant::now() < deadline,
                    "never {want:?} (queued, leading): {:?}",
                    b.waiting_steps()
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        let mut leaders = Vec::new();
        for (i, pw) in held.iter().enumerate() {
            leaders.push(scope.spawn(move || {
                b.apply(start_step(
                    pw,
                    &format!("at_held{i}"),
                    1,
                    None,
                    "host",
                    60_000,
                    wall_ms(),
                ))
            }));
            state((0, i + 1));
        }
        let commits_before = b.batch_stats().1;
        let first = scope.spawn(|| {
            b.apply(start_step(
                &free[0],
                "at_free0",
                1,
                None,
                "host",
                60_000,
                wall_ms(),
            ))
        });
        state((1, 2));
        let second = scope.spawn(move || b.insert_and_apply(&new, events, wrong));
        state((2, 2));
        let third = scope.spawn(|| {
            b.apply(start_step(
                &free[1],
                "at_free1",
                1,
                None,
                "host",
                60_000,
                wall_ms(),
            ))
        });
        state((3, 2));
        assert!(
            !first.is_finished() && !second.is_finished() && !third.is_finished(),
            "the three steps wait while both leaders are held"
        );
        holder.batch_execute("ROLLBACK").unwrap();
        for leader in leaders {
            leader
                .join()
                .unwrap()
                .expect("a held step, once its row is free");
        }
        first.join().unwrap().expect("the first queued step");
        let refusal = second.join().unwrap().unwrap_err();
        assert!(
            matches!(refusal, StoreError::Conflict { .. }),
            "the new pathway's step is refused: {refusal:?}"
        );
        third
            .join()
            .unwrap()
            .expect("the step after the refused one");
        assert_eq!(
            b.batch_stats().1 - commits_before,
            3,
            "the two held steps' batches, then one batch of the three queued steps"
        );
    });
    assert!(
        b.pathway(&refused.id).unwrap().is_none(),
        "the refused step's pathway was rolled back with it"
    );
    assert_verifies(&b);
}

/// A later step of a batch whose pathway's row another transaction holds is put back for
/// the next batch (`NOWAIT`), and its caller waits for that batch: it gets no result from
/// the batch that put it back, and its step is applied once, after the row is free, while
/// the batch's other steps commit without it.
#[test]
fn a_step_put_back_by_its_batch_waits_for_the_next_and_is_applied_once() {
    fn step(pw: &Pw, attempt: &str) -> Step {
        start_step(pw, attempt, 1, None, "host", 60_000, wall_ms())
    }
    let _server = SERVER.read().unwrap_or_else(PoisonError::into_inner);
    let s = Schema::new("group_commit_defer");
    let b = s.open();
    b.set_lock_timeout(Duration::from_secs(30)).unwrap();
    let held: Vec<Pw> = (0..2).map(|i| propose(&b, &format!("lead{i}"))).collect();
    let free: Vec<Pw> = (0..2).map(|i| propose(&b, &format!("free{i}"))).collect();
    let busy = propose(&b, "busy");
    let mut leaders_lock = hold_rows(&s.name, &[&held[0].id, &held[1].id], 60);
    let mut busy_lock = hold_rows(&s.name, &[&busy.id], 60);
    let (b, free, busy) = (&b, &free, &busy);
    std::thread::scope(|scope| {
        // Each leader alone in its batch, waiting for its row, before the next step comes:
        // spawned together, one leader's batch could take both steps (the second put back
        // and then led by its own caller, taking the steps below with it). Then the three
        // steps are queued in this order, each only once the one before
        // it waits in the queue: a sleep alone let a loaded machine queue the busy step
        // first, which then waited for its row as the first step of its batch instead of
        // being put back.
        let state = |want: (usize, usize)| {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while b.waiting_steps() != want {
                assert!(
                    std::time::Instant::now() < deadline,
                    "never {want:?} (queued, leading): {:?}",
                    b.waiting_steps()
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        let mut leaders = Vec::new();
        for (i, pw) in held.iter().enumerate() {
            leaders.push(scope.spawn(move || b.apply(step(pw, &format!("at_lead{i}")))));
            state((0, i + 1));
        }
        let queued = |n: usize| state((n, 2));
        let first = scope.spawn(move || b.apply(step(&free[0], "at_free0")));
        queued(1);
        let put_back = scope.spawn(move || b.apply(step(busy, "at_busy")));
        queued(2);
        let third = scope.spawn(move || b.apply(step(&free[1], "at_free1")));
        queued(3);
        // The leaders go on; the next batch is the three queued steps, and the busy one,
        // second in it, is put back.
        let released = std::time::Instant::now();
        leaders_lock.batch_execute("ROLLBACK").unwrap();
        for leader in leaders {
            leader.join().unwrap().expect("a leader's step");
        }
        first.join().unwrap().expect("the first queued step");
        third.join().unwrap().expect("the third queued step");
        let joined = released.elapsed();
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            !put_back.is_finished(),
            "the step put back waits for its row, with no result from the batch that put it back \
             (the others joined {joined:?} after the leaders' rows were freed; it ended with {:?})",
            if put_back.is_finished() {
                Some(put_back.join().unwrap().map(|_| ()))
            } else {
                None
            }
        );
        assert_eq!(b.attempts(&busy.id).unwrap().len(), 0, "not applied yet");
        busy_lock.batch_execute("ROLLBACK").unwrap();
        put_back
            .join()
            .unwrap()
            .expect("the step put back, once its row is free");
    });
    assert_eq!(b.attempts(&busy.id).unwrap().len(), 1, "applied once");
    assert_verifies(b);
}
