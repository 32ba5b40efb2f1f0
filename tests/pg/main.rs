//! The PostgreSQL store (feature `postgres`): the store itself, copying between stores,
//! the runtime on it, the inspection commands through the owner and read-only roles, and
//! hosts in network namespaces of their own. Run with a real server:
//! `eval "$(bash .ci/postgres)" && cargo test --features postgres --test pg`.
//!
//! One test binary for many files (issue 27 item 5); see `tests/core/main.rs`.
#![cfg(feature = "postgres")]

#[path = "../common/mod.rs"]
mod common;
mod pg_support;

mod pg_copy;
mod pg_inspect;
mod pg_netns;
mod pg_runtime;
