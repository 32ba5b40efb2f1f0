//! A JSON-RPC client session over the stdio transport.
//!
//! Two helper threads serve one session:
//!
//! - the **writer** owns the server's stdin and writes queued lines one at a time,
//!   publishing how many bytes of each got out, so a caller that gives up waiting
//!   still knows whether anything was written (a queued line that never started is
//!   withdrawn and is reported as not sent);
//! - the **reader** reads the server's stdout, matches responses to pending requests
//!   by id (same JSON type), answers the server's `ping` with `{}` and any other
//!   server request with `-32601`, drops progress notifications (this client never
//!   sends a progress token, so every one is for an unknown token), and hands other
//!   notifications to the sink, at any time, even before the `initialize` reply.
//!
//! Because the reader never waits for the writer, a server that floods stdout while
//! not reading stdin cannot deadlock the session.

use std::collections::{HashMap, VecDeque};
use std::io::BufReader;
use std::process::{ChildStdin, ChildStdout};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::transport::{ServerCommand, ShutdownReport, Transport, TransportConfig, join_briefly};
use super::{McpError, PROTOCOL_VERSION};
use crate::jsonrpc::{
    DEFAULT_MAX_MESSAGE_BYTES, ErrorObject, Id, JsonRpcError, Message, MessageReader,
    MessageWriter, Notification, Request, Response, codes, encode_line,
};

/// A callback that receives server notifications on the session's reader thread.
///
/// It must return quickly and must not wait for a reply from the same session (the
/// reply would be read by the thread that is running the callback). A panic in it is
/// caught and counted as a protocol error.
pub type NotificationCallback = Arc<dyn Fn(&Notification) + Send + Sync>;

/// A callback that receives the server's requests to the client (sampling, roots,
/// elicitation) on the session's reader thread, with the [`Responder`] that answers it.
///
/// It must return quickly: answer later, from another thread, through the responder
/// (a proxy forwards the request to its own client and answers when that one does).
/// `ping` is always answered by the session itself. A panic in it is caught, counted as
/// a protocol error, and the request is answered with an internal error.
pub type RequestCallback = Arc<dyn Fn(Request, Responder) + Send + Sync>;

/// Answers one server request; see [`RequestCallback`]. Dropped without an answer, it
/// answers with an internal error, so the server is never left waiting for a reply that
/// cannot come.
#[derive(Debug)]
pub struct Responder {
    id: Option<Id>,
    writer: Sender<WriteJob>,
    max: usize,
}

impl Responder {
    /// The id of the request this answers.
    #[must_use]
    pub fn id(&self) -> Option<&Id> {
        self.id.as_ref()
    }

    /// Sends the answer: a result or an error object.
    pub fn respond(mut self, outcome: Result<Value, ErrorObject>) {
        self.send(outcome);
    }

    fn send(&mut self, outcome: Result<Value, ErrorObject>) {
        let Some(id) = self.id.take() else { return };
        let response = Message::Response(Response {
            id: Some(id),
            outcome,
        });
        if let Ok(line) = encode_line(&response.to_value(), self.max) {
            let _ = self.writer.send(WriteJob::Line { line, ticket: None });
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.send(Err(ErrorObject::new(
            codes::INTERNAL_ERROR,
            "the client dropped this request without an answer",
        )));
    }
}

/// Settings of a session and of the MCP client built on it.
#[derive(Clone)]
#[non_exhaustive]
pub struct SessionConfig {
    /// Cap on one message in either direction, in bytes (default
    /// [`DEFAULT_MAX_MESSAGE_BYTES`], 16 MiB).
    pub max_message_bytes: usize,
    /// Default time a request may take, from queueing to reply (default 30 s).
    pub request_timeout: Duration,
    /// Process settings: shutdown waits and stderr capacity.
    pub transport: TransportConfig,
    /// Protocol versions accepted in the `initialize` reply (default: only
    /// [`PROTOCOL_VERSION`]).
    pub accepted_versions: Vec<String>,
    /// Most `tools/list` pages fetched before giving up (default 100).
    pub max_tool_pages: usize,
    /// Capacity of the notification queue; the oldest entry is dropped when it is full
    /// (default 256). Unused when [`SessionConfig::on_notification`] is set.
    pub notification_queue: usize,
    /// Receives notifications instead of the queue, when set.
    pub on_notification: Option<NotificationCallback>,
    /// Receives the server's requests to the client, when set; without it every server
    /// request but `ping` is answered with `-32601` (method not found).
    pub on_request: Option<RequestCallback>,
    /// Hands `notifications/progress` to the sink like any other notification, instead of
    /// dropping them (default false: a client that never sends a progress token has no use
    /// for them; a proxy that passes its client's token on does).
    pub pass_progress: bool,
    /// The `capabilities` this client declares in `initialize` (default `{}`: none). Declare
    /// only what [`SessionConfig::on_request`] really serves.
    pub client_capabilities: Value,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            request_timeout: Duration::from_secs(30),
            transport: TransportConfig::default(),
            accepted_versions: vec![PROTOCOL_VERSION.to_owned()],
            max_tool_pages: 100,
            notification_queue: 256,
            on_notification: None,
            on_request: None,
            pass_progress: false,
            client_capabilities: json!({}),
        }
    }
}

impl std::fmt::Debug for SessionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionConfig")
            .field("max_message_bytes", &self.max_message_bytes)
            .field("request_timeout", &self.request_timeout)
            .field("transport", &self.transport)
            .field("accepted_versions", &self.accepted_versions)
            .field("max_tool_pages", &self.max_tool_pages)
            .field("notification_queue", &self.notification_queue)
            .field(
                "on_notification",
                &self.on_notification.as_ref().map(|_| "callback"),
            )
            .field("on_request", &self.on_request.as_ref().map(|_| "callback"))
            .field("pass_progress", &self.pass_progress)
            .field("client_capabilities", &self.client_capabilities)
            .finish()
    }
}

/// The server's answer to a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A success response: the `result` member.
    Result(Value),
    /// An error response: the `error` member.
    Error(ErrorObject),
}

/// Counters of what the session dropped or answered on its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionStats {
    /// Responses whose id matched no pending request (late, duplicate or wrong id).
    pub dropped_responses: u64,
    /// Progress notifications dropped (no progress token was ever issued).
    pub dropped_progress: u64,
    /// Notifications dropped because the queue was full.
    pub dropped_notifications: u64,
    /// Lines that were not valid messages (not UTF-8, not JSON, too long, malformed).
    pub protocol_errors: u64,
    /// Server `ping` requests answered.
    pub pings_answered: u64,
    /// Other server requests answered with `-32601`.
    pub requests_refused: u64,
}

const RECENT_ERRORS: usize = 16;

/// A JSON-RPC client session with one server process.
///
/// Requests may be made from several threads at once. Dropping the session closes
/// the server's stdin and runs the transport's shutdown ladder.
#[derive(Debug)]
pub struct Session {
    shared: Arc<Shared>,
    writer: Sender<WriteJob>,
    transport: Mutex<Transport>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    max_message_bytes: usize,
    request_timeout: Duration,
    pid: u32,
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
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            queue_capacity: config.notification_queue,
            on_notification: config.on_notification.clone(),
            on_request: config.on_request.clone(),
            pass_progress: config.pass_progress,
        });
        let (writer, jobs) = mpsc::channel();
        let max = config.max_message_bytes;
        let writer_thread = std::thread::Builder::new()
            .name("rpr-mcp-writer".into())
            .spawn(move || writer_loop(MessageWriter::with_max_message_bytes(stdin, max), &jobs));
        let reader_shared = Arc::clone(&shared);
        let reply_writer = writer.clone();
        let reader_thread = std::thread::Builder::new()
            .name("rpr-mcp-reader".into())
            .spawn(move || {
                reader_loop(
                    MessageReader::with_max_message_bytes(BufReader::new(stdout), max),
                    &reader_shared,
                    &reply_writer,
                    max,
                );
            });
        let mut threads = Vec::new();
        for thread in [writer_thread, reader_thread] {
            match thread {
                Ok(handle) => threads.push(handle),
                Err(source) => {
                    // `transport` drops here and runs the shutdown ladder.
                    return Err(McpError::Spawn {
                        program: "session thread".into(),
                        source,
                    });
                }
            }
        }
        Ok(Self {
            pid: transport.pid(),
            shared,
            writer,
            transport: Mutex::new(transport),
            threads: Mutex::new(threads),
            max_message_bytes: max,
            request_timeout: config.request_timeout,
        })
    }

    /// Sends a request and waits up to `timeout` (from now) for its reply.
    ///
    /// On timeout a `notifications/cancelled` is sent (except for `initialize`, which
    /// must never be cancelled) and a reply arriving later is dropped.
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
        let result = self.request_inner(method, params, timeout, tag);
        if let Some(tag) = tag {
            self.shared.lock().tags.remove(tag);
        }
        result
    }

    /// Sends `notifications/cancelled` for the request waiting under `tag`; returns
    /// whether there was one. The request still waits for its reply (a server may answer
    /// anyway) until its timeout.
    pub fn cancel_tagged(&self, tag: &str, reason: &str) -> bool {
        let id = self.shared.lock().tags.get(tag).cloned();
        let Some(id) = id else { return false };
        let params = json!({"requestId": id.to_value(), "reason": reason});
        self.notify("notifications/cancelled", Some(params)).is_ok()
    }

    fn request_inner(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        tag: Option<&str>,
    ) -> Result<Reply, McpError> {
        let deadline = Instant::now() + timeout;
        let (id, replies) = {
            let mut state = self.shared.lock();
            if let Some(reason) = &state.closed {
                return Err(McpError::NotSent {
                    method: method.to_owned(),
                    reason: format!("the session is closed ({reason})"),
                });
            }
            state.next_id += 1;
            let id = Id::Number(state.next_id);
            let (tx, rx) = mpsc::channel();
            state.pending.insert(id.clone(), tx);
            if let Some(tag) = tag {
                state.tags.insert(tag.to_owned(), id.clone());
            }
            (id, rx)
        };
        let request = Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        };
        match self.write_request(request, timeout, deadline) {
            Ok(total) => self.await_reply(&id, method, &replies, timeout, deadline, total),
            Err(e) => {
                self.shared.lock().pending.remove(&id);
                Err(e)
            }
        }
    }

    /// Queues the request line and waits until it is written, failed, withdrawn or
    /// stalled at the deadline. Returns the line's length once fully written.
    fn write_request(
        &self,
        request: Request,
        timeout: Duration,
        deadline: Instant,
    ) -> Result<usize, McpError> {
        let method = request.method.clone();
        let not_sent = |reason: String| McpError::NotSent {
            method: method.clone(),
            reason,
        };
        let line = encode_line(
            &Message::Request(request).to_value(),
            self.max_message_bytes,
        )
        .map_err(|e| not_sent(e.to_string()))?;
        let total = line.len();
        let ticket = Arc::new(Ticket::default());
        let job = WriteJob::Line {
            line,
            ticket: Some(Arc::clone(&ticket)),
        };
        if self.writer.send(job).is_err() {
            return Err(not_sent("the session's writer has stopped".into()));
        }
        match ticket.wait(deadline) {
            TicketWait::Written => Ok(total),
            TicketWait::Failed { written: 0, reason } => Err(not_sent(reason)),
            TicketWait::Failed { written, reason } => Err(McpError::WriteFailed {
                method,
                written,
                total,
                reason,
            }),
            TicketWait::Withdrawn => Err(not_sent(format!(
                "the server did not take input within {timeout:?}; the request was withdrawn \
                 before any byte of it was written"
            ))),
            TicketWait::Stalled { written } => Err(McpError::TimedOut {
                method,
                timeout,
                written,
                total,
            }),
        }
    }

    /// Waits for the reply to a fully written request; on timeout, withdraws the id,
    /// sends `notifications/cancelled` (never for `initialize`) and reports.
    fn await_reply(
        &self,
        id: &Id,
        method: &str,
        replies: &mpsc::Receiver<Incoming>,
        timeout: Duration,
        deadline: Instant,
        total: usize,
    ) -> Result<Reply, McpError> {
        let lost = |reason: String| McpError::ConnectionLost {
            method: method.to_owned(),
            reason,
        };
        let incoming =
            match replies.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(incoming) => incoming,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(lost("the session's reader stopped".into()));
                }
                Err(RecvTimeoutError::Timeout) => {
                    let still_pending = self.shared.lock().pending.remove(id).is_some();
                    if still_pending {
                        if method != "initialize" {
                            let params = json!({"requestId": id.to_value(), "reason": "timeout"});
                            let _ = self.notify("notifications/cancelled", Some(params));
                        }
                        return Err(McpError::TimedOut {
                            method: method.to_owned(),
                            timeout,
                            written: total,
                            total,
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
            Incoming::Lost(reason) => Err(lost(reason)),
        }
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
            .send(WriteJob::Line { line, ticket: None })
            .map_err(|_| not_sent("the session's writer has stopped".into()))
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
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the shutdown ladder has run and reaped the server.
    pub(crate) fn server_reaped(&self) -> bool {
        self.lock_transport().reaped()
    }

    /// The last bytes the server wrote to stderr.
    #[must_use]
    pub fn stderr_tail(&self) -> String {
        self.lock_transport().stderr_tail()
    }

    /// Closes the server's stdin and runs the shutdown ladder (see
    /// [`Transport::shutdown`]). Pending requests fail with
    /// [`McpError::ConnectionLost`]. Later calls return the same report.
    pub fn shutdown(&self) -> ShutdownReport {
        let _ = self.writer.send(WriteJob::Close);
        let report = self.lock_transport().shutdown();
        self.shared.close("the session was shut down");
        let threads: Vec<_> = self
            .threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
            .collect();
        for handle in threads {
            join_briefly(handle);
        }
        report
    }

    fn lock_transport(&self) -> MutexGuard<'_, Transport> {
        self.transport
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.shutdown();
    }
}

enum Incoming {
    Reply(Reply),
    Lost(String),
}

#[derive(Default)]
struct State {
    next_id: i64,
    pending: HashMap<Id, Sender<Incoming>>,
    /// Requests waiting under a caller's tag (see [`Session::request_tagged`]).
    tags: HashMap<String, Id>,
    closed: Option<String>,
    notifications: VecDeque<Notification>,
    stats: SessionStats,
    recent_errors: VecDeque<String>,
}

struct Shared {
    state: Mutex<State>,
    queue_capacity: usize,
    on_notification: Option<NotificationCallback>,
    on_request: Option<RequestCallback>,
    pass_progress: bool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn close(&self, reason: &str) {
        let mut state = self.lock();
        if state.closed.is_none() {
            state.closed = Some(reason.to_owned());
        }
        for (_, tx) in state.pending.drain() {
            let _ = tx.send(Incoming::Lost(reason.to_owned()));
        }
    }

    fn record_error(state: &mut State, error: String) {
        state.stats.protocol_errors += 1;
        if state.recent_errors.len() == RECENT_ERRORS {
            state.recent_errors.pop_front();
        }
        state.recent_errors.push_back(error);
    }

    fn deliver(&self, response: Response) {
        let mut state = self.lock();
        let Some(id) = response.id else {
            let text = match &response.outcome {
                Err(e) => e.to_string(),
                Ok(_) => "a result".into(),
            };
            Self::record_error(&mut state, format!("response without an id: {text}"));
            return;
        };
        if let Some(tx) = state.pending.remove(&id) {
            let reply = match response.outcome {
                Ok(result) => Reply::Result(result),
                Err(error) => Reply::Error(error),
            };
            let _ = tx.send(Incoming::Reply(reply));
        } else {
            state.stats.dropped_responses += 1;
            let len = state.recent_errors.len();
            if len == RECENT_ERRORS {
                state.recent_errors.pop_front();
            }
            state
                .recent_errors
                .push_back(format!("dropped a response for unknown or expired id {id}"));
        }
    }

    fn notification(&self, notification: Notification) {
        if notification.method == "notifications/progress" && !self.pass_progress {
            self.lock().stats.dropped_progress += 1;
            return;
        }
        if let Some(callback) = &self.on_notification {
            let call = std::panic::AssertUnwindSafe(|| callback(&notification));
            if std::panic::catch_unwind(call).is_err() {
                Self::record_error(
                    &mut self.lock(),
                    format!(
                        "the notification callback panicked on {}",
                        notification.method
                    ),
                );
            }
            return;
        }
        let mut state = self.lock();
        if self.queue_capacity == 0 {
            state.stats.dropped_notifications += 1;
            return;
        }
        if state.notifications.len() >= self.queue_capacity {
            state.notifications.pop_front();
            state.stats.dropped_notifications += 1;
        }
        state.notifications.push_back(notification);
    }

    /// A request from the server: `ping` is answered here; the rest go to the request
    /// callback, or are refused with `-32601` without one.
    fn request(&self, request: Request, writer: &Sender<WriteJob>, max: usize) {
        let responder = Responder {
            id: Some(request.id.clone()),
            writer: writer.clone(),
            max,
        };
        if request.method == "ping" {
            self.lock().stats.pings_answered += 1;
            return responder.respond(Ok(json!({})));
        }
        if let Some(callback) = &self.on_request {
            let method = request.method.clone();
            let call = std::panic::AssertUnwindSafe(|| callback(request, responder));
            if std::panic::catch_unwind(call).is_err() {
                // The unwind dropped the responder, which answered with an internal error.
                Self::record_error(
                    &mut self.lock(),
                    format!("the request callback panicked on {method}"),
                );
            }
            return;
        }
        self.lock().stats.requests_refused += 1;
        responder.respond(Err(ErrorObject::new(
            codes::METHOD_NOT_FOUND,
            format!(
                "Method not found: {} (this client offers no capabilities)",
                request.method
            ),
        )));
    }

    fn unreadable(&self, error: JsonRpcError) {
        let mut state = self.lock();
        if let JsonRpcError::InvalidMessage {
            id: Some(id),
            reason,
        } = &error
            && let Some(tx) = state.pending.remove(id)
        {
            let _ = tx.send(Incoming::Lost(format!(
                "the reply was malformed ({reason})"
            )));
        }
        // A reply over the cap: its request is answered now (lost), not left to time out.
        if let JsonRpcError::LineTooLong {
            length,
            limit,
            id: Some(id),
        } = &error
            && let Some(tx) = state.pending.remove(id)
        {
            let _ = tx.send(Incoming::Lost(format!(
                "the reply ({length} bytes) exceeded the {limit}-byte message limit and was skipped; \
                 raise SessionConfig::max_message_bytes if the server legitimately sends replies this large"
            )));
        }
        Self::record_error(&mut state, error.to_string());
    }
}

fn reader_loop(
    mut reader: MessageReader<BufReader<ChildStdout>>,
    shared: &Shared,
    writer: &Sender<WriteJob>,
    max: usize,
) {
    loop {
        match reader.read_message() {
            Ok(None) => {
                shared.close("the server closed its stdout (it exited or crashed)");
                return;
            }
            Ok(Some(Message::Response(response))) => shared.deliver(response),
            Ok(Some(Message::Notification(notification))) => shared.notification(notification),
            Ok(Some(Message::Request(request))) => shared.request(request, writer, max),
            Err(error) if error.is_fatal() => {
                shared.close(&error.to_string());
                return;
            }
            Err(error) => shared.unreadable(error),
        }
    }
}

enum WriteJob {
    Line {
        line: Vec<u8>,
        ticket: Option<Arc<Ticket>>,
    },
    Close,
}

fn writer_loop(mut writer: MessageWriter<ChildStdin>, jobs: &mpsc::Receiver<WriteJob>) {
    while let Ok(WriteJob::Line { line, ticket }) = jobs.recv() {
        match ticket {
            None => {
                let _ = writer.write_encoded(&line, |_| {});
            }
            Some(ticket) => {
                if !ticket.start() {
                    continue;
                }
                let result = writer.write_encoded(&line, |n| ticket.progress(n));
                ticket.finish(result);
            }
        }
    }
    // Dropping the writer closes the server's stdin.
}

/// Progress of one queued line, shared by the caller and the writer thread.
#[derive(Default)]
struct Ticket {
    state: Mutex<TicketState>,
    changed: Condvar,
}

#[derive(Default)]
enum TicketState {
    #[default]
    Queued,
    Writing(usize),
    Written,
    Failed {
        written: usize,
        reason: String,
    },
    Withdrawn,
}

enum TicketWait {
    Written,
    Failed { written: usize, reason: String },
    Withdrawn,
    Stalled { written: usize },
}

impl Ticket {
    fn lock(&self) -> MutexGuard<'_, TicketState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Called by the writer: false when the caller already withdrew the line.
    fn start(&self) -> bool {
        let mut state = self.lock();
        if matches!(*state, TicketState::Withdrawn) {
            return false;
        }
        *state = TicketState::Writing(0);
        true
    }

    fn progress(&self, written: usize) {
        *self.lock() = TicketState::Writing(written);
    }

    fn finish(&self, result: Result<usize, JsonRpcError>) {
        *self.lock() = match result {
            Ok(_) => TicketState::Written,
            Err(error) => TicketState::Failed {
                written: error.bytes_written().unwrap_or(0),
                reason: error.to_string(),
            },
        };
        self.changed.notify_all();
    }

    /// Waits until the line is written or failed, or until `deadline`. At the
    /// deadline a line still queued is withdrawn (it will never be written).
    fn wait(&self, deadline: Instant) -> TicketWait {
        let mut state = self.lock();
        loop {
            match &*state {
                TicketState::Written => return TicketWait::Written,
                TicketState::Failed { written, reason } => {
                    return TicketWait::Failed {
                        written: *written,
                        reason: reason.clone(),
                    };
                }
                TicketState::Withdrawn => return TicketWait::Withdrawn,
                TicketState::Queued | TicketState::Writing(_) => {}
            }
            let now = Instant::now();
            if now >= deadline {
                if let TicketState::Writing(written) = &*state {
                    return TicketWait::Stalled { written: *written };
                }
                *state = TicketState::Withdrawn;
                return TicketWait::Withdrawn;
            }
            state = self
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}
