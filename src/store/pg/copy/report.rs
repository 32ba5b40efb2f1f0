//! What a copy reports: its progress, how it ended, and why it was refused.

use std::fmt;

use serde::Serialize;

use super::super::PgError;
use crate::ledger::Problem;
use crate::store::{OLDEST_READABLE_SCHEMA, StoreError};

/// Where a copy is, for a progress display ([`copy_from_sqlite`](super::copy_from_sqlite) reports each as it happens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Progress<'a> {
    /// The source's ledger and rows verified, under its write lock.
    SourceVerified {
        /// Its events.
        events: i64,
    },
    /// Rows of one table written into the target's (open) transaction: every 10,000 rows
    /// and at the table's end.
    Rows {
        /// The table.
        table: &'a str,
        /// Rows written so far.
        done: u64,
        /// Rows the table has.
        total: u64,
    },
    /// The copy verified inside the target's transaction, not yet committed.
    CopyVerified,
    /// The source's move mark committed (unfinished): from here it takes no step.
    SourceMarked,
    /// The target's transaction committed.
    TargetCommitted,
}

/// How a copy ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CopyOutcome {
    /// The database was copied and the source marked moved.
    Copied,
    /// An earlier copy to this target had committed but had not finished marking the source
    /// (it was interrupted): the mark is now finished, nothing was copied again.
    FinishedEarlierCopy,
    /// The source was already moved to this target and the mark finished: nothing to do.
    AlreadyMoved,
}

/// Rows per table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RowCounts {
    /// `pathways`.
    pub pathways: u64,
    /// `attempts`.
    pub attempts: u64,
    /// `approvals`.
    pub approvals: u64,
    /// `ledger`.
    pub ledger: u64,
    /// `pins`.
    pub pins: u64,
}

/// What a copy did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CopyReport {
    /// How it ended.
    pub outcome: CopyOutcome,
    /// The source file.
    pub source: String,
    /// The target, as the source's move mark names it (without a password).
    pub target: String,
    /// The database identity, the same on both.
    pub database_id: String,
    /// The ledger's events.
    pub events: i64,
    /// The ledger head's hash (`None` for an empty ledger), the same on both.
    pub head: Option<String>,
    /// The target's rows per table (equal to the source's).
    pub rows: RowCounts,
}

/// An attempt in flight in the source, which stops a copy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct InFlight {
    /// The pathway.
    pub pathway: String,
    /// The attempt.
    pub attempt: String,
    /// Its owner.
    pub owner: Option<String>,
    /// Its lease, ms since the epoch by the database's clock.
    pub lease_until: Option<i64>,
}

impl fmt::Display for InFlight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pathway {} attempt {} owned by {}",
            self.pathway,
            self.attempt,
            self.owner.as_deref().unwrap_or("nobody")
        )
    }
}

/// Why a copy was refused or failed. Every refusal before [`Progress::SourceMarked`] left
/// both databases as they were.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CopyError {
    /// The source cannot be used: missing, not an rpr database, written by a newer rpr, its
    /// write lock busy, or SQLite failed.
    #[error("source: {0}")]
    Source(Box<StoreError>),
    /// The source's schema is older than the oldest this build copies as it is
    /// ([`crate::store::OLDEST_READABLE_SCHEMA`]).
    #[error(
        "source {path}: schema version {found} is older than {OLDEST_READABLE_SCHEMA}; open it once for writing with this rpr (`rpr unresolved --database {path}` does) to migrate it, then copy; nothing was copied"
    )]
    SourceTooOld {
        /// The source file.
        path: String,
        /// Its schema version.
        found: i64,
    },
    /// The source's ledger or rows do not verify: a copy would carry the damage along.
    #[error(
        "source {path} does not verify ({} problem(s); the first: {}); nothing was copied. `rpr verify --database {path}` lists them",
        .problems.len(),
        .problems.first().map_or_else(String::new, |p| format!("{:?} at seq {:?}: {}", p.kind, p.seq, p.detail))
    )]
    SourceDoesNotVerify {
        /// The source file.
        path: String,
        /// What failed.
        problems: Vec<Problem>,
    },
    /// Attempts are in flight in the source: their outcome would be recorded in a database
    /// that no longer takes steps.
    #[error(
        "source {path}: {} attempt(s) in flight ({}); nothing was copied. Wait for them to return, or, if the process that sent them is gone, run `rpr unresolved --database {path}` (its recovery scan records them as unknown) and copy then",
        .attempts.len(),
        .attempts.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
    )]
    InFlight {
        /// The source file.
        path: String,
        /// The attempts.
        attempts: Vec<InFlight>,
    },
    /// The target URL does not parse.
    #[error("target URL: {0}")]
    BadUrl(String),
    /// The target server could not be reached or refused the connection.
    #[error(
        "cannot open the PostgreSQL target {target}: {error}; check that the server runs and that the URL, role and password are right; nothing was copied"
    )]
    Unreachable {
        /// The target (without a password).
        target: String,
        /// What the client said.
        error: Box<PgError>,
    },
    /// The target store holds something: a copy never merges into or overwrites a store.
    #[error(
        "the target {target} is not empty ({detail}); nothing was copied: copy into an empty schema (--schema NAME)"
    )]
    TargetNotEmpty {
        /// The target.
        target: String,
        /// What it holds.
        detail: String,
    },
    /// The source was moved to another target already.
    #[error(
        "source {path} was already moved to {to}; it is not copied anywhere else (two stores of one database could each take a step on one pathway)"
    )]
    MovedElsewhere {
        /// The source file.
        path: String,
        /// Where it was moved.
        to: String,
    },
    /// The source was moved to this target and finished, but the target no longer holds the
    /// copy: copying again would bring back pathways as they were at the move.
    #[error(
        "source {path} was moved to {target} and the move finished, but the target no longer holds this database ({detail}); it is not copied again: the store it was moved to may have taken steps since, and a fresh copy would bring its pathways back as they were at the move"
    )]
    TargetLost {
        /// The source file.
        path: String,
        /// The target.
        target: String,
        /// What the target holds.
        detail: String,
    },
    /// The target failed while the copy was written (its transaction rolled back).
    #[error("target {target}: {error}; nothing was copied")]
    Target {
        /// The target.
        target: String,
        /// What failed.
        error: Box<PgError>,
    },
    /// The copy, inside its transaction, did not verify as the source did (rolled back).
    #[error("the copy in {target} does not match the source ({detail}); nothing was committed")]
    CopyMismatch {
        /// The target.
        target: String,
        /// What differs.
        detail: String,
    },
    /// The target's `COMMIT` failed: whether the copy committed is unknown. The source is
    /// marked moved (unfinished) and takes no steps.
    #[error(
        "the target's COMMIT failed ({error}): whether the copy committed is unknown. The source is marked moved (unfinished) and takes no steps; run the same copy again: it finishes the move if the copy committed, and copies again if it did not"
    )]
    CommitUnknown {
        /// What the client said.
        error: postgres::Error,
    },
    /// The copy committed, but finishing the source's mark failed; the source already takes
    /// no steps.
    #[error(
        "the copy committed in {target}, but marking the source finished failed ({error}); the source already takes no steps. Run the same copy again to finish the mark"
    )]
    FinishUnrecorded {
        /// The target.
        target: String,
        /// What failed.
        error: Box<StoreError>,
    },
}

impl CopyError {
    /// A short stable name for the kind of failure (`rpr copy-to-postgres --json`).
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Source(e) => match **e {
                StoreError::Missing(_) => "source_missing",
                StoreError::NotRprDatabase(_) => "source_not_rpr_database",
                StoreError::Busy { .. } => "source_busy",
                StoreError::SchemaTooNew { .. } => "source_schema",
                _ => "source_error",
            },
            Self::SourceTooOld { .. } => "source_schema",
            Self::SourceDoesNotVerify { .. } => "source_does_not_verify",
            Self::InFlight { .. } => "in_flight",
            Self::BadUrl(_) => "bad_url",
            Self::Unreachable { .. } => "target_unreachable",
            Self::TargetNotEmpty { .. } => "target_not_empty",
            Self::MovedElsewhere { .. } => "moved_elsewhere",
            Self::TargetLost { .. } => "target_lost",
            Self::Target { .. } => "target_error",
            Self::CopyMismatch { .. } => "copy_mismatch",
            Self::CommitUnknown { .. } => "commit_unknown",
            Self::FinishUnrecorded { .. } => "finish_unrecorded",
        }
    }
}

impl From<StoreError> for CopyError {
    fn from(e: StoreError) -> Self {
        Self::Source(Box::new(e))
    }
}

impl From<rusqlite::Error> for CopyError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Source(Box::new(e.into()))
    }
}
