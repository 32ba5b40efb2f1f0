//! The rows: what each side holds, the streaming of each table into the target, and the
//! check of the copy inside its transaction.

use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::{ToSql, Type};
use rusqlite::{Connection, OptionalExtension};

use super::super::verify::verify_tx;
use super::super::{PgError, Tx};
use super::report::{CopyError, Progress, RowCounts};
use crate::store::StoreError;

/// How often (in rows) a table's progress is reported.
const PROGRESS_EVERY: u64 = 10_000;

/// A column: its name (the same in both schemas) and its PostgreSQL type.
pub(super) type Column = (&'static str, Type);

/// The tables, in an order that keeps every foreign key satisfied, with the SQLite order
/// that does too (`rowid` is insertion order: an attempt's previous attempt came first).
pub(super) const TABLES: &[(&str, &str, &[Column])] = &[
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

/// What the target holds, read under its table locks.
pub(super) struct TargetState {
    pub(super) rows: RowCounts,
    pub(super) database_id: String,
    pub(super) ledger_head: String,
    /// The hash the target's ledger has at the source head's `seq`, if any.
    pub(super) hash_at_source_head: Option<String>,
}

impl TargetState {
    pub(super) fn is_empty(&self) -> bool {
        self.rows == RowCounts::default() && self.ledger_head.is_empty()
    }

    pub(super) fn describe(&self) -> String {
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
pub(super) struct Source {
    pub(super) database_id: String,
    /// `seq:hash` of the recorded head, `""` for an empty ledger (as the target writes it).
    pub(super) head_text: String,
    pub(super) head: Option<(i64, String)>,
    pub(super) rows: RowCounts,
    pub(super) meta: Vec<(String, String)>,
}

fn count(conn: &Connection, table: &str) -> Result<u64, StoreError> {
    let n: i64 = conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

pub(super) fn read_source(conn: &Connection) -> Result<Source, StoreError> {
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

pub(super) fn target_state(tx: &mut Tx<'_>, src: &Source) -> Result<TargetState, PgError> {
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

pub(super) enum CopyFailure {
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
pub(super) fn copy_table(
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
pub(super) fn write_meta(tx: &mut Tx<'_>, src: &Source) -> Result<(), PgError> {
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
pub(super) fn check_copy(tx: &mut Tx<'_>, src: &Source, desc: &str) -> Result<(), CopyError> {
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
