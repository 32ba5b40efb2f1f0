//! What a session is set up with and what it reports: its settings, the callbacks that
//! receive the server's notifications and requests, a reply, and the session's counters.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::Responder;
use crate::jsonrpc::{DEFAULT_MAX_MESSAGE_BYTES, ErrorObject, Notification, Request};
use crate::mcp::era::{LEGACY_VERSIONS, MODERN_VERSIONS};
use crate::mcp::transport::TransportConfig;

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

/// Asked right before a request is queued for the server, under the lock that
/// [`Session::cancel_tagged`](super::Session::cancel_tagged) takes to find a tagged request:
/// `Some(reason)` withdraws the request, and not one byte of it is written
/// ([`McpError::NotSent`](crate::mcp::McpError::NotSent)).
///
/// A proxy whose client cancels a request marks it cancelled first and then calls
/// `cancel_tagged`; with a guard that reads that mark, every cancellation either finds the
/// request queued (and the server gets `notifications/cancelled` after it) or is seen by
/// the guard (and the request is never written). No cancellation falls between the two.
/// The guard must return quickly and must not call into the session.
#[derive(Clone)]
pub struct SendGuard(Arc<dyn Fn() -> Option<String> + Send + Sync>);

impl SendGuard {
    /// A guard that withdraws a request whenever `withdraw` returns a reason.
    pub fn new(withdraw: impl Fn() -> Option<String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(withdraw))
    }

    /// Why the request must not be sent now, if it must not.
    #[must_use]
    pub fn withdrawn(&self) -> Option<String> {
        (self.0)()
    }
}

impl std::fmt::Debug for SendGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SendGuard")
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
    /// The protocol versions this client accepts, of either era (default: all it
    /// speaks, [`MODERN_VERSIONS`] and [`LEGACY_VERSIONS`]). With a modern version among
    /// them, [`McpClient::connect`](crate::mcp::McpClient::connect) probes with
    /// `server/discover` first; with a legacy one, it offers the newest of them in
    /// `initialize` and accepts any of them back. Only legacy versions: no probe. Only
    /// modern ones: a server that does not answer the probe as a 2026-07-28 server is
    /// refused.
    pub accepted_versions: Vec<String>,
    /// How long the `server/discover` probe may take before the server is taken to be a
    /// legacy server that ignores unknown methods (default 5 s). Such a server costs this
    /// much at every connect; a server that answers the probe with any error costs
    /// nothing.
    pub discover_timeout: Duration,
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
    /// The `capabilities` this client declares in `initialize`, or under 2026-07-28 in every
    /// request's `_meta` (default `{}`: none). Declare only what
    /// [`SessionConfig::on_request`] really serves: under 2026-07-28 the server's
    /// `input_required` asks reach that handler too.
    pub client_capabilities: Value,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            request_timeout: Duration::from_secs(30),
            transport: TransportConfig::default(),
            accepted_versions: MODERN_VERSIONS
                .iter()
                .chain(LEGACY_VERSIONS.iter())
                .map(|v| (*v).to_owned())
                .collect(),
            discover_timeout: Duration::from_secs(5),
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
            .field("discover_timeout", &self.discover_timeout)
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
