//! Database-wide figures.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::store::ReadStore;

use super::InspectError;

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
