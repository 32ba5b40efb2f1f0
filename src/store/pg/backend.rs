//! The PostgreSQL store behind the crate's `Backend` boundary: what a [`crate::Runtime`]
//! opened on a `postgres://` location writes through.

use super::step::{apply_tx, insert_tx, walk_edges};
use super::{PgBackend, PgError};
use crate::state::State;
use crate::store::check::Replay;
use crate::store::{
    Backend, EventDraft, Fence, NewPathway, PinCheck, PinRecord, Step, StoreError, pins,
};

impl From<PgError> for StoreError {
    /// A refusal keeps its meaning; the server's errors stay typed
    /// ([`StoreError::Postgres`]); a late outcome refused by the fence is
    /// [`StoreError::Fenced`].
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
            PgError::Fenced {
                pathway,
                attempt,
                status,
                recorded_seq,
            } => Self::Fenced {
                pathway,
                attempt,
                status,
                recorded_seq,
            },
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

// Same shape as `PgBackend::apply` (step.rs) and SQLite's `insert_and_apply`: the same edge
// walk and fence result around another unit of work.
impl PgBackend {
    /// Inserts a new pathway and applies its first step in **one** transaction: a refused
    /// step leaves no pathway behind. Returns the version after the step.
    pub(crate) fn insert_and_apply_step(
        &self,
        new: super::NewPathway,
        events: Vec<super::EventDraft>,
        step: super::Step,
    ) -> Result<i64, PgError> {
        walk_edges(
            step.expected_state,
            &step.events,
            step.to.unwrap_or(step.expected_state),
        )?;
        let version = step.expected_version + 1;
        let fenced = self.write(|tx| {
            insert_tx(tx, &new, events)?;
            apply_tx(tx, &step)
        })?;
        match fenced {
            None => Ok(version),
            // A new pathway's attempt cannot have been taken over before it was stored.
            Some((attempt, status, recorded_seq)) => Err(PgError::Fenced {
                pathway: step.pathway,
                attempt,
                status,
                recorded_seq,
            }),
        }
    }
}

fn drafts(events: Vec<EventDraft>) -> Vec<super::EventDraft> {
    events.into_iter().map(Into::into).collect()
}

// Same shape as the trait's declaration (src/store/mod.rs) and SQLite's implementation: the
// signatures are the trait's; each body hands the crate's records to `PgBackend`'s own.
impl Backend for PgBackend {
    fn insert_pathway(&self, new: NewPathway, events: Vec<EventDraft>) -> Result<(), StoreError> {
        Ok(PgBackend::insert_pathway(self, new.into(), drafts(events))?)
    }

    fn apply(&self, step: Step) -> Result<i64, StoreError> {
        Ok(PgBackend::apply(self, step.into())?)
    }

    fn insert_and_apply(
        &self,
        new: NewPathway,
        events: Vec<EventDraft>,
        step: Step,
    ) -> Result<i64, StoreError> {
        Ok(self.insert_and_apply_step(new.into(), drafts(events), step.into())?)
    }

    fn grant_approval(
        &self,
        pathway: &str,
        expected: State,
        version: i64,
        fence: &Fence,
        id: &str,
        request_digest: &str,
        approver: &str,
        at: i64,
        event: EventDraft,
    ) -> Result<(), StoreError> {
        Ok(PgBackend::grant_approval(
            self,
            pathway,
            expected,
            version,
            &fence.clone().into(),
            id,
            request_digest,
            approver,
            at,
            event.into(),
        )?)
    }

    fn check_pin(
        &self,
        candidate: &pins::Candidate,
        by: &str,
        at: i64,
    ) -> Result<PinCheck, StoreError> {
        Ok(PgBackend::check_pin(
            self,
            &candidate.clone().into(),
            by,
            at,
        )?)
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

    fn check_pathway(&self, id: &str) -> Result<Replay, StoreError> {
        let found = self.read(|tx| super::check::check_pathway(tx, id))?;
        found.ok_or_else(|| StoreError::NoSuchPathway(id.to_owned()))
    }

    fn now_ms(&self) -> Result<i64, StoreError> {
        Ok(PgBackend::now_ms(self)?)
    }
}
