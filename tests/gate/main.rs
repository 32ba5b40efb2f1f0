//! The gate (`rpr gate`, `rpr::gate::serve`): its own tests, the reference clients and
//! servers through it, and the client x server matrix (`gate_matrix`, which writes its
//! table to stderr past the harness's capture).
//!
//! One test binary for many files (issue 27 item 5); see `tests/core/main.rs`.

#[path = "../interop_support/mod.rs"]
mod interop_support;

mod gate;
mod gate_interop;
mod gate_matrix;
