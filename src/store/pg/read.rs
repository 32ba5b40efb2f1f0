//! Reads: one pathway, its attempts, its events, the ledger's head; each in one snapshot.
//! The statements are functions of a [`Tx`], so [`super::reader`] runs them in its own
//! snapshots too.

use postgres::Row;
use serde_json::Value;

use super::{PgBackend, PgError, Tx, ledger::parse_head};
use crate::store::{AttemptRecord, LedgerRow, PathwayRecord, StoreError, rules};

fn json(text: &str, what: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

fn pathway_record(r: &Row) -> Result<PathwayRecord, StoreError> {
    let id: String = r.get(0);
    let state: &str = r.get(4);
    Ok(PathwayRecord {
        idempotency_key: r.get(1),
        definition: json(r.get(2), "pathways.definition")?,
        request_digest: r.get(3),
        state: state
            .parse()
            .map_err(|e| StoreError::Corrupt(format!("pathway {id}: {e}")))?,
        version: r.get(5),
        proposer: r.get(6),
        created_at: r.get(7),
        updated_at: r.get(8),
        id,
    })
}

fn attempt_record(r: &Row) -> Result<AttemptRecord, StoreError> {
    let id: String = r.get(0);
    let status: &str = r.get(8);
    let outcome: Option<&str> = r.get(11);
    Ok(AttemptRecord {
        status: status
            .parse()
            .map_err(|e| StoreError::Corrupt(format!("attempt {id}: {e}")))?,
        pathway_id: r.get(1),
        seq: r.get(2),
        previous_attempt: r.get(3),
        request: json(r.get(4), "attempts.request")?,
        request_digest: r.get(5),
        binding: json(r.get(6), "attempts.binding")?,
        binding_digest: r.get(7),
        owner: r.get(9),
        lease_until: r.get(10),
        outcome: outcome.map(|o| json(o, "attempts.outcome")).transpose()?,
        created_at: r.get(12),
        updated_at: r.get(13),
        id,
    })
}

/// `SELECT` of the columns [`pathway_record`] reads, then `$tail`.
macro_rules! pathway_select {
    ($tail:literal) => {
        concat!(
            "SELECT id, idempotency_key, definition, request_digest, state, version, proposer,
                    created_at, updated_at FROM pathways ",
            $tail
        )
    };
}

/// `SELECT` of the columns [`ledger_row`] reads, then `$tail`.
macro_rules! ledger_select {
    ($tail:literal) => {
        concat!(
            "SELECT seq, pathway_id, event, prev_hash, hash FROM ledger ",
            $tail
        )
    };
}

pub(super) use pathway_select;

pub(super) fn pathways(rows: &[Row]) -> Result<Vec<PathwayRecord>, PgError> {
    Ok(rows
        .iter()
        .map(pathway_record)
        .collect::<Result<Vec<_>, _>>()?)
}

pub(super) fn ledger_rows(rows: &[Row]) -> Vec<LedgerRow> {
    rows.iter()
        .map(|r| LedgerRow {
            seq: r.get(0),
            pathway_id: r.get(1),
            event: r.get(2),
            prev_hash: r.get(3),
            hash: r.get(4),
        })
        .collect()
}

/// A row count as the `LIMIT` PostgreSQL takes.
pub(super) fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) fn pathway_tx(tx: &mut Tx<'_>, id: &str) -> Result<Option<PathwayRecord>, PgError> {
    let row = tx.query_opt(pathway_select!("WHERE id = $1"), &[&id])?;
    Ok(row.as_ref().map(pathway_record).transpose()?)
}

pub(super) fn attempts_tx(tx: &mut Tx<'_>, pathway: &str) -> Result<Vec<AttemptRecord>, PgError> {
    let rows = tx.query(
        "SELECT id, pathway_id, seq, previous_attempt, request, request_digest, binding, binding_digest,
                status, owner, lease_until, outcome, created_at, updated_at
         FROM attempts WHERE pathway_id = $1 ORDER BY seq",
        &[&pathway],
    )?;
    Ok(rows
        .iter()
        .map(attempt_record)
        .collect::<Result<Vec<_>, _>>()?)
}

pub(super) fn unresolved_tx(
    tx: &mut Tx<'_>,
    after: Option<&str>,
    n: usize,
) -> Result<Vec<PathwayRecord>, PgError> {
    let rows = tx.query(
        pathway_select!(
            "WHERE state NOT IN ('completed', 'denied', 'aborted') AND state <> 'failed' AND id > $1 ORDER BY id LIMIT $2"
        ),
        &[&after.unwrap_or(""), &limit(n)],
    )?;
    pathways(&rows)
}

pub(super) fn events_tx(
    tx: &mut Tx<'_>,
    pathway: &str,
    after: i64,
    n: usize,
) -> Result<Vec<LedgerRow>, PgError> {
    let rows = tx.query(
        ledger_select!("WHERE pathway_id = $1 AND seq > $2 ORDER BY seq LIMIT $3"),
        &[&pathway, &after, &limit(n)],
    )?;
    Ok(ledger_rows(&rows))
}

pub(super) fn ledger_tx(tx: &mut Tx<'_>, after: i64, n: usize) -> Result<Vec<LedgerRow>, PgError> {
    let rows = tx.query(
        ledger_select!("WHERE seq > $1 ORDER BY seq LIMIT $2"),
        &[&after, &limit(n)],
    )?;
    Ok(ledger_rows(&rows))
}

pub(super) fn ledger_head_tx(tx: &mut Tx<'_>) -> Result<Option<(i64, String)>, PgError> {
    Ok(tx
        .query_opt(
            "SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1",
            &[],
        )?
        .map(|r| (r.get(0), r.get(1))))
}

pub(super) fn recorded_head_tx(tx: &mut Tx<'_>) -> Result<Option<(i64, String)>, PgError> {
    let text: Option<String> = tx
        .query_opt("SELECT value FROM meta WHERE key = 'ledger_head'", &[])?
        .map(|r| r.get(0));
    match text.as_deref() {
        None | Some("") => Ok(None),
        Some(t) => Ok(parse_head(t).map(Some)?),
    }
}

impl PgBackend {
    /// One pathway by id.
    pub(crate) fn pathway(&self, id: &str) -> Result<Option<PathwayRecord>, PgError> {
        self.read(|tx| pathway_tx(tx, id))
    }

    /// The attempts of one pathway, oldest first (with their owner and lease, which the
    /// database's clock wrote).
    pub(crate) fn attempts(&self, pathway: &str) -> Result<Vec<AttemptRecord>, PgError> {
        self.read(|tx| attempts_tx(tx, pathway))
    }

    /// One pathway's row, definition digest and attempts, checked against its own events,
    /// all in one snapshot (`REPEATABLE READ`): `Ok(None)` when there is no such pathway.
    pub(crate) fn read_checked(
        &self,
        id: &str,
    ) -> Result<Option<(PathwayRecord, String, Vec<AttemptRecord>)>, PgError> {
        self.read(|tx| {
            if rules::check_pathway(&mut super::rows::PgRows(tx), id, false, None)?.is_none() {
                return Ok(None);
            }
            let Some(record) = pathway_tx(tx, id)? else {
                return Ok(None);
            };
            let digest: String = tx
                .query_one(
                    "SELECT definition_digest FROM pathways WHERE id = $1",
                    &[&id],
                )?
                .get(0);
            Ok(Some((record, digest, attempts_tx(tx, id)?)))
        })
    }

    /// A page of pathways in a non-terminal state, ordered by id, after `after`.
    pub(crate) fn list_unresolved(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PathwayRecord>, PgError> {
        self.read(|tx| unresolved_tx(tx, after, limit))
    }

    /// The pathway stored under an idempotency key: its id and definition digest.
    pub(crate) fn with_key(&self, key: &str) -> Result<Option<(String, String)>, PgError> {
        self.read(|tx| {
            Ok(tx
                .query_opt(
                    "SELECT id, definition_digest FROM pathways WHERE idempotency_key = $1",
                    &[&key],
                )?
                .map(|r| (r.get(0), r.get(1))))
        })
    }

    /// One pathway's ledger events, oldest first.
    pub(crate) fn events(&self, pathway: &str) -> Result<Vec<LedgerRow>, PgError> {
        self.read(|tx| events_tx(tx, pathway, 0, usize::MAX))
    }

    /// A page of the global ledger with `seq > after`, in order.
    pub(crate) fn ledger(&self, after: i64, limit: usize) -> Result<Vec<LedgerRow>, PgError> {
        self.read(|tx| ledger_tx(tx, after, limit))
    }

    /// The newest event's position and hash, read from the chain itself.
    #[cfg(test)]
    pub(crate) fn ledger_head(&self) -> Result<Option<(i64, String)>, PgError> {
        self.read(ledger_head_tx)
    }

    /// The head recorded in `meta.ledger_head` (`None` before the first event).
    #[cfg(test)]
    pub(crate) fn recorded_head(&self) -> Result<Option<(i64, String)>, PgError> {
        self.read(recorded_head_tx)
    }
}
