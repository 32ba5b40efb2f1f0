//! Governed calls against real MCP servers, through the whole pathway:
//! `Runtime` → propose → admit → bind ([`McpExecutor`]) → dispatch → returned →
//! confirm ([`McpReadback`] or another independent readback) → completed, with the
//! readback verdict in the ledger and the ledger verified.
//!
//! Peers (pinned by `.ci/install-peers`): the npm reference servers `server-filesystem`,
//! `server-memory` and `server-everything`, and `tests/peers/kv_server.py` on the
//! official Python SDK (`mcp` 2.3.0). They are looked up in `RPR_PEERS_DIR` or
//! `<crate>/target/peers`; when missing, the tests install them with
//! `bash .ci/install-peers` and fail (never skip) if that does not work.
//!
//! Every server is shut down at the end of its test and its pid and process group are
//! checked to be gone.

#[path = "interop_parts/canonical.rs"]
mod canonical;
use crate::interop_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use interop_support::{
    TempDir, assert_gone, connect, event, events, kinds, lines, peers, shut_down,
};
use rpr::executor::{Binding, Delivery, Executor, Observation, Readback, Refusal, Request};
use rpr::mcp::{McpClient, McpExecutor, McpReadback, ReadbackVerdict, Reply};
use rpr::stage::{Approved, Completed};
use rpr::token::Reconciled;
use rpr::{
    ALLOW_ALL, ActionClass, Actor, Admission, Authority, Definition, Outcome, Pathway, Role,
    Runtime, StoredPathway,
};
use serde_json::{Value, json};

fn operator() -> Actor {
    Actor::new("operator")
}

fn auditor() -> Actor {
    Actor::new("auditor")
}

/// Proposes `request` (by an agent) and admits it (by the operator). The auditor
/// owns the evidence; the operator holds every other role.
fn approved(rt: &Runtime, key: &str, request: Request, class: ActionClass) -> Pathway<Approved> {
    let authority = Authority::single(&operator()).with(Role::EvidenceOwner, &auditor());
    let definition = Definition::new(request, class, key, authority);
    let p = rt
        .propose(&Actor::new("agent"), definition)
        .unwrap()
        .into_new()
        .expect("a new key makes a new pathway");
    match p.admit(rt, &operator(), ALLOW_ALL).unwrap() {
        Admission::Approved(p) => p,
        other => panic!("{other:?}"),
    }
}

/// The full governed pathway of one mutating call through `client`: ends completed
/// by readback. Checks the ledger: the bound target, the returned reply, and a
/// `readback` event with verdict `applied`; and verifies the whole ledger.
fn governed_mutation(
    rt: &Runtime,
    client: &Arc<McpClient>,
    request: Request,
    readback: &mut dyn Readback,
) -> (Pathway<Completed>, Binding, Vec<Value>) {
    let key = format!("interop-{}", request.action);
    let p = approved(rt, &key, request.clone(), ActionClass::Mutating);
    let mut executor = McpExecutor::new(Arc::clone(client), request.action.clone());
    let bound = p.bind(&mut executor).unwrap();
    let binding = bound.binding().clone();
    let outcome = bound.dispatch(rt, &operator(), &mut executor);
    let Outcome::Returned(p) = outcome else {
        panic!(
            "a success reply of a mutating call is returned, not completed: {outcome:?}\nstderr:\n{}",
            client.session().stderr_tail()
        )
    };
    let reply = p.reply().clone();
    let p = p
        .confirm(rt, &auditor(), readback)
        .unwrap()
        .into_completed()
        .unwrap_or_else(|_| {
            panic!(
                "the readback did not verify the effect: {:#?}",
                events(rt, &key)
            )
        });
    let events = events(rt, p.id());
    assert_eq!(
        kinds(&events),
        [
            "proposed",
            "admitted",
            "attempt_started",
            "attempt_returned",
            "readback"
        ]
    );
    let started = event(&events, "attempt_started");
    assert_eq!(started["data"]["target"], binding.target.as_str());
    assert_eq!(started["data"]["binding_digest"], binding.digest.as_str());
    assert_eq!(
        event(&events, "attempt_returned")["data"]["evidence"],
        reply
    );
    let readback_event = event(&events, "readback");
    assert_eq!(readback_event["data"]["verdict"], "applied");
    assert_eq!(readback_event["actor"], "auditor");
    assert_eq!(readback_event["attempt_status"], "applied");
    assert_eq!(readback_event["to"], "completed");
    let report = rt.verify(None).unwrap();
    assert!(report.is_ok(), "{report:?}");
    (p, binding, events)
}

/// An [`McpReadback`] whose judge compares `structuredContent` members.
fn judged_readback(
    client: &Arc<McpClient>,
    tool: &str,
    arguments: impl FnMut(&Request) -> Value + Send + 'static,
    judge: impl FnMut(&Request, &Value) -> bool + Send + 'static,
) -> McpReadback {
    let mut judge = judge;
    McpReadback::new(
        Arc::clone(client),
        tool,
        arguments,
        move |request: &Request, result: &Value| {
            if judge(request, result) {
                ReadbackVerdict::Applied
            } else {
                ReadbackVerdict::NotApplied
            }
        },
    )
}

#[test]
fn filesystem_write_file_is_completed_by_read_text_file() {
    let peers = peers();
    let dir = TempDir::new("fs");
    let root = dir.join("root");
    std::fs::create_dir(&root).unwrap();
    let rt = Runtime::open(dir.join("rpr.db")).unwrap();
    let client = Arc::new(connect(&peers.filesystem(&root)));
    assert_eq!(client.server().name, "secure-filesystem-server");

    let path = root.join("note.txt");
    let content = "hello\nfrom rpr";
    let request = Request::new(
        "write_file",
        json!({"path": path.to_str().unwrap(), "content": content}),
    );
    // `read_text_file` is sent only after the write's reply (dispatch waits for it),
    // which matters: the TS servers run requests concurrently.
    let mut readback = judged_readback(
        &client,
        "read_text_file",
        |r: &Request| json!({"path": r.arguments["path"]}),
        |r: &Request, result: &Value| {
            result["structuredContent"]["content"] == r.arguments["content"]
        },
    );
    let (_, binding, events) = governed_mutation(&rt, &client, request, &mut readback);
    assert_eq!(binding.details["tool_name"], "write_file");
    assert_eq!(binding.details["server_name"], "secure-filesystem-server");
    let evidence = &event(&events, "readback")["data"]["evidence"];
    assert_eq!(evidence["readback_tool"], "read_text_file");
    assert_eq!(evidence["result"]["structuredContent"]["content"], content);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), content);

    drop(readback);
    shut_down(client);
}

#[test]
fn memory_create_entities_is_completed_by_open_nodes() {
    let peers = peers();
    let dir = TempDir::new("memory");
    let memory_file = dir.join("memory.jsonl");
    let rt = Runtime::open(dir.join("rpr.db")).unwrap();
    // The transport clears the environment, so MEMORY_FILE_PATH is passed explicitly;
    // without it the server would use a file inside its package, shared by all tests.
    let client = Arc::new(connect(&peers.memory(&memory_file)));

    let entity = json!({"name": "alice", "entityType": "person", "observations": ["likes rust"]});
    let request = Request::new("create_entities", json!({"entities": [entity]}));
    let mut readback = judged_readback(
        &client,
        "open_nodes",
        |r: &Request| {
            let names: Vec<Value> = r.arguments["entities"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| e["name"].clone())
                .collect();
            json!({"names": names})
        },
        |r: &Request, result: &Value| {
            let found = result["structuredContent"]["entities"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            r.arguments["entities"]
                .as_array()
                .is_some_and(|wanted| wanted.iter().all(|w| found.contains(w)))
        },
    );
    let (_, _, events) = governed_mutation(&rt, &client, request, &mut readback);
    let evidence = &event(&events, "readback")["data"]["evidence"];
    assert_eq!(evidence["arguments"], json!({"names": ["alice"]}));
    assert_eq!(
        evidence["result"]["structuredContent"]["entities"][0],
        entity
    );

    drop(readback);
    shut_down(client);
    // The effect is in the file the server was told to use, and nowhere else.
    let stored = std::fs::read_to_string(&memory_file).unwrap();
    assert!(
        stored.contains("\"name\":\"alice\"") && stored.contains("likes rust"),
        "{stored}"
    );
}

/// `echo` is read-only (annotated so, and it changes nothing): it is governed as
/// [`ActionClass::ReadOnly`], so a success reply completes it and there is nothing to
/// read back. Treating it as mutating with a second `echo` as "readback" would
/// record a verification that verifies nothing.
#[test]
fn everything_echo_is_read_only_and_completes_on_success() {
    let peers = peers();
    let dir = TempDir::new("echo");
    let rt = Runtime::open(dir.join("rpr.db")).unwrap();
    let client = Arc::new(connect(&peers.everything()));
    // It sends `notifications/tools/list_changed` around the handshake: before the
    // initialize reply when the client's lines arrive together (mcp-notes L5), after
    // `notifications/initialized` otherwise. Either way it is accepted and queued.
    let mut early: Vec<String> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !early
        .iter()
        .any(|m| m == "notifications/tools/list_changed")
        && Instant::now() < deadline
    {
        early.extend(
            client
                .session()
                .take_notifications()
                .into_iter()
                .map(|n| n.method),
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        early
            .iter()
            .any(|m| m == "notifications/tools/list_changed"),
        "{early:?}"
    );
    assert!(
        client
            .server()
            .instructions
            .as_ref()
            .is_some_and(|i| i.len() > 500)
    );

    let request = Request::new("echo", json!({"message": "hello from rpr"}));
    let p = approved(&rt, "interop-echo", request, ActionClass::ReadOnly);
    let mut executor = McpExecutor::new(Arc::clone(&client), "echo");
    let bound = p.bind(&mut executor).unwrap();
    let details = &bound.binding().details;
    assert_eq!(details["server_name"], "mcp-servers/everything");
    assert!(
        details["instructions_digest"].is_string(),
        "the ~2 KB instructions are bound: {details}"
    );
    let outcome = bound.dispatch(&rt, &operator(), &mut executor);
    let p = outcome
        .into_completed()
        .unwrap_or_else(|other| panic!("{other:?}"));
    let events = events(&rt, p.id());
    assert_eq!(
        kinds(&events),
        [
            "proposed",
            "admitted",
            "attempt_started",
            "attempt_completed"
        ]
    );
    let completed = event(&events, "attempt_completed");
    assert_eq!(completed["attempt_status"], "succeeded");
    assert_eq!(
        completed["data"]["evidence"]["content"][0]["text"],
        "Echo: hello from rpr"
    );
    assert!(rt.verify(None).unwrap().is_ok());

    drop(executor);
    shut_down(client);
}

/// Reads a session resource back with `resources/read` (not a tool): an independent
/// observation of what `gzip-file-as-resource` created.
struct SessionResource {
    client: Arc<McpClient>,
}

impl Readback for SessionResource {
    fn observe(&mut self, request: &Request) -> Observation {
        let name = request.arguments["name"].as_str().unwrap_or_default();
        let uri = format!("demo://resource/session/{name}");
        let mut evidence = json!({"readback": "resources/read", "uri": uri});
        match self
            .client
            .session()
            .request_default("resources/read", Some(json!({"uri": uri})))
        {
            Ok(Reply::Result(result)) => {
                let content = &result["contents"][0];
                let applied = content["uri"] == uri.as_str()
                    && content["mimeType"] == "application/gzip"
                    // base64 of the gzip magic bytes 1f 8b 08
                    && content["blob"].as_str().is_some_and(|b| b.starts_with("H4sI"));
                evidence["result"] = result;
                if applied {
                    Observation::Applied { evidence }
                } else {
                    Observation::Inconclusive { evidence }
                }
            }
            Ok(Reply::Error(error)) => {
                evidence["error"] = error.to_value();
                Observation::Inconclusive { evidence }
            }
            Err(e) => {
                evidence["failure"] = Value::from(e.to_string());
                Observation::Inconclusive { evidence }
            }
        }
    }
}

#[test]
fn everything_gzip_resource_is_completed_by_resources_read() {
    let peers = peers();
    let dir = TempDir::new("gzip");
    let rt = Runtime::open(dir.join("rpr.db")).unwrap();
    let client = Arc::new(connect(&peers.everything()));
    let request = Request::new(
        "gzip-file-as-resource",
        json!({
            "name": "hello.txt.gz",
            "data": "data:text/plain;base64,aGVsbG8gd29ybGQ=",
            "outputType": "resourceLink",
        }),
    );
    let mut readback = SessionResource {
        client: Arc::clone(&client),
    };
    let (_, _, events) = governed_mutation(&rt, &client, request, &mut readback);
    let evidence = &event(&events, "readback")["data"]["evidence"];
    assert_eq!(evidence["uri"], "demo://resource/session/hello.txt.gz");

    drop(readback);
    shut_down(client);
}

#[test]
fn python_sdk_put_is_completed_by_get() {
    let peers = peers();
    let dir = TempDir::new("kv");
    let (state, effects) = (dir.join("kv.json"), dir.join("effects.jsonl"));
    let rt = Runtime::open(dir.join("rpr.db")).unwrap();
    let client = Arc::new(connect(&peers.kv(&state, &effects, "effect-then-sleep")));
    // The Python SDK sends an empty serverInfo.version; it is accepted and bound as is.
    assert_eq!(client.server().identity(), "kv-test-server@");
    // Its `MCPServer` is dual-era: the `server/discover` probe finds a 2026-07-28 server,
    // whose name, capabilities and version come from the discover result.
    assert_eq!(client.server().era, rpr::mcp::Era::Modern);
    assert_eq!(client.server().protocol_version, "2026-07-28");
    assert!(client.server().capabilities["tools"].is_object());

    let request = Request::new("put", json!({"key": "colour", "value": "green"}));
    let mut readback = kv_readback(&client);
    let (_, binding, events) = governed_mutation(&rt, &client, request, &mut readback);
    assert_eq!(binding.target, "kv-test-server@/put");
    assert_eq!(binding.details["server_version"], "");
    assert_eq!(binding.details["server_version_empty"], true);
    assert_eq!(binding.details["protocol_version"], "2026-07-28");
    assert_eq!(
        event(&events, "attempt_returned")["data"]["evidence"]["structuredContent"],
        json!({"result": "stored colour"})
    );
    assert_eq!(
        event(&events, "readback")["data"]["evidence"]["result"]["structuredContent"],
        json!({"key": "colour", "present": true, "value": "green"})
    );
    assert_eq!(lines(&effects), 1);

    drop(readback);
    shut_down(client);
}

/// `get` on the kv server: applied when the key holds the requested value, not
/// applied when the key is absent.
fn kv_readback(client: &Arc<McpClient>) -> McpReadback {
    McpReadback::new(
        Arc::clone(client),
        "get",
        |r: &Request| json!({"key": r.arguments["key"]}),
        |r: &Request, result: &Value| {
            let entry = &result["structuredContent"];
            match entry["present"].as_bool() {
                Some(true) if entry["value"] == r.arguments["value"] => ReadbackVerdict::Applied,
                Some(false) => ReadbackVerdict::NotApplied,
                _ => ReadbackVerdict::Inconclusive,
            }
        },
    )
}

/// Wraps the MCP executor: while `tools/call` is in flight, waits for the server to
/// print `slow_put: sleeping` on stderr (the request has been read and the tool is
/// running) and then SIGKILLs the server process.
struct KillMidCall {
    inner: McpExecutor,
    killed: Arc<AtomicBool>,
}

impl Executor for KillMidCall {
    fn bind(&mut self, request: &Request) -> Result<Binding, Refusal> {
        self.inner.bind(request)
    }

    fn prepare(&mut self, request: &Request, binding: &Binding) -> Result<(), Refusal> {
        self.inner.prepare(request, binding)
    }

    fn execute(&mut self, request: &Request) -> Delivery {
        let client = Arc::clone(self.inner.client());
        let killed = Arc::clone(&self.killed);
        let watcher = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(25);
            while Instant::now() < deadline {
                if client
                    .session()
                    .stderr_tail()
                    .contains("slow_put: sleeping")
                {
                    let pid =
                        nix::unistd::Pid::from_raw(i32::try_from(client.session().pid()).unwrap());
                    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
                    killed.store(true, Ordering::SeqCst);
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let delivery = self.inner.execute(request);
        watcher.join().unwrap();
        delivery
    }
}

/// The server is killed (`SIGKILL`) while `slow_put` runs (its effect already written, or not
/// yet, by `mode`). The outcome is unknown; a restarted runtime recovers it as
/// unknown and can only reconcile it (there is no dispatch on an unknown pathway):
/// by readback through a fresh server process on the same store. The write is never
/// sent again: the effects log and the attempts table do not grow.
fn killed_mid_call(mode: &str, effect_written: bool) {
    let peers = peers();
    let dir = TempDir::new("kill");
    let (state, effects) = (dir.join("kv.json"), dir.join("effects.jsonl"));
    let db = dir.join("rpr.db");
    let request = Request::new("slow_put", json!({"key": "k", "value": "v1"}));

    // First life: dispatch, the server dies mid-call.
    let (id, attempt) = {
        let rt = Runtime::open(&db).unwrap();
        let client = Arc::new(connect(&peers.kv(&state, &effects, mode)));
        let pid = client.session().pid();
        let killed = Arc::new(AtomicBool::new(false));
        let mut executor = KillMidCall {
            inner: McpExecutor::new(Arc::clone(&client), "slow_put"),
            killed: Arc::clone(&killed),
        };
        let p = approved(&rt, "interop-kill", request.clone(), ActionClass::Mutating);
        let bound = p.bind(&mut executor).unwrap();
        let started = Instant::now();
        let outcome = bound.dispatch(&rt, &operator(), &mut executor);
        assert!(
            killed.load(Ordering::SeqCst),
            "the watcher killed the server"
        );
        assert!(
            started.elapsed() < Duration::from_secs(25),
            "the kill, not a timeout, ended the call"
        );
        let Outcome::Unknown(p) = outcome else {
            panic!("a call whose server died after reading it is unknown: {outcome:?}")
        };
        let events = events(&rt, p.id());
        let unknown = event(&events, "attempt_unknown");
        assert_eq!(unknown["to"], "write_status_unknown");
        let reason = unknown["data"]["evidence"]["reason"].as_str().unwrap();
        assert!(reason.contains("tools/call"), "{reason}");
        let ids = (p.id().to_owned(), p.attempt().to_owned());
        drop(executor);
        shut_down(client);
        assert_gone(pid);
        ids
    };
    let effects_before = lines(&effects);
    assert_eq!(effects_before, usize::from(effect_written));

    // Restart: a new runtime on the same database.
    let rt = Runtime::open(&db).unwrap();
    let mut recovered = rt.recover().unwrap();
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    let Some(StoredPathway::Unknown(p)) = recovered.pop() else {
        panic!("the pathway comes back unknown, never bound or approved")
    };
    assert_eq!((p.id(), p.attempt()), (id.as_str(), attempt.as_str()));
    assert!(!p.is_redacted());
    let attempts = rt.reader().attempts(&id).unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].status, rpr::AttemptStatus::Unknown);

    // Reconcile by readback through a fresh session (a new server process, same store).
    let client = Arc::new(connect(&peers.kv(&state, &effects, mode)));
    let mut readback = kv_readback(&client);
    let reconciled = rt.reconcile(&p, &mut readback);
    drop(readback);
    shut_down(client);
    let last = match (reconciled, effect_written) {
        (Reconciled::Applied(token), true) => {
            let p = p.complete(&rt, token).unwrap();
            assert_eq!(p.state(), rpr::State::Completed);
            "completed"
        }
        (Reconciled::NotApplied(token), false) => {
            let p = p.require_repair(&rt, token).unwrap();
            assert_eq!(p.state(), rpr::State::RepairRequired);
            "repair_required"
        }
        (other, _) => panic!("{mode}: unexpected reconciliation {other:?}"),
    };
    let events = events(&rt, &id);
    let reconciled = event(&events, "reconciled");
    assert_eq!(reconciled["to"], last);
    assert_eq!(reconciled["data"]["source"], "readback");
    assert_eq!(
        reconciled["data"]["verdict"],
        if effect_written {
            "applied"
        } else {
            "not_applied"
        }
    );
    assert_eq!(
        reconciled["data"]["evidence"]["result"]["structuredContent"]["present"],
        effect_written
    );
    // Never re-sent: one attempt, and no write beyond what the killed call did.
    assert_eq!(rt.reader().attempts(&id).unwrap().len(), 1);
    assert_eq!(lines(&effects), effects_before);
    assert_eq!(rt.recover().unwrap().len(), usize::from(!effect_written));
    let report = rt.verify(None).unwrap();
    assert!(report.is_ok(), "{report:?}");
}

#[test]
fn server_killed_after_its_effect_is_unknown_then_reconciled_applied() {
    killed_mid_call("effect-then-sleep", true);
}

#[test]
fn server_killed_before_its_effect_is_unknown_then_reconciled_not_applied() {
    killed_mid_call("sleep-then-effect", false);
}
