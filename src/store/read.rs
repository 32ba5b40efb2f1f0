//! The read side of the store: plain records and queries, no way into a stage.
//!
//! [`ReadStore::open_read_only`] is what inspection tools use: the file is opened
//! with `SQLITE_OPEN_READ_ONLY`, `PRAGMA query_only` is on, and an authorizer
//! denies every statement that could write, attach, change a pragma or load an
//! extension. The records here are plain data (`Clone`, `Serialize`) and have no
//! conversion into a pathway stage.

use std::collections::BTreeMap;

use rusqlite::{Connection, OptionalExtension, params};

use super::StoreError;
use crate::state::State;

mod open;
mod records;

pub use records::{AttemptRecord, LedgerRow, PathwayRecord, Status};
use records::{PATHWAY_SELECT, attempt_row, ledger_row, pathway_row};

/// Read access to an rpr database.
#[derive(Debug)]
pub struct ReadStore {
    pub(crate) conn: Connection,
}

impl ReadStore {
    /// Schema version, counts by state, unresolved count and ledger head.
    ///
    /// The figures are read in one snapshot ([`ReadStore::snapshot`]).
    pub fn status(&self) -> Result<Status, StoreError> {
        self.snapshot(|_| {
            let mut counts: BTreeMap<String, i64> = State::ALL
                .iter()
                .map(|s| (s.as_str().to_owned(), 0))
                .collect();
            let mut stmt = self
                .conn
                .prepare_cached("SELECT state, count(*) FROM pathways GROUP BY state")?;
            let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
            for row in rows {
                let (state, n) = row?;
                counts.insert(state, n);
            }
            let unresolved = State::ALL
                .iter()
                .filter(|s| !s.is_terminal())
                .map(|s| counts.get(s.as_str()).copied().unwrap_or(0))
                .sum();
            let head = self.ledger_head()?;
            let schema_version = self
                .conn
                .query_row(
                    "SELECT value FROM meta WHERE key = 'schema_version'",
                    [],
                    |r| r.get::<_, String>(0),
                )?
                .parse()
                .map_err(|_| StoreError::Corrupt("meta.schema_version is not an integer".into()))?;
            Ok(Status {
                schema_version,
                counts,
                unresolved,
                ledger_len: head.as_ref().map_or(0, |h| h.0),
                ledger_head: head.map(|h| h.1),
            })
        })
    }

    /// The newest ledger event's position and hash, read from the chain itself
    /// (constant time; compare [`ReadStore::recorded_head`]).
    pub fn ledger_head(&self) -> Result<Option<(i64, String)>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }

    /// One pathway by id.
    pub fn pathway(&self, id: &str) -> Result<Option<PathwayRecord>, StoreError> {
        let mut stmt = self
            .conn
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
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let after = after.unwrap_or("");
        let mut out = Vec::new();
        if let Some(state) = state {
            let mut stmt = self.conn.prepare_cached(&format!(
                "{PATHWAY_SELECT} WHERE state = ?1 AND id > ?2 ORDER BY id LIMIT ?3"
            ))?;
            for r in stmt.query_map(params![state.as_str(), after, limit], pathway_row)? {
                out.push(r??);
            }
        } else {
            let mut stmt = self.conn.prepare_cached(&format!(
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
        super::pins::all(&self.conn)
    }

    /// The pin of one tool of one server.
    pub fn pin(&self, server: &str, tool: &str) -> Result<Option<super::PinRecord>, StoreError> {
        super::pins::one(&self.conn, server, tool)
    }

    /// The pathways in a non-terminal state whose unredacted request has
    /// `request_digest`, ordered by id (a governing proxy answers an identical repeat from
    /// the open one among them). Indexed: the cost does not grow with closed pathways.
    pub fn open_with_request(
        &self,
        request_digest: &str,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        // `state IN (every open state)`, not `NOT IN (the terminal ones)`: the index
        // `pathways_by_request (request_digest, state)` then seeks each open state instead of
        // reading every pathway the digest ever had (an identical read repeated all day).
        let open: Vec<String> = State::ALL
            .iter()
            .filter(|s| !s.is_terminal())
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        let mut stmt = self.conn.prepare_cached(&format!(
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
        let n: i64 = self
            .conn
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
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self.conn.prepare_cached(&format!(
            "{PATHWAY_SELECT} WHERE state NOT IN ('completed', 'denied', 'aborted') AND id > ?1 ORDER BY id LIMIT ?2"
        ))?;
        let mut out = Vec::new();
        for r in stmt.query_map(params![after.unwrap_or(""), limit], pathway_row)? {
            out.push(r??);
        }
        Ok(out)
    }

    /// The attempts of one pathway, oldest first.
    pub fn attempts(&self, pathway: &str) -> Result<Vec<AttemptRecord>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
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
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, pathway_id, event, prev_hash, hash FROM ledger WHERE pathway_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![pathway, after, limit], ledger_row)?;
        rows.collect::<Result<_, _>>().map_err(Into::into)
    }

    /// A page of the global ledger with `seq > after`, in order.
    pub fn ledger(&self, after: i64, limit: usize) -> Result<Vec<LedgerRow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, pathway_id, event, prev_hash, hash FROM ledger WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![after, limit], ledger_row)?;
        rows.collect::<Result<_, _>>().map_err(Into::into)
    }

    /// The head recorded in `meta` by the last step (seq and hash), if any.
    pub fn recorded_head(&self) -> Result<Option<(i64, String)>, StoreError> {
        Ok(self.meta("ledger_head")?.and_then(|v| {
            let (seq, hash) = v.split_once(':')?;
            Some((seq.parse().ok()?, hash.to_owned()))
        }))
    }

    /// The value stored under `key` in `meta`, if there is one.
    fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| {
                r.get(0)
            })
            .optional()?)
    }

    /// The stored definition digest of one pathway.
    pub(crate) fn definition_digest(&self, id: &str) -> Result<String, StoreError> {
        self.conn
            .prepare_cached("SELECT definition_digest FROM pathways WHERE id = ?1")?
            .query_row(params![id], |r| r.get(0))
            .optional()?
            .ok_or_else(|| StoreError::NoSuchPathway(id.to_owned()))
    }

    /// The SQL of every schema object, for inspection and snapshots.
    pub fn schema(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect::<Result<_, _>>().map_err(Into::into)
    }
}
