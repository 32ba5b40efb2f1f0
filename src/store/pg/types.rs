//! What a step writes, as public records.
//!
//! These are the crate-internal `store::Step`, `NewPathway`, `EventDraft`, `Fence`,
//! `AttemptWrite` and `ApprovalWrite`, field for field, made public so that
//! `tests/pg/pg_store.rs` can drive [`super::PgBackend`] before it is wired into
//! [`crate::Runtime`]. Each converts from its crate-internal twin (`From`), which is how the
//! `Backend` implementation will hand its steps over; once the suites run through
//! `Runtime` on both stores, these records can become crate-internal again.

use serde_json::Value;

use crate::state::State;

/// A new pathway row (its events are passed beside it).
#[derive(Debug, Clone)]
pub struct NewPathway {
    /// Pathway id.
    pub id: String,
    /// The caller's idempotency key (unique).
    pub idempotency_key: String,
    /// Canonical JSON of the redacted definition.
    pub definition: String,
    /// sha256 of the unredacted canonical definition.
    pub definition_digest: String,
    /// sha256 of the unredacted canonical request.
    pub request_digest: String,
    /// Who proposed it.
    pub proposer: String,
    /// When, ms since the epoch, by the caller's clock (evidence, never a lease).
    pub at: i64,
    /// The stored state: `proposed`, or where the admission in the same step moved it.
    pub state: State,
    /// The compare-and-set counter: 1 per step the insert stands for.
    pub version: i64,
}

/// What a step holds the stored pathway to besides state and version.
#[derive(Debug, Clone)]
pub struct Fence {
    /// The stored definition digest.
    pub definition_digest: String,
    /// The stored request digest.
    pub request_digest: String,
}

/// A ledger event to append; `seq` and the hashes are the store's.
#[derive(Debug, Clone)]
pub struct EventDraft {
    /// Event kind (`proposed`, `admitted`, `attempt_started`, …).
    pub kind: &'static str,
    /// Who acted.
    pub actor: String,
    /// From (`None` only for the proposal).
    pub from: Option<State>,
    /// To (the same state for an event that records evidence only).
    pub to: State,
    /// The attempt it concerns.
    pub attempt: Option<String>,
    /// The attempt's status after it.
    pub attempt_status: Option<&'static str>,
    /// Kind-specific data.
    pub data: Value,
}

// Same shape as `store::AttemptWrite`: its public twin (see the module's doc).
/// The attempt part of a step.
#[derive(Debug, Clone)]
pub enum AttemptWrite {
    /// The write-ahead record, committed before anything is sent.
    Start {
        /// Attempt id.
        id: String,
        /// 1, 2, … within the pathway.
        seq: i64,
        /// The attempt this one follows (it must have certainly settled).
        previous: Option<String>,
        /// Canonical JSON of the redacted request.
        request: String,
        /// sha256 of the unredacted request.
        request_digest: String,
        /// Canonical JSON of the binding.
        binding: String,
        /// sha256 of `binding`.
        binding_digest: String,
        /// The owner that will carry it.
        owner: String,
        /// How long the lease runs, from now by the database's clock.
        lease_ms: i64,
        /// The process that may carry the request (canonical JSON), if known.
        carrier: Option<String>,
    },
    /// The attempt's outcome (or a later verdict on it).
    Finish {
        /// Attempt id.
        id: String,
        /// Its new status.
        status: &'static str,
        /// Canonical JSON evidence of the outcome, if this step records one.
        outcome: Option<String>,
    },
}

/// The approval part of a step.
#[derive(Debug, Clone)]
pub enum ApprovalWrite {
    /// Consume a granted approval (once).
    Use {
        /// Approval id.
        id: String,
        /// The request it must be bound to.
        request_digest: String,
    },
    /// Void every granted, unused approval of the pathway (it entered a Human Gate).
    RevokeOutstanding,
}

// Same shape as `store::Step` and the read records: its public twin (see the module's doc).
/// One step: everything written in one transaction.
#[derive(Debug, Clone)]
pub struct Step {
    /// Pathway id.
    pub pathway: String,
    /// The state the caller's handle is in.
    pub expected_state: State,
    /// The version the caller's handle holds.
    pub expected_version: i64,
    /// The digests the stored pathway must have.
    pub fence: Fence,
    /// The new state; `None` records events without changing it.
    pub to: Option<State>,
    /// The events, in order.
    pub events: Vec<EventDraft>,
    /// The attempt written, if any.
    pub attempt: Option<AttemptWrite>,
    /// The approval written, if any.
    pub approval: Option<ApprovalWrite>,
    /// When, ms since the epoch, by the caller's clock (evidence, never a lease).
    pub at: i64,
}

/// A tool binding to check against its pin, or to pin.
#[derive(Debug, Clone)]
pub struct PinCandidate {
    /// The server's name in the gate's policy.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// The binding digest.
    pub digest: String,
    /// Canonical JSON of the binding details.
    pub binding: String,
    /// Canonical JSON of the tool definition.
    pub definition: String,
}

impl From<crate::store::NewPathway> for NewPathway {
    fn from(n: crate::store::NewPathway) -> Self {
        let crate::store::NewPathway {
            id,
            idempotency_key,
            definition,
            definition_digest,
            request_digest,
            proposer,
            at,
            state,
            version,
        } = n;
        Self {
            id,
            idempotency_key,
            definition,
            definition_digest,
            request_digest,
            proposer,
            at,
            state,
            version,
        }
    }
}

impl From<crate::store::Fence> for Fence {
    fn from(f: crate::store::Fence) -> Self {
        Self {
            definition_digest: f.definition_digest,
            request_digest: f.request_digest,
        }
    }
}

impl From<crate::store::EventDraft> for EventDraft {
    fn from(e: crate::store::EventDraft) -> Self {
        let crate::store::EventDraft {
            kind,
            actor,
            from,
            to,
            attempt,
            attempt_status,
            data,
        } = e;
        Self {
            kind,
            actor,
            from,
            to,
            attempt,
            attempt_status,
            data,
        }
    }
}

// Same shape as the write in step.rs and as itself: each field named in the pattern, then in
// the constructor (a field-for-field twin has nothing else to say).
impl From<crate::store::AttemptWrite> for AttemptWrite {
    fn from(a: crate::store::AttemptWrite) -> Self {
        match a {
            crate::store::AttemptWrite::Start {
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
            } => Self::Start {
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
            },
            crate::store::AttemptWrite::Finish {
                id,
                status,
                outcome,
            } => Self::Finish {
                id,
                status,
                outcome,
            },
        }
    }
}

impl From<crate::store::ApprovalWrite> for ApprovalWrite {
    fn from(a: crate::store::ApprovalWrite) -> Self {
        match a {
            crate::store::ApprovalWrite::Use { id, request_digest } => {
                Self::Use { id, request_digest }
            }
            crate::store::ApprovalWrite::RevokeOutstanding => Self::RevokeOutstanding,
        }
    }
}

impl From<crate::store::Step> for Step {
    fn from(s: crate::store::Step) -> Self {
        Self {
            pathway: s.pathway,
            expected_state: s.expected_state,
            expected_version: s.expected_version,
            fence: s.fence.into(),
            to: s.to,
            events: s.events.into_iter().map(Into::into).collect(),
            attempt: s.attempt.map(Into::into),
            approval: s.approval.map(Into::into),
            at: s.at,
        }
    }
}

impl From<crate::store::pins::Candidate> for PinCandidate {
    fn from(c: crate::store::pins::Candidate) -> Self {
        Self {
            server: c.server,
            tool: c.tool,
            digest: c.digest,
            binding: c.binding,
            definition: c.definition,
        }
    }
}
