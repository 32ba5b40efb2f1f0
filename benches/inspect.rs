//! `rpr-mcp` against the Python reference server: latency of each tool over stdio.
//!
//! Run with `cargo bench --bench inspect`. It builds a database of
//! `RPR_BENCH_PATHWAYS` pathways (default 2000; a third completed, a third
//! denied, a third approved) with the library, starts `rpr-mcp` on it, and times
//! `RPR_BENCH_CALLS` sequential calls (default 200) of each tool, each call
//! waiting for its reply. With `RPR_PY_MCP` set to the Python reference's
//! `rpr-mcp` (PyPI `responsibility-pathway-runtime`, e.g. installed in a venv),
//! it also writes the same pathways and events into the reference's schema
//! (`rpy_schema_metadata`, `pathways`, `evidence_events`) and runs the same
//! calls against it. Both servers are driven identically: `initialize`,
//! `notifications/initialized`, then the calls, limit 50 where a tool pages.
//!
//! Printed: the time from spawn to the `initialize` reply, and the median and
//! 95th percentile per call, per tool, for each server.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use rpr::executor::{Binding, Delivery, Executor, Refusal, Request};
use rpr::{
    ActionClass, Actor, Admission, Authority, Decision, Definition, Outcome, Proposal, Runtime,
};
use serde_json::{Value, json};

struct Noop;

impl Executor for Noop {
    fn bind(&mut self, _request: &Request) -> Result<Binding, Refusal> {
        Ok(Binding::new("noop", json!({"executor": "noop"})).expect("static binding"))
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

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Fills a fresh rpr database; returns the pathway ids.
fn build_rpr(path: &Path, n: usize) -> Vec<String> {
    let rt = Runtime::builder(path)
        .ids(rpr::SequentialIds::default())
        .open()
        .expect("open");
    let who = Actor::new("operator");
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let def = Definition::new(
            Request::new(
                "put",
                json!({"key": format!("k{i}"), "value": "x".repeat(200)}),
            ),
            if i % 3 == 0 {
                ActionClass::ReadOnly
            } else {
                ActionClass::Mutating
            },
            format!("bench-{i}"),
            Authority::single(&who),
        )
        .with_metadata(json!({"ticket": format!("T-{i}"), "note": "benchmark pathway"}));
        let Ok(Proposal::New(p)) = rt.propose(&who, def) else {
            panic!("propose")
        };
        ids.push(p.id().to_owned());
        let decision = if i % 3 == 1 {
            Decision::Deny("bench".into())
        } else {
            Decision::Allow
        };
        match p
            .admit(&rt, &who, &move |_: &Definition| decision.clone())
            .expect("admit")
        {
            Admission::Approved(p) if i % 3 == 0 => {
                let mut ex = Noop;
                let bound = p.bind(&mut ex).expect("bind");
                let Outcome::Completed(_) = bound.dispatch(&rt, &who, &mut ex) else {
                    panic!("dispatch")
                };
            }
            _ => {}
        }
    }
    ids
}

/// Writes the same pathways and events into the Python reference's schema.
fn build_reference(rpr_db: &Path, path: &Path) {
    let src = rpr::store::ReadStore::open_read_only(rpr_db).expect("read");
    let conn = rusqlite::Connection::open(path).expect("open reference db");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE rpy_schema_metadata (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         INSERT INTO rpy_schema_metadata VALUES ('schema_version', '1');
         CREATE TABLE pathways (pathway_id TEXT PRIMARY KEY, definition_json TEXT NOT NULL,
             definition_fingerprint TEXT, state TEXT NOT NULL, idempotency_key TEXT UNIQUE NOT NULL,
             created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP, updated_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP);
         CREATE TABLE evidence_events (sequence INTEGER PRIMARY KEY AUTOINCREMENT, pathway_id TEXT NOT NULL,
             event_json TEXT NOT NULL, event_hash TEXT NOT NULL UNIQUE,
             FOREIGN KEY(pathway_id) REFERENCES pathways(pathway_id));
         BEGIN;",
    )
    .expect("schema");
    let mut after: Option<String> = None;
    loop {
        let page = src
            .list_pathways(after.as_deref(), 1000, None)
            .expect("page");
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        for p in &page {
            conn.execute(
                "INSERT INTO pathways (pathway_id, definition_json, definition_fingerprint, state, idempotency_key)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                rusqlite::params![p.id, p.definition.to_string(), p.request_digest, p.state.as_str(), p.idempotency_key],
            )
            .expect("insert pathway");
        }
    }
    let mut seq = 0;
    loop {
        let rows = src.ledger(seq, 10_000).expect("ledger");
        let Some(last) = rows.last() else { break };
        seq = last.seq;
        for r in &rows {
            conn.execute(
                "INSERT INTO evidence_events (sequence, pathway_id, event_json, event_hash) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![r.seq, r.pathway_id, r.event, r.hash],
            )
            .expect("insert event");
        }
    }
    conn.execute_batch("COMMIT; PRAGMA wal_checkpoint(TRUNCATE);")
        .expect("commit");
}

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    /// Starts `program --database db`, initializes; returns it and the time to the initialize reply.
    fn start(program: &Path, db: &Path) -> (Self, Duration) {
        let t = Instant::now();
        let mut child = Command::new(program)
            .arg("--database")
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn server");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut s = Self {
            child,
            stdin,
            stdout,
            next_id: 0,
        };
        let init = s.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}),
        );
        assert!(init.get("result").is_some(), "initialize failed: {init}");
        let elapsed = t.elapsed();
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        (s, elapsed)
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").expect("write");
        self.stdin.flush().expect("flush");
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).expect("read") > 0,
                "server closed stdout"
            );
            let v: Value = serde_json::from_str(&line).expect("reply is JSON");
            if v.get("id") == Some(&json!(id)) {
                return v;
            }
        }
    }

    fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let last = sorted.len().saturating_sub(1);
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index"
    )]
    let i = ((last as f64) * p).round() as usize;
    sorted.get(i.min(last)).copied().unwrap_or_default()
}

/// Median and p95 of `calls` calls of `tool`, arguments from `args(i)`.
fn time_tool(
    server: &mut Server,
    tool: &str,
    calls: usize,
    args: &dyn Fn(usize) -> Value,
) -> (Duration, Duration) {
    let mut times = Vec::with_capacity(calls);
    for i in 0..calls {
        let t = Instant::now();
        let reply = server.request("tools/call", json!({"name": tool, "arguments": args(i)}));
        times.push(t.elapsed());
        let result = reply
            .get("result")
            .unwrap_or_else(|| panic!("{tool}: {reply}"));
        assert_ne!(
            result.get("isError"),
            Some(&json!(true)),
            "{tool}: {result}"
        );
    }
    times.sort();
    (percentile(&times, 0.5), percentile(&times, 0.95))
}

type Row = (String, Duration, Duration);
/// Startup time and one row per tool.
type Run = (Duration, Vec<Row>);
/// A tool and how to build its arguments for call `i`.
type ToolArgs<'a> = (&'static str, Box<dyn Fn(usize) -> Value + 'a>);

fn run(program: &Path, db: &Path, ids: &[String], calls: usize) -> Run {
    let (mut s, startup) = Server::start(program, db);
    let id = |i: usize| json!(ids[(i * 7919) % ids.len()]);
    let tools: [ToolArgs<'_>; 5] = [
        ("rpr.get_status", Box::new(|_| json!({}))),
        ("rpr.list_pathways", Box::new(|_| json!({"limit": 50}))),
        (
            "rpr.get_pathway",
            Box::new(move |i| json!({"pathway_id": id(i)})),
        ),
        (
            "rpr.get_evidence",
            Box::new(move |i| json!({"pathway_id": id(i), "limit": 50})),
        ),
        ("rpr.list_unresolved", Box::new(|_| json!({"limit": 50}))),
    ];
    let mut rows = Vec::new();
    for (tool, args) in &tools {
        let _ = time_tool(&mut s, tool, calls.min(10), args.as_ref());
        let (p50, p95) = time_tool(&mut s, tool, calls, args.as_ref());
        rows.push(((*tool).to_owned(), p50, p95));
    }
    s.stop();
    (startup, rows)
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn main() {
    let n = env_usize("RPR_BENCH_PATHWAYS", 2000);
    let calls = env_usize("RPR_BENCH_CALLS", 200);
    let dir = std::env::temp_dir().join(format!("rpr-bench-inspect-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let db = dir.join("rpr.db");
    let t = Instant::now();
    let ids = build_rpr(&db, n);
    eprintln!("built {n} pathways in {:.1} s", t.elapsed().as_secs_f64());

    let ours = PathBuf::from(env!("CARGO_BIN_EXE_rpr-mcp"));
    let (startup, rows) = run(&ours, &db, &ids, calls);
    let reference = std::env::var_os("RPR_PY_MCP").map(PathBuf::from).map(|py| {
        let ref_db = dir.join("reference.db");
        build_reference(&db, &ref_db);
        run(&py, &ref_db, &ids, calls)
    });

    println!(
        "rpr-mcp inspection: {n} pathways, {calls} sequential calls per tool (median / p95 per call)"
    );
    println!(
        "{:<22} {:>24} {:>24}",
        "", "rpr-mcp (Rust)", "reference (Python)"
    );
    let r = |f: &dyn Fn(&Run) -> String| reference.as_ref().map_or_else(|| "-".to_owned(), f);
    println!(
        "{:<22} {:>24} {:>24}",
        "start + initialize",
        us(startup),
        r(&|(s, _)| us(*s))
    );
    for (i, (tool, p50, p95)) in rows.iter().enumerate() {
        let theirs = r(&|(_, rows)| format!("{} / {}", us(rows[i].1), us(rows[i].2)));
        println!(
            "{tool:<22} {:>24} {theirs:>24}",
            format!("{} / {}", us(*p50), us(*p95))
        );
    }
    if reference.is_none() {
        println!("(set RPR_PY_MCP to the reference's rpr-mcp executable to compare)");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
