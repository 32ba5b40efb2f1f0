//! The interactive Human Gate of `rpr call`, under a pseudo-terminal: `rpr` shows
//! what will be sent (server identity, tool, digests, arguments), asks approve / deny /
//! leave and the approver's name, and records the decision with the typed name as actor.
//!
//! The terminal is driven by `tests/host_support/pty_driver.py` (python3's `pty`
//! module); the server is `rpr-fault-server`.

use crate::host_support;

use std::path::Path;
use std::process::Command;

use host_support::{Scratch, by_key, event, events, kinds, rpr, verified};
use serde_json::Value;

/// Runs `rpr call` for `put KEY = paid` under a terminal, answering `answers` to the
/// gate's two prompts. Returns (exit code, what the terminal showed).
fn call_at_terminal(dir: &Scratch, key: &str, answers: &[&str]) -> (i64, String) {
    let files = [dir.fault_config("none"), dir.policy()];
    call_server_at_terminal(dir, "ledger", &files, key, answers)
}

/// [`call_at_terminal`] on server `server` of these `[config, policy]` files.
fn call_server_at_terminal(
    dir: &Scratch,
    server: &str,
    [config, policy]: &[String; 2],
    key: &str,
    answers: &[&str],
) -> (i64, String) {
    let arguments = format!(r#"{{"key": "{key}", "value": "paid"}}"#);
    let argv: Vec<String> = [
        rpr().to_str().unwrap(),
        "call",
        "--config",
        config,
        "--policy",
        policy,
        "--database",
        dir.join("rpr.db").to_str().unwrap(),
        "--server",
        server,
        "--tool",
        "put",
        "--args",
        &arguments,
        "--key",
        key,
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let prompts = [
        "Approve, deny, or leave it at the gate? [a/d/L] ",
        "Your name",
    ];
    let script: Vec<[&str; 2]> = prompts.iter().zip(answers).map(|(p, a)| [*p, *a]).collect();
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/host_support/pty_driver.py");
    let output = Command::new("python3")
        .arg(driver)
        .arg(serde_json::to_string(&argv).unwrap())
        .arg(serde_json::to_string(&script).unwrap())
        .output()
        .expect("python3 runs");
    assert!(
        output.status.success(),
        "the pty driver failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    (
        result["code"].as_i64().unwrap(),
        result["output"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn an_approval_typed_at_the_terminal_is_recorded_with_the_approvers_name() {
    let dir = Scratch::new("pty-approve");
    let db = dir.join("rpr.db");
    let (code, shown) = call_at_terminal(&dir, "k-approve", &["a\n", "alice\n"]);
    assert_eq!(code, 0, "{shown}");
    // What will be sent, shown before the question.
    let question = shown.find("Approve, deny").unwrap();
    for part in [
        "server     ledger: rpr-fault-server@",
        "protocol 2025-11-25",
        "capabilities digest",
        "tool       put, tool digest",
        "input schema digest",
        "binding    digest",
        "request    digest",
        "\"key\": \"k-approve\"",
        "\"value\": \"paid\"",
    ] {
        let at = shown
            .find(part)
            .unwrap_or_else(|| panic!("lacks {part:?}:\n{shown}"));
        assert!(at < question, "{part:?} shown after the question:\n{shown}");
    }
    assert!(shown.contains("is COMPLETED"), "{shown}");

    let (id, state) = by_key(&db, "k-approve");
    assert_eq!(state, "completed");
    let ev = events(&db, &id);
    assert_eq!(event(&ev, "approval_granted")["actor"], "alice");
    assert_eq!(event(&ev, "approved")["actor"], "alice");
    assert_eq!(dir.effects(), 1);
    assert!(verified(&db));
}

#[test]
fn a_denial_typed_at_the_terminal_is_recorded_and_nothing_is_sent() {
    let dir = Scratch::new("pty-deny");
    let db = dir.join("rpr.db");
    let (code, shown) = call_at_terminal(&dir, "k-deny", &["d\n", "alice\n"]);
    assert_eq!(code, 4, "denied is final: {shown}");
    let (id, state) = by_key(&db, "k-deny");
    assert_eq!(state, "denied");
    let ev = events(&db, &id);
    assert_eq!(event(&ev, "denied")["actor"], "alice");
    assert!(!kinds(&ev).contains(&"attempt_started"));
    assert_eq!(dir.effects(), 0);
}

#[test]
fn a_name_without_approval_authority_is_refused_and_the_gate_stays() {
    let dir = Scratch::new("pty-mallory");
    let db = dir.join("rpr.db");
    let (code, shown) = call_at_terminal(&dir, "k-mallory", &["a\n", "mallory\n"]);
    assert_eq!(code, 1, "{shown}");
    assert!(
        shown.contains("mallory may not grant an approval: it needs approval_authority"),
        "{shown}"
    );
    let (id, state) = by_key(&db, "k-mallory");
    assert_eq!(state, "human_gate");
    assert!(!kinds(&events(&db, &id)).contains(&"approval_granted"));
    assert_eq!(dir.effects(), 0);
}

#[test]
fn pressing_enter_leaves_the_pathway_at_the_gate() {
    let dir = Scratch::new("pty-leave");
    let db = dir.join("rpr.db");
    let (code, shown) = call_at_terminal(&dir, "k-leave", &["\n"]);
    assert_eq!(code, 3, "{shown}");
    assert!(shown.contains("left at the HUMAN_GATE"), "{shown}");
    assert!(shown.contains("next: rpr approve --config"), "{shown}");
    assert_eq!(by_key(&db, "k-leave").1, "human_gate");
    assert_eq!(dir.effects(), 0);
}

#[test]
fn a_server_name_with_escape_sequences_reaches_the_terminal_escaped() {
    let dir = Scratch::new("pty-escape");
    let name = "\u{1b}[2J\u{1b}[Hledger";
    let config = dir.write(
        "mcp.json",
        &serde_json::json!({"mcpServers": {name: {
            "command": env!("CARGO_BIN_EXE_rpr-fault-server"),
            "args": ["--state", dir.join("state.json"), "--effects", dir.join("effects.log")],
        }}}),
    );
    let policy = dir.write(
        "policy.json",
        &serde_json::json!({
            "authority": {"approval_authority": "alice"},
            "servers": {name: {"get": {"read_only": true}, "put": {
                "human_gate": true,
                "readback": {"tool": "get", "arguments": {"key": "$key"},
                             "expect": {"/structuredContent/value": "$value"}}
            }}}
        }),
    );
    let (code, shown) = call_server_at_terminal(&dir, name, &[config, policy], "k-esc", &["\n"]);
    assert_eq!(code, 3, "{shown}");
    assert!(
        !shown.contains('\u{1b}'),
        "a raw ESC reaches the terminal: {shown:?}"
    );
    assert!(
        shown.contains("server     \\u{1b}[2J\\u{1b}[Hledger: rpr-fault-server@"),
        "the name is not shown escaped: {shown:?}"
    );
    assert_eq!(dir.effects(), 0);
}
