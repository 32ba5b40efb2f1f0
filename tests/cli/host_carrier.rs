//! `rpr call` against a server started through a launcher that moves it out of rpr's
//! process group, as a user would run it: the host is killed after the request was sent,
//! the server delays its write past the readback. `rpr unresolved`, `rpr reconcile`,
//! `rpr repair` and `rpr resume` must not lead to a second write.
//!
//! Before the carrier was the server's whole process tree, the server (in a session of
//! its own) outlived its host, `rpr reconcile` read back "not applied" before its late
//! write, and `repair` + `resume` wrote a second time: 2 writes, `rpr verify` passing.
#![cfg(target_os = "linux")]

use crate::host_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use host_support::{Scratch, by_key, rpr, run, text, verified};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;

/// How long the server sleeps between reading the call and writing its effect.
const SERVER_DELAY: Duration = Duration::from_millis(2500);

/// A config whose server `ledger` is the slow fault server started through `script`
/// (`sh -c`; fd 3 hands the server the stdin pipe a background job would not get).
fn wrapped_config(dir: &Scratch, script: &str) -> String {
    dir.write(
        "mcp.json",
        &json!({"mcpServers": {"ledger": {
            "command": "/bin/sh",
            "args": ["-c", script, env!("CARGO_BIN_EXE_rpr-fault-server"),
                     "--state", dir.join("state.json"), "--effects", dir.join("effects.log"),
                     "--request-log", dir.join("requests.jsonl"),
                     "--fault", "slow", "--sleep-ms", SERVER_DELAY.as_millis().to_string()],
        }}}),
    )
}

/// `put` without a Human Gate, read back with `get` (read-only by the policy); bob is the
/// repair owner.
fn policy(dir: &Scratch) -> String {
    dir.write(
        "policy.json",
        &json!({"authority": {"repair_owner": "bob"},
                "servers": {"ledger": {"get": {"read_only": true}, "put": {"human_gate": false, "readback": {"tool": "get",
                    "arguments": {"key": "$key"}, "expect": {"/structuredContent/value": "$value"}}}}}}),
    )
}

/// Whether the server received a `tools/call` (it logs a request as it reads it, before
/// its sleep).
fn server_holds_the_call(dir: &Scratch) -> bool {
    std::fs::read_to_string(dir.join("requests.jsonl")).is_ok_and(|log| {
        log.lines().any(|l| {
            serde_json::from_str::<serde_json::Value>(l).is_ok_and(|r| r["method"] == "tools/call")
        })
    })
}

fn in_flight(db: &Path) -> bool {
    rusqlite::Connection::open(db)
        .and_then(|c| {
            c.query_row(
                "SELECT count(*) FROM attempts WHERE status = 'in_flight'",
                [],
                |r| r.get::<_, i64>(0),
            )
        })
        .is_ok_and(|n| n == 1)
}

fn killed_call_then_reconcile(script: &str, signal: Signal) {
    let dir = Scratch::new("carrier");
    let config = wrapped_config(&dir, script);
    let policy = policy(&dir);
    let db_path = dir.join("rpr.db");
    let db = db_path.to_str().unwrap();
    let live = [
        "--config",
        config.as_str(),
        "--policy",
        policy.as_str(),
        "--database",
        db,
    ];

    let mut host = Command::new(rpr())
        .args(["call"])
        .args(live)
        .args(["--server", "ledger", "--tool", "put"])
        .args(["--args", r#"{"key": "k", "value": "v"}"#, "--key", "k1"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !in_flight(&db_path) {
        assert!(Instant::now() < deadline, "the call never went in flight");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The request reached the server, which now sleeps before writing.
    while !server_holds_the_call(&dir) {
        assert!(
            Instant::now() < deadline,
            "the server never received the tools/call"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = Instant::now();
    let pid = Pid::from_raw(i32::try_from(host.id()).unwrap());
    kill(pid, signal).unwrap();
    if signal == Signal::SIGINT {
        // `rpr call` takes a first SIGINT and waits for the call in flight (docs/host.md,
        // Ctrl-C); a second one stops it at once, which is the interruption this test is
        // about.
        std::thread::sleep(Duration::from_millis(100));
        kill(pid, signal).unwrap();
    }
    let _ = host.wait();
    assert_eq!(dir.effects(), 0, "killed before the server wrote");

    let output = run(["unresolved", "--database", db]);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(by_key(&db_path, "k1").1, "write_status_unknown");

    let output = run([&["reconcile"][..], &live, &["--key", "k1"]].concat());
    let out = text(&output);
    assert!(!out.contains("panicked"), "{out}");
    if by_key(&db_path, "k1").1 == "repair_required" {
        // Not applied was accepted: the whole tree must be gone, so the repair and the
        // resumed call are the only write.
        let output = run([
            &["repair"][..],
            &live[4..],
            &[
                "--key",
                "k1",
                "--as",
                "bob",
                "--evidence",
                "read back: absent",
            ],
        ]
        .concat());
        assert!(output.status.success(), "{}", text(&output));
        let output = run([&["resume"][..], &live, &["--key", "k1", "--as", "host"]].concat());
        assert!(output.status.success(), "{}", text(&output));
    } else {
        assert!(out.contains("not accepted"), "{out}");
    }
    // Past the moment the first server would have written, had it survived.
    std::thread::sleep((SERVER_DELAY + Duration::from_secs(1)).saturating_sub(killed.elapsed()));
    assert!(
        dir.effects() <= 1,
        "{} writes of one call (reconcile said: {out})",
        dir.effects()
    );
    assert!(verified(&db_path));
}

#[test]
fn rpr_call_through_setsid_killed_by_sigkill_writes_at_most_once() {
    killed_call_then_reconcile(
        "exec 3<&0; /usr/bin/setsid \"$0\" \"$@\" <&3 3<&- & wait",
        Signal::SIGKILL,
    );
}

#[test]
fn rpr_call_through_a_daemonizing_wrapper_interrupted_writes_at_most_once() {
    killed_call_then_reconcile(
        "exec 3<&0; (/usr/bin/setsid \"$0\" \"$@\" <&3 3<&- &); exit 0",
        Signal::SIGINT,
    );
}
