//! The MCP client's reading path: a session (`rpr::mcp::Session`) or a whole client
//! (`rpr::mcp::McpClient`) against a scripted server whose every reply comes from the
//! input.
//!
//! Both run without a child process. The bare session runs over in-process pipes
//! (`Session::over_streams`) with a thread of this process as its server. The whole client
//! is `McpClient::connect_in_process` with the scripted server in this process
//! (`rpr_fuzz::scripted::InProcess`): each start of the server is a thread over a new pair
//! of in-process pipes (a client that finds the connection broken at its first request
//! starts the server again, up to four times). Either way, for each request line the
//! client writes, the server writes the next chunk of the input (`"$id"` in a chunk
//! replaced by the request's id), then a newline and a closing error reply for that id
//! (`-32601`), so that a request the chunk left unanswered ends at once instead of at its
//! timeout. Chunks are separated by `%%\n`. Nothing is written but in answer to a request,
//! so a run does not depend on timing.
//!
//! The first byte picks the client: a bare session sending one to three `tools/call`
//! requests in turn, or `McpClient::connect_in_process`, `list_tools` and `call_tool`.
//!
//! What must hold: no panic; and for the session, each reply a request returns is one the
//! server wrote for that very id (same JSON type) on a line within the message limit: a
//! response with another id, or over the limit, never completes a request.
#![no_main]

use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use rpr::jsonrpc::Message;
use rpr::mcp::{McpClient, Reply, Session, SessionConfig};
use rpr_fuzz::scripted::{InProcess, ignore_sigpipe, serve_streams, split_chunks};
use serde_json::{Value, json};

/// The client's message limit: small, so that over-long lines are common.
const MAX_MESSAGE_BYTES: usize = 1024;

/// How many times a run's client may start the server (a client that finds the
/// connection broken at its first request starts it again).
const STARTS: usize = 4;

fn config() -> SessionConfig {
    let mut config = SessionConfig::default();
    config.max_message_bytes = MAX_MESSAGE_BYTES;
    config.request_timeout = Duration::from_secs(10);
    config.discover_timeout = Duration::from_secs(10);
    config.max_tool_pages = 3;
    config.transport.close_wait = Duration::from_secs(2);
    config
}

/// Whether the server wrote, on a line within the limit, a response to `id` that is `reply`.
fn wrote(written: &[u8], id: i64, reply: &Reply) -> bool {
    written.split(|&b| b == b'\n').any(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.len() > MAX_MESSAGE_BYTES {
            return false;
        }
        let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(line) else {
            return false;
        };
        if m.get("id") != Some(&json!(id)) || m.get("jsonrpc") != Some(&json!("2.0")) {
            return false;
        }
        match reply {
            Reply::Result(v) => m.get("result") == Some(v),
            Reply::Error(e) => m
                .get("error")
                .is_some_and(|o| o["code"] == json!(e.code) && o["message"] == json!(e.message)),
        }
    })
}

/// Whether the server wrote a line that could be a broken reply to `id`: over the limit
/// when `over` (else within it), and either not JSON (its id can only be guessed) or an
/// object with that id (same JSON type) and no valid message. Within the limit, the object
/// must also have no `method` (a request or notification of the server's is never a
/// reply); over it, the reader sees only the line's ends and knows a request only when its
/// `method` shows among the opening members, so any object with the id may be the cause.
/// Blank lines are skipped, as the reader skips them.
fn wrote_broken(written: &[u8], id: i64, over: bool) -> bool {
    written.split(|&b| b == b'\n').any(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) || (line.len() > MAX_MESSAGE_BYTES) != over {
            return false;
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(m)) => {
                m.get("id") == Some(&json!(id))
                    && (over
                        || (!m.contains_key("method")
                            && Message::from_value(Value::Object(m)).is_err()))
            }
            Ok(_) => false,
            Err(_) => true,
        }
    })
}

/// A bare session over in-process pipes, its server a thread answering with `chunks`: one
/// to three `tools/call` requests in turn. Returns what each returned, and everything the
/// server wrote.
fn session_run(chunks: &[&[u8]], requests: usize) -> (Vec<(i64, Result<Reply, String>)>, Vec<u8>) {
    let (requests_in, requests_out) = std::io::pipe().expect("a pipe");
    let (replies_in, replies_out) = std::io::pipe().expect("a pipe");
    std::thread::scope(|scope| {
        let server = scope.spawn(move || {
            let mut next = chunks.iter();
            serve_streams(requests_in, replies_out, |_| {
                next.next().copied().unwrap_or_default().to_vec()
            })
        });
        let session =
            Session::over_streams(replies_in, requests_out, &config()).expect("a session");
        let mut out = Vec::new();
        for n in 1..=requests {
            let params = json!({"name": "t", "arguments": {"n": n}});
            let reply = session.request_default("tools/call", Some(params));
            out.push((
                i64::try_from(n).expect("small"),
                reply.map_err(|e| e.to_string()),
            ));
        }
        // Closes the session's writer: the server reads the end of its input and ends.
        session.shutdown();
        (out, server.join().expect("the server thread"))
    })
}

/// A whole client: connect (probe and handshake), list the tools, call one; its server the
/// scripted one in this process, answering with `chunks` in turn.
fn client_run(chunks: Vec<Vec<u8>>) {
    let mut next = chunks.into_iter();
    let scripted = InProcess::new(STARTS, move |_| next.next().unwrap_or_default());
    if let Ok(client) = McpClient::connect_in_process(&scripted.server("fuzz"), &config()) {
        let _ = client.list_tools();
        let _ = client.call_tool("t", &json!({"n": 1}), Duration::from_secs(10));
        client.shutdown();
    }
    let _ = scripted.finish();
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, rest)) = input.split_first() else {
        return;
    };
    ignore_sigpipe();
    let chunks = split_chunks(rest);
    if mode % 2 == 1 {
        client_run(chunks.iter().map(|c| c.to_vec()).collect());
        return;
    }
    let (replies, written) = session_run(&chunks, 1 + usize::from(mode / 2) % 3);
    for (id, reply) in replies {
        match reply {
            Ok(reply) => assert!(
                wrote(&written, id, &reply),
                "request {id} completed by a reply the server never wrote for it: {reply:?}"
            ),
            Err(lost) if lost.contains("was malformed") || lost.contains("message limit") => {
                let over = lost.contains("message limit");
                assert!(
                    wrote_broken(&written, id, over),
                    "request {id} ended by a line that is no reply to it: {lost}"
                );
            }
            Err(_) => {}
        }
    }
});
