//! A gated write waiting for its decision, and consoles over its database: `rpr gate` (with
//! `--approval-wait`) in front of `rpr-fault-server`, its client in this process (the
//! library's MCP client, which declares no form elicitation, so the gate waits for an
//! approval out of band), and `rpr console` started as an operator starts it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rpr::State;
use rpr::mcp::{McpClient, Reply, ServerCommand, SessionConfig};
use rpr::store::ReadStore;
use serde_json::{Value, json};

pub(crate) const RPR: &str = env!("CARGO_BIN_EXE_rpr");
const FAULT: &str = env!("CARGO_BIN_EXE_rpr-fault-server");

/// The policy: `get` read-only, `put` (behind a Human Gate when `gated`) with `get` as its
/// readback, and `extra` merged in at the top (`approval`, `approval_ttl`).
fn policy(gated: bool, extra: &Value) -> Value {
    let mut p = json!({
        "servers": {"faults": {
            "get": {"read_only": true},
            "put": {
                "human_gate": gated,
                "readback": {
                    "tool": "get",
                    "arguments": {"key": "$key"},
                    "expect": {"/structuredContent/value": "$value"}
                }
            }
        }}
    });
    if let (Value::Object(p), Value::Object(x)) = (&mut p, extra) {
        p.extend(x.clone());
    }
    p
}

/// One gate and its server, in a directory of their own.
pub(crate) struct Scene {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) db: PathBuf,
    pub(crate) policy: PathBuf,
    effects: PathBuf,
    gate_argv: Vec<String>,
}

impl Scene {
    /// A scene whose `put` waits at a Human Gate, whose policy has `extra`, and whose fault
    /// server takes `server_flags`.
    pub(crate) fn new(extra: &Value, server_flags: &[&str]) -> Self {
        Self::with(true, extra, &[], server_flags)
    }

    /// [`Scene::new`], with `put` behind a Human Gate only when `gated`, and `gate_flags`
    /// given to `rpr` before `gate` (`--signing-key KEYFILE`).
    pub(crate) fn with(
        gated: bool,
        extra: &Value,
        gate_flags: &[&str],
        server_flags: &[&str],
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("rpr.db");
        let policy_path = dir.path().join("policy.json");
        std::fs::write(&policy_path, policy(gated, extra).to_string()).unwrap();
        let effects = dir.path().join("effects.jsonl");
        let mut gate_argv: Vec<String> = vec![RPR.into()];
        gate_argv.extend(gate_flags.iter().map(|s| (*s).to_owned()));
        gate_argv.extend([
            "gate".into(),
            "--database".into(),
            db.display().to_string(),
            "--policy".into(),
            policy_path.display().to_string(),
            "--name".into(),
            "faults".into(),
            "--approval-wait".into(),
            "60".into(),
            "--".into(),
            FAULT.into(),
            "--state".into(),
            dir.path().join("state.json").display().to_string(),
            "--effects".into(),
            effects.display().to_string(),
        ]);
        gate_argv.extend(server_flags.iter().map(|s| (*s).to_owned()));
        Self {
            dir,
            db,
            policy: policy_path,
            effects,
            gate_argv,
        }
    }

    /// The same scene with the gate's `--approval-wait` set to `seconds` (60 otherwise).
    pub(crate) fn with_approval_wait(mut self, seconds: &str) -> Self {
        let at = self
            .gate_argv
            .iter()
            .position(|a| a == "--approval-wait")
            .expect("the gate is given --approval-wait");
        seconds.clone_into(&mut self.gate_argv[at + 1]);
        self
    }

    /// A client of a new gate.
    pub(crate) fn client(&self) -> McpClient {
        let command = ServerCommand::new(&self.gate_argv[0])
            .args(&self.gate_argv[1..])
            .inherit_env(true);
        McpClient::connect(&command, &SessionConfig::default()).expect("the gate starts")
    }

    /// `put` with `arguments` through a new gate, on a thread: it waits at the gate until
    /// someone decides. The thread returns the gate's answer.
    pub(crate) fn put_in_background(&self, arguments: Value) -> JoinHandle<Value> {
        let client = self.client();
        std::thread::spawn(move || {
            match client.call_tool("put", &arguments, Duration::from_mins(2)) {
                Ok(Reply::Result(r)) => r,
                other => panic!("the call through the gate got {other:?}"),
            }
        })
    }

    /// The effects the server carried out, one JSON line each.
    pub(crate) fn effects(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.effects)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Waits until a pathway is in `state`; its id.
    pub(crate) fn pathway_in(&self, state: State) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(store) = ReadStore::open_read_only(&self.db)
                && let Ok(list) = store.list_pathways(None, 50, None)
                && let Some(r) = list.iter().find(|r| r.state == state)
            {
                return r.id.clone();
            }
            assert!(Instant::now() < deadline, "no pathway reached {state}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The stored state of pathway `id`.
    pub(crate) fn state(&self, id: &str) -> State {
        ReadStore::open_read_only(&self.db)
            .unwrap()
            .pathway(id)
            .unwrap()
            .expect("the pathway is stored")
            .state
    }

    /// How many attempts pathway `id` has (each one a send).
    pub(crate) fn attempts(&self, id: &str) -> usize {
        ReadStore::open_read_only(&self.db)
            .unwrap()
            .attempts(id)
            .unwrap()
            .len()
    }

    /// `rpr console` over this scene's database, acting as `approver`, with the policy.
    pub(crate) fn console(&self, approver: &str) -> Console {
        Console::start(&self.db, approver, Some(&self.policy), &[])
    }
}

/// A running `rpr console`, stopped when dropped.
pub(crate) struct Console {
    child: Child,
    /// The URL it printed, with its token.
    pub(crate) url: String,
}

impl Console {
    /// `rpr FLAGS… console` (`flags`: the global ones, such as `--signing-key`).
    pub(crate) fn start(db: &Path, approver: &str, policy: Option<&Path>, flags: &[&str]) -> Self {
        Self::start_with(db, approver, policy, flags, &[])
    }

    /// [`Console::start`] with `console_flags` after `console` (its own, such as
    /// `--verify-every`).
    pub(crate) fn start_with(
        db: &Path,
        approver: &str,
        policy: Option<&Path>,
        flags: &[&str],
        console_flags: &[&str],
    ) -> Self {
        let mut cmd = Command::new(RPR);
        cmd.args(flags)
            .args(["console", "--database"])
            .arg(db)
            .args(["--as", approver])
            .args(console_flags);
        if let Some(p) = policy {
            cmd.arg("--policy").arg(p);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("rpr console starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("rpr console: ")
            .unwrap_or_else(|| panic!("the console printed {line:?}"))
            .to_owned();
        Self { child, url }
    }

    /// `http://ADDR:PORT` and the console's own path (`/c-…`, no trailing slash): what
    /// every page is under.
    pub(crate) fn base(&self) -> String {
        let page = self.url.split('?').next().unwrap_or(&self.url);
        page.trim_end_matches('/').to_owned()
    }

    /// `http://ADDR:PORT`, without the path and token.
    pub(crate) fn origin(&self) -> &str {
        let rest = &self.url["http://".len()..];
        &self.url[..("http://".len() + rest.find('/').unwrap())]
    }
}

impl Drop for Console {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
