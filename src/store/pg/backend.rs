//! The PostgreSQL store behind the crate's `Backend` boundary: what a [`crate::Runtime`]
//! opened on a `postgres://` location writes through.

use super::rows::PgRows;
use super::{PgBackend, PgError};

use crate::store::check::Replay;
use crate::store::{
    AttemptRecord, Backend, Checked, EventDraft, Grant, LedgerRow, NewPathway, PathwayRecord,
    PinCheck, PinRecord, Reads, Step, StoreError, pins, rules,
};

impl From<PgError> for StoreError {
    /// A refusal keeps its meaning; the server's errors stay typed
    /// ([`StoreError::Postgres`]).
    fn from(e: PgError) -> Self {
        match e {
            PgError::Store(e) => e,
            // `lock_timeout` ran out: the statement and its transaction were rolled back.
            PgError::Postgres(e)
                if e.code() == Some(&postgres::error::SqlState::LOCK_NOT_AVAILABLE) =>
            {
                Self::Busy {
                    timeout: None,
                    holder: None,
                }
            }
            PgError::Postgres(e) => Self::Postgres(e),
            PgError::Connect { .. } => Self::Unreachable(format!(
                "{e}; check that the server runs and accepts connections there, and the user and password"
            )),
            PgError::SchemaName(_) | PgError::OtherDatabase { .. } => {
                Self::Unsupported(e.to_string())
            }
            // Only a takeover reports these, and the runtime handles them where it takes over.
            PgError::LeaseHeld { .. } | PgError::NotInFlight { .. } => {
                Self::Corrupt(format!("internal: unexpected takeover refusal: {e}"))
            }
        }
    }
}

// Each body hands the crate's records to `PgBackend`'s own methods.
impl Backend for PgBackend {
    fn insert_pathway(&self, new: NewPathway, events: Vec<EventDraft>) -> Result<(), StoreError> {
        PgBackend::insert_pathway(self, &new, events)
    }

    fn apply(&self, step: Step) -> Result<i64, StoreError> {
        PgBackend::apply(self, step)
    }

    fn sign_log(&self) -> Result<(), StoreError> {
        PgBackend::sign_log(self)
    }

    fn insert_and_apply(
        &self,
        new: NewPathway,
        events: Vec<EventDraft>,
        step: Step,
    ) -> Result<i64, StoreError> {
        PgBackend::insert_and_apply(self, &new, events, step)
    }

    fn apply_together(
        &self,
        new: Option<(NewPathway, Vec<EventDraft>)>,
        steps: Vec<Step>,
    ) -> Result<i64, StoreError> {
        PgBackend::apply_together(self, new, steps)
    }

    fn grant_approval(&self, grant: Grant) -> Result<(), StoreError> {
        PgBackend::grant_approval(self, grant)
    }

    fn check_pin(
        &self,
        candidate: &pins::Candidate,
        by: &str,
        at: i64,
    ) -> Result<PinCheck, StoreError> {
        Ok(PgBackend::check_pin(self, candidate, by, at)?)
    }

    fn accept_pin(
        &self,
        server: &str,
        tool: &str,
        digest: &str,
        by: &str,
        at: i64,
    ) -> Result<PinRecord, StoreError> {
        Ok(PgBackend::accept_pin(self, server, tool, digest, by, at)?)
    }

    fn database_id(&self) -> &str {
        PgBackend::database_id(self)
    }

    fn now_ms(&self) -> Result<i64, StoreError> {
        Ok(PgBackend::now_ms(self)?)
    }
}

impl Reads for PgBackend {
    fn check_pathway(&self, id: &str) -> Result<Replay, StoreError> {
        let found = self.read(|tx| Ok(rules::check_pathway(&mut PgRows(tx), id, false, None)?))?;
        found
            .map(|found| found.replay)
            .ok_or_else(|| StoreError::NoSuchPathway(id.to_owned()))
    }

    fn pathway_record(&self, id: &str) -> Result<Option<PathwayRecord>, StoreError> {
        Ok(PgBackend::pathway(self, id)?)
    }

    fn attempt_records(&self, id: &str) -> Result<Vec<AttemptRecord>, StoreError> {
        Ok(PgBackend::attempts(self, id)?)
    }

    fn ledger_page(&self, after: i64, limit: usize) -> Result<Vec<LedgerRow>, StoreError> {
        Ok(PgBackend::ledger(self, after, limit)?)
    }

    fn pathway_events(&self, id: &str) -> Result<Vec<LedgerRow>, StoreError> {
        Ok(PgBackend::events(self, id)?)
    }

    fn unresolved(
        &self,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<PathwayRecord>, StoreError> {
        Ok(PgBackend::list_unresolved(self, after, limit)?)
    }

    fn read_checked(&self, id: &str) -> Result<Option<Checked>, StoreError> {
        Ok(PgBackend::read_checked(self, id)?)
    }

    fn verify_all(&self, known_head: Option<&str>) -> Result<crate::ledger::Report, StoreError> {
        Ok(PgBackend::verify(self, known_head)?)
    }

    fn with_key(&self, key: &str) -> Result<Option<(String, String)>, StoreError> {
        Ok(PgBackend::with_key(self, key)?)
    }
}
