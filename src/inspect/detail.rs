//! One pathway: definition, state, attempts and who must act next.

use serde::Serialize;
use serde_json::Value;

use crate::evidence::truncation_marker;
use crate::state::State;
use crate::store::{AttemptRecord, ReadStore};

use super::next::{NextAction, authority_of, next_action, without_counted};
use super::{InspectError, PAGE_BUDGET_BYTES, VALUE_BUDGET_BYTES, json_len, validate_id};

/// An attempt with its binding: the stored record, which serializes with its id as
/// `attempt_id` and without the pathway id (see [`AttemptRecord`]).
pub type AttemptView = AttemptRecord;

/// One pathway: definition, state, attempts and who must act next.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PathwayDetail {
    /// Pathway id.
    pub pathway_id: String,
    /// The caller's idempotency key.
    pub idempotency_key: String,
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
    /// sha256 of the unredacted request.
    pub request_digest: String,
    /// The stored definition, redacted by key name when it was proposed.
    pub definition: Value,
    /// Attempts, oldest first (the oldest may be omitted, see `omitted_attempts`).
    pub attempts: Vec<AttemptView>,
    /// Who must act next.
    pub next: NextAction,
    /// Whether values were replaced by truncation markers to fit the size budget.
    pub truncated: bool,
    /// How many of the oldest attempts were left out to fit the size budget.
    pub omitted_attempts: usize,
}

/// Replaces `v` with a [`truncation_marker`] (reason `value_budget_bytes`) when it is
/// larger than [`VALUE_BUDGET_BYTES`].
fn shrink(v: &mut Value, truncated: &mut bool) {
    if json_len(v) > VALUE_BUDGET_BYTES {
        *v = truncation_marker(v, "value_budget_bytes");
        *truncated = true;
    }
}

/// One pathway with its attempts and bindings, and who must act next.
///
/// When the whole detail would exceed [`PAGE_BUDGET_BYTES`], values larger
/// than [`VALUE_BUDGET_BYTES`] (definition, attempt requests, bindings,
/// outcomes) are replaced by [`truncation_marker`]s (reason `value_budget_bytes`)
/// and, if that is not enough,
/// the oldest attempts are left out (`omitted_attempts`).
pub fn pathway(store: &ReadStore, id: &str) -> Result<PathwayDetail, InspectError> {
    validate_id(id)?;
    let (record, attempts) = store.snapshot(|store| {
        let record = store
            .pathway(id)?
            .ok_or_else(|| InspectError::NotFound(id.to_owned()))?;
        let attempts = store.attempts(id)?;
        Ok::<_, InspectError>((record, attempts))
    })?;
    let last_status = attempts.last().map(|a| a.status);
    let authority = authority_of(&record.definition);
    let mut next = next_action(record.state, last_status, authority.as_ref());
    without_counted(store, &record, authority.as_ref(), &mut next)?;
    let mut detail = PathwayDetail {
        next,
        pathway_id: record.id,
        idempotency_key: record.idempotency_key,
        state: record.state,
        version: record.version,
        proposer: record.proposer,
        created_at: record.created_at,
        updated_at: record.updated_at,
        request_digest: record.request_digest,
        definition: record.definition,
        attempts,
        truncated: false,
        omitted_attempts: 0,
    };
    if json_len(&detail) > PAGE_BUDGET_BYTES {
        let mut t = false;
        shrink(&mut detail.definition, &mut t);
        for a in &mut detail.attempts {
            shrink(&mut a.request, &mut t);
            shrink(&mut a.binding, &mut t);
            if let Some(o) = a.outcome.as_mut() {
                shrink(o, &mut t);
            }
        }
        detail.truncated = t;
        while json_len(&detail) > PAGE_BUDGET_BYTES && !detail.attempts.is_empty() {
            detail.attempts.remove(0);
            detail.omitted_attempts += 1;
            detail.truncated = true;
        }
    }
    Ok(detail)
}
