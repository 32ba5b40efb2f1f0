//! A scripted MCP server whose every reply comes from the input, for the targets that
//! drive rpr's MCP client (`mcp_client`, and the gate's server side in `gate`), all in the
//! fuzz process: no child process.
//!
//! A bare session runs over in-process pipes (`rpr::mcp::Session::over_streams`), its
//! server a thread ([`serve_streams`]). `McpClient` and the gate start it as a server in
//! this process (`rpr::mcp::InProcessServer`, [`InProcess`]): each start is a thread over a
//! new pair of in-process pipes, up to a number of starts per run (a client that finds the
//! connection broken, or a gate that stops a server after a timeout or garbage, starts it
//! again). For each request line the client writes, the server writes a chunk of the input
//! (the next, or one the target picks for the request; `"$id"` in it replaced by the
//! request's id), then a newline and a closing error reply for that id (`-32601`), so that
//! a request the chunk left unanswered ends at once instead of at its timeout. Nothing is
//! written but in answer to a request, so a run does not depend on timing.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Map, Value};

/// The server of one connection over a reader and a writer of this process (for a
/// session over streams, `rpr::mcp::Session::over_streams`): answers each request line
/// read from `requests` (see the module's text), until the end of `requests` or a failed write;
/// then drops `replies` (the session reads the end of its input). Returns everything it
/// wrote.
pub fn serve_streams(
    requests: impl Read,
    mut replies: impl Write,
    mut answer: impl FnMut(&Map<String, Value>) -> Vec<u8>,
) -> Vec<u8> {
    let mut written = Vec::new();
    answer_requests(
        requests,
        &mut replies,
        &mut answer,
        &mut |_| {},
        &mut written,
    );
    written
}

/// Answers each request line of `requests` (a JSON object with an `id` and a `method`)
/// with the chunk `answer` gives (`"$id"` in it replaced by the request's id), a newline
/// and a closing error reply, appending what it wrote to `written`; until the end of
/// `requests` or a failed write. A line with a `method` and no `id` (a notification) is
/// shown to `notice` and answered with nothing.
fn answer_requests(
    requests: impl Read,
    replies: &mut impl Write,
    answer: &mut impl FnMut(&Map<String, Value>) -> Vec<u8>,
    notice: &mut dyn FnMut(&Map<String, Value>),
    written: &mut Vec<u8>,
) {
    for line in BufReader::new(requests).split(b'\n') {
        let Ok(line) = line else { break };
        let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        if !request.contains_key("method") {
            continue;
        }
        let Some(id) = request.get("id") else {
            notice(&request);
            continue;
        };
        let id = id.to_string();
        let chunk = answer(&request);
        let mut out = replace(&chunk, b"\"$id\"", id.as_bytes());
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

/// Makes a write to a pipe whose reader is gone fail with EPIPE rather than kill the
/// process, as in any Rust program (libFuzzer's `main` is not Rust's, which sets this).
pub fn ignore_sigpipe() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: sets the disposition of one signal to "ignore".
    ONCE.call_once(|| unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    });
}

/// What the answer of an [`InProcess`] server is: the chunk for one request.
type Answer = dyn FnMut(&Map<String, Value>) -> Vec<u8> + Send;
type Notice = dyn FnMut(&Map<String, Value>) + Send;

/// The scripted server in this process (`rpr::mcp::InProcessServer`): each start of the
/// server, up to `starts` of them, is a thread that answers each request line as
/// [`serve_streams`] does, over a new pair of in-process pipes; a start past them fails
/// (the client or the gate reports that the server did not start). No process, no fork.
pub struct InProcess {
    answer: std::sync::Arc<std::sync::Mutex<Box<Answer>>>,
    notice: std::sync::Arc<std::sync::Mutex<Box<Notice>>>,
    threads: std::sync::Arc<std::sync::Mutex<Vec<std::thread::JoinHandle<Vec<u8>>>>>,
    starts: std::sync::Arc<AtomicUsize>,
}

impl InProcess {
    /// A server answering with `answer`, startable `starts` times.
    pub fn new(
        starts: usize,
        answer: impl FnMut(&Map<String, Value>) -> Vec<u8> + Send + 'static,
    ) -> Self {
        ignore_sigpipe();
        Self {
            answer: std::sync::Arc::new(std::sync::Mutex::new(Box::new(answer))),
            notice: std::sync::Arc::new(std::sync::Mutex::new(Box::new(|_| {}))),
            threads: std::sync::Arc::default(),
            starts: std::sync::Arc::new(AtomicUsize::new(starts)),
        }
    }

    /// Shows every notification the server receives (a line with a `method` and no `id`)
    /// to `notice`.
    #[must_use]
    pub fn with_notices(self, notice: impl FnMut(&Map<String, Value>) + Send + 'static) -> Self {
        *self
            .notice
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Box::new(notice);
        self
    }

    /// The server, as the client or the gate starts it.
    #[must_use]
    pub fn server(&self, name: &str) -> rpr::mcp::InProcessServer {
        let notice = std::sync::Arc::clone(&self.notice);
        let (answer, threads, starts) = (
            std::sync::Arc::clone(&self.answer),
            std::sync::Arc::clone(&self.threads),
            std::sync::Arc::clone(&self.starts),
        );
        rpr::mcp::InProcessServer::new(name, move || {
            if starts
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_err()
            {
                return Err(std::io::Error::other(
                    "the scripted server's starts are used up",
                ));
            }
            let (requests_in, requests_out) = std::io::pipe()?;
            let (replies_in, mut replies_out) = std::io::pipe()?;
            let answer = std::sync::Arc::clone(&answer);
            let notice = std::sync::Arc::clone(&notice);
            let thread = std::thread::Builder::new()
                .name("fuzz-server".into())
                .spawn(move || {
                    let mut written = Vec::new();
                    let mut each = |request: &Map<String, Value>| {
                        let mut answer = answer
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        answer(request)
                    };
                    let mut noticed = |request: &Map<String, Value>| {
                        (notice
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner))(
                            request
                        );
                    };
                    answer_requests(
                        requests_in,
                        &mut replies_out,
                        &mut each,
                        &mut noticed,
                        &mut written,
                    );
                    written
                })?;
            threads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(thread);
            Ok((Box::new(replies_in), Box::new(requests_out)))
        })
    }

    /// Once the client is done (its sessions shut down, so each server thread reads the end
    /// of its requests): waits for the server threads, in the order they started, and
    /// returns everything they wrote. A thread still running after 10 s (a session never
    /// shut down) is left behind, and what it wrote is missing.
    #[must_use]
    pub fn finish(self) -> Vec<u8> {
        let threads: Vec<_> = self
            .threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .drain(..)
            .collect();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut written = Vec::new();
        for thread in threads {
            while !thread.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_micros(100));
            }
            if thread.is_finished()
                && let Ok(w) = thread.join()
            {
                written.extend_from_slice(&w);
            }
        }
        written
    }
}

/// `haystack` with every `from` replaced by `to`.
#[must_use]
pub fn replace(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
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

/// The chunks of a server script, separated by `%%\n`.
#[must_use]
pub fn split_chunks(input: &[u8]) -> Vec<&[u8]> {
    let mut chunks = Vec::new();
    let mut rest = input;
    while let Some(at) = rest.windows(3).position(|w| w == b"%%\n") {
        chunks.push(&rest[..at]);
        rest = &rest[at + 3..];
    }
    chunks.push(rest);
    chunks
}
