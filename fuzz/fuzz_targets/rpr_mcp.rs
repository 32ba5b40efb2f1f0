//! `rpr-mcp`'s request handling in process: its own method and tool code
//! (`src/bin/rpr-mcp/methods.rs` and `tools.rs`, compiled into this target) behind the
//! library's JSON-RPC server loop, over the story database (`rpr_fuzz::stories`).
//!
//! The first input byte picks what the rest is: raw input lines after an `initialize`, raw
//! input lines with none, the `arguments` of a call to one of the tools (any JSON value,
//! or the rest as a string when it is not JSON), or the whole `params` of `tools/call` or
//! `tools/list`.
//!
//! What must hold: no panic; the output is whole lines, each a JSON-RPC 2.0 response (a
//! result or an error with an integer code and a string message); every request, and every
//! line that calls for an error reply, is answered once, in order, with its id; every tool
//! result is a `CallToolResult` whose text is its `structuredContent`; a `next_cursor` a
//! listing gives is accepted by the same listing; and nothing at all reaches stdout.
#![no_main]

use std::io::{Read, Seek};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use rpr::jsonrpc::server::{Incoming, Server, read_incoming};
use rpr::jsonrpc::{JsonRpcError, MessageReader, MessageWriter};
use rpr::store::ReadStore;
use serde_json::{Map, Value, json};

#[path = "../../src/bin/rpr-mcp/methods.rs"]
mod methods;
#[path = "../../src/bin/rpr-mcp/tools.rs"]
mod tools;

use methods::Inspector;

/// A small cap, so that over-long lines are common (`rpr-mcp` itself takes 4 MiB).
const MAX_LINE_BYTES: usize = 1024;
/// `rpr-mcp`'s own reply cap.
const MAX_RESPONSE_BYTES: usize = 10 * 1024 * 1024;

const TOOLS: &[&str] = &[
    "rpr.get_status",
    "rpr.list_pathways",
    "rpr.get_pathway",
    "rpr.get_evidence",
    "rpr.list_unresolved",
    "rpr.no_such_tool",
];

struct Setup {
    database: PathBuf,
    inspector: Mutex<Inspector>,
    /// The inspector of the uninitialized mode, kept while it stays uninitialized (see
    /// [`uninitialized`]).
    fresh: Mutex<Option<Inspector>>,
    /// What fd 1 now writes to: anything in it is output that is not protocol.
    stdout: Mutex<std::fs::File>,
}

fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let dir = rpr_fuzz::stories::scratch("rpr-mcp");
        let database = dir.join("stories.db");
        std::fs::write(&database, rpr_fuzz::stories::database_bytes()).expect("the database");
        let path = dir.join("stdout");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .expect("a stdout file");
        // SAFETY: dup2 on two open descriptors; fd 1 then writes to the file.
        assert!(
            unsafe { libc::dup2(file.as_raw_fd(), 1) } == 1,
            "stdout redirected"
        );
        let store = ReadStore::open_read_only(&database).expect("the story database");
        Setup {
            inspector: Mutex::new(Inspector::new(store)),
            fresh: Mutex::new(None),
            database,
            stdout: Mutex::new(file),
        }
    })
}

fn line(id: i64, method: &str, params: Value) -> Vec<u8> {
    let mut m = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if !params.is_null() {
        m["params"] = params;
    }
    let mut text = serde_json::to_vec(&m).expect("a line");
    text.push(b'\n');
    text
}

fn initialize() -> Vec<u8> {
    let mut text = line(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}),
    );
    text.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    text
}

/// The rest as JSON, or as a string when it is not JSON.
fn value(rest: &[u8]) -> Value {
    serde_json::from_slice(rest)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(rest).into_owned()))
}

/// The input lines the first byte asks for.
fn session(mode: u8, rest: &[u8]) -> Vec<u8> {
    match mode % 4 {
        0 => [initialize(), rest.to_vec()].concat(),
        1 => rest.to_vec(),
        2 => {
            let tool = TOOLS[usize::from(mode / 4) % TOOLS.len()];
            let call = line(
                1,
                "tools/call",
                json!({"name": tool, "arguments": value(rest)}),
            );
            [initialize(), call].concat()
        }
        _ => {
            let method = if mode & 4 == 0 {
                "tools/call"
            } else {
                "tools/list"
            };
            [initialize(), line(1, method, value(rest))].concat()
        }
    }
}

/// Serves `input` with `inspector` and returns the output lines.
fn serve(inspector: &mut Inspector, input: &[u8]) -> Vec<u8> {
    let mut server = Server::new(
        MessageReader::with_max_message_bytes(input, MAX_LINE_BYTES),
        MessageWriter::with_max_message_bytes(Vec::new(), MAX_RESPONSE_BYTES),
    );
    server
        .serve(inspector)
        .expect("a server over memory does not fail");
    server.writer().get_ref().clone()
}

/// The ids the replies to `input` must carry, in order (`rpr-mcp` answers an over-long
/// line with id `null`).
fn expected_ids(input: &[u8]) -> Vec<Value> {
    let mut reader = MessageReader::with_max_message_bytes(input, MAX_LINE_BYTES);
    let mut ids = Vec::new();
    while let Some(incoming) = read_incoming(&mut reader).expect("reading memory") {
        match incoming {
            Incoming::Request(r) => ids.push(r.id.to_value()),
            Incoming::Invalid(i) => {
                if let Some(reply) = i.reply {
                    let long = matches!(i.error, JsonRpcError::LineTooLong { .. });
                    ids.push(if long {
                        Value::Null
                    } else {
                        reply["id"].clone()
                    });
                }
            }
            Incoming::Notification(_) | Incoming::Response(_) => {}
        }
    }
    ids
}

/// Checks that `output` is whole lines of well-formed responses; returns them.
fn responses(output: &[u8]) -> Vec<Map<String, Value>> {
    if output.is_empty() {
        return Vec::new();
    }
    assert_eq!(output.last(), Some(&b'\n'), "the output ends inside a line");
    let mut out = Vec::new();
    for line in output[..output.len() - 1].split(|&b| b == b'\n') {
        let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(line) else {
            panic!(
                "an output line that is no JSON object: {}",
                String::from_utf8_lossy(line)
            );
        };
        assert_eq!(m.get("jsonrpc"), Some(&json!("2.0")), "{m:?}");
        assert!(
            m.contains_key("id") && !m.contains_key("method"),
            "not a response: {m:?}"
        );
        match (m.get("result"), m.get("error")) {
            (Some(Value::Object(_)), None) => {}
            (None, Some(Value::Object(e))) => {
                assert!(e.get("code").is_some_and(Value::is_i64), "{m:?}");
                assert!(e.get("message").is_some_and(Value::is_string), "{m:?}");
            }
            _ => panic!("neither one result object nor one error: {m:?}"),
        }
        out.push(m);
    }
    out
}

/// A `CallToolResult`: one text block holding its `structuredContent`.
fn check_tool_result(result: &Value) {
    let structured = &result["structuredContent"];
    assert!(structured.is_object(), "{result}");
    assert!(result["isError"].is_boolean(), "{result}");
    let text = result["content"][0]["text"].as_str().expect("a text block");
    assert_eq!(
        serde_json::from_str::<Value>(text).ok().as_ref(),
        Some(structured),
        "{result}"
    );
    if result["isError"] == json!(true) {
        assert!(structured["error"]["code"].is_string(), "{result}");
        assert!(structured["error"]["message"].is_string(), "{result}");
    }
}

fuzz_target!(|input: &[u8]| {
    let setup = setup();
    let Some((&mode, rest)) = input.split_first() else {
        return;
    };
    let lines = session(mode, rest);
    // `initialized` is an inspector's only state, and every mode but the uninitialized one
    // starts with `initialize`: those share one inspector (and its open database).
    let mut fresh;
    let mut shared;
    let inspector = if mode % 4 == 1 {
        fresh = setup.fresh.lock().expect("the uninitialized inspector");
        if !fresh.as_mut().is_some_and(uninitialized) {
            *fresh = Some(Inspector::new(
                ReadStore::open_read_only(&setup.database).expect("the database"),
            ));
        }
        fresh.as_mut().expect("an inspector")
    } else {
        shared = setup.inspector.lock().expect("the shared inspector");
        &mut *shared
    };
    let output = serve(inspector, &lines);
    let replies = responses(&output);
    let ids: Vec<Value> = replies.iter().map(|m| m["id"].clone()).collect();
    assert_eq!(
        ids,
        expected_ids(&lines),
        "replies out of step with the requests"
    );
    // The tool calls of the structured modes, and their cursors.
    if mode % 4 >= 2
        && let Some(result) = replies.last().and_then(|m| m.get("result"))
    {
        if mode % 4 == 2 || mode & 4 == 0 {
            check_tool_result(result);
            follow_cursor(inspector, mode, rest, result);
        }
    }
    let mut stdout = setup.stdout.lock().expect("stdout");
    let mut leaked = String::new();
    stdout
        .rewind()
        .and_then(|()| stdout.read_to_string(&mut leaked))
        .expect("read stdout");
    assert!(leaked.is_empty(), "output outside the protocol: {leaked}");
});

/// Whether `inspector` is still as [`Inspector::new`] made it: its only state is whether
/// an `initialize` succeeded (`src/bin/rpr-mcp/methods.rs`), and before one it refuses
/// `tools/list` with "not initialized" without reading its database. A run of the
/// uninitialized mode reuses such an inspector rather than opening the database again;
/// one that its run initialized is replaced.
fn uninitialized(inspector: &mut Inspector) -> bool {
    let output = serve(inspector, &line(0, "tools/list", Value::Null));
    let replies = responses(&output);
    assert_eq!(replies.len(), 1, "one reply to one request");
    replies[0]["error"]["code"] == json!(rpr::jsonrpc::codes::INVALID_REQUEST)
}

/// A listing's `next_cursor`, sent back with the same arguments, is accepted.
fn follow_cursor(inspector: &mut Inspector, mode: u8, rest: &[u8], result: &Value) {
    let Some(cursor) = result["structuredContent"]["next_cursor"].as_str() else {
        return;
    };
    let (tool, mut args) = if mode % 4 == 2 {
        (
            json!(TOOLS[usize::from(mode / 4) % TOOLS.len()]),
            value(rest),
        )
    } else {
        let params = value(rest);
        (params["name"].clone(), params["arguments"].clone())
    };
    if !args.is_object() {
        args = json!({});
    }
    args["cursor"] = json!(cursor);
    let next = serve(
        inspector,
        &line(2, "tools/call", json!({"name": tool, "arguments": args})),
    );
    let replies = responses(&next);
    let result = &replies[0]["result"];
    check_tool_result(result);
    assert_eq!(
        result["isError"],
        json!(false),
        "a cursor the server gave was refused: {result}"
    );
}
