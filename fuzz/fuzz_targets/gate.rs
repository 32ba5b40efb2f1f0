//! The gate end to end (issue 30, item 5): `rpr::gate::serve_in_process` between a
//! scripted client and a scripted server, both from the input, all in this process: the
//! server is `rpr_fuzz::scripted::InProcess`, each start of it a thread over in-process
//! pipes (the gate starts it again after a timeout or garbage, up to six times a run).
//!
//! The input is a mode byte, then the client script, `@@\n`, and the server script. The
//! client script is the gate's stdin, given one line at a time: a line is handed to the
//! gate only once every request before it was answered, or once the gate asked the client
//! something (a Human Gate form) that was offered no line yet; `"$id"` in that line is
//! then replaced by the question's id, and a line that is no response to the question is
//! followed by an error response to it (so that a run does not wait out the gate's
//! approval timeout, a second). The server is the scripted server of
//! `rpr_fuzz::scripted`: its chunks (separated by `%%\n`) answer the requests the gate
//! sends it, one each, in order (but for those a standard server answers, below). Nothing is written to either side but in answer
//! to the other, so a run does not depend on timing (a wait for an answer gives up after
//! a few seconds, so a request the gate never answers slows a run and does not hang it).
//!
//! The mode byte adds structured prefixes: bits 0-1 an `initialize` (none; without
//! elicitation; with form elicitation; with it and a `tools/list`), bits 2-3 a
//! `tools/call` (none, `get`, `put`, `del`), bit 4 a standard server: the script's chunks
//! then answer only the requests other than `server/discover` (refused), `initialize`
//! (answered) and `tools/list` (the policy's three tools, each time: the gate lists them
//! before each call to check the binding).
//!
//! The policy: `get` reads; `put` changes state, read back through `get`; `del` changes
//! state, read back through `get`, behind a Human Gate.
//!
//! What must hold:
//! - no panic;
//! - every line the gate writes to the client is one JSON-RPC 2.0 message: a request or
//!   notification (a string `method`), or a response with an `id` and exactly one of
//!   `result` and `error` (an integer `code` and a string `message`);
//! - every request handed to the gate is answered exactly once by the time the gate
//!   returns (it returns after its input ended and its calls in flight finished), one the
//!   client cancelled at most once (its answer may be written before the cancellation
//!   arrives); a request with the same id sent twice is answered twice; a line that is no
//!   valid request but carries a readable id is answered once under that id; nothing
//!   else is answered (a notification, or a response to the gate's own question, never);
//! - no `tools/call` of a mutating tool reaches the server without an attempt record: when
//!   one arrives, the database holds an attempt `in_flight` whose request digest is that of
//!   the call's tool and arguments, or one `unknown` that the server had not received
//!   before (the gate wrote the request under its record and gave up waiting before the
//!   server read it: a call timeout, or a server it abandoned, whose thread reads its pipe
//!   late here; an attempt becomes unknown only from in flight). A `get` may arrive without one: a read the policy calls
//!   read-only is recorded when it ends (docs/gate.md), as is its use as the readback of a
//!   `put` or `del`. A tool outside the policy never arrives;
//! - every notification that reaches the server is one of MCP's (`notifications/…`): a
//!   request method the client sent without an id (a `tools/call`) is never passed on;
//! - nothing is answered that is not recorded: when the gate writes an answer to a
//!   `tools/call` that names its pathway `completed` (`_meta["dev.rpr/pathway"]`), the
//!   store already holds that pathway `completed` (this is what holds a read, sent before
//!   its record, to the record);
//! - no second send of an open identity (docs/gate.md, "One governed call", 2): a call of
//!   a tool that changes state (`put`, `del`) reaches the server again with the same
//!   arguments only once the pathway of the earlier send is terminal in the store (a later
//!   round of one attempt, which carries the answers a 2026-07-28 server asked for, is no
//!   second send).
#![no_main]

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use rpr::executor::Request;
use rpr::gate::{Options, serve_in_process};
use rpr::jsonrpc::server::{Incoming, classify};
use rpr::jsonrpc::{Id, Message};
use rpr::policy::Policy;
use rpr::store::{AttemptRecord, ReadStore};
use rpr::{Actor, AttemptStatus, Runtime};
use rpr_fuzz::scripted::{InProcess, replace, split_chunks};
use serde_json::{Map, Value, json};

/// How many times the gate may start the server in a run (it starts it again after a
/// timeout or garbage).
const STARTS: usize = 6;

/// How long the client waits for the gate to answer before it sends its next line anyway.
const WAIT: Duration = Duration::from_secs(3);

const SERVER: &str = "fz";

/// The tools the policy calls mutating: a repeat of an open one is never sent.
const MUTATING: [&str; 2] = ["put", "del"];

/// The tool the policy calls read-only: sent before anything of it is recorded.
const READ: &str = "get";

fn policy_text() -> String {
    let readback = json!({
        "tool": "get",
        "arguments": {"key": "$key"},
        "expect": {"/structuredContent/value": "$value"}
    });
    json!({
        "authority": {"repair_owner": "bob", "resume_authority": "bob"},
        "servers": {SERVER: {
            "get": {"admission": "allow", "read_only": true},
            "put": {"admission": "allow", "readback": readback},
            "del": {"admission": "human_gate", "readback": readback},
        }}
    })
    .to_string()
}

struct Setup {
    /// The scratch directory of this process: the run's database.
    dir: PathBuf,
    policy: String,
    /// A new database's file, made once per process: each run starts from a copy of it
    /// (making one, its migrations included, was a seventh of a run).
    empty: Vec<u8>,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let policy = policy_text();
        let parsed = Policy::parse(&policy).expect("the target's policy parses");
        let dir = rpr_fuzz::stories::scratch("gate");
        let template = dir.join("empty.db");
        // Opened and closed: the last close checkpoints the write-ahead log into the file.
        drop(
            Runtime::builder(&template)
                .bounds(parsed.bounds())
                .open()
                .expect("a new database"),
        );
        let empty = std::fs::read(&template).expect("the new database's file");
        Setup { dir, policy, empty }
    })
}

/// What the gate wrote to the client, and what the client's feed needs of it.
#[derive(Default)]
struct Seen {
    out: Vec<u8>,
    /// How far `out` was read into the fields below (whole lines only).
    read: usize,
    /// Responses the gate wrote, by id (as JSON text).
    answered: HashMap<String, usize>,
    /// The ids (as JSON text) of the gate's requests to the client, in order.
    asked: Vec<String>,
    /// How many of `asked` were offered a line of the client script.
    offered: usize,
    /// The methods of the requests handed to the gate, by id (as JSON text): an answer is
    /// checked against the store only when its id was never used by anything but a
    /// `tools/call` (a passed-through answer is the server's own).
    methods: HashMap<String, Vec<String>>,
    /// The requests handed to the gate, by id (as JSON text): each is answered exactly
    /// once by the time the gate returns, but one the client cancelled (at most once).
    requested: HashMap<String, usize>,
    /// The ids the client's `notifications/cancelled` named.
    cancelled: HashSet<String>,
    /// The gate's database, to check its answers against (opened at the first one).
    db: PathBuf,
    store: Option<ReadStore>,
    /// What the gate answered that the store does not hold.
    violations: Vec<String>,
}

impl Seen {
    /// An answer to a `tools/call` that names a pathway `completed` in its `_meta` is
    /// written only once that pathway is stored `completed` (nothing is answered that is not
    /// recorded: a read, sent before anything of it was, included). `completed` is
    /// terminal, so no later step of the gate can have moved it by the time of the check.
    fn check_answer(&mut self, id: &str, result: &Value) {
        let governed = self
            .methods
            .get(id)
            .is_some_and(|m| m.iter().all(|m| m == "tools/call"));
        let named = &result["_meta"]["dev.rpr/pathway"];
        let (Some(pathway), Some("completed")) = (named["id"].as_str(), named["state"].as_str())
        else {
            return;
        };
        if !governed {
            return;
        }
        let store = match opened(&mut self.store, &self.db) {
            Ok(store) => store,
            Err(e) => {
                self.violations.push(format!(
                    "the gate answered {id} with pathway {pathway} completed, and its database cannot be opened: {e}"
                ));
                return;
            }
        };
        let stored = store.pathway(pathway);
        match stored {
            Ok(Some(p)) if p.state == rpr::State::Completed => {}
            Ok(Some(p)) => self.violations.push(format!(
                "the gate answered {id} with pathway {pathway} completed, and the store holds it {}",
                p.state.as_str()
            )),
            Ok(None) => self.violations.push(format!(
                "the gate answered {id} with pathway {pathway} completed, and the store does not hold it"
            )),
            Err(e) => self.violations.push(format!(
                "the gate answered {id} with pathway {pathway} completed, and its database cannot be read: {e}"
            )),
        }
    }
}

type Shared = Arc<(Mutex<Seen>, Condvar)>;

/// The gate's stdout.
struct Out(Shared);

impl std::io::Write for Out {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let (seen, changed) = &*self.0;
        let mut seen = seen.lock().expect("the output");
        seen.out.extend_from_slice(buf);
        while let Some(end) = seen.out[seen.read..].iter().position(|&b| b == b'\n') {
            let line = seen.out[seen.read..seen.read + end].to_vec();
            seen.read += end + 1;
            let Ok(value) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            match Message::from_value(value) {
                Ok(Message::Request(r)) => seen.asked.push(r.id.to_value().to_string()),
                Ok(Message::Response(r)) => {
                    if let Some(id) = r.id {
                        let id = id.to_value().to_string();
                        if let Ok(result) = &r.outcome {
                            seen.check_answer(&id, result);
                        }
                        *seen.answered.entry(id).or_default() += 1;
                    }
                }
                _ => {}
            }
        }
        changed.notify_all();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The gate's stdin: the client script, one line at a time (see the module's comment).
struct Feed {
    lines: Vec<Vec<u8>>,
    next: usize,
    current: Vec<u8>,
    at: usize,
    /// Requests handed to the gate, by id (as JSON text).
    sent: HashMap<String, usize>,
    shared: Shared,
}

impl Feed {
    /// Waits until every request handed over was answered or the gate asked something
    /// that was not offered a line yet (or `WAIT` passed); returns that question's id, now
    /// offered the next line.
    fn wait(&self) -> Option<String> {
        let (seen, changed) = &*self.shared;
        let deadline = Instant::now() + WAIT;
        let mut seen = seen.lock().expect("the output");
        loop {
            if let Some(id) = seen.asked.get(seen.offered).cloned() {
                seen.offered += 1;
                return Some(id);
            }
            let done = self
                .sent
                .iter()
                .all(|(id, n)| seen.answered.get(id).copied().unwrap_or(0) >= *n);
            let now = Instant::now();
            if done || now >= deadline {
                return None;
            }
            seen = changed
                .wait_timeout(seen, deadline - now)
                .expect("the output")
                .0;
        }
    }

    /// Hands over the next line, and notes the request it is.
    fn advance(&mut self) -> bool {
        let asked = self.wait();
        if self.next >= self.lines.len() {
            return false;
        }
        let mut line = self.lines[self.next].clone();
        self.next += 1;
        if let Some(id) = &asked {
            line = replace(&line, b"\"$id\"", id.as_bytes());
        }
        let body = line.strip_suffix(b"\n").unwrap_or(&line);
        let body = body.strip_suffix(b"\r").unwrap_or(body);
        // Only a whole line is a message (the end of the input inside one is none).
        let mut answers = false;
        if line.ends_with(b"\n")
            && let Ok(value) = serde_json::from_slice::<Value>(body)
        {
            match classify(value) {
                Incoming::Request(r) => {
                    let id = r.id.to_value().to_string();
                    let (seen, _) = &*self.shared;
                    let mut seen = seen.lock().expect("the output");
                    seen.methods
                        .entry(id.clone())
                        .or_default()
                        .push(r.method.clone());
                    *seen.requested.entry(id.clone()).or_default() += 1;
                    *self.sent.entry(id).or_default() += 1;
                }
                Incoming::Response(r) => {
                    answers =
                        r.id.is_some_and(|id| Some(id.to_value().to_string()) == asked);
                }
                // A line that is no valid request but carries a readable id is answered
                // with an error under that id (JSON-RPC 2.0, "Invalid Request").
                Incoming::Invalid(invalid) => {
                    // An id the gate's answer can be read back with (an integer in `i64`
                    // range or a string), as `Out` reads it.
                    let id = invalid
                        .reply
                        .as_ref()
                        .and_then(|r| Id::from_value(&r["id"]));
                    if let Some(id) = id {
                        let id = id.to_value().to_string();
                        let (seen, _) = &*self.shared;
                        *seen
                            .lock()
                            .expect("the output")
                            .requested
                            .entry(id.clone())
                            .or_default() += 1;
                        *self.sent.entry(id).or_default() += 1;
                    }
                }
                // A request the client cancels gets no answer (the spec's rule, which the
                // gate keeps): waiting for one would only wait out `WAIT`.
                Incoming::Notification(n) if n.method == "notifications/cancelled" => {
                    if let Some(id) = n.params.as_ref().and_then(|p| p.get("requestId")) {
                        self.sent.remove(&id.to_string());
                        let (seen, _) = &*self.shared;
                        seen.lock()
                            .expect("the output")
                            .cancelled
                            .insert(id.to_string());
                    }
                }
                _ => {}
            }
        }
        if let Some(id) = asked.filter(|_| !answers) {
            // The line offered to the gate's question does not answer it: an error answers
            // it at once (after the line, or before a line cut short), rather than the
            // gate's approval timeout after a second.
            let error = format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":-32603,\"message\":\"fuzz: no answer\"}}}}\n"
            );
            if line.ends_with(b"\n") {
                line.extend_from_slice(error.as_bytes());
            } else {
                line.splice(0..0, error.into_bytes());
            }
        }
        self.current = line;
        self.at = 0;
        true
    }
}

impl Read for Feed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at >= self.current.len() && !self.advance() {
            return Ok(0);
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn lines(script: &[u8]) -> Vec<Vec<u8>> {
    script
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

/// The structured prefix of the client script the mode byte asks for.
fn client_prefix(mode: u8) -> Vec<u8> {
    let mut out = Vec::new();
    let mut line = |v: Value| {
        out.extend_from_slice(v.to_string().as_bytes());
        out.push(b'\n');
    };
    let info = json!({"name": "fuzz", "version": "1"});
    match mode & 3 {
        0 => {}
        1 => line(
            json!({"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info}}),
        ),
        _ => line(
            json!({"jsonrpc": "2.0", "id": "i", "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}}, "clientInfo": info}}),
        ),
    }
    if mode & 3 != 0 {
        line(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }
    if mode & 3 == 3 {
        line(json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list"}));
    }
    let call = match (mode >> 2) & 3 {
        0 => None,
        1 => Some(("get", json!({"key": "k"}))),
        2 => Some(("put", json!({"key": "k", "value": "v"}))),
        _ => Some(("del", json!({"key": "k", "value": "v"}))),
    };
    if let Some((name, arguments)) = call {
        line(
            json!({"jsonrpc": "2.0", "id": "c", "method": "tools/call", "params": {"name": name, "arguments": arguments}}),
        );
    }
    out
}

/// The standard server's answers (mode bit 4): the `server/discover` probe left to the
/// closing error (a server of the handshake era), `initialize` answered, the policy's
/// three tools listed. `None` for the requests the script answers.
fn standard(method: &str) -> Option<Vec<u8>> {
    let schema = json!({"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "string"}}});
    let tools: Vec<Value> = ["get", "put", "del"]
        .iter()
        .map(|name| json!({"name": name, "inputSchema": schema}))
        .collect();
    let answer = match method {
        "server/discover" => return Some(Vec::new()),
        "initialize" => {
            json!({"jsonrpc": "2.0", "id": "$id", "result": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "fz", "version": "1"}}})
        }
        "tools/list" => json!({"jsonrpc": "2.0", "id": "$id", "result": {"tools": tools}}),
        _ => return None,
    };
    Some(answer.to_string().into_bytes())
}

/// The server's checks, made when a request reaches it.
struct Checks {
    db: PathBuf,
    store: Option<ReadStore>,
    /// The pathway and attempt of the last send of each identity (request digest) of a
    /// mutating tool.
    sent: HashMap<String, (String, String)>,
    violations: Vec<String>,
    /// Every request the server received (for `RPR_FUZZ_SHOW`).
    received: Vec<String>,
    /// The attempts whose request the server received.
    delivered: HashSet<String>,
}

impl Checks {
    /// A notification reaching the server is one of MCP's (`notifications/…`): a request
    /// method without an id (a `tools/call` the client sent as a notification) would be
    /// run, unanswered, by a server built on a generic JSON-RPC library, ungoverned.
    fn on_notification(&mut self, notification: &Map<String, Value>) {
        self.received
            .push(Value::Object(notification.clone()).to_string());
        let method = notification.get("method").and_then(Value::as_str);
        if !method.is_some_and(|m| m.starts_with("notifications/")) {
            self.violations.push(format!(
                "a notification of method {method:?} (no id) reached the server"
            ));
        }
    }

    fn on_request(&mut self, request: &Map<String, Value>) {
        self.received
            .push(Value::Object(request.clone()).to_string());
        if request.get("method").and_then(Value::as_str) != Some("tools/call") {
            return;
        }
        let params = request.get("params").cloned().unwrap_or(Value::Null);
        let tool = params.get("name").and_then(Value::as_str).unwrap_or("");
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(v) => v.clone(),
        };
        let shown = format!("tools/call {tool} {arguments}");
        let digest = match Request::new(tool, arguments).digest() {
            Ok(d) => d,
            Err(e) => {
                self.violations.push(format!(
                    "{shown}: arguments the gate sent have no digest: {e}"
                ));
                return;
            }
        };
        let store = match opened(&mut self.store, &self.db) {
            Ok(store) => store,
            Err(e) => {
                self.violations.push(format!(
                    "{shown} reached the server, and the gate's database cannot be opened: {e}"
                ));
                return;
            }
        };
        let attempts = match all_attempts(store) {
            Ok(attempts) => attempts,
            Err(e) => {
                self.violations.push(format!(
                    "{shown} reached the server, and the gate's database cannot be read: {e}"
                ));
                return;
            }
        };
        // A 2026-07-28 server's `input_required` result: the call sent again with the
        // answers (`inputResponses`, `requestState`) is the next round of one attempt.
        let round = params.get("inputResponses").is_some() || params.get("requestState").is_some();
        let own = attempts
            .iter()
            .find(|a| a.status == AttemptStatus::InFlight && a.request_digest == digest)
            .or_else(|| {
                // Written under its record, and read by the server after the gate gave up
                // on it: once only.
                attempts.iter().rev().find(|a| {
                    a.status == AttemptStatus::Unknown
                        && a.request_digest == digest
                        && (round || !self.delivered.contains(&a.id))
                })
            });
        let Some(own) = own else {
            // A read the policy calls read-only has no attempt commit before its send: it
            // is recorded when it ends, attempt and outcome together (docs/gate.md,
            // `notifications/cancelled`; issue 26).
            if tool != READ {
                self.violations.push(format!(
                    "{shown} reached the server without an attempt in flight for it (nor an unknown one it had not received)"
                ));
            }
            return;
        };
        self.delivered.insert(own.id.clone());
        if !MUTATING.contains(&tool) {
            return;
        }
        if let Some((first, attempt)) = self.sent.get(&digest) {
            let state = store.pathway(first).ok().flatten().map(|p| p.state);
            let same_attempt = round && *attempt == own.id;
            if !same_attempt && state.is_none_or(|s| !s.is_terminal()) {
                self.violations.push(format!(
                    "{shown} reached the server a second time while the pathway {first} of its earlier send is {} (this send: pathway {})",
                    state.map_or("missing", rpr::State::as_str),
                    own.pathway_id
                ));
            }
        }
        self.sent
            .insert(digest, (own.pathway_id.clone(), own.id.clone()));
    }
}

/// The gate's database, read-only, opened at the first use (after the gate's runtime: a
/// read-only opening first in a process would keep the runtime from writing).
fn opened<'s>(
    store: &'s mut Option<ReadStore>,
    db: &std::path::Path,
) -> Result<&'s ReadStore, rpr::store::StoreError> {
    if store.is_none() {
        *store = Some(ReadStore::open_read_only(db)?);
    }
    Ok(store.as_ref().expect("opened"))
}

/// Every attempt of the database.
fn all_attempts(store: &ReadStore) -> Result<Vec<AttemptRecord>, rpr::store::StoreError> {
    let mut attempts = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = store.list_pathways(after.as_deref(), 100, None)?;
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        for pathway in &page {
            attempts.extend(store.attempts(&pathway.id)?);
        }
    }
    Ok(attempts)
}

/// Why a line the gate wrote is not one JSON-RPC 2.0 message, if it is not.
fn malformed(line: &[u8]) -> Option<String> {
    let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(line) else {
        return Some("not a JSON object".into());
    };
    if m.get("jsonrpc") != Some(&json!("2.0")) {
        return Some("no `jsonrpc: \"2.0\"`".into());
    }
    if let Some(method) = m.get("method") {
        return (!method.is_string()).then(|| "a `method` that is not a string".into());
    }
    if !m.contains_key("id") {
        return Some("neither a `method` nor an `id`".into());
    }
    match (m.get("result"), m.get("error")) {
        (Some(_), None) => None,
        (None, Some(e)) => {
            let code = e.get("code").is_some_and(|c| c.is_i64() || c.is_u64());
            let message = e.get("message").is_some_and(Value::is_string);
            (!(code && message))
                .then(|| "an error without an integer code and a string message".into())
        }
        _ => Some("a response without exactly one of `result` and `error`".into()),
    }
}

fn split_input(rest: &[u8]) -> (&[u8], &[u8]) {
    match rest.windows(3).position(|w| w == b"@@\n") {
        Some(at) => (&rest[..at], &rest[at + 3..]),
        None => (rest, &[]),
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, rest)) = input.split_first() else {
        return;
    };
    let s = setup();
    let db = s.dir.join("gate.db");
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut path = db.clone().into_os_string();
        path.push(suffix);
        let _ = std::fs::remove_file(path);
    }
    let (client, server) = split_input(rest);
    let mut client_script = client_prefix(mode);
    client_script.extend_from_slice(client);
    let chunks = split_chunks(server);
    let standard_server = mode & 0x10 != 0;

    let policy = Policy::parse(&s.policy).expect("the policy");
    std::fs::write(&db, &s.empty).expect("the run's database");
    let rt = Runtime::builder(&db)
        .bounds(policy.bounds())
        .open()
        .expect("the run's database");
    let mut options = Options::new(
        SERVER,
        Actor::new("agent"),
        db.display().to_string(),
        "policy.json",
    );
    options.call_timeout = Duration::from_secs(1);
    options.approval_timeout = Duration::from_secs(1);
    let shared: Shared = Arc::new((
        Mutex::new(Seen {
            db: db.clone(),
            ..Seen::default()
        }),
        Condvar::new(),
    ));
    let feed = Feed {
        lines: lines(&client_script),
        next: 0,
        current: Vec::new(),
        at: 0,
        sent: HashMap::new(),
        shared: Arc::clone(&shared),
    };
    let checks = Arc::new(Mutex::new(Checks {
        db: db.clone(),
        store: None,
        sent: HashMap::new(),
        violations: Vec::new(),
        received: Vec::new(),
        delivered: HashSet::new(),
    }));
    let scripted = {
        let checks = Arc::clone(&checks);
        let mut next = chunks
            .iter()
            .map(|c| c.to_vec())
            .collect::<Vec<_>>()
            .into_iter();
        let noticed = Arc::clone(&checks);
        InProcess::new(STARTS, move |request| {
            checks.lock().expect("the checks").on_request(request);
            let method = request.get("method").and_then(Value::as_str).unwrap_or("");
            standard(method)
                .filter(|_| standard_server)
                .unwrap_or_else(|| next.next().unwrap_or_default())
        })
        .with_notices(move |notification| {
            noticed
                .lock()
                .expect("the checks")
                .on_notification(notification);
        })
    };
    let served = serve_in_process(
        rt,
        policy,
        &scripted.server(SERVER),
        options,
        std::io::BufReader::new(feed),
        Out(Arc::clone(&shared)),
    );
    let written = scripted.finish();
    served.expect("the gate serves");
    let checks = checks.lock().expect("the checks");
    let seen = shared.0.lock().expect("the output");
    if std::env::var_os("RPR_FUZZ_SHOW").is_some() {
        // For reading a run by hand: what each side wrote.
        eprintln!(
            "--- the gate wrote to the client:\n{}--- the server received:\n{}\n--- the server wrote:\n{}---",
            String::from_utf8_lossy(&seen.out),
            checks.received.join("\n"),
            String::from_utf8_lossy(&written)
        );
    }
    assert!(
        seen.violations.is_empty(),
        "the gate answered what its store does not hold: {}",
        seen.violations.join("; ")
    );
    assert!(
        checks.violations.is_empty(),
        "the server saw a call it should not have: {}",
        checks.violations.join("; ")
    );
    // Every request answered once (the gate returns only after its calls in flight
    // finished and were answered); a cancelled one at most once (its answer may have been
    // written before the cancellation arrived).
    let mut answered: Vec<_> = seen.answered.keys().collect();
    answered.sort();
    for id in answered {
        assert!(
            seen.requested.contains_key(id),
            "the gate answered id {id}, which no request handed to it carried"
        );
    }
    let mut requested: Vec<_> = seen.requested.iter().collect();
    requested.sort();
    for (id, &n) in requested {
        let got = seen.answered.get(id).copied().unwrap_or(0);
        let cancelled = seen.cancelled.contains(id);
        assert!(
            got == n || (cancelled && got <= n),
            "request {id} was handed to the gate {n} time(s){} and answered {got} time(s)",
            if cancelled { ", then cancelled," } else { "" }
        );
    }
    assert!(
        seen.out.is_empty() || seen.out.ends_with(b"\n"),
        "the gate's output ends inside a line"
    );
    for line in seen.out.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if let Some(why) = malformed(line) {
            panic!(
                "the gate wrote a line that is no JSON-RPC 2.0 message ({why}): {}",
                String::from_utf8_lossy(line)
            );
        }
    }
});
