//! The one error type of the MCP layer.

use std::time::Duration;

use crate::jsonrpc::ErrorObject;

/// What went wrong in the MCP client layer (transport, session, lifecycle, binding).
///
/// The request-level variants say how far the request got, which is what a caller
/// needs to stay honest about side effects:
///
/// | variant | bytes of the request that reached the server's stdin |
/// |---|---|
/// | [`McpError::NotSent`] | none, and none ever will |
/// | [`McpError::WriteFailed`] | some, or all without a confirmed flush |
/// | [`McpError::TimedOut`] | all (or a stalled write still in progress) |
/// | [`McpError::ConnectionLost`] | all |
/// | [`McpError::Cancelled`] | all |
///
/// [`McpError::nothing_written`] is true only for `NotSent`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The server process could not be started.
    #[error("could not start the MCP server `{program}`: {source}; check the path and permissions")]
    Spawn {
        /// The program that was to be started.
        program: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// The request was not sent: not one byte of it reached the server, and none will.
    #[error("`{method}` was not sent: {reason}")]
    NotSent {
        /// The request's method.
        method: String,
        /// Why it was not sent.
        reason: String,
    },

    /// Writing the request failed part-way: the server may have received part or all of it.
    #[error(
        "writing `{method}` failed after {written} of {total} bytes ({reason}); the server \
         may have received it, treat its effect as unknown"
    )]
    WriteFailed {
        /// The request's method.
        method: String,
        /// Bytes that reached the pipe.
        written: usize,
        /// Bytes in the whole request line.
        total: usize,
        /// The I/O failure.
        reason: String,
    },

    /// No reply came in time. The request was written (or its write was still stuck),
    /// a `notifications/cancelled` was sent, and a late reply will be dropped.
    #[error(
        "`{method}` got no reply within {timeout:?} ({written} of {total} bytes written); \
         the server may have acted on it, treat its effect as unknown"
    )]
    TimedOut {
        /// The request's method.
        method: String,
        /// The timeout that expired.
        timeout: Duration,
        /// Bytes that reached the pipe when the time ran out.
        written: usize,
        /// Bytes in the whole request line.
        total: usize,
    },

    /// The caller cancelled the request after it was written
    /// ([`Session::cancel_tagged`](super::Session::cancel_tagged): one
    /// `notifications/cancelled` was sent), and no reply came before the timeout. A late
    /// reply will be dropped. The server may have acted on it.
    #[error(
        "`{method}` was cancelled after it was sent ({reason}), and no reply came within \
         {timeout:?}; the server may have acted on it, treat its effect as unknown"
    )]
    Cancelled {
        /// The request's method.
        method: String,
        /// The reason the cancellation gave.
        reason: String,
        /// The timeout that expired after the cancellation.
        timeout: Duration,
    },

    /// The request was written, then the connection ended or the reply was unreadable.
    #[error(
        "`{method}` was sent but no usable reply arrived: {reason}; the server may have \
         acted on it, treat its effect as unknown"
    )]
    ConnectionLost {
        /// The request's method.
        method: String,
        /// What happened (EOF, crash, malformed reply, shutdown).
        reason: String,
    },

    /// The server answered with a JSON-RPC error.
    #[error("the server rejected `{method}`: {error}")]
    Rpc {
        /// The request's method.
        method: String,
        /// The error object, as sent.
        error: Box<ErrorObject>,
    },

    /// The server's reply did not have the shape the protocol requires.
    #[error("the server's reply to `{method}` is invalid: {reason}")]
    InvalidReply {
        /// The request's method.
        method: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The server chose a protocol version this client was not configured to accept.
    /// The server was shut down.
    #[error(
        "the server answered protocol version {offered:?}, which is not among the accepted \
         versions {accepted:?}; add it to `SessionConfig::accepted_versions` only if you have \
         checked that version's differences"
    )]
    UnsupportedProtocolVersion {
        /// The version the server answered.
        offered: String,
        /// The versions the client accepts.
        accepted: Vec<String>,
    },

    /// The two sides have no protocol version in common (for example a 2026-07-28 server
    /// that lists only versions this client does not accept, or a legacy server when only
    /// modern versions are accepted). The server was shut down; nothing else was sent.
    #[error(
        "no protocol version in common: {detail}; this client accepts {accepted:?} \
         (`SessionConfig::accepted_versions`)"
    )]
    NoCommonVersion {
        /// What the server said (its versions, or how it answered the probe).
        detail: String,
        /// The versions the client accepts.
        accepted: Vec<String>,
    },

    /// A 2026-07-28 server answered `input_required` and the exchange could not be
    /// finished: the client has no handler for the server's requests, the handler failed
    /// or did not answer, the server kept asking past the round limit, or a retry was cut
    /// off. The server may have acted before it asked.
    #[error(
        "`{method}` did not complete: {reason}; the server may have acted before it asked \
         for input, treat its effect as unknown"
    )]
    InputRequired {
        /// The request's method.
        method: String,
        /// What went wrong.
        reason: String,
    },

    /// `tools/list` returned a cursor it had already returned: the listing would loop.
    #[error("`tools/list` repeated the cursor {cursor:?}; the server's pagination loops, stopped")]
    CursorRepeated {
        /// The repeated cursor.
        cursor: String,
    },

    /// `tools/list` needed more pages than allowed.
    #[error(
        "`tools/list` did not end within {limit} pages; stopped. Raise \
         `SessionConfig::max_tool_pages` if the server really has that many tools"
    )]
    TooManyPages {
        /// The page cap in force.
        limit: usize,
    },

    /// A tool's input schema cannot be used to validate arguments.
    #[error("the input schema of tool `{tool}` is unusable: {reason}")]
    UnsupportedSchema {
        /// The tool's name.
        tool: String,
        /// What is wrong with the schema.
        reason: String,
    },

    /// The server did not get through the handshake (`server/discover` or `initialize`): it
    /// exited, closed its pipes, wrote something that is not JSON-RPC, or did not answer in
    /// time. No tool was called. `stderr` is the end of what it wrote to its stderr (empty
    /// when it wrote nothing), read after the server was shut down.
    #[error("{}", not_started_text(.method, .reason, .stderr))]
    NotStarted {
        /// The handshake request that failed.
        method: String,
        /// What happened, in words.
        reason: String,
        /// The last lines the server wrote to its stderr.
        stderr: String,
        /// The transport's own error.
        #[source]
        cause: Box<McpError>,
    },

    /// A digest could not be computed (the value is not representable in RFC 8785 JSON).
    #[error("a binding digest could not be computed: {0}")]
    Canonical(#[from] crate::canonical::CanonicalError),
}

/// The most lines of a server's stderr an error quotes.
const STDERR_LINES: usize = 12;

fn not_started_text(method: &str, reason: &str, stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let shown = &lines[lines.len().saturating_sub(STDERR_LINES)..];
    let mut out = format!(
        "the server did not complete the MCP handshake (`{method}`: {reason}); no tool was called"
    );
    if shown.is_empty() {
        out.push_str("; it wrote nothing to its stderr");
    } else {
        out.push_str("; the end of its stderr:");
        for line in shown {
            out.push_str("\n    ");
            out.push_str(line);
        }
    }
    out
}

impl McpError {
    /// True when not one byte of the request reached the server (and none will).
    #[must_use]
    pub fn nothing_written(&self) -> bool {
        match self {
            Self::NotSent { .. } => true,
            Self::NotStarted { cause, .. } => cause.nothing_written(),
            _ => false,
        }
    }

    /// A failure of the handshake `method` on a server that broke off or never answered,
    /// as [`McpError::NotStarted`] with the end of its stderr; any other error unchanged.
    pub(crate) fn at_start(self, stderr: impl FnOnce() -> String) -> Self {
        let (method, reason) = match &self {
            Self::NotSent { method, reason }
            | Self::ConnectionLost { method, reason }
            | Self::WriteFailed { method, reason, .. }
            | Self::InvalidReply { method, reason } => (method.clone(), reason.clone()),
            Self::TimedOut {
                method, timeout, ..
            } => (method.clone(), format!("no answer within {timeout:?}")),
            _ => return self,
        };
        Self::NotStarted {
            method,
            reason,
            stderr: stderr(),
            cause: Box::new(self),
        }
    }
}
