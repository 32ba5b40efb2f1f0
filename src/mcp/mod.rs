//! Outbound MCP over stdio: the client side of the Model Context Protocol.
//!
//! Thin, synchronous and std-only (threads and channels, no async runtime). The
//! layers, bottom up:
//!
//! - [`Transport`]: the server as a child process in its own process group, with an
//!   explicit environment, stderr drained into a capped buffer, and a shutdown ladder
//!   (close stdin, wait, `SIGTERM` the group, wait, `SIGKILL` the group, reap) that
//!   also runs on drop;
//! - [`Session`]: JSON-RPC correlation by id over [`crate::jsonrpc`] framing; server
//!   notifications and requests at any time; per-request timeouts followed by
//!   `notifications/cancelled`; every failure says how much of the request was
//!   written ([`McpError`]). [`Session::over_streams`] runs the same session over a
//!   reader and a writer the caller gives, with no process (an in-process server: tests,
//!   fuzzing); it claims nothing a process would prove, and the layers above keep taking
//!   a [`ServerCommand`];
//! - [`McpClient`]: the lifecycle in the server's era, settled by the spec's dual-era
//!   rules: a `server/discover` probe at [`MODERN_PROTOCOL_VERSION`], then either the
//!   stateless 2026-07-28 protocol (a `_meta` envelope on every request, `resultType`
//!   read, `input_required` rounds answered) or `initialize` (offering
//!   [`PROTOCOL_VERSION`], accepting every version of [`LEGACY_VERSIONS`]) and
//!   `notifications/initialized`; paginated `tools/list`, `tools/call`;
//! - [`ToolBinding`], [`ArgumentValidator`]: what a call is bound to and how its
//!   arguments are checked before anything is sent;
//! - [`McpExecutor`] and [`McpReadback`]: the core [`crate::executor::Executor`] and
//!   [`crate::executor::Readback`] for MCP tools.
//!
//! With the `fault-server` feature, the crate also ships `rpr-fault-server` (and
//! `fault_server`), a stdio MCP server that injects one fault on demand (crashes,
//! garbage, lost replies, schema changes, …), used by this crate's tests and usable by
//! hosts to test their own handling; run it with `--help`. It is test tooling: it
//! redirects stdin, blocks `SIGTERM` and can run forever, so it is off by default.
//!
//! Not covered: remote transports (HTTP), OAuth, tasks, and answering sampling or
//! elicitation itself (a host answers them through [`SessionConfig::on_request`]). Unix
//! only (process groups and signals).

mod binding;
mod client;
mod era;
mod error;
pub(crate) mod executor;
#[cfg(feature = "fault-server")]
pub mod fault_server;
mod in_process;
mod mrtr;
mod negotiate;
mod readback;
mod schema;
pub(crate) mod session;
mod transport;

pub use binding::{ToolBinding, UNBOUND_TOOL_FIELDS, bound_definition, changed_fields};
pub use client::{InvalidTool, McpClient, Tool, ToolList};
pub use era::{
    Era, LEGACY_VERSIONS, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION,
    META_SERVER_INFO, MODERN_PROTOCOL_VERSION, MODERN_VERSIONS, UNSUPPORTED_PROTOCOL_VERSION,
};
pub use error::McpError;
pub use executor::{ExecutorConfig, McpExecutor};
pub use in_process::{InProcessServer, InProcessStreams};
pub use mrtr::{InputAnswerer, ROUNDS_META};
pub use negotiate::ServerInfo;
pub use readback::{McpReadback, ReadbackArguments, ReadbackJudge, ReadbackVerdict};
pub use schema::{ArgumentValidator, Dialect};
pub use session::{
    NotificationCallback, Reply, RequestCallback, Responder, SendGuard, Session, SessionConfig,
    SessionStats,
};
pub use transport::{ServerCommand, ShutdownReport, ShutdownStage, Transport, TransportConfig};

/// The MCP protocol revision this client offers in `initialize`: `2025-11-25` (the newest
/// of the handshake era; see [`LEGACY_VERSIONS`] for those it accepts back).
pub const PROTOCOL_VERSION: &str = "2025-11-25";
