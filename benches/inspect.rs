//! `rpr-mcp` side by side with the Python reference's `rpr-mcp`, on databases with the
//! same pathways: time to first answer, `rpr.list_unresolved` pages, resident memory.
//!
//! Run by hand (see `docs/inspection.md`, "Benchmark"):
//!
//! ```sh
//! python3 -m venv target/refvenv
//! target/refvenv/bin/pip install responsibility-pathway-runtime==0.1.0a6
//! RPR_PY_MCP=target/refvenv/bin/rpr-mcp cargo bench --bench inspect
//! ```
//!
//! Without `RPR_PY_MCP` only our server is measured. Environment:
//! `RPR_BENCH_PATHWAYS` (default 1,000,000), `RPR_BENCH_CALLS` timed calls per tool
//! (default 50), `RPR_BENCH_STARTS` fresh starts for the time to first answer (default
//! 20), `RPR_BENCH_DIR` a directory in which to keep and reuse the generated databases
//! (default: a temporary directory, removed at the end).
//!
//! **The synthetic databases.** Generating a million pathways through the runtime
//! takes too long, so the pathways are written with direct SQL, each database in one
//! transaction (progress on stderr):
//!
//! * ours: the schema is created by `Runtime::open` (migration 1); then for pathway
//!   `i` one `pathways` row (id `pw_` + 20 hex digits, idempotency key `bench-i`, a
//!   canonical definition with a `put` request, all eight roles and metadata, its
//!   real `definition_digest` and `request_digest`, proposer `agent:bench`, times one
//!   second apart) and one `ledger` row, its `proposed` event in canonical form, on a
//!   valid hash chain (`meta.ledger_head` is set to the last one). States are assigned,
//!   not reached: one pathway in ten is unresolved (`approved`, `awaiting_approval`,
//!   `human_gate`, `held` in turn), one in ten `denied`, the rest `completed`. There are
//!   no attempts or approvals, and the ledger does not hold the events that would have
//!   led to those states (so `rpr::store::verify` would report the state replay).
//! * the reference: its schema exactly as its `SQLiteStore` creates it
//!   (`rpy_schema_metadata` version 1, `pathways`, `evidence_events`; no other index),
//!   WAL mode; the same pathways (same ids, keys, definition text, states, times as
//!   `YYYY-MM-DD HH:MM:SS.SSS` text, fingerprint = our `definition_digest`) and the same
//!   event per pathway (`event_json`, `event_hash`).
//!
//! Both servers are driven identically: `initialize` (`2025-11-25`),
//! `notifications/initialized`, then sequential `tools/call`s, each waiting for its
//! reply, `limit` 50 where a tool pages. Measured:
//!
//! 1. **time to first answer**: spawn → `initialize` → `initialized` → the reply of one
//!    `rpr.get_pathway` (a primary-key lookup), median over `RPR_BENCH_STARTS` fresh
//!    processes, the two servers alternating;
//! 2. the median and p95 of each tool, in one session per server (after a few untimed
//!    calls): the first page of `rpr.list_unresolved`, and for ours also the pages that
//!    follow its `next_cursor` (the reference has no cursor);
//! 3. **resident memory**: the server process's `VmHWM` (peak RSS) from
//!    `/proc/<pid>/status`, after the first answer (median over the starts) and at the
//!    end of the session.
//!
//! Printed: one Markdown table with both servers side by side and the ratio
//! reference / ours, the targets, and the query plans of the two `list_unresolved`
//! queries.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BASE_MS: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
const LIMIT: u64 = 50;
const UNRESOLVED: [&str; 4] = ["approved", "awaiting_approval", "human_gate", "held"];

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

// ---------------------------------------------------------------------------
// Synthetic databases
// ---------------------------------------------------------------------------

/// A bijection on u64 (splitmix64's finalizer), so ids are unique and unordered.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn pathway_id(i: usize) -> String {
    format!("pw_{:016x}{:04x}", mix(i as u64), i & 0xffff)
}

fn state(i: usize) -> (&'static str, i64) {
    match i % 10 {
        0 => {
            let s = UNRESOLVED[(i / 10) % UNRESOLVED.len()];
            (s, if s == "held" { 3 } else { 2 })
        }
        1 => ("denied", 2),
        _ => ("completed", 6),
    }
}

/// One synthetic pathway and its `proposed` event.
struct Synthetic {
    id: String,
    key: String,
    definition: String,
    definition_digest: String,
    request_digest: String,
    state: &'static str,
    version: i64,
    created_at: i64,
    updated_at: i64,
    event: String,
}

fn synthetic(i: usize) -> Synthetic {
    let id = pathway_id(i);
    let key = format!("bench-{i}");
    let request =
        json!({"action": "put", "arguments": {"key": format!("k{i}"), "value": format!("v{i}")}});
    let class = if i.is_multiple_of(3) {
        "read_only"
    } else {
        "mutating"
    };
    let definition = json!({
        "authority": {
            "approval_authority": "alice", "decision_owner": "policy", "evidence_owner": "auditor",
            "execution_actor": "host", "repair_owner": "bob", "residual_owner": "host",
            "resume_authority": "host", "stop_authority": "host",
        },
        "class": class,
        "idempotency_key": key,
        "metadata": {"ticket": format!("T-{i}"), "note": "benchmark pathway"},
        "request": request,
    });
    let definition_digest = rpr::canonical::sha256_hex(&definition).expect("canonical");
    let request_digest = rpr::canonical::sha256_hex(&request).expect("canonical");
    let created_at = BASE_MS + i64::try_from(i).expect("fits") * 1000;
    let event = json!({
        "actor": "agent:bench", "at": created_at, "attempt": null, "attempt_status": null,
        "data": {
            "action": "put", "class": class, "definition_digest": definition_digest,
            "idempotency_key": key, "request_digest": request_digest,
        },
        "from": null, "kind": "proposed", "pathway": id, "seq": i + 1, "to": "proposed", "v": 1,
    });
    let (state, version) = state(i);
    Synthetic {
        definition: rpr::canonical::to_string(&definition).expect("canonical"),
        event: rpr::canonical::to_string(&event).expect("canonical"),
        id,
        key,
        definition_digest,
        request_digest,
        state,
        version,
        created_at,
        updated_at: created_at + 500,
    }
}

const REFERENCE_SCHEMA: &str = "PRAGMA journal_mode = WAL;
CREATE TABLE rpy_schema_metadata (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO rpy_schema_metadata VALUES ('schema_version', '1');
CREATE TABLE pathways (
    pathway_id TEXT PRIMARY KEY,
    definition_json TEXT NOT NULL,
    definition_fingerprint TEXT,
    state TEXT NOT NULL,
    idempotency_key TEXT UNIQUE NOT NULL,
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE TABLE evidence_events (
    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
    pathway_id TEXT NOT NULL,
    event_json TEXT NOT NULL,
    event_hash TEXT NOT NULL UNIQUE,
    FOREIGN KEY(pathway_id) REFERENCES pathways(pathway_id)
);";

/// Writes `n` pathways into `ours` (and `reference`, if given), one transaction each.
fn generate(n: usize, ours: &Path, reference: Option<&Path>) {
    drop(rpr::Runtime::open(ours).expect("create our schema"));
    let conn = rusqlite::Connection::open(ours).expect("open ours");
    conn.execute_batch("PRAGMA synchronous = OFF; BEGIN;")
        .expect("begin");
    let ref_conn = reference.map(|path| {
        let c = rusqlite::Connection::open(path).expect("open reference");
        c.execute_batch(REFERENCE_SCHEMA).expect("reference schema");
        c.execute_batch("PRAGMA synchronous = OFF; BEGIN;")
            .expect("begin");
        c
    });
    let started = Instant::now();
    let mut prev = rpr::ledger::GENESIS.to_owned();
    {
        let mut pathway = conn
            .prepare(
                "INSERT INTO pathways (id, idempotency_key, definition, definition_digest, request_digest, \
                 state, version, proposer, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'agent:bench', ?8, ?9)",
            )
            .expect("prepare");
        let mut ledger = conn
            .prepare("INSERT INTO ledger (seq, pathway_id, event, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5)")
            .expect("prepare");
        let mut ref_statements = ref_conn.as_ref().map(|ref_conn| {
            (
                ref_conn.prepare(
                    "INSERT INTO pathways (pathway_id, definition_json, definition_fingerprint, state, idempotency_key, \
                     created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, \
                     strftime('%Y-%m-%d %H:%M:%f', ?6 / 1000.0, 'unixepoch'), \
                     strftime('%Y-%m-%d %H:%M:%f', ?7 / 1000.0, 'unixepoch'))",
                )
                .expect("prepare"),
                ref_conn.prepare(
                    "INSERT INTO evidence_events (sequence, pathway_id, event_json, event_hash) VALUES (?1, ?2, ?3, ?4)",
                )
                .expect("prepare"),
            )
        });
        for i in 0..n {
            let s = synthetic(i);
            let seq = i64::try_from(i + 1).expect("fits");
            let hash = rpr::ledger::chain_hash(&prev, &s.event);
            pathway
                .execute(rusqlite::params![
                    s.id,
                    s.key,
                    s.definition,
                    s.definition_digest,
                    s.request_digest,
                    s.state,
                    s.version,
                    s.created_at,
                    s.updated_at
                ])
                .expect("insert pathway");
            ledger
                .execute(rusqlite::params![seq, s.id, s.event, prev, hash])
                .expect("insert event");
            if let Some((p, e)) = ref_statements.as_mut() {
                p.execute(rusqlite::params![
                    s.id,
                    s.definition,
                    s.definition_digest,
                    s.state,
                    s.key,
                    s.created_at,
                    s.updated_at
                ])
                .expect("insert reference pathway");
                e.execute(rusqlite::params![seq, s.id, s.event, hash])
                    .expect("insert reference event");
            }
            prev = hash;
            if (i + 1) % 50_000 == 0 || i + 1 == n {
                eprintln!(
                    "generating: {} / {n} pathways ({:.0} s)",
                    i + 1,
                    started.elapsed().as_secs_f64()
                );
            }
        }
    }
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('ledger_head', ?1)",
        [format!("{n}:{prev}")],
    )
    .expect("ledger head");
    eprintln!("generating: committing and checkpointing");
    for c in std::iter::once(&conn).chain(ref_conn.as_ref()) {
        c.execute_batch("COMMIT; PRAGMA wal_checkpoint(TRUNCATE);")
            .expect("commit");
    }
}

/// The query plan of `sql` on `db`, one line.
fn plan(db: &Path, sql: &str) -> String {
    let c = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .expect("open");
    let mut stmt = c
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .expect("plan");
    let rows: Vec<String> = stmt
        .query_map([], |r| r.get::<_, String>(3))
        .expect("plan")
        .map(|r| r.expect("plan row"))
        .collect();
    rows.join("; ")
}

// ---------------------------------------------------------------------------
// Driving a server
// ---------------------------------------------------------------------------

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl Server {
    /// Starts `program --database db`, sends `initialize` and `notifications/initialized`.
    fn start(program: &Path, db: &Path) -> Self {
        let mut child = Command::new(program)
            .arg("--database")
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", program.display()));
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
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        s
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

    /// Calls `tool`; panics unless the result is a success. Returns `structuredContent`.
    fn call(&mut self, tool: &str, args: &Value) -> Value {
        let reply = self.request("tools/call", json!({"name": tool, "arguments": args}));
        let result = reply
            .get("result")
            .unwrap_or_else(|| panic!("{tool}: {reply}"));
        assert_ne!(
            result.get("isError"),
            Some(&json!(true)),
            "{tool}: {result}"
        );
        result["structuredContent"].clone()
    }

    /// Peak resident set size (`VmHWM`) of the server process, in KiB.
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc/<pid>/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM")
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

/// Median and p95.
#[derive(Clone, Copy)]
struct Spread(Duration, Duration);

fn spread(mut times: Vec<Duration>) -> Spread {
    times.sort();
    Spread(percentile(&times, 0.5), percentile(&times, 0.95))
}

/// One fresh start: spawn → initialize → initialized → `rpr.get_pathway` reply.
/// Returns the elapsed time and the peak RSS (KiB) at that point.
fn first_answer(program: &Path, db: &Path, id: &str) -> (Duration, u64) {
    let t = Instant::now();
    let mut s = Server::start(program, db);
    let p = s.call("rpr.get_pathway", &json!({"pathway_id": id}));
    let elapsed = t.elapsed();
    assert_eq!(p["pathway_id"], id);
    let rss = s.peak_rss_kib();
    s.stop();
    (elapsed, rss)
}

/// What one server measured.
struct Measured {
    first_answer: Spread,
    rss_first_kib: u64,
    tools: Vec<(String, Spread)>,
    /// Ours only: pages following `next_cursor`.
    cursor_pages: Option<Spread>,
    rss_session_kib: u64,
}

/// A tool and how to build its arguments for call `i`.
type Case<'a> = (&'static str, Box<dyn Fn(usize) -> Value + 'a>);

fn session(program: &Path, db: &Path, n: usize, calls: usize, ours: bool) -> Measured {
    let mut server = Server::start(program, db);
    let id = move |i: usize| json!(pathway_id((i * 7919 + 13) % n));
    let cases: [Case<'_>; 5] = [
        ("rpr.list_unresolved", Box::new(|_| json!({"limit": LIMIT}))),
        ("rpr.get_status", Box::new(|_| json!({}))),
        (
            "rpr.get_pathway",
            Box::new(move |i| json!({"pathway_id": id(i)})),
        ),
        (
            "rpr.get_evidence",
            Box::new(move |i| json!({"pathway_id": id(i), "limit": LIMIT})),
        ),
        ("rpr.list_pathways", Box::new(|_| json!({"limit": LIMIT}))),
    ];
    let mut tools = Vec::new();
    for (tool, args) in &cases {
        eprintln!("measuring {tool} on {}", program.display());
        for i in 0..3 {
            server.call(tool, &args(i));
        }
        let times = (0..calls)
            .map(|i| {
                let arguments = args(i);
                let started = Instant::now();
                let value = server.call(tool, &arguments);
                let e = started.elapsed();
                if *tool == "rpr.list_unresolved" {
                    let page = value["pathways"].as_array().map_or(0, Vec::len);
                    assert_eq!(page as u64, LIMIT.min(n as u64 / 10), "{value}");
                }
                e
            })
            .collect();
        tools.push(((*tool).to_owned(), spread(times)));
    }
    let cursor_pages = ours.then(|| {
        let mut cursor: Option<Value> = None;
        let mut times = Vec::with_capacity(calls);
        for _ in 0..calls {
            let mut args = json!({"limit": LIMIT});
            if let Some(c) = cursor.take() {
                args["cursor"] = c;
            }
            let started = Instant::now();
            let value = server.call("rpr.list_unresolved", &args);
            times.push(started.elapsed());
            cursor = value.get("next_cursor").cloned();
            if cursor.is_none() {
                break;
            }
        }
        spread(times)
    });
    let rss_session_kib = server.peak_rss_kib();
    server.stop();
    Measured {
        first_answer: Spread(Duration::ZERO, Duration::ZERO),
        rss_first_kib: 0,
        tools,
        cursor_pages,
        rss_session_kib,
    }
}

// ---------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------

fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1e3;
    if v < 10.0 {
        format!("{v:.2} ms")
    } else {
        format!("{v:.1} ms")
    }
}

fn mib(kib: u64) -> String {
    #[expect(clippy::cast_precision_loss, reason = "display")]
    let v = kib as f64 / 1024.0;
    format!("{v:.1} MiB")
}

fn ratio(theirs: f64, ours: f64) -> String {
    if ours > 0.0 {
        format!("{:.1}x", theirs / ours)
    } else {
        "-".into()
    }
}

fn row(what: &str, ours: &str, theirs: &str, r: &str) {
    println!("| {what} | {ours} | {theirs} | {r} |");
}

fn spread_cell(s: Spread) -> String {
    format!("{} / {}", ms(s.0), ms(s.1))
}

#[expect(clippy::cast_precision_loss, reason = "display")]
fn print_report(n: usize, calls: usize, starts: usize, ours: &Measured, theirs: Option<&Measured>) {
    println!(
        "\nrpr-mcp (Rust) vs the Python reference rpr-mcp: {n} pathways ({} unresolved), \
         {starts} fresh starts, {calls} calls per tool, limit {LIMIT}; median / p95\n",
        n.div_ceil(10)
    );
    row(
        "measure",
        "rpr-mcp (Rust)",
        "reference (Python)",
        "Python / Rust",
    );
    row("---", "---:", "---:", "---:");
    let t = |f: &dyn Fn(&Measured) -> String| theirs.map_or_else(|| "-".to_owned(), f);
    let rt = |f: &dyn Fn(&Measured) -> f64, o: f64| {
        theirs.map_or_else(|| "-".to_owned(), |m| ratio(f(m), o))
    };
    row(
        "time to first answer (spawn, initialize, rpr.get_pathway)",
        &spread_cell(ours.first_answer),
        &t(&|m| spread_cell(m.first_answer)),
        &rt(
            &|m| m.first_answer.0.as_secs_f64(),
            ours.first_answer.0.as_secs_f64(),
        ),
    );
    for (i, (tool, s)) in ours.tools.iter().enumerate() {
        let label = match tool.as_str() {
            "rpr.list_unresolved" | "rpr.list_pathways" => format!("{tool}, first page"),
            _ => tool.clone(),
        };
        row(
            &label,
            &spread_cell(*s),
            &t(&|m| spread_cell(m.tools[i].1)),
            &rt(&|m| m.tools[i].1.0.as_secs_f64(), s.0.as_secs_f64()),
        );
    }
    if let Some(p) = ours.cursor_pages {
        row(
            "rpr.list_unresolved, pages following next_cursor",
            &spread_cell(p),
            "(no cursor)",
            "-",
        );
    }
    row(
        "peak RSS (VmHWM) after the first answer",
        &mib(ours.rss_first_kib),
        &t(&|m| mib(m.rss_first_kib)),
        &rt(&|m| m.rss_first_kib as f64, ours.rss_first_kib as f64),
    );
    row(
        "peak RSS (VmHWM) at the end of the session",
        &mib(ours.rss_session_kib),
        &t(&|m| mib(m.rss_session_kib)),
        &rt(&|m| m.rss_session_kib as f64, ours.rss_session_kib as f64),
    );

    let unresolved = ours.tools[0].1.0;
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!("\nTargets for rpr-mcp:");
    if let Some(m) = theirs {
        let x = m.first_answer.0.as_secs_f64() / ours.first_answer.0.as_secs_f64();
        println!(
            "- time to first answer at least 20x faster than the reference: {x:.1}x, {}",
            verdict(x >= 20.0)
        );
    } else {
        println!(
            "- time to first answer at least 20x faster than the reference: not measured (set RPR_PY_MCP)"
        );
    }
    println!(
        "- rpr.list_unresolved page median <= 10 ms: {}, {}",
        ms(unresolved),
        verdict(unresolved <= Duration::from_millis(10))
    );
    println!(
        "- peak RSS <= 32 MiB: {}, {}",
        mib(ours.rss_session_kib.max(ours.rss_first_kib)),
        verdict(ours.rss_session_kib.max(ours.rss_first_kib) <= 32 * 1024)
    );
}

fn main() {
    let n = env_usize("RPR_BENCH_PATHWAYS", 1_000_000).max(10);
    let calls = env_usize("RPR_BENCH_CALLS", 50).max(1);
    let starts = env_usize("RPR_BENCH_STARTS", 20).max(1);
    let python = std::env::var_os("RPR_PY_MCP").map(PathBuf::from);
    let keep = std::env::var_os("RPR_BENCH_DIR").map(PathBuf::from);
    let dir = keep.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("rpr-bench-inspect-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir).expect("bench dir");
    let db = dir.join(format!("rpr-{n}.db"));
    let ref_db = dir.join(format!("reference-{n}.db"));
    let done = dir.join(format!("generated-{n}"));
    let need_ref = python.is_some();
    let ready = done.exists() && (!need_ref || ref_db.exists());
    if ready {
        eprintln!("reusing the databases in {}", dir.display());
    } else {
        for f in [&db, &ref_db, &done] {
            for suffix in ["", "-wal", "-shm"] {
                let mut p = f.as_os_str().to_owned();
                p.push(suffix);
                let _ = std::fs::remove_file(PathBuf::from(p));
            }
        }
        generate(n, &db, need_ref.then_some(ref_db.as_path()));
        std::fs::write(&done, b"").expect("marker");
    }

    let ours_bin = PathBuf::from(env!("CARGO_BIN_EXE_rpr-mcp"));
    let id = pathway_id(n / 2);
    let mut ours_first = Vec::new();
    let mut theirs_first = Vec::new();
    eprintln!("measuring time to first answer ({starts} starts each)");
    for _ in 0..starts {
        ours_first.push(first_answer(&ours_bin, &db, &id));
        if let Some(py) = &python {
            theirs_first.push(first_answer(py, &ref_db, &id));
        }
    }
    let summarize = |m: &mut Measured, firsts: &[(Duration, u64)]| {
        m.first_answer = spread(firsts.iter().map(|f| f.0).collect());
        let mut rss: Vec<u64> = firsts.iter().map(|f| f.1).collect();
        rss.sort_unstable();
        m.rss_first_kib = rss[rss.len() / 2];
    };
    let mut ours = session(&ours_bin, &db, n, calls, true);
    summarize(&mut ours, &ours_first);
    let theirs = python.as_ref().map(|py| {
        let mut m = session(py, &ref_db, n, calls, false);
        summarize(&mut m, &theirs_first);
        m
    });

    print_report(n, calls, starts, &ours, theirs.as_ref());
    println!("\nQuery plans of the list_unresolved queries:");
    println!(
        "- ours: {}",
        plan(
            &db,
            "SELECT id, idempotency_key, definition, request_digest, state, version, proposer, created_at, updated_at \
             FROM pathways WHERE state NOT IN ('completed', 'denied', 'aborted') AND id > '' ORDER BY id LIMIT 51"
        )
    );
    if need_ref {
        println!(
            "- reference: {}",
            plan(
                &ref_db,
                "SELECT pathway_id, definition_json, state, created_at, updated_at FROM pathways \
                 WHERE state NOT IN ('aborted', 'completed', 'denied') ORDER BY updated_at, pathway_id LIMIT 50"
            )
        );
    }
    if python.is_none() {
        println!(
            "\n(set RPR_PY_MCP to the reference's rpr-mcp executable to compare; see docs/inspection.md)"
        );
    }
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
