//! Every typed transition. Each method names one edge of [`crate::state::EDGES`]
//! (the table [`TRANSITIONS`] lists them) and writes exactly one step.
//!
//! Split along its seams: `table` (the edge table and who may take each step),
//! `admission` (admit, approve, deny, hold, release, escalate, abort), `dispatch`
//! (bind, dispatch and recording the delivery) and `reconcile` (readback, reconciling
//! an unknown outcome, stop, repair). This file holds what they share: the one way a
//! step is committed.

use serde_json::Value;

use super::stage::Stage;
use super::{Actor, Pathway, PathwayError, PendingInsert, Refused};
use crate::runtime::Runtime;
use crate::state::{AttemptStatus, State};
use crate::store::{ApprovalWrite, AttemptWrite, EventDraft, Step, StoreError};

mod admission;
mod dispatch;
mod reconcile;
mod table;

pub(crate) use admission::{admission, admission_events};
pub use dispatch::BoundRead;
pub(crate) use dispatch::TOOL_ERROR_PROVES_NOTHING;
pub use table::{Act, TRANSITIONS};

/// One step's content, before it becomes a store [`Step`].
struct Change {
    from: State,
    to: Option<State>,
    events: Vec<EventDraft>,
    attempt: Option<AttemptWrite>,
    approval: Option<ApprovalWrite>,
}

fn event(
    kind: crate::ledger::EventKind,
    actor: &str,
    from: State,
    to: State,
    data: Value,
) -> EventDraft {
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
        let class = self.core.definition.class;
        let change_from = change.from;
        let written = match self.core.pending.take() {
            None => rt.write_for(class, move |b| b.apply(step)),
            // Not stored yet: the pathway's row and events and this first step, one unit.
            Some(pending) => {
                let PendingInsert { new, events } = (*pending).clone();
                let written = rt.write_for(class, move |b| b.insert_and_apply(new, events, step));
                match written {
                    Err(e)
                        if e.is_unique_violation()
                            && rt.key_stored(&self.core.definition.idempotency_key) =>
                    {
                        let key = self.core.definition.idempotency_key.clone();
                        self.core.pending = Some(pending);
                        return Err(Refused::new(self, PathwayError::KeyTaken { key }));
                    }
                    // Another pathway holds this id (ids from two sources that collide): this
                    // one is not the stored one, as for a step on a stale handle.
                    Err(e)
                        if e.is_unique_violation()
                            && matches!(rt.pathway_record(&self.core.id), Ok(Some(_))) =>
                    {
                        self.core.pending = Some(pending);
                        Err(StoreError::Conflict {
                            pathway: self.core.id.clone(),
                            expected: change_from,
                            version: self.core.version,
                        })
                    }
                    Err(e) => {
                        self.core.pending = Some(pending);
                        Err(e)
                    }
                    ok => ok,
                }
            }
        };
        match written {
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
