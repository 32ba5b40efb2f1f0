//! Issue 26 item 5: a cancellation that arrives while a governed call is between the gate's
//! checks and its send. The gate is embedded in the test's process; the call is held at one
//! point (by a step hook, or by the server) until the client's `notifications/cancelled` has
//! been read by the gate (a `ping` sent after it is answered by the same loop that handles
//! the cancellation, after it). No outcome depends on timing: each wait is for an event.
//!
//! - Held just before the attempt record is committed: nothing is recorded and nothing is
//!   sent.
//! - Held just after the attempt record is durable, before the request is written (a
//!   write: a read has no attempt commit before its send): the request is not written; its
//!   attempt is recorded `not_sent`, "cancelled by the client", and the pathway is
//!   `repair_required`: never `write_status_unknown`, since nothing could have reached
//!   the server.
//! - Held inside the send itself: the server holds the `tools/list` the gate makes right
//!   before it writes a write's `tools/call` (the binding checked at the send), and the
//!   cancellation comes meanwhile. The request is withdrawn as it is queued (the check the
//!   cancellation cannot slip past): not written, attempt `not_sent`, `repair_required`.
//!
//! Either way the client gets no answer to the cancelled call, and the fault server's own
//! log of every request it received holds no `tools/call`.

use std::io::{BufRead, Write};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::Duration;

use rpr::mcp::ServerCommand;
use rpr::policy::Policy;
use rpr::{AttemptStatus, Runtime, State, StepPoint};
use serde_json::{Value, json};

use super::{
    effects, embed_gate, fault_argv, fault_policy, interop_support::TempDir, pathway_count, store,
};

/// Where the call is held while the client cancels it.
#[derive(Clone, Copy)]
enum Held {
    /// At this point of its dispatch (a step hook).
    At(StepPoint),
    /// In the `tools/list` right before its `tools/call` (the fault server's `hold-list`).
    InTheListAtTheSend,
}

/// Holds the first dispatch that reaches `at` until the test says go.
struct Hold {
    at: Option<StepPoint>,
    /// Taken by the first dispatch that reaches `at`: it says "here", then waits for "go".
    once: Mutex<Option<(Sender<()>, Receiver<()>)>>,
}

impl Hold {
    fn reached(&self, point: StepPoint) {
        if Some(point) != self.at {
            return;
        }
        let taken = self
            .once
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some((here, go)) = taken {
            here.send(()).unwrap();
            go.recv_timeout(Duration::from_mins(1))
                .expect("the test lets the call go on");
        }
    }
}

/// What the client saw and what the server received when `tool` was cancelled while its
/// dispatch was held at `at`.
struct Seen {
    dir: TempDir,
    /// Every message the gate wrote to the client after `initialize`.
    messages: Vec<Value>,
    /// Every request and notification the fault server received (`--request-log`).
    received: Vec<Value>,
}

fn cancel_while_held(tag: &str, held: Held, tool: &str, arguments: &Value) -> Seen {
    let dir = TempDir::new(tag);
    let policy_path = fault_policy(&dir);
    let log = dir.join("requests.jsonl");
    let log_arg = log.display().to_string();
    let release = dir.join("release");
    let release_arg = release.display().to_string();
    let argv = match held {
        Held::At(_) => fault_argv(&dir, "none", &["--request-log", &log_arg]),
        // The first list is the gate's own, when it starts the server; the second is the
        // one at the send.
        Held::InTheListAtTheSend => fault_argv(
            &dir,
            "hold-list",
            &[
                "--request-log",
                &log_arg,
                "--lists-before",
                "1",
                "--release",
                &release_arg,
            ],
        ),
    };
    let received = || -> Vec<Value> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let server = ServerCommand::new(&argv[0]).args(&argv[1..]);
    let policy = Policy::load(&policy_path).unwrap();
    let db = dir.join("rpr.db");
    let (here_tx, here_rx) = channel();
    let (go_tx, go_rx) = channel();
    let holder = Hold {
        at: match held {
            Held::At(point) => Some(point),
            Held::InTheListAtTheSend => None,
        },
        once: Mutex::new(Some((here_tx, go_rx))),
    };
    let rt = Runtime::builder(&db)
        .bounds(policy.bounds())
        .step_hook(move |point| holder.reached(point))
        .open()
        .unwrap();
    let (gate, mut to_gate, mut from_gate) = embed_gate(rt, policy, server, &db, &policy_path);
    let mut send = |message: Value| writeln!(to_gate, "{message}").unwrap();
    let mut messages = Vec::new();
    let mut until = |id: &str, messages: &mut Vec<Value>| loop {
        let mut line = String::new();
        assert_ne!(
            from_gate.read_line(&mut line).unwrap(),
            0,
            "the gate closed"
        );
        let message: Value = serde_json::from_str(&line).expect("protocol only");
        let done = message["id"] == id;
        messages.push(message);
        if done {
            return;
        }
    };

    send(
        json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "host", "version": "1"}}}),
    );
    until("init", &mut messages);
    messages.clear();
    send(
        json!({"jsonrpc": "2.0", "id": "call", "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}}),
    );
    match held {
        Held::At(_) => here_rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the call reached the held point"),
        Held::InTheListAtTheSend => {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while received()
                .iter()
                .filter(|r| r["method"] == "tools/list")
                .count()
                < 2
            {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the server never got the list at the send: {:?}",
                    received()
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": "call", "reason": "user pressed stop"}}),
    );
    // Answered by the loop that read the cancellation, once it has handled it.
    send(json!({"jsonrpc": "2.0", "id": "after-cancel", "method": "ping"}));
    until("after-cancel", &mut messages);
    match held {
        Held::At(_) => go_tx.send(()).unwrap(),
        Held::InTheListAtTheSend => std::fs::write(&release, b"").unwrap(),
    }
    // The client goes away: the gate finishes the call, records its outcome, stops the
    // server, and returns; then its output ends.
    drop(to_gate);
    gate.join()
        .unwrap()
        .expect("the gate served until its input closed");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut from_gate, &mut rest).unwrap();
    messages.extend(
        rest.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()),
    );
    let received = received();
    Seen {
        dir,
        messages,
        received,
    }
}

impl Seen {
    /// The call was not answered and never reached the server.
    fn not_sent_nor_answered(&self) {
        assert!(
            !self.messages.iter().any(|m| m["id"] == "call"),
            "the gate answered the cancelled call: {:?}",
            self.messages
        );
        let calls: Vec<&Value> = self
            .received
            .iter()
            .filter(|r| r["method"] == "tools/call")
            .collect();
        assert!(calls.is_empty(), "the server received {calls:?}");
        assert_eq!(effects(&self.dir), 0, "the server did nothing");
    }

    /// The only pathway, its state and its only attempt.
    fn only_pathway(&self) -> (State, rpr::store::AttemptRecord) {
        let all = store(&self.dir).list_pathways(None, 10, None).unwrap();
        let [only] = all.as_slice() else {
            panic!("one pathway: {all:?}")
        };
        let mut attempts = store(&self.dir).attempts(&only.id).unwrap();
        assert_eq!(attempts.len(), 1, "{attempts:?}");
        (only.state, attempts.pop().unwrap())
    }
}

#[test]
fn a_write_cancelled_before_its_attempt_is_recorded_is_neither_recorded_nor_sent() {
    let seen = cancel_while_held(
        "gate-cancel-before-record",
        Held::At(StepPoint::BeforeAttemptCommit),
        "put",
        &json!({"key": "k", "value": "v"}),
    );
    seen.not_sent_nor_answered();
    assert_eq!(pathway_count(&seen.dir), 0, "nothing was recorded");
}

#[test]
fn a_write_cancelled_after_its_attempt_is_recorded_is_not_sent_and_not_unknown() {
    let seen = cancel_while_held(
        "gate-cancel-after-record",
        Held::At(StepPoint::AfterAttemptCommit),
        "put",
        &json!({"key": "k", "value": "v"}),
    );
    seen.not_sent_nor_answered();
    let (state, attempt) = seen.only_pathway();
    assert_eq!(
        state,
        State::RepairRequired,
        "not sent, so not write_status_unknown"
    );
    assert_eq!(attempt.status, AttemptStatus::NotSent);
    let why = attempt.outcome.unwrap().to_string();
    assert!(why.contains("cancelled by the client"), "{why}");
}

/// A read has no attempt commit before its send (its attempt and outcome are committed
/// together, after the answer): held at the last point before the send, then cancelled, it
/// is neither sent nor recorded.
#[test]
fn a_read_cancelled_just_before_its_send_is_neither_recorded_nor_sent() {
    let seen = cancel_while_held(
        "gate-cancel-read-before-send",
        Held::At(StepPoint::BeforeAttemptCommit),
        "get",
        &json!({"key": "k"}),
    );
    seen.not_sent_nor_answered();
    assert_eq!(pathway_count(&seen.dir), 0, "nothing was recorded");
}

#[test]
fn a_write_cancelled_during_the_check_at_its_send_is_withdrawn_as_it_is_queued() {
    let seen = cancel_while_held(
        "gate-cancel-at-send",
        Held::InTheListAtTheSend,
        "put",
        &json!({"key": "k", "value": "v"}),
    );
    seen.not_sent_nor_answered();
    let lists = seen
        .received
        .iter()
        .filter(|r| r["method"] == "tools/list")
        .count();
    assert_eq!(
        lists, 2,
        "held in the list at the send: {:?}",
        seen.received
    );
    let (state, attempt) = seen.only_pathway();
    assert_eq!(state, State::RepairRequired);
    assert_eq!(attempt.status, AttemptStatus::NotSent);
    let why = attempt.outcome.unwrap().to_string();
    assert!(why.contains("cancelled by the client"), "{why}");
}
