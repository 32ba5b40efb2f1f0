//! The seam between the store's rules ([`super::rules`]) and a database.
//!
//! A backend implements [`Rows`] over one unit of work (SQLite: a savepoint in its batch's
//! `BEGIN IMMEDIATE` transaction; PostgreSQL: a savepoint in its batch's transaction) and does nothing else: it
//! reads and writes the rows it is asked for, in its own SQL, and judges leases by its own
//! clock. It decides nothing. Every rule that both stores must agree on (which edges may be
//! stored, the compare-and-set, at most once, the per-pathway replay, the late outcome, the
//! ledger event's bytes and its chain hash) is written once, in [`super::rules`], over this
//! trait.

use super::check::{RawApproval, RawAttempt, RawPathway};
use super::{NewPathway, StoreError};
use crate::state::State;

/// A pathway row as a step reads it: the stored columns the check compares, and the
/// compare-and-set counter.
#[derive(Debug)]
pub(crate) struct Stored {
    pub(crate) row: RawPathway,
    pub(crate) version: i64,
}

/// One ledger row exactly as stored.
#[derive(Debug)]
pub(crate) struct EventRow {
    pub(crate) seq: i64,
    pub(crate) text: String,
    pub(crate) prev_hash: String,
    pub(crate) hash: String,
}

/// The attempt row of a write-ahead record (its status is `in_flight`; its lease runs
/// `lease_ms` from now by the database's clock).
#[derive(Debug)]
pub(crate) struct NewAttempt<'s> {
    pub(crate) id: &'s str,
    pub(crate) pathway: &'s str,
    pub(crate) seq: i64,
    pub(crate) previous: Option<&'s str>,
    pub(crate) request: &'s str,
    pub(crate) request_digest: &'s str,
    pub(crate) binding: &'s str,
    pub(crate) binding_digest: &'s str,
    pub(crate) owner: &'s str,
    pub(crate) lease_ms: i64,
    pub(crate) carrier: Option<&'s str>,
    pub(crate) at: i64,
}

/// An attempt's hold on its owner ([`Rows::lease`]).
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) status: String,
    pub(crate) owner: Option<String>,
    pub(crate) lease_until: Option<i64>,
    pub(crate) now: i64,
}

/// How an attempt ended, for [`Rows::insert_finished_attempt`].
#[derive(Debug)]
pub(crate) struct Finished<'s> {
    pub(crate) status: &'s str,
    pub(crate) outcome: Option<&'s str>,
    pub(crate) at: i64,
}

/// What a step's compare-and-set holds the stored pathway to, and what it moves it to.
#[derive(Debug)]
pub(crate) struct Move<'s> {
    pub(crate) pathway: &'s str,
    pub(crate) from: State,
    pub(crate) version: i64,
    pub(crate) definition_digest: &'s str,
    pub(crate) request_digest: &'s str,
    pub(crate) to: State,
    pub(crate) at: i64,
}

/// Reads and writes of one unit of work. Every method runs inside the unit; none commits.
pub(crate) trait Rows {
    /// The pathway's row, or `None`. With `lock`, the row stays locked against other
    /// writers until the unit ends, where the database locks rows (PostgreSQL); SQLite's
    /// unit already holds the database's write lock.
    fn pathway(&mut self, id: &str, lock: bool) -> Result<Option<Stored>, StoreError>;
    /// The pathway's ledger events, in order.
    fn events(&mut self, pathway: &str) -> Result<Vec<EventRow>, StoreError>;
    /// The pathway's last ledger event: its `seq` and `hash`.
    fn last_event(&mut self, pathway: &str) -> Result<Option<(i64, String)>, StoreError>;
    /// The pathway's attempts, in order of `seq`.
    fn attempts(&mut self, pathway: &str) -> Result<Vec<RawAttempt>, StoreError>;
    /// The pathway's approvals.
    fn approvals(&mut self, pathway: &str) -> Result<Vec<RawApproval>, StoreError>;
    /// Attempt `id` of `pathway` as a takeover judges it: its status, owner and lease end,
    /// and now by the database's clock, read inside the unit (its row locked where the
    /// database locks rows); `None`: no such attempt.
    fn lease(&mut self, pathway: &str, id: &str) -> Result<Option<Held>, StoreError>;

    /// The id and stored definition of every pathway not in a terminal state whose request
    /// digest is `request_digest` ([`super::rules::one_open`]).
    fn open_with_request(
        &mut self,
        request_digest: &str,
    ) -> Result<Vec<(String, String)>, StoreError>;

    /// Inserts a new pathway row, last changed at `updated_at` (its `at`, unless the unit
    /// that inserts it also takes its next steps: [`super::rules::insert_together`]).
    fn insert_pathway(&mut self, new: &NewPathway, updated_at: i64) -> Result<(), StoreError>;
    /// `UPDATE … WHERE` state, version and digests are as expected: whether a row changed.
    fn move_pathway(&mut self, change: &Move<'_>) -> Result<bool, StoreError>;
    /// Moves the pathway's version (and `updated_at`) without changing its state.
    fn bump_version(&mut self, pathway: &str, at: i64) -> Result<(), StoreError>;

    /// Inserts the write-ahead attempt row.
    fn insert_attempt(&mut self, attempt: &NewAttempt<'_>) -> Result<(), StoreError>;
    /// Inserts an attempt row already finished: the row [`Rows::insert_attempt`] then
    /// [`Rows::finish_attempt`] leave (no owner, no lease), for an attempt started and
    /// finished in one unit ([`super::rules::insert_together`]).
    fn insert_finished_attempt(
        &mut self,
        attempt: &NewAttempt<'_>,
        finish: &Finished<'_>,
    ) -> Result<(), StoreError>;
    /// Records an attempt's status and (when given) outcome, clearing its owner and lease:
    /// whether the row exists.
    fn finish_attempt(
        &mut self,
        pathway: &str,
        id: &str,
        status: &str,
        outcome: Option<&str>,
        at: i64,
    ) -> Result<bool, StoreError>;

    /// Inserts a granted approval.
    fn insert_approval(
        &mut self,
        pathway: &str,
        id: &str,
        request_digest: &str,
        approver: &str,
        at: i64,
    ) -> Result<(), StoreError>;
    /// Marks an approval used if it is unused, unrevoked and bound to `request_digest`:
    /// whether it was.
    fn use_approval(
        &mut self,
        pathway: &str,
        id: &str,
        request_digest: &str,
        not_before: i64,
        at: i64,
    ) -> Result<bool, StoreError>;
    /// Revokes every unused approval of the pathway.
    fn revoke_approvals(&mut self, pathway: &str, at: i64) -> Result<(), StoreError>;

    /// The ledger's head (`seq`, `hash`; `(0, GENESIS)` when empty), held against other
    /// writers until the unit ends.
    fn head(&mut self) -> Result<(i64, String), StoreError>;
    /// Appends the ledger rows (at least one, chained after the head, in order) and records
    /// the last as the head.
    fn append_events(&mut self, pathway: &str, rows: &[EventRow]) -> Result<(), StoreError>;

    /// The pin row of `server`/`tool`, locked against other writers until the unit ends
    /// where the database locks rows.
    fn pin(&mut self, server: &str, tool: &str) -> Result<Option<RawPin>, StoreError>;
    /// Inserts `c` as the pin unless one is there: whether it was inserted.
    fn insert_pin(&mut self, c: &Candidate, by: &str, at: i64) -> Result<bool, StoreError>;
    /// Remembers `c` as the binding seen for its tool (the pin stays).
    fn see_pin(&mut self, c: &Candidate, at: i64) -> Result<(), StoreError>;
    /// Makes the seen binding the pin if its digest is `digest`: whether it was.
    fn accept_seen_pin(
        &mut self,
        server: &str,
        tool: &str,
        digest: &str,
        by: &str,
        at: i64,
    ) -> Result<bool, StoreError>;
}

/// A pin row exactly as stored: `server`, `tool`, `digest`, `binding`, `definition`,
/// `pinned_by`, `pinned_at`, then the seen binding's `digest`, `binding`, `definition`, `at`.
pub(crate) type RawPin = (
    String,
    String,
    String,
    String,
    String,
    String,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
);

/// A binding to check or pin: its digest, canonical details and canonical definition.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub(crate) server: String,
    pub(crate) tool: String,
    pub(crate) digest: String,
    pub(crate) binding: String,
    pub(crate) definition: String,
}
