//! The ledger append: one global chain, as on SQLite.
//!
//! The head (`meta.ledger_head`, `seq:hash`, empty before the first event) is locked
//! `FOR UPDATE` by the append, which is the last thing a step does before its `COMMIT`:
//! two steps of unrelated pathways wait for each other only from that lock to the commit
//! (the event inserts, the head update and the commit's WAL flush), never for each other's
//! row checks or compare-and-sets. `prev_hash` and `hash` are `UNIQUE`, so even a writer that
//! skipped the lock could not store a fork.

use serde_json::json;

use super::{EventDraft, PgError, Tx};
use crate::ledger::{GENESIS, chain_hash};
use crate::state::State;
use crate::store::StoreError;

// Same shape as `SqliteBackend::append_event`: the same event object and chain hash (one
// ledger format on both stores); that one is private to the SQLite backend.
/// Appends `events` of `pathway`, chained to the head, and moves the head. Returns the
/// `seq` of the last event appended (the head's, when there are none).
pub(super) fn append(
    tx: &mut Tx<'_>,
    pathway: &str,
    at: i64,
    events: Vec<EventDraft>,
) -> Result<i64, PgError> {
    let head: String = tx
        .query_one(
            "SELECT value FROM meta WHERE key = 'ledger_head' FOR UPDATE",
            &[],
        )?
        .get(0);
    let (mut seq, mut prev) = parse_head(&head)?;
    for draft in events {
        seq += 1;
        let event = json!({
            "v": 2,
            "seq": seq,
            "at": at,
            "pathway": pathway,
            "kind": draft.kind,
            "actor": draft.actor,
            "from": draft.from.map(State::as_str),
            "to": draft.to.as_str(),
            "attempt": draft.attempt,
            "attempt_status": draft.attempt_status,
            "data": draft.data,
        });
        let text = crate::canonical::to_string(&event)
            .map_err(|e| StoreError::Corrupt(format!("event: {e}")))?;
        let hash = chain_hash(&prev, &text);
        tx.execute(
            "INSERT INTO ledger (seq, pathway_id, event, prev_hash, hash) VALUES ($1, $2, $3, $4, $5)",
            &[&seq, &pathway, &text, &prev, &hash],
        )?;
        prev = hash;
    }
    tx.execute(
        "UPDATE meta SET value = $1 WHERE key = 'ledger_head'",
        &[&format!("{seq}:{prev}")],
    )?;
    Ok(seq)
}

/// `seq:hash` of the recorded head; `(0, GENESIS)` for the empty ledger.
pub(super) fn parse_head(head: &str) -> Result<(i64, String), PgError> {
    if head.is_empty() {
        return Ok((0, GENESIS.to_owned()));
    }
    head.split_once(':')
        .and_then(|(s, h)| Some((s.parse().ok()?, h.to_owned())))
        .ok_or_else(|| StoreError::Corrupt(format!("meta.ledger_head is {head:?}")).into())
}
