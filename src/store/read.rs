//! The read side of the store: plain records and queries, no way into a stage.
//!
//! [`ReadStore::open_read_only`] is what inspection tools use: the file is opened
//! with `SQLITE_OPEN_READ_ONLY`, `PRAGMA query_only` is on, and an authorizer
//! denies every statement that could write, attach, change a pragma or load an
//! extension. The records here are plain data (`Clone`, `Serialize`) and have no
//! conversion into a pathway stage.

use std::collections::BTreeMap;
use std::path::Path;

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde::Serialize;
use serde_json::Value;

use super::{SCHEMA_VERSION, StoreError};
use crate::state::{AttemptStatus, State};

/// A pathway row, for reading.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PathwayRecord {
    /// Pathway id.
    pub id: String,
    /// The caller's idempotency key.
    pub idempotency_key: String,
    /// The redacted definition.
    pub definition: Value,
    /// sha256 of the unredacted request.
    pub request_digest: String,
    /// Current state.
    pub state: State,
    /// Compare-and-set version.
    pub version: i64,
    /// Who proposed it.
    pub proposer: String,
    /// Created, ms since the epoch.
    pub created_at: i64,
    /// Last changed, ms since the epoch.
    pub updated_at: i64,
}

/// An attempt row, for reading.
///
/// Serialized as inspection shows an attempt inside its pathway (the
/// [`AttemptView`](crate::inspect::AttemptView) of a [`PathwayDetail`](crate::inspect::PathwayDetail)):
/// the id as `attempt_id`, without the pathway id.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct AttemptRecord {
    /// Attempt id.
    #[serde(rename = "attempt_id")]
    pub id: String,
    /// Pathway id.
    #[serde(skip_serializing)]
    pub pathway_id: String,
    /// 1, 2, … within the pathway.
    pub seq: i64,
    /// The attempt this one resumes, if any.
    pub previous_attempt: Option<String>,
    /// Where the attempt got to.
    pub status: AttemptStatus,
    /// The redacted request.
    pub request: Value,
    /// sha256 of the unredacted request.
    pub request_digest: String,
    /// What the attempt was bound to.
    pub binding: Value,
    /// sha256 of the binding.
    pub binding_digest: String,
    /// The process that holds it while in flight.
    pub owner: Option<String>,
    /// Lease expiry while in flight, ms since the epoch.
    pub lease_until: Option<i64>,
    /// Outcome evidence.
    pub outcome: Option<Value>,
    /// Created, ms since the epoch.
    pub created_at: i64,
    /// Last changed, ms since the epoch.
    pub updated_at: i64,
}

/// A ledger row, for reading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LedgerRow {
    /// Position in the global chain, from 1.
    pub seq: i64,
    /// The pathway the event belongs to.
    pub pathway_id: String,
    /// The canonical JSON text of the event, exactly as hashed.
    pub event: String,
    /// Hash of the previous event (64 zeros for the first).
    pub prev_hash: String,
    /// sha256 over the previous hash and this event.
    pub hash: String,
}

/// Database-wide figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Status {
    /// Schema version of the file.
    pub schema_version: i64,
    /// Pathways per state (every state is present, zero included).
    pub counts: BTreeMap<String, i64>,
    /// Pathways in a non-terminal state.
    pub unresolved: i64,
    /// Number of ledger events.
    pub ledger_len: i64,
    /// Hash of the newest ledger event, if any.
    pub ledger_head: Option<String>,
}

/// Read access to an rpr database.
#[derive(Debug)]
pub struct ReadStore {
    pub(crate) conn: Connection,
}

fn deny_writes(ctx: AuthContext<'_>) -> Authorization {
    match ctx.action {
        AuthAction::Function { function_name }
            if function_name.eq_ignore_ascii_case("load_extension") =>
        {
            Authorization::Deny
        }
        // Reading a pragma (no value) is allowed; setting one is not.
        AuthAction::Select
        | AuthAction::Read { .. }
        | AuthAction::Function { .. }
        | AuthAction::Pragma {
            pragma_value: None, ..
        }
        | AuthAction::Transaction { .. }
        | AuthAction::Savepoint { .. } => Authorization::Allow,
        _ => Authorization::Deny,
    }
}

impl ReadStore {
    /// How many times [`ReadStore::open_read_only`] tries to open a database.
    pub const OPEN_ATTEMPTS: u32 = 6;

    /// Opens `path` for reading only, guarded so that no statement can write.
    ///
    /// Fails with [`StoreError::Missing`], [`StoreError::NotRprDatabase`] or
    /// [`StoreError::SchemaTooNew`] before anything else happens.
    ///
    /// An open that fails with `SQLITE_CANTOPEN` ("unable to open database file") or
    /// `SQLITE_READONLY_RECOVERY` is tried again, at most [`Self::OPEN_ATTEMPTS`] times in
    /// all with a doubling pause from 2 ms (62 ms of pauses at most). The first is what a
    /// reader sees when the last writer connection of a program that does not keep the WAL
    /// files closes and deletes the `-wal` and `-shm` at the moment of the open (rpr's own
    /// writers keep them); the second, when a writer that has just opened has not yet
    /// rebuilt the WAL index. See `docs/storage.md`, "The -wal and -shm files".
    pub fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        let mut pause = std::time::Duration::from_millis(2);
        let mut attempt = 1;
        loop {
            match Self::open_read_only_once(path) {
                Err(e) if attempt < Self::OPEN_ATTEMPTS && is_transient(&e) => {
                    std::thread::sleep(pause);
                    pause *= 2;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    fn open_read_only_once(path: &Path) -> Result<Self, StoreError> {
        if !path.is_file() {
            return Err(StoreError::Missing(path.display().to_string()));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut shm = path.as_os_str().to_owned();
        shm.push("-shm");
        // With an existing WAL index, `readonly_shm=1` keeps SQLite from writing even the
        // read-mark slots of the -shm file, so every file stays byte-identical. Without one
        // (a database closed by a program that does not keep the WAL files) SQLite cannot
        // open that way, and a plain read-only open is used.
        let mut conn = if Path::new(&shm).is_file() {
            Connection::open_with_flags(
                sqlite_uri(path, "mode=ro&readonly_shm=1"),
                flags | OpenFlags::SQLITE_OPEN_URI,
            )
            .or_else(|_| Connection::open_with_flags(path, flags))?
        } else {
            Connection::open_with_flags(path, flags)?
        };
        conn.pragma_update(None, "query_only", true)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.authorizer(Some(deny_writes))?;
        let store = Self { conn };
        let name = path.display().to_string();
        store
            .snapshot(|s| s.check_schema(&name))
            .map_err(|e| match e {
                StoreError::Sqlite(rusqlite::Error::SqliteFailure(f, _))
                    if f.code == rusqlite::ErrorCode::NotADatabase =>
                {
                    StoreError::NotRprDatabase(name.clone())
                }
                other => other,
            })?;
        Ok(store)
    }

    /// Runs `f` so that every read it makes sees one snapshot of the database.
    ///
    /// Opens a read transaction (`SAVEPOINT`, which outside a transaction starts a
    /// deferred one) and takes the snapshot at once (a first read, tried again like
    /// [`ReadStore::open_read_only`] while SQLite answers `SQLITE_READONLY_RECOVERY`),
    /// runs `f`, and ends the
    /// transaction: released when `f` returns `Ok`, rolled back when it returns `Err`
    /// or panics. Writers that commit meanwhile are not seen by `f` (WAL readers do not
    /// block writers, and writers do not block readers).
    ///
    /// Works on the guarded read-only connection (the guard allows transactions and
    /// savepoints). Nesting is supported: a `snapshot` inside another (or inside any
    /// open transaction on this connection) is a savepoint of the enclosing
    /// transaction, and sees the enclosing snapshot.
    pub fn snapshot<T, E>(&self, f: impl FnOnce(&Self) -> Result<T, E>) -> Result<T, E>
    where
        E: From<StoreError>,
    {
        self.begin_snapshot().map_err(E::from)?;
        let mut guard = SnapshotGuard {
            conn: &self.conn,
            open: true,
        };
        let out = f(self);
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

    /// Whether `sql` would be refused by the read-only guard (it is prepared, never run).
    ///
    /// A statement is refused when the guard stops it from being prepared, or when
    /// SQLite reports that it is not read-only (this catches `VACUUM`, which the
    /// authorizer is not asked about).
    #[must_use]
    pub fn would_refuse(&self, sql: &str) -> bool {
        self.conn.prepare(sql).map_or(true, |stmt| !stmt.readonly())
    }

    /// Opens the `rpr_snapshot` savepoint and, outside any other transaction, takes the
    /// snapshot at once, trying again (as [`ReadStore::open_read_only`] does) while SQLite
    /// answers `SQLITE_READONLY_RECOVERY`: a read-only connection cannot rebuild the WAL
    /// index, and a writer that has just opened the database rebuilds it in a moment.
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
                    if attempt >= Self::OPEN_ATTEMPTS || !is_transient(&e) {
                        return Err(e);
                    }
                    std::thread::sleep(pause);
                    pause *= 2;
                    attempt += 1;
                }
            }
        }
    }

    pub(crate) fn check_schema(&self, name: &str) -> Result<(), StoreError> {
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
        let version: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'schema_version'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        let version: i64 = version
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| StoreError::NotRprDatabase(name.to_owned()))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::SchemaTooNew {
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        Ok(())
    }

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
        let mut stmt = self.conn.prepare_cached(&format!(
            "{PATHWAY_SELECT} WHERE request_digest = CAST(?1 AS TEXT) \
             AND state NOT IN ('completed', 'denied', 'aborted') ORDER BY id"
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
        let v: Option<String> = self
            .conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'ledger_head'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        Ok(v.and_then(|v| {
            let (seq, hash) = v.split_once(':')?;
            Some((seq.parse().ok()?, hash.to_owned()))
        }))
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

/// `SQLITE_CANTOPEN` (the `-wal` or `-shm` vanished under a closing writer) or
/// `SQLITE_READONLY_RECOVERY` (a writer that just opened has not rebuilt the WAL index yet).
fn is_transient(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Sqlite(rusqlite::Error::SqliteFailure(f, _))
            if f.code == rusqlite::ErrorCode::CannotOpen
                || f.extended_code == rusqlite::ffi::SQLITE_READONLY_RECOVERY
    )
}

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

/// A `file:` URI for `path` with `query`, percent-encoding everything but unreserved characters and `/`.
fn sqlite_uri(path: &Path, query: &str) -> String {
    use std::fmt::Write;
    use std::os::unix::ffi::OsStrExt;
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            uri.push(char::from(b));
        } else {
            let _ = write!(uri, "%{b:02X}");
        }
    }
    uri.push('?');
    uri.push_str(query);
    uri
}

const PATHWAY_SELECT: &str = "SELECT id, idempotency_key, definition, request_digest, state, version, proposer, \
     created_at, updated_at FROM pathways";

fn parse_json(text: &str, what: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn pathway_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<PathwayRecord, StoreError>> {
    let definition: String = r.get(2)?;
    let state: String = r.get(4)?;
    let id: String = r.get(0)?;
    Ok((|| {
        Ok(PathwayRecord {
            idempotency_key: r.get(1)?,
            definition: parse_json(&definition, "pathways.definition")?,
            request_digest: r.get(3)?,
            state: state
                .parse()
                .map_err(|e| StoreError::Corrupt(format!("pathway {id}: {e}")))?,
            version: r.get(5)?,
            proposer: r.get(6)?,
            created_at: r.get(7)?,
            updated_at: r.get(8)?,
            id: id.clone(),
        })
    })())
}

fn attempt_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Result<AttemptRecord, StoreError>> {
    let id: String = r.get(0)?;
    let request: String = r.get(4)?;
    let binding: String = r.get(6)?;
    let status: String = r.get(8)?;
    let outcome: Option<String> = r.get(11)?;
    Ok((|| {
        Ok(AttemptRecord {
            status: status
                .parse()
                .map_err(|e| StoreError::Corrupt(format!("attempt {id}: {e}")))?,
            id: id.clone(),
            pathway_id: r.get(1)?,
            seq: r.get(2)?,
            previous_attempt: r.get(3)?,
            request: parse_json(&request, "attempts.request")?,
            request_digest: r.get(5)?,
            binding: parse_json(&binding, "attempts.binding")?,
            binding_digest: r.get(7)?,
            owner: r.get(9)?,
            lease_until: r.get(10)?,
            outcome: outcome
                .as_deref()
                .map(|o| parse_json(o, "attempts.outcome"))
                .transpose()?,
            created_at: r.get(12)?,
            updated_at: r.get(13)?,
        })
    })())
}

fn ledger_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<LedgerRow> {
    Ok(LedgerRow {
        seq: r.get(0)?,
        pathway_id: r.get(1)?,
        event: r.get(2)?,
        prev_hash: r.get(3)?,
        hash: r.get(4)?,
    })
}
