//! Bad input to `rpr`'s operator commands gets a clear error and a non-zero exit status, never a
//! panic, and records nothing: bad JSON, unknown server or tool, bad arguments, a
//! missing database, a policy with a typo, a step that does not apply.

use crate::host_support;

use host_support::{Scratch, by_key, call_args as call, run, text};
use serde_json::json;
use std::path::Path;

/// Runs `rpr` and checks the exit status and that the output says `needle`.
fn fails(args: &[&str], code: i32, needle: &str) {
    let output = run(args);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(code), "{args:?}:\n{out}");
    assert!(
        out.contains(needle),
        "{args:?}: output lacks {needle:?}:\n{out}"
    );
    assert!(!out.contains("panicked"), "{args:?}:\n{out}");
}

/// `call put` on server `ledger` with idempotency key `key`, for a policy with no Human Gate
/// on `put` (no `--approve-as`).
fn ungated_call<'a>(
    config: &'a str,
    policy: &'a str,
    db: &'a str,
    args: &'a str,
    key: &'a str,
) -> Vec<&'a str> {
    let mut a = call(config, policy, db, "put", args);
    a.retain(|x| !["--approve-as", "alice"].contains(x));
    a.extend(["--key", key]);
    a
}

#[test]
fn bad_call_input_is_refused_before_anything_is_recorded() {
    let dir = Scratch::new("errors");
    let config = dir.fault_config("none");
    let policy = dir.policy();
    let db_path = dir.join("rpr.db");
    let db = db_path.to_str().unwrap();
    let ok_args = r#"{"key": "k", "value": "v"}"#;

    let bad_json = dir.join("bad.json");
    std::fs::write(&bad_json, "{\"mcpServers\": {").unwrap();
    let bad_json = bad_json.to_str().unwrap();
    fails(
        &call(bad_json, &policy, db, "put", ok_args),
        1,
        "is not valid",
    );
    fails(
        &call("/nonexistent/mcp.json", &policy, db, "put", ok_args),
        1,
        "cannot read config",
    );
    let no_servers = dir.write("empty.json", &json!({"servers": {}}));
    fails(
        &call(&no_servers, &policy, db, "put", ok_args),
        1,
        "missing field `mcpServers`",
    );
    let remote = dir.write(
        "remote.json",
        &json!({"mcpServers": {"ledger": {"url": "https://x"}}}),
    );
    fails(
        &call(&remote, &policy, db, "put", ok_args),
        1,
        "not a stdio server",
    );
    let missing = dir.write(
        "missing.json",
        &json!({"mcpServers": {"ledger": {"command": "/nonexistent/server"}}}),
    );
    fails(
        &call(&missing, &policy, db, "put", ok_args),
        1,
        "server `ledger` did not start",
    );

    let mut unknown_server = call(&config, &policy, db, "put", ok_args);
    unknown_server[8] = "nope";
    fails(
        &unknown_server,
        1,
        "the config has no server named `nope` (it has: ledger)",
    );
    fails(
        &call(&config, &policy, db, "nope", ok_args),
        1,
        "has no tool `nope` (it has: put, get)",
    );
    fails(
        &call(&config, &policy, db, "put", "{not json"),
        1,
        "--args is not valid JSON",
    );
    fails(
        &call(&config, &policy, db, "put", "[1]"),
        1,
        "--args must be a JSON object",
    );
    fails(
        &call(&config, &policy, db, "put", r#"{"key": 1}"#),
        1,
        "do not match the input schema of `put`",
    );

    let typo = dir.write(
        "typo.json",
        &json!({"servers": {"ledger": {"get": {"read_only": true}, "put": {"human_gat": false}}}}),
    );
    fails(
        &call(&config, &typo, db, "put", ok_args),
        1,
        "unknown field `human_gat`",
    );
    let role = dir.write("role.json", &json!({"authority": {"approver": "alice"}}));
    fails(
        &call(&config, &role, db, "put", ok_args),
        1,
        "unknown role `approver`",
    );
    let no_server = dir.write("no-server.json", &json!({}));
    fails(
        &call(&config, &no_server, db, "put", ok_args),
        1,
        "the policy has no rules for server `ledger` (it names: none)",
    );
    let no_readback = dir.write("no-readback.json", &json!({"servers": {"ledger": {}}}));
    fails(
        &call(&config, &no_readback, db, "put", ok_args),
        1,
        "has no rule in the policy, so it is treated as changing state",
    );
    let writing_readback = dir.write(
        "writing-readback.json",
        &json!({"servers": {"ledger": {"get": {"read_only": true}, "put": {"readback": {
            "tool": "put", "arguments": {}, "expect": {"/structuredContent/value": "$value"}}}}}}),
    );
    fails(
        &call(&config, &writing_readback, db, "put", ok_args),
        1,
        "is not read-only by the policy",
    );

    assert!(!db_path.exists(), "a refused call created the database");
    assert_eq!(dir.effects(), 0);
}

#[test]
fn usage_errors_exit_2() {
    fails(&["frobnicate"], 2, "unrecognized subcommand 'frobnicate'");
    fails(
        &["verify"],
        2,
        "the following required arguments were not provided:\n  --database <DB>",
    );
    fails(
        &["verify", "--database"],
        2,
        "a value is required for '--database <DB>'",
    );
    fails(
        &["verify", "--database", "a", "--database", "b"],
        2,
        "'--database <DB>' cannot be used multiple times",
    );
    fails(
        &["unresolved", "--database", "x", "--bogus", "1"],
        2,
        "unexpected argument '--bogus'",
    );
    fails(
        &[
            "call",
            "--approve-as",
            "a",
            "--deny-as",
            "b",
            "--server",
            "s",
            "--tool",
            "t",
            "--args",
            "{}",
        ],
        2,
        "'--approve-as <NAME>' cannot be used with '--deny-as <NAME>'",
    );
    fails(
        &["status", "--database", "x", "--json", "--bogus"],
        2,
        "unexpected argument '--bogus'",
    );
    fails(
        &["keygen", "--out", "x", "--json"],
        2,
        "`--json` applies to `call`, `unresolved`, `status`, `show`, `list`, `log`, `verify`, `pin`, `copy-to-postgres`, `verify-proof` and the steps on a pathway, not to `gate` (its stdout is the MCP protocol) or the key and log commands",
    );
    fails(&[], 2, "Usage: rpr [OPTIONS] <COMMAND>");
    // A lease past what the store can write as a time would leave its attempt unreadable.
    fails(
        &[
            "resume",
            "--database",
            "x",
            "--key",
            "k",
            "--as",
            "a",
            "--lease",
            "31536001",
        ],
        2,
        "31536001 is not in 1..=31536000",
    );
    let output = run(["--help"]);
    assert!(output.status.success());
    assert!(text(&output).contains(
        "Exit status, the same for every command: 0 done; 3 the pathway needs another step"
    ));
}

#[test]
fn commands_on_a_missing_database_or_pathway_fail_clearly() {
    let dir = Scratch::new("errors-db");
    let missing = dir.join("missing.db");
    let missing = missing.to_str().unwrap();
    for args in [
        vec!["unresolved", "--database", missing],
        vec!["verify", "--database", missing],
        vec!["status", "--database", missing],
        vec!["status", "--database", missing, "--json"],
        vec![
            "deny",
            "--database",
            missing,
            "--pathway",
            "pw_x",
            "--as",
            "alice",
        ],
        vec![
            "repair",
            "--database",
            missing,
            "--key",
            "k",
            "--as",
            "bob",
            "--evidence",
            "e",
        ],
    ] {
        fails(&args, 1, "no database at");
    }
    assert!(!dir.join("missing.db").exists());

    // A directory given as the database: said so, with the file it likely meant.
    let folder = dir.join("adir");
    std::fs::create_dir(&folder).unwrap();
    let folder = folder.to_str().unwrap();
    for args in [
        vec!["status", "--database", folder],
        vec!["verify", "--database", folder],
    ] {
        fails(&args, 1, "is a directory, not a database");
    }

    // A real database with one completed pathway.
    let config = dir.fault_config("none");
    let policy = dir.policy();
    let db = dir.join("rpr.db");
    let db = db.to_str().unwrap();
    let mut first = call(&config, &policy, db, "put", r#"{"key": "k", "value": "v"}"#);
    first.extend(["--key", "k1"]);
    let output = run(&first);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(by_key(dir.join("rpr.db").as_path(), "k1").1, "completed");
    let live = [
        "--config",
        config.as_str(),
        "--policy",
        policy.as_str(),
        "--database",
        db,
    ];
    fails(
        &[&["reconcile"][..], &live, &["--key", "nope"]].concat(),
        1,
        "no pathway with id or key \"nope\"",
    );
    fails(
        &[&["reconcile"][..], &live, &["--key", "k1"]].concat(),
        1,
        "nothing done to pathway",
    );
    fails(
        &[&["resume"][..], &live, &["--key", "k1", "--as", "host"]].concat(),
        1,
        "nothing done to pathway",
    );
    fails(
        &["deny", "--database", db, "--key", "k1", "--as", "alice"],
        1,
        "nothing done to pathway",
    );
    fails(
        &["repair", "--database", db, "--pathway", "k1"],
        2,
        "the following required arguments were not provided:\n  --as <NAME>",
    );
    fails(
        &["deny", "--database", db, "--as", "alice"],
        2,
        "the following required arguments were not provided:\n  <--pathway <ID>|--key <KEY>>",
    );
    fails(
        &[
            "deny",
            "--database",
            db,
            "--pathway",
            "p",
            "--key",
            "k1",
            "--as",
            "alice",
        ],
        2,
        "'--pathway <ID>' cannot be used with '--key <KEY>'",
    );
    // The same key again replays the pathway: nothing is sent twice.
    let output = run(&first);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output));
    assert!(text(&output).contains("replayed, nothing sent again"));
    assert_eq!(dir.effects(), 1);
}

/// A server that cannot start: the error names the server and its command, and never the
/// values of its `env` block (hosts put access tokens there); nothing is recorded.
#[test]
fn a_server_that_cannot_start_is_reported_without_its_env_values() {
    let dir = Scratch::new("errors-start");
    let config = dir.write(
        "mcp-missing.json",
        &json!({"mcpServers": {"ledger": {
            "command": dir.join("no-such-server").display().to_string(),
            "args": ["--flag"],
            "env": {"API_TOKEN": "sk-live-secret-0123456789"},
        }}}),
    );
    let policy = dir.policy();
    let db = dir.join("rpr.db");
    let args = call(
        &config,
        &policy,
        db.to_str().unwrap(),
        "put",
        r#"{"key": "k", "value": "v"}"#,
    );
    let output = run(&args);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.contains("server `ledger` did not start"), "{out}");
    assert!(out.contains("no-such-server"), "names the program: {out}");
    assert!(!out.contains("sk-live-secret-0123456789"), "{out}");
    assert!(!out.contains("panicked"), "{out}");
    for suffix in ["", "-wal"] {
        let file = dir.join(&format!("rpr.db{suffix}"));
        let bytes = std::fs::read(&file).unwrap_or_default();
        let secret: &[u8] = b"sk-live-secret-0123456789";
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret),
            "the secret is in {}",
            file.display()
        );
    }
    if db.exists() {
        assert!(host_support::pathways(&db).is_empty(), "nothing recorded");
    }
}

/// Bytes that are not UTF-8 in an argument (a path, a value) get a usage error, not a panic.
#[test]
fn a_non_utf8_argument_is_a_usage_error_not_a_panic() {
    use std::os::unix::ffi::OsStrExt;
    let bad = std::ffi::OsStr::from_bytes(b"/tmp/rpr-\xff\xfe.db");
    let output = host_support::run([
        std::ffi::OsStr::new("verify"),
        std::ffi::OsStr::new("--database"),
        bad,
    ]);
    let out = text(&output);
    assert_eq!(output.status.code(), Some(2), "{out}");
    assert!(out.contains("argument 3 is not valid UTF-8"), "{out}");
    assert!(!out.contains("panicked"), "{out}");
}

/// A command that needs an existing database, given a file that is not one (empty, or
/// text), says so and leaves the file as it was: nothing is created or migrated.
#[test]
fn a_file_that_is_not_an_rpr_database_is_refused_and_left_untouched() {
    let dir = Scratch::new("errors-not-db");
    for (name, content) in [("empty.db", &b""[..]), ("text.db", &b"hello\n"[..])] {
        let path = dir.join(name);
        std::fs::write(&path, content).unwrap();
        let db = path.to_str().unwrap();
        for args in [
            vec!["unresolved", "--database", db],
            vec!["verify", "--database", db],
            vec!["status", "--database", db],
            vec![
                "reconcile",
                "--database",
                db,
                "--key",
                "k",
                "--config",
                "c",
                "--policy",
                "p",
            ],
        ] {
            let output = run(&args);
            let out = text(&output);
            assert_eq!(output.status.code(), Some(1), "{args:?}: {out}");
            assert!(
                out.contains("not an rpr database") || out.contains("not a database"),
                "{args:?}: {out}"
            );
            assert!(!out.contains("panicked"), "{out}");
            assert_eq!(
                std::fs::read(&path).unwrap(),
                content,
                "{args:?} changed {name}"
            );
            for suffix in ["-wal", "-shm", "-journal"] {
                assert!(
                    !dir.join(&format!("{name}{suffix}")).exists(),
                    "{args:?} made a {suffix}"
                );
            }
        }
    }
}

/// A server that dies just before the call is reported as what the attempt record says
/// (`not_sent`: nothing reached it), not as a tool failure.
#[test]
fn a_server_that_dies_before_the_call_is_reported_as_not_sent() {
    let dir = Scratch::new("errors-not-sent");
    // The 4th tools/list is the executor's re-check right before `tools/call`.
    let config = dir.write(
        "mcp-crash.json",
        &json!({"mcpServers": {"ledger": {
            "command": env!("CARGO_BIN_EXE_rpr-fault-server"),
            "args": ["--state", dir.join("state.json"), "--effects", dir.join("effects.log"),
                     "--fault", "crash-before-read", "--lists-before", "4"],
        }}}),
    );
    let policy = dir.write(
        "policy-open.json",
        &json!({"authority": {"repair_owner": "bob"},
                "servers": {"ledger": {"get": {"read_only": true}, "put": {"human_gate": false, "readback": {"tool": "get",
                    "arguments": {"key": "$key"}, "expect": {"/structuredContent/value": "$value"}}}}}}),
    );
    let db = dir.join("rpr.db");
    let args = ungated_call(
        &config,
        &policy,
        db.to_str().unwrap(),
        r#"{"key": "k", "value": "v"}"#,
        "k1",
    );
    let output = run(&args);
    let out = text(&output);
    assert!(
        out.contains("is REPAIR_REQUIRED — attempt not_sent: nothing was sent"),
        "{out}"
    );
    assert!(!out.contains("the tool reported a failure"), "{out}");
    assert_eq!(dir.effects(), 0, "{out}");
    assert_eq!(by_key(&db, "k1").1, "repair_required");
}

/// A readback mapping that names an argument the tool does not have (or passes the readback
/// tool an argument it does not take) is refused when the policy is applied, before anything
/// is recorded or sent: it would read back `null` and leave every call unknown forever.
#[test]
fn a_readback_mapping_naming_a_missing_field_is_refused_before_anything_is_sent() {
    let dir = Scratch::new("errors-mapping");
    let config = dir.fault_config("none");
    let db = dir.join("rpr.db");
    for (tag, readback, needle) in [
        (
            "placeholder",
            json!({"tool": "get", "arguments": {"key": "$keyy"},
                   "expect": {"/structuredContent/value": "$value"}}),
            "uses \"$keyy\", but `put` has no argument `keyy`",
        ),
        (
            "expectation",
            json!({"tool": "get", "arguments": {"key": "$key"},
                   "expect": {"/structuredContent/value": "$vale"}}),
            "uses \"$vale\", but `put` has no argument `vale`",
        ),
        (
            "readback-argument",
            json!({"tool": "get", "arguments": {"name": "$key"},
                   "expect": {"/structuredContent/value": "$value"}}),
            "passes argument `name` to `get`, which has no such argument",
        ),
    ] {
        let policy = dir.write(
            &format!("policy-{tag}.json"),
            &json!({"authority": {"approval_authority": "alice", "repair_owner": "bob"},
                    "servers": {"ledger": {"get": {"read_only": true}, "put": {"human_gate": false, "readback": readback}}}}),
        );
        let args = call(
            &config,
            &policy,
            db.to_str().unwrap(),
            "put",
            r#"{"key": "k", "value": "v"}"#,
        );
        fails(&args, 1, needle);
        assert_eq!(dir.effects(), 0, "{tag}");
        if db.exists() {
            assert!(
                host_support::pathways(&db).is_empty(),
                "{tag}: nothing recorded"
            );
        }
    }
}

/// A read-only result larger than the evidence bounds is shown as the server sent it (the
/// ledger stores its bounded copy), not as `null`.
#[test]
fn a_large_read_only_result_is_shown_not_null() {
    let dir = Scratch::new("errors-large-read");
    let config = dir.fault_config("none");
    let policy = dir.policy();
    let big = "x".repeat(200 * 1024);
    std::fs::write(dir.join("state.json"), json!({"k": big}).to_string()).unwrap();
    let db = dir.join("rpr.db");
    let mut args = call(
        &config,
        &policy,
        db.to_str().unwrap(),
        "get",
        r#"{"key": "k"}"#,
    );
    args.extend(["--key", "read-1"]);
    let output = run(&args);
    let out = text(&output);
    assert!(output.status.success(), "{out}");
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("result:"))
        .unwrap_or_else(|| panic!("no result line:\n{out}"));
    assert!(line.contains("xxxxxxxxxxxxxxxxxxxx"), "{line}");
    assert!(!line.ends_with("null"), "{line}");
    assert_eq!(by_key(&db, "read-1").1, "completed");
}

/// Arguments too large for a command line are taken from a file (`--args @FILE`) or stdin
/// (`--args -`); a missing file is a clear error that records nothing.
#[test]
fn arguments_come_from_a_file_or_stdin() {
    let dir = Scratch::new("errors-args-file");
    let config = dir.fault_config("none");
    let policy = dir.write(
        "policy-open.json",
        &json!({"authority": {"repair_owner": "bob"},
                "evidence_bounds": {"max_string_bytes": 4_194_304, "max_total_bytes": 8_388_608},
                "servers": {"ledger": {"get": {"read_only": true}, "put": {"human_gate": false, "readback": {"tool": "get",
                    "arguments": {"key": "$key"}, "expect": {"/structuredContent/value": "$value"}}}}}}),
    );
    let db = dir.join("rpr.db");
    let db = db.to_str().unwrap();
    // 3 MiB: more than one command-line argument may hold on Linux (128 KiB).
    let big = "v".repeat(3 * 1024 * 1024);
    let file = dir.join("args.json");
    std::fs::write(&file, json!({"key": "big", "value": big}).to_string()).unwrap();
    let from_file = format!("@{}", file.display());
    let args = ungated_call(&config, &policy, db, &from_file, "from-file");
    let output = run(&args);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        by_key(dir.join("rpr.db").as_path(), "from-file").1,
        "completed"
    );
    assert_eq!(dir.effects(), 1);

    // From stdin.
    let args = ungated_call(&config, &policy, db, "-", "from-stdin");
    let output = host_support::run_with_stdin(&args, br#"{"key": "s", "value": "from stdin"}"#);
    assert!(output.status.success(), "{}", text(&output));
    assert_eq!(
        by_key(dir.join("rpr.db").as_path(), "from-stdin").1,
        "completed"
    );
    assert_eq!(dir.effects(), 2);

    // A missing file.
    let missing = format!("@{}", dir.join("nope.json").display());
    let mut args = call(&config, &policy, db, "put", &missing);
    args.extend(["--key", "missing"]);
    fails(&args, 1, "cannot read the file");
    assert_eq!(dir.effects(), 2);
}

/// The policy's `evidence_bounds` is checked like the rest of it: a zero limit and a
/// misspelt name are errors, before anything is recorded.
#[test]
fn bad_evidence_bounds_in_the_policy_are_refused() {
    let dir = Scratch::new("errors-bounds");
    let config = dir.fault_config("none");
    let db = dir.join("rpr.db");
    for (tag, bounds, needle) in [
        (
            "zero",
            json!({"max_string_bytes": 0}),
            "evidence_bounds.max_string_bytes must be above 0",
        ),
        ("typo", json!({"max_strings": 5}), "max_strings"),
    ] {
        let policy = dir.write(
            &format!("policy-{tag}.json"),
            &json!({"authority": {"repair_owner": "bob"}, "evidence_bounds": bounds}),
        );
        let args = call(
            &config,
            &policy,
            db.to_str().unwrap(),
            "put",
            r#"{"key": "k", "value": "v"}"#,
        );
        fails(&args, 1, needle);
        assert_eq!(dir.effects(), 0, "{tag}");
    }
    assert!(!db.exists(), "nothing recorded");
}

/// Issue 25, finding 5: a readback `expect` path the result does not contain (here a typo,
/// `valeu`) proves nothing. Before the fix it read as "not applied", `rpr reconcile` sent the
/// pathway to repair and `repair` + `resume` wrote a second time. Now the verdict stays
/// unresolved and the write happened once, counted at the server.
#[test]
fn a_readback_path_the_result_lacks_is_inconclusive_never_absent() {
    let dir = Scratch::new("errors-path-absent");
    let config = dir.fault_config("none");
    let policy = dir.write(
        "policy-typo.json",
        &json!({"authority": {"repair_owner": "bob"},
                "servers": {"ledger": {"get": {"read_only": true}, "put": {"human_gate": false, "readback": {"tool": "get",
                    "arguments": {"key": "$key"}, "expect": {"/structuredContent/valeu": "$value"}}}}}}),
    );
    let db = dir.join("rpr.db");
    let db = db.to_str().unwrap();
    let output = run(ungated_call(
        &config,
        &policy,
        db,
        r#"{"key": "k", "value": "v"}"#,
        "k1",
    ));
    let out = text(&output);
    assert_eq!(dir.effects(), 1, "{out}");
    assert_eq!(
        by_key(Path::new(db), "k1").1,
        "write_status_unknown",
        "{out}"
    );
    let live = [
        "--config",
        config.as_str(),
        "--policy",
        policy.as_str(),
        "--database",
        db,
    ];
    let output = run([&["reconcile"][..], &live, &["--key", "k1"]].concat());
    let out = text(&output);
    assert!(!out.contains("not applied"), "{out}");
    assert!(!out.contains("panicked"), "{out}");
    assert_eq!(
        by_key(Path::new(db), "k1").1,
        "write_status_unknown",
        "{out}"
    );
    // The way to a second send stays shut: repair needs a not-applied verdict.
    let output = run([
        &["repair"][..],
        &live[4..],
        &["--pathway", "k1", "--as", "bob", "--evidence", "x"],
    ]
    .concat());
    assert!(!output.status.success(), "{}", text(&output));
    assert_eq!(dir.effects(), 1, "the write was sent again");
}

/// Issue 25, finding 11: `rpr call` and `rpr gate` on a SQLite database that is not rpr's
/// refuse it and leave it as it was. Before the fix both said "not an rpr database" and had
/// already switched it to WAL (its header changed, `-wal`/`-shm` left beside it).
#[test]
fn call_and_gate_leave_a_foreign_sqlite_database_untouched() {
    let dir = Scratch::new("errors-foreign-db");
    let config = dir.fault_config("none");
    let policy = dir.write(
        "policy-open.json",
        &json!({"servers": {"ledger": {"get": {"read_only": true}, "put": {"human_gate": false, "readback": {"tool": "get",
                    "arguments": {"key": "$key"}, "expect": {"/structuredContent/value": "$value"}}}}}}),
    );
    let path = dir.join("app.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT); INSERT INTO accounts (owner) VALUES ('alice');")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let db = path.to_str().unwrap();
    let server = env!("CARGO_BIN_EXE_rpr-fault-server");
    for args in [
        ungated_call(&config, &policy, db, r#"{"key": "k", "value": "v"}"#, "k1"),
        vec![
            "gate",
            "--database",
            db,
            "--policy",
            &policy,
            "--name",
            "ledger",
            "--",
            server,
        ],
    ] {
        let output = run(&args);
        let out = text(&output);
        assert!(!output.status.success(), "{args:?}: {out}");
        assert!(out.contains("not an rpr database"), "{args:?}: {out}");
        assert!(!out.contains("panicked"), "{out}");
        assert!(
            std::fs::read(&path).unwrap() == before,
            "{args:?} changed the database"
        );
        for suffix in ["-wal", "-shm", "-journal"] {
            assert!(
                !dir.join(&format!("app.db{suffix}")).exists(),
                "{args:?} made a {suffix}"
            );
        }
    }
    assert_eq!(dir.effects(), 0);
}

#[test]
fn rpr_database_is_the_default_database_and_a_flag_overrides_it() {
    let dir = Scratch::new("errors-env-db");
    let missing = dir.join("missing.db");
    let run_env = |args: &[&str], db: &std::path::Path| {
        std::process::Command::new(crate::host_support::rpr())
            .args(args)
            .env("RPR_DATABASE", db)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    // Without --database, RPR_DATABASE names it (a missing one: the usual error, not a usage error).
    let out = run_env(&["status"], &missing);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("no database at"), "{}", text(&out));
    assert!(text(&out).contains("missing.db"), "{}", text(&out));
    // --database wins over it.
    let other = dir.join("other.db");
    let out = run_env(&["status", "--database", other.to_str().unwrap()], &missing);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("other.db"), "{}", text(&out));
    // Help names the variable but never shows its value (a URL may hold a password).
    let secret = std::path::Path::new("postgres://u:hunter2@127.0.0.1:1/db");
    let out = run_env(&["help", "status"], secret);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("RPR_DATABASE"), "{}", text(&out));
    assert!(!text(&out).contains("hunter2"), "{}", text(&out));
}

/// Issue 29: `rpr call` against a server that dies at start shows what the server wrote to
/// its stderr, and does not talk of an effect: nothing was called.
#[test]
fn a_server_that_dies_at_start_is_shown_with_its_stderr() {
    let dir = Scratch::new("dies-at-start");
    let config = dir.write(
        "mcp.json",
        &json!({"mcpServers": {"ledger": {"command": "sh", "args": [
            "-c", "echo 'fatal: API_TOKEN is not set' >&2; exit 3"
        ]}}}),
    );
    let policy = dir.policy();
    let db = dir.join("rpr.db");
    let output = run(call(
        &config,
        &policy,
        db.to_str().unwrap(),
        "put",
        r#"{"key": "k", "value": "v"}"#,
    ));
    let out = text(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.contains("server `ledger` did not start"), "{out}");
    assert!(out.contains("fatal: API_TOKEN is not set"), "{out}");
    assert!(out.contains("no tool was called"), "{out}");
    assert!(!out.contains("effect"), "{out}");
}
