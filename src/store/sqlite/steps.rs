//! The steps: `Backend` for SQLite. Each step is one [`Unit`] (a savepoint in its batch's
//! transaction) in which `store::rules` runs over [`SqliteRows`].

use rusqlite::{OptionalExtension, TransactionBehavior};

use super::super::check::Replay;
use super::super::rules;
use super::super::{
    AttemptRecord, Backend, Checked, EventDraft, Grant, LedgerRow, NewPathway, PathwayRecord,
    ReadStore, Reads, Step, StoreError,
};
use super::rows::SqliteRows;
use super::{DB_NOW_MS, SqliteBackend, Unit};

impl Backend for SqliteBackend {
    fn insert_pathway(&self, new: NewPathway, events: Vec<EventDraft>) -> Result<(), StoreError> {
        let tx = Unit::begin(self)?;
        rules::insert(&mut SqliteRows(&tx), &new, events, Some(&self.replays))?;
        tx.commit()
    }

    fn apply(&self, step: Step) -> Result<i64, StoreError> {
        let tx = Unit::begin(self)?;
        match rules::apply(&mut SqliteRows(&tx), step, Some(&self.replays)) {
            // Refused, and the refusal recorded: kept (the batch commits it too).
            Err(fenced @ StoreError::Fenced { .. }) => {
                tx.commit()?;
                Err(fenced)
            }
            result => {
                let version = result?;
                tx.commit()?;
                Ok(version)
            }
        }
    }

    fn insert_and_apply(
        &self,
        new: NewPathway,
        events: Vec<EventDraft>,
        step: Step,
    ) -> Result<i64, StoreError> {
        // One unit: a refused step leaves no pathway behind.
        let tx = Unit::begin(self)?;
        let mut rows = SqliteRows(&tx);
        rules::insert(&mut rows, &new, events, Some(&self.replays))?;
        let version = rules::apply(&mut rows, step, Some(&self.replays))?;
        tx.commit()?;
        Ok(version)
    }

    fn apply_together(
        &self,
        new: Option<(NewPathway, Vec<EventDraft>)>,
        steps: Vec<Step>,
    ) -> Result<i64, StoreError> {
        // One unit: a refused step leaves nothing of the others (nor the pathway) behind.
        let tx = Unit::begin(self)?;
        let mut rows = SqliteRows(&tx);
        let version = match new {
            Some((new, events)) => {
                rules::insert_together(&mut rows, &new, events, steps, Some(&self.replays))?
            }
            None => rules::apply_together(&mut rows, steps, Some(&self.replays))?,
        };
        tx.commit()?;
        Ok(version)
    }

    fn grant_approval(&self, grant: Grant) -> Result<(), StoreError> {
        let tx = Unit::begin(self)?;
        rules::grant(&mut SqliteRows(&tx), grant, Some(&self.replays))?;
        tx.commit()
    }

    fn sign_log(&self) -> Result<(), StoreError> {
        // The batch took the write lock and checked the log at its `BEGIN IMMEDIATE`; it
        // signs before its `COMMIT`.
        Unit::begin(self)?.commit()
    }

    fn database_id(&self) -> &str {
        &self.database_id
    }

    fn now_ms(&self) -> Result<i64, StoreError> {
        Ok(self
            .conn()
            .query_row(&format!("SELECT {DB_NOW_MS}"), [], |r| r.get(0))?)
    }

    /// Checks a binding against its tool pin, in its own unit of the batch.
    fn check_pin(
        &self,
        candidate: &crate::store::pins::Candidate,
        by: &str,
        at: i64,
    ) -> Result<crate::store::PinCheck, StoreError> {
        let tx = Unit::begin(self)?;
        let found = crate::store::pins::check(&mut SqliteRows(&tx), candidate, by, at)?;
        tx.commit()?;
        Ok(found)
    }

    /// Pins the seen binding `digest` of `server`/`tool`, in its own unit of the batch.
    fn accept_pin(
        &self,
        server: &str,
        tool: &str,
        digest: &str,
        by: &str,
        at: i64,
    ) -> Result<crate::store::PinRecord, StoreError> {
        let tx = Unit::begin(self)?;
        let pin = crate::store::pins::accept(&mut SqliteRows(&tx), server, tool, digest, by, at)?;
        tx.commit()?;
        Ok(pin)
    }
}

/// A caller's reads on a SQLite [`ReadStore`]: the step connection's own (a database in
/// memory) or, normally, a connection of their own (`runtime/store.rs`).
impl Reads for ReadStore {
    fn check_pathway(&self, id: &str) -> Result<Replay, StoreError> {
        let tx = rusqlite::Transaction::new_unchecked(self.conn(), TransactionBehavior::Deferred)?;
        let found = rules::check_pathway(&mut SqliteRows(&tx), id, false, None)?;
        tx.commit()?;
        found
            .map(|found| found.replay)
            .ok_or_else(|| StoreError::NoSuchPathway(id.to_owned()))
    }

    fn pathway_record(&self, id: &str) -> Result<Option<PathwayRecord>, StoreError> {
        self.pathway(id)
    }

    fn attempt_records(&self, id: &str) -> Result<Vec<AttemptRecord>, StoreError> {
        self.attempts(id)
    }

    fn ledger_page(&self, after: i64, limit: usize) -> Result<Vec<LedgerRow>, StoreError> {
        self.ledger(after, limit)
    }

    fn pathway_events(&self, id: &str) -> Result<Vec<LedgerRow>, StoreError> {
        self.events(id, 0, usize::MAX)
    }

    fn unresolved(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        self.list_unresolved(after, limit)
    }

    fn read_checked(&self, id: &str) -> Result<Option<Checked>, StoreError> {
        self.snapshot(|r| {
            if rules::check_pathway(&mut SqliteRows(r.conn()), id, false, None)?.is_none() {
                return Ok(None);
            }
            let Some(record) = r.pathway(id)? else {
                return Ok(None);
            };
            Ok(Some((record, r.definition_digest(id)?, r.attempts(id)?)))
        })
    }

    fn verify_all(&self, known_head: Option<&str>) -> Result<crate::ledger::Report, StoreError> {
        crate::store::verify(self, known_head)
    }

    fn with_key(&self, key: &str) -> Result<Option<(String, String)>, StoreError> {
        key_lookup(self.conn(), key)
    }
}

/// The pathway stored under an idempotency key on `conn`: its id and definition digest.
fn key_lookup(
    conn: &rusqlite::Connection,
    key: &str,
) -> Result<Option<(String, String)>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT id, definition_digest FROM pathways WHERE idempotency_key = ?1")?
        .query_row([key], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}
