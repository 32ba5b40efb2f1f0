//! Binding and dispatch: the write-ahead attempt, the executor call, and recording
//! how far the delivery got.

use serde_json::{Value, json};

use crate::executor::{Delivery, Executor, Readback, RejectionClass};
use crate::ledger::EventKind;
use crate::pathway::outcome::{NotSent, Outcome, ReadUnrecorded, Unrecorded};
use crate::pathway::stage::{
    Bindable, Bound, Completed, Failed, PartiallyCompleted, RepairRequired, Returned, Stage,
    Unknown,
};
use crate::pathway::{
    ActionClass, Actor, Core, Pathway, PathwayError, PendingInsert, Refused, request_json,
};
use crate::runtime::{Runtime, StepPoint};
use crate::state::{AttemptStatus, State};
use crate::store::{AttemptWrite, Step};

use super::reconcile::observe;
use super::{Act, Change, attempt_event, event};

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
    crate::pathway::stage::sealed::BindFrom::previous_attempt(&p.stage)
}

impl Pathway<Bound> {
    /// What this pathway is bound to.
    #[must_use]
    pub fn binding(&self) -> &crate::executor::Binding {
        &self.stage.binding
    }

    /// Whether the pathway is stored. A [`Ready::Bound`](crate::Ready::Bound) pathway is
    /// not, until its dispatch records its attempt (or the refusal to send it).
    #[must_use]
    pub fn is_stored(&self) -> bool {
        self.core.pending.is_none()
    }

    /// Dispatches the call: re-checks the binding, asks the executor whether the request is
    /// still wanted ([`Executor::still_wanted`]: a refusal records and sends nothing), commits
    /// the write-ahead attempt record, calls the executor, and records the honest outcome.
    ///
    /// The execution actor may dispatch; a resumed pathway may also be dispatched by
    /// the resume authority.
    ///
    /// A read (a pathway whose definition and binding are both read-only) whose call
    /// errors, is rejected, times out or is cut off ends [`Outcome::ReadFailed`] (state
    /// `failed`, the reason in its attempt's outcome): a read changes nothing, so there is
    /// nothing to repair or reconcile. A call that may change something never does.
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
        let (p, request, attempt_id, start) = match self.prepared(rt, actor, executor) {
            Ok(prepared) => prepared,
            Err(not_sent) => return not_sent,
        };
        // In flight here from before its record is durable until its outcome is. A panic
        // in rpr's own steps releases it as a crash would; a panic inside the executor
        // keeps it in flight while the process lives (the write may live on elsewhere).
        let mut tracked = crate::runtime::Tracked::new(rt, &attempt_id);
        let running = match p.commit(rt, start) {
            Ok(p) => p,
            Err(r) => {
                executor.release();
                drop(tracked);
                let (pathway, error) = r.into_parts();
                return not_sent(pathway, error);
            }
        };
        rt.point(StepPoint::AfterAttemptCommit);
        let delivery = tracked.executing(|| executor.execute(&request));
        rt.point(StepPoint::AfterReply);
        let outcome = record_delivery(running, rt, actor, &attempt_id, delivery, readback);
        drop(tracked);
        if !matches!(outcome, Outcome::Unrecorded(_)) {
            rt.point(StepPoint::AfterOutcomeCommit);
        }
        outcome
    }

    /// Everything a dispatch does before its attempt is recorded: who may dispatch, the
    /// request the chain approved, the executor's preparation and last word, and the
    /// attempt record to write. `Err`: nothing was recorded or sent (unless a refusal by
    /// [`Executor::prepare`] was recorded). On `Ok` the executor holds a preparation.
    #[expect(
        clippy::result_large_err,
        reason = "the Err is the dispatch's own outcome, returned by value anyway"
    )]
    fn prepared(
        self,
        rt: &Runtime,
        actor: &Actor,
        executor: &mut dyn Executor,
    ) -> Result<(Self, crate::executor::Request, String, Change), Outcome> {
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
            return Err(not_sent(self, error));
        }
        if let Err(error) = approval_holds(rt, &self.core, from)
            .and_then(|()| approval_is_of(rt, &self.core, from, &self.stage.binding))
        {
            return Err(not_sent(self, error));
        }
        let request = self.core.definition.request.clone();
        // Only the request the chain approved is ever sent (its digest is in the proposal
        // event; the step's compare-and-set holds the row to the same digest).
        match crate::canonical::sha256_hex(&request_json(&request)) {
            Ok(given) if given == self.core.request_digest => {}
            Ok(given) => {
                let expected = self.core.request_digest.clone();
                return Err(not_sent(
                    self,
                    PathwayError::RequestMismatch { given, expected },
                ));
            }
            Err(e) => return Err(not_sent(self, e.into())),
        }
        if let Err(refusal) = executor.prepare(&request, &self.stage.binding) {
            let data = json!({"code": refusal.code, "message": refusal.message, "binding": self.stage.binding.digest});
            let change = Change {
                from,
                to: None,
                events: vec![event(
                    EventKind::DispatchRefused,
                    actor.as_str(),
                    from,
                    from,
                    rt.fit(&data),
                )],
                attempt: None,
                approval: None,
            };
            return Err(match self.commit(rt, change) {
                Ok(p) => not_sent(p, refusal.into()),
                Err(r) => {
                    let (p, e) = r.into_parts();
                    not_sent(p, e)
                }
            });
        }
        // The executor now holds a preparation for this request: every path below that
        // does not execute it releases it.
        let (attempt_id, start) = match self.start_change(rt, actor, &request, executor) {
            Ok(x) => x,
            Err(error) => {
                executor.release();
                return Err(not_sent(self, error));
            }
        };
        rt.point(StepPoint::BeforeAttemptCommit);
        // The caller's last word before anything is recorded (a request withdrawn meanwhile).
        if let Err(refusal) = executor.still_wanted() {
            executor.release();
            return Err(not_sent(self, refusal.into()));
        }
        Ok((self, request, attempt_id, start))
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
        // A pathway not stored yet (its row is written with this attempt) has no attempts.
        let seq = if self.core.pending.is_some() {
            1
        } else {
            i64::try_from(rt.attempt_records(&self.core.id)?.len()).unwrap_or(i64::MAX) + 1
        };
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
                    EventKind::AttemptStarted,
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

/// Refuses to send from `approved` once the approval that approved the pathway has
/// expired. Approvals are stamped and judged by one clock ([`Runtime::approval_now`]: the
/// database's on PostgreSQL, so a skew between the hosts sharing it moves no expiry).
fn approval_holds(rt: &Runtime, core: &Core, from: State) -> Result<(), PathwayError> {
    match core.approved_until {
        Some(until) if from == State::Approved && rt.approval_now()? >= until => {
            Err(PathwayError::ApprovalExpired {
                pathway: core.id.clone(),
                expired_at: until,
            })
        }
        _ => Ok(()),
    }
}

/// Refuses to send an approved pathway (or one repaired after it was sent on approvals:
/// a repair approves nothing) when an approval its last approval step used recorded a
/// binding ([`Runtime::grant_approval_of_binding`]) other than `bound`: what its approver
/// was shown is not where the call would go. Compared without the binding's class, which
/// is a word about the tool (the server's annotation, or the policy's stricter one), not
/// part of the tool: an approval of the tool as its server describes it holds for the call
/// bound with the policy's class. An approval that recorded no binding proves nothing
/// either way; the library leaves it to its host (`rpr` refuses it). A pathway not stored
/// yet has no approval; nothing is read for it.
fn approval_is_of(
    rt: &Runtime,
    core: &Core,
    from: State,
    bound: &crate::executor::Binding,
) -> Result<(), PathwayError> {
    if !matches!(from, State::Approved | State::ReadyToResume) || core.pending.is_some() {
        return Ok(());
    }
    let approvals = rt.approved_bindings(&core.id)?;
    let recorded = || {
        approvals
            .iter()
            .filter_map(|a| Some((a, a.binding_digest.as_ref()?)))
    };
    if recorded().all(|(_, d)| *d == bound.digest) {
        return Ok(());
    }
    let either_class =
        [ActionClass::ReadOnly, ActionClass::Mutating].map(|c| bound.clone().with_class(c).digest);
    match recorded().find(|(_, d)| **d != bound.digest && !either_class.contains(d)) {
        None => Ok(()),
        Some((a, d)) => Err(PathwayError::ApprovedAnotherBinding(Box::new(
            crate::pathway::AnotherBinding {
                pathway: core.id.clone(),
                approval: a.approval.clone(),
                approver: a.approver.clone(),
                approved: d.clone(),
                bound: bound.digest.clone(),
                from,
            },
        ))),
    }
}

fn not_sent(pathway: Pathway<Bound>, error: PathwayError) -> Outcome {
    Outcome::NotSent(NotSent { pathway, error })
}

/// Why a tool error (`isError: true`) leaves a call that may change something unknown.
pub(crate) const TOOL_ERROR_PROVES_NOTHING: &str = "the tool reported an error (isError: true), which does not prove it did nothing: a server may fail after its write";

/// What a delivery means for the pathway.
enum Class {
    Completed,
    Returned,
    Failed,
    /// A read that errored, was rejected, timed out or was cut off.
    ReadFailed,
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
    let (class, change, evidence) = delivery_change(&p, rt, actor, attempt, delivery, readback);
    let id = p.core.id.clone();
    match p.commit_running(rt, change) {
        Ok(p) => outcome_of(p, class, attempt, evidence),
        Err(error) => Outcome::Unrecorded(Unrecorded {
            pathway: id,
            attempt: attempt.to_owned(),
            error,
        }),
    }
}

/// What a delivery means, the step that records it (from `running`), and its evidence.
fn delivery_change(
    p: &Pathway<Bound>,
    rt: &Runtime,
    actor: &Actor,
    attempt: &str,
    delivery: Delivery,
    readback: Option<&mut dyn Readback>,
) -> (Class, Change, Value) {
    let mutating = p.core.definition.class != ActionClass::ReadOnly;
    // Only a read may conclude `failed` from an error or an unknown result, since it changes
    // nothing. A read is read-only by its definition *and* its binding: `bind` refuses a
    // read-only definition on a mutating target, and a definition declared mutating is
    // never treated as a read, whatever its target says.
    let read = !mutating && p.stage.binding.class == ActionClass::ReadOnly;
    let (class, status, kind, evidence): (Class, AttemptStatus, EventKind, Value) = match delivery {
        Delivery::NothingWritten { reason } => (
            Class::Failed,
            AttemptStatus::NotSent,
            EventKind::AttemptNotSent,
            json!({"reason": reason}),
        ),
        Delivery::PossiblyWritten { reason } => (
            Class::Unknown,
            AttemptStatus::Unknown,
            EventKind::AttemptUnknown,
            json!({"reason": reason}),
        ),
        Delivery::Succeeded { reply } if mutating => (
            Class::Returned,
            AttemptStatus::Returned,
            EventKind::AttemptReturned,
            reply,
        ),
        Delivery::Succeeded { reply } => (
            Class::Completed,
            AttemptStatus::Succeeded,
            EventKind::AttemptCompleted,
            reply,
        ),
        // A tool error is the server's word, and an SDK answers one for an exception
        // thrown after the handler's write (an output that fails its schema, a follow-up
        // read that timed out): it does not prove the call did nothing, so a call that
        // may change something is unknown until a readback or an attestation says.
        Delivery::ToolFailed { reply } if mutating => (
            Class::Unknown,
            AttemptStatus::Unknown,
            EventKind::AttemptUnknown,
            json!({"reason": TOOL_ERROR_PROVES_NOTHING, "reply": reply}),
        ),
        Delivery::ToolFailed { reply } => (
            Class::Failed,
            AttemptStatus::Failed,
            EventKind::AttemptFailed,
            reply,
        ),
        Delivery::Partial { reply } => (
            Class::Partial,
            AttemptStatus::Partial,
            EventKind::AttemptPartial,
            reply,
        ),
        Delivery::Rejected {
            error,
            class: RejectionClass::NotApplied,
        } => (
            Class::Failed,
            AttemptStatus::NotApplied,
            EventKind::AttemptRejected,
            json!({"error": error, "class": "not_applied"}),
        ),
        Delivery::Rejected { error, .. } => (
            Class::Unknown,
            AttemptStatus::Unknown,
            EventKind::AttemptRejected,
            json!({"error": error, "class": "unknown"}),
        ),
    };
    let class = match class {
        Class::Failed | Class::Unknown if read => Class::ReadFailed,
        other => other,
    };
    // A reply may echo the request's secret arguments: redact those too.
    let evidence = rt.fit_beside(&evidence, &request_json(&p.core.definition.request));
    let to = match class {
        Class::Completed => Some(State::Completed),
        Class::Returned => None,
        Class::Failed => Some(State::RepairRequired),
        Class::ReadFailed => Some(State::Failed),
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
    (class, change, evidence)
}

/// The outcome of a delivery recorded as `class` (`p` carries the version its record left).
fn outcome_of(p: Pathway<Bound>, class: Class, attempt: &str, evidence: Value) -> Outcome {
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
        Class::ReadFailed => Outcome::ReadFailed(p.into_stage(
            v,
            Failed {
                attempt,
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

impl Pathway<Failed> {
    /// The attempt of the failed read (its outcome records why it failed).
    #[must_use]
    pub fn attempt(&self) -> &str {
        &self.stage.attempt
    }
}

impl Pathway<Bound> {
    /// Commits a step from `running` (the bound value's stored state moved on at the attempt commit).
    fn commit_running(self, rt: &Runtime, change: Change) -> Result<Self, PathwayError> {
        self.commit(rt, change).map_err(|r| r.into_parts().1)
    }
}

/// A bound call proven to be a read: its definition **and** its binding are read-only (the
/// same test that lets a failed read end [`Outcome::ReadFailed`]). Only
/// [`Pathway::into_read`] makes one, so the one-commit dispatch below cannot be used for a
/// call that may change something.
///
/// Its [`BoundRead::dispatch`] records the attempt and its outcome in **one** durable
/// commit, after the call answered and before the dispatch returns (and so before any
/// caller can hand the answer on), instead of the write-ahead attempt record and then the
/// outcome. What is recorded is the same: the `attempt_started` event and the outcome's
/// event, in that order, with the same contents.
#[derive(Debug)]
#[must_use = "a bound read must be dispatched (dropped, it leaves nothing behind)"]
pub struct BoundRead {
    pathway: Pathway<Bound>,
}

impl Pathway<Bound> {
    /// The bound call as a [`BoundRead`] when its definition and its binding are both
    /// read-only; otherwise the pathway back, unchanged (a call that may change something
    /// keeps its write-ahead attempt record: [`Pathway::dispatch`]).
    #[expect(
        clippy::result_large_err,
        reason = "the Err is the bound pathway itself, handed back by value"
    )]
    pub fn into_read(self) -> Result<BoundRead, Pathway<Bound>> {
        if self.core.definition.class == ActionClass::ReadOnly
            && self.stage.binding.class == ActionClass::ReadOnly
        {
            Ok(BoundRead { pathway: self })
        } else {
            Err(self)
        }
    }
}

impl BoundRead {
    /// The pathway's id.
    #[must_use]
    pub fn id(&self) -> &str {
        self.pathway.id()
    }

    /// What the read is bound to.
    #[must_use]
    pub fn binding(&self) -> &crate::executor::Binding {
        &self.pathway.stage.binding
    }

    /// Whether the pathway is stored (see [`Pathway::is_stored`]).
    #[must_use]
    pub fn is_stored(&self) -> bool {
        self.pathway.is_stored()
    }

    /// The bound pathway, to dispatch with its attempt recorded first after all.
    #[must_use]
    pub fn into_bound(self) -> Pathway<Bound> {
        self.pathway
    }

    /// Dispatches the read like [`Pathway::dispatch`] (the same checks, the same refusals
    /// before anything is sent, the same outcomes: [`Outcome::Completed`],
    /// [`Outcome::ReadFailed`] or [`Outcome::NotSent`]), but with **one** durable commit:
    /// the attempt record and the outcome are committed together once the executor
    /// returned, and this returns only after that commit (synced, or under
    /// [`ReadDurability::ProcessCrashSafe`](crate::store::ReadDurability::ProcessCrashSafe)
    /// committed without a sync of its own). A pathway not stored yet is stored in the
    /// same commit.
    ///
    /// - Nothing is recorded while the call is out: a crash (or kill) after the send and
    ///   before the commit leaves no record of the read at all (no pathway if it was not
    ///   stored, else the pathway as it was before the dispatch), and no effect, since a
    ///   read changes nothing. The caller never had its answer.
    /// - If the commit fails (the store, or another process took the pathway or its key
    ///   meanwhile), the read was sent and answered but nothing is recorded:
    ///   [`Outcome::ReadUnrecorded`]. Its answer must not be handed on; reading again is a
    ///   new read.
    /// - Without a write-ahead record, nothing stops two dispatchers of one *stored*
    ///   approved read from both sending it (the store then keeps one record and the other
    ///   gets [`Outcome::ReadUnrecorded`]): harmless for a read, never possible for a call
    ///   that may change something.
    ///
    /// The step hook sees [`StepPoint::BeforeAttemptCommit`] (the executor's last word is
    /// next; nothing is committed there), [`StepPoint::AfterReply`] and
    /// [`StepPoint::AfterOutcomeCommit`] (the one commit), never
    /// [`StepPoint::AfterAttemptCommit`].
    pub fn dispatch(self, rt: &Runtime, actor: &Actor, executor: &mut dyn Executor) -> Outcome {
        let (p, request, attempt_id, start) = match self.pathway.prepared(rt, actor, executor) {
            Ok(prepared) => prepared,
            Err(not_sent) => return not_sent,
        };
        // The attempt's own time: when it was sent, as in a two-commit dispatch.
        let started_at = rt.now();
        let delivery = executor.execute(&request);
        rt.point(StepPoint::AfterReply);
        let (class, finish, evidence) = delivery_change(&p, rt, actor, &attempt_id, delivery, None);
        match p.commit_read(rt, start, started_at, finish) {
            Ok(p) => {
                rt.point(StepPoint::AfterOutcomeCommit);
                outcome_of(p, class, &attempt_id, evidence)
            }
            Err((pathway, error)) => Outcome::ReadUnrecorded(ReadUnrecorded {
                pathway,
                attempt: attempt_id,
                error,
            }),
        }
    }
}

impl Pathway<Bound> {
    /// Commits a read's attempt (`start`, at `started_at`) and its outcome (`finish`) as
    /// one unit: both, or neither. `Err`: the pathway's id and why nothing was recorded.
    fn commit_read(
        mut self,
        rt: &Runtime,
        start: Change,
        started_at: i64,
        finish: Change,
    ) -> Result<Self, (String, PathwayError)> {
        let id = self.core.id.clone();
        if let Err(e) = rt.own(&self.core) {
            return Err((id, e));
        }
        let step = |change: Change, version: i64, at: i64| Step {
            pathway: id.clone(),
            expected_state: change.from,
            expected_version: version,
            fence: self.fence(),
            to: change.to,
            events: change.events,
            attempt: change.attempt,
            approval: change.approval,
            at,
        };
        // The outcome's expected version is set by the store to the one the attempt left.
        let steps = vec![
            step(start, self.core.version, started_at),
            step(finish, self.core.version, rt.now()),
        ];
        let new = self.core.pending.take().map(|pending| {
            let PendingInsert { new, events } = *pending;
            (new, events)
        });
        let inserting = new.is_some();
        match rt.write_for(self.core.definition.class, move |b| {
            b.apply_together(new, steps)
        }) {
            Ok(v) => {
                self.core.version = v;
                Ok(self)
            }
            Err(e)
                if inserting
                    && e.is_unique_violation()
                    && rt.key_stored(&self.core.definition.idempotency_key) =>
            {
                let key = self.core.definition.idempotency_key.clone();
                Err((id, PathwayError::KeyTaken { key }))
            }
            Err(e) => Err((id, e.into())),
        }
    }
}
