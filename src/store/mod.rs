//! Durable storage: one atomic unit per pathway step, in a SQLite database (steps of
//! concurrent callers committed together) or, with the `postgres` feature, a PostgreSQL one.
//!
//! The typestate layer ([`crate::Pathway`] and its stages) talks to storage only through the
//! narrow, crate-internal `Backend` trait: insert a pathway, apply one step, grant an
//! approval, read rows back. SQLite and PostgreSQL (`store::pg`, for hosts on many machines)
//! both implement it; the stage types do not know which one they write to.
//!
//! On SQLite every step is one atomic unit, a savepoint in a `BEGIN IMMEDIATE` transaction it
//! may share with other steps (a group commit; a step alone is the whole transaction), that
//! compare-and-sets the pathway's state and version, writes the attempt or approval row,
//! appends the ledger event (chained to the current head) and moves the recorded head. A
//! crash between any two statements rolls the whole step back.

pub(crate) mod batch;
pub(crate) mod check;
pub(crate) mod event;
mod holder;
pub(crate) mod late;
mod location;
pub mod log;
#[cfg(feature = "postgres")]
pub mod pg;
pub(crate) mod pins;
mod read;
pub(crate) mod replays;
pub(crate) mod rows;
pub(crate) mod rules;
mod sqlite;
#[cfg(test)]
pub(crate) mod steps_for_tests;
mod verify;

pub use batch::{ReadDurability, WriteStats};
pub use holder::LockHolder;
pub(crate) use holder::write_lock_holder;
#[cfg(not(feature = "postgres"))]
pub(crate) use location::postgres_unsupported;
pub use location::{is_postgres_location, shown_location};
pub use pins::{PinCheck, PinRecord, SeenBinding};
pub use read::{AttemptRecord, LedgerRow, PathwayRecord, ReadStore, Status};
pub(crate) use sqlite::{
    SqliteBackend, open_read_connection, open_side_connection, random_hex, renew_leases,
};
pub use verify::verify;
pub(crate) use verify::{StoredRow, check_row, check_stored_row};

use crate::state::State;
use serde_json::Value;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i64 = 4;

/// The oldest schema whose rows this build reads as its own without migrating it: schema 3
/// and 4 hold the same tables and columns (4 only drops the UNIQUE indexes on the ledger's
/// `hash` and `prev_hash`), so a read-only opening or a copy accepts both; 1 and 2 lack
/// columns and tables and must be opened once for writing (which migrates them) first.
pub const OLDEST_READABLE_SCHEMA: i64 = 3;

/// The DDL of schema version 1, applied by migration 1.
pub const SCHEMA_SQL: &str = include_str!("schema.sql");

/// Migration 2: the process that may carry an attempt's request (and, in code, the
/// database identity in `meta`).
pub const MIGRATION_2_SQL: &str = include_str!("migrate_2.sql");

/// Migration 3: the tool pins of `rpr gate` (see [`crate::store::PinRecord`]).
pub const MIGRATION_3_SQL: &str = include_str!("migrate_3.sql");

/// Migration 4: the ledger rebuilt without UNIQUE on `hash` and `prev_hash` (forks are
/// prevented by the writer and detected by verify; docs/storage.md, "Schema 4").
pub const MIGRATION_4_SQL: &str = include_str!("migrate_4.sql");

/// One problem [`crate::store::verify`] found, in a line (for the migration's refusals).
pub(crate) fn problem_text(p: &crate::ledger::Problem) -> String {
    use std::fmt::Write;
    let mut s = format!("{:?}", p.kind);
    if let Some(seq) = p.seq {
        let _ = write!(s, " at seq {seq}");
    }
    if let Some(pathway) = &p.pathway {
        let _ = write!(s, " (pathway {pathway})");
    }
    let _ = write!(s, ": {}", p.detail);
    s
}

/// What can go wrong in storage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// SQLite reported an error.
    #[error("database error: {0}")]
    Sqlite(rusqlite::Error),
    /// Another connection held the database's write lock for the whole busy timeout. The
    /// step wrote nothing and can be taken again ([`crate::Runtime::load`] the pathway where
    /// the step consumed its stage; a dispatch whose attempt record failed this way hands its
    /// stage back in [`crate::Outcome::NotSent`] and sent nothing). Inside
    /// [`crate::Outcome::Unrecorded`] it is the *outcome's* record that failed: the request
    /// was sent, and [`crate::Runtime::recover`] reports the attempt as unknown.
    #[error("{}", busy_text(*.timeout, .holder.as_ref()))]
    Busy {
        /// How long the step waited for the lock (`None` where the wait was not a step's).
        timeout: Option<std::time::Duration>,
        /// The process holding the lock when the wait ended, where the platform can tell
        /// (Linux, through `/proc/locks`).
        holder: Option<LockHolder>,
    },
    /// The file is not an rpr database.
    #[error(
        "{0}: not an rpr database (no rpr meta table); point --database at a file created by rpr"
    )]
    NotRprDatabase(String),
    /// The database was written by a newer rpr.
    #[error(
        "database schema version {found} is newer than this build supports ({supported}); upgrade rpr"
    )]
    SchemaTooNew {
        /// Version found in the file.
        found: i64,
        /// Newest version this build knows.
        supported: i64,
    },
    /// The database file does not exist.
    #[error("{0}: no such database file")]
    Missing(String),
    /// A runtime cannot write the database because this process opened it read-only first
    /// ([`ReadStore::open_read_only`]), and SQLite gives every later connection of the
    /// process that opening's read-only mapping of the WAL index (`-shm`).
    #[error(
        "{0}: cannot be written by this process: it holds the database open read-only \
         (ReadStore::open_read_only), and SQLite shares that opening's read-only WAL index \
         (-shm) with every later connection of the process. Drop those read-only stores \
         before opening the runtime, or open the runtime first (a read-only store opened \
         while a runtime holds the file is not affected)"
    )]
    ReadOnlyIndex(String),
    /// A takeover of an in-flight attempt whose owner was not proven gone found, inside
    /// its own unit, the owner's lease still running (renewed since it was read): nothing
    /// was written, and the attempt is still the owner's.
    #[error(
        "attempt {attempt} of pathway {pathway} is still leased to its owner until {lease_until} (now {now}); it was not taken over"
    )]
    LeaseHeld {
        /// The pathway.
        pathway: String,
        /// The attempt.
        attempt: String,
        /// Its lease's end, ms since the epoch by the database's clock.
        lease_until: i64,
        /// Now, by the same clock.
        now: i64,
    },
    /// A compare-and-set lost: another process changed the pathway first.
    #[error(
        "pathway {pathway} changed elsewhere (expected {expected} v{version}); reload it with recover() or load()"
    )]
    Conflict {
        /// The pathway.
        pathway: String,
        /// The state this process expected.
        expected: State,
        /// The version this process expected.
        version: i64,
    },
    /// A call that may change something, proposed by `rpr gate` or with
    /// [`crate::Runtime::propose_one_open`], while an identical call (the same server and
    /// request) is open: at most one is open at a time, whatever their keys, across every
    /// process on the database. Nothing was written.
    #[error(
        "pathway {pathway} was not stored: pathway {open}, an identical call to the same server, is open; nothing was written"
    )]
    IdenticalOpen {
        /// The pathway refused.
        pathway: String,
        /// The identical pathway that is open.
        open: String,
    },
    /// A state change that the state machine does not allow.
    #[error("refused to store {from} -> {to}: not an edge of the state machine")]
    IllegalEdge {
        /// From.
        from: State,
        /// To.
        to: State,
    },
    /// A row that does not parse.
    #[error("corrupt row: {0}; run verify to see what changed")]
    Corrupt(String),
    /// No such pathway.
    #[error("no pathway with id {0}")]
    NoSuchPathway(String),
    /// An approval that is missing, used, revoked, expired or for another request.
    #[error(
        "approval {0} is unknown, already used, revoked at a Human Gate, expired, or bound to another request; nothing was written"
    )]
    ApprovalUnusable(String),
    /// A pathway whose stored rows and its own ledger events disagree (a hand edit,
    /// or a row the chain never recorded). Nothing was written.
    #[error(
        "pathway {pathway}: its stored rows and its own ledger events disagree ({detail}); nothing was done. Run verify"
    )]
    Unexplained {
        /// The pathway.
        pathway: String,
        /// What disagrees.
        detail: String,
    },
    /// A new attempt while the previous one may have taken effect (returned, partial,
    /// unknown, in flight): only a not-applied verdict opens the way to a new attempt.
    #[error(
        "pathway {pathway}: attempt {attempt} ended {status}; a new attempt needs a not-applied verdict first. Nothing was sent"
    )]
    UnsettledAttempt {
        /// The pathway.
        pathway: String,
        /// The previous attempt.
        attempt: String,
        /// Its status.
        status: String,
    },
    /// The outcome of an attempt that is no longer in flight was refused (its owner's lease
    /// lapsed by the database's clock and another runtime took it over as unknown), on
    /// either store.
    /// The refusal, with the late evidence, is the ledger event at `recorded_seq`; the
    /// pathway is settled by reconciliation like any other unknown.
    #[error(
        "pathway {pathway}: the late outcome of attempt {attempt} was refused: the attempt is {status} now (its lease lapsed and it was taken over); the refusal is ledger event {recorded_seq}"
    )]
    Fenced {
        /// The pathway.
        pathway: String,
        /// The attempt.
        attempt: String,
        /// The attempt's stored status.
        status: String,
        /// The ledger event that records the refusal.
        recorded_seq: i64,
    },
    /// PostgreSQL reported an error. Where it ended a step's `COMMIT`, whether the step was
    /// committed is unknown: a dispatch whose attempt record failed so sends nothing (if the
    /// record did commit, its lease lapses and the attempt is taken over as unknown).
    #[cfg(feature = "postgres")]
    #[error("postgres: {}", pg::error_text(.0))]
    Postgres(postgres::Error),
    /// No connection could be made to the PostgreSQL server: where, why, and what to check
    /// (the location's password hidden). The connection failed before anything was read or
    /// written through it.
    #[cfg(feature = "postgres")]
    #[error("{0}")]
    Unreachable(String),
    /// The signed log refused the step (see [`log::LogError`]); nothing of it was written.
    #[error("{0}")]
    Log(#[from] log::LogError),
    /// The PostgreSQL transaction that carried this step with other callers' steps (a
    /// group commit) failed as a whole: the server's error, as text. Nothing of the batch
    /// was applied, unless the `COMMIT` itself was lost on the wire (then, as for
    /// [`StoreError::Postgres`], whether it committed is unknown).
    #[cfg(feature = "postgres")]
    #[error("postgres (in a group commit): {0}")]
    PostgresBatch(String),
    /// What was asked needs something this build or this store does not have (a
    /// `postgres://` location without the `postgres` feature, say).
    #[error("{0}")]
    Unsupported(String),
    /// The database was moved to another store (`rpr copy-to-postgres`, see
    /// `rpr::store::pg::copy_from_sqlite`): it takes no more steps, so that two stores never
    /// both take steps on one pathway. The step wrote nothing; reading the database (`rpr
    /// status`, `rpr verify`, `rpr-mcp`) still works.
    #[error(
        "this database was moved to {to} (rpr copy-to-postgres): it takes no more steps and this one wrote nothing; take the next steps on that store (reading this one still works)"
    )]
    Moved {
        /// Where it was moved, as the copy recorded it (the target without its password).
        to: String,
    },
    /// The runtime was opened in another process: this one is a child of it made by
    /// `fork`. Its attempts would record the parent's identity, so the parent's death
    /// could be taken for this process's, and a call it still sends taken over and sent
    /// again; and a database connection does not survive `fork`. Nothing was read or
    /// written; open a runtime in the child.
    #[error(
        "this runtime was opened by process {opened_in}, and process {now} (a child made by fork) may not use it: its attempts would name the parent as their owner. Nothing was done; open a runtime in this process"
    )]
    ForkedProcess {
        /// The process that opened the runtime.
        opened_in: u32,
        /// This process.
        now: u32,
    },
    /// A database of a schema older than a read-only opening reads
    /// ([`OLDEST_READABLE_SCHEMA`]): only opening it for writing migrates it.
    #[error(
        "{database}: schema version {found} is older than {oldest}, the oldest this build reads without migrating; open it once for writing with this rpr (`rpr unresolved --database {database}` does) to migrate it. Nothing was changed"
    )]
    SchemaTooOld {
        /// The database.
        database: String,
        /// Its schema version.
        found: i64,
        /// The oldest this build reads as it is.
        oldest: i64,
    },
    /// An older database whose ledger does not verify: migrating it would carry the damage
    /// into the new schema (and the migration's own check after it could not tell the two
    /// apart). Nothing was written; `rpr verify` lists the problems.
    #[error(
        "{database}: schema version {from} was not migrated to {to}: its ledger does not verify before the migration ({problems} problem(s); the first: {first}); nothing was written. Run verify on it"
    )]
    MigrationRefused {
        /// The database.
        database: String,
        /// Its schema version.
        from: i64,
        /// The version this build would have migrated it to.
        to: i64,
        /// How many problems verify found.
        problems: usize,
        /// The first of them.
        first: String,
    },
    /// The database's recorded schema version and its tables disagree (a migration applied
    /// by hand, or half of one): it is not opened, and not migrated.
    #[error(
        "{database}: meta.schema_version says {recorded}, but its tables are not schema {recorded}'s ({detail}); nothing was written"
    )]
    SchemaMismatch {
        /// The database.
        database: String,
        /// The version `meta` records.
        recorded: i64,
        /// What does not match.
        detail: String,
    },
    /// No changed binding with this digest was seen for this tool (nothing to pin).
    #[error(
        "no changed binding {digest} was seen for tool `{tool}` of server `{server}`; nothing pinned (list the pins to see what is waiting)"
    )]
    NoSuchPin {
        /// The server name.
        server: String,
        /// The tool.
        tool: String,
        /// The digest asked for.
        digest: String,
    },
}

impl From<rusqlite::Error> for StoreError {
    /// SQLite's "busy" and "locked" become [`StoreError::Busy`]; the rest stays
    /// [`StoreError::Sqlite`].
    fn from(e: rusqlite::Error) -> Self {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
                Self::Busy {
                    timeout: None,
                    holder: None,
                }
            }
            _ => Self::Sqlite(e),
        }
    }
}

impl StoreError {
    /// Whether taking the same step again is safe and may succeed: the step wrote nothing,
    /// and the failure comes from another connection's timing (a busy database), not from
    /// the pathway or the request. It says nothing about a tool call: see
    /// [`StoreError::Busy`] for the one case where the call itself was already sent.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Busy { .. })
    }

    /// Whether a unique constraint refused the write (an idempotency key already stored).
    pub(crate) fn is_unique_violation(&self) -> bool {
        match self {
            Self::Sqlite(rusqlite::Error::SqliteFailure(f, _)) => {
                f.code == rusqlite::ErrorCode::ConstraintViolation
            }
            #[cfg(feature = "postgres")]
            Self::Postgres(e) => e.code() == Some(&postgres::error::SqlState::UNIQUE_VIOLATION),
            _ => false,
        }
    }
}

fn busy_text(timeout: Option<std::time::Duration>, holder: Option<&LockHolder>) -> String {
    let waited = timeout.map_or_else(String::new, |t| format!(" for {} ms", t.as_millis()));
    let by = match holder {
        Some(h) => format!("held by {h}"),
        None if cfg!(target_os = "linux") => {
            "its holder was not found (it may have released it since)".into()
        }
        None => "its holder cannot be named on this platform".into(),
    };
    format!(
        "database busy: waited{waited} for the write lock, {by}; this step wrote nothing and can be taken again"
    )
}

/// A new pathway row.
#[derive(Debug, Clone)]
pub(crate) struct NewPathway {
    pub(crate) id: String,
    pub(crate) idempotency_key: String,
    pub(crate) definition: String,
    pub(crate) definition_digest: String,
    pub(crate) request_digest: String,
    pub(crate) proposer: String,
    pub(crate) at: i64,
    /// The stored state: `proposed`, or where the admission in the same step moved it.
    pub(crate) state: State,
    /// The compare-and-set counter: 1 per step the insert stands for.
    pub(crate) version: i64,
    /// The server, for a pathway of which at most one may be open per server and request
    /// ([`rules::one_open`]): one `rpr gate` proposed for a call that may change something,
    /// or one proposed with [`crate::Runtime::propose_one_open`].
    pub(crate) one_open: Option<String>,
}

/// What a step's compare-and-set holds the stored pathway to, besides state and version:
/// the handle's pathway is this database's pathway with this exact definition and request.
#[derive(Debug, Clone)]
pub(crate) struct Fence {
    pub(crate) definition_digest: String,
    pub(crate) request_digest: String,
}

/// The ledger event a step appends. `seq`, `at` and the hashes are filled in by the backend.
#[derive(Debug, Clone)]
pub(crate) struct EventDraft {
    pub(crate) kind: crate::ledger::EventKind,
    pub(crate) actor: String,
    pub(crate) from: Option<State>,
    pub(crate) to: State,
    pub(crate) attempt: Option<String>,
    pub(crate) attempt_status: Option<&'static str>,
    pub(crate) data: Value,
}

/// The attempt part of a step.
#[derive(Debug, Clone)]
pub(crate) enum AttemptWrite {
    /// The write-ahead record, committed before anything is sent.
    Start {
        id: String,
        seq: i64,
        previous: Option<String>,
        request: String,
        request_digest: String,
        binding: String,
        binding_digest: String,
        owner: String,
        /// How long the lease runs from now, judged by the database's clock.
        lease_ms: i64,
        /// The process that may carry the request (canonical JSON), if the executor knows it.
        carrier: Option<String>,
    },
    /// The attempt's outcome.
    Finish {
        id: String,
        status: &'static str,
        outcome: Option<String>,
    },
    /// The attempt taken over as unknown from its owner (`Runtime::recover`), judged again
    /// inside the unit that writes it: still in flight under `owner`, and, when the owner
    /// was not proven gone (`lease_lapsed`), its lease lapsed by the database's clock at
    /// this moment. A judgement made on rows read before (a renewal since, a reader paused)
    /// takes over no live owner: [`StoreError::LeaseHeld`], or a conflict when it moved on.
    TakeOver {
        id: String,
        owner: String,
        lease_lapsed: bool,
    },
}

/// The approval part of a step.
#[derive(Debug, Clone)]
pub(crate) enum ApprovalWrite {
    /// Consume granted approvals, all or none (compare-and-set on each: unused,
    /// unrevoked, for this request, and granted at or after `not_before` when the
    /// approval rule has an expiry).
    Use {
        ids: Vec<String>,
        request_digest: String,
        not_before: Option<i64>,
    },
    /// Void every granted, unused approval of the pathway (it entered a Human Gate:
    /// an approval given before the escalation must not decide it).
    RevokeOutstanding,
}

/// A granted approval to record: the fence it is held to (the pathway still in `expected`
/// at `version` with the fence's digests), the approvals row and its ledger event.
#[derive(Debug, Clone)]
pub(crate) struct Grant {
    pub(crate) pathway: String,
    pub(crate) expected: State,
    pub(crate) version: i64,
    pub(crate) fence: Fence,
    pub(crate) id: String,
    pub(crate) request_digest: String,
    pub(crate) approver: String,
    pub(crate) at: i64,
    pub(crate) event: EventDraft,
}

/// One step: everything written in one transaction.
#[derive(Debug, Clone)]
pub(crate) struct Step {
    pub(crate) pathway: String,
    pub(crate) expected_state: State,
    pub(crate) expected_version: i64,
    pub(crate) fence: Fence,
    /// `None`: record the event without changing the state (evidence only).
    pub(crate) to: Option<State>,
    pub(crate) events: Vec<EventDraft>,
    pub(crate) attempt: Option<AttemptWrite>,
    pub(crate) approval: Option<ApprovalWrite>,
    pub(crate) at: i64,
}

/// The storage boundary the typestate layer writes through; `runtime/store.rs` picks the
/// store once. Reads go through [`Reads`] (docs/architecture.md, "where SQL runs").
pub(crate) trait Backend {
    /// Inserts a new pathway and its ledger events, atomically: the `proposed` event, then
    /// (when the admission is decided in the same step) the events that walk allowed
    /// edges from `proposed` to `new.state`.
    fn insert_pathway(&self, new: NewPathway, events: Vec<EventDraft>) -> Result<(), StoreError>;
    /// Applies one step; returns the new version.
    fn apply(&self, step: Step) -> Result<i64, StoreError>;
    /// Inserts a new pathway (as [`Backend::insert_pathway`]) and applies its first step, in
    /// **one** atomic unit: a step that is refused leaves no pathway behind. Returns the
    /// version after the step.
    fn insert_and_apply(
        &self,
        new: NewPathway,
        events: Vec<EventDraft>,
        step: Step,
    ) -> Result<i64, StoreError>;
    /// Applies `steps` in order in **one** atomic unit, after inserting `new` (a pathway not
    /// stored yet, as [`Backend::insert_pathway`]) when given. Each step after the first
    /// expects the version the one before it left. Returns the version after the last.
    /// Any refusal (a [`StoreError::Fenced`] one too) rolls the whole unit back: nothing of
    /// it is written. The read-only dispatch's one commit (its attempt and its outcome).
    fn apply_together(
        &self,
        new: Option<(NewPathway, Vec<EventDraft>)>,
        steps: Vec<Step>,
    ) -> Result<i64, StoreError>;
    /// Records a granted approval (and its ledger event) without changing state, provided
    /// the pathway is still in `expected` at `version` (else [`StoreError::Conflict`]).
    fn grant_approval(&self, grant: Grant) -> Result<(), StoreError>;
    /// A step that appends nothing and holds the ledger head, so that the batch carrying it
    /// signs the log (with a signing key; `store::log`).
    fn sign_log(&self) -> Result<(), StoreError>;
    /// Checks a tool's binding against its pin (see [`crate::Runtime::check_pin`]).
    fn check_pin(
        &self,
        candidate: &pins::Candidate,
        by: &str,
        at: i64,
    ) -> Result<PinCheck, StoreError>;
    /// Accepts a changed binding as the tool's pin (see [`crate::Runtime::accept_pin`]).
    fn accept_pin(
        &self,
        server: &str,
        tool: &str,
        digest: &str,
        by: &str,
        at: i64,
    ) -> Result<PinRecord, StoreError>;
    /// This database's identity, created with the schema.
    fn database_id(&self) -> &str;
    /// Now, by the database's clock (ms since the Unix epoch).
    fn now_ms(&self) -> Result<i64, StoreError>;
}

/// The reads a runtime's callers make (`runtime/store.rs` picks where: on SQLite a
/// connection of their own, so a read never waits for the step connection while a batch
/// is written and synced; on PostgreSQL the pool).
pub(crate) trait Reads {
    /// Checks one pathway's rows against its own ledger events, in one read snapshot.
    fn check_pathway(&self, id: &str) -> Result<check::Replay, StoreError>;
    /// One pathway's row.
    fn pathway_record(&self, id: &str) -> Result<Option<PathwayRecord>, StoreError>;
    /// One pathway's attempts, oldest first.
    fn attempt_records(&self, id: &str) -> Result<Vec<AttemptRecord>, StoreError>;
    /// A page of the global ledger with `seq > after`, in order.
    fn ledger_page(&self, after: i64, limit: usize) -> Result<Vec<LedgerRow>, StoreError>;
    /// One pathway's ledger events, oldest first.
    fn pathway_events(&self, id: &str) -> Result<Vec<LedgerRow>, StoreError>;
    /// A page of unresolved pathways after `after`, by id.
    fn unresolved(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PathwayRecord>, StoreError>;
    /// One pathway's row, definition digest and attempts, checked against its own ledger
    /// events, in one read snapshot; `None` if there is no such pathway.
    fn read_checked(&self, id: &str) -> Result<Option<Checked>, StoreError>;
    /// The whole ledger checked (see [`verify`]).
    fn verify_all(&self, known_head: Option<&str>) -> Result<crate::ledger::Report, StoreError>;
    /// The pathway stored under an idempotency key: its id and definition digest.
    fn with_key(&self, key: &str) -> Result<Option<(String, String)>, StoreError>;
}

/// A pathway read in one snapshot and checked against its own events: its row, its
/// definition digest and its attempts.
pub(crate) type Checked = (PathwayRecord, String, Vec<AttemptRecord>);
