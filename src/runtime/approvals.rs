//! Approvals at a Human Gate: who may grant one, the quorum that approves a pathway, the
//! break-glass approval, and expiry.
//!
//! What counts is read from the pathway's own ledger events (chain-checked like every
//! other read of them), never from a caller's tokens: approvals are granted one approver at
//! a time, often by different processes, and a quorum is made from what is recorded. The
//! step that approves then uses every approval of its quorum or none, each checked again
//! by the store (unused, unrevoked, for this request, not expired).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::ledger::EventKind;
use crate::pathway::stage::Gated;
use crate::pathway::token::{Approval, Quorum};
use crate::pathway::{Act, Actor, Authority, Core, Pathway, PathwayError, Role};
use crate::state::State;
use crate::store::{EventDraft, Grant, LedgerRow, StoreError};

use super::Runtime;

/// One ledger event, as far as approvals go.
#[derive(Deserialize)]
struct Event {
    kind: String,
    actor: String,
    from: Option<String>,
    to: String,
    at: i64,
    #[serde(default)]
    data: Value,
}

/// One recorded approval.
#[derive(Debug, Clone)]
pub(crate) struct Granted {
    id: String,
    approver: Actor,
    at: i64,
    request_digest: String,
    break_glass: bool,
    /// The binding its approver was shown, when it recorded one.
    binding: Option<String>,
}

/// An approval a pathway's last approval step used ([`Runtime::approved_bindings`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ApprovedBinding {
    /// The approval's id.
    pub approval: String,
    /// Who granted it.
    pub approver: Actor,
    /// The digest of the binding the approver was shown, when the approval recorded one.
    pub binding_digest: Option<String>,
}

/// What a pathway's events say of its approvals.
#[derive(Debug, Default)]
pub(crate) struct Approvals {
    /// Granted, not used, not revoked by a Human Gate entered since; oldest first.
    outstanding: Vec<Granted>,
    /// The approvals used by the pathway's last approval step.
    last_used: Vec<Granted>,
}

impl Approvals {
    /// Folds the pathway's events, oldest first.
    pub(crate) fn read(events: &[LedgerRow]) -> Result<Self, StoreError> {
        let mut all = Self::default();
        let mut used_run = false;
        for row in events {
            let e: Event = serde_json::from_str(&row.event).map_err(|err| {
                StoreError::Corrupt(format!("ledger event {} is not an event: {err}", row.seq))
            })?;
            let gate = State::HumanGate.as_str();
            if e.to == gate && e.from.as_deref() != Some(gate) {
                // Entering a Human Gate revokes every approval not used yet.
                all.outstanding.clear();
            }
            let id = e.data.get("approval").and_then(Value::as_str);
            let approved = e.kind == EventKind::Approved.as_str();
            if e.kind == EventKind::ApprovalGranted.as_str()
                && let Some(id) = id
            {
                all.outstanding.push(Granted {
                    id: id.to_owned(),
                    approver: Actor::new(e.actor),
                    at: e.at,
                    request_digest: e
                        .data
                        .get("request_digest")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    break_glass: e.data.get("break_glass") == Some(&Value::Bool(true)),
                    binding: e
                        .data
                        .get("binding_digest")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                });
            } else if approved && let Some(id) = id {
                if !used_run {
                    all.last_used.clear();
                }
                if let Some(at) = all.outstanding.iter().position(|g| g.id == id) {
                    all.last_used.push(all.outstanding.remove(at));
                }
            }
            used_run = approved;
        }
        Ok(all)
    }

    /// Who has an approval of `request_digest` that counts at `now` (granted, unused, not
    /// revoked, not expired; break-glass approvals aside), and, with `binding`, that
    /// recorded that binding ([`Runtime::quorum_of_binding`]'s rule): they have nothing more
    /// to approve.
    pub(crate) fn counted(
        &self,
        request_digest: &str,
        authority: &Authority,
        now: i64,
        binding: Option<&str>,
    ) -> Vec<Actor> {
        let ttl = ttl_of(authority);
        let mut out: Vec<Actor> = Vec::new();
        for g in &self.outstanding {
            let live = g.request_digest == request_digest
                && !g.break_glass
                && binding.is_none_or(|b| g.binding.as_deref() == Some(b))
                && ttl.is_none_or(|t| g.at.saturating_add(t) > now);
            if live && !out.contains(&g.approver) {
                out.push(g.approver.clone());
            }
        }
        out
    }

    /// The binding the newest outstanding approval that recorded one was of: what an
    /// approver was last shown, for a view that cannot bind the call itself.
    pub(crate) fn newest_binding(&self) -> Option<&str> {
        self.outstanding
            .iter()
            .rev()
            .find_map(|g| g.binding.as_deref())
    }

    /// When the approval that approved the pathway last expires: the oldest approval of
    /// its last approval step, plus the rule's expiry.
    pub(crate) fn approved_until(&self, authority: &Authority) -> Option<i64> {
        let ttl = ttl_of(authority)?;
        let oldest = self.last_used.iter().map(|g| g.at).min()?;
        Some(oldest.saturating_add(ttl))
    }
}

/// The rule's expiry in ms, if it has one.
fn ttl_of(authority: &Authority) -> Option<i64> {
    let ms = authority.approval.as_ref()?.ttl_ms?;
    Some(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// Whether `approver` may approve what `proposer` proposed (the rule says whether a
/// proposer may; a pathway without a rule allows it, as it always did).
fn may_self_approve(authority: &Authority, proposer: &Actor, approver: &Actor) -> bool {
    approver != proposer || authority.approval.as_ref().is_none_or(|r| r.self_approval)
}

/// What a quorum is judged on.
struct Judged<'a> {
    id: &'a str,
    database: &'a Arc<str>,
    authority: &'a Authority,
    proposer: &'a Actor,
    request_digest: &'a str,
    /// Count only the approvals that recorded this binding ([`Runtime::quorum_of_binding`]).
    binding: Option<&'a str>,
}

impl Judged<'_> {
    /// The quorum the outstanding approvals make at `now`, or what is missing. The
    /// approval `first` (when it counts) stands for its approver.
    fn quorum(
        &self,
        approvals: &Approvals,
        now: i64,
        first: Option<&str>,
    ) -> Result<Quorum, PathwayError> {
        let ttl = ttl_of(self.authority);
        let mut live: Vec<&Granted> = approvals
            .outstanding
            .iter()
            .filter(|g| {
                g.request_digest == self.request_digest
                    && ttl.is_none_or(|t| g.at.saturating_add(t) > now)
                    && self.binding.is_none_or(|b| g.binding.as_deref() == Some(b))
            })
            .collect();
        live.sort_by_key(|g| Some(g.id.as_str()) != first);
        let rule = self.authority.approval.as_ref();
        let quorum = |chosen: Vec<&Granted>, break_glass| {
            let expires_at = ttl.and_then(|t| {
                let oldest = chosen.iter().map(|g| g.at).min()?;
                Some(oldest.saturating_add(t))
            });
            Quorum {
                database: Arc::clone(self.database),
                pathway: self.id.to_owned(),
                request_digest: self.request_digest.to_owned(),
                approvals: chosen
                    .into_iter()
                    .map(|g| (g.id.clone(), g.approver.clone(), g.at))
                    .collect(),
                break_glass,
                expires_at,
            }
        };
        let mut distinct: Vec<&Granted> = Vec::new();
        for g in live {
            if g.break_glass {
                if rule.is_some_and(|r| r.break_glass.contains(&g.approver)) {
                    return Ok(quorum(vec![g], true));
                }
                continue;
            }
            let counts = self.authority.holds(Role::ApprovalAuthority, &g.approver)
                && may_self_approve(self.authority, self.proposer, &g.approver)
                && !distinct.iter().any(|d| d.approver == g.approver);
            if counts {
                distinct.push(g);
            }
        }
        let need = self.authority.quorum();
        let have = u32::try_from(distinct.len()).unwrap_or(u32::MAX);
        if have >= need {
            return Ok(quorum(distinct, false));
        }
        let granted_by: Box<[Actor]> = distinct.iter().map(|g| g.approver.clone()).collect();
        let waiting_on = self
            .authority
            .approvers()
            .into_iter()
            .filter(|a| !granted_by.contains(a))
            .filter(|a| may_self_approve(self.authority, self.proposer, a))
            .cloned()
            .collect();
        Err(PathwayError::QuorumShort {
            pathway: self.id.to_owned(),
            have,
            need,
            granted_by,
            waiting_on,
        })
    }
}

impl Runtime {
    /// What the pathway's events say of its approvals.
    pub(crate) fn approvals(&self, id: &str) -> Result<Approvals, StoreError> {
        Approvals::read(&self.store().events(id)?)
    }

    /// Grants a Human Gate approval of `pathway`'s exact request by `approver`, one of the
    /// approvers of its approval rule (the approval authority without one). Recorded; it
    /// approves the pathway once its [`Quorum`] is made ([`Approval::quorum`],
    /// [`Runtime::quorum`]) and passed to `approve`.
    ///
    /// Refused, with nothing written: an actor who may not approve; the proposer, unless
    /// the rule allows self-approval; an approver whose approval of this request already
    /// counts and recorded the same binding (none, here; an approval of a binding shown,
    /// [`Runtime::grant_approval_of_binding`], stands only for that binding).
    pub fn grant_approval<S: Gated>(
        &self,
        pathway: &Pathway<S>,
        approver: &Actor,
    ) -> Result<Approval, PathwayError> {
        self.grant(pathway, approver, json!({}))
    }

    /// [`Runtime::grant_approval`] of the binding the approver was shown: its digest is
    /// recorded with the approval (`binding_digest`), so that a send made later (after the
    /// quorum filled, or by `resume`) can tell whether the server it binds is the one the
    /// approver saw ([`Runtime::approved_bindings`]).
    pub fn grant_approval_of_binding<S: Gated>(
        &self,
        pathway: &Pathway<S>,
        approver: &Actor,
        binding_digest: &str,
    ) -> Result<Approval, PathwayError> {
        self.grant(
            pathway,
            approver,
            json!({ "binding_digest": binding_digest }),
        )
    }

    fn grant<S: Gated>(
        &self,
        pathway: &Pathway<S>,
        approver: &Actor,
        extra: Value,
    ) -> Result<Approval, PathwayError> {
        let core = &pathway.core;
        self.own(core)?;
        core.authorize(approver, Act::GrantApproval)?;
        let authority = &core.definition.authority;
        if !may_self_approve(authority, &core.proposer, approver) {
            return Err(PathwayError::SelfApproval {
                actor: approver.clone(),
                pathway: core.id.clone(),
            });
        }
        if authority.approval.is_some() {
            let now = self.approval_now()?;
            let ttl = ttl_of(authority);
            let approvals = self.approvals(&core.id)?;
            // An approval of another binding (the server changed since it was given) does
            // not stand for this one: its approver may approve what they are shown now.
            let binding = extra.get("binding_digest").and_then(Value::as_str);
            if let Some(g) = approvals.outstanding.iter().find(|g| {
                g.approver == *approver
                    && g.request_digest == core.request_digest
                    && g.binding.as_deref() == binding
                    && ttl.is_none_or(|t| g.at.saturating_add(t) > now)
            }) {
                return Err(PathwayError::AlreadyApproved {
                    actor: approver.clone(),
                    pathway: core.id.clone(),
                    approval: g.id.clone(),
                });
            }
        }
        let (id, _) = self.record_grant(pathway, approver, extra)?;
        Ok(Approval {
            database: Arc::clone(&self.database),
            id,
            pathway: core.id.clone(),
            request_digest: core.request_digest.clone(),
            approver: approver.clone(),
        })
    }

    /// A break-glass approval of `pathway` by `actor`, one of its approval rule's
    /// `break_glass` actors: recorded as such with `reason`, and a [`Quorum`] by itself.
    pub fn break_glass<S: Gated>(
        &self,
        pathway: &Pathway<S>,
        actor: &Actor,
        reason: &str,
    ) -> Result<Quorum, PathwayError> {
        self.break_glass_with(
            pathway,
            actor,
            json!({"break_glass": true, "reason": reason}),
        )
    }

    /// [`Runtime::break_glass`] of the binding the actor was shown, its digest recorded
    /// with the approval as by [`Runtime::grant_approval_of_binding`].
    pub fn break_glass_of_binding<S: Gated>(
        &self,
        pathway: &Pathway<S>,
        actor: &Actor,
        reason: &str,
        binding_digest: &str,
    ) -> Result<Quorum, PathwayError> {
        self.break_glass_with(
            pathway,
            actor,
            json!({"break_glass": true, "reason": reason, "binding_digest": binding_digest}),
        )
    }

    fn break_glass_with<S: Gated>(
        &self,
        pathway: &Pathway<S>,
        actor: &Actor,
        data: Value,
    ) -> Result<Quorum, PathwayError> {
        let core = &pathway.core;
        self.own(core)?;
        let authority = &core.definition.authority;
        if !authority
            .approval
            .as_ref()
            .is_some_and(|r| r.break_glass.contains(actor))
        {
            return Err(PathwayError::NotAuthorized {
                actor: actor.clone(),
                action: "approve as break-glass",
                needs: "a break_glass actor of the approval rule".into(),
            });
        }
        let (id, at) = self.record_grant(pathway, actor, data)?;
        Ok(Quorum {
            database: Arc::clone(&self.database),
            pathway: core.id.clone(),
            request_digest: core.request_digest.clone(),
            approvals: vec![(id, actor.clone(), at)],
            break_glass: true,
            expires_at: ttl_of(authority).map(|t| at.saturating_add(t)),
        })
    }

    /// The approvals the pathway's last approval step used, each with the binding its
    /// approver was shown when the approval recorded one
    /// ([`Runtime::grant_approval_of_binding`]). Empty when no Human Gate approval ever
    /// approved the pathway (admitted by its policy). A send after the approval compares
    /// these with the binding it is about to use: an approval of another binding, or of
    /// none shown, does not prove that anyone approved the server it would go to.
    ///
    /// # Errors
    ///
    /// The pathway's events cannot be read, or one is not an event.
    pub fn approved_bindings(&self, id: &str) -> Result<Vec<ApprovedBinding>, StoreError> {
        let events = self.store().events(id)?;
        let used = Approvals::read(&events)?.last_used;
        let mut shown = std::collections::HashMap::new();
        for row in &events {
            let e: Event = serde_json::from_str(&row.event).map_err(|err| {
                StoreError::Corrupt(format!("ledger event {} is not an event: {err}", row.seq))
            })?;
            if e.kind == EventKind::ApprovalGranted.as_str()
                && let (Some(approval), Some(digest)) = (
                    e.data.get("approval").and_then(Value::as_str),
                    e.data.get("binding_digest").and_then(Value::as_str),
                )
            {
                shown.insert(approval.to_owned(), digest.to_owned());
            }
        }
        Ok(used
            .into_iter()
            .map(|g| ApprovedBinding {
                binding_digest: shown.remove(&g.id),
                approval: g.id,
                approver: g.approver,
            })
            .collect())
    }

    /// The quorum `pathway`'s recorded approvals make now: [`PathwayError::QuorumShort`]
    /// (naming who approved and who may still) when fewer distinct approvers than its rule
    /// needs have approvals that count (granted for this request, unused, not revoked by a
    /// Human Gate entered since, not expired, by an approver who may approve). Writes
    /// nothing.
    pub fn quorum<S: Gated>(&self, pathway: &Pathway<S>) -> Result<Quorum, PathwayError> {
        let core = &pathway.core;
        self.own(core)?;
        self.quorum_of(core)
    }

    /// [`Runtime::quorum`] of the approvals that recorded `binding_digest`
    /// ([`Runtime::grant_approval_of_binding`]) alone: the quorum of those who approved the
    /// call as it is bound now. An approval of another binding (given before the server
    /// changed) or of none shown does not count toward it, and does not keep its approver
    /// from approving this one. A host that records the binding it shows should judge the
    /// quorum this way: [`Runtime::quorum`] counts every approval of the request, and a
    /// quorum made of approvals of different bindings approves a call that no send will
    /// take (the dispatch refuses it: [`PathwayError::ApprovedAnotherBinding`]).
    pub fn quorum_of_binding<S: Gated>(
        &self,
        pathway: &Pathway<S>,
        binding_digest: &str,
    ) -> Result<Quorum, PathwayError> {
        let core = &pathway.core;
        self.own(core)?;
        self.judge(core, Some(binding_digest))
    }

    fn quorum_of(&self, core: &Core) -> Result<Quorum, PathwayError> {
        self.judge(core, None)
    }

    fn judge(&self, core: &Core, binding: Option<&str>) -> Result<Quorum, PathwayError> {
        let approvals = self.approvals(&core.id)?;
        Judged {
            id: &core.id,
            database: &core.database,
            authority: &core.definition.authority,
            proposer: &core.proposer,
            request_digest: &core.request_digest,
            binding,
        }
        .quorum(&approvals, self.approval_now()?, None)
    }

    /// Records `approver`'s approval of `pathway` with `extra` in its event: its id and time.
    fn record_grant<S: Gated>(
        &self,
        pathway: &Pathway<S>,
        approver: &Actor,
        extra: Value,
    ) -> Result<(String, i64), PathwayError> {
        let core = &pathway.core;
        let id = self.new_id("ap");
        let mut data = json!({ "approval": id, "request_digest": core.request_digest });
        if let (Value::Object(d), Value::Object(x)) = (&mut data, extra) {
            d.extend(x);
        }
        let event = EventDraft {
            kind: EventKind::ApprovalGranted,
            actor: approver.as_str().to_owned(),
            from: Some(S::STATE),
            to: S::STATE,
            attempt: None,
            attempt_status: None,
            data,
        };
        let at = self.approval_now()?;
        let grant = Grant {
            pathway: core.id.clone(),
            expected: S::STATE,
            version: core.version,
            fence: pathway.fence(),
            id: id.clone(),
            request_digest: core.request_digest.clone(),
            approver: approver.as_str().to_owned(),
            at,
            event,
        };
        self.write(move |b| b.grant_approval(grant))?;
        Ok((id, at))
    }
}

impl Approval {
    /// The quorum this approval makes with the others recorded for the same request (see
    /// [`Runtime::quorum`]), this one standing for its approver;
    /// [`PathwayError::QuorumShort`] while it is short. Writes nothing; the approval stays
    /// recorded either way.
    pub fn quorum(self, rt: &Runtime) -> Result<Quorum, PathwayError> {
        if *self.database != *rt.database {
            return Err(PathwayError::ForeignPathway {
                pathway: self.pathway,
                handle_database: self.database.to_string(),
                runtime_database: rt.database.to_string(),
            });
        }
        let record = rt
            .store()
            .pathway(&self.pathway)?
            .ok_or_else(|| StoreError::NoSuchPathway(self.pathway.clone()))?;
        let definition: crate::Definition = serde_json::from_value(record.definition)
            .map_err(|e| StoreError::Corrupt(format!("pathway {}: definition: {e}", record.id)))?;
        let approvals = rt.approvals(&self.pathway)?;
        Judged {
            id: &self.pathway,
            database: &self.database,
            authority: &definition.authority,
            proposer: &Actor::new(record.proposer),
            request_digest: &self.request_digest,
            binding: None,
        }
        .quorum(&approvals, rt.approval_now()?, Some(&self.id))
    }
}
