//! The store's rules, written once for every backend ([`super::rows::Rows`] is all a
//! backend provides).
//!
//! * **Edges**: a step's events must walk edges of the state machine from the stored state
//!   to the new one, so even a bug in a transition could not store another edge.
//! * **The rows are what the chain says** ([`check_pathway`]): before a step writes, the
//!   pathway's rows are compared with what its own ledger events establish.
//! * **Compare-and-set** on state, version and both digests: a stale or foreign handle
//!   writes nothing ([`StoreError::Conflict`]).
//! * **At most once** (brief §11): a new attempt only after the previous one certainly did
//!   not take effect ([`StoreError::UnsettledAttempt`]).
//! * **The late outcome** ([`super::late`]): an outcome for an attempt no longer in flight
//!   is refused and the refusal recorded ([`StoreError::Fenced`], the one refusal whose
//!   unit a backend commits).
//! * **The ledger event's bytes and chain hash** ([`event_text`]), one global chain whose
//!   head is read once per unit (and held against other writers) and recorded once.
//! * **One open call per identity** ([`one_open`]): a call `rpr gate` or `rpr call`
//!   proposed that may change something is not stored while an identical one (same server,
//!   same request) is open, whatever either's key, in any process on the database.

use serde_json::Value;

use super::check::{Finding, RawAttempt, Replay};
use super::event::{Event, Reading};
use super::replays::{Kept, Replays};
use super::rows::{EventRow, Finished, Move, NewAttempt, Rows, Stored};
use super::{ApprovalWrite, AttemptWrite, EventDraft, Grant, NewPathway, Step, StoreError, late};
use crate::ledger::{ProblemKind, chain_hash};
use crate::state::{AttemptStatus, State};

/// Refuses events that do not walk allowed edges from `start` to `end`.
pub(crate) fn walk_edges(
    start: State,
    events: &[EventDraft],
    end: State,
) -> Result<(), StoreError> {
    let mut at = start;
    for event in events {
        let from = event.from.unwrap_or(at);
        if from != at || (event.to != at && !at.allows(event.to)) {
            return Err(StoreError::IllegalEdge { from, to: event.to });
        }
        at = event.to;
    }
    if at != end {
        return Err(StoreError::IllegalEdge { from: at, to: end });
    }
    Ok(())
}

/// Refuses a step whose events do not walk allowed edges from the expected state to the
/// new one (one edge, or several in one step such as `proposed -> awaiting_approval ->
/// human_gate`).
pub(crate) fn check_edges(step: &Step) -> Result<(), StoreError> {
    walk_edges(
        step.expected_state,
        &step.events,
        step.to.unwrap_or(step.expected_state),
    )
}

/// Refuses a new pathway whose events do not start with the proposal and then walk allowed
/// edges to the stored state.
fn check_new_edges(state: State, events: &[EventDraft]) -> Result<(), StoreError> {
    match events.split_first() {
        Some((first, rest)) if first.from.is_none() && first.to == State::Proposed => {
            walk_edges(State::Proposed, rest, state)
        }
        _ => Err(StoreError::IllegalEdge {
            from: State::Proposed,
            to: state,
        }),
    }
}

/// A pathway as a step found it, after [`check_pathway`]: its row, what its events
/// establish, its attempts in order, and its last event (`seq`, `hash`).
pub(crate) struct Checked {
    pub(crate) stored: Stored,
    pub(crate) replay: Replay,
    pub(crate) attempts: Vec<RawAttempt>,
    pub(crate) last: Option<(i64, String)>,
}

/// Checks one pathway's rows against its own events (each event's own hash, the replay,
/// every row), inside whatever unit `rows` is. `Ok(None)` when there is no such pathway;
/// [`StoreError::Unexplained`] with the first finding when they disagree. With `lock`, the
/// pathway's row stays locked for the rest of the unit (see [`Rows::pathway`]).
///
/// With `replays`, the replay the pathway's previous step left is used instead of its
/// events when the stored version and the last stored event are the ones it was left
/// under ([`super::replays`]); the rows are compared with it either way.
pub(crate) fn check_pathway(
    rows: &mut impl Rows,
    id: &str,
    lock: bool,
    replays: Option<&Replays>,
) -> Result<Option<Checked>, StoreError> {
    let Some(stored) = rows.pathway(id, lock)? else {
        return Ok(None);
    };
    let mut findings = Vec::new();
    let (replay, last) = match replays.and_then(|r| r.take(id)) {
        Some(kept)
            if kept.version == stored.version
                && rows.last_event(id)?.as_ref() == Some(&kept.last) =>
        {
            replays.map(Replays::used);
            (kept.replay, Some(kept.last))
        }
        _ => replay_events(rows, id, &mut findings)?,
    };
    let attempts = rows.attempts(id)?;
    let approvals = rows.approvals(id)?;
    replay.check_rows(&stored.row, &attempts, &approvals, &mut findings);
    match findings.into_iter().next() {
        None => Ok(Some(Checked {
            stored,
            replay,
            attempts,
            last,
        })),
        Some((_, detail)) => Err(StoreError::Unexplained {
            pathway: id.to_owned(),
            detail,
        }),
    }
}

/// Reads, hashes and replays every event of the pathway: the replay and the last event.
fn replay_events(
    rows: &mut impl Rows,
    id: &str,
    findings: &mut Vec<Finding>,
) -> Result<(Replay, Option<(i64, String)>), StoreError> {
    let mut replay = Replay::default();
    let mut last = None;
    for row in rows.events(id)? {
        if chain_hash(&row.prev_hash, &row.text) != row.hash {
            findings.push((
                ProblemKind::HashMismatch,
                format!("event {}: stored hash does not match the event", row.seq),
            ));
            continue;
        }
        let event = match Event::read(&row.text) {
            // A step does not judge the spelling; `verify` reports it.
            Reading::Canonical(event) | Reading::NotCanonical(event) => event,
            Reading::NotJson(_) => {
                findings.push((
                    ProblemKind::Unreadable,
                    format!("event {} is not JSON", row.seq),
                ));
                continue;
            }
        };
        if event.pathway.as_deref() != Some(id) {
            findings.push((
                ProblemKind::Sequence,
                format!("event {} names another pathway", row.seq),
            ));
        }
        replay.event(&event, findings);
        last = Some((row.seq, row.hash));
    }
    Ok((replay, last))
}

/// Leaves the pathway's replay, with the events just `written` folded in, for its next
/// step ([`super::replays`]). Nothing is left if an event does not fold cleanly.
fn leave(
    replays: Option<&Replays>,
    pathway: &str,
    version: i64,
    mut replay: Replay,
    last: Option<(i64, String)>,
    written: &[EventRow],
) {
    let Some(replays) = replays else {
        return;
    };
    let mut findings = Vec::new();
    for row in written {
        let Reading::Canonical(event) = Event::read(&row.text) else {
            return;
        };
        replay.event(&event, &mut findings);
    }
    let last = written.last().map(|r| (r.seq, r.hash.clone())).or(last);
    if let (true, Some(last)) = (findings.is_empty(), last) {
        replays.keep(
            pathway,
            Kept {
                version,
                last,
                replay,
            },
        );
    }
}

/// Every state that is not terminal, quoted for SQL's `IN (…)`.
pub(crate) static OPEN_STATES: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    State::ALL
        .iter()
        .filter(|s| !s.is_terminal())
        .map(|s| format!("'{}'", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
});

/// The server a definition names (`metadata.server`) when its class is not `read_only`:
/// the identity, with the request digest, that [`one_open`] holds open calls to.
#[must_use]
pub(crate) fn changing_server(metadata: &Value, class: &Value) -> Option<String> {
    if class == "read_only" {
        return None;
    }
    metadata["server"].as_str().map(str::to_owned)
}

/// What [`NewPathway::one_open`] holds for a definition `rpr gate` proposed (its metadata
/// names the `gate` as well) for a call that may change something; `None` for any other.
#[must_use]
pub(crate) fn gate_one_open(metadata: &Value, class: &Value) -> Option<String> {
    let gate = &metadata["gate"];
    if gate["command"].is_array() || gate["in_process"].is_string() {
        changing_server(metadata, class)
    } else {
        None
    }
}

/// Refuses `new` while an identical call is open ([`StoreError::IdenticalOpen`]): for a
/// call held to one open call per identity ([`NewPathway::one_open`]: `rpr gate`'s and
/// `rpr call`'s calls that may change something), no pathway of the same server
/// (`metadata.server`) and request that may change something may be open. A gate looks
/// for one before it proposes, but that look proves nothing by the time it stores: another
/// process on the database (or a call of its own not stored yet) may store one in between,
/// under another idempotency key. This check is made in the unit that stores `new`, holding the ledger's
/// head (which every writing unit takes, SQLite's with the database's write lock), so no
/// identical call can be stored between the check and the insert.
pub(crate) fn one_open(rows: &mut impl Rows, new: &NewPathway) -> Result<(), StoreError> {
    let Some(server) = &new.one_open else {
        return Ok(());
    };
    rows.head()?;
    for (id, definition) in rows.open_with_request(&new.request_digest)? {
        // A stored definition that does not parse is no gate's call that can be matched:
        // it is reported by `rpr verify`, and does not hold this one.
        let Ok(stored) = serde_json::from_str::<Value>(&definition) else {
            continue;
        };
        if id != new.id
            && changing_server(&stored["metadata"], &stored["class"]).as_ref() == Some(server)
        {
            return Err(StoreError::IdenticalOpen {
                pathway: new.id.clone(),
                open: id,
            });
        }
    }
    Ok(())
}

/// A new pathway's row and its first events.
pub(crate) fn insert(
    rows: &mut impl Rows,
    new: &NewPathway,
    events: Vec<EventDraft>,
    replays: Option<&Replays>,
) -> Result<(), StoreError> {
    check_new_edges(new.state, &events)?;
    one_open(rows, new)?;
    rows.insert_pathway(new, new.at)?;
    let (_, written) = append_rows(rows, &new.id, new.at, events)?;
    leave(
        replays,
        &new.id,
        new.version,
        Replay::default(),
        None,
        &written,
    );
    Ok(())
}

/// A new pathway and its next `steps`, in one unit ([`super::Backend::apply_together`]); the
/// version after the last step.
///
/// When the steps are what a read's one commit is (the pathway's next steps in order, an
/// attempt started and then finished, no approval: [`settle`]), the rows are written once,
/// as the steps leave them: the pathway in its last state and version, the attempt already
/// finished, the events in one run of the chain. Nothing is stored of the pathway before
/// this unit, and the unit holds the write lock, so there are no stored rows for a step to
/// check against its chain: the steps are checked against each other instead (the same
/// edges, compare-and-set and at-most-once rules, in memory), and the rows written are the
/// ones the steps one after another would have left, with the same events. Anything else
/// is [`insert`] then [`apply_together`].
pub(crate) fn insert_together(
    rows: &mut impl Rows,
    new: &NewPathway,
    events: Vec<EventDraft>,
    steps: Vec<Step>,
    replays: Option<&Replays>,
) -> Result<i64, StoreError> {
    let Some(settled) = settle(new, &events, &steps)? else {
        insert(rows, new, events, replays)?;
        return apply_together(rows, steps, replays);
    };
    one_open(rows, new)?;
    let stored = NewPathway {
        state: settled.state,
        version: settled.version,
        ..new.clone()
    };
    rows.insert_pathway(&stored, settled.updated_at)?;
    let mut groups = vec![(new.at, events)];
    let mut started = None;
    let mut finished = None;
    for step in steps {
        match step.attempt {
            Some(write @ AttemptWrite::Start { .. }) => started = Some((write, step.at)),
            Some(AttemptWrite::Finish {
                status, outcome, ..
            }) => {
                finished = Some((status, outcome, step.at));
            }
            // Not in a unit that inserts its pathway (`settle` refuses it there).
            Some(AttemptWrite::TakeOver { .. }) | None => {}
        }
        groups.push((step.at, step.events));
    }
    if let Some((write, at)) = &started
        && let Some(attempt) = started_row(write, &new.id, *at)
    {
        match &finished {
            Some((status, outcome, at)) => rows.insert_finished_attempt(
                &attempt,
                &Finished {
                    status,
                    outcome: outcome.as_deref(),
                    at: *at,
                },
            )?,
            None => rows.insert_attempt(&attempt)?,
        }
    }
    let written = append_groups(rows, &new.id, groups)?;
    leave(
        replays,
        &new.id,
        settled.version,
        Replay::default(),
        None,
        &written,
    );
    Ok(settled.version)
}

/// The attempt row a step's `Start` writes for `pathway` at `at`; `None` for any other
/// attempt write.
fn started_row<'s>(write: &'s AttemptWrite, pathway: &'s str, at: i64) -> Option<NewAttempt<'s>> {
    let AttemptWrite::Start {
        id,
        seq,
        previous,
        request,
        request_digest,
        binding,
        binding_digest,
        owner,
        lease_ms,
        carrier,
    } = write
    else {
        return None;
    };
    Some(NewAttempt {
        id,
        pathway,
        seq: *seq,
        previous: previous.as_deref(),
        request,
        request_digest,
        binding,
        binding_digest,
        owner,
        lease_ms: *lease_ms,
        carrier: carrier.as_deref(),
        at,
    })
}

/// Where a new pathway's steps of one unit leave it, when they can be written at once.
struct Settled {
    state: State,
    version: i64,
    /// When the last step was taken.
    updated_at: i64,
}

/// Checks a new pathway's steps of one unit against each other, as [`apply_together`]
/// would against the rows each leaves: `Ok(Some)` when they can be written at once
/// ([`insert_together`]), `Ok(None)` when they need the step-by-step path (which then
/// refuses what is wrong with its usual error), `Err` for edges that are not allowed.
fn settle(
    new: &NewPathway,
    events: &[EventDraft],
    steps: &[Step],
) -> Result<Option<Settled>, StoreError> {
    check_new_edges(new.state, events)?;
    let mut state = new.state;
    let mut version = new.version;
    // The attempt started in this unit, and whether it has finished.
    let mut attempt: Option<(&str, bool)> = None;
    for (i, step) in steps.iter().enumerate() {
        check_edges(step)?;
        let fits = step.pathway == new.id
            && step.expected_state == state
            && (i > 0 || step.expected_version == version)
            && step.fence.definition_digest == new.definition_digest
            && step.fence.request_digest == new.request_digest
            && step.approval.is_none();
        if !fits {
            return Ok(None);
        }
        match (&step.attempt, attempt) {
            (None, _) => {}
            // The first attempt of a pathway that has none: at most once holds.
            (Some(AttemptWrite::Start { id, previous, .. }), None) if previous.is_none() => {
                attempt = Some((id, false));
            }
            // Its outcome, while it is in flight (never a late one).
            (Some(AttemptWrite::Finish { id, .. }), Some((started, false))) if id == started => {
                attempt = Some((started, true));
            }
            _ => return Ok(None),
        }
        state = step.to.unwrap_or(state);
        version += 1;
    }
    Ok(Some(Settled {
        state,
        version,
        updated_at: steps.last().map_or(new.at, |s| s.at),
    }))
}

/// `steps` in order, each after the first expecting the version the one before it left;
/// the version after the last. Every error, [`StoreError::Fenced`] too, must be rolled back
/// with the whole unit (see [`super::Backend::apply_together`]).
pub(crate) fn apply_together(
    rows: &mut impl Rows,
    steps: Vec<Step>,
    replays: Option<&Replays>,
) -> Result<i64, StoreError> {
    let mut version = None;
    for mut step in steps {
        if let Some(v) = version {
            step.expected_version = v;
        }
        version = Some(match apply(rows, step, replays) {
            // Not kept here: the attempt a late outcome would name was started in this
            // very unit, so this cannot happen; if it did, nothing of the unit is written.
            Err(StoreError::Fenced {
                pathway, attempt, ..
            }) => {
                return Err(StoreError::Corrupt(format!(
                    "pathway {pathway}: attempt {attempt} was fenced inside the unit that started it"
                )));
            }
            other => other?,
        });
    }
    version.ok_or_else(|| StoreError::Corrupt("a unit of no steps".to_owned()))
}

/// One step; the new version. A [`StoreError::Fenced`] refusal has written its record and
/// must be committed; every other error must be rolled back.
pub(crate) fn apply(
    rows: &mut impl Rows,
    step: Step,
    replays: Option<&Replays>,
) -> Result<i64, StoreError> {
    check_edges(&step)?;
    // The rows this step relies on must be the ones the chain explains.
    let Some(found) = check_pathway(rows, &step.pathway, true, replays)? else {
        return Err(StoreError::NoSuchPathway(step.pathway));
    };
    refuse_late_outcome(rows, &step, &found)?;
    let moved = rows.move_pathway(&Move {
        pathway: &step.pathway,
        from: step.expected_state,
        version: step.expected_version,
        definition_digest: &step.fence.definition_digest,
        request_digest: &step.fence.request_digest,
        to: step.to.unwrap_or(step.expected_state),
        at: step.at,
    })?;
    if !moved {
        return Err(StoreError::Conflict {
            pathway: step.pathway,
            expected: step.expected_state,
            version: step.expected_version,
        });
    }
    match &step.attempt {
        Some(write @ AttemptWrite::Start { previous, .. }) => {
            at_most_once(&step.pathway, &found.attempts, previous.as_deref())?;
            if let Some(row) = started_row(write, &step.pathway, step.at) {
                rows.insert_attempt(&row)?;
            }
        }
        Some(AttemptWrite::TakeOver {
            id,
            owner,
            lease_lapsed,
        }) => {
            taken_over(rows, &step, id, owner, *lease_lapsed)?;
            rows.finish_attempt(
                &step.pathway,
                id,
                AttemptStatus::Unknown.as_str(),
                None,
                step.at,
            )?;
        }
        Some(AttemptWrite::Finish {
            id,
            status,
            outcome,
        }) => rows
            .finish_attempt(&step.pathway, id, status, outcome.as_deref(), step.at)?
            .then_some(())
            .ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "attempt {id} of pathway {} is missing",
                    step.pathway
                ))
            })?,
        None => {}
    }
    match &step.approval {
        Some(ApprovalWrite::Use {
            ids,
            request_digest,
            not_before,
        }) => {
            for id in ids {
                let used = rows.use_approval(
                    &step.pathway,
                    id,
                    request_digest,
                    not_before.unwrap_or(i64::MIN),
                    step.at,
                )?;
                if !used {
                    return Err(StoreError::ApprovalUnusable(id.clone()));
                }
            }
        }
        Some(ApprovalWrite::RevokeOutstanding) => rows.revoke_approvals(&step.pathway, step.at)?,
        None => {}
    }
    let version = step.expected_version + 1;
    let (_, written) = append_rows(rows, &step.pathway, step.at, step.events)?;
    leave(
        replays,
        &step.pathway,
        version,
        found.replay,
        found.last,
        &written,
    );
    Ok(version)
}

/// At most once (brief §11): a new attempt only after the previous one certainly did not
/// take effect, whatever the caller's handle says. `attempts` are the pathway's, in order.
/// A takeover judged again inside its unit ([`AttemptWrite::TakeOver`]): the attempt is
/// still in flight under `owner` and, when the owner was not proven gone, its lease has
/// lapsed by the database's clock now. A lease with no end is a damaged row, never lapsed.
fn taken_over(
    rows: &mut impl Rows,
    step: &Step,
    id: &str,
    owner: &str,
    lease_lapsed: bool,
) -> Result<(), StoreError> {
    let lease = rows.lease(&step.pathway, id)?.ok_or_else(|| {
        StoreError::Corrupt(format!(
            "attempt {id} of pathway {} is missing",
            step.pathway
        ))
    })?;
    if lease.status != AttemptStatus::InFlight.as_str() || lease.owner.as_deref() != Some(owner) {
        return Err(StoreError::Conflict {
            pathway: step.pathway.clone(),
            expected: step.expected_state,
            version: step.expected_version,
        });
    }
    if lease_lapsed {
        let lease_until = lease
            .lease_until
            .ok_or_else(|| StoreError::Corrupt(format!("in-flight attempt {id} has no lease")))?;
        if lease_until >= lease.now {
            return Err(StoreError::LeaseHeld {
                pathway: step.pathway.clone(),
                attempt: id.to_owned(),
                lease_until,
                now: lease.now,
            });
        }
    }
    Ok(())
}

fn at_most_once(
    pathway: &str,
    attempts: &[RawAttempt],
    previous: Option<&str>,
) -> Result<(), StoreError> {
    match (attempts.last(), previous) {
        (None, None) => Ok(()),
        (Some(last), Some(prev))
            if last.id == prev
                && last
                    .status
                    .parse::<AttemptStatus>()
                    .is_ok_and(AttemptStatus::is_settled) =>
        {
            Ok(())
        }
        (Some(last), _) => Err(StoreError::UnsettledAttempt {
            pathway: pathway.to_owned(),
            attempt: last.id.clone(),
            status: last.status.clone(),
        }),
        (None, Some(prev)) => Err(StoreError::Unexplained {
            pathway: pathway.to_owned(),
            detail: format!("the previous attempt {prev} does not exist"),
        }),
    }
}

/// Refuses a dispatch outcome for an attempt no longer in flight, recording the refusal
/// ([`super::late`]): the event is written and [`StoreError::Fenced`] returned.
fn refuse_late_outcome(
    rows: &mut impl Rows,
    step: &Step,
    found: &Checked,
) -> Result<(), StoreError> {
    let Some(late) = late::dispatch_outcome(step) else {
        return Ok(());
    };
    // An attempt this pathway never had: refused, and nothing recorded (an event naming it
    // would leave the pathway's chain unexplained).
    let now = found
        .attempts
        .iter()
        .find(|a| a.id == late.attempt)
        .map(|a| a.status.clone())
        .ok_or_else(|| {
            StoreError::Corrupt(format!(
                "attempt {} of pathway {} is missing",
                late.attempt, step.pathway
            ))
        })?;
    if now == AttemptStatus::InFlight.as_str() {
        return Ok(());
    }
    let event = late::refusal_event(step, &found.stored.row.state, &late, &now)?;
    rows.bump_version(&step.pathway, step.at)?;
    let recorded_seq = append(rows, &step.pathway, step.at, vec![event])?;
    Err(StoreError::Fenced {
        pathway: step.pathway.clone(),
        attempt: late.attempt.to_owned(),
        status: now,
        recorded_seq,
    })
}

/// Records a granted approval (and its ledger event) without changing state, provided the
/// pathway is still in `expected` at `version` with the fence's digests.
pub(crate) fn grant(
    rows: &mut impl Rows,
    grant: Grant,
    replays: Option<&Replays>,
) -> Result<(), StoreError> {
    let Some(found) = check_pathway(rows, &grant.pathway, true, replays)? else {
        return Err(StoreError::NoSuchPathway(grant.pathway));
    };
    // Fenced like every step: a stale handle must not record a grant for a stage the
    // pathway left.
    let row = &found.stored.row;
    if row.state != grant.expected.as_str()
        || found.stored.version != grant.version
        || row.definition_digest != grant.fence.definition_digest
        || row.request_digest != grant.fence.request_digest
    {
        return Err(StoreError::Conflict {
            pathway: grant.pathway,
            expected: grant.expected,
            version: grant.version,
        });
    }
    rows.insert_approval(
        &grant.pathway,
        &grant.id,
        &grant.request_digest,
        &grant.approver,
        grant.at,
    )?;
    let (_, written) = append_rows(rows, &grant.pathway, grant.at, vec![grant.event])?;
    leave(
        replays,
        &grant.pathway,
        found.stored.version,
        found.replay,
        found.last,
        &written,
    );
    Ok(())
}

/// The canonical bytes of ledger event `seq` (format `v: 2`), the same on every store.
pub(crate) fn event_text(
    seq: i64,
    at: i64,
    pathway: &str,
    draft: EventDraft,
) -> Result<String, StoreError> {
    // The members moved in, not copied: `json!` serializes each value it is given, which
    // copied the event's data (the largest part) a second time.
    let text = |s: &str| Value::String(s.to_owned());
    let mut event = serde_json::Map::with_capacity(11);
    event.insert("v".into(), Value::from(2));
    event.insert("seq".into(), Value::from(seq));
    event.insert("at".into(), Value::from(at));
    event.insert("pathway".into(), text(pathway));
    event.insert("kind".into(), text(draft.kind.as_str()));
    event.insert("actor".into(), Value::String(draft.actor));
    event.insert(
        "from".into(),
        draft.from.map_or(Value::Null, |s| text(s.as_str())),
    );
    event.insert("to".into(), text(draft.to.as_str()));
    event.insert(
        "attempt".into(),
        draft.attempt.map_or(Value::Null, Value::String),
    );
    event.insert(
        "attempt_status".into(),
        draft.attempt_status.map_or(Value::Null, text),
    );
    event.insert("data".into(), draft.data);
    crate::canonical::to_string(&Value::Object(event))
        .map_err(|e| StoreError::Corrupt(format!("event: {e}")))
}

/// Appends `events` of `pathway`, chained to the head, and records the new head once.
/// Returns the `seq` of the last event (the head's, when there are none).
pub(crate) fn append(
    rows: &mut impl Rows,
    pathway: &str,
    at: i64,
    events: Vec<EventDraft>,
) -> Result<i64, StoreError> {
    Ok(append_rows(rows, pathway, at, events)?.0)
}

/// [`append`], returning the rows written as well.
fn append_rows(
    rows: &mut impl Rows,
    pathway: &str,
    at: i64,
    events: Vec<EventDraft>,
) -> Result<(i64, Vec<EventRow>), StoreError> {
    if events.is_empty() {
        return Ok((rows.head()?.0, Vec::new()));
    }
    let written = append_groups(rows, pathway, vec![(at, events)])?;
    Ok((written.last().map_or(0, |r| r.seq), written))
}

/// Appends groups of events of `pathway`, each group at its own time, chained to the head
/// in order, and records the new head once: the rows written.
fn append_groups(
    rows: &mut impl Rows,
    pathway: &str,
    groups: Vec<(i64, Vec<EventDraft>)>,
) -> Result<Vec<EventRow>, StoreError> {
    let (mut seq, mut prev) = rows.head()?;
    let mut chained = Vec::with_capacity(groups.iter().map(|(_, g)| g.len()).sum());
    for (at, events) in groups {
        for draft in events {
            seq += 1;
            let text = event_text(seq, at, pathway, draft)?;
            let hash = chain_hash(&prev, &text);
            chained.push(EventRow {
                seq,
                text,
                prev_hash: std::mem::replace(&mut prev, hash.clone()),
                hash,
            });
        }
    }
    rows.append_events(pathway, &chained)?;
    Ok(chained)
}

#[cfg(test)]
mod tests;
