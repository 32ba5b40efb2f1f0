//! The `rpr` binary's command line: `--help` on every subcommand, the exit statuses it
//! documents, `status`, and the `--json` documents of `unresolved`, `status` and `verify`.
//! (`status` on a missing path or on a file that is not an rpr database is in
//! `host_errors.rs`, with the other commands.)

use crate::host_support;

use host_support::{Scratch, by_key, call_args, run, text};
use serde_json::Value;

const SUBCOMMANDS: [&str; 28] = [
    "call",
    "approve",
    "deny",
    "unresolved",
    "reconcile",
    "repair",
    "resume",
    "hold",
    "release",
    "escalate",
    "stop",
    "abort",
    "attest",
    "require-repair",
    "verify",
    "status",
    "show",
    "list",
    "log",
    "gate",
    "copy-to-postgres",
    "keygen",
    "verify-proof",
    "checkpoint",
    "witness",
    "proof",
    "completions",
    "man",
];

#[test]
fn help_lists_every_subcommand_and_documents_the_exit_statuses() {
    let output = run(["--help"]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    assert!(
        out.contains(
            "Exit status, the same for every command: 0 done; 3 the pathway needs another step\n\
             before the call is done (printed: an approval, the gate's repeat, a reconcile); 4 the\n\
             pathway is denied, final (`call --deny-as`, `deny`, the policy); 1 error; 2 bad usage;\n\
             141 its stdout was closed (`rpr status | head -1`); 130 interrupted (Ctrl-C) before a\n\
             call was sent, or interrupted twice. docs/host.md has the table."
        ),
        "{out}"
    );
    assert!(out.contains("--json"), "{out}");
    for sub in SUBCOMMANDS {
        assert!(
            out.lines()
                .any(|l| l.trim_start().starts_with(&format!("{sub} "))),
            "--help does not list {sub}:\n{out}"
        );
    }
}

#[test]
fn every_subcommand_has_help_that_exits_0() {
    for sub in SUBCOMMANDS {
        for args in [vec![sub, "--help"], vec!["help", sub]] {
            let output = run(&args);
            let out = text(&output);
            assert_eq!(output.status.code(), Some(0), "{args:?}:\n{out}");
            assert!(
                out.contains(&format!("Usage: rpr {sub}")),
                "{args:?}:\n{out}"
            );
        }
    }
}

/// A database with one completed pathway (`done`) and one unknown one (`lost`).
fn database(dir: &Scratch) -> String {
    host_support::done_and_lost(dir)
}

/// Runs `rpr` with `args`, expects exit status `code`, and parses stdout as one JSON document.
fn json(args: &[&str], code: i32) -> Value {
    let output = run(args);
    assert_eq!(
        output.status.code(),
        Some(code),
        "{args:?}:\n{}",
        text(&output)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: stdout is not one JSON document ({e}):\n{}",
            text(&output)
        )
    })
}

#[test]
fn status_shows_the_figures_as_text_and_as_json() {
    let dir = Scratch::new("cli-status");
    let db = database(&dir);

    let output = run(["status", "--database", &db]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(0), "{out}");
    for needle in [
        "schema version ",
        "pathways: 2 (completed 1, write_status_unknown 1)",
        "1 unresolved pathway(s)",
        "ledger: ",
    ] {
        assert!(out.contains(needle), "status lacks {needle:?}:\n{out}");
    }

    let status = json(&["status", "--database", &db, "--json"], 0);
    assert!(
        status["schema_version"].as_i64().unwrap() >= 1,
        "{status:#}"
    );
    assert_eq!(status["counts"]["completed"], 1, "{status:#}");
    assert_eq!(status["counts"]["write_status_unknown"], 1, "{status:#}");
    assert_eq!(status["counts"]["denied"], 0, "{status:#}");
    assert_eq!(status["unresolved_count"], 1, "{status:#}");
    assert!(status["ledger_length"].as_i64().unwrap() > 0, "{status:#}");
    assert_eq!(
        status["ledger_head"].as_str().unwrap().len(),
        64,
        "{status:#}"
    );
    // `--json` is global: before the subcommand too.
    assert_eq!(json(&["--json", "status", "--database", &db], 0), status);
}

#[test]
fn unresolved_and_verify_print_one_json_document() {
    let dir = Scratch::new("cli-json");
    let db = database(&dir);
    let (lost, _) = by_key(dir.join("rpr.db").as_path(), "lost");

    let unresolved = json(&["unresolved", "--database", &db, "--json"], 0);
    assert_eq!(unresolved["count"], 1, "{unresolved:#}");
    assert_eq!(
        unresolved["recovered"],
        Value::Array(vec![]),
        "{unresolved:#}"
    );
    let entry = &unresolved["unresolved"][0];
    assert_eq!(entry["pathway_id"], lost.as_str(), "{unresolved:#}");
    assert_eq!(entry["idempotency_key"], "lost", "{unresolved:#}");
    assert_eq!(entry["state"], "write_status_unknown", "{unresolved:#}");
    assert_eq!(entry["action"], "put", "{unresolved:#}");
    assert_eq!(entry["next"]["action"], "reconcile", "{unresolved:#}");

    let verify = json(&["verify", "--database", &db, "--json"], 0);
    assert_eq!(verify["verified"], true, "{verify:#}");
    assert!(verify["events"].as_i64().unwrap() > 0, "{verify:#}");
    assert_eq!(verify["problems"], Value::Array(vec![]), "{verify:#}");
    let head = verify["head"].as_str().unwrap().to_owned();
    let again = json(&["verify", "--database", &db, "--json", "--head", &head], 0);
    assert_eq!(again["verified"], true, "{again:#}");

    // A head the chain does not reach: the document says why, and the exit status is 1.
    let unknown_head = "0".repeat(64);
    let cut = json(
        &[
            "verify",
            "--database",
            &db,
            "--json",
            "--head",
            &unknown_head,
        ],
        1,
    );
    assert_eq!(cut["verified"], false, "{cut:#}");
    assert_eq!(cut["problems"][0]["kind"], "truncated", "{cut:#}");

    // For people: the problem in words, without Rust's Debug forms.
    let out = run(["verify", "--database", &db, "--head", &unknown_head]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("truncated"), "{said}");
    assert!(
        !said.contains("None") && !said.contains("Some(") && !said.contains("Truncated"),
        "{said}"
    );

    // A head that is not a ledger hash is bad usage (exit 2), not a head the chain misses.
    for bad in ["deadbeef", "g".repeat(64).as_str(), ""] {
        let out = run(["verify", "--database", &db, "--head", bad]);
        assert_eq!(out.status.code(), Some(2), "--head {bad:?}: {}", text(&out));
        assert!(text(&out).contains("not a ledger hash"), "{}", text(&out));
    }
    // The head in upper case is the same head.
    let upper = head.to_ascii_uppercase();
    let out = run(["verify", "--database", &db, "--head", &upper]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn a_step_with_json_prints_how_it_ended_and_the_pathway_after_it() {
    let dir = Scratch::new("cli-step-json");
    let db = database(&dir);
    let (lost, _) = by_key(dir.join("rpr.db").as_path(), "lost");
    let (config, policy) = (dir.fault_config("none"), dir.policy());

    // The unknown call, reconciled by readback: the effect is there, so it completes.
    let reconciled = json(
        &[
            "reconcile",
            "--config",
            &config,
            "--policy",
            &policy,
            "--database",
            &db,
            "--key",
            "lost",
            "--json",
        ],
        0,
    );
    assert_eq!(reconciled["exit"], "done", "{reconciled:#}");
    assert_eq!(reconciled["pathway"]["pathway_id"], lost.as_str());
    assert_eq!(
        reconciled["pathway"]["state"], "completed",
        "{reconciled:#}"
    );
    assert_eq!(
        reconciled["pathway"]["next"]["action"], "none",
        "{reconciled:#}"
    );

    // A step that does not apply: an error, said in the document too, with the pathway as
    // it stands; the text for people went to stderr.
    let output = run([
        "deny",
        "--database",
        &db,
        "--key",
        "done",
        "--as",
        "alice",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", text(&output));
    let denied: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{}", text(&output)));
    assert_eq!(denied["exit"], "error", "{denied:#}");
    assert!(
        denied["error"].as_str().unwrap().contains("does not apply"),
        "{denied:#}"
    );
    assert_eq!(denied["pathway"]["state"], "completed", "{denied:#}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("does not apply"),
        "{}",
        text(&output)
    );
}

/// `call --json`: the step document (`exit`, `pathway`) and the server's reply as `result`;
/// a replay has the pathway and no result (nothing was sent); a denial says `denied` (4);
/// an error before anything was recorded has `exit` and `error` only. The text for people
/// goes to stderr.
#[test]
fn call_with_json_prints_the_pathway_and_the_servers_reply() {
    let dir = Scratch::new("cli-call-json");
    let db = dir.join("rpr.db").display().to_string();
    let (config, policy) = (dir.fault_config("none"), dir.policy());
    let arguments = r#"{"key": "k", "value": "v"}"#;
    let mut args = call_args(&config, &policy, &db, "put", arguments);
    args.extend(["--key", "json-1", "--json"]);
    let output = run(&args);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    let doc: Value = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}):\n{}", text(&output)));
    assert_eq!(doc["exit"], "done", "{doc:#}");
    assert_eq!(doc["pathway"]["state"], "completed", "{doc:#}");
    assert_eq!(doc["pathway"]["idempotency_key"], "json-1", "{doc:#}");
    assert_ne!(doc["result"]["isError"], true, "{doc:#}");
    assert_eq!(doc["result"]["structuredContent"]["value"], "v", "{doc:#}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("is COMPLETED"),
        "{}",
        text(&output)
    );

    // The same key again: replayed, nothing sent, so no `result`.
    let replay = json(&args, 0);
    assert_eq!(
        replay["pathway"]["pathway_id"],
        doc["pathway"]["pathway_id"]
    );
    assert!(replay.get("result").is_none(), "{replay:#}");

    // Denied at the Human Gate: 4, `denied`, nothing sent.
    let mut args = call_args(
        &config,
        &policy,
        &db,
        "put",
        r#"{"key": "n", "value": "v"}"#,
    );
    let at = args.iter().position(|a| *a == "--approve-as").unwrap();
    args[at] = "--deny-as";
    args.push("--json");
    let denied = json(&args, 4);
    assert_eq!(denied["exit"], "denied", "{denied:#}");
    assert_eq!(denied["pathway"]["state"], "denied", "{denied:#}");
    assert!(denied.get("result").is_none(), "{denied:#}");

    // Refused before anything was recorded: the error, no pathway.
    let mut args = call_args(&config, &policy, &db, "put", r#"{"key": 7}"#);
    args.push("--json");
    let refused = json(&args, 1);
    assert_eq!(refused["exit"], "error", "{refused:#}");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("nothing was recorded or sent"),
        "{refused:#}"
    );
    assert!(refused.get("pathway").is_none(), "{refused:#}");
}

/// `rpr status | head -1`: when the reader of stdout has gone, a command ends with status 141
/// (what a shell reports for SIGPIPE) and says nothing, instead of panicking.
#[test]
fn a_closed_stdout_ends_a_command_quietly_instead_of_panicking() {
    let dir = Scratch::new("cli-epipe");
    let db = database(&dir);
    for args in [
        vec!["status", "--database", &db],
        vec!["status", "--database", &db, "--json"],
        vec!["unresolved", "--database", &db],
        vec!["verify", "--database", &db, "--json"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = std::process::Command::new(host_support::rpr())
            .args(&args)
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(141), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// Without the `postgres` feature `copy-to-postgres` exists (the same `--help` on every
/// build) and says what the build lacks, reading and writing nothing. With the feature, it is
/// tested against a real server in `pg_copy.rs`.
#[cfg(not(feature = "postgres"))]
#[test]
fn copy_to_postgres_without_the_feature_says_the_build_lacks_it() {
    let dir = Scratch::new("copy-no-feature");
    let db = dir.join("absent.db").display().to_string();
    let output = run([
        "copy-to-postgres",
        "--database",
        &db,
        "--to",
        "postgres://u:secret@127.0.0.1:1/rpr",
    ]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(
        out.contains("built without the `postgres` feature"),
        "{out}"
    );
    assert!(!out.contains("secret"), "{out}");
    assert!(!dir.join("absent.db").exists());
}

/// Without the `postgres` feature a URL as `--database` is refused by both binaries, with
/// an error that names what the build lacks and does not repeat the password; nothing is
/// created under its name.
#[cfg(not(feature = "postgres"))]
#[test]
fn a_postgres_url_as_database_needs_the_feature_and_its_password_is_not_repeated() {
    for command in ["status", "verify", "unresolved"] {
        let output = run([command, "--database", "postgres://u:secret@127.0.0.1:1/rpr"]);
        let out = text(&output);
        assert_eq!(output.status.code(), Some(1), "{command}: {out}");
        assert!(out.contains("no PostgreSQL support"), "{command}: {out}");
        assert!(!out.contains("secret"), "{command}: {out}");
    }
    let mcp = std::process::Command::new(env!("CARGO_BIN_EXE_rpr-mcp"))
        .args(["--database", "postgresql://u:secret@127.0.0.1:1/rpr"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&mcp.stderr);
    assert_eq!(mcp.status.code(), Some(1), "{err}");
    assert!(err.contains("no PostgreSQL support"), "{err}");
    assert!(!err.contains("secret") && mcp.stdout.is_empty(), "{err}");
    assert!(!std::path::Path::new("postgres:").exists());
}

/// The commands on PostgreSQL (`--database postgres://…`, a schema of its own), the same
/// story as on a file: `call` creates the store and stops at the Human Gate, a second call
/// is lost after its effect; `status`, `unresolved` and `verify` read it; `approve` sends the
/// gated call once and `reconcile` settles the lost one by readback, nothing re-sent. Through
/// the read-only role the reads give the same answers and a step is refused, writing
/// nothing. No output carries a password.
#[cfg(feature = "postgres")]
#[test]
fn the_commands_run_on_postgres_and_the_read_only_role_only_reads() {
    let owner_url = std::env::var("RPR_PG_URL").expect("RPR_PG_URL: eval \"$(bash .ci/postgres)\"");
    let reader_url = std::env::var("RPR_PG_READER_URL").expect("RPR_PG_READER_URL");
    let schema = format!("cli_{}", std::process::id());
    let mut admin = postgres::Client::connect(&owner_url, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .unwrap();
    let db = format!("{owner_url}?options=-csearch_path%3D{schema}");
    let read_only = format!("{reader_url}?options=-csearch_path%3D{schema}");
    let dir = Scratch::new("cli-postgres");
    let policy = dir.policy();
    let printed = std::cell::RefCell::new(String::new());
    let step = |args: &[&str], code: i32| -> String {
        let output = run(args);
        let out = text(&output);
        assert_eq!(output.status.code(), Some(code), "{args:?}:\n{out}");
        printed.borrow_mut().push_str(&out);
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let as_json = |out: String| -> Value { serde_json::from_str(&out).unwrap() };

    // Stopped at the Human Gate: nothing sent.
    let config = dir.fault_config("none");
    let gated = call_args(
        &config,
        &policy,
        &db,
        "put",
        r#"{"key": "g", "value": "1"}"#,
    );
    let mut gated: Vec<&str> = gated[..gated.len() - 2].to_vec();
    gated.extend(["--key", "gated"]);
    step(&gated, 3);
    // Lost: the server died after the effect, before its reply.
    let crash = dir.fault_config("crash-after-effect");
    let mut lost = call_args(&crash, &policy, &db, "put", r#"{"key": "l", "value": "2"}"#);
    lost.extend(["--key", "lost"]);
    step(&lost, 3);
    assert_eq!(dir.effects(), 1);

    let status = as_json(step(&["status", "--database", &db, "--json"], 0));
    assert_eq!(status["counts"]["human_gate"], 1, "{status:#}");
    assert_eq!(status["counts"]["write_status_unknown"], 1, "{status:#}");
    assert_eq!(status["unresolved_count"], 2, "{status:#}");
    let unresolved = as_json(step(&["unresolved", "--database", &db, "--json"], 0));
    assert_eq!(unresolved["count"], 2, "{unresolved:#}");

    // Through the read-only role: the same answers, and a step is refused.
    let dump = |admin: &mut postgres::Client| -> Vec<String> {
        ["pathways", "attempts", "approvals", "ledger", "meta"]
            .iter()
            .flat_map(|t| {
                admin
                    .query(
                        &format!("SELECT t::text FROM {schema}.{t} t ORDER BY 1"),
                        &[],
                    )
                    .unwrap()
                    .iter()
                    .map(|r| r.get::<_, String>(0))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let before = dump(&mut admin);
    assert_eq!(
        as_json(step(&["status", "--database", &read_only, "--json"], 0)),
        status
    );
    let verified = as_json(step(&["verify", "--database", &read_only, "--json"], 0));
    assert_eq!(verified["verified"], true, "{verified:#}");
    let refused = [
        "approve",
        "--config",
        &config,
        "--policy",
        &policy,
        "--database",
        &read_only,
        "--key",
        "gated",
        "--as",
        "alice",
    ];
    let out = step(&refused, 1);
    assert!(out.is_empty() || !out.contains("COMPLETED"), "{out}");
    assert!(
        printed.borrow().contains("read-only transaction"),
        "{}",
        printed.borrow()
    );
    assert_eq!(dump(&mut admin), before, "the read-only role wrote");
    assert_eq!(dir.effects(), 1, "nothing sent through the read-only role");

    // The owner approves (one send) and reconciles by readback (no send).
    step(
        &[
            "approve",
            "--config",
            &config,
            "--policy",
            &policy,
            "--database",
            &db,
            "--key",
            "gated",
            "--as",
            "alice",
        ],
        0,
    );
    assert_eq!(dir.effects(), 2);
    step(
        &[
            "reconcile",
            "--config",
            &config,
            "--policy",
            &policy,
            "--database",
            &db,
            "--key",
            "lost",
        ],
        0,
    );
    assert_eq!(dir.effects(), 2, "reconcile re-sent nothing");
    let status = as_json(step(&["status", "--database", &read_only, "--json"], 0));
    assert_eq!(status["counts"]["completed"], 2, "{status:#}");
    assert_eq!(status["unresolved_count"], 0, "{status:#}");
    let verified = as_json(step(&["verify", "--database", &db, "--json"], 0));
    assert_eq!(verified["verified"], true, "{verified:#}");
    assert_eq!(verified["problems"], Value::Array(vec![]), "{verified:#}");

    let printed = printed.into_inner();
    for password in ["rpr_owner_pw", "rpr_reader_pw"] {
        assert!(
            !printed.contains(password),
            "a password was printed:\n{printed}"
        );
    }
    assert!(printed.contains(":***@"), "{printed}");
    admin
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .unwrap();
}

/// A config with server `ledger`: the fault server, whose `put` claims `readOnlyHint: true`.
fn claiming_config(dir: &Scratch) -> String {
    dir.write(
        "mcp-claim.json",
        &serde_json::json!({"mcpServers": {"ledger": {
            "command": env!("CARGO_BIN_EXE_rpr-fault-server"),
            "args": ["--state", dir.join("state.json"), "--effects", dir.join("effects.log"),
                     "--claim-read-only"],
        }}}),
    )
}

#[test]
fn call_gates_a_tool_by_the_policy_not_by_its_read_only_claim() {
    let dir = Scratch::new("cli-claim");
    let config = claiming_config(&dir);
    let db = dir.join("rpr.db").display().to_string();
    let policy = dir.write(
        "no-rule.json",
        &serde_json::json!({"servers": {"ledger": {"get": {"read_only": true}}}}),
    );
    let args = r#"{"key": "k", "value": "v"}"#;
    for _ in 0..2 {
        let output = run(call_args(&config, &policy, &db, "put", args));
        let out = text(&output);
        assert_eq!(output.status.code(), Some(1), "{out}");
        assert!(
            out.contains("no rule") && out.contains("servers.ledger.put"),
            "{out}"
        );
    }
    assert_eq!(dir.effects(), 0, "the claim sent nothing");
}

#[test]
fn call_refuses_a_policy_naming_a_server_or_tool_that_is_not_there() {
    let dir = Scratch::new("cli-typo");
    let config = claiming_config(&dir);
    let db = dir.join("rpr.db").display().to_string();
    let args = r#"{"key": "k", "value": "v"}"#;
    // Meant to deny `put`: the rule names `putt`, so `put` would fall under "*".
    let tool_typo = dir.write(
        "tool-typo.json",
        &serde_json::json!({"servers": {"ledger": {
            "*": {"admission": "allow", "read_only": true},
            "putt": {"admission": "deny"}
        }}}),
    );
    let output = run(call_args(&config, &tool_typo, &db, "put", args));
    let out = text(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.contains("putt") && out.contains("get, put"), "{out}");
    // A policy keyed by a server name the config does not have.
    let server_typo = dir.write(
        "server-typo.json",
        &serde_json::json!({"servers": {"ledgr": {"put": {"admission": "deny"}},
                                        "ledger": {"*": {"admission": "allow", "read_only": true}}}}),
    );
    let output = run(call_args(&config, &server_typo, &db, "put", args));
    let out = text(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.contains("ledgr") && out.contains("ledger"), "{out}");
    assert_eq!(dir.effects(), 0, "a misspelt rule governed nothing");
}

#[test]
fn call_answers_an_identical_call_from_its_open_pathway_whatever_its_key() {
    let dir = Scratch::new("cli-identical");
    let config = dir.fault_config("crash-after-effect");
    let policy = dir.write(
        "policy.json",
        &serde_json::json!({
            "authority": {"approval_authority": "alice", "repair_owner": "bob"},
            "servers": {"ledger": {
                "get": {"read_only": true},
                "put": {"human_gate": true, "readback": {"tool": "get", "arguments": {"key": "$key"},
                        "expect": {"/structuredContent/value": "$value"}}}
            }}
        }),
    );
    let db = dir.join("rpr.db").display().to_string();
    let args = r#"{"key": "invoice-9", "value": "paid"}"#;
    let first = run(call_args(&config, &policy, &db, "put", args));
    assert_eq!(first.status.code(), Some(3), "{}", text(&first));
    assert_eq!(dir.effects(), 1);
    let unknown = host_support::pathways(dir.join("rpr.db").as_path());
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    let id = unknown[0].0.clone();
    // The same call again, without a key and with one: answered from the unknown pathway.
    for key in [None, Some("order-9")] {
        let mut again = call_args(&config, &policy, &db, "put", args);
        if let Some(key) = key {
            again.extend(["--key", key]);
        }
        let output = run(&again);
        let out = text(&output);
        assert_eq!(dir.effects(), 1, "{key:?}: sent again:\n{out}");
        assert_eq!(output.status.code(), Some(3), "{key:?}: {out}");
        assert!(out.contains(&id), "{key:?}: names the open pathway: {out}");
    }
    assert_eq!(
        host_support::pathways(dir.join("rpr.db").as_path()).len(),
        1
    );
}

/// Issue 26: `rpr call` of a read that fails says the pathway is failed, with the reason,
/// and exits 1 (nothing to repair); the same read again is a new pathway.
#[test]
fn call_of_a_read_that_fails_ends_failed_and_the_same_read_again_is_a_new_pathway() {
    let dir = Scratch::new("cli-read-failed");
    let config = dir.write(
        "mcp-get-fails.json",
        &serde_json::json!({"mcpServers": {"ledger": {
            "command": env!("CARGO_BIN_EXE_rpr-fault-server"),
            "args": ["--state", dir.join("state.json"), "--effects", dir.join("effects.log"),
                     "--fault", "is-error", "--fault-on", "get"],
        }}}),
    );
    let policy = dir.policy();
    let db = dir.join("rpr.db").display().to_string();
    for round in 1..=2 {
        let output = run(call_args(&config, &policy, &db, "get", r#"{"key": "k"}"#));
        let out = text(&output);
        assert_eq!(output.status.code(), Some(1), "{out}");
        assert!(
            out.contains("is FAILED") && out.contains("injected tool failure on get"),
            "{out}"
        );
        let pathways = host_support::pathways(dir.join("rpr.db").as_path());
        assert_eq!(pathways.len(), round, "{pathways:?}");
        assert!(pathways.iter().all(|p| p.2 == "failed"), "{pathways:?}");
    }
}

#[test]
fn version_names_the_commit_and_the_features_it_was_built_with() {
    let out = run(["--version"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".to_owned(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        );
    let features = if cfg!(feature = "postgres") {
        "postgres"
    } else {
        "none"
    };
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        format!(
            "rpr {} (commit {commit}; features: {features})",
            env!("CARGO_PKG_VERSION")
        )
    );
}

/// A PostgreSQL location nobody listens on: the message says where (without the password),
/// what the client saw, and what to check; nothing panics.
#[cfg(feature = "postgres")]
#[test]
fn a_postgres_location_nobody_listens_on_names_where_and_why() {
    // Port 1 on loopback: no server, so the connection is refused at once.
    let url = "postgres://rpr_owner:s3cret@127.0.0.1:1/rpr";
    for args in [
        vec!["status", "--database", url],
        vec!["verify", "--database", url],
    ] {
        let out = run(&args);
        let said = text(&out);
        assert_eq!(out.status.code(), Some(1), "{said}");
        assert!(said.contains("cannot connect to PostgreSQL at"), "{said}");
        assert!(said.contains("127.0.0.1:1/rpr"), "{said}");
        assert!(said.contains("refused"), "{said}");
        assert!(!said.contains("s3cret"), "{said}");
    }

    // A copy to it: refused as unreachable, its kind in the JSON document, the source kept.
    let dir = Scratch::new("cli-pg-unreachable");
    let db = database(&dir);
    let out = run(["--json", "copy-to-postgres", "--database", &db, "--to", url]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["kind"], "target_unreachable", "{doc:#}");
    assert_eq!(
        doc["error"].as_str().unwrap().matches("check that").count(),
        1,
        "one piece of advice: {doc:#}"
    );
    assert!(!text(&out).contains("s3cret"), "{}", text(&out));
    let status = run(["status", "--database", &db]);
    assert_eq!(status.status.code(), Some(0), "{}", text(&status));
}

/// `--signing-key` belongs to the commands that write; `--witness` to those and to `verify
/// --key`. Given elsewhere, each is bad usage (exit 2), not silently ignored.
#[test]
fn signing_flags_on_a_command_that_does_not_use_them_are_bad_usage() {
    let dir = Scratch::new("cli-signing-usage");
    let db = database(&dir);
    let key = dir.join("log.key").display().to_string();
    let out = run(["keygen", "--out", &key]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    for args in [
        vec!["status", "--database", &db, "--signing-key", &key],
        vec!["verify", "--database", &db, "--witness", &key],
        vec!["checkpoint", "--database", &db, "--begin"],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
    // The database was made without a key: a signing step refuses its unsigned history
    // until the operator begins the log.
    let (config, policy) = (dir.fault_config("none"), dir.policy());
    let arguments = r#"{"key": "third", "value": "paid"}"#;
    let mut call = call_args(&config, &policy, &db, "put", arguments);
    call.extend(["--signing-key", &key]);
    let out = run(&call);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("checkpoint --begin"), "{}", text(&out));
    let out = run([
        "checkpoint",
        "--database",
        &db,
        "--begin",
        "--signing-key",
        &key,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).starts_with("rpr/db_"), "{}", text(&out));
    let out = run(&call);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    // The public half is not a signing key.
    let public = format!("{key}.pub");
    let out = run([
        "hold",
        "--database",
        &db,
        "--key",
        "third",
        "--as",
        "x",
        "--reason",
        "r",
        "--signing-key",
        &public,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("not a signer key"), "{}", text(&out));
}

/// `--signer-command`: the key stays with another program (`rpr sign` here); a command that
/// answers nonsense, or signs with another key, refuses the step and writes nothing.
#[test]
fn a_signer_command_signs_the_log_and_a_bad_one_refuses_the_step() {
    let dir = Scratch::new("cli-signer-command");
    let (config, policy) = (dir.fault_config("none"), dir.policy());
    let db = dir.join("rpr.db").display().to_string();
    let [key, other] = ["log.key", "other.key"].map(|f| dir.join(f).display().to_string());
    for k in [&key, &other] {
        let out = run(["keygen", "--out", k]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    }
    let public = format!("{key}.pub");
    let rpr = host_support::rpr().display().to_string();
    let good = format!("{rpr} sign --key {key}");
    let call = |value: &str, command: &str| {
        let arguments = format!(r#"{{"key": "{value}", "value": "paid"}}"#);
        let mut args: Vec<String> = call_args(&config, &policy, &db, "put", &arguments)
            .into_iter()
            .map(str::to_owned)
            .collect();
        args.extend(
            [
                "--key",
                value,
                "--signer-command",
                command,
                "--log-key",
                &public,
            ]
            .map(str::to_owned),
        );
        run(&args)
    };
    let out = call("first", &good);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let events = |db: &str| crate::common::row_count(std::path::Path::new(db), "ledger");
    let before = events(&db);
    for (command, says) in [
        // `cat` reads the whole checkpoint and answers with it, no signature line (a
        // command that exits without reading, `echo`, races its stdin: refused either as
        // "did not read the checkpoint" or as this, and the test failed one run in a few).
        ("/bin/cat".to_owned(), "not a signature line"),
        (format!("{rpr} sign --key {other}"), "does not verify"),
        ("/nonexistent/signer".to_owned(), "does not start"),
    ] {
        let out = call("second", &command);
        assert_eq!(out.status.code(), Some(1), "{command}: {}", text(&out));
        assert!(text(&out).contains(says), "{command}: {}", text(&out));
        assert_eq!(events(&db), before, "{command}: nothing was written");
    }
    let out = run(["verify", "--database", &db, "--key", &public]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

/// `rpr sign` signs checkpoints only, and with `--origin` only those of that log: before, it
/// signed any note's text it was handed.
#[test]
fn rpr_sign_signs_a_checkpoint_of_its_log_and_nothing_else() {
    let dir = Scratch::new("cli-sign");
    let key = dir.join("log.key").display().to_string();
    let out = run(["keygen", "--out", &key]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let sign = |stdin: &str, origin: Option<&str>| {
        let mut args = vec!["sign", "--key", key.as_str()];
        args.extend(origin.map(|o| ["--origin", o]).into_iter().flatten());
        host_support::run_with_stdin(&args, stdin.as_bytes())
    };
    let root = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let checkpoint = format!("rpr/db_a\n3\n{root}\n");
    for (stdin, origin, says) in [
        ("any note at all\n".to_owned(), None, "not a checkpoint"),
        (
            checkpoint.clone(),
            Some("rpr/db_b"),
            "not of --origin rpr/db_b",
        ),
    ] {
        let out = sign(&stdin, origin);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains(says), "{}", text(&out));
        assert!(out.stdout.is_empty(), "nothing signed");
    }
    for origin in [None, Some("rpr/db_a")] {
        let out = sign(&checkpoint, origin);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("\u{2014} "));
    }
}

/// `rpr … 2>&1 | head -1` where the reader has gone before the error is said: with stderr a
/// closed pipe, `rpr` and `rpr-mcp` end with the status of what went wrong, the same as with
/// stderr read (their message is dropped), not a panic's 101.
#[test]
fn a_closed_stderr_keeps_the_exit_status_of_the_error() {
    let dir = Scratch::new("cli-closed-stderr");
    let missing = dir.join("no.db");
    let missing = missing.to_str().unwrap();
    let status = |program: &std::path::Path, args: &[&str], closed: bool| {
        let (reader, writer) = std::io::pipe().unwrap();
        if closed {
            drop(reader);
        }
        std::process::Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(writer)
            .status()
            .unwrap()
            .code()
    };
    let rpr_mcp = std::path::Path::new(env!("CARGO_BIN_EXE_rpr-mcp"));
    for (program, args) in [
        (rpr_mcp, vec!["--database", missing]),
        (rpr_mcp, vec!["--no-such-flag"]),
        (host_support::rpr(), vec!["status", "--database", missing]),
        (host_support::rpr(), vec!["status", "--no-such-flag"]),
    ] {
        let read = status(program, &args, false);
        assert!(
            matches!(read, Some(c) if c != 0 && c != 101),
            "{args:?}: {read:?}"
        );
        assert_eq!(status(program, &args, true), read, "{program:?} {args:?}");
    }
}
