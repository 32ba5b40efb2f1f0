//! The rows `store::check` compares, read from PostgreSQL rows (the rule itself is
//! `store::rules::check_pathway`, over [`super::rows::PgRows`]).

use std::sync::LazyLock;

use postgres::Row;

use crate::store::check::{
    APPROVAL_COLUMNS, ATTEMPT_COLUMNS, PATHWAY_COLUMNS, RawApproval, RawAttempt, RawPathway,
};

/// Every pathway, attempt and approval row, for `verify`.
pub(super) static ALL_PATHWAYS: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {PATHWAY_COLUMNS} FROM pathways"));
pub(super) static ALL_ATTEMPTS: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {ATTEMPT_COLUMNS} FROM attempts"));
pub(super) static ALL_APPROVALS: LazyLock<String> =
    LazyLock::new(|| format!("SELECT {APPROVAL_COLUMNS} FROM approvals"));

/// One pathway's events in order (served by the index `ledger_by_pathway`).
pub(super) const LEDGER_OF_PATHWAY: &str =
    "SELECT seq, event, prev_hash, hash FROM ledger WHERE pathway_id = $1 ORDER BY seq";

/// A pathway row of [`PATHWAY_COLUMNS`].
pub(super) fn raw_pathway(r: &Row) -> RawPathway {
    RawPathway {
        id: r.get(0),
        idempotency_key: r.get(1),
        definition: r.get(2),
        definition_digest: r.get(3),
        request_digest: r.get(4),
        state: r.get(5),
        proposer: r.get(6),
        created_at: r.get(7),
    }
}

pub(super) fn raw_attempt(r: &Row) -> RawAttempt {
    RawAttempt {
        id: r.get(0),
        pathway_id: r.get(1),
        seq: r.get(2),
        previous_attempt: r.get(3),
        request: r.get(4),
        request_digest: r.get(5),
        binding: r.get(6),
        binding_digest: r.get(7),
        status: r.get(8),
        owner: r.get(9),
        outcome: r.get(10),
        carrier: r.get(11),
        created_at: r.get(12),
    }
}

pub(super) fn raw_approval(r: &Row) -> RawApproval {
    RawApproval {
        id: r.get(0),
        pathway_id: r.get(1),
        request_digest: r.get(2),
        approver: r.get(3),
        granted_at: r.get(4),
        used_at: r.get(5),
        revoked_at: r.get(6),
    }
}
