//! Readers see one snapshot while writers commit, and never fail because a writer closed.
//!
//! Three writers run governed file writes to completion (propose, admit, bind, dispatch,
//! confirm by readback). Each writer is a sequence of short host processes (this test binary,
//! re-executed; see `writer_entry`), one per batch, each opening its own `Runtime` and
//! dropping it before it exits, so the database is closed by its last writer again and
//! again (between a host's exit and the next one's open, often no writer has it open). Meanwhile, in this process, readers open the database with
//! `ReadStore::open_read_only` and run `store::verify` and the multi-query reads of
//! `inspect`, and short `rpr-mcp` sessions (initialize, one tool call, end of input) run
//! beside them. Every check must pass and every open must succeed.

use crate::common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::*;
use rpr::store::{ReadStore, StoreError};
use rpr::{AttemptStatus, Outcome, Runtime, State};
use serde_json::{Value, json};

const WRITERS: usize = 3;
/// Batches per writer; each batch is one host process with its own `Runtime`.
const BATCHES: usize = 20;
/// Governed calls per batch.
const CALLS: usize = 2;
/// Upper bound on each reader loop (it also stops when the writers are done).
const MAX_READS: usize = 3_000;

/// A host process: one batch of `CALLS` governed writes with its own runtime, closed
/// before it exits. Returns at once unless a test started it (`RPR_SNAP_DB` set).
#[test]
fn writer_entry() {
    let Ok(db) = std::env::var("RPR_SNAP_DB") else {
        return;
    };
    let me = std::env::var("RPR_SNAP_WRITER").unwrap();
    let batch = std::env::var("RPR_SNAP_BATCH").unwrap();
    let root = PathBuf::from(std::env::var("RPR_SNAP_ROOT").unwrap());
    let log = root.join(format!("effects-{me}.log"));
    {
        let rt = Runtime::open(&db).unwrap();
        let mut ex = CountingFile::new(&root, &log);
        for call in 0..CALLS {
            let key = format!("w{me}-b{batch}-c{call}");
            let p = allowed(&rt, file_definition(&key, &format!("{key}.txt"), &key));
            let bound = p.bind(&mut ex).unwrap();
            let Outcome::Returned(p) = bound.dispatch(&rt, &actor("execution_actor"), &mut ex)
            else {
                panic!("{key} did not return")
            };
            p.confirm(&rt, &actor("evidence_owner"), &mut ex.readback())
                .unwrap()
                .into_completed()
                .unwrap_or_else(|_| panic!("{key} not confirmed"));
        }
        drop(rt);
    }
    say("RPR-DONE", &me);
}

/// Tallies of one reader loop.
#[derive(Debug, Default)]
struct Tally {
    /// Checks run.
    runs: usize,
    /// Opens (or sessions) that failed, with the error.
    open_failures: Vec<String>,
    /// Reads that failed after a successful open, with the error.
    read_failures: Vec<String>,
    /// Checks that reported a problem that is not there.
    false_reports: Vec<String>,
    /// Ledger lengths seen, in order (to show the reads overlapped the writes).
    lengths: Vec<i64>,
}

impl Tally {
    fn distinct_lengths(&self) -> usize {
        let mut l = self.lengths.clone();
        l.sort_unstable();
        l.dedup();
        l.len()
    }
}

/// `store::verify` through a fresh read-only open, in a loop.
fn verify_loop(db: &Path, stop: &AtomicBool) -> Tally {
    let mut t = Tally::default();
    while !stop.load(Ordering::Relaxed) && t.runs < MAX_READS {
        t.runs += 1;
        let store = match ReadStore::open_read_only(db) {
            Ok(s) => s,
            Err(e) => {
                t.open_failures.push(e.to_string());
                continue;
            }
        };
        match rpr::store::verify(&store, None) {
            Ok(report) => {
                t.lengths.push(report.events);
                if !report.is_ok() {
                    t.false_reports.push(format!("{:?}", report.problems));
                }
            }
            Err(e) => t.read_failures.push(e.to_string()),
        }
    }
    t
}

/// A detail whose pathway and attempts disagree was not read in one snapshot: in this
/// workload an `approved` pathway has no attempt, a `running` one has one in flight or
/// returned, and a `completed` one has one that is not in flight.
fn detail_problem(d: &rpr::inspect::PathwayDetail) -> Option<String> {
    let last = d.attempts.last().map(|a| a.status);
    let ok = match d.state {
        State::Proposed | State::Approved => d.attempts.is_empty(),
        State::Running => matches!(
            last,
            Some(AttemptStatus::InFlight | AttemptStatus::Returned)
        ),
        State::Completed => last.is_some_and(|s| s != AttemptStatus::InFlight),
        _ => false,
    };
    (!ok).then(|| format!("{} {:?} with attempts {last:?}", d.pathway_id, d.state))
}

/// The multi-query reads of `inspect` through one read-only open per round.
fn inspect_loop(db: &Path, stop: &AtomicBool) -> Tally {
    let mut t = Tally::default();
    while !stop.load(Ordering::Relaxed) && t.runs < MAX_READS {
        t.runs += 1;
        let store = match ReadStore::open_read_only(db) {
            Ok(s) => s,
            Err(e) => {
                t.open_failures.push(e.to_string());
                continue;
            }
        };
        if let Err(e) = inspect_round(&store, &mut t) {
            t.read_failures.push(e.to_string());
        }
    }
    t
}

fn inspect_round(store: &ReadStore, t: &mut Tally) -> Result<(), rpr::inspect::InspectError> {
    let status = rpr::inspect::status(store)?;
    t.lengths.push(status.ledger_length);
    let page = rpr::inspect::list_pathways(store, None, rpr::inspect::MAX_LIMIT, None)?;
    for s in page.pathways.iter().rev().take(3) {
        let d = rpr::inspect::pathway(store, &s.pathway_id)?;
        t.false_reports.extend(detail_problem(&d));
        let e = rpr::inspect::evidence(store, &s.pathway_id, 50, None)?;
        if !e.chain_verified {
            t.false_reports.push(format!("evidence: {:?}", e.problems));
        }
    }
    Ok(())
}

/// Short `rpr-mcp` sessions: initialize, one tool call, end of input.
fn session_loop(db: &Path, stop: &AtomicBool) -> Tally {
    let tools = [
        ("rpr.get_status", json!({})),
        ("rpr.list_unresolved", json!({"limit": 500})),
        ("rpr.list_pathways", json!({"limit": 500})),
    ];
    let mut t = Tally::default();
    while !stop.load(Ordering::Relaxed) && t.runs < MAX_READS {
        let (tool, args) = &tools[t.runs % tools.len()];
        t.runs += 1;
        let input = format!(
            "{}\n{}\n",
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": args}}),
        );
        let mut child = Command::new(env!("CARGO_BIN_EXE_rpr-mcp"))
            .arg("--database")
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        let mut out = String::new();
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let status = child.wait().unwrap();
        if !status.success() {
            t.open_failures.push(format!("{status}: {}", err.trim()));
            continue;
        }
        let reply: Value = out
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|l| l["id"] == 1)
            .unwrap();
        if reply["result"]["isError"] != false {
            t.read_failures.push(format!("{tool}: {reply}"));
            continue;
        }
        let content = &reply["result"]["structuredContent"];
        if let Some(n) = content["ledger_length"].as_i64() {
            t.lengths.push(n);
        }
    }
    t
}

#[test]
fn readers_see_one_snapshot_while_writers_commit_and_close() {
    let dir = TempDir::new("snapshot-reads");
    let db = dir.db();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    drop(Runtime::open(&db).unwrap());

    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = [verify_loop, inspect_loop, session_loop]
        .into_iter()
        .map(|f| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || f(&db, &stop))
        })
        .collect();
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (db, root) = (db.clone(), root.clone());
            std::thread::spawn(move || {
                for batch in 0..BATCHES {
                    let mut host = ChildProc::spawn(
                        "snapshot_reads::writer_entry",
                        &[
                            ("RPR_SNAP_DB", db.display().to_string()),
                            ("RPR_SNAP_WRITER", w.to_string()),
                            ("RPR_SNAP_BATCH", batch.to_string()),
                            ("RPR_SNAP_ROOT", root.display().to_string()),
                        ],
                    );
                    host.expect("RPR-DONE");
                    host.finish();
                }
            })
        })
        .collect();
    let hosts: Vec<_> = writers
        .into_iter()
        .map(std::thread::JoinHandle::join)
        .collect();
    stop.store(true, Ordering::Relaxed);
    for h in hosts {
        h.unwrap();
    }
    let tallies: Vec<Tally> = readers.into_iter().map(|r| r.join().unwrap()).collect();
    let [verify, inspect, sessions] = &tallies[..] else {
        unreachable!()
    };
    let line = |name: &str, t: &Tally| {
        format!(
            "{name}: {} runs, {} open failures, {} read failures, {} false reports",
            t.runs,
            t.open_failures.len(),
            t.read_failures.len(),
            t.false_reports.len()
        )
    };
    let summary = format!(
        "{}; {}; {}",
        line("verify", verify),
        line("inspect", inspect),
        line("rpr-mcp sessions", sessions)
    );
    eprintln!("{summary}");
    for t in &tallies {
        assert!(
            t.open_failures.is_empty(),
            "{summary}\nfirst: {:?}",
            t.open_failures.first()
        );
        assert!(
            t.read_failures.is_empty(),
            "{summary}\nfirst: {:?}",
            t.read_failures.first()
        );
        assert!(
            t.false_reports.is_empty(),
            "{summary}\nfirst: {:?}",
            t.false_reports.first()
        );
        // The reads overlapped the writes: each loop saw the ledger grow.
        assert!(t.distinct_lengths() >= 2, "{summary}: {:?}", t.lengths);
    }

    // Everything the writers did is there and verifies.
    let store = ReadStore::open_read_only(&db).unwrap();
    let report = rpr::store::verify(&store, None).unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    let status = rpr::inspect::status(&store).unwrap();
    assert_eq!(
        status.counts["completed"],
        i64::try_from(WRITERS * BATCHES * CALLS).unwrap()
    );
    let effects: usize = (0..WRITERS)
        .map(|w| effects(&root.join(format!("effects-{w}.log"))))
        .sum();
    assert_eq!(effects, WRITERS * BATCHES * CALLS);
}

/// `ReadStore::snapshot`: every read in it sees the database as of its start (commits made
/// meanwhile are not seen), a nested snapshot sees the same, and the snapshot ends (later
/// reads see the commits) whether `f` returns `Ok`, returns `Err` or panics.
#[test]
fn a_snapshot_holds_one_view_nests_and_ends_on_error_and_panic() {
    let dir = TempDir::new("snapshot-api");
    let db = dir.db();
    // The writer opens first: in one process SQLite shares one WAL-index mapping per file,
    // and a read-only mapping made first would make the writer read-only too.
    let rt = runtime(&db);
    let store = ReadStore::open_read_only(&db).unwrap();
    let propose = |key: &str| {
        let _ = rt
            .propose(
                &actor("proposer"),
                definition(key, rpr::ActionClass::Mutating),
            )
            .unwrap();
    };
    let len = |s: &ReadStore| s.ledger_head().unwrap().map_or(0, |h| h.0);
    propose("a");
    let start = len(&store);
    assert!(start > 0);

    let seen = store
        .snapshot(|s| {
            let first = len(s);
            propose("b");
            let nested = s.snapshot(|s| Ok::<_, StoreError>(len(s)))?;
            Ok::<_, StoreError>((first, nested, len(s)))
        })
        .unwrap();
    assert_eq!(
        seen,
        (start, start, start),
        "one view for the whole snapshot"
    );
    let after_ok = len(&store);
    assert!(after_ok > start, "the snapshot ended with Ok");

    let err = store.snapshot(|s| {
        let _ = len(s);
        propose("c");
        Err::<(), _>(StoreError::Corrupt("stop here".into()))
    });
    assert!(matches!(err, Err(StoreError::Corrupt(_))));
    let after_err = len(&store);
    assert!(after_err > after_ok, "the snapshot ended with Err");

    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        store.snapshot(|s| -> Result<(), StoreError> {
            let _ = len(s);
            propose("d");
            panic!("inside a snapshot (expected by the test)")
        })
    }));
    assert!(panicked.is_err());
    assert!(len(&store) > after_err, "the snapshot ended with the panic");
}
