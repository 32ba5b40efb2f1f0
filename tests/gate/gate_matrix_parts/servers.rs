//! Each server of the matrix behind its own gate: the policy, the gate's command line, the
//! calls each cell makes, and the server-side evidence of what they did (files on disk and
//! the preload's effects log, fetches counted by a local HTTP server, effects logs).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

use super::interop_support::{TempDir, peers};
use super::model::{Client, Server};

const RPR: &str = env!("CARGO_BIN_EXE_rpr");
const FAULT: &str = env!("CARGO_BIN_EXE_rpr-fault-server");

/// How long the gate waits for a call (`--call-timeout`, seconds) in front of
/// server-filesystem: its unknown cell is a write whose answer comes later than this
/// (the write itself at once).
const FILES_TIMEOUT_S: u64 = 5;
/// How long server-filesystem's answer to the slow write waits (its write is done first).
const SLOW_REPLY_MS: u64 = (FILES_TIMEOUT_S + 3) * 1000;
/// The same for the Python server, whose `slow_put` answers after 60 s (its effect
/// first); longer than server-filesystem's, as the gate waits this long for the server's
/// `initialize` too (a Python start under load).
const PYTHON_TIMEOUT_S: u64 = 8;
/// For the servers whose unknown is not a timeout.
const TIMEOUT_S: u64 = 30;

/// Why server-everything has no unknown cell.
pub(crate) const EVERYTHING_NO_UNKNOWN: &str = "server-everything has no tool that reads back what \
    its writing tools did, so its gated call (gzip-file-as-resource, which fetches a URL and \
    keeps the result as a session resource) is classed read-only by the policy; a read holds \
    nothing (an identical read after a failed one is a new call), so there is no write whose \
    repeat the gate must refuse";

/// One tool call of a cell.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) tool: &'static str,
    pub(crate) args: Value,
}

/// Where a server's effects are seen.
enum Evidence {
    /// server-filesystem: the files under `root`, and the writes the preload
    /// (`tests/peers/slow-write.cjs`) logged.
    Files { log: PathBuf },
    /// server-everything: the fetches of its URLs, counted by the local HTTP server.
    Fetches,
    /// The fault server and the Python server: one JSON line per effect, with its `key`.
    Effects { log: PathBuf, state: PathBuf },
}

/// A server of the matrix set up for one client: its directory, policy and gates.
pub(crate) struct Setup {
    pub(crate) server: Server,
    pub(crate) dir: TempDir,
    /// The gate's `--name`.
    pub(crate) name: &'static str,
    /// The gate in front of the server, as argv (the `rpr` binary first).
    pub(crate) gate: Vec<String>,
    /// The gate for the unknown cell: the same gate, or (fault servers) one whose server
    /// crashes after the effect.
    pub(crate) unknown_gate: Vec<String>,
    pub(crate) read: Call,
    /// Text the read's answer contains.
    pub(crate) read_expect: &'static str,
    pub(crate) approved: Call,
    pub(crate) declined: Call,
    /// The call whose outcome is unknown (`None`: the cell does not apply).
    pub(crate) unknown: Option<Call>,
    evidence: Evidence,
}

impl Setup {
    pub(crate) fn new(server: Server, client: Client) -> Self {
        let dir = TempDir::new(&format!("matrix-{}-{:?}", client.tag(), server));
        match server {
            Server::Filesystem => filesystem(dir, client),
            Server::Everything => everything(dir, client),
            Server::Fault => faults(dir, client, None),
            Server::PythonSdk => python(dir, client),
            Server::Old => faults(dir, client, Some("2025-06-18")),
        }
    }

    pub(crate) fn db(&self) -> PathBuf {
        self.dir.join("rpr.db")
    }

    /// The tools the client must see listed.
    pub(crate) fn tools(&self) -> Vec<&'static str> {
        let mut tools = vec![self.read.tool, self.approved.tool];
        tools.extend(self.unknown.as_ref().map(|c| c.tool));
        tools
    }

    /// How many times the effect of `call` took place, by the server's own evidence.
    pub(crate) fn effects(&self, call: &Call) -> usize {
        match &self.evidence {
            Evidence::Files { log } => log_lines(log)
                .iter()
                .filter(|l| l["step"] == "done" && l["path"] == call.args["path"])
                .count(),
            Evidence::Fetches => fetches().count(&fetch_path(call)),
            Evidence::Effects { log, .. } => log_lines(log)
                .iter()
                .filter(|l| l["key"] == call.args["key"])
                .count(),
        }
    }

    /// Whether the approved call's effect is in place (the file's content, the stored
    /// value; for server-everything the one fetch is the evidence).
    pub(crate) fn in_place(&self, call: &Call) -> Result<(), String> {
        let (found, want) = match &self.evidence {
            Evidence::Files { .. } => {
                let path = call.args["path"].as_str().unwrap_or_default();
                (std::fs::read_to_string(path).ok(), &call.args["content"])
            }
            Evidence::Fetches => return Ok(()),
            Evidence::Effects { state, .. } => {
                let stored: Option<Value> = std::fs::read(state)
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok());
                let key = call.args["key"].as_str().unwrap_or_default();
                let value = stored.and_then(|s| s[key].as_str().map(str::to_owned));
                (value, &call.args["value"])
            }
        };
        match found {
            Some(found) if want == &Value::from(found.as_str()) => Ok(()),
            other => Err(format!("the server holds {other:?}, not {want}")),
        }
    }
}

/// Every JSON line of a log (none when it does not exist).
fn log_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
}

/// `rpr gate --database DB --policy POLICY --name NAME --call-timeout S -- SERVER…`.
fn gate_argv(dir: &TempDir, name: &str, timeout_s: u64, server: &[String]) -> Vec<String> {
    let mut argv: Vec<String> = [
        RPR,
        "gate",
        "--database",
        &dir.join("rpr.db").display().to_string(),
        "--policy",
        &dir.join("policy.json").display().to_string(),
        "--name",
        name,
        "--call-timeout",
        &timeout_s.to_string(),
        "--",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    argv.extend(server.iter().cloned());
    argv
}

/// The policy: the read tool reads, the others need a Human Gate and (when `readback`
/// is given) are read back by it.
fn policy(dir: &TempDir, name: &str, rules: Value) {
    write_json(
        &dir.join("policy.json"),
        &json!({
            "version": 1,
            "authority": {"approval_authority": "alice", "repair_owner": "bob", "resume_authority": "bob"},
            "servers": {name: rules},
        }),
    );
}

/// A server command that sets its own environment (`env K=V… PROGRAM…`), so it does not
/// depend on what each client passes to the gate.
fn with_env(vars: &[(&str, String)], command: &[String]) -> Vec<String> {
    let mut argv = vec!["/usr/bin/env".to_owned()];
    argv.extend(vars.iter().map(|(k, v)| format!("{k}={v}")));
    argv.extend(command.iter().cloned());
    argv
}

fn filesystem(dir: TempDir, client: Client) -> Setup {
    let root = dir.join("files");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("seed.txt"), "seed text\n").unwrap();
    let log = dir.join("fs-effects.jsonl");
    let p = peers();
    let preload = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/slow-write.cjs");
    let server = with_env(
        &[
            ("RPR_EFFECTS_LOG", log.display().to_string()),
            ("RPR_SLOW_WRITE_MS", SLOW_REPLY_MS.to_string()),
            ("RPR_SLOW_WRITE_WHEN", "after".into()),
            ("RPR_SLOW_WRITE_MATCH", "slow-".into()),
        ],
        &[
            p.node.display().to_string(),
            "--require".into(),
            preload.display().to_string(),
            p.dir
                .join("node_modules/.bin/mcp-server-filesystem")
                .display()
                .to_string(),
            root.display().to_string(),
        ],
    );
    policy(
        &dir,
        "files",
        json!({
            "read_text_file": {"read_only": true},
            "write_file": {
                "admission": "human_gate",
                "readback": {
                    "tool": "read_text_file",
                    "arguments": {"path": "$path"},
                    "expect": {"/structuredContent/content": "$content"},
                    "absent_if_error_contains": "ENOENT"
                }
            }
        }),
    );
    let gate = gate_argv(&dir, "files", FILES_TIMEOUT_S, &server);
    let write = |file: &str| Call {
        tool: "write_file",
        args: json!({"path": root.join(file), "content": format!("{file} by {}", client.tag())}),
    };
    Setup {
        server: Server::Filesystem,
        name: "files",
        unknown_gate: gate.clone(),
        gate,
        read: Call {
            tool: "read_text_file",
            args: json!({"path": root.join("seed.txt")}),
        },
        read_expect: "seed text",
        approved: write("approved.txt"),
        declined: write("declined.txt"),
        unknown: Some(write("slow-unknown.txt")),
        evidence: Evidence::Files { log },
        dir,
    }
}

fn everything(dir: TempDir, client: Client) -> Setup {
    let p = peers();
    let server = vec![
        p.node.display().to_string(),
        p.dir
            .join("node_modules/.bin/mcp-server-everything")
            .display()
            .to_string(),
        "stdio".into(),
    ];
    policy(
        &dir,
        "everything",
        json!({
            "echo": {"read_only": true},
            "gzip-file-as-resource": {"admission": "human_gate", "read_only": true}
        }),
    );
    let gzip = |what: &str| Call {
        tool: "gzip-file-as-resource",
        args: json!({
            "name": format!("{what}.gz"),
            "data": format!("http://127.0.0.1:{}/{}/{what}", fetches().port, client.tag()),
            "outputType": "resourceLink"
        }),
    };
    let gate = gate_argv(&dir, "everything", TIMEOUT_S, &server);
    Setup {
        server: Server::Everything,
        name: "everything",
        unknown_gate: gate.clone(),
        gate,
        read: Call {
            tool: "echo",
            args: json!({"message": "hello matrix"}),
        },
        read_expect: "Echo: hello matrix",
        approved: gzip("approved"),
        declined: gzip("declined"),
        unknown: None,
        evidence: Evidence::Fetches,
        dir,
    }
}

/// The fault server, at its default protocol version or at `version`.
fn faults(dir: TempDir, client: Client, version: Option<&str>) -> Setup {
    let server = |fault: &str| {
        let mut argv = vec![
            FAULT.to_owned(),
            "--effects".into(),
            dir.join(EFFECTS).display().to_string(),
            "--state".into(),
            dir.join(STATE).display().to_string(),
            "--fault".into(),
            fault.into(),
        ];
        if let Some(v) = version {
            argv.extend(["--protocol-version".to_owned(), v.to_owned()]);
        }
        argv
    };
    kv_policy(&dir, "faults", false);
    let gates = [
        gate_argv(&dir, "faults", TIMEOUT_S, &server("none")),
        gate_argv(&dir, "faults", TIMEOUT_S, &server("crash-after-effect")),
    ];
    let kind = if version.is_some() {
        Server::Old
    } else {
        Server::Fault
    };
    key_value(dir, kind, "faults", gates, "put", client)
}

fn python(dir: TempDir, client: Client) -> Setup {
    let p = peers();
    let server = with_env(
        &[
            ("KV_STATE", dir.join(STATE).display().to_string()),
            ("KV_EFFECTS", dir.join(EFFECTS).display().to_string()),
            ("KV_SLOW_PUT", "effect-then-sleep".into()),
        ],
        &[
            p.python.display().to_string(),
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/peers/kv_server.py")
                .display()
                .to_string(),
        ],
    );
    kv_policy(&dir, "kv", true);
    let gate = gate_argv(&dir, "kv", PYTHON_TIMEOUT_S, &server);
    key_value(
        dir,
        Server::PythonSdk,
        "kv",
        [gate.clone(), gate],
        "slow_put",
        client,
    )
}

/// A key-value server's effects log and state file, in its directory.
const EFFECTS: &str = "effects.jsonl";
const STATE: &str = "state.json";

/// A key-value server (the fault servers, the Python server) behind `gates` (the gate,
/// and the gate for the unknown): `get` reads the seeded key, `put` writes, and
/// `unknown_tool` is the write whose outcome is unknown.
fn key_value(
    dir: TempDir,
    server: Server,
    name: &'static str,
    [gate, unknown_gate]: [Vec<String>; 2],
    unknown_tool: &'static str,
    client: Client,
) -> Setup {
    let (log, state) = (dir.join(EFFECTS), dir.join(STATE));
    write_json(&state, &json!({"seed": "seed-value"}));
    Setup {
        server,
        name,
        gate,
        unknown_gate,
        read: Call {
            tool: "get",
            args: json!({"key": "seed"}),
        },
        read_expect: "seed-value",
        approved: put("put", "approved", client),
        declined: put("put", "declined", client),
        unknown: Some(put(unknown_tool, "unknown", client)),
        evidence: Evidence::Effects { log, state },
        dir,
    }
}

/// `put`-like call of `tool` for key `what`.
fn put(tool: &'static str, what: &str, client: Client) -> Call {
    Call {
        tool,
        args: json!({"key": what, "value": format!("{what} by {}", client.tag())}),
    }
}

/// The policy of a key-value server: `get` reads; `put` (and `slow_put`) need a Human
/// Gate and are read back by `get`.
fn kv_policy(dir: &TempDir, name: &str, slow_put: bool) {
    let gated = json!({
        "admission": "human_gate",
        "readback": {
            "tool": "get",
            "arguments": {"key": "$key"},
            "expect": {"/structuredContent/value": "$value"}
        }
    });
    let mut rules = json!({"get": {"read_only": true}, "put": gated});
    if slow_put {
        rules["slow_put"] = gated;
    }
    policy(dir, name, rules);
}

// ---------------------------------------------------------------------------
// The local HTTP server whose URLs server-everything's gzip tool fetches
// ---------------------------------------------------------------------------

/// A loopback HTTP server that answers every GET with a short text and counts the
/// requests per path: server-everything's effects, seen from outside it.
pub(crate) struct Fetches {
    pub(crate) port: u16,
    counts: Arc<Mutex<HashMap<String, usize>>>,
}

impl Fetches {
    pub(crate) fn count(&self, path: &str) -> usize {
        self.counts
            .lock()
            .unwrap()
            .get(path)
            .copied()
            .unwrap_or_default()
    }
}

/// The path of the URL a gzip call fetches.
fn fetch_path(call: &Call) -> String {
    let url = call.args["data"].as_str().unwrap_or_default();
    url.splitn(4, '/')
        .nth(3)
        .map(|p| format!("/{p}"))
        .unwrap_or_default()
}

/// The one local HTTP server of this test binary.
pub(crate) fn fetches() -> &'static Fetches {
    static FETCHES: OnceLock<Fetches> = OnceLock::new();
    FETCHES.get_or_init(|| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let counts = Arc::new(Mutex::new(HashMap::new()));
        let shared = Arc::clone(&counts);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let counts = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, &counts));
            }
        });
        Fetches { port, counts }
    })
}

/// Answers one request (`Connection: close`) and counts its path.
fn serve(mut stream: TcpStream, counts: &Mutex<HashMap<String, usize>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => break,
            Ok(_) if header == "\r\n" || header == "\n" => break,
            Ok(_) => {}
        }
    }
    let path = request_line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let body = format!("fetched {path}\n");
    *counts.lock().unwrap().entry(path).or_default() += 1;
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}
