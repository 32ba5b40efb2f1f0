//! The MCP client and its server sessions: framing, sessions and protocol eras, the MCP
//! executor and pathways through it, server-initiated requests, the reference servers
//! (interop, the concurrent example), and a server's end with its host (the carrier,
//! process groups, `setsid` and daemonizing launchers).
//!
//! One test binary for many files (issue 27 item 5); see `tests/core/main.rs`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../host_support/mod.rs"]
mod host_support;
#[path = "../interop_support/mod.rs"]
mod interop_support;
#[path = "../mcp_support/mod.rs"]
mod mcp_support;

mod concurrent_example;
mod interop;
mod mcp_eras;
mod mcp_executor;
mod mcp_framing;
mod mcp_pathway;
mod mcp_session;
mod orphan_carrier;
mod server_dies_with_host;
mod session_requests;
mod session_streams;
