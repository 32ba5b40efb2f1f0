//! Loading and recovering pathways: the stage a stored state allows, and an in-flight
//! attempt whose owner is gone turned into a recorded unknown.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{RELOADS, Runtime};
use crate::ledger::EventKind;
use crate::pathway::stage::{
    Aborted, Approved, AwaitingApproval, Completed, Denied, Failed, Held, HumanGate,
    PartiallyCompleted, Proposed, ReadyToResume, RepairRequired, RepairUnsettled, Returned,
    Stopped, Unknown,
};
use crate::pathway::{Core, Definition, Pathway, PathwayError, StoredPathway, request_json};
use crate::state::{AttemptStatus, State};
use crate::store::{AttemptRecord, AttemptWrite, EventDraft, PathwayRecord, Step, StoreError};

impl Runtime {
    /// Loads one pathway in the stage its stored state allows (see [`StoredPathway`]).
    ///
    /// The pathway's rows are first checked against its own ledger events; a pathway they
    /// do not explain is refused ([`StoreError::Unexplained`]). A `running` pathway whose
    /// in-flight attempt's owner is gone is moved to `write_status_unknown` (recorded in
    /// the ledger) and returned as unknown; one whose owner is alive is returned as
    /// [`StoredPathway::InFlightElsewhere`].
    pub fn load(&self, id: &str) -> Result<StoredPathway, PathwayError> {
        self.same_process()?;
        let mut tries = 0;
        loop {
            let read = self.read_checked(id)?;
            match self.rehydrate(read) {
                // What was read went stale before the recovery step (an attempt of this
                // process finished in between): the step was refused, so read again.
                Err(PathwayError::Store(StoreError::Conflict { .. })) if tries < RELOADS => {
                    tries += 1;
                }
                other => return other,
            }
        }
    }

    /// One pathway's row, definition digest and attempts, checked against its own events,
    /// all in one read snapshot: another process's step committing in between can neither
    /// be half-seen nor reported as a corrupt row.
    fn read_checked(
        &self,
        id: &str,
    ) -> Result<(PathwayRecord, String, Vec<AttemptRecord>), StoreError> {
        self.store().read_checked(id)
    }

    /// Every unresolved (non-terminal) pathway, re-hydrated; see [`Runtime::load`].
    ///
    /// A pathway left `proposed` (the host stopped between proposal and admission) comes
    /// back as [`StoredPathway::Proposed`]: admit it (a deny policy is the way to refuse it).
    pub fn recover(&self) -> Result<Vec<StoredPathway>, PathwayError> {
        self.same_process()?;
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self.store().unresolved(after.as_deref(), 1000)?;
            let Some(last) = page.last() else { break };
            after = Some(last.id.clone());
            for record in page {
                out.push(self.load(&record.id)?);
            }
        }
        Ok(out)
    }

    fn rehydrate(
        &self,
        (record, definition_digest, attempts): (PathwayRecord, String, Vec<AttemptRecord>),
    ) -> Result<StoredPathway, PathwayError> {
        let definition: Definition = serde_json::from_value(record.definition.clone())
            .map_err(|e| StoreError::Corrupt(format!("pathway {}: definition: {e}", record.id)))?;
        let redacted = crate::canonical::sha256_hex(&request_json(&definition.request))?
            != record.request_digest;
        let mut core = Box::new(Core {
            id: record.id.clone(),
            database: Arc::clone(&self.database),
            version: record.version,
            definition,
            proposer: crate::Actor::new(&record.proposer),
            approved_until: None,
            definition_digest,
            request_digest: record.request_digest.clone(),
            redacted,
            pending: None,
        });
        // An approved (or held) pathway is dispatched only while the approval that
        // approved it holds: when it expires is read from its events.
        if matches!(record.state, State::Approved | State::Held)
            && core.definition.authority.approval.is_some()
        {
            core.approved_until = self
                .approvals(&record.id)?
                .approved_until(&core.definition.authority);
        }
        let last = attempts.last();
        let last_id = last.map(|a| a.id.clone());
        let need_attempt = || {
            last_id
                .clone()
                .ok_or_else(|| StoreError::Corrupt(format!("pathway {} has no attempt", record.id)))
        };
        // One stage per stored state: each arm builds a different type.
        Ok(match record.state {
            State::Proposed => StoredPathway::Proposed(Pathway {
                core,
                stage: Proposed { _private: () },
            }),
            State::AwaitingApproval => StoredPathway::AwaitingApproval(Pathway {
                core,
                stage: AwaitingApproval { _private: () },
            }),
            State::HumanGate => StoredPathway::HumanGate(Pathway {
                core,
                stage: HumanGate { _private: () },
            }),
            State::Held => StoredPathway::Held(Pathway {
                core,
                stage: Held { _private: () },
            }),
            State::Approved => StoredPathway::Approved(Pathway {
                core,
                stage: Approved { _private: () },
            }),
            State::Running => {
                let attempt = last.ok_or_else(|| {
                    StoreError::Corrupt(format!("running pathway {} has no attempt", record.id))
                })?;
                match attempt.status {
                    AttemptStatus::Returned => StoredPathway::Returned(Pathway {
                        core,
                        stage: Returned {
                            attempt: attempt.id.clone(),
                            reply: attempt.outcome.clone().unwrap_or(Value::Null),
                            _private: (),
                        },
                    }),
                    AttemptStatus::InFlight => self.in_flight(core, &record, attempt)?,
                    other @ (AttemptStatus::NotSent
                    | AttemptStatus::Succeeded
                    | AttemptStatus::Failed
                    | AttemptStatus::Partial
                    | AttemptStatus::Unknown
                    | AttemptStatus::Applied
                    | AttemptStatus::NotApplied) => {
                        return Err(StoreError::Corrupt(format!(
                            "running pathway {} has attempt status {other}",
                            record.id
                        ))
                        .into());
                    }
                }
            }
            State::WriteStatusUnknown => StoredPathway::Unknown(Pathway {
                core,
                stage: Unknown {
                    attempt: need_attempt()?,
                    _private: (),
                },
            }),
            State::Stopped => StoredPathway::Stopped(Pathway {
                core,
                stage: Stopped {
                    attempt: need_attempt()?,
                    _private: (),
                },
            }),
            State::PartiallyCompleted => StoredPathway::PartiallyCompleted(Pathway {
                core,
                stage: PartiallyCompleted {
                    attempt: need_attempt()?,
                    _private: (),
                },
            }),
            State::RepairRequired => match last {
                Some(a) if !a.status.is_settled() => StoredPathway::RepairUnsettled(Pathway {
                    core,
                    stage: RepairUnsettled {
                        attempt: a.id.clone(),
                        _private: (),
                    },
                }),
                _ => StoredPathway::RepairRequired(Pathway {
                    core,
                    stage: RepairRequired {
                        attempt: last_id,
                        _private: (),
                    },
                }),
            },
            State::ReadyToResume => StoredPathway::ReadyToResume(Pathway {
                core,
                stage: ReadyToResume {
                    previous_attempt: last_id,
                    _private: (),
                },
            }),
            State::Completed => StoredPathway::Completed(Pathway {
                core,
                stage: Completed { _private: () },
            }),
            State::Denied => StoredPathway::Denied(Pathway {
                core,
                stage: Denied { _private: () },
            }),
            State::Aborted => StoredPathway::Aborted(Pathway {
                core,
                stage: Aborted { _private: () },
            }),
            State::Failed => StoredPathway::Failed(Pathway {
                core,
                stage: Failed {
                    attempt: need_attempt()?,
                    _private: (),
                },
            }),
        })
    }

    /// A `running` pathway whose attempt is in flight: still in flight elsewhere while its
    /// owner lives, else taken over as unknown.
    ///
    /// On SQLite (one machine) the owner's liveness is its process (or, for an owner on
    /// another host name, its lease). On PostgreSQL the owner may be on any machine, so
    /// only the lease counts, judged by the database's clock inside the takeover's own
    /// transaction (the row locked): a host name or a process id seen from here proves
    /// nothing about another machine.
    fn in_flight(
        &self,
        core: Box<Core>,
        record: &PathwayRecord,
        attempt: &AttemptRecord,
    ) -> Result<StoredPathway, PathwayError> {
        let elsewhere = || StoredPathway::InFlightElsewhere {
            pathway: Box::new(record.clone()),
            attempt: Box::new(attempt.clone()),
        };
        #[cfg(feature = "postgres")]
        if let super::Store::Pg { backend, .. } = self.store() {
            use crate::store::pg::PgError;
            if self.carries_here(attempt) {
                return Ok(elsewhere());
            }
            let read = is_read(&core.definition, attempt);
            return match backend.take_over(
                &record.id,
                &attempt.id,
                &self.owner_id(),
                self.now(),
                read,
            ) {
                Ok(version) => Ok(self.taken(core, version, &record.id, &attempt.id, read)),
                Err(PgError::LeaseHeld { .. }) => Ok(elsewhere()),
                // Settled since it was read: read again.
                Err(PgError::NotInFlight { .. }) => Err(StoreError::Conflict {
                    pathway: record.id.clone(),
                    expected: State::Running,
                    version: record.version,
                }
                .into()),
                Err(e) => Err(StoreError::from(e).into()),
            };
        }
        match self.takeover(attempt)? {
            // Judged again inside the unit that writes it: a lease renewed since it was
            // read leaves the attempt its owner's.
            Some(proven_gone) => match self.recovered_unknown(core, record, attempt, proven_gone) {
                Err(PathwayError::Store(StoreError::LeaseHeld { .. })) => Ok(elsewhere()),
                other => other,
            },
            None => Ok(elsewhere()),
        }
    }

    /// An in-flight attempt whose owner is proven gone, or whose owner's lease lapsed,
    /// becomes unknown (recorded, with which of the two it was: after a lapse alone the
    /// owner may still send, and no readback settles the attempt). Its carrier, if it
    /// survived its owner, is killed now, before anyone reads back. A read (read-only by its
    /// definition and its binding) changes nothing, so it ends `failed` instead: its
    /// attempt's answer is unknown, and an identical read later is a new call.
    fn recovered_unknown(
        &self,
        core: Box<Core>,
        record: &PathwayRecord,
        attempt: &AttemptRecord,
        proven_gone: bool,
    ) -> Result<StoredPathway, PathwayError> {
        let fence = crate::store::Fence {
            definition_digest: core.definition_digest.clone(),
            request_digest: core.request_digest.clone(),
        };
        let read = is_read(&core.definition, attempt);
        let to = if read {
            State::Failed
        } else {
            State::WriteStatusUnknown
        };
        let mut data = if proven_gone {
            json!({ "owner": attempt.owner, "owner_fate": "gone", "reason": "in-flight attempt whose owner is gone" })
        } else {
            json!({ "owner": attempt.owner, "owner_fate": "lapsed", "reason": "in-flight attempt whose owner's lease lapsed; the owner was not proven gone and may still send" })
        };
        if read {
            data["read"] = json!(READ_ENDS_FAILED);
        }
        let step = Step {
            pathway: record.id.clone(),
            expected_state: State::Running,
            expected_version: record.version,
            fence,
            to: Some(to),
            events: vec![EventDraft {
                kind: EventKind::RecoveredUnknown,
                actor: "rpr-recovery".into(),
                from: Some(State::Running),
                to,
                attempt: Some(attempt.id.clone()),
                attempt_status: Some(AttemptStatus::Unknown.as_str()),
                data,
            }],
            attempt: Some(AttemptWrite::TakeOver {
                id: attempt.id.clone(),
                owner: attempt.owner.clone().unwrap_or_default(),
                lease_lapsed: !proven_gone,
            }),
            approval: None,
            at: self.now(),
        };
        let version = self.write(move |b| b.apply(step))?;
        Ok(self.taken(core, version, &record.id, &attempt.id, read))
    }

    /// The stage of a pathway whose in-flight attempt was just taken over (stored at
    /// `version`): unknown, or failed for a read. Its carrier, if it outlived its owner, is
    /// killed now, best effort: reconcile checks again and refuses a not-applied verdict
    /// while the carrier cannot be shown gone.
    fn taken(
        &self,
        mut core: Box<Core>,
        version: i64,
        pathway: &str,
        attempt: &str,
        read: bool,
    ) -> StoredPathway {
        let _ = self.settle_carrier(pathway, attempt);
        core.version = version;
        let attempt = attempt.to_owned();
        if read {
            return StoredPathway::Failed(Pathway {
                core,
                stage: Failed {
                    attempt,
                    _private: (),
                },
            });
        }
        StoredPathway::Unknown(Pathway {
            core,
            stage: Unknown {
                attempt,
                _private: (),
            },
        })
    }
}

/// What the recovery records of a read whose owner ended mid-call.
pub(crate) const READ_ENDS_FAILED: &str = "a read-only call (by its definition and its binding) changes nothing: it ends failed, and an identical read later is a new call";

/// Whether an attempt is a read: read-only by its definition *and* by the class its binding
/// recorded (as dispatch decides; a definition declared mutating is never a read).
pub(crate) fn is_read(definition: &Definition, attempt: &AttemptRecord) -> bool {
    definition.class == crate::ActionClass::ReadOnly && attempt.binding["class"] == "read_only"
}
