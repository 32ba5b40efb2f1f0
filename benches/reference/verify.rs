//! `rpr::store::verify` against hashing the same bytes.
//!
//! [`run`] builds (or reuses) a ledger of about `events` events written through the
//! public API, then measures, in one process and in alternating rounds:
//!
//! 1. `rpr::store::verify(store, None)`: the whole chain (every event re-hashed, its
//!    canonical form checked, its fields replayed) and every stored row re-derived from
//!    the events;
//! 2. the `sha2` crate hashing the concatenated event texts, already in memory (read from
//!    the database before timing), so it measures hashing only;
//! 3. `sha256sum` over a file holding those same bytes (process start, reading the file
//!    from the page cache, hashing), skipped with a note when it is not on `PATH`.
//!
//! The ledger is a mix of pathways a host would write: read-only calls admitted and
//! dispatched; mutating calls confirmed by readback; calls held for an approval or put
//! in front of a Human Gate; denials; holds and releases; calls whose outcome was
//! unknown and then reconciled; failed calls repaired and resumed; and pathways left
//! open. The executor does nothing (it answers from a script), so building costs one
//! durable commit per step. The database is kept in `<target>/rpr-bench/` (next to the
//! bench binary; the system temporary directory if that cannot be found) as
//! `ledger-verify-v1-<events>.db` and reused by later runs.

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rpr::executor::{Binding, Delivery, Executor, Observation, Readback, Refusal, Request};
use rpr::store::ReadStore;
use rpr::token::Reconciled;
use rpr::{
    ActionClass, Actor, Admission, Authority, Confirmed, Decision, Definition, Outcome, Proposal,
    Role, Runtime,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Bumped whenever the generated ledger changes, so an old cached file is not reused.
const LEDGER_VERSION: u32 = 1;

/// An executor that does nothing and answers with the delivery it is told to.
struct Scripted(Delivery);

impl Executor for Scripted {
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal> {
        // It touches nothing, so it truthfully binds a read-only target.
        Ok(Binding::new(
            "bench",
            json!({"executor": "bench", "tool": request.action}),
        )
        .expect("a small binding")
        .read_only())
    }
    fn prepare(&mut self, _request: &Request, _binding: &Binding) -> Result<(), Refusal> {
        Ok(())
    }
    fn execute(&mut self, _request: &Request) -> Delivery {
        self.0.clone()
    }
}

/// A readback that sees the effect applied.
struct SeesApplied;

impl Readback for SeesApplied {
    fn observe(&mut self, request: &Request) -> Observation {
        Observation::Applied {
            evidence: json!({"seen": "applied", "path": request.arguments.get("path")}),
        }
    }
}

/// The eight roles, each held by its own actor.
struct Actors {
    proposer: Actor,
    decision: Actor,
    approval: Actor,
    execution: Actor,
    stop: Actor,
    evidence: Actor,
    repair: Actor,
}

impl Actors {
    fn new() -> Self {
        Self {
            proposer: Actor::new("agent:planner"),
            decision: Actor::new("policy:default"),
            approval: Actor::new("human:alice"),
            execution: Actor::new("agent:executor"),
            stop: Actor::new("human:oncall"),
            evidence: Actor::new("service:auditor"),
            repair: Actor::new("human:bob"),
        }
    }

    fn authority(&self) -> Authority {
        Authority::single(&self.decision)
            .with(Role::ApprovalAuthority, &self.approval)
            .with(Role::ExecutionActor, &self.execution)
            .with(Role::StopAuthority, &self.stop)
            .with(Role::EvidenceOwner, &self.evidence)
            .with(Role::RepairOwner, &self.repair)
            .with(Role::ResumeAuthority, &self.repair)
            .with(Role::ResidualOwner, &self.stop)
    }
}

fn reply(i: usize) -> Value {
    json!({"content": [{"type": "text", "text": format!("wrote {} bytes", 64 + i % 500)}], "isError": false})
}

/// Writes pathway `i` (its story chosen by `i % 20`), stopping early once the ledger
/// holds `target` events. Returns the ledger's length afterwards.
fn write_pathway(rt: &Runtime, who: &Actors, i: usize, target: usize) -> usize {
    let len = || {
        let (seq, _) = rt
            .reader()
            .ledger_head()
            .expect("ledger head")
            .unwrap_or((0, String::new()));
        usize::try_from(seq).expect("a positive seq")
    };
    let story = i % 20;
    let class = if story < 8 || (12..=15).contains(&story) || story == 18 {
        ActionClass::ReadOnly
    } else {
        ActionClass::Mutating
    };
    let tool = if class == ActionClass::ReadOnly {
        "read_file"
    } else {
        "write_file"
    };
    let mut arguments = json!({"path": format!("/srv/app/data/{:04}/item-{i}.json", i % 1000)});
    if class == ActionClass::Mutating {
        arguments["content"] = json!("x".repeat(16 + (i * 7) % 200));
    }
    let definition = Definition::new(
        Request::new(tool, arguments),
        class,
        format!("bench-{i}"),
        who.authority(),
    )
    .with_metadata(json!({"session": format!("s-{}", i / 50), "turn": i % 50}));
    let decide = |_: &Definition| match story {
        12 | 13 => Decision::Hold,
        14 => Decision::Deny("outside the allowed paths".into()),
        15 => Decision::HumanGate,
        _ => Decision::Allow,
    };
    let Proposal::New(p) = rt.propose(&who.proposer, definition).expect("propose") else {
        panic!("pathway {i} already proposed");
    };
    if len() >= target {
        return len();
    }
    let approved = match p.admit(rt, &who.decision, &decide).expect("admit") {
        Admission::Approved(p) => p,
        Admission::AwaitingApproval(p) => {
            if len() >= target {
                return len();
            }
            let approval = rt.grant_approval(&p, &who.approval).expect("grant");
            if len() >= target {
                return len();
            }
            p.approve(rt, approval.quorum(rt).expect("quorum"))
                .expect("approve")
        }
        Admission::HumanGate(p) => {
            if len() >= target {
                return len();
            }
            let approval = rt.grant_approval(&p, &who.approval).expect("grant");
            if len() >= target {
                return len();
            }
            p.approve(rt, approval.quorum(rt).expect("quorum"))
                .expect("approve")
        }
        Admission::Denied(_) => return len(),
        other => panic!("pathway {i}: {other:?}"),
    };
    if story == 19 || len() >= target {
        // Left open: admitted, never dispatched.
        return len();
    }
    let approved = if story == 18 {
        let held = approved
            .hold(rt, &who.stop, "maintenance window")
            .expect("hold");
        if len() >= target {
            return len();
        }
        let released = held.release(rt, &who.stop).expect("release");
        if len() >= target {
            return len();
        }
        released
    } else {
        approved
    };
    let delivery = match story {
        16 => Delivery::PossiblyWritten {
            reason: "timed out after 30s waiting for the reply".into(),
        },
        17 => Delivery::ToolFailed {
            reply: json!({"content": [{"type": "text", "text": "disk full"}], "isError": true}),
        },
        _ => Delivery::Succeeded { reply: reply(i) },
    };
    let mut ex = Scripted(delivery);
    let bound = approved.bind(&mut ex).expect("bind");
    let returned = match bound.dispatch(rt, &who.execution, &mut ex) {
        Outcome::Completed(_) => return len(),
        Outcome::Returned(p) => p,
        Outcome::Unknown(p) => {
            if len() >= target {
                return len();
            }
            let Reconciled::Applied(token) = rt.reconcile(&p, &mut SeesApplied) else {
                panic!("reconciliation of pathway {i} did not see it applied");
            };
            p.complete(rt, token).expect("complete");
            return len();
        }
        Outcome::Failed(p) => {
            if len() >= target {
                return len();
            }
            let ready = p
                .repair(
                    rt,
                    &who.repair,
                    &json!({"freed": "12 GiB", "ticket": format!("OPS-{i}")}),
                    None,
                )
                .expect("repair");
            if len() >= target {
                return len();
            }
            let mut ex = Scripted(Delivery::Succeeded { reply: reply(i) });
            let bound = ready.bind(&mut ex).expect("bind again");
            match bound.dispatch(rt, &who.execution, &mut ex) {
                Outcome::Returned(p) => p,
                other => panic!("resumed pathway {i}: {other:?}"),
            }
        }
        other => panic!("pathway {i}: {other:?}"),
    };
    if len() >= target {
        return len();
    }
    let Confirmed::Completed(_) = returned
        .confirm(rt, &who.evidence, &mut SeesApplied)
        .expect("confirm")
    else {
        panic!("pathway {i} not confirmed");
    };
    len()
}

/// Where generated ledgers are kept: `<target>/rpr-bench` when the running binary sits in
/// `<target>/<profile>/deps/`, else the system temporary directory.
fn cache_dir() -> PathBuf {
    let beside_target = std::env::current_exe().ok().and_then(|exe| {
        let deps = exe.parent()?;
        (deps.file_name()? == "deps").then(|| deps.parent()?.parent().map(Path::to_path_buf))?
    });
    beside_target
        .unwrap_or_else(std::env::temp_dir)
        .join("rpr-bench")
}

/// The ledger of `events` events: reused if a complete one is cached, else written.
fn ledger(events: usize, progress: bool) -> PathBuf {
    let dir = cache_dir();
    std::fs::create_dir_all(&dir).expect("bench cache dir");
    let path = dir.join(format!("ledger-verify-v{LEDGER_VERSION}-{events}.db"));
    if path.exists() {
        if progress {
            eprintln!("reusing {}", path.display());
        }
        return path;
    }
    let partial = dir.join(format!(
        "ledger-verify-v{LEDGER_VERSION}-{events}.partial-{}.db",
        std::process::id()
    ));
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", partial.display()));
    }
    if progress {
        eprintln!("writing a ledger of {events} events to {}", path.display());
    }
    let started = Instant::now();
    {
        let rt = Runtime::open(&partial).expect("open the bench runtime");
        let who = Actors::new();
        let mut len = 0;
        let mut i = 0;
        let mut reported = 0;
        while len < events {
            len = write_pathway(&rt, &who, i, events);
            i += 1;
            if progress && len >= reported + events.div_ceil(20) {
                reported = len;
                eprintln!(
                    "  {len}/{events} events, {i} pathways, {:.0?}",
                    started.elapsed()
                );
            }
        }
    }
    // One self-contained file: fold the WAL in, then move it into place.
    let conn = rusqlite::Connection::open(&partial).expect("open the written ledger");
    let _: String = conn
        .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
        .expect("leave WAL mode");
    drop(conn);
    std::fs::rename(&partial, &path).expect("move the ledger into place");
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", partial.display()));
    }
    if progress {
        eprintln!("written in {:.1?}", started.elapsed());
    }
    path
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.2}", a.as_secs_f64() / b.as_secs_f64())
}

/// Builds or reuses a ledger of `events` events and times `rpr::store::verify` against
/// hashing the same event bytes (the `sha2` crate in process, and `sha256sum`), in
/// alternating rounds. Returns a Markdown table of the medians and their ratios.
/// `progress` prints progress to stderr.
pub fn run(events: usize, rounds: usize, progress: bool) -> String {
    let path = ledger(events, progress);
    let store = ReadStore::open_read_only(&path).expect("open the ledger read-only");
    let conn = rusqlite::Connection::open_with_flags(
        &path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("open the ledger");
    let mut bytes = Vec::new();
    {
        let mut stmt = conn
            .prepare("SELECT event FROM ledger ORDER BY seq")
            .expect("select events");
        let mut rows = stmt.query([]).expect("query events");
        while let Some(row) = rows.next().expect("read an event") {
            bytes.extend_from_slice(row.get_ref(0).expect("event").as_bytes().expect("text"));
        }
    }
    drop(conn);
    let file = path.with_extension("events");
    std::fs::write(&file, &bytes).expect("write the event bytes");
    let sha256sum = Command::new("sha256sum")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());

    let report = rpr::store::verify(&store, None).expect("verify");
    assert!(
        report.is_ok(),
        "the bench ledger does not verify: {report:?}"
    );
    let n = report.events;

    let (mut t_verify, mut t_sha2, mut t_sum) = (Vec::new(), Vec::new(), Vec::new());
    if progress {
        eprintln!("{rounds} rounds of verify, sha2, sha256sum (plus one warm-up)…");
    }
    for round in 0..=rounds {
        let start = Instant::now();
        let report = rpr::store::verify(&store, None).expect("verify");
        let verify = start.elapsed();
        assert!(report.is_ok() && report.events == n);

        let start = Instant::now();
        black_box(Sha256::digest(black_box(&bytes)));
        let sha2 = start.elapsed();

        let sum = sha256sum.then(|| {
            let start = Instant::now();
            let out = Command::new("sha256sum")
                .arg(&file)
                .output()
                .expect("run sha256sum");
            assert!(out.status.success(), "sha256sum failed");
            start.elapsed()
        });
        if round > 0 {
            t_verify.push(verify);
            t_sha2.push(sha2);
            t_sum.extend(sum);
        }
        if progress {
            eprintln!(
                "  round {round}{}: verify {}, sha2 {}{}",
                if round == 0 { " (warm-up)" } else { "" },
                ms(verify),
                ms(sha2),
                sum.map(|s| format!(", sha256sum {}", ms(s)))
                    .unwrap_or_default()
            );
        }
    }
    let (verify, sha2) = (median(&mut t_verify), median(&mut t_sha2));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| events | event bytes | verify (median of {rounds}) | sha2 crate | sha256sum | verify / sha2 | verify / sha256sum |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|");
    let (sum, sum_ratio) = if sha256sum {
        let sum = median(&mut t_sum);
        (ms(sum), ratio(verify, sum))
    } else {
        ("skipped: not on PATH".to_owned(), "-".to_owned())
    };
    let _ = writeln!(
        out,
        "| {n} | {} | {} | {} | {sum} | {} | {sum_ratio} |",
        bytes.len(),
        ms(verify),
        ms(sha2),
        ratio(verify, sha2),
    );
    out
}
