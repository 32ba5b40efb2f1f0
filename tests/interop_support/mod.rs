//! Support for `tests/mcp/interop.rs`: finding (or installing) the real MCP peers,
//! server commands with explicit environments, temp dirs, ledger helpers and the
//! orphan check.
#![allow(
    dead_code,
    unreachable_pub,
    reason = "support code shared by the interop tests"
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{kill, killpg};
use nix::unistd::Pid;
use rpr::Runtime;
use rpr::mcp::{McpClient, ServerCommand, SessionConfig, ShutdownStage};
use serde_json::Value;

/// Where the pinned peers live and how to run them.
#[derive(Debug)]
pub struct Peers {
    /// `RPR_PEERS_DIR` or `<crate>/target/peers`.
    pub dir: PathBuf,
    /// The `node` executable (absolute; the servers get no `PATH`).
    pub node: PathBuf,
    /// The venv's Python with `mcp==2.3.0`.
    pub python: PathBuf,
}

const NODE_BINS: [&str; 3] = [
    "mcp-server-filesystem",
    "mcp-server-memory",
    "mcp-server-everything",
];

impl Peers {
    fn bin(&self, name: &str) -> PathBuf {
        self.dir.join("node_modules/.bin").join(name)
    }

    /// `node <peers>/node_modules/.bin/mcp-server-filesystem <root>` with an empty environment.
    pub fn filesystem(&self, root: &Path) -> ServerCommand {
        ServerCommand::new(&self.node)
            .arg(self.bin("mcp-server-filesystem"))
            .arg(root)
    }

    /// `node …/mcp-server-memory` with only `MEMORY_FILE_PATH` set (its default file sits
    /// inside the package and would be shared by every test).
    pub fn memory(&self, memory_file: &Path) -> ServerCommand {
        ServerCommand::new(&self.node)
            .arg(self.bin("mcp-server-memory"))
            .env("MEMORY_FILE_PATH", memory_file)
    }

    /// `node …/mcp-server-everything stdio` with an empty environment.
    pub fn everything(&self) -> ServerCommand {
        ServerCommand::new(&self.node)
            .arg(self.bin("mcp-server-everything"))
            .arg("stdio")
    }

    /// `python tests/peers/kv_server.py` (official Python SDK) with its state and effects files.
    pub fn kv(&self, state: &Path, effects: &Path, slow_put: &str) -> ServerCommand {
        ServerCommand::new(&self.python)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/kv_server.py"))
            .env("KV_STATE", state)
            .env("KV_EFFECTS", effects)
            .env("KV_SLOW_PUT", slow_put)
    }

    fn missing(&self) -> Vec<String> {
        let mut missing: Vec<String> = NODE_BINS
            .iter()
            .map(|b| self.bin(b))
            .chain([self.python.clone()])
            .filter(|p| !p.exists())
            .map(|p| p.display().to_string())
            .collect();
        if missing.is_empty() {
            let ok = Command::new(&self.python)
                .args(["-c", "import mcp.server.mcpserver"])
                .env_clear()
                .output()
                .is_ok_and(|o| o.status.success());
            if !ok {
                missing.push(format!(
                    "the `mcp` 2.x package in {}",
                    self.python.display()
                ));
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
        .ok_or_else(|| {
            "`node` was not found on PATH; the interop tests need Node.js (>= 20) to run the \
             npm reference servers"
                .to_owned()
        })
}

fn discover() -> Result<Peers, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir =
        std::env::var_os("RPR_PEERS_DIR").map_or_else(|| root.join("target/peers"), PathBuf::from);
    let peers = Peers {
        python: dir.join("venv/bin/python"),
        node: find_node()?,
        dir,
    };
    let missing = peers.missing();
    if missing.is_empty() {
        return Ok(peers);
    }
    eprintln!(
        "interop: peers missing ({}); running `bash .ci/install-peers`",
        missing.join(", ")
    );
    let output = Command::new("bash")
        .arg(root.join(".ci/install-peers"))
        .env("RPR_PEERS_DIR", &peers.dir)
        .output()
        .map_err(|e| format!("could not run `bash .ci/install-peers`: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!(
            "`bash .ci/install-peers` failed ({}) installing into {}:\n{}",
            output.status,
            peers.dir.display(),
            stderr
                .chars()
                .rev()
                .take(4000)
                .collect::<String>()
                .chars()
                .rev()
                .collect::<String>()
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

/// The peers, found or installed once per test binary. Never skips: a missing peer
/// that cannot be installed fails the calling test with the reason.
pub fn peers() -> &'static Peers {
    static PEERS: OnceLock<Result<Peers, String>> = OnceLock::new();
    match PEERS.get_or_init(discover) {
        Ok(peers) => peers,
        Err(reason) => panic!(
            "the real MCP peers are not available, so the interop tests cannot run: {reason}\n\
             Install them with `bash .ci/install-peers` (npm and PyPI access needed) or point \
             RPR_PEERS_DIR at an installed copy."
        ),
    }
}

/// A session config for real peers: generous request timeout (node start-up under a
/// parallel test run), default shutdown ladder.
pub fn config() -> SessionConfig {
    let mut config = SessionConfig::default();
    config.request_timeout = Duration::from_secs(30);
    config
}

/// A fresh directory under the system temp dir, removed on drop. Its path is canonical
/// (server-filesystem compares the real paths of its allowed directories).
pub struct TempDir {
    /// Removes the directory on drop.
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let prefix = format!("rpr-interop-{tag}-");
        let dir = tempfile::Builder::new().prefix(&prefix).tempdir().unwrap();
        let path = dir.path().canonicalize().unwrap();
        Self { _dir: dir, path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

/// Connects to a peer, with the command in the failure message.
pub fn connect(command: &ServerCommand) -> McpClient {
    McpClient::connect(command, &config())
        .unwrap_or_else(|e| panic!("connecting to {command:?} failed: {e}"))
}

/// Shuts the client's server down and asserts that neither its process nor its
/// process group is left. The client must be the last handle (executors and
/// readbacks dropped first).
pub fn shut_down(client: std::sync::Arc<McpClient>) {
    let client = std::sync::Arc::into_inner(client)
        .expect("every executor and readback holding the client was dropped");
    let pid = client.session().pid();
    let report = client.shutdown();
    // Every peer exits on stdin EOF; `Terminated` is tolerated for a slow machine, but a
    // server that needs `SIGKILL` is a finding.
    assert!(
        matches!(
            report.stage,
            ShutdownStage::Exited | ShutdownStage::Terminated
        ),
        "the server should exit when its stdin closes: {report:?}\nstderr:\n{}",
        client.session().stderr_tail()
    );
    drop(client);
    assert_gone(pid);
}

/// Asserts that neither the process `pid` nor its process group exists any more.
pub fn assert_gone(pid: u32) {
    let pid = Pid::from_raw(i32::try_from(pid).expect("pid fits i32"));
    assert_eq!(
        kill(pid, None),
        Err(Errno::ESRCH),
        "server process {pid} outlived its session"
    );
    assert_eq!(
        killpg(pid, None),
        Err(Errno::ESRCH),
        "process group {pid} outlived its session"
    );
}

/// The ledger events of one pathway, parsed, oldest first.
pub fn events(rt: &Runtime, pathway: &str) -> Vec<Value> {
    rt.reader()
        .events(pathway, 0, usize::MAX)
        .unwrap()
        .iter()
        .map(|row| serde_json::from_str(&row.event).unwrap())
        .collect()
}

/// The one event of `kind` in `events` (panics if there is not exactly one).
pub fn event<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = events.iter().filter(|e| e["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "expected one `{kind}` event in {events:#?}");
    found[0]
}

/// The kinds of `events`, in order.
pub fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Lines in a file (0 when it does not exist).
pub fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}
