//! The signed log (issue 28): every commit of a runtime with a signing key stores a signed
//! checkpoint of the Merkle tree of every ledger event, and each attack of a database writer
//! without the key (a re-chained edit, a forged append, a cut tail) and of a backup restore
//! or a forked history (with a witness) is reported by `verify_log` and refused by the next
//! step. On both stores (`RPR_TEST_BACKEND`).

use rpr::evidence::checkpoint::Checkpoint;
use rpr::evidence::note::{Note, SignerKey, VerifierKey};
use rpr::evidence::proof;
use rpr::ledger::GENESIS;
use rpr::store::StoreError;
use rpr::store::log::{self, LogError, LogProblem, Signing};
use rpr::{ActionClass, Runtime};

use crate::common::{Arg, Sql, TempDir, actor, allowed, definition};

fn key() -> SignerKey {
    SignerKey::from_seed("rpr-test-log", &[7; 32]).unwrap()
}

fn other_key() -> SignerKey {
    SignerKey::from_seed("rpr-test-other", &[9; 32]).unwrap()
}

fn signed(db: &std::path::Path) -> Result<Runtime, StoreError> {
    Runtime::builder(db).signing(Signing::new(key())).open()
}

fn witnessed(db: &std::path::Path, state: &str) -> Result<Runtime, StoreError> {
    let (cp, _) = Checkpoint::open(state.as_bytes(), &key().verifier(), &[]).unwrap();
    Runtime::builder(db)
        .signing(Signing::new(key()).witnessed(cp))
        .open()
}

/// Takes `n` admitted pathways through `rt` (each a few events, one commit each).
fn steps(rt: &Runtime, tag: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            allowed(rt, definition(&format!("{tag}-{i}"), ActionClass::Mutating))
                .id()
                .to_owned()
        })
        .collect()
}

/// A step on `rt` and its error.
fn step_error(rt: &Runtime) -> StoreError {
    match rt.propose(
        &actor("proposer"),
        definition("after", ActionClass::Mutating),
    ) {
        Err(rpr::PathwayError::Store(e)) => e,
        other => panic!("the step was taken: {other:?}"),
    }
}

fn report(db: &std::path::Path, witness: Option<&Checkpoint>) -> log::LogReport {
    let store = rpr::store::ReadStore::open_read_only(db).unwrap();
    log::verify_log(&store, &key().verifier(), witness).unwrap()
}

fn events(sql: &Sql) -> Vec<(i64, String, String)> {
    let seqs = sql.ints("SELECT seq FROM ledger ORDER BY seq");
    let pathways = sql.texts("SELECT pathway_id FROM ledger ORDER BY seq");
    let texts = sql.texts("SELECT event FROM ledger ORDER BY seq");
    seqs.into_iter()
        .zip(pathways)
        .zip(texts)
        .map(|((s, p), t)| (s.unwrap(), p, t))
        .collect()
}

/// Rewrites every stored hash from the first event on, and the recorded head: what a
/// writer who knows the chain's construction (and not the key) does after an edit.
fn rechain(sql: &Sql) {
    let mut prev = GENESIS.to_owned();
    let mut head = String::new();
    for (seq, _, text) in events(sql) {
        let hash = rpr::ledger::chain_hash(&prev, &text);
        sql.execute(
            "UPDATE ledger SET prev_hash = $1, hash = $2 WHERE seq = $3",
            &[Arg::Text(&prev), Arg::Text(&hash), Arg::Int(seq)],
        );
        head = format!("{seq}:{hash}");
        prev = hash;
    }
    sql.execute(
        "UPDATE meta SET value = $1 WHERE key = 'ledger_head'",
        &[Arg::Text(&head)],
    );
}

fn checkpoint_text(sql: &Sql) -> String {
    sql.texts("SELECT value FROM meta WHERE key = 'log_checkpoint'")
        .pop()
        .expect("a stored checkpoint")
}

fn witness(db: &std::path::Path, state: Option<&str>) -> Result<log::Cosigned, log::WitnessError> {
    let store = rpr::store::ReadStore::open_read_only(db).unwrap();
    log::witness(&store, &key().verifier(), &other_key(), state)
}

#[test]
fn every_commit_of_a_signing_runtime_is_covered_by_a_checkpoint_that_verifies() {
    let dir = TempDir::new("log-covered");
    let db = dir.db();
    let rt = signed(&db).unwrap();
    let before = rt.write_stats();
    steps(&rt, "a", 5);
    let after = rt.write_stats();
    let sql = Sql::open(&db);
    let n = events(&sql).len() as u64;
    let r = report(&db, None);
    assert!(r.is_ok(), "{:?}", r.problems);
    let cp = r.checkpoint.unwrap();
    assert_eq!(cp.size, n, "the checkpoint covers every event");
    assert_eq!(cp.origin, log::origin(rt.database_id()));
    // The note is a C2SP signed note that verifies with the key and no other.
    let note = Note::parse(checkpoint_text(&sql).as_bytes()).unwrap();
    assert!(note.verify(&[key().verifier()]).is_ok());
    assert!(note.verify(&[other_key().verifier()]).is_err());
    // Signing adds no commit: one per step, as without a key (SQLite counts them).
    if !rt.is_postgres() {
        assert_eq!(after.commits - before.commits, after.steps - before.steps);
    }
}

#[test]
fn a_rechained_edit_is_reported_and_refused_by_the_next_step() {
    let dir = TempDir::new("log-rechained");
    let db = dir.db();
    {
        let rt = signed(&db).unwrap();
        steps(&rt, "a", 3);
    }
    let sql = Sql::open(&db);
    let (seq, _, text) = events(&sql)
        .into_iter()
        .find(|(_, _, t)| t.contains("decision_owner"))
        .unwrap();
    let edited = text.replace("decision_owner", "mallory_owner");
    sql.execute(
        "UPDATE ledger SET event = $1 WHERE seq = $2",
        &[Arg::Text(&edited), Arg::Int(seq)],
    );
    rechain(&sql);
    // The chain alone holds: the edit is re-chained.
    let store = rpr::store::ReadStore::open_read_only(&db).unwrap();
    let chain = rpr::store::verify(&store, None).unwrap();
    assert!(
        !chain
            .problems
            .iter()
            .any(|p| p.kind == rpr::ledger::ProblemKind::HashMismatch),
        "{:?}",
        chain.problems
    );
    let r = report(&db, None);
    assert!(
        r.problems
            .iter()
            .any(|p| matches!(p, LogProblem::RootMismatch { .. })),
        "{:?}",
        r.problems
    );
    let rt = signed(&db).unwrap();
    assert!(
        matches!(
            step_error(&rt),
            StoreError::Log(LogError::Inconsistent { .. })
        ),
        "the next step is refused"
    );
}

#[test]
fn a_forged_append_after_a_checkpoint_is_reported_and_refused() {
    let dir = TempDir::new("log-forged");
    let db = dir.db();
    let rt = signed(&db).unwrap();
    steps(&rt, "a", 2);
    let sql = Sql::open(&db);
    let all = events(&sql);
    let (last, pathway, text) = all.last().unwrap().clone();
    let forged = text.replace(&format!("\"seq\":{last}"), &format!("\"seq\":{}", last + 1));
    sql.execute(
        "INSERT INTO ledger (seq, pathway_id, event, prev_hash, hash) VALUES ($1, $2, $3, 'x', 'y')",
        &[Arg::Int(last + 1), Arg::Text(&pathway), Arg::Text(&forged)],
    );
    rechain(&sql);
    let r = report(&db, None);
    assert!(
        r.problems.contains(&LogProblem::Uncovered {
            from: last.cast_unsigned() + 1,
            to: last.cast_unsigned() + 1
        }),
        "{:?}",
        r.problems
    );
    // The running runtime and a new one both refuse to sign it into their log.
    for rt in [rt, signed(&db).unwrap()] {
        assert!(matches!(
            step_error(&rt),
            StoreError::Log(LogError::Uncovered { .. })
        ));
    }
    assert_eq!(events(&sql).len(), all.len() + 1, "nothing was written");
}

/// A row another writer puts into the ledger while a batch holds its head is not the
/// batch's, and is never signed. On PostgreSQL a batch runs in `READ COMMITTED`: its
/// statements see another session's commit, and the head's row lock binds only writers
/// that take it. Here a trigger puts such a row in (inside the batch's own transaction,
/// so that the test need not win a race): the seal signed every row past the covered
/// tree, the forged one too, and a witness and a proof would have vouched for it. Now the
/// seal signs the batch's own events alone (PostgreSQL: up to the head it holds; SQLite,
/// whose batch holds the write lock, refuses a gap in the seqs).
#[test]
fn a_row_appended_past_the_batchs_own_events_is_never_signed() {
    const FORGED: i64 = 1_000_000;
    let dir = TempDir::new("log-past-head");
    let db = dir.db();
    let rt = signed(&db).unwrap();
    steps(&rt, "a", 1);
    let sql = Sql::open(&db);
    let copy = "INSERT INTO ledger (seq, pathway_id, event, prev_hash, hash) \
                VALUES (NEW.seq + 1000000, NEW.pathway_id, NEW.event, 'x', 'y')";
    if sql.is_postgres() {
        sql.batch(&format!(
            "CREATE FUNCTION forge() RETURNS trigger AS $$ BEGIN \
               IF NEW.seq < {FORGED} THEN {copy}; END IF; RETURN NULL; END $$ LANGUAGE plpgsql;
             CREATE TRIGGER forge AFTER INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION forge();"
        ));
    } else {
        sql.batch(&format!(
            "CREATE TRIGGER forge AFTER INSERT ON ledger WHEN NEW.seq < {FORGED} BEGIN {copy}; END;"
        ));
    }
    // The step commits (PostgreSQL) or is refused (SQLite): either way, no checkpoint
    // stored since covers a forged row.
    let _ = rt.propose(
        &actor("proposer"),
        definition("after", ActionClass::Mutating),
    );
    let text = checkpoint_text(&sql);
    let (checkpoint, _) = Checkpoint::open(text.as_bytes(), &key().verifier(), &[]).unwrap();
    let last_own = events(&sql)
        .iter()
        .map(|(seq, _, _)| *seq)
        .filter(|seq| *seq < FORGED)
        .max()
        .unwrap();
    assert!(
        checkpoint.size <= last_own.cast_unsigned(),
        "a checkpoint of {} leaves signed past the last event the runtime wrote ({last_own})",
        checkpoint.size
    );
}

/// An event moved below seq 1 (found by the `ledger` fuzz target: its seq set to 0, a byte
/// of the file then flipped so that the row at its old seq read as before): the events from
/// seq 1 on still hash to the signed root, and the one below them is no leaf, so it went
/// unseen. It is reported, and the next step refuses to sign past it.
#[test]
fn an_event_below_seq_1_is_reported_and_refused() {
    let dir = TempDir::new("log-before-first");
    let db = dir.db();
    let rt = signed(&db).unwrap();
    steps(&rt, "a", 2);
    let sql = Sql::open(&db);
    let all = events(&sql);
    let (_, pathway, text) = all.last().unwrap().clone();
    sql.execute(
        "INSERT INTO ledger (seq, pathway_id, event, prev_hash, hash) VALUES ($1, $2, $3, 'x', 'y')",
        &[Arg::Int(0), Arg::Text(&pathway), Arg::Text(&text)],
    );
    let r = report(&db, None);
    assert_eq!(
        r.problems,
        vec![LogProblem::BeforeFirst(0)],
        "the events from seq 1 on are as signed; the one below them is reported"
    );
    assert_eq!(r.events, all.len() as u64, "it is no leaf");
    sql.execute(
        "UPDATE ledger SET seq = $1 WHERE seq = 0",
        &[Arg::Int(i64::MIN)],
    );
    assert_eq!(
        report(&db, None).problems,
        vec![LogProblem::BeforeFirst(i64::MIN)]
    );
    for rt in [rt, signed(&db).unwrap()] {
        assert!(matches!(
            step_error(&rt),
            StoreError::Log(LogError::BeforeFirst(i64::MIN))
        ));
    }
    assert_eq!(events(&sql).len(), all.len() + 1, "nothing was written");
}

/// The last event moved to the largest seq there is (the `ledger` fuzz target's second
/// finding was in the chain check; the seal's walk of the events it signs computed the next
/// seq as `seq + 1` the same way): beginning the log of such a database finds the gap and
/// refuses, without a panic, and `verify_log` reports the gap.
#[test]
fn an_event_at_the_largest_seq_is_a_gap_reported_and_refused() {
    let dir = TempDir::new("log-largest-seq");
    let db = dir.db();
    {
        let rt = Runtime::open(&db).unwrap();
        steps(&rt, "a", 2);
    }
    let sql = Sql::open(&db);
    let last = events(&sql).last().unwrap().0;
    sql.execute(
        "UPDATE ledger SET seq = $1 WHERE seq = $2",
        &[Arg::Int(i64::MAX), Arg::Int(last)],
    );
    let rt = Runtime::builder(&db)
        .signing(Signing::new(key()).begin_log())
        .open()
        .unwrap();
    assert!(
        matches!(rt.sign_log(), Err(StoreError::Log(LogError::Gap(seq))) if seq == last.cast_unsigned()),
        "the gap is named"
    );
    let r = report(&db, None);
    assert!(
        r.problems.contains(&LogProblem::Gap(last.cast_unsigned())),
        "{:?}",
        r.problems
    );
}

#[test]
fn a_cut_tail_is_reported_and_refused() {
    let dir = TempDir::new("log-cut");
    let db = dir.db();
    {
        let rt = signed(&db).unwrap();
        steps(&rt, "a", 3);
    }
    let sql = Sql::open(&db);
    let last = events(&sql).last().unwrap().0;
    sql.execute("DELETE FROM ledger WHERE seq = $1", &[Arg::Int(last)]);
    rechain(&sql);
    let r = report(&db, None);
    assert!(
        r.problems
            .iter()
            .any(|p| matches!(p, LogProblem::CheckpointBeyondLog { .. })),
        "{:?}",
        r.problems
    );
    let rt = signed(&db).unwrap();
    assert!(matches!(
        step_error(&rt),
        StoreError::Log(LogError::Behind { .. })
    ));
}

/// A backup restored after the witness cosigned a later checkpoint: the log went back.
#[test]
fn a_restored_backup_is_refused_by_the_witness_and_by_a_witnessed_runtime() {
    let dir = TempDir::new("log-restore");
    let db = dir.db();
    let rt = signed(&db).unwrap();
    steps(&rt, "a", 2);
    let sql = Sql::open(&db);
    // The backup: the ledger and the checkpoint as they are now.
    let backup_cp = checkpoint_text(&sql);
    let backup_size = i64::try_from(events(&sql).len()).unwrap();
    let first = witness(&db, None).unwrap();
    steps(&rt, "b", 2);
    drop(rt);
    let state = witness(&db, Some(&first.note.to_text())).unwrap();
    assert_eq!(state.previous, Some(backup_size.cast_unsigned()));
    let state = state.note.to_text();
    // Restore: the later events gone, the older checkpoint back (rows and chain included).
    sql.execute(
        "DELETE FROM ledger WHERE seq > $1",
        &[Arg::Int(backup_size)],
    );
    sql.execute(
        "UPDATE meta SET value = $1 WHERE key = 'log_checkpoint'",
        &[Arg::Text(&backup_cp)],
    );
    rechain(&sql);
    // Signed and consistent on its own: only the witness knows the log went back.
    assert!(report(&db, None).is_ok());
    let (w, _) = Checkpoint::open(state.as_bytes(), &key().verifier(), &[]).unwrap();
    assert!(
        report(&db, Some(&w))
            .problems
            .iter()
            .any(|p| matches!(p, LogProblem::BehindWitness { .. }))
    );
    assert!(matches!(
        witness(&db, Some(&state)),
        Err(log::WitnessError::Behind { .. })
    ));
    let rt = witnessed(&db, &state).unwrap();
    let e = step_error(&rt);
    assert!(
        matches!(
            e,
            StoreError::Log(LogError::Behind {
                by: "the witness cosigned",
                ..
            })
        ),
        "{e}"
    );
    // Both sizes are named.
    let text = e.to_string();
    assert!(
        text.contains(&format!("({backup_size} events signed)")),
        "{text}"
    );
}

/// The key holder shows two histories: the witness cosigns one and refuses the other.
#[test]
fn a_forked_history_is_refused_by_the_witness() {
    let dir = TempDir::new("log-fork");
    let db = dir.db();
    let rt = signed(&db).unwrap();
    steps(&rt, "a", 1);
    let sql = Sql::open(&db);
    let fork_cp = checkpoint_text(&sql);
    let fork_size = i64::try_from(events(&sql).len()).unwrap();
    steps(&rt, "b", 2);
    drop(rt);
    let state = witness(&db, None).unwrap().note.to_text();
    // The other history: back to the fork point, then other steps, signed with the key.
    sql.execute("DELETE FROM ledger WHERE seq > $1", &[Arg::Int(fork_size)]);
    sql.execute("DELETE FROM pathways WHERE idempotency_key LIKE 'b-%'", &[]);
    sql.execute(
        "UPDATE meta SET value = $1 WHERE key = 'log_checkpoint'",
        &[Arg::Text(&fork_cp)],
    );
    rechain(&sql);
    let rt = signed(&db).unwrap();
    steps(&rt, "c", 3);
    drop(rt);
    assert!(report(&db, None).is_ok(), "the other history is signed");
    assert!(matches!(
        witness(&db, Some(&state)),
        Err(log::WitnessError::Inconsistent { .. })
    ));
    let e = step_error(&witnessed(&db, &state).unwrap());
    assert!(
        matches!(e, StoreError::Log(LogError::Inconsistent { .. })),
        "{e}"
    );
}

#[test]
fn a_runtime_without_the_key_refuses_a_signed_database() {
    let dir = TempDir::new("log-unkeyed");
    let db = dir.db();
    steps(&signed(&db).unwrap(), "a", 1);
    match Runtime::open(&db) {
        Err(StoreError::Log(LogError::SigningKeyNeeded { size })) => assert!(size > 0),
        other => panic!("opened: {:?}", other.map(|_| ())),
    }
    // Another key's checkpoint is not adopted.
    let rt = Runtime::builder(&db)
        .signing(Signing::new(other_key()))
        .open()
        .unwrap();
    assert!(matches!(
        step_error(&rt),
        StoreError::Log(LogError::BadCheckpoint(_))
    ));
    // Unless that key is trusted (another writer of the same database).
    let rt = Runtime::builder(&db)
        .signing(Signing::new(other_key()).trust(key().verifier()))
        .open()
        .unwrap();
    steps(&rt, "b", 1);
}

#[test]
fn an_unsigned_history_is_signed_only_when_the_operator_begins_the_log() {
    let dir = TempDir::new("log-begin");
    let db = dir.db();
    steps(&Runtime::open(&db).unwrap(), "a", 2);
    let rt = signed(&db).unwrap();
    assert!(matches!(
        step_error(&rt),
        StoreError::Log(LogError::Unsigned { .. })
    ));
    assert!(
        report(&db, None)
            .problems
            .iter()
            .any(|p| matches!(p, LogProblem::NoCheckpoint { .. }))
    );
    let rt = Runtime::builder(&db)
        .signing(Signing::new(key()).begin_log())
        .open()
        .unwrap();
    let note = rt.sign_log().unwrap().unwrap();
    let (cp, _) = Checkpoint::open(note.as_bytes(), &key().verifier(), &[]).unwrap();
    assert_eq!(cp.size, events(&Sql::open(&db)).len() as u64);
    drop(rt);
    steps(&signed(&db).unwrap(), "b", 1);
    assert!(report(&db, None).is_ok());
}

/// An approver's proof: their approval and the attempt record, proven in the signed log,
/// checked offline with the public key alone.
#[test]
fn a_pathways_proof_verifies_offline_and_names_its_events() {
    let dir = TempDir::new("log-proof");
    let db = dir.db();
    let rt = signed(&db).unwrap();
    let ids = steps(&rt, "a", 3);
    let store = rpr::store::ReadStore::open_read_only(&db).unwrap();
    let file = log::prove(&store, &ids[1], None).unwrap();
    let bytes = serde_json::to_vec(&file).unwrap();
    let verified = proof::verify(&bytes, &key().verifier(), &[]).unwrap();
    let mine = Sql::open(&db).ints(&format!(
        "SELECT seq FROM ledger WHERE pathway_id = '{}' ORDER BY seq",
        ids[1]
    ));
    assert_eq!(
        verified
            .leaves
            .iter()
            .map(|(i, _)| Some(i.cast_signed() + 1))
            .collect::<Vec<_>>(),
        mine
    );
    for (_, data) in &verified.leaves {
        assert!(String::from_utf8_lossy(data).contains(&ids[1]));
    }
    // Another key does not verify it.
    assert!(
        proof::verify(
            &bytes,
            &VerifierKey::parse(&other_key().verifier().to_string()).unwrap(),
            &[]
        )
        .is_err()
    );
}

/// The attempt record's commit is covered by a signed checkpoint before the request is
/// sent: at the moment the executor is called, the stored checkpoint counts every event,
/// the attempt's included, and verifies.
#[test]
fn the_attempt_record_is_covered_by_a_signed_checkpoint_before_the_send() {
    use std::sync::{Arc, Mutex};
    let dir = TempDir::new("log-attempt");
    let db = dir.db();
    let seen: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let (hook_db, hook_seen) = (db.clone(), Arc::clone(&seen));
    let rt = Runtime::builder(&db)
        .signing(Signing::new(key()))
        .step_hook(move |point| {
            if point == rpr::StepPoint::AfterAttemptCommit {
                let r = report(&hook_db, None);
                let size = r.checkpoint.map_or(0, |c| c.size);
                assert!(r.problems.is_empty(), "{:?}", r.problems);
                hook_seen.lock().unwrap().push((size, r.events));
            }
        })
        .open()
        .unwrap();
    let p = allowed(&rt, definition("sent", ActionClass::Mutating));
    let mut ex = crate::common::Scripted::ok();
    let bound = p.bind(&mut ex).unwrap();
    let sql = Sql::open(&db);
    let before = events(&sql).len() as u64;
    let _ = bound.dispatch(&rt, &actor("execution_actor"), &mut ex);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "one attempt");
    let (size, events_then) = seen[0];
    assert!(events_then > before, "the attempt's event was stored");
    assert_eq!(size, events_then, "and covered by the stored checkpoint");
}
