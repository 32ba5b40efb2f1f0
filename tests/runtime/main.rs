//! The runtime and its SQLite store beyond the two-store suites of `tests/core`: threads
//! and processes sharing a database, a busy database, reads and their durability,
//! redaction, and the randomized robustness tests of the MCP reader, client and
//! `rpr-mcp`. These run on SQLite only (some open the file itself).
//!
//! One test binary for many files (issue 27 item 5); see `tests/core/main.rs`.
//! `robustness` installs a panic hook for the whole process (it collects panics on
//! `rpr-mcp-*` threads), so no other MCP client test shares this binary.

#[path = "../common/mod.rs"]
mod common;
#[path = "../mcp_support/mod.rs"]
mod mcp_support;

mod busy;
mod one_commit_read;
mod open_order;
mod read_durability;
mod redaction;
mod robustness;
mod threads;
