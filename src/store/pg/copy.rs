//! Moving a SQLite rpr database into PostgreSQL: [`copy_from_sqlite`].
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

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde_json::{Value, json};

use super::pool::Conn;
use super::{Inner, PgBackend, PgError, Tx};
use crate::store::{ReadStore, SCHEMA_VERSION, StoreError, open_side_connection};

mod report;
mod rows;

pub use report::{CopyError, CopyOutcome, CopyReport, InFlight, Progress, RowCounts};
use rows::{CopyFailure, TABLES, check_copy, copy_table, read_source, target_state, write_meta};

/// How long the copy waits for the SQLite database's write lock, and for the target's tables.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// The source's move mark (`meta.moved_to`).
struct Mark {
    to: String,
    finished: bool,
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
    if crate::store::is_postgres_location(source) {
        return Err(StoreError::Unsupported(format!(
            "{}: the source of a copy is a SQLite file, not a PostgreSQL location",
            crate::store::shown_location(source)
        ))
        .into());
    }
    let path = source.display().to_string();
    // The source is an rpr database (a read-only look first: nothing is created or locked).
    ReadStore::open_read_only(source)?;
    let url_target = describe_target(url, schema.unwrap_or("(default)"))?;
    let target = match schema {
        Some(s) => PgBackend::open_in_schema(url, s),
        None => PgBackend::open(url),
    }
    .map_err(|error| match error {
        PgError::Postgres(_) | PgError::Connect { .. } => CopyError::Unreachable {
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

    let store = ReadStore::from_sqlite(open_side_connection(source, LOCK_WAIT)?);
    // The write lock for the whole copy: no step lands between the read and the mark.
    let lite = rusqlite::Transaction::new_unchecked(store.conn(), TransactionBehavior::Immediate)
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
    // Schema 3 holds the same rows as 4 (only the ledger's UNIQUE indexes differ): copied
    // as it is, into a target at 4.
    if version < crate::store::OLDEST_READABLE_SCHEMA {
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
    let report = crate::store::verify(&store, None)?;
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

    let mut conn = target.pool.take(false).map_err(pg_err)?;
    let Conn {
        client, statements, ..
    } = &mut *conn;
    let mut tx = Tx {
        inner: Inner::Own(client.transaction().map_err(|e| pg_err(e.into()))?),
        statements,
        nowait: false,
        head: None,
        sealer: None,
        covered: None,
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
                    finish_mark(store.conn()).map_err(|error| CopyError::FinishUnrecorded {
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
    finish_mark(store.conn()).map_err(|error| CopyError::FinishUnrecorded {
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
