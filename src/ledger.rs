//! The evidence ledger: one global, append-only, hash-chained sequence of events.
//!
//! Each event is stored as its RFC 8785 canonical JSON text. Its hash is
//! `sha256("rpr-ledger-v1\n" || prev_hash || "\n" || event_text)` in lowercase hex,
//! where `prev_hash` is the previous event's hash (64 zeros for the first). The
//! newest `seq:hash` is also recorded in the `meta` table by the same transaction.
//!
//! [`verify`] recomputes the chain and replays every pathway's transitions. It
//! detects a changed, removed, inserted or reordered event, a truncated tail (given
//! a head hash the caller kept, or against the recorded head), a transition the
//! state machine does not allow, and a stored pathway state or attempt status that
//! the events do not explain.
//!
//! What sha256 does not give: a writer who can rewrite the whole file can rewrite
//! the whole chain consistently. Keep the head hash somewhere the writer cannot
//! reach (a log, another machine) and pass it to [`verify`]: that proves the events
//! up to it are unchanged and still present (truncation or rewriting before it is
//! detected). It does not detect a correctly chained append after it by someone
//! with write access to the database; that needs signing, a later step.

use std::collections::HashMap;

use rusqlite::types::Type;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::store::check::{
    APPROVAL_COLUMNS, ATTEMPT_COLUMNS, Finding, PATHWAY_COLUMNS, RawApproval, RawAttempt, Replay,
    raw_approval, raw_attempt, raw_pathway,
};
use crate::store::event::{Event, Reading};
use crate::store::{ReadStore, StoreError};

/// The `prev_hash` of the first event.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The chain hash of an event text following `prev`.
#[must_use]
pub fn chain_hash(prev: &str, event_text: &str) -> String {
    let hex = chain_hash_hex(prev.as_bytes(), event_text.as_bytes());
    hex.iter().map(|&b| char::from(b)).collect()
}

/// [`chain_hash`] over bytes, as lowercase hex ASCII on the stack.
fn chain_hash_hex(prev: &[u8], event_text: &[u8]) -> [u8; 64] {
    let mut h = Sha256::new();
    h.update(b"rpr-ledger-v1\n");
    h.update(prev);
    h.update(b"\n");
    h.update(event_text);
    crate::canonical::digest_hex(&h.finalize().into())
}

/// What kind of problem the verifier found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProblemKind {
    /// The stored event text is not JSON, or not the canonical form of itself.
    Unreadable,
    /// The sequence numbers skip, repeat or disagree with the event.
    Sequence,
    /// `prev_hash` does not match the previous event's hash.
    BrokenLink,
    /// The stored hash does not match the event.
    HashMismatch,
    /// An event describes a transition the state machine forbids, or starts mid-way.
    IllegalTransition,
    /// A pathway's stored state is not what its events end in.
    StateMismatch,
    /// An attempt's stored status is not what its events end in.
    AttemptMismatch,
    /// A pathway has no events, or events name a pathway that does not exist.
    Unexplained,
    /// The chain ends before the known or recorded head.
    Truncated,
}

/// One problem found by [`verify`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Problem {
    /// What kind.
    pub kind: ProblemKind,
    /// The ledger position, when it is about one event.
    pub seq: Option<i64>,
    /// The pathway, when it is about one pathway.
    pub pathway: Option<String>,
    /// Details for people.
    pub detail: String,
}

// Same shape as Problem: public result structs with other fields.
/// The result of [`verify`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Report {
    /// Events checked.
    pub events: i64,
    /// Hash of the last event checked.
    pub head: Option<String>,
    /// Everything that is wrong; empty when the ledger verifies.
    pub problems: Vec<Problem>,
}

impl Report {
    /// Whether the ledger verified with no problem.
    #[must_use]
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Verifies the whole ledger and the stored state against it.
///
/// `known_head` is a hash the caller kept from an earlier [`Report::head`] or
/// `Status::ledger_head`; if the chain no longer contains it, the tail was cut or
/// rewritten.
///
/// Besides the chain itself, every stored row is re-derived from the events of its
/// pathway: the pathway's state, idempotency key, digests, proposer and stored
/// definition; each attempt's sequence, request, binding, owner, carrier, status and
/// outcome; each approval's request, approver, grant, use and revocation. A new attempt
/// after one that may have taken effect without a not-applied verdict between them is
/// reported too.
///
/// Every read (the chain walk, the recorded head, the stored rows) sees one
/// snapshot ([`ReadStore::snapshot`]), so writers committing meanwhile are neither
/// half-seen nor reported as tampering.
///
/// The walk streams: one pass over the stored rows, hashing the stored bytes, checking
/// each event's canonical form and reading the fields the replay needs in one scan of
/// its text, without building a JSON value (a text that is not canonical is reported,
/// then parsed the slow way so its replay still runs).
pub fn verify(store: &ReadStore, known_head: Option<&str>) -> Result<Report, StoreError> {
    store.snapshot(|store| verify_snapshot(store, known_head))
}

/// The chain walk's running state.
struct Walk<'k> {
    problems: Vec<Problem>,
    pathways: HashMap<String, Found>,
    findings: Vec<Finding>,
    /// The previous row's stored hash.
    prev_hash: Vec<u8>,
    expected_seq: i64,
    last_seq: i64,
    known_head: Option<&'k [u8]>,
    known_seen: bool,
}

impl Walk<'_> {
    fn row(&mut self, seq: i64, pathway: &str, prev: &[u8], hash: &[u8], text: &[u8]) {
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
        self.expected_seq = seq + 1;
        let stored = StoredRow {
            seq,
            pathway,
            prev_hash: prev,
            hash,
            text,
        };
        let event = check_row(&stored, Some(&self.prev_hash), &mut self.findings);
        self.prev_hash.clear();
        self.prev_hash.extend_from_slice(hash);
        if self.known_head == Some(hash) {
            self.known_seen = true;
        }
        if let Some(event) = event {
            entry(&mut self.pathways, pathway)
                .replay
                .get_or_insert_default()
                .event(&event, &mut self.findings);
        }
        self.problems.extend(
            self.findings
                .drain(..)
                .map(|(kind, detail)| at(kind, detail)),
        );
    }
}

/// One ledger row as stored.
pub(crate) struct StoredRow<'r> {
    pub(crate) seq: i64,
    pub(crate) pathway: &'r str,
    pub(crate) prev_hash: &'r [u8],
    pub(crate) hash: &'r [u8],
    pub(crate) text: &'r [u8],
}

/// Checks one stored ledger row on its own and against the chain: that its `prev_hash` is
/// `expected_prev` (the hash of the event before it; `None` when there is none to link to),
/// that its stored hash is its [`chain_hash`], and that its text is UTF-8, canonical JSON,
/// and names the row's seq and pathway. Pushes what is wrong to `out`, and returns the
/// event when its text could be read. Used by [`verify`] for every row of the chain and by
/// [`crate::inspect::evidence`] for the rows of one page.
pub(crate) fn check_row<'r>(
    row: &StoredRow<'r>,
    expected_prev: Option<&[u8]>,
    out: &mut Vec<Finding>,
) -> Option<Event<'r>> {
    match expected_prev {
        Some(expected) if expected == row.prev_hash => {}
        Some(_) => out.push((
            ProblemKind::BrokenLink,
            "prev_hash does not match the previous event's hash".into(),
        )),
        None => out.push((
            ProblemKind::BrokenLink,
            format!("no event at seq {} to link to", row.seq - 1),
        )),
    }
    if chain_hash_hex(row.prev_hash, row.text) != row.hash {
        out.push((
            ProblemKind::HashMismatch,
            "stored hash does not match the event".into(),
        ));
    }
    let Ok(text) = std::str::from_utf8(row.text) else {
        out.push((ProblemKind::Unreadable, "event text is not UTF-8".into()));
        return None;
    };
    let event = match Event::read(text) {
        Reading::Canonical(event) => event,
        Reading::NotCanonical(event) => {
            out.push((
                ProblemKind::Unreadable,
                "event text is not in canonical form".into(),
            ));
            event
        }
        Reading::NotJson(e) => {
            out.push((ProblemKind::Unreadable, format!("event is not JSON: {e}")));
            return None;
        }
    };
    if event.seq != Some(row.seq) || event.pathway.as_deref() != Some(row.pathway) {
        out.push((
            ProblemKind::Sequence,
            "event's own seq or pathway disagrees with its row".into(),
        ));
    }
    Some(event)
}

/// The bytes of a text column, borrowed from the row.
fn text_column<'r>(row: &'r rusqlite::Row<'_>, index: usize) -> rusqlite::Result<&'r [u8]> {
    let value = row.get_ref(index)?;
    value.as_bytes().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(index, value.data_type(), Box::new(e))
    })
}

fn verify_snapshot(store: &ReadStore, known_head: Option<&str>) -> Result<Report, StoreError> {
    // Sized once: growing a map of every pathway rehashes and frees large tables.
    let stored_pathways: i64 = store
        .conn
        .query_row("SELECT count(*) FROM pathways", [], |r| r.get(0))?;
    let mut walk = Walk {
        problems: Vec::new(),
        pathways: HashMap::with_capacity(usize::try_from(stored_pathways).unwrap_or(0)),
        findings: Vec::new(),
        prev_hash: GENESIS.as_bytes().to_vec(),
        expected_seq: 1,
        last_seq: 0,
        known_head: known_head.map(str::as_bytes),
        known_seen: known_head.is_none(),
    };
    let mut head = None;
    {
        let mut stmt = store
            .conn
            .prepare("SELECT seq, pathway_id, prev_hash, hash, event FROM ledger ORDER BY seq")?;
        let mut rows = stmt.query([])?;
        let mut any = false;
        while let Some(row) = rows.next()? {
            any = true;
            let seq: i64 = row.get(0)?;
            let pathway = std::str::from_utf8(text_column(row, 1)?).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(1, Type::Text, Box::new(e))
            })?;
            let prev = text_column(row, 2)?;
            let hash = text_column(row, 3)?;
            let text = text_column(row, 4)?;
            walk.row(seq, pathway, prev, hash, text);
        }
        if any {
            head = Some(String::from_utf8_lossy(&walk.prev_hash).into_owned());
        }
    }
    let Walk {
        mut problems,
        pathways,
        last_seq,
        known_seen,
        ..
    } = walk;
    if !known_seen {
        problems.push(Problem {
            kind: ProblemKind::Truncated,
            seq: None,
            pathway: None,
            detail: "the known head hash is not in the chain: the tail was cut or rewritten".into(),
        });
    }
    match (store.recorded_head()?, &head) {
        (None, None) => {}
        (Some((seq, hash)), Some(h)) if seq == last_seq && &hash == h => {}
        (recorded, _) => problems.push(Problem {
            kind: ProblemKind::Truncated,
            seq: Some(last_seq),
            pathway: None,
            detail: format!("recorded head {recorded:?} is not the last event (seq {last_seq})"),
        }),
    }
    check_rows(store, pathways, &mut problems)?;
    Ok(Report {
        events: last_seq,
        head,
        problems,
    })
}

/// What the chain walk and the stored rows say about one pathway.
#[derive(Debug, Default)]
struct Found {
    /// The facts its events establish (none if it has no events).
    replay: Option<Replay>,
    attempts: Vec<RawAttempt>,
    approvals: Vec<RawApproval>,
}

/// Compares every stored row with what its pathway's events establish.
///
/// Each table is read once in storage order (no index lookups); each attempt and approval
/// joins its pathway's entry of the walk by one hash lookup.
fn check_rows(
    store: &ReadStore,
    mut pathways: HashMap<String, Found>,
    problems: &mut Vec<Problem>,
) -> Result<(), StoreError> {
    let conn = &store.conn;
    let mut stmt = conn.prepare(&format!("SELECT {ATTEMPT_COLUMNS} FROM attempts"))?;
    for a in stmt.query_map([], raw_attempt)? {
        let a = a?;
        entry(&mut pathways, &a.pathway_id).attempts.push(a);
    }
    let mut stmt = conn.prepare(&format!("SELECT {APPROVAL_COLUMNS} FROM approvals"))?;
    for a in stmt.query_map([], raw_approval)? {
        let a = a?;
        entry(&mut pathways, &a.pathway_id).approvals.push(a);
    }
    let mut stmt = conn.prepare(&format!("SELECT {PATHWAY_COLUMNS} FROM pathways"))?;
    let mut findings = Vec::new();
    for row in stmt.query_map([], raw_pathway)? {
        let row = row?;
        let found = pathways.remove(&row.id).unwrap_or_default();
        let Some(replay) = found.replay else {
            problems.push(Problem {
                kind: ProblemKind::Unexplained,
                seq: None,
                pathway: Some(row.id.clone()),
                detail: "pathway has no ledger events".into(),
            });
            continue;
        };
        replay.check_rows(&row, &found.attempts, &found.approvals, &mut findings);
        problems.extend(findings.drain(..).map(|(kind, detail)| Problem {
            kind,
            seq: None,
            pathway: Some(row.id.clone()),
            detail,
        }));
    }
    // What is left names a pathway that is not stored.
    for (id, found) in pathways {
        if found.replay.is_some() {
            problems.push(Problem {
                kind: ProblemKind::Unexplained,
                seq: None,
                pathway: Some(id.clone()),
                detail: "events name a pathway that is not stored".into(),
            });
        }
        for a in found.attempts {
            problems.push(Problem {
                kind: ProblemKind::AttemptMismatch,
                seq: None,
                pathway: Some(id.clone()),
                detail: format!("attempt {} names a pathway that is not stored", a.id),
            });
        }
        for a in found.approvals {
            problems.push(Problem {
                kind: ProblemKind::Unexplained,
                seq: None,
                pathway: Some(id.clone()),
                detail: format!("approval {} names a pathway that is not stored", a.id),
            });
        }
    }
    Ok(())
}

/// The walk's entry for `pathway`, made if it has none.
fn entry<'m>(pathways: &'m mut HashMap<String, Found>, pathway: &str) -> &'m mut Found {
    if pathways.contains_key(pathway) {
        pathways.get_mut(pathway).expect("just seen")
    } else {
        pathways.entry(pathway.to_owned()).or_default()
    }
}
