//! Every typed transition. Each method names one edge of [`crate::state::EDGES`]
//! (the table [`TRANSITIONS`] lists them) and writes exactly one step.

use serde_json::{Value, json};

use super::outcome::{Admission, Confirmed, NotSent, Outcome, Unrecorded};
use super::stage::{
    Abortable, Aborted, Approved, AwaitingApproval, Bindable, Bound, Completed, Denied, Gated,
    Held, HumanGate, PartiallyCompleted, Proposed, ReadyToResume, Reconcilable, RepairRequired,
    RepairUnsettled, Repairable, Returned, Stage, Stopped, Unknown,
};
use super::token::{
    Applied, Approval, NotApplied, Reconciliation, Unresolved, Verdict, VerdictKind,
};
use super::{
    ActionClass, Actor, Authority, Decision, Pathway, PathwayError, Policy, Refused, Role,
    request_json,
};
use crate::executor::{Delivery, Executor, Observation, Readback, RejectionClass};
use crate::runtime::{Runtime, StepPoint};
use crate::state::{AttemptStatus, State};
use crate::store::{ApprovalWrite, AttemptWrite, Backend, EventDraft, Step};

/// Every typed transition: `(from, to, method)`. `tests/state_machine.rs` proves that
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
    pub(crate) const fn event_kind(self) -> &'static str {
        match self {
            Act::Admit => "admitted",
            Act::GrantApproval => "approval_granted",
            Act::Approve => "approved",
            Act::Deny => "denied",
            Act::Escalate => "escalated",
            Act::Hold => "held",
            Act::Release => "released",
            Act::Abort => "aborted",
            Act::Dispatch | Act::Resume => "attempt_started",
            Act::Confirm => "readback",
            Act::Stop => "stopped",
            Act::RequireRepair => "repair_required",
            Act::Attest => "reconciled",
            Act::Repair => "repaired",
        }
    }

    /// Refuses `actor` unless it holds one of [`Act::roles`] in `authority`. Writes nothing.
    pub(crate) fn authorize(
        self,
        authority: &Authority,
        actor: &Actor,
    ) -> Result<(), PathwayError> {
        let roles = self.roles();
        if roles.iter().any(|r| authority.holder(*r) == actor) {
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

/// One step's content, before it becomes a store [`Step`].
struct Change {
    from: State,
    to: Option<State>,
    events: Vec<EventDraft>,
    attempt: Option<AttemptWrite>,
    approval: Option<ApprovalWrite>,
}

fn event(kind: &'static str, actor: &str, from: State, to: State, data: Value) -> EventDraft {
    EventDraft {
        kind,
        actor: actor.to_owned(),
        from: Some(from),
        to,
        attempt: None,
        attempt_status: None,
        data,
    }
}

fn attempt_event(mut e: EventDraft, attempt: &str, status: AttemptStatus) -> EventDraft {
    e.attempt = Some(attempt.to_owned());
    e.attempt_status = Some(status.as_str());
    e
}

impl<S: Stage> Pathway<S> {
    /// Writes `change` as one step. On success returns self with the new version.
    fn commit(mut self, rt: &Runtime, change: Change) -> Result<Self, Refused<S>> {
        if let Err(e) = rt.own(&self.core) {
            return Err(Refused::new(self, e));
        }
        let step = Step {
            pathway: self.core.id.clone(),
            expected_state: change.from,
            expected_version: self.core.version,
            fence: self.fence(),
            to: change.to,
            events: change.events,
            attempt: change.attempt,
            approval: change.approval,
            at: rt.now(),
        };
        match rt.write(move |b| b.apply(step)) {
            Ok(v) => {
                self.core.version = v;
                Ok(self)
            }
            Err(e) => Err(Refused::new(self, e)),
        }
    }

    /// A plain transition by an actor `act` authorizes, recorded as `act`'s event.
    fn simple<T: Stage>(
        self,
        rt: &Runtime,
        actor: &Actor,
        act: Act,
        to: State,
        data: Value,
        next: T,
    ) -> Result<Pathway<T>, Refused<S>> {
        if let Err(e) = self.core.authorize(actor, act) {
            return Err(Refused::new(self, e));
        }
        let data = rt.fit(&data);
        let change = Change {
            from: S::STATE,
            to: Some(to),
            events: vec![event(act.event_kind(), actor.as_str(), S::STATE, to, data)],
            attempt: None,
            // Entering a Human Gate voids approvals given before it.
            approval: (to == State::HumanGate).then_some(ApprovalWrite::RevokeOutstanding),
        };
        let p = self.commit(rt, change)?;
        let v = p.core.version;
        Ok(p.into_stage(v, next))
    }
}

impl Pathway<Proposed> {
    /// Admission by `policy`, invoked by the decision owner.
    pub fn admit(
        self,
        rt: &Runtime,
        actor: &Actor,
        policy: &dyn Policy,
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
                    "human_gate",
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
    /// Approves with a Human Gate approval granted for this pathway's exact request.
    /// The approval is consumed; the database refuses a second use.
    pub fn approve(self, rt: &Runtime, approval: Approval) -> Result<Pathway<Approved>, Refused<S>>
    where
        S: Gated,
    {
        if let Err(e) = rt.own(&self.core) {
            return Err(Refused::new(self, e));
        }
        if approval.database != self.core.database {
            let e = PathwayError::ForeignPathway {
                pathway: approval.pathway.clone(),
                handle_database: approval.database.to_string(),
                runtime_database: self.core.database.to_string(),
            };
            return Err(Refused::new(self, e));
        }
        if approval.pathway != self.core.id || approval.request_digest != self.core.request_digest {
            return Err(Refused::new(
                self,
                PathwayError::TokenMismatch(
                    "the approval was granted for another pathway or request".into(),
                ),
            ));
        }
        if let Err(e) = self.core.authorize(&approval.approver, Act::Approve) {
            return Err(Refused::new(self, e));
        }
        let change = Change {
            from: S::STATE,
            to: Some(State::Approved),
            events: vec![event(
                "approved",
                approval.approver.as_str(),
                S::STATE,
                State::Approved,
                json!({"approval": approval.id, "request_digest": approval.request_digest}),
            )],
            attempt: None,
            approval: Some(ApprovalWrite::Use {
                id: approval.id,
                request_digest: approval.request_digest,
            }),
        };
        let p = self.commit(rt, change)?;
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

impl Pathway<Held> {
    /// Escalated to a Human Gate by the stop authority.
    pub fn escalate(
        self,
        rt: &Runtime,
        actor: &Actor,
    ) -> Result<Pathway<HumanGate>, Refused<Held>> {
        self.simple(
            rt,
            actor,
            Act::Escalate,
            State::HumanGate,
            json!({}),
            HumanGate { _private: () },
        )
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

impl Pathway<Approved> {
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

impl<S: Stage> Pathway<S> {
    /// Binds to the exact target the executor describes now. Writes nothing; the
    /// binding is stored with the attempt and re-checked just before dispatch.
    ///
    /// Refused ([`PathwayError::ClassLaxerThanTarget`]) when the definition is declared
    /// read-only but the executor binds a mutating target (see [`Binding::class`](crate::executor::Binding::class)).
    pub fn bind(self, executor: &mut dyn Executor) -> Result<Pathway<Bound>, Refused<S>>
    where
        S: Bindable,
    {
        if self.core.redacted {
            let id = self.core.id.clone();
            return Err(Refused::new(self, PathwayError::RequestRedacted(id)));
        }
        let binding = match executor.bind(&self.core.definition.request) {
            Ok(b) => b,
            Err(e) => return Err(Refused::new(self, e)),
        };
        // A definition may be stricter than the executor's view of its target, never laxer:
        // a read-only definition would complete a mutating call without readback.
        if self.core.definition.class == ActionClass::ReadOnly
            && binding.class != ActionClass::ReadOnly
        {
            let e = PathwayError::ClassLaxerThanTarget {
                pathway: self.core.id.clone(),
                target: binding.target,
            };
            return Err(Refused::new(self, e));
        }
        let previous_attempt = previous_of(&self);
        let v = self.core.version;
        Ok(self.into_stage(
            v,
            Bound {
                binding,
                from: S::STATE,
                previous_attempt,
                _private: (),
            },
        ))
    }
}

fn previous_of<S: Bindable>(p: &Pathway<S>) -> Option<String> {
    super::stage::sealed::BindFrom::previous_attempt(&p.stage)
}

impl Pathway<Bound> {
    /// What this pathway is bound to.
    #[must_use]
    pub fn binding(&self) -> &crate::executor::Binding {
        &self.stage.binding
    }

    /// Dispatches the call: re-checks the binding, commits the write-ahead attempt
    /// record, calls the executor, and records the honest outcome.
    ///
    /// The execution actor may dispatch; a resumed pathway may also be dispatched by
    /// the resume authority.
    pub fn dispatch(self, rt: &Runtime, actor: &Actor, executor: &mut dyn Executor) -> Outcome {
        self.dispatch_with(rt, actor, executor, None)
    }

    /// Dispatches the call like [`Pathway::dispatch`], and when a mutating call returns
    /// success, reads the effect back at once with `readback` and records the reply and
    /// the readback in **one** durable commit (instead of the reply's commit and then
    /// [`Pathway::confirm`]'s). So the outcome is never [`Outcome::Returned`]: a verified
    /// effect is [`Outcome::Completed`], anything else [`Outcome::Unknown`].
    ///
    /// The write-ahead attempt record is still committed before anything is sent. A
    /// crash after the reply and before the merged commit leaves the attempt in flight,
    /// which [`Runtime::recover`] turns into an unknown settled by readback: the same as a
    /// crash before the reply's own commit in [`Pathway::dispatch`]; nothing is resent.
    ///
    /// Since the readback confirms, `actor` must also be allowed to confirm (the execution
    /// actor or the evidence owner); otherwise nothing is sent.
    pub fn dispatch_and_confirm(
        self,
        rt: &Runtime,
        actor: &Actor,
        executor: &mut dyn Executor,
        readback: &mut dyn Readback,
    ) -> Outcome {
        if let Err(error) = self.core.authorize(actor, Act::Confirm) {
            return not_sent(self, error);
        }
        self.dispatch_with(rt, actor, executor, Some(readback))
    }

    fn dispatch_with(
        self,
        rt: &Runtime,
        actor: &Actor,
        executor: &mut dyn Executor,
        readback: Option<&mut dyn Readback>,
    ) -> Outcome {
        let from = self.stage.from;
        let act = if from == State::ReadyToResume {
            Act::Resume
        } else {
            Act::Dispatch
        };
        if let Err(error) = rt
            .own(&self.core)
            .and_then(|()| self.core.authorize(actor, act))
        {
            return not_sent(self, error);
        }
        let request = self.core.definition.request.clone();
        // Only the request the chain approved is ever sent (its digest is in the proposal
        // event; the step's compare-and-set holds the row to the same digest).
        match crate::canonical::sha256_hex(&request_json(&request)) {
            Ok(given) if given == self.core.request_digest => {}
            Ok(given) => {
                let expected = self.core.request_digest.clone();
                return not_sent(self, PathwayError::RequestMismatch { given, expected });
            }
            Err(e) => return not_sent(self, e.into()),
        }
        if let Err(refusal) = executor.prepare(&request, &self.stage.binding) {
            let data = json!({"code": refusal.code, "message": refusal.message, "binding": self.stage.binding.digest});
            let change = Change {
                from,
                to: None,
                events: vec![event(
                    "dispatch_refused",
                    actor.as_str(),
                    from,
                    from,
                    rt.fit(&data),
                )],
                attempt: None,
                approval: None,
            };
            return match self.commit(rt, change) {
                Ok(p) => not_sent(p, refusal.into()),
                Err(r) => {
                    let (p, e) = r.into_parts();
                    not_sent(p, e)
                }
            };
        }
        // The executor now holds a preparation for this request: every path below that
        // does not execute it releases it.
        let (attempt_id, start) = match self.start_change(rt, actor, &request, executor) {
            Ok(x) => x,
            Err(error) => {
                executor.release();
                return not_sent(self, error);
            }
        };
        rt.point(StepPoint::BeforeAttemptCommit);
        // In flight here from before its record is durable until its outcome is; also
        // released if the executor panics, so that the other threads sharing this runtime
        // judge the attempt as they would after a crash, not as in flight forever.
        let tracked = crate::runtime::Tracked::new(rt, &attempt_id);
        let running = match self.commit(rt, start) {
            Ok(p) => p,
            Err(r) => {
                executor.release();
                drop(tracked);
                let (pathway, error) = r.into_parts();
                return not_sent(pathway, error);
            }
        };
        rt.point(StepPoint::AfterAttemptCommit);
        let delivery = executor.execute(&request);
        rt.point(StepPoint::AfterReply);
        let outcome = record_delivery(running, rt, actor, &attempt_id, delivery, readback);
        drop(tracked);
        if !matches!(outcome, Outcome::Unrecorded(_)) {
            rt.point(StepPoint::AfterOutcomeCommit);
        }
        outcome
    }

    /// The write-ahead attempt record: what will be sent, to which target, by which owner,
    /// through which process.
    fn start_change(
        &self,
        rt: &Runtime,
        actor: &Actor,
        request: &crate::executor::Request,
        executor: &dyn Executor,
    ) -> Result<(String, Change), PathwayError> {
        let from = self.stage.from;
        let attempt_id = rt.new_id("at");
        let seq = i64::try_from(rt.reader().attempts(&self.core.id)?.len()).unwrap_or(i64::MAX) + 1;
        let stored = rt.check(&request_json(request))?;
        let stored_request = crate::canonical::to_string(&stored)?;
        let request_text_digest = crate::canonical::sha256_hex_bytes(stored_request.as_bytes());
        let binding_text = crate::canonical::to_string(&self.stage.binding.details)?;
        let owner = rt.owner_id();
        let carrier = executor.carrier().map(|c| rt.carrier_record(&c));
        let carrier_text = carrier
            .as_ref()
            .map(crate::canonical::to_string)
            .transpose()?;
        let change = Change {
            from,
            to: Some(State::Running),
            events: vec![attempt_event(
                event(
                    "attempt_started",
                    actor.as_str(),
                    from,
                    State::Running,
                    json!({
                        "seq": seq,
                        "previous_attempt": self.stage.previous_attempt,
                        "target": self.stage.binding.target,
                        "binding_digest": self.stage.binding.digest,
                        "request_digest": self.core.request_digest,
                        "request_text_digest": request_text_digest,
                        "owner": owner,
                        "carrier": carrier,
                    }),
                ),
                &attempt_id,
                AttemptStatus::InFlight,
            )],
            attempt: Some(AttemptWrite::Start {
                id: attempt_id.clone(),
                seq,
                previous: self.stage.previous_attempt.clone(),
                request: stored_request,
                request_digest: self.core.request_digest.clone(),
                binding: binding_text,
                binding_digest: self.stage.binding.digest.clone(),
                owner,
                lease_ms: rt.lease_ms(),
                carrier: carrier_text,
            }),
            approval: None,
        };
        Ok((attempt_id, change))
    }
}

fn not_sent(pathway: Pathway<Bound>, error: PathwayError) -> Outcome {
    Outcome::NotSent(NotSent { pathway, error })
}

/// What a delivery means for the pathway.
enum Class {
    Completed,
    Returned,
    Failed,
    Partial,
    Unknown,
}

fn record_delivery(
    p: Pathway<Bound>,
    rt: &Runtime,
    actor: &Actor,
    attempt: &str,
    delivery: Delivery,
    readback: Option<&mut dyn Readback>,
) -> Outcome {
    let mutating = p.core.definition.class != ActionClass::ReadOnly;
    let (class, status, kind, evidence): (Class, AttemptStatus, &'static str, Value) =
        match delivery {
            Delivery::NothingWritten { reason } => (
                Class::Failed,
                AttemptStatus::NotSent,
                "attempt_not_sent",
                json!({"reason": reason}),
            ),
            Delivery::PossiblyWritten { reason } => (
                Class::Unknown,
                AttemptStatus::Unknown,
                "attempt_unknown",
                json!({"reason": reason}),
            ),
            Delivery::Succeeded { reply } if mutating => (
                Class::Returned,
                AttemptStatus::Returned,
                "attempt_returned",
                reply,
            ),
            Delivery::Succeeded { reply } => (
                Class::Completed,
                AttemptStatus::Succeeded,
                "attempt_completed",
                reply,
            ),
            Delivery::ToolFailed { reply } => (
                Class::Failed,
                AttemptStatus::Failed,
                "attempt_failed",
                reply,
            ),
            Delivery::Partial { reply } => (
                Class::Partial,
                AttemptStatus::Partial,
                "attempt_partial",
                reply,
            ),
            Delivery::Rejected {
                error,
                class: RejectionClass::NotApplied,
            } => (
                Class::Failed,
                AttemptStatus::NotApplied,
                "attempt_rejected",
                json!({"error": error, "class": "not_applied"}),
            ),
            Delivery::Rejected { error, .. } => (
                Class::Unknown,
                AttemptStatus::Unknown,
                "attempt_rejected",
                json!({"error": error, "class": "unknown"}),
            ),
        };
    let evidence = rt.fit(&evidence);
    let to = match class {
        Class::Completed => Some(State::Completed),
        Class::Returned => None,
        Class::Failed => Some(State::RepairRequired),
        Class::Partial => Some(State::PartiallyCompleted),
        Class::Unknown => Some(State::WriteStatusUnknown),
    };
    let outcome_text = crate::canonical::to_string(&evidence).ok();
    let mut events = vec![attempt_event(
        event(
            kind,
            actor.as_str(),
            State::Running,
            to.unwrap_or(State::Running),
            json!({"evidence": evidence}),
        ),
        attempt,
        status,
    )];
    let (mut class, mut to, mut status) = (class, to, status);
    if let (Class::Returned, Some(readback)) = (&class, readback) {
        // The reply and its readback, recorded in one step (see `dispatch_and_confirm`).
        let (then, then_status, readback_event) =
            observe(&p.core.definition.request, rt, actor, attempt, readback);
        events.push(readback_event);
        status = then_status;
        to = Some(then);
        class = if then == State::Completed {
            Class::Completed
        } else {
            Class::Unknown
        };
    }
    let change = Change {
        from: State::Running,
        to,
        events,
        attempt: Some(AttemptWrite::Finish {
            id: attempt.to_owned(),
            status: status.as_str(),
            outcome: outcome_text,
        }),
        approval: None,
    };
    let id = p.core.id.clone();
    let p = match p.commit_running(rt, change) {
        Ok(p) => p,
        Err(error) => {
            return Outcome::Unrecorded(Unrecorded {
                pathway: id,
                attempt: attempt.to_owned(),
                error,
            });
        }
    };
    let v = p.core.version;
    let attempt = attempt.to_owned();
    match class {
        Class::Completed => Outcome::Completed(p.into_stage(v, Completed { _private: () })),
        Class::Returned => Outcome::Returned(p.into_stage(
            v,
            Returned {
                attempt,
                reply: evidence,
                _private: (),
            },
        )),
        Class::Failed => Outcome::Failed(p.into_stage(
            v,
            RepairRequired {
                attempt: Some(attempt),
                _private: (),
            },
        )),
        Class::Partial => Outcome::Partial(p.into_stage(
            v,
            PartiallyCompleted {
                attempt,
                _private: (),
            },
        )),
        Class::Unknown => Outcome::Unknown(p.into_stage(
            v,
            Unknown {
                attempt,
                _private: (),
            },
        )),
    }
}

impl Pathway<Bound> {
    /// Commits a step from `running` (the bound value's stored state moved on at the attempt commit).
    fn commit_running(self, rt: &Runtime, change: Change) -> Result<Self, PathwayError> {
        self.commit(rt, change).map_err(|r| r.into_parts().1)
    }
}

/// Reads a returned call's effect back: the state it moves the pathway to (completed
/// only when the effect is verified), the attempt's status and the `readback` event.
fn observe(
    request: &crate::executor::Request,
    rt: &Runtime,
    actor: &Actor,
    attempt: &str,
    readback: &mut dyn Readback,
) -> (State, AttemptStatus, EventDraft) {
    let observation = readback.observe(request);
    rt.point(StepPoint::AfterReadback);
    let (to, status, verdict, evidence) = match observation {
        Observation::Applied { evidence } => (
            State::Completed,
            AttemptStatus::Applied,
            VerdictKind::Applied,
            evidence,
        ),
        Observation::NotApplied { evidence } => (
            State::WriteStatusUnknown,
            AttemptStatus::Unknown,
            VerdictKind::NotApplied,
            evidence,
        ),
        Observation::Inconclusive { evidence } => (
            State::WriteStatusUnknown,
            AttemptStatus::Unknown,
            VerdictKind::Unresolved,
            evidence,
        ),
    };
    let evidence = rt.fit(&evidence);
    let e = attempt_event(
        event(
            "readback",
            actor.as_str(),
            State::Running,
            to,
            json!({"verdict": verdict.as_str(), "evidence": evidence}),
        ),
        attempt,
        status,
    );
    (to, status, e)
}

impl Pathway<Returned> {
    /// The attempt that returned.
    #[must_use]
    pub fn attempt(&self) -> &str {
        &self.stage.attempt
    }
    /// The reply, as retained evidence.
    #[must_use]
    pub fn reply(&self) -> &Value {
        &self.stage.reply
    }

    /// Confirms a returned mutating call by independent readback, invoked by the
    /// execution actor or the evidence owner. Applied completes it; anything else
    /// leaves it unknown (a success reply is not proof).
    pub fn confirm(
        self,
        rt: &Runtime,
        actor: &Actor,
        readback: &mut dyn Readback,
    ) -> Result<Confirmed, Refused<Returned>> {
        if let Err(e) = self.core.authorize(actor, Act::Confirm) {
            return Err(Refused::new(self, e));
        }
        if self.core.redacted {
            let id = self.core.id.clone();
            return Err(Refused::new(self, PathwayError::RequestRedacted(id)));
        }
        let attempt = self.stage.attempt.clone();
        let (to, status, readback_event) =
            observe(&self.core.definition.request, rt, actor, &attempt, readback);
        let change = Change {
            from: State::Running,
            to: Some(to),
            events: vec![readback_event],
            attempt: Some(AttemptWrite::Finish {
                id: attempt.clone(),
                status: status.as_str(),
                outcome: None,
            }),
            approval: None,
        };
        let p = self.commit(rt, change)?;
        let v = p.core.version;
        Ok(if to == State::Completed {
            Confirmed::Completed(p.into_stage(v, Completed { _private: () }))
        } else {
            Confirmed::Unknown(p.into_stage(
                v,
                Unknown {
                    attempt,
                    _private: (),
                },
            ))
        })
    }

    /// Stopped by the stop authority instead of being confirmed.
    pub fn stop(
        self,
        rt: &Runtime,
        actor: &Actor,
        reason: &str,
    ) -> Result<Pathway<Stopped>, Refused<Returned>> {
        let attempt = self.stage.attempt.clone();
        self.simple(
            rt,
            actor,
            Act::Stop,
            State::Stopped,
            json!({"reason": reason}),
            Stopped {
                attempt,
                _private: (),
            },
        )
    }
}

impl<S: Reconcilable> Pathway<S> {
    fn reconciled<V: Verdict>(
        self,
        rt: &Runtime,
        token: Reconciliation<V>,
        to: Option<State>,
        status: Option<AttemptStatus>,
    ) -> Result<Self, Refused<S>> {
        if token.database != self.core.database {
            let e = PathwayError::ForeignPathway {
                pathway: token.pathway.clone(),
                handle_database: token.database.to_string(),
                runtime_database: self.core.database.to_string(),
            };
            return Err(Refused::new(self, e));
        }
        let attempt = super::stage::sealed::AttemptOf::attempt(&self.stage);
        if token.pathway != self.core.id || token.attempt != attempt {
            return Err(Refused::new(
                self,
                PathwayError::TokenMismatch(
                    "the reconciliation is for another pathway or attempt".into(),
                ),
            ));
        }
        let from = S::STATE;
        let mut recorded = event(
            "reconciled",
            &token.actor,
            from,
            to.unwrap_or(from),
            json!({"verdict": V::NAME, "source": token.source, "evidence": token.evidence}),
        );
        recorded.attempt = Some(token.attempt.clone());
        recorded.attempt_status = status.map(AttemptStatus::as_str);
        let change = Change {
            from,
            to,
            events: vec![recorded],
            attempt: status.map(|status| AttemptWrite::Finish {
                id: token.attempt.clone(),
                status: status.as_str(),
                outcome: None,
            }),
            approval: None,
        };
        self.commit(rt, change)
    }
}

impl Pathway<Unknown> {
    /// The attempt whose outcome is unknown.
    #[must_use]
    pub fn attempt(&self) -> &str {
        &self.stage.attempt
    }

    /// Completes the pathway: the reconciliation found the effect applied.
    pub fn complete(
        self,
        rt: &Runtime,
        token: Reconciliation<Applied>,
    ) -> Result<Pathway<Completed>, Refused<Unknown>> {
        let p = self.reconciled(
            rt,
            token,
            Some(State::Completed),
            Some(AttemptStatus::Applied),
        )?;
        let v = p.core.version;
        Ok(p.into_stage(v, Completed { _private: () }))
    }

    /// Sends the pathway to repair: the reconciliation found the effect not applied.
    /// This is the only way from unknown towards a new attempt.
    pub fn require_repair(
        self,
        rt: &Runtime,
        token: Reconciliation<NotApplied>,
    ) -> Result<Pathway<RepairRequired>, Refused<Unknown>> {
        let attempt = Some(self.stage.attempt.clone());
        let p = self.reconciled(
            rt,
            token,
            Some(State::RepairRequired),
            Some(AttemptStatus::NotApplied),
        )?;
        let v = p.core.version;
        Ok(p.into_stage(
            v,
            RepairRequired {
                attempt,
                _private: (),
            },
        ))
    }

    /// Records an unresolved reconciliation; the pathway stays unknown.
    pub fn keep_unknown(
        self,
        rt: &Runtime,
        token: Reconciliation<Unresolved>,
    ) -> Result<Pathway<Unknown>, Refused<Unknown>> {
        self.reconciled(rt, token, None, Some(AttemptStatus::Unknown))
    }
}

impl Pathway<Stopped> {
    /// Sent to repair by the repair owner. The stopped attempt had returned success, so
    /// it may have taken effect: the result is [`RepairUnsettled`], which only a
    /// not-applied verdict turns into a repairable pathway.
    pub fn require_repair(
        self,
        rt: &Runtime,
        actor: &Actor,
    ) -> Result<Pathway<RepairUnsettled>, Refused<Stopped>> {
        let attempt = self.stage.attempt.clone();
        self.simple(
            rt,
            actor,
            Act::RequireRepair,
            State::RepairRequired,
            json!({}),
            RepairUnsettled {
                attempt,
                _private: (),
            },
        )
    }
}

impl Pathway<PartiallyCompleted> {
    /// Sent to repair by the repair owner. Part of the effect happened: the result is
    /// [`RepairUnsettled`], which only a not-applied verdict turns into a repairable pathway.
    pub fn require_repair(
        self,
        rt: &Runtime,
        actor: &Actor,
    ) -> Result<Pathway<RepairUnsettled>, Refused<PartiallyCompleted>> {
        let attempt = self.stage.attempt.clone();
        self.simple(
            rt,
            actor,
            Act::RequireRepair,
            State::RepairRequired,
            json!({}),
            RepairUnsettled {
                attempt,
                _private: (),
            },
        )
    }
}

impl Pathway<RepairUnsettled> {
    /// The attempt that may have taken effect.
    #[must_use]
    pub fn attempt(&self) -> &str {
        &self.stage.attempt
    }

    /// Settles the pathway with a not-applied verdict for its last attempt (obtained by
    /// [`Runtime::reconcile`] or [`Runtime::attest`]): it becomes repairable. Recorded as
    /// evidence; the state stays `repair_required`.
    pub fn settle(
        self,
        rt: &Runtime,
        token: Reconciliation<NotApplied>,
    ) -> Result<Pathway<RepairRequired>, Refused<RepairUnsettled>> {
        let attempt = Some(self.stage.attempt.clone());
        let p = self.reconciled(rt, token, None, Some(AttemptStatus::NotApplied))?;
        let v = p.core.version;
        Ok(p.into_stage(
            v,
            RepairRequired {
                attempt,
                _private: (),
            },
        ))
    }

    /// Records an unresolved reconciliation; the pathway stays unsettled.
    pub fn keep_unsettled(
        self,
        rt: &Runtime,
        token: Reconciliation<Unresolved>,
    ) -> Result<Pathway<RepairUnsettled>, Refused<RepairUnsettled>> {
        self.reconciled(rt, token, None, None)
    }
}

impl<S: Stage> Pathway<S> {
    /// Repaired by the repair owner, with repair evidence and an optional compensation
    /// record (compensation itself is a separate, separately approved pathway).
    ///
    /// Only a [`RepairRequired`] pathway (its last attempt certainly did not take
    /// effect) can be repaired; a [`RepairUnsettled`] one must be settled first.
    pub fn repair(
        self,
        rt: &Runtime,
        actor: &Actor,
        evidence: &Value,
        compensation: Option<&Value>,
    ) -> Result<Pathway<ReadyToResume>, Refused<S>>
    where
        S: Repairable,
    {
        if let Err(e) = self.core.authorize(actor, Act::Repair) {
            return Err(Refused::new(self, e));
        }
        let previous_attempt = super::stage::sealed::RepairFrom::attempt(&self.stage);
        let data = json!({"evidence": evidence, "compensation": compensation, "attempt": previous_attempt});
        let data = match rt.check(&data) {
            Ok(d) => d,
            Err(e) => return Err(Refused::new(self, e)),
        };
        let change = Change {
            from: State::RepairRequired,
            to: Some(State::ReadyToResume),
            events: vec![event(
                "repaired",
                actor.as_str(),
                State::RepairRequired,
                State::ReadyToResume,
                data,
            )],
            attempt: None,
            approval: None,
        };
        let p = self.commit(rt, change)?;
        let v = p.core.version;
        Ok(p.into_stage(
            v,
            ReadyToResume {
                previous_attempt,
                _private: (),
            },
        ))
    }
}
