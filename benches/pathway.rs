//! Cost of governance, in units of one bare `synchronous=FULL` SQLite commit.
//!
//! Run with `cargo bench --bench pathway`. In one run, on one disk, it measures:
//! - a bare commit: one `INSERT` in its own transaction, WAL, `synchronous=FULL`;
//! - a governed call: bind + dispatch of an admitted pathway with a no-op executor
//!   (the write-ahead attempt commit and the outcome commit);
//! - a full pathway: propose + admit + bind + dispatch (read-only action, so a success
//!   reply completes it): 4 commits;
//! - the same with the merged step `propose_and_admit`: 3 commits;
//! - a full mutating call confirmed by readback, separate steps (propose, admit, bind,
//!   dispatch, confirm: 5 commits) and merged (`propose_and_admit`, bind,
//!   `dispatch_and_confirm`: 3 commits), with a no-op executor that binds a mutating
//!   target and a readback that sees the effect at once.
//!
//! - the whole call of issue 27's one-in-flight target: `propose_and_bind` +
//!   `dispatch_and_confirm` with the file executor and its readback (2 commits), beside
//!   the executor's own work alone (bind, prepare, write, read back, on another file); its
//!   floor is two bare commits plus that work, its target at most 1.3 times the floor.
//!
//! Rounds alternate between the three so that machine noise hits them alike. The
//! printed ratio is median(governed call) / median(bare commit); the design floor is
//! 2 (two durable commits), the target at most 2.5.

use std::time::{Duration, Instant};

use rpr::executor::file::{FileExecutor, FileReadback, WRITE_FILE};
use rpr::executor::{Binding, Delivery, Executor, Observation, Readback, Refusal, Request};
use rpr::{
    ActionClass, Actor, Admission, Authority, Confirmed, Decided, Decision, Definition, Outcome,
    Proposal, Ready, Runtime,
};
use serde_json::json;

struct Noop;

impl Executor for Noop {
    fn bind(&mut self, _request: &Request) -> Result<Binding, Refusal> {
        // It does nothing, so it truthfully binds a read-only target.
        Ok(Binding::new("noop", json!({"executor": "noop"}))
            .expect("static binding")
            .read_only())
    }
    fn prepare(&mut self, _request: &Request, _binding: &Binding) -> Result<(), Refusal> {
        Ok(())
    }
    fn execute(&mut self, _request: &Request) -> Delivery {
        Delivery::Succeeded {
            reply: json!({"ok": true}),
        }
    }
}

/// Like [`Noop`], but the target it binds may change something, so a success reply must
/// be read back.
struct NoopWrite;

impl Executor for NoopWrite {
    fn bind(&mut self, _request: &Request) -> Result<Binding, Refusal> {
        Ok(Binding::new("noop-write", json!({"executor": "noop-write"})).expect("static binding"))
    }
    fn prepare(&mut self, _request: &Request, _binding: &Binding) -> Result<(), Refusal> {
        Ok(())
    }
    fn execute(&mut self, _request: &Request) -> Delivery {
        Delivery::Succeeded {
            reply: json!({"ok": true}),
        }
    }
}

/// A readback that sees the effect at once.
struct Sees;

impl Readback for Sees {
    fn observe(&mut self, _request: &Request) -> Observation {
        Observation::Applied {
            evidence: json!({"seen": true}),
        }
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn percentile(v: &[Duration], p: f64) -> Duration {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "index into a small sorted vector"
    )]
    let i = ((v.len() - 1) as f64 * p).round() as usize;
    v[i]
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(300);
    let dir = std::env::temp_dir().join(format!("rpr-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");

    let bare = rusqlite::Connection::open(dir.join("bare.db")).expect("open bare");
    let _: String = bare
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .expect("wal");
    bare.pragma_update(None, "synchronous", "FULL")
        .expect("full");
    bare.execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)")
        .expect("table");

    let rt = Runtime::open(dir.join("rpr.db")).expect("open runtime");
    let actor = Actor::new("bench");
    let allow = |_: &Definition| Decision::Allow;
    let mut ex = Noop;

    let mut wx = NoopWrite;
    let mut sees = Sees;
    std::fs::create_dir_all(dir.join("files")).expect("files dir");
    let mut fx = FileExecutor::new(dir.join("files")).expect("file executor");
    let mut fb = FileReadback::new(&fx);
    let (mut t_exec, mut t_whole, mut whole_commits) = (Vec::new(), Vec::new(), 0);
    let (mut t_bare, mut t_call, mut t_full) = (Vec::new(), Vec::new(), Vec::new());
    let (mut t_full_merged, mut t_write, mut t_write_merged) = (Vec::new(), Vec::new(), Vec::new());
    eprintln!("running {rounds} rounds (bare commit, governed call, full pathways)…");
    for i in 0..rounds {
        if i % 100 == 0 && i > 0 {
            eprintln!("  {i}/{rounds}");
        }
        let start = Instant::now();
        let tx = bare.unchecked_transaction().expect("tx");
        tx.execute("INSERT INTO t (payload) VALUES (?1)", [format!("row {i}")])
            .expect("insert");
        tx.commit().expect("commit");
        t_bare.push(start.elapsed());

        let def = |k: String| {
            Definition::new(
                Request::new("noop", json!({"i": i})),
                ActionClass::ReadOnly,
                k,
                Authority::single(&actor),
            )
        };
        let Proposal::New(p) = rt
            .propose(&actor, def(format!("call-{i}")))
            .expect("propose")
        else {
            panic!("replay")
        };
        let Admission::Approved(p) = p.admit(&rt, &actor, &allow).expect("admit") else {
            panic!("not allowed")
        };
        let start = Instant::now();
        let bound = p.bind(&mut ex).expect("bind");
        let Outcome::Completed(_) = bound.dispatch(&rt, &actor, &mut ex) else {
            panic!("not completed")
        };
        t_call.push(start.elapsed());

        let start = Instant::now();
        let Proposal::New(p) = rt
            .propose(&actor, def(format!("full-{i}")))
            .expect("propose")
        else {
            panic!("replay")
        };
        let Admission::Approved(p) = p.admit(&rt, &actor, &allow).expect("admit") else {
            panic!("not allowed")
        };
        let bound = p.bind(&mut ex).expect("bind");
        let Outcome::Completed(_) = bound.dispatch(&rt, &actor, &mut ex) else {
            panic!("not completed")
        };
        t_full.push(start.elapsed());

        let start = Instant::now();
        let Decided::New(Admission::Approved(p)) = rt
            .propose_and_admit(&actor, &actor, def(format!("merged-{i}")), &allow)
            .expect("propose_and_admit")
        else {
            panic!("not admitted")
        };
        let bound = p.bind(&mut ex).expect("bind");
        let Outcome::Completed(_) = bound.dispatch(&rt, &actor, &mut ex) else {
            panic!("not completed")
        };
        t_full_merged.push(start.elapsed());

        let write = |k: String| {
            Definition::new(
                Request::new("noop-write", json!({"i": i})),
                ActionClass::Mutating,
                k,
                Authority::single(&actor),
            )
        };
        let start = Instant::now();
        let Proposal::New(p) = rt
            .propose(&actor, write(format!("write-{i}")))
            .expect("propose")
        else {
            panic!("replay")
        };
        let Admission::Approved(p) = p.admit(&rt, &actor, &allow).expect("admit") else {
            panic!("not allowed")
        };
        let bound = p.bind(&mut wx).expect("bind");
        let Outcome::Returned(r) = bound.dispatch(&rt, &actor, &mut wx) else {
            panic!("a mutating call returns for readback")
        };
        let Ok(Confirmed::Completed(_)) = r.confirm(&rt, &actor, &mut sees) else {
            panic!("not confirmed")
        };
        t_write.push(start.elapsed());

        let start = Instant::now();
        let Decided::New(Admission::Approved(p)) = rt
            .propose_and_admit(&actor, &actor, write(format!("write-merged-{i}")), &allow)
            .expect("propose_and_admit")
        else {
            panic!("not admitted")
        };
        let bound = p.bind(&mut wx).expect("bind");
        let Outcome::Completed(_) = bound.dispatch_and_confirm(&rt, &actor, &mut wx, &mut sees)
        else {
            panic!("not completed")
        };
        t_write_merged.push(start.elapsed());

        let file = |name: &str| {
            Request::new(
                WRITE_FILE,
                json!({"path": format!("{name}-{i}.txt"), "content": format!("content {i}")}),
            )
        };
        let start = Instant::now();
        let alone = file("alone");
        let binding = fx.bind(&alone).expect("bind");
        fx.prepare(&alone, &binding).expect("prepare");
        let Delivery::Succeeded { .. } = fx.execute(&alone) else {
            panic!("the file was not written")
        };
        let Observation::Applied { .. } = fb.observe(&alone) else {
            panic!("the file does not read back")
        };
        t_exec.push(start.elapsed());

        let commits = rt.write_stats().commits;
        let start = Instant::now();
        let whole = Definition::new(
            file("whole"),
            ActionClass::Mutating,
            format!("whole-{i}"),
            Authority::single(&actor),
        );
        let Ok(Ready::Bound(bound)) = rt.propose_and_bind(&actor, &actor, whole, &allow, &mut fx)
        else {
            panic!("propose_and_bind")
        };
        let Outcome::Completed(_) = bound.dispatch_and_confirm(&rt, &actor, &mut fx, &mut fb)
        else {
            panic!("not completed")
        };
        t_whole.push(start.elapsed());
        whole_commits += rt.write_stats().commits - commits;
    }
    let (me, mwh) = (median(&mut t_exec), median(&mut t_whole));
    let mfm = median(&mut t_full_merged);
    let mw = median(&mut t_write);
    let mwm = median(&mut t_write_merged);
    let (mb, mc, mf) = (
        median(&mut t_bare),
        median(&mut t_call),
        median(&mut t_full),
    );
    println!("| measurement ({rounds} rounds, interleaved) | median | p90 | in bare commits |");
    println!("|---|---|---|---|");
    for (name, m, v) in [
        ("bare synchronous=FULL commit", mb, &t_bare),
        (
            "governed call (bind + dispatch, no-op executor)",
            mc,
            &t_call,
        ),
        (
            "full pathway (propose + admit + bind + dispatch): 4 commits",
            mf,
            &t_full,
        ),
        (
            "full pathway, merged (propose_and_admit + bind + dispatch): 3 commits",
            mfm,
            &t_full_merged,
        ),
        (
            "mutating call (propose + admit + bind + dispatch + confirm): 5 commits",
            mw,
            &t_write,
        ),
        (
            "mutating call, merged (propose_and_admit + bind + dispatch_and_confirm): 3 commits",
            mwm,
            &t_write_merged,
        ),
        (
            "file executor alone (bind, prepare, write, read back)",
            me,
            &t_exec,
        ),
        (
            "whole call (propose_and_bind + dispatch_and_confirm, file executor)",
            mwh,
            &t_whole,
        ),
    ] {
        println!(
            "| {name} | {:.1} µs | {:.1} µs | {:.2} |",
            m.as_secs_f64() * 1e6,
            percentile(v, 0.9).as_secs_f64() * 1e6,
            m.as_secs_f64() / mb.as_secs_f64()
        );
    }
    println!(
        "\noverhead per governed call: {:.2} bare commits (floor 2, target <= 2.5)",
        mc.as_secs_f64() / mb.as_secs_f64()
    );
    println!(
        "mutating call confirmed by readback: {:.2} bare commits separate, {:.2} merged",
        mw.as_secs_f64() / mb.as_secs_f64(),
        mwm.as_secs_f64() / mb.as_secs_f64()
    );
    #[expect(
        clippy::cast_precision_loss,
        reason = "a count of commits in a benchmark"
    )]
    let per_call = whole_commits as f64 / rounds as f64;
    let floor = 2.0 * mb.as_secs_f64() + me.as_secs_f64();
    println!(
        "whole call at 1 in flight: {:.1} µs, {per_call:.2} commits; floor (2 bare commits + the executor alone) {:.1} µs; {:.2} times the floor (target <= 1.3)",
        mwh.as_secs_f64() * 1e6,
        floor * 1e6,
        mwh.as_secs_f64() / floor
    );
    let _ = std::fs::remove_dir_all(&dir);
}
