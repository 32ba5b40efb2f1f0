//! Support for the tests of the `rpr` binary's operator commands and of the examples:
//! running them, scratch directories, a config and policy for `rpr-fault-server`, and
//! reading the resulting database.
//!
//! Cargo gives an integration test the path of a binary (`CARGO_BIN_EXE_rpr`) but none of an
//! example, so the examples' code is compiled into their tests instead (`#[path]`:
//! `tests/cli/host_demo.rs`, `tests/mcp/concurrent_example.rs`); no test builds an example.
#![allow(
    dead_code,
    unreachable_pub,
    reason = "each host test binary uses a different part of the support module"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rpr::store::ReadStore;
use serde_json::{Value, json};

/// The `rpr` binary, built by cargo for the integration tests.
pub fn rpr() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_rpr"))
}

/// Runs `program` with `args` (stdin closed: not a terminal).
fn run_program<I, S>(program: &Path, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{} does not run: {e}", program.display()))
}

/// Runs `rpr` with `args` (stdin closed: not a terminal).
pub fn run<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    run_program(rpr(), args)
}

/// Runs `rpr` with `args`, `input` written to its stdin and the stdin then closed.
pub fn run_with_stdin(args: &[&str], input: &[u8]) -> Output {
    use std::io::Write as _;
    let mut child = Command::new(rpr())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("rpr does not run: {e}"));
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// `call TOOL` on server `ledger` with these files and arguments, approved as alice.
pub fn call_args<'a>(
    config: &'a str,
    policy: &'a str,
    db: &'a str,
    tool: &'a str,
    args: &'a str,
) -> Vec<&'a str> {
    vec![
        "call",
        "--config",
        config,
        "--policy",
        policy,
        "--database",
        db,
        "--server",
        "ledger",
        "--tool",
        tool,
        "--args",
        args,
        "--approve-as",
        "alice",
    ]
}

/// A database `rpr.db` in `dir` with one completed pathway (`done`, approved by alice) and
/// one unknown one (`lost`: the server died after the effect, before its reply), made
/// through `rpr call`; its location.
pub fn done_and_lost(dir: &Scratch) -> String {
    let policy = dir.policy();
    let db = dir.join("rpr.db").display().to_string();
    for (fault, key, code) in [("none", "done", 0), ("crash-after-effect", "lost", 3)] {
        let config = dir.fault_config(fault);
        let arguments = format!(r#"{{"key": "{key}", "value": "paid"}}"#);
        let mut args = call_args(&config, &policy, &db, "put", &arguments);
        args.extend(["--key", key]);
        let output = run(&args);
        assert_eq!(output.status.code(), Some(code), "{}", text(&output));
    }
    db
}

/// stdout and stderr of `output`, for messages and checks.
pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A fresh directory under the system temp dir, removed on drop.
pub struct Scratch(tempfile::TempDir);

impl Scratch {
    pub fn new(tag: &str) -> Self {
        let prefix = format!("rpr-host-{tag}-");
        Self(tempfile::Builder::new().prefix(&prefix).tempdir().unwrap())
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    /// Writes `value` as `name` and returns its path as a string.
    pub fn write(&self, name: &str, value: &Value) -> String {
        let path = self.join(name);
        std::fs::write(&path, serde_json::to_string_pretty(value).unwrap()).unwrap();
        path.display().to_string()
    }

    /// A config with server `ledger`: `rpr-fault-server` with state and effects files here.
    pub fn fault_config(&self, fault: &str) -> String {
        self.write(
            &format!("mcp-{fault}.json"),
            &json!({"mcpServers": {"ledger": {
                "command": env!("CARGO_BIN_EXE_rpr-fault-server"),
                "args": ["--state", self.join("state.json"), "--effects", self.join("effects.log"),
                         "--fault", fault],
            }}}),
        )
    }

    /// A policy: `put` of server `ledger` behind a Human Gate (approval authority
    /// alice), read back with `get` (read-only by the policy).
    pub fn policy(&self) -> String {
        self.policy_with(&json!({}))
    }

    /// [`Scratch::policy`] with the top-level members of `extra` added (or replaced).
    pub fn policy_with(&self, extra: &Value) -> String {
        let mut policy = json!({
            "authority": {"approval_authority": "alice", "repair_owner": "bob"},
            "servers": {"ledger": {
                "get": {"read_only": true},
                "put": {
                    "human_gate": true,
                    "readback": {"tool": "get", "arguments": {"key": "$key"},
                                 "expect": {"/structuredContent/value": "$value"}}
                }
            }}
        });
        for (k, v) in extra.as_object().into_iter().flatten() {
            policy[k] = v.clone();
        }
        self.write("policy.json", &policy)
    }

    /// How many `put` effects the fault server performed.
    pub fn effects(&self) -> usize {
        std::fs::read_to_string(self.join("effects.log")).map_or(0, |s| s.lines().count())
    }
}

/// Every pathway of the database: (id, idempotency key, state).
pub fn pathways(db: &Path) -> Vec<(String, String, String)> {
    let store = ReadStore::open_read_only(db).unwrap();
    store
        .list_pathways(None, 1000, None)
        .unwrap()
        .into_iter()
        .map(|r| (r.id, r.idempotency_key, r.state.as_str().to_owned()))
        .collect()
}

/// The pathway with idempotency key `key`: (id, state).
pub fn by_key(db: &Path, key: &str) -> (String, String) {
    let found = pathways(db).into_iter().find(|(_, k, _)| k == key);
    let (id, _, state) = found.unwrap_or_else(|| panic!("no pathway with key {key}"));
    (id, state)
}

/// The ledger events of one pathway, oldest first.
pub fn events(db: &Path, pathway: &str) -> Vec<Value> {
    let store = ReadStore::open_read_only(db).unwrap();
    store
        .events(pathway, 0, usize::MAX)
        .unwrap()
        .iter()
        .map(|row| serde_json::from_str(&row.event).unwrap())
        .collect()
}

/// The kinds of `events`, in order.
pub fn kinds(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or_default())
        .collect()
}

/// The one event of `kind`.
pub fn event<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = events.iter().filter(|e| e["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "expected one `{kind}` event in {events:#?}");
    found[0]
}

/// How many attempts the pathway has.
pub fn attempts(db: &Path, pathway: &str) -> usize {
    ReadStore::open_read_only(db)
        .unwrap()
        .attempts(pathway)
        .unwrap()
        .len()
}

/// Verifies the whole ledger and the stored states.
pub fn verified(db: &Path) -> bool {
    let store = ReadStore::open_read_only(db).unwrap();
    rpr::store::verify(&store, None).unwrap().is_ok()
}
