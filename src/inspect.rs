//! The read model for inspection: plain, serializable views built from a [`ReadStore`].
//!
//! This is what the `rpr-mcp` inspection server returns, and what a host that
//! shows pathways to people can reuse. Everything here only reads: every
//! function takes a [`ReadStore`] (open it with [`ReadStore::open_read_only`])
//! and returns plain data with no way back into a pathway stage.
//!
//! * [`status`]: schema version, counts by state, unresolved count, ledger head.
//!   Never a filesystem path.
//! * [`list_pathways`] and [`list_unresolved`]: pages of [`PathwaySummary`].
//! * [`pathway`]: one [`PathwayDetail`], with its attempts and bindings.
//! * [`evidence`]: a page of one pathway's ledger events, each checked against
//!   its own hash and its link into the global chain ([`EvidencePage`] says
//!   exactly what is checked).
//! * [`next_action`]: who must act next, from the state and the authority.
//!
//! Each answer (a status, a page, a detail with its attempts and who acts next, a
//! page of evidence with its links and the ledger head) is read in one snapshot
//! ([`ReadStore::snapshot`]): a writer committing meanwhile is either wholly in it
//! or not at all.
//!
//! # Pages and sizes
//!
//! Pages hold at most `limit` items ([`DEFAULT_LIMIT`] by default, at most
//! [`MAX_LIMIT`]) **and** at most [`PAGE_BUDGET_BYTES`] of serialized JSON: a
//! page that would grow past the budget ends early and its `next_cursor` points
//! after the last item it holds. A single value too large for any page is
//! replaced by a truncation marker ([`truncation_marker`], the shape stored
//! evidence uses too, with reason `value_budget_bytes` or `page_budget_bytes`). Cursors are
//! opaque strings bound to the listing (and filter) that issued them; any other
//! string is refused with [`InspectError::InvalidCursor`].

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::evidence::truncation_marker;
use crate::ledger;
use crate::pathway::{Act, Authority, Role};
use crate::state::{AttemptStatus, State};
use crate::store::{AttemptRecord, LedgerRow, PathwayRecord, ReadStore, StoreError};

/// Page size when the caller gives none.
pub const DEFAULT_LIMIT: usize = 50;

/// Largest page size a caller may ask for.
pub const MAX_LIMIT: usize = 500;

/// Largest serialized size of one page or one pathway detail (3 MiB).
///
/// An MCP result carries the value twice (as `structuredContent` and as a JSON
/// text copy, whose escaping can at most double it), so 3 MiB keeps every
/// response under 10 MiB, the limit common clients enforce.
pub const PAGE_BUDGET_BYTES: usize = 3 * 1024 * 1024;

/// Values inside an oversized pathway detail larger than this (64 KiB) are
/// replaced by a truncation marker.
pub const VALUE_BUDGET_BYTES: usize = 64 * 1024;

/// Strings in a [`PathwaySummary`] are clipped to this many bytes (4 KiB).
pub const SUMMARY_STRING_BYTES: usize = 4096;

/// Longest pathway id accepted by [`pathway`] and [`evidence`].
pub const MAX_ID_BYTES: usize = 4096;

/// Why an inspection call could not answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InspectError {
    /// No pathway has this id.
    #[error("no pathway with id {0:?}; list pathways to see the ids")]
    NotFound(String),
    /// An argument is out of range or malformed.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The cursor was not issued by this listing with this filter.
    #[error(
        "invalid cursor: pass the next_cursor of the previous page of the same listing, unchanged"
    )]
    InvalidCursor,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl InspectError {
    /// A stable, machine-readable code: `pathway_not_found`, `invalid_argument`,
    /// `invalid_cursor` or `store_error`.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            InspectError::NotFound(_) => "pathway_not_found",
            InspectError::InvalidArgument(_) => "invalid_argument",
            InspectError::InvalidCursor => "invalid_cursor",
            InspectError::Store(_) => "store_error",
        }
    }
}

// ---------------------------------------------------------------------------
// Who must act next
// ---------------------------------------------------------------------------

/// One step someone may take on a pathway: the action, the roles that may take
/// it, and the actors holding those roles.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Alternative {
    /// A stable snake_case action name (`admit`, `approve_or_deny`, `dispatch`, …).
    pub action: &'static str,
    /// The roles that may take it (any one of them).
    pub roles: Vec<Role>,
    /// The actors holding those roles, in role order, without repeats. Empty
    /// when the definition's authority could not be read.
    pub actors: Vec<String>,
}

/// Who must act next on a pathway, and what else may happen instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct NextAction {
    /// The expected action: `admit`, `approve_or_deny`, `dispatch`, `wait`,
    /// `confirm_by_readback`, `reconcile`, `repair`, `resume`, `require_repair`,
    /// `release_or_escalate`, or `none` (terminal).
    pub action: &'static str,
    /// The roles that may take it (any one of them); empty for `wait` and `none`.
    pub roles: Vec<Role>,
    /// The actors holding those roles, in role order, without repeats.
    pub actors: Vec<String>,
    /// One sentence for people.
    pub detail: &'static str,
    /// Other steps the state machine allows from here (hold, stop, escalate, abort).
    pub alternatives: Vec<Alternative>,
}

fn actors_for(roles: &[Role], authority: Option<&Authority>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if let Some(a) = authority {
        for r in roles {
            let name = a.holder(*r).as_str();
            if !out.iter().any(|n| n == name) {
                out.push(name.to_owned());
            }
        }
    }
    out
}

/// The roles that may take any of `acts` ([`Act::roles`]), in order, without repeats.
fn roles_for(acts: &[Act]) -> Vec<Role> {
    let mut out: Vec<Role> = Vec::new();
    for role in acts.iter().flat_map(|a| a.roles()) {
        if !out.contains(role) {
            out.push(*role);
        }
    }
    out
}

/// Who must act next on a pathway in `state`.
///
/// `last_attempt_status` is the status of the pathway's newest attempt (it
/// decides between `wait` and `confirm_by_readback` in `running`); `authority`
/// is the definition's authority (see [`authority_of`]), used to name the
/// actors. The roles are those [`Act::roles`] gives the steps named here, the
/// table every transition checks. The mapping:
///
/// | state | action (steps) | roles | alternatives |
/// |---|---|---|---|
/// | `proposed` | `admit` | decision_owner | |
/// | `awaiting_approval` | `approve_or_deny` | approval_authority | `escalate` by stop_authority |
/// | `human_gate` | `approve_or_deny` | approval_authority | `abort` by residual_owner |
/// | `approved` | `dispatch` (bind, then dispatch) | execution_actor | `hold` by stop_authority, `abort` by residual_owner |
/// | `running`, last attempt `returned` | `confirm_by_readback` | execution_actor, evidence_owner | `stop` by stop_authority |
/// | `running`, otherwise | `wait` | | |
/// | `write_status_unknown` | `reconcile` (by readback, or attest) | evidence_owner, repair_owner | |
/// | `repair_required`, last attempt `not_sent`, `failed`, `not_applied` or none | `repair` | repair_owner | `abort` by residual_owner |
/// | `repair_required`, last attempt replied (`returned`, `partial`) | `reconcile` | evidence_owner, repair_owner | `abort` by residual_owner |
/// | `ready_to_resume` | `resume` | execution_actor, resume_authority | `abort` by residual_owner |
/// | `stopped` | `require_repair` | repair_owner | `abort` by residual_owner |
/// | `partially_completed` | `require_repair` | repair_owner | |
/// | `held` | `release_or_escalate` | stop_authority | `abort` by residual_owner |
/// | `completed`, `denied`, `aborted` | `none` | | |
#[must_use]
pub fn next_action(
    state: State,
    last_attempt_status: Option<AttemptStatus>,
    authority: Option<&Authority>,
) -> NextAction {
    let (action, acts, detail, others): (&'static str, &[Act], &'static str, &[Act]) = match state {
        State::Proposed => (
            "admit",
            &[Act::Admit],
            "admit or deny the proposal under the admission policy",
            &[],
        ),
        State::AwaitingApproval => (
            "approve_or_deny",
            &[Act::Approve, Act::Deny],
            "grant an approval for this exact request, or deny it",
            &[Act::Escalate],
        ),
        State::HumanGate => (
            "approve_or_deny",
            &[Act::Approve, Act::Deny],
            "a human decision is needed: approve this exact request, or deny it",
            &[Act::Abort],
        ),
        State::Approved => (
            "dispatch",
            &[Act::Dispatch],
            "bind the request to its target and dispatch it",
            &[Act::Hold, Act::Abort],
        ),
        State::Running if last_attempt_status == Some(AttemptStatus::Returned) => (
            "confirm_by_readback",
            &[Act::Confirm],
            "the target replied; confirm the effect by independent readback",
            &[Act::Stop],
        ),
        State::Running => (
            "wait",
            &[],
            "an attempt is in flight; wait for its outcome (recovery marks it write_status_unknown if its owner is gone)",
            &[],
        ),
        State::WriteStatusUnknown => (
            "reconcile",
            &[Act::Attest],
            "the effect may or may not have happened: reconcile by independent readback, or attest a verdict",
            &[],
        ),
        State::RepairRequired if last_attempt_status.is_some_and(|s| !s.is_settled()) => (
            "reconcile",
            &[Act::Attest],
            "the last attempt replied and may have taken effect: only a not-applied verdict (readback or attestation) makes it repairable",
            &[Act::Abort],
        ),
        State::RepairRequired => (
            "repair",
            &[Act::Repair],
            "repair the failed attempt, then the pathway may resume",
            &[Act::Abort],
        ),
        State::ReadyToResume => (
            "resume",
            &[Act::Resume],
            "bind and dispatch a new attempt",
            &[Act::Abort],
        ),
        State::Stopped => (
            "require_repair",
            &[Act::RequireRepair],
            "stopped after the target answered: send it to repair",
            &[Act::Abort],
        ),
        State::PartiallyCompleted => (
            "require_repair",
            &[Act::RequireRepair],
            "only part of the effect happened: send it to repair",
            &[],
        ),
        State::Held => (
            "release_or_escalate",
            &[Act::Release, Act::Escalate],
            "held: release the hold, or escalate to a Human Gate",
            &[Act::Abort],
        ),
        State::Completed | State::Denied | State::Aborted => {
            ("none", &[], "terminal: nothing more happens", &[])
        }
    };
    let roles = roles_for(acts);
    NextAction {
        action,
        actors: actors_for(&roles, authority),
        roles,
        detail,
        alternatives: others
            .iter()
            .map(|&act| {
                let roles = roles_for(&[act]);
                Alternative {
                    action: act.name(),
                    actors: actors_for(&roles, authority),
                    roles,
                }
            })
            .collect(),
    }
}

/// The authority of a stored (redacted) definition, if it can be read.
#[must_use]
pub fn authority_of(definition: &Value) -> Option<Authority> {
    serde_json::from_value(definition.get("authority")?.clone()).ok()
}

fn next_for(store: &ReadStore, record: &PathwayRecord) -> Result<NextAction, StoreError> {
    let last_status = if matches!(record.state, State::Running | State::RepairRequired) {
        store.attempts(&record.id)?.pop().map(|a| a.status)
    } else {
        None
    };
    Ok(next_action(
        record.state,
        last_status,
        authority_of(&record.definition).as_ref(),
    ))
}

// ---------------------------------------------------------------------------
// Status
// ---------------------------------------------------------------------------

/// Database-wide figures. Holds no filesystem path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StatusView {
    /// Always `read_only`.
    pub mode: &'static str,
    /// Schema version of the file.
    pub schema_version: i64,
    /// Pathways per state, every state present (zero included).
    pub counts: BTreeMap<String, i64>,
    /// Pathways in a non-terminal state.
    pub unresolved_count: i64,
    /// Number of ledger events.
    pub ledger_length: i64,
    /// Hash of the newest ledger event, `null` when the ledger is empty.
    pub ledger_head: Option<String>,
}

/// Database-wide figures.
pub fn status(store: &ReadStore) -> Result<StatusView, InspectError> {
    let s = store.status()?;
    Ok(StatusView {
        mode: "read_only",
        schema_version: s.schema_version,
        counts: s.counts,
        unresolved_count: s.unresolved,
        ledger_length: s.ledger_len,
        ledger_head: s.ledger_head,
    })
}

// ---------------------------------------------------------------------------
// Lists
// ---------------------------------------------------------------------------

/// A pathway in a list: identity, state and who must act next (no definition).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PathwaySummary {
    /// Pathway id.
    pub pathway_id: String,
    /// Current state.
    pub state: State,
    /// The request's action name (for MCP: the tool), if the definition has one.
    pub action: Option<String>,
    /// `read_only` or `mutating`, if the definition says.
    pub class: Option<String>,
    /// Who proposed it.
    pub proposer: String,
    /// Compare-and-set version: 1 when proposed, one more per recorded step (granting
    /// an approval does not count).
    pub version: i64,
    /// Created, ms since the epoch.
    pub created_at: i64,
    /// Last changed, ms since the epoch.
    pub updated_at: i64,
    /// Who must act next.
    pub next: NextAction,
    /// Whether a string above was clipped to [`SUMMARY_STRING_BYTES`].
    pub clipped: bool,
}

/// A page of pathways.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct PathwayPage {
    /// The pathways, ordered by id.
    pub pathways: Vec<PathwaySummary>,
    /// Pass this back to get the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

fn clip(s: &str, clipped: &mut bool) -> String {
    if s.len() <= SUMMARY_STRING_BYTES {
        return s.to_owned();
    }
    *clipped = true;
    let mut end = SUMMARY_STRING_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[clipped]", &s[..end])
}

fn summary(store: &ReadStore, record: &PathwayRecord) -> Result<PathwaySummary, StoreError> {
    let mut clipped = false;
    let action = record
        .definition
        .pointer("/request/action")
        .and_then(Value::as_str)
        .map(|a| clip(a, &mut clipped));
    let class = record
        .definition
        .get("class")
        .and_then(Value::as_str)
        .map(|c| clip(c, &mut clipped));
    Ok(PathwaySummary {
        pathway_id: clip(&record.id, &mut clipped),
        state: record.state,
        action,
        class,
        proposer: clip(&record.proposer, &mut clipped),
        version: record.version,
        created_at: record.created_at,
        updated_at: record.updated_at,
        next: next_for(store, record)?,
        clipped,
    })
}

fn check_limit(limit: usize) -> Result<usize, InspectError> {
    if (1..=MAX_LIMIT).contains(&limit) {
        Ok(limit)
    } else {
        Err(InspectError::InvalidArgument(format!(
            "limit must be an integer from 1 to {MAX_LIMIT}, got {limit}"
        )))
    }
}

fn json_len<T: Serialize>(v: &T) -> usize {
    serde_json::to_vec(v).map_or(usize::MAX, |b| b.len())
}

/// Builds a page of summaries under the size budget. `rows` holds up to
/// `limit + 1` records; the extra one only says that more exist.
fn summary_page(
    store: &ReadStore,
    rows: Vec<PathwayRecord>,
    limit: usize,
    kind: &str,
    filter: &str,
) -> Result<PathwayPage, InspectError> {
    let more = rows.len() > limit;
    let mut pathways = Vec::new();
    let mut used = 64;
    let mut last_id: Option<String> = None;
    let mut cut = false;
    for record in rows.iter().take(limit) {
        let s = summary(store, record)?;
        let size = json_len(&s) + 1;
        if !pathways.is_empty() && used + size > PAGE_BUDGET_BYTES {
            cut = true;
            break;
        }
        used += size;
        pathways.push(s);
        last_id = Some(record.id.clone());
    }
    let next_cursor = if more || cut {
        last_id.map(|id| encode_cursor(kind, filter, &id))
    } else {
        None
    };
    Ok(PathwayPage {
        pathways,
        next_cursor,
    })
}

/// A page of pathways ordered by id, optionally only those in `state`.
///
/// `cursor` is the `next_cursor` of the previous page of this same listing
/// (with the same `state`).
pub fn list_pathways(
    store: &ReadStore,
    state: Option<State>,
    limit: usize,
    cursor: Option<&str>,
) -> Result<PathwayPage, InspectError> {
    let limit = check_limit(limit)?;
    let filter = state.map_or("", State::as_str);
    let after = cursor
        .map(|c| decode_cursor(c, "pathways", filter))
        .transpose()?;
    store.snapshot(|store| {
        let rows = store.list_pathways(after.as_deref(), limit + 1, state)?;
        summary_page(store, rows, limit, "pathways", filter)
    })
}

/// A page of pathways in a non-terminal state, ordered by id, each with who must act next.
pub fn list_unresolved(
    store: &ReadStore,
    limit: usize,
    cursor: Option<&str>,
) -> Result<PathwayPage, InspectError> {
    let limit = check_limit(limit)?;
    let after = cursor
        .map(|c| decode_cursor(c, "unresolved", ""))
        .transpose()?;
    store.snapshot(|store| {
        let rows = store.list_unresolved(after.as_deref(), limit + 1)?;
        summary_page(store, rows, limit, "unresolved", "")
    })
}

// ---------------------------------------------------------------------------
// One pathway
// ---------------------------------------------------------------------------

/// An attempt with its binding: the stored record, which serializes with its id as
/// `attempt_id` and without the pathway id (see [`AttemptRecord`]).
pub type AttemptView = AttemptRecord;

/// One pathway: definition, state, attempts and who must act next.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct PathwayDetail {
    /// Pathway id.
    pub pathway_id: String,
    /// The caller's idempotency key.
    pub idempotency_key: String,
    /// Current state.
    pub state: State,
    /// Compare-and-set version.
    pub version: i64,
    /// Who proposed it.
    pub proposer: String,
    /// Created, ms since the epoch.
    pub created_at: i64,
    /// Last changed, ms since the epoch.
    pub updated_at: i64,
    /// sha256 of the unredacted request.
    pub request_digest: String,
    /// The stored definition, redacted by key name when it was proposed.
    pub definition: Value,
    /// Attempts, oldest first (the oldest may be omitted, see `omitted_attempts`).
    pub attempts: Vec<AttemptView>,
    /// Who must act next.
    pub next: NextAction,
    /// Whether values were replaced by truncation markers to fit the size budget.
    pub truncated: bool,
    /// How many of the oldest attempts were left out to fit the size budget.
    pub omitted_attempts: usize,
}

/// Replaces `v` with a [`truncation_marker`] (reason `value_budget_bytes`) when it is
/// larger than [`VALUE_BUDGET_BYTES`].
fn shrink(v: &mut Value, truncated: &mut bool) {
    if json_len(v) > VALUE_BUDGET_BYTES {
        *v = truncation_marker(v, "value_budget_bytes");
        *truncated = true;
    }
}

fn validate_id(id: &str) -> Result<(), InspectError> {
    if id.is_empty() || id.len() > MAX_ID_BYTES {
        return Err(InspectError::InvalidArgument(format!(
            "pathway_id must be a non-empty string of at most {MAX_ID_BYTES} bytes"
        )));
    }
    Ok(())
}

/// One pathway with its attempts and bindings, and who must act next.
///
/// When the whole detail would exceed [`PAGE_BUDGET_BYTES`], values larger
/// than [`VALUE_BUDGET_BYTES`] (definition, attempt requests, bindings,
/// outcomes) are replaced by [`truncation_marker`]s (reason `value_budget_bytes`)
/// and, if that is not enough,
/// the oldest attempts are left out (`omitted_attempts`).
pub fn pathway(store: &ReadStore, id: &str) -> Result<PathwayDetail, InspectError> {
    validate_id(id)?;
    let (record, attempts) = store.snapshot(|store| {
        let record = store
            .pathway(id)?
            .ok_or_else(|| InspectError::NotFound(id.to_owned()))?;
        let attempts = store.attempts(id)?;
        Ok::<_, InspectError>((record, attempts))
    })?;
    let last_status = attempts.last().map(|a| a.status);
    let authority = authority_of(&record.definition);
    let mut detail = PathwayDetail {
        next: next_action(record.state, last_status, authority.as_ref()),
        pathway_id: record.id,
        idempotency_key: record.idempotency_key,
        state: record.state,
        version: record.version,
        proposer: record.proposer,
        created_at: record.created_at,
        updated_at: record.updated_at,
        request_digest: record.request_digest,
        definition: record.definition,
        attempts,
        truncated: false,
        omitted_attempts: 0,
    };
    if json_len(&detail) > PAGE_BUDGET_BYTES {
        let mut t = false;
        shrink(&mut detail.definition, &mut t);
        for a in &mut detail.attempts {
            shrink(&mut a.request, &mut t);
            shrink(&mut a.binding, &mut t);
            if let Some(o) = a.outcome.as_mut() {
                shrink(o, &mut t);
            }
        }
        detail.truncated = t;
        while json_len(&detail) > PAGE_BUDGET_BYTES && !detail.attempts.is_empty() {
            detail.attempts.remove(0);
            detail.omitted_attempts += 1;
            detail.truncated = true;
        }
    }
    Ok(detail)
}

// ---------------------------------------------------------------------------
// Evidence
// ---------------------------------------------------------------------------

/// One ledger event of a pathway.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct EventView {
    /// Position in the global chain, from 1.
    pub seq: i64,
    /// sha256 over the previous hash and this event's stored text.
    pub hash: String,
    /// The hash of the previous event in the global chain.
    pub prev_hash: String,
    /// The event, parsed (or a truncation marker if it alone exceeds the page budget,
    /// or the stored text as a string if it is not JSON).
    pub event: Value,
    /// Whether this event passed every check described on [`EvidencePage`].
    pub verified: bool,
}

/// A problem found while checking a page of events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ChainProblem {
    /// The event's position in the global chain.
    pub seq: i64,
    /// What is wrong.
    pub problem: String,
}

/// A page of one pathway's ledger events and what checking them showed.
///
/// # What `chain_verified` means
///
/// For **each event on this page**, and nothing else:
///
/// 1. its stored `hash` equals [`ledger::chain_hash`]`(prev_hash, stored text)`,
///    so the text and the link were not changed without recomputing the hash;
/// 2. its `prev_hash` equals the `hash` of the event at `seq - 1` in the global
///    chain (or [`ledger::GENESIS`] for `seq` 1), so it is linked into the chain
///    (one primary-key lookup per event);
/// 3. its text is JSON in canonical form whose own `seq` and `pathway` agree
///    with the row.
///
/// These are the checks [`ledger::verify`] makes of every row of the chain (one
/// function serves both). `chain_verified` is true when every event on the page
/// passes. It does **not** check events on other pages or of other pathways, that
/// the transitions are legal, that the stored state agrees
/// with the events, or that the chain was not cut and re-hashed from some point
/// on (compare `ledger_head` with a head kept elsewhere for that). The full check
/// is [`ledger::verify`], whose cost grows with the whole ledger.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct EvidencePage {
    /// The pathway.
    pub pathway_id: String,
    /// Its events on this page, oldest first.
    pub events: Vec<EventView>,
    /// Pass this back to get the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Whether every event on this page passed the checks above.
    pub chain_verified: bool,
    /// How many events were checked (the events on this page).
    pub checked_events: usize,
    /// What failed, if anything.
    pub problems: Vec<ChainProblem>,
    /// Number of events in the whole ledger.
    pub ledger_length: i64,
    /// Hash of the newest event in the whole ledger.
    pub ledger_head: Option<String>,
}

/// What [`ledger::check_row`] finds wrong with one event of a page, linked to the event
/// before it in the chain (`prev` when that is the previous row of the page).
fn check_event(
    store: &ReadStore,
    row: &LedgerRow,
    prev: Option<&LedgerRow>,
) -> Result<Vec<String>, StoreError> {
    let expected_prev = if row.seq <= 1 {
        Some(ledger::GENESIS.to_owned())
    } else if let Some(p) = prev.filter(|p| p.seq == row.seq - 1) {
        Some(p.hash.clone())
    } else {
        store
            .ledger(row.seq - 2, 1)?
            .into_iter()
            .find(|r| r.seq == row.seq - 1)
            .map(|r| r.hash)
    };
    let stored = ledger::StoredRow {
        seq: row.seq,
        pathway: &row.pathway_id,
        prev_hash: row.prev_hash.as_bytes(),
        hash: row.hash.as_bytes(),
        text: row.event.as_bytes(),
    };
    let mut found = Vec::new();
    let _event = ledger::check_row(
        &stored,
        expected_prev.as_deref().map(str::as_bytes),
        &mut found,
    );
    Ok(found.into_iter().map(|(_, problem)| problem).collect())
}

/// A page of one pathway's ledger events, oldest first, each checked (see
/// [`EvidencePage`] for exactly what is checked).
pub fn evidence(
    store: &ReadStore,
    id: &str,
    limit: usize,
    cursor: Option<&str>,
) -> Result<EvidencePage, InspectError> {
    validate_id(id)?;
    let limit = check_limit(limit)?;
    let after = match cursor {
        Some(c) => decode_cursor(c, "evidence", id)?
            .parse::<i64>()
            .map_err(|_| InspectError::InvalidCursor)?,
        None => 0,
    };
    store.snapshot(|store| {
        if store.pathway(id)?.is_none() {
            return Err(InspectError::NotFound(id.to_owned()));
        }
        let rows = store.events(id, after, limit + 1)?;
        let more = rows.len() > limit;
        let mut events = Vec::new();
        let mut problems = Vec::new();
        let mut used = 512;
        let mut cut = false;
        let mut prev: Option<&LedgerRow> = None;
        for row in rows.iter().take(limit) {
            let found = check_event(store, row, prev)?;
            prev = Some(row);
            let event = serde_json::from_str::<Value>(&row.event)
                .unwrap_or_else(|_| Value::String(row.event.clone()));
            let mut view = EventView {
                seq: row.seq,
                hash: row.hash.clone(),
                prev_hash: row.prev_hash.clone(),
                event,
                verified: found.is_empty(),
            };
            let mut size = json_len(&view) + 1;
            if size + 512 > PAGE_BUDGET_BYTES {
                view.event = truncation_marker(&view.event, "page_budget_bytes");
                size = json_len(&view) + 1;
            }
            if !events.is_empty() && used + size > PAGE_BUDGET_BYTES {
                cut = true;
                break;
            }
            used += size;
            problems.extend(found.into_iter().map(|problem| ChainProblem {
                seq: row.seq,
                problem,
            }));
            events.push(view);
        }
        let next_cursor = if more || cut {
            events
                .last()
                .map(|e| encode_cursor("evidence", id, &e.seq.to_string()))
        } else {
            None
        };
        let head = store.ledger_head()?;
        Ok(EvidencePage {
            pathway_id: id.to_owned(),
            checked_events: events.len(),
            chain_verified: problems.is_empty(),
            events,
            next_cursor,
            problems,
            ledger_length: head.as_ref().map_or(0, |h| h.0),
            ledger_head: head.map(|h| h.1),
        })
    })
}

// ---------------------------------------------------------------------------
// Cursors
// ---------------------------------------------------------------------------

const CURSOR_PREFIX: &str = "rpr1.";

/// An opaque cursor: the listing, its filter and the last key, hex-encoded.
fn encode_cursor(kind: &str, filter: &str, after: &str) -> String {
    let text = format!("{kind}\n{filter}\n{after}");
    format!("{CURSOR_PREFIX}{}", crate::canonical::hex(text.as_bytes()))
}

/// The last key of a cursor issued by listing `kind` with `filter`.
fn decode_cursor(cursor: &str, kind: &str, filter: &str) -> Result<String, InspectError> {
    let hex = cursor
        .strip_prefix(CURSOR_PREFIX)
        .ok_or(InspectError::InvalidCursor)?;
    if hex.len() > 4 * MAX_ID_BYTES {
        return Err(InspectError::InvalidCursor);
    }
    let bytes = crate::canonical::from_hex(hex).ok_or(InspectError::InvalidCursor)?;
    let text = String::from_utf8(bytes).map_err(|_| InspectError::InvalidCursor)?;
    let mut parts = text.splitn(3, '\n');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(k), Some(f), Some(after)) if k == kind && f == filter && !after.is_empty() => {
            Ok(after.to_owned())
        }
        _ => Err(InspectError::InvalidCursor),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_are_bound_to_their_listing() {
        let c = encode_cursor("pathways", "held", "pw_000003");
        assert_eq!(decode_cursor(&c, "pathways", "held").unwrap(), "pw_000003");
        assert!(decode_cursor(&c, "pathways", "").is_err());
        assert!(decode_cursor(&c, "unresolved", "held").is_err());
        for bad in ["", "rpr1.", "rpr1.zz", "rpr1.0", "x", "rpr1.ff"] {
            assert!(decode_cursor(bad, "pathways", "").is_err(), "{bad}");
        }
    }

    #[test]
    fn every_state_has_a_next_action() {
        let auth = Authority::single(&crate::Actor::new("a"));
        for s in State::ALL {
            let n = next_action(s, None, Some(&auth));
            assert_eq!(n.action == "none", s.is_terminal(), "{s}");
            assert_eq!(n.actors.is_empty(), n.roles.is_empty(), "{s}");
        }
        assert_eq!(
            next_action(State::Running, Some(AttemptStatus::Returned), None).action,
            "confirm_by_readback"
        );
        assert_eq!(
            next_action(State::Running, Some(AttemptStatus::InFlight), None).action,
            "wait"
        );
    }
}
