//! A small valid pathway database, written through the library's `Runtime` the way the
//! tests write theirs (`tests/core/ledger.rs`): five pathways through admission, approval,
//! dispatch, an unknown outcome, reconciliation, repair, readback, denial and hold.
//! Deterministic (a ticking clock from a fixed start, sequential ids, and the facts of
//! the process that wrote it replaced by fixed ones, `fix_process_facts`), so that every
//! process builds the same bytes and a corpus input means the same thing in each.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use rpr::executor::{
    Binding, Delivery, Executor, Observation, Readback, Refusal, RejectionClass, Request,
};
use rpr::token::Reconciled;
use rpr::{
    ActionClass, Actor, Admission, Authority, Clock, Decision, Definition, Outcome, Proposal,
    Runtime, SequentialIds,
};
use serde_json::json;

/// A clock that ticks one millisecond per reading.
struct Tick(AtomicI64);

impl Clock for Tick {
    fn now_ms(&self) -> i64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// An executor that answers with scripted deliveries, the last one repeated.
struct Scripted(Vec<Delivery>);

impl Executor for Scripted {
    fn bind(&mut self, _request: &Request) -> Result<Binding, Refusal> {
        Ok(Binding::new("scripted", json!({"executor": "scripted"}))
            .expect("a binding")
            .read_only())
    }
    fn prepare(&mut self, _request: &Request, _binding: &Binding) -> Result<(), Refusal> {
        Ok(())
    }
    fn execute(&mut self, _request: &Request) -> Delivery {
        if self.0.len() > 1 {
            self.0.remove(0)
        } else {
            self.0[0].clone()
        }
    }
}

fn ok() -> Scripted {
    Scripted(vec![Delivery::Succeeded {
        reply: json!({"ok": true}),
    }])
}

/// A readback that reports a fixed observation.
struct Sees(&'static str);

impl Readback for Sees {
    fn observe(&mut self, _request: &Request) -> Observation {
        let evidence = json!({"seen": self.0});
        match self.0 {
            "applied" => Observation::Applied { evidence },
            "not_applied" => Observation::NotApplied { evidence },
            _ => Observation::Inconclusive { evidence },
        }
    }
}

fn actor(name: &str) -> Actor {
    Actor::new(name)
}

fn definition(key: &str) -> Definition {
    use rpr::Role::*;
    let auth = Authority::single(&actor("decision_owner"))
        .with(ApprovalAuthority, &actor("approval_authority"))
        .with(ExecutionActor, &actor("execution_actor"))
        .with(StopAuthority, &actor("stop_authority"))
        .with(EvidenceOwner, &actor("evidence_owner"))
        .with(RepairOwner, &actor("repair_owner"))
        .with(ResumeAuthority, &actor("resume_authority"))
        .with(ResidualOwner, &actor("residual_owner"));
    Definition::new(
        Request::new("put", json!({"key": key, "value": "v", "token": "secret"})),
        ActionClass::Mutating,
        key,
        auth,
    )
}

/// Writes the five pathways of `tests/core/ledger.rs` into a new database at `path`.
fn write(rt: &Runtime) {
    let (dec, appr, exec, evid) = (
        actor("decision_owner"),
        actor("approval_authority"),
        actor("execution_actor"),
        actor("evidence_owner"),
    );
    let admit = |key: &str, decision: Decision| {
        let Proposal::New(p) = rt
            .propose(&actor("proposer"), definition(key))
            .expect("propose")
        else {
            panic!("a new proposal")
        };
        p.admit(rt, &dec, &move |_| decision.clone())
            .expect("admit")
    };
    // A: allowed, sent, returned, confirmed by readback: completed.
    let pa = admit("a", Decision::Allow)
        .into_approved()
        .expect("approved");
    let mut ex = ok();
    let Outcome::Returned(pa) = pa.bind(&mut ex).expect("bind").dispatch(rt, &exec, &mut ex) else {
        panic!("returned")
    };
    pa.confirm(rt, &evid, &mut Sees("applied"))
        .expect("confirm")
        .into_completed()
        .expect("completed");
    // B: held for approval, approved, unknown, not applied, repaired, sent again, completed.
    let Admission::AwaitingApproval(pb) = admit("b", Decision::Hold) else {
        panic!("held")
    };
    let ap = rt.grant_approval(&pb, &appr).expect("grant");
    let pb = pb
        .approve(rt, ap.quorum(rt).expect("quorum"))
        .expect("approve");
    let mut ex = Scripted(vec![Delivery::PossiblyWritten {
        reason: "timeout".into(),
    }]);
    let Outcome::Unknown(pb) = pb.bind(&mut ex).expect("bind").dispatch(rt, &exec, &mut ex) else {
        panic!("unknown")
    };
    let Reconciled::NotApplied(tok) = rt.reconcile(&pb, &mut Sees("not_applied")) else {
        panic!("not applied")
    };
    let pb = pb
        .require_repair(rt, tok)
        .expect("repair required")
        .repair(rt, &actor("repair_owner"), &json!({"checked": true}), None)
        .expect("repaired");
    let mut ex = ok();
    let Outcome::Returned(pb) = pb.bind(&mut ex).expect("bind").dispatch(rt, &exec, &mut ex) else {
        panic!("returned")
    };
    pb.confirm(rt, &evid, &mut Sees("applied"))
        .expect("confirm")
        .into_completed()
        .expect("completed");
    // C: a human gate, denied.
    let Admission::HumanGate(pc) = admit("c", Decision::HumanGate) else {
        panic!("gate")
    };
    pc.deny(rt, &appr, "no").expect("deny");
    // D: allowed, then held.
    let pd = admit("d", Decision::Allow)
        .into_approved()
        .expect("approved");
    pd.hold(rt, &actor("stop_authority"), "wait").expect("hold");
    // E: held for approval, approved (the approval used), sent, rejected as not applied.
    let Admission::AwaitingApproval(pe) = admit("e", Decision::Hold) else {
        panic!("held")
    };
    let ap = rt.grant_approval(&pe, &appr).expect("grant");
    let pe = pe
        .approve(rt, ap.quorum(rt).expect("quorum"))
        .expect("approve");
    let mut ex = Scripted(vec![Delivery::Rejected {
        error: json!({"code": -32000, "message": "refused"}),
        class: RejectionClass::NotApplied,
    }]);
    let Outcome::Failed(_) = pe.bind(&mut ex).expect("bind").dispatch(rt, &exec, &mut ex) else {
        panic!("failed")
    };
    // F: held for approval, an approval granted and not yet used.
    let Admission::AwaitingApproval(pf) = admit("f", Decision::Hold) else {
        panic!("held")
    };
    let _unused = rt.grant_approval(&pf, &appr).expect("grant");
}

/// The one fixed owner and database identity every story database holds.
const OWNER: &str = "fuzz/1/1/0/00000000-0000-0000-0000-000000000000";
const DATABASE_ID: &str = "db_00000000000000000000000000000000";

/// Makes the database the same bytes in every process. The clock and the ids are fixed,
/// but a dispatch records its owner (host, pid, the process's start time and boot id)
/// and a new database draws its identity: both differ per process, and an owner of
/// another length moves every later byte, so the same byte flip would hit another cell.
/// Each event's owner becomes [`OWNER`], the chain is recomputed from the genesis, and
/// the identity becomes [`DATABASE_ID`]; the database verifies before and after.
fn fix_process_facts(conn: &rusqlite::Connection) {
    let rows: Vec<(i64, String)> = conn
        .prepare("SELECT seq, event FROM ledger ORDER BY seq")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .expect("the ledger");
    let mut prev = rpr::ledger::GENESIS.to_owned();
    for (seq, event) in rows {
        let event = match event.find("\"owner\":\"") {
            Some(at) => {
                let start = at + "\"owner\":\"".len();
                let end = start + event[start..].find('"').expect("the owner's end");
                format!("{}{OWNER}{}", &event[..start], &event[end..])
            }
            None => event,
        };
        let hash = rpr::ledger::chain_hash(&prev, &event);
        conn.execute(
            "UPDATE ledger SET event = ?1, prev_hash = ?2, hash = ?3 WHERE seq = ?4",
            rusqlite::params![event, prev, hash, seq],
        )
        .expect("rewrite an event");
        conn.execute(
            "UPDATE meta SET value = ?1 WHERE key = 'ledger_head'",
            [format!("{seq}:{hash}")],
        )
        .expect("the head");
        prev = hash;
    }
    conn.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'database_id'",
        [DATABASE_ID],
    )
    .expect("the identity");
    conn.execute_batch("VACUUM").expect("vacuum");
}

/// The scratch directories to remove when the process exits.
static SCRATCH: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

extern "C" fn remove_scratch() {
    if let Ok(dirs) = SCRATCH.lock() {
        for dir in dirs.iter() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Removes the scratch directories of processes that are gone (libFuzzer ends some runs,
/// `-max_total_time` for one, without running `atexit` handlers).
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.starts_with("rpr-fuzz-"))
            .and_then(|n| n.rsplit('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A directory of this process's own for the targets' files: under `/dev/shm` when
/// there is one (memory, not disk), else the system temp dir. Removed when the process
/// exits (libFuzzer ends with `exit`, which runs no destructor).
#[must_use]
pub fn scratch(tag: &str) -> PathBuf {
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    remove_stale(&base);
    let dir = base.join(format!("rpr-fuzz-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let mut dirs = SCRATCH.lock().expect("the scratch list");
    if dirs.is_empty() {
        // SAFETY: registers a plain function with no arguments, run once at exit.
        unsafe { libc::atexit(remove_scratch) };
    }
    dirs.push(dir.clone());
    dir
}

/// The bytes of the story database: one SQLite file in rollback-journal mode, every
/// write checkpointed into it, so that a copy of these bytes is the whole database.
#[must_use]
/// The key the story database's log is signed with.
pub fn log_key() -> rpr::evidence::note::SignerKey {
    rpr::evidence::note::SignerKey::from_seed("rpr-fuzz-log", &[11; 32]).expect("a key")
}

pub fn database_bytes() -> Vec<u8> {
    let dir = scratch("build");
    let path = dir.join("stories.db");
    {
        let rt = Runtime::builder(&path)
            .clock(Tick(AtomicI64::new(1_700_000_000_000)))
            .ids(SequentialIds::default())
            .open()
            .expect("a runtime");
        write(&rt);
        assert!(
            rt.verify(None).expect("verify").is_ok(),
            "the story database verifies"
        );
    }
    let conn = rusqlite::Connection::open(&path).expect("open");
    let mode: String = conn
        .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
        .expect("journal mode");
    assert_eq!(mode, "delete");
    fix_process_facts(&conn);
    drop(conn);
    // The log signed as it stands now (the facts above rewrote events and the identity).
    {
        let rt = Runtime::builder(&path)
            .signing(rpr::store::log::Signing::new(log_key()).begin_log())
            .open()
            .expect("a signing runtime");
        rt.sign_log().expect("sign the log");
    }
    let conn = rusqlite::Connection::open(&path).expect("open");
    let mode: String = conn
        .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
        .expect("journal mode");
    assert_eq!(mode, "delete");
    drop(conn);
    let store = rpr::store::ReadStore::open_read_only(&path).expect("a read-only store");
    assert!(
        rpr::store::verify(&store, None).expect("verify").is_ok(),
        "the story database verifies with the fixed owner and identity"
    );
    drop(store);
    let bytes = std::fs::read(&path).expect("the database file");
    std::fs::remove_dir_all(&dir).expect("remove the build directory");
    bytes
}
