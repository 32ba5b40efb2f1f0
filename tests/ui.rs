//! Compile-time guarantees of the typestate pathway, pinned with trybuild.
//!
//! Every file in `ui-tests/fail/` is one misuse that must not compile; its
//! checked-in `.stderr` is the exact compiler message. Every file in
//! `ui-tests/pass/` must compile without warnings and run to completion.
//! `ui-tests/README.md` lists the cases, the rustc that generated the `.stderr`
//! files, and how to regenerate them (`TRYBUILD=overwrite cargo test --test ui`).

// A test binary of its own, not a module of a group (tests/core/main.rs): trybuild builds
// every case in a cargo project of its own, and `TRYBUILD=overwrite cargo test --test ui`
// regenerates the messages without running any other test.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui-tests/fail/*.rs");
    t.pass("ui-tests/pass/*.rs");
}
