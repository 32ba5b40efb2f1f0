//! The plain records the read side returns, and how a row becomes one.

use std::collections::BTreeMap;

use rusqlite::Row;
use serde::Serialize;
use serde_json::Value;

use crate::state::{AttemptStatus, State};
use crate::store::StoreError;

/// A pathway row, for reading.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PathwayRecord {
    /// Pathway id.
    pub id: String,
    /// The caller's idempotency key.
    pub idempotency_key: String,
    /// The redacted definition.
    pub definition: Value,
    /// sha256 of the unredacted request.
    pub request_digest: String,
    /// Current state.
    pub state: State,
    /// Compare-and-set version.
    pub version: i64,
    /// Who proposed it.
    pub proposer: String,
    /// Created, ms since the epoch.
    pub created_at: i64,
    /// Last changed, ms since the epoch.
    pub updated_at: i64,
}

/// An attempt row, for reading.
///
/// Serialized as inspection shows an attempt inside its pathway (the
/// [`AttemptView`](crate::inspect::AttemptView) of a [`PathwayDetail`](crate::inspect::PathwayDetail)):
/// the id as `attempt_id`, without the pathway id.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct AttemptRecord {
    /// Attempt id.
    #[serde(rename = "attempt_id")]
    pub id: String,
    /// Pathway id.
    #[serde(skip_serializing)]
    pub pathway_id: String,
    /// 1, 2, … within the pathway.
    pub seq: i64,
    /// The attempt this one resumes, if any.
    pub previous_attempt: Option<String>,
    /// Where the attempt got to.
    pub status: AttemptStatus,
    /// The redacted request.
    pub request: Value,
    /// sha256 of the unredacted request.
    pub request_digest: String,
    /// What the attempt was bound to.
    pub binding: Value,
    /// sha256 of the binding.
    pub binding_digest: String,
    /// The process that holds it while in flight.
    pub owner: Option<String>,
    /// Lease expiry while in flight, ms since the epoch.
    pub lease_until: Option<i64>,
    /// Outcome evidence.
    pub outcome: Option<Value>,
    /// Created, ms since the epoch.
    pub created_at: i64,
    /// Last changed, ms since the epoch.
    pub updated_at: i64,
}

/// A ledger row, for reading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LedgerRow {
    /// Position in the global chain, from 1.
    pub seq: i64,
    /// The pathway the event belongs to.
    pub pathway_id: String,
    /// The canonical JSON text of the event, exactly as hashed.
    pub event: String,
    /// Hash of the previous event (64 zeros for the first).
    pub prev_hash: String,
    /// sha256 over the previous hash and this event.
    pub hash: String,
}

/// Database-wide figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Status {
    /// Schema version of the file.
    pub schema_version: i64,
    /// Pathways per state (every state is present, zero included).
    pub counts: BTreeMap<String, i64>,
    /// Pathways in a non-terminal state.
    pub unresolved: i64,
    /// Number of ledger events.
    pub ledger_len: i64,
    /// Hash of the newest ledger event, if any.
    pub ledger_head: Option<String>,
}

impl Status {
    /// The status of a store with `per_state` pathways in each state (states absent from
    /// it have none) and the ledger head `head`.
    pub(crate) fn new(
        schema_version: i64,
        per_state: impl IntoIterator<Item = (String, i64)>,
        head: Option<(i64, String)>,
    ) -> Self {
        let mut counts: BTreeMap<String, i64> = State::ALL
            .iter()
            .map(|s| (s.as_str().to_owned(), 0))
            .collect();
        counts.extend(per_state);
        let unresolved = State::ALL
            .iter()
            .filter(|s| !s.is_terminal())
            .map(|s| counts.get(s.as_str()).copied().unwrap_or(0))
            .sum();
        Self {
            schema_version,
            counts,
            unresolved,
            ledger_len: head.as_ref().map_or(0, |h| h.0),
            ledger_head: head.map(|h| h.1),
        }
    }
}

pub(super) const PATHWAY_SELECT: &str = "SELECT id, idempotency_key, definition, request_digest, state, version, proposer, \
     created_at, updated_at FROM pathways";

fn parse_json(text: &str, what: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

pub(super) fn pathway_row(r: &Row<'_>) -> rusqlite::Result<Result<PathwayRecord, StoreError>> {
    let definition: String = r.get(2)?;
    let state: String = r.get(4)?;
    let id: String = r.get(0)?;
    Ok((|| {
        Ok(PathwayRecord {
            idempotency_key: r.get(1)?,
            definition: parse_json(&definition, "pathways.definition")?,
            request_digest: r.get(3)?,
            state: state
                .parse()
                .map_err(|e| StoreError::Corrupt(format!("pathway {id}: {e}")))?,
            version: r.get(5)?,
            proposer: r.get(6)?,
            created_at: r.get(7)?,
            updated_at: r.get(8)?,
            id: id.clone(),
        })
    })())
}

pub(super) fn attempt_row(r: &Row<'_>) -> rusqlite::Result<Result<AttemptRecord, StoreError>> {
    let id: String = r.get(0)?;
    let request: String = r.get(4)?;
    let binding: String = r.get(6)?;
    let status: String = r.get(8)?;
    let outcome: Option<String> = r.get(11)?;
    Ok((|| {
        Ok(AttemptRecord {
            status: status
                .parse()
                .map_err(|e| StoreError::Corrupt(format!("attempt {id}: {e}")))?,
            id: id.clone(),
            pathway_id: r.get(1)?,
            seq: r.get(2)?,
            previous_attempt: r.get(3)?,
            request: parse_json(&request, "attempts.request")?,
            request_digest: r.get(5)?,
            binding: parse_json(&binding, "attempts.binding")?,
            binding_digest: r.get(7)?,
            owner: r.get(9)?,
            lease_until: r.get(10)?,
            outcome: outcome
                .as_deref()
                .map(|o| parse_json(o, "attempts.outcome"))
                .transpose()?,
            created_at: r.get(12)?,
            updated_at: r.get(13)?,
        })
    })())
}

pub(super) fn ledger_row(r: &Row<'_>) -> rusqlite::Result<LedgerRow> {
    Ok(LedgerRow {
        seq: r.get(0)?,
        pathway_id: r.get(1)?,
        event: r.get(2)?,
        prev_hash: r.get(3)?,
        hash: r.get(4)?,
    })
}
