//! The edge table: every typed transition, and who may take each step.

use crate::ledger::EventKind;
use crate::pathway::{Actor, Authority, PathwayError, Role};
use crate::state::State;

/// Every typed transition: `(from, to, method)`. `tests/core/state_machine.rs` proves that
/// these edges are exactly the spec file's, and drives each method to show that the
/// ledger records exactly these edges.
pub const TRANSITIONS: &[(State, State, &str)] = &[
    (
        State::Proposed,
        State::AwaitingApproval,
        "Pathway<Proposed>::admit | Runtime::propose_and_admit (Decision::Hold | HumanGate)",
    ),
    (
        State::Proposed,
        State::Approved,
        "Pathway<Proposed>::admit | Runtime::propose_and_admit (Decision::Allow)",
    ),
    (
        State::Proposed,
        State::Denied,
        "Pathway<Proposed>::admit | Runtime::propose_and_admit (Decision::Deny)",
    ),
    (
        State::AwaitingApproval,
        State::Approved,
        "Pathway<AwaitingApproval>::approve",
    ),
    (
        State::AwaitingApproval,
        State::Denied,
        "Pathway<AwaitingApproval>::deny",
    ),
    (
        State::AwaitingApproval,
        State::HumanGate,
        "Pathway<AwaitingApproval>::escalate",
    ),
    (State::Approved, State::Running, "Pathway<Bound>::dispatch"),
    (State::Approved, State::Held, "Pathway<Approved>::hold"),
    (State::Approved, State::Aborted, "Pathway<Approved>::abort"),
    (
        State::Running,
        State::Completed,
        "Pathway<Bound>::dispatch (read-only) | Pathway<Returned>::confirm | Pathway<Bound>::dispatch_and_confirm",
    ),
    (State::Running, State::Stopped, "Pathway<Returned>::stop"),
    (
        State::Running,
        State::PartiallyCompleted,
        "Pathway<Bound>::dispatch (Delivery::Partial)",
    ),
    (
        State::Running,
        State::WriteStatusUnknown,
        "Pathway<Bound>::dispatch | Pathway<Returned>::confirm | Pathway<Bound>::dispatch_and_confirm | Runtime::recover",
    ),
    (
        State::Running,
        State::RepairRequired,
        "Pathway<Bound>::dispatch (failed, not applied, nothing written)",
    ),
    (
        State::Running,
        State::Failed,
        "Pathway<Bound>::dispatch | Pathway<Bound>::dispatch_and_confirm | Runtime::recover (a read-only call that errored, timed out or was cut off, or whose owner ended mid-call)",
    ),
    (State::Held, State::HumanGate, "Pathway<Held>::escalate"),
    (State::Held, State::Approved, "Pathway<Held>::release"),
    (State::Held, State::Aborted, "Pathway<Held>::abort"),
    (
        State::HumanGate,
        State::Approved,
        "Pathway<HumanGate>::approve",
    ),
    (State::HumanGate, State::Denied, "Pathway<HumanGate>::deny"),
    (
        State::HumanGate,
        State::Aborted,
        "Pathway<HumanGate>::abort",
    ),
    (
        State::Stopped,
        State::RepairRequired,
        "Pathway<Stopped>::require_repair",
    ),
    (State::Stopped, State::Aborted, "Pathway<Stopped>::abort"),
    (
        State::PartiallyCompleted,
        State::RepairRequired,
        "Pathway<PartiallyCompleted>::require_repair",
    ),
    (
        State::WriteStatusUnknown,
        State::Completed,
        "Pathway<Unknown>::complete (Reconciliation<Applied>)",
    ),
    (
        State::WriteStatusUnknown,
        State::RepairRequired,
        "Pathway<Unknown>::require_repair (Reconciliation<NotApplied>)",
    ),
    (
        State::RepairRequired,
        State::ReadyToResume,
        "Pathway<RepairRequired>::repair",
    ),
    (
        State::RepairRequired,
        State::Aborted,
        "Pathway<RepairRequired>::abort",
    ),
    (
        State::ReadyToResume,
        State::Running,
        "Pathway<Bound>::dispatch (resume)",
    ),
    (
        State::ReadyToResume,
        State::Aborted,
        "Pathway<ReadyToResume>::abort",
    ),
];

/// A step someone takes on a pathway. [`Act::roles`] is the one table of who may take
/// each: every transition checks it before it writes, and
/// [`inspect::next_action`](crate::inspect::next_action) names the roles from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Act {
    /// `Pathway<Proposed>::admit`, `Runtime::propose_and_admit`.
    Admit,
    /// `Runtime::grant_approval`.
    GrantApproval,
    /// `approve` (with an approval) from awaiting approval or a Human Gate.
    Approve,
    /// `deny` from awaiting approval or a Human Gate.
    Deny,
    /// `escalate` to a Human Gate.
    Escalate,
    /// `Pathway<Approved>::hold`.
    Hold,
    /// `Pathway<Held>::release`.
    Release,
    /// `abort`, with residuals.
    Abort,
    /// `Pathway<Bound>::dispatch` of an admitted pathway.
    Dispatch,
    /// `Pathway<Bound>::dispatch` of a pathway bound from ready to resume.
    Resume,
    /// `Pathway<Returned>::confirm`, and the readback of `dispatch_and_confirm`.
    Confirm,
    /// `Pathway<Returned>::stop`.
    Stop,
    /// `require_repair` from stopped or partially completed.
    RequireRepair,
    /// `Runtime::attest`.
    Attest,
    /// `repair`.
    Repair,
}

impl Act {
    /// Every act.
    pub const ALL: [Act; 15] = [
        Act::Admit,
        Act::GrantApproval,
        Act::Approve,
        Act::Deny,
        Act::Escalate,
        Act::Hold,
        Act::Release,
        Act::Abort,
        Act::Dispatch,
        Act::Resume,
        Act::Confirm,
        Act::Stop,
        Act::RequireRepair,
        Act::Attest,
        Act::Repair,
    ];

    /// The roles that may take this step (any one of them).
    #[must_use]
    pub const fn roles(self) -> &'static [Role] {
        use Role::{
            ApprovalAuthority, DecisionOwner, EvidenceOwner, ExecutionActor, RepairOwner,
            ResidualOwner, ResumeAuthority, StopAuthority,
        };
        match self {
            Act::Admit => &[DecisionOwner],
            Act::GrantApproval | Act::Approve | Act::Deny => &[ApprovalAuthority],
            Act::Escalate | Act::Hold | Act::Release | Act::Stop => &[StopAuthority],
            Act::Abort => &[ResidualOwner],
            Act::Dispatch => &[ExecutionActor],
            Act::Resume => &[ExecutionActor, ResumeAuthority],
            Act::Confirm => &[ExecutionActor, EvidenceOwner],
            Act::RequireRepair | Act::Repair => &[RepairOwner],
            Act::Attest => &[EvidenceOwner, RepairOwner],
        }
    }

    /// The step's snake_case name (`admit`, `grant_approval`, …, `require_repair`).
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Act::Admit => "admit",
            Act::GrantApproval => "grant_approval",
            Act::Approve => "approve",
            Act::Deny => "deny",
            Act::Escalate => "escalate",
            Act::Hold => "hold",
            Act::Release => "release",
            Act::Abort => "abort",
            Act::Dispatch => "dispatch",
            Act::Resume => "resume",
            Act::Confirm => "confirm",
            Act::Stop => "stop",
            Act::RequireRepair => "require_repair",
            Act::Attest => "attest",
            Act::Repair => "repair",
        }
    }

    /// The step in words, as a refusal names it ("`bob` may not *hold*: …").
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Act::Admit => "admit",
            Act::GrantApproval => "grant an approval",
            Act::Approve => "approve",
            Act::Deny => "deny",
            Act::Escalate => "escalate to a Human Gate",
            Act::Hold => "hold",
            Act::Release => "release a hold",
            Act::Abort => "abort",
            Act::Dispatch | Act::Resume => "dispatch",
            Act::Confirm => "confirm by readback",
            Act::Stop => "stop",
            Act::RequireRepair => "send to repair",
            Act::Attest => "attest a verdict",
            Act::Repair => "repair",
        }
    }

    /// The kind of the ledger event the step records (by the actor who took it).
    pub(crate) const fn event_kind(self) -> EventKind {
        match self {
            Act::Admit => EventKind::Admitted,
            Act::GrantApproval => EventKind::ApprovalGranted,
            Act::Approve => EventKind::Approved,
            Act::Deny => EventKind::Denied,
            Act::Escalate => EventKind::Escalated,
            Act::Hold => EventKind::Held,
            Act::Release => EventKind::Released,
            Act::Abort => EventKind::Aborted,
            Act::Dispatch | Act::Resume => EventKind::AttemptStarted,
            Act::Confirm => EventKind::Readback,
            Act::Stop => EventKind::Stopped,
            Act::RequireRepair => EventKind::RepairRequired,
            Act::Attest => EventKind::Reconciled,
            Act::Repair => EventKind::Repaired,
        }
    }

    /// Refuses `actor` unless it holds one of [`Act::roles`] in `authority`. Writes nothing.
    pub(crate) fn authorize(
        self,
        authority: &Authority,
        actor: &Actor,
    ) -> Result<(), PathwayError> {
        let roles = self.roles();
        if roles.iter().any(|r| authority.holds(*r, actor)) {
            return Ok(());
        }
        Err(PathwayError::NotAuthorized {
            actor: actor.clone(),
            action: self.as_str(),
            needs: roles
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(" or "),
        })
    }
}
