//! Admission and the approval gate: admit, approve, deny, escalate, hold, release, abort.

use serde_json::{Value, json};

use crate::ledger::EventKind;
use crate::pathway::outcome::Admission;
use crate::pathway::stage::{
    Abortable, Aborted, Approved, AwaitingApproval, Denied, Gated, Held, HumanGate, Proposed, Stage,
};
use crate::pathway::token::Quorum;
use crate::pathway::{Actor, Admit, Decision, Pathway, PathwayError, Refused};
use crate::runtime::Runtime;
use crate::state::State;
use crate::store::{ApprovalWrite, EventDraft};

use super::{Act, Change, event};

impl Pathway<Proposed> {
    /// Admission by `policy`, invoked by the decision owner.
    pub fn admit(
        self,
        rt: &Runtime,
        actor: &Actor,
        policy: &dyn Admit,
    ) -> Result<Admission, Refused<Proposed>> {
        if let Err(e) = self.core.authorize(actor, Act::Admit) {
            return Err(Refused::new(self, e));
        }
        let decision = policy.decide(&self.core.definition);
        let (to, events) = admission_events(&decision, actor.as_str());
        // The human-gate decision crosses two edges in one step; the store checks that
        // the events chain along allowed edges from `proposed` to `to`.
        let change = Change {
            from: State::Proposed,
            to: Some(to),
            events,
            attempt: None,
            approval: None,
        };
        let p = self.commit(rt, change)?;
        Ok(admission(p, &decision))
    }
}

/// The state an admission decision moves a proposed pathway to, and the events that
/// record it (the Human Gate decision crosses two edges).
pub(crate) fn admission_events(decision: &Decision, a: &str) -> (State, Vec<EventDraft>) {
    let admitted = |to, data| event(Act::Admit.event_kind(), a, State::Proposed, to, data);
    match decision {
        Decision::Allow => (
            State::Approved,
            vec![admitted(State::Approved, json!({"decision": "allow"}))],
        ),
        Decision::Hold => (
            State::AwaitingApproval,
            vec![admitted(
                State::AwaitingApproval,
                json!({"decision": "hold"}),
            )],
        ),
        Decision::HumanGate => (
            State::HumanGate,
            vec![
                admitted(State::AwaitingApproval, json!({"decision": "human_gate"})),
                event(
                    EventKind::HumanGate,
                    a,
                    State::AwaitingApproval,
                    State::HumanGate,
                    json!({}),
                ),
            ],
        ),
        Decision::Deny(reason) => (
            State::Denied,
            vec![admitted(
                State::Denied,
                json!({"decision": "deny", "reason": reason}),
            )],
        ),
    }
}

/// The admitted pathway, in the stage `decision` moved it to (see [`admission_events`]).
pub(crate) fn admission(p: Pathway<Proposed>, decision: &Decision) -> Admission {
    let v = p.core.version;
    match decision {
        Decision::Allow => Admission::Approved(p.into_stage(v, Approved { _private: () })),
        Decision::Hold => {
            Admission::AwaitingApproval(p.into_stage(v, AwaitingApproval { _private: () }))
        }
        Decision::HumanGate => Admission::HumanGate(p.into_stage(v, HumanGate { _private: () })),
        Decision::Deny(_) => Admission::Denied(p.into_stage(v, Denied { _private: () })),
    }
}

// The gate bounds sit on the methods, not the impl blocks: a where-clause on the
// method makes a wrong-stage call an E0277 that prints the gate's
// `#[diagnostic::on_unimplemented]` text (an impl-block bound gives a bare E0599).
impl<S: Stage> Pathway<S> {
    /// Approves with a [`Quorum`] of approvals of this pathway's exact request (made by
    /// [`Approval::quorum`](crate::token::Approval::quorum),
    /// [`Runtime::quorum`] or [`Runtime::break_glass`]). The step uses every approval in
    /// it or none: the database refuses one used, revoked or expired since. One `approved`
    /// event per approval, by its approver.
    pub fn approve(self, rt: &Runtime, quorum: Quorum) -> Result<Pathway<Approved>, Refused<S>>
    where
        S: Gated,
    {
        if let Err(e) = rt.own(&self.core) {
            return Err(Refused::new(self, e));
        }
        if let Err(e) = self.core.own_token(&quorum.pathway, &quorum.database) {
            return Err(Refused::new(self, e));
        }
        if quorum.pathway != self.core.id || quorum.request_digest != self.core.request_digest {
            return Err(Refused::new(
                self,
                PathwayError::TokenMismatch(
                    "the approval was granted for another pathway or request".into(),
                ),
            ));
        }
        let authority = &self.core.definition.authority;
        for (_, approver, _) in &quorum.approvals {
            let may = if quorum.break_glass {
                if authority
                    .approval
                    .as_ref()
                    .is_some_and(|r| r.break_glass.contains(approver))
                {
                    Ok(())
                } else {
                    Err(PathwayError::NotAuthorized {
                        actor: approver.clone(),
                        action: "approve as break-glass",
                        needs: "a break_glass actor of the approval rule".into(),
                    })
                }
            } else {
                self.core.authorize(approver, Act::Approve)
            };
            if let Err(e) = may {
                return Err(Refused::new(self, e));
            }
        }
        let ttl = authority
            .approval
            .as_ref()
            .and_then(|r| r.ttl_ms)
            .map(|t| i64::try_from(t).unwrap_or(i64::MAX));
        let not_before = match ttl.map(|t| rt.approval_now().map(|now| (now, t))) {
            None => None,
            Some(Ok((now, t))) => Some(now.saturating_sub(t).saturating_add(1)),
            Some(Err(e)) => return Err(Refused::new(self, PathwayError::from(e))),
        };
        let mut from = S::STATE;
        let mut events = Vec::with_capacity(quorum.approvals.len());
        for (id, approver, _) in &quorum.approvals {
            let mut data = json!({"approval": id, "request_digest": quorum.request_digest});
            if quorum.break_glass {
                data["break_glass"] = Value::Bool(true);
            }
            events.push(event(
                EventKind::Approved,
                approver.as_str(),
                from,
                State::Approved,
                data,
            ));
            from = State::Approved;
        }
        let change = Change {
            from: S::STATE,
            to: Some(State::Approved),
            events,
            attempt: None,
            approval: Some(ApprovalWrite::Use {
                ids: quorum
                    .approvals
                    .iter()
                    .map(|(id, _, _)| id.clone())
                    .collect(),
                request_digest: quorum.request_digest,
                not_before,
            }),
        };
        let mut p = self.commit(rt, change)?;
        p.core.approved_until = quorum.expires_at;
        let v = p.core.version;
        Ok(p.into_stage(v, Approved { _private: () }))
    }

    /// Denied by the approval authority. Terminal.
    pub fn deny(
        self,
        rt: &Runtime,
        actor: &Actor,
        reason: &str,
    ) -> Result<Pathway<Denied>, Refused<S>>
    where
        S: Gated,
    {
        self.simple(
            rt,
            actor,
            Act::Deny,
            State::Denied,
            json!({"reason": reason}),
            Denied { _private: () },
        )
    }
}

impl Pathway<AwaitingApproval> {
    /// Escalated to a Human Gate by the stop authority.
    pub fn escalate(
        self,
        rt: &Runtime,
        actor: &Actor,
    ) -> Result<Pathway<HumanGate>, Refused<AwaitingApproval>> {
        self.escalated(rt, actor)
    }
}

impl Pathway<Held> {
    /// Escalated to a Human Gate by the stop authority.
    pub fn escalate(
        self,
        rt: &Runtime,
        actor: &Actor,
    ) -> Result<Pathway<HumanGate>, Refused<Held>> {
        self.escalated(rt, actor)
    }

    /// Released by the stop authority: admitted again.
    pub fn release(self, rt: &Runtime, actor: &Actor) -> Result<Pathway<Approved>, Refused<Held>> {
        self.simple(
            rt,
            actor,
            Act::Release,
            State::Approved,
            json!({}),
            Approved { _private: () },
        )
    }
}

impl<S: Stage> Pathway<S> {
    /// The escalate edge (stop authority, to a Human Gate) of the stages that have it.
    fn escalated(self, rt: &Runtime, actor: &Actor) -> Result<Pathway<HumanGate>, Refused<S>> {
        self.simple(
            rt,
            actor,
            Act::Escalate,
            State::HumanGate,
            json!({}),
            HumanGate { _private: () },
        )
    }
}

impl Pathway<Approved> {
    /// When the approval that approved this pathway expires (ms since the Unix epoch):
    /// from then on it is not dispatched ([`PathwayError::ApprovalExpired`]). `None`: no
    /// expiring approval approved it (admitted without a Human Gate, or an approval
    /// rule without expiry).
    #[must_use]
    pub fn approval_expires_at(&self) -> Option<i64> {
        self.core.approved_until
    }

    /// Held by the stop authority.
    pub fn hold(
        self,
        rt: &Runtime,
        actor: &Actor,
        reason: &str,
    ) -> Result<Pathway<Held>, Refused<Approved>> {
        self.simple(
            rt,
            actor,
            Act::Hold,
            State::Held,
            json!({"reason": reason}),
            Held { _private: () },
        )
    }
}

impl<S: Stage> Pathway<S> {
    /// Aborted by the residual owner, with residual evidence (what is left behind). Terminal.
    pub fn abort(
        self,
        rt: &Runtime,
        actor: &Actor,
        residuals: &Value,
    ) -> Result<Pathway<Aborted>, Refused<S>>
    where
        S: Abortable,
    {
        self.simple(
            rt,
            actor,
            Act::Abort,
            State::Aborted,
            json!({"residuals": residuals}),
            Aborted { _private: () },
        )
    }
}
