//! The binaries from outside: the `rpr` commands (`rpr_cli`; with `--features postgres`
//! also on a PostgreSQL location: `.ci/run` runs `--test cli -- rpr_cli::`), `rpr host`
//! (`host_*`) and `rpr-mcp`, the read-only inspection server, with real MCP clients and
//! beside a writer.
//!
//! One test binary for many files (issue 27 item 5); see `tests/core/main.rs`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../host_support/mod.rs"]
mod host_support;

mod evidence_interop;
mod host_carrier;
mod host_demo;
mod host_directory;
mod host_errors;
mod host_interrupt;
mod host_pty;
mod host_steps;
mod rpr_cli;
mod rpr_generate;
mod rpr_keygen;
mod rpr_mcp_clients;
mod rpr_mcp_readonly;
mod rpr_pin_review;
mod rpr_policy;
mod rpr_readonly_media;
mod rpr_verify_proof;
mod rpr_views;
