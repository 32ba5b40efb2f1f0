//! `rpr gate` end to end, on real processes: the official Python SDK `ClientSession` through
//! the gate to `@modelcontextprotocol/server-filesystem` (read-only calls, the Human Gate by
//! elicitation: accept, decline, cancel; a client without elicitation, approved out of band),
//! and the fault server behind the gate (a crash after the effect, the gate killed mid-call, a
//! tool that changed, bad input). Each test asserts on the files the server wrote and on the
//! pathway database, not only on what the gate said.

#[path = "gate_parts/cancel_window.rs"]
mod cancel_window;
#[path = "gate_parts/embedded.rs"]
mod embedded;
#[path = "gate_parts/eras.rs"]
mod eras;
use crate::interop_support;
#[path = "gate_parts/one_commit.rs"]
mod one_commit;
#[path = "gate_parts/stderr_log.rs"]
mod stderr_log;
#[path = "gate_parts/stop.rs"]
mod stop;
#[path = "gate_parts/turns.rs"]
mod turns;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use interop_support::{TempDir, peers};
use rpr::State;
use rpr::mcp::{McpClient, Reply, ServerCommand, SessionConfig};
use rpr::store::ReadStore;
use serde_json::{Value, json};

const RPR: &str = env!("CARGO_BIN_EXE_rpr");
const FAULT: &str = env!("CARGO_BIN_EXE_rpr-fault-server");

/// The filesystem policy: `write_file` needs a Human Gate and is read back.
fn files_policy(dir: &TempDir) -> PathBuf {
    let policy = json!({
        "authority": {"approval_authority": "alice", "repair_owner": "bob", "resume_authority": "bob"},
        "servers": {"files": {
            "read_text_file": {"read_only": true},
            "write_file": {
            "human_gate": true,
            "readback": {
                "tool": "read_text_file",
                "arguments": {"path": "$path"},
                "expect": {"/structuredContent/content": "$content"},
                "absent_if_error_contains": "ENOENT"
            }
        }}}
    });
    let path = dir.join("policy.json");
    std::fs::write(&path, policy.to_string()).unwrap();
    path
}

/// The server of an embedded gate: a command (`rpr::gate::serve`) or a server in this
/// process (`rpr::gate::serve_in_process`).
enum Embedded {
    Command(rpr::mcp::ServerCommand),
    InProcess(rpr::mcp::InProcessServer),
}

impl From<rpr::mcp::ServerCommand> for Embedded {
    fn from(command: rpr::mcp::ServerCommand) -> Self {
        Self::Command(command)
    }
}

/// The gate run in a thread of this process, as a host that embeds the gate runs it,
/// governing `server` as `faults` over `rt` and `policy` (loaded from `policy_path`): the
/// gate's thread, the pipe to its stdin and the reader of its stdout.
fn embed_gate(
    rt: rpr::Runtime,
    policy: rpr::policy::Policy,
    server: impl Into<Embedded>,
    db: &Path,
    policy_path: &Path,
) -> (
    std::thread::JoinHandle<Result<(), rpr::gate::GateError>>,
    std::io::PipeWriter,
    BufReader<std::io::PipeReader>,
) {
    let (from_gate, gate_out) = std::io::pipe().unwrap();
    let (gate_in, to_gate) = std::io::pipe().unwrap();
    let options = rpr::gate::Options::new(
        "faults",
        rpr::Actor::new("agent"),
        db.display().to_string(),
        policy_path.display().to_string(),
    );
    let (input, server) = (BufReader::new(gate_in), server.into());
    let gate = std::thread::spawn(move || match server {
        Embedded::Command(command) => {
            rpr::gate::serve(rt, policy, &command, options, input, gate_out)
        }
        Embedded::InProcess(server) => {
            rpr::gate::serve_in_process(rt, policy, &server, options, input, gate_out)
        }
    });
    (gate, to_gate, BufReader::new(from_gate))
}

/// The fault server's policy: `put` (mutating) is read back with `get`; no Human Gate.
fn fault_policy(dir: &TempDir) -> PathBuf {
    let policy = json!({
        "authority": {"repair_owner": "bob", "resume_authority": "bob"},
        "servers": {"faults": {
            "get": {"read_only": true},
            "put": {
                "human_gate": false,
                "readback": {
                    "tool": "get",
                    "arguments": {"key": "$key"},
                    "expect": {"/structuredContent/value": "$value"}
                }
            }
        }}
    });
    let path = dir.join("policy.json");
    std::fs::write(&path, policy.to_string()).unwrap();
    path
}

/// `rpr gate … --name NAME -- SERVER…` as argv.
fn gate_argv(dir: &TempDir, policy: &Path, name: &str, server: &[String]) -> Vec<String> {
    let mut argv = vec![
        RPR.to_owned(),
        "gate".into(),
        "--database".into(),
        dir.join("rpr.db").display().to_string(),
        "--policy".into(),
        policy.display().to_string(),
        "--name".into(),
        name.into(),
        "--call-timeout".into(),
        "10".into(),
        "--".into(),
    ];
    argv.extend(server.iter().cloned());
    argv
}

fn filesystem_argv(root: &Path) -> Vec<String> {
    let p = peers();
    vec![
        p.node.display().to_string(),
        p.dir
            .join("node_modules/.bin/mcp-server-filesystem")
            .display()
            .to_string(),
        root.display().to_string(),
    ]
}

fn fault_argv(dir: &TempDir, fault: &str, extra: &[&str]) -> Vec<String> {
    let mut argv = vec![
        FAULT.to_owned(),
        "--effects".into(),
        dir.join("effects.jsonl").display().to_string(),
        "--state".into(),
        dir.join("state.json").display().to_string(),
        "--fault".into(),
        fault.into(),
    ];
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    argv
}

/// `rpr gate` under `policy` in front of the fault server (`--fault FAULT EXTRA…`).
fn fault_gate(dir: &TempDir, policy: &Path, fault: &str, extra: &[&str]) -> Vec<String> {
    gate_argv(dir, policy, "faults", &fault_argv(dir, fault, extra))
}

/// A new directory with the fault policy in it, and the gate under that policy in front of
/// the fault server (`--fault FAULT EXTRA…`): (directory, policy, gate argv).
fn fault_setup(tag: &str, fault: &str, extra: &[&str]) -> (TempDir, PathBuf, Vec<String>) {
    let dir = TempDir::new(tag);
    let policy = fault_policy(&dir);
    let gate = fault_gate(&dir, &policy, fault, extra);
    (dir, policy, gate)
}

/// A new directory with an empty `files` folder, and the gate under the files policy in
/// front of server-filesystem serving that folder: (directory, folder, gate argv).
fn files_setup(tag: &str) -> (TempDir, PathBuf, Vec<String>) {
    let dir = TempDir::new(tag);
    let root = dir.join("files");
    std::fs::create_dir_all(&root).unwrap();
    let gate = gate_argv(&dir, &files_policy(&dir), "files", &filesystem_argv(&root));
    (dir, root, gate)
}

/// Runs `tests/peers/gate_client.py`: one SDK session through the gate, one call.
fn sdk(scenario: &str, tool: &str, args: &Value, gate: &[String]) -> Value {
    sdk_as("session", scenario, tool, args, gate)
}

/// Runs `tests/peers/gate_client.py --client CLIENT` (`session`, `auto`, `2026-07-28`).
fn sdk_as(client: &str, scenario: &str, tool: &str, args: &Value, gate: &[String]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/gate_client.py");
    let out = Command::new(&peers().python)
        .arg(script)
        .args(["--client", client, scenario, tool, &args.to_string(), "--"])
        .args(gate)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the SDK client ({client}) failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// [`sdk`]'s `plain` client calling `write_file` with `args` through `gate`, on a thread of
/// its own (the call waits at the gate while the test acts).
fn plain_write_in_background(args: &Value, gate: &[String]) -> std::thread::JoinHandle<Value> {
    let (args, gate) = (args.clone(), gate.to_vec());
    std::thread::spawn(move || sdk("plain", "write_file", &args, &gate))
}

/// `rpr approve --pathway ID --as WHO` on the gate's database, which must succeed.
fn approve_out_of_band(dir: &TempDir, id: &str, who: &str) {
    let db = dir.join("rpr.db").display().to_string();
    let approved = rpr(&["approve", "--database", &db, "--pathway", id, "--as", who]);
    // 3: approved, and the call is still to be made (by the gate).
    assert_eq!(approved.status.code(), Some(3), "{}", text(&approved));
}

/// Runs `rpr ARGS…`.
fn rpr(args: &[&str]) -> Output {
    Command::new(RPR)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("rpr runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn store(dir: &TempDir) -> ReadStore {
    ReadStore::open_read_only(&dir.join("rpr.db")).expect("the gate created the database")
}

/// The pathway named in a result's `_meta`.
fn pathway_of(result: &Value) -> String {
    result["meta"]["dev.rpr/pathway"]["id"]
        .as_str()
        .or_else(|| result["_meta"]["dev.rpr/pathway"]["id"].as_str())
        .unwrap_or_else(|| panic!("no pathway in {result}"))
        .to_owned()
}

fn state(dir: &TempDir, id: &str) -> State {
    store(dir)
        .pathway(id)
        .unwrap()
        .expect("the pathway exists")
        .state
}

fn pathway_count(dir: &TempDir) -> usize {
    store(dir)
        .list_pathways(None, 10_000, None)
        .map_or(0, |v| v.len())
}

/// The gate with piped stdio, after an `initialize` exchange typed by hand.
fn raw_session(
    gate: &[String],
) -> (
    std::process::Child,
    std::process::ChildStdin,
    BufReader<std::process::ChildStdout>,
) {
    let (child, stdin, stdout, _) = raw_session_declaring(gate, &json!({}));
    (child, stdin, stdout)
}

/// [`raw_session`] with the client declaring `capabilities`; also returns the
/// `initialize` result.
fn raw_session_declaring(
    gate: &[String],
    capabilities: &Value,
) -> (
    std::process::Child,
    std::process::ChildStdin,
    BufReader<std::process::ChildStdout>,
    Value,
) {
    let mut child = Command::new(&gate[0])
        .args(&gate[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}});
    writeln!(stdin, "{init}").unwrap();
    let reply = next_reply(&mut stdout, &json!(1));
    assert_eq!(reply["result"]["protocolVersion"], "2025-11-25", "{reply}");
    (child, stdin, stdout, reply["result"].clone())
}

/// The gate of `argv` with `flags` added before its `--`, its stdin, stdout and stderr
/// piped, initialized by a 2025-11-25 client that declares nothing (request id 0).
fn initialized_with_stderr(
    argv: &[String],
    flags: &[&str],
) -> (
    std::process::Child,
    std::process::ChildStdin,
    BufReader<std::process::ChildStdout>,
    std::process::ChildStderr,
) {
    let mut argv = argv.to_vec();
    let at = argv.iter().position(|a| a == "--").unwrap();
    argv.splice(at..at, flags.iter().map(|f| (*f).to_owned()));
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let stderr = child.stderr.take().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    writeln!(stdin, "{init}").unwrap();
    next_reply(&mut stdout, &json!(0));
    (child, stdin, stdout, stderr)
}

/// The next message the gate writes to its client.
fn next_message(stdout: &mut BufReader<std::process::ChildStdout>) -> Value {
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
}

/// The gate's answer to request `id`, skipping what comes before it (notifications).
fn next_reply(stdout: &mut BufReader<std::process::ChildStdout>, id: &Value) -> Value {
    loop {
        let message = next_message(stdout);
        if &message["id"] == id && message.get("method").is_none() {
            return message;
        }
    }
}

/// `argv` with `--call-timeout SECONDS`.
fn with_call_timeout(mut argv: Vec<String>, seconds: u64) -> Vec<String> {
    let at = argv.iter().position(|a| a == "--call-timeout").unwrap();
    argv[at + 1] = seconds.to_string();
    argv
}

/// Waits until pathway `id`'s state is `want` (the gate records it on its own threads).
fn await_state(dir: &TempDir, id: &str, want: State) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = store(dir).pathway(id).unwrap().map(|p| p.state);
        if now == Some(want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "pathway {id} is {now:?}, not {want}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The only pathway in the store, once there is one.
fn await_only_pathway(dir: &TempDir) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if dir.join("rpr.db").exists()
            && let Ok(all) = store(dir).list_pathways(None, 10, None)
            && let [only] = all.as_slice()
        {
            return only.id.clone();
        }
        assert!(Instant::now() < deadline, "no pathway was recorded");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts that the gate answers nothing more to what was sent before: a `ping` sent
/// now is answered first. (An answer the gate was about to send would come before it.)
fn answers_nothing_before_a_ping(
    stdin: &mut std::process::ChildStdin,
    stdout: &mut BufReader<std::process::ChildStdout>,
) {
    // The recorded outcome comes just before an answer would: give that answer its time.
    std::thread::sleep(Duration::from_millis(500));
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": "ping-after", "method": "ping"})
    )
    .unwrap();
    let next = next_message(stdout);
    assert_eq!(
        next["id"], "ping-after",
        "the gate answered a cancelled request: {next}"
    );
}

#[test]
fn sdk_read_only_call_passes_and_is_recorded_completed() {
    let (dir, root, gate) = files_setup("gate-read");
    std::fs::write(root.join("a.txt"), "hello\n").unwrap();
    let report = sdk(
        "plain",
        "read_text_file",
        &json!({"path": root.join("a.txt")}),
        &gate,
    );
    assert_eq!(report["protocol_version"], "2025-11-25");
    assert_eq!(report["server_info"]["name"], "rpr-gate");
    assert!(
        report["server_info"]["title"]
            .as_str()
            .unwrap()
            .contains("secure-filesystem-server")
    );
    assert!(
        report["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "write_file")
    );
    let result = &report["result"];
    assert_eq!(result["is_error"], false, "{report}");
    assert_eq!(result["text"], "hello\n");
    let id = pathway_of(result);
    assert_eq!(state(&dir, &id), State::Completed);
    // Every listed tool was pinned on first sight.
    assert!(
        store(&dir)
            .pins()
            .unwrap()
            .iter()
            .any(|p| p.tool == "write_file")
    );
}

#[test]
fn sdk_human_gate_accept_writes_once_decline_denies_cancel_leaves_at_gate() {
    let (dir, root, gate) = files_setup("gate-elicit");

    let b = root.join("b.txt");
    let report = sdk(
        "accept",
        "write_file",
        &json!({"path": b, "content": "B1"}),
        &gate,
    );
    let shown = &report["elicitations"];
    assert_eq!(shown.as_array().unwrap().len(), 1, "{report}");
    let message = shown[0]["message"].as_str().unwrap();
    for needle in [
        "write_file",
        "secure-filesystem-server",
        "binding digest",
        "\"B1\"",
    ] {
        assert!(
            message.contains(needle),
            "the Human Gate shows {needle}: {message}"
        );
    }
    assert_eq!(
        shown[0]["schema"]["properties"]["approve"]["type"],
        "boolean"
    );
    assert_eq!(report["result"]["is_error"], false, "{report}");
    assert_eq!(std::fs::read_to_string(&b).unwrap(), "B1");
    let id = pathway_of(&report["result"]);
    // The approval is of the binding the form showed: the tool as pinned.
    let pinned = store(&dir).pin_digest("files", "write_file").unwrap();
    assert!(message.contains(pinned.as_deref().unwrap()), "{message}");
    assert_eq!(approval_bindings(&dir, &id), [pinned]);
    assert_eq!(
        state(&dir, &id),
        State::Completed,
        "completed only after the readback"
    );
    assert_eq!(store(&dir).attempts(&id).unwrap().len(), 1, "sent once");

    for (scenario, name, want) in [
        ("decline", "c.txt", State::Denied),
        ("accept-no", "c2.txt", State::Denied),
        ("cancel", "d.txt", State::HumanGate),
    ] {
        let f = root.join(name);
        let report = sdk(
            scenario,
            "write_file",
            &json!({"path": f, "content": "X"}),
            &gate,
        );
        assert_eq!(report["result"]["is_error"], true, "{scenario}: {report}");
        assert!(!f.exists(), "{scenario}: nothing written");
        let id = pathway_of(&report["result"]);
        assert_eq!(state(&dir, &id), want, "{scenario}");
        assert!(
            store(&dir).attempts(&id).unwrap().is_empty(),
            "{scenario}: nothing sent"
        );
    }
}

#[test]
fn sdk_without_elicitation_names_rpr_approve_and_the_approved_repeat_writes_once() {
    let (dir, root, gate) = files_setup("gate-oob");
    let e = root.join("e.txt");
    let args = json!({"path": e, "content": "E1"});

    let first = sdk("plain", "write_file", &args, &gate);
    let said = first["result"]["text"].as_str().unwrap();
    assert_eq!(first["result"]["is_error"], true);
    assert!(said.contains("rpr approve --database"), "{said}");
    let id = pathway_of(&first["result"]);
    assert_eq!(state(&dir, &id), State::HumanGate);
    assert!(!e.exists());

    // The identical call while it waits: answered from the same pathway, not a new one.
    let again = sdk("plain", "write_file", &args, &gate);
    assert_eq!(pathway_of(&again["result"]), id);
    assert_eq!(pathway_count(&dir), 1);
    assert!(!e.exists());

    approve_out_of_band(&dir, &id, "alice");
    assert_eq!(state(&dir, &id), State::Approved);
    assert!(!e.exists(), "approving out of band sends nothing");

    let sent = sdk("plain", "write_file", &args, &gate);
    assert_eq!(sent["result"]["is_error"], false, "{sent}");
    assert_eq!(
        pathway_of(&sent["result"]),
        id,
        "the approved pathway is the one sent"
    );
    assert_eq!(std::fs::read_to_string(&e).unwrap(), "E1");
    assert_eq!(state(&dir, &id), State::Completed);
    assert_eq!(
        store(&dir).attempts(&id).unwrap().len(),
        1,
        "sent exactly once"
    );
}

#[test]
fn an_approval_that_expired_before_the_repeat_is_asked_again_and_nothing_is_sent_on_it() {
    let (dir, root, gate) = files_setup("gate-expired");
    // The same policy, with approvals that hold for five seconds.
    let path = files_policy(&dir);
    let mut policy: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    policy["approval_ttl"] = json!(5);
    std::fs::write(&path, policy.to_string()).unwrap();
    let e = root.join("late.txt");
    let args = json!({"path": e, "content": "L1"});
    let approve = |id: &str| approve_out_of_band(&dir, id, "alice");

    let first = sdk("plain", "write_file", &args, &gate);
    let id = pathway_of(&first["result"]);
    approve(&id);
    assert_eq!(state(&dir, &id), State::Approved);
    std::thread::sleep(Duration::from_millis(5300));

    // The repeat after the approval expired: not sent; asked again.
    let late = sdk("plain", "write_file", &args, &gate);
    let said = late["result"]["text"].as_str().unwrap();
    assert_eq!(late["result"]["is_error"], true, "{late}");
    assert!(said.contains("rpr approve --database"), "{said}");
    assert_eq!(pathway_of(&late["result"]), id);
    assert_eq!(state(&dir, &id), State::HumanGate);
    assert!(!e.exists(), "nothing sent on the expired approval");
    assert!(store(&dir).attempts(&id).unwrap().is_empty());
    let held = events(&dir, &id)
        .into_iter()
        .find(|e| e["kind"] == "held")
        .expect("the hold is recorded");
    assert!(
        held["data"]["reason"]
            .as_str()
            .unwrap()
            .contains("approval expired"),
        "{held}"
    );

    // The repeat waits at the gate (so a loaded machine cannot let this approval expire
    // too before the call comes); approved again, it is sent, once.
    let waiting_call = plain_write_in_background(&args, &waiting(&gate, "60"));
    std::thread::sleep(Duration::from_secs(2));
    approve(&id);
    let sent = waiting_call.join().unwrap();
    assert_eq!(sent["result"]["is_error"], false, "{sent}");
    assert_eq!(std::fs::read_to_string(&e).unwrap(), "L1");
    assert_eq!(store(&dir).attempts(&id).unwrap().len(), 1);
}

#[test]
fn a_form_accepted_at_the_client_is_one_approval_of_a_quorum_of_two() {
    let (dir, root, gate) = files_setup("gate-quorum");
    let path = files_policy(&dir);
    let mut policy: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    policy["approval"] = json!({"approvers": ["bob"], "quorum": 2});
    std::fs::write(&path, policy.to_string()).unwrap();
    let q = root.join("q.txt");
    let args = json!({"path": q, "content": "Q1"});

    // The person at the client accepts: alice's approval, one of two.
    let first = sdk("accept", "write_file", &args, &gate);
    let said = first["result"]["text"].as_str().unwrap();
    assert_eq!(first["result"]["is_error"], true, "{first}");
    assert!(
        said.contains("has 1 of the 2 approvals it needs (approved by alice)"),
        "{said}"
    );
    assert!(said.contains("1 more of: bob"), "{said}");
    let id = pathway_of(&first["result"]);
    assert_eq!(state(&dir, &id), State::HumanGate);
    assert!(!q.exists(), "nothing sent short of the quorum");

    // bob approves out of band: the quorum is made; the same call sends it, once.
    approve_out_of_band(&dir, &id, "bob");
    assert_eq!(state(&dir, &id), State::Approved);
    let sent = sdk("plain", "write_file", &args, &gate);
    assert_eq!(sent["result"]["is_error"], false, "{sent}");
    assert_eq!(std::fs::read_to_string(&q).unwrap(), "Q1");
    assert_eq!(store(&dir).attempts(&id).unwrap().len(), 1);
}

/// `gate` with `--approval-wait SECONDS` before its `--`.
fn waiting(gate: &[String], seconds: &str) -> Vec<String> {
    let mut argv = gate.to_vec();
    let at = argv.iter().position(|a| a == "--").unwrap();
    argv.splice(at..at, ["--approval-wait".to_owned(), seconds.to_owned()]);
    argv
}

/// Waits until the database holds one pathway at the Human Gate, and returns its id.
fn gated_pathway(dir: &TempDir) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if dir.join("rpr.db").exists()
            && let Ok(store) = ReadStore::open_read_only(&dir.join("rpr.db"))
            && let Ok(list) = store.list_pathways(None, 10, None)
            && let Some(r) = list.iter().find(|r| r.state == State::HumanGate)
        {
            return r.id.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no pathway reached the gate"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_call_waiting_for_an_approval_out_of_band_completes_without_a_repeat() {
    let (dir, root, gate) = files_setup("gate-wait-approve");
    let gate = waiting(&gate, "60");
    let e = root.join("w.txt");
    let args = json!({"path": e, "content": "W1"});
    let call = plain_write_in_background(&args, &gate);
    let id = gated_pathway(&dir);
    assert!(!e.exists(), "nothing sent before the approval");
    approve_out_of_band(&dir, &id, "alice");
    // The waiting call itself is sent and answered with the result: no repeat needed.
    let answered = call.join().unwrap();
    assert_eq!(answered["result"]["is_error"], false, "{answered}");
    assert_eq!(pathway_of(&answered["result"]), id);
    assert_eq!(std::fs::read_to_string(&e).unwrap(), "W1");
    assert_eq!(state(&dir, &id), State::Completed);
    assert_eq!(store(&dir).attempts(&id).unwrap().len(), 1, "sent once");
}

#[test]
fn a_call_waiting_for_an_approval_is_answered_by_a_denial_or_when_the_wait_ends() {
    let (dir, root, gate) = files_setup("gate-wait-deny");
    let long = waiting(&gate, "60");
    let e = root.join("d.txt");
    let args = json!({"path": e, "content": "D1"});
    let call = plain_write_in_background(&args, &long);
    let id = gated_pathway(&dir);
    let db = dir.join("rpr.db").display().to_string();
    let denied = rpr(&["deny", "--database", &db, "--pathway", &id, "--as", "alice"]);
    assert_eq!(denied.status.code(), Some(4), "{}", text(&denied));
    let answered = call.join().unwrap();
    assert_eq!(answered["result"]["is_error"], true, "{answered}");
    assert_eq!(state(&dir, &id), State::Denied);
    assert!(!e.exists());

    // Nobody decides: answered when the wait ends, with how to approve; nothing sent.
    let short = waiting(&gate, "1");
    let f = root.join("n.txt");
    let started = std::time::Instant::now();
    let late = sdk(
        "plain",
        "write_file",
        &json!({"path": f, "content": "N1"}),
        &short,
    );
    assert!(started.elapsed() >= Duration::from_secs(1));
    let said = late["result"]["text"].as_str().unwrap();
    assert_eq!(late["result"]["is_error"], true, "{late}");
    assert!(said.contains("within the 1 s this call waited"), "{said}");
    assert!(said.contains("rpr approve --database"), "{said}");
    assert_eq!(state(&dir, &pathway_of(&late["result"])), State::HumanGate);
    assert!(!f.exists());
}

/// The gate's argv as a server command, with this environment.
fn gate_command(argv: &[String]) -> ServerCommand {
    ServerCommand::new(&argv[0])
        .args(&argv[1..])
        .inherit_env(true)
}

/// Runs the gate's argv with stdin closed (it exits before serving).
fn run_gate(argv: &[String]) -> Output {
    Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A client of the gate: this crate's own MCP client (no elicitation).
fn connect(argv: &[String]) -> McpClient {
    let command = gate_command(argv);
    let mut config = SessionConfig::default();
    config.request_timeout = Duration::from_secs(30);
    McpClient::connect(&command, &config).unwrap_or_else(|e| panic!("the gate did not start: {e}"))
}

fn call(client: &McpClient, tool: &str, args: &Value) -> Reply {
    client
        .call_tool(tool, args, Duration::from_secs(30))
        .expect("the gate answers")
}

fn result(reply: Reply) -> Value {
    match reply {
        Reply::Result(r) => r,
        Reply::Error(e) => panic!("a JSON-RPC error: {e:?}"),
    }
}

fn effects(dir: &TempDir) -> usize {
    std::fs::read_to_string(dir.join("effects.jsonl")).map_or(0, |s| s.lines().count())
}

fn meta_id(result: &Value) -> String {
    result["_meta"]["dev.rpr/pathway"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no pathway in {result}"))
        .to_owned()
}

#[test]
fn crash_after_effect_is_unknown_the_repeat_is_refused_and_reconcile_completes_it() {
    let (dir, policy, gate) = fault_setup("gate-crash", "crash-after-effect", &[]);
    let client = connect(&gate);
    let args = json!({"key": "k", "value": "v1"});
    let first = result(call(&client, "put", &args));
    assert_eq!(first["isError"], true);
    let said = first["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("write status unknown") && said.contains("will not be sent again"),
        "{said}"
    );
    let id = meta_id(&first);
    assert_eq!(state(&dir, &id), State::WriteStatusUnknown);
    assert_eq!(effects(&dir), 1);

    // The identical repeat (the gate restarted the server for it) is answered from the pathway.
    let repeat = result(call(&client, "put", &args));
    assert_eq!(repeat["isError"], true);
    assert_eq!(meta_id(&repeat), id);
    assert_eq!(effects(&dir), 1, "the repeat was not sent");
    client.shutdown();

    let db = dir.join("rpr.db").display().to_string();
    let policy = policy.display().to_string();
    let out = rpr(&[
        "reconcile",
        "--database",
        &db,
        "--policy",
        &policy,
        "--pathway",
        &id,
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(state(&dir, &id), State::Completed, "{}", text(&out));
    assert_eq!(effects(&dir), 1);
}

/// The server command a gate recorded is run by an operator's step (`rpr reconcile`) only
/// as the pathway's chain proposed it: a writer of the database who changes the stored
/// command (here to one that leaves a mark) gets nothing run, and the step says why (the
/// load checks the stored rows against the pathway's own events before anything is done).
#[test]
fn a_recorded_server_command_edited_in_the_database_is_not_run() {
    let (dir, policy, gate) = fault_setup("gate-forged-command", "crash-after-effect", &[]);
    let client = connect(&gate);
    let first = result(call(&client, "put", &json!({"key": "k", "value": "v1"})));
    let id = meta_id(&first);
    assert_eq!(state(&dir, &id), State::WriteStatusUnknown);
    client.shutdown();

    let mark = dir.join("forged-ran");
    let conn = rusqlite::Connection::open(dir.join("rpr.db")).unwrap();
    let forged = json!(["/bin/sh", "-c", format!("touch {}", mark.display())]).to_string();
    let changed = conn
        .execute(
            "UPDATE pathways SET definition = json_set(definition, '$.metadata.gate.command', json(?1)) WHERE id = ?2",
            rusqlite::params![forged, id],
        )
        .unwrap();
    assert_eq!(changed, 1);
    drop(conn);

    let db = dir.join("rpr.db").display().to_string();
    let policy = policy.display().to_string();
    let out = rpr(&[
        "reconcile",
        "--database",
        &db,
        "--policy",
        &policy,
        "--pathway",
        &id,
    ]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("stored definition is not the one proposed"),
        "{said}"
    );
    assert!(!mark.exists(), "the forged command ran");
    assert_eq!(state(&dir, &id), State::WriteStatusUnknown);
}

/// A server that keeps its data at a relative path reads back only where it ran. The gate
/// records its server's directory with the pathway, and `rpr reconcile`, run from another
/// directory, starts the server there again: the readback finds the write and completes
/// the pathway. Before, the server started in the operator's directory, found nothing,
/// and the verdict was *not applied*: `repair` and `resume` would have sent the call again.
#[test]
fn reconcile_reads_back_in_the_directory_the_server_ran_in() {
    let dir = TempDir::new("gate-cwd");
    let policy = fault_policy(&dir);
    let server: Vec<String> = [
        FAULT,
        "--effects",
        "effects.jsonl",
        "--state",
        "state.json",
        "--fault",
        "crash-after-effect",
    ]
    .map(str::to_owned)
    .to_vec();
    let gate = gate_argv(&dir, &policy, "faults", &server);
    let mut config = SessionConfig::default();
    config.request_timeout = Duration::from_secs(30);
    let client = McpClient::connect(&gate_command(&gate).current_dir(dir.path()), &config)
        .unwrap_or_else(|e| panic!("the gate did not start: {e}"));
    let first = result(call(&client, "put", &json!({"key": "k", "value": "v1"})));
    let id = meta_id(&first);
    assert_eq!(state(&dir, &id), State::WriteStatusUnknown, "{first}");
    assert_eq!(effects(&dir), 1, "the write landed in the gate's directory");
    client.shutdown();
    let recorded = &store(&dir).pathway(&id).unwrap().unwrap().definition["metadata"]["gate"];
    assert_eq!(
        recorded["cwd"].as_str(),
        Some(dir.path().display().to_string().as_str()),
        "{recorded}"
    );

    let elsewhere = TempDir::new("gate-cwd-operator");
    let out = Command::new(RPR)
        .current_dir(elsewhere.path())
        .args([
            "reconcile",
            "--database",
            &dir.join("rpr.db").display().to_string(),
            "--policy",
            &policy.display().to_string(),
            "--pathway",
            &id,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(state(&dir, &id), State::Completed, "{}", text(&out));
    assert!(
        !elsewhere.join("state.json").exists(),
        "the readback ran where the server ran, not in the operator's directory"
    );
    assert_eq!(effects(&dir), 1, "nothing was sent again");
}

/// The policy of the fault server with `put` behind a Human Gate (alice approves, bob
/// runs and stops), read back through `get`.
fn gated_put_policy(dir: &TempDir) -> PathBuf {
    write_policy(
        dir,
        &json!({
            "authority": {"approval_authority": "alice", "repair_owner": "bob", "execution_actor": "bob",
                          "stop_authority": "bob"},
            "servers": {"faults": {
                "get": {"read_only": true},
                "put": {"human_gate": true, "readback": {"tool": "get", "arguments": {"key": "$key"},
                        "expect": {"/structuredContent/value": "$value"}}}
            }}
        }),
    )
}

/// The fault server (`EXTRA` flags added) as a command that reads its fault from a file
/// at each start: (the file, the command). The file says `none`; `change-schema` (after no list) makes the same
/// server with `put`'s input schema changed, and `get` as it was.
fn switchable_fault(dir: &TempDir, extra: &[&str]) -> (PathBuf, Vec<String>) {
    let mode = dir.join("fault.txt");
    std::fs::write(&mode, "none").unwrap();
    let fault = fault_argv(
        dir,
        &format!("$(cat {})", mode.display()),
        &[&["--lists-before", "0"], extra].concat(),
    );
    let script = fault
        .iter()
        .map(|a| {
            if a.starts_with("$(") {
                format!("\"{a}\"")
            } else {
                format!("'{a}'")
            }
        })
        .collect::<Vec<_>>()
        .join(" ");
    let server = vec![
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        format!("exec {script}"),
    ];
    (mode, server)
}

/// `rpr resume` of a gate pathway approved out of band sends it only to the tool pinned, as
/// the gate itself would, and only to the binding the approval was of: the tool's input
/// schema changed between the approval and the resume (its readback tool did not), and
/// nobody saw the tool the server now lists. Pinned after review, it is still not sent on
/// the old approval; approved again as it is now, it is sent once.
#[test]
fn a_resumed_gate_pathway_is_sent_only_to_its_pinned_tool() {
    let dir = TempDir::new("gate-resume-pin");
    let policy = gated_put_policy(&dir);
    let (mode, server) = switchable_fault(&dir, &[]);
    let gate = gate_argv(&dir, &policy, "faults", &server);
    let id = put_approved_out_of_band(&dir, &gate, &json!({"key": "k", "value": "v"}));

    std::fs::write(&mode, "change-schema").unwrap();
    let db = dir.join("rpr.db").display().to_string();
    let policy = policy.display().to_string();
    let resume = || {
        rpr(&[
            "resume",
            "--database",
            &db,
            "--policy",
            &policy,
            "--pathway",
            &id,
            "--as",
            "bob",
        ])
    };
    let refused = resume();
    let said = text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(
        said.contains("the tool `put` of server `faults` is not the one pinned")
            && said.contains("nobody approved sending to it"),
        "{said}"
    );
    assert_eq!(effects(&dir), 0, "nothing was sent");
    assert_eq!(state(&dir, &id), State::Approved);

    // Pinned after review: still not sent on an approval of the tool as it was.
    let pinned = pin(&dir, "faults", "put", named_digest(&said));
    assert!(pinned.status.success(), "{}", text(&pinned));
    let refused = resume();
    let said = text(&refused);
    assert_eq!(refused.status.code(), Some(1), "{said}");
    assert!(
        said.contains("the server changed since the Human Gate"),
        "{said}"
    );
    assert_eq!(effects(&dir), 0, "nothing was sent");
    // Back before the Human Gate, approved as it is now: sent once.
    for (step, code) in [
        (
            vec!["hold", "--as", "bob", "--reason", "the tool changed"],
            0,
        ),
        (vec!["escalate", "--as", "bob"], 0),
        (vec!["approve", "--as", "alice"], 3),
    ] {
        let mut args = vec![step[0], "--database", &db, "--pathway", &id];
        args.extend(&step[1..]);
        let out = rpr(&args);
        assert_eq!(out.status.code(), Some(code), "{step:?}: {}", text(&out));
    }
    let sent = resume();
    assert!(sent.status.success(), "{}", text(&sent));
    assert_eq!(effects(&dir), 1, "sent once");
    assert_eq!(state(&dir, &id), State::Completed);
}

/// Proof before permission: an approval given out of band is of the tool as pinned when
/// it was given. A pin accepted between that approval and the client's repeat does not
/// carry it: the gate sends nothing on it, puts the pathway back before the Human Gate by
/// its stop authority (recorded with why) and asks again; approved again, it is sent once.
#[test]
fn an_approval_given_before_a_new_pin_is_not_sent_on_and_the_call_is_asked_again() {
    let (dir, mode, gate) = switchable_gate("gate-approval-pin");
    let args = json!({"key": "k", "value": "v"});
    let id = put_approved_out_of_band(&dir, &gate, &args);
    let approved = store(&dir).pin_digest("faults", "put").unwrap().unwrap();
    assert_eq!(approval_bindings(&dir, &id), [Some(approved.clone())]);

    // The server changed; the change is reviewed and pinned.
    let client = change_and_pin_put(&dir, &mode, &gate, &args);

    let again = result(call(&client, "put", &args));
    let said = again["content"][0]["text"].as_str().unwrap();
    assert_eq!(again["isError"], true, "{again}");
    assert_eq!(
        effects(&dir),
        0,
        "nothing sent on the approval of the tool as it was"
    );
    assert_eq!(state(&dir, &id), State::HumanGate, "{said}");
    assert!(said.contains("rpr approve"), "asked again: {said}");
    let why = events(&dir, &id)
        .into_iter()
        .rfind(|e| e["kind"] == "held")
        .expect("the hold is recorded");
    let why = why["data"]["reason"].as_str().unwrap();
    assert!(
        why.contains(&format!("was of binding {approved}")) && why.contains("asked again"),
        "{why}"
    );

    approve_out_of_band(&dir, &id, "alice");
    put_sent_once(&dir, &client, &args, &id);
    client.shutdown();
}

/// A call that waited for an approval out of band while the tool's pin moved is not sent,
/// nor put back before the Human Gate, on the pin it was checked against: the approval
/// given meanwhile, of the tool as pinned now, still stands, and the call made again
/// through a gate that sees that tool is sent once.
#[test]
fn a_call_whose_pin_moved_while_it_waited_keeps_the_approval_given_meanwhile() {
    let (dir, mode, gate) = switchable_gate("gate-wait-pin");
    let args = json!({"key": "k", "value": "v"});
    let waiting_gate = waiting(&gate, "20");
    let client = connect(&waiting_gate);
    let waits = {
        let args = args.clone();
        std::thread::spawn(move || {
            let answer = result(call(&client, "put", &args));
            client.shutdown();
            answer
        })
    };
    let id = gated_pathway(&dir);

    // Meanwhile the tool changes, a gate sees it, its change is pinned, and alice approves
    // the call of the tool as pinned now.
    change_and_pin_put(&dir, &mode, &gate, &args).shutdown();
    let now = store(&dir).pin_digest("faults", "put").unwrap().unwrap();
    let db = dir.join("rpr.db").display().to_string();
    let approved = rpr(&[
        "approve",
        "--database",
        &db,
        "--pathway",
        &id,
        "--as",
        "alice",
        "--binding",
        &now,
    ]);
    assert_eq!(approved.status.code(), Some(3), "{}", text(&approved));

    let answer = waits.join().unwrap();
    let said = answer["content"][0]["text"].as_str().unwrap_or_default();
    assert_eq!(answer["isError"], true, "{answer}");
    assert!(said.contains("pin moved while this call waited"), "{said}");
    assert_eq!(effects(&dir), 0, "nothing sent");
    assert_eq!(state(&dir, &id), State::Approved, "not put back: {said}");
    assert_eq!(approval_bindings(&dir, &id), [Some(now)]);

    let client = connect(&gate);
    put_sent_once(&dir, &client, &args, &id);
    client.shutdown();
}

/// A write the server answered with a tool error is unknown in its effect, but answered: the
/// gate's server holds it no more. `rpr reconcile` of it on the gate's host leaves that
/// server, which serves the gate's other calls, running (before, the attempt counted as
/// unanswered and its recorded process tree, the gate's live server, was killed).
#[test]
fn reconciling_a_write_answered_with_a_tool_error_leaves_the_gates_server_running() {
    let dir = TempDir::new("gate-tool-error-carrier");
    let policy = fault_policy(&dir);
    let pid_file = dir.join("server.pid").display().to_string();
    let gate = fault_gate(&dir, &policy, "is-error", &["--pid-file", &pid_file]);
    let client = connect(&gate);
    let answer = result(call(&client, "put", &json!({"key": "k", "value": "v"})));
    let id = meta_id(&answer);
    assert_eq!(state(&dir, &id), State::WriteStatusUnknown, "{answer}");
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .to_owned();
    let running = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            !state.is_some_and(|s| s.starts_with('Z') || s.starts_with('X'))
        })
    };
    assert!(running(), "the gate's server runs");
    let db = dir.join("rpr.db").display().to_string();
    let policy = policy.display().to_string();
    let out = rpr(&[
        "reconcile",
        "--database",
        &db,
        "--policy",
        &policy,
        "--pathway",
        &id,
    ]);
    assert!(!text(&out).contains("panicked"), "{}", text(&out));
    assert!(running(), "the gate's server was killed: {}", text(&out));
    client.shutdown();
}

/// `rpr approve --binding DIGEST` of a gate pathway approves only the call of the tool
/// pinned as DIGEST: a change pinned after the approver looked leaves it unrecorded.
#[test]
fn an_approval_of_a_gate_pathway_is_refused_for_a_pin_it_was_not_shown() {
    let (dir, mode, gate) = switchable_gate("gate-approve-binding");
    let args = json!({"key": "k", "value": "v"});
    let client = connect(&gate);
    let id = meta_id(&result(call(&client, "put", &args)));
    client.shutdown();
    let shown = store(&dir).pin_digest("faults", "put").unwrap().unwrap();

    change_and_pin_put(&dir, &mode, &gate, &args).shutdown();
    let now = store(&dir).pin_digest("faults", "put").unwrap().unwrap();
    assert_ne!(now, shown);

    let db = dir.join("rpr.db").display().to_string();
    // `rpr show` shows the binding an approval is of, and the command that names it.
    let show = || text(&rpr(&["show", "--database", &db, &id]));
    let said = show();
    assert!(
        said.contains(&format!("binding: the tool as pinned, digest {now}"))
            && said.contains(&format!("--binding {now}")),
        "{said}"
    );
    let approve = |digest: &str| {
        rpr(&[
            "approve",
            "--database",
            &db,
            "--pathway",
            &id,
            "--as",
            "alice",
            "--binding",
            digest,
        ])
    };
    let out = approve(&shown);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("nothing was recorded") && said.contains(&format!("bound to {now}")),
        "{said}"
    );
    assert!(approval_bindings(&dir, &id).is_empty());
    assert_eq!(state(&dir, &id), State::HumanGate);
    let out = approve(&now);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(show().contains(&format!("of binding {now}")), "{}", show());
    assert_eq!(approval_bindings(&dir, &id), [Some(now)]);
}

/// What an approval of a gate pathway is of is the tool as pinned: the server's own
/// description of it, annotation and all. Here the server calls `put` read-only, a claim
/// the policy overrules (the pathway's definition says it may change something, so it is
/// read back, never treated as a read). `rpr resume` of the approved pathway compares the
/// approval with the pin, not with the class the policy gives the call, and sends it.
#[test]
fn a_gate_pathway_approved_out_of_band_is_resumed_when_its_server_calls_the_write_read_only() {
    let dir = TempDir::new("gate-resume-claim");
    let policy = gated_put_policy(&dir);
    let gate = fault_gate(&dir, &policy, "none", &["--claim-read-only"]);
    let id = put_approved_out_of_band(&dir, &gate, &json!({"key": "k", "value": "v"}));
    let db = dir.join("rpr.db").display().to_string();
    let policy = policy.display().to_string();
    let out = rpr(&[
        "resume",
        "--database",
        &db,
        "--policy",
        &policy,
        "--pathway",
        &id,
        "--as",
        "bob",
    ]);
    eprintln!(
        "DEBUG {}\n{:?}\n{:?}",
        text(&out),
        approval_bindings(&dir, &id),
        store(&dir)
            .attempts(&id)
            .unwrap()
            .iter()
            .map(|a| a.binding.clone())
            .collect::<Vec<_>>()
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(effects(&dir), 1, "sent once");
    assert_eq!(state(&dir, &id), State::Completed);
}

/// A new directory with the gate in front of [`switchable_fault`] under
/// [`gated_put_policy`]: (directory, the fault's file, the gate's argv).
fn switchable_gate(tag: &str) -> (TempDir, PathBuf, Vec<String>) {
    let dir = TempDir::new(tag);
    let policy = gated_put_policy(&dir);
    let (mode, server) = switchable_fault(&dir, &[]);
    let gate = gate_argv(&dir, &policy, "faults", &server);
    (dir, mode, gate)
}

/// Changes [`switchable_fault`]'s `put` (its input schema), lets a new gate see it (the
/// `put` of `args` refused for its pin) and pins the change as reviewed: the client of
/// that gate.
fn change_and_pin_put(dir: &TempDir, mode: &Path, gate: &[String], args: &Value) -> McpClient {
    std::fs::write(mode, "change-schema").unwrap();
    let client = connect(gate);
    let refused = result(call(&client, "put", args));
    let said = refused["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("not the one pinned"), "{said}");
    let pinned = pin(dir, "faults", "put", named_digest(said));
    assert!(pinned.status.success(), "{}", text(&pinned));
    client
}

/// A `put` of `args` through `gate` (whose policy holds it at the Human Gate), then
/// approved out of band by alice: its pathway.
fn put_approved_out_of_band(dir: &TempDir, gate: &[String], args: &Value) -> String {
    let client = connect(gate);
    let held = result(call(&client, "put", args));
    let id = meta_id(&held);
    assert_eq!(state(dir, &id), State::HumanGate, "{held}");
    client.shutdown();
    approve_out_of_band(dir, &id, "alice");
    id
}

/// The `put` of `args` through `client` is sent, once, and completes pathway `id`.
fn put_sent_once(dir: &TempDir, client: &McpClient, args: &Value, id: &str) {
    let sent = result(call(client, "put", args));
    assert_ne!(sent["isError"], true, "{sent}");
    assert_eq!(effects(dir), 1, "sent once");
    assert_eq!(state(dir, id), State::Completed);
}

/// The pathway's ledger events, oldest first.
fn events(dir: &TempDir, id: &str) -> Vec<Value> {
    store(dir)
        .events(id, 0, usize::MAX)
        .unwrap()
        .iter()
        .map(|row| serde_json::from_str::<Value>(&row.event).unwrap())
        .collect()
}

/// The binding digest each approval of the pathway recorded, oldest first.
fn approval_bindings(dir: &TempDir, id: &str) -> Vec<Option<String>> {
    events(dir, id)
        .into_iter()
        .filter(|e| e["kind"] == "approval_granted")
        .map(|e| e["data"]["binding_digest"].as_str().map(str::to_owned))
        .collect()
}

/// JSON-RPC's rule, as every server of this crate keeps it (`rpr::jsonrpc::server`): a
/// response is never answered, not even a malformed one; a malformed request is.
#[test]
fn a_malformed_response_from_the_client_is_never_answered() {
    let (_dir, _, gate) = fault_setup("gate-bad-response", "none", &[]);
    let (mut child, mut stdin, mut stdout) = raw_session(&gate);
    // A response whose error has no message, then a request whose method is not a string.
    writeln!(
        stdin,
        r#"{{"jsonrpc": "2.0", "id": 5, "error": {{"code": 1}}}}"#
    )
    .unwrap();
    writeln!(stdin, r#"{{"jsonrpc": "2.0", "id": 6, "method": 7}}"#).unwrap();
    writeln!(stdin, r#"{{"jsonrpc": "2.0", "id": 8, "method": "ping"}}"#).unwrap();
    let first = next_message(&mut stdout);
    assert_eq!(
        first["id"], 6,
        "the malformed request is answered first, the response never: {first}"
    );
    assert_eq!(first["error"]["code"], -32600, "{first}");
    let second = next_message(&mut stdout);
    assert_eq!(second["id"], 8, "{second}");
    drop(stdin);
    child.wait().unwrap();
}

/// Calls `tool` through a new gate, waits until its attempt is recorded (in flight), then
/// kills the gate: the pathway's id.
fn kill_mid_call(dir: &TempDir, gate: &[String], tool: &str, args: &Value) -> String {
    let (mut child, mut stdin, _stdout) = raw_session(gate);
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": args}});
    writeln!(stdin, "{call}").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let id = loop {
        assert!(Instant::now() < deadline, "no attempt was recorded");
        if let Ok(s) = ReadStore::open_read_only(&dir.join("rpr.db"))
            && let Ok(Some(p)) = s
                .list_pathways(None, 10, Some(State::Running))
                .map(|v| v.into_iter().next())
        {
            break p.id;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);
    id
}

/// The requests the fault server logged (`--request-log PATH`) so far.
fn logged_requests(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Waits until the fault server logged a `tools/call`.
fn await_server_call(log: &Path) {
    await_logged(log, "tools/call");
}

/// Waits (up to 20 s) until the fault server logged a message of `method`.
fn await_logged(log: &Path, method: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !logged_requests(log).iter().any(|r| r["method"] == method) {
        assert!(Instant::now() < deadline, "the server got no {method}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A `tools/call` without an `id` (a JSON-RPC notification) is neither a governed call nor an
/// MCP notification: the gate drops it. A server built on a generic JSON-RPC library runs a
/// notification's method, so passing it on would send a write with no record before it.
/// The client notification after it is passed on, so the server's log, read once that one
/// arrived, shows everything the gate passed before it.
#[test]
fn a_tools_call_sent_as_a_notification_never_reaches_the_server() {
    let dir = TempDir::new("gate-call-notification");
    let policy = fault_policy(&dir);
    let log = dir.join("requests.jsonl");
    let log_arg = log.display().to_string();
    let gate = fault_gate(&dir, &policy, "none", &["--request-log", &log_arg]);
    let (mut child, mut stdin, _stdout) = raw_session(&gate);
    for name in ["put", "get"] {
        let unnamed = json!({"jsonrpc": "2.0", "method": "tools/call",
            "params": {"name": name, "arguments": {"key": "k", "value": "v"}}});
        writeln!(stdin, "{unnamed}").unwrap();
    }
    let after = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
    writeln!(stdin, "{after}").unwrap();
    await_logged(&log, "notifications/roots/list_changed");
    let calls: Vec<Value> = logged_requests(&log)
        .into_iter()
        .filter(|r| r["method"] == "tools/call")
        .collect();
    assert!(calls.is_empty(), "passed to the server: {calls:?}");
    assert_eq!(effects(&dir), 0);
    assert_eq!(pathway_count(&dir), 0, "nothing was proposed for it either");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Issue 26: a read changes nothing. Its attempt and outcome are recorded together once the
/// server answered, so a read in flight when its gate dies leaves no record at all (and no
/// effect), and the identical read after the restart is a new call that completes. The
/// ledger checks clean.
#[test]
fn a_read_in_flight_when_its_gate_dies_leaves_no_record_and_the_same_read_is_a_new_call() {
    let dir = TempDir::new("gate-kill-read");
    let policy = fault_policy(&dir);
    let log = dir.join("requests.jsonl");
    let log_arg = log.display().to_string();
    let gate = fault_gate(
        &dir,
        &policy,
        "slow",
        &[
            "--sleep-ms",
            "1500",
            "--fault-on",
            "get",
            "--request-log",
            &log_arg,
        ],
    );
    let args = json!({"key": "k"});
    let (mut child, mut stdin, _stdout) = raw_session(&gate);
    let call_line = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "get", "arguments": args}});
    writeln!(stdin, "{call_line}").unwrap();
    await_server_call(&log);
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);
    assert_eq!(
        pathway_count(&dir),
        0,
        "the read was out, unanswered: nothing of it is recorded"
    );

    let client = connect(&gate);
    let again = result(call(&client, "get", &args));
    assert_ne!(again["isError"], true, "{again}");
    let new_id = meta_id(&again);
    assert_eq!(state(&dir, &new_id), State::Completed);
    assert_eq!(pathway_count(&dir), 1);
    client.shutdown();
    let db = dir.join("rpr.db").display().to_string();
    let out = rpr(&["verify", "--database", &db]);
    assert!(out.status.success(), "{}", text(&out));
}

/// Issue 26: the gate restarts a crashed server from the thread of the request that
/// found it dead; the restarted server must not die with that thread. One crash costs
/// one restart, and every read after it is answered.
#[test]
fn one_server_crash_costs_one_restart_and_every_later_read_is_answered() {
    let (_dir, _, gate) = fault_setup("gate-restart", "crash-after-effect", &[]);
    let client = connect(&gate);
    let crashed = result(call(&client, "put", &json!({"key": "k", "value": "v1"})));
    assert_eq!(crashed["isError"], true, "{crashed}");
    for i in 0..12 {
        std::thread::sleep(Duration::from_millis(200));
        let read = result(call(&client, "get", &json!({"key": "k"})));
        assert_ne!(read["isError"], true, "read {i} failed: {read}");
    }
    let log = client.session().stderr_tail();
    let starts = log.matches("started (pid").count();
    assert_eq!(starts, 2, "the first start and one restart:\n{log}");
    client.shutdown();
}

#[test]
fn a_gate_killed_mid_call_and_relaunched_lists_the_call_and_never_resends_it() {
    let (dir, _, gate) = fault_setup("gate-kill", "slow", &["--sleep-ms", "1500"]);
    let args = json!({"key": "k", "value": "v1"});
    let id = kill_mid_call(&dir, &gate, "put", &args);
    std::thread::sleep(Duration::from_millis(2500)); // past the server's sleep

    let after_kill = effects(&dir);
    assert!(after_kill <= 1);
    let client = connect(&gate);
    let log = client.session().stderr_tail();
    assert!(
        log.contains(&id) && log.contains("will not be sent again"),
        "the relaunched gate lists it: {log}"
    );
    assert_eq!(state(&dir, &id), State::WriteStatusUnknown);
    let repeat = result(call(&client, "put", &args));
    assert_eq!(repeat["isError"], true, "{repeat}");
    assert_eq!(meta_id(&repeat), id);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(effects(&dir), after_kill, "nothing was resent");
    client.shutdown();
}

#[test]
fn a_changed_tool_is_refused_until_rpr_pin_names_its_digest() {
    let (dir, policy, v1) = fault_setup("gate-pin", "none", &["--server-version", "1.0"]);
    let client = connect(&v1);
    assert_ne!(
        result(call(&client, "get", &json!({"key": "k"})))["isError"],
        true
    );
    client.shutdown();
    let before = pathway_count(&dir);

    let v2 = fault_gate(&dir, &policy, "none", &["--server-version", "2.0"]);
    let client = connect(&v2);
    let digest = refused_get_digest(&client);
    assert_eq!(
        pathway_count(&dir),
        before,
        "a refused call records no pathway"
    );

    let wrong = pin_get(&dir, "00");
    assert!(!wrong.status.success(), "a digest nobody saw is not pinned");
    let pinned = pin_get(&dir, &digest);
    assert!(pinned.status.success(), "{}", text(&pinned));
    let ok = result(call(&client, "get", &json!({"key": "k"})));
    assert_ne!(ok["isError"], true, "{ok}");
    client.shutdown();
}

/// Issue 26 (the gate's cost): a write is bound to the list its pin was checked in and
/// the tools are listed once more, right before the send. A tool changed after the gate's
/// list (here: at the next `tools/list`) is not sent.
#[test]
fn a_write_whose_tool_changed_after_its_pin_check_is_not_sent() {
    let (dir, _, gate) = fault_setup("gate-at-send", "change-schema", &["--lists-before", "1"]);
    let client = connect(&gate);
    let reply = result(call(&client, "put", &json!({"key": "k", "value": "v"})));
    assert_eq!(reply["isError"], true, "{reply}");
    let said = reply["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        said.contains("nothing was sent") || said.contains("not sent"),
        "{said}"
    );
    assert_eq!(effects(&dir), 0, "nothing was sent");
    client.shutdown();
}

#[test]
fn a_read_tool_changed_mid_session_is_refused_once_the_server_says_its_tools_changed() {
    // A read-only call is bound to the tool list the gate holds; the server's
    // `notifications/tools/list_changed` makes the gate list again before the next call.
    let (dir, _policy, gate) = fault_setup("gate-list-changed", "change-read-notify", &[]);
    let client = connect(&gate);
    let first = result(call(&client, "get", &json!({"key": "k"})));
    assert_ne!(first["isError"], true, "{first}");
    // The gate marks its list stale before it passes the notification on: once the client
    // has it, the gate knows.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !client
        .session()
        .take_notifications()
        .iter()
        .any(|n| n.method == "notifications/tools/list_changed")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the gate never passed list_changed on"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = pathway_count(&dir);
    let refused = result(call(&client, "get", &json!({"key": "k"})));
    assert_eq!(refused["isError"], true, "{refused}");
    let said = refused["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("not the one pinned") && said.contains("tool_digest"),
        "{said}"
    );
    assert_eq!(
        pathway_count(&dir),
        before,
        "the refused read recorded nothing"
    );
    client.shutdown();
}

/// `rpr gate --name mutable` in front of `tests/peers/mutable_server.py`, its files in `dir`
/// (`get`'s description from `description.txt`; `hold` holds its `tools/list`), under the
/// fault policy's rules: `put` read back by `get`.
fn mutable_gate(dir: &TempDir) -> Vec<String> {
    mutable_gate_with(dir, "allow", "hold")
}

/// [`mutable_gate`] with `put`'s `admission` and the name of the file that holds the
/// server's `tools/list`.
fn mutable_gate_with(dir: &TempDir, admission: &str, hold: &str) -> Vec<String> {
    let policy = write_policy(
        dir,
        &json!({"servers": {"mutable": {
            "get": {"read_only": true},
            "put": {"admission": admission, "readback": {"tool": "get", "arguments": {"key": "$key"},
                    "expect": {"/structuredContent/value": "$value"}}}}}}),
    );
    let file = |name: &str| format!("{}", dir.join(name).display());
    let server = vec![
        "/usr/bin/env".to_owned(),
        format!("STATE={}", file("state.json")),
        format!("EFFECTS={}", file("effects.jsonl")),
        format!("CALLS={}", file("calls.txt")),
        format!("DESCRIPTION_FILE={}", file("description.txt")),
        format!("HOLD_FILE={}", file(hold)),
        peers().python.display().to_string(),
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/peers/mutable_server.py")
            .display()
            .to_string(),
    ];
    gate_argv(dir, &policy, "mutable", &server)
}

/// How often the server behind `mutable_gate` was called with `tool`.
fn calls_of(dir: &TempDir, tool: &str) -> usize {
    std::fs::read_to_string(dir.join("calls.txt"))
        .map_or(0, |s| s.lines().filter(|l| *l == tool).count())
}

fn error_text(result: &Value) -> &str {
    assert_eq!(result["isError"], true, "{result}");
    result["content"][0]["text"].as_str().unwrap()
}

#[test]
fn a_readback_tool_changed_silently_proves_nothing_and_is_refused_until_pinned() {
    let dir = TempDir::new("gate-reader-changed");
    let client = connect(&mutable_gate(&dir));
    let first = result(call(&client, "put", &json!({"key": "a", "value": "1"})));
    assert_eq!(state(&dir, &meta_id(&first)), State::Completed, "{first}");
    assert_eq!(calls_of(&dir, "get"), 1);

    // `get` changes, and the server says nothing: the gate's list still shows it as pinned.
    std::fs::write(
        dir.join("description.txt"),
        "Read a value, and more besides.",
    )
    .unwrap();
    let second = result(call(&client, "put", &json!({"key": "b", "value": "2"})));
    let said = error_text(&second);
    assert!(
        said.contains("The readback proved nothing: the readback tool `get` of server `mutable` is not the one pinned (changed: ")
            && said.contains("it was not called"),
        "{said}"
    );
    assert_eq!(
        state(&dir, &meta_id(&second)),
        State::WriteStatusUnknown,
        "sent, and not proven by a tool nobody reviewed"
    );
    assert_eq!(effects(&dir), 2);
    assert_eq!(calls_of(&dir, "get"), 1, "the changed tool was not called");

    // Called directly, the changed tool is refused until it is pinned.
    let read = result(call(&client, "get", &json!({"key": "b"})));
    assert!(
        error_text(&read).contains("is not the one pinned"),
        "{read}"
    );
    // A write read back through it is refused before anything is recorded or sent.
    let before = pathway_count(&dir);
    let third = result(call(&client, "put", &json!({"key": "c", "value": "3"})));
    assert!(
        error_text(&third).contains("A readback of `put` through it would prove nothing"),
        "{third}"
    );
    assert_eq!(pathway_count(&dir), before);
    assert_eq!(effects(&dir), 2);
    assert_eq!(calls_of(&dir, "get"), 1);

    // Nor does a reconciliation read back through it.
    let db = dir.join("rpr.db").display().to_string();
    let policy = dir.join("policy.json").display().to_string();
    let unknown = meta_id(&second);
    let reconcile = [
        "reconcile",
        "--database",
        &db,
        "--policy",
        &policy,
        "--pathway",
        &unknown,
    ];
    let refused = rpr(&reconcile);
    assert!(
        text(&refused)
            .contains("the readback tool `get` of server `mutable` is not the one pinned"),
        "{}",
        text(&refused)
    );
    assert_eq!(state(&dir, &unknown), State::WriteStatusUnknown);
    assert_eq!(calls_of(&dir, "get"), 1);

    // Pinned by an operator, by the digest the answer named: the reconciliation reads the
    // effect back, and the next write completes.
    let pinned = pin(&dir, "mutable", "get", named_digest(said));
    assert!(pinned.status.success(), "{}", text(&pinned));
    let reconciled = rpr(&reconcile);
    assert!(reconciled.status.success(), "{}", text(&reconciled));
    assert_eq!(state(&dir, &unknown), State::Completed);
    let fourth = result(call(&client, "put", &json!({"key": "c", "value": "3"})));
    assert_eq!(state(&dir, &meta_id(&fourth)), State::Completed, "{fourth}");
    assert_eq!(effects(&dir), 3);
    client.shutdown();
}

#[test]
fn the_gate_that_loses_a_race_for_an_approved_pathway_says_who_took_it() {
    // One approved pathway, two gates on one database. Gate A loads it approved and is held
    // inside its bind (its server's `tools/list` waits); gate B sends it meanwhile. When A
    // goes on, its attempt record loses the compare-and-set: it sent nothing, and the
    // pathway is no longer approved.
    let dir = TempDir::new("gate-race-lost");
    let gate_a = mutable_gate_with(&dir, "hold", "hold-a");
    let gate_b = mutable_gate_with(&dir, "hold", "hold-b");
    let args = json!({"key": "k", "value": "v"});
    let a = connect(&gate_a);
    let held = result(call(&a, "put", &args));
    let id = meta_id(&held);
    assert_eq!(state(&dir, &id), State::AwaitingApproval, "{held}");
    let db = dir.join("rpr.db").display().to_string();
    let approved = rpr(&[
        "approve",
        "--database",
        &db,
        "--pathway",
        &id,
        "--as",
        "host",
    ]);
    assert_eq!(approved.status.code(), Some(3), "{}", text(&approved));

    std::fs::write(dir.join("hold-a"), "").unwrap();
    let (lost, won) = std::thread::scope(|s| {
        let lost = s.spawn(|| result(call(&a, "put", &args)));
        let deadline = Instant::now() + Duration::from_secs(30);
        while !dir.join("hold-a.waiting").exists() {
            assert!(Instant::now() < deadline, "gate A never reached its bind");
            std::thread::sleep(Duration::from_millis(20));
        }
        let b = connect(&gate_b);
        let won = result(call(&b, "put", &args));
        let b_pid = b.session().pid();
        b.shutdown();
        std::fs::remove_file(dir.join("hold-a")).unwrap();
        (lost.join().unwrap(), (won, b_pid))
    });
    let (won, b_pid) = won;
    assert_eq!(state(&dir, &meta_id(&won)), State::Completed, "{won}");
    assert_eq!(effects(&dir), 1, "sent once");
    let said = error_text(&lost);
    assert!(
        said.contains(&format!(
            "another process took pathway {id} first: it is now completed"
        )) && said.contains(&format!("by process {b_pid} on "))
            && said.contains("this call sent nothing"),
        "{said}"
    );
    assert!(!said.contains("stays approved"), "{said}");
    assert_eq!(
        lost["_meta"]["dev.rpr/pathway"]["state"], "completed",
        "{lost}"
    );
    a.shutdown();
}

#[test]
fn bad_input_gets_clear_errors_and_records_nothing() {
    let (dir, policy, gate) = fault_setup("gate-bad", "none", &[]);
    let client = connect(&gate);
    // Unknown tool: a JSON-RPC error, as the spec asks.
    match call(&client, "nope", &json!({})) {
        Reply::Error(e) => assert!(e.message.contains("Unknown tool"), "{e:?}"),
        Reply::Result(r) => panic!("expected an error: {r}"),
    }
    // Arguments failing the schema: a tool error; nothing recorded or sent.
    let bad = result(call(&client, "put", &json!({"key": 5})));
    assert_eq!(bad["isError"], true);
    assert!(
        bad["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("input schema")
    );
    assert_eq!(pathway_count(&dir), 0);
    assert_eq!(effects(&dir), 0);
    client.shutdown();

    // A malformed policy: exit 1 with the reason, before anything starts.
    let broken = dir.join("broken.json");
    std::fs::write(
        &broken,
        "{\"servers\": {\"faults\": {\"put\": {\"human_gat\": true}}}}",
    )
    .unwrap();
    let out = run_gate(&fault_gate(&dir, &broken, "none", &[]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("policy"), "{}", text(&out));
    assert!(
        out.stdout.is_empty(),
        "stdout carries protocol messages only"
    );

    // A server that does not start, and one that prints garbage: initialize fails clearly.
    for server in [
        vec!["/nonexistent/mcp-server".to_owned()],
        vec![
            "sh".to_owned(),
            "-c".to_owned(),
            "echo this is not json; sleep 1".to_owned(),
        ],
    ] {
        let command = gate_command(&gate_argv(&dir, &policy, "faults", &server));
        let err =
            McpClient::connect(&command, &SessionConfig::default()).expect_err("initialize fails");
        let said = err.to_string();
        assert!(said.contains("server behind the gate"), "{said}");
    }
    assert_eq!(pathway_count(&dir), 0);
}

#[test]
fn the_gate_elicits_only_from_a_client_that_declared_elicitation() {
    let (_dir, root, gate) = files_setup("gate-declared");
    let command = gate_command(&gate);
    for declare in [false, true] {
        let asked: std::sync::Arc<std::sync::Mutex<Vec<String>>> = std::sync::Arc::default();
        let mut config = SessionConfig::default();
        if declare {
            config.client_capabilities = json!({"elicitation": {"form": {}}});
        }
        let log = std::sync::Arc::clone(&asked);
        config.on_request = Some(std::sync::Arc::new(
            move |request: rpr::jsonrpc::Request, responder: rpr::mcp::Responder| {
                log.lock().unwrap().push(request.method);
                responder.respond(Ok(json!({"action": "cancel"})));
            },
        ));
        let client = McpClient::connect(&command, &config).unwrap();
        let path = root.join(format!("declared-{declare}.txt"));
        let out = result(call(
            &client,
            "write_file",
            &json!({"path": path, "content": "x"}),
        ));
        assert_eq!(out["isError"], true);
        let said = out["content"][0]["text"].as_str().unwrap();
        let asked = asked.lock().unwrap().clone();
        if declare {
            assert_eq!(asked, ["elicitation/create"]);
            assert!(said.contains("cancelled"), "{said}");
        } else {
            assert!(asked.is_empty(), "{asked:?}");
            assert!(said.contains("declared no form elicitation"), "{said}");
        }
        assert!(!path.exists());
        client.shutdown();
    }
}

/// Issue 26: a call waiting at a Human Gate form holds up only calls of its own identity.
/// While the form of a write is open, an unrelated read is answered and an identical write
/// waits for that form instead of raising a second one; after the one approval the file is
/// written once and both identical calls get its result.
#[test]
fn a_form_left_open_holds_up_only_its_own_identity_and_identical_calls_share_it() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc::channel;
    use std::sync::{Arc, Mutex};

    let (_dir, root, gate) = files_setup("gate-turns");
    let note = root.join("note.txt");
    std::fs::write(&note, "hello").unwrap();
    let (opened, form_opened) = channel::<()>();
    let (approve, approval) = channel::<()>();
    let (opened, approval) = (Mutex::new(opened), Arc::new(Mutex::new(approval)));
    let forms = Arc::new(AtomicUsize::new(0));
    let mut config = SessionConfig::default();
    config.request_timeout = Duration::from_mins(1);
    config.client_capabilities = json!({"elicitation": {"form": {}}});
    // A 2025-era session: the gate asks it with `elicitation/create` and holds the call
    // open meanwhile (a 2026-07-28 client is asked by `input_required` instead).
    config.accepted_versions = rpr::mcp::LEGACY_VERSIONS
        .iter()
        .map(|v| (*v).to_owned())
        .collect();
    let counted = Arc::clone(&forms);
    config.on_request = Some(Arc::new(
        move |_: rpr::jsonrpc::Request, responder: rpr::mcp::Responder| {
            counted.fetch_add(1, Ordering::SeqCst);
            let (opened, approval) = (opened.lock().unwrap().clone(), Arc::clone(&approval));
            // The person takes their time: the form stays open until the test approves.
            std::thread::spawn(move || {
                let _ = opened.send(());
                let _ = approval
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_mins(1));
                responder.respond(Ok(
                    json!({"action": "accept", "content": {"approve": true}}),
                ));
            });
        },
    ));
    let client = Arc::new(McpClient::connect(&gate_command(&gate), &config).unwrap());
    let args = json!({"path": root.join("w.txt"), "content": "W"});
    let write = |client: &Arc<McpClient>| {
        let (client, args) = (Arc::clone(client), args.clone());
        std::thread::spawn(move || result(call(&client, "write_file", &args)))
    };
    let first = write(&client);
    form_opened
        .recv_timeout(Duration::from_secs(30))
        .expect("the write's form was raised");
    let second = write(&client);
    std::thread::sleep(Duration::from_millis(500));
    let (read_done, read) = channel();
    let reader = Arc::clone(&client);
    std::thread::spawn(move || {
        let _ = read_done.send(result(call(
            &reader,
            "read_text_file",
            &json!({"path": note}),
        )));
    });
    let read = read
        .recv_timeout(Duration::from_secs(20))
        .expect("an unrelated read was held up by a form left open");
    assert_ne!(read["isError"], true, "{read}");
    assert!(read.to_string().contains("hello"), "{read}");
    approve.send(()).unwrap();
    let (first, second) = (first.join().unwrap(), second.join().unwrap());
    for answer in [&first, &second] {
        assert_ne!(answer["isError"], true, "{answer}");
    }
    assert_eq!(meta_id(&first), meta_id(&second), "one pathway for both");
    assert_eq!(forms.load(Ordering::SeqCst), 1, "one form for both calls");
    assert_eq!(std::fs::read_to_string(root.join("w.txt")).unwrap(), "W");
    let _ = approve.send(());
}

/// Issue 26: a read that failed does not block that read for good. `read_text_file` of a
/// missing file fails; once the file exists the identical read is sent again (a new
/// pathway) and answered with the content.
#[test]
fn an_identical_read_after_a_failed_read_is_a_new_call() {
    let (dir, root, gate) = files_setup("gate-read-again");
    let client = connect(&gate);
    let path = root.join("later.txt");
    let args = json!({"path": path});
    let missing = result(call(&client, "read_text_file", &args));
    assert_eq!(missing["isError"], true, "{missing}");
    let failed = meta_id(&missing);
    assert_eq!(missing["_meta"]["dev.rpr/pathway"]["state"], "failed");
    assert_eq!(
        state(&dir, &failed),
        State::Failed,
        "a read that failed is closed"
    );
    std::fs::write(&path, "arrived").unwrap();
    let again = result(call(&client, "read_text_file", &args));
    assert_ne!(
        again["isError"], true,
        "the read was not sent again: {again}"
    );
    assert!(again.to_string().contains("arrived"), "{again}");
    let id = meta_id(&again);
    assert_ne!(id, failed, "a new pathway");
    assert_eq!(state(&dir, &id), State::Completed);
    client.shutdown();
}

/// Issue 26: MCP's cancellation, for a governed call and a request passed through. The
/// client's `notifications/cancelled` reaches the server under the id the gate used there
/// (once: no second cancellation at the timeout), the client gets no answer to either
/// cancelled request, and the governed call, which the server never answers, stays
/// unknown (it wrote before the cancellation came).
#[test]
fn the_clients_cancellation_reaches_the_server_and_the_call_stays_unknown() {
    let dir = TempDir::new("gate-cancel");
    let policy = fault_policy(&dir);
    let log = dir.join("cancelled.log");
    let log_arg = log.display().to_string();
    // A short call timeout: the server never answers.
    let gate = with_call_timeout(
        fault_gate(&dir, &policy, "never-reply", &["--cancel-log", &log_arg]),
        3,
    );
    let (mut child, mut stdin, mut stdout) = raw_session(&gate);
    let put = json!({"jsonrpc": "2.0", "id": "call-7", "method": "tools/call",
        "params": {"name": "put", "arguments": {"key": "k", "value": "v"}}});
    writeln!(stdin, "{put}").unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while effects(&dir) == 0 {
        assert!(
            Instant::now() < deadline,
            "the call never reached the server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A request passed through, which the fault server never answers.
    let hang = json!({"jsonrpc": "2.0", "id": "hang-1", "method": "rpr-fault/hang"});
    writeln!(stdin, "{hang}").unwrap();
    // Sent on before it is cancelled (a request cancelled before that is not sent on).
    std::thread::sleep(Duration::from_millis(500));
    let cancels = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let logged = std::fs::read_to_string(&log).unwrap_or_default();
            if logged.lines().count() >= n {
                return logged;
            }
            assert!(Instant::now() < deadline, "cancellations seen: {logged}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    for id in ["call-7", "hang-1"] {
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "user pressed stop"}});
        writeln!(stdin, "{cancel}").unwrap();
    }
    let id = await_only_pathway(&dir);
    await_state(&dir, &id, State::WriteStatusUnknown);
    // The passed-through request waits as long (the same timeout) and started later.
    std::thread::sleep(Duration::from_secs(1));
    answers_nothing_before_a_ping(&mut stdin, &mut stdout);
    let cancelled: Vec<Value> = cancels(2)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(cancelled.len(), 2, "one cancellation each: {cancelled:?}");
    for c in &cancelled {
        assert!(
            c["requestId"] != "call-7" && c["requestId"] != "hang-1",
            "with the server's id, not the client's: {c}"
        );
        assert_eq!(
            c["reason"], "cancelled by the client: user pressed stop",
            "the client's cancellation, not the timeout's: {c}"
        );
    }
    assert_eq!(effects(&dir), 1);
    drop(stdin);
    child.wait().unwrap();
}

/// Issue 26: a governed call whose answer arrives after the client cancelled it: that
/// answer is its outcome (here read back and completed), and the client gets no answer.
#[test]
fn a_cancelled_call_the_server_answers_anyway_is_recorded_and_not_answered() {
    let (dir, _, gate) = fault_setup("gate-cancel-late", "slow", &["--sleep-ms", "1500"]);
    let (mut child, mut stdin, mut stdout) = raw_session(&gate);
    let put = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "put", "arguments": {"key": "k", "value": "late"}}});
    writeln!(stdin, "{put}").unwrap();
    let id = await_only_pathway(&dir);
    await_state(&dir, &id, State::Running);
    // The attempt is recorded just before the request is written: give it that moment.
    std::thread::sleep(Duration::from_millis(300));
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 8}});
    writeln!(stdin, "{cancel}").unwrap();
    await_state(&dir, &id, State::Completed);
    answers_nothing_before_a_ping(&mut stdin, &mut stdout);
    assert_eq!(effects(&dir), 1);
    drop(stdin);
    child.wait().unwrap();
}

/// Issue 26: a read the client cancelled, which the server never answers, ends failed,
/// "cancelled by the client", and is not answered. (Nothing of it is recorded while it is
/// out: its attempt and outcome are recorded together when it ends.)
#[test]
fn a_cancelled_read_ends_failed_cancelled_by_the_client() {
    let dir = TempDir::new("gate-cancel-read");
    let policy = fault_policy(&dir);
    let log = dir.join("requests.jsonl");
    let log_arg = log.display().to_string();
    let gate = fault_gate(
        &dir,
        &policy,
        "never-reply",
        &["--fault-on", "get", "--request-log", &log_arg],
    );
    let gate = with_call_timeout(gate, 2);
    let (mut child, mut stdin, mut stdout) = raw_session(&gate);
    let get = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "get", "arguments": {"key": "k"}}});
    writeln!(stdin, "{get}").unwrap();
    await_server_call(&log);
    assert_eq!(
        pathway_count(&dir),
        0,
        "nothing recorded while the read is out"
    );
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 9}});
    writeln!(stdin, "{cancel}").unwrap();
    let id = await_only_pathway(&dir);
    await_state(&dir, &id, State::Failed);
    answers_nothing_before_a_ping(&mut stdin, &mut stdout);
    let attempt = store(&dir).attempts(&id).unwrap().pop().unwrap();
    let why = attempt.outcome.unwrap().to_string();
    assert!(why.contains("cancelled by the client"), "{why}");
    drop(stdin);
    child.wait().unwrap();
}

/// Issue 26: a read that errors, is rejected, times out or is cut off ends `failed`, with
/// its reason in the client's answer and the attempt's record (not `repair_required` or
/// unknown, which nothing could settle); the identical read after it is a new pathway.
#[test]
fn a_read_that_errors_times_out_or_is_cut_off_ends_failed_with_its_reason() {
    for (fault, reason) in [
        ("is-error", "injected tool failure on get"),
        ("rpc-error", "injected rpc-error on get"),
        ("never-reply", "got no reply within"),
        ("crash-after-read", "no usable reply arrived"),
    ] {
        let (dir, _, gate) =
            fault_setup(&format!("gate-read-{fault}"), fault, &["--fault-on", "get"]);
        let client = connect(&with_call_timeout(gate, 2));
        let args = json!({"key": "k"});
        let answer = |reply: Reply| match reply {
            Reply::Result(r) => (r["_meta"]["dev.rpr/pathway"].clone(), r.to_string()),
            Reply::Error(e) => {
                let data = e.data.clone().unwrap_or_default();
                (data["dev.rpr/pathway"].clone(), e.message)
            }
        };
        let (pathway, said) = answer(call(&client, "get", &args));
        assert_eq!(pathway["state"], "failed", "{fault}: {said}");
        assert!(said.contains(reason), "{fault}: {said}");
        let id = pathway["id"].as_str().unwrap().to_owned();
        assert_eq!(state(&dir, &id), State::Failed, "{fault}");
        let attempt = store(&dir).attempts(&id).unwrap().pop().unwrap();
        let recorded = attempt.outcome.unwrap().to_string();
        assert!(recorded.contains(reason), "{fault}: {recorded}");
        let (again, _) = answer(call(&client, "get", &args));
        assert_ne!(
            again["id"], pathway["id"],
            "{fault}: the read again is a new call"
        );
        assert_eq!(state(&dir, again["id"].as_str().unwrap()), State::Failed);
        client.shutdown();
        let db = dir.join("rpr.db").display().to_string();
        let verified = rpr(&["verify", "--database", &db]);
        assert!(verified.status.success(), "{fault}: {}", text(&verified));
    }
}

/// Issue 26: the client's own elicitation capability reaches the server as declared, so a
/// server offers URL mode; its `elicitation/create` in URL mode and its
/// `notifications/elicitation/complete` pass through the gate.
#[test]
fn url_mode_elicitation_is_declared_as_the_client_declared_it_and_passes_through() {
    let (dir, _, gate) = fault_setup("gate-url-elicit", "elicit-url", &[]);
    let declared = json!({"elicitation": {"form": {}, "url": {}}});
    let (mut child, mut stdin, mut stdout, _) = raw_session_declaring(&gate, &declared);
    let get = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "get", "arguments": {"key": "k"}}});
    writeln!(stdin, "{get}").unwrap();
    let ask = next_message(&mut stdout);
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert_eq!(ask["params"]["mode"], "url", "{ask}");
    assert_eq!(
        ask["params"]["url"],
        "https://example.com/authorize?state=fault"
    );
    let answer = json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept"}});
    writeln!(stdin, "{answer}").unwrap();
    let mut complete = None;
    let result = loop {
        let message = next_message(&mut stdout);
        if message["method"] == "notifications/elicitation/complete" {
            complete = Some(message);
        } else if message["id"] == 5 {
            break message;
        }
    };
    let complete = complete.expect("the completion notification reached the client");
    assert_eq!(complete["params"]["elicitationId"], "fault-elicitation-1");
    assert_eq!(
        result["result"]["structuredContent"]["value"], "accept",
        "{result}"
    );
    assert_eq!(state(&dir, &meta_id(&result["result"])), State::Completed);
    drop(stdin);
    child.wait().unwrap();
}

/// Issue 26: the gate does not govern tasks. It does not mirror the server's `tasks`
/// capability; a task-augmented `tools/call` gets a JSON-RPC error saying so, and a tool
/// that can only run as a task is refused; neither records a pathway.
#[test]
fn tasks_are_not_advertised_and_a_task_call_is_refused_without_a_pathway() {
    let dir = TempDir::new("gate-tasks");
    let policy = dir.join("policy.json");
    std::fs::write(
        &policy,
        json!({"servers": {"everything": {"echo": {"read_only": true}}}}).to_string(),
    )
    .unwrap();
    let p = peers();
    let everything = vec![
        p.node.display().to_string(),
        p.dir
            .join("node_modules/.bin/mcp-server-everything")
            .display()
            .to_string(),
        "stdio".into(),
    ];
    let gate = gate_argv(&dir, &policy, "everything", &everything);
    let (mut child, mut stdin, mut stdout, init) = raw_session_declaring(&gate, &json!({}));
    assert!(init["capabilities"].get("tools").is_some(), "{init}");
    assert!(
        init["capabilities"].get("tasks").is_none(),
        "tasks mirrored: {init}"
    );
    let calls = [
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"message": "hi"}, "task": {"ttl": 60000}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "simulate-research-query", "arguments": {"topic": "x"}, "task": {"ttl": 60000}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "simulate-research-query", "arguments": {"topic": "x"}}}),
    ];
    for call in calls {
        writeln!(stdin, "{call}").unwrap();
        let reply = next_reply(&mut stdout, &call["id"]);
        assert_eq!(reply["id"], call["id"], "{reply}");
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("rpr gate does not govern tasks")
                || message.contains("not governed by rpr gate"),
            "{reply}"
        );
        if call["params"].get("task").is_some() {
            assert_eq!(reply["error"]["code"], -32602, "{reply}");
            assert!(message.contains("without `task`"), "{reply}");
        } else {
            assert_eq!(reply["error"]["code"], -32601, "{reply}");
        }
    }
    assert_eq!(pathway_count(&dir), 0, "no pathway recorded");
    // A plain call of the same tool is governed as usual.
    let plain = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {
        "name": "echo", "arguments": {"message": "hi"}}});
    writeln!(stdin, "{plain}").unwrap();
    let reply = next_reply(&mut stdout, &json!(6));
    assert_eq!(
        state(&dir, &meta_id(&reply["result"])),
        State::Completed,
        "{reply}"
    );
    drop(stdin);
    child.wait().unwrap();
}

#[test]
fn the_policy_denies_holds_defaults_and_overrules_an_annotation() {
    let dir = TempDir::new("gate-policy");
    let policy = dir.join("policy.json");
    std::fs::write(
        &policy,
        json!({
            "version": 1,
            "authority": {"approval_authority": "alice"},
            "servers": {"faults": {
                "*": {"admission": "deny"},
                "get": {"admission": "hold", "read_only": true},
                "put": {"admission": "allow", "read_only": true}
            }}
        })
        .to_string(),
    )
    .unwrap();
    let gate = fault_gate(&dir, &policy, "none", &[]);
    let client = connect(&gate);
    // `put` is not annotated read-only; the policy says it only reads (its word, its risk):
    // bound and completed as read-only, without a readback.
    let put = result(call(&client, "put", &json!({"key": "k", "value": "v"})));
    assert_ne!(put["isError"], true, "{put}");
    assert_eq!(state(&dir, &meta_id(&put)), State::Completed);
    assert_eq!(effects(&dir), 1);
    // `get` is held for an approval: nothing sent, `rpr approve` named.
    let held = result(call(&client, "get", &json!({"key": "k"})));
    assert_eq!(held["isError"], true);
    assert!(
        held["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("rpr approve")
    );
    assert_eq!(state(&dir, &meta_id(&held)), State::AwaitingApproval);
    client.shutdown();

    // A tool without a rule of its own falls under "*": denied. The fault server has only
    // `put` and `get`; a policy that names neither denies both.
    std::fs::write(
        &policy,
        json!({"servers": {"faults": {"*": {"admission": "deny"}}}}).to_string(),
    )
    .unwrap();
    let client = connect(&gate);
    let denied = result(call(&client, "put", &json!({"key": "k2", "value": "v"})));
    assert_eq!(denied["isError"], true);
    assert!(
        denied["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("denied by the gate's policy")
    );
    assert_eq!(state(&dir, &meta_id(&denied)), State::Denied);
    assert_eq!(effects(&dir), 1, "nothing sent");
    client.shutdown();

    // A policy version this rpr does not read, and both spellings of one rule: refused at start.
    for bad in [
        json!({"version": 2}),
        json!({"servers": {"faults": {"put": {"admission": "allow", "human_gate": true}}}}),
    ] {
        std::fs::write(&policy, bad.to_string()).unwrap();
        let out = run_gate(&gate);
        assert_eq!(out.status.code(), Some(1), "{bad}: {}", text(&out));
        assert!(text(&out).contains("policy"), "{}", text(&out));
    }
}

#[test]
fn each_outcome_is_answered_honestly() {
    // A tool error: the server's own result; a JSON-RPC error: forwarded with the pathway;
    // garbage instead of a reply: the gate's tool error. Each unknown.
    let dir = TempDir::new("gate-outcomes");
    let policy = fault_policy(&dir);
    for (fault, effects_after) in [("is-error", 0), ("rpc-error", 0), ("garbage-reply", 1)] {
        let _ = std::fs::remove_file(dir.join("effects.jsonl"));
        let gate = fault_gate(&dir, &policy, fault, &[]);
        let client = connect(&gate);
        let args = json!({"key": fault, "value": "v"});
        match (fault, call(&client, "put", &args)) {
            ("rpc-error", Reply::Error(e)) => {
                assert_eq!(e.code, -32603, "{e:?}");
                let id = e.data.as_ref().unwrap()["dev.rpr/pathway"]["id"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                assert_eq!(
                    state(&dir, &id),
                    State::WriteStatusUnknown,
                    "an unclassified error code: unknown"
                );
            }
            // A tool error (the server's own result, which does not prove the call did
            // nothing) or garbage (the gate's tool error): unknown, and the identical
            // repeat is not sent.
            ("is-error" | "garbage-reply", Reply::Result(r)) => {
                assert_eq!(r["isError"], true, "{r}");
                let id = meta_id(&r);
                assert_eq!(state(&dir, &id), State::WriteStatusUnknown);
                let again = result(call(&client, "put", &args));
                assert_eq!(
                    meta_id(&again),
                    id,
                    "the repeat is answered from the pathway"
                );
            }
            (_, other) => panic!("{fault}: unexpected {other:?}"),
        }
        assert_eq!(effects(&dir), effects_after, "{fault}");
        client.shutdown();
    }

    // The server says success but the readback does not find the effect: unknown, not completed.
    let lying = dir.join("lying.json");
    std::fs::write(
        &lying,
        json!({"servers": {"faults": {"get": {"read_only": true}, "put": {"human_gate": false, "readback": {
            "tool": "get", "arguments": {"key": "$key"}, "expect": {"/structuredContent/value": "$key"}}}}}})
        .to_string(),
    )
    .unwrap();
    let gate = fault_gate(&dir, &lying, "none", &[]);
    let client = connect(&gate);
    let r = result(call(&client, "put", &json!({"key": "k9", "value": "v9"})));
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("readback did not verify"),
        "{r}"
    );
    assert_eq!(state(&dir, &meta_id(&r)), State::WriteStatusUnknown);
    client.shutdown();
}

#[test]
fn a_client_idempotency_key_names_the_call_and_replays_its_result() {
    let (dir, _, gate) = fault_setup("gate-key", "none", &[]);
    let client = connect(&gate);
    let keyed = |value: &str| {
        let params = json!({"name": "put", "arguments": {"key": "k", "value": value},
            "_meta": {"dev.rpr/idempotency-key": "order-42"}});
        client
            .session()
            .request("tools/call", Some(params), Duration::from_secs(30))
            .unwrap()
    };
    let first = result(keyed("v1"));
    assert_ne!(first["isError"], true, "{first}");
    let id = meta_id(&first);
    assert_eq!(state(&dir, &id), State::Completed);
    // The same key again: the stored result, nothing sent.
    let replay = result(keyed("v1"));
    assert_eq!(meta_id(&replay), id);
    assert_eq!(effects(&dir), 1);
    // The same key with other arguments: refused, nothing sent.
    let reused = result(keyed("v2"));
    assert_eq!(reused["isError"], true);
    let said = reused["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("already used") && said.contains("nothing was sent"),
        "{said}"
    );
    assert_eq!(effects(&dir), 1);
    // Without a key, an identical call after the first completed is a new call.
    let fresh = result(call(&client, "put", &json!({"key": "k", "value": "v1"})));
    assert_ne!(meta_id(&fresh), id);
    assert_eq!(effects(&dir), 2);
    client.shutdown();
}

#[test]
fn two_gates_on_one_database_send_an_identical_call_once() {
    // Two hosts, each with its own gate and server process, the same database and the same
    // effects: the identical call made by both at the same time is sent once.
    let (dir, _, gate) = fault_setup("gate-two", "slow", &["--sleep-ms", "400"]);
    let a = connect(&gate);
    let b = connect(&gate);
    let args = json!({"key": "shared", "value": "once"});
    let barrier = std::sync::Barrier::new(2);
    let (ra, rb) = std::thread::scope(|s| {
        let ta = s.spawn(|| {
            barrier.wait();
            result(call(&a, "put", &args))
        });
        let tb = s.spawn(|| {
            barrier.wait();
            result(call(&b, "put", &args))
        });
        (ta.join().unwrap(), tb.join().unwrap())
    });
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(effects(&dir), 1, "sent once: {ra} / {rb}");
    assert_eq!(meta_id(&ra), meta_id(&rb), "one pathway");
    let completed = [&ra, &rb].iter().filter(|r| r["isError"] != true).count();
    assert_eq!(
        completed, 1,
        "one gate carried it, the other answered from it: {ra} / {rb}"
    );
    a.shutdown();
    b.shutdown();
}

/// Runs `write_file` through the gate from a client that declares form elicitation and
/// declines every form: returns the `elicitation/create` parameters it was sent.
fn elicited_form(gate: &[String], args: &Value) -> Vec<Value> {
    let asked: std::sync::Arc<std::sync::Mutex<Vec<Value>>> = std::sync::Arc::default();
    let mut config = SessionConfig::default();
    config.client_capabilities = json!({"elicitation": {"form": {}}});
    let log = std::sync::Arc::clone(&asked);
    config.on_request = Some(std::sync::Arc::new(
        move |request: rpr::jsonrpc::Request, responder: rpr::mcp::Responder| {
            log.lock()
                .unwrap()
                .push(request.params.unwrap_or(Value::Null));
            responder.respond(Ok(json!({"action": "decline"})));
        },
    ));
    let client = McpClient::connect(&gate_command(gate), &config).unwrap();
    let out = result(call(&client, "write_file", args));
    assert_eq!(out["isError"], true, "declined: {out}");
    client.shutdown();
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1, "one form, then the answer {out}");
    asked
}

#[test]
fn the_gate_form_of_a_long_write_shows_its_path_first_and_marks_the_cut() {
    let (_dir, root, gate) = files_setup("gate-cut-form");
    let path = root.join("authorized_keys");
    let mut content = String::new();
    for n in 1..=420 {
        content.push_str("# a harmless comment line, number ");
        content.push_str(&n.to_string());
        content.push('\n');
    }
    content.push_str("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMallory mallory@elsewhere\n");
    // The client's member order: the content first, the path after it.
    let args = json!({"content": content, "path": path});
    let forms = elicited_form(&gate, &args);
    let message = forms[0]["message"].as_str().unwrap();
    let shown_path = message
        .find(&format!("{:?}", path.display().to_string()))
        .unwrap_or_else(|| panic!("the form does not show the path:\n{message}"));
    let first_line = message
        .find("a harmless comment line")
        .unwrap_or(usize::MAX);
    assert!(
        shown_path < first_line,
        "the path comes after the content:\n{message}"
    );
    let total = content.chars().count();
    assert!(
        message.contains("SUMMARY, NOT THE WHOLE REQUEST"),
        "the cut is not marked:\n{message}"
    );
    assert!(
        message.contains(&format!("of {total} characters shown")),
        "the form does not say how much of the content it shows:\n{message}"
    );
    let digest = rpr::canonical::sha256_hex_bytes(content.as_bytes());
    assert!(
        message.contains(&digest),
        "the form lacks the content's sha256 {digest}:\n{message}"
    );
    assert!(
        message.contains("rpr.get_pathway"),
        "the form does not say how to read the request whole:\n{message}"
    );
    assert!(!path.exists(), "declined: nothing written");
}

#[test]
fn a_server_name_with_escape_sequences_reaches_the_form_escaped() {
    let dir = TempDir::new("gate-esc-form");
    let root = dir.join("files");
    std::fs::create_dir_all(&root).unwrap();
    let name = "\u{1b}[2J\u{1b}[Hfiles";
    let policy = json!({
        "authority": {"approval_authority": "alice"},
        "servers": {name: {
            "read_text_file": {"read_only": true},
            "write_file": {
                "human_gate": true,
                "readback": {
                    "tool": "read_text_file",
                    "arguments": {"path": "$path"},
                    "expect": {"/structuredContent/content": "$content"},
                    "absent_if_error_contains": "ENOENT"
                }
            }
        }}
    });
    let policy_path = dir.join("policy.json");
    std::fs::write(&policy_path, policy.to_string()).unwrap();
    let gate = gate_argv(&dir, &policy_path, name, &filesystem_argv(&root));
    let path = root.join("a.txt");
    let forms = elicited_form(&gate, &json!({"path": path, "content": "x"}));
    let message = forms[0]["message"].as_str().unwrap();
    assert!(
        !message.contains('\u{1b}'),
        "a raw ESC reaches the form: {message:?}"
    );
    assert!(
        message.contains("\\u{1b}[2J\\u{1b}[Hfiles"),
        "the name is not shown escaped: {message:?}"
    );
    assert!(!path.exists());
}

/// Writes `policy` as `policy.json` in `dir`.
fn write_policy(dir: &TempDir, policy: &Value) -> PathBuf {
    let path = dir.join("policy.json");
    std::fs::write(&path, policy.to_string()).unwrap();
    path
}

/// One `tools/call` typed by hand to the gate's argv (`initialize` first), stdin closed
/// after it: the gate's whole stdout, its stderr, and how it exited. Works whether the
/// gate serves or refuses to start.
fn one_raw_call(gate: &[String], tool: &str, args: &Value) -> (String, String, Option<i32>) {
    let mut child = Command::new(&gate[0])
        .args(&gate[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}),
    ];
    // A gate that refused to start has closed its stdin: the writes may fail.
    for line in lines {
        let _ = writeln!(stdin, "{line}");
    }
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut out = String::new();
    let mut line = String::new();
    while stdout.read_line(&mut line).unwrap_or(0) > 0 {
        let done = line.contains("\"id\":2");
        out.push_str(&line);
        line.clear();
        if done {
            break;
        }
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    (
        out,
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status.code(),
    )
}

#[test]
fn a_writing_tool_that_claims_read_only_is_gated_by_the_policy_not_its_claim() {
    // `put` writes, and says `readOnlyHint: true`. The policy has no rule for it: a claim
    // is no rule, so it is treated as changing state and nothing is sent without a readback.
    let dir = TempDir::new("gate-claim");
    let policy = write_policy(
        &dir,
        &json!({"servers": {"faults": {"get": {"read_only": true}}}}),
    );
    let gate = fault_gate(&dir, &policy, "none", &["--claim-read-only"]);
    let client = connect(&gate);
    let args = json!({"key": "k", "value": "v"});
    for _ in 0..2 {
        let refused = result(call(&client, "put", &args));
        assert_eq!(refused["isError"], true, "{refused}");
        let said = refused["content"][0]["text"].as_str().unwrap();
        assert!(
            said.contains("no rule") && said.contains("servers.faults.put"),
            "the refusal names the rule to add: {said}"
        );
    }
    assert_eq!(effects(&dir), 0, "the claim sent nothing");
    assert_eq!(
        pathway_count(&dir),
        0,
        "refused before anything is recorded"
    );
    client.shutdown();

    // With a readback but no word on its class or admission: changing state, so a Human
    // Gate (this client has no elicitation: it waits for `rpr approve`); nothing sent.
    let policy = write_policy(
        &dir,
        &json!({"servers": {"faults": {
            "get": {"read_only": true},
            "put": {"readback": {"tool": "get", "arguments": {"key": "$key"},
                                 "expect": {"/structuredContent/value": "$value"}}}
        }}}),
    );
    let gate = fault_gate(&dir, &policy, "none", &["--claim-read-only"]);
    let client = connect(&gate);
    for _ in 0..2 {
        let gated = result(call(&client, "put", &args));
        assert_eq!(gated["isError"], true, "{gated}");
        assert_eq!(state(&dir, &meta_id(&gated)), State::HumanGate, "{gated}");
    }
    assert_eq!(pathway_count(&dir), 1, "the repeat is the same pathway");
    assert_eq!(effects(&dir), 0, "nothing sent before an approval");
    client.shutdown();
}

#[test]
fn a_readback_tool_must_be_read_only_by_the_policy() {
    // `get` is annotated read-only, but the policy does not say so: it is no readback, and
    // the gate refuses its policy when it starts, before any call.
    let dir = TempDir::new("gate-reader");
    let policy = write_policy(
        &dir,
        &json!({"servers": {"faults": {"put": {"admission": "allow", "readback": {
            "tool": "get", "arguments": {"key": "$key"},
            "expect": {"/structuredContent/value": "$value"}}}}}}),
    );
    let gate = fault_gate(&dir, &policy, "none", &[]);
    let mut config = SessionConfig::default();
    config.request_timeout = Duration::from_secs(30);
    let said = match McpClient::connect(&gate_command(&gate), &config) {
        Ok(_) => panic!("the gate started with a readback tool the policy does not call read-only"),
        Err(e) => e.to_string(),
    };
    assert!(
        said.contains("not read-only by the policy") && said.contains("servers.faults.get"),
        "{said}"
    );
    assert_eq!(effects(&dir), 0);

    // The policy opts into the server's annotations for `get`, in so many words: accepted.
    let policy = write_policy(
        &dir,
        &json!({"servers": {"faults": {
            "get": {"trust_annotations": true},
            "put": {"admission": "allow", "readback": {
                "tool": "get", "arguments": {"key": "$key"},
                "expect": {"/structuredContent/value": "$value"}}}
        }}}),
    );
    let gate = fault_gate(&dir, &policy, "none", &[]);
    let client = connect(&gate);
    let done = result(call(&client, "put", &json!({"key": "k", "value": "v"})));
    assert_ne!(done["isError"], true, "{done}");
    assert_eq!(state(&dir, &meta_id(&done)), State::Completed);
    assert_eq!(effects(&dir), 1);
    client.shutdown();
}

/// `rpr gate` in front of `@modelcontextprotocol/server-memory`, its graph in `dir`.
fn memory_gate(dir: &TempDir, policy: &Path) -> Vec<String> {
    let p = peers();
    let server = vec![
        "/usr/bin/env".to_owned(),
        format!("MEMORY_FILE_PATH={}", dir.join("memory.jsonl").display()),
        p.node.display().to_string(),
        p.dir
            .join("node_modules/.bin/mcp-server-memory")
            .display()
            .to_string(),
    ];
    gate_argv(dir, policy, "memory", &server)
}

/// A policy for server-memory: `create_entities` allowed and read back by `readback`.
fn memory_policy(dir: &TempDir, readback: &Value) -> PathBuf {
    write_policy(
        dir,
        &json!({"servers": {"memory": {
            "open_nodes": {"read_only": true},
            "create_entities": {"admission": "allow", "readback": readback}}}}),
    )
}

#[test]
fn a_nested_write_to_server_memory_is_read_back_by_json_pointer_and_completes() {
    // `create_entities` takes {"entities": [{"name", "entityType", "observations"}]}: a
    // mapping by top-level names could not reach an entity's name, so every call ended
    // unknown. By JSON Pointer, `open_nodes` reads the entity back, and the whole entity
    // read back must equal the one written.
    let dir = TempDir::new("gate-memory");
    let policy = memory_policy(
        &dir,
        &json!({"tool": "open_nodes", "arguments": {"names": ["$/entities/0/name"]},
                "expect": {"/structuredContent/entities/0": "$/entities/0"}}),
    );
    let client = connect(&memory_gate(&dir, &policy));
    let entity = json!({"name": "a/b~c", "entityType": "person", "observations": ["likes tea"]});
    let done = result(call(
        &client,
        "create_entities",
        &json!({"entities": [entity]}),
    ));
    assert_ne!(done["isError"], true, "{done}");
    assert_eq!(state(&dir, &meta_id(&done)), State::Completed);
    let graph = std::fs::read_to_string(dir.join("memory.jsonl")).unwrap();
    assert!(graph.contains("likes tea"), "{graph}");

    // A call that holds no entity: the readback could read nothing, so it is refused
    // before anything is recorded or sent (it could never be more than unknown).
    let before = pathway_count(&dir);
    let refused = result(call(&client, "create_entities", &json!({"entities": []})));
    assert_eq!(refused["isError"], true, "{refused}");
    let said = refused["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("the call's arguments have no /entities/0/name (they stop at /entities, which has no `0`)")
            && said.contains("nothing was recorded or sent"),
        "{said}"
    );
    assert_eq!(
        pathway_count(&dir),
        before,
        "the refused call recorded nothing"
    );
    client.shutdown();
}

#[test]
fn a_readback_pointer_the_schemas_do_not_have_is_refused_when_the_gate_starts() {
    let dir = TempDir::new("gate-memory-refused");
    let names = json!({"names": ["$/entities/0/name"]});
    let expect = json!({"/structuredContent/entities/0/name": "$/entities/0/name"});
    for (arguments, expect, needle) in [
        (
            json!({"names": ["$/entities/0/nmae"]}),
            expect.clone(),
            "the readback for `create_entities` of server `memory` uses \"$/entities/0/nmae\", but the \
             inputSchema of `create_entities` has no /entities/0/nmae: under /entities/0, `nmae` fails",
        ),
        (
            json!({"names": {"first": "$/entities/0/name"}}),
            expect.clone(),
            "passes /names/first to `open_nodes`, but the inputSchema of `open_nodes` has no \
             /names/first: under /names, `first` fails",
        ),
        (
            json!({"names": ["$/entities/0/name"], "limit": 1}),
            expect.clone(),
            "passes argument `limit` to `open_nodes`, which has no such argument (it has: names)",
        ),
        (
            names.clone(),
            json!({"/structuredContent/entities/-/name": "$/entities/0/name"}),
            "`expect` path /structuredContent/entities/-/name: the outputSchema of `open_nodes` has \
             no /entities/-/name: under /entities, `-` fails",
        ),
        (
            names.clone(),
            json!({"/structuredContent/entities/0/name": "$/entities/0/observations/0/text"}),
            "has no /entities/0/observations/0/text: under /entities/0/observations/0, `text` fails: \
             the schema says the value there is string, which has no members",
        ),
    ] {
        let readback = json!({"tool": "open_nodes", "arguments": arguments, "expect": expect});
        let gate = memory_gate(&dir, &memory_policy(&dir, &readback));
        let mut config = SessionConfig::default();
        config.request_timeout = Duration::from_secs(30);
        let said = match McpClient::connect(&gate_command(&gate), &config) {
            Ok(_) => panic!("the gate started with the readback {readback}"),
            Err(e) => e.to_string(),
        };
        assert!(said.contains(needle), "{needle}\n{said}");
    }
    // A pointer that is not one is refused when the policy is loaded.
    let readback = json!({"tool": "open_nodes", "arguments": {"names": ["$/entities/0/a~2"]},
                          "expect": expect});
    let out = run_gate(&memory_gate(&dir, &memory_policy(&dir, &readback)));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("a `~` must be followed by 0 or 1"),
        "{}",
        text(&out)
    );
    assert!(!dir.join("memory.jsonl").exists(), "nothing was sent");
}

#[test]
fn the_server_is_known_by_its_configured_name_not_the_name_it_reports() {
    let dir = TempDir::new("gate-name");
    let policy = write_policy(
        &dir,
        &json!({"servers": {"faults": {"*": {"admission": "deny"}}}}),
    );
    let put = json!({"key": "k", "value": "v"});
    // Without `--name`, the name the server reports would be its identity: a server that
    // reports another name would escape its policy. The gate does not start without it.
    let renamed = fault_argv(
        &dir,
        "none",
        &["--server-name", "faults-renamed", "--claim-read-only"],
    );
    let mut unnamed = gate_argv(&dir, &policy, "faults", &renamed);
    let at = unnamed.iter().position(|a| a == "--name").unwrap();
    unnamed.drain(at..at + 2);
    let (out, err, code) = one_raw_call(&unnamed, "put", &put);
    assert_eq!(
        effects(&dir),
        0,
        "a renamed server escaped the policy: {out}"
    );
    assert_ne!(code, Some(0), "{out}{err}");
    assert!(err.contains("--name"), "{err}");

    // With `--name`: the policy governs the server whatever it reports, and a new
    // reported name is a binding change, refused until `rpr pin`.
    let named = gate_argv(
        &dir,
        &policy,
        "faults",
        &fault_argv(&dir, "none", &["--server-name", "faults"]),
    );
    let client = connect(&named);
    let denied = result(call(&client, "put", &put));
    assert_eq!(state(&dir, &meta_id(&denied)), State::Denied);
    client.shutdown();
    let renamed = gate_argv(&dir, &policy, "faults", &renamed);
    let client = connect(&renamed);
    let denied = result(call(&client, "put", &put));
    assert_eq!(denied["isError"], true, "{denied}");
    let said = denied["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("not the one pinned") && said.contains("server_name"),
        "{said}"
    );
    assert_eq!(effects(&dir), 0);
    client.shutdown();
}

#[test]
fn a_policy_naming_a_tool_or_server_the_server_does_not_offer_is_refused_at_start() {
    let dir = TempDir::new("gate-typo");
    // Meant to deny `put`; the rule names `putt`, so `put` would fall under "*".
    let typo = write_policy(
        &dir,
        &json!({"servers": {"faults": {
            "*": {"admission": "allow", "read_only": true},
            "putt": {"admission": "deny"}
        }}}),
    );
    let gate = fault_gate(&dir, &typo, "none", &["--claim-read-only"]);
    let (out, err, _) = one_raw_call(&gate, "put", &json!({"key": "k", "value": "v"}));
    assert_eq!(effects(&dir), 0, "a misspelt rule governed nothing: {out}");
    assert!(
        out.contains("putt") && out.contains("get, put"),
        "the refusal names the rule and the tools offered: {out}\n{err}"
    );
    assert_eq!(pathway_count(&dir), 0);

    // A policy for another server name than the gate's: refused before the server starts.
    let other = write_policy(
        &dir,
        &json!({"servers": {"fautls": {"*": {"admission": "allow", "read_only": true}}}}),
    );
    let out = run_gate(&fault_gate(&dir, &other, "none", &["--claim-read-only"]));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("`faults`") && text(&out).contains("fautls"),
        "{}",
        text(&out)
    );
    assert_eq!(effects(&dir), 0);

    // A rule that says the tool may be absent is kept for a server that does not offer it.
    let optional = write_policy(
        &dir,
        &json!({"servers": {"faults": {
            "get": {"read_only": true},
            "delete": {"admission": "deny", "may_be_absent": true}
        }}}),
    );
    let client = connect(&fault_gate(&dir, &optional, "none", &[]));
    let read = result(call(&client, "get", &json!({"key": "k"})));
    assert_ne!(read["isError"], true, "{read}");
    client.shutdown();
}

/// A `put` with `_meta` idempotency key `key` (none: a plain call).
fn keyed_put(client: &McpClient, args: &Value, key: Option<&str>) -> Value {
    let mut params = json!({"name": "put", "arguments": args});
    if let Some(key) = key {
        params["_meta"] = json!({"dev.rpr/idempotency-key": key});
    }
    result(
        client
            .session()
            .request("tools/call", Some(params), Duration::from_secs(30))
            .unwrap(),
    )
}

#[test]
fn a_new_idempotency_key_does_not_split_an_unknown_call() {
    let (dir, _, gate) = fault_setup("gate-key-split", "crash-after-effect", &[]);
    let client = connect(&gate);
    let args = json!({"key": "invoice-7", "value": "paid"});
    let first = keyed_put(&client, &args, Some("order-1"));
    let id = meta_id(&first);
    assert_eq!(state(&dir, &id), State::WriteStatusUnknown, "{first}");
    assert_eq!(effects(&dir), 1);
    // The same tool and arguments under another key, while the first is unknown.
    let second = keyed_put(&client, &args, Some("order-2"));
    assert_eq!(effects(&dir), 1, "a new key sent the call again: {second}");
    assert_eq!(second["isError"], true, "{second}");
    assert_eq!(meta_id(&second), id, "answered from the open pathway");
    assert_eq!(pathway_count(&dir), 1);
    client.shutdown();
}

#[test]
fn a_key_added_to_an_unknown_plain_call_does_not_send_it_again() {
    let (dir, _, gate) = fault_setup("gate-key-added", "crash-after-effect", &[]);
    let client = connect(&gate);
    let args = json!({"key": "invoice-8", "value": "paid"});
    let first = keyed_put(&client, &args, None);
    let id = meta_id(&first);
    assert_eq!(state(&dir, &id), State::WriteStatusUnknown, "{first}");
    assert_eq!(effects(&dir), 1);
    let keyed = keyed_put(&client, &args, Some("order-3"));
    assert_eq!(
        effects(&dir),
        1,
        "adding a key sent the call again: {keyed}"
    );
    assert_eq!(keyed["isError"], true, "{keyed}");
    assert_eq!(meta_id(&keyed), id, "answered from the open pathway");
    client.shutdown();
}

/// A client of the gate that speaks only the `initialize` handshake (the gate's side toward
/// its client), so these tests are about the gate's side toward the server.
fn connect_legacy(argv: &[String]) -> McpClient {
    let mut config = SessionConfig::default();
    config.request_timeout = Duration::from_secs(30);
    config.accepted_versions = rpr::mcp::LEGACY_VERSIONS
        .iter()
        .map(|v| (*v).to_owned())
        .collect();
    McpClient::connect(&gate_command(argv), &config)
        .unwrap_or_else(|e| panic!("the gate did not start: {e}"))
}

/// Issue 26: a server answering `initialize` with 2025-06-18 was refused ("did not
/// start"). The gate governs servers of the handshake era and of 2026-07-28 alike: a
/// gated write is sent once and completes with its readback.
#[test]
fn the_gate_governs_a_2025_06_18_server_and_a_2026_07_28_server() {
    for era in [
        &["--protocol-version", "2025-06-18"][..],
        &["--era", "modern"][..],
    ] {
        let (dir, _, gate) = fault_setup("gate-era", "none", era);
        let log = dir.join("requests.jsonl").display().to_string();
        let gate: Vec<String> = gate
            .into_iter()
            .chain(["--request-log".to_owned(), log.clone()])
            .collect();
        let client = connect_legacy(&gate);
        let args = json!({"key": "k", "value": "v"});
        let put = result(call(&client, "put", &args));
        assert_ne!(put["isError"], true, "{era:?}: {put}");
        assert_eq!(state(&dir, &meta_id(&put)), State::Completed, "{era:?}");
        assert_eq!(effects(&dir), 1, "{era:?}");
        let read = result(call(&client, "get", &json!({"key": "k"})));
        assert_eq!(read["structuredContent"]["value"], "v", "{era:?}: {read}");
        client.shutdown();
        let received: Vec<Value> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let methods: Vec<&str> = received
            .iter()
            .map(|r| r["method"].as_str().unwrap())
            .collect();
        assert_eq!(methods[0], "server/discover", "{era:?}: probed first");
        if era[0] == "--era" {
            assert!(!methods.contains(&"initialize"), "{methods:?}");
            assert!(
                received
                    .iter()
                    .all(|r| r["meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"),
                "{received:?}"
            );
        } else {
            assert_eq!(methods[1], "initialize", "{methods:?}");
        }
    }
}

/// A server that moves to the other era is a binding change: refused until `rpr pin`.
#[test]
fn a_server_that_changes_era_is_refused_until_rpr_pin() {
    let (dir, policy, legacy) = fault_setup("gate-era-pin", "none", &[]);
    let client = connect_legacy(&legacy);
    assert_ne!(
        result(call(&client, "get", &json!({"key": "k"})))["isError"],
        true
    );
    client.shutdown();

    let modern = fault_gate(&dir, &policy, "none", &["--era", "modern"]);
    let client = connect_legacy(&modern);
    let digest = refused_get_digest(&client);
    let pinned = pin_get(&dir, &digest);
    assert!(pinned.status.success(), "{}", text(&pinned));
    let ok = result(call(&client, "get", &json!({"key": "k"})));
    assert_ne!(ok["isError"], true, "{ok}");
    client.shutdown();
}

/// Calls `get`, which must be refused for a binding that is not the pinned one, and
/// returns the digest the refusal names (`… --digest DIGEST …`).
fn refused_get_digest(client: &McpClient) -> String {
    let refused = result(call(client, "get", &json!({"key": "k"})));
    assert_eq!(refused["isError"], true);
    let said = refused["content"][0]["text"].as_str().unwrap();
    assert!(
        said.contains("not the one pinned") && said.contains("rpr pin"),
        "{said}"
    );
    named_digest(said).to_owned()
}

/// `rpr pin` of the fault server's `get` at `digest`, as bob.
fn pin_get(dir: &TempDir, digest: &str) -> Output {
    pin(dir, "faults", "get", digest)
}

/// `rpr pin` of `tool` of `server` at `digest`, as bob.
fn pin(dir: &TempDir, server: &str, tool: &str, digest: &str) -> Output {
    let db = dir.join("rpr.db").display().to_string();
    rpr(&[
        "pin",
        "--database",
        &db,
        "--server",
        server,
        "--tool",
        tool,
        "--digest",
        digest,
        "--as",
        "bob",
    ])
}

/// The digest a refusal names for `rpr pin` (`… --digest DIGEST …`).
fn named_digest(said: &str) -> &str {
    said.split("--digest ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("no digest in {said}"))
}
