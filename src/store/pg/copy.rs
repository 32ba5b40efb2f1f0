//! Moving a SQLite rpr database into PostgreSQL (issue 11, item 4): [`copy_from_sqlite`].
//!
//! Every table (pathways, attempts, approvals, the ledger, the tool pins, and `meta`: the
//! database identity and the recorded ledger head) is copied row for row, byte for byte,
//! into an **empty** store made by [`PgBackend`], in one PostgreSQL transaction, read from
//! the SQLite database under its write lock (one snapshot, no step in between). The copy is
//! verified inside that transaction (the PostgreSQL `verify` must pass and end at the
//! source's head) before anything commits.
//!
//! **At most once across the move.** Two stores that both took steps on one pathway could
//! each dispatch it once. So the source is marked moved (`meta.moved_to`, naming the target)
//! *before* the target's transaction commits, in the SQLite transaction that holds the write
//! lock for the whole copy; from that commit on, every step on the SQLite database is
//! refused ([`StoreError::Moved`], checked inside each step's own transaction). The target
//! only commits after that, and the mark is then set `finished`. At no moment do both
//! stores take steps: before the mark the target has nothing committed; after it the
//! source takes none. A crash (or a `COMMIT` whose outcome is unknown) between the two
//! leaves the mark unfinished, and running the copy again settles it: the target holds the
//! copy (same identity, the source's head in its chain) and the mark is finished, or it
//! holds nothing and the copy is made again. docs/storage.md ("Moving a SQLite database to
//! PostgreSQL") walks through every window.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::{ToSql, Type};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;
use serde_json::{Value, json};

use super::verify::verify_tx;
use super::{Conn, PgBackend, PgError, Tx};
use crate::ledger::{self, Problem};
use crate::store::{ReadStore, SCHEMA_VERSION, StoreError, open_side_connection};

/// How long the copy waits for the SQLite database's write lock, and for the target's tables.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// How often (in rows) a table's progress is reported.
const PROGRESS_EVERY: u64 = 10_000;

/// Where a copy is, for a progress display ([`copy_from_sqlite`] reports each as it happens).
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
    /// The source's schema is older than this build's.
    #[error(
        "source {path}: schema version {found} is older than {SCHEMA_VERSION}; open it once for writing with this rpr (`rpr unresolved --database {path}` does) to migrate it, then copy; nothing was copied"
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

/// A column: its name (the same in both schemas) and its PostgreSQL type.
type Column = (&'static str, Type);

/// The tables, in an order that keeps every foreign key satisfied, with the SQLite order
/// that does too (`rowid` is insertion order: an attempt's previous attempt came first).
const TABLES: &[(&str, &str, &[Column])] = &[
    (
        "pathways",
        "rowid",
        &[
            ("id", Type::TEXT),
            ("idempotency_key", Type::TEXT),
            ("definition", Type::TEXT),
            ("definition_digest", Type::TEXT),
            ("request_digest", Type::TEXT),
            ("state", Type::TEXT),
            ("version", Type::INT8),
            ("proposer", Type::TEXT),
            ("created_at", Type::INT8),
            ("updated_at", Type::INT8),
        ],
    ),
    (
        "attempts",
        "rowid",
        &[
            ("id", Type::TEXT),
            ("pathway_id", Type::TEXT),
            ("seq", Type::INT8),
            ("previous_attempt", Type::TEXT),
            ("request", Type::TEXT),
            ("request_digest", Type::TEXT),
            ("binding", Type::TEXT),
            ("binding_digest", Type::TEXT),
            ("status", Type::TEXT),
            ("owner", Type::TEXT),
            ("lease_until", Type::INT8),
            ("outcome", Type::TEXT),
            ("created_at", Type::INT8),
            ("updated_at", Type::INT8),
            ("carrier", Type::TEXT),
        ],
    ),
    (
        "approvals",
        "rowid",
        &[
            ("id", Type::TEXT),
            ("pathway_id", Type::TEXT),
            ("request_digest", Type::TEXT),
            ("approver", Type::TEXT),
            ("granted_at", Type::INT8),
            ("used_at", Type::INT8),
            ("revoked_at", Type::INT8),
        ],
    ),
    (
        "ledger",
        "seq",
        &[
            ("seq", Type::INT8),
            ("pathway_id", Type::TEXT),
            ("event", Type::TEXT),
            ("prev_hash", Type::TEXT),
            ("hash", Type::TEXT),
        ],
    ),
    (
        "pins",
        "server, tool",
        &[
            ("server", Type::TEXT),
            ("tool", Type::TEXT),
            ("digest", Type::TEXT),
            ("binding", Type::TEXT),
            ("definition", Type::TEXT),
            ("pinned_by", Type::TEXT),
            ("pinned_at", Type::INT8),
            ("seen_digest", Type::TEXT),
            ("seen_binding", Type::TEXT),
            ("seen_definition", Type::TEXT),
            ("seen_at", Type::INT8),
        ],
    ),
];

/// The `meta` keys the copy sets itself (or, for the move mark, never copies).
const OWN_META: &[&str] = &["schema_version", "database_id", "ledger_head", "moved_to"];

/// One cell, as SQLite's strict column type gives it.
enum Cell {
    Text(Option<String>),
    Int(Option<i64>),
}

impl Cell {
    fn as_sql(&self) -> &(dyn ToSql + Sync) {
        match self {
            Self::Text(v) => v,
            Self::Int(v) => v,
        }
    }
}

/// The source's move mark (`meta.moved_to`).
struct Mark {
    to: String,
    finished: bool,
}

/// What the target holds, read under its table locks.
struct TargetState {
    rows: RowCounts,
    database_id: String,
    ledger_head: String,
    /// The hash the target's ledger has at the source head's `seq`, if any.
    hash_at_source_head: Option<String>,
}

impl TargetState {
    fn is_empty(&self) -> bool {
        self.rows == RowCounts::default() && self.ledger_head.is_empty()
    }

    fn describe(&self) -> String {
        let r = &self.rows;
        format!(
            "database {}, {} pathways, {} attempts, {} approvals, {} ledger events, {} pins, head {:?}",
            self.database_id,
            r.pathways,
            r.attempts,
            r.approvals,
            r.ledger,
            r.pins,
            self.ledger_head
        )
    }
}

/// What the source holds, read under its write lock.
struct Source {
    database_id: String,
    /// `seq:hash` of the recorded head, `""` for an empty ledger (as the target writes it).
    head_text: String,
    head: Option<(i64, String)>,
    rows: RowCounts,
    meta: Vec<(String, String)>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The target for people and for the move mark: `postgres://host:port/database schema S`,
/// never the user or password.
fn describe_target(url: &str, schema: &str) -> Result<String, CopyError> {
    let config: postgres::Config = url
        .parse()
        .map_err(|e: postgres::Error| CopyError::BadUrl(e.to_string()))?;
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let port = config
                .get_ports()
                .get(i)
                .or_else(|| config.get_ports().first())
                .copied()
                .unwrap_or(5432);
            match h {
                postgres::config::Host::Tcp(name) => format!("{name}:{port}"),
                postgres::config::Host::Unix(dir) => format!("{}:{port}", dir.display()),
            }
        })
        .collect();
    let hosts = if hosts.is_empty() {
        "localhost".to_owned()
    } else {
        hosts.join(",")
    };
    let database = config
        .get_dbname()
        .or_else(|| config.get_user())
        .unwrap_or("postgres");
    Ok(format!("postgres://{hosts}/{database} schema {schema}"))
}

/// Copies the SQLite rpr database at `source` into the PostgreSQL store at `url` (in
/// `schema`, created if missing; else in the connection's default schema), which must be
/// empty, and marks the source moved so that it takes no more steps.
///
/// Refuses, leaving both databases as they were: a source that is missing, not an rpr
/// database, of another schema version, that does not verify, or that has attempts in
/// flight; a target that cannot be reached or is not empty; a source already moved
/// elsewhere. Run again after an interruption, it finishes what the interrupted copy left
/// (see [`CopyOutcome`]). `progress` is told each stage ([`Progress`]).
pub fn copy_from_sqlite(
    source: &Path,
    url: &str,
    schema: Option<&str>,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<CopyReport, CopyError> {
    let path = source.display().to_string();
    // The source is an rpr database (a read-only look first: nothing is created or locked).
    ReadStore::open_read_only(source)?;
    let url_target = describe_target(url, schema.unwrap_or("(default)"))?;
    let target = match schema {
        Some(s) => PgBackend::open_in_schema(url, s),
        None => PgBackend::open(url),
    }
    .map_err(|error| match error {
        PgError::Postgres(_) => CopyError::Unreachable {
            target: url_target.clone(),
            error: Box::new(error),
        },
        error => CopyError::Target {
            target: url_target.clone(),
            error: Box::new(error),
        },
    })?;
    let current_schema: String = target
        .read(|tx| Ok(tx.query_one("SELECT current_schema()", &[])?.get(0)))
        .map_err(|error| CopyError::Target {
            target: url_target.clone(),
            error: Box::new(error),
        })?;
    let desc = describe_target(url, &current_schema)?;
    let pg_err = |error: PgError| CopyError::Target {
        target: desc.clone(),
        error: Box::new(error),
    };

    let store = ReadStore {
        conn: open_side_connection(source, LOCK_WAIT)?,
    };
    // The write lock for the whole copy: no step lands between the read and the mark.
    let lite = rusqlite::Transaction::new_unchecked(&store.conn, TransactionBehavior::Immediate)
        .map_err(|e| match StoreError::from(e) {
            StoreError::Busy { .. } => StoreError::Busy {
                timeout: Some(LOCK_WAIT),
                holder: crate::store::write_lock_holder(source),
            },
            other => other,
        })?;
    let version: Option<String> = lite
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    let version: i64 = version
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| StoreError::NotRprDatabase(path.clone()))?;
    if version > SCHEMA_VERSION {
        return Err(StoreError::SchemaTooNew {
            found: version,
            supported: SCHEMA_VERSION,
        }
        .into());
    }
    if version < SCHEMA_VERSION {
        return Err(CopyError::SourceTooOld {
            path,
            found: version,
        });
    }
    let mark = read_mark(&lite)?;
    if let Some(m) = &mark
        && m.to != desc
    {
        return Err(CopyError::MovedElsewhere {
            path,
            to: m.to.clone(),
        });
    }
    let report = ledger::verify(&store, None)?;
    if !report.is_ok() {
        return Err(CopyError::SourceDoesNotVerify {
            path,
            problems: report.problems,
        });
    }
    progress(Progress::SourceVerified {
        events: report.events,
    });
    let in_flight = in_flight(&lite)?;
    if !in_flight.is_empty() {
        return Err(CopyError::InFlight {
            path,
            attempts: in_flight,
        });
    }
    let src = read_source(&lite)?;

    let mut conn = target.conn.lock();
    let Conn {
        client,
        statements,
        shim,
    } = &mut *conn;
    let mut tx = Tx {
        inner: client.transaction().map_err(|e| pg_err(e.into()))?,
        statements,
        shim,
    };
    // No host writes the target while it is checked and filled (reads go on).
    tx.inner
        .batch_execute(&format!(
            "SET LOCAL lock_timeout = '{}ms';
             LOCK TABLE meta, pathways, attempts, approvals, ledger, pins IN EXCLUSIVE MODE",
            LOCK_WAIT.as_millis()
        ))
        .map_err(|e| pg_err(e.into()))?;
    let found = target_state(&mut tx, &src).map_err(pg_err)?;
    if !found.is_empty() {
        let holds_copy = found.database_id == src.database_id
            && match &src.head {
                None => true,
                Some((_, hash)) => found.hash_at_source_head.as_ref() == Some(hash),
            };
        return match mark {
            // The copy committed earlier; the mark was not finished (or is, and this is a
            // rerun): finish it. The source already takes no steps.
            Some(m) if holds_copy => {
                drop(tx);
                drop(lite);
                let outcome = if m.finished {
                    CopyOutcome::AlreadyMoved
                } else {
                    finish_mark(&store.conn).map_err(|error| CopyError::FinishUnrecorded {
                        target: desc.clone(),
                        error: Box::new(error),
                    })?;
                    CopyOutcome::FinishedEarlierCopy
                };
                Ok(CopyReport {
                    outcome,
                    source: path,
                    target: desc,
                    database_id: src.database_id,
                    events: src.head.as_ref().map_or(0, |h| h.0),
                    head: src.head.map(|h| h.1),
                    rows: found.rows,
                })
            }
            Some(m) if m.finished => Err(CopyError::TargetLost {
                path,
                target: desc,
                detail: found.describe(),
            }),
            _ if holds_copy => Err(CopyError::TargetNotEmpty {
                target: desc,
                detail: format!(
                    "{}: a copy of this very database, yet the source carries no move mark (restored from a backup, or its mark removed by hand?); decide which store is the database before anything takes a step on either",
                    found.describe()
                ),
            }),
            _ => Err(CopyError::TargetNotEmpty {
                target: desc,
                detail: found.describe(),
            }),
        };
    }
    if let Some(m) = &mark
        && m.finished
    {
        return Err(CopyError::TargetLost {
            path,
            target: desc,
            detail: "it is empty".into(),
        });
    }

    for &(table, order, columns) in TABLES {
        copy_table(&mut tx, &lite, table, order, columns, progress).map_err(|e| match e {
            CopyFailure::Source(e) => CopyError::Source(Box::new(e)),
            CopyFailure::Target(e) => pg_err(e),
        })?;
    }
    write_meta(&mut tx, &src).map_err(pg_err)?;
    check_copy(&mut tx, &src, &desc)?;
    progress(Progress::CopyVerified);

    // The mark commits first: from here the source takes no step, and the target has not
    // committed yet, so at no moment do both take steps.
    let marker = json!({
        "to": desc,
        "at": now_ms(),
        "finished": false,
        "database_id": src.database_id,
        "head": src.head_text,
    });
    lite.execute(
        "INSERT INTO meta (key, value) VALUES ('moved_to', ?1)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        params![marker.to_string()],
    )?;
    lite.commit()?;
    progress(Progress::SourceMarked);
    tx.inner
        .commit()
        .map_err(|error| CopyError::CommitUnknown { error })?;
    progress(Progress::TargetCommitted);
    finish_mark(&store.conn).map_err(|error| CopyError::FinishUnrecorded {
        target: desc.clone(),
        error: Box::new(error),
    })?;
    Ok(CopyReport {
        outcome: CopyOutcome::Copied,
        source: path,
        target: desc,
        database_id: src.database_id,
        events: src.head.as_ref().map_or(0, |h| h.0),
        head: src.head.map(|h| h.1),
        rows: src.rows,
    })
}

fn read_mark(conn: &Connection) -> Result<Option<Mark>, StoreError> {
    let value: Option<String> = conn
        .query_row("SELECT value FROM meta WHERE key = 'moved_to'", [], |r| {
            r.get(0)
        })
        .optional()?;
    value
        .map(|v| {
            let m: Value = serde_json::from_str(&v)
                .map_err(|e| StoreError::Corrupt(format!("meta.moved_to: {e}")))?;
            Ok(Mark {
                to: m["to"].as_str().unwrap_or_default().to_owned(),
                finished: m["finished"].as_bool().unwrap_or(true),
            })
        })
        .transpose()
}

/// Sets the source's move mark `finished`, in a transaction of its own.
fn finish_mark(conn: &Connection) -> Result<(), StoreError> {
    let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
    let value: String = tx.query_row("SELECT value FROM meta WHERE key = 'moved_to'", [], |r| {
        r.get(0)
    })?;
    let mut m: Value = serde_json::from_str(&value)
        .map_err(|e| StoreError::Corrupt(format!("meta.moved_to: {e}")))?;
    m["finished"] = Value::Bool(true);
    m["finished_at"] = json!(now_ms());
    tx.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'moved_to'",
        params![m.to_string()],
    )?;
    tx.commit()?;
    Ok(())
}

fn in_flight(conn: &Connection) -> Result<Vec<InFlight>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT pathway_id, id, owner, lease_until FROM attempts
         WHERE status = 'in_flight' ORDER BY pathway_id, seq",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(InFlight {
            pathway: r.get(0)?,
            attempt: r.get(1)?,
            owner: r.get(2)?,
            lease_until: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

fn count(conn: &Connection, table: &str) -> Result<u64, StoreError> {
    let n: i64 = conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

fn read_source(conn: &Connection) -> Result<Source, StoreError> {
    let mut meta = Vec::new();
    {
        let mut stmt = conn.prepare("SELECT key, value FROM meta ORDER BY key")?;
        for row in stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
            meta.push(row?);
        }
    }
    let get = |key: &str| meta.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    let database_id =
        get("database_id").ok_or_else(|| StoreError::Corrupt("meta has no database_id".into()))?;
    let head: Option<(i64, String)> = conn
        .query_row(
            "SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    Ok(Source {
        database_id,
        head_text: head
            .as_ref()
            .map_or_else(String::new, |(s, h)| format!("{s}:{h}")),
        head,
        rows: RowCounts {
            pathways: count(conn, "pathways")?,
            attempts: count(conn, "attempts")?,
            approvals: count(conn, "approvals")?,
            ledger: count(conn, "ledger")?,
            pins: count(conn, "pins")?,
        },
        meta,
    })
}

fn target_state(tx: &mut Tx<'_>, src: &Source) -> Result<TargetState, PgError> {
    let row = tx.inner.query_one(
        "SELECT (SELECT count(*) FROM pathways), (SELECT count(*) FROM attempts),
                (SELECT count(*) FROM approvals), (SELECT count(*) FROM ledger),
                (SELECT count(*) FROM pins),
                (SELECT value FROM meta WHERE key = 'database_id'),
                (SELECT value FROM meta WHERE key = 'ledger_head'),
                (SELECT hash FROM ledger WHERE seq = $1)",
        &[&src.head.as_ref().map_or(0, |h| h.0)],
    )?;
    let n = |i: usize| u64::try_from(row.get::<_, i64>(i)).unwrap_or(0);
    Ok(TargetState {
        rows: RowCounts {
            pathways: n(0),
            attempts: n(1),
            approvals: n(2),
            ledger: n(3),
            pins: n(4),
        },
        database_id: row.get::<_, Option<String>>(5).unwrap_or_default(),
        ledger_head: row.get::<_, Option<String>>(6).unwrap_or_default(),
        hash_at_source_head: row.get(7),
    })
}

enum CopyFailure {
    Source(StoreError),
    Target(PgError),
}

impl From<rusqlite::Error> for CopyFailure {
    fn from(e: rusqlite::Error) -> Self {
        Self::Source(e.into())
    }
}

impl From<postgres::Error> for CopyFailure {
    fn from(e: postgres::Error) -> Self {
        Self::Target(e.into())
    }
}

/// Streams one table from SQLite into the target with `COPY … FROM STDIN BINARY`: every
/// text exactly as stored (no re-encoding, no JSON parse), every integer as is.
fn copy_table(
    tx: &mut Tx<'_>,
    lite: &Connection,
    table: &str,
    order: &str,
    columns: &[Column],
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<(), CopyFailure> {
    let names: Vec<&str> = columns.iter().map(|c| c.0).collect();
    let names = names.join(", ");
    let types: Vec<Type> = columns.iter().map(|c| c.1.clone()).collect();
    let total = count(lite, table).map_err(CopyFailure::Source)?;
    let sink = tx
        .inner
        .copy_in(&format!("COPY {table} ({names}) FROM STDIN BINARY"))?;
    let mut writer = BinaryCopyInWriter::new(sink, &types);
    let mut stmt = lite.prepare(&format!("SELECT {names} FROM {table} ORDER BY {order}"))?;
    let mut rows = stmt.query([])?;
    let mut done = 0_u64;
    let mut cells: Vec<Cell> = Vec::with_capacity(columns.len());
    while let Some(row) = rows.next()? {
        cells.clear();
        for (i, (_, ty)) in columns.iter().enumerate() {
            cells.push(if *ty == Type::INT8 {
                Cell::Int(row.get(i)?)
            } else {
                Cell::Text(row.get(i)?)
            });
        }
        let values: Vec<&(dyn ToSql + Sync)> = cells.iter().map(Cell::as_sql).collect();
        writer.write(&values)?;
        done += 1;
        if done.is_multiple_of(PROGRESS_EVERY) {
            progress(Progress::Rows { table, done, total });
        }
    }
    writer.finish()?;
    progress(Progress::Rows { table, done, total });
    Ok(())
}

/// The target's `meta`: the source's identity and recorded head, and any key of a later
/// schema this build does not write itself.
fn write_meta(tx: &mut Tx<'_>, src: &Source) -> Result<(), PgError> {
    tx.inner.execute(
        "UPDATE meta SET value = $1 WHERE key = 'database_id'",
        &[&src.database_id],
    )?;
    tx.inner.execute(
        "UPDATE meta SET value = $1 WHERE key = 'ledger_head'",
        &[&src.head_text],
    )?;
    for (key, value) in &src.meta {
        if !OWN_META.contains(&key.as_str()) {
            tx.inner.execute(
                "INSERT INTO meta (key, value) VALUES ($1, $2)",
                &[key, value],
            )?;
        }
    }
    Ok(())
}

/// The copy, inside its transaction: the PostgreSQL `verify` passes and ends at the source's
/// head, and every table has the source's rows.
fn check_copy(tx: &mut Tx<'_>, src: &Source, desc: &str) -> Result<(), CopyError> {
    let mismatch = |detail: String| CopyError::CopyMismatch {
        target: desc.to_owned(),
        detail,
    };
    let pg_err = |error: PgError| CopyError::Target {
        target: desc.to_owned(),
        error: Box::new(error),
    };
    let report = verify_tx(tx, None).map_err(pg_err)?;
    if !report.is_ok() {
        return Err(mismatch(format!(
            "verify found {} problem(s), the first: {:?}",
            report.problems.len(),
            report.problems.first()
        )));
    }
    let head = report.head.clone().map(|h| (report.events, h));
    if head != src.head {
        return Err(mismatch(format!(
            "head {head:?} where the source has {:?}",
            src.head
        )));
    }
    let found = target_state(tx, src).map_err(pg_err)?;
    if found.rows != src.rows || found.database_id != src.database_id {
        return Err(mismatch(format!(
            "{} where the source has {:?}",
            found.describe(),
            src.rows
        )));
    }
    Ok(())
}
