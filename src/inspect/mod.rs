//! The read model for inspection: plain, serializable views built from a [`ReadStore`](crate::store::ReadStore).
//!
//! This is what the `rpr-mcp` inspection server returns, and what a host that
//! shows pathways to people can reuse. Everything here only reads: every
//! function takes a [`ReadStore`](crate::store::ReadStore) (open it with [`ReadStore::open_read_only`](crate::store::ReadStore::open_read_only))
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
//! ([`ReadStore::snapshot`](crate::store::ReadStore::snapshot)): a writer committing meanwhile is either wholly in it
//! or not at all.
//!
//! # Pages and sizes
//!
//! Pages hold at most `limit` items ([`DEFAULT_LIMIT`] by default, at most
//! [`MAX_LIMIT`]) **and** at most [`PAGE_BUDGET_BYTES`] of serialized JSON: a
//! page that would grow past the budget ends early and its `next_cursor` points
//! after the last item it holds. A single value too large for any page is
//! replaced by a truncation marker ([`truncation_marker`](crate::evidence::truncation_marker), the shape stored
//! evidence uses too, with reason `value_budget_bytes` or `page_budget_bytes`). Cursors are
//! opaque strings bound to the listing (and filter) that issued them; any other
//! string is refused with [`InspectError::InvalidCursor`].
//!
//! One module per answer: `next` (who must act next), `status_view`, `pages` (the
//! pathway listings), `detail` (one pathway), `events` (a page of evidence) and
//! `cursor` (the opaque cursors the pages hand out).

use serde::Serialize;

use crate::store::StoreError;

mod cursor;
mod detail;
mod events;
mod next;
mod pages;
mod status_view;

pub use detail::{AttemptView, PathwayDetail, pathway};
pub use events::{ChainProblem, EventView, EvidencePage, evidence};
pub use next::{Alternative, NextAction, authority_of, judged_binding, next_action, next_of};
pub use pages::{PathwayPage, PathwaySummary, list_pathways, list_unresolved};
pub use status_view::{StatusView, status};

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

fn validate_id(id: &str) -> Result<(), InspectError> {
    if id.is_empty() || id.len() > MAX_ID_BYTES {
        return Err(InspectError::InvalidArgument(format!(
            "pathway_id must be a non-empty string of at most {MAX_ID_BYTES} bytes"
        )));
    }
    Ok(())
}
