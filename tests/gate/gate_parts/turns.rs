//! Turns (issue 26, item 4): a call being sent holds up only calls of its own identity, and
//! an identical call that arrives meanwhile waits for it and gets its result.

use super::*;

/// A write the policy allows needs no form: it is proposed, bound and sent in one go. An
/// identical write arriving while it is being sent used to get "in flight right now" (a tool
/// error) instead of its result; it now waits for that send and is answered from the
/// pathway: one effect, one pathway, both calls answered with the write's result.
#[test]
fn an_identical_call_during_an_allowed_send_waits_and_gets_its_result() {
    let (dir, _policy, gate) = fault_setup("gate-turn-send", "slow", &["--sleep-ms", "1500"]);
    let client = std::sync::Arc::new(connect(&gate));
    let args = json!({"key": "k", "value": "v"});
    let put = |client: &std::sync::Arc<McpClient>| {
        let (client, args) = (std::sync::Arc::clone(client), args.clone());
        std::thread::spawn(move || result(call(&client, "put", &args)))
    };
    let first = put(&client);
    std::thread::sleep(Duration::from_millis(400));
    let second = put(&client);
    let (first, second) = (first.join().unwrap(), second.join().unwrap());
    for answer in [&first, &second] {
        assert_ne!(answer["isError"], true, "{answer}");
    }
    assert_eq!(meta_id(&first), meta_id(&second), "one pathway for both");
    assert_eq!(effects(&dir), 1, "written once");
    assert_eq!(state(&dir, &meta_id(&first)), State::Completed);
}

/// Found by the client matrix: a read the policy sends to the Human Gate, approved out of
/// band with `rpr approve`, was never sent: an identical read skipped every open read, so the
/// same call made again opened a new pathway, held again. A read not sent yet is now carried
/// on by the identical call (a read that *was* sent still holds nothing).
#[test]
fn a_gated_read_approved_with_rpr_approve_is_sent_by_the_same_call_made_again() {
    let dir = TempDir::new("gate-approved-read");
    let policy = write_policy(
        &dir,
        &json!({
            "authority": {"approval_authority": "alice", "repair_owner": "bob", "resume_authority": "bob"},
            "servers": {"faults": {
                "get": {"read_only": true, "human_gate": true},
                "put": {"human_gate": false, "readback": {"tool": "get", "arguments": {"key": "$key"},
                    "expect": {"/structuredContent/value": "$value"}}}
            }}
        }),
    );
    std::fs::write(dir.join("state.json"), r#"{"k": "v"}"#).unwrap();
    let gate = fault_gate(&dir, &policy, "none", &[]);
    let client = connect(&gate);
    let held = result(call(&client, "get", &json!({"key": "k"})));
    let said = held["content"][0]["text"].as_str().unwrap();
    assert!(said.contains("rpr approve --database"), "{said}");
    let id = meta_id(&held);
    assert_eq!(state(&dir, &id), State::HumanGate);
    let approved = rpr(&[
        "approve",
        "--database",
        &dir.join("rpr.db").display().to_string(),
        "--pathway",
        &id,
        "--as",
        "alice",
    ]);
    // Approved; the call is still to be made: exit 3, the pathway needs another step.
    assert_eq!(approved.status.code(), Some(3), "{}", text(&approved));
    let sent = result(call(&client, "get", &json!({"key": "k"})));
    assert_ne!(sent["isError"], true, "{sent}");
    assert_eq!(meta_id(&sent), id, "the approved pathway is the one sent");
    assert_eq!(state(&dir, &id), State::Completed);
    assert_eq!(pathway_count(&dir), 1);
    client.shutdown();
}

/// Found by the `gate` fuzz target (issue 30): a write the policy allows is proposed and
/// bound in the gate's short identity step, and stored (with its attempt record) only at its
/// send. An identical call that came in between found nothing stored, so under an
/// idempotency key of its own (a key cannot split one call) it was proposed and sent beside
/// the first: the server received the write twice. The first call is held here, by a step
/// hook, just before its attempt record is committed, while the identical call under key
/// `K1` comes in; it now waits for the first call's turn and is answered from its pathway.
#[test]
fn an_identical_call_under_its_own_key_before_the_first_is_stored_waits_and_is_not_sent() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc::{Receiver, Sender, channel};
    use std::sync::{Arc, Mutex};

    /// The first dispatch to reach the point says "here" and waits for "go"; each later
    /// one says "again".
    struct Hold {
        reached: AtomicUsize,
        first: Mutex<Option<(Sender<()>, Receiver<()>)>>,
        again: Mutex<Sender<()>>,
    }
    let (here_tx, here_rx) = channel();
    let (go_tx, go_rx) = channel();
    let (again_tx, again_rx) = channel();
    let hold = Arc::new(Hold {
        reached: AtomicUsize::new(0),
        first: Mutex::new(Some((here_tx, go_rx))),
        again: Mutex::new(again_tx),
    });
    let hook = Arc::clone(&hold);

    let dir = TempDir::new("gate-turn-unstored");
    let policy_path = fault_policy(&dir);
    let log = dir.join("requests.jsonl");
    let argv = fault_argv(&dir, "none", &["--request-log", &log.display().to_string()]);
    let server = ServerCommand::new(&argv[0]).args(&argv[1..]);
    let policy = rpr::policy::Policy::load(&policy_path).unwrap();
    let db = dir.join("rpr.db");
    let rt = rpr::Runtime::builder(&db)
        .bounds(policy.bounds())
        .step_hook(move |point| {
            if point != rpr::StepPoint::BeforeAttemptCommit {
                return;
            }
            if hook.reached.fetch_add(1, Ordering::SeqCst) == 0 {
                let (here, go) = hook.first.lock().unwrap().take().unwrap();
                here.send(()).unwrap();
                go.recv_timeout(Duration::from_mins(1))
                    .expect("the test lets the first call go on");
            } else {
                let _ = hook.again.lock().unwrap().send(());
            }
        })
        .open()
        .unwrap();
    let (gate, mut to_gate, mut from_gate) = embed_gate(rt, policy, server, &db, &policy_path);
    let mut send = |message: Value| writeln!(to_gate, "{message}").unwrap();
    let mut answers = std::collections::HashMap::new();
    let mut until = |id: &str, answers: &mut std::collections::HashMap<String, Value>| {
        while !answers.contains_key(id) {
            let mut line = String::new();
            assert_ne!(
                from_gate.read_line(&mut line).unwrap(),
                0,
                "the gate closed"
            );
            let message: Value = serde_json::from_str(&line).expect("protocol only");
            if let Some(id) = message["id"].as_str() {
                answers.insert(id.to_owned(), message);
            }
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "host", "version": "1"}}}),
    );
    until("init", &mut answers);
    let put = |id: &str, meta: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "put", "arguments": {"key": "k", "value": "v"}, "_meta": meta}})
    };
    send(put("first", json!({})));
    here_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the first call reached its attempt commit");
    send(put("second", json!({"dev.rpr/idempotency-key": "K1"})));
    // The second call is read and handed to a worker before the ping is answered; before
    // the fix it reached its own attempt commit at once (then was sent). It must not, while
    // the first call is not stored.
    send(json!({"jsonrpc": "2.0", "id": "ping", "method": "ping"}));
    until("ping", &mut answers);
    let second_dispatched = again_rx.recv_timeout(Duration::from_secs(2)).is_ok();
    go_tx.send(()).unwrap();
    until("first", &mut answers);
    until("second", &mut answers);
    drop(to_gate);
    gate.join()
        .unwrap()
        .expect("the gate served until its input closed");

    assert!(
        !second_dispatched,
        "the identical call was dispatched while the first was not stored"
    );
    let (first, second) = (&answers["first"]["result"], &answers["second"]["result"]);
    assert_ne!(first["isError"], true, "{first}");
    assert_ne!(second["isError"], true, "{second}");
    assert_eq!(meta_id(first), meta_id(second), "one pathway for both");
    // The request log holds `{id, method, meta}` of each request: the only `tools/call`s
    // are the write and its readback.
    let calls = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| serde_json::from_str::<Value>(l).unwrap()["method"] == "tools/call")
        .count();
    assert_eq!(
        calls, 2,
        "the server received the write and its readback, once each"
    );
    assert_eq!(effects(&dir), 1, "written once");
    assert_eq!(pathway_count(&dir), 1, "one pathway");
    assert_eq!(state(&dir, &meta_id(first)), State::Completed);
}

/// Two gates on one database (two hosts' gates, say), the identical write under two keys:
/// each gate's lookup finds nothing open, and the first gate's call is held (a step hook)
/// just before its attempt commit while the second gate stores and sends its own. The
/// store refuses the first gate's pathway while the second's is open (`rpr::store`'s rule,
/// one open call per identity): nothing of it is stored or sent; the first gate looks again
/// and answers from the second's pathway. Before, both were sent.
#[test]
fn two_gates_on_one_database_send_an_identical_write_once_whatever_the_keys() {
    use std::sync::mpsc::channel;
    use std::sync::{Arc, Mutex};

    let dir = TempDir::new("gate-two-gates-one-open");
    let policy_path = fault_policy(&dir);
    let db = dir.join("rpr.db");
    let (here_tx, here_rx) = channel::<()>();
    let (go_tx, go_rx) = channel::<()>();
    let once = Arc::new(Mutex::new(Some((here_tx, go_rx))));
    let policy = rpr::policy::Policy::load(&policy_path).unwrap();
    let held_rt = rpr::Runtime::builder(&db)
        .bounds(policy.bounds())
        .step_hook(move |point| {
            if point != rpr::StepPoint::BeforeAttemptCommit {
                return;
            }
            if let Some((here, go)) = once.lock().unwrap().take() {
                here.send(()).unwrap();
                go.recv_timeout(Duration::from_mins(1))
                    .expect("the test lets the held call go on");
            }
        })
        .open()
        .unwrap();
    let other_rt = rpr::Runtime::builder(&db)
        .bounds(policy.bounds())
        .open()
        .unwrap();
    let fault = |extra: &[&str]| {
        let argv = fault_argv(&dir, extra[0], &extra[1..]);
        ServerCommand::new(&argv[0]).args(&argv[1..])
    };
    let (held_gate, mut to_held, mut from_held) =
        embed_gate(held_rt, policy, fault(&["none"]), &db, &policy_path);
    // The second gate's server takes its time, so that its call is still in flight (open)
    // when the held one reaches the store.
    let (other_gate, mut to_other, mut from_other) = embed_gate(
        other_rt,
        rpr::policy::Policy::load(&policy_path).unwrap(),
        fault(&["slow", "--sleep-ms", "1500"]),
        &db,
        &policy_path,
    );
    let answer = |from: &mut std::io::BufReader<std::io::PipeReader>, id: &str| loop {
        let mut line = String::new();
        assert_ne!(from.read_line(&mut line).unwrap(), 0, "the gate closed");
        let message: Value = serde_json::from_str(&line).expect("protocol only");
        if message["id"] == id {
            return message;
        }
    };
    let init = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "host", "version": "1"}}});
    let put = |key: &str| {
        json!({"jsonrpc": "2.0", "id": "put", "method": "tools/call", "params": {
            "name": "put", "arguments": {"key": "k", "value": "v"},
            "_meta": {"dev.rpr/idempotency-key": key}}})
    };
    writeln!(to_held, "{init}").unwrap();
    answer(&mut from_held, "init");
    writeln!(to_other, "{init}").unwrap();
    answer(&mut from_other, "init");

    writeln!(to_held, "{}", put("K1")).unwrap();
    here_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the first gate's call reached its attempt commit");
    writeln!(to_other, "{}", put("K2")).unwrap();
    let other_id = await_only_pathway(&dir);
    await_state(&dir, &other_id, State::Running);
    go_tx.send(()).unwrap();
    let held_answer = answer(&mut from_held, "put");
    let other_answer = answer(&mut from_other, "put");
    drop((to_held, to_other));
    held_gate.join().unwrap().expect("the first gate served");
    other_gate.join().unwrap().expect("the second gate served");

    let other_result = &other_answer["result"];
    assert_ne!(other_result["isError"], true, "{other_result}");
    assert_eq!(meta_id(other_result), other_id);
    let held_result = &held_answer["result"];
    assert_eq!(
        meta_id(held_result),
        other_id,
        "answered from the open identical call: {held_result}"
    );
    assert_eq!(effects(&dir), 1, "written once");
    assert_eq!(pathway_count(&dir), 1, "nothing of the refused call stored");
    assert_eq!(state(&dir, &other_id), State::Completed);
}
