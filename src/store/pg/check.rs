//! One pathway's rows against its own ledger events: the rule of `store::check` (the same
//! `Replay` and row comparison), over this store's rows. Every step runs it on its pathway,
//! after locking the pathway's row, before it writes anything.

use std::sync::LazyLock;

use postgres::Row;

use super::{PgError, Tx};
use crate::ledger::{ProblemKind, chain_hash};
use crate::store::StoreError;
use crate::store::check::{
    APPROVAL_COLUMNS, ATTEMPT_COLUMNS, PATHWAY_COLUMNS, RawApproval, RawAttempt, Replay,
};
use crate::store::event::{Event, Reading};

static PATHWAY: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {PATHWAY_COLUMNS} FROM pathways WHERE id = $1"));
static ATTEMPTS: LazyLock<String> = LazyLock::new(|| {
    format!("SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE pathway_id = $1 ORDER BY seq")
});
static APPROVALS: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {APPROVAL_COLUMNS} FROM approvals WHERE pathway_id = $1"));
/// Every pathway, attempt and approval row, for `verify`.
pub(super) static ALL_PATHWAYS: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {PATHWAY_COLUMNS} FROM pathways"));
pub(super) static ALL_ATTEMPTS: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {ATTEMPT_COLUMNS} FROM attempts"));
pub(super) static ALL_APPROVALS: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {APPROVAL_COLUMNS} FROM approvals"));

/// One pathway's events in order (served by the index `ledger_by_pathway`).
pub(super) const LEDGER_OF_PATHWAY: &str =
    "SELECT seq, event, prev_hash, hash FROM ledger WHERE pathway_id = $1 ORDER BY seq";

/// The check's raw pathway row (`store::check`'s `RawPathway`) made from a PostgreSQL row of
/// [`PATHWAY_COLUMNS`]. That type is crate-internal but not re-exported from its private
/// module, and this slice edits no existing file: so the row goes through `store::check`'s
/// own SQLite row reader, fed by a statement of the connection's in-memory SQLite shim that
/// selects its eight parameters back. Re-exporting `RawPathway` from `store::check` (one
/// word) removes the shim when this store is wired into `Runtime`.
macro_rules! raw_pathway {
    ($shim:expr, $row:expr) => {{
        let r: &postgres::Row = $row;
        $shim
            .prepare_cached("SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8")
            .and_then(|mut s| {
                s.query_row(
                    rusqlite::params![
                        r.get::<_, &str>(0),
                        r.get::<_, &str>(1),
                        r.get::<_, &str>(2),
                        r.get::<_, &str>(3),
                        r.get::<_, &str>(4),
                        r.get::<_, &str>(5),
                        r.get::<_, &str>(6),
                        r.get::<_, i64>(7),
                    ],
                    crate::store::check::raw_pathway,
                )
            })
            .map_err(crate::store::StoreError::from)
    }};
}
pub(super) use raw_pathway;

pub(super) fn raw_attempt(r: &Row) -> RawAttempt {
    RawAttempt {
        id: r.get(0),
        pathway_id: r.get(1),
        seq: r.get(2),
        previous_attempt: r.get(3),
        request: r.get(4),
        request_digest: r.get(5),
        binding: r.get(6),
        binding_digest: r.get(7),
        status: r.get(8),
        owner: r.get(9),
        outcome: r.get(10),
        carrier: r.get(11),
        created_at: r.get(12),
    }
}

pub(super) fn raw_approval(r: &Row) -> RawApproval {
    RawApproval {
        id: r.get(0),
        pathway_id: r.get(1),
        request_digest: r.get(2),
        approver: r.get(3),
        granted_at: r.get(4),
        used_at: r.get(5),
        revoked_at: r.get(6),
    }
}

// Same shape as `store::check::check_pathway`: the same rule over PostgreSQL rows (that one
// reads through a rusqlite connection); one once the check is generic over its rows.
/// Checks one pathway's rows against its own events (each event's own hash, the replay,
/// every row) inside the caller's transaction. `Ok(None)` when there is no such pathway;
/// [`StoreError::Unexplained`] with the first finding when they disagree.
pub(super) fn check_pathway(tx: &mut Tx<'_>, id: &str) -> Result<Option<Replay>, PgError> {
    let Some(row) = tx.query_opt(PATHWAY.as_str(), &[&id])? else {
        return Ok(None);
    };
    let row = raw_pathway!(tx.shim, &row)?;
    let mut findings = Vec::new();
    let mut replay = Replay::default();
    for r in tx.query(LEDGER_OF_PATHWAY, &[&id])? {
        let seq: i64 = r.get(0);
        let text: &str = r.get(1);
        if chain_hash(r.get(2), text) != r.get::<_, &str>(3) {
            findings.push((
                ProblemKind::HashMismatch,
                format!("event {seq}: stored hash does not match the event"),
            ));
            continue;
        }
        let event = match Event::read(text) {
            // A step does not judge the spelling; `verify` reports it.
            Reading::Canonical(event) | Reading::NotCanonical(event) => event,
            Reading::NotJson(_) => {
                findings.push((ProblemKind::Unreadable, format!("event {seq} is not JSON")));
                continue;
            }
        };
        if event.pathway.as_deref() != Some(id) {
            findings.push((
                ProblemKind::Sequence,
                format!("event {seq} names another pathway"),
            ));
        }
        replay.event(&event, &mut findings);
    }
    let attempts: Vec<RawAttempt> = tx
        .query(ATTEMPTS.as_str(), &[&id])?
        .iter()
        .map(raw_attempt)
        .collect();
    let approvals: Vec<RawApproval> = tx
        .query(APPROVALS.as_str(), &[&id])?
        .iter()
        .map(raw_approval)
        .collect();
    replay.check_rows(&row, &attempts, &approvals, &mut findings);
    match findings.into_iter().next() {
        None => Ok(Some(replay)),
        Some((_, detail)) => Err(StoreError::Unexplained {
            pathway: id.to_owned(),
            detail,
        }
        .into()),
    }
}
