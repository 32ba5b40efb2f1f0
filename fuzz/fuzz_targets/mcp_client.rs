//! The MCP client's reading path: a session (`rpr::mcp::Session`) or a whole client
//! (`rpr::mcp::McpClient`) against a scripted server whose every reply comes from the
//! input.
//!
//! There is no in-process seam: a session always runs its server as a child process. The
//! child here is a shell that claims a free pair of named pipes and runs
//! `cat OUT & exec cat >REQ` on them, and a thread of this process is the server behind
//! them (a client that finds the connection broken at its first request starts a second
//! process, which takes the next pair). For each request line the client writes, the
//! server writes the next chunk of the input (`"$id"` in a chunk replaced by the
//! request's id), then a newline and a closing error reply for that id (`-32601`), so that
//! a request the chunk left unanswered ends at once instead of at its timeout. Chunks are
//! separated by `%%\n`. Nothing is written but in answer to a request, so a run does not
//! depend on timing.
//!
//! The first byte picks the client: a bare session sending one to three `tools/call`
//! requests in turn, or `McpClient::connect`, `list_tools` and `call_tool`.
//!
//! What must hold: no panic; and for the session, each reply a request returns is one the
//! server wrote for that very id (same JSON type) on a line within the message limit: a
//! response with another id, or over the limit, never completes a request.
#![no_main]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use rpr::jsonrpc::Message;
use rpr::mcp::{McpClient, Reply, ServerCommand, Session, SessionConfig};
use serde_json::{Value, json};

/// The client's message limit: small, so that over-long lines are common.
const MAX_MESSAGE_BYTES: usize = 1024;

/// Pairs of named pipes, one pair for each server process of a run (a client that
/// finds the connection broken at its first request starts the server again).
const PAIRS: usize = 4;

struct Pipes {
    dir: PathBuf,
}

impl Pipes {
    fn requests(&self, pair: usize) -> PathBuf {
        self.dir.join(format!("req{pair}"))
    }
    fn replies(&self, pair: usize) -> PathBuf {
        self.dir.join(format!("out{pair}"))
    }
    /// Frees every pair for the next run.
    fn reset(&self) {
        for pair in 0..PAIRS {
            let _ = std::fs::remove_file(self.dir.join(format!("claim{pair}")));
        }
    }
}

fn pipes() -> &'static Pipes {
    static PIPES: OnceLock<Pipes> = OnceLock::new();
    PIPES.get_or_init(|| {
        // As in any Rust program: a write to a pipe whose reader is gone fails with EPIPE
        // rather than killing the process (libFuzzer's `main` is not Rust's, which sets this).
        // SAFETY: sets the disposition of one signal to "ignore".
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let pipes = Pipes {
            dir: rpr_fuzz::stories::scratch("mcp-client"),
        };
        for pair in 0..PAIRS {
            for path in [pipes.requests(pair), pipes.replies(pair)] {
                let c =
                    std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("a path");
                // SAFETY: mkfifo on a NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
            }
        }
        pipes
    })
}

/// The server process: claims the first free pair (a file made with `noclobber`, which
/// only one process can create), copies the pair's
/// replies pipe to its stdout and its stdin to the pair's requests pipe.
fn command(p: &Pipes) -> ServerCommand {
    ServerCommand::new("/bin/sh")
        .arg("-c")
        .arg(
            "set -C; for i in 0 1 2 3; do if { : >\"$0/claim$i\"; } 2>/dev/null; then \
             cat \"$0/out$i\" & exec cat >\"$0/req$i\"; fi; done; exit 1",
        )
        .arg(&p.dir)
}

fn config() -> SessionConfig {
    let mut config = SessionConfig::default();
    config.max_message_bytes = MAX_MESSAGE_BYTES;
    config.request_timeout = Duration::from_secs(10);
    config.discover_timeout = Duration::from_secs(10);
    config.max_tool_pages = 3;
    config.transport.close_wait = Duration::from_secs(2);
    config
}

/// The server: for each server process in turn (each pair), answers each request line
/// with the next chunk and a closing error reply, until `done`. Returns everything it
/// wrote.
fn serve(p: &Pipes, chunks: &[&[u8]], at: &AtomicUsize, done: &AtomicBool) -> Vec<u8> {
    let mut written = Vec::new();
    let mut next = chunks.iter();
    for pair in 0..PAIRS {
        at.store(pair, Ordering::SeqCst);
        let requests = std::fs::File::open(p.requests(pair)).expect("a requests pipe");
        if done.load(Ordering::SeqCst) {
            break;
        }
        let mut replies = std::fs::OpenOptions::new()
            .write(true)
            .open(p.replies(pair))
            .expect("a replies pipe");
        for line in BufReader::new(requests).split(b'\n') {
            let Ok(line) = line else { break };
            let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            let (Some(id), true) = (request.get("id"), request.contains_key("method")) else {
                continue;
            };
            let id = id.to_string();
            let chunk = next.next().copied().unwrap_or_default();
            let mut out = replace(chunk, b"\"$id\"", id.as_bytes());
            out.push(b'\n');
            out.extend_from_slice(
                format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32601,"message":"fuzz: no reply"}}}}"#)
                    .as_bytes(),
            );
            out.push(b'\n');
            if replies.write_all(&out).is_err() {
                break;
            }
            written.extend_from_slice(&out);
        }
    }
    at.store(PAIRS, Ordering::SeqCst);
    written
}

/// Ends `serve` once the client is done: it waits to open the requests pipe of the next
/// pair, and is let through by this open (which succeeds only once it waits there).
fn release(p: &Pipes, at: &AtomicUsize, done: &AtomicBool) {
    use std::os::unix::fs::OpenOptionsExt;
    done.store(true, Ordering::SeqCst);
    loop {
        let pair = at.load(Ordering::SeqCst);
        if pair >= PAIRS {
            return;
        }
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(p.requests(pair));
        if opened.is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn replace(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while !rest.is_empty() {
        if rest.starts_with(from) {
            out.extend_from_slice(to);
            rest = &rest[from.len()..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    out
}

fn split_chunks(input: &[u8]) -> Vec<&[u8]> {
    let mut chunks = Vec::new();
    let mut rest = input;
    while let Some(at) = rest.windows(3).position(|w| w == b"%%\n") {
        chunks.push(&rest[..at]);
        rest = &rest[at + 3..];
    }
    chunks.push(rest);
    chunks
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

/// A bare session: one to three `tools/call` requests in turn. Returns what each returned.
fn session_run(p: &Pipes, requests: usize) -> Vec<(i64, Result<Reply, String>)> {
    let session = Session::start(&command(p), &config()).expect("the scripted server starts");
    let mut out = Vec::new();
    for n in 1..=requests {
        let params = json!({"name": "t", "arguments": {"n": n}});
        let reply = session.request_default("tools/call", Some(params));
        out.push((
            i64::try_from(n).expect("small"),
            reply.map_err(|e| e.to_string()),
        ));
    }
    session.shutdown();
    out
}

/// A whole client: connect (probe and handshake), list the tools, call one.
fn client_run(p: &Pipes) {
    let Ok(client) = McpClient::connect(&command(p), &config()) else {
        return;
    };
    let _ = client.list_tools();
    let _ = client.call_tool("t", &json!({"n": 1}), Duration::from_secs(10));
    client.shutdown();
}

fuzz_target!(|input: &[u8]| {
    let Some((&mode, rest)) = input.split_first() else {
        return;
    };
    let p = pipes();
    p.reset();
    let chunks = split_chunks(rest);
    let (at, done) = (AtomicUsize::new(0), AtomicBool::new(false));
    std::thread::scope(|scope| {
        let server = scope.spawn(|| serve(p, &chunks, &at, &done));
        let replies = if mode % 2 == 0 {
            session_run(p, 1 + usize::from(mode / 2) % 3)
        } else {
            client_run(p);
            Vec::new()
        };
        release(p, &at, &done);
        let written = server.join().expect("the server thread");
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
});
