//! JSON-RPC 2.0 messages and their newline-delimited framing.
//!
//! This layer knows nothing about MCP, tools or pathways. It turns bytes into
//! [`Message`]s and back:
//!
//! - one JSON object per line, terminated by `\n`; a trailing `\r` is stripped on
//!   read; blank lines are skipped; writes are compact (`serde_json` escapes any
//!   newline inside a string, so a message never spans two lines);
//! - every line is capped ([`DEFAULT_MAX_MESSAGE_BYTES`], configurable); an oversized
//!   line is skipped to its end without being buffered;
//! - invalid UTF-8, non-JSON, batches and malformed messages are reported as typed
//!   [`JsonRpcError`]s, never a panic, and the reader stays positioned on the next line;
//! - the writer reports how many bytes of each message reached the underlying writer,
//!   which is what lets a caller tell "nothing was sent" from "possibly sent".
//!
//! Request ids keep their JSON type: the integer `1` and the string `"1"` are
//! different [`Id`]s.
//!
//! [`server`] is the server side of a connection on top of these: read, classify, answer
//! each request once, and the error replies the specification asks for.

mod error;
mod framing;
mod message;
pub mod server;

pub use error::JsonRpcError;
pub use framing::{DEFAULT_MAX_MESSAGE_BYTES, MessageReader, MessageWriter, encode_line};
pub use message::{ErrorObject, Id, Message, Notification, Request, Response};

/// Standard JSON-RPC 2.0 error codes.
pub mod codes {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal JSON-RPC error.
    pub const INTERNAL_ERROR: i64 = -32603;
}
