//! `verify`: the whole ledger checked, and every stored row re-derived from the events of
//! its pathway (the ledger's format and hashing are [`crate::ledger`]'s; reading them from a
//! store is this module's).

use crate::ledger::{ProblemKind, Report, chain_hash_hex};
use crate::store::check::Finding;
use crate::store::event::{Event, Reading};
use crate::store::{ReadStore, StoreError};

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
    store.verify(known_head)
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
