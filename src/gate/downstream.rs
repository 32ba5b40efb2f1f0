//! The gate's side facing the MCP client: one writer for stdout (protocol messages
//! only), and the requests the gate itself sends to the client (elicitation, and the
//! server's own requests passed on), matched to their replies by id.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::jsonrpc::{ErrorObject, Id, Message, MessageWriter, Notification, Response};
use crate::mcp::Reply;
use serde_json::Value;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The MCP client at the other end of the gate's input and output.
pub(crate) struct Downstream {
    out: Mutex<MessageWriter<Box<dyn Write + Send>>>,
    pending: Mutex<HashMap<Id, mpsc::Sender<Reply>>>,
    next: AtomicI64,
    closed: Mutex<bool>,
    /// The `capabilities` the client declared in `initialize`.
    capabilities: Mutex<Value>,
    /// The client's requests being served, by id (as JSON text).
    serving: Mutex<HashMap<String, Served>>,
    /// Whether a client opened with `initialize` (the 2025 era, whose `logging/setLevel`
    /// the server keeps to itself).
    initialized: AtomicBool,
}

/// One client request being served.
#[derive(Default)]
struct Served {
    /// The client cancelled it (its answer is then not sent).
    cancelled: bool,
    /// The rank of the log level a 2026-07-28 request asked for (`super::era::log_rank`).
    log_rank: Option<u8>,
}

impl Downstream {
    pub(crate) fn new(output: impl Write + Send + 'static, max_message_bytes: usize) -> Self {
        Self {
            out: Mutex::new(MessageWriter::with_max_message_bytes(
                Box::new(output),
                max_message_bytes,
            )),
            pending: Mutex::new(HashMap::new()),
            next: AtomicI64::new(0),
            closed: Mutex::new(false),
            capabilities: Mutex::new(Value::Null),
            serving: Mutex::new(HashMap::new()),
            initialized: AtomicBool::new(false),
        }
    }

    /// Writes one message; a message over the cap is replaced by an error for its id.
    fn send(&self, message: &Message) {
        let mut out = lock(&self.out);
        if let Err(e) = out.write_message(message) {
            note!(Warn, "rpr gate: cannot write to the client: {e}");
            if let Message::Response(Response { id: Some(id), .. }) = message {
                let error = Message::Response(Response {
                    id: Some(id.clone()),
                    outcome: Err(ErrorObject::new(
                        crate::jsonrpc::codes::INTERNAL_ERROR,
                        format!("the reply could not be written: {e}"),
                    )),
                });
                let _ = out.write_message(&error);
            }
        }
    }

    /// Notes that the client's request `tag` (its id as JSON text) is being served, so
    /// that it can be cancelled; `log_rank`: the log level it asked for (2026-07-28).
    pub(crate) fn serving(&self, tag: &str, log_rank: Option<u8>) {
        lock(&self.serving).insert(
            tag.to_owned(),
            Served {
                cancelled: false,
                log_rank,
            },
        );
    }

    /// The least severe log level (its rank) a 2026-07-28 request being served asked for.
    pub(crate) fn wanted_log_rank(&self) -> Option<u8> {
        lock(&self.serving)
            .values()
            .filter_map(|s| s.log_rank)
            .min()
    }

    /// Whether a client opened with `initialize` (the 2025 era, which sets the server's
    /// log level itself with `logging/setLevel`).
    pub(crate) fn opened_with_initialize(&self) -> bool {
        self.initialized.load(Ordering::SeqCst)
    }

    /// The client cancelled its request `tag`: its answer will not be sent. Whether the
    /// request was being served.
    pub(crate) fn cancel(&self, tag: &str) -> bool {
        lock(&self.serving)
            .get_mut(tag)
            .map(|s| s.cancelled = true)
            .is_some()
    }

    /// Whether the client cancelled its request `tag`, which is still being served.
    pub(crate) fn is_cancelled(&self, tag: &str) -> bool {
        lock(&self.serving).get(tag).is_some_and(|s| s.cancelled)
    }

    /// Answers the client's request `id`, unless the client cancelled it: a cancelled
    /// request is not answered (MCP's cancellation).
    pub(crate) fn respond(&self, id: Id, outcome: Result<Value, ErrorObject>) {
        let served = lock(&self.serving).remove(&id.to_value().to_string());
        if served.is_some_and(|s| s.cancelled) {
            note!(
                Info,
                "rpr gate: request {id} was cancelled by the client; its answer is not sent"
            );
            return;
        }
        self.send(&Message::Response(Response {
            id: Some(id),
            outcome,
        }));
    }

    /// A message already in JSON form (the error reply to an unreadable line).
    pub(crate) fn send_value(&self, value: &Value) {
        let mut out = lock(&self.out);
        let written = out
            .encode(value)
            .and_then(|line| out.write_encoded(&line, |_| {}));
        if let Err(e) = written {
            note!(Warn, "rpr gate: cannot write to the client: {e}");
        }
    }

    /// Passes a server's notification on. A log message (`notifications/message`) is passed
    /// to a client that opened with `initialize` (the server keeps to its `logging/setLevel`),
    /// and otherwise only while a 2026-07-28 request being served asked for its level or a
    /// less severe one: under 2026-07-28 a client that asked for no level gets none.
    pub(crate) fn notify(&self, notification: &Notification) {
        if notification.method == "notifications/message"
            && !self.initialized.load(Ordering::SeqCst)
        {
            // A level MCP does not name is taken as the most severe.
            let rank = notification
                .params
                .as_ref()
                .and_then(|p| p.get("level"))
                .and_then(Value::as_str)
                .and_then(super::era::log_rank)
                .unwrap_or(u8::MAX);
            let wanted = lock(&self.serving)
                .values()
                .any(|s| s.log_rank.is_some_and(|asked| asked <= rank));
            if !wanted {
                return;
            }
        }
        self.send(&Message::Notification(notification.clone()));
    }

    /// The capabilities a client declared in `initialize` (which opens the 2025 era).
    pub(crate) fn set_capabilities(&self, capabilities: Value) {
        *lock(&self.capabilities) = capabilities;
        self.initialized.store(true, Ordering::SeqCst);
    }

    /// What the client declared for `capability` (a top-level member of its capabilities),
    /// as it declared it, if it is an object.
    pub(crate) fn declared(&self, capability: &str) -> Option<Value> {
        lock(&self.capabilities)
            .get(capability)
            .filter(|v| v.is_object())
            .cloned()
    }

    /// Whether the client declared form-mode elicitation (an empty `elicitation` object
    /// means form mode, for backwards compatibility).
    pub(crate) fn elicits_forms(&self) -> bool {
        let caps = lock(&self.capabilities);
        let Some(e) = caps.get("elicitation").and_then(Value::as_object) else {
            return false;
        };
        e.is_empty() || e.contains_key("form")
    }

    /// Sends a request to the client and waits up to `timeout` for its reply.
    pub(crate) fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Reply, String> {
        if *lock(&self.closed) {
            return Err("the client has gone (its stdin closed)".into());
        }
        let id = Id::String(format!(
            "rpr-gate-{}",
            self.next.fetch_add(1, Ordering::Relaxed) + 1
        ));
        let (tx, rx) = mpsc::channel();
        lock(&self.pending).insert(id.clone(), tx);
        self.send(&Message::Request(crate::jsonrpc::Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        }));
        match rx.recv_timeout(timeout) {
            Ok(reply) => Ok(reply),
            Err(RecvTimeoutError::Timeout) => {
                lock(&self.pending).remove(&id);
                Err(format!(
                    "the client did not answer `{method}` within {timeout:?}"
                ))
            }
            Err(RecvTimeoutError::Disconnected) => {
                Err("the client has gone (its stdin closed)".into())
            }
        }
    }

    /// A response from the client to one of the gate's requests.
    pub(crate) fn deliver(&self, response: Response) {
        let Some(id) = response.id else {
            note!(
                Debug,
                "rpr gate: the client sent a response without an id; dropped"
            );
            return;
        };
        let Some(tx) = lock(&self.pending).remove(&id) else {
            note!(
                Debug,
                "rpr gate: the client answered unknown or expired request {id:?}; dropped"
            );
            return;
        };
        let _ = tx.send(match response.outcome {
            Ok(result) => Reply::Result(result),
            Err(error) => Reply::Error(error),
        });
    }

    /// Whether the client closed its stdin.
    pub(crate) fn is_closed(&self) -> bool {
        *lock(&self.closed)
    }

    /// The client closed its stdin: every request waiting for it fails now.
    pub(crate) fn close(&self) {
        *lock(&self.closed) = true;
        lock(&self.pending).clear();
    }
}
