//! The reader side of a session: the thread that reads the server's stdout, matches
//! responses to pending requests, answers or hands on the server's requests, and queues
//! or hands on its notifications.

use std::collections::{HashMap, VecDeque};
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};

use super::config::{NotificationCallback, Reply, RequestCallback, SessionStats};
use super::writer::{Lines, WriteJob};
use crate::jsonrpc::{
    ErrorObject, Id, JsonRpcError, Message, MessageReader, Notification, Request, Response, codes,
    encode_line,
};

/// Answers one server request; see [`RequestCallback`]. Dropped without an answer, it
/// answers with an internal error, so the server is never left waiting for a reply that
/// cannot come.
#[derive(Debug)]
pub struct Responder {
    id: Option<Id>,
    to: AnswerTo,
}

/// Where a responder's answer goes.
#[derive(Debug)]
enum AnswerTo {
    /// To the server, as a JSON-RPC response line (a request the server sent).
    Server { writer: Lines, max: usize },
    /// To the client itself (an `inputRequests` entry of a 2026-07-28 result).
    Client(Sender<Result<Value, ErrorObject>>),
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

    /// A responder that hands the answer to `answer` instead of the server.
    pub(super) fn to_client(id: Id, answer: Sender<Result<Value, ErrorObject>>) -> Self {
        Self {
            id: Some(id),
            to: AnswerTo::Client(answer),
        }
    }

    fn send(&mut self, outcome: Result<Value, ErrorObject>) {
        let Some(id) = self.id.take() else { return };
        match &self.to {
            AnswerTo::Server { writer, max } => {
                let response = Message::Response(Response {
                    id: Some(id),
                    outcome,
                });
                if let Ok(line) = encode_line(&response.to_value(), *max) {
                    let _ = writer.queue(WriteJob::Line { line, ticket: None });
                }
            }
            AnswerTo::Client(answer) => {
                let _ = answer.send(outcome);
            }
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

const RECENT_ERRORS: usize = 16;

pub(super) enum Incoming {
    Reply(Reply),
    Lost(String),
    /// The request's line failed before it was written whole (the writer's ticket says
    /// how much got out).
    Unwritten,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) next_id: i64,
    pub(super) pending: HashMap<Id, Sender<Incoming>>,
    /// Requests waiting under a caller's tag (see
    /// [`Session::request_tagged`](super::Session::request_tagged)).
    pub(super) tags: HashMap<String, Id>,
    /// Requests cancelled by [`Session::cancel_tagged`](super::Session::cancel_tagged)
    /// while they wait, with the reason given.
    pub(super) cancelled: HashMap<Id, String>,
    pub(super) closed: Option<String>,
    /// The protocol version in use, once the lifecycle settled it.
    pub(super) version: Option<String>,
    /// Under 2026-07-28, the `_meta` envelope merged into every request.
    pub(super) envelope: Option<serde_json::Map<String, Value>>,
    pub(super) notifications: VecDeque<Notification>,
    pub(super) stats: SessionStats,
    pub(super) recent_errors: VecDeque<String>,
}

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    pub(super) queue_capacity: usize,
    pub(super) on_notification: Option<NotificationCallback>,
    pub(super) on_request: Option<RequestCallback>,
    pub(super) pass_progress: bool,
    /// Why the session is closed when the server's side ends (EOF): what a child's
    /// stdout closing means differs from what the end of a caller's reader means.
    pub(super) eof_reason: &'static str,
    /// Set by the shutdown of a session over streams: the reader drops what it reads
    /// from then on and ends. Never set for a child process (its shutdown ladder ends
    /// the reader by ending the server).
    pub(super) stop: AtomicBool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn close(&self, reason: &str) {
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
    /// callback, or are refused with `-32601` without one, or when the protocol version in
    /// use has no such request.
    fn request(&self, request: Request, writer: &Lines, max: usize) {
        let responder = Responder {
            id: Some(request.id.clone()),
            to: AnswerTo::Server {
                writer: writer.clone(),
                max,
            },
        };
        if let Some(why) = self.not_in_version(&request.method) {
            self.lock().stats.requests_refused += 1;
            let message = format!("Method not found: {} ({why})", request.method);
            return responder.respond(Err(ErrorObject::new(codes::METHOD_NOT_FOUND, message)));
        }
        if request.method == "ping" {
            self.lock().stats.pings_answered += 1;
            return responder.respond(Ok(json!({})));
        }
        if self.on_request.is_some() {
            return self.hand_on(request, responder);
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

    /// Why the protocol version in use has no server request `method`, if it has none:
    /// under 2026-07-28 a server sends no request at all (it asks in `input_required`
    /// results), and before 2025-06-18 there is no elicitation.
    fn not_in_version(&self, method: &str) -> Option<String> {
        let state = self.lock();
        let version = state.version.as_deref()?;
        if state.envelope.is_some() {
            return Some(format!(
                "under protocol {version} a server asks for input in an `input_required` result, \
                 never by a request"
            ));
        }
        (method == "elicitation/create" && !crate::mcp::era::has_elicitation(version))
            .then(|| format!("protocol {version} has no elicitation"))
    }

    /// Hands a request to the request callback; a panic in it is caught and counted (the
    /// unwind drops the responder, which answers with an internal error).
    pub(super) fn hand_on(&self, request: Request, responder: Responder) {
        let Some(callback) = &self.on_request else {
            return drop(responder);
        };
        let method = request.method.clone();
        let call = std::panic::AssertUnwindSafe(|| callback(request, responder));
        if std::panic::catch_unwind(call).is_err() {
            Self::record_error(
                &mut self.lock(),
                format!("the request callback panicked on {method}"),
            );
        }
    }

    /// A line that is no message: recorded, and when it is a malformed or over-long reply
    /// (not `names_method`, a request or notification of the server's), its request is
    /// answered now (lost), not left to time out.
    fn unreadable(&self, error: JsonRpcError, names_method: bool) {
        let mut state = self.lock();
        if let JsonRpcError::InvalidMessage {
            id: Some(id),
            reason,
        } = &error
            && !names_method
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

pub(super) fn reader_loop<R: BufRead>(
    mut reader: MessageReader<R>,
    shared: &Shared,
    writer: &Lines,
    max: usize,
) {
    loop {
        let read = reader.read_value();
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let value = match read {
            Ok(None) => {
                shared.close(shared.eof_reason);
                return;
            }
            Ok(Some(value)) => value,
            Err(error) if error.is_fatal() => {
                shared.close(&error.to_string());
                return;
            }
            Err(error) => {
                shared.unreadable(error, false);
                continue;
            }
        };
        // A request or notification of the server's, even a malformed one, is no reply:
        // its id (the server's own) must not end a request of the client's.
        let names_method = value.get("method").is_some();
        match Message::from_value(value) {
            Ok(Message::Response(response)) => shared.deliver(response),
            Ok(Message::Notification(notification)) => shared.notification(notification),
            Ok(Message::Request(request)) => shared.request(request, writer, max),
            Err(error) => shared.unreadable(error, names_method),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    fn shared() -> Shared {
        Shared {
            state: Mutex::new(State::default()),
            queue_capacity: 16,
            on_notification: None,
            on_request: None,
            pass_progress: false,
            eof_reason: "end of input",
            stop: AtomicBool::new(false),
        }
    }

    /// Reads `lines` with request 1 pending; returns how it ended.
    fn pending_one_through(lines: &str) -> String {
        let shared = shared();
        let (tx, rx) = mpsc::channel();
        shared.lock().pending.insert(Id::Number(1), tx);
        let sink = super::super::writer::Stream(crate::jsonrpc::MessageWriter::new(Vec::new()));
        let (writer, _jobs, _outlet) = Lines::new(Box::new(sink));
        let reader = MessageReader::with_max_message_bytes(lines.as_bytes(), 200).replies_only();
        reader_loop(reader, &shared, &writer, 200);
        match rx.try_recv() {
            Ok(Incoming::Reply(Reply::Result(v))) => format!("result {v}"),
            Ok(Incoming::Reply(_)) => "another reply".into(),
            Ok(Incoming::Lost(reason)) => format!("lost: {reason}"),
            Ok(Incoming::Unwritten) => "unwritten".into(),
            Err(_) => "nothing".into(),
        }
    }

    #[test]
    fn a_request_of_the_servers_never_ends_a_request_of_the_same_id() {
        let pad = "x".repeat(300);
        let over_long = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{{"p":"{pad}"}}}}"#
        );
        let malformed = r#"{"jsonrpc":"2.0","id":1,"method":5}"#;
        let reply = r#"{"jsonrpc":"2.0","id":1,"result":{"ok":true}}"#;
        let lines = format!("{over_long}\n{malformed}\n{reply}\n");
        assert_eq!(pending_one_through(&lines), r#"result {"ok":true}"#);
    }

    #[test]
    fn a_malformed_or_over_long_reply_ends_its_request_as_lost() {
        let pad = "x".repeat(300);
        let over_long = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"p":"{pad}"}}}}"#);
        assert!(pending_one_through(&format!("{over_long}\n")).contains("exceeded the 200-byte"));
        let malformed = r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#;
        assert!(pending_one_through(&format!("{malformed}\n")).contains("malformed"));
    }
}
