//! Who acts on a pathway: actors, the eight authority roles, and who holds each role.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An actor: a person, service or agent that acts on a pathway.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Actor(String);

impl Actor {
    /// An actor named `name`.
    #[must_use]
    pub fn new(name: impl Into<String>) -> Self {
        Self(name.into())
    }
    /// The actor's name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The eight authority roles of a pathway.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[expect(
    clippy::exhaustive_enums,
    reason = "the eight roles are fixed by the design brief"
)]
pub enum Role {
    /// Admits or denies the proposal.
    DecisionOwner,
    /// Grants or refuses Human Gate approvals.
    ApprovalAuthority,
    /// Dispatches the call.
    ExecutionActor,
    /// Holds, stops and escalates to a Human Gate.
    StopAuthority,
    /// Confirms readback and attests reconciliation verdicts.
    EvidenceOwner,
    /// Repairs failed or not-applied attempts; may attest verdicts.
    RepairOwner,
    /// May resume a repaired pathway (as may the execution actor).
    ResumeAuthority,
    /// Aborts with residuals.
    ResidualOwner,
}

impl Role {
    /// Every role, in the order of [`Authority`]'s fields.
    pub const ALL: [Role; 8] = [
        Role::DecisionOwner,
        Role::ApprovalAuthority,
        Role::ExecutionActor,
        Role::StopAuthority,
        Role::EvidenceOwner,
        Role::RepairOwner,
        Role::ResumeAuthority,
        Role::ResidualOwner,
    ];

    /// The role's snake_case name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Role::DecisionOwner => "decision_owner",
            Role::ApprovalAuthority => "approval_authority",
            Role::ExecutionActor => "execution_actor",
            Role::StopAuthority => "stop_authority",
            Role::EvidenceOwner => "evidence_owner",
            Role::RepairOwner => "repair_owner",
            Role::ResumeAuthority => "resume_authority",
            Role::ResidualOwner => "residual_owner",
        }
    }
}

crate::state::named!(
    Role,
    "one of the eight roles (decision_owner, approval_authority, execution_actor, stop_authority, evidence_owner, repair_owner, resume_authority, residual_owner)"
);

/// Who holds each authority role of a pathway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Authority {
    /// Admits or denies.
    pub decision_owner: Actor,
    /// Grants Human Gate approvals.
    pub approval_authority: Actor,
    /// Dispatches.
    pub execution_actor: Actor,
    /// Holds, stops, escalates.
    pub stop_authority: Actor,
    /// Owns the evidence.
    pub evidence_owner: Actor,
    /// Repairs.
    pub repair_owner: Actor,
    /// Resumes.
    pub resume_authority: Actor,
    /// Aborts with residuals.
    pub residual_owner: Actor,
    /// How many approvers, which ones, and for how long an approval holds. `None` (the
    /// form of every pathway recorded before it existed): the approval authority alone,
    /// who may be the proposer, and no expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalRule>,
}

/// Who approves at a Human Gate, how many of them, and for how long.
///
/// A pathway's approvals are granted one approver at a time
/// ([`Runtime::grant_approval`](crate::Runtime::grant_approval)); it is approved only by a
/// [`Quorum`](crate::token::Quorum): `quorum` distinct approvers of `approvers` (the
/// approval authority among them), none of them the proposer unless `self_approval`, each
/// approval younger than `ttl_ms`; or one break-glass approval by an actor of
/// `break_glass`, recorded as such. An approved pathway whose approval is older than
/// `ttl_ms` is not dispatched ([`PathwayError::ApprovalExpired`](crate::PathwayError::ApprovalExpired)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApprovalRule {
    /// Who may approve, besides the approval authority.
    #[serde(default)]
    pub approvers: Vec<Actor>,
    /// How many distinct approvers must approve (at least 1).
    pub quorum: u32,
    /// Whether the proposer may be one of them.
    #[serde(default)]
    pub self_approval: bool,
    /// How long an approval holds, in milliseconds (`None`: it does not expire).
    #[serde(default)]
    pub ttl_ms: Option<u64>,
    /// Who may approve alone, in an emergency; such an approval is recorded as break-glass.
    #[serde(default)]
    pub break_glass: Vec<Actor>,
}

impl ApprovalRule {
    /// `quorum` distinct approvers among the approval authority and `approvers`, none of
    /// them the proposer, each approval holding for `ttl`; no break-glass actor.
    #[must_use]
    pub fn new(quorum: u32, approvers: Vec<Actor>, ttl: Option<std::time::Duration>) -> Self {
        Self {
            approvers,
            quorum: quorum.max(1),
            self_approval: false,
            ttl_ms: ttl.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            break_glass: Vec::new(),
        }
    }

    /// Lets the proposer approve too.
    #[must_use]
    pub fn allowing_self_approval(mut self) -> Self {
        self.self_approval = true;
        self
    }

    /// Lets `actors` approve alone, as break-glass.
    #[must_use]
    pub fn with_break_glass(mut self, actors: Vec<Actor>) -> Self {
        self.break_glass = actors;
        self
    }
}

impl Authority {
    /// Every role held by one actor (useful for tests and single-operator hosts).
    #[must_use]
    pub fn single(actor: &Actor) -> Self {
        Self {
            decision_owner: actor.clone(),
            approval_authority: actor.clone(),
            execution_actor: actor.clone(),
            stop_authority: actor.clone(),
            evidence_owner: actor.clone(),
            repair_owner: actor.clone(),
            resume_authority: actor.clone(),
            residual_owner: actor.clone(),
            approval: None,
        }
    }

    /// Sets who approves, how many, and for how long (see [`ApprovalRule`]).
    #[must_use]
    pub fn with_approval(mut self, rule: ApprovalRule) -> Self {
        self.approval = Some(rule);
        self
    }

    /// Whether `actor` holds `role`: its holder, or for [`Role::ApprovalAuthority`] one
    /// of the approval rule's approvers too.
    #[must_use]
    pub fn holds(&self, role: Role, actor: &Actor) -> bool {
        self.holder(role) == actor
            || (role == Role::ApprovalAuthority
                && self
                    .approval
                    .as_ref()
                    .is_some_and(|r| r.approvers.contains(actor)))
    }

    /// Everyone who may approve: the approval authority, then the rule's other approvers.
    #[must_use]
    pub fn approvers(&self) -> Vec<&Actor> {
        let mut all = vec![&self.approval_authority];
        for a in self.approval.iter().flat_map(|r| &r.approvers) {
            if !all.contains(&a) {
                all.push(a);
            }
        }
        all
    }

    /// How many distinct approvers a Human Gate needs (1 without a rule).
    #[must_use]
    pub fn quorum(&self) -> u32 {
        self.approval.as_ref().map_or(1, |r| r.quorum.max(1))
    }

    /// Gives `role` to `actor`.
    #[must_use]
    pub fn with(mut self, role: Role, actor: &Actor) -> Self {
        *self.slot(role) = actor.clone();
        self
    }

    fn slot(&mut self, role: Role) -> &mut Actor {
        match role {
            Role::DecisionOwner => &mut self.decision_owner,
            Role::ApprovalAuthority => &mut self.approval_authority,
            Role::ExecutionActor => &mut self.execution_actor,
            Role::StopAuthority => &mut self.stop_authority,
            Role::EvidenceOwner => &mut self.evidence_owner,
            Role::RepairOwner => &mut self.repair_owner,
            Role::ResumeAuthority => &mut self.resume_authority,
            Role::ResidualOwner => &mut self.residual_owner,
        }
    }

    /// The actor holding `role`.
    #[must_use]
    pub fn holder(&self, role: Role) -> &Actor {
        match role {
            Role::DecisionOwner => &self.decision_owner,
            Role::ApprovalAuthority => &self.approval_authority,
            Role::ExecutionActor => &self.execution_actor,
            Role::StopAuthority => &self.stop_authority,
            Role::EvidenceOwner => &self.evidence_owner,
            Role::RepairOwner => &self.repair_owner,
            Role::ResumeAuthority => &self.resume_authority,
            Role::ResidualOwner => &self.residual_owner,
        }
    }
}
