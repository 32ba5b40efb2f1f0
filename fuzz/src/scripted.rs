//! A scripted MCP server whose every reply comes from the input, for the targets that
//! drive rpr's MCP client (`mcp_client`, and the gate's server side in `gate`).
//!
//! A bare session runs over in-process pipes (`rpr::mcp::Session::over_streams`), its
//! server a thread of the fuzz process ([`serve_streams`]). `McpClient` and the gate start
//! their server as a child process (they take a `ServerCommand` only): the child here is a
//! shell that claims a free pair of named pipes and runs `cat OUT & exec cat >REQ` on them,
//! and a thread of the fuzz process is the server behind them ([`serve`]). A client that finds the connection broken (or a gate that stops a
//! server after a timeout or garbage) starts a second process, which takes the next pair.
//! For each request line the client writes, the server writes a chunk of the input (the
//! next, or one the target picks for the request; `"$id"` in it replaced by the request's
//! id), then a newline and a closing error
//! reply for that id (`-32601`), so that a request the chunk left unanswered ends at once
//! instead of at its timeout. Nothing is written but in answer to a request, so a run does
//! not depend on timing.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use rpr::mcp::ServerCommand;
use serde_json::{Map, Value};

/// The named pipes of the scripted server: `pairs` pairs, one for each server process of
/// a run, in a scratch directory of this process.
pub struct Pipes {
    dir: PathBuf,
    pairs: usize,
}

impl Pipes {
    /// Makes `pairs` pairs of named pipes in a new scratch directory named after `tag`.
    /// Also makes a write to a pipe whose reader is gone fail with EPIPE rather than kill
    /// the process, as in any Rust program (libFuzzer's `main` is not Rust's, which sets
    /// this).
    ///
    /// # Panics
    ///
    /// A pipe cannot be made.
    #[must_use]
    pub fn create(tag: &str, pairs: usize) -> Self {
        // SAFETY: sets the disposition of one signal to "ignore".
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let pipes = Self {
            dir: crate::stories::scratch(tag),
            pairs,
        };
        for pair in 0..pairs {
            for path in [pipes.requests(pair), pipes.replies(pair)] {
                let c =
                    std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("a path");
                // SAFETY: mkfifo on a NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
            }
        }
        pipes
    }

    /// The scratch directory the pipes are in (a run may keep other files there).
    #[must_use]
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    fn requests(&self, pair: usize) -> PathBuf {
        self.dir.join(format!("req{pair}"))
    }

    fn replies(&self, pair: usize) -> PathBuf {
        self.dir.join(format!("out{pair}"))
    }

    /// Frees every pair for the next run.
    pub fn reset(&self) {
        for pair in 0..self.pairs {
            let _ = std::fs::remove_file(self.dir.join(format!("claim{pair}")));
        }
    }

    /// The server process: claims the first free pair (a file made with `noclobber`, which
    /// only one process can create), copies the pair's replies pipe to its stdout and its
    /// stdin to the pair's requests pipe; exits 1 when every pair is taken. The claim is
    /// made in a subshell: a redirection that fails on `:`, a special built-in, ends a
    /// POSIX shell (dash exits 2), so a claim tried in the shell itself would never get
    /// past a taken pair.
    #[must_use]
    pub fn command(&self) -> ServerCommand {
        let pairs: Vec<String> = (0..self.pairs).map(|p| p.to_string()).collect();
        ServerCommand::new("/bin/sh")
            .arg("-c")
            .arg(format!(
                "set -C; for i in {}; do if ( : >\"$0/claim$i\" ) 2>/dev/null; then \
                 cat \"$0/out$i\" & exec cat >\"$0/req$i\"; fi; done; exit 1",
                pairs.join(" ")
            ))
            .arg(&self.dir)
    }
}

/// Where [`serve`] is: the pair it serves (or waits to open), and whether the client side
/// is done. Shared with [`Progress::release`].
#[derive(Default)]
pub struct Progress {
    at: AtomicUsize,
    done: AtomicBool,
}

/// The server: for each server process in turn (each pair), answers each request line
/// (a JSON object with an `id` and a `method`) with the chunk `answer` gives for it
/// (`"$id"` in it replaced by the request's id) and a closing error reply, until
/// [`Progress::release`]. Returns everything it wrote.
///
/// # Panics
///
/// A pipe cannot be opened.
pub fn serve(
    p: &Pipes,
    progress: &Progress,
    mut answer: impl FnMut(&Map<String, Value>) -> Vec<u8>,
) -> Vec<u8> {
    let mut written = Vec::new();
    for pair in 0..p.pairs {
        progress.at.store(pair, Ordering::SeqCst);
        let requests = std::fs::File::open(p.requests(pair)).expect("a requests pipe");
        if progress.done.load(Ordering::SeqCst) {
            break;
        }
        let mut replies = std::fs::OpenOptions::new()
            .write(true)
            .open(p.replies(pair))
            .expect("a replies pipe");
        answer_requests(requests, &mut replies, &mut answer, &mut written);
    }
    progress.at.store(p.pairs, Ordering::SeqCst);
    written
}

/// The server of one connection over a reader and a writer of this process (for a
/// session over streams, `rpr::mcp::Session::over_streams`): answers each request line
/// read from `requests` as [`serve`] does, until the end of `requests` or a failed write;
/// then drops `replies` (the session reads the end of its input). Returns everything it
/// wrote.
pub fn serve_streams(
    requests: impl Read,
    mut replies: impl Write,
    mut answer: impl FnMut(&Map<String, Value>) -> Vec<u8>,
) -> Vec<u8> {
    let mut written = Vec::new();
    answer_requests(requests, &mut replies, &mut answer, &mut written);
    written
}

/// Answers each request line of `requests` (a JSON object with an `id` and a `method`)
/// with the chunk `answer` gives (`"$id"` in it replaced by the request's id), a newline
/// and a closing error reply, appending what it wrote to `written`; until the end of
/// `requests` or a failed write.
fn answer_requests(
    requests: impl Read,
    replies: &mut impl Write,
    answer: &mut impl FnMut(&Map<String, Value>) -> Vec<u8>,
    written: &mut Vec<u8>,
) {
    for line in BufReader::new(requests).split(b'\n') {
        let Ok(line) = line else { break };
        let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let (Some(id), true) = (request.get("id"), request.contains_key("method")) else {
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

impl Progress {
    /// Ends [`serve`] once the client is done: it waits to open the requests pipe of the
    /// next pair, and is let through by this open (which succeeds only once it waits there).
    pub fn release(&self, p: &Pipes) {
        use std::os::unix::fs::OpenOptionsExt;
        self.done.store(true, Ordering::SeqCst);
        loop {
            let pair = self.at.load(Ordering::SeqCst);
            if pair >= p.pairs {
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
