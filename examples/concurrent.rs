//! Many governed calls at once against a real MCP server, through one runtime and one server
//! session (issue 9): `cargo run --example concurrent -- [--calls 16] [--dir DIR]`.
//!
//! Each call is a thread: propose and admit (an allow policy), bind to the server's
//! `write_file` tool, dispatch and confirm by reading the file back with `read_text_file`.
//! The threads share one `Runtime` (their steps go into shared durable commits) and one
//! `McpClient` (requests are matched to replies by id, so calls overlap on one stdio pipe).
//! At the end the example prints each call's outcome and time, the durable commits the
//! runtime made, and whether the ledger verifies; it exits 1 unless every call completed
//! and the ledger verifies.
//!
//! The server is `@modelcontextprotocol/server-filesystem` run by `node`, found in
//! `$RPR_PEERS_DIR` or `target/peers` (`bash .ci/install-peers` installs it there).
//!
//! The pattern for an async host is in docs/pathway.md ("Many threads, one runtime"): the
//! same per-call function, run on a blocking pool.
//!
//! `tests/mcp/concurrent_example.rs` compiles this file into itself (`#[path]`) and runs
//! [`governed_calls`] in-process, with the server command it builds for the real peers.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rpr::executor::Request;
use rpr::ledger::Report;
use rpr::mcp::{
    McpClient, McpExecutor, McpReadback, ReadbackVerdict, ServerCommand, SessionConfig,
};
use rpr::store::WriteStats;
use rpr::{ALLOW_ALL, ActionClass, Actor, Authority, Definition, Outcome, Runtime};
use serde_json::{Value, json};

const USAGE: &str = "usage: cargo run --example concurrent -- [--calls N] [--dir DIR]
  --calls N   governed write_file calls, all at once (default 16)
  --dir DIR   where the database and the server's files go (default: a new temporary directory)
needs node on PATH and server-filesystem in $RPR_PEERS_DIR or target/peers (bash .ci/install-peers)";

type Failure = Box<dyn std::error::Error + Send + Sync>;

/// What a run did: printed by `main`, checked by `tests/mcp/concurrent_example.rs`.
pub(crate) struct Summary {
    /// The calls made.
    pub(crate) calls: usize,
    /// The calls whose pathway completed.
    pub(crate) completed: usize,
    /// The files that hold their call's content.
    pub(crate) on_disk: usize,
    /// From the first call started to the last one ended.
    pub(crate) wall: Duration,
    /// The runtime's durable steps and commits.
    pub(crate) stats: WriteStats,
    /// The whole ledger and the stored states, verified.
    pub(crate) report: Report,
    /// The database.
    pub(crate) db: PathBuf,
}

impl Summary {
    /// Every call completed with its file written, and the ledger verifies.
    pub(crate) fn all_done(&self) -> bool {
        self.completed == self.calls && self.on_disk == self.calls && self.report.is_ok()
    }

    /// The figures of the run, and how to inspect its database.
    fn print(&self) {
        let (calls, stats, report) = (self.calls, &self.stats, &self.report);
        println!(
            "completed: {} of {calls}, files with their content: {}",
            self.completed, self.on_disk
        );
        println!(
            "wall time {:.1} ms; {} steps made durable in {} commits ({:.2} commits per call)",
            self.wall.as_secs_f64() * 1e3,
            stats.steps,
            stats.commits,
            f64::from(u32::try_from(stats.commits).unwrap_or(u32::MAX))
                / f64::from(u32::try_from(calls).unwrap_or(u32::MAX))
        );
        println!(
            "ledger: {} events, chain and states verified: {}",
            report.events,
            report.is_ok()
        );
        for p in &report.problems {
            println!("  problem: {p:?}");
        }
        println!(
            "inspect it: cargo run --bin rpr-mcp -- --database {}",
            self.db.display()
        );
    }
}

/// What one call ended as, and how long it took.
struct Done {
    index: usize,
    outcome: String,
    completed: bool,
    took: Duration,
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("concurrent: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<bool, Failure> {
    let mut calls = 16_usize;
    let mut dir: Option<PathBuf> = None;
    let mut args = std::env::args_os()
        .skip(1)
        .map(|a| {
            a.into_string()
                .map_err(|a| format!("argument {} is not valid UTF-8", a.to_string_lossy()))
        })
        .collect::<Result<Vec<String>, String>>()?
        .into_iter();
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--calls" => {
                calls = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|n| *n > 0)
                    .ok_or(format!("`--calls` needs a positive number\n{USAGE}"))?;
            }
            "--dir" => {
                dir = Some(
                    args.next()
                        .ok_or(format!("`--dir` needs a path\n{USAGE}"))?
                        .into(),
                );
            }
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(true);
            }
            other => return Err(format!("unexpected argument `{other}`\n{USAGE}").into()),
        }
    }
    let dir = dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("rpr-concurrent-{}", std::process::id()))
    });
    let summary = governed_calls(calls, &dir, filesystem_server)?;
    summary.print();
    Ok(summary.all_done())
}

/// Makes `calls` governed `write_file` calls at once in `dir` (its `files` folder served by
/// the command `server` returns for it), printing each call's outcome and time.
pub(crate) fn governed_calls(
    calls: usize,
    dir: &Path,
    server: impl FnOnce(&Path) -> Result<ServerCommand, Failure>,
) -> Result<Summary, Failure> {
    let root = dir.join("files");
    std::fs::create_dir_all(&root)?;
    let db = dir.join("rpr.db");

    let client = Arc::new(
        McpClient::connect(&server(&root)?, &SessionConfig::default())
            .map_err(|e| format!("cannot start server-filesystem: {e}"))?,
    );
    let rt = Arc::new(Runtime::open(&db)?);
    println!(
        "{calls} governed write_file calls at once: one runtime ({}), one session with {}",
        db.display(),
        client.server().identity()
    );

    // Keys and contents of this run (a second run on the same --dir makes new calls).
    let run_id = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    );
    let started = Instant::now();
    let handles: Vec<_> = (0..calls)
        .map(|index| {
            let (rt, client, run_id) = (Arc::clone(&rt), Arc::clone(&client), run_id.clone());
            std::thread::spawn(move || {
                let begun = Instant::now();
                let (outcome, completed) = match governed_write(&rt, &client, &run_id, index) {
                    Ok(Outcome::Completed(done)) => (format!("completed {}", done.id()), true),
                    Ok(other) => (format!("not completed: {other:?}"), false),
                    Err(e) => (format!("error: {e}"), false),
                };
                Done {
                    index,
                    outcome,
                    completed,
                    took: begun.elapsed(),
                }
            })
        })
        .collect();
    let mut done: Vec<Done> = handles
        .into_iter()
        .map(|h| h.join().map_err(|_| "a call's thread panicked"))
        .collect::<Result<_, _>>()?;
    let wall = started.elapsed();
    done.sort_by_key(|d| d.index);

    for d in &done {
        println!(
            "  call {:>3}  {:>7.1} ms  {}",
            d.index,
            d.took.as_secs_f64() * 1e3,
            d.outcome
        );
    }
    let completed = done.iter().filter(|d| d.completed).count();
    let on_disk = (0..calls)
        .filter(|i| {
            std::fs::read_to_string(root.join(file_name(*i))).ok() == Some(content(&run_id, *i))
        })
        .count();
    let stats = rt.write_stats();
    let report = rt.verify(None)?;
    drop(client);
    Ok(Summary {
        calls,
        completed,
        on_disk,
        wall,
        stats,
        report,
        db,
    })
}

/// One whole governed call; every step blocks, so this is what an async host runs on its
/// blocking pool.
fn governed_write(
    rt: &Runtime,
    client: &Arc<McpClient>,
    run_id: &str,
    index: usize,
) -> Result<Outcome, Failure> {
    let host = Actor::new("host");
    let request = Request::new(
        "write_file",
        json!({"path": file_name(index), "content": content(run_id, index)}),
    );
    let definition = Definition::new(
        request,
        ActionClass::Mutating,
        format!("concurrent-{run_id}-{index}"),
        Authority::single(&host),
    );
    let approved = rt
        .propose_and_admit(&host, &host, definition, ALLOW_ALL)?
        .into_new()?
        .into_approved()?;
    let mut executor = McpExecutor::new(Arc::clone(client), "write_file");
    let mut readback = McpReadback::new(
        Arc::clone(client),
        "read_text_file",
        |r: &Request| json!({"path": r.arguments["path"]}),
        |r: &Request, result: &Value| judge(r, result),
    )
    .judge_tool_errors(true);
    let bound = approved.bind(&mut executor)?;
    Ok(bound.dispatch_and_confirm(rt, &host, &mut executor, &mut readback))
}

/// Applied when the file holds exactly the request's content; not applied when the server
/// says the file does not exist; anything else decides nothing.
fn judge(request: &Request, result: &Value) -> ReadbackVerdict {
    if result["isError"] == true {
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        return if text.contains("ENOENT") {
            ReadbackVerdict::NotApplied
        } else {
            ReadbackVerdict::Inconclusive
        };
    }
    match result.pointer("/structuredContent/content") {
        Some(seen) if *seen == request.arguments["content"] => ReadbackVerdict::Applied,
        None | Some(Value::Null) => ReadbackVerdict::NotApplied,
        Some(_) => ReadbackVerdict::Inconclusive,
    }
}

fn file_name(index: usize) -> String {
    format!("call-{index}.txt")
}

fn content(run_id: &str, index: usize) -> String {
    format!("governed call {index} of run {run_id}")
}

/// `node …/mcp-server-filesystem ROOT`, from `$RPR_PEERS_DIR` or `target/peers`.
fn filesystem_server(root: &Path) -> Result<ServerCommand, Failure> {
    let peers = std::env::var_os("RPR_PEERS_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers"),
        PathBuf::from,
    );
    let server = peers.join("node_modules/.bin/mcp-server-filesystem");
    if !server.exists() {
        return Err(format!(
            "{} is not installed: run `bash .ci/install-peers` (or set RPR_PEERS_DIR)",
            server.display()
        )
        .into());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let node = std::env::split_paths(&path)
        .map(|d| d.join("node"))
        .find(|p| p.is_file())
        .ok_or("`node` was not found on PATH; server-filesystem runs on Node.js")?;
    Ok(ServerCommand::new(node).arg(&server).arg(root))
}
