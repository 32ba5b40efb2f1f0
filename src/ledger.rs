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

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::state::State;
use crate::store::{ReadStore, StoreError};

/// The `prev_hash` of the first event.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The chain hash of an event text following `prev`.
#[must_use]
pub fn chain_hash(prev: &str, event_text: &str) -> String {
    let mut h = Sha256::new();
    h.update(b"rpr-ledger-v1\n");
    h.update(prev.as_bytes());
    h.update(b"\n");
    h.update(event_text.as_bytes());
    let out = h.finalize();
    let mut s = String::with_capacity(64);
    for b in out {
        use std::fmt::Write;
        let _ = write!(s, "{b:02x}");
    }
    s
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

#[derive(Default)]
struct PathwayReplay {
    state: Option<State>,
}

const PAGE: usize = 10_000;

/// Verifies the whole ledger and the stored state against it.
///
/// `known_head` is a hash the caller kept from an earlier [`Report::head`] or
/// `Status::ledger_head`; if the chain no longer contains it, the tail was cut or
/// rewritten.
///
/// Every read (the chain walk, the recorded head, the stored rows) sees one
/// snapshot ([`ReadStore::snapshot`]), so writers committing meanwhile are neither
/// half-seen nor reported as tampering.
pub fn verify(store: &ReadStore, known_head: Option<&str>) -> Result<Report, StoreError> {
    store.snapshot(|store| verify_snapshot(store, known_head))
}

fn verify_snapshot(store: &ReadStore, known_head: Option<&str>) -> Result<Report, StoreError> {
    let mut problems = Vec::new();
    let mut replays: HashMap<String, PathwayReplay> = HashMap::new();
    let mut attempts: HashMap<String, String> = HashMap::new();
    let mut prev_hash = GENESIS.to_owned();
    let mut expected_seq = 1_i64;
    let mut last_seq = 0_i64;
    let mut head = None;
    let mut known_seen = known_head.is_none();
    loop {
        let rows = store.ledger(last_seq, PAGE)?;
        if rows.is_empty() {
            break;
        }
        for row in rows {
            last_seq = row.seq;
            let p = |kind, detail: String| Problem {
                kind,
                seq: Some(row.seq),
                pathway: Some(row.pathway_id.clone()),
                detail,
            };
            if row.seq != expected_seq {
                problems.push(p(
                    ProblemKind::Sequence,
                    format!("expected seq {expected_seq}, found {}", row.seq),
                ));
            }
            expected_seq = row.seq + 1;
            if row.prev_hash != prev_hash {
                problems.push(p(
                    ProblemKind::BrokenLink,
                    "prev_hash does not match the previous event's hash".into(),
                ));
            }
            if chain_hash(&row.prev_hash, &row.event) != row.hash {
                problems.push(p(
                    ProblemKind::HashMismatch,
                    "stored hash does not match the event".into(),
                ));
            }
            prev_hash.clone_from(&row.hash);
            if known_head == Some(row.hash.as_str()) {
                known_seen = true;
            }
            head = Some(row.hash.clone());
            let event: Value = match serde_json::from_str(&row.event) {
                Ok(v) => v,
                Err(e) => {
                    problems.push(p(
                        ProblemKind::Unreadable,
                        format!("event is not JSON: {e}"),
                    ));
                    continue;
                }
            };
            if crate::canonical::to_string(&event).ok().as_deref() != Some(row.event.as_str()) {
                problems.push(p(
                    ProblemKind::Unreadable,
                    "event text is not in canonical form".into(),
                ));
            }
            if event.get("seq").and_then(Value::as_i64) != Some(row.seq)
                || event.get("pathway").and_then(Value::as_str) != Some(row.pathway_id.as_str())
            {
                problems.push(p(
                    ProblemKind::Sequence,
                    "event's own seq or pathway disagrees with its row".into(),
                ));
            }
            let from = event
                .get("from")
                .and_then(Value::as_str)
                .map(str::parse::<State>);
            let to = event
                .get("to")
                .and_then(Value::as_str)
                .map(str::parse::<State>);
            let replay = replays.entry(row.pathway_id.clone()).or_default();
            match (replay.state, from, to) {
                (None, None, Some(Ok(State::Proposed))) => replay.state = Some(State::Proposed),
                (Some(cur), Some(Ok(f)), Some(Ok(t))) if f == cur && (f == t || f.allows(t)) => {
                    replay.state = Some(t);
                }
                (cur, f, t) => problems.push(p(
                    ProblemKind::IllegalTransition,
                    format!("event moves {f:?} -> {t:?} but the pathway was in {cur:?}"),
                )),
            }
            if let (Some(a), Some(s)) = (
                event.get("attempt").and_then(Value::as_str),
                event.get("attempt_status").and_then(Value::as_str),
            ) {
                attempts.insert(a.to_owned(), s.to_owned());
            }
        }
    }
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
    check_rows(store, &mut replays, &attempts, &mut problems)?;
    Ok(Report {
        events: last_seq,
        head,
        problems,
    })
}

fn check_rows(
    store: &ReadStore,
    replays: &mut HashMap<String, PathwayReplay>,
    attempts: &HashMap<String, String>,
    problems: &mut Vec<Problem>,
) -> Result<(), StoreError> {
    let mut stmt = store.conn.prepare("SELECT id, state FROM pathways")?;
    let rows = stmt.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?;
    for row in rows {
        let (id, state) = row?;
        match replays.remove(&id) {
            None => problems.push(Problem {
                kind: ProblemKind::Unexplained,
                seq: None,
                pathway: Some(id),
                detail: "pathway has no ledger events".into(),
            }),
            Some(r) if r.state.map(State::as_str) != Some(state.as_str()) => {
                problems.push(Problem {
                    kind: ProblemKind::StateMismatch,
                    seq: None,
                    pathway: Some(id),
                    detail: format!("stored state {state}, events end in {:?}", r.state),
                });
            }
            Some(_) => {}
        }
    }
    for id in replays.keys() {
        problems.push(Problem {
            kind: ProblemKind::Unexplained,
            seq: None,
            pathway: Some(id.clone()),
            detail: "events name a pathway that is not stored".into(),
        });
    }
    let mut stmt = store
        .conn
        .prepare("SELECT id, pathway_id, status FROM attempts")?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
        ))
    })?;
    for row in rows {
        let (id, pathway, status) = row?;
        if attempts.get(&id) != Some(&status) {
            problems.push(Problem {
                kind: ProblemKind::AttemptMismatch,
                seq: None,
                pathway: Some(pathway),
                detail: format!(
                    "attempt {id} stored as {status}, events say {:?}",
                    attempts.get(&id)
                ),
            });
        }
    }
    Ok(())
}
