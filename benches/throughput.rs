//! Many calls at once (issue 9): whole governed calls from N threads through one shared
//! `Runtime`, against the same executor called without rpr, at 1, 4, 16 and 64 in flight.
//!
//! ```sh
//! cargo bench --bench throughput -- [--seconds S] [--dir DIR] [--executor-ms MS] [--only sleeper|mcp]
//!                                   [--in-flight 1,4,16,64] [--form steps|bound|both]
//!                                   [--signing off|on|both]
//! cargo bench --bench throughput --features postgres -- --store sqlite,postgres:1,postgres --postgres URL …
//! ```
//!
//! `--form bound` measures the other whole call the README shows: `propose_and_bind` then
//! `dispatch_and_confirm` (the pathway stored with its attempt record, the reply with its
//! readback: 2 durable steps). `--store postgres` runs the governed side on the PostgreSQL
//! database at `--postgres URL` (default `$RPR_PG_URL`), each cell in a fresh schema, dropped
//! after it; `--store sqlite,postgres` runs both in one run, side by side. `postgres:N` runs
//! it with a pool of at most N connections (`RuntimeBuilder::pg_connections`; plain
//! `postgres` is the default pool), so `--store sqlite,postgres:1,postgres` compares one
//! connection with the pool.
//!
//! One *governed call* is the README's separate steps, each a durable step: `propose`,
//! `admit` (allow), `bind`, `dispatch`, `confirm` by readback; the readback answers "applied"
//! at once. Two executors, one table each:
//!
//! * **sleeper**: sleeps `--executor-ms` (default 1) and answers success. The *ungoverned*
//!   side calls the same executor's `execute` in a loop on the same number of threads.
//! * **mcp**: `McpExecutor` on the `put` tool of the real `rpr-fault-server` (no fault: it
//!   replies at once and keeps no state), one server process and one session per in-flight
//!   slot, started before the clock runs. The *ungoverned* side sends the same `tools/call`
//!   straight through the same kind of session. A governed call also lists the tools three
//!   times (bind, prepare, and the re-check right before the call): part of what is measured.
//!
//! `--signing on` runs the governed side with a signing key (`RuntimeBuilder::signing`: a
//! checkpoint of the log signed inside every commit that appends events, docs/evidence.md);
//! `--signing both` runs each cell without and with it, one after the other.
//!
//! Both sides run their threads Each cell runs for `--seconds` (default 3) on a fresh database in `--dir` (default
//! the system temporary directory: give a directory on a real disk, tmpfs ignores fsync).
//! Printed: calls/s of both sides and their ratio, durable commits per governed call (from
//! `Runtime::write_stats`: several threads' steps share one commit), WAL frames (pages)
//! written per governed call on SQLite (a second connection holds a read snapshot during
//! the cell, so the log is never restarted and its length counts every frame), and the p50 and p99
//! latency of one step (each `propose`, `admit`, `dispatch`, `confirm` call timed alone).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rpr::executor::{Binding, Delivery, Executor, Observation, Readback, Refusal, Request};
use rpr::mcp::{McpClient, McpExecutor, ServerCommand, SessionConfig};
use rpr::{
    ActionClass, Actor, Admission, Authority, Confirmed, Decision, Definition, Outcome, Proposal,
    Ready, Runtime,
};
use serde_json::json;

/// Sleeps, then answers success: a tool call that takes a fixed time.
struct Sleeper(Duration);

impl Executor for Sleeper {
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal> {
        Ok(Binding::new(
            "sleeper",
            json!({"executor": "sleeper", "tool": request.action}),
        )
        .expect("a small binding"))
    }
    fn prepare(&mut self, _: &Request, _: &Binding) -> Result<(), Refusal> {
        Ok(())
    }
    fn execute(&mut self, _: &Request) -> Delivery {
        std::thread::sleep(self.0);
        Delivery::Succeeded {
            reply: json!({"ok": true}),
        }
    }
}

struct SeesApplied;

impl Readback for SeesApplied {
    fn observe(&mut self, _: &Request) -> Observation {
        Observation::Applied {
            evidence: json!({"seen": "applied"}),
        }
    }
}

fn allow(_: &Definition) -> Decision {
    Decision::Allow
}

/// The executor a table measures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sleeper,
    Mcp,
}

/// Which whole call a governed cell makes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `propose`, `admit`, `bind`, `dispatch`, `confirm`: 5 durable steps.
    Steps,
    /// `propose_and_bind`, `dispatch_and_confirm`: 2 durable steps.
    Bound,
}

impl Form {
    fn name(self) -> &'static str {
        match self {
            Self::Steps => "steps",
            Self::Bound => "bound",
        }
    }
}

/// Where the governed side keeps its pathways.
#[derive(Clone, PartialEq, Eq)]
enum Store {
    Sqlite,
    /// The URL and, when not the default, the most connections of the runtime's pool.
    Postgres(String, Option<usize>),
}

impl Store {
    fn name(&self) -> String {
        match self {
            Self::Sqlite => "SQLite".into(),
            Self::Postgres(_, None) => "PostgreSQL (default pool)".into(),
            Self::Postgres(_, Some(1)) => "PostgreSQL (1 connection)".into(),
            Self::Postgres(_, Some(n)) => format!("PostgreSQL ({n} connections)"),
        }
    }
}

struct Options {
    seconds: f64,
    dir: PathBuf,
    executor_ms: u64,
    kinds: Vec<Kind>,
    in_flight: Vec<usize>,
    forms: Vec<Form>,
    stores: Vec<Store>,
    /// Without a signing key, with one, or both.
    signing: Vec<bool>,
}

/// One session with a fresh `rpr-fault-server` (no fault).
fn fault_server() -> Arc<McpClient> {
    let command = ServerCommand::new(env!("CARGO_BIN_EXE_rpr-fault-server"));
    Arc::new(
        McpClient::connect(&command, &SessionConfig::default()).expect("rpr-fault-server starts"),
    )
}

/// What a worker thread calls: the executor for governed calls, or one bare call.
enum Slot {
    Sleeper(Sleeper),
    Mcp(Arc<McpClient>),
}

impl Slot {
    fn new(kind: Kind, executor: Duration) -> Self {
        match kind {
            Kind::Sleeper => Self::Sleeper(Sleeper(executor)),
            Kind::Mcp => Self::Mcp(fault_server()),
        }
    }

    fn executor(&self) -> Box<dyn Executor> {
        match self {
            Self::Sleeper(s) => Box::new(Sleeper(s.0)),
            Self::Mcp(client) => Box::new(McpExecutor::new(Arc::clone(client), "put")),
        }
    }

    fn bare_call(&mut self, n: u64) {
        match self {
            Self::Sleeper(s) => {
                let _ = s.execute(&Request::new("put", json!({"k": "v"})));
            }
            Self::Mcp(client) => {
                let arguments = json!({"key": format!("k{n}"), "value": "v"});
                client
                    .call_tool("put", &arguments, Duration::from_secs(30))
                    .expect("tools/call");
            }
        }
    }
}

/// The request's arguments for call `n`.
fn slot_arguments(kind: Kind, n: u64) -> serde_json::Value {
    match kind {
        Kind::Sleeper => json!({"key": n}),
        Kind::Mcp => json!({"key": format!("k{n}"), "value": "v"}),
    }
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        seconds: 3.0,
        dir: std::env::temp_dir(),
        executor_ms: 1,
        kinds: vec![Kind::Sleeper, Kind::Mcp],
        in_flight: vec![1, 4, 16, 64],
        forms: vec![Form::Steps],
        stores: vec![Store::Sqlite],
        signing: vec![false],
    };
    let mut store_names = vec!["sqlite".to_owned()];
    let mut url = std::env::var("RPR_PG_URL").ok();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--bench" => {}
            "--seconds" => o.seconds = value()?.parse().map_err(|_| "--seconds needs a number")?,
            "--dir" => o.dir = PathBuf::from(value()?),
            "--executor-ms" => {
                o.executor_ms = value()?
                    .parse()
                    .map_err(|_| "--executor-ms needs a number")?;
            }
            "--in-flight" => {
                o.in_flight = value()?
                    .split(',')
                    .map(|n| n.trim().parse().ok().filter(|n| *n > 0))
                    .collect::<Option<Vec<usize>>>()
                    .ok_or("--in-flight takes positive numbers separated by commas")?;
            }
            "--only" => {
                o.kinds = match value()?.as_str() {
                    "sleeper" => vec![Kind::Sleeper],
                    "mcp" => vec![Kind::Mcp],
                    other => return Err(format!("--only takes sleeper or mcp, not {other}")),
                };
            }
            "--form" => {
                o.forms = match value()?.as_str() {
                    "steps" => vec![Form::Steps],
                    "bound" => vec![Form::Bound],
                    "both" => vec![Form::Steps, Form::Bound],
                    other => return Err(format!("--form takes steps, bound or both, not {other}")),
                };
            }
            "--signing" => {
                o.signing = match value()?.as_str() {
                    "off" => vec![false],
                    "on" => vec![true],
                    "both" => vec![false, true],
                    other => return Err(format!("--signing takes off, on or both, not {other}")),
                };
            }
            "--store" => store_names = value()?.split(',').map(|s| s.trim().to_owned()).collect(),
            "--postgres" => url = Some(value()?),
            "--help" | "-h" => {
                return Err("usage: cargo bench --bench throughput -- [--seconds S] [--dir DIR] [--executor-ms MS] [--only sleeper|mcp] [--in-flight 1,4,16,64] [--form steps|bound|both] [--signing off|on|both] [--store sqlite,postgres,postgres:N] [--postgres URL]".into());
            }
            other => return Err(format!("unexpected argument {other}")),
        }
    }
    if o.seconds.is_nan() || o.seconds <= 0.0 {
        return Err("--seconds must be above 0".into());
    }
    o.stores = Vec::new();
    for name in store_names {
        let (name, connections) = match name.split_once(':') {
            Some((n, c)) => (
                n.to_owned(),
                Some(c.parse().map_err(|_| {
                    format!("--store {name}: postgres:N takes a number of connections")
                })?),
            ),
            None => (name, None),
        };
        o.stores.push(match name.as_str() {
            "sqlite" => Store::Sqlite,
            "postgres" if cfg!(feature = "postgres") => Store::Postgres(
                url.clone()
                    .ok_or("--store postgres needs --postgres URL (or RPR_PG_URL)")?,
                connections,
            ),
            "postgres" => {
                return Err(
                    "--store postgres needs the bench built with --features postgres".into(),
                );
            }
            other => {
                return Err(format!(
                    "--store takes sqlite, postgres and/or postgres:N, not {other}"
                ));
            }
        });
    }
    Ok(o)
}

#[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
fn per_second(count: u64, seconds: f64) -> f64 {
    count as f64 / seconds
}

/// This process's CPU time so far, user and system, in µs (all threads, those that ended
/// included), from `/proc/self/stat` at the kernel's 100 ticks a second; `None` where there
/// is no such file.
fn cpu_us() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command (which may hold spaces) start at state, field 3.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks = |i: usize| fields.get(i - 3)?.parse::<f64>().ok();
    Some((ticks(14)? + ticks(15)?) * 10_000.0)
}

/// CPU µs per call between two readings of [`cpu_us`].
fn cpu_per_call(before: Option<f64>, after: Option<f64>, calls: f64) -> Option<f64> {
    Some((after? - before?) / calls.max(1.0))
}

/// Calls/s of the bare executor on `threads` threads, and its CPU µs per call.
fn ungoverned(kind: Kind, threads: usize, run: Duration, executor: Duration) -> (f64, Option<f64>) {
    let stop = AtomicBool::new(false);
    let calls = AtomicU64::new(0);
    let ready = Barrier::new(threads + 1);
    let mut started = Instant::now();
    let mut cpu_before = None;
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut slot = Slot::new(kind, executor);
                ready.wait();
                while !stop.load(Ordering::Relaxed) {
                    slot.bare_call(calls.fetch_add(1, Ordering::Relaxed));
                }
            });
        }
        ready.wait();
        started = Instant::now();
        cpu_before = cpu_us();
        std::thread::sleep(run);
        stop.store(true, Ordering::Relaxed);
    });
    #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
    let calls = calls.load(Ordering::Relaxed) as f64;
    (
        calls / started.elapsed().as_secs_f64(),
        cpu_per_call(cpu_before, cpu_us(), calls),
    )
}

/// What the governed side measured.
struct Governed {
    calls_per_s: f64,
    commits_per_call: f64,
    /// SQLite only: WAL frames (pages) written per governed call.
    frames_per_call: Option<f64>,
    p50_ms: f64,
    p99_ms: f64,
    /// CPU µs (user and system, every thread of this process) per governed call.
    cpu_us_per_call: Option<f64>,
}

/// A fresh database for one cell: a SQLite file in `dir`, or a new schema of the PostgreSQL
/// database. Removed (the file) or dropped (the schema) on drop.
struct Fresh {
    store: Store,
    location: String,
    schema: String,
    signed: bool,
}

impl Fresh {
    fn new(store: &Store, dir: &Path, threads: usize, form: Form, signed: bool) -> Self {
        let pool = match store {
            Store::Postgres(_, Some(n)) => format!("_c{n}"),
            _ => String::new(),
        };
        let tag = format!(
            "{}_{threads}_{}{pool}{}",
            std::process::id(),
            form.name(),
            if signed { "_signed" } else { "" }
        );
        let location = match store {
            Store::Sqlite => dir
                .join(format!("rpr-throughput-{tag}.db"))
                .display()
                .to_string(),
            Store::Postgres(url, _) => url.clone(),
        };
        let fresh = Self {
            store: store.clone(),
            location,
            schema: format!("rpr_throughput_{tag}"),
            signed,
        };
        fresh.remove();
        fresh
    }

    fn open(&self) -> Runtime {
        let mut builder = Runtime::builder(&self.location);
        if self.signed {
            let key =
                rpr::evidence::note::SignerKey::from_seed("rpr-bench", &[5; 32]).expect("a key");
            builder = builder.signing(rpr::store::log::Signing::new(key));
        }
        match self.store {
            Store::Sqlite => builder.open(),
            Store::Postgres(_, None) => builder.schema(&self.schema).open(),
            Store::Postgres(_, Some(n)) => builder.schema(&self.schema).pg_connections(n).open(),
        }
        .expect("open the database")
    }

    fn remove(&self) {
        match &self.store {
            Store::Sqlite => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", self.location));
                }
            }
            #[cfg(feature = "postgres")]
            Store::Postgres(url, _) => {
                if let Ok(mut c) = postgres::Client::connect(url, postgres::NoTls) {
                    let _ =
                        c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema));
                }
            }
            #[cfg(not(feature = "postgres"))]
            Store::Postgres(..) => {}
        }
    }
}

impl Drop for Fresh {
    fn drop(&mut self) {
        self.remove();
    }
}

/// One whole governed call, in `form`; the durations of the steps it timed.
fn governed_call(
    rt: &Runtime,
    me: &Actor,
    form: Form,
    definition: Definition,
    ex: &mut dyn Executor,
    steps: &mut Vec<Duration>,
) {
    match form {
        Form::Steps => {
            let t = Instant::now();
            let Ok(Proposal::New(p)) = rt.propose(me, definition) else {
                panic!("propose failed")
            };
            steps.push(t.elapsed());
            let t = Instant::now();
            let Ok(Admission::Approved(approved)) = p.admit(rt, me, &allow) else {
                panic!("admit failed")
            };
            steps.push(t.elapsed());
            let bound = approved.bind(ex).expect("bind");
            let t = Instant::now();
            let Outcome::Returned(returned) = bound.dispatch(rt, me, ex) else {
                panic!("dispatch failed")
            };
            steps.push(t.elapsed());
            let t = Instant::now();
            let Ok(Confirmed::Completed(_)) = returned.confirm(rt, me, &mut SeesApplied) else {
                panic!("confirm failed")
            };
            steps.push(t.elapsed());
        }
        Form::Bound => {
            let t = Instant::now();
            let Ok(Ready::Bound(bound)) = rt.propose_and_bind(me, me, definition, &allow, ex)
            else {
                panic!("propose_and_bind failed")
            };
            steps.push(t.elapsed());
            let t = Instant::now();
            let Outcome::Completed(_) = bound.dispatch_and_confirm(rt, me, ex, &mut SeesApplied)
            else {
                panic!("dispatch_and_confirm failed")
            };
            steps.push(t.elapsed());
        }
    }
}

/// Holds a read snapshot of a SQLite database open, so that no checkpoint restarts its
/// write-ahead log: the log then grows by exactly the frames the commits write.
struct WalWatch {
    reader: rusqlite::Connection,
    wal: PathBuf,
    frame: u64,
}

impl WalWatch {
    fn new(location: &str) -> Self {
        let reader = rusqlite::Connection::open(location).expect("a second connection");
        let page: i64 = reader
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .expect("page_size");
        let page = u64::try_from(page).expect("a page size");
        reader
            .execute_batch("BEGIN; SELECT count(*) FROM meta;")
            .expect("a read snapshot");
        Self {
            reader,
            wal: PathBuf::from(format!("{location}-wal")),
            frame: page + 24,
        }
    }

    /// Frames in the log so far.
    fn frames(&self) -> u64 {
        let len = std::fs::metadata(&self.wal).map_or(0, |m| m.len());
        len.saturating_sub(32) / self.frame
    }
}

impl Drop for WalWatch {
    fn drop(&mut self) {
        let _ = self.reader.execute_batch("COMMIT");
    }
}

/// Whole governed calls on `threads` threads through one runtime on a fresh database.
fn governed(
    kind: Kind,
    threads: usize,
    run: Duration,
    executor: Duration,
    (store, dir, form, signed): (&Store, &Path, Form, bool),
) -> Governed {
    let fresh = Fresh::new(store, dir, threads, form, signed);
    let rt = fresh.open();
    let watch = (*store == Store::Sqlite).then(|| WalWatch::new(&fresh.location));
    let mut frames_before = 0;
    let stop = AtomicBool::new(false);
    let next = AtomicU64::new(0);
    let ready = Barrier::new(threads + 1);
    let mut before = rt.write_stats();
    let mut started = Instant::now();
    let mut cpu_before = None;
    let results: Vec<(Vec<Duration>, u64)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (rt, stop, next, ready) = (&rt, &stop, &next, &ready);
                s.spawn(move || {
                    let me = Actor::new("host");
                    let slot = Slot::new(kind, executor);
                    let mut steps = Vec::new();
                    let mut calls = 0_u64;
                    ready.wait();
                    while !stop.load(Ordering::Relaxed) {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        let mut ex = slot.executor();
                        let definition = Definition::new(
                            Request::new("put", slot_arguments(kind, n)),
                            ActionClass::Mutating,
                            format!("call-{n}"),
                            Authority::single(&me),
                        );
                        governed_call(rt, &me, form, definition, &mut *ex, &mut steps);
                        calls += 1;
                    }
                    (steps, calls)
                })
            })
            .collect();
        ready.wait();
        before = rt.write_stats();
        frames_before = watch.as_ref().map_or(0, WalWatch::frames);
        started = Instant::now();
        cpu_before = cpu_us();
        std::thread::sleep(run);
        stop.store(true, Ordering::Relaxed);
        workers
            .into_iter()
            .map(|w| w.join().expect("a worker"))
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let cpu_after = cpu_us();
    let after = rt.write_stats();
    let frames = watch.as_ref().map(|w| w.frames() - frames_before);
    drop(watch);
    drop(rt);
    drop(fresh);
    let calls: u64 = results.iter().map(|r| r.1).sum();
    let mut steps: Vec<Duration> = results.into_iter().flat_map(|r| r.0).collect();
    steps.sort_unstable();
    let at = |q: f64| {
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "index into a sorted vector of step times"
        )]
        let i = ((steps.len().saturating_sub(1)) as f64 * q).round() as usize;
        steps.get(i).map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
    let commits_per_call = (after.commits - before.commits) as f64 / calls.max(1) as f64;
    #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
    let frames_per_call = frames.map(|f| f as f64 / calls.max(1) as f64);
    Governed {
        calls_per_s: per_second(calls, elapsed),
        commits_per_call,
        frames_per_call,
        p50_ms: at(0.50),
        p99_ms: at(0.99),
        #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
        cpu_us_per_call: cpu_per_call(cpu_before, cpu_after, calls as f64),
    }
}

fn main() -> ExitCode {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&o.dir) {
        eprintln!("cannot create {}: {e}", o.dir.display());
        return ExitCode::from(2);
    }
    let run = Duration::from_secs_f64(o.seconds);
    let executor = Duration::from_millis(o.executor_ms);
    for &kind in &o.kinds {
        match kind {
            Kind::Sleeper => println!(
                "## Whole governed calls through one shared Runtime vs the bare executor (sleeps {} ms), {} s per cell\n",
                o.executor_ms, o.seconds
            ),
            Kind::Mcp => println!(
                "\n## The same against the real rpr-fault-server (`put`, one server process per in-flight slot), {} s per cell\n",
                o.seconds
            ),
        }
        println!(
            "| store | signed | call | in flight | ungoverned calls/s | governed calls/s | governed / ungoverned | durable commits per governed call | WAL frames per governed call | step p50 ms | step p99 ms | CPU µs per call, ungoverned | CPU µs per call, governed |"
        );
        println!("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for &threads in &o.in_flight {
            eprintln!("{threads} in flight…");
            let (bare, bare_cpu) = ungoverned(kind, threads, run, executor);
            let cpu = |c: Option<f64>| c.map_or_else(|| "n/a".to_owned(), |c| format!("{c:.0}"));
            let cells: Vec<(&Store, Form, bool)> = o
                .stores
                .iter()
                .flat_map(|s| {
                    o.forms
                        .iter()
                        .flat_map(|&f| o.signing.iter().map(move |&g| (s, f, g)))
                        .collect::<Vec<_>>()
                })
                .collect();
            for (store, form, signed) in cells {
                {
                    let g = governed(kind, threads, run, executor, (store, &o.dir, form, signed));
                    let frames = g
                        .frames_per_call
                        .map_or_else(|| "n/a".to_owned(), |f| format!("{f:.1}"));
                    println!(
                        "| {} | {} | {} | {threads} | {bare:.0} | {:.0} | {:.2} | {:.2} | {frames} | {:.2} | {:.2} | {} | {} |",
                        store.name(),
                        if signed { "yes" } else { "no" },
                        form.name(),
                        g.calls_per_s,
                        g.calls_per_s / bare,
                        g.commits_per_call,
                        g.p50_ms,
                        g.p99_ms,
                        cpu(bare_cpu),
                        cpu(g.cpu_us_per_call),
                    );
                }
            }
        }
    }
    println!(
        "\nA `steps` call is 5 durable steps (propose, admit, the attempt record and the reply in dispatch, confirm), timed as 4 calls; a `bound` call is 2 (the pathway with its attempt record, the reply with its readback), timed as 2. SQLite in {} (WAL, synchronous=FULL; WAL frames counted from the log's length while a second connection holds a read snapshot, so no checkpoint restarts the log during the cell); PostgreSQL: the steps of concurrent callers share a transaction and its commit (group commit, up to two batches at once on connections of the runtime's pool), each cell in a fresh schema. CPU µs per call: this process's user and system time over the cell (every thread; `/proc/self/stat`, 10 ms ticks) divided by its calls; PostgreSQL's server processes are not in it.",
        o.dir.display()
    );
    ExitCode::SUCCESS
}
