//! The steps: `Backend` for SQLite. Each step is one [`Unit`] (a savepoint in its batch's
//! transaction) in which `store::rules` runs over [`SqliteRows`].

use rusqlite::TransactionBehavior;

use super::super::check::Replay;
use super::super::rules;
use super::super::{Backend, EventDraft, Grant, NewPathway, Step, StoreError};
use super::rows::SqliteRows;
use super::{DB_NOW_MS, SqliteBackend, Unit};

impl Backend for SqliteBackend {
    fn insert_pathway(&self, new: NewPathway, events: Vec<EventDraft>) -> Result<(), StoreError> {
        let tx = Unit::begin(self)?;
        rules::insert(&mut SqliteRows(&tx), &new, events)?;
        tx.commit()
    }

    fn apply(&self, step: Step) -> Result<i64, StoreError> {
        let tx = Unit::begin(self)?;
        match rules::apply(&mut SqliteRows(&tx), step) {
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
        rules::insert(&mut rows, &new, events)?;
        let version = rules::apply(&mut rows, step)?;
        tx.commit()?;
        Ok(version)
    }

    fn grant_approval(&self, grant: Grant) -> Result<(), StoreError> {
        let tx = Unit::begin(self)?;
        rules::grant(&mut SqliteRows(&tx), grant)?;
        tx.commit()
    }

    fn database_id(&self) -> &str {
        &self.database_id
    }

    fn check_pathway(&self, id: &str) -> Result<Replay, StoreError> {
        let tx = rusqlite::Transaction::new_unchecked(self.conn(), TransactionBehavior::Deferred)?;
        let found = rules::check_pathway(&mut SqliteRows(&tx), id, false)?;
        tx.commit()?;
        found
            .map(|found| found.replay)
            .ok_or_else(|| StoreError::NoSuchPathway(id.to_owned()))
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
