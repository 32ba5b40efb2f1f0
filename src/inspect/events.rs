//! A page of one pathway's ledger events, each checked against the chain.

use serde::Serialize;
use serde_json::Value;

use crate::evidence::truncation_marker;
use crate::ledger;
use crate::store::{LedgerRow, ReadStore, StoreError};

use super::cursor::{decode_cursor, encode_cursor};
use super::{InspectError, PAGE_BUDGET_BYTES, check_limit, json_len, validate_id};

/// One ledger event of a pathway.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct EventView {
    /// Position in the global chain, from 1.
    pub seq: i64,
    /// sha256 over the previous hash and this event's stored text.
    pub hash: String,
    /// The hash of the previous event in the global chain.
    pub prev_hash: String,
    /// The event, parsed (or a truncation marker if it alone exceeds the page budget,
    /// or the stored text as a string if it is not JSON).
    pub event: Value,
    /// Whether this event passed every check described on [`EvidencePage`].
    pub verified: bool,
}

/// A problem found while checking a page of events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ChainProblem {
    /// The event's position in the global chain.
    pub seq: i64,
    /// What is wrong.
    pub problem: String,
}

/// A page of one pathway's ledger events and what checking them showed.
///
/// # What `chain_verified` means
///
/// For **each event on this page**, and nothing else:
///
/// 1. its stored `hash` equals [`ledger::chain_hash`]`(prev_hash, stored text)`,
///    so the text and the link were not changed without recomputing the hash;
/// 2. its `prev_hash` equals the `hash` of the event at `seq - 1` in the global
///    chain (or [`ledger::GENESIS`] for `seq` 1), so it is linked into the chain
///    (one primary-key lookup per event);
/// 3. its text is JSON in canonical form whose own `seq` and `pathway` agree
///    with the row.
///
/// These are the checks [`crate::store::verify`] makes of every row of the chain (one
/// function serves both). `chain_verified` is true when every event on the page
/// passes. It does **not** check events on other pages or of other pathways, that
/// the transitions are legal, that the stored state agrees
/// with the events, or that the chain was not cut and re-hashed from some point
/// on (compare `ledger_head` with a head kept elsewhere for that). The full check
/// is [`crate::store::verify`], whose cost grows with the whole ledger.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct EvidencePage {
    /// The pathway.
    pub pathway_id: String,
    /// Its events on this page, oldest first.
    pub events: Vec<EventView>,
    /// Pass this back to get the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Whether every event on this page passed the checks above.
    pub chain_verified: bool,
    /// How many events were checked (the events on this page).
    pub checked_events: usize,
    /// What failed, if anything.
    pub problems: Vec<ChainProblem>,
    /// Number of events in the whole ledger.
    pub ledger_length: i64,
    /// Hash of the newest event in the whole ledger.
    pub ledger_head: Option<String>,
}

/// What [`crate::store::check_row`] finds wrong with one event of a page, linked to the event
/// before it in the chain (`prev` when that is the previous row of the page).
fn check_event(
    store: &ReadStore,
    row: &LedgerRow,
    prev: Option<&LedgerRow>,
) -> Result<Vec<String>, StoreError> {
    let expected_prev = if row.seq <= 1 {
        Some(ledger::GENESIS.to_owned())
    } else if let Some(p) = prev.filter(|p| p.seq == row.seq - 1) {
        Some(p.hash.clone())
    } else {
        store
            .ledger(row.seq - 2, 1)?
            .into_iter()
            .find(|r| r.seq == row.seq - 1)
            .map(|r| r.hash)
    };
    let stored = crate::store::StoredRow {
        seq: row.seq,
        pathway: &row.pathway_id,
        prev_hash: row.prev_hash.as_bytes(),
        hash: row.hash.as_bytes(),
        text: row.event.as_bytes(),
    };
    let mut found = Vec::new();
    let _event = crate::store::check_row(
        &stored,
        expected_prev.as_deref().map(str::as_bytes),
        &mut found,
    );
    Ok(found.into_iter().map(|(_, problem)| problem).collect())
}

/// A page of one pathway's ledger events, oldest first, each checked (see
/// [`EvidencePage`] for exactly what is checked).
pub fn evidence(
    store: &ReadStore,
    id: &str,
    limit: usize,
    cursor: Option<&str>,
) -> Result<EvidencePage, InspectError> {
    validate_id(id)?;
    let limit = check_limit(limit)?;
    let after = match cursor {
        Some(c) => decode_cursor(c, "evidence", id)?
            .parse::<i64>()
            .map_err(|_| InspectError::InvalidCursor)?,
        None => 0,
    };
    store.snapshot(|store| {
        if store.pathway(id)?.is_none() {
            return Err(InspectError::NotFound(id.to_owned()));
        }
        let rows = store.events(id, after, limit + 1)?;
        let more = rows.len() > limit;
        let mut events = Vec::new();
        let mut problems = Vec::new();
        let mut used = 512;
        let mut cut = false;
        let mut prev: Option<&LedgerRow> = None;
        for row in rows.iter().take(limit) {
            let found = check_event(store, row, prev)?;
            prev = Some(row);
            let event = serde_json::from_str::<Value>(&row.event)
                .unwrap_or_else(|_| Value::String(row.event.clone()));
            let mut view = EventView {
                seq: row.seq,
                hash: row.hash.clone(),
                prev_hash: row.prev_hash.clone(),
                event,
                verified: found.is_empty(),
            };
            let mut size = json_len(&view) + 1;
            if size + 512 > PAGE_BUDGET_BYTES {
                view.event = truncation_marker(&view.event, "page_budget_bytes");
                size = json_len(&view) + 1;
            }
            if !events.is_empty() && used + size > PAGE_BUDGET_BYTES {
                cut = true;
                break;
            }
            used += size;
            problems.extend(found.into_iter().map(|problem| ChainProblem {
                seq: row.seq,
                problem,
            }));
            events.push(view);
        }
        let next_cursor = if more || cut {
            events
                .last()
                .map(|e| encode_cursor("evidence", id, &e.seq.to_string()))
        } else {
            None
        };
        let head = store.ledger_head()?;
        Ok(EvidencePage {
            pathway_id: id.to_owned(),
            checked_events: events.len(),
            chain_verified: problems.is_empty(),
            events,
            next_cursor,
            problems,
            ledger_length: head.as_ref().map_or(0, |h| h.0),
            ledger_head: head.map(|h| h.1),
        })
    })
}
