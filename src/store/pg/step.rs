//! The writes: a new pathway, a step, a granted approval. Each is one transaction in which
//! `store::rules` runs over [`PgRows`] (the takeover and lease renewal are in `lease.rs`).
//! The first thing a step does is lock its pathway's row (`SELECT … FOR UPDATE`): steps on
//! one pathway, from any machine, run one after the other.

use super::rows::PgRows;
use super::{PgBackend, PgError};
use crate::store::{EventDraft, Grant, NewPathway, Step, StoreError, rules};

/// Runs a rule's unit of work: a [`StoreError::Fenced`] refusal is committed with the record
/// of the refusal (and returned as the error), every other error rolls the transaction back.
fn fenced_or(result: Result<i64, StoreError>) -> Result<Result<i64, StoreError>, PgError> {
    match result {
        Err(fenced @ StoreError::Fenced { .. }) => Ok(Err(fenced)),
        Err(e) => Err(e.into()),
        Ok(version) => Ok(Ok(version)),
    }
}

impl PgBackend {
    /// Inserts a new pathway and its ledger events in one transaction. A second pathway
    /// with the same idempotency key fails with a unique violation.
    pub(crate) fn insert_pathway(
        &self,
        new: &NewPathway,
        events: Vec<EventDraft>,
    ) -> Result<(), StoreError> {
        Ok(self.write(|tx| Ok(rules::insert(&mut PgRows(tx), new, events)?))?)
    }

    /// Applies one step in one transaction; returns the new version (the rules:
    /// `store::rules::apply`).
    pub(crate) fn apply(&self, step: Step) -> Result<i64, StoreError> {
        rules::check_edges(&step)?;
        self.write(|tx| fenced_or(rules::apply(&mut PgRows(tx), step)))?
    }

    /// Inserts a new pathway and applies its first step in **one** transaction: a refused
    /// step leaves no pathway behind. Returns the version after the step.
    pub(crate) fn insert_and_apply(
        &self,
        new: &NewPathway,
        events: Vec<EventDraft>,
        step: Step,
    ) -> Result<i64, StoreError> {
        rules::check_edges(&step)?;
        self.write(|tx| {
            let mut rows = PgRows(tx);
            rules::insert(&mut rows, new, events)?;
            fenced_or(rules::apply(&mut rows, step))
        })?
    }

    /// Records a granted approval (and its ledger event) without changing state, provided
    /// the pathway is still in `expected` at `version` with these digests.
    pub(crate) fn grant_approval(&self, grant: Grant) -> Result<(), StoreError> {
        Ok(self.write(|tx| Ok(rules::grant(&mut PgRows(tx), grant)?))?)
    }
}
