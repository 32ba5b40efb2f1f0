//! The evidence ledger: one global, append-only, hash-chained sequence of events.
//!
//! Each event is stored as its RFC 8785 canonical JSON text. Its hash is
//! `sha256("rpr-ledger-v1\n" || prev_hash || "\n" || event_text)` in lowercase hex,
//! where `prev_hash` is the previous event's hash (64 zeros for the first). The
//! newest `seq:hash` is also recorded in the `meta` table by the same transaction.
//!
//! [`verify`] recomputes the chain and replays every pathway's transitions. It
//! detects a changed, removed, inserted or reordered event, a truncated tail (given
//! a head hash the caller kept, or against the recorded head), a transition the
//! state machine does not allow, and a stored pathway state or attempt status that
//! the events do not explain.
//!
//! What sha256 does not give: a writer who can rewrite the whole file can rewrite
//! the whole chain consistently. Keep the head hash somewhere the writer cannot
//! reach (a log, another machine) and pass it to [`verify`]: that proves the events
//! up to it are unchanged and still present (truncation or rewriting before it is
//! detected). It does not detect a correctly chained append after it by someone
//! with write access to the database; that needs signing, a later step.

use serde::Serialize;
use sha2::{Digest, Sha256};

mod kind;

pub use kind::EventKind;

use crate::store::check::Finding;
use crate::store::check::walk::{self, Plan};
use crate::store::event::{Event, Reading};
use crate::store::{ReadStore, StoreError};

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

/// One problem found by [`verify`].
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

// Same shape as Problem: public result structs with other fields.
/// The result of [`verify`].
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

/// Verifies the whole ledger and the stored state against it.
///
/// `known_head` is a hash the caller kept from an earlier [`Report::head`] or
/// `Status::ledger_head`; if the chain no longer contains it, the tail was cut or
/// rewritten.
///
/// Besides the chain itself, every stored row is re-derived from the events of its
/// pathway: the pathway's state, idempotency key, digests, proposer and stored
/// definition; each attempt's sequence, request, binding, owner, carrier, status and
/// outcome; each approval's request, approver, grant, use and revocation. A new attempt
/// after one that may have taken effect without a not-applied verdict between them is
/// reported too.
///
/// Every read (the chain walk, the recorded head, the stored rows) sees one
/// snapshot ([`ReadStore::snapshot`]), so writers committing meanwhile are neither
/// half-seen nor reported as tampering.
///
/// The walk streams: one pass over the stored rows, hashing the stored bytes, checking
/// each event's canonical form and reading the fields the replay needs in one scan of
/// its text, without building a JSON value (a text that is not canonical is reported,
/// then parsed the slow way so its replay still runs). With two or more cores the rows
/// are read on the calling thread (the only one that touches the connection, so the one
/// snapshot holds) and checked on a second one, in the order read; the report is the
/// same either way.
pub fn verify(store: &ReadStore, known_head: Option<&str>) -> Result<Report, StoreError> {
    #[cfg(feature = "postgres")]
    if let Some(pg) = store.postgres() {
        return pg.verify(known_head);
    }
    store.snapshot(|store| walk::run(store, known_head, Plan::for_this_machine()))
}

/// One ledger row as stored.
pub(crate) struct StoredRow<'r> {
    pub(crate) seq: i64,
    pub(crate) pathway: &'r str,
    pub(crate) prev_hash: &'r [u8],
    pub(crate) hash: &'r [u8],
    pub(crate) text: &'r [u8],
}

/// Checks one stored ledger row on its own and against the chain: that its `prev_hash` is
/// `expected_prev` (the hash of the event before it; `None` when there is none to link to),
/// that its stored hash is its [`chain_hash`], and that its text is UTF-8, canonical JSON,
/// and names the row's seq and pathway. Pushes what is wrong to `out`, and returns the
/// event when its text could be read. Used by [`verify`] for every row of the chain and by
/// [`crate::inspect::evidence`] for the rows of one page.
pub(crate) fn check_row<'r>(
    row: &StoredRow<'r>,
    expected_prev: Option<&[u8]>,
    out: &mut Vec<Finding>,
) -> Option<Event<'r>> {
    check_stored_row(row, expected_prev, None, out)
}

/// [`check_row`], given whether the stored hash is the row's chain hash when that was
/// already computed (`hashed`; computed here when `None`).
pub(crate) fn check_stored_row<'r>(
    row: &StoredRow<'r>,
    expected_prev: Option<&[u8]>,
    hashed: Option<bool>,
    out: &mut Vec<Finding>,
) -> Option<Event<'r>> {
    match expected_prev {
        Some(expected) if expected == row.prev_hash => {}
        Some(_) => out.push((
            ProblemKind::BrokenLink,
            "prev_hash does not match the previous event's hash".into(),
        )),
        None => out.push((
            ProblemKind::BrokenLink,
            format!("no event at seq {} to link to", row.seq - 1),
        )),
    }
    if !hashed.unwrap_or_else(|| chain_hash_hex(row.prev_hash, row.text) == row.hash) {
        out.push((
            ProblemKind::HashMismatch,
            "stored hash does not match the event".into(),
        ));
    }
    let Ok(text) = std::str::from_utf8(row.text) else {
        out.push((ProblemKind::Unreadable, "event text is not UTF-8".into()));
        return None;
    };
    let event = match Event::read(text) {
        Reading::Canonical(event) => event,
        Reading::NotCanonical(event) => {
            out.push((
                ProblemKind::Unreadable,
                "event text is not in canonical form".into(),
            ));
            event
        }
        Reading::NotJson(e) => {
            out.push((ProblemKind::Unreadable, format!("event is not JSON: {e}")));
            return None;
        }
    };
    if event.seq != Some(row.seq) || event.pathway.as_deref() != Some(row.pathway) {
        out.push((
            ProblemKind::Sequence,
            "event's own seq or pathway disagrees with its row".into(),
        ));
    }
    Some(event)
}
