//! Proposing: a new pathway (with its admission in the same commit when a policy decides
//! at once), or the stored one replayed for a known idempotency key.

use std::sync::Arc;

use crate::ledger::EventKind;
use serde_json::json;

use crate::evidence;
use crate::executor::Executor;
use crate::pathway::stage::{Approved, Bound, Proposed};
use crate::pathway::{
    Act, Actor, Admission, Core, Definition, Pathway, PathwayError, PendingInsert, Refused,
    StoredPathway, request_json,
};
use crate::state::State;
use crate::store::{EventDraft, NewPathway, StoreError};

use super::Runtime;

/// The result of [`Runtime::propose`].
#[derive(Debug)]
#[must_use = "a proposal must be admitted"]
#[non_exhaustive]
pub enum Proposal {
    /// A new pathway.
    New(Pathway<Proposed>),
    /// The same idempotency key with the same content: the stored pathway, replayed.
    Existing(StoredPathway),
}

/// The result of [`Runtime::propose_and_admit`].
#[derive(Debug)]
#[must_use = "an admitted pathway must be dispatched, gated or closed"]
#[non_exhaustive]
pub enum Decided {
    /// A new pathway, stored in the stage the policy decided.
    New(Admission),
    /// The same idempotency key with the same content: the stored pathway, replayed.
    Existing(StoredPathway),
}

/// The result of [`Runtime::propose_and_bind`].
#[derive(Debug)]
#[must_use = "a bound pathway must be dispatched (dropped, it leaves nothing behind)"]
#[non_exhaustive]
pub enum Ready {
    /// Approved by the policy and bound, **not stored yet**: its dispatch stores it, in the
    /// same commit as the attempt record.
    Bound(Pathway<Bound>),
    /// Approved and stored, but the executor refused to bind it (bind it again later).
    NotBound(Refused<Approved>),
    /// Not approved at once: stored in the stage the policy decided (never `Approved`).
    Admitted(Admission),
    /// The same idempotency key with the same content: the stored pathway, replayed.
    Existing(StoredPathway),
}

impl Ready {
    /// The bound pathway, or what happened instead (an `Err` that `?` carries as an error).
    ///
    /// `rt.propose_and_bind(&alice, &alice, definition, ALLOW_ALL, &mut files)?.into_bound()?`
    /// is the bound, not yet stored pathway of a new, allowed proposal.
    #[expect(
        clippy::result_large_err,
        reason = "the Err is the whole result (as for the other into_ helpers), made once per call"
    )]
    pub fn into_bound(self) -> Result<Pathway<Bound>, Ready> {
        match self {
            Ready::Bound(p) => Ok(p),
            other => Err(other),
        }
    }
}

impl std::fmt::Display for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ready::Bound(p) => write!(f, "pathway {}: bound, stored when dispatched", p.id()),
            Ready::NotBound(refused) => write!(f, "{refused}"),
            Ready::Admitted(admission) => write!(f, "{admission}"),
            Ready::Existing(stored) => write!(f, "{stored}"),
        }
    }
}

impl std::error::Error for Ready {}

impl Proposal {
    /// The new pathway, or the stored one when its idempotency key was already used with
    /// the same content (replayed).
    pub fn into_new(self) -> Result<Pathway<Proposed>, StoredPathway> {
        match self {
            Proposal::New(p) => Ok(p),
            Proposal::Existing(stored) => Err(stored),
        }
    }
}

impl Decided {
    /// The new pathway's admission, or the stored pathway when its idempotency key was
    /// already used with the same content (replayed).
    ///
    /// `rt.propose_and_admit(&alice, &alice, definition, ALLOW_ALL)?.into_new()?.into_approved()?`
    /// is the approved pathway of a new, allowed proposal.
    pub fn into_new(self) -> Result<Admission, StoredPathway> {
        match self {
            Decided::New(admission) => Ok(admission),
            Decided::Existing(stored) => Err(stored),
        }
    }
}

/// How a proposal is stored ([`Runtime::propose_inner`]).
struct Insert {
    /// An approved pathway is stored by its dispatch ([`Runtime::propose_and_bind`]).
    defer_approved: bool,
    key: Key,
    /// Held to one open call per identity ([`Runtime::propose_one_open`]).
    one_open: bool,
}

impl Runtime {
    /// Proposes an action. The definition is redacted, bounded and stored with the
    /// first ledger event in one transaction. The same idempotency key with the same
    /// content replays the stored pathway; with other content it is refused.
    pub fn propose(
        &self,
        proposer: &Actor,
        definition: Definition,
    ) -> Result<Proposal, PathwayError> {
        self.propose_holding(proposer, definition, false)
    }

    /// [`Runtime::propose`] for a host that takes an identical call for the same call
    /// whatever its idempotency key (`rpr call`, `rpr gate`): while a pathway of the same
    /// request to the same server (`metadata.server`, a string) that may change something is
    /// open, the store refuses this one with [`StoreError::IdenticalOpen`] and writes
    /// nothing. The store checks it in the unit that would store the pathway, holding the
    /// ledger's head, so it holds across processes: a lookup made before proposing proves
    /// nothing by the time the pathway is stored. A definition that names no server, or is
    /// read-only, is proposed as by [`Runtime::propose`].
    ///
    /// # Errors
    ///
    /// As [`Runtime::propose`], and [`PathwayError::Store`] with
    /// [`StoreError::IdenticalOpen`] (naming the open pathway) as above.
    pub fn propose_one_open(
        &self,
        proposer: &Actor,
        definition: Definition,
    ) -> Result<Proposal, PathwayError> {
        self.propose_holding(proposer, definition, true)
    }

    fn propose_holding(
        &self,
        proposer: &Actor,
        definition: Definition,
        one_open: bool,
    ) -> Result<Proposal, PathwayError> {
        let stored = self.propose_inner(
            proposer,
            definition,
            Insert {
                defer_approved: false,
                key: Key::Given,
                one_open,
            },
            |_| ((), State::Proposed, vec![]),
        )?;
        Ok(match stored {
            Ok((p, ())) => Proposal::New(p),
            Err(existing) => Proposal::Existing(existing),
        })
    }

    /// Proposes an action and has the decision owner `decider` admit it by `policy`, in
    /// **one** durable commit: the pathway is stored already in the stage the policy
    /// decided (approved, awaiting approval, Human Gate or denied), with the `proposed`
    /// event and the admission events in one transaction. What is stored and recorded is
    /// exactly what [`Runtime::propose`] followed by [`Pathway::admit`] records; only the
    /// commit between them is gone.
    ///
    /// A crash before the commit leaves nothing (no pathway, nothing sent: proposing
    /// again with the same key starts afresh); after it, the pathway is stored admitted.
    /// `decider` must hold the decision-owner role of the definition's authority, or
    /// nothing is written. The same idempotency key with the same content replays the
    /// stored pathway, whatever its stage, as [`Decided::Existing`].
    pub fn propose_and_admit(
        &self,
        proposer: &Actor,
        decider: &Actor,
        definition: Definition,
        policy: &dyn crate::pathway::Admit,
    ) -> Result<Decided, PathwayError> {
        Act::Admit.authorize(&definition.authority, decider)?;
        let stored = self.propose_inner(
            proposer,
            definition,
            Insert {
                defer_approved: false,
                key: Key::Given,
                one_open: false,
            },
            admit_by(decider, policy),
        )?;
        Ok(match stored {
            Ok((p, decision)) => Decided::New(crate::pathway::admission(p, &decision)),
            Err(existing) => Decided::Existing(existing),
        })
    }

    /// Proposes, admits by `policy` and, when the policy approves, binds with `executor`,
    /// **without a commit of its own**: an approved and bound pathway is stored by its
    /// dispatch, in the same commit as its write-ahead attempt record
    /// ([`Ready::Bound`]). A whole call is then two commits (the attempt record, the
    /// outcome) instead of three; what is recorded is exactly what
    /// [`Runtime::propose_and_admit`], [`Pathway::bind`] and [`Pathway::dispatch`] record.
    ///
    /// - A crash before the dispatch's commit leaves nothing: no pathway, nothing sent.
    /// - After it, the pathway is stored with its attempt in flight, as after the attempt
    ///   commit of a stored pathway: recovery turns it unknown, settled by readback.
    /// - A [`Ready::Bound`] pathway dropped without dispatch leaves nothing behind. A
    ///   dispatch that sends nothing ([`crate::Outcome::NotSent`]) hands it back still
    ///   unstored, unless its refusal was recorded (a `dispatch_refused` event stores it).
    /// - Two proposals of one idempotency key racing unstored: the store's unique key lets
    ///   one dispatch commit; the other's commit is refused and it sends nothing.
    ///
    /// Not approved at once (held, Human Gate, denied), the pathway is stored as
    /// [`Runtime::propose_and_admit`] stores it ([`Ready::Admitted`]); approved but refused
    /// by the executor's bind, it is stored approved ([`Ready::NotBound`]).
    pub fn propose_and_bind(
        &self,
        proposer: &Actor,
        decider: &Actor,
        definition: Definition,
        policy: &dyn crate::pathway::Admit,
        executor: &mut dyn Executor,
    ) -> Result<Ready, PathwayError> {
        self.propose_and_bind_keyed(proposer, decider, definition, policy, executor, Key::Given)
    }

    /// [`Runtime::propose_and_bind`] for a definition whose idempotency key its caller
    /// made new for it (`Key::Fresh`: 96 random bits, as `rpr gate` gives a read), so no
    /// stored pathway can have it: the lookup of the key before the proposal is skipped.
    /// The store's unique key still decides: should the key be stored after all, the
    /// pathway's insert is refused (for an approved pathway, at its dispatch's commit, as
    /// when two proposals of one key race) and nothing of it is recorded.
    pub(crate) fn propose_and_bind_keyed(
        &self,
        proposer: &Actor,
        decider: &Actor,
        definition: Definition,
        policy: &dyn crate::pathway::Admit,
        executor: &mut dyn Executor,
        key: Key,
    ) -> Result<Ready, PathwayError> {
        Act::Admit.authorize(&definition.authority, decider)?;
        let stored = self.propose_inner(
            proposer,
            definition,
            Insert {
                defer_approved: true,
                key,
                one_open: false,
            },
            admit_by(decider, policy),
        )?;
        let (p, decision) = match stored {
            Ok(new) => new,
            Err(existing) => return Ok(Ready::Existing(existing)),
        };
        match crate::pathway::admission(p, &decision) {
            Admission::Approved(approved) if approved.core.pending.is_some() => {
                match approved.bind(executor) {
                    Ok(bound) => Ok(Ready::Bound(bound)),
                    Err(refused) => {
                        let (p, error) = refused.into_parts();
                        let p = self.save(p)?;
                        Ok(Ready::NotBound(Refused::new(p, error)))
                    }
                }
            }
            other => Ok(Ready::Admitted(other)),
        }
    }

    /// Stores a pathway that [`Runtime::propose_and_bind`] left unstored, on its own.
    fn save(&self, mut p: Pathway<Approved>) -> Result<Pathway<Approved>, PathwayError> {
        if let Some(pending) = p.core.pending.take() {
            let PendingInsert { new, events } = *pending;
            self.write_for(p.core.definition.class, move |b| {
                b.insert_pathway(new, events)
            })?;
        }
        Ok(p)
    }

    /// Stores a new pathway in the state `admit` gives it, with the events it adds after the
    /// proposal's (none: stored as proposed), in one transaction; or the stored pathway of
    /// the same key and content, replayed. `admit` runs only for a new pathway.
    fn propose_inner<D>(
        &self,
        proposer: &Actor,
        definition: Definition,
        insert: Insert,
        admit: impl FnOnce(&Definition) -> (D, State, Vec<EventDraft>),
    ) -> Result<Result<(Pathway<Proposed>, D), StoredPathway>, PathwayError> {
        let Insert {
            defer_approved,
            key,
            one_open,
        } = insert;
        let full =
            serde_json::to_value(&definition).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let request_digest = crate::canonical::sha256_hex(&request_json(&definition.request))?;
        let stored = match evidence::check(&full, &self.bounds) {
            Ok(stored) => stored,
            Err(e) => {
                // A definition without a canonical form is refused as that, as before.
                crate::canonical::sha256_hex(&full)?;
                return Err(e.into());
            }
        };
        let stored_text = crate::canonical::to_string(&stored)?;
        let definition_text_digest = crate::canonical::sha256_hex_bytes(stored_text.as_bytes());
        // Nothing redacted: the stored text is the full definition's canonical text.
        let definition_digest = if stored == full {
            definition_text_digest.clone()
        } else {
            crate::canonical::sha256_hex(&full)?
        };
        if key == Key::Given
            && let Some(stored) =
                self.replay_key(&definition.idempotency_key, &definition_digest)?
        {
            return Ok(Err(stored));
        }
        let id = self.new_id("pw");
        let at = self.now();
        let mut events = vec![EventDraft {
            kind: EventKind::Proposed,
            actor: proposer.as_str().to_owned(),
            from: None,
            to: State::Proposed,
            attempt: None,
            attempt_status: None,
            data: json!({
                "action": definition.request.action,
                "class": definition.class,
                "idempotency_key": definition.idempotency_key,
                "definition_digest": definition_digest,
                "definition_text_digest": definition_text_digest,
                "request_digest": request_digest,
            }),
        }];
        let (decided, state, admission) = admit(&definition);
        let version = if admission.is_empty() { 1 } else { 2 };
        events.extend(admission);
        let new = NewPathway {
            id: id.clone(),
            idempotency_key: definition.idempotency_key.clone(),
            definition: stored_text,
            definition_digest: definition_digest.clone(),
            request_digest: request_digest.clone(),
            proposer: proposer.as_str().to_owned(),
            at,
            state,
            version,
            // Held to one open call per identity: asked for (`propose_one_open`), or a call
            // `rpr gate` proposed (its metadata says so).
            one_open: if one_open {
                crate::store::rules::changing_server(&definition.metadata, &json!(definition.class))
            } else {
                crate::store::rules::gate_one_open(&definition.metadata, &json!(definition.class))
            },
        };
        let pending = if defer_approved && state == State::Approved {
            // Stored with its first step (see `propose_and_bind`).
            Some(Box::new(PendingInsert { new, events }))
        } else {
            let inserted = self.write_for(definition.class, move |b| b.insert_pathway(new, events));
            match inserted {
                Ok(()) => {}
                Err(e) if e.is_unique_violation() => {
                    // Lost a race for the same key: replay what won.
                    if let Some(stored) =
                        self.replay_key(&definition.idempotency_key, &definition_digest)?
                    {
                        return Ok(Err(stored));
                    }
                    return Err(e.into());
                }
                Err(e) => return Err(e.into()),
            }
            None
        };
        let p = Pathway {
            core: Box::new(Core {
                id,
                database: Arc::clone(&self.database),
                version,
                definition,
                proposer: proposer.clone(),
                approved_until: None,
                definition_digest,
                request_digest,
                redacted: false,
                pending,
            }),
            stage: Proposed { _private: () },
        };
        Ok(Ok((p, decided)))
    }

    /// Whether a pathway with idempotency key `key` is stored.
    pub(crate) fn key_stored(&self, key: &str) -> bool {
        matches!(self.existing_for_key(key), Ok(Some(_)))
    }

    fn existing_for_key(&self, key: &str) -> Result<Option<(String, String)>, StoreError> {
        self.store().with_key(key)
    }

    /// The stored pathway of `key`, replayed when its definition is `wanted`; refused
    /// (`IdempotencyConflict`) when the key was used with other content; `None` if unused.
    fn replay_key(&self, key: &str, wanted: &str) -> Result<Option<StoredPathway>, PathwayError> {
        let Some((id, digest)) = self.existing_for_key(key)? else {
            return Ok(None);
        };
        if digest != wanted {
            return Err(PathwayError::IdempotencyConflict {
                key: key.to_owned(),
                existing: id,
            });
        }
        self.load(&id).map(Some)
    }
}

/// Where a proposal's idempotency key comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    /// Given by the caller: a stored pathway may have it, and is replayed (or, with other
    /// content, refused as a conflict).
    Given,
    /// Made new for this proposal by its caller (random): not looked up first.
    Fresh,
}

/// The admission `decider` makes by `policy`: the decision, the state it moves a proposed
/// pathway to, and the events that record it.
fn admit_by<'a>(
    decider: &'a Actor,
    policy: &'a dyn crate::pathway::Admit,
) -> impl FnOnce(&Definition) -> (crate::pathway::Decision, State, Vec<EventDraft>) + 'a {
    move |definition| {
        let decision = policy.decide(definition);
        let (to, events) = crate::pathway::admission_events(&decision, decider.as_str());
        (decision, to, events)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Key;
    use crate::executor::Request;
    use crate::executor::scripted::AnswersOk;
    use crate::{
        ActionClass, Actor, Authority, Decision, Definition, Outcome, PathwayError, Ready, Runtime,
        State,
    };

    /// Proposes and binds the same read under the key `the-key`, held as `key`.
    fn propose(rt: &Runtime, key: Key, executor: &mut AnswersOk) -> Result<Ready, PathwayError> {
        let decider = Actor::new("policy:d");
        let definition = Definition::new(
            Request::new("read", json!({"path": "/a"})),
            ActionClass::ReadOnly,
            "the-key",
            Authority::single(&decider).with(crate::Role::ExecutionActor, &decider),
        );
        rt.propose_and_bind_keyed(
            &Actor::new("agent:p"),
            &decider,
            definition,
            &|_: &Definition| Decision::Allow,
            executor,
            key,
        )
    }

    fn read(rt: &Runtime, key: Key, executor: &mut AnswersOk) -> Outcome {
        let ready = propose(rt, key, executor).unwrap();
        let decider = Actor::new("policy:d");
        let Ready::Bound(bound) = ready else {
            panic!("not bound: {ready:?}");
        };
        bound.into_read().unwrap().dispatch(rt, &decider, executor)
    }

    /// A key its caller calls fresh is not looked up before the proposal, and the store's
    /// unique key still decides: a fresh key that is stored after all leaves nothing of
    /// the second call recorded (the read was sent; its answer is not to be handed on),
    /// where a given key replays the stored pathway and sends nothing.
    #[test]
    fn a_fresh_key_is_not_looked_up_and_the_store_still_refuses_it_when_stored() {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::open(dir.path().join("k.db")).unwrap();
        let mut executor = AnswersOk::default();
        assert!(matches!(
            read(&rt, Key::Fresh, &mut executor),
            Outcome::Completed(_)
        ));
        match read(&rt, Key::Fresh, &mut executor) {
            Outcome::ReadUnrecorded(u) => {
                assert!(
                    matches!(u.error, PathwayError::KeyTaken { .. }),
                    "{:?}",
                    u.error
                );
                assert_eq!(rt.reader().pathway(&u.pathway).unwrap(), None);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            executor.executed, 2,
            "not looked up: sent, then refused by the store"
        );
        match propose(&rt, Key::Given, &mut executor) {
            Ok(Ready::Existing(stored)) => assert_eq!(stored.state(), State::Completed),
            other => panic!("{other:?}"),
        }
        assert_eq!(executor.executed, 2, "a given key replays: nothing sent");
        assert!(rt.verify(None).unwrap().is_ok());
    }
}
