#![allow(
    clippy::format_push_string,
    clippy::large_stack_arrays,
    clippy::cast_possible_truncation,
    reason = "test code: readable byte building"
)]
//! `rpr-mcp`, the read-only inspection server: command line, protocol rules,
//! tool results (snapshots on a scripted database), pagination and size caps.

use crate::common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use common::*;
use serde_json::{Value, json};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_rpr-mcp")
}

/// A database with one pathway in each reachable state; the writer is closed.
fn scripted_db() -> (TempDir, PathBuf) {
    let dir = TempDir::new("rpr-mcp");
    let db = dir.db();
    let rt = runtime(&db);
    scripted_states(&rt);
    drop(rt);
    (dir, db)
}

struct Output {
    lines: Vec<Value>,
    status: ExitStatus,
    stderr: String,
    raw: Vec<u8>,
}

/// Runs one session: writes `input`, closes stdin, collects every stdout line.
/// Asserts that every stdout line is exactly one JSON-RPC 2.0 response object.
fn session(db: &Path, input: &[u8]) -> Output {
    let mut child = Command::new(bin())
        .arg("--database")
        .arg(db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let mut stderr = child.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut raw = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut raw).unwrap();
    writer.join().unwrap();
    let status = child.wait().unwrap();
    let stderr = err_reader.join().unwrap();
    let lines = parse_lines(&raw);
    Output {
        lines,
        status,
        stderr,
        raw,
    }
}

fn parse_lines(raw: &[u8]) -> Vec<Value> {
    if raw.is_empty() {
        return Vec::new();
    }
    assert_eq!(raw.last(), Some(&b'\n'), "stdout must end with a newline");
    raw[..raw.len() - 1]
        .split(|&b| b == b'\n')
        .map(|line| {
            assert!(
                line.len() <= 10 * 1024 * 1024,
                "a response line exceeds 10 MiB: {}",
                line.len()
            );
            let v: Value = serde_json::from_slice(line).unwrap_or_else(|e| {
                panic!(
                    "stdout line is not JSON ({e}): {}",
                    String::from_utf8_lossy(line)
                )
            });
            let o = v.as_object().expect("each line is one JSON object");
            assert_eq!(o["jsonrpc"], "2.0");
            assert!(o.contains_key("id"), "responses carry an id: {v}");
            assert!(
                o.contains_key("result") ^ o.contains_key("error"),
                "exactly one of result/error: {v}"
            );
            if let Some(e) = o.get("error") {
                assert!(e["code"].is_i64() && e["message"].is_string(), "{v}");
            }
            v
        })
        .collect()
}

fn req(id: impl Into<Value>, method: &str, params: Value) -> String {
    let mut m = json!({"jsonrpc": "2.0", "id": id.into(), "method": method});
    if !params.is_null() {
        m["params"] = params;
    }
    format!("{m}\n")
}

fn init(id: impl Into<Value>) -> String {
    req(
        id,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    ) + "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
}

fn call_line(id: impl Into<Value>, tool: &str, args: Value) -> String {
    req(id, "tools/call", json!({"name": tool, "arguments": args}))
}

/// The result of one tool call in a fresh session.
fn call(db: &Path, tool: &str, args: Value) -> Value {
    let out = session(db, (init(0) + &call_line(1, tool, args)).as_bytes());
    assert_eq!(out.lines.len(), 2, "{}", out.stderr);
    out.lines[1]["result"].clone()
}

fn structured(result: &Value) -> &Value {
    assert_eq!(result["isError"], false, "{result}");
    &result["structuredContent"]
}

fn tool_error(result: &Value) -> String {
    assert_eq!(result["isError"], true, "{result}");
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, result["structuredContent"]);
    result["structuredContent"]["error"]["code"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn tools_list(db: &Path) -> Value {
    let out = session(
        db,
        (init(0) + &req(1, "tools/list", Value::Null)).as_bytes(),
    );
    out.lines[1]["result"].clone()
}

fn output_schema(db: &Path, tool: &str) -> Value {
    tools_list(db)["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == tool)
        .unwrap()["outputSchema"]
        .clone()
}

fn assert_conforms(schema: &Value, instance: &Value) {
    let v = jsonschema::draft202012::new(schema).unwrap();
    let errors: Vec<String> = v.iter_errors(instance).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "does not match its outputSchema: {errors:?}\n{instance}"
    );
}

// ---------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------

fn run(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

#[test]
fn help_and_version() {
    let (code, out, err) = run(&[os("--help")]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert!(out.contains("Usage: rpr-mcp --database PATH"));
    let (code, out, _) = run(&[os("--version")]);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), format!("rpr-mcp {}", env!("CARGO_PKG_VERSION")));
}

fn assert_one_line_error(err: &str) {
    assert!(err.starts_with("rpr-mcp: "), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec![],
        vec!["--bogus"],
        vec!["--database"],
        vec!["--database", "a", "--database", "b"],
        vec!["--database="],
    ] {
        let args: Vec<&std::ffi::OsStr> = args.into_iter().map(os).collect();
        let (code, out, err) = run(&args);
        assert_eq!(code, 2, "{args:?}");
        assert!(out.is_empty());
        assert_one_line_error(&err);
    }
}

#[test]
fn missing_file_exits_3() {
    let dir = TempDir::new("rpr-mcp-missing");
    let (code, out, err) = run(&[os("--database"), dir.path().join("nope.db").as_os_str()]);
    assert_eq!(code, 3);
    assert!(out.is_empty());
    assert_one_line_error(&err);
    let (code, _, _) = run(&[os("--database"), dir.path().as_os_str()]);
    assert_eq!(code, 3, "a directory is not a database file");
}

#[test]
fn not_an_rpr_database_exits_4() {
    let dir = TempDir::new("rpr-mcp-notrpr");
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, vec![b'x'; 8192]).unwrap();
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    for p in [&garbage, &empty, &other] {
        let before = std::fs::read(p).unwrap();
        let (code, out, err) = run(&[os("--database"), p.as_os_str()]);
        assert_eq!(code, 4, "{}: {err}", p.display());
        assert!(out.is_empty());
        assert_one_line_error(&err);
        assert_eq!(std::fs::read(p).unwrap(), before);
    }
}

#[test]
fn newer_schema_exits_5() {
    let (_dir, db) = scripted_db();
    Sql::open(&db).batch("UPDATE meta SET value = '99' WHERE key = 'schema_version'");
    let (code, out, err) = run(&[os("--database"), db.as_os_str()]);
    assert_eq!(code, 5, "{err}");
    assert!(out.is_empty());
    assert_one_line_error(&err);
    assert!(err.contains("99"));
}

#[test]
fn exits_0_on_eof_and_on_sigterm() {
    let (_dir, db) = scripted_db();
    let out = session(&db, b"");
    assert!(out.status.success());
    assert!(out.raw.is_empty());

    let mut child = Command::new(bin())
        .arg("--database")
        .arg(&db)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(init(1).as_bytes()).unwrap();
    stdin.flush().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert!(line.contains("\"protocolVersion\""));
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "SIGTERM must exit 0, got {status:?}");
    drop(stdin);
}

// ---------------------------------------------------------------------------
// Lifecycle
// ---------------------------------------------------------------------------

#[test]
fn initialize_always_answers_2025_11_25() {
    let (_dir, db) = scripted_db();
    for offered in [
        "2025-11-25",
        "2025-06-18",
        "2026-07-28",
        "2099-01-01",
        "garbage",
    ] {
        let out = session(
            &db,
            req(1, "initialize", json!({"protocolVersion": offered, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}))
                .as_bytes(),
        );
        let r = &out.lines[0]["result"];
        assert_eq!(r["protocolVersion"], "2025-11-25", "{offered}");
        assert_eq!(r["serverInfo"]["name"], "rpr-mcp");
        assert_eq!(r["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(r["capabilities"], json!({"tools": {"listChanged": false}}));
        let instructions = r["instructions"].as_str().unwrap();
        assert!(
            instructions.contains("Read-only is not non-sensitive")
                && instructions.contains("trusted")
        );
    }
    // initialize without a protocol version: invalid params, and the server goes on.
    let out = session(
        &db,
        (req(1, "initialize", json!({}))
            + &req(2, "initialize", Value::Null)
            + &req(3, "ping", Value::Null))
            .as_bytes(),
    );
    assert_eq!(out.lines[0]["error"]["code"], -32602);
    assert_eq!(out.lines[1]["error"]["code"], -32602);
    assert_eq!(out.lines[2]["result"], json!({}));
}

#[test]
fn before_initialize_only_ping_and_initialize_succeed() {
    let (_dir, db) = scripted_db();
    let input = req(1, "ping", Value::Null)
        + &req(2, "tools/list", Value::Null)
        + &call_line(3, "rpr.get_status", json!({}))
        + &req(
            4,
            "server/discover",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
        )
        + &init(5)
        + &req(6, "tools/list", Value::Null)
        + &req(7, "ping", json!({"_meta": {"progressToken": 0}}));
    let out = session(&db, input.as_bytes());
    let codes: Vec<Value> = out
        .lines
        .iter()
        .map(|l| l["error"]["code"].clone())
        .collect();
    assert_eq!(out.lines[0]["result"], json!({}));
    assert_eq!(codes[1], -32600);
    assert_eq!(codes[2], -32600);
    assert_eq!(codes[3], -32601);
    assert!(out.lines[4]["result"]["protocolVersion"].is_string());
    assert_eq!(out.lines[5]["result"]["tools"].as_array().unwrap().len(), 5);
    assert_eq!(out.lines[6]["result"], json!({}));
    assert!(out.status.success());
}

#[test]
fn unknown_methods_get_32601_at_once() {
    let (_dir, db) = scripted_db();
    let methods = [
        "server/discover",
        "resources/list",
        "prompts/list",
        "logging/setLevel",
        "tasks/get",
        "",
        "x",
    ];
    let mut input = init(0);
    for (i, m) in methods.iter().enumerate() {
        input += &req(i + 1, m, json!({}));
    }
    let out = session(&db, input.as_bytes());
    assert_eq!(out.lines.len(), methods.len() + 1);
    for (i, l) in out.lines[1..].iter().enumerate() {
        assert_eq!(l["id"], i + 1);
        assert_eq!(l["error"]["code"], -32601, "{}", methods[i]);
    }
}

#[test]
fn notifications_are_never_answered() {
    let (_dir, db) = scripted_db();
    let notes = [
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "x"}}),
        json!({"jsonrpc": "2.0", "method": "notifications/whatever"}),
        json!({"jsonrpc": "2.0", "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}),
        json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "rpr.get_status"}}),
        json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "nope"}}),
        json!({"jsonrpc": "2.0", "method": "ping"}),
        json!({"jsonrpc": "2.0", "method": "unknown/method", "params": [1, 2]}),
        json!({"jsonrpc": "2.0", "method": "tools/list", "params": 7}),
    ];
    let mut input = String::new();
    for n in &notes {
        input += &n.to_string();
        input.push('\n');
    }
    let before = session(&db, input.as_bytes());
    assert!(
        before.raw.is_empty(),
        "{}",
        String::from_utf8_lossy(&before.raw)
    );
    let after = session(&db, (init(0) + &input).as_bytes());
    assert_eq!(after.lines.len(), 1);
    // A response from the client (we never send requests) is ignored too.
    let out = session(&db, b"{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}\n{\"jsonrpc\":\"2.0\",\"id\":9,\"error\":{\"code\":1,\"message\":\"m\"}}\n");
    assert!(out.raw.is_empty());
}

#[test]
fn ids_are_echoed_verbatim() {
    let (_dir, db) = scripted_db();
    let ids = [
        json!(0),
        json!(-7),
        json!(9_007_199_254_740_993_u64),
        json!(i64::MIN),
        json!("1"),
        json!(""),
        json!("é ✓"),
    ];
    let mut input = String::new();
    for id in &ids {
        input += &req(id.clone(), "ping", Value::Null);
    }
    let out = session(&db, input.as_bytes());
    let got: Vec<Value> = out.lines.iter().map(|l| l["id"].clone()).collect();
    assert_eq!(got, ids);
    let raw = String::from_utf8(out.raw).unwrap();
    assert!(raw.contains("\"id\":\"1\"") && raw.contains("\"id\":9007199254740993"));
}

#[test]
fn invalid_requests_get_32600_and_the_server_goes_on() {
    let (_dir, db) = scripted_db();
    let cases: &[(&str, Value)] = &[
        (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, Value::Null),
        ("[]", Value::Null),
        ("42", Value::Null),
        ("\"ping\"", Value::Null),
        ("null", Value::Null),
        (r#"{"id":1,"method":"ping"}"#, json!(1)),
        (r#"{"jsonrpc":"1.0","id":2,"method":"ping"}"#, json!(2)),
        (r#"{"jsonrpc":2.0,"id":3,"method":"ping"}"#, json!(3)),
        (
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            Value::Null,
        ),
        (r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, Value::Null),
        (
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#,
            Value::Null,
        ),
        (r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#, Value::Null),
        (r#"{"jsonrpc":"2.0","id":4,"method":5}"#, json!(4)),
        (r#"{"jsonrpc":"2.0","id":5}"#, json!(5)),
        (
            r#"{"jsonrpc":"2.0","id":6,"method":"ping","params":"x"}"#,
            json!(6),
        ),
        (r#"{"foo":1}"#, Value::Null),
    ];
    let mut input = String::new();
    for (line, _) in cases {
        input += line;
        input += "\n";
    }
    input += &req("end", "ping", Value::Null);
    let out = session(&db, input.as_bytes());
    assert_eq!(
        out.lines.len(),
        cases.len() + 1,
        "{}",
        String::from_utf8_lossy(&out.raw)
    );
    for ((line, id), reply) in cases.iter().zip(&out.lines) {
        assert_eq!(reply["error"]["code"], -32600, "{line}");
        assert_eq!(&reply["id"], id, "{line}");
    }
    assert_eq!(out.lines.last().unwrap()["result"], json!({}));
}

#[test]
fn parse_errors_get_32700_with_null_id() {
    let (_dir, db) = scripted_db();
    let mut input: Vec<u8> = Vec::new();
    for bad in [
        &b"not json"[..],
        b"{",
        b"{\"jsonrpc\":\"2.0\",",
        b"\xff\xfe\x00garbage",
        b"{\"a\":\"\xc3\x28\"}",
        b"NaN",
        &vec![b'['; 100_000],
    ] {
        input.extend_from_slice(bad);
        input.push(b'\n');
    }
    input.extend_from_slice(b"\r\n   \n\n");
    input.extend_from_slice(req(1, "ping", Value::Null).trim_end().as_bytes());
    input.extend_from_slice(b"\r\n");
    let out = session(&db, &input);
    assert_eq!(out.lines.len(), 8);
    for l in &out.lines[..7] {
        assert_eq!(l["error"]["code"], -32700);
        assert_eq!(l["id"], Value::Null);
    }
    assert_eq!(
        out.lines[7]["result"],
        json!({}),
        "CRLF framing is accepted"
    );
}

#[test]
fn oversized_lines_are_skipped_once() {
    let (_dir, db) = scripted_db();
    let mut input = Vec::new();
    // 5 MiB of valid JSON in one line, then 6 MiB of garbage without a newline before a ping.
    input.extend_from_slice(
        format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{{\"pad\":\"{}\"}}}}\n",
            "a".repeat(5 << 20)
        )
        .as_bytes(),
    );
    input.extend_from_slice(req(2, "ping", Value::Null).as_bytes());
    input.extend(std::iter::repeat_n(b'z', 6 << 20));
    input.push(b'\n');
    input.extend_from_slice(req(3, "ping", Value::Null).as_bytes());
    let out = session(&db, &input);
    let summary: Vec<(Value, Value)> = out
        .lines
        .iter()
        .map(|l| (l["id"].clone(), l["error"]["code"].clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (Value::Null, json!(-32600)),
            (json!(2), Value::Null),
            (Value::Null, json!(-32600)),
            (json!(3), Value::Null),
        ]
    );
}

#[test]
fn bad_params_get_32602() {
    let (_dir, db) = scripted_db();
    let input = init(0)
        + &req(1, "tools/list", json!({"cursor": "abc"}))
        + &req(2, "tools/call", json!({}))
        + &req(3, "tools/call", json!({"name": 5}))
        + &req(
            4,
            "tools/call",
            json!({"name": "rpr.get_status", "arguments": [1]}),
        )
        + &req(
            5,
            "tools/call",
            json!({"name": "rpr.nope", "arguments": {}}),
        )
        + &req(6, "tools/call", json!(["rpr.get_status"]))
        + &req(
            7,
            "tools/call",
            json!({"name": "rpr.get_status", "_meta": {"progressToken": 0}, "task": {"ttl": 1}}),
        );
    let out = session(&db, input.as_bytes());
    for l in &out.lines[1..7] {
        assert_eq!(l["error"]["code"], -32602, "{l}");
    }
    assert!(
        out.lines[5]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("rpr.nope")
    );
    assert_eq!(
        out.lines[7]["result"]["isError"], false,
        "unknown _meta is tolerated"
    );
}

#[test]
fn bad_tool_arguments_are_tool_errors() {
    let (_dir, db) = scripted_db();
    let cases = [
        ("rpr.get_status", json!({"x": 1}), "invalid_argument"),
        ("rpr.list_pathways", json!({"limit": 0}), "invalid_argument"),
        (
            "rpr.list_pathways",
            json!({"limit": 501}),
            "invalid_argument",
        ),
        (
            "rpr.list_pathways",
            json!({"limit": -1}),
            "invalid_argument",
        ),
        (
            "rpr.list_pathways",
            json!({"limit": 1.5}),
            "invalid_argument",
        ),
        (
            "rpr.list_pathways",
            json!({"limit": "10"}),
            "invalid_argument",
        ),
        (
            "rpr.list_pathways",
            json!({"limit": true}),
            "invalid_argument",
        ),
        (
            "rpr.list_pathways",
            json!({"limit": 1e300}),
            "invalid_argument",
        ),
        (
            "rpr.list_pathways",
            json!({"state": "bogus"}),
            "invalid_argument",
        ),
        ("rpr.list_pathways", json!({"state": 3}), "invalid_argument"),
        (
            "rpr.list_pathways",
            json!({"cursor": "abc"}),
            "invalid_cursor",
        ),
        (
            "rpr.list_pathways",
            json!({"cursor": 1}),
            "invalid_argument",
        ),
        ("rpr.list_pathways", json!({"cursor": ""}), "invalid_cursor"),
        (
            "rpr.list_unresolved",
            json!({"cursor": "rpr1.zz"}),
            "invalid_cursor",
        ),
        ("rpr.get_pathway", json!({}), "invalid_argument"),
        (
            "rpr.get_pathway",
            json!({"pathway_id": ""}),
            "invalid_argument",
        ),
        (
            "rpr.get_pathway",
            json!({"pathway_id": 7}),
            "invalid_argument",
        ),
        (
            "rpr.get_pathway",
            json!({"pathway_id": "x".repeat(5000)}),
            "invalid_argument",
        ),
        (
            "rpr.get_pathway",
            json!({"pathway_id": "pw_999999"}),
            "pathway_not_found",
        ),
        (
            "rpr.get_pathway",
            json!({"pathway_id": "' OR 1=1 --"}),
            "pathway_not_found",
        ),
        (
            "rpr.get_evidence",
            json!({"pathway_id": "pw_999999"}),
            "pathway_not_found",
        ),
        (
            "rpr.get_evidence",
            json!({"pathway_id": "pw_000001", "limit": 0}),
            "invalid_argument",
        ),
        (
            "rpr.get_evidence",
            json!({"pathway_id": "pw_000001", "cursor": "rpr1.00"}),
            "invalid_cursor",
        ),
    ];
    let mut input = init(0);
    for (i, (tool, args, _)) in cases.iter().enumerate() {
        input += &call_line(i + 1, tool, args.clone());
    }
    let out = session(&db, input.as_bytes());
    assert_eq!(out.lines.len(), cases.len() + 1);
    let schemas = tools_list(&db);
    for ((tool, args, code), line) in cases.iter().zip(&out.lines[1..]) {
        let r = &line["result"];
        assert_eq!(tool_error(r), *code, "{tool} {args}");
        let schema = schemas["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == *tool)
            .unwrap();
        assert_conforms(&schema["outputSchema"], &r["structuredContent"]);
    }
}

/// Whether the server answers a junk line: everything but blank lines is answered.
fn junk_is_answered(junk: &[u8]) -> bool {
    match std::str::from_utf8(junk) {
        Err(_) => true,
        Ok(s) => !s.strip_suffix('\r').unwrap_or(s).trim().is_empty(),
    }
}

#[test]
fn every_stdout_line_is_one_message_under_abuse() {
    let (_dir, db) = scripted_db();
    let mut input: Vec<u8> = Vec::new();
    let mut expected = 0;
    let mut push = |bytes: &[u8], answered: bool| {
        input.extend_from_slice(bytes);
        input.push(b'\n');
        if answered {
            expected += 1;
        }
    };
    push(b"\x00\x01\x02", true);
    push(init(0).trim_end().lines().next().unwrap().as_bytes(), true);
    push(
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
        false,
    );
    for i in 0..200_u32 {
        let r = i.wrapping_mul(2_654_435_761);
        let junk: Vec<u8> = (0..(r % 300))
            .map(|k| u8::try_from(r.wrapping_add(k * 7919) % 256).unwrap())
            .filter(|&b| b != b'\n')
            .collect();
        push(&junk, junk_is_answered(&junk));
        push(
            call_line(i, "rpr.list_pathways", json!({"limit": (i % 7) + 1}))
                .trim_end()
                .as_bytes(),
            true,
        );
        push(b"[1,2,3]", true);
        push(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}", false);
        push(format!("{{\"jsonrpc\":\"2.0\",\"id\":\"s{i}\",\"method\":\"tools/call\",\"params\":{{\"name\":\"rpr.get_pathway\",\"arguments\":{{\"pathway_id\":\"pw_{:06}\"}}}}}}", i % 16).as_bytes(), true);
        push(b"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", true);
    }
    push(&vec![b'{'; 5 << 20], true);
    push(req(9, "ping", Value::Null).trim_end().as_bytes(), true);
    let out = session(&db, &input);
    assert!(out.status.success());
    assert_eq!(out.lines.len(), expected);
    assert_eq!(out.lines.last().unwrap()["result"], json!({}));
}

// ---------------------------------------------------------------------------
// Tools
// ---------------------------------------------------------------------------

#[test]
fn tools_list_is_complete_and_read_only() {
    let (_dir, db) = scripted_db();
    let list = tools_list(&db);
    assert!(list.get("nextCursor").is_none());
    let tools = list["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "rpr.get_status",
            "rpr.list_pathways",
            "rpr.get_pathway",
            "rpr.get_evidence",
            "rpr.list_unresolved"
        ]
    );
    for t in tools {
        let a = &t["annotations"];
        assert_eq!(
            (
                &a["readOnlyHint"],
                &a["destructiveHint"],
                &a["idempotentHint"],
                &a["openWorldHint"]
            ),
            (&json!(true), &json!(false), &json!(true), &json!(false))
        );
        for key in ["inputSchema", "outputSchema"] {
            let s = &t[key];
            assert_eq!(s["type"], "object", "{key}");
            assert!(s.get("$schema").is_none(), "no draft-07 $schema");
            jsonschema::draft202012::meta::validate(s)
                .unwrap_or_else(|e| panic!("{} {key}: {e}", t["name"]));
        }
        assert_eq!(t["inputSchema"]["additionalProperties"], false);
    }
    insta::assert_json_snapshot!("rpr_mcp_tools_list", list);
}

fn snapshot_tool(db: &Path, name: &str, tool: &str, args: Value) -> Value {
    let r = call(db, tool, args);
    let text: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(r["content"][0]["type"], "text");
    assert_eq!(
        text, r["structuredContent"],
        "the text block is the serialized structuredContent"
    );
    let s = structured(&r).clone();
    assert_conforms(&output_schema(db, tool), &s);
    // Each attempt's owner (host/pid/process start/runtime) is in the chain and varies
    // between runs: it is redacted, and with it the chain hashes that cover it.
    insta::with_settings!({filters => vec![
        (r#""owner": "[^"]*""#, r#""owner": "[owner]""#),
        (r#""(hash|prev_hash|ledger_head|head)": "[0-9a-f]{64}""#, r#""$1": "[hash]""#),
    ]}, {
        insta::assert_json_snapshot!(name, s);
    });
    s
}

#[test]
fn tool_outputs_on_a_scripted_database() {
    let (dir, db) = scripted_db();
    let status = snapshot_tool(&db, "rpr_mcp_get_status", "rpr.get_status", json!({}));
    assert_eq!(status["mode"], "read_only");
    assert_eq!(status["unresolved_count"], 11);
    let text = status.to_string();
    assert!(
        !text.contains(dir.path().to_str().unwrap())
            && !text.contains("rpr.db")
            && !text.contains('/')
    );

    snapshot_tool(&db, "rpr_mcp_list_pathways", "rpr.list_pathways", json!({}));
    snapshot_tool(
        &db,
        "rpr_mcp_list_pathways_held",
        "rpr.list_pathways",
        json!({"state": "held"}),
    );
    let unresolved = snapshot_tool(
        &db,
        "rpr_mcp_list_unresolved",
        "rpr.list_unresolved",
        json!({}),
    );
    assert_eq!(unresolved["pathways"].as_array().unwrap().len(), 11);
    let proposed = snapshot_tool(
        &db,
        "rpr_mcp_get_pathway_proposed",
        "rpr.get_pathway",
        json!({"pathway_id": "pw_000001"}),
    );
    assert_eq!(proposed["definition"]["metadata"]["api_key"], "[redacted]");
    assert!(!proposed.to_string().contains("sk-live-123"));
    snapshot_tool(
        &db,
        "rpr_mcp_get_pathway_returned",
        "rpr.get_pathway",
        json!({"pathway_id": "pw_000005"}),
    );
    snapshot_tool(
        &db,
        "rpr_mcp_get_pathway_ready_to_resume",
        "rpr.get_pathway",
        json!({"pathway_id": "pw_000011"}),
    );
    let ev = snapshot_tool(
        &db,
        "rpr_mcp_get_evidence",
        "rpr.get_evidence",
        json!({"pathway_id": "pw_000011"}),
    );
    assert_eq!(ev["chain_verified"], true);
}

#[test]
fn next_action_follows_state_and_authority() {
    let (_dir, db) = scripted_db();
    let all = structured(&call(&db, "rpr.list_pathways", json!({"limit": 500}))).clone();
    let got: Vec<(String, String, Value, Value)> = all["pathways"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["state"].as_str().unwrap().to_owned(),
                p["next"]["action"].as_str().unwrap().to_owned(),
                p["next"]["roles"].clone(),
                p["next"]["actors"].clone(),
            )
        })
        .collect();
    let expected = [
        ("proposed", "admit", json!(["decision_owner"])),
        (
            "awaiting_approval",
            "approve_or_deny",
            json!(["approval_authority"]),
        ),
        (
            "human_gate",
            "approve_or_deny",
            json!(["approval_authority"]),
        ),
        ("approved", "dispatch", json!(["execution_actor"])),
        (
            "running",
            "confirm_by_readback",
            json!(["execution_actor", "evidence_owner"]),
        ),
        (
            "write_status_unknown",
            "reconcile",
            json!(["evidence_owner", "repair_owner"]),
        ),
        ("repair_required", "repair", json!(["repair_owner"])),
        (
            "ready_to_resume",
            "resume",
            json!(["execution_actor", "resume_authority"]),
        ),
        ("stopped", "require_repair", json!(["repair_owner"])),
        (
            "partially_completed",
            "require_repair",
            json!(["repair_owner"]),
        ),
        ("held", "release_or_escalate", json!(["stop_authority"])),
        ("completed", "none", json!([])),
        ("denied", "none", json!([])),
        ("aborted", "none", json!([])),
    ];
    assert_eq!(got.len(), expected.len());
    for ((state, action, roles, actors), (es, ea, er)) in got.iter().zip(expected) {
        assert_eq!((state.as_str(), action.as_str(), roles), (es, ea, &er));
        // In the scripted definitions each role is held by an actor named after it.
        assert_eq!(actors, &er);
    }
}

#[test]
fn pages_follow_cursors_to_the_end() {
    let (_dir, db) = scripted_db();
    for (tool, total) in [("rpr.list_pathways", 14), ("rpr.list_unresolved", 11)] {
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut args = json!({"limit": 3});
            if let Some(c) = &cursor {
                args["cursor"] = json!(c);
            }
            let page = structured(&call(&db, tool, args)).clone();
            pages += 1;
            for p in page["pathways"].as_array().unwrap() {
                seen.push(p["pathway_id"].as_str().unwrap().to_owned());
            }
            match page.get("next_cursor") {
                Some(c) => {
                    assert_ne!(
                        Some(c.as_str().unwrap().to_owned()),
                        cursor,
                        "the cursor advances"
                    );
                    cursor = Some(c.as_str().unwrap().to_owned());
                }
                None => break,
            }
            assert!(pages < 20);
        }
        let mut sorted = seen.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(
            (seen.len(), sorted.len()),
            (total, total),
            "{tool}: every pathway once, in order"
        );
        assert_eq!(seen, sorted);
    }
    // A cursor is bound to its listing and filter.
    let page = structured(&call(&db, "rpr.list_pathways", json!({"limit": 1}))).clone();
    let c = page["next_cursor"].as_str().unwrap();
    assert_eq!(
        tool_error(&call(&db, "rpr.list_unresolved", json!({"cursor": c}))),
        "invalid_cursor"
    );
    assert_eq!(
        tool_error(&call(
            &db,
            "rpr.list_pathways",
            json!({"cursor": c, "state": "held"})
        )),
        "invalid_cursor"
    );
    // The exact limit on the last page gives no cursor.
    let page = structured(&call(&db, "rpr.list_pathways", json!({"limit": 14}))).clone();
    assert!(page.get("next_cursor").is_none());
    // Evidence pages, one event at a time.
    let all = structured(&call(
        &db,
        "rpr.get_evidence",
        json!({"pathway_id": "pw_000011"}),
    ))
    .clone();
    let mut cursor: Option<String> = None;
    let mut seqs = Vec::new();
    loop {
        let mut args = json!({"pathway_id": "pw_000011", "limit": 1});
        if let Some(c) = &cursor {
            args["cursor"] = json!(c);
        }
        let page = structured(&call(&db, "rpr.get_evidence", args)).clone();
        assert_eq!(page["chain_verified"], true);
        seqs.extend(
            page["events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["seq"].clone()),
        );
        match page.get("next_cursor") {
            Some(c) => cursor = Some(c.as_str().unwrap().to_owned()),
            None => break,
        }
    }
    let all_seqs: Vec<Value> = all["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].clone())
        .collect();
    assert_eq!(seqs, all_seqs);
    let c = cursor.unwrap_or_default();
    if !c.is_empty() {
        assert_eq!(
            tool_error(&call(
                &db,
                "rpr.get_evidence",
                json!({"pathway_id": "pw_000001", "cursor": c})
            )),
            "invalid_cursor"
        );
    }
}

#[test]
fn evidence_reports_a_tampered_event() {
    let (_dir, db) = scripted_db();
    let sql = Sql::open(&db);
    let seq = sql.ints(
        "SELECT seq FROM ledger WHERE pathway_id = 'pw_000005' ORDER BY seq LIMIT 1 OFFSET 1",
    )[0]
    .unwrap();
    let event = sql.texts(&format!("SELECT event FROM ledger WHERE seq = {seq}"))[0].clone();
    let tampered = event.replace("decision_owner", "mallory");
    assert_ne!(tampered, event);
    assert_eq!(
        sql.execute(
            "UPDATE ledger SET event = $1 WHERE seq = $2",
            &[Arg::Text(&tampered), Arg::Int(seq)],
        ),
        1
    );
    drop(sql);
    let page = structured(&call(
        &db,
        "rpr.get_evidence",
        json!({"pathway_id": "pw_000005"}),
    ))
    .clone();
    assert_eq!(page["chain_verified"], false);
    let problems = page["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0]["seq"], seq);
    let bad: Vec<&Value> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["verified"] == false)
        .collect();
    assert_eq!(bad.len(), 1);
    // Other pathways' pages do not include that event and still verify.
    let other = structured(&call(
        &db,
        "rpr.get_evidence",
        json!({"pathway_id": "pw_000001"}),
    ))
    .clone();
    assert_eq!(other["chain_verified"], true);
}

#[test]
fn large_records_are_paged_and_truncated_under_10_mib() {
    use rpr::evidence::Bounds;
    let dir = TempDir::new("rpr-mcp-large");
    let db = dir.db();
    let rt = rpr::Runtime::builder(&db)
        .clock(TickClock::at(1_700_000_000_000))
        .ids(rpr::SequentialIds::default())
        .bounds(Bounds::new(32, 10_000, 8 << 20, 16 << 20))
        .open()
        .unwrap();
    let big = "b".repeat(6 << 20);
    let def = definition("big", rpr::ActionClass::Mutating).with_metadata(json!({"blob": big}));
    let mut p = allowed(&rt, def);
    let reason = "r".repeat(2 << 20);
    for _ in 0..4 {
        p = p
            .hold(&rt, &actor("stop_authority"), &reason)
            .unwrap()
            .release(&rt, &actor("stop_authority"))
            .unwrap();
    }
    drop(p);
    drop(rt);

    let mut input = init(0) + &call_line(1, "rpr.get_pathway", json!({"pathway_id": "pw_000001"}));
    input += &call_line(
        2,
        "rpr.get_evidence",
        json!({"pathway_id": "pw_000001", "limit": 500}),
    );
    let out = session(&db, input.as_bytes());
    let detail = structured(&out.lines[1]["result"]).clone();
    assert_eq!(detail["truncated"], true);
    assert_eq!(detail["definition"]["truncated"], true);
    assert_eq!(detail["definition"]["reason"], "value_budget_bytes");
    assert!(detail["definition"]["bytes"].as_u64().unwrap() > 6 << 20);
    let mut page = structured(&out.lines[2]["result"]).clone();
    let mut events = 0;
    let mut pages = 1;
    loop {
        events += page["events"].as_array().unwrap().len();
        assert!(page["chain_verified"] == true);
        let Some(c) = page.get("next_cursor").and_then(Value::as_str) else {
            break;
        };
        page = structured(&call(
            &db,
            "rpr.get_evidence",
            json!({"pathway_id": "pw_000001", "limit": 500, "cursor": c}),
        ))
        .clone();
        pages += 1;
    }
    assert_eq!(
        events,
        2 + 8,
        "proposed, admitted, then 4 holds and 4 releases"
    );
    assert!(
        pages >= 3,
        "2 MiB events must be split over pages, got {pages}"
    );
}

/// On PostgreSQL (`RPR_TEST_BACKEND=postgres`) the server reads through the read-only role
/// `rpr_reader`: every tool answers exactly as through the owner, nothing in the database
/// changes, and neither password reaches stdout or stderr. A wrong password, and a schema
/// without an rpr store, end it with a one-line error (exit 1 and 4) that does not repeat
/// the password either.
#[cfg(feature = "postgres")]
#[test]
fn a_postgres_database_is_served_through_the_read_only_role() {
    if !pg::on() {
        return; // the SQLite run of this suite; `.ci/run` runs it again on PostgreSQL.
    }
    let (_dir, db) = scripted_db();
    let owner = db.to_str().unwrap().to_owned();
    let schema = owner.rsplit("%3D").next().unwrap();
    let reader = PathBuf::from(pg::reader_location(schema));
    let before = db_dump(&db);
    let mut input = init(0);
    let tools = tools_list(&db)["tools"].as_array().unwrap().clone();
    assert!(tools.len() >= 5, "{tools:?}");
    for (i, args) in [
        ("rpr.get_status", json!({})),
        ("rpr.list_pathways", json!({"limit": 3})),
        ("rpr.list_unresolved", json!({})),
        ("rpr.get_pathway", json!({"pathway_id": "pw_000005"})),
        ("rpr.get_evidence", json!({"pathway_id": "pw_000005"})),
        ("rpr.get_pathway", json!({"pathway_id": "pw_nope"})),
    ]
    .iter()
    .enumerate()
    {
        input += &call_line(i + 1, args.0, args.1.clone());
    }
    let through_owner = session(&db, input.as_bytes());
    let through_reader = session(&reader, input.as_bytes());
    assert_eq!(through_reader.lines.len(), 7, "{}", through_reader.stderr);
    for line in &through_reader.lines[1..6] {
        assert_eq!(line["result"]["isError"], false, "{line}");
    }
    assert_eq!(through_reader.lines, through_owner.lines);
    assert_eq!(through_reader.status.code(), Some(0));
    for out in [&through_owner, &through_reader] {
        let all = format!("{}{}", String::from_utf8_lossy(&out.raw), out.stderr);
        assert!(!all.contains("_pw@"), "a password was printed: {all}");
    }
    assert_eq!(db_dump(&db), before, "the database changed");

    let wrong = reader
        .to_str()
        .unwrap()
        .replace("rpr_reader_pw", "not-the-password");
    let (code, out, err) = run(&[os("--database"), os(&wrong)]);
    assert_eq!(code, 1, "{err}");
    assert!(out.is_empty());
    assert_one_line_error(&err);
    assert!(
        err.contains("28P01") && !err.contains("not-the-password"),
        "{err}"
    );

    let empty = pg::schema("mcp_empty");
    let empty_location = pg::reader_location(&empty);
    Sql::open(Path::new(&pg::location(&empty)))
        .batch("DROP TABLE meta, rpr_migrations, ledger, approvals, attempts, pathways, pins");
    let (code, out, err) = run(&[os("--database"), os(&empty_location)]);
    assert_eq!(code, 4, "{err}");
    assert!(out.is_empty());
    assert_one_line_error(&err);
    pg::drop_schema(&empty);
}
