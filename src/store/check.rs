//! One pathway's stored rows against its own ledger events.
//!
//! This is the rule that ties every row a step reads to the chain: [`Replay`] folds one
//! pathway's events into the facts they establish (state, proposal digests, each attempt's
//! request, binding, owner, carrier, status and outcome, each approval's grant, use and
//! revocation), and [`Replay::check_rows`] compares the stored rows with those facts.
//!
//! Two drivers use it: every step and every load (through [`check_pathway`], over that
//! pathway's events only, inside the step's transaction or one read snapshot), and
//! [`crate::ledger::verify`] (over the whole chain, after checking the links).

use std::collections::HashMap;

use std::borrow::Cow;

use rusqlite::{Connection, OptionalExtension, params};

use super::StoreError;
use super::event::{Event, Reading};
use crate::canonical::sha256_hex_bytes;
use crate::ledger::{ProblemKind, chain_hash};
use crate::state::{AttemptStatus, State};

/// The stored names of the attempt statuses after which the request certainly did not take
/// effect ([`AttemptStatus::is_settled`]): only after one of these may a new attempt start
/// (brief §11).
pub(crate) const SETTLED: &[&str] = &[
    AttemptStatus::NotSent.as_str(),
    AttemptStatus::Failed.as_str(),
    AttemptStatus::NotApplied.as_str(),
];

/// Event kinds that record a dispatch's outcome (and set the attempt's `outcome` column).
const OUTCOME_KINDS: &[&str] = &[
    "attempt_not_sent",
    "attempt_unknown",
    "attempt_returned",
    "attempt_completed",
    "attempt_failed",
    "attempt_partial",
    "attempt_rejected",
];

/// A pathway row exactly as stored.
#[derive(Debug)]
pub(crate) struct RawPathway {
    pub(crate) id: String,
    pub(crate) idempotency_key: String,
    pub(crate) definition: String,
    pub(crate) definition_digest: String,
    pub(crate) request_digest: String,
    pub(crate) state: String,
    pub(crate) proposer: String,
    pub(crate) created_at: i64,
}

/// An attempt row exactly as stored.
#[derive(Debug)]
pub(crate) struct RawAttempt {
    pub(crate) id: String,
    pub(crate) pathway_id: String,
    pub(crate) seq: i64,
    pub(crate) previous_attempt: Option<String>,
    pub(crate) request: String,
    pub(crate) request_digest: String,
    pub(crate) binding: String,
    pub(crate) binding_digest: String,
    pub(crate) status: String,
    pub(crate) owner: Option<String>,
    pub(crate) outcome: Option<String>,
    pub(crate) carrier: Option<String>,
    pub(crate) created_at: i64,
}

/// An approval row exactly as stored.
#[derive(Debug)]
pub(crate) struct RawApproval {
    pub(crate) id: String,
    pub(crate) pathway_id: String,
    pub(crate) request_digest: String,
    pub(crate) approver: String,
    pub(crate) granted_at: i64,
    pub(crate) used_at: Option<i64>,
    pub(crate) revoked_at: Option<i64>,
}

pub(crate) const PATHWAY_COLUMNS: &str = "id, idempotency_key, definition, definition_digest, request_digest, state, proposer, created_at";
pub(crate) const ATTEMPT_COLUMNS: &str = "id, pathway_id, seq, previous_attempt, request, request_digest, binding, binding_digest, status, owner, outcome, carrier, created_at";
pub(crate) const APPROVAL_COLUMNS: &str =
    "id, pathway_id, request_digest, approver, granted_at, used_at, revoked_at";

pub(crate) fn raw_pathway(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawPathway> {
    Ok(RawPathway {
        id: r.get(0)?,
        idempotency_key: r.get(1)?,
        definition: r.get(2)?,
        definition_digest: r.get(3)?,
        request_digest: r.get(4)?,
        state: r.get(5)?,
        proposer: r.get(6)?,
        created_at: r.get(7)?,
    })
}

pub(crate) fn raw_attempt(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawAttempt> {
    Ok(RawAttempt {
        id: r.get(0)?,
        pathway_id: r.get(1)?,
        seq: r.get(2)?,
        previous_attempt: r.get(3)?,
        request: r.get(4)?,
        request_digest: r.get(5)?,
        binding: r.get(6)?,
        binding_digest: r.get(7)?,
        status: r.get(8)?,
        owner: r.get(9)?,
        outcome: r.get(10)?,
        carrier: r.get(11)?,
        created_at: r.get(12)?,
    })
}

pub(crate) fn raw_approval(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawApproval> {
    Ok(RawApproval {
        id: r.get(0)?,
        pathway_id: r.get(1)?,
        request_digest: r.get(2)?,
        approver: r.get(3)?,
        granted_at: r.get(4)?,
        used_at: r.get(5)?,
        revoked_at: r.get(6)?,
    })
}

#[derive(Debug)]
struct Proposal {
    at: i64,
    actor: String,
    idempotency_key: Option<String>,
    definition_digest: Option<String>,
    request_digest: Option<String>,
    /// sha256 of the stored (redacted) definition text; events of version 2 on.
    definition_text_digest: Option<String>,
}

#[derive(Debug)]
struct AttemptFacts {
    id: String,
    at: i64,
    seq: Option<i64>,
    previous: Option<String>,
    request_digest: Option<String>,
    binding_digest: Option<String>,
    /// Events of version 2 on: sha256 of the stored request text, the owner and the carrier.
    v2: bool,
    request_text_digest: Option<String>,
    owner: Option<String>,
    carrier: Option<String>,
    status: String,
    outcome: Option<String>,
    /// Ended without a reply (lost, timed out, or its owner died): its carrier may still hold it.
    unanswered: bool,
}

#[derive(Debug)]
struct ApprovalFacts {
    request_digest: Option<String>,
    approver: String,
    granted_at: i64,
    used_at: Option<i64>,
    revoked_at: Option<i64>,
}

/// The facts one pathway's events establish, folded one event at a time.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    pub(crate) state: Option<State>,
    proposal: Option<Proposal>,
    attempts: Vec<AttemptFacts>,
    approvals: HashMap<String, ApprovalFacts>,
}

/// A problem found while replaying: its kind and what is wrong.
pub(crate) type Finding = (ProblemKind, String);

fn owned(field: Option<&Cow<'_, str>>) -> Option<String> {
    field.map(|f| f.as_ref().to_owned())
}

impl Replay {
    /// Folds one event's fields into the facts, reporting what it breaks.
    pub(crate) fn event(&mut self, event: &Event<'_>, out: &mut Vec<Finding>) {
        let from = event.from.as_deref().map(str::parse::<State>);
        let to = event.to.as_deref().map(str::parse::<State>);
        match (self.state, from, to) {
            (None, None, Some(Ok(State::Proposed))) => self.state = Some(State::Proposed),
            (Some(cur), Some(Ok(f)), Some(Ok(t))) if f == cur && (f == t || f.allows(t)) => {
                if t == State::HumanGate && f != State::HumanGate {
                    // Entering a Human Gate voids approvals given before it.
                    for a in self.approvals.values_mut() {
                        if a.used_at.is_none() && a.revoked_at.is_none() {
                            a.revoked_at = event.at;
                        }
                    }
                }
                self.state = Some(t);
            }
            (cur, f, t) => out.push((
                ProblemKind::IllegalTransition,
                format!("event moves {f:?} -> {t:?} but the pathway was in {cur:?}"),
            )),
        }
        let kind = event.kind.as_deref().unwrap_or("");
        let at = event.at.unwrap_or(i64::MIN);
        let v2 = event.v.unwrap_or(1) >= 2;
        let actor = event.actor.as_deref().unwrap_or_default();
        let data = &event.data;
        match kind {
            "proposed" => {
                if self.proposal.is_some() {
                    out.push((
                        ProblemKind::IllegalTransition,
                        "a second proposal event".into(),
                    ));
                }
                self.proposal = Some(Proposal {
                    at,
                    actor: actor.to_owned(),
                    idempotency_key: owned(data.idempotency_key.as_ref()),
                    definition_digest: owned(data.definition_digest.as_ref()),
                    request_digest: owned(data.request_digest.as_ref()),
                    definition_text_digest: if v2 {
                        Some(owned(data.definition_text_digest.as_ref()).unwrap_or_default())
                    } else {
                        None
                    },
                });
            }
            "attempt_started" => self.attempt_started(event, at, v2, out),
            "approval_granted" => {
                let Some(id) = owned(data.approval.as_ref()) else {
                    out.push((
                        ProblemKind::Unexplained,
                        "approval event without an id".into(),
                    ));
                    return;
                };
                let digest = owned(data.request_digest.as_ref());
                if digest != self.request_digest() {
                    out.push((
                        ProblemKind::Unexplained,
                        format!("approval {id} is for another request than the proposal's"),
                    ));
                }
                self.approvals.insert(
                    id,
                    ApprovalFacts {
                        request_digest: digest,
                        approver: actor.to_owned(),
                        granted_at: at,
                        used_at: None,
                        revoked_at: None,
                    },
                );
            }
            "approved" => {
                let id = data.approval.as_deref().unwrap_or_default();
                let proposal_digest = self.request_digest();
                match self.approvals.get_mut(id) {
                    Some(a)
                        if a.used_at.is_none()
                            && a.revoked_at.is_none()
                            && a.approver == actor
                            && data.request_digest.as_deref() == a.request_digest.as_deref()
                            && a.request_digest == proposal_digest =>
                    {
                        a.used_at = Some(at);
                    }
                    _ => out.push((
                        ProblemKind::Unexplained,
                        format!(
                            "approved with approval {id:?}, which the chain does not show granted, unused and unrevoked for this request by {actor}"
                        ),
                    )),
                }
            }
            _ => {}
        }
        if kind == "attempt_started" {
            return;
        }
        if let Some(attempt) = event.attempt.as_deref() {
            let outcome = if OUTCOME_KINDS.contains(&kind) {
                owned(data.evidence.as_ref())
            } else {
                None
            };
            match self.attempts.iter_mut().find(|a| a.id == attempt) {
                Some(a) => {
                    if matches!(kind, "attempt_unknown" | "recovered_unknown") {
                        a.unanswered = true;
                    }
                    if let Some(s) = &event.attempt_status {
                        s.as_ref().clone_into(&mut a.status);
                    }
                    if outcome.is_some() {
                        a.outcome = outcome;
                    }
                }
                None => out.push((
                    ProblemKind::Unexplained,
                    format!("event names attempt {attempt}, which the chain never started"),
                )),
            }
        }
    }

    /// The recorded carrier of `attempt` (canonical JSON) if the attempt ended without a
    /// reply: that process may still hold the request.
    pub(crate) fn unanswered_carrier(&self, attempt: &str) -> Option<&str> {
        self.attempts
            .iter()
            .find(|a| a.id == attempt && a.unanswered)
            .and_then(|a| a.carrier.as_deref())
    }

    fn request_digest(&self) -> Option<String> {
        self.proposal
            .as_ref()
            .and_then(|p| p.request_digest.clone())
    }

    fn attempt_started(&mut self, event: &Event<'_>, at: i64, v2: bool, out: &mut Vec<Finding>) {
        let Some(id) = owned(event.attempt.as_ref()) else {
            out.push((
                ProblemKind::Unexplained,
                "attempt event without an id".into(),
            ));
            return;
        };
        let data = &event.data;
        let previous = owned(data.previous_attempt.as_ref());
        match self.attempts.last() {
            None if previous.is_none() => {}
            Some(last) if previous.as_deref() == Some(last.id.as_str()) => {
                if !SETTLED.contains(&last.status.as_str()) {
                    out.push((
                        ProblemKind::IllegalTransition,
                        format!(
                            "attempt {id} started while attempt {} had ended {} (no not-applied verdict between them)",
                            last.id, last.status
                        ),
                    ));
                }
            }
            last => out.push((
                ProblemKind::IllegalTransition,
                format!(
                    "attempt {id} names previous attempt {previous:?}, but the last attempt is {:?}",
                    last.map(|a| &a.id)
                ),
            )),
        }
        let request_digest = owned(data.request_digest.as_ref());
        if request_digest != self.request_digest() {
            out.push((
                ProblemKind::Unexplained,
                format!("attempt {id} sends another request than the proposal's"),
            ));
        }
        self.attempts.push(AttemptFacts {
            id,
            at,
            seq: data.seq,
            previous,
            request_digest,
            binding_digest: owned(data.binding_digest.as_ref()),
            v2,
            request_text_digest: owned(data.request_text_digest.as_ref()),
            owner: owned(data.owner.as_ref()),
            carrier: owned(data.carrier.as_ref()),
            status: owned(event.attempt_status.as_ref()).unwrap_or_default(),
            outcome: None,
            unanswered: false,
        });
    }

    /// Compares the stored rows of this pathway with the facts of its events.
    pub(crate) fn check_rows(
        &self,
        row: &RawPathway,
        attempts: &[RawAttempt],
        approvals: &[RawApproval],
        out: &mut Vec<Finding>,
    ) {
        let mismatch = |what: &str| (ProblemKind::Unexplained, what.to_owned());
        if self.state.map(State::as_str) != Some(row.state.as_str()) {
            out.push((
                ProblemKind::StateMismatch,
                format!("stored state {}, events end in {:?}", row.state, self.state),
            ));
        }
        match &self.proposal {
            None => out.push(mismatch("pathway has no proposal event")),
            Some(p) => {
                if p.idempotency_key.as_deref() != Some(row.idempotency_key.as_str()) {
                    out.push(mismatch("stored idempotency key is not the proposal's"));
                }
                if p.definition_digest.as_deref() != Some(row.definition_digest.as_str()) {
                    out.push(mismatch("stored definition digest is not the proposal's"));
                }
                if p.request_digest.as_deref() != Some(row.request_digest.as_str()) {
                    out.push(mismatch("stored request digest is not the proposal's"));
                }
                if p.actor != row.proposer {
                    out.push(mismatch("stored proposer is not the proposal's actor"));
                }
                if p.at != row.created_at {
                    out.push(mismatch("stored creation time is not the proposal's"));
                }
                if let Some(d) = &p.definition_text_digest
                    && *d != sha256_hex_bytes(row.definition.as_bytes())
                {
                    out.push(mismatch("stored definition is not the one proposed"));
                }
            }
        }
        for a in attempts {
            let Some(f) = self.attempts.iter().find(|f| f.id == a.id) else {
                out.push((
                    ProblemKind::AttemptMismatch,
                    format!("attempt {} is stored but the chain never started it", a.id),
                ));
                continue;
            };
            let bad = |what: &str| {
                (
                    ProblemKind::AttemptMismatch,
                    format!("attempt {}: {what}", a.id),
                )
            };
            if f.status != a.status {
                out.push((
                    ProblemKind::AttemptMismatch,
                    format!(
                        "attempt {} stored as {}, events say {:?}",
                        a.id, a.status, f.status
                    ),
                ));
            }
            if f.seq != Some(a.seq) || f.previous != a.previous_attempt {
                out.push(bad(
                    "stored sequence or previous attempt is not the chain's",
                ));
            }
            if f.request_digest.as_deref() != Some(a.request_digest.as_str()) {
                out.push(bad("stored request digest is not the chain's"));
            }
            if f.binding_digest.as_deref() != Some(a.binding_digest.as_str())
                || sha256_hex_bytes(a.binding.as_bytes()) != a.binding_digest
            {
                out.push(bad("stored binding is not the one the chain recorded"));
            }
            if f.outcome != a.outcome {
                out.push(bad("stored outcome is not the chain's evidence"));
            }
            if f.at != a.created_at {
                out.push(bad("stored creation time is not the chain's"));
            }
            if f.v2 {
                if f.request_text_digest.as_deref()
                    != Some(sha256_hex_bytes(a.request.as_bytes()).as_str())
                {
                    out.push(bad("stored request is not the one the chain recorded"));
                }
                let owner_ok = if a.status == "in_flight" {
                    a.owner == f.owner
                } else {
                    a.owner.is_none()
                };
                if !owner_ok {
                    out.push(bad("stored owner is not the chain's"));
                }
                if a.carrier != f.carrier {
                    out.push(bad("stored carrier is not the chain's"));
                }
            }
        }
        for f in &self.attempts {
            if !attempts.iter().any(|a| a.id == f.id) {
                out.push((
                    ProblemKind::AttemptMismatch,
                    format!("attempt {} is in the chain but its row is missing", f.id),
                ));
            }
        }
        for a in approvals {
            let Some(f) = self.approvals.get(&a.id) else {
                out.push(mismatch(&format!(
                    "approval {} is stored but the chain never granted it",
                    a.id
                )));
                continue;
            };
            if f.request_digest.as_deref() != Some(a.request_digest.as_str())
                || f.approver != a.approver
                || f.granted_at != a.granted_at
                || f.used_at != a.used_at
                || f.revoked_at != a.revoked_at
            {
                out.push(mismatch(&format!(
                    "approval {} is not stored as the chain recorded it",
                    a.id
                )));
            }
        }
        for id in self.approvals.keys() {
            if !approvals.iter().any(|a| &a.id == id) {
                out.push(mismatch(&format!(
                    "approval {id} is in the chain but its row is missing"
                )));
            }
        }
    }
}

/// One pathway's events in order.
///
/// `CAST(?1 AS TEXT)`, not `?1`: with `ORDER BY`, SQLite's planner makes a statement that
/// compares a column with a bare parameter depend on the parameter's value (its `expmask`),
/// and rusqlite clears the bindings of every statement it returns to its cache, which
/// expires such a statement: each use was compiled again (8% of a step's CPU at 64 in
/// flight). The cast keeps the index and the order, and the statement stays compiled
/// (`cached_statements_with_ordered_lookups_are_not_recompiled`). The same holds for every
/// ordered per-pathway lookup in `src/store`.
pub(crate) const LEDGER_OF_PATHWAY: &str = "SELECT seq, event, prev_hash, hash FROM ledger WHERE pathway_id = CAST(?1 AS TEXT) ORDER BY seq";

/// Checks one pathway's rows against its own events (each event's own hash, the replay, every
/// row). Runs inside whatever transaction `conn` is in. `Ok(None)` when there is no such pathway.
pub(crate) fn check_pathway(conn: &Connection, id: &str) -> Result<Option<Replay>, StoreError> {
    let Some(row) = conn
        .prepare_cached(&format!(
            "SELECT {PATHWAY_COLUMNS} FROM pathways WHERE id = ?1"
        ))?
        .query_row(params![id], raw_pathway)
        .optional()?
    else {
        return Ok(None);
    };
    let mut findings = Vec::new();
    let mut replay = Replay::default();
    {
        let mut stmt = conn.prepare_cached(LEDGER_OF_PATHWAY)?;
        let mut rows = stmt.query(params![id])?;
        while let Some(r) = rows.next()? {
            let seq: i64 = r.get(0)?;
            let text: String = r.get(1)?;
            let prev: String = r.get(2)?;
            let hash: String = r.get(3)?;
            if chain_hash(&prev, &text) != hash {
                findings.push((
                    ProblemKind::HashMismatch,
                    format!("event {seq}: stored hash does not match the event"),
                ));
                continue;
            }
            let event = match Event::read(&text) {
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
    }
    let attempts = conn
        .prepare_cached(&format!(
            "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE pathway_id = CAST(?1 AS TEXT) ORDER BY seq"
        ))?
        .query_map(params![id], raw_attempt)?
        .collect::<Result<Vec<_>, _>>()?;
    let approvals = conn
        .prepare_cached(&format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE pathway_id = ?1"
        ))?
        .query_map(params![id], raw_approval)?
        .collect::<Result<Vec<_>, _>>()?;
    replay.check_rows(&row, &attempts, &approvals, &mut findings);
    match findings.into_iter().next() {
        None => Ok(Some(replay)),
        Some((_, detail)) => Err(StoreError::Unexplained {
            pathway: id.to_owned(),
            detail,
        }),
    }
}

#[cfg(test)]
mod recompile_tests {
    use rusqlite::{Connection, StatementStatus, params};

    #[test]
    fn cached_statements_with_ordered_lookups_are_not_recompiled() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(crate::store::SCHEMA_SQL).unwrap();
        for round in 0..5 {
            let mut stmt = conn.prepare_cached(super::LEDGER_OF_PATHWAY).unwrap();
            let n = stmt
                .query_map(params![format!("pw_{round}")], |r| r.get::<_, i64>(0))
                .unwrap()
                .count();
            assert_eq!(n, 0);
            assert_eq!(
                stmt.get_status(StatementStatus::RePrepare),
                0,
                "round {round}"
            );
        }
    }
}

#[cfg(test)]
mod settled_tests {
    use crate::state::AttemptStatus;

    #[test]
    fn settled_names_are_the_settled_statuses() {
        let settled: Vec<&str> = AttemptStatus::ALL
            .into_iter()
            .filter(|s| s.is_settled())
            .map(AttemptStatus::as_str)
            .collect();
        assert_eq!(settled, super::SETTLED);
    }
}
