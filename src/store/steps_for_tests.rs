//! Steps as the typestate layer builds them, for the store's unit tests on every backend
//! (`store::rules`' tests on SQLite, `store::pg`'s on PostgreSQL): a new pathway, its
//! events, the write-ahead record of an attempt and its outcome.

use serde_json::{Value, json};

use crate::canonical::{sha256_hex_bytes, to_string};
use crate::store::{AttemptWrite, EventDraft, Fence, NewPathway, Step};
use crate::{AttemptStatus, State};

/// A pathway as a handle would hold it.
#[derive(Debug, Clone)]
pub(crate) struct Pw {
    pub(crate) id: String,
    pub(crate) fence: Fence,
    pub(crate) state: State,
    pub(crate) version: i64,
}

pub(crate) fn request(key: &str) -> Value {
    json!({"action": "write", "args": {"key": key}})
}

pub(crate) fn ev(kind: &str, actor: &str, from: State, to: State, data: Value) -> EventDraft {
    EventDraft {
        kind: kind.parse().unwrap(),
        actor: actor.into(),
        from: Some(from),
        to,
        attempt: None,
        attempt_status: None,
        data,
    }
}

pub(crate) fn attempt_ev(mut e: EventDraft, attempt: &str, status: AttemptStatus) -> EventDraft {
    e.attempt = Some(attempt.into());
    e.attempt_status = Some(status.as_str());
    e
}

/// A new pathway's row and its `proposed` and `admitted` events, not yet written.
pub(crate) fn new_pathway(key: &str, state: State, at: i64) -> (NewPathway, Vec<EventDraft>, Pw) {
    let definition = json!({"idempotency_key": key, "request": request(key)});
    let text = to_string(&definition).unwrap();
    let definition_digest = sha256_hex_bytes(text.as_bytes());
    let request_digest = sha256_hex_bytes(to_string(&request(key)).unwrap().as_bytes());
    let id = format!("pw_{key}");
    let proposed = EventDraft {
        kind: crate::ledger::EventKind::Proposed,
        actor: "agent".into(),
        from: None,
        to: State::Proposed,
        attempt: None,
        attempt_status: None,
        data: json!({
            "idempotency_key": key,
            "definition_digest": definition_digest,
            "definition_text_digest": definition_digest,
            "request_digest": request_digest,
        }),
    };
    let admitted = ev("admitted", "policy", State::Proposed, state, json!({}));
    (
        NewPathway {
            id: id.clone(),
            idempotency_key: key.into(),
            definition: text,
            definition_digest: definition_digest.clone(),
            request_digest: request_digest.clone(),
            proposer: "agent".into(),
            at,
            state,
            version: 2,
            one_open: None,
        },
        vec![proposed, admitted],
        Pw {
            id,
            fence: Fence {
                definition_digest,
                request_digest,
            },
            state,
            version: 2,
        },
    )
}

pub(crate) fn step(pw: &Pw, to: Option<State>, events: Vec<EventDraft>, at: i64) -> Step {
    Step {
        pathway: pw.id.clone(),
        expected_state: pw.state,
        expected_version: pw.version,
        fence: pw.fence.clone(),
        to,
        events,
        attempt: None,
        approval: None,
        at,
    }
}

/// The write-ahead record of attempt `attempt` (number `seq`, after `previous`), from the
/// pathway's state to `running`.
pub(crate) fn start_step(
    pw: &Pw,
    attempt: &str,
    seq: i64,
    previous: Option<&str>,
    owner: &str,
    lease_ms: i64,
    at: i64,
) -> Step {
    let key = pw.id.trim_start_matches("pw_");
    let request_text = to_string(&request(key)).unwrap();
    let binding = to_string(&json!({"server": "files", "tool": "write"})).unwrap();
    let binding_digest = sha256_hex_bytes(binding.as_bytes());
    let started = attempt_ev(
        ev(
            "attempt_started",
            "agent",
            pw.state,
            State::Running,
            json!({
                "seq": seq,
                "previous_attempt": previous,
                "binding_digest": binding_digest,
                "request_digest": pw.fence.request_digest,
                "request_text_digest": sha256_hex_bytes(request_text.as_bytes()),
                "owner": owner,
                "carrier": null,
            }),
        ),
        attempt,
        AttemptStatus::InFlight,
    );
    let mut s = step(pw, Some(State::Running), vec![started], at);
    s.attempt = Some(AttemptWrite::Start {
        id: attempt.into(),
        seq,
        previous: previous.map(str::to_owned),
        request: request_text,
        request_digest: pw.fence.request_digest.clone(),
        binding,
        binding_digest,
        owner: owner.into(),
        lease_ms,
        carrier: None,
    });
    s
}

/// The dispatch outcome of `attempt` (`kind`, `status`), moving a running pathway to `to`.
pub(crate) fn outcome_step(
    pw: &Pw,
    attempt: &str,
    kind: &'static str,
    status: AttemptStatus,
    to: State,
    evidence: &Value,
    at: i64,
) -> Step {
    let e = attempt_ev(
        ev(
            kind,
            "agent",
            State::Running,
            to,
            json!({"evidence": evidence}),
        ),
        attempt,
        status,
    );
    let mut s = step(pw, (to != pw.state).then_some(to), vec![e], at);
    s.attempt = Some(AttemptWrite::Finish {
        id: attempt.into(),
        status: status.as_str(),
        outcome: Some(to_string(evidence).unwrap()),
    });
    s
}
