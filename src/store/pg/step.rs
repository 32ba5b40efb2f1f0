//! The writes: a new pathway, a step, a granted approval. Each is one transaction that first
//! locks the pathway's row (the takeover and lease renewal are in `lease.rs`).

use serde_json::{Value, json};

use super::check::check_pathway;
use super::{
    ApprovalWrite, AttemptWrite, EventDraft, Fence, NewPathway, PgBackend, PgError, Step, Tx,
    db_clock_ms, ledger,
};
use crate::state::{AttemptStatus, State};
use crate::store::StoreError;
use crate::store::check::SETTLED;

/// Refuses events that do not walk allowed edges from `start` to `end` (as the SQLite store
/// does: even a bug in a transition could not store another edge).
pub(super) fn walk_edges(
    start: State,
    events: &[EventDraft],
    end: State,
) -> Result<(), StoreError> {
    let mut at = start;
    for e in events {
        let from = e.from.unwrap_or(at);
        let allowed = from == at && (e.to == at || at.allows(e.to));
        if !allowed {
            return Err(StoreError::IllegalEdge { from, to: e.to });
        }
        at = e.to;
    }
    if at == end {
        Ok(())
    } else {
        Err(StoreError::IllegalEdge { from: at, to: end })
    }
}

/// Locks the pathway's row for the rest of the transaction; its stored state and version.
pub(super) fn lock_pathway(tx: &mut Tx<'_>, id: &str) -> Result<(String, i64), PgError> {
    let row = tx.query_opt(
        "SELECT state, version FROM pathways WHERE id = $1 FOR UPDATE",
        &[&id],
    )?;
    let row = row.ok_or_else(|| StoreError::NoSuchPathway(id.to_owned()))?;
    Ok((row.get(0), row.get(1)))
}

/// The attempt whose dispatch outcome this step records, if it records one: a `Finish` of
/// an attempt together with one of its `attempt_*` events (`attempt_returned`,
/// `attempt_unknown`, …; `attempt_started` goes with a `Start`). Such a step is legal only
/// while the attempt is in flight; a readback or a verdict on a finished attempt uses other
/// event kinds.
fn dispatch_outcome(step: &Step) -> Option<(&str, &'static str, Option<&str>, &str)> {
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
        .find(|e| e.attempt.as_deref() == Some(id.as_str()) && e.kind.starts_with("attempt_"))
        .map(|e| (id.as_str(), *status, outcome.as_deref(), e.actor.as_str()))
}

impl PgBackend {
    /// Inserts a new pathway and its ledger events in one transaction: the `proposed`
    /// event, then (when the admission is decided in the same step) the events that walk
    /// allowed edges from `proposed` to `new.state`. A second pathway with the same
    /// idempotency key fails with a unique violation ([`PgError::is_unique_violation`]).
    pub fn insert_pathway(&self, new: NewPathway, events: Vec<EventDraft>) -> Result<(), PgError> {
        self.write(|tx| insert_tx(tx, &new, events))
    }

    /// Applies one step in one transaction; returns the new version.
    ///
    /// As on SQLite: the pathway's rows must be what its events establish
    /// ([`StoreError::Unexplained`]); the compare-and-set on state, version and digests
    /// ([`StoreError::Conflict`]); a new attempt only after the previous one certainly did
    /// not take effect ([`StoreError::UnsettledAttempt`]); an approval is used once
    /// ([`StoreError::ApprovalUnusable`]). A refusal writes nothing.
    ///
    /// And the fence: a step that records an attempt's dispatch outcome while that attempt
    /// is no longer in flight (its lease lapsed and another host took it over) is refused
    /// with [`PgError::Fenced`], and the refusal is recorded instead, in the same
    /// transaction: an event `late_outcome_refused` (the pathway's state unchanged, the
    /// attempt's row unchanged, the late status and evidence in its data).
    pub fn apply(&self, step: Step) -> Result<i64, PgError> {
        walk_edges(
            step.expected_state,
            &step.events,
            step.to.unwrap_or(step.expected_state),
        )?;
        let fenced = self.write(|tx| apply_tx(tx, &step))?;
        match fenced {
            None => Ok(step.expected_version + 1),
            Some((attempt, status, recorded_seq)) => Err(PgError::Fenced {
                pathway: step.pathway,
                attempt,
                status,
                recorded_seq,
            }),
        }
    }

    /// Records a granted approval (and its ledger event) without changing state, provided
    /// the pathway is still in `expected` at `version` with these digests (else
    /// [`StoreError::Conflict`]).
    // Same shape as `Backend::grant_approval` (src/store/mod.rs): the same flat record.
    #[expect(
        clippy::too_many_arguments,
        reason = "the Backend method's flat record: the fence, the approvals row and its event"
    )]
    pub fn grant_approval(
        &self,
        pathway: &str,
        expected: State,
        version: i64,
        fence: &Fence,
        id: &str,
        request_digest: &str,
        approver: &str,
        at: i64,
        event: EventDraft,
    ) -> Result<(), PgError> {
        self.write(|tx| {
            let (state, stored_version) = lock_pathway(tx, pathway)?;
            check_pathway(tx, pathway)?;
            let digests = tx.query_one(
                "SELECT definition_digest = $2 AND request_digest = $3 FROM pathways WHERE id = $1",
                &[&pathway, &fence.definition_digest, &fence.request_digest],
            )?;
            if state != expected.as_str() || stored_version != version || !digests.get::<_, bool>(0)
            {
                return Err(StoreError::Conflict {
                    pathway: pathway.to_owned(),
                    expected,
                    version,
                }
                .into());
            }
            tx.execute(
                "INSERT INTO approvals (id, pathway_id, request_digest, approver, granted_at) VALUES ($1, $2, $3, $4, $5)",
                &[&id, &pathway, &request_digest, &approver, &at],
            )?;
            ledger::append(tx, pathway, at, vec![event])?;
            Ok(())
        })
    }
}

// Same shape as the SQLite step (`Backend::apply` in src/store/sqlite*) and as the Start
// record in types.rs: the same writes through another driver (`$n` parameters, `postgres`
// types), each attempt field named in the pattern and again in the insert. One
// implementation once the store is generic over its connection (the wiring into Runtime).
/// The writes of an accepted step, after the row check: compare-and-set, attempt,
/// approval, events.
fn write_step(tx: &mut Tx<'_>, step: &Step) -> Result<(), PgError> {
    let new_state = step.to.unwrap_or(step.expected_state);
    let changed = tx.execute(
        "UPDATE pathways SET state = $1, version = version + 1, updated_at = $2
         WHERE id = $3 AND state = $4 AND version = $5 AND definition_digest = $6 AND request_digest = $7",
        &[
            &new_state.as_str(),
            &step.at,
            &step.pathway,
            &step.expected_state.as_str(),
            &step.expected_version,
            &step.fence.definition_digest,
            &step.fence.request_digest,
        ],
    )?;
    if changed != 1 {
        return Err(StoreError::Conflict {
            pathway: step.pathway.clone(),
            expected: step.expected_state,
            version: step.expected_version,
        }
        .into());
    }
    match &step.attempt {
        Some(AttemptWrite::Start {
            id,
            seq,
            previous,
            request,
            request_digest,
            binding,
            binding_digest,
            owner,
            lease_ms,
            carrier,
        }) => {
            // At most once (brief §11): a new attempt only after the previous one certainly
            // did not take effect, whatever the caller's handle says.
            let last: Option<(String, String)> = tx
                .query_opt(
                    "SELECT id, status FROM attempts WHERE pathway_id = $1 ORDER BY seq DESC LIMIT 1",
                    &[&step.pathway],
                )?
                .map(|r| (r.get(0), r.get(1)));
            match (&last, previous) {
                (None, None) => {}
                (Some((last_id, status)), Some(prev))
                    if last_id == prev && SETTLED.contains(&status.as_str()) => {}
                (Some((last_id, status)), _) => {
                    return Err(StoreError::UnsettledAttempt {
                        pathway: step.pathway.clone(),
                        attempt: last_id.clone(),
                        status: status.clone(),
                    }
                    .into());
                }
                (None, Some(prev)) => {
                    return Err(StoreError::Unexplained {
                        pathway: step.pathway.clone(),
                        detail: format!("the previous attempt {prev} does not exist"),
                    }
                    .into());
                }
            }
            tx.execute(
                concat!(
                    "INSERT INTO attempts (id, pathway_id, seq, previous_attempt, request, request_digest, binding,
                                           binding_digest, status, owner, lease_until, carrier, created_at, updated_at)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'in_flight', $9, ",
                    db_clock_ms!(),
                    " + $10, $11, $12, $12)"
                ),
                &[
                    id,
                    &step.pathway,
                    seq,
                    previous,
                    request,
                    request_digest,
                    binding,
                    binding_digest,
                    owner,
                    lease_ms,
                    carrier,
                    &step.at,
                ],
            )?;
        }
        Some(AttemptWrite::Finish {
            id,
            status,
            outcome,
        }) => {
            let n = tx.execute(
                "UPDATE attempts SET status = $1, owner = NULL, lease_until = NULL,
                        outcome = coalesce($2, outcome), updated_at = $3
                 WHERE id = $4 AND pathway_id = $5",
                &[status, outcome, &step.at, id, &step.pathway],
            )?;
            if n != 1 {
                return Err(StoreError::Corrupt(format!(
                    "attempt {id} of pathway {} is missing",
                    step.pathway
                ))
                .into());
            }
        }
        None => {}
    }
    match &step.approval {
        Some(ApprovalWrite::Use { id, request_digest }) => {
            let n = tx.execute(
                "UPDATE approvals SET used_at = $1
                 WHERE id = $2 AND pathway_id = $3 AND request_digest = $4
                   AND used_at IS NULL AND revoked_at IS NULL",
                &[&step.at, id, &step.pathway, request_digest],
            )?;
            if n != 1 {
                return Err(StoreError::ApprovalUnusable(id.clone()).into());
            }
        }
        Some(ApprovalWrite::RevokeOutstanding) => {
            tx.execute(
                "UPDATE approvals SET revoked_at = $1
                 WHERE pathway_id = $2 AND used_at IS NULL AND revoked_at IS NULL",
                &[&step.at, &step.pathway],
            )?;
        }
        None => {}
    }
    ledger::append(tx, &step.pathway, step.at, step.events.clone())?;
    Ok(())
}

/// Records, instead of a step, that the dispatch outcome it carried came too late: the
/// attempt is `now` (no longer in flight). The pathway's state stays; its version moves, as
/// for any recorded event. Returns the event's `seq`.
#[expect(
    clippy::too_many_arguments,
    reason = "the refused step and what is known about its attempt, recorded in one event"
)]
fn refuse_late_outcome(
    tx: &mut Tx<'_>,
    step: &Step,
    state: &str,
    attempt: &str,
    status: &str,
    outcome: Option<&str>,
    actor: &str,
    now: &str,
) -> Result<i64, PgError> {
    let state: State = state
        .parse()
        .map_err(|e| StoreError::Corrupt(format!("pathway {}: {e}", step.pathway)))?;
    let evidence: Value = match outcome {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| StoreError::Corrupt(format!("late outcome: {e}")))?,
        None => Value::Null,
    };
    tx.execute(
        "UPDATE pathways SET version = version + 1, updated_at = $1 WHERE id = $2",
        &[&step.at, &step.pathway],
    )?;
    let event = EventDraft {
        kind: "late_outcome_refused",
        actor: actor.to_owned(),
        from: Some(state),
        to: state,
        attempt: Some(attempt.to_owned()),
        attempt_status: None,
        data: json!({
            "reason": "the attempt was no longer in flight (its lease lapsed and it was taken over): its late outcome is not recorded",
            "attempt_status_now": now,
            "late_status": status,
            "late_evidence": evidence,
            "expected_state": step.expected_state.as_str(),
            "expected_version": step.expected_version,
        }),
    };
    ledger::append(tx, &step.pathway, step.at, vec![event])
}

/// Refuses a first set of events that does not start with `proposed` and walk allowed
/// edges to `state` (checked before any transaction).
fn check_insert(events: &[EventDraft], state: State) -> Result<(), StoreError> {
    match events.split_first() {
        Some((first, rest)) if first.from.is_none() && first.to == State::Proposed => {
            walk_edges(State::Proposed, rest, state)?;
        }
        _ => {
            return Err(StoreError::IllegalEdge {
                from: State::Proposed,
                to: state,
            });
        }
    }
    Ok(())
}

/// The new pathway's row and its first events, inside the caller's transaction.
pub(super) fn insert_tx(
    tx: &mut Tx<'_>,
    new: &NewPathway,
    events: Vec<EventDraft>,
) -> Result<(), PgError> {
    check_insert(&events, new.state)?;
    tx.execute(
        "INSERT INTO pathways (id, idempotency_key, definition, definition_digest, request_digest, state,
                               version, proposer, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)",
        &[
            &new.id,
            &new.idempotency_key,
            &new.definition,
            &new.definition_digest,
            &new.request_digest,
            &new.state.as_str(),
            &new.version,
            &new.proposer,
            &new.at,
        ],
    )?;
    ledger::append(tx, &new.id, new.at, events)?;
    Ok(())
}

/// One step inside the caller's transaction: the row lock and check, the fence, the writes.
/// `Some((attempt, status, seq))` when a late outcome was refused and recorded instead.
pub(super) fn apply_tx(
    tx: &mut Tx<'_>,
    step: &Step,
) -> Result<Option<(String, String, i64)>, PgError> {
    let (state, _) = lock_pathway(tx, &step.pathway)?;
    check_pathway(tx, &step.pathway)?;
    if let Some((attempt, status, outcome, actor)) = dispatch_outcome(step) {
        let now: Option<String> = tx
            .query_opt(
                "SELECT status FROM attempts WHERE id = $1 AND pathway_id = $2 FOR UPDATE",
                &[&attempt, &step.pathway],
            )?
            .map(|r| r.get(0));
        // An attempt this pathway never had: refused, and nothing recorded (an event
        // naming it would leave the pathway's chain unexplained).
        let now = now.ok_or_else(|| {
            StoreError::Corrupt(format!(
                "attempt {attempt} of pathway {} is missing",
                step.pathway
            ))
        })?;
        if now != AttemptStatus::InFlight.as_str() {
            let seq = refuse_late_outcome(tx, step, &state, attempt, status, outcome, actor, &now)?;
            return Ok(Some((attempt.to_owned(), now, seq)));
        }
    }
    write_step(tx, step)?;
    Ok(None)
}
