//! The read side of the store: plain records and queries, no way into a stage.
//!
//! [`ReadStore::open_read_only`] is what inspection tools use: the file is opened
//! with `SQLITE_OPEN_READ_ONLY`, `PRAGMA query_only` is on, and an authorizer
//! denies every statement that could write, attach, change a pragma or load an
//! extension. The records here are plain data (`Clone`, `Serialize`) and have no
//! conversion into a pathway stage.
//!
//! Each backend answers the reads through one trait (`source::Source`), and a
//! `ReadStore` chooses its backend in one place (`ReadStore::source`).

use rusqlite::Connection;

use super::StoreError;
use crate::state::State;

pub(crate) mod open;
mod records;
mod source;
mod sqlite;

pub use records::{AttemptRecord, LedgerRow, PathwayRecord, Status};
#[cfg(feature = "postgres")]
pub(crate) use source::Ended;
pub(crate) use source::Source;
pub(crate) use sqlite::SqliteReads;

/// Read access to an rpr database: a SQLite file, or (feature `postgres`) a PostgreSQL
/// database, each opened so that it cannot be written through ([`ReadStore::open_read_only`]).
pub struct ReadStore {
    backing: Backing,
}

/// The backend a [`ReadStore`] reads.
enum Backing {
    Sqlite(SqliteReads),
    #[cfg(feature = "postgres")]
    Pg(Box<crate::store::pg::PgReader>),
}

impl std::fmt::Debug for ReadStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadStore")
            .field("postgres", &self.is_postgres())
            .finish_non_exhaustive()
    }
}

impl ReadStore {
    pub(crate) fn from_sqlite(conn: Connection) -> Self {
        Self {
            backing: Backing::Sqlite(SqliteReads { conn, _index: None }),
        }
    }

    /// The backend every read goes to: the one place a read chooses its store.
    fn source(&self) -> &dyn Source {
        match &self.backing {
            Backing::Sqlite(sqlite) => sqlite,
            #[cfg(feature = "postgres")]
            Backing::Pg(pg) => pg.as_ref(),
        }
    }

    /// The SQLite side of a store known to be SQLite: the SQLite backend's own reader,
    /// the SQLite ledger walk and the copy's source.
    pub(crate) fn sqlite(&self) -> &SqliteReads {
        match &self.backing {
            Backing::Sqlite(sqlite) => sqlite,
            #[cfg(feature = "postgres")]
            Backing::Pg(_) => unreachable!("a SQLite-only read reached a PostgreSQL ReadStore"),
        }
    }

    /// The SQLite connection of a store known to be SQLite ([`ReadStore::sqlite`]).
    pub(crate) fn conn(&self) -> &Connection {
        &self.sqlite().conn
    }

    /// Whether this store reads PostgreSQL.
    #[must_use]
    pub fn is_postgres(&self) -> bool {
        !matches!(self.backing, Backing::Sqlite(_))
    }

    /// Schema version, counts by state, unresolved count and ledger head.
    ///
    /// The figures are read in one snapshot ([`ReadStore::snapshot`]).
    pub fn status(&self) -> Result<Status, StoreError> {
        self.source().status()
    }

    /// The newest ledger event's position and hash, read from the chain itself
    /// (constant time; compare [`ReadStore::recorded_head`]).
    pub fn ledger_head(&self) -> Result<Option<(i64, String)>, StoreError> {
        self.source().ledger_head()
    }

    /// One pathway by id.
    pub fn pathway(&self, id: &str) -> Result<Option<PathwayRecord>, StoreError> {
        self.source().pathway(id)
    }

    /// A page of pathways ordered by id, after `after`, optionally only in `state`.
    pub fn list_pathways(
        &self,
        after: Option<&str>,
        limit: usize,
        state: Option<State>,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        self.source().list_pathways(after, limit, state)
    }

    /// Every tool pin of `rpr gate`, ordered by server and tool.
    pub fn pins(&self) -> Result<Vec<super::PinRecord>, StoreError> {
        self.source().pins()
    }

    /// The pin of one tool of one server.
    pub fn pin(&self, server: &str, tool: &str) -> Result<Option<super::PinRecord>, StoreError> {
        self.source().pin(server, tool)
    }

    /// Now, by the clock approvals are stamped and judged by (as the steps judge them):
    /// the database's on PostgreSQL, where hosts whose clocks differ share the approvals;
    /// this host's on SQLite. What a view says still counts is judged by it.
    pub fn approval_now(&self) -> Result<i64, StoreError> {
        self.source().approval_now()
    }

    /// The pinned binding digest of one tool, and nothing else: what a governing proxy
    /// compares before each call (the pin's JSON is not parsed).
    pub fn pin_digest(&self, server: &str, tool: &str) -> Result<Option<String>, StoreError> {
        self.source().pin_digest(server, tool)
    }

    /// The pathways in a non-terminal state whose unredacted request has
    /// `request_digest`, ordered by id (a governing proxy answers an identical repeat from
    /// the open one among them). Indexed: the cost does not grow with closed pathways.
    pub fn open_with_request(
        &self,
        request_digest: &str,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        self.source().open_with_request(request_digest)
    }

    /// How many pathways (in any state) have `request_digest` (indexed).
    pub fn count_with_request(&self, request_digest: &str) -> Result<u64, StoreError> {
        self.source().count_with_request(request_digest)
    }

    /// [`ReadStore::open_with_request`] and [`ReadStore::count_with_request`] in **one**
    /// query (one statement, one snapshot): what a governing proxy looks up before each
    /// call. Indexed like both.
    pub fn open_and_count_with_request(
        &self,
        request_digest: &str,
    ) -> Result<(Vec<PathwayRecord>, u64), StoreError> {
        self.source().open_and_count_with_request(request_digest)
    }

    /// A page of pathways in a non-terminal state, ordered by id, after `after`.
    pub fn list_unresolved(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        self.source().list_unresolved(after, limit)
    }

    /// The attempts of one pathway, oldest first.
    pub fn attempts(&self, pathway: &str) -> Result<Vec<AttemptRecord>, StoreError> {
        self.source().attempts(pathway)
    }

    /// A page of one pathway's ledger events with `seq > after`, oldest first.
    pub fn events(
        &self,
        pathway: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<LedgerRow>, StoreError> {
        self.source().events(pathway, after, limit)
    }

    /// A page of the global ledger with `seq > after`, in order.
    pub fn ledger(&self, after: i64, limit: usize) -> Result<Vec<LedgerRow>, StoreError> {
        self.source().ledger(after, limit)
    }

    /// The lowest seq in the ledger (`None` with no event).
    pub(crate) fn ledger_first(&self) -> Result<Option<i64>, StoreError> {
        self.source().ledger_first()
    }

    /// The value stored under `key` in `meta`, if any.
    pub(crate) fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.source().meta(key)
    }

    /// The database's identity (`meta.database_id`).
    pub(crate) fn database_id(&self) -> Result<String, StoreError> {
        self.meta("database_id")?
            .ok_or_else(|| StoreError::Corrupt("meta has no database_id".into()))
    }

    /// The head recorded in `meta` by the last step (seq and hash), if any.
    pub fn recorded_head(&self) -> Result<Option<(i64, String)>, StoreError> {
        self.source().recorded_head()
    }

    /// The stored definition digest of one pathway.
    pub(crate) fn definition_digest(&self, id: &str) -> Result<String, StoreError> {
        self.source().definition_digest(id)
    }

    /// The SQL of every schema object, for inspection and snapshots.
    pub fn schema(&self) -> Result<Vec<String>, StoreError> {
        self.source().schema()
    }

    /// The whole ledger and every stored row checked, in one snapshot (`store::verify`).
    pub(crate) fn verify(
        &self,
        known_head: Option<&str>,
    ) -> Result<crate::ledger::Report, StoreError> {
        self.source().verify(known_head)
    }
}
