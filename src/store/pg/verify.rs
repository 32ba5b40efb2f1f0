//! `verify` on PostgreSQL: the checks of [`crate::store::verify`] (each row by the ledger's
//! own `check_row`, each pathway by the same `Replay`), in one `REPEATABLE READ` snapshot,
//! streaming the chain.
//!
//! `store::verify` on a PostgreSQL `ReadStore` runs this walk (`PgReader::verify`). It is the
//! SQLite walk written again over PostgreSQL rows.

use std::collections::HashMap;

use postgres::fallible_iterator::FallibleIterator;

use super::check::{
    ALL_APPROVALS, ALL_ATTEMPTS, ALL_PATHWAYS, raw_approval, raw_attempt, raw_pathway,
};
use super::ledger::parse_head;
use super::{PgBackend, PgError, Tx};
use crate::ledger::{GENESIS, Problem, ProblemKind, Report};
use crate::store::check::{RawApproval, RawAttempt, Replay};
use crate::store::{StoredRow, check_row};

/// What the walk and the stored rows say about one pathway.
#[derive(Default)]
struct Seen {
    replay: Option<Replay>,
    attempts: Vec<RawAttempt>,
    approvals: Vec<RawApproval>,
}

fn problem(kind: ProblemKind, seq: Option<i64>, pathway: Option<&str>, detail: String) -> Problem {
    Problem {
        kind,
        seq,
        pathway: pathway.map(str::to_owned),
        detail,
    }
}

impl PgBackend {
    /// Verifies the whole ledger and every stored row against it, as
    /// [`crate::store::verify`] does on SQLite: contiguous `seq`, every link and hash, each
    /// event's canonical form, each pathway's replay, every pathway, attempt and approval
    /// row, the recorded head, and `known_head` (a head kept elsewhere) still in the chain.
    pub(crate) fn verify(&self, known_head: Option<&str>) -> Result<Report, PgError> {
        self.read(|tx| verify_tx(tx, known_head))
    }
}

/// [`PgBackend::verify`] inside `tx` (a read snapshot, or the copy from SQLite's own
/// transaction before it commits).
pub(super) fn verify_tx(tx: &mut Tx<'_>, known_head: Option<&str>) -> Result<Report, PgError> {
    let mut problems = Vec::new();
    let mut pathways: HashMap<String, Seen> = HashMap::new();
    let mut findings = Vec::new();
    let mut prev = GENESIS.as_bytes().to_vec();
    let mut expected = 1_i64;
    let mut last = 0_i64;
    let mut known_seen = known_head.is_none();
    let st =
        tx.statement("SELECT seq, pathway_id, prev_hash, hash, event FROM ledger ORDER BY seq")?;
    let mut rows = tx.inner.query_raw(&st, &[])?;
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0);
        let pathway: &str = row.get(1);
        let hash: &str = row.get(3);
        last = seq;
        if seq != expected {
            problems.push(problem(
                ProblemKind::Sequence,
                Some(seq),
                Some(pathway),
                format!("expected seq {expected}, found {seq}"),
            ));
        }
        // A stored seq can be any integer, i64::MAX too (no row can follow that one).
        expected = seq.saturating_add(1);
        let stored = StoredRow {
            seq,
            pathway,
            prev_hash: row.get::<_, &str>(2).as_bytes(),
            hash: hash.as_bytes(),
            text: row.get::<_, &str>(4).as_bytes(),
        };
        let event = check_row(&stored, Some(&prev), &mut findings);
        prev.clear();
        prev.extend_from_slice(hash.as_bytes());
        if known_head == Some(hash) {
            known_seen = true;
        }
        if let Some(event) = event {
            pathways
                .entry(pathway.to_owned())
                .or_default()
                .replay
                .get_or_insert_default()
                .event(&event, &mut findings);
        }
        problems.extend(
            findings
                .drain(..)
                .map(|(kind, detail)| problem(kind, Some(seq), Some(pathway), detail)),
        );
    }
    drop(rows);
    let head = (last > 0).then(|| String::from_utf8_lossy(&prev).into_owned());
    if !known_seen {
        problems.push(problem(
            ProblemKind::Truncated,
            None,
            None,
            "the known head hash is not in the chain: the tail was cut or rewritten".into(),
        ));
    }
    let recorded: String = tx
        .query_one("SELECT value FROM meta WHERE key = 'ledger_head'", &[])?
        .get(0);
    let recorded = parse_head(&recorded)?;
    let recorded_ok = match &head {
        None => recorded.0 == 0,
        Some(h) => recorded.0 == last && &recorded.1 == h,
    };
    if !recorded_ok {
        problems.push(problem(
            ProblemKind::Truncated,
            Some(last),
            None,
            format!("recorded head {recorded:?} is not the last event (seq {last})"),
        ));
    }
    // Attempts, then approvals, each joined to its pathway's entry.
    for a in tx
        .query(ALL_ATTEMPTS.as_str(), &[])?
        .iter()
        .map(raw_attempt)
    {
        pathways
            .entry(a.pathway_id.clone())
            .or_default()
            .attempts
            .push(a);
    }
    for a in tx
        .query(ALL_APPROVALS.as_str(), &[])?
        .iter()
        .map(raw_approval)
    {
        pathways
            .entry(a.pathway_id.clone())
            .or_default()
            .approvals
            .push(a);
    }
    for row in tx.query(ALL_PATHWAYS.as_str(), &[])? {
        let row = raw_pathway(&row);
        let seen = pathways.remove(&row.id).unwrap_or_default();
        let Some(replay) = seen.replay else {
            problems.push(problem(
                ProblemKind::Unexplained,
                None,
                Some(&row.id),
                "pathway has no ledger events".into(),
            ));
            continue;
        };
        replay.check_rows(&row, &seen.attempts, &seen.approvals, &mut findings);
        problems.extend(
            findings
                .drain(..)
                .map(|(kind, detail)| problem(kind, None, Some(&row.id), detail)),
        );
    }
    // What is left names a pathway that is not stored.
    for (id, seen) in pathways {
        if seen.replay.is_some() {
            problems.push(problem(
                ProblemKind::Unexplained,
                None,
                Some(&id),
                "events name a pathway that is not stored".into(),
            ));
        }
        for a in seen.attempts {
            problems.push(problem(
                ProblemKind::AttemptMismatch,
                None,
                Some(&id),
                format!("attempt {} names a pathway that is not stored", a.id),
            ));
        }
        for a in seen.approvals {
            problems.push(problem(
                ProblemKind::Unexplained,
                None,
                Some(&id),
                format!("approval {} names a pathway that is not stored", a.id),
            ));
        }
    }
    Ok(Report {
        events: last,
        head,
        problems,
    })
}
