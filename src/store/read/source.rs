//! What a backend answers for a [`ReadStore`](super::ReadStore): every read, once per
//! backend. The store is chosen in one place, [`ReadStore`](super::ReadStore)'s `source`;
//! each public read is a call through this trait.

use crate::ledger::Report;
use crate::state::State;
use crate::store::{AttemptRecord, LedgerRow, PathwayRecord, PinRecord, Status, StoreError};

/// The reads of one backend, each on the connection it was opened with (which cannot write).
pub(crate) trait Source {
    /// Schema version, counts by state and ledger head, in one snapshot.
    fn status(&self) -> Result<Status, StoreError>;
    /// The newest ledger event's position and hash, read from the chain.
    fn ledger_head(&self) -> Result<Option<(i64, String)>, StoreError>;
    /// The value stored under `key` in `meta`, if any.
    fn meta(&self, key: &str) -> Result<Option<String>, StoreError>;
    /// The head recorded by the last step, if any.
    fn recorded_head(&self) -> Result<Option<(i64, String)>, StoreError>;
    /// One pathway by id.
    fn pathway(&self, id: &str) -> Result<Option<PathwayRecord>, StoreError>;
    /// A page of pathways by id, after `after`, optionally only in `state`.
    fn list_pathways(
        &self,
        after: Option<&str>,
        limit: usize,
        state: Option<State>,
    ) -> Result<Vec<PathwayRecord>, StoreError>;
    /// A page of pathways in a non-terminal state, by id, after `after`.
    fn list_unresolved(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PathwayRecord>, StoreError>;
    /// The open pathways whose unredacted request has `request_digest`, by id.
    fn open_with_request(&self, request_digest: &str) -> Result<Vec<PathwayRecord>, StoreError>;
    /// How many pathways, in any state, have `request_digest`.
    fn count_with_request(&self, request_digest: &str) -> Result<u64, StoreError>;
    /// [`Source::open_with_request`] and [`Source::count_with_request`] in one query.
    fn open_and_count_with_request(
        &self,
        request_digest: &str,
    ) -> Result<(Vec<PathwayRecord>, u64), StoreError>;
    /// One pathway's attempts, oldest first.
    fn attempts(&self, pathway: &str) -> Result<Vec<AttemptRecord>, StoreError>;
    /// A page of one pathway's ledger events with `seq > after`.
    fn events(&self, pathway: &str, after: i64, limit: usize)
    -> Result<Vec<LedgerRow>, StoreError>;
    /// A page of the global ledger with `seq > after`.
    fn ledger(&self, after: i64, limit: usize) -> Result<Vec<LedgerRow>, StoreError>;
    /// The lowest seq in the ledger, whatever it is (`None` with no event).
    fn ledger_first(&self) -> Result<Option<i64>, StoreError>;
    /// One pathway's stored definition digest.
    fn definition_digest(&self, id: &str) -> Result<String, StoreError>;
    /// Every tool pin, by server and tool.
    fn pins(&self) -> Result<Vec<PinRecord>, StoreError>;
    /// One tool's pin.
    fn pin(&self, server: &str, tool: &str) -> Result<Option<PinRecord>, StoreError>;
    /// One tool's pinned binding digest alone (nothing parsed).
    fn pin_digest(&self, server: &str, tool: &str) -> Result<Option<String>, StoreError>;
    /// Now, by the clock approvals are stamped and judged by: the database's on
    /// PostgreSQL (several hosts share it), this host's on SQLite.
    fn approval_now(&self) -> Result<i64, StoreError>;
    /// The definition of every schema object, sorted.
    fn schema(&self) -> Result<Vec<String>, StoreError>;
    /// Whether `sql` would be refused by this connection's guard.
    fn would_refuse(&self, sql: &str) -> bool;
    /// The whole ledger and every stored row checked, in one snapshot (`store::verify`).
    fn verify(&self, known_head: Option<&str>) -> Result<Report, StoreError>;
    /// Opens a snapshot (inside an open one, that one goes on), calls `f` once, and ends
    /// it: kept when `f` says `true`, rolled back when it says `false` or panics. `Err`
    /// when the snapshot could not begin (then `f` was not called) or end.
    fn snapshot(&self, f: &mut dyn FnMut() -> bool) -> Result<(), StoreError>;
}

/// How a snapshot run through [`Source::snapshot`] by a backend's generic snapshot ended
/// early: the caller's own `false`, or the store's error.
pub(crate) enum Ended {
    /// `f` said `false`: roll back; the caller holds its own error.
    Declined,
    /// The store failed to begin or end the snapshot.
    Store(StoreError),
}

impl From<StoreError> for Ended {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

impl Ended {
    /// [`Source::snapshot`]'s answer for a generic snapshot that returned `result`.
    pub(crate) fn settle(result: Result<(), Ended>) -> Result<(), StoreError> {
        match result {
            Ok(()) | Err(Ended::Declined) => Ok(()),
            Err(Ended::Store(e)) => Err(e),
        }
    }

    /// `f`'s answer as a result for a backend's generic snapshot.
    pub(crate) fn ask(f: &mut dyn FnMut() -> bool) -> Result<(), Ended> {
        if f() { Ok(()) } else { Err(Ended::Declined) }
    }
}
