//! Cost of governance, in units of one bare `synchronous=FULL` SQLite commit.
//!
//! Run with `cargo bench --bench pathway`. In one run, on one disk, it measures:
//! - a bare commit: one `INSERT` in its own transaction, WAL, `synchronous=FULL`;
//! - a governed call: bind + dispatch of an admitted pathway with a no-op executor
//!   (the write-ahead attempt commit and the outcome commit);
//! - a full pathway: propose + admit + bind + dispatch (read-only action, so a success
//!   reply completes it).
//!
//! Rounds alternate between the three so that machine noise hits them alike. The
//! printed ratio is median(governed call) / median(bare commit); the design floor is
//! 2 (two durable commits), the target at most 2.5.

use std::time::{Duration, Instant};

use rpr::executor::{Binding, Delivery, Executor, Refusal, Request};
use rpr::{
    ActionClass, Actor, Admission, Authority, Decision, Definition, Outcome, Proposal, Runtime,
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

    let (mut t_bare, mut t_call, mut t_full) = (Vec::new(), Vec::new(), Vec::new());
    eprintln!("running {rounds} rounds (bare commit, governed call, full pathway)…");
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
    }
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
            "full pathway (propose + admit + bind + dispatch)",
            mf,
            &t_full,
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
    let _ = std::fs::remove_dir_all(&dir);
}
