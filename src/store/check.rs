//! One pathway's stored rows against its own ledger events.
//!
//! This is the rule that ties every row a step reads to the chain: [`Replay`] folds one
//! pathway's events into the facts they establish (state, proposal digests, each attempt's
//! request, binding, owner, carrier, status and outcome, each approval's grant, use and
//! revocation), and [`Replay::check_rows`] compares the stored rows with those facts.
//!
//! Two drivers use it: every step and every load (through [`check_pathway`], over that
//! pathway's events only, inside the step's transaction or one read snapshot), and
//! [`crate::ledger::verify`] (over the whole chain, after checking the links).

use rusqlite::{Connection, OptionalExtension, params};

use super::StoreError;
use super::event::{Event, Reading};
use crate::ledger::{ProblemKind, chain_hash};
use crate::state::AttemptStatus;

mod raw;
mod replay;
pub(crate) mod walk;

pub(crate) use raw::{
    APPROVAL_COLUMNS, ATTEMPT_COLUMNS, PATHWAY_COLUMNS, raw_approval, raw_attempt, raw_pathway,
};
// The PostgreSQL store reads its rows into these.
#[cfg(feature = "postgres")]
pub(crate) use raw::{RawApproval, RawAttempt};
pub(crate) use replay::{Facts, Finding, Replay};

/// The stored names of the attempt statuses after which the request certainly did not take
/// effect ([`AttemptStatus::is_settled`]): only after one of these may a new attempt start
/// (brief §11).
pub(crate) const SETTLED: &[&str] = &[
    AttemptStatus::NotSent.as_str(),
    AttemptStatus::Failed.as_str(),
    AttemptStatus::NotApplied.as_str(),
];

/// One pathway's events in order.
///
/// `CAST(?1 AS TEXT)`, not `?1`: with `ORDER BY`, SQLite's planner makes a statement that
/// compares a column with a bare parameter depend on the parameter's value (its `expmask`),
/// and rusqlite clears the bindings of every statement it returns to its cache, which
/// expires such a statement: each use was compiled again (8% of a step's CPU at 64 in
/// flight). The cast keeps the index and the order, and the statement stays compiled
/// (`cached_statements_with_ordered_lookups_are_not_recompiled`). The same holds for every
/// ordered per-pathway lookup in `src/store`.
pub(crate) const LEDGER_OF_PATHWAY: &str = "SELECT seq, event, prev_hash, hash FROM ledger WHERE pathway_id = CAST(?1 AS TEXT) ORDER BY seq";

/// Checks one pathway's rows against its own events (each event's own hash, the replay, every
/// row). Runs inside whatever transaction `conn` is in. `Ok(None)` when there is no such pathway.
pub(crate) fn check_pathway(conn: &Connection, id: &str) -> Result<Option<Replay>, StoreError> {
    let Some(row) = conn
        .prepare_cached(&format!(
            "SELECT {PATHWAY_COLUMNS} FROM pathways WHERE id = ?1"
        ))?
        .query_row(params![id], raw_pathway)
        .optional()?
    else {
        return Ok(None);
    };
    let mut findings = Vec::new();
    let mut replay = Replay::default();
    {
        let mut stmt = conn.prepare_cached(LEDGER_OF_PATHWAY)?;
        let mut rows = stmt.query(params![id])?;
        while let Some(r) = rows.next()? {
            let seq: i64 = r.get(0)?;
            let text: String = r.get(1)?;
            let prev: String = r.get(2)?;
            let hash: String = r.get(3)?;
            if chain_hash(&prev, &text) != hash {
                findings.push((
                    ProblemKind::HashMismatch,
                    format!("event {seq}: stored hash does not match the event"),
                ));
                continue;
            }
            let event = match Event::read(&text) {
                // A step does not judge the spelling; `verify` reports it.
                Reading::Canonical(event) | Reading::NotCanonical(event) => event,
                Reading::NotJson(_) => {
                    findings.push((ProblemKind::Unreadable, format!("event {seq} is not JSON")));
                    continue;
                }
            };
            if event.pathway.as_deref() != Some(id) {
                findings.push((
                    ProblemKind::Sequence,
                    format!("event {seq} names another pathway"),
                ));
            }
            replay.event(&event, &mut findings);
        }
    }
    let attempts = conn
        .prepare_cached(&format!(
            "SELECT {ATTEMPT_COLUMNS} FROM attempts WHERE pathway_id = CAST(?1 AS TEXT) ORDER BY seq"
        ))?
        .query_map(params![id], raw_attempt)?
        .collect::<Result<Vec<_>, _>>()?;
    // Same shape as the attempts query above: another table, another row reader.
    let approvals = conn
        .prepare_cached(&format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE pathway_id = ?1"
        ))?
        .query_map(params![id], raw_approval)?
        .collect::<Result<Vec<_>, _>>()?;
    replay.check_rows(&row, &attempts, &approvals, &mut findings);
    match findings.into_iter().next() {
        None => Ok(Some(replay)),
        Some((_, detail)) => Err(StoreError::Unexplained {
            pathway: id.to_owned(),
            detail,
        }),
    }
}

#[cfg(test)]
mod recompile_tests {
    use rusqlite::{Connection, StatementStatus, params};

    #[test]
    fn cached_statements_with_ordered_lookups_are_not_recompiled() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(crate::store::SCHEMA_SQL).unwrap();
        for round in 0..5 {
            let mut stmt = conn.prepare_cached(super::LEDGER_OF_PATHWAY).unwrap();
            let n = stmt
                .query_map(params![format!("pw_{round}")], |r| r.get::<_, i64>(0))
                .unwrap()
                .count();
            assert_eq!(n, 0);
            assert_eq!(
                stmt.get_status(StatementStatus::RePrepare),
                0,
                "round {round}"
            );
        }
    }
}

#[cfg(test)]
mod settled_tests {
    use crate::state::AttemptStatus;

    #[test]
    fn settled_names_are_the_settled_statuses() {
        let settled: Vec<&str> = AttemptStatus::ALL
            .into_iter()
            .filter(|s| s.is_settled())
            .map(AttemptStatus::as_str)
            .collect();
        assert_eq!(settled, super::SETTLED);
    }
}
