//! A `Runtime` opened on PostgreSQL (`Runtime::open("postgres://…")`, issue 11): hosts in
//! separate processes sharing one database, a host cut off in the middle of a call, and its
//! late outcome.
//!
//! Needs the `postgres` feature and `RPR_PG_URL` (`eval "$(bash .ci/postgres)"`); with the
//! feature on and the variable unset every test fails and says so. Each test uses a schema
//! of its own (see `common::pg`). The core suites run on PostgreSQL too, from their own
//! sources: `RPR_TEST_BACKEND=postgres cargo test --features postgres --test authority …`
//! (`.ci/run` lists them). `tests/pg_netns.rs` runs these hosts on separate network
//! namespaces and cuts their network.
#![cfg(feature = "postgres")]

mod common;
mod pg_support;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use pg_support::{Append, admitted};
use rpr::{Outcome, Runtime, State, StoredPathway};

/// The cut-off host's lease. Its heartbeat renews it every third of it while the process runs.
const LEASE: Duration = Duration::from_millis(1500);

/// A host in a child process: proposes, binds and dispatches one file write, stopping
/// inside the executor until released, then reports how its outcome was recorded.
#[test]
fn child_entry() {
    let Ok(db) = std::env::var("RPR_PG_CHILD_DB") else {
        return;
    };
    pg_support::cut_off_host(&db, LEASE, None);
}

/// A host of the kill test: drives every pathway until all are completed.
#[test]
fn host_entry() {
    let Ok(db) = std::env::var("RPR_PG_HOST_DB") else {
        return;
    };
    pg_support::run_host(&db);
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// The partition case: the owner is alive but cannot reach the database (here: stopped
/// with SIGSTOP, so its heartbeat stops renewing). Another host sees the call in flight and
/// leaves it while the lease runs; after the lease lapses by the database's clock it takes
/// it over as unknown (recorded), and can still not dispatch it (an unknown needs a
/// reconciliation). When the owner comes back and its executor finishes, its late outcome
/// is refused and recorded as such: one send in all.
#[test]
fn a_host_cut_off_mid_call_is_taken_over_only_after_its_lease_and_its_late_outcome_is_refused() {
    let schema = pg::schema("cut_off");
    let db = pg::location(&schema);
    let dir = TempDir::new("pg-cut-off");
    std::fs::create_dir_all(dir.path().join("root")).unwrap();
    let log = dir.path().join("effects.log");
    let release = dir.path().join("release");
    let mut host_a = ChildProc::spawn(
        "child_entry",
        &[
            ("RPR_PG_CHILD_DB", db.clone()),
            ("RPR_PG_ROOT", dir.path().join("root").display().to_string()),
            ("RPR_PG_LOG", log.display().to_string()),
            ("RPR_PG_RELEASE", release.display().to_string()),
        ],
    );
    let id = host_a.expect("RPR-PATHWAY");
    let id = id.trim().to_owned();
    host_a.expect("RPR-IN-EXECUTOR");
    let pid = host_a.pid();

    // Cut off: the host neither renews its lease nor commits anything.
    signal(pid, "-STOP");
    let host_b = Runtime::open(&db).unwrap();
    let cut_at = Instant::now();
    let seen = host_b.recover().unwrap();
    assert!(
        matches!(seen.as_slice(), [StoredPathway::InFlightElsewhere { .. }]),
        "not taken over while the lease runs: {seen:?}"
    );
    assert_eq!(
        event_kinds(&host_b, &id),
        ["proposed", "admitted", "attempt_started"]
    );

    // The lease lapses by the database's clock: now it is taken over, as unknown.
    std::thread::sleep(LEASE + Duration::from_millis(500));
    let seen = host_b.recover().unwrap();
    let [StoredPathway::Unknown(unknown)] = seen.as_slice() else {
        panic!("taken over as unknown after the lease: {seen:?}")
    };
    assert!(cut_at.elapsed() >= LEASE);
    assert_eq!(unknown.id(), id);
    assert_eq!(
        host_b.pathway_record(&id).unwrap().unwrap().state,
        State::WriteStatusUnknown
    );
    assert_eq!(effects(&log), 0, "nothing was sent by the takeover");

    // The host comes back; its call goes out (the one send) and its outcome is refused.
    std::fs::write(&release, b"go").unwrap();
    signal(pid, "-CONT");
    let outcome = host_a.expect("RPR-OUTCOME");
    assert!(
        outcome.contains("unrecorded") && outcome.contains("late outcome"),
        "the late outcome is refused: {outcome}"
    );
    host_a.finish();
    assert_eq!(effects(&log), 1, "one send in all");
    assert_eq!(
        event_kinds(&host_b, &id),
        [
            "proposed",
            "admitted",
            "attempt_started",
            "recovered_unknown",
            "late_outcome_refused"
        ]
    );
    assert_eq!(
        host_b.pathway_record(&id).unwrap().unwrap().state,
        State::WriteStatusUnknown,
        "still unknown: a reconciliation decides it"
    );
    let attempts = host_b.attempt_records(&id).unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].status, rpr::AttemptStatus::Unknown);
    assert!(host_b.verify(None).unwrap().is_ok());
    drop(host_b);
    pg::drop_schema(&schema);
}

/// A `postgres://` location opens a PostgreSQL runtime; the same location twice is one
/// database (one identity), and the password never shows in the runtime's or builder's
/// `Debug`.
#[test]
fn a_postgres_location_opens_one_shared_database_and_hides_its_password() {
    let schema = pg::schema("location");
    let db = pg::location(&schema);
    let (a, b) = (Runtime::open(&db).unwrap(), Runtime::open(&db).unwrap());
    assert!(a.is_postgres());
    assert_eq!(a.database_id(), b.database_id());
    let password = "rpr_owner_pw";
    assert!(db.contains(password), "the test URL carries the password");
    let shown = format!("{:?} {:?}", a, Runtime::builder(&db));
    assert!(!shown.contains(password), "{shown}");
    drop((a, b));
    pg::drop_schema(&schema);
}

/// Several hosts (4 processes at a time, each its own runtime and connection) drive 24
/// pathways on one PostgreSQL database while the parent SIGKILLs a host at random moments
/// (every other time one with a call in flight, when there is one) and starts another:
/// every pathway completes, each file is written exactly once (a second dispatch only after
/// a recorded not-applied verdict), nothing is lost, the ledger verifies, and every
/// takeover happened after the lease lapsed by the database's clock, though the hosts' own
/// clocks are an hour behind, on time, or an hour ahead.
#[test]
fn four_hosts_under_random_sigkills_complete_every_call_exactly_once() {
    let schema = pg::schema("four_hosts");
    let db = pg::location(&schema);
    let dir = TempDir::new("pg-four-hosts");
    std::fs::create_dir_all(dir.path().join("root")).unwrap();
    let rt = Runtime::open(&db).unwrap();
    let run = pg_support::sigkill_hosts(
        &rt,
        &dir.path().join("root"),
        |_, mut envs| {
            envs.push(("RPR_PG_HOST_DB", db.clone()));
            ChildProc::spawn("host_entry", &envs)
        },
        |_, _, _| {},
    );
    eprintln!(
        "{} SIGKILLs, {} host processes, {} takeovers after a lapsed lease",
        run.kills,
        run.spawned,
        run.takeovers.len()
    );
    drop(rt);
    pg::drop_schema(&schema);
}

/// A step that waits for a row another connection holds (a host stuck in its transaction)
/// waits the runtime's busy timeout, then fails as `StoreError::Busy`: retryable, nothing
/// written, nothing sent; taken again once the row is free, it goes through.
#[test]
fn a_step_blocked_by_another_connections_row_lock_is_busy_and_writes_nothing() {
    use rpr::PathwayError;
    use rpr::store::StoreError;
    let schema = pg::schema("row_lock");
    let db = pg::location(&schema);
    let rt = Runtime::builder(&db)
        .busy_timeout(Duration::from_millis(300))
        .open()
        .unwrap();
    let p = admitted(&rt, 0);
    let id = p.id().to_owned();
    let before = db_dump(db.as_ref());
    let mut holder = postgres::Client::connect(&db, postgres::NoTls).unwrap();
    let mut tx = holder.transaction().unwrap();
    tx.execute("SELECT 1 FROM pathways WHERE id = $1 FOR UPDATE", &[&id])
        .unwrap();
    let dir = TempDir::new("pg-row-lock");
    let mut ex = Append(dir.path().to_owned());
    let started = Instant::now();
    let bound = p.bind(&mut ex).unwrap();
    let Outcome::NotSent(n) = bound.dispatch(&rt, &actor("execution_actor"), &mut ex) else {
        panic!("the attempt record could not be written: nothing may be sent")
    };
    let waited = started.elapsed();
    assert!(
        matches!(n.error(), PathwayError::Store(e @ StoreError::Busy { .. }) if e.is_retryable()),
        "{:?}",
        n.error()
    );
    assert!(waited >= Duration::from_millis(300), "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    assert!(!dir.path().join("out_0.txt").exists(), "nothing was sent");
    tx.rollback().unwrap();
    assert_eq!(db_dump(db.as_ref()), before, "nothing was written");
    // Free again: the same stage goes through.
    let Outcome::Returned(_) = n
        .into_pathway()
        .dispatch(&rt, &actor("execution_actor"), &mut ex)
    else {
        panic!("dispatched once the row was free")
    };
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out_0.txt")).unwrap(),
        "c0\n"
    );
    drop(rt);
    pg::drop_schema(&schema);
}
