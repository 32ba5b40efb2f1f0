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

mod raw;
mod replay;
pub(crate) mod walk;

pub(crate) use raw::{
    APPROVAL_COLUMNS, ATTEMPT_COLUMNS, PATHWAY_COLUMNS, raw_approval, raw_attempt, raw_pathway,
};
pub(crate) use raw::{RawApproval, RawAttempt, RawPathway};
pub(crate) use replay::{Facts, Finding, Replay};

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
