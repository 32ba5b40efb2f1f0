//! The checker half of the whole-store check (see the parent module): the links, the chain
//! hashes, each event's canonical form and fields, the replay of every pathway, and the
//! comparison of every stored row with what its pathway's events establish.

use std::collections::HashMap;

use super::super::raw::{AttemptRow, Copied, approval_row, attempt_row, pathway_row};
use super::super::{Facts, Finding};
use super::{Batch, Part};
use crate::ledger::{GENESIS, Problem, ProblemKind, Report};
use crate::store::StoreError;
use crate::store::{StoredRow, check_stored_row};

/// What the chain and the stored rows say about one pathway.
#[derive(Debug, Default)]
struct Found {
    /// The facts its events establish (none if it has no events), their texts in
    /// [`Checker::facts`].
    replay: Option<Facts>,
    /// Its attempt rows: (batch, row) in the kept attempt batches.
    attempts: Vec<(usize, usize)>,
    /// Its approval rows: (batch, row) in the kept approval batches.
    approvals: Vec<(usize, usize)>,
}

/// Every pathway named by an event or a row, in the order first named.
#[derive(Debug, Default)]
struct Pathways {
    index: HashMap<Box<str>, usize>,
    found: Vec<Found>,
    /// The last pathway looked up (runs of events of one pathway are common).
    last: Option<usize>,
    last_id: String,
}

impl Pathways {
    fn with_capacity(n: usize) -> Self {
        Self {
            index: HashMap::with_capacity(n),
            found: Vec::with_capacity(n),
            ..Self::default()
        }
    }

    /// The entry of `id`, made if there is none.
    fn get(&mut self, id: &str) -> &mut Found {
        let at = match self.last {
            Some(at) if self.last_id == id => at,
            _ => {
                let at = if let Some(&at) = self.index.get(id) {
                    at
                } else {
                    let at = self.found.len();
                    self.index.insert(id.into(), at);
                    self.found.push(Found::default());
                    at
                };
                self.last = Some(at);
                self.last_id.clear();
                self.last_id.push_str(id);
                at
            }
        };
        &mut self.found[at]
    }

    /// Takes what is known of `id` (what is left is empty).
    fn take(&mut self, id: &str) -> Found {
        self.index
            .get(id)
            .map(|&at| std::mem::take(&mut self.found[at]))
            .unwrap_or_default()
    }

    /// What was not taken (and is not empty), in the order first named.
    fn rest(self) -> Vec<(Box<str>, Found)> {
        let left =
            |f: &Found| f.replay.is_some() || !f.attempts.is_empty() || !f.approvals.is_empty();
        if !self.found.iter().any(left) {
            return Vec::new();
        }
        let mut found = self.found;
        let mut rest: Vec<_> = self
            .index
            .into_iter()
            .filter(|&(_, at)| left(&found[at]))
            .map(|(id, at)| (at, id))
            .collect();
        rest.sort_unstable_by_key(|&(at, _)| at);
        rest.into_iter()
            .map(|(at, id)| (id, std::mem::take(&mut found[at])))
            .collect()
    }
}

/// The checker's running state.
pub(super) struct Checker<'k> {
    problems: Vec<Problem>,
    findings: Vec<Finding>,
    pathways: Pathways,
    /// The texts of every pathway's facts, in one buffer.
    facts: String,
    /// The previous ledger row's stored hash.
    prev_hash: Vec<u8>,
    expected_seq: i64,
    last_seq: i64,
    any: bool,
    known_head: Option<&'k [u8]>,
    known_seen: bool,
    /// Attempt and approval rows, kept until the pathway rows are compared.
    attempts: Vec<Batch>,
    approvals: Vec<Batch>,
    /// Whether the reader handed on everything.
    ended: bool,
}

impl<'k> Checker<'k> {
    pub(super) fn new(known_head: Option<&'k str>, pathways: usize) -> Self {
        Self {
            problems: Vec::new(),
            findings: Vec::new(),
            pathways: Pathways::with_capacity(pathways),
            facts: String::new(),
            prev_hash: GENESIS.as_bytes().to_vec(),
            expected_seq: 1,
            last_seq: 0,
            any: false,
            known_head: known_head.map(str::as_bytes),
            known_seen: known_head.is_none(),
            attempts: Vec::new(),
            approvals: Vec::new(),
            ended: false,
        }
    }

    /// Checks one part; returns its batch when it is done with it.
    pub(super) fn part(&mut self, part: Part) -> Result<Option<Batch>, StoreError> {
        match part {
            Part::Ledger(batch) => {
                for index in 0..batch.rows.len() {
                    let hashed = batch.hashed.get(index).copied();
                    self.ledger_row(batch.rows.row(index), hashed)?;
                }
                Ok(Some(batch))
            }
            Part::Head(recorded) => {
                self.head(recorded);
                Ok(None)
            }
            Part::Attempts(batch) => {
                let at = self.attempts.len();
                for index in 0..batch.rows.len() {
                    let row = batch.rows.row(index);
                    let pathway = row.text(1)?;
                    self.pathways.get(pathway).attempts.push((at, index));
                }
                self.attempts.push(batch);
                Ok(None)
            }
            Part::Approvals(batch) => {
                let at = self.approvals.len();
                for index in 0..batch.rows.len() {
                    let row = batch.rows.row(index);
                    let pathway = row.text(1)?;
                    self.pathways.get(pathway).approvals.push((at, index));
                }
                self.approvals.push(batch);
                Ok(None)
            }
            Part::Pathways(batch) => {
                for index in 0..batch.rows.len() {
                    self.pathway_row(batch.rows.row(index))?;
                }
                Ok(Some(batch))
            }
            Part::End => {
                self.ended = true;
                Ok(None)
            }
        }
    }

    fn ledger_row(&mut self, row: Copied<'_>, hashed: Option<bool>) -> Result<(), StoreError> {
        let seq = row.integer(0)?;
        let pathway = row.text(1)?;
        // A STRICT table's TEXT column holds another type only in a damaged file; the
        // bytes still chain, so the walk goes on and reports the cell.
        for (index, column) in [(2, "prev_hash"), (3, "hash"), (4, "event")] {
            if let Some(found) = row.not_text(index) {
                self.findings.push((
                    ProblemKind::Unreadable,
                    format!("{column} is stored as {found}, not text"),
                ));
            }
        }
        let stored = StoredRow {
            seq,
            pathway,
            prev_hash: row.bytes(2).unwrap_or_default(),
            hash: row.bytes(3).unwrap_or_default(),
            text: row.bytes(4).unwrap_or_default(),
        };
        self.any = true;
        self.last_seq = seq;
        let at = |kind, detail: String| Problem {
            kind,
            seq: Some(seq),
            pathway: Some(pathway.to_owned()),
            detail,
        };
        if seq != self.expected_seq {
            let expected = self.expected_seq;
            self.problems.push(at(
                ProblemKind::Sequence,
                format!("expected seq {expected}, found {seq}"),
            ));
        }
        // A stored seq can be any integer, i64::MAX too (no row can follow that one).
        self.expected_seq = seq.saturating_add(1);
        let event = check_stored_row(&stored, Some(&self.prev_hash), hashed, &mut self.findings);
        self.prev_hash.clear();
        self.prev_hash.extend_from_slice(stored.hash);
        if self.known_head == Some(stored.hash) {
            self.known_seen = true;
        }
        if let Some(event) = event {
            self.pathways
                .get(pathway)
                .replay
                .get_or_insert_default()
                .event(&mut self.facts, &event, &mut self.findings);
        }
        self.problems.extend(
            self.findings
                .drain(..)
                .map(|(kind, detail)| at(kind, detail)),
        );
        Ok(())
    }

    /// The head of the walked chain, if it had any row.
    fn walked_head(&self) -> Option<String> {
        self.any
            .then(|| String::from_utf8_lossy(&self.prev_hash).into_owned())
    }

    /// After the last ledger row: the known head and the recorded one.
    fn head(&mut self, recorded: Option<(i64, String)>) {
        if !self.known_seen {
            self.problems.push(Problem {
                kind: ProblemKind::Truncated,
                seq: None,
                pathway: None,
                detail: "the known head hash is not in the chain: the tail was cut or rewritten"
                    .into(),
            });
        }
        let last_seq = self.last_seq;
        match (recorded, self.walked_head()) {
            (None, None) => {}
            (Some((seq, hash)), Some(h)) if seq == last_seq && hash == h => {}
            (recorded, _) => self.problems.push(Problem {
                kind: ProblemKind::Truncated,
                seq: Some(last_seq),
                pathway: None,
                detail: format!(
                    "recorded head {recorded:?} is not the last event (seq {last_seq})"
                ),
            }),
        }
    }

    /// Compares one stored pathway row, and its attempt and approval rows, with what its
    /// events establish.
    fn pathway_row(&mut self, row: Copied<'_>) -> Result<(), StoreError> {
        let row = pathway_row(row)?;
        let found = self.pathways.take(row.id);
        let Some(replay) = found.replay else {
            self.problems.push(Problem {
                kind: ProblemKind::Unexplained,
                seq: None,
                pathway: Some(row.id.to_owned()),
                detail: "pathway has no ledger events".into(),
            });
            return Ok(());
        };
        let attempts = found
            .attempts
            .iter()
            .map(|&(batch, index)| attempt_row(self.attempts[batch].rows.row(index)))
            .collect::<Result<Vec<AttemptRow<'_>>, _>>()?;
        let approvals = found
            .approvals
            .iter()
            .map(|&(batch, index)| approval_row(self.approvals[batch].rows.row(index)))
            .collect::<Result<Vec<_>, _>>()?;
        replay.check_views(&self.facts, &row, &attempts, &approvals, &mut self.findings);
        self.problems
            .extend(self.findings.drain(..).map(|(kind, detail)| Problem {
                kind,
                seq: None,
                pathway: Some(row.id.to_owned()),
                detail,
            }));
        Ok(())
    }

    /// The report, once every part came (an error if the reader stopped early, which it
    /// only does with an error of its own, returned instead of this one).
    pub(super) fn finish(self) -> Result<Report, StoreError> {
        if !self.ended {
            return Err(StoreError::Corrupt(
                "the ledger check ended before the reader finished".into(),
            ));
        }
        let head = self.walked_head();
        let Checker {
            mut problems,
            pathways,
            last_seq,
            attempts,
            approvals,
            ..
        } = self;
        // What is left names a pathway that is not stored.
        for (id, found) in pathways.rest() {
            if found.replay.is_some() {
                problems.push(Problem {
                    kind: ProblemKind::Unexplained,
                    seq: None,
                    pathway: Some(id.to_string()),
                    detail: "events name a pathway that is not stored".into(),
                });
            }
            for (batch, index) in found.attempts {
                let attempt = attempts[batch].rows.row(index).text(0)?;
                problems.push(Problem {
                    kind: ProblemKind::AttemptMismatch,
                    seq: None,
                    pathway: Some(id.to_string()),
                    detail: format!("attempt {attempt} names a pathway that is not stored"),
                });
            }
            for (batch, index) in found.approvals {
                let approval = approvals[batch].rows.row(index).text(0)?;
                problems.push(Problem {
                    kind: ProblemKind::Unexplained,
                    seq: None,
                    pathway: Some(id.to_string()),
                    detail: format!("approval {approval} names a pathway that is not stored"),
                });
            }
        }
        Ok(Report {
            events: last_seq,
            head,
            problems,
        })
    }
}
