//! Ctrl-C (`SIGINT`) to `rpr call` (issue 29, item 4): before the send, nothing is sent and
//! the pathway stays approved (exit 130); while the call is in flight, the call is waited
//! for and recorded as usual; a second one stops at once, leaving the pathway `running`
//! for the recovery scan, which records it unknown.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::host_support;

use host_support::{Scratch, by_key, call_args, rpr, run, text};

/// A config whose server `ledger` is the fault server with `fault` and `extra` options,
/// logging every request it gets to `requests.jsonl`.
fn config(dir: &Scratch, fault: &str, extra: &[&str]) -> String {
    let mut args = vec![
        json!("--state"),
        json!(dir.join("state.json")),
        json!("--effects"),
        json!(dir.join("effects.log")),
        json!("--request-log"),
        json!(dir.join("requests.jsonl")),
        json!("--fault"),
        json!(fault),
    ];
    args.extend(extra.iter().map(|a| json!(a)));
    dir.write(
        "mcp.json",
        &json!({"mcpServers": {"ledger": {
            "command": env!("CARGO_BIN_EXE_rpr-fault-server"),
            "args": args,
        }}}),
    )
}

/// `rpr call … put {"key": "k"}` started, as a child with its output piped.
fn start_call(dir: &Scratch, config: &str) -> Child {
    let policy = dir.policy();
    let db = dir.join("rpr.db").display().to_string();
    let mut args = call_args(config, &policy, &db, "put", r#"{"key": "k", "value": "v"}"#);
    args.extend(["--key", "k"]);
    Command::new(rpr())
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the server has received `count` requests of `method`.
fn await_requests(dir: &Scratch, method: &str, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = std::fs::read_to_string(dir.join("requests.jsonl")).unwrap_or_default();
        let seen = log
            .lines()
            .filter(|l| l.contains(&format!("\"method\":\"{method}\"")))
            .count();
        if seen >= count {
            return;
        }
        assert!(Instant::now() < deadline, "never {count} {method}:\n{log}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn interrupt(child: &Child) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
}

fn state(dir: &Scratch) -> String {
    by_key(dir.join("rpr.db").as_path(), "k").1
}

fn effects(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("effects.log")).map_or(0, |s| s.lines().count())
}

#[test]
fn an_interrupt_before_the_send_sends_nothing_and_leaves_the_pathway_approved() {
    let dir = Scratch::new("interrupt-before");
    let release = dir.join("release");
    let release_arg = release.display().to_string();
    // The second tools/list (the one the bind makes) is held until `release` exists.
    let config = config(
        &dir,
        "hold-list",
        &["--lists-before", "1", "--release", &release_arg],
    );
    let child = start_call(&dir, &config);
    await_requests(&dir, "tools/list", 2);
    interrupt(&child);
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(&release, "").unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", text(&output));
    assert!(
        text(&output).contains("interrupted before the send"),
        "{}",
        text(&output)
    );
    assert_eq!(state(&dir), "approved");
    assert_eq!(effects(dir.join("").as_path()), 0, "nothing was sent");
    let log = std::fs::read_to_string(dir.join("requests.jsonl")).unwrap();
    assert!(!log.contains("tools/call"), "{log}");
}

#[test]
fn an_interrupt_while_the_call_is_in_flight_waits_for_it_and_records_it() {
    let dir = Scratch::new("interrupt-during");
    let config = config(&dir, "slow", &["--sleep-ms", "1500"]);
    let child = start_call(&dir, &config);
    await_requests(&dir, "tools/call", 1);
    interrupt(&child);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(
        text(&output).contains("it was finished and recorded"),
        "{}",
        text(&output)
    );
    assert_eq!(state(&dir), "completed");
    assert_eq!(effects(dir.join("").as_path()), 1);
}

#[test]
fn a_second_interrupt_stops_at_once_and_recovery_records_the_call_unknown() {
    let dir = Scratch::new("interrupt-twice");
    let config = config(&dir, "slow", &["--sleep-ms", "20000"]);
    let started = Instant::now();
    let child = start_call(&dir, &config);
    await_requests(&dir, "tools/call", 1);
    interrupt(&child);
    std::thread::sleep(Duration::from_millis(200));
    interrupt(&child);
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(130), "{}", text(&output));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "it did not wait for the call"
    );
    assert_eq!(state(&dir), "running");
    let db = dir.join("rpr.db").display().to_string();
    let output = run(["unresolved", "--database", &db]);
    assert!(
        text(&output).contains("write_status_unknown"),
        "{}",
        text(&output)
    );
    assert_eq!(state(&dir), "write_status_unknown");
}
