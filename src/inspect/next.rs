//! Who must act next on a pathway, from its state and its authority.

use serde::Serialize;
use serde_json::Value;

use crate::pathway::{Act, Actor, Authority, Role};
use crate::state::{AttemptStatus, State};
use crate::store::{PathwayRecord, ReadStore, StoreError};

/// One step someone may take on a pathway: the action, the roles that may take
/// it, and the actors holding those roles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Alternative {
    /// A stable snake_case action name (`admit`, `approve_or_deny`, `dispatch`, …).
    pub action: &'static str,
    /// The roles that may take it (any one of them).
    pub roles: Vec<Role>,
    /// The actors holding those roles, in role order, without repeats. Empty
    /// when the definition's authority could not be read.
    pub actors: Vec<String>,
}

/// Who must act next on a pathway, and what else may happen instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NextAction {
    /// The expected action: `admit`, `approve_or_deny`, `dispatch`, `wait`,
    /// `confirm_by_readback`, `reconcile`, `repair`, `resume`, `require_repair`,
    /// `release_or_escalate`, or `none` (terminal).
    pub action: &'static str,
    /// The roles that may take it (any one of them); empty for `wait` and `none`.
    pub roles: Vec<Role>,
    /// The actors holding those roles, in role order, without repeats.
    pub actors: Vec<String>,
    /// One sentence for people.
    pub detail: &'static str,
    /// Other steps the state machine allows from here (hold, stop, escalate, abort).
    pub alternatives: Vec<Alternative>,
}

fn actors_for(roles: &[Role], authority: Option<&Authority>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if let Some(a) = authority {
        for r in roles {
            // The approval authority and every other approver of the approval rule.
            let holders = if *r == Role::ApprovalAuthority {
                a.approvers()
            } else {
                vec![a.holder(*r)]
            };
            for name in holders.into_iter().map(Actor::as_str) {
                if !out.iter().any(|n| n == name) {
                    out.push(name.to_owned());
                }
            }
        }
    }
    out
}

/// The roles that may take any of `acts` ([`Act::roles`]), in order, without repeats.
fn roles_for(acts: &[Act]) -> Vec<Role> {
    let mut out: Vec<Role> = Vec::new();
    for role in acts.iter().flat_map(|a| a.roles()) {
        if !out.contains(role) {
            out.push(*role);
        }
    }
    out
}

/// Who must act next on a pathway in `state`.
///
/// `last_attempt_status` is the status of the pathway's newest attempt (it
/// decides between `wait` and `confirm_by_readback` in `running`); `authority`
/// is the definition's authority (see [`authority_of`]), used to name the
/// actors. The roles are those [`Act::roles`] gives the steps named here, the
/// table every transition checks. The mapping:
///
/// | state | action (steps) | roles | alternatives |
/// |---|---|---|---|
/// | `proposed` | `admit` | decision_owner | |
/// | `awaiting_approval` | `approve_or_deny` | approval_authority | `escalate` by stop_authority |
/// | `human_gate` | `approve_or_deny` | approval_authority | `abort` by residual_owner |
/// | `approved` | `dispatch` (bind, then dispatch) | execution_actor | `hold` by stop_authority, `abort` by residual_owner |
/// | `running`, last attempt `returned` | `confirm_by_readback` | execution_actor, evidence_owner | `stop` by stop_authority |
/// | `running`, otherwise | `wait` | | |
/// | `write_status_unknown` | `reconcile` (by readback, or attest) | evidence_owner, repair_owner | |
/// | `repair_required`, last attempt `not_sent`, `failed`, `not_applied` or none | `repair` | repair_owner | `abort` by residual_owner |
/// | `repair_required`, last attempt not settled (`returned`, `partial`, `unknown`, …) | `reconcile` | evidence_owner, repair_owner | `abort` by residual_owner |
/// | `repair_required`, last attempt `applied` | `abort` | residual_owner | |
/// | `ready_to_resume` | `resume` | execution_actor, resume_authority | `abort` by residual_owner |
/// | `stopped` | `require_repair` | repair_owner | `abort` by residual_owner |
/// | `partially_completed` | `require_repair` | repair_owner | |
/// | `held` | `release_or_escalate` | stop_authority | `abort` by residual_owner |
/// | `completed`, `denied`, `aborted` | `none` | | |
#[must_use]
pub fn next_action(
    state: State,
    last_attempt_status: Option<AttemptStatus>,
    authority: Option<&Authority>,
) -> NextAction {
    // One row per state of the table above: action, steps, detail, alternatives.
    let (action, acts, detail, others): (&'static str, &[Act], &'static str, &[Act]) = match state {
        State::Proposed => (
            "admit",
            &[Act::Admit],
            "admit or deny the proposal under the admission policy",
            &[],
        ),
        State::AwaitingApproval => (
            "approve_or_deny",
            &[Act::Approve, Act::Deny],
            "grant an approval for this exact request, or deny it",
            &[Act::Escalate],
        ),
        State::HumanGate => (
            "approve_or_deny",
            &[Act::Approve, Act::Deny],
            "a human decision is needed: approve this exact request, or deny it",
            &[Act::Abort],
        ),
        State::Approved => (
            "dispatch",
            &[Act::Dispatch],
            "bind the request to its target and dispatch it",
            &[Act::Hold, Act::Abort],
        ),
        State::Running if last_attempt_status == Some(AttemptStatus::Returned) => (
            "confirm_by_readback",
            &[Act::Confirm],
            "the target replied; confirm the effect by independent readback",
            &[Act::Stop],
        ),
        State::Running => (
            "wait",
            &[],
            "an attempt is in flight; wait for its outcome (recovery marks it write_status_unknown if its owner is gone)",
            &[],
        ),
        State::WriteStatusUnknown => (
            "reconcile",
            &[Act::Attest],
            "the effect may or may not have happened: reconcile by independent readback, or attest a verdict",
            &[],
        ),
        State::RepairRequired if last_attempt_status == Some(AttemptStatus::Applied) => (
            "abort",
            &[Act::Abort],
            "the last attempt was found applied (its effect is there): it cannot be repaired and resumed (a second send); abort it, naming the residual",
            &[],
        ),
        State::RepairRequired if last_attempt_status.is_some_and(|s| !s.is_settled()) => (
            "reconcile",
            &[Act::Attest],
            "the last attempt replied and may have taken effect: only a not-applied verdict (readback or attestation) makes it repairable",
            &[Act::Abort],
        ),
        State::RepairRequired => (
            "repair",
            &[Act::Repair],
            "repair the failed attempt, then the pathway may resume",
            &[Act::Abort],
        ),
        State::ReadyToResume => (
            "resume",
            &[Act::Resume],
            "bind and dispatch a new attempt",
            &[Act::Abort],
        ),
        State::Stopped => (
            "require_repair",
            &[Act::RequireRepair],
            "stopped after the target answered: send it to repair",
            &[Act::Abort],
        ),
        State::PartiallyCompleted => (
            "require_repair",
            &[Act::RequireRepair],
            "only part of the effect happened: send it to repair",
            &[],
        ),
        State::Held => (
            "release_or_escalate",
            &[Act::Release, Act::Escalate],
            "held: release the hold, or escalate to a Human Gate",
            &[Act::Abort],
        ),
        State::Completed | State::Denied | State::Aborted => {
            ("none", &[], "terminal: nothing more happens", &[])
        }
        State::Failed => (
            "none",
            &[],
            "terminal: a read that failed changed nothing; an identical read is a new pathway",
            &[],
        ),
    };
    let roles = roles_for(acts);
    NextAction {
        action,
        actors: actors_for(&roles, authority),
        roles,
        detail,
        alternatives: others
            .iter()
            .map(|&act| {
                let roles = roles_for(&[act]);
                Alternative {
                    action: act.name(),
                    actors: actors_for(&roles, authority),
                    roles,
                }
            })
            .collect(),
    }
}

/// The authority of a stored (redacted) definition, if it can be read.
#[must_use]
pub fn authority_of(definition: &Value) -> Option<Authority> {
    serde_json::from_value(definition.get("authority")?.clone()).ok()
}

/// Who must act next on the stored pathway `record` ([`next_action`]), read from `store`:
/// for a pathway waiting for approvals, an approver whose approval already counts is not
/// named (they have nothing more to approve; the others are).
pub fn next_of(store: &ReadStore, record: &PathwayRecord) -> Result<NextAction, StoreError> {
    let last_status = if matches!(record.state, State::Running | State::RepairRequired) {
        store.attempts(&record.id)?.pop().map(|a| a.status)
    } else {
        None
    };
    let authority = authority_of(&record.definition);
    let mut next = next_action(record.state, last_status, authority.as_ref());
    without_counted(store, record, authority.as_ref(), &mut next)?;
    Ok(next)
}

/// Takes out of `next.actors`, for a pathway waiting for approvals, every approver whose
/// approval already counts: of the binding an approval is judged for now (the approval
/// step counts only those, `Runtime::quorum_of_binding`): a gate's call, its tool's pinned
/// digest; any other, the binding the newest approval recorded (the call is bound again
/// when its approval step runs, which a view cannot do). An approval of another binding
/// leaves its approver among those who may approve.
pub(super) fn without_counted(
    store: &ReadStore,
    record: &PathwayRecord,
    authority: Option<&Authority>,
    next: &mut NextAction,
) -> Result<(), StoreError> {
    if let (Some(authority), State::HumanGate | State::AwaitingApproval) = (authority, record.state)
    {
        let events = store.events(&record.id, 0, usize::MAX)?;
        let now = store.approval_now()?;
        let approvals = crate::runtime::Approvals::read(&events)?;
        let binding = match judged_binding(store, record)? {
            Some(pinned) => Some(pinned),
            None => approvals.newest_binding().map(str::to_owned),
        };
        let done = approvals.counted(&record.request_digest, authority, now, binding.as_deref());
        next.actors
            .retain(|a| !done.iter().any(|d| d.as_str() == a));
    }
    Ok(())
}

/// The binding a gate's call is approved for now: its tool's pinned digest (`None` for
/// any other pathway, or a gate's call whose tool has no pin).
pub fn judged_binding(
    store: &ReadStore,
    record: &PathwayRecord,
) -> Result<Option<String>, StoreError> {
    let definition = &record.definition;
    if !crate::gate::is_gate_metadata(&definition["metadata"]) {
        return Ok(None);
    }
    match (
        definition["metadata"]["server"].as_str(),
        definition["request"]["action"].as_str(),
    ) {
        (Some(server), Some(tool)) => store.pin_digest(server, tool),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_has_a_next_action() {
        let auth = Authority::single(&crate::Actor::new("a"));
        for s in State::ALL {
            let n = next_action(s, None, Some(&auth));
            assert_eq!(n.action == "none", s.is_terminal(), "{s}");
            assert_eq!(n.actors.is_empty(), n.roles.is_empty(), "{s}");
        }
        assert_eq!(
            next_action(State::Running, Some(AttemptStatus::Returned), None).action,
            "confirm_by_readback"
        );
        assert_eq!(
            next_action(State::Running, Some(AttemptStatus::InFlight), None).action,
            "wait"
        );
    }
}
