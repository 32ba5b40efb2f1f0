//! The steps: `Backend` for SQLite. Each step is one [`Unit`] (a savepoint in its batch's
//! transaction) that checks the events walk allowed edges, compare-and-sets the pathway,
//! writes its attempt or approval row and appends its ledger events.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::super::check::{Replay, SETTLED, check_pathway};
use super::super::{
    ApprovalWrite, AttemptWrite, Backend, EventDraft, Fence, NewPathway, Step, StoreError,
};
use super::{DB_NOW_MS, SqliteBackend, Unit};
use crate::state::State;

/// Refuses a step whose events do not walk allowed edges from the expected state to
/// the new one (one edge, or several in one step such as `proposed -> awaiting_approval
/// -> human_gate`).
fn check_edges(step: &Step) -> Result<(), StoreError> {
    walk_edges(
        step.expected_state,
        &step.events,
        step.to.unwrap_or(step.expected_state),
    )
}

/// Refuses events that do not walk allowed edges from `start` to `end`.
fn walk_edges(start: State, events: &[EventDraft], end: State) -> Result<(), StoreError> {
    let mut at = start;
    for event in events {
        let from = event.from.unwrap_or(at);
        if from != at || (event.to != at && !at.allows(event.to)) {
            return Err(StoreError::IllegalEdge { from, to: event.to });
        }
        at = event.to;
    }
    if at != end {
        return Err(StoreError::IllegalEdge { from: at, to: end });
    }
    Ok(())
}

/// Refuses a new pathway whose events do not start with the proposal and then walk
/// allowed edges to the stored state.
fn check_new_edges(state: State, events: &[EventDraft]) -> Result<(), StoreError> {
    match events.split_first() {
        Some((first, rest)) if first.from.is_none() && first.to == State::Proposed => {
            walk_edges(State::Proposed, rest, state)
        }
        _ => Err(StoreError::IllegalEdge {
            from: State::Proposed,
            to: state,
        }),
    }
}

impl Backend for SqliteBackend {
    fn insert_pathway(&self, new: NewPathway, events: Vec<EventDraft>) -> Result<(), StoreError> {
        let tx = Unit::begin(self)?;
        insert_rows(&tx, new, events)?;
        tx.commit()
    }

    fn apply(&self, step: Step) -> Result<i64, StoreError> {
        let tx = Unit::begin(self)?;
        if let Some(fenced) = refuse_late_outcome(&tx, &step)? {
            // The refusal is recorded: its unit commits, and the caller learns it was fenced.
            tx.commit()?;
            return Err(fenced);
        }
        let version = apply_rows(&tx, step)?;
        tx.commit()?;
        Ok(version)
    }

    // Same shape as Backend::insert_and_apply in store/mod.rs: its declaration.
    fn insert_and_apply(
        &self,
        new: NewPathway,
        events: Vec<EventDraft>,
        step: Step,
    ) -> Result<i64, StoreError> {
        // One unit: a refused step leaves no pathway behind.
        let tx = Unit::begin(self)?;
        insert_rows(&tx, new, events)?;
        let version = apply_rows(&tx, step)?;
        tx.commit()?;
        Ok(version)
    }

    // Same shape as Backend::grant_approval in store/mod.rs: its declaration.
    fn grant_approval(
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
    ) -> Result<(), StoreError> {
        let tx = Unit::begin(self)?;
        if check_pathway(&tx, pathway)?.is_none() {
            return Err(StoreError::NoSuchPathway(pathway.to_owned()));
        }
        // Fenced like every step: a stale handle must not record a grant for a stage the pathway left.
        let current: i64 = tx.query_row(
            "SELECT count(*) FROM pathways WHERE id = ?1 AND state = ?2 AND version = ?3
               AND definition_digest = ?4 AND request_digest = ?5",
            params![
                pathway,
                expected.as_str(),
                version,
                fence.definition_digest,
                fence.request_digest
            ],
            |r| r.get(0),
        )?;
        if current != 1 {
            return Err(StoreError::Conflict {
                pathway: pathway.to_owned(),
                expected,
                version,
            });
        }
        tx.execute(
            "INSERT INTO approvals (id, pathway_id, request_digest, approver, granted_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, pathway, request_digest, approver, at],
        )?;
        Self::append_event(&tx, pathway, at, event)?;
        tx.commit()?;
        Ok(())
    }

    fn database_id(&self) -> &str {
        &self.database_id
    }

    fn check_pathway(&self, id: &str) -> Result<Replay, StoreError> {
        let tx = rusqlite::Transaction::new_unchecked(self.conn(), TransactionBehavior::Deferred)?;
        let found = check_pathway(&tx, id)?;
        tx.commit()?;
        found.ok_or_else(|| StoreError::NoSuchPathway(id.to_owned()))
    }

    fn now_ms(&self) -> Result<i64, StoreError> {
        Ok(self
            .conn()
            .query_row(&format!("SELECT {DB_NOW_MS}"), [], |r| r.get(0))?)
    }

    /// Checks a binding against its tool pin, in its own unit of the batch.
    fn check_pin(
        &self,
        candidate: &crate::store::pins::Candidate,
        by: &str,
        at: i64,
    ) -> Result<crate::store::PinCheck, StoreError> {
        let tx = Unit::begin(self)?;
        let found = crate::store::pins::check(&tx, candidate, by, at)?;
        tx.commit()?;
        Ok(found)
    }

    /// Pins the seen binding `digest` of `server`/`tool`, in its own unit of the batch.
    fn accept_pin(
        &self,
        server: &str,
        tool: &str,
        digest: &str,
        by: &str,
        at: i64,
    ) -> Result<crate::store::PinRecord, StoreError> {
        let tx = Unit::begin(self)?;
        let pin = crate::store::pins::accept(&tx, server, tool, digest, by, at)?;
        tx.commit()?;
        Ok(pin)
    }
}

/// A new pathway's row and its events (inside the caller's unit).
fn insert_rows(
    tx: &Connection,
    new: NewPathway,
    events: Vec<EventDraft>,
) -> Result<(), StoreError> {
    check_new_edges(new.state, &events)?;
    tx.prepare_cached(
        "INSERT INTO pathways (id, idempotency_key, definition, definition_digest, request_digest, state, version,
                               proposer, created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9)",
    )?
    .execute(params![
            new.id,
            new.idempotency_key,
            new.definition,
            new.definition_digest,
            new.request_digest,
            new.state.as_str(),
            new.version,
            new.proposer,
            new.at
        ])?;
    for event in events {
        SqliteBackend::append_event(tx, &new.id, new.at, event)?;
    }
    Ok(())
}

/// The fence, as on PostgreSQL: a step that records an attempt's dispatch outcome while that
/// attempt is no longer in flight (its owner's lease lapsed and it was taken over) is
/// refused, and the refusal is recorded instead, in the caller's unit: an event
/// `late_outcome_refused` carrying the late status and evidence, the pathway's state and the
/// attempt's row unchanged, its version moved. The owner's outcome is evidence: it tells who
/// may still send (it no longer does) and it voids any verdict made before it. Returns the
/// error to give the caller, or `None` for any other step.
fn refuse_late_outcome(tx: &Connection, step: &Step) -> Result<Option<StoreError>, StoreError> {
    let Some(AttemptWrite::Finish {
        id,
        status,
        outcome,
    }) = &step.attempt
    else {
        return Ok(None);
    };
    let Some(actor) = step
        .events
        .iter()
        .find(|e| e.attempt.as_deref() == Some(id.as_str()) && e.kind.starts_with("attempt_"))
        .map(|e| e.actor.clone())
    else {
        return Ok(None);
    };
    let now: Option<String> = tx
        .prepare_cached("SELECT status FROM attempts WHERE id = ?1 AND pathway_id = ?2")?
        .query_row(params![id, step.pathway], |r| r.get(0))
        .optional()?;
    // In flight (every outcome in time), or an attempt this pathway never had: the step
    // goes on, and is checked and refused there as before (nothing recorded for a missing
    // attempt: an event naming it would leave the pathway's chain unexplained).
    let Some(now) = now.filter(|s| s != crate::state::AttemptStatus::InFlight.as_str()) else {
        return Ok(None);
    };
    // The rows the refusal relies on must be the ones the chain explains.
    if check_pathway(tx, &step.pathway)?.is_none() {
        return Err(StoreError::NoSuchPathway(step.pathway.clone()));
    }
    let state: String = tx
        .prepare_cached("SELECT state FROM pathways WHERE id = ?1")?
        .query_row(params![step.pathway], |r| r.get(0))?;
    let state: State = state
        .parse()
        .map_err(|e| StoreError::Corrupt(format!("pathway {}: {e}", step.pathway)))?;
    let evidence: serde_json::Value = match outcome {
        Some(text) => serde_json::from_str(text)
            .map_err(|e| StoreError::Corrupt(format!("late outcome: {e}")))?,
        None => serde_json::Value::Null,
    };
    tx.prepare_cached("UPDATE pathways SET version = version + 1, updated_at = ?1 WHERE id = ?2")?
        .execute(params![step.at, step.pathway])?;
    let event = EventDraft {
        kind: "late_outcome_refused",
        actor,
        from: Some(state),
        to: state,
        attempt: Some(id.clone()),
        attempt_status: None,
        data: serde_json::json!({
            "reason": "the attempt was no longer in flight (its lease lapsed and it was taken over): its late outcome is not recorded",
            "attempt_status_now": now,
            "late_status": status,
            "late_evidence": evidence,
            "expected_state": step.expected_state.as_str(),
            "expected_version": step.expected_version,
        }),
    };
    SqliteBackend::append_event(tx, &step.pathway, step.at, event)?;
    let recorded_seq: i64 = tx
        .prepare_cached("SELECT max(seq) FROM ledger")?
        .query_row([], |r| r.get(0))?;
    Ok(Some(StoreError::Fenced {
        pathway: step.pathway.clone(),
        attempt: id.clone(),
        status: now,
        recorded_seq,
    }))
}

/// One step's writes (inside the caller's unit); the new version.
fn apply_rows(tx: &Connection, step: Step) -> Result<i64, StoreError> {
    check_edges(&step)?;
    // The rows this step relies on must be the ones the chain explains.
    if check_pathway(tx, &step.pathway)?.is_none() {
        return Err(StoreError::NoSuchPathway(step.pathway));
    }
    let new_state = step.to.unwrap_or(step.expected_state);
    let changed = tx
        .prepare_cached(
            "UPDATE pathways SET state = ?1, version = version + 1, updated_at = ?2
             WHERE id = ?3 AND state = ?4 AND version = ?5 AND definition_digest = ?6 AND request_digest = ?7",
        )?
        .execute(params![
            new_state.as_str(),
            step.at,
            step.pathway,
            step.expected_state.as_str(),
            step.expected_version,
            step.fence.definition_digest,
            step.fence.request_digest,
        ])?;
    if changed != 1 {
        return Err(StoreError::Conflict {
            pathway: step.pathway,
            expected: step.expected_state,
            version: step.expected_version,
        });
    }
    match step.attempt {
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
            // At most once (brief §11): a new attempt only after the previous one
            // certainly did not take effect, whatever the caller's handle says.
            let last: Option<(String, String)> = tx
                .prepare_cached(
                    "SELECT id, status FROM attempts WHERE pathway_id = CAST(?1 AS TEXT) ORDER BY seq DESC LIMIT 1",
                )?
                .query_row(params![step.pathway], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            match (&last, &previous) {
                (None, None) => {}
                (Some((last_id, status)), Some(prev))
                    if last_id == prev && SETTLED.contains(&status.as_str()) => {}
                (Some((last_id, status)), _) => {
                    return Err(StoreError::UnsettledAttempt {
                        pathway: step.pathway,
                        attempt: last_id.clone(),
                        status: status.clone(),
                    });
                }
                (None, Some(prev)) => {
                    return Err(StoreError::Unexplained {
                        pathway: step.pathway,
                        detail: format!("the previous attempt {prev} does not exist"),
                    });
                }
            }
            tx.prepare_cached(&format!(
                "INSERT INTO attempts (id, pathway_id, seq, previous_attempt, request, request_digest, binding,
                                       binding_digest, status, owner, lease_until, carrier, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'in_flight', ?9, {DB_NOW_MS} + ?10, ?11, ?12, ?12)"
            ))?
            // Same shape as the destructuring of AttemptWrite::Start above: its fields, bound.
            .execute(params![
                id,
                step.pathway,
                seq,
                previous,
                request,
                request_digest,
                binding,
                binding_digest,
                owner,
                lease_ms,
                carrier,
                step.at
            ])?;
        }
        Some(AttemptWrite::Finish {
            id,
            status,
            outcome,
        }) => {
            let n = tx
                .prepare_cached(
                    "UPDATE attempts SET status = ?1, owner = NULL, lease_until = NULL,
                            outcome = coalesce(?2, outcome), updated_at = ?3
                     WHERE id = ?4 AND pathway_id = ?5",
                )?
                .execute(params![status, outcome, step.at, id, step.pathway])?;
            if n != 1 {
                return Err(StoreError::Corrupt(format!(
                    "attempt {id} of pathway {} is missing",
                    step.pathway
                )));
            }
        }
        None => {}
    }
    match step.approval {
        Some(ApprovalWrite::Use { id, request_digest }) => {
            let n = tx.execute(
                "UPDATE approvals SET used_at = ?1
                 WHERE id = ?2 AND pathway_id = ?3 AND request_digest = ?4
                   AND used_at IS NULL AND revoked_at IS NULL",
                params![step.at, id, step.pathway, request_digest],
            )?;
            if n != 1 {
                return Err(StoreError::ApprovalUnusable(id));
            }
        }
        Some(ApprovalWrite::RevokeOutstanding) => {
            tx.execute(
                "UPDATE approvals SET revoked_at = ?1
                 WHERE pathway_id = ?2 AND used_at IS NULL AND revoked_at IS NULL",
                params![step.at, step.pathway],
            )?;
        }
        None => {}
    }
    for event in step.events {
        SqliteBackend::append_event(tx, &step.pathway, step.at, event)?;
    }
    Ok(step.expected_version + 1)
}
