//! Pages of pathway summaries: all pathways, or the unresolved ones.

use serde::Serialize;
use serde_json::Value;

use crate::state::State;
use crate::store::{PathwayRecord, ReadStore, StoreError};

use super::cursor::{decode_cursor, encode_cursor};
use super::next::{NextAction, next_of};
use super::{InspectError, PAGE_BUDGET_BYTES, SUMMARY_STRING_BYTES, check_limit, json_len};

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
        next: next_of(store, record)?,
        clipped,
    })
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
