//! [`ReadStore`](super::ReadStore) on SQLite: the reads, read snapshots and the check of a
//! database's schema, on one connection.

use rusqlite::{Connection, OptionalExtension, params};

use super::records::{PATHWAY_SELECT, attempt_row, ledger_row, pathway_row};
use super::source::{Ended, Source};
use crate::ledger::Report;
use crate::state::State;
use crate::store::check::walk::{self, Plan};
use crate::store::{
    AttemptRecord, LedgerRow, PathwayRecord, PinRecord, SCHEMA_VERSION, Status, StoreError,
};

/// The SQLite side of a `ReadStore`: one connection (guarded read-only for inspection, the
/// step connection or a query-only side connection inside a runtime).
pub(crate) struct SqliteReads {
    pub(crate) conn: Connection,
    /// For a connection that maps the WAL index read-only (`readonly_shm`): its entry in
    /// the process's list of such files, removed after the connection closes (fields drop
    /// in order).
    pub(crate) _index: Option<super::open::ReadOnlyIndex>,
}

impl SqliteReads {
    /// Runs `f` so that every read it makes sees one snapshot (see `ReadStore::snapshot`).
    pub(crate) fn within<T, E>(&self, f: impl FnOnce() -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        self.begin_snapshot().map_err(E::from)?;
        let mut guard = SnapshotGuard {
            conn: &self.conn,
            open: true,
        };
        let out = f();
        guard.open = false;
        if out.is_ok() {
            self.conn
                .execute_batch("RELEASE rpr_snapshot")
                .map_err(|e| E::from(e.into()))?;
        } else {
            end_snapshot_after_error(&self.conn);
        }
        out
    }

    /// Opens the `rpr_snapshot` savepoint and, outside any other transaction, takes the
    /// snapshot at once, trying again (as `ReadStore::open_read_only` does) while SQLite
    /// answers one of the [`is_transient`] errors: a read-only connection cannot rebuild
    /// the WAL index nor set a read mark, and a writer does both in a moment.
    fn begin_snapshot(&self) -> Result<(), StoreError> {
        let outermost = self.conn.is_autocommit();
        let mut pause = std::time::Duration::from_millis(2);
        let mut attempt = 1;
        loop {
            self.conn.execute_batch("SAVEPOINT rpr_snapshot")?;
            if !outermost {
                return Ok(());
            }
            // Any read starts the read transaction, which fixes the snapshot.
            let taken = self
                .conn
                .query_row("SELECT count(*) FROM sqlite_master", [], |r| {
                    r.get::<_, i64>(0)
                })
                .map_err(StoreError::from);
            match taken {
                Ok(_) => return Ok(()),
                Err(e) => {
                    end_snapshot_after_error(&self.conn);
                    if attempt >= SNAPSHOT_ATTEMPTS || !is_transient(&e) {
                        return Err(e);
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(MAX_PAUSE);
                    attempt += 1;
                }
            }
        }
    }

    /// The value stored under `key` in `meta`, if there is one.
    fn meta_value(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| {
                r.get(0)
            })
            .optional()?)
    }

    /// Checks that this is an rpr database this build can read, and returns its recorded
    /// schema version (newer than [`SCHEMA_VERSION`] is refused).
    pub(crate) fn check_schema(&self, name: &str) -> Result<i64, StoreError> {
        let has_meta: bool = self
            .conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.code == rusqlite::ErrorCode::NotADatabase =>
                {
                    StoreError::NotRprDatabase(name.to_owned())
                }
                other => other.into(),
            })?
            > 0;
        if !has_meta {
            return Err(StoreError::NotRprDatabase(name.to_owned()));
        }
        let version: i64 = self
            .meta("schema_version")?
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| StoreError::NotRprDatabase(name.to_owned()))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        Ok(version)
    }

    /// Collects the pathway rows of `sql` run with `params`.
    fn pathways(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let mut out = Vec::new();
        for r in stmt.query_map(params, pathway_row)? {
            out.push(r??);
        }
        Ok(out)
    }
}

impl Source for SqliteReads {
    fn meta(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.meta_value(key)
    }

    fn status(&self) -> Result<Status, StoreError> {
        self.within(|| {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT state, count(*) FROM pathways GROUP BY state")?;
            let per_state = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
                .collect::<Result<Vec<_>, _>>()?;
            let schema_version = self
                .conn
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

    fn ledger_head(&self) -> Result<Option<(i64, String)>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
    }

    fn recorded_head(&self) -> Result<Option<(i64, String)>, StoreError> {
        Ok(self.meta_value("ledger_head")?.and_then(|v| {
            let (seq, hash) = v.split_once(':')?;
            Some((seq.parse().ok()?, hash.to_owned()))
        }))
    }

    fn pathway(&self, id: &str) -> Result<Option<PathwayRecord>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!("{PATHWAY_SELECT} WHERE id = ?1"))?;
        stmt.query_row(params![id], pathway_row)
            .optional()?
            .transpose()
    }

    fn list_pathways(
        &self,
        after: Option<&str>,
        limit: usize,
        state: Option<State>,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let after = after.unwrap_or("");
        match state {
            Some(state) => self.pathways(
                &format!("{PATHWAY_SELECT} WHERE state = ?1 AND id > ?2 ORDER BY id LIMIT ?3"),
                params![state.as_str(), after, limit],
            ),
            None => self.pathways(
                &format!("{PATHWAY_SELECT} WHERE id > ?1 ORDER BY id LIMIT ?2"),
                params![after, limit],
            ),
        }
    }

    fn list_unresolved(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // The index `pathways_unresolved` covers `NOT IN` the first three terminal states
        // (its predicate, written before `failed` existed, must appear here as written for
        // the index to be used); a failed read, also terminal, is filtered out beside it.
        self.pathways(
            &format!(
                "{PATHWAY_SELECT} WHERE state NOT IN ('completed', 'denied', 'aborted') AND state <> 'failed' AND id > ?1 ORDER BY id LIMIT ?2"
            ),
            params![after.unwrap_or(""), limit],
        )
    }

    fn open_with_request(&self, request_digest: &str) -> Result<Vec<PathwayRecord>, StoreError> {
        // `state IN (every open state)`, not `NOT IN (the terminal ones)`: the index
        // `pathways_by_request (request_digest, state)` then seeks each open state instead of
        // reading every pathway the digest ever had (an identical read repeated all day).
        let open: Vec<String> = State::ALL
            .iter()
            .filter(|s| !s.is_terminal())
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        self.pathways(
            &format!(
                "{PATHWAY_SELECT} WHERE request_digest = CAST(?1 AS TEXT) \
                 AND state IN ({}) ORDER BY id",
                open.join(", ")
            ),
            params![request_digest],
        )
    }

    fn count_with_request(&self, request_digest: &str) -> Result<u64, StoreError> {
        let n: i64 = self
            .conn
            .prepare_cached(
                "SELECT count(*) FROM pathways WHERE request_digest = CAST(?1 AS TEXT)",
            )?
            .query_row(params![request_digest], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn open_and_count_with_request(
        &self,
        request_digest: &str,
    ) -> Result<(Vec<PathwayRecord>, u64), StoreError> {
        // One row when no pathway of the digest is open (the pathway's columns NULL), else
        // one per open pathway; the count on each. Both sides seek the index
        // `pathways_by_request (request_digest, state)`, the open side by each open state.
        let open: Vec<String> = State::ALL
            .iter()
            .filter(|s| !s.is_terminal())
            .map(|s| format!("'{}'", s.as_str()))
            .collect();
        let sql = format!(
            "SELECT p.id, p.idempotency_key, p.definition, p.request_digest, p.state, p.version, \
             p.proposer, p.created_at, p.updated_at, n.n \
             FROM (SELECT count(*) AS n FROM pathways WHERE request_digest = CAST(?1 AS TEXT)) AS n \
             LEFT JOIN pathways AS p ON p.request_digest = CAST(?1 AS TEXT) AND p.state IN ({}) \
             ORDER BY p.id",
            open.join(", ")
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let mut rows = stmt.query(params![request_digest])?;
        let (mut open, mut count) = (Vec::new(), 0);
        while let Some(row) = rows.next()? {
            count = row.get::<_, i64>(9)?;
            if row.get::<_, Option<String>>(0)?.is_some() {
                open.push(pathway_row(row)??);
            }
        }
        Ok((open, u64::try_from(count).unwrap_or(0)))
    }

    fn attempts(&self, pathway: &str) -> Result<Vec<AttemptRecord>, StoreError> {
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

    fn events(
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

    fn ledger(&self, after: i64, limit: usize) -> Result<Vec<LedgerRow>, StoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, pathway_id, event, prev_hash, hash FROM ledger WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![after, limit], ledger_row)?;
        rows.collect::<Result<_, _>>().map_err(Into::into)
    }

    fn ledger_first(&self) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn
            .prepare_cached("SELECT min(seq) FROM ledger")?
            .query_row([], |r| r.get(0))?)
    }

    fn definition_digest(&self, id: &str) -> Result<String, StoreError> {
        self.conn
            .prepare_cached("SELECT definition_digest FROM pathways WHERE id = ?1")?
            .query_row(params![id], |r| r.get(0))
            .optional()?
            .ok_or_else(|| StoreError::NoSuchPathway(id.to_owned()))
    }

    fn pins(&self) -> Result<Vec<PinRecord>, StoreError> {
        crate::store::pins::all(&self.conn)
    }

    fn pin(&self, server: &str, tool: &str) -> Result<Option<PinRecord>, StoreError> {
        crate::store::pins::one(&self.conn, server, tool)
    }

    fn approval_now(&self) -> Result<i64, StoreError> {
        Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
    }

    fn pin_digest(&self, server: &str, tool: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn
            .prepare_cached("SELECT digest FROM pins WHERE server = ?1 AND tool = ?2")?
            .query_row(params![server, tool], |r| r.get(0))
            .optional()?)
    }

    fn schema(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect::<Result<_, _>>().map_err(Into::into)
    }

    fn would_refuse(&self, sql: &str) -> bool {
        // Run, inside a savepoint that is then rolled back, so that what is judged is the
        // guard (the authorizer, `query_only`, the read-only opening), not the statement's
        // own kind: a statement that fails to prepare or to run there is refused.
        if self.conn.execute_batch("SAVEPOINT rpr_probe").is_err() {
            return true;
        }
        let ran = self.conn.prepare(sql).and_then(|mut stmt| {
            let mut rows = stmt.raw_query();
            while rows.next()?.is_some() {}
            Ok(())
        });
        let _ = self
            .conn
            .execute_batch("ROLLBACK TO rpr_probe; RELEASE rpr_probe");
        ran.is_err()
    }

    fn verify(&self, known_head: Option<&str>) -> Result<Report, StoreError> {
        self.within(|| {
            walk::run(
                &self.conn,
                self.recorded_head()?,
                known_head,
                Plan::for_this_machine(),
            )
        })
    }

    fn snapshot(&self, f: &mut dyn FnMut() -> bool) -> Result<(), StoreError> {
        Ended::settle(self.within(|| Ended::ask(f)))
    }
}

/// `SQLITE_CANTOPEN` (the `-wal` or `-shm` vanished under a closing writer),
/// `SQLITE_READONLY_RECOVERY` (a writer that just opened has not rebuilt the WAL index yet)
/// or `SQLITE_READONLY_CANTINIT` (a connection that maps the WAL index read-only found no
/// read mark it may use, and may not set one: a writer just restarted the WAL; the next
/// read of any writer sets one).
pub(super) fn is_transient(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Sqlite(rusqlite::Error::SqliteFailure(f, _))
            if f.code == rusqlite::ErrorCode::CannotOpen
                || f.extended_code == rusqlite::ffi::SQLITE_READONLY_RECOVERY
                || f.extended_code == rusqlite::ffi::SQLITE_READONLY_CANTINIT
    )
}

/// How many times a read snapshot is tried while SQLite answers one of the
/// [`is_transient`] errors, pausing 2 ms, then twice as long each time up to
/// [`MAX_PAUSE`] (about a second and a half in all).
const SNAPSHOT_ATTEMPTS: u32 = 16;
/// The longest pause between two tries of a read snapshot.
const MAX_PAUSE: std::time::Duration = std::time::Duration::from_millis(128);

/// Rolls back and releases the innermost `rpr_snapshot` savepoint, if one is open.
fn end_snapshot_after_error(conn: &Connection) {
    // Nothing to undo (it only read) and nothing useful to report: the error that
    // ended the snapshot is what the caller gets. If SQLite already ended the
    // transaction, both statements fail harmlessly.
    if !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK TO rpr_snapshot; RELEASE rpr_snapshot");
    }
}

/// Ends the snapshot if `f` panicked.
struct SnapshotGuard<'a> {
    conn: &'a Connection,
    open: bool,
}

impl Drop for SnapshotGuard<'_> {
    fn drop(&mut self) {
        if self.open {
            end_snapshot_after_error(self.conn);
        }
    }
}
