//! The typestate responsibility pathway.
//!
//! A [`Pathway<S>`] is one consequential action on its way through the stages in
//! [`stage`]. Every transition is a method on the stage it leaves, takes `self` by
//! value, writes one step to the store, and returns the next stage. When a run-time
//! check refuses (wrong actor, wrong token, conflict, store failure), the pathway
//! comes back unchanged inside [`Refused`] (inside [`NotSent`] for `dispatch`).

mod authority;
mod outcome;
pub mod stage;
pub mod token;
pub(crate) mod transitions;

pub use crate::executor::ActionClass;
pub(crate) use crate::executor::request_json;
pub use authority::{Actor, ApprovalRule, Authority, Role};
pub use outcome::{
    Admission, Confirmed, NotSent, Outcome, ReadUnrecorded, StoredPathway, Unrecorded,
};
pub use transitions::{Act, BoundRead, TRANSITIONS};
pub(crate) use transitions::{admission, admission_events};

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::executor::Request;
use stage::Stage;

/// What a pathway is about: the request, its class, its idempotency key and its authority.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Definition {
    /// The request to carry out.
    pub request: Request,
    /// Read-only or mutating.
    pub class: ActionClass,
    /// The caller's key: the same key with the same content replays; different content conflicts.
    pub idempotency_key: String,
    /// Who holds which role.
    pub authority: Authority,
    /// Free-form metadata (redacted and bounded when stored).
    pub metadata: Value,
}

impl Definition {
    /// A definition with empty metadata.
    #[must_use]
    pub fn new(
        request: Request,
        class: ActionClass,
        idempotency_key: impl Into<String>,
        authority: Authority,
    ) -> Self {
        Self {
            request,
            class,
            idempotency_key: idempotency_key.into(),
            authority,
            metadata: Value::Null,
        }
    }

    /// Sets metadata.
    #[must_use]
    pub fn with_metadata(mut self, metadata: Value) -> Self {
        self.metadata = metadata;
        self
    }
}

/// What admission decides.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Decision {
    /// Admit now.
    Allow,
    /// Wait for an approval by the approval authority.
    Hold,
    /// Put it in front of a Human Gate.
    HumanGate,
    /// Refuse, with a reason.
    Deny(String),
}

/// An admission rule: any `Fn(&Definition) -> Decision`.
///
/// `Fn` is a supertrait, so a closure written where a rule is expected needs no type
/// annotation: `proposed.admit(&rt, &alice, &|_| Decision::Hold)`. A rule with state of its
/// own is a closure over it: the gate and `rpr call` admit by the plan an
/// [`rpr::policy::Policy`](crate::policy::Policy) gives (`&|_| plan.decision()`).
/// [`ALLOW_ALL`] admits everything.
pub trait Admit: Fn(&Definition) -> Decision {
    /// Decides what to do with a proposal.
    fn decide(&self, definition: &Definition) -> Decision {
        self(definition)
    }
}

impl<F: Fn(&Definition) -> Decision + ?Sized> Admit for F {}

/// The rule that admits every proposal ([`Decision::Allow`]).
pub const ALLOW_ALL: &dyn Admit = &|_| Decision::Allow;

/// What [`PathwayError::ApprovedAnotherBinding`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AnotherBinding {
    /// The pathway.
    pub pathway: String,
    /// The approval.
    pub approval: String,
    /// Who granted it.
    pub approver: Actor,
    /// The digest of the binding the approval recorded.
    pub approved: String,
    /// The digest of the binding the dispatch would use.
    pub bound: String,
    /// The state the dispatch was from (`approved` or `ready_to_resume`).
    pub from: crate::state::State,
}

impl AnotherBinding {
    /// What can be done, by the state the dispatch was from.
    fn what_now(&self) -> &'static str {
        if self.from == crate::state::State::ReadyToResume {
            "A repaired pathway has no way back to the Human Gate: send it to what it was approved for, or abort it and make the call again"
        } else {
            "Ask again: hold it and escalate it to the Human Gate"
        }
    }
}

/// What can refuse a pathway step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathwayError {
    /// The actor does not hold a role that this step needs. Nothing was written.
    #[error("{actor} may not {action}: it needs {needs}; ask that actor to do it")]
    NotAuthorized {
        /// Who tried.
        actor: Actor,
        /// What they tried.
        action: &'static str,
        /// The roles that may, as text.
        needs: String,
    },
    /// Storage failed or another process changed the pathway first.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// Evidence or a definition exceeded its bounds.
    #[error(transparent)]
    Evidence(#[from] crate::evidence::EvidenceError),
    /// A value could not be put in canonical form.
    #[error(transparent)]
    Canonical(#[from] crate::canonical::CanonicalError),
    /// The same idempotency key was used with different content.
    #[error(
        "idempotency key {key:?} is already used by pathway {existing} with different content; choose a new key"
    )]
    IdempotencyConflict {
        /// The key.
        key: String,
        /// The pathway that holds it.
        existing: String,
    },
    /// While this pathway was not stored yet ([`Runtime::propose_and_bind`](crate::Runtime::propose_and_bind)),
    /// another proposal of its idempotency key was stored first. This one was not stored
    /// and nothing was sent; proposing again replays the stored one.
    #[error(
        "idempotency key {key:?} was stored first by another proposal; this pathway was not stored and nothing was sent; propose again to get the stored one"
    )]
    KeyTaken {
        /// The key.
        key: String,
    },
    /// Fewer distinct approvers than the pathway's quorum have approved (an approval that
    /// expired, was used or was revoked does not count). Nothing was written.
    #[error(
        "pathway {pathway} has {have} of the {need} approvals it needs{}; it waits for {} more of: {}",
        if granted_by.is_empty() { String::new() } else { format!(" (approved by {})", names(granted_by)) },
        need - have,
        names(waiting_on)
    )]
    QuorumShort {
        /// The pathway.
        pathway: String,
        /// Distinct approvers whose approvals count now.
        have: u32,
        /// The quorum.
        need: u32,
        /// Who has approved.
        granted_by: Box<[Actor]>,
        /// Who may still approve.
        waiting_on: Box<[Actor]>,
    },
    /// The approval that approved this pathway is older than the approval rule's expiry.
    /// Nothing was written or sent; to ask again, hold the pathway and escalate it to the
    /// Human Gate.
    #[error(
        "the approval of pathway {pathway} expired at {}; nothing was sent. Ask again: hold it and escalate it to the Human Gate",
        crate::shown::utc(*expired_at)
    )]
    ApprovalExpired {
        /// The pathway.
        pathway: String,
        /// When it expired (ms since the Unix epoch).
        expired_at: i64,
    },
    /// An approval the pathway's last approval step used was given for another binding
    /// than the one it is bound to now ([`Runtime::grant_approval_of_binding`] recorded
    /// which): nobody approved sending it where it would go. Nothing was written or sent.
    /// An approved pathway can be asked again (hold it, escalate it to the Human Gate); a
    /// repaired one has no way back to the Human Gate: it is sent to what it was approved
    /// for, or aborted and its call made again.
    ///
    /// [`Runtime::grant_approval_of_binding`]: crate::Runtime::grant_approval_of_binding
    #[error(
        "approval {} of pathway {} by {} was of binding {}, and the call is bound to {} now: nobody approved sending it there; nothing was sent. {}",
        .0.approval, .0.pathway, .0.approver, .0.approved, .0.bound, .0.what_now()
    )]
    ApprovedAnotherBinding(Box<AnotherBinding>),
    /// The proposer tried to approve their own request, which the approval rule does not
    /// allow. Nothing was written.
    #[error(
        "{actor} proposed pathway {pathway} and may not approve it too; another approver must (the policy's approval.self_approval allows it)"
    )]
    SelfApproval {
        /// Who tried.
        actor: Actor,
        /// The pathway.
        pathway: String,
    },
    /// The approver's approval of this request is already recorded and still counts.
    /// Nothing was written.
    #[error(
        "{actor} has already approved pathway {pathway} (approval {approval}); another approver must approve"
    )]
    AlreadyApproved {
        /// Who tried.
        actor: Actor,
        /// The pathway.
        pathway: String,
        /// The approval already recorded.
        approval: String,
    },
    /// A token or approval for another pathway or attempt.
    #[error("token mismatch: {0}")]
    TokenMismatch(String),
    /// A reconciliation made before the pathway's latest recorded step or evidence (an
    /// owner's late outcome, another observation): what it saw may no longer hold. Nothing
    /// was written; reconcile again.
    #[error(
        "the reconciliation for pathway {pathway} was made at its version {made_at}, and evidence was recorded since (version {now}): it may no longer hold. Nothing was written; reconcile again"
    )]
    StaleToken {
        /// The pathway.
        pathway: String,
        /// The version the verdict saw.
        made_at: i64,
        /// The pathway's version now.
        now: i64,
    },
    /// The stored request was redacted; the host must supply it again.
    #[error(
        "the stored request of pathway {0} was redacted; pass the full request to restore_request() first"
    )]
    RequestRedacted(String),
    /// A request whose digest differs from the pathway's.
    #[error("request digest {given} does not match pathway digest {expected}")]
    RequestMismatch {
        /// Digest of what was given.
        given: String,
        /// Digest stored with the pathway.
        expected: String,
    },
    /// The executor refused before anything was sent.
    #[error("refused before sending: {0}")]
    Executor(#[from] crate::executor::Refusal),
    /// A pathway handle, approval or reconciliation from another database was used with
    /// this runtime. Nothing was written in either database.
    #[error(
        "pathway {pathway} belongs to database {handle_database}, but this runtime is on database {runtime_database}; use the runtime that loaded it. Nothing was written"
    )]
    ForeignPathway {
        /// The pathway id.
        pathway: String,
        /// The database the handle or token came from.
        handle_database: String,
        /// The database of the runtime it was used with.
        runtime_database: String,
    },
    /// The attempt was found applied (by a readback or an attestation, recorded): its
    /// effect is there, so no later not-applied verdict makes the pathway repairable (a
    /// repair would lead to a resume, a second send). It ends by `abort`, its residual named.
    #[error(
        "pathway {pathway}: attempt {attempt} was found applied (its effect is there); a not-applied verdict cannot settle it. End it with abort, naming the residual"
    )]
    FoundApplied {
        /// The pathway id.
        pathway: String,
        /// The attempt found applied.
        attempt: String,
    },
    /// A *not applied* attestation while the attempt's owner is proven running on this
    /// host and holds the request: it may still send it, so nothing that says it did not
    /// can be accepted, whatever risk is offered. Nothing was written.
    #[error(
        "pathway {pathway}: not_applied cannot be attested while {reason}; attest again once it has ended"
    )]
    SenderRunning {
        /// The pathway id.
        pathway: String,
        /// Who is running.
        reason: String,
    },
    /// The bound target's class is laxer than the definition's (a mutating target for a
    /// definition declared read-only). Nothing was sent.
    #[error(
        "pathway {pathway} is declared read-only but the executor binds a mutating target ({target}); declare it Mutating so it completes only by readback. Nothing was sent"
    )]
    ClassLaxerThanTarget {
        /// The pathway id.
        pathway: String,
        /// The bound target.
        target: String,
    },
}

/// Names joined for a message: `alice, bob`.
fn names(actors: &[Actor]) -> String {
    actors
        .iter()
        .map(Actor::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A refused step: the error and the untouched pathway, handed back.
#[must_use = "a refused step hands the pathway back; dropping it loses the handle"]
pub struct Refused<S: Stage> {
    pathway: Pathway<S>,
    error: Box<PathwayError>,
}

impl<S: Stage> Refused<S> {
    pub(crate) fn new(pathway: Pathway<S>, error: impl Into<PathwayError>) -> Self {
        Self {
            pathway,
            error: Box::new(error.into()),
        }
    }
    /// Why it was refused.
    pub fn error(&self) -> &PathwayError {
        &self.error
    }
    /// The pathway, unchanged.
    pub fn into_pathway(self) -> Pathway<S> {
        self.pathway
    }
    /// Both parts.
    pub fn into_parts(self) -> (Pathway<S>, PathwayError) {
        (self.pathway, *self.error)
    }
}

impl<S: Stage> fmt::Debug for Refused<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Refused")
            .field("pathway", &self.pathway.id())
            .field("error", &self.error)
            .finish()
    }
}

impl<S: Stage> fmt::Display for Refused<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pathway {} ({}): {}",
            self.pathway.id(),
            S::STATE,
            self.error
        )
    }
}

impl<S: Stage> std::error::Error for Refused<S> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.error)
    }
}

impl Core {
    /// The id, the version and the request digest.
    pub(crate) fn as_parts(&self) -> (&str, i64, &str) {
        (&self.id, self.version, &self.request_digest)
    }
}

#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) id: String,
    /// The identity of the database the pathway lives in; every step checks it.
    pub(crate) database: std::sync::Arc<str>,
    pub(crate) version: i64,
    pub(crate) definition: Definition,
    /// Who proposed it.
    pub(crate) proposer: Actor,
    /// When the approval that approved it expires (ms since the epoch): set by `approve`,
    /// re-read when an approved pathway is loaded; `None` when no expiring approval
    /// approved it.
    pub(crate) approved_until: Option<i64>,
    /// sha256 of the unredacted canonical definition, as proposed.
    pub(crate) definition_digest: String,
    pub(crate) request_digest: String,
    /// Whether `definition.request` is the redacted stored copy.
    pub(crate) redacted: bool,
    /// Set while the pathway is not stored yet ([`Runtime::propose_and_bind`](crate::Runtime::propose_and_bind)):
    /// its row and events, written in the same unit as its first step.
    pub(crate) pending: Option<Box<PendingInsert>>,
}

/// A new pathway's row and events, not written yet.
#[derive(Debug, Clone)]
pub(crate) struct PendingInsert {
    pub(crate) new: crate::store::NewPathway,
    pub(crate) events: Vec<crate::store::EventDraft>,
}

impl Core {
    /// Refuses `actor` unless its definition's authority gives it a role that may `act`.
    pub(crate) fn authorize(&self, actor: &Actor, act: Act) -> Result<(), PathwayError> {
        act.authorize(&self.definition.authority, actor)
    }

    /// Refuses a token (an approval or a reconciliation) for `pathway` that was issued in
    /// `database`, unless that is this pathway's database.
    pub(crate) fn own_token(&self, pathway: &str, database: &str) -> Result<(), PathwayError> {
        if database == &*self.database {
            return Ok(());
        }
        Err(PathwayError::ForeignPathway {
            pathway: pathway.to_owned(),
            handle_database: database.to_owned(),
            runtime_database: self.database.to_string(),
        })
    }
}

/// One consequential action in stage `S`.
///
/// Not `Clone`, no public constructor: each value is the single handle to its
/// pathway's current stage, consumed by every transition.
pub struct Pathway<S: Stage> {
    pub(crate) core: Box<Core>,
    pub(crate) stage: S,
}

impl<S: Stage> fmt::Debug for Pathway<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pathway")
            .field("id", &self.core.id)
            .field("state", &S::STATE)
            .field("version", &self.core.version)
            .finish_non_exhaustive()
    }
}

impl<S: Stage> Pathway<S> {
    /// The pathway id.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.core.id
    }
    /// The stored state of this stage.
    #[must_use]
    pub fn state(&self) -> crate::state::State {
        S::STATE
    }
    /// The definition (redacted if this pathway was re-hydrated from the store).
    #[must_use]
    pub fn definition(&self) -> &Definition {
        &self.core.definition
    }
    /// sha256 of the canonical unredacted request.
    #[must_use]
    pub fn request_digest(&self) -> &str {
        &self.core.request_digest
    }
    /// Whether the in-memory request is the redacted stored copy.
    #[must_use]
    pub fn is_redacted(&self) -> bool {
        self.core.redacted
    }

    /// Supplies the full request again after re-hydration redacted it. Refused
    /// unless its digest equals the pathway's request digest.
    pub fn restore_request(mut self, request: Request) -> Result<Self, Refused<S>> {
        let given = match crate::canonical::sha256_hex(&request_json(&request)) {
            Ok(d) => d,
            Err(e) => return Err(Refused::new(self, e)),
        };
        if given != self.core.request_digest {
            let expected = self.core.request_digest.clone();
            return Err(Refused::new(
                self,
                PathwayError::RequestMismatch { given, expected },
            ));
        }
        self.core.definition.request = request;
        self.core.redacted = false;
        Ok(self)
    }

    /// What every step's compare-and-set holds the stored row to.
    pub(crate) fn fence(&self) -> crate::store::Fence {
        crate::store::Fence {
            definition_digest: self.core.definition_digest.clone(),
            request_digest: self.core.request_digest.clone(),
        }
    }

    pub(crate) fn into_stage<T: Stage>(self, version: i64, stage: T) -> Pathway<T> {
        let mut core = self.core;
        core.version = version;
        Pathway { core, stage }
    }
}
