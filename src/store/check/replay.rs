//! The replay: one pathway's events folded into the facts they establish, and those facts
//! compared with the stored rows.

use std::borrow::Cow;

use sha2::{Digest, Sha256};

use super::raw::{ApprovalRow, AttemptRow, PathwayRow, RawApproval, RawAttempt, RawPathway};
use crate::canonical::digest_hex;
use crate::ledger::{EventKind, ProblemKind};
use crate::state::{AttemptStatus, State};
use crate::store::event::Event;

/// Where a fact's text is in the buffer of facts ([`Replay`]'s own, or the whole-store
/// check's): bytes `start..end`.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
}

fn get(text: &str, span: Span) -> &str {
    &text[span.start..span.end]
}

fn get_opt(text: &str, span: Option<Span>) -> Option<&str> {
    span.map(|span| get(text, span))
}

/// Appends `value` to `text`, returning where it is.
fn put(text: &mut String, value: &str) -> Span {
    let start = text.len();
    text.push_str(value);
    Span {
        start,
        end: text.len(),
    }
}

fn put_opt(text: &mut String, value: Option<&Cow<'_, str>>) -> Option<Span> {
    value.map(|v| put(text, v))
}

#[derive(Debug)]
struct Proposal {
    at: i64,
    actor: Span,
    idempotency_key: Option<Span>,
    definition_digest: Option<Span>,
    request_digest: Option<Span>,
    /// sha256 of the stored (redacted) definition text; events of version 2 on.
    definition_text_digest: Option<Span>,
}

#[derive(Debug)]
struct AttemptFacts {
    id: Span,
    at: i64,
    seq: Option<i64>,
    previous: Option<Span>,
    request_digest: Option<Span>,
    binding_digest: Option<Span>,
    /// Events of version 2 on: sha256 of the stored request text, the owner and the carrier.
    v2: bool,
    request_text_digest: Option<Span>,
    owner: Option<Span>,
    carrier: Option<Span>,
    status: Span,
    outcome: Option<Span>,
    /// Ended without a reply (lost, timed out, or its owner died): its carrier may still hold it.
    unanswered: bool,
}

#[derive(Debug)]
struct ApprovalFacts {
    id: Span,
    request_digest: Option<Span>,
    approver: Span,
    granted_at: i64,
    used_at: Option<i64>,
    revoked_at: Option<i64>,
}

/// The facts one pathway's events establish, folded one event at a time, their texts
/// kept in a buffer the caller gives: the whole-store check keeps every pathway's in one
/// (one growing allocation instead of a dozen strings per pathway, which were most of
/// the check's allocations and page faults); [`Replay`] keeps its own.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    state: Option<State>,
    proposal: Option<Proposal>,
    attempts: Vec<AttemptFacts>,
    /// In the order granted; a second grant of one id replaces the first.
    approvals: Vec<ApprovalFacts>,
}

/// The facts of one pathway with their own buffer of texts.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    facts: Facts,
    text: String,
}

/// A problem found while replaying: its kind and what is wrong.
pub(crate) type Finding = (ProblemKind, String);

impl Replay {
    /// Folds one event's fields into the facts, reporting what it breaks.
    pub(crate) fn event(&mut self, event: &Event<'_>, out: &mut Vec<Finding>) {
        self.facts.event(&mut self.text, event, out);
    }

    /// The recorded carrier of `attempt` (canonical JSON) if the attempt ended without a
    /// reply: that process may still hold the request.
    pub(crate) fn unanswered_carrier(&self, attempt: &str) -> Option<&str> {
        let text = self.text.as_str();
        self.facts
            .attempts
            .iter()
            .find(|a| get(text, a.id) == attempt && a.unanswered)
            .and_then(|a| get_opt(text, a.carrier))
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
        self.facts
            .check_views(&self.text, &row.view(), &attempts, &approvals, out);
    }
}

impl Facts {
    /// Folds one event's fields into the facts (their texts appended to `text`),
    /// reporting what it breaks.
    pub(crate) fn event(&mut self, text: &mut String, event: &Event<'_>, out: &mut Vec<Finding>) {
        let from = event.from.as_deref().map(str::parse::<State>);
        let to = event.to.as_deref().map(str::parse::<State>);
        match (self.state, from, to) {
            (None, None, Some(Ok(State::Proposed))) => self.state = Some(State::Proposed),
            (Some(cur), Some(Ok(f)), Some(Ok(t))) if f == cur && (f == t || f.allows(t)) => {
                if t == State::HumanGate && f != State::HumanGate {
                    // Entering a Human Gate voids approvals given before it.
                    for a in &mut self.approvals {
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
        let kind = match event.kind.as_deref().map(str::parse::<EventKind>) {
            Some(Ok(kind)) => kind,
            Some(Err(e)) => {
                out.push((ProblemKind::Unreadable, format!("event kind {e}")));
                return;
            }
            None => {
                out.push((ProblemKind::Unreadable, "event without a kind".into()));
                return;
            }
        };
        let at = event.at.unwrap_or(i64::MIN);
        let v2 = event.v.unwrap_or(1) >= 2;
        let actor = event.actor.as_deref().unwrap_or_default();
        let data = &event.data;
        match kind {
            EventKind::Proposed => {
                if self.proposal.is_some() {
                    out.push((
                        ProblemKind::IllegalTransition,
                        "a second proposal event".into(),
                    ));
                }
                self.proposal = Some(Proposal {
                    at,
                    actor: put(text, actor),
                    idempotency_key: put_opt(text, data.idempotency_key.as_ref()),
                    definition_digest: put_opt(text, data.definition_digest.as_ref()),
                    request_digest: put_opt(text, data.request_digest.as_ref()),
                    definition_text_digest: v2.then(|| {
                        put(
                            text,
                            data.definition_text_digest.as_deref().unwrap_or_default(),
                        )
                    }),
                });
            }
            EventKind::AttemptStarted => {
                self.attempt_started(text, event, at, v2, out);
                return;
            }
            EventKind::ApprovalGranted => {
                let Some(id) = data.approval.as_deref() else {
                    out.push((
                        ProblemKind::Unexplained,
                        "approval event without an id".into(),
                    ));
                    return;
                };
                let digest = data.request_digest.as_deref();
                if digest != self.request_digest(text) {
                    out.push((
                        ProblemKind::Unexplained,
                        format!("approval {id} is for another request than the proposal's"),
                    ));
                }
                let granted = ApprovalFacts {
                    id: put(text, id),
                    request_digest: digest.map(|d| put(text, d)),
                    approver: put(text, actor),
                    granted_at: at,
                    used_at: None,
                    revoked_at: None,
                };
                if let Some(at) = self.approvals.iter().position(|a| get(text, a.id) == id) {
                    self.approvals[at] = granted;
                } else {
                    if self.approvals.is_empty() {
                        self.approvals.reserve_exact(1);
                    }
                    self.approvals.push(granted);
                }
            }
            EventKind::Approved => {
                let id = data.approval.as_deref().unwrap_or_default();
                let proposal_digest = self.request_digest(text);
                match self.approvals.iter_mut().find(|a| get(text, a.id) == id) {
                    Some(a)
                        if a.used_at.is_none()
                            && a.revoked_at.is_none()
                            && get(text, a.approver) == actor
                            && data.request_digest.as_deref() == get_opt(text, a.request_digest)
                            && get_opt(text, a.request_digest) == proposal_digest =>
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
            // What these establish is their state change (above) and, for the attempt
            // they name, its status and evidence (below).
            EventKind::Admitted
            | EventKind::HumanGate
            | EventKind::Denied
            | EventKind::Escalated
            | EventKind::Held
            | EventKind::Released
            | EventKind::Aborted
            | EventKind::DispatchRefused
            | EventKind::AttemptNotSent
            | EventKind::AttemptUnknown
            | EventKind::AttemptReturned
            | EventKind::AttemptCompleted
            | EventKind::AttemptFailed
            | EventKind::AttemptPartial
            | EventKind::AttemptRejected
            | EventKind::Readback
            | EventKind::Stopped
            | EventKind::RepairRequired
            | EventKind::Reconciled
            | EventKind::Repaired
            | EventKind::RecoveredUnknown
            | EventKind::LateOutcomeRefused => {}
        }
        if let Some(attempt) = event.attempt.as_deref() {
            match self
                .attempts
                .iter_mut()
                .find(|a| get(text, a.id) == attempt)
            {
                Some(a) => {
                    if kind == EventKind::RecoveredUnknown
                        || (kind == EventKind::AttemptUnknown
                            && !data
                                .evidence
                                .as_deref()
                                .is_some_and(answered_with_tool_error))
                    {
                        a.unanswered = true;
                    }
                    if let Some(s) = &event.attempt_status
                        && get(text, a.status) != s.as_ref()
                    {
                        a.status = put(text, s);
                    }
                    if kind.is_dispatch_outcome()
                        && let Some(evidence) = &data.evidence
                    {
                        a.outcome = Some(put(text, evidence));
                    }
                }
                None => out.push((
                    ProblemKind::Unexplained,
                    format!("event names attempt {attempt}, which the chain never started"),
                )),
            }
        }
    }

    fn request_digest<'t>(&self, text: &'t str) -> Option<&'t str> {
        self.proposal
            .as_ref()
            .and_then(|p| get_opt(text, p.request_digest))
    }

    fn attempt_started(
        &mut self,
        text: &mut String,
        event: &Event<'_>,
        at: i64,
        v2: bool,
        out: &mut Vec<Finding>,
    ) {
        let Some(id) = event.attempt.as_deref() else {
            out.push((
                ProblemKind::Unexplained,
                "attempt event without an id".into(),
            ));
            return;
        };
        let data = &event.data;
        let previous = data.previous_attempt.as_deref();
        match self.attempts.last() {
            None if previous.is_none() => {}
            Some(last) if previous == Some(get(text, last.id)) => {
                let status = get(text, last.status);
                if !status.parse::<AttemptStatus>().is_ok_and(AttemptStatus::is_settled) {
                    out.push((
                        ProblemKind::IllegalTransition,
                        format!(
                            "attempt {id} started while attempt {} had ended {status} (no not-applied verdict between them)",
                            get(text, last.id)
                        ),
                    ));
                }
            }
            last => out.push((
                ProblemKind::IllegalTransition,
                format!(
                    "attempt {id} names previous attempt {previous:?}, but the last attempt is {:?}",
                    last.map(|a| get(text, a.id))
                ),
            )),
        }
        let request_digest = data.request_digest.as_deref();
        if request_digest != self.request_digest(text) {
            out.push((
                ProblemKind::Unexplained,
                format!("attempt {id} sends another request than the proposal's"),
            ));
        }
        let facts = AttemptFacts {
            id: put(text, id),
            at,
            seq: data.seq,
            previous: previous.map(|p| put(text, p)),
            request_digest: request_digest.map(|d| put(text, d)),
            binding_digest: put_opt(text, data.binding_digest.as_ref()),
            v2,
            request_text_digest: put_opt(text, data.request_text_digest.as_ref()),
            owner: put_opt(text, data.owner.as_ref()),
            carrier: put_opt(text, data.carrier.as_ref()),
            status: put(text, event.attempt_status.as_deref().unwrap_or_default()),
            outcome: None,
            unanswered: false,
        };
        if self.attempts.is_empty() {
            // Most pathways make one attempt: room for one, not the four `push` makes.
            self.attempts.reserve_exact(1);
        }
        self.attempts.push(facts);
    }

    /// [`Replay::check_rows`] over borrowed rows, with the facts' texts in `text`.
    pub(crate) fn check_views(
        &self,
        text: &str,
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
                if get_opt(text, p.idempotency_key) != Some(row.idempotency_key) {
                    out.push(mismatch("stored idempotency key is not the proposal's"));
                }
                if get_opt(text, p.definition_digest) != Some(row.definition_digest) {
                    out.push(mismatch("stored definition digest is not the proposal's"));
                }
                if get_opt(text, p.request_digest) != Some(row.request_digest) {
                    out.push(mismatch("stored request digest is not the proposal's"));
                }
                if get(text, p.actor) != row.proposer {
                    out.push(mismatch("stored proposer is not the proposal's actor"));
                }
                if p.at != row.created_at {
                    out.push(mismatch("stored creation time is not the proposal's"));
                }
                if let Some(d) = get_opt(text, p.definition_text_digest)
                    && !is_sha256_of(d, row.definition)
                {
                    out.push(mismatch("stored definition is not the one proposed"));
                }
            }
        }
        for a in attempts {
            let Some(f) = self.attempts.iter().find(|f| get(text, f.id) == a.id) else {
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
            if get(text, f.status) != a.status {
                out.push((
                    ProblemKind::AttemptMismatch,
                    format!(
                        "attempt {} stored as {}, events say {:?}",
                        a.id,
                        a.status,
                        get(text, f.status)
                    ),
                ));
            }
            if f.seq != Some(a.seq) || get_opt(text, f.previous) != a.previous_attempt {
                out.push(bad(
                    "stored sequence or previous attempt is not the chain's",
                ));
            }
            if get_opt(text, f.request_digest) != Some(a.request_digest) {
                out.push(bad("stored request digest is not the chain's"));
            }
            if get_opt(text, f.binding_digest) != Some(a.binding_digest)
                || !is_sha256_of(a.binding_digest, a.binding)
            {
                out.push(bad("stored binding is not the one the chain recorded"));
            }
            if get_opt(text, f.outcome) != a.outcome {
                out.push(bad("stored outcome is not the chain's evidence"));
            }
            if f.at != a.created_at {
                out.push(bad("stored creation time is not the chain's"));
            }
            if f.v2 {
                if !get_opt(text, f.request_text_digest).is_some_and(|d| is_sha256_of(d, a.request))
                {
                    out.push(bad("stored request is not the one the chain recorded"));
                }
                let owner_ok = if a.status == "in_flight" {
                    a.owner == get_opt(text, f.owner)
                } else {
                    a.owner.is_none()
                };
                if !owner_ok {
                    out.push(bad("stored owner is not the chain's"));
                }
                if a.carrier != get_opt(text, f.carrier) {
                    out.push(bad("stored carrier is not the chain's"));
                }
            }
        }
        for f in &self.attempts {
            let id = get(text, f.id);
            if !attempts.iter().any(|a| a.id == id) {
                out.push((
                    ProblemKind::AttemptMismatch,
                    format!("attempt {id} is in the chain but its row is missing"),
                ));
            }
        }
        for a in approvals {
            let Some(f) = self.approvals.iter().find(|f| get(text, f.id) == a.id) else {
                out.push(mismatch(&format!(
                    "approval {} is stored but the chain never granted it",
                    a.id
                )));
                continue;
            };
            if get_opt(text, f.request_digest) != Some(a.request_digest)
                || get(text, f.approver) != a.approver
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
        for f in &self.approvals {
            let id = get(text, f.id);
            if !approvals.iter().any(|a| a.id == id) {
                out.push(mismatch(&format!(
                    "approval {id} is in the chain but its row is missing"
                )));
            }
        }
    }
}

/// Whether `hex` is the lowercase hex sha256 of `text` (hashed here, on the stack).
fn is_sha256_of(hex: &str, text: &str) -> bool {
    digest_hex(&Sha256::digest(text.as_bytes()).into()) == hex.as_bytes()
}

/// Whether an `attempt_unknown` event's evidence (canonical text) is a tool error the
/// server answered a write with: unknown in its effect, but answered, so the server holds
/// the request no more, as after any reply. Its process (a gate's server serves other
/// calls) is then not killed by a later verdict.
fn answered_with_tool_error(evidence: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(evidence).is_ok_and(|e| {
        e["reason"] == crate::pathway::transitions::TOOL_ERROR_PROVES_NOTHING
            && e.get("reply").is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::Replay;
    use crate::ledger::ProblemKind;
    use crate::store::event::{Event, Reading};

    fn replay(texts: &[&str]) -> Vec<super::Finding> {
        let mut replay = Replay::default();
        let mut findings = Vec::new();
        for text in texts {
            let (Reading::Canonical(event) | Reading::NotCanonical(event)) = Event::read(text)
            else {
                panic!("not JSON: {text}");
            };
            replay.event(&event, &mut findings);
        }
        findings
    }

    #[test]
    fn an_event_kind_that_is_none_of_the_ledgers_is_a_finding_not_skipped() {
        let proposed = r#"{"v":2,"seq":1,"at":1,"pathway":"pw_a","kind":"proposed","actor":"a","from":null,"to":"proposed","attempt":null,"attempt_status":null,"data":{}}"#;
        assert!(replay(&[proposed]).is_empty());
        let odd = r#"{"v":2,"seq":2,"at":2,"pathway":"pw_a","kind":"approved_by_magic","actor":"a","from":"proposed","to":"proposed","attempt":null,"attempt_status":null,"data":{}}"#;
        let findings = replay(&[proposed, odd]);
        assert_eq!(findings.len(), 1, "{findings:?}");
        assert_eq!(findings[0].0, ProblemKind::Unreadable);
        assert!(findings[0].1.contains("approved_by_magic"), "{findings:?}");
    }
}
