//! The rows a check reads, exactly as stored (no parsing, no judgement), and the columns
//! and row readers that fetch them.

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
    #[cfg_attr(
        not(feature = "postgres"),
        expect(dead_code, reason = "the PostgreSQL check groups rows by it")
    )]
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
    #[cfg_attr(
        not(feature = "postgres"),
        expect(dead_code, reason = "the PostgreSQL check groups rows by it")
    )]
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

/// A pathway row as the comparison reads it: borrowed from a [`RawPathway`] or from
/// [`Rows`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct PathwayRow<'a> {
    pub(crate) id: &'a str,
    pub(crate) idempotency_key: &'a str,
    pub(crate) definition: &'a str,
    pub(crate) definition_digest: &'a str,
    pub(crate) request_digest: &'a str,
    pub(crate) state: &'a str,
    pub(crate) proposer: &'a str,
    pub(crate) created_at: i64,
}

/// An attempt row as the comparison reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttemptRow<'a> {
    pub(crate) id: &'a str,
    pub(crate) seq: i64,
    pub(crate) previous_attempt: Option<&'a str>,
    pub(crate) request: &'a str,
    pub(crate) request_digest: &'a str,
    pub(crate) binding: &'a str,
    pub(crate) binding_digest: &'a str,
    pub(crate) status: &'a str,
    pub(crate) owner: Option<&'a str>,
    pub(crate) outcome: Option<&'a str>,
    pub(crate) carrier: Option<&'a str>,
    pub(crate) created_at: i64,
}

/// An approval row as the comparison reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ApprovalRow<'a> {
    pub(crate) id: &'a str,
    pub(crate) request_digest: &'a str,
    pub(crate) approver: &'a str,
    pub(crate) granted_at: i64,
    pub(crate) used_at: Option<i64>,
    pub(crate) revoked_at: Option<i64>,
}

impl RawPathway {
    pub(crate) fn view(&self) -> PathwayRow<'_> {
        PathwayRow {
            id: &self.id,
            idempotency_key: &self.idempotency_key,
            definition: &self.definition,
            definition_digest: &self.definition_digest,
            request_digest: &self.request_digest,
            state: &self.state,
            proposer: &self.proposer,
            created_at: self.created_at,
        }
    }
}

impl RawAttempt {
    pub(crate) fn view(&self) -> AttemptRow<'_> {
        AttemptRow {
            id: &self.id,
            seq: self.seq,
            previous_attempt: self.previous_attempt.as_deref(),
            request: &self.request,
            request_digest: &self.request_digest,
            binding: &self.binding,
            binding_digest: &self.binding_digest,
            status: &self.status,
            owner: self.owner.as_deref(),
            outcome: self.outcome.as_deref(),
            carrier: self.carrier.as_deref(),
            created_at: self.created_at,
        }
    }
}

impl RawApproval {
    pub(crate) fn view(&self) -> ApprovalRow<'_> {
        ApprovalRow {
            id: &self.id,
            request_digest: &self.request_digest,
            approver: &self.approver,
            granted_at: self.granted_at,
            used_at: self.used_at,
            revoked_at: self.revoked_at,
        }
    }
}

/// One stored value copied out of a row: a number, or where its bytes are in [`Rows`].
#[derive(Debug, Clone, Copy)]
enum Cell {
    Null,
    Integer(i64),
    Real,
    Text(usize, usize),
    Blob(usize, usize),
}

/// Rows copied out of SQLite so that another thread can read them: every text and blob
/// into one buffer, every value into one list, `columns` values a row. Two allocations
/// for a whole batch of rows (none once reused), where reading each row into owned
/// strings makes one per text.
///
/// The readers ([`Copied::text`] and the others) refuse a value of another type, or text
/// that is not UTF-8, with the error `rusqlite` gives for the same read from the row.
#[derive(Debug, Default)]
pub(crate) struct Rows {
    /// Values copied from each row.
    columns: usize,
    bytes: Vec<u8>,
    cells: Vec<Cell>,
}

impl Rows {
    /// Empties the rows (keeping their memory) for rows of `columns` values.
    pub(crate) fn reset(&mut self, columns: usize) {
        self.columns = columns;
        self.bytes.clear();
        self.cells.clear();
    }

    /// Copies the first `columns` values of `row`.
    pub(crate) fn push(&mut self, row: &rusqlite::Row<'_>) -> rusqlite::Result<()> {
        use rusqlite::types::ValueRef;
        for index in 0..self.columns {
            let cell = match row.get_ref(index)? {
                ValueRef::Null => Cell::Null,
                ValueRef::Integer(i) => Cell::Integer(i),
                ValueRef::Real(_) => Cell::Real,
                ValueRef::Text(t) => {
                    let start = self.bytes.len();
                    self.bytes.extend_from_slice(t);
                    Cell::Text(start, self.bytes.len())
                }
                ValueRef::Blob(b) => {
                    let start = self.bytes.len();
                    self.bytes.extend_from_slice(b);
                    Cell::Blob(start, self.bytes.len())
                }
            };
            self.cells.push(cell);
        }
        Ok(())
    }

    /// How many rows.
    pub(crate) fn len(&self) -> usize {
        self.cells.len().checked_div(self.columns).unwrap_or(0)
    }

    /// How many bytes of text and blobs.
    pub(crate) fn bytes_len(&self) -> usize {
        self.bytes.len()
    }

    /// Row `index`.
    pub(crate) fn row(&self, index: usize) -> Copied<'_> {
        Copied {
            bytes: &self.bytes,
            cells: &self.cells[index * self.columns..(index + 1) * self.columns],
        }
    }
}

/// One row of [`Rows`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Copied<'a> {
    bytes: &'a [u8],
    cells: &'a [Cell],
}

impl<'a> Copied<'a> {
    fn invalid(index: usize, cell: Cell) -> rusqlite::Error {
        use rusqlite::types::Type;
        let found = match cell {
            Cell::Null => Type::Null,
            Cell::Integer(_) => Type::Integer,
            Cell::Real => Type::Real,
            Cell::Text(..) => Type::Text,
            Cell::Blob(..) => Type::Blob,
        };
        rusqlite::Error::InvalidColumnType(index, String::new(), found)
    }

    /// The bytes of a text or blob value (as `ValueRef::as_bytes` reads them).
    pub(crate) fn bytes(self, index: usize) -> rusqlite::Result<&'a [u8]> {
        match self.cells[index] {
            Cell::Text(start, end) | Cell::Blob(start, end) => Ok(&self.bytes[start..end]),
            other => Err(Self::invalid(index, other)),
        }
    }

    /// The type of a value that is not text (`None` for text), as SQLite names it.
    pub(crate) fn not_text(self, index: usize) -> Option<&'static str> {
        match self.cells[index] {
            Cell::Text(..) => None,
            Cell::Null => Some("null"),
            Cell::Integer(_) => Some("an integer"),
            Cell::Real => Some("a real"),
            Cell::Blob(..) => Some("a blob"),
        }
    }

    /// A text value (as `row.get::<_, String>` reads it).
    pub(crate) fn text(self, index: usize) -> rusqlite::Result<&'a str> {
        match self.cells[index] {
            Cell::Text(start, end) => std::str::from_utf8(&self.bytes[start..end]).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(
                    index,
                    rusqlite::types::Type::Text,
                    Box::new(e),
                )
            }),
            other => Err(Self::invalid(index, other)),
        }
    }

    /// A text value or `NULL`.
    pub(crate) fn optional_text(self, index: usize) -> rusqlite::Result<Option<&'a str>> {
        match self.cells[index] {
            Cell::Null => Ok(None),
            _ => self.text(index).map(Some),
        }
    }

    /// An integer value (as `row.get::<_, i64>` reads it).
    pub(crate) fn integer(self, index: usize) -> rusqlite::Result<i64> {
        match self.cells[index] {
            Cell::Integer(i) => Ok(i),
            other => Err(Self::invalid(index, other)),
        }
    }

    /// An integer value or `NULL`.
    pub(crate) fn optional_integer(self, index: usize) -> rusqlite::Result<Option<i64>> {
        match self.cells[index] {
            Cell::Null => Ok(None),
            _ => self.integer(index).map(Some),
        }
    }
}

/// Widths of the rows [`PATHWAY_COLUMNS`], [`ATTEMPT_COLUMNS`] and [`APPROVAL_COLUMNS`]
/// select.
pub(crate) const PATHWAY_WIDTH: usize = 8;
pub(crate) const ATTEMPT_WIDTH: usize = 13;
pub(crate) const APPROVAL_WIDTH: usize = 7;

pub(crate) fn pathway_row(r: Copied<'_>) -> rusqlite::Result<PathwayRow<'_>> {
    Ok(PathwayRow {
        id: r.text(0)?,
        idempotency_key: r.text(1)?,
        definition: r.text(2)?,
        definition_digest: r.text(3)?,
        request_digest: r.text(4)?,
        state: r.text(5)?,
        proposer: r.text(6)?,
        created_at: r.integer(7)?,
    })
}

pub(crate) fn attempt_row(r: Copied<'_>) -> rusqlite::Result<AttemptRow<'_>> {
    Ok(AttemptRow {
        id: r.text(0)?,
        seq: r.integer(2)?,
        previous_attempt: r.optional_text(3)?,
        request: r.text(4)?,
        request_digest: r.text(5)?,
        binding: r.text(6)?,
        binding_digest: r.text(7)?,
        status: r.text(8)?,
        owner: r.optional_text(9)?,
        outcome: r.optional_text(10)?,
        carrier: r.optional_text(11)?,
        created_at: r.integer(12)?,
    })
}

pub(crate) fn approval_row(r: Copied<'_>) -> rusqlite::Result<ApprovalRow<'_>> {
    Ok(ApprovalRow {
        id: r.text(0)?,
        request_digest: r.text(2)?,
        approver: r.text(3)?,
        granted_at: r.integer(4)?,
        used_at: r.optional_integer(5)?,
        revoked_at: r.optional_integer(6)?,
    })
}
