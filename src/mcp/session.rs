//! A JSON-RPC client session over the stdio transport, or over a reader and a writer the
//! caller gives ([`Session::over_streams`]).
//!
//! Two helper threads serve one session:
//!
//! - the **writer** writes queued lines to the server's stdin (or the caller's writer)
//!   one at a time,
//!   publishing how many bytes of each got out, so a caller that gives up waiting
//!   still knows whether anything was written (a queued line that never started is
//!   withdrawn and is reported as not sent). A request whose line the server's stdin
//!   takes whole at once (the pipe is empty and the line fits; nothing queued before
//!   it) is written by its caller instead, with the same account of its bytes: one
//!   thread hand-off fewer a request;
//! - the **reader** reads the server's stdout (or the caller's reader), matches responses to pending requests
//!   by id (same JSON type), answers the server's `ping` with `{}` and any other
//!   server request with `-32601`, drops progress notifications (this client never
//!   sends a progress token, so every one is for an unknown token), and hands other
//!   notifications to the sink, at any time, even before the `initialize` reply.
//!
//! Because the reader never waits for the writer, a server that floods stdout while
//! not reading stdin cannot deadlock the session.

use std::io::{BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::McpError;
use super::era;
use super::transport::{
    ServerCommand, ShutdownReport, ShutdownStage, Transport, ended_briefly, join_briefly,
};
use crate::jsonrpc::{
    Id, Message, MessageReader, MessageWriter, Notification, Request, encode_line,
};

mod config;
mod reader;
pub(crate) mod writer;

pub use config::{
    NotificationCallback, Reply, RequestCallback, SendGuard, SessionConfig, SessionStats,
};
pub use reader::Responder;
use reader::{Incoming, Shared, State, reader_loop};
use writer::{Lines, Pipe, Sink, Stream, Ticket, TicketWait, WriteJob, writer_loop};

/// Requests a timeout never cancels: `initialize` (the spec forbids it) and the
/// `server/discover` probe (sent before the era is known; a legacy server may not take a
/// notification before `initialize`).
const NEVER_CANCELLED: [&str; 2] = ["initialize", "server/discover"];

/// What closes a session whose server is a child process, when its stdout ends.
const PROCESS_EOF: &str = "the server closed its stdout (it exited or crashed)";

/// What closes a session over streams when its reader ends. Nothing is known of why: the
/// other end may have closed its side, or ended, or the stream may have been cut.
const STREAMS_EOF: &str = "the server's stream ended (end of input on the session's reader)";

/// A JSON-RPC client session with one server: a child process ([`Session::start`]) or a
/// pair of streams the caller gives ([`Session::over_streams`]).
///
/// Requests may be made from several threads at once. Dropping the session runs its
/// shutdown ([`Session::shutdown`]): for a child process, it closes the server's stdin and
/// runs the transport's shutdown ladder.
#[derive(Debug)]
pub struct Session {
    shared: Arc<Shared>,
    writer: Lines,
    link: Link,
    threads: Mutex<Vec<JoinHandle<()>>>,
    max_message_bytes: usize,
    request_timeout: Duration,
}

/// What is at the other end of a session.
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one per session, held in place; boxing the transport would only add an allocation"
)]
enum Link {
    /// A server child process, started by [`Session::start`].
    Process {
        transport: Mutex<Transport>,
        pid: u32,
    },
    /// Streams given by the caller ([`Session::over_streams`]): no process this session
    /// knows of. The report of its first shutdown, kept for later calls.
    Streams {
        report: Mutex<Option<ShutdownReport>>,
    },
}

/// The threads of a session and the state they share, started over a reader and a
/// writer.
struct Threads {
    shared: Arc<Shared>,
    writer: Lines,
    handles: Vec<JoinHandle<()>>,
}

impl Session {
    /// Starts the server and the session's threads. No MCP message is sent yet.
    pub fn start(command: &ServerCommand, config: &SessionConfig) -> Result<Self, McpError> {
        let mut transport = Transport::spawn(command, config.transport.clone())?;
        let (Some(stdin), Some(stdout)) = (transport.take_stdin(), transport.take_stdout()) else {
            let source = std::io::Error::other("the child's stdin or stdout pipe is missing");
            return Err(McpError::Spawn {
                program: command.program().to_string_lossy().into_owned(),
                source,
            });
        };
        // On an error `transport` drops here and runs the shutdown ladder.
        let stdin = Pipe::new(MessageWriter::with_max_message_bytes(
            stdin,
            config.max_message_bytes,
        ));
        let threads = Self::threads(stdout, Box::new(stdin), config, PROCESS_EOF)?;
        Ok(Self {
            shared: threads.shared,
            writer: threads.writer,
            link: Link::Process {
                pid: transport.pid(),
                transport: Mutex::new(transport),
            },
            threads: Mutex::new(threads.handles),
            max_message_bytes: config.max_message_bytes,
            request_timeout: config.request_timeout,
        })
    }

    /// A session over a reader and a writer the caller gives, with no child process: the
    /// server's messages are read from `reader` and the client's written to `writer`
    /// (newline-delimited JSON-RPC, as over stdio). Everything between the bytes and the
    /// caller is the same as for [`Session::start`]: correlation by id, the message limit,
    /// timeouts and `notifications/cancelled`, the server's requests and notifications. No
    /// MCP message is sent yet.
    ///
    /// It is for a server that lives in the same process (a test's or a fuzz target's
    /// scripted server on a thread, over pipes) or behind a connection the caller set up.
    /// There is no process, so the session cannot say anything a process would prove:
    /// [`Session::server_pid`] is `None` ([`Session::pid`] panics),
    /// [`Session::stderr_tail`] is empty, and [`Session::shutdown`] closes the writer and
    /// stops the reader but reports [`ShutdownStage::NoProcess`] with no exit status:
    /// whether the other end has stopped, or still acts on what it was sent, is unknown.
    /// For the same reason [`McpClient`](super::McpClient), its executor and the gate
    /// take a [`ServerCommand`] only: they reason from the server's process being gone
    /// (a call is no longer carried once its carrier is reaped), which a stream cannot
    /// show.
    ///
    /// [`SessionConfig::transport`] is not used (it is about a process).
    pub fn over_streams(
        reader: impl Read + Send + 'static,
        writer: impl Write + Send + 'static,
        config: &SessionConfig,
    ) -> Result<Self, McpError> {
        let writer = Stream(MessageWriter::with_max_message_bytes(
            writer,
            config.max_message_bytes,
        ));
        let threads = Self::threads(reader, Box::new(writer), config, STREAMS_EOF)?;
        Ok(Self {
            shared: threads.shared,
            writer: threads.writer,
            link: Link::Streams {
                report: Mutex::new(None),
            },
            threads: Mutex::new(threads.handles),
            max_message_bytes: config.max_message_bytes,
            request_timeout: config.request_timeout,
        })
    }

    /// Starts the writer thread on `output` and the reader thread on `input` (in that
    /// order).
    fn threads<R>(
        input: R,
        output: Box<dyn Sink>,
        config: &SessionConfig,
        eof_reason: &'static str,
    ) -> Result<Threads, McpError>
    where
        R: Read + Send + 'static,
    {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            queue_capacity: config.notification_queue,
            on_notification: config.on_notification.clone(),
            on_request: config.on_request.clone(),
            pass_progress: config.pass_progress,
            eof_reason,
            stop: AtomicBool::new(false),
        });
        let (writer, jobs, outlet) = Lines::new(output);
        let max = config.max_message_bytes;
        let writer_thread = std::thread::Builder::new()
            .name("rpr-mcp-writer".into())
            .spawn(move || writer_loop(&outlet, &jobs));
        let reader_shared = Arc::clone(&shared);
        let reply_writer = writer.clone();
        let reader_thread = std::thread::Builder::new()
            .name("rpr-mcp-reader".into())
            .spawn(move || {
                reader_loop(
                    MessageReader::with_max_message_bytes(BufReader::new(input), max)
                        .replies_only(),
                    &reader_shared,
                    &reply_writer,
                    max,
                );
            });
        let mut handles = Vec::new();
        for thread in [writer_thread, reader_thread] {
            match thread {
                Ok(handle) => handles.push(handle),
                Err(source) => {
                    return Err(McpError::Spawn {
                        program: "session thread".into(),
                        source,
                    });
                }
            }
        }
        Ok(Threads {
            shared,
            writer,
            handles,
        })
    }

    /// Sends a request and waits up to `timeout` (from now) for its reply.
    ///
    /// On timeout a `notifications/cancelled` is sent (except for `initialize`, which
    /// must never be cancelled, and the `server/discover` probe, which a legacy server
    /// does not know) and a reply arriving later is dropped. Once the client settled on
    /// protocol 2026-07-28, every request's `params._meta` carries the protocol version,
    /// the client's capabilities and its name (merged with what the caller put there; an
    /// `io.modelcontextprotocol/clientCapabilities` object the caller put there is kept,
    /// so that a proxy can declare its own client's capabilities for one request).
    pub fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Reply, McpError> {
        self.request_tagged(method, params, timeout, None)
    }

    /// [`Session::request`], known by `tag` while it waits, so that
    /// [`Session::cancel_tagged`] can cancel it (a proxy tags a request with its own
    /// client's request id).
    pub fn request_tagged(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        tag: Option<&str>,
    ) -> Result<Reply, McpError> {
        self.request_guarded(method, params, timeout, tag, None)
    }

    /// [`Session::request_tagged`], withdrawn before one byte of it is written when
    /// `guard` gives a reason ([`SendGuard`]): the guard is asked under the lock that
    /// [`Session::cancel_tagged`] takes, in the same step that makes the request known by
    /// `tag` and queues its line. A request the guard withdraws is
    /// [`McpError::NotSent`].
    pub fn request_guarded(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        tag: Option<&str>,
        guard: Option<&SendGuard>,
    ) -> Result<Reply, McpError> {
        let result = self.request_inner(method, params, timeout, tag, guard);
        if let Some(tag) = tag {
            let mut state = self.shared.lock();
            if let Some(id) = state.tags.remove(tag) {
                // Cancelled, then answered: the cancellation is forgotten with the tag.
                state.cancelled.remove(&id);
            }
        }
        result
    }

    /// Sends `notifications/cancelled` for the request waiting under `tag`; returns
    /// whether there was one. The request still waits for its reply (a server may answer
    /// anyway) until its timeout; without one it ends [`McpError::Cancelled`] (with
    /// `reason`), and no second cancellation is sent. The notification is queued after
    /// the request's own line.
    pub fn cancel_tagged(&self, tag: &str, reason: &str) -> bool {
        let id = {
            let mut state = self.shared.lock();
            let Some(id) = state.tags.get(tag).cloned() else {
                return false;
            };
            state.cancelled.insert(id.clone(), reason.to_owned());
            id
        };
        let params = json!({"requestId": id.to_value(), "reason": reason});
        self.notify("notifications/cancelled", Some(params)).is_ok()
    }

    // `request_guarded` wraps this body so that the tag is dropped on every return.
    fn request_inner(
        &self,
        method: &str,
        mut params: Option<Value>,
        timeout: Duration,
        tag: Option<&str>,
        guard: Option<&SendGuard>,
    ) -> Result<Reply, McpError> {
        let deadline = Instant::now() + timeout;
        let not_sent = |reason: String| McpError::NotSent {
            method: method.to_owned(),
            reason,
        };
        let id = {
            let mut state = self.shared.lock();
            if let Some(reason) = &state.closed {
                return Err(not_sent(format!("the session is closed ({reason})")));
            }
            state.next_id += 1;
            if let Some(envelope) = &state.envelope {
                params = Some(era::with_envelope(params, envelope));
            }
            Id::Number(state.next_id)
        };
        let request = Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        };
        let line = encode_line(
            &Message::Request(request).to_value(),
            self.max_message_bytes,
        )
        .map_err(|e| not_sent(e.to_string()))?;
        let total = line.len();
        let (tx, replies) = mpsc::channel();
        let ticket = Arc::new(Ticket::new(Some(tx.clone())));
        {
            // One step: the guard asked, the request made known (by id and tag) and its line
            // queued. A cancellation (cancel_tagged, under this lock) either comes before
            // it, and the guard sees it, or finds the tag, and its notification is queued
            // after this line.
            let mut state = self.shared.lock();
            if let Some(reason) = &state.closed {
                return Err(not_sent(format!("the session is closed ({reason})")));
            }
            if let Some(reason) = guard.and_then(SendGuard::withdrawn) {
                return Err(not_sent(format!(
                    "withdrawn before any byte of it was written: {reason}"
                )));
            }
            if let Err(line) = self.writer.write_now(line, &ticket) {
                let job = WriteJob::Line {
                    line,
                    ticket: Some(Arc::clone(&ticket)),
                };
                if self.writer.queue(job).is_err() {
                    return Err(not_sent("the session's writer has stopped".into()));
                }
            }
            state.pending.insert(id.clone(), tx);
            if let Some(tag) = tag {
                state.tags.insert(tag.to_owned(), id.clone());
            }
        }
        let waiting = Waiting {
            id: &id,
            method,
            ticket: &ticket,
            timeout,
            deadline,
            total,
        };
        self.await_reply(&waiting, &replies)
    }

    /// Waits until the request's queued line is written, failed, withdrawn or stalled at
    /// the deadline.
    fn written(
        method: &str,
        ticket: &Ticket,
        total: usize,
        timeout: Duration,
        deadline: Instant,
    ) -> Result<(), McpError> {
        let method = method.to_owned();
        match ticket.wait(deadline) {
            TicketWait::Written => Ok(()),
            TicketWait::Failed { written: 0, reason } => Err(McpError::NotSent { method, reason }),
            TicketWait::Failed { written, reason } => Err(McpError::WriteFailed {
                method,
                written,
                total,
                reason,
            }),
            TicketWait::Withdrawn => Err(McpError::NotSent {
                method,
                reason: format!(
                    "the server did not take input within {timeout:?}; the request was withdrawn \
                     before any byte of it was written"
                ),
            }),
            TicketWait::Stalled { written } => Err(McpError::TimedOut {
                method,
                timeout,
                written,
                total,
            }),
        }
    }

    /// Waits for the reply to a queued request: the one wait of a request. Anything else
    /// (the line failed, the connection was lost, the deadline passed) is first judged by
    /// how far the line got ([`Session::written`]): a line not written whole was not sent,
    /// or was cut, whatever else happened. A written request whose deadline passed is
    /// withdrawn and `notifications/cancelled` is sent (never for `initialize`).
    fn await_reply(
        &self,
        w: &Waiting<'_>,
        replies: &mpsc::Receiver<Incoming>,
    ) -> Result<Reply, McpError> {
        let lost = |reason: String| McpError::ConnectionLost {
            method: w.method.to_owned(),
            reason,
        };
        // `Some` when the line was not written whole (its pending entry is dropped).
        let unwritten = || {
            Self::written(w.method, w.ticket, w.total, w.timeout, w.deadline)
                .err()
                .inspect(|_| {
                    self.shared.lock().pending.remove(w.id);
                })
        };
        let incoming =
            match replies.recv_timeout(w.deadline.saturating_duration_since(Instant::now())) {
                Ok(incoming) => incoming,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(
                        unwritten().unwrap_or_else(|| lost("the session's reader stopped".into()))
                    );
                }
                Err(RecvTimeoutError::Timeout) => {
                    if let Some(e) = unwritten() {
                        return Err(e);
                    }
                    let (still_pending, cancelled) = {
                        let mut state = self.shared.lock();
                        (
                            state.pending.remove(w.id).is_some(),
                            state.cancelled.remove(w.id),
                        )
                    };
                    if still_pending {
                        if let Some(reason) = cancelled {
                            // Cancelled once already (cancel_tagged): not again.
                            return Err(McpError::Cancelled {
                                method: w.method.to_owned(),
                                reason,
                                timeout: w.timeout,
                            });
                        }
                        if !NEVER_CANCELLED.contains(&w.method) {
                            let params = json!({"requestId": w.id.to_value(), "reason": "timeout"});
                            let _ = self.notify("notifications/cancelled", Some(params));
                        }
                        return Err(McpError::TimedOut {
                            method: w.method.to_owned(),
                            timeout: w.timeout,
                            written: w.total,
                            total: w.total,
                        });
                    }
                    // The reply raced the timeout and won: it is already in the channel.
                    replies
                        .try_recv()
                        .map_err(|_| lost("the session's reader stopped".into()))?
                }
            };
        match incoming {
            Incoming::Reply(reply) => Ok(reply),
            Incoming::Lost(reason) => Err(unwritten().unwrap_or_else(|| lost(reason))),
            Incoming::Unwritten => {
                Err(unwritten().unwrap_or_else(|| lost("the request's line failed".into())))
            }
        }
    }

    /// Records the protocol version the lifecycle settled on and, for 2026-07-28, the
    /// `_meta` envelope every later request carries.
    pub(crate) fn settle(&self, version: &str, envelope: Option<serde_json::Map<String, Value>>) {
        let mut state = self.shared.lock();
        state.version = Some(version.to_owned());
        state.envelope = envelope;
    }

    /// Hands a request the server asked the client inside a result (a 2026-07-28
    /// `inputRequests` entry) to [`SessionConfig::on_request`], as if the server had sent
    /// it, and waits up to `timeout` for the answer. `Err` says why there is none.
    pub(crate) fn ask_client(
        &self,
        request: Request,
        timeout: Duration,
    ) -> Result<Result<Value, crate::jsonrpc::ErrorObject>, String> {
        if self.shared.on_request.is_none() {
            return Err(
                "this client has no handler for the server's requests (SessionConfig::on_request)"
                    .into(),
            );
        }
        let (tx, rx) = mpsc::channel();
        let method = request.method.clone();
        let responder = reader::Responder::to_client(request.id.clone(), tx);
        self.shared.hand_on(request, responder);
        rx.recv_timeout(timeout).map_err(|e| match e {
            RecvTimeoutError::Timeout => format!("no answer to `{method}` within {timeout:?}"),
            RecvTimeoutError::Disconnected => format!("`{method}` was dropped unanswered"),
        })
    }

    /// Sends a request with the session's default timeout.
    pub fn request_default(&self, method: &str, params: Option<Value>) -> Result<Reply, McpError> {
        self.request(method, params, self.request_timeout)
    }

    /// Queues a notification. It is written in order with requests; write failures
    /// are not reported (a notification has no reply to wait for).
    pub fn notify(&self, method: &str, params: Option<Value>) -> Result<(), McpError> {
        let not_sent = |reason: String| McpError::NotSent {
            method: method.to_owned(),
            reason,
        };
        if let Some(reason) = &self.shared.lock().closed {
            return Err(not_sent(format!("the session is closed ({reason})")));
        }
        let message = Message::Notification(Notification {
            method: method.to_owned(),
            params,
        });
        let line = encode_line(&message.to_value(), self.max_message_bytes)
            .map_err(|e| not_sent(e.to_string()))?;
        self.writer
            .queue(WriteJob::Line { line, ticket: None })
            .map_err(|()| not_sent("the session's writer has stopped".into()))
    }

    /// Takes every queued notification, oldest first.
    pub fn take_notifications(&self) -> Vec<Notification> {
        self.shared.lock().notifications.drain(..).collect()
    }

    /// Counters of dropped and automatically answered messages.
    #[must_use]
    pub fn stats(&self) -> SessionStats {
        self.shared.lock().stats.clone()
    }

    /// The most recent protocol problems (unreadable lines, dropped responses), newest last.
    #[must_use]
    pub fn recent_protocol_errors(&self) -> Vec<String> {
        self.shared.lock().recent_errors.iter().cloned().collect()
    }

    /// Why the session is closed, if it is (EOF on stdout, read failure, shutdown).
    #[must_use]
    pub fn closed_reason(&self) -> Option<String> {
        self.shared.lock().closed.clone()
    }

    /// The server's process id (also its process group id).
    ///
    /// # Panics
    ///
    /// On a session over streams ([`Session::over_streams`]), which has no server
    /// process: no number would be true there (`0`, or this process's own id, would name
    /// a process group the caller might signal). [`Session::server_pid`] answers for both.
    #[must_use]
    pub fn pid(&self) -> u32 {
        match &self.link {
            Link::Process { pid, .. } => *pid,
            Link::Streams { .. } => {
                panic!("a session over streams has no server process (Session::server_pid)")
            }
        }
    }

    /// The server's process id (also its process group id), or `None` for a session over
    /// streams ([`Session::over_streams`]), which has no server process.
    #[must_use]
    pub fn server_pid(&self) -> Option<u32> {
        match &self.link {
            Link::Process { pid, .. } => Some(*pid),
            Link::Streams { .. } => None,
        }
    }

    /// Whether the shutdown ladder has run and reaped the server, leaving no process of
    /// it. Never for a session over streams: nothing shows its other end gone.
    pub(crate) fn server_reaped(&self) -> bool {
        match &self.link {
            Link::Process { transport, .. } => lock(transport).reaped(),
            Link::Streams { .. } => false,
        }
    }

    /// The cgroup that holds every process of the server, if it runs in one (never for a
    /// session over streams).
    pub(crate) fn server_cgroup(&self) -> Option<crate::executor::CarrierCgroup> {
        match &self.link {
            Link::Process { transport, .. } => lock(transport).cgroup(),
            Link::Streams { .. } => None,
        }
    }

    /// The last bytes the server wrote to stderr. Empty for a session over streams, which
    /// has no stderr.
    #[must_use]
    pub fn stderr_tail(&self) -> String {
        match &self.link {
            Link::Process { transport, .. } => lock(transport).stderr_tail(),
            Link::Streams { .. } => String::new(),
        }
    }

    /// Ends the session; pending requests fail with [`McpError::ConnectionLost`]. Later
    /// calls return the same report.
    ///
    /// For a child process: closes the server's stdin and runs the shutdown ladder (see
    /// [`Transport::shutdown`]).
    ///
    /// For a session over streams: closes the writer (the writer thread writes the lines
    /// already queued, then drops it), closes the session, and tells the reader to stop
    /// (it drops anything it reads from then on). Each thread is waited for up to a
    /// second; one still blocked in a write or a read of the caller's stream is left
    /// detached, and ends when that call returns. The report says which ended
    /// ([`ShutdownStage::NoProcess`]) and has no exit status.
    pub fn shutdown(&self) -> ShutdownReport {
        match &self.link {
            Link::Process { transport, .. } => {
                let _ = self.writer.queue(WriteJob::Close);
                let report = lock(transport).shutdown();
                self.shared.close("the session was shut down");
                let threads: Vec<_> = lock(&self.threads).drain(..).collect();
                for handle in threads {
                    join_briefly(handle);
                }
                report
            }
            Link::Streams { report } => {
                let mut report = lock(report);
                if let Some(report) = &*report {
                    return report.clone();
                }
                let start = Instant::now();
                let _ = self.writer.queue(WriteJob::Close);
                // [writer, reader], as started.
                let threads: Vec<_> = lock(&self.threads).drain(..).collect();
                let mut handles = threads.into_iter();
                let writer_closed = handles.next().is_none_or(ended_briefly);
                self.shared.stop.store(true, Ordering::SeqCst);
                self.shared.close("the session was shut down");
                let reader_stopped = handles.next().is_none_or(ended_briefly);
                let done = ShutdownReport {
                    stage: ShutdownStage::NoProcess {
                        writer_closed,
                        reader_stopped,
                    },
                    status: None,
                    elapsed: start.elapsed(),
                };
                *report = Some(done.clone());
                done
            }
        }
    }
}

/// Locks a mutex of the session, through a poisoning (every state it guards stays
/// consistent across a panic).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Drop for Session {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A request queued and waiting for its reply ([`Session::await_reply`]).
struct Waiting<'a> {
    id: &'a Id,
    method: &'a str,
    ticket: &'a Ticket,
    timeout: Duration,
    deadline: Instant,
    /// The line's length in bytes.
    total: usize,
}
