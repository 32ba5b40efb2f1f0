//! The runtime: one database, a clock, an id source and this process's identity.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::evidence::{self, Bounds};
use crate::executor::{Observation, Readback};
use crate::ledger::{self, Report};
use crate::pathway::stage::{
    Aborted, Approved, AwaitingApproval, Completed, Denied, Gated, Held, HumanGate,
    PartiallyCompleted, Proposed, ReadyToResume, RepairRequired, Returned, Stopped, Unknown,
};
use crate::pathway::token::{
    Applied, Approval, Attestation, NotApplied, Reconciled, Reconciliation, Unresolved,
};
use crate::pathway::{
    Actor, Core, Definition, Pathway, PathwayError, Role, StoredPathway, request_json,
};
use crate::state::State;
use crate::store::{
    AttemptRecord, AttemptWrite, Backend, EventDraft, NewPathway, PathwayRecord, ReadStore,
    SqliteBackend, Step, StoreError,
};

/// A source of time, in milliseconds since the Unix epoch. Inject one for deterministic tests.
pub trait Clock {
    /// Now.
    fn now_ms(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }
}

/// A source of ids. Inject one for deterministic tests.
pub trait IdSource {
    /// A new id starting with `prefix` (`pw`, `at`, `ap`).
    fn next_id(&self, prefix: &str) -> String;
}

/// Random-looking ids: sha256 of the process, time and a counter.
#[derive(Debug, Default)]
pub struct RandomIds {
    counter: AtomicU64,
}

impl IdSource for RandomIds {
    fn next_id(&self, prefix: &str) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let seed = format!("{}:{nanos}:{n}", std::process::id());
        let hex = crate::canonical::sha256_hex_bytes(seed.as_bytes());
        format!("{prefix}_{}", &hex[..20])
    }
}

/// Sequential ids `pw_000001`, … (for tests and snapshots).
#[derive(Debug, Default)]
pub struct SequentialIds {
    counter: AtomicU64,
}

impl IdSource for SequentialIds {
    fn next_id(&self, prefix: &str) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{prefix}_{n:06}")
    }
}

/// A boundary inside a step, reported to the step hook (for tracing and fault-injection tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StepPoint {
    /// Dispatch is about to commit the write-ahead attempt record.
    BeforeAttemptCommit,
    /// The attempt record is durable; the executor has not been called.
    AfterAttemptCommit,
    /// The executor returned; its outcome is not yet recorded.
    AfterReply,
    /// The outcome is durable.
    AfterOutcomeCommit,
    /// A readback observed; the reconciliation or confirmation is not yet recorded.
    AfterReadback,
}

type Hook = Box<dyn Fn(StepPoint)>;

/// Builds a [`Runtime`].
pub struct RuntimeBuilder {
    path: PathBuf,
    clock: Box<dyn Clock>,
    ids: Box<dyn IdSource>,
    lease: Duration,
    hook: Option<Hook>,
    bounds: Bounds,
}

impl fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("path", &self.path)
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl RuntimeBuilder {
    /// Uses `clock` instead of the system clock.
    #[must_use]
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Box::new(clock);
        self
    }
    /// Uses `ids` instead of random ids.
    #[must_use]
    pub fn ids(mut self, ids: impl IdSource + 'static) -> Self {
        self.ids = Box::new(ids);
        self
    }
    /// How long an in-flight attempt is held by its owner before another runtime
    /// sharing the database (on any host) may treat it as abandoned. Default 10
    /// minutes; on the same host a dead owner process is detected at once, without
    /// waiting for the lease. Must exceed your executor's timeout.
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }
    /// Calls `hook` at each [`StepPoint`].
    #[must_use]
    pub fn step_hook(mut self, hook: impl Fn(StepPoint) + 'static) -> Self {
        self.hook = Some(Box::new(hook));
        self
    }
    /// Bounds for evidence JSON.
    #[must_use]
    pub fn bounds(mut self, bounds: Bounds) -> Self {
        self.bounds = bounds;
        self
    }
    /// Opens the database and builds the runtime.
    pub fn open(self) -> Result<Runtime, StoreError> {
        let backend = SqliteBackend::open(&self.path)?;
        Ok(Runtime {
            backend,
            clock: self.clock,
            ids: self.ids,
            owner: Owner::current(),
            lease_ms: i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX),
            hook: self.hook,
            bounds: self.bounds,
            in_flight: RefCell::new(HashSet::new()),
        })
    }
}

/// The identity of the process (and runtime instance) that holds in-flight attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    host: String,
    pid: u32,
    start: String,
    nonce: String,
}

static NONCE: AtomicU64 = AtomicU64::new(0);

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_or_else(|_| "unknown-host".into(), |s| s.trim().to_owned())
}

fn process_start(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime) counts from after the ")" that closes the command name.
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state): a zombie (Z) or dead (X, x) process has exited; it holds nothing,
    // even while its parent has not reaped it yet.
    if matches!(rest.split_whitespace().next(), Some("Z" | "X" | "x")) {
        return None;
    }
    rest.split_whitespace().nth(19).map(str::to_owned)
}

impl Owner {
    fn current() -> Self {
        let pid = std::process::id();
        Self {
            host: hostname(),
            pid,
            start: process_start(pid).unwrap_or_default(),
            nonce: NONCE.fetch_add(1, Ordering::Relaxed).to_string(),
        }
    }
    fn encode(&self) -> String {
        format!("{}/{}/{}/{}", self.host, self.pid, self.start, self.nonce)
    }
    fn decode(s: &str) -> Option<Self> {
        let mut it = s.rsplitn(4, '/');
        let nonce = it.next()?.to_owned();
        let start = it.next()?.to_owned();
        let pid = it.next()?.parse().ok()?;
        let host = it.next()?.to_owned();
        Some(Self {
            host,
            pid,
            start,
            nonce,
        })
    }
}

/// The pathway runtime: the store plus what a step needs (clock, ids, owner identity).
///
/// One `Runtime` is used from one thread (it holds one SQLite connection). Several
/// processes may share one database: steps are serialized by SQLite and fenced by
/// compare-and-set, and in-flight attempts carry an owner and a lease.
pub struct Runtime {
    backend: SqliteBackend,
    clock: Box<dyn Clock>,
    ids: Box<dyn IdSource>,
    owner: Owner,
    lease_ms: i64,
    hook: Option<Hook>,
    bounds: Bounds,
    in_flight: RefCell<HashSet<String>>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("owner", &self.owner.encode())
            .finish_non_exhaustive()
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

impl Runtime {
    /// Opens (or creates) the database at `path` with defaults.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::builder(path).open()
    }

    /// A builder for the database at `path`.
    pub fn builder(path: impl AsRef<Path>) -> RuntimeBuilder {
        RuntimeBuilder {
            path: path.as_ref().to_owned(),
            clock: Box::new(SystemClock),
            ids: Box::new(RandomIds::default()),
            lease: Duration::from_mins(10),
            hook: None,
            bounds: Bounds::DEFAULT,
        }
    }

    /// Read access to the same database.
    #[must_use]
    pub fn reader(&self) -> &ReadStore {
        self.backend.reader()
    }

    /// Verifies the ledger and the stored state; see [`ledger::verify`].
    pub fn verify(&self, known_head: Option<&str>) -> Result<Report, StoreError> {
        ledger::verify(self.reader(), known_head)
    }

    pub(crate) fn backend(&self) -> &SqliteBackend {
        &self.backend
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
    pub(crate) fn lease_until(&self) -> i64 {
        self.now().saturating_add(self.lease_ms)
    }
    pub(crate) fn track(&self, attempt: &str, on: bool) {
        let mut set = self.in_flight.borrow_mut();
        if on {
            set.insert(attempt.to_owned());
        } else {
            set.remove(attempt);
        }
    }
    /// Redacts and bounds a value recorded before dispatch: refuses what is too large.
    pub(crate) fn check(&self, value: &Value) -> Result<Value, evidence::EvidenceError> {
        evidence::check(value, &self.bounds)
    }
    /// Redacts and bounds evidence recorded after dispatch: never fails.
    pub(crate) fn fit(&self, value: &Value) -> Value {
        evidence::fit(value, &self.bounds)
    }

    pub(crate) fn authorize(
        core: &Core,
        actor: &Actor,
        roles: &[Role],
        action: &'static str,
    ) -> Result<(), PathwayError> {
        if roles
            .iter()
            .any(|r| core.definition.authority.holder(*r) == actor)
        {
            Ok(())
        } else {
            Err(PathwayError::NotAuthorized {
                actor: actor.clone(),
                action,
                needs: roles
                    .iter()
                    .map(|r| r.as_str())
                    .collect::<Vec<_>>()
                    .join(" or "),
            })
        }
    }

    /// Proposes an action. The definition is redacted, bounded and stored with the
    /// first ledger event in one transaction. The same idempotency key with the same
    /// content replays the stored pathway; with other content it is refused.
    pub fn propose(
        &self,
        proposer: &Actor,
        definition: Definition,
    ) -> Result<Proposal, PathwayError> {
        let full =
            serde_json::to_value(&definition).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        let definition_digest = crate::canonical::sha256_hex(&full)?;
        let request_digest = crate::canonical::sha256_hex(&request_json(&definition.request))?;
        let stored = evidence::check(&full, &self.bounds)?;
        let stored_text = crate::canonical::to_string(&stored)?;
        if let Some(existing) = self.existing_for_key(&definition.idempotency_key)? {
            return self.replay(existing, &definition_digest, &definition.idempotency_key);
        }
        let id = self.new_id("pw");
        let at = self.now();
        let new = NewPathway {
            id: id.clone(),
            idempotency_key: definition.idempotency_key.clone(),
            definition: stored_text,
            definition_digest: definition_digest.clone(),
            request_digest: request_digest.clone(),
            proposer: proposer.as_str().to_owned(),
            at,
        };
        let event = EventDraft {
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
                "request_digest": request_digest,
            }),
        };
        match self.backend.insert_pathway(new, event) {
            Ok(()) => {}
            Err(StoreError::Sqlite(e)) if is_unique_violation(&e) => {
                // Lost a race for the same key: replay what won.
                if let Some(existing) = self.existing_for_key(&definition.idempotency_key)? {
                    return self.replay(existing, &definition_digest, &definition.idempotency_key);
                }
                return Err(StoreError::Sqlite(e).into());
            }
            Err(e) => return Err(e.into()),
        }
        Ok(Proposal::New(Pathway {
            core: Box::new(Core {
                id,
                version: 1,
                definition,
                request_digest,
                redacted: false,
            }),
            stage: Proposed { _private: () },
        }))
    }

    fn existing_for_key(&self, key: &str) -> Result<Option<(String, String)>, StoreError> {
        use rusqlite::OptionalExtension;
        Ok(self
            .reader()
            .conn
            .query_row(
                "SELECT id, definition_digest FROM pathways WHERE idempotency_key = ?1",
                [key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }

    fn replay(
        &self,
        (id, digest): (String, String),
        wanted: &str,
        key: &str,
    ) -> Result<Proposal, PathwayError> {
        if digest != wanted {
            return Err(PathwayError::IdempotencyConflict {
                key: key.to_owned(),
                existing: id,
            });
        }
        Ok(Proposal::Existing(self.load(&id)?))
    }

    /// Grants a Human Gate approval for `pathway`'s exact request. Only the approval
    /// authority may; the approval is recorded and usable once.
    pub fn grant_approval<S: Gated>(
        &self,
        pathway: &Pathway<S>,
        approver: &Actor,
    ) -> Result<Approval, PathwayError> {
        Self::authorize(
            &pathway.core,
            approver,
            &[Role::ApprovalAuthority],
            "grant an approval",
        )?;
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
        self.backend.grant_approval(
            &pathway.core.id,
            S::STATE,
            pathway.core.version,
            &id,
            &pathway.core.request_digest,
            approver.as_str(),
            self.now(),
            event,
        )?;
        Ok(Approval {
            id,
            pathway: pathway.core.id.clone(),
            request_digest: pathway.core.request_digest.clone(),
            approver: approver.clone(),
        })
    }

    /// Reconciles an unknown attempt by independent readback. Writes nothing: the
    /// returned token is recorded when the pathway consumes it.
    ///
    /// A pathway re-hydrated with a redacted request (see [`Pathway::is_redacted`]) is not
    /// read back: the verdict is unresolved until the full request is restored with
    /// [`Pathway::restore_request`].
    pub fn reconcile(&self, pathway: &Pathway<Unknown>, readback: &mut dyn Readback) -> Reconciled {
        // A readback of the redacted copy would compare "[redacted]" with the target and
        // could wrongly find the effect absent, opening the way to a new attempt.
        let observation = if pathway.core.redacted {
            Observation::Inconclusive {
                evidence: json!({
                    "error": "the stored request is redacted; pass the full request to restore_request() and reconcile again"
                }),
            }
        } else {
            readback.observe(&pathway.core.definition.request)
        };
        self.point(StepPoint::AfterReadback);
        let attempt = pathway.stage.attempt.clone();
        let id = pathway.core.id.clone();
        let (verdict, evidence) = match observation {
            Observation::Applied { evidence } => ("applied", evidence),
            Observation::NotApplied { evidence } => ("not_applied", evidence),
            Observation::Inconclusive { evidence } => ("unresolved", evidence),
        };
        let evidence = self.fit(&evidence);
        make_token(
            verdict,
            id,
            attempt,
            "readback",
            "readback".to_owned(),
            evidence,
        )
    }

    /// Reconciles an unknown attempt by an attested decision of the evidence owner or
    /// repair owner.
    pub fn attest(
        &self,
        pathway: &Pathway<Unknown>,
        actor: &Actor,
        verdict: Attestation,
        evidence: &Value,
    ) -> Result<Reconciled, PathwayError> {
        Self::authorize(
            &pathway.core,
            actor,
            &[Role::EvidenceOwner, Role::RepairOwner],
            "attest a verdict",
        )?;
        let evidence = evidence::check(evidence, &self.bounds)?;
        let verdict = match verdict {
            Attestation::Applied => "applied",
            Attestation::NotApplied => "not_applied",
            Attestation::Unresolved => "unresolved",
        };
        Ok(make_token(
            verdict,
            pathway.core.id.clone(),
            pathway.stage.attempt.clone(),
            "attested",
            actor.as_str().to_owned(),
            evidence,
        ))
    }

    /// Loads one pathway in the stage its stored state allows (see [`StoredPathway`]).
    ///
    /// A `running` pathway whose in-flight attempt's owner is gone is moved to
    /// `write_status_unknown` (recorded in the ledger) and returned as unknown; one whose
    /// owner is alive is returned as [`StoredPathway::InFlightElsewhere`].
    pub fn load(&self, id: &str) -> Result<StoredPathway, PathwayError> {
        let record = self
            .reader()
            .pathway(id)?
            .ok_or_else(|| StoreError::NoSuchPathway(id.to_owned()))?;
        self.rehydrate(record)
    }

    /// Every unresolved (non-terminal) pathway, re-hydrated; see [`Runtime::load`].
    pub fn recover(&self) -> Result<Vec<StoredPathway>, PathwayError> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self.reader().list_unresolved(after.as_deref(), 1000)?;
            let Some(last) = page.last() else { break };
            after = Some(last.id.clone());
            for record in page {
                out.push(self.rehydrate(record)?);
            }
        }
        Ok(out)
    }

    fn owner_gone(&self, attempt: &AttemptRecord) -> bool {
        let Some(owner) = attempt.owner.as_deref().and_then(Owner::decode) else {
            return true;
        };
        if owner == self.owner {
            return !self.in_flight.borrow().contains(&attempt.id);
        }
        if owner.host == self.owner.host {
            let alive = process_start(owner.pid).is_some_and(|s| s == owner.start);
            if !alive {
                return true;
            }
        }
        attempt.lease_until.is_none_or(|l| l < self.now())
    }

    fn rehydrate(&self, record: PathwayRecord) -> Result<StoredPathway, PathwayError> {
        let definition: Definition = serde_json::from_value(record.definition.clone())
            .map_err(|e| StoreError::Corrupt(format!("pathway {}: definition: {e}", record.id)))?;
        let redacted = crate::canonical::sha256_hex(&request_json(&definition.request))?
            != record.request_digest;
        let core = Box::new(Core {
            id: record.id.clone(),
            version: record.version,
            definition,
            request_digest: record.request_digest.clone(),
            redacted,
        });
        let attempts = self.reader().attempts(&record.id)?;
        let last = attempts.last();
        let last_id = last.map(|a| a.id.clone());
        let need_attempt = || {
            last_id
                .clone()
                .ok_or_else(|| StoreError::Corrupt(format!("pathway {} has no attempt", record.id)))
        };
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
                match attempt.status.as_str() {
                    "returned" => StoredPathway::Returned(Pathway {
                        core,
                        stage: Returned {
                            attempt: attempt.id.clone(),
                            reply: attempt.outcome.clone().unwrap_or(Value::Null),
                            _private: (),
                        },
                    }),
                    "in_flight" if !self.owner_gone(attempt) => StoredPathway::InFlightElsewhere {
                        pathway: Box::new(record.clone()),
                        attempt: Box::new(attempt.clone()),
                    },
                    "in_flight" => {
                        let version = self.backend.apply(Step {
                            pathway: record.id.clone(),
                            expected_state: State::Running,
                            expected_version: record.version,
                            to: Some(State::WriteStatusUnknown),
                            events: vec![EventDraft {
                                kind: "recovered_unknown",
                                actor: "rpr-recovery".into(),
                                from: Some(State::Running),
                                to: State::WriteStatusUnknown,
                                attempt: Some(attempt.id.clone()),
                                attempt_status: Some("unknown"),
                                data: json!({ "owner": attempt.owner, "reason": "in-flight attempt whose owner is gone" }),
                            }],
                            attempt: Some(AttemptWrite::Finish {
                                id: attempt.id.clone(),
                                status: "unknown",
                                outcome: None,
                            }),
                            approval: None,
                            at: self.now(),
                        })?;
                        let mut core = core;
                        core.version = version;
                        StoredPathway::Unknown(Pathway {
                            core,
                            stage: Unknown {
                                attempt: attempt.id.clone(),
                                _private: (),
                            },
                        })
                    }
                    other => {
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
            State::RepairRequired => StoredPathway::RepairRequired(Pathway {
                core,
                stage: RepairRequired {
                    attempt: last_id,
                    _private: (),
                },
            }),
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
        })
    }
}

fn make_token(
    verdict: &str,
    pathway: String,
    attempt: String,
    source: &'static str,
    actor: String,
    evidence: Value,
) -> Reconciled {
    match verdict {
        "applied" => Reconciled::Applied(Reconciliation::<Applied> {
            pathway,
            attempt,
            source,
            actor,
            evidence,
            _verdict: std::marker::PhantomData,
        }),
        "not_applied" => Reconciled::NotApplied(Reconciliation::<NotApplied> {
            pathway,
            attempt,
            source,
            actor,
            evidence,
            _verdict: std::marker::PhantomData,
        }),
        _ => Reconciled::Unresolved(Reconciliation::<Unresolved> {
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
