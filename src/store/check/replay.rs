//! The replay: one pathway's events folded into the facts they establish, and those facts
//! compared with the stored rows.

use std::borrow::Cow;
use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::SETTLED;
use super::raw::{ApprovalRow, AttemptRow, PathwayRow, RawApproval, RawAttempt, RawPathway};
use crate::canonical::digest_hex;
use crate::ledger::ProblemKind;
use crate::state::State;
use crate::store::event::Event;

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
        let attempts: Vec<_> = attempts.iter().map(RawAttempt::view).collect();
        let approvals: Vec<_> = approvals.iter().map(RawApproval::view).collect();
        self.check_views(&row.view(), &attempts, &approvals, out);
    }

    /// [`Replay::check_rows`] over borrowed rows.
    pub(crate) fn check_views(
        &self,
        row: &PathwayRow<'_>,
        attempts: &[AttemptRow<'_>],
        approvals: &[ApprovalRow<'_>],
        out: &mut Vec<Finding>,
    ) {
        let mismatch = |what: &str| (ProblemKind::Unexplained, what.to_owned());
        if self.state.map(State::as_str) != Some(row.state) {
            out.push((
                ProblemKind::StateMismatch,
                format!("stored state {}, events end in {:?}", row.state, self.state),
            ));
        }
        match &self.proposal {
            None => out.push(mismatch("pathway has no proposal event")),
            Some(p) => {
                if p.idempotency_key.as_deref() != Some(row.idempotency_key) {
                    out.push(mismatch("stored idempotency key is not the proposal's"));
                }
                if p.definition_digest.as_deref() != Some(row.definition_digest) {
                    out.push(mismatch("stored definition digest is not the proposal's"));
                }
                if p.request_digest.as_deref() != Some(row.request_digest) {
                    out.push(mismatch("stored request digest is not the proposal's"));
                }
                if p.actor != row.proposer {
                    out.push(mismatch("stored proposer is not the proposal's actor"));
                }
                if p.at != row.created_at {
                    out.push(mismatch("stored creation time is not the proposal's"));
                }
                if let Some(d) = &p.definition_text_digest
                    && !is_sha256_of(d, row.definition, row.definition_sha256)
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
            if f.seq != Some(a.seq) || f.previous.as_deref() != a.previous_attempt {
                out.push(bad(
                    "stored sequence or previous attempt is not the chain's",
                ));
            }
            if f.request_digest.as_deref() != Some(a.request_digest) {
                out.push(bad("stored request digest is not the chain's"));
            }
            if f.binding_digest.as_deref() != Some(a.binding_digest)
                || !is_sha256_of(a.binding_digest, a.binding, a.binding_sha256)
            {
                out.push(bad("stored binding is not the one the chain recorded"));
            }
            if f.outcome.as_deref() != a.outcome {
                out.push(bad("stored outcome is not the chain's evidence"));
            }
            if f.at != a.created_at {
                out.push(bad("stored creation time is not the chain's"));
            }
            if f.v2 {
                if !f
                    .request_text_digest
                    .as_deref()
                    .is_some_and(|d| is_sha256_of(d, a.request, a.request_sha256))
                {
                    out.push(bad("stored request is not the one the chain recorded"));
                }
                let owner_ok = if a.status == "in_flight" {
                    a.owner == f.owner.as_deref()
                } else {
                    a.owner.is_none()
                };
                if !owner_ok {
                    out.push(bad("stored owner is not the chain's"));
                }
                if a.carrier != f.carrier.as_deref() {
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
            let Some(f) = self.approvals.get(a.id) else {
                out.push(mismatch(&format!(
                    "approval {} is stored but the chain never granted it",
                    a.id
                )));
                continue;
            };
            if f.request_digest.as_deref() != Some(a.request_digest)
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
            if !approvals.iter().any(|a| a.id == id) {
                out.push(mismatch(&format!(
                    "approval {id} is in the chain but its row is missing"
                )));
            }
        }
    }
}

/// Whether `hex` is the lowercase hex sha256 of `text`: compared with `computed` (that
/// hash, computed already) when given, else hashed here on the stack.
fn is_sha256_of(hex: &str, text: &str, computed: Option<&str>) -> bool {
    match computed {
        Some(computed) => computed == hex,
        None => digest_hex(&Sha256::digest(text.as_bytes()).into()) == hex.as_bytes(),
    }
}
