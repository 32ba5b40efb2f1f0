//! `rpr show`, `rpr list` and `rpr log`: what an operator reads before deciding (issue 29, item 4):
//! the whole request, attempts and bindings, approvals, the timeline and who acts next;
//! pathways by state, proposer and approver, a page at a time.

use crate::host_support;

use host_support::{Scratch, by_key, call_args, events, run, text};
use serde_json::Value;

/// A database made through `rpr call`: `done` (approved by alice, completed), `lost`
/// (approved, the server died after the effect: unknown), and `waiting` (left at the Human
/// Gate, nothing sent; its value holds an ESC and a right-to-left override).
fn database(dir: &Scratch) -> String {
    let db = host_support::done_and_lost(dir);
    let policy = dir.policy();
    let config = dir.fault_config("none");
    let arguments = r#"{"key": "waiting", "value": "pay \u001b[2J\u202eevil"}"#;
    let mut args = call_args(&config, &policy, &db, "put", arguments);
    let at = args.iter().position(|a| *a == "--approve-as").unwrap();
    args.drain(at..at + 2);
    args.extend(["--key", "waiting"]);
    let output = run(&args);
    assert_eq!(output.status.code(), Some(3), "{}", text(&output));
    db
}

fn stdout(args: &[&str], code: i32) -> String {
    let output = run(args);
    assert_eq!(
        output.status.code(),
        Some(code),
        "{args:?}:\n{}",
        text(&output)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn json(args: &[&str]) -> Value {
    let out = stdout(args, 0);
    serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{args:?}: not one JSON document ({e}):\n{out}"))
}

#[test]
fn show_prints_the_request_its_attempts_approvals_timeline_and_next_step() {
    let dir = Scratch::new("cli-show");
    let db = database(&dir);
    let (done, _) = by_key(dir.join("rpr.db").as_path(), "done");
    let out = stdout(&["show", "--database", &db, &done], 0);
    for expected in [
        format!("pathway {done}: completed"),
        "call: put on server ledger (mutating)".into(),
        "\"value\": \"paid\"".into(),
        "attempts:".into(),
        "bound to tool put of server rpr-fault-server 0.1.0 (MCP 2025-11-25)".into(),
        "by alice at".into(),
        "(used: the pathway was approved)".into(),
        "each passed its chain check".into(),
        "next: nothing: the pathway is terminal".into(),
    ] {
        assert!(out.contains(&expected), "missing {expected:?}:\n{out}");
    }
    // One timeline line per ledger event of the pathway, in order.
    let stored = events(dir.join("rpr.db").as_path(), &done);
    let timeline: Vec<&str> = out.lines().filter(|l| l.starts_with("  #")).collect();
    assert_eq!(timeline.len(), stored.len(), "{out}");
    for (line, event) in timeline.iter().zip(&stored) {
        assert!(
            line.contains(event["kind"].as_str().unwrap()),
            "{line} / {event}"
        );
    }

    // --json: one document with the detail, every event and the chain check.
    let doc = json(&["show", "--database", &db, &done, "--json"]);
    assert_eq!(doc["pathway"]["pathway_id"], done.as_str(), "{doc:#}");
    assert_eq!(doc["pathway"]["state"], "completed", "{doc:#}");
    assert_eq!(
        doc["events"].as_array().unwrap().len(),
        stored.len(),
        "{doc:#}"
    );
    assert_eq!(doc["chain_verified"], true, "{doc:#}");
}

#[test]
fn show_of_a_pathway_at_the_human_gate_shows_the_arguments_escaped_and_who_approves() {
    let dir = Scratch::new("cli-show-gate");
    let db = database(&dir);
    let (waiting, state) = by_key(dir.join("rpr.db").as_path(), "waiting");
    assert_eq!(state, "human_gate");
    let out = stdout(&["show", "--database", &db, &waiting], 0);
    assert!(
        !out.contains('\u{1b}') && !out.contains('\u{202e}'),
        "a control character reached the terminal:\n{out}"
    );
    assert!(
        out.contains(r"\u001b[2J") && out.contains(r"\u202eevil"),
        "{out}"
    );
    assert!(out.contains("attempts: none (nothing was sent)"), "{out}");
    assert!(out.contains("approvals: none"), "{out}");
    assert!(
        out.contains("binding: made when the call is sent"),
        "a call of `rpr call` has no pin: {out}"
    );
    assert!(
        out.contains("next: approve_or_deny by approval_authority (alice)"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "rpr approve --database {db} --pathway {waiting} --as alice"
        )),
        "{out}"
    );
}

#[test]
fn show_of_a_pathway_that_is_not_there_says_so() {
    let dir = Scratch::new("cli-show-missing");
    let db = database(&dir);
    let output = run(["show", "--database", &db, "pw_nothere"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    assert!(
        text(&output).contains("no pathway with id \"pw_nothere\""),
        "{}",
        text(&output)
    );
}

#[test]
fn a_read_command_that_fails_under_json_writes_the_error_document_a_step_writes() {
    let dir = Scratch::new("cli-json-error");
    let db = database(&dir);
    let missing = dir.join("missing.db").display().to_string();
    for args in [
        vec!["show", "--database", &db, "pw_nothere", "--json"],
        vec!["status", "--database", &missing, "--json"],
        vec!["list", "--database", &db, "--state", "nonsense", "--json"],
    ] {
        let out = stdout(&args, if args[0] == "list" { 2 } else { 1 });
        let doc: Value = serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("{args:?}: not one JSON document ({e}):\n{out}"));
        assert_eq!(doc["exit"], "error", "{args:?}: {doc}");
        assert!(
            doc["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{doc}"
        );
    }
    // A step's error document has the same two members.
    let step = stdout(
        &[
            "hold",
            "--database",
            &db,
            "--key",
            "waiting",
            "--as",
            "host",
            "--json",
        ],
        1,
    );
    let doc: Value = serde_json::from_str(&step).unwrap();
    assert_eq!(doc["exit"], "error", "{doc}");
    assert!(doc["error"].is_string(), "{doc}");
}

#[test]
fn list_filters_by_state_proposer_and_approver_and_pages_with_a_cursor() {
    let dir = Scratch::new("cli-list");
    let db = database(&dir);
    let path = dir.join("rpr.db");
    let id = |key: &str| by_key(path.as_path(), key).0;

    let all = json(&["list", "--database", &db, "--json"]);
    assert_eq!(all["count"], 3, "{all:#}");
    assert!(all.get("next_cursor").is_none(), "{all:#}");
    let mut ids: Vec<String> = ["done", "lost", "waiting"].map(id).to_vec();
    ids.sort();
    let listed: Vec<&str> = all["pathways"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pathway_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ids, "ordered by id");

    let unknown = json(&[
        "list",
        "--database",
        &db,
        "--state",
        "write_status_unknown",
        "--json",
    ]);
    assert_eq!(unknown["count"], 1, "{unknown:#}");
    assert_eq!(unknown["pathways"][0]["pathway_id"], id("lost").as_str());
    assert_eq!(unknown["pathways"][0]["next"]["action"], "reconcile");

    let for_alice = json(&["list", "--database", &db, "--approver", "alice", "--json"]);
    assert_eq!(for_alice["count"], 1, "{for_alice:#}");
    assert_eq!(
        for_alice["pathways"][0]["pathway_id"],
        id("waiting").as_str()
    );
    let for_bob = json(&["list", "--database", &db, "--approver", "bob", "--json"]);
    assert_eq!(for_bob["count"], 0, "{for_bob:#}");

    let by_agent = json(&["list", "--database", &db, "--actor", "agent", "--json"]);
    assert_eq!(by_agent["count"], 3, "{by_agent:#}");
    let by_nobody = json(&["list", "--database", &db, "--actor", "mallory", "--json"]);
    assert_eq!(by_nobody["count"], 0, "{by_nobody:#}");

    // Pages of one: each page's cursor leads to the next, and the last has none.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = vec!["list", "--database", &db, "--limit", "1", "--json"];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let page = json(&args);
        assert_eq!(page["count"], 1, "{page:#}");
        seen.push(
            page["pathways"][0]["pathway_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        match page.get("next_cursor").and_then(Value::as_str) {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, ids);

    // For people: a line per pathway, the count, and how to go on.
    let out = stdout(&["list", "--database", &db, "--limit", "2"], 0);
    assert!(out.contains("2 pathway(s)"), "{out}");
    assert!(
        out.contains(&format!("more: the same command with --cursor {}", ids[1])),
        "{out}"
    );

    // Bad input is bad usage.
    for bad in [
        vec!["--state", "nonsense"],
        vec!["--limit", "0"],
        vec!["--limit", "501"],
        vec!["--cursor", ""],
    ] {
        let mut args = vec!["list", "--database", &db];
        args.extend(bad.iter().copied());
        let output = run(&args);
        assert_eq!(output.status.code(), Some(2), "{bad:?}: {}", text(&output));
    }
}

#[test]
fn log_prints_the_ledger_in_order_filtered_and_as_json_lines() {
    let dir = Scratch::new("cli-log");
    let db = database(&dir);
    let path = dir.join("rpr.db");
    let store = rpr::store::ReadStore::open_read_only(&path).unwrap();
    let all = store.ledger(0, usize::MAX).unwrap();
    drop(store);

    let out = stdout(&["log", "--database", &db], 0);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), all.len(), "{out}");
    for (line, row) in lines.iter().zip(&all) {
        assert!(line.starts_with(&format!("#{} ", row.seq)), "{line}");
        assert!(line.ends_with(&row.pathway_id), "{line}");
    }

    // --json: one object per line, the stored event whole.
    let out = stdout(
        &[
            "log",
            "--database",
            &db,
            "--json",
            "--after",
            "2",
            "--limit",
            "3",
        ],
        0,
    );
    let parsed: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seqs: Vec<i64> = parsed.iter().map(|v| v["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, [3, 4, 5], "{out}");
    for (v, row) in parsed.iter().zip(&all[2..5]) {
        assert_eq!(v["hash"], row.hash.as_str());
        assert_eq!(
            v["event"],
            serde_json::from_str::<Value>(&row.event).unwrap()
        );
    }

    // One pathway's events only.
    let (waiting, _) = by_key(path.as_path(), "waiting");
    let out = stdout(&["log", "--database", &db, "--pathway", &waiting], 0);
    assert_eq!(
        out.lines().count(),
        events(path.as_path(), &waiting).len(),
        "{out}"
    );
    assert!(out.lines().all(|l| l.ends_with(&waiting)), "{out}");

    let output = run(["log", "--database", &db, "--pathway", "pw_nothere"]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    for bad in [
        vec!["--after", "-1"],
        vec!["--limit", "0"],
        vec!["--limit", "1", "--follow"],
    ] {
        let mut args = vec!["log", "--database", &db];
        args.extend(bad.iter().copied());
        let output = run(&args);
        assert_eq!(output.status.code(), Some(2), "{bad:?}: {}", text(&output));
    }
}

#[test]
fn log_follow_prints_the_events_committed_after_it_started() {
    use std::io::BufRead;
    let dir = Scratch::new("cli-log-follow");
    let db = database(&dir);
    let before = rpr::store::ReadStore::open_read_only(&dir.join("rpr.db"))
        .unwrap()
        .ledger(0, usize::MAX)
        .unwrap()
        .len();
    let mut follower = std::process::Command::new(env!("CARGO_BIN_EXE_rpr"))
        .args(["log", "--database", &db, "--follow", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let out = follower.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines() {
            let Ok(line) = line else { return };
            if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                return;
            }
        }
    });
    let next = || rx.recv_timeout(std::time::Duration::from_secs(20));
    for _ in 0..before {
        next().expect("the events stored before it started");
    }
    // A new call while it follows: its events come, in order, after the earlier ones.
    let config = dir.fault_config("none");
    let policy = dir.policy();
    let mut args = call_args(
        &config,
        &policy,
        &db,
        "put",
        r#"{"key": "later", "value": "1"}"#,
    );
    args.extend(["--key", "later"]);
    let output = run(&args);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let (later, _) = by_key(dir.join("rpr.db").as_path(), "later");
    let expected = events(dir.join("rpr.db").as_path(), &later);
    for (i, want) in expected.iter().enumerate() {
        let got = next().unwrap_or_else(|e| panic!("event {} of the later call: {e}", i + 1));
        assert_eq!(got["pathway_id"], later.as_str(), "{got}");
        assert_eq!(&got["event"], want, "in order");
        assert_eq!(got["seq"].as_u64(), Some((before + i + 1) as u64));
    }
    follower.kill().unwrap();
    follower.wait().unwrap();
}
