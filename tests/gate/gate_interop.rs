//! `rpr gate` between real, pinned MCP peers: nothing mocked.
//!
//! - the official Python SDK `ClientSession` (`mcp` 2.3.0) in front of the gate, and
//!   `@modelcontextprotocol/server-everything` behind it: the server's own requests
//!   (`sampling/createMessage`, `elicitation/create`, `roots/list`) reach the client's
//!   callbacks and their answers reach the server; progress and logging notifications
//!   reach the client; each `tools/call` is a pathway in the database;
//! - `@modelcontextprotocol/inspector-cli` 1.0.3 listing and calling a read-only tool of
//!   `@modelcontextprotocol/server-filesystem` through the gate;
//! - the Rust SDK client `rmcp` 3.11 (`tests/peers/rmcp-client`, which offers
//!   `2026-07-28` and can only call `rpr.get_status`, so the gate governs `rpr-mcp`);
//! - the gate's stdout, read line by line from a piped session: only JSON-RPC messages.
//!
//! The peers live in `RPR_PEERS_DIR` or `<crate>/target/peers` (`bash .ci/install-peers`).
//! A missing peer fails the test (never a skip), with or without `RPR_REQUIRE_PEERS=1`.
//! Every test checks that the gate's server is gone when the client is done.

use crate::interop_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use interop_support::{TempDir, peers};
use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use rpr::State;
use rpr::store::{PathwayRecord, ReadStore};
use serde_json::{Value, json};

/// What `tests/peers/gate_interop_everything.py`'s sampling callback answers.
const SAMPLED_TEXT: &str = "gate-interop sampled answer 7f3a";
/// The `name` its elicitation callback gives.
const ELICITED_NAME: &str = "Ada Gate-Interop";

const DEADLINE: Duration = Duration::from_mins(2);

fn gate_bin() -> &'static str {
    env!("CARGO_BIN_EXE_rpr")
}

fn peer_file(relative: &str) -> PathBuf {
    let path = peers().dir.join(relative);
    assert!(
        path.exists(),
        "the peer {} is missing, so this test cannot run (it never skips). Install the peers \
         with `bash .ci/install-peers` or point RPR_PEERS_DIR at an installed copy.",
        path.display()
    );
    path
}

fn write_policy(dir: &TempDir, policy: &Value) -> PathBuf {
    let path = dir.join("policy.json");
    std::fs::write(&path, serde_json::to_string_pretty(policy).unwrap()).unwrap();
    path
}

/// `rpr gate --database DB --policy POLICY [EXTRA...] -- SERVER...` as arguments.
fn gate_args(db: &Path, policy: &Path, extra: &[&str], server: &[&str]) -> Vec<String> {
    let mut args = vec![
        "gate".to_owned(),
        "--database".to_owned(),
        db.display().to_string(),
        "--policy".to_owned(),
        policy.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args.push("--".to_owned());
    args.extend(server.iter().map(|s| (*s).to_owned()));
    args
}

fn node() -> String {
    peers().node.display().to_string()
}

fn node_bin(name: &str) -> String {
    peer_file(&format!("node_modules/.bin/{name}"))
        .display()
        .to_string()
}

// ---------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------

struct Run {
    stdout: String,
    stderr: String,
}

impl Run {
    /// The last stdout line, parsed (the client scripts print one JSON report).
    fn report(&self) -> Value {
        let line = self.stdout.lines().last().unwrap_or_default();
        serde_json::from_str(line).unwrap_or_else(|e| {
            panic!(
                "the client did not print a JSON report ({e}):\nstdout:\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

fn pid(raw: u32) -> Pid {
    Pid::from_raw(i32::try_from(raw).unwrap())
}

fn drain(mut from: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = from.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Runs `cmd` in its own process group with a deadline; on timeout kills the group and
/// panics. Panics unless it exits 0.
fn run(cmd: &mut Command) -> Run {
    use std::os::unix::process::CommandExt;
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {what}: {e}"));
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let status = wait_until(&mut child, DEADLINE);
    let Some(status) = status else {
        let _ = killpg(pid(child.id()), Signal::SIGKILL);
        let _ = child.wait();
        panic!(
            "{what} did not finish within {DEADLINE:?}\nstdout:\n{}\nstderr:\n{}",
            out.join().unwrap(),
            err.join().unwrap()
        );
    };
    let run = Run {
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    assert!(
        status.success(),
        "{what} failed ({status}):\nstdout:\n{}\nstderr:\n{}",
        run.stdout,
        run.stderr
    );
    run
}

fn wait_until(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The pids of the servers the gate started, from its stderr
/// (`rpr gate: server NAME started (pid N, start K)`).
fn server_pids(stderr: &str) -> Vec<i32> {
    stderr
        .lines()
        .filter(|l| l.starts_with("rpr gate: server ") && l.contains(" started (pid "))
        .filter_map(|l| l.split(" started (pid ").nth(1))
        .filter_map(|rest| rest.split(',').next()?.trim().parse().ok())
        .collect()
}

/// Waits (up to 10 s) until neither process `raw` nor its process group exists.
fn assert_gone(raw: i32) {
    let p = Pid::from_raw(raw);
    let deadline = Instant::now() + Duration::from_secs(10);
    while kill(p, None) != Err(Errno::ESRCH) || killpg(p, None) != Err(Errno::ESRCH) {
        if Instant::now() > deadline {
            let _ = killpg(p, Signal::SIGKILL);
            panic!("process {raw} (or its group) outlived the gate");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (up to 10 s) until no live process mentions `needle` on its command line.
fn assert_no_process_mentions(needle: &Path) {
    let needle = needle.to_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut left = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(needle) {
                left.push((p, cmdline));
            }
        }
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            for (p, _) in &left {
                let _ = kill(Pid::from_raw(*p), Signal::SIGKILL);
            }
            panic!("processes left behind (pid, command): {left:#?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------
// The database
// ---------------------------------------------------------------------------

/// Every pathway in `db`, read from a read-only connection.
fn pathways(db: &Path) -> (ReadStore, Vec<PathwayRecord>) {
    let store = ReadStore::open_read_only(db).unwrap();
    let all = store.list_pathways(None, 1000, None).unwrap();
    (store, all)
}

/// The one pathway whose request is `tool`.
fn pathway_of<'a>(all: &'a [PathwayRecord], tool: &str) -> &'a PathwayRecord {
    let found: Vec<&PathwayRecord> = all
        .iter()
        .filter(|p| p.definition["request"]["action"] == tool)
        .collect();
    assert_eq!(found.len(), 1, "one pathway for `{tool}` in {all:#?}");
    found[0]
}

/// The pathway a result names in `_meta` (`dev.rpr/pathway`).
fn named_pathway(meta: &Value) -> (&str, &str) {
    let note = &meta["dev.rpr/pathway"];
    (
        note["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no pathway in {meta}")),
        note["state"].as_str().unwrap(),
    )
}

/// Asserts that the pathway for `tool` is completed after exactly one attempt, of
/// `class`, for server `server`, and is the one the client was told about.
fn assert_completed(
    store: &ReadStore,
    all: &[PathwayRecord],
    tool: &str,
    class: &str,
    server: &str,
    meta: &Value,
) {
    let p = pathway_of(all, tool);
    assert_eq!(p.state, State::Completed, "{p:#?}");
    assert_eq!(p.definition["class"], class, "{p:#?}");
    assert_eq!(p.definition["metadata"]["server"], server, "{p:#?}");
    assert_eq!(named_pathway(meta), (p.id.as_str(), "completed"));
    let attempts = store.attempts(&p.id).unwrap();
    assert_eq!(attempts.len(), 1, "{attempts:#?}");
}

// ---------------------------------------------------------------------------
// (1) Python SDK client, server-everything behind the gate
// ---------------------------------------------------------------------------

/// The client declares sampling, elicitation and roots; the gate declares them to
/// server-everything, which therefore lists its sampling and elicitation tools. The
/// sampling answer comes back inside the tool result, the elicitation answer reaches
/// the server, progress for the client's token and the server's logging reach the
/// client, and each call is a completed pathway.
#[test]
fn python_sdk_through_gate_to_server_everything_passes_server_requests_progress_and_logging() {
    let peers = peers();
    let dir = TempDir::new("gate-everything");
    let db = dir.join("gate.sqlite");
    // trigger-sampling-request and trigger-elicitation-request have no effect on the
    // server to read back, but they are annotated `readOnlyHint: false`: the policy says
    // they only read (its word over the server's claim), so they are bound and completed
    // as read-only calls. trigger-long-running-operation is annotated read-only, and its
    // rule opts into the server's annotations, in so many words.
    let policy = write_policy(
        &dir,
        &json!({"servers": {"everything": {
            "trigger-sampling-request": {"read_only": true},
            "trigger-elicitation-request": {"read_only": true},
            "trigger-long-running-operation": {"trust_annotations": true},
        }}}),
    );
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/gate_interop_everything.py");
    let run = run(Command::new(&peers.python)
        .arg(script)
        .arg("--")
        .arg(gate_bin())
        .args(gate_args(
            &db,
            &policy,
            &["--name", "everything"],
            &[&node(), &node_bin("mcp-server-everything"), "stdio"],
        )));
    let r = run.report();
    let context = format!(
        "report: {r:#}\nclient stderr (and the gate's):\n{}",
        run.stderr
    );

    assert_eq!(r["protocol_version"], "2025-11-25", "{context}");
    assert_eq!(r["server_info"]["name"], "rpr-gate", "{context}");
    let tools: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    for tool in [
        "trigger-sampling-request",
        "trigger-elicitation-request",
        "trigger-long-running-operation",
    ] {
        assert!(tools.contains(&tool), "`{tool}` not listed: {context}");
    }
    let calls = &r["calls"];

    // Sampling: the server's sampling/createMessage reached the client's callback, and
    // the callback's answer is inside the tool result the server returned.
    let sampling = r["sampling"].as_array().unwrap();
    assert_eq!(sampling.len(), 1, "{context}");
    assert!(
        sampling[0]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("say the word"),
        "{context}"
    );
    assert_eq!(calls["sampling"]["is_error"], false, "{context}");
    assert!(
        calls["sampling"]["text"]
            .as_str()
            .unwrap()
            .contains(SAMPLED_TEXT),
        "{context}"
    );

    // Elicitation: the server's form reached the callback, and its answer the server.
    let elicitations = r["elicitations"].as_array().unwrap();
    assert_eq!(elicitations.len(), 1, "{context}");
    assert_eq!(
        elicitations[0]["message"], "Please provide inputs for the following fields:",
        "{context}"
    );
    assert!(
        elicitations[0]["properties"]
            .as_array()
            .unwrap()
            .contains(&json!("name")),
        "{context}"
    );
    assert_eq!(calls["elicitation"]["is_error"], false, "{context}");
    let text = calls["elicitation"]["text"].as_str().unwrap();
    assert!(
        text.contains("User provided the requested information")
            && text.contains(&format!("- Name: {ELICITED_NAME}")),
        "{context}"
    );

    // Progress: notifications for the client's token, increasing, up to the total.
    assert_eq!(calls["long"]["is_error"], false, "{context}");
    let progress: Vec<f64> = r["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["progress"].as_f64().unwrap())
        .collect();
    assert!(
        !progress.is_empty(),
        "no progress reached the client: {context}"
    );
    assert!(progress.is_sorted(), "{context}");

    // Roots and logging: server-everything asks for the roots after `initialized` and
    // logs how many the client gave, so the log proves the answer went back too.
    assert!(r["roots_requests"].as_u64().unwrap() >= 1, "{context}");
    let logs = r["logs"].as_array().unwrap();
    assert!(!logs.is_empty(), "no logging reached the client: {context}");
    assert!(
        logs.iter().any(|l| l["data"]
            .as_str()
            .is_some_and(|d| d.contains("1 root(s) received from client"))),
        "{context}"
    );

    // Each call is a pathway in the database, completed after one attempt.
    let (store, all) = pathways(&db);
    assert_eq!(all.len(), 3, "{all:#?}");
    for (tool, class, call) in [
        ("trigger-sampling-request", "read_only", "sampling"),
        ("trigger-elicitation-request", "read_only", "elicitation"),
        ("trigger-long-running-operation", "read_only", "long"),
    ] {
        assert_completed(
            &store,
            &all,
            tool,
            class,
            "everything",
            &calls[call]["meta"],
        );
    }
    let long = pathway_of(&all, "trigger-long-running-operation");
    assert_eq!(
        long.definition["request"]["arguments"],
        json!({"duration": 1.5, "steps": 3})
    );
    // The pathway records where the server ran (an operator's readback runs it there).
    let gate = &long.definition["metadata"]["gate"];
    assert!(gate["cwd"].is_string(), "{gate}");

    let started = server_pids(&run.stderr);
    assert_eq!(started.len(), 1, "{context}");
    assert_gone(started[0]);
    assert_no_process_mentions(dir.path());
}

// ---------------------------------------------------------------------------
// (2) inspector-cli, server-filesystem behind the gate
// ---------------------------------------------------------------------------

/// `node index.js <rpr> --method … -- gate … -- <server>`, from the package's `build`
/// directory (inspector-cli 1.0.3 resolves `../package.json` against the current
/// directory). Its parser splits at the first `--` and appends what follows to the
/// target command verbatim, so the gate's own `--` survives.
fn inspector(gate: &[String], method_args: &[&str]) -> Value {
    let run = run(Command::new(&peers().node)
        .current_dir(peer_file(
            "node_modules/@modelcontextprotocol/inspector-cli/build",
        ))
        .arg("index.js")
        .arg(gate_bin())
        .args(method_args)
        .arg("--")
        .args(gate));
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "inspector-cli printed no JSON ({e}):\nstdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        )
    })
}

#[test]
fn inspector_cli_lists_and_calls_a_read_only_filesystem_tool_through_gate() {
    let dir = TempDir::new("gate-inspector");
    let root = dir.join("root");
    std::fs::create_dir(&root).unwrap();
    let note = root.join("note.txt");
    std::fs::write(&note, "hello through the gate\nsecond line\n").unwrap();
    let db = dir.join("gate.sqlite");
    // `read_text_file` reads: the policy says so (its annotation is the server's claim).
    let policy = write_policy(
        &dir,
        &json!({"servers": {"files": {"read_text_file": {"read_only": true}}}}),
    );
    let gate = gate_args(
        &db,
        &policy,
        &["--name", "files"],
        &[
            &node(),
            &node_bin("mcp-server-filesystem"),
            root.to_str().unwrap(),
        ],
    );

    let list = inspector(&gate, &["--method", "tools/list"]);
    let tools = list["tools"].as_array().unwrap();
    for name in ["read_text_file", "list_allowed_directories"] {
        let tool = tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("`{name}` not listed: {list:#}"));
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
    }
    let (_, all) = pathways(&db);
    assert!(all.is_empty(), "tools/list is no call: {all:#?}");

    let result = inspector(
        &gate,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "read_text_file",
            "--tool-arg",
            &format!("path={}", note.display()),
        ],
    );
    assert_ne!(result["isError"], true, "{result:#}");
    assert_eq!(
        result["content"][0]["text"], "hello through the gate\nsecond line\n",
        "{result:#}"
    );
    // The policy and the pins know the server by its configured name (`--name`), not by
    // the name it reports (secure-filesystem-server).
    let (store, all) = pathways(&db);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_completed(
        &store,
        &all,
        "read_text_file",
        "read_only",
        "files",
        &result["_meta"],
    );
    assert_eq!(
        all[0].definition["request"]["arguments"],
        json!({"path": note.to_str().unwrap()})
    );
    let pins = store.pins().unwrap();
    assert!(
        pins.iter()
            .any(|p| p.server == "files" && p.tool == "read_text_file"),
        "{pins:#?}"
    );
    assert_no_process_mentions(dir.path());
}

// ---------------------------------------------------------------------------
// (3) rmcp client, rpr-mcp behind the gate
// ---------------------------------------------------------------------------

/// `tests/peers/rmcp-client PROGRAM ARGS…` starts any server, but its calls are fixed:
/// `list_all_tools`, then `tools/call rpr.get_status`. So the gate governs `rpr-mcp`,
/// serving the gate's own database: the status it reports is read while the call is
/// in flight, and shows nothing of it yet: a read's attempt and outcome are recorded
/// together once the server answered (before the client gets the answer, which the
/// store shows completed after the run).
#[test]
fn rmcp_client_offering_2026_07_28_gets_2025_11_25_through_gate_and_calls_a_tool() {
    let dir = TempDir::new("gate-rmcp");
    let db = dir.join("gate.sqlite");
    // rpr-mcp only reads (it opens the database read-only); the policy says so for all its tools.
    let policy = write_policy(
        &dir,
        &json!({"servers": {"rpr-mcp": {"*": {"read_only": true}}}}),
    );
    let run = run(Command::new(peer_file("rmcp-client/release/rmcp-client"))
        .arg(gate_bin())
        .args(gate_args(
            &db,
            &policy,
            &["--name", "rpr-mcp"],
            &[
                env!("CARGO_BIN_EXE_rpr-mcp"),
                "--database",
                db.to_str().unwrap(),
            ],
        )));
    let r = run.report();
    let context = format!("report: {r:#}\nstderr:\n{}", run.stderr);

    assert_eq!(r["offered"], "2026-07-28", "{context}");
    assert_eq!(r["answered"], "2025-11-25", "{context}");
    assert_eq!(r["peer_info"]["protocolVersion"], "2025-11-25", "{context}");
    assert_eq!(
        r["peer_info"]["serverInfo"]["name"], "rpr-gate",
        "{context}"
    );
    let names: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"rpr.get_status"), "{context}");

    let status = &r["get_status"];
    assert_eq!(status["isError"], false, "{context}");
    let counts = &status["structuredContent"]["counts"];
    assert!(
        counts["running"].as_i64().unwrap_or(0) == 0,
        "a read in flight is not recorded yet (one commit, after its answer): {context}"
    );

    let sent: Vec<&str> = r["sent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["method"].as_str().unwrap_or("<response>"))
        .collect();
    assert_eq!(
        sent,
        [
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ],
        "{context}"
    );
    // Every line the gate wrote is a JSON-RPC response to one of rmcp's requests (the
    // client records a line that is not JSON as a string).
    let received = r["received"].as_array().unwrap();
    assert_eq!(received.len(), 3, "{context}");
    for (m, id) in received.iter().zip([0, 1, 2]) {
        assert_eq!(m["jsonrpc"], "2.0", "{m}");
        assert_eq!(m["id"], id, "{m}");
        assert!(m.get("result").is_some(), "{m}");
    }
    assert_eq!(
        r["server_exit"], 0,
        "the gate exits 0 on stdin EOF: {context}"
    );

    let (store, all) = pathways(&db);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_completed(
        &store,
        &all,
        "rpr.get_status",
        "read_only",
        "rpr-mcp",
        &status["_meta"],
    );
    assert_gone(i32::try_from(r["server_pid"].as_i64().unwrap()).unwrap());
    for started in server_pids(&run.stderr) {
        assert_gone(started);
    }
    assert_no_process_mentions(dir.path());
}

// ---------------------------------------------------------------------------
// (4) stdout carries JSON-RPC messages only
// ---------------------------------------------------------------------------

/// A gate session driven line by line over pipes.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Session {
    fn start(args: &[String]) -> Self {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new(gate_bin())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            loop {
                // Raw lines, with their end, so a missing newline or a `\r` shows.
                let mut line = String::new();
                match stdout.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let stderr = Some(drain(child.stderr.take().unwrap()));
        Self {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            stderr,
        }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Reads lines until the response with `id`, and returns it.
    fn response(&mut self, id: &Value) -> Value {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = self.lines.recv_timeout(left) else {
                panic!(
                    "no response {id} within {DEADLINE:?}; stdout so far: {:#?}",
                    self.seen
                );
            };
            self.seen.push(line.clone());
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && &v["id"] == id
                && v.get("method").is_none()
            {
                return v;
            }
        }
    }

    /// Closes the gate's stdin, waits for it to exit 0, and returns every stdout line
    /// and its stderr.
    fn finish(mut self) -> (Vec<String>, String) {
        drop(self.stdin.take());
        let status = wait_until(&mut self.child, DEADLINE);
        if status.is_none() {
            let _ = killpg(pid(self.child.id()), Signal::SIGKILL);
            let _ = self.child.wait();
        }
        self.seen.extend(self.lines.iter());
        let stderr = self.stderr.take().unwrap().join().unwrap();
        assert!(
            status.is_some_and(|s| s.success()),
            "the gate should exit 0 on stdin EOF ({status:?}); stderr:\n{stderr}"
        );
        (std::mem::take(&mut self.seen), stderr)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = killpg(pid(self.child.id()), Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// The gate's stdout, piped, with server-everything behind it (which writes a banner
/// to its stderr and sends notifications early): every line is one compact JSON-RPC
/// 2.0 message, each request is answered once, and the progress for the client's
/// token is passed on.
#[test]
fn gate_stdout_carries_only_json_rpc_lines() {
    let dir = TempDir::new("gate-stdout");
    let db = dir.join("gate.sqlite");
    let policy = write_policy(
        &dir,
        &json!({"servers": {"everything": {
            "echo": {"read_only": true},
            "trigger-long-running-operation": {"read_only": true},
        }}}),
    );
    let mut s = Session::start(&gate_args(
        &db,
        &policy,
        &["--name", "everything"],
        &[&node(), &node_bin("mcp-server-everything"), "stdio"],
    ));

    s.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "gate-interop", "version": "0.0.0"}
        }}),
    );
    let init = s.response(&json!(1));
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    s.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let list = s.response(&json!(2));
    assert!(
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo"),
        "{list}"
    );
    s.send(
        &json!({"jsonrpc": "2.0", "id": "three", "method": "tools/call", "params": {
            "name": "echo", "arguments": {"message": "line one\nline two"}
        }}),
    );
    s.send(
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "trigger-long-running-operation",
            "arguments": {"duration": 1, "steps": 2},
            "_meta": {"progressToken": "tok-4"}
        }}),
    );
    s.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}));
    let echo = s.response(&json!("three"));
    assert_eq!(
        echo["result"]["content"][0]["text"], "Echo: line one\nline two",
        "{echo}"
    );
    let long = s.response(&json!(4));
    assert_ne!(long["result"]["isError"], true, "{long}");
    let (lines, stderr) = s.finish();

    let mut responses = Vec::new();
    let mut progress = 0;
    for line in &lines {
        let body = line
            .strip_suffix('\n')
            .unwrap_or_else(|| panic!("a stdout line without its newline: {line:?}"));
        assert!(!body.contains('\r') && !body.trim().is_empty(), "{line:?}");
        let m: Value = serde_json::from_str(body).unwrap_or_else(|e| {
            panic!("a stdout line that is not JSON ({e}): {line:?}\nstderr:\n{stderr}")
        });
        assert!(m.is_object(), "{line:?}");
        assert_eq!(m["jsonrpc"], "2.0", "{line:?}");
        if m.get("method").is_some() {
            if m["method"] == "notifications/progress" {
                assert_eq!(m["params"]["progressToken"], "tok-4", "{line:?}");
                progress += 1;
            }
        } else {
            assert!(
                m.get("result").is_some() != m.get("error").is_some(),
                "{line:?}"
            );
            responses.push(m["id"].clone());
        }
    }
    assert_eq!(
        responses.iter().filter(|id| **id == json!(5)).count(),
        1,
        "the ping is answered once: {lines:#?}"
    );
    let mut expected = vec![json!(1), json!(2), json!("three"), json!(4), json!(5)];
    responses.sort_by_key(ToString::to_string);
    expected.sort_by_key(ToString::to_string);
    assert_eq!(
        responses, expected,
        "each request answered once: {lines:#?}"
    );
    assert!(progress >= 1, "no progress for tok-4: {lines:#?}");
    // What the gate and the server had to say went to stderr.
    assert!(stderr.contains("rpr gate: server "), "{stderr}");

    let (store, all) = pathways(&db);
    assert_eq!(all.len(), 2, "{all:#?}");
    for p in &all {
        assert_eq!(p.state, State::Completed, "{p:#?}");
        assert_eq!(store.attempts(&p.id).unwrap().len(), 1);
    }
    for started in server_pids(&stderr) {
        assert_gone(started);
    }
}
