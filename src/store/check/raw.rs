//! The rows a check reads, exactly as stored (no parsing, no judgement), and the columns
//! and row readers that fetch them.

// Same shape as RawAttempt, RawApproval and pins::Candidate: plain rows of other tables; only the shape of a field list is shared.
/// A pathway row exactly as stored.
#[derive(Debug)]
pub(crate) struct RawPathway {
    pub(crate) id: String,
    pub(crate) idempotency_key: String,
    pub(crate) definition: String,
    pub(crate) definition_digest: String,
    pub(crate) request_digest: String,
    pub(crate) state: String,
    pub(crate) proposer: String,
    pub(crate) created_at: i64,
}

/// An attempt row exactly as stored.
#[derive(Debug)]
pub(crate) struct RawAttempt {
    pub(crate) id: String,
    pub(crate) pathway_id: String,
    pub(crate) seq: i64,
    pub(crate) previous_attempt: Option<String>,
    pub(crate) request: String,
    pub(crate) request_digest: String,
    pub(crate) binding: String,
    pub(crate) binding_digest: String,
    pub(crate) status: String,
    pub(crate) owner: Option<String>,
    pub(crate) outcome: Option<String>,
    pub(crate) carrier: Option<String>,
    pub(crate) created_at: i64,
}

/// An approval row exactly as stored.
#[derive(Debug)]
pub(crate) struct RawApproval {
    pub(crate) id: String,
    pub(crate) pathway_id: String,
    pub(crate) request_digest: String,
    pub(crate) approver: String,
    pub(crate) granted_at: i64,
    pub(crate) used_at: Option<i64>,
    pub(crate) revoked_at: Option<i64>,
}

pub(crate) const PATHWAY_COLUMNS: &str = "id, idempotency_key, definition, definition_digest, request_digest, state, proposer, created_at";
pub(crate) const ATTEMPT_COLUMNS: &str = "id, pathway_id, seq, previous_attempt, request, request_digest, binding, binding_digest, status, owner, outcome, carrier, created_at";
pub(crate) const APPROVAL_COLUMNS: &str =
    "id, pathway_id, request_digest, approver, granted_at, used_at, revoked_at";

pub(crate) fn raw_pathway(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawPathway> {
    Ok(RawPathway {
        id: r.get(0)?,
        idempotency_key: r.get(1)?,
        definition: r.get(2)?,
        definition_digest: r.get(3)?,
        request_digest: r.get(4)?,
        state: r.get(5)?,
        proposer: r.get(6)?,
        created_at: r.get(7)?,
    })
}

// Same shape as raw_pathway and raw_approval: one reader per table, each column by position; only the shape is shared.
pub(crate) fn raw_attempt(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawAttempt> {
    Ok(RawAttempt {
        id: r.get(0)?,
        pathway_id: r.get(1)?,
        seq: r.get(2)?,
        previous_attempt: r.get(3)?,
        request: r.get(4)?,
        request_digest: r.get(5)?,
        binding: r.get(6)?,
        binding_digest: r.get(7)?,
        status: r.get(8)?,
        owner: r.get(9)?,
        outcome: r.get(10)?,
        carrier: r.get(11)?,
        created_at: r.get(12)?,
    })
}

pub(crate) fn raw_approval(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawApproval> {
    Ok(RawApproval {
        id: r.get(0)?,
        pathway_id: r.get(1)?,
        request_digest: r.get(2)?,
        approver: r.get(3)?,
        granted_at: r.get(4)?,
        used_at: r.get(5)?,
        revoked_at: r.get(6)?,
    })
}
