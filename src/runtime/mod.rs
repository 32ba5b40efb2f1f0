//! The runtime: one database, a clock, an id source and this process's identity.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use parking_lot::{MappedReentrantMutexGuard, ReentrantMutex, ReentrantMutexGuard};
use serde_json::{Value, json};

use crate::evidence::{self, Bounds};
use crate::executor::{Carrier, Observation, Readback};
use crate::ledger::{self, Report};
use crate::pathway::stage::{Gated, Proposed, Reconcilable};
use crate::pathway::token::{
    Applied, Approval, Attestation, NotApplied, Reconciled, Reconciliation, Unresolved, VerdictKind,
};
use crate::pathway::{
    Act, Actor, Admission, Core, Definition, Pathway, PathwayError, StoredPathway, request_json,
};
use crate::process::{self, GroupFate};
use crate::state::State;
use crate::store::batch::Batcher;
use crate::store::{
    Backend, EventDraft, NewPathway, ReadStore, SqliteBackend, StoreError, WriteStats,
};

mod builder;
mod owner;
mod recovery;

use builder::Hook;
pub use builder::{
    Clock, DEFAULT_BUSY_TIMEOUT, IdSource, RandomIds, RuntimeBuilder, SequentialIds, StepPoint,
    SystemClock,
};

pub(crate) use owner::{CarrierRecord, Tracked};
use owner::{Heartbeat, IN_FLIGHT, Owner};
/// How often `load` reads a pathway again when what it read went stale before its
/// recovery step could be recorded (the step is refused by compare-and-set, never misapplied).
pub(crate) const RELOADS: usize = 8;

/// The pathway runtime: the store plus what a step needs (clock, ids, owner identity).
///
/// A `Runtime` is `Send + Sync`: share one (`Arc<Runtime>`, or `&Runtime` in scoped
/// threads) among every thread of a host. It holds one SQLite connection; the steps that
/// threads submit while a commit is syncing share the next durable commit (group commit,
/// docs/storage.md), and each returns once its own step is durable. No step holds the
/// connection while an executor or a readback runs, so tool calls proceed side by side. An
/// attempt one thread is dispatching is in flight *here* for every thread
/// ([`Runtime::load`] and [`Runtime::recover`] return it as
/// [`StoredPathway::InFlightElsewhere`], never as unknown). Several processes may share
/// one database too: steps are serialized by SQLite and fenced by compare-and-set, and
/// in-flight attempts carry an owner and a lease.
///
/// Every pathway handle, approval and reconciliation is tied to the database it came
/// from (its identity is created with the schema): used with a runtime on another
/// database it is refused with [`PathwayError::ForeignPathway`] and nothing is written.
pub struct Runtime {
    /// The step connection. Reentrant, so that a thread holding [`Runtime::reader`] can
    /// still step; steps of other threads wait for it (one SQLite connection, one
    /// transaction at a time). No step holds it while an executor or readback runs.
    backend: ReentrantMutex<SqliteBackend>,
    /// Steps waiting for a commit: every write goes through it (`store::batch`).
    batcher: Batcher,
    /// How the steps of read-only pathways are committed.
    read_durability: crate::store::ReadDurability,
    database: Arc<str>,
    path: PathBuf,
    clock: Box<dyn Clock>,
    ids: Box<dyn IdSource>,
    owner: Owner,
    lease_ms: i64,
    hook: Option<Hook>,
    bounds: Bounds,
    in_flight: Mutex<HashSet<String>>,
    heartbeat: Mutex<Option<Heartbeat>>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // A runtime dropped mid-dispatch (a panic unwinding through the executor) no
        // longer holds its attempts: recovery may judge them.
        let mut set = IN_FLIGHT.lock().unwrap_or_else(PoisonError::into_inner);
        let mine = self
            .in_flight
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for attempt in mine.iter() {
            set.remove(&(
                self.database.to_string(),
                attempt.clone(),
                self.owner.nonce.clone(),
            ));
        }
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("owner", &self.owner.encode())
            .finish_non_exhaustive()
    }
}

/// Read access to a runtime's database: derefs to [`ReadStore`]. See [`Runtime::reader`].
pub struct Reader<'a>(MappedReentrantMutexGuard<'a, ReadStore>);

impl std::ops::Deref for Reader<'_> {
    type Target = ReadStore;
    fn deref(&self) -> &ReadStore {
        &self.0
    }
}

impl fmt::Debug for Reader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader").finish_non_exhaustive()
    }
}

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

impl Runtime {
    /// Opens (or creates) the database at `path` with defaults.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::builder(path).open()
    }

    /// A builder for the database at `path`.
    pub fn builder(path: impl AsRef<Path>) -> RuntimeBuilder {
        RuntimeBuilder::new(path.as_ref())
    }

    /// Read access to the same database, through the runtime's connection.
    ///
    /// While the returned guard lives, other threads' steps on this runtime wait (this
    /// thread's do not): keep it for a read, not across a tool call.
    #[must_use]
    pub fn reader(&self) -> Reader<'_> {
        Reader(ReentrantMutexGuard::map(self.backend.lock(), |b| {
            b.reader()
        }))
    }

    /// Verifies the ledger and the stored state; see [`ledger::verify`].
    pub fn verify(&self, known_head: Option<&str>) -> Result<Report, StoreError> {
        ledger::verify(&self.reader(), known_head)
    }

    /// The step connection, held until the guard drops (reads; writes go through
    /// [`Runtime::write`]).
    pub(crate) fn backend(&self) -> ReentrantMutexGuard<'_, SqliteBackend> {
        self.backend.lock()
    }

    /// Runs one step's writes through the group commit; returns once they are durable (or
    /// refused, or failed with their batch).
    pub(crate) fn write<T, F>(&self, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&SqliteBackend) -> Result<T, StoreError> + Send + 'static,
    {
        self.batcher.write(&self.backend, true, op)
    }

    /// [`Runtime::write`] for a step of a pathway of `class`: a read-only pathway's step is
    /// committed without its own sync under [`crate::store::ReadDurability::ProcessCrashSafe`].
    pub(crate) fn write_for<T, F>(&self, class: crate::ActionClass, op: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&SqliteBackend) -> Result<T, StoreError> + Send + 'static,
    {
        let synced = class != crate::ActionClass::ReadOnly
            || self.read_durability == crate::store::ReadDurability::Synced;
        self.batcher.write(&self.backend, synced, op)
    }

    /// Checks the binding of `tool` on the server a governing proxy calls `server` against
    /// its pin (see [`crate::store::PinCheck`]): pins it on first sight (recorded as pinned by
    /// `by`), and remembers a differing binding as seen, for [`Runtime::accept_pin`].
    pub fn check_pin(
        &self,
        server: &str,
        tool: &str,
        binding: &crate::executor::Binding,
        definition: &serde_json::Value,
        by: &Actor,
    ) -> Result<crate::store::PinCheck, StoreError> {
        let canonical = |v: &serde_json::Value| {
            crate::canonical::to_string(v).map_err(|e| StoreError::Corrupt(format!("pin: {e}")))
        };
        let candidate = crate::store::pins::Candidate {
            server: server.to_owned(),
            tool: tool.to_owned(),
            digest: binding.digest.clone(),
            binding: canonical(&binding.details)?,
            definition: canonical(definition)?,
        };
        let (by, at) = (by.as_str().to_owned(), self.now());
        self.write(move |b| b.check_pin(&candidate, &by, at))
    }

    /// Pins the changed binding `digest` last seen for `tool` of `server`: the operator
    /// names the digest they reviewed, so a binding that changed again is not pinned unseen.
    pub fn accept_pin(
        &self,
        server: &str,
        tool: &str,
        digest: &str,
        by: &Actor,
    ) -> Result<crate::store::PinRecord, StoreError> {
        let (server, tool, digest) = (server.to_owned(), tool.to_owned(), digest.to_owned());
        let (by, at) = (by.as_str().to_owned(), self.now());
        self.write(move |b| b.accept_pin(&server, &tool, &digest, &by, at))
    }

    /// How many steps this runtime made durable, and in how many durable commits: with
    /// several threads stepping at once, one commit carries the steps that queued while the
    /// previous one was syncing (docs/storage.md, "Group commit").
    #[must_use]
    pub fn write_stats(&self) -> WriteStats {
        self.batcher.stats()
    }
    pub(crate) fn now(&self) -> i64 {
        self.clock.now_ms()
    }
    pub(crate) fn new_id(&self, prefix: &str) -> String {
        self.ids.next_id(prefix)
    }
    pub(crate) fn point(&self, p: StepPoint) {
        if let Some(h) = &self.hook {
            h(p);
        }
    }
    pub(crate) fn owner_id(&self) -> String {
        self.owner.encode()
    }
    pub(crate) fn lease_ms(&self) -> i64 {
        self.lease_ms
    }
    /// This database's identity.
    #[must_use]
    pub fn database_id(&self) -> &str {
        &self.database
    }
    /// Refuses a handle that belongs to another database.
    pub(crate) fn own(&self, core: &Core) -> Result<(), PathwayError> {
        if core.database == self.database {
            Ok(())
        } else {
            Err(PathwayError::ForeignPathway {
                pathway: core.id.clone(),
                handle_database: core.database.to_string(),
                runtime_database: self.database.to_string(),
            })
        }
    }
    /// The carrier as recorded with an attempt: on this host.
    pub(crate) fn carrier_record(&self, c: &Carrier) -> Value {
        json!(CarrierRecord {
            host: self.owner.host.clone(),
            pid: c.pid,
            pgid: c.pgid,
            start: c.start.clone(),
        })
    }
    /// Redacts and bounds a value recorded before dispatch: refuses what is too large.
    pub(crate) fn check(&self, value: &Value) -> Result<Value, evidence::EvidenceError> {
        evidence::check(value, &self.bounds)
    }
    /// Redacts and bounds evidence recorded after dispatch: never fails.
    pub(crate) fn fit(&self, value: &Value) -> Value {
        evidence::fit(value, &self.bounds)
    }

    /// Proposes an action. The definition is redacted, bounded and stored with the
    /// first ledger event in one transaction. The same idempotency key with the same
    /// content replays the stored pathway; with other content it is refused.
    pub fn propose(
        &self,
        proposer: &Actor,
        definition: Definition,
    ) -> Result<Proposal, PathwayError> {
        let stored = self.propose_inner(proposer, definition, |_| ((), State::Proposed, vec![]))?;
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
        policy: &dyn crate::pathway::Policy,
    ) -> Result<Decided, PathwayError> {
        Act::Admit.authorize(&definition.authority, decider)?;
        let stored = self.propose_inner(proposer, definition, |definition| {
            let decision = policy.decide(definition);
            let (to, events) = crate::pathway::admission_events(&decision, decider.as_str());
            (decision, to, events)
        })?;
        Ok(match stored {
            Ok((p, decision)) => Decided::New(crate::pathway::admission(p, &decision)),
            Err(existing) => Decided::Existing(existing),
        })
    }

    /// Stores a new pathway in the state `admit` gives it, with the events it adds after the
    /// proposal's (none: stored as proposed), in one transaction; or the stored pathway of
    /// the same key and content, replayed. `admit` runs only for a new pathway.
    fn propose_inner<D>(
        &self,
        proposer: &Actor,
        definition: Definition,
        admit: impl FnOnce(&Definition) -> (D, State, Vec<EventDraft>),
    ) -> Result<Result<(Pathway<Proposed>, D), StoredPathway>, PathwayError> {
        let full =
            serde_json::to_value(&definition).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let definition_digest = crate::canonical::sha256_hex(&full)?;
        let request_digest = crate::canonical::sha256_hex(&request_json(&definition.request))?;
        let stored = evidence::check(&full, &self.bounds)?;
        let stored_text = crate::canonical::to_string(&stored)?;
        let definition_text_digest = crate::canonical::sha256_hex_bytes(stored_text.as_bytes());
        if let Some(existing) = self.existing_for_key(&definition.idempotency_key)? {
            return Ok(Err(self.replay(
                existing,
                &definition_digest,
                &definition.idempotency_key,
            )?));
        }
        let id = self.new_id("pw");
        let at = self.now();
        let mut events = vec![EventDraft {
            kind: "proposed",
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
        };
        let inserted = self.write_for(definition.class, move |b| b.insert_pathway(new, events));
        match inserted {
            Ok(()) => {}
            Err(StoreError::Sqlite(e)) if is_unique_violation(&e) => {
                // Lost a race for the same key: replay what won.
                if let Some(existing) = self.existing_for_key(&definition.idempotency_key)? {
                    return Ok(Err(self.replay(
                        existing,
                        &definition_digest,
                        &definition.idempotency_key,
                    )?));
                }
                return Err(StoreError::Sqlite(e).into());
            }
            Err(e) => return Err(e.into()),
        }
        let p = Pathway {
            core: Box::new(Core {
                id,
                database: Arc::clone(&self.database),
                version,
                definition,
                definition_digest,
                request_digest,
                redacted: false,
            }),
            stage: Proposed { _private: () },
        };
        Ok(Ok((p, decided)))
    }

    fn existing_for_key(&self, key: &str) -> Result<Option<(String, String)>, StoreError> {
        use rusqlite::OptionalExtension;
        Ok(self
            .reader()
            .conn
            .prepare_cached(
                "SELECT id, definition_digest FROM pathways WHERE idempotency_key = ?1",
            )?
            .query_row([key], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?)
    }

    fn replay(
        &self,
        (id, digest): (String, String),
        wanted: &str,
        key: &str,
    ) -> Result<StoredPathway, PathwayError> {
        if digest != wanted {
            return Err(PathwayError::IdempotencyConflict {
                key: key.to_owned(),
                existing: id,
            });
        }
        self.load(&id)
    }

    /// Grants a Human Gate approval for `pathway`'s exact request. Only the approval
    /// authority may; the approval is recorded and usable once.
    pub fn grant_approval<S: Gated>(
        &self,
        pathway: &Pathway<S>,
        approver: &Actor,
    ) -> Result<Approval, PathwayError> {
        self.own(&pathway.core)?;
        pathway.core.authorize(approver, Act::GrantApproval)?;
        let id = self.new_id("ap");
        let event = EventDraft {
            kind: "approval_granted",
            actor: approver.as_str().to_owned(),
            from: Some(S::STATE),
            to: S::STATE,
            attempt: None,
            attempt_status: None,
            data: json!({ "approval": id, "request_digest": pathway.core.request_digest }),
        };
        let (pathway_id, version, fence) = (
            pathway.core.id.clone(),
            pathway.core.version,
            pathway.fence(),
        );
        let (approval_id, digest) = (id.clone(), pathway.core.request_digest.clone());
        let (approver_name, at) = (approver.as_str().to_owned(), self.now());
        self.write(move |b| {
            b.grant_approval(
                &pathway_id,
                S::STATE,
                version,
                &fence,
                &approval_id,
                &digest,
                &approver_name,
                at,
                event,
            )
        })?;
        Ok(Approval {
            database: Arc::clone(&self.database),
            id,
            pathway: pathway.core.id.clone(),
            request_digest: pathway.core.request_digest.clone(),
            approver: approver.clone(),
        })
    }

    /// Reconciles an attempt that may have taken effect (an [`Unknown`](crate::stage::Unknown) pathway, or a
    /// [`RepairUnsettled`](crate::stage::RepairUnsettled) one) by independent readback. Writes nothing: the returned
    /// token is recorded when the pathway consumes it.
    ///
    /// A pathway re-hydrated with a redacted request (see [`Pathway::is_redacted`]) is not
    /// read back: the verdict is unresolved until the full request is restored with
    /// [`Pathway::restore_request`].
    ///
    /// When the attempt ended without a reply, the process that carried it (the MCP
    /// server, recorded with the attempt) may still hold the request. Before reading back,
    /// a surviving process group of that carrier on this host is killed and waited for.
    /// Where that cannot be established (the carrier ran on another host, or its start
    /// time cannot be read on this platform), a *not applied* observation is not accepted:
    /// the verdict stays unresolved, and only an accountable [`Runtime::attest`] settles it.
    pub fn reconcile<S: Reconcilable>(
        &self,
        pathway: &Pathway<S>,
        readback: &mut dyn Readback,
    ) -> Reconciled {
        let attempt = crate::pathway::stage::sealed::AttemptOf::attempt(&pathway.stage).to_owned();
        let id = pathway.core.id.clone();
        let token = |verdict: VerdictKind, evidence: Value| {
            make_token(
                verdict,
                Arc::clone(&pathway.core.database),
                id.clone(),
                attempt.clone(),
                "readback",
                "readback".to_owned(),
                self.fit(&evidence),
            )
        };
        if let Err(e) = self.own(&pathway.core) {
            return token(VerdictKind::Unresolved, json!({"error": e.to_string()}));
        }
        // A readback of the redacted copy would compare "[redacted]" with the target and
        // could wrongly find the effect absent, opening the way to a new attempt.
        if pathway.core.redacted {
            return token(
                VerdictKind::Unresolved,
                json!({
                    "error": "the stored request is redacted; pass the full request to restore_request() and reconcile again"
                }),
            );
        }
        let carrier = match self.settle_carrier(&pathway.core.id, &attempt) {
            Ok(c) => c,
            Err(e) => return token(VerdictKind::Unresolved, json!({"error": e.to_string()})),
        };
        let observation = readback.observe(&pathway.core.definition.request);
        self.point(StepPoint::AfterReadback);
        match (observation, carrier) {
            (Observation::Applied { evidence }, _) => token(VerdictKind::Applied, evidence),
            (Observation::NotApplied { evidence }, CarrierFate::Settled) => {
                token(VerdictKind::NotApplied, evidence)
            }
            (Observation::NotApplied { evidence }, CarrierFate::MayBeAlive(why)) => token(
                VerdictKind::Unresolved,
                json!({"observed": "not_applied", "evidence": evidence, "not_accepted_because": why}),
            ),
            (Observation::Inconclusive { evidence }, _) => token(VerdictKind::Unresolved, evidence),
        }
    }

    /// Makes sure the process that may still carry `attempt`'s request is gone.
    fn settle_carrier(&self, pathway: &str, attempt: &str) -> Result<CarrierFate, PathwayError> {
        let replay = self.backend().check_pathway(pathway)?;
        let Some(text) = replay.unanswered_carrier(attempt) else {
            // Answered, or carried in-process by an owner that is gone or is us.
            return Ok(CarrierFate::Settled);
        };
        let carrier: CarrierRecord = serde_json::from_str(text)
            .map_err(|e| StoreError::Corrupt(format!("attempt {attempt}: carrier: {e}")))?;
        let here = carrier.host == self.owner.host;
        if !here || !process::START_TIME_READABLE || carrier.start.is_empty() {
            return Ok(CarrierFate::MayBeAlive(format!(
                "the server process that carried the request (pid {} on host {}) cannot be shown gone from here",
                carrier.pid, carrier.host
            )));
        }
        Ok(
            match process::kill_group_and_wait(carrier.pgid, &carrier.start, CARRIER_KILL_WAIT) {
                GroupFate::Gone | GroupFate::Killed => CarrierFate::Settled,
                GroupFate::StillAlive => CarrierFate::MayBeAlive(format!(
                    "process group {} still has live processes after SIGKILL",
                    carrier.pgid
                )),
                GroupFate::Unverifiable => CarrierFate::MayBeAlive(format!(
                    "process group {} cannot be inspected on this platform",
                    carrier.pgid
                )),
            },
        )
    }

    /// Reconciles an attempt that may have taken effect by an attested decision of the
    /// evidence owner or repair owner (an accountable verdict: recorded with its actor).
    pub fn attest<S: Reconcilable>(
        &self,
        pathway: &Pathway<S>,
        actor: &Actor,
        verdict: Attestation,
        evidence: &Value,
    ) -> Result<Reconciled, PathwayError> {
        self.own(&pathway.core)?;
        pathway.core.authorize(actor, Act::Attest)?;
        let evidence = evidence::check(evidence, &self.bounds)?;
        let verdict = match verdict {
            Attestation::Applied => VerdictKind::Applied,
            Attestation::NotApplied => VerdictKind::NotApplied,
            Attestation::Unresolved => VerdictKind::Unresolved,
        };
        Ok(make_token(
            verdict,
            Arc::clone(&pathway.core.database),
            pathway.core.id.clone(),
            crate::pathway::stage::sealed::AttemptOf::attempt(&pathway.stage).to_owned(),
            "attested",
            actor.as_str().to_owned(),
            evidence,
        ))
    }
}

/// How long reconciliation waits for a killed carrier's process group to disappear.
const CARRIER_KILL_WAIT: Duration = Duration::from_secs(5);

/// Whether the process that may still carry a request is known to be gone.
enum CarrierFate {
    Settled,
    MayBeAlive(String),
}

fn make_token(
    verdict: VerdictKind,
    database: Arc<str>,
    pathway: String,
    attempt: String,
    source: &'static str,
    actor: String,
    evidence: Value,
) -> Reconciled {
    match verdict {
        VerdictKind::Applied => Reconciled::Applied(Reconciliation::<Applied> {
            database,
            pathway,
            attempt,
            source,
            actor,
            evidence,
            _verdict: std::marker::PhantomData,
        }),
        VerdictKind::NotApplied => Reconciled::NotApplied(Reconciliation::<NotApplied> {
            database,
            pathway,
            attempt,
            source,
            actor,
            evidence,
            _verdict: std::marker::PhantomData,
        }),
        VerdictKind::Unresolved => Reconciled::Unresolved(Reconciliation::<Unresolved> {
            database,
            pathway,
            attempt,
            source,
            actor,
            evidence,
            _verdict: std::marker::PhantomData,
        }),
    }
}

fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation)
}
