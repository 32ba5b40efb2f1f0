//! The read side of the store: plain records and queries, no way into a stage.
//!
//! [`ReadStore::open_read_only`] is what inspection tools use: the file is opened
//! with `SQLITE_OPEN_READ_ONLY`, `PRAGMA query_only` is on, and an authorizer
//! denies every statement that could write, attach, change a pragma or load an
//! extension. The records here are plain data (`Clone`, `Serialize`) and have no
//! conversion into a pathway stage.

use rusqlite::{Connection, OptionalExtension, params};

use super::StoreError;
use crate::state::State;

mod open;
mod records;

pub use records::{AttemptRecord, LedgerRow, PathwayRecord, Status};
use records::{PATHWAY_SELECT, attempt_row, ledger_row, pathway_row};

/// Read access to an rpr database: a SQLite file, or (feature `postgres`) a PostgreSQL
/// database, each opened so that it cannot be written through ([`ReadStore::open_read_only`]).
pub struct ReadStore {
    src: Source,
}

enum Source {
    Sqlite(Connection),
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

/// On PostgreSQL, returns what `$call` (on the reader `$pg`) gives; on SQLite, goes on.
macro_rules! on_postgres {
    ($self:ident, $pg:ident => $call:expr) => {
        #[cfg(feature = "postgres")]
        if let Source::Pg($pg) = &$self.src {
            return $call;
        }
    };
}
use on_postgres;

impl ReadStore {
    pub(crate) fn from_sqlite(conn: Connection) -> Self {
        Self {
            src: Source::Sqlite(conn),
        }
    }

    /// The SQLite connection of a store known to be SQLite: the SQLite backend's own
    /// reader, the SQLite ledger walk, the copy's source, and the SQLite half of each read.
    pub(crate) fn conn(&self) -> &Connection {
        match &self.src {
            Source::Sqlite(conn) => conn,
            #[cfg(feature = "postgres")]
            Source::Pg(_) => unreachable!("a SQLite-only read reached a PostgreSQL ReadStore"),
        }
    }

    /// The PostgreSQL reader, when this store reads PostgreSQL.
    #[cfg(feature = "postgres")]
    pub(crate) fn postgres(&self) -> Option<&crate::store::pg::PgReader> {
        match &self.src {
            Source::Pg(pg) => Some(pg),
            Source::Sqlite(_) => None,
        }
    }

    /// Whether this store reads PostgreSQL.
    #[must_use]
    pub fn is_postgres(&self) -> bool {
        !matches!(self.src, Source::Sqlite(_))
    }

    /// Schema version, counts by state, unresolved count and ledger head.
    ///
    /// The figures are read in one snapshot ([`ReadStore::snapshot`]).
    pub fn status(&self) -> Result<Status, StoreError> {
        on_postgres!(self, pg => pg.status());
        self.snapshot(|_| {
            let mut stmt = self
                .conn()
                .prepare_cached("SELECT state, count(*) FROM pathways GROUP BY state")?;
            let per_state = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            let schema_version = self
                .conn()
                .query_row(
                    "SELECT value FROM meta WHERE key = 'schema_version'",
                    [],
                    |r| r.get::<_, String>(0),
                )?
                .parse()
                .map_err(|_| StoreError::Corrupt("meta.schema_version is not an integer".into()))?;
            Ok(Status::new(schema_version, per_state, self.ledger_head()?))
        })
    }

    /// The newest ledger event's position and hash, read from the chain itself
    /// (constant time; compare [`ReadStore::recorded_head`]).
    pub fn ledger_head(&self) -> Result<Option<(i64, String)>, StoreError> {
        on_postgres!(self, pg => pg.ledger_head());
        Ok(self
            .conn()
            .query_row(
                "SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }

    /// One pathway by id.
    pub fn pathway(&self, id: &str) -> Result<Option<PathwayRecord>, StoreError> {
        on_postgres!(self, pg => pg.pathway(id));
        let mut stmt = self
            .conn()
            .prepare_cached(&format!("{PATHWAY_SELECT} WHERE id = ?1"))?;
        stmt.query_row(params![id], pathway_row)
            .optional()?
            .transpose()
    }

    /// A page of pathways ordered by id, after `after`, optionally only in `state`.
    pub fn list_pathways(
        &self,
        after: Option<&str>,
        limit: usize,
        state: Option<State>,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        on_postgres!(self, pg => pg.list_pathways(after, limit, state));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let after = after.unwrap_or("");
        let mut out = Vec::new();
        if let Some(state) = state {
            let mut stmt = self.conn().prepare_cached(&format!(
                "{PATHWAY_SELECT} WHERE state = ?1 AND id > ?2 ORDER BY id LIMIT ?3"
            ))?;
            for r in stmt.query_map(params![state.as_str(), after, limit], pathway_row)? {
                out.push(r??);
            }
        } else {
            let mut stmt = self.conn().prepare_cached(&format!(
                "{PATHWAY_SELECT} WHERE id > ?1 ORDER BY id LIMIT ?2"
            ))?;
            for r in stmt.query_map(params![after, limit], pathway_row)? {
                out.push(r??);
            }
        }
        Ok(out)
    }

    /// Every tool pin of `rpr gate`, ordered by server and tool.
    pub fn pins(&self) -> Result<Vec<super::PinRecord>, StoreError> {
        on_postgres!(self, pg => pg.pins());
        super::pins::all(self.conn())
    }

    /// The pin of one tool of one server.
    pub fn pin(&self, server: &str, tool: &str) -> Result<Option<super::PinRecord>, StoreError> {
        on_postgres!(self, pg => pg.pin(server, tool));
        super::pins::one(self.conn(), server, tool)
    }

    /// The pathways in a non-terminal state whose unredacted request has
    /// `request_digest`, ordered by id (a governing proxy answers an identical repeat from
    /// the open one among them). Indexed: the cost does not grow with closed pathways.
    pub fn open_with_request(
        &self,
        request_digest: &str,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        on_postgres!(self, pg => pg.open_with_request(request_digest));
        // `state IN (every open state)`, not `NOT IN (the terminal ones)`: the index
        // `pathways_by_request (request_digest, state)` then seeks each open state instead of
        // reading every pathway the digest ever had (an identical read repeated all day).
        let open: Vec<String> = State::ALL
            .iter()
            .filter(|s| !s.is_terminal())
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        let mut stmt = self.conn().prepare_cached(&format!(
            "{PATHWAY_SELECT} WHERE request_digest = CAST(?1 AS TEXT) \
             AND state IN ({}) ORDER BY id",
            open.join(", ")
        ))?;
        let mut out = Vec::new();
        for r in stmt.query_map(params![request_digest], pathway_row)? {
            out.push(r??);
        }
        Ok(out)
    }

    /// How many pathways (in any state) have `request_digest` (indexed).
    pub fn count_with_request(&self, request_digest: &str) -> Result<u64, StoreError> {
        on_postgres!(self, pg => pg.count_with_request(request_digest));
        let n: i64 = self
            .conn()
            .prepare_cached(
                "SELECT count(*) FROM pathways WHERE request_digest = CAST(?1 AS TEXT)",
            )?
            .query_row(params![request_digest], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// A page of pathways in a non-terminal state, ordered by id, after `after`.
    pub fn list_unresolved(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        on_postgres!(self, pg => pg.list_unresolved(after, limit));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // The index `pathways_unresolved` covers `NOT IN` the first three terminal states
        // (its predicate, written before `failed` existed, must appear here as written for
        // the index to be used); a failed read, also terminal, is filtered out beside it.
        let mut stmt = self.conn().prepare_cached(&format!(
            "{PATHWAY_SELECT} WHERE state NOT IN ('completed', 'denied', 'aborted') AND state <> 'failed' AND id > ?1 ORDER BY id LIMIT ?2"
        ))?;
        let mut out = Vec::new();
        for r in stmt.query_map(params![after.unwrap_or(""), limit], pathway_row)? {
            out.push(r??);
        }
        Ok(out)
    }

    /// The attempts of one pathway, oldest first.
    pub fn attempts(&self, pathway: &str) -> Result<Vec<AttemptRecord>, StoreError> {
        on_postgres!(self, pg => pg.attempts(pathway));
        let mut stmt = self.conn().prepare_cached(
            "SELECT id, pathway_id, seq, previous_attempt, request, request_digest, binding, binding_digest, \
             status, owner, lease_until, outcome, created_at, updated_at FROM attempts WHERE pathway_id = CAST(?1 AS TEXT) ORDER BY seq",
        )?;
        let mut out = Vec::new();
        for r in stmt.query_map(params![pathway], attempt_row)? {
            out.push(r??);
        }
        Ok(out)
    }

    /// A page of one pathway's ledger events with `seq > after`, oldest first.
    pub fn events(
        &self,
        pathway: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<LedgerRow>, StoreError> {
        on_postgres!(self, pg => pg.events(pathway, after, limit));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self.conn().prepare_cached(
            "SELECT seq, pathway_id, event, prev_hash, hash FROM ledger WHERE pathway_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![pathway, after, limit], ledger_row)?;
        rows.collect::<Result<_, _>>().map_err(Into::into)
    }

    /// A page of the global ledger with `seq > after`, in order.
    pub fn ledger(&self, after: i64, limit: usize) -> Result<Vec<LedgerRow>, StoreError> {
        on_postgres!(self, pg => pg.ledger(after, limit));
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self.conn().prepare_cached(
            "SELECT seq, pathway_id, event, prev_hash, hash FROM ledger WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![after, limit], ledger_row)?;
        rows.collect::<Result<_, _>>().map_err(Into::into)
    }

    /// The head recorded in `meta` by the last step (seq and hash), if any.
    pub fn recorded_head(&self) -> Result<Option<(i64, String)>, StoreError> {
        on_postgres!(self, pg => pg.recorded_head());
        Ok(self.meta("ledger_head")?.and_then(|v| {
            let (seq, hash) = v.split_once(':')?;
            Some((seq.parse().ok()?, hash.to_owned()))
        }))
    }

    /// The value stored under `key` in `meta`, if there is one.
    fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn()
            .query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| {
                r.get(0)
            })
            .optional()?)
    }

    /// The stored definition digest of one pathway.
    pub(crate) fn definition_digest(&self, id: &str) -> Result<String, StoreError> {
        on_postgres!(self, pg => pg.definition_digest(id));
        self.conn()
            .prepare_cached("SELECT definition_digest FROM pathways WHERE id = ?1")?
            .query_row(params![id], |r| r.get(0))
            .optional()?
            .ok_or_else(|| StoreError::NoSuchPathway(id.to_owned()))
    }

    /// The SQL of every schema object, for inspection and snapshots.
    pub fn schema(&self) -> Result<Vec<String>, StoreError> {
        on_postgres!(self, pg => pg.schema());
        let mut stmt = self
            .conn()
            .prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect::<Result<_, _>>().map_err(Into::into)
    }
}
