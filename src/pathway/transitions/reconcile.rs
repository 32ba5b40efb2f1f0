//! Readback and reconciliation: confirming a returned call, settling an unknown
//! outcome, stopping, and repair.

use serde_json::{Value, json};

use crate::executor::{Observation, Readback};
use crate::ledger::EventKind;
use crate::pathway::outcome::Confirmed;
use crate::pathway::stage::{
    Completed, PartiallyCompleted, ReadyToResume, Reconcilable, RepairRequired, RepairUnsettled,
    Repairable, Returned, Stage, Stopped, Unknown,
};
use crate::pathway::token::{
    Applied, NotApplied, Reconciliation, Unresolved, Verdict, VerdictKind,
};
use crate::pathway::{Actor, Pathway, PathwayError, Refused};
use crate::runtime::{Runtime, StepPoint};
use crate::state::{AttemptStatus, State};
use crate::store::{AttemptWrite, EventDraft};

use super::{Act, Change, attempt_event, event};

/// Reads a returned call's effect back: the state it moves the pathway to (completed
/// only when the effect is verified), the attempt's status and the `readback` event.
pub(super) fn observe(
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
    let evidence = rt.fit_beside(&evidence, &crate::pathway::request_json(request));
    let e = attempt_event(
        event(
            EventKind::Readback,
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
        if let Err(e) = self.core.own_token(&token.pathway, &token.database) {
            return Err(Refused::new(self, e));
        }
        let attempt = crate::pathway::stage::sealed::AttemptOf::attempt(&self.stage);
        if token.pathway != self.core.id || token.attempt != attempt {
            return Err(Refused::new(
                self,
                PathwayError::TokenMismatch(
                    "the reconciliation is for another pathway or attempt".into(),
                ),
            ));
        }
        if token.version != self.core.version {
            let error = PathwayError::StaleToken {
                pathway: token.pathway.clone(),
                made_at: token.version,
                now: self.core.version,
            };
            return Err(Refused::new(self, error));
        }
        let from = S::STATE;
        let mut recorded = event(
            EventKind::Reconciled,
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
        self.repair_unsettled(rt, actor, attempt)
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
        self.repair_unsettled(rt, actor, attempt)
    }
}

impl<S: Stage> Pathway<S> {
    /// The require-repair edge after a reply (repair owner, to a repair that only a
    /// not-applied verdict settles) of the stages that have it.
    fn repair_unsettled(
        self,
        rt: &Runtime,
        actor: &Actor,
        attempt: String,
    ) -> Result<Pathway<RepairUnsettled>, Refused<S>> {
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
        let found = rt.reader().attempts(&self.core.id).map(|all| {
            all.iter()
                .any(|a| a.id == self.stage.attempt && a.status == AttemptStatus::Applied)
        });
        match found {
            Ok(false) => {}
            Ok(true) => {
                let e = PathwayError::FoundApplied {
                    pathway: self.core.id.clone(),
                    attempt: self.stage.attempt.clone(),
                };
                return Err(Refused::new(self, e));
            }
            Err(e) => return Err(Refused::new(self, PathwayError::from(e))),
        }
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

    /// Records an applied verdict for the last attempt: it took effect (the attempt is
    /// recorded `applied`). The pathway stays unsettled, and no later not-applied verdict
    /// settles it ([`PathwayError::FoundApplied`]): a repair would lead to a resume, which
    /// would send the effect again, so only `abort`, its residual named, ends it.
    pub fn record_applied(
        self,
        rt: &Runtime,
        token: Reconciliation<Applied>,
    ) -> Result<Pathway<RepairUnsettled>, Refused<RepairUnsettled>> {
        self.reconciled(rt, token, None, Some(AttemptStatus::Applied))
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
        let previous_attempt = crate::pathway::stage::sealed::RepairFrom::attempt(&self.stage);
        let data = json!({"evidence": evidence, "compensation": compensation, "attempt": previous_attempt});
        let data = match rt.check(&data) {
            Ok(d) => d,
            Err(e) => return Err(Refused::new(self, e)),
        };
        let change = Change {
            from: State::RepairRequired,
            to: Some(State::ReadyToResume),
            events: vec![event(
                EventKind::Repaired,
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
