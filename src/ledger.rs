//! The evidence ledger: one global, append-only, hash-chained sequence of events.
//!
//! Each event is stored as its RFC 8785 canonical JSON text. Its hash is
//! `sha256("rpr-ledger-v1\n" || prev_hash || "\n" || event_text)` in lowercase hex,
//! where `prev_hash` is the previous event's hash (64 zeros for the first). The
//! newest `seq:hash` is also recorded in the `meta` table by the same transaction.
//!
//! [`crate::store::verify`] recomputes the chain and replays every pathway's transitions. It
//! detects a changed, removed, inserted or reordered event, a truncated tail (given
//! a head hash the caller kept, or against the recorded head), a transition the
//! state machine does not allow, and a stored pathway state or attempt status that
//! the events do not explain.
//!
//! What sha256 does not give: a writer who can rewrite the whole file can rewrite
//! the whole chain consistently. Keep the head hash somewhere the writer cannot
//! reach (a log, another machine) and pass it to [`crate::store::verify`]: that proves the events
//! up to it are unchanged and still present (truncation or rewriting before it is
//! detected). It does not detect a correctly chained append after it by someone
//! with write access to the database; the signed log does ([`crate::store::log`]).

use serde::Serialize;
use sha2::{Digest, Sha256};

mod kind;

pub use kind::EventKind;

/// The `prev_hash` of the first event.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The chain hash of an event text following `prev`.
#[must_use]
pub fn chain_hash(prev: &str, event_text: &str) -> String {
    let hex = chain_hash_hex(prev.as_bytes(), event_text.as_bytes());
    hex.iter().map(|&b| char::from(b)).collect()
}

/// [`chain_hash`] over bytes, as lowercase hex ASCII on the stack.
pub(crate) fn chain_hash_hex(prev: &[u8], event_text: &[u8]) -> [u8; 64] {
    let mut h = Sha256::new();
    h.update(b"rpr-ledger-v1\n");
    h.update(prev);
    h.update(b"\n");
    h.update(event_text);
    crate::canonical::digest_hex(&h.finalize().into())
}

/// What kind of problem the verifier found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProblemKind {
    /// The stored event text is not JSON, or not the canonical form of itself.
    Unreadable,
    /// The sequence numbers skip, repeat or disagree with the event.
    Sequence,
    /// `prev_hash` does not match the previous event's hash.
    BrokenLink,
    /// The stored hash does not match the event.
    HashMismatch,
    /// An event describes a transition the state machine forbids, or starts mid-way.
    IllegalTransition,
    /// A pathway's stored state is not what its events end in.
    StateMismatch,
    /// An attempt's stored status is not what its events end in.
    AttemptMismatch,
    /// A pathway has no events, or events name a pathway that does not exist.
    Unexplained,
    /// The chain ends before the known or recorded head.
    Truncated,
}

/// One problem found by [`crate::store::verify`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Problem {
    /// What kind.
    pub kind: ProblemKind,
    /// The ledger position, when it is about one event.
    pub seq: Option<i64>,
    /// The pathway, when it is about one pathway.
    pub pathway: Option<String>,
    /// Details for people.
    pub detail: String,
}

/// The result of [`crate::store::verify`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// Events checked.
    pub events: i64,
    /// Hash of the last event checked.
    pub head: Option<String>,
    /// Everything that is wrong; empty when the ledger verifies.
    pub problems: Vec<Problem>,
}

impl Report {
    /// Whether the ledger verified with no problem.
    #[must_use]
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}
