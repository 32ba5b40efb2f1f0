//! The writes: a new pathway, a step, a granted approval. Each runs `store::rules` over
//! [`PgRows`] in a savepoint of a group commit (`batch.rs`; the takeover and lease renewal
//! are transactions of their own, in `lease.rs`).
//! The first thing a step does is lock its pathway's row (`SELECT … FOR UPDATE`): steps on
//! one pathway, from any machine, run one after the other.

use std::sync::Arc;

use super::rows::PgRows;
use super::{PgBackend, Tx};
use crate::store::{EventDraft, Grant, NewPathway, Step, StoreError, rules};

impl PgBackend {
    /// Inserts a new pathway and its ledger events in one transaction. A second pathway
    /// with the same idempotency key fails with a unique violation.
    pub(crate) fn insert_pathway(
        &self,
        new: &NewPathway,
        events: Vec<EventDraft>,
    ) -> Result<(), StoreError> {
        let new = new.clone();
        let replays = Arc::clone(&self.replays);
        self.in_batch(move |tx| {
            rules::insert(&mut PgRows(tx), &new, events.clone(), Some(&replays))?;
            Ok(0)
        })
        .map(drop)
    }

    /// Applies one step in one transaction; returns the new version (the rules:
    /// `store::rules::apply`).
    pub(crate) fn apply(&self, step: Step) -> Result<i64, StoreError> {
        rules::check_edges(&step)?;
        let replays = Arc::clone(&self.replays);
        self.in_batch(move |tx| rules::apply(&mut PgRows(tx), step.clone(), Some(&replays)))
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
        let new = new.clone();
        let replays = Arc::clone(&self.replays);
        self.in_batch(move |tx| {
            let mut rows = PgRows(tx);
            rules::insert(&mut rows, &new, events.clone(), Some(&replays))?;
            rules::apply(&mut rows, step.clone(), Some(&replays))
        })
    }

    /// Inserts `new` (when given) and applies `steps` in order, in **one** transaction:
    /// any refusal leaves nothing of it behind. Returns the version after the last step.
    pub(crate) fn apply_together(
        &self,
        new: Option<(NewPathway, Vec<EventDraft>)>,
        steps: Vec<Step>,
    ) -> Result<i64, StoreError> {
        for step in &steps {
            rules::check_edges(step)?;
        }
        let replays = Arc::clone(&self.replays);
        self.in_batch(move |tx| {
            let mut rows = PgRows(tx);
            match &new {
                Some((new, events)) => rules::insert_together(
                    &mut rows,
                    new,
                    events.clone(),
                    steps.clone(),
                    Some(&replays),
                ),
                None => rules::apply_together(&mut rows, steps.clone(), Some(&replays)),
            }
        })
    }

    /// Records a granted approval (and its ledger event) without changing state, provided
    /// the pathway is still in `expected` at `version` with these digests.
    pub(crate) fn grant_approval(&self, grant: Grant) -> Result<(), StoreError> {
        let replays = Arc::clone(&self.replays);
        self.in_batch(move |tx| {
            rules::grant(&mut PgRows(tx), grant.clone(), Some(&replays))?;
            Ok(0)
        })
        .map(drop)
    }

    /// Takes the ledger head and appends nothing: the batch signs the log before its
    /// `COMMIT` (with a signing key).
    pub(crate) fn sign_log(&self) -> Result<(), StoreError> {
        self.in_batch(move |tx| {
            crate::store::rows::Rows::head(&mut PgRows(tx))?;
            Ok(0)
        })
        .map(drop)
    }

    /// Steps made durable, the commits that carried them (see `batch.rs`), and the steps
    /// whose check used a kept replay (`store::replays`).
    pub(crate) fn batch_stats(&self) -> (u64, u64, u64) {
        let stats = self.batcher.stats();
        (stats.steps, stats.commits, self.replays.used_count())
    }

    /// How many steps wait for a batch, and how many batches are being written (tests
    /// order a batch by them).
    #[cfg(test)]
    pub(crate) fn waiting_steps(&self) -> (usize, usize) {
        self.batcher.waiting()
    }

    /// Runs one step's writes in a group commit (`batch.rs`): its own savepoint in a
    /// transaction shared with the steps of other callers, one commit for all. A
    /// [`StoreError::Fenced`] refusal is committed with the record of the refusal (and
    /// returned as the error); every other error rolls the step back.
    fn in_batch(
        &self,
        op: impl FnMut(&mut Tx<'_>) -> Result<i64, StoreError> + Send + 'static,
    ) -> Result<i64, StoreError> {
        self.batcher.write(self, Box::new(op))
    }
}
