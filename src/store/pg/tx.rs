//! [`Tx`]: the statements of one step or one read, prepared once per connection.

use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::{Client, CopyInWriter, Row, RowIter, Statement, Transaction};

pub(super) type Params<'p> = &'p [&'p (dyn ToSql + Sync)];

/// Where a [`Tx`]'s statements run.
pub(super) enum Inner<'a> {
    /// A transaction of its own (a step, a read snapshot, the copy), committed by
    /// [`Inner::commit`].
    Own(Transaction<'a>),
    /// The session of a reader whose snapshot (`BEGIN ISOLATION LEVEL REPEATABLE READ READ
    /// ONLY`) is already open and is ended by its owner ([`crate::store::ReadStore`] on
    /// PostgreSQL): several reads, one snapshot.
    Session(&'a mut Client),
}

// Each `postgres` call on whichever of the two runs it.
impl Inner<'_> {
    pub(super) fn prepare(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        match self {
            Self::Own(t) => t.prepare(sql),
            Self::Session(c) => c.prepare(sql),
        }
    }

    pub(super) fn execute(
        &mut self,
        sql: &(impl postgres::ToStatement + ?Sized),
        params: Params<'_>,
    ) -> Result<u64, postgres::Error> {
        match self {
            Self::Own(t) => t.execute(sql, params),
            Self::Session(c) => c.execute(sql, params),
        }
    }

    pub(super) fn query(
        &mut self,
        sql: &(impl postgres::ToStatement + ?Sized),
        params: Params<'_>,
    ) -> Result<Vec<Row>, postgres::Error> {
        match self {
            Self::Own(t) => t.query(sql, params),
            Self::Session(c) => c.query(sql, params),
        }
    }

    pub(super) fn query_opt(
        &mut self,
        sql: &(impl postgres::ToStatement + ?Sized),
        params: Params<'_>,
    ) -> Result<Option<Row>, postgres::Error> {
        match self {
            Self::Own(t) => t.query_opt(sql, params),
            Self::Session(c) => c.query_opt(sql, params),
        }
    }

    pub(super) fn query_one(
        &mut self,
        sql: &(impl postgres::ToStatement + ?Sized),
        params: Params<'_>,
    ) -> Result<Row, postgres::Error> {
        match self {
            Self::Own(t) => t.query_one(sql, params),
            Self::Session(c) => c.query_one(sql, params),
        }
    }

    /// The rows of `statement` one at a time, without holding them all.
    pub(super) fn query_raw(
        &mut self,
        statement: &Statement,
        params: Params<'_>,
    ) -> Result<RowIter<'_>, postgres::Error> {
        let params = params.iter().copied();
        match self {
            Self::Own(t) => t.query_raw(statement, params),
            Self::Session(c) => c.query_raw(statement, params),
        }
    }

    pub(super) fn batch_execute(&mut self, sql: &str) -> Result<(), postgres::Error> {
        match self {
            Self::Own(t) => t.batch_execute(sql),
            Self::Session(c) => c.batch_execute(sql),
        }
    }

    pub(super) fn copy_in(&mut self, sql: &str) -> Result<CopyInWriter<'_>, postgres::Error> {
        match self {
            Self::Own(t) => t.copy_in(sql),
            Self::Session(c) => c.copy_in(sql),
        }
    }

    /// Commits a transaction of its own; a session's snapshot is its owner's to end.
    pub(super) fn commit(self) -> Result<(), postgres::Error> {
        match self {
            Self::Own(t) => t.commit(),
            Self::Session(_) => Ok(()),
        }
    }
}

/// A transaction (or a reader's snapshot) whose statements are prepared once per connection.
pub(super) struct Tx<'a> {
    pub(super) inner: Inner<'a>,
    pub(super) statements: &'a mut HashMap<&'static str, Statement>,
    /// A pathway's row is locked with `NOWAIT` (a step after the first of a batch,
    /// `batch.rs`): a row another transaction holds is an error at once, not a wait.
    pub(super) nowait: bool,
    /// The ledger head once this transaction holds its row (`Rows::head`), so that the
    /// later steps of a batch do not read it again. A batch puts back what it was before
    /// a step it rolls back to its savepoint (the row's lock may go with it).
    pub(super) head: Option<(i64, String)>,
    /// The runtime's signing of the log, checked when the head is taken (`Rows::head`)
    /// and sealed before the batch's `COMMIT` (`batch.rs`).
    pub(super) sealer: Option<&'a crate::store::log::Sealer>,
    /// What the check found when this transaction took the head; put back with `head`.
    pub(super) covered: Option<crate::store::log::Covered>,
}

// One thin wrapper per `postgres` call, each preparing its statement through the cache.
impl Tx<'_> {
    pub(super) fn statement(&mut self, sql: &'static str) -> Result<Statement, postgres::Error> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let s = self.inner.prepare(sql)?;
        self.statements.insert(sql, s.clone());
        Ok(s)
    }

    pub(super) fn execute(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> Result<u64, postgres::Error> {
        let s = self.statement(sql)?;
        self.inner.execute(&s, params)
    }

    pub(super) fn query(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, postgres::Error> {
        let s = self.statement(sql)?;
        self.inner.query(&s, params)
    }

    pub(super) fn query_opt(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> Result<Option<Row>, postgres::Error> {
        let s = self.statement(sql)?;
        self.inner.query_opt(&s, params)
    }

    pub(super) fn query_one(
        &mut self,
        sql: &'static str,
        params: Params<'_>,
    ) -> Result<Row, postgres::Error> {
        let s = self.statement(sql)?;
        self.inner.query_one(&s, params)
    }
}
