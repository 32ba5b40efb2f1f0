//! The server side of one JSON-RPC connection: read a message, classify it, answer it.
//!
//! [`Server::serve`] is the whole loop for a [`Handler`]: each request gets exactly one
//! reply (the handler's result or error), notifications and responses go to hooks and are
//! never answered, and a line that is no valid message gets the error reply JSON-RPC 2.0
//! asks for. A server that needs more control (a test server that misbehaves on purpose)
//! drives [`Server::receive`] and [`Server::reply`] itself; [`read_incoming`], [`classify`]
//! and [`error_reply`] are the rules alone, for a server that writes from other threads.
//!
//! The rules, from the server's side of the connection:
//!
//! - a line of JSON whitespace only (space, tab, CR) is skipped; any other line is answered
//!   unless it is a notification or a response (a form feed alone is a parse error, unlike
//!   [`MessageReader::read_line`], which skips any ASCII whitespace);
//! - not UTF-8 or not JSON: parse error ([`codes::PARSE_ERROR`]), id `null`;
//! - a batch (an array) or another non-object: invalid request ([`codes::INVALID_REQUEST`]),
//!   id `null`;
//! - an `id` that is neither a string nor an integer: invalid request, id `null`; an integer
//!   beyond the `i64` range of [`Id`] is echoed as sent, in an invalid request error;
//! - a missing or wrong `jsonrpc`, a `method` that is not a string, `params` that are neither
//!   an object nor an array, a message without `method` that is not a response: invalid
//!   request with the message's id (`null` without one);
//! - a notification (a string `method`, no `id`) is never answered, even with bad `params`;
//!   a response (no `method`, a string or integer `id`, a `result` or an `error`) is never
//!   answered, even when malformed;
//! - a line over the reader's cap: invalid request, with the id its first or last bytes
//!   show ([`JsonRpcError::LineTooLong`]), else `null`;
//! - a partial line at the end of the input is dropped, not answered.

use std::io::{BufRead, Write};

use serde_json::{Map, Value};

use super::framing::parse_value;
use super::{
    ErrorObject, Id, JsonRpcError, Message, MessageReader, MessageWriter, Notification, Request,
    Response, codes,
};

/// One message a server read, classified.
#[derive(Debug)]
pub enum Incoming {
    /// A request: answer it exactly once.
    Request(Request),
    /// A notification: never answered.
    Notification(Notification),
    /// A response to a request the server sent: never answered.
    Response(Response),
    /// A line that is no valid message.
    Invalid(Invalid),
}

/// A line that is no valid message, and the error reply it calls for.
#[derive(Debug)]
pub struct Invalid {
    /// What is wrong with the line.
    pub error: JsonRpcError,
    /// The error response to send, as JSON (its id may be one [`Id`] cannot hold); `None`
    /// when none is due: a malformed notification or response, a partial last line.
    pub reply: Option<Value>,
}

/// What a server does with the messages [`Server::serve`] reads.
pub trait Handler {
    /// Answers one request with its result or its error; the loop writes the reply.
    fn request(&mut self, request: Request) -> Result<Value, ErrorObject>;

    /// A notification. Never answered; ignored unless overridden.
    fn notification(&mut self, _notification: Notification) {}

    /// A response. Never answered; ignored unless overridden.
    fn response(&mut self, _response: Response) {}

    /// A line that is no valid message: returns the reply to send, `reply` (the rules of
    /// the [module](self)) unless overridden.
    fn invalid(&mut self, _error: &JsonRpcError, reply: Option<Value>) -> Option<Value> {
        reply
    }
}

/// One connection's reader and writer, from the server's side.
#[derive(Debug)]
pub struct Server<R, W> {
    reader: MessageReader<R>,
    writer: MessageWriter<W>,
}

impl<R: BufRead, W: Write> Server<R, W> {
    /// A server reading with `reader` (its cap is the largest request) and writing with
    /// `writer` (its cap is the largest reply).
    pub fn new(reader: MessageReader<R>, writer: MessageWriter<W>) -> Self {
        Self { reader, writer }
    }

    /// Serves until the input ends: each request answered once by `handler`, each other
    /// line as the [module](self) says. A reply over the writer's cap is replaced by an
    /// internal error ([`codes::INTERNAL_ERROR`]) for the same id.
    ///
    /// Returns `Ok(())` at the end of the input and the error when reading or writing
    /// failed ([`JsonRpcError::is_fatal`]): the connection is then unusable.
    pub fn serve(&mut self, handler: &mut impl Handler) -> Result<(), JsonRpcError> {
        while let Some(incoming) = self.receive()? {
            let sent = match incoming {
                Incoming::Request(request) => {
                    let id = request.id.clone();
                    let outcome = handler.request(request);
                    self.reply(id, outcome)
                }
                Incoming::Notification(notification) => {
                    handler.notification(notification);
                    Ok(())
                }
                Incoming::Response(response) => {
                    handler.response(response);
                    Ok(())
                }
                Incoming::Invalid(Invalid { error, reply }) => match handler.invalid(&error, reply)
                {
                    Some(reply) => self.send_value(&reply),
                    None => Ok(()),
                },
            };
            // Any other error wrote nothing: the connection is still sound.
            if let Err(e) = sent
                && e.is_fatal()
            {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Reads and classifies the next message; `Ok(None)` at the end of the input. Nothing
    /// is answered: an [`Incoming::Invalid`] carries the reply it calls for.
    pub fn receive(&mut self) -> Result<Option<Incoming>, JsonRpcError> {
        read_incoming(&mut self.reader)
    }

    /// Writes the reply to request `id`. When it is over the writer's cap, writes an
    /// internal error for `id` instead.
    pub fn reply(
        &mut self,
        id: Id,
        outcome: Result<Value, ErrorObject>,
    ) -> Result<(), JsonRpcError> {
        let response = |outcome| {
            Message::Response(Response {
                id: Some(id.clone()),
                outcome,
            })
        };
        match self.writer.write_message(&response(outcome)) {
            Ok(_) => Ok(()),
            Err(JsonRpcError::MessageTooLarge { length, limit }) => {
                let error = ErrorObject::new(
                    codes::INTERNAL_ERROR,
                    format!(
                        "Internal error: the response is {length} bytes, over the {limit}-byte limit"
                    ),
                );
                self.send(&response(Err(error)))
            }
            Err(e) => Err(e),
        }
    }

    /// Writes one message (a notification, a request of the server's own, a response).
    pub fn send(&mut self, message: &Message) -> Result<(), JsonRpcError> {
        self.writer.write_message(message).map(drop)
    }

    /// Writes any JSON value as one line: a reply [`Message`] cannot hold (an
    /// [`Invalid::reply`]), or a deliberately wrong message.
    pub fn send_value(&mut self, value: &Value) -> Result<(), JsonRpcError> {
        let line = self.writer.encode(value)?;
        self.writer.write_encoded(&line, |_| {}).map(drop)
    }

    /// The writer, for bytes that are no message at all (a test server's garbage).
    pub fn writer(&mut self) -> &mut MessageWriter<W> {
        &mut self.writer
    }
}

/// Reads the next message with `reader` and classifies it by the [module](self)'s rules;
/// `Ok(None)` at the end of the input, `Err` only when reading failed
/// ([`JsonRpcError::is_fatal`]). Nothing is answered.
pub fn read_incoming<R: BufRead>(
    reader: &mut MessageReader<R>,
) -> Result<Option<Incoming>, JsonRpcError> {
    let json_blank = |line: &[u8]| line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'));
    let incoming = match reader.read_line_skipping(json_blank) {
        Ok(None) => return Ok(None),
        Ok(Some(line)) => match parse_value(&line) {
            Ok(value) => classify(value),
            Err(error) => invalid(error),
        },
        Err(error) if error.is_fatal() => return Err(error),
        Err(error) => invalid(error),
    };
    Ok(Some(incoming))
}

/// Classifies one JSON value read by a server (see the [module](self)'s rules).
#[must_use]
pub fn classify(value: Value) -> Incoming {
    let kind = match &value {
        Value::Object(object) => envelope(object),
        // A batch or a scalar: `Message::from_value` says which, answered with id null.
        _ => Ok(Kind::Request),
    };
    let kind = match kind {
        Ok(kind) => kind,
        Err((id, reason)) => {
            let error = JsonRpcError::InvalidMessage {
                id: Id::from_value(&id),
                reason: reason.into(),
            };
            let reply = error_response(id, &invalid_request(&error));
            return Incoming::Invalid(Invalid {
                error,
                reply: Some(reply),
            });
        }
    };
    match Message::from_value(value) {
        Ok(Message::Request(request)) => Incoming::Request(request),
        Ok(Message::Notification(notification)) => Incoming::Notification(notification),
        Ok(Message::Response(response)) => Incoming::Response(response),
        Err(error) if kind == Kind::Request => invalid(error),
        Err(error) => Incoming::Invalid(Invalid { error, reply: None }),
    }
}

/// The error response a server sends for a line it could not read as a message (as
/// JSON): parse error with id `null` for a line that is not UTF-8 or not JSON; invalid
/// request for a batch (id `null`), an invalid message or a line over the cap (with the
/// id when it was readable). `None` for errors that call for no reply: the end of the
/// input inside a line, and failures of the stream itself.
#[must_use]
pub fn error_reply(error: &JsonRpcError) -> Option<Value> {
    let (id, error_object) = match error {
        JsonRpcError::InvalidUtf8 { .. } | JsonRpcError::NotJson { .. } => (
            None,
            ErrorObject::new(codes::PARSE_ERROR, format!("Parse error: {error}")),
        ),
        JsonRpcError::Batch { .. } => (None, invalid_request(error)),
        JsonRpcError::InvalidMessage { id, .. } => (id.as_ref(), invalid_request(error)),
        JsonRpcError::LineTooLong { length, limit, id } => (
            id.as_ref(),
            ErrorObject::new(
                codes::INVALID_REQUEST,
                format!(
                    "Invalid Request: a message of {length} bytes is over this server's \
                     {limit}-byte limit; it was skipped"
                ),
            ),
        ),
        _ => return None,
    };
    Some(error_response(
        id.map_or(Value::Null, Id::to_value),
        &error_object,
    ))
}

/// What an object claims to be by its envelope (`jsonrpc`, `id`, `method`, `result`,
/// `error`); its `params` and `error` members are checked by [`Message::from_value`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Request,
    Notification,
    Response,
}

/// The kind of message `object` is, or the id to answer with and why it is invalid.
fn envelope(object: &Map<String, Value>) -> Result<Kind, (Value, &'static str)> {
    let id = match object.get("id") {
        None => None,
        Some(id) if Id::from_value(id).is_some() => Some(id),
        Some(id @ Value::Number(n)) if n.is_u64() => {
            return Err((
                id.clone(),
                "the id is an integer beyond this server's range (a signed 64-bit integer)",
            ));
        }
        Some(_) => return Err((Value::Null, "`id` must be a string or an integer")),
    };
    let reply_id = id.cloned().unwrap_or(Value::Null);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err((reply_id, "`jsonrpc` must be \"2.0\""));
    }
    match (object.get("method"), id) {
        (Some(Value::String(_)), None) => Ok(Kind::Notification),
        (Some(Value::String(_)), Some(_)) => Ok(Kind::Request),
        (Some(_), _) => Err((reply_id, "`method` is not a string")),
        (None, Some(_)) if object.contains_key("result") || object.contains_key("error") => {
            Ok(Kind::Response)
        }
        (None, _) => Err((
            reply_id,
            "no `method`, and not a response (an id with a `result` or an `error`)",
        )),
    }
}

fn invalid(error: JsonRpcError) -> Incoming {
    let reply = error_reply(&error);
    Incoming::Invalid(Invalid { error, reply })
}

fn invalid_request(error: &JsonRpcError) -> ErrorObject {
    ErrorObject::new(codes::INVALID_REQUEST, format!("Invalid Request: {error}"))
}

fn error_response(id: Value, error: &ErrorObject) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": error.to_value()})
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Incoming, Invalid, classify, read_incoming};
    use crate::jsonrpc::MessageReader;

    /// The reply's id to `line` (sent with its line feed), or `None` when it is not answered.
    fn reply_id(line: &str) -> Option<serde_json::Value> {
        replied(&format!("{line}\n"))
    }

    fn replied(input: &str) -> Option<serde_json::Value> {
        let mut reader = MessageReader::with_max_message_bytes(input.as_bytes(), 64);
        match read_incoming(&mut reader).unwrap().unwrap() {
            Incoming::Invalid(Invalid { reply, .. }) => reply.map(|r| r["id"].clone()),
            other => panic!("{input}: {other:?}"),
        }
    }

    #[test]
    fn invalid_lines_are_answered_as_the_rules_say() {
        assert_eq!(reply_id("not json"), Some(json!(null)));
        assert_eq!(
            reply_id("\u{c}"),
            Some(json!(null)),
            "a form feed is no blank"
        );
        assert_eq!(reply_id("[]"), Some(json!(null)));
        assert_eq!(
            reply_id(r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#),
            Some(json!(null))
        );
        assert_eq!(reply_id(r#"{"id":3,"method":"m"}"#), Some(json!(3)));
        assert_eq!(
            reply_id(r#"{"jsonrpc":"2.0","id":"a","method":"m","params":1}"#),
            Some(json!("a"))
        );
        assert_eq!(
            reply_id(r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}"#),
            Some(json!(9_223_372_036_854_775_808_u64)),
            "an id beyond i64 is echoed"
        );
        assert_eq!(
            reply_id(r#"{"jsonrpc":"2.0","error":{"code":1,"message":"m"}}"#),
            Some(json!(null))
        );
        let long = format!(
            "{{\"id\":7,\"jsonrpc\":\"2.0\",\"method\":\"{}\"}}",
            "x".repeat(100)
        );
        assert_eq!(
            reply_id(&long),
            Some(json!(7)),
            "a line over the cap, with its id"
        );
        // Notifications and responses are never answered, malformed or not.
        assert_eq!(
            reply_id(r#"{"jsonrpc":"2.0","method":"m","params":7}"#),
            None
        );
        assert_eq!(
            reply_id(r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#),
            None
        );
        assert_eq!(
            replied(r#"{"jsonrpc":"2.0","id":5,"method":"m"}"#),
            None,
            "a partial last line"
        );
    }

    #[test]
    fn valid_messages_are_classified() {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "m", "params": [1]});
        assert!(matches!(classify(request), Incoming::Request(r) if r.method == "m"));
        let note = json!({"jsonrpc": "2.0", "method": "n"});
        assert!(matches!(classify(note), Incoming::Notification(_)));
        let response = json!({"jsonrpc": "2.0", "id": "s", "result": {}});
        assert!(matches!(classify(response), Incoming::Response(_)));
    }
}
