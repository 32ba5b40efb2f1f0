//! The late outcome, one rule for both stores: a step that records an attempt's dispatch
//! outcome while that attempt is no longer in flight (its owner's lease lapsed and another
//! runtime took it over as unknown) is refused, and the refusal is recorded instead, in the
//! same transaction: an event `late_outcome_refused` with the late status and evidence, the
//! pathway's state and the attempt's row unchanged, its version moved (as for any recorded
//! evidence, so that a verdict made before it is void). The owner's own outcome is evidence:
//! it proves the owner sends no more, and what it reports may contradict an earlier readback.
//!
//! Both stores run it: [`super::rules`] calls it for SQLite and PostgreSQL alike.

use serde_json::{Value, json};

use super::{AttemptWrite, EventDraft, Step, StoreError};
use crate::ledger::EventKind;
use crate::state::State;

/// The dispatch outcome a step records: a `Finish` of an attempt together with one of its
/// `attempt_*` events (`attempt_returned`, `attempt_unknown`, …; `attempt_started` goes with
/// a `Start`). Such a step is legal only while the attempt is in flight; a readback or a
/// verdict on a finished attempt uses other event kinds.
pub(crate) struct DispatchOutcome<'s> {
    pub(crate) attempt: &'s str,
    pub(crate) status: &'static str,
    pub(crate) outcome: Option<&'s str>,
    pub(crate) actor: &'s str,
}

/// The dispatch outcome `step` records, if it records one.
pub(crate) fn dispatch_outcome(step: &Step) -> Option<DispatchOutcome<'_>> {
    let Some(AttemptWrite::Finish {
        id,
        status,
        outcome,
    }) = &step.attempt
    else {
        return None;
    };
    step.events
        .iter()
        .find(|e| e.attempt.as_deref() == Some(id.as_str()) && e.kind.is_dispatch_outcome())
        .map(|e| DispatchOutcome {
            attempt: id.as_str(),
            status,
            outcome: outcome.as_deref(),
            actor: e.actor.as_str(),
        })
}

/// The event that records the refusal of `late` (the pathway in `state`, the attempt's
/// status `now`).
pub(crate) fn refusal_event(
    step: &Step,
    state: &str,
    late: &DispatchOutcome<'_>,
    now: &str,
) -> Result<EventDraft, StoreError> {
    let state: State = state
        .parse()
        .map_err(|e| StoreError::Corrupt(format!("pathway {}: {e}", step.pathway)))?;
    let evidence: Value = match late.outcome {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| StoreError::Corrupt(format!("late outcome: {e}")))?,
        None => Value::Null,
    };
    Ok(EventDraft {
        kind: EventKind::LateOutcomeRefused,
        actor: late.actor.to_owned(),
        from: Some(state),
        to: state,
        attempt: Some(late.attempt.to_owned()),
        attempt_status: None,
        data: json!({
            "reason": "the attempt was no longer in flight (its lease lapsed and it was taken over): its late outcome is not recorded",
            "attempt_status_now": now,
            "late_status": late.status,
            "late_evidence": evidence,
            "expected_state": step.expected_state.as_str(),
            "expected_version": step.expected_version,
        }),
    })
}
