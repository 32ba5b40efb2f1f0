//! The suites that run on both stores: on SQLite by default, and on PostgreSQL with
//! `RPR_TEST_BACKEND=postgres` (`--features postgres`, `RPR_PG_URL`; `tests/common`: each
//! test database a schema of its own). `.ci/run` runs this binary on both, with
//! `tests/snapshots.rs` (a binary of its own: it says why). A suite that works on SQLite
//! only belongs in `tests/runtime`.
//!
//! One test binary for many files (issue 27 item 5): cargo links each test binary
//! against the whole crate, so fewer binaries build faster. Each file is a module; a
//! test's name starts with its module (`race::…`), and a test that re-executes this
//! binary to run one entry names it so (`--exact race::child_entry`).

#[path = "../common/mod.rs"]
mod common;

mod at_most_once;
mod authority;
mod crash;
mod deferred;
mod identical;
mod kept_replay;
mod ledger;
mod merged_steps;
mod model;
mod proof;
mod quorum;
mod race;
mod rpr_mcp;
mod signed_log;
mod snapshot_reads;
mod state_machine;
