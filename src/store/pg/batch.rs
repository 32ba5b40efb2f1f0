//! Group commit on PostgreSQL: the steps of concurrent callers in one transaction, one
//! commit (one flush of the server's write-ahead log) for the batch.
//!
//! The scheme of SQLite's (`store::batch`), with up to two leaders ([`LEADERS`]): a
//! caller queues its step; if fewer batches than that are being written and its step is
//! still queued, it becomes a *leader*: it takes a connection, then everything queued so
//! far (its own step among them; if another leader took it meanwhile, it takes nothing
//! and waits for that leader's batch), and writes it in one transaction,
//! each step in its own savepoint (a step alone in its batch needs none: its refusal rolls
//! the transaction back), then commits, hands every step its result and wakes the
//! waiters. Otherwise it waits for its result, or for a leader's place. So steps batch up
//! while the leaders write, and a step that waits for a lock held elsewhere holds up one
//! leader, not the runtime. A caller gets `Ok` only after the `COMMIT` that made
//! its step durable has returned: the write-ahead rule is unchanged.
//!
//! **Locks.** A step locks its pathway's row, and its first ledger event locks the ledger
//! head until the commit. In a batch, every step after the first asks for its pathway's
//! row with `NOWAIT`: the batch may already hold the head, and another transaction that
//! holds that pathway's row (a step of another runtime on the same database) may be waiting
//! for the head, which would be a deadlock. A step that finds its row locked is rolled back
//! to its savepoint and goes back to the front of the queue, for the next batch, where it
//! may be first and wait. So a batch never waits for a row lock while it holds the head.
//!
//! If the batch itself fails (no connection, a lost connection, a failed `COMMIT`), no step
//! of it is applied, as far as this process can tell, and every caller in it gets the
//! failure; where the `COMMIT` was lost on the wire, whether it committed is unknown, as for
//! a single step ([`StoreError::Postgres`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Condvar, Mutex};

use super::tx::{Inner, Tx};
use super::{PgBackend, PgError, pool};
use crate::store::StoreError;

/// How many batches one runtime writes at once (each on a connection of its pool, at most
/// the pool's size). Two: a batch whose first step waits for a row lock held elsewhere
/// holds up half the runtime's writes, not all of them, and the steps that queue meanwhile
/// still share commits. Measured against one and against the pool's size (docs/storage.md):
/// at 16 in flight one and two did the same within noise, four made smaller batches (1.7
/// commits per call against 0.6 to 1.0) and fewer calls a second.
const LEADERS: usize = 2;

/// One step's writes, run again if its batch defers it. Returns the pathway's new version
/// (0 for writes that have none).
pub(super) type Op = Box<dyn FnMut(&mut Tx<'_>) -> Result<i64, StoreError> + Send>;

struct Slot {
    /// Taken out while it runs, put back if the step is deferred.
    op: Option<Op>,
    /// The step's result while its batch is open (not yet durable).
    staged: Option<Result<i64, StoreError>>,
    /// The result its caller may take: set only once the batch is over.
    result: Option<Result<i64, StoreError>>,
}

type Queued = Arc<Mutex<Slot>>;

#[derive(Default)]
struct Queue {
    waiting: Vec<Queued>,
    /// Batches being written (at most the pool's size).
    leading: usize,
}

impl Queue {
    /// Whether `slot` waits here, not yet taken by a batch.
    fn holds(&self, slot: &Queued) -> bool {
        self.waiting.iter().any(|s| Arc::ptr_eq(s, slot))
    }
}

/// The queue of steps waiting for a batch, and the counts of what was committed.
#[derive(Default)]
pub(super) struct Batcher {
    queue: Mutex<Queue>,
    /// Signalled (under `queue`) when a batch is over.
    done: Condvar,
    steps: AtomicU64,
    commits: AtomicU64,
    deferred: AtomicU64,
}

/// What a batch's commits carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct BatchStats {
    pub(super) steps: u64,
    pub(super) commits: u64,
    /// Steps put back for the next batch because their pathway's row was locked.
    pub(super) deferred: u64,
}

/// Leadership of one batch: when dropped (after the batch, or as a panic unwinds), the
/// next caller may lead, and the waiters look at their results.
struct Lead<'a>(&'a Batcher);

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        let mut queue = self.0.queue.lock();
        queue.leading -= 1;
        self.0.done.notify_all();
        drop(queue);
    }
}

/// The steps of one batch: any still without a result when it is dropped (a step panicked
/// and unwound the batch) get an error, so their callers do not wait forever.
struct Carried(Vec<Queued>);

impl Drop for Carried {
    fn drop(&mut self) {
        for slot in &self.0 {
            let mut slot = slot.lock();
            if slot.result.is_none() {
                slot.result = Some(Err(StoreError::Corrupt(
                    "internal: the batch that carried this step was abandoned by a panic; nothing of it was committed"
                        .into(),
                )));
            }
        }
    }
}

/// Whether a step's error is a lock it could not take: its pathway's row under `NOWAIT`
/// (or another lock past `lock_timeout`); both come back as [`StoreError::Busy`].
/// A step's refusal again, for every kept step of a batch the seal refused.
fn again_store(e: &StoreError) -> StoreError {
    match e {
        StoreError::Log(e) => StoreError::Log(e.clone()),
        other => StoreError::PostgresBatch(other.to_string()),
    }
}

fn row_locked(e: &StoreError) -> bool {
    matches!(e, StoreError::Busy { .. })
}

/// The same failure again, for each caller of a failed batch (a server error is not
/// `Clone`; its text is kept).
fn again(e: &PgError) -> StoreError {
    match e {
        PgError::Store(StoreError::Busy { timeout, holder }) => StoreError::Busy {
            timeout: *timeout,
            holder: holder.clone(),
        },
        other => StoreError::PostgresBatch(other.to_string()),
    }
}

impl Batcher {
    /// Runs `op` in a batch and returns once its batch is committed, or failed.
    pub(super) fn write(&self, backend: &PgBackend, op: Op) -> Result<i64, StoreError> {
        let slot = Arc::new(Mutex::new(Slot {
            op: Some(op),
            staged: None,
            result: None,
        }));
        let mut queue = self.queue.lock();
        queue.waiting.push(Arc::clone(&slot));
        loop {
            if let Some(result) = slot.lock().result.take() {
                return result;
            }
            // A caller leads only while its own step waits in the queue. Once a batch has
            // taken it, the caller waits for that batch: were it to lead meanwhile, it could
            // take a step that waits for a row lock as the first of its batch and keep its
            // own result, long ready, from its caller until that wait ended.
            if queue.leading >= LEADERS.min(backend.pool.size()) || !queue.holds(&slot) {
                self.done.wait(&mut queue);
                continue;
            }
            queue.leading += 1;
            drop(queue);
            let lead = Lead(self);
            self.lead(backend, &slot);
            drop(lead);
            queue = self.queue.lock();
        }
    }

    /// Takes a connection, then the queue, and writes it as one batch: unless the caller's
    /// own step (`own`) left the queue meanwhile, taken by another leader (then the steps
    /// queued now are left to their own callers).
    fn lead(&self, backend: &PgBackend, own: &Queued) {
        let conn = backend.pool.take(false);
        let mut batch = {
            let mut queue = self.queue.lock();
            if !queue.holds(own) {
                return;
            }
            Carried(std::mem::take(&mut queue.waiting))
        };
        let deferred = match conn {
            Ok(mut conn) => self.write_batch(&mut conn, &batch.0, backend.sealer()),
            Err(e) => {
                for slot in &batch.0 {
                    slot.lock().staged = Some(Err(again(&e)));
                }
                Vec::new()
            }
        };
        // A step put back is no longer this batch's: it gets no result here (not even the
        // abandoned batch's error, as `Carried` would give it), only in a later batch.
        batch
            .0
            .retain(|slot| !deferred.iter().any(|d| Arc::ptr_eq(d, slot)));
        for slot in &batch.0 {
            let mut slot = slot.lock();
            if slot.result.is_none() {
                slot.result = slot.staged.take();
            }
        }
        if !deferred.is_empty() {
            self.deferred
                .fetch_add(deferred.len() as u64, Ordering::Relaxed);
            let mut queue = self.queue.lock();
            queue.waiting.splice(0..0, deferred);
        }
    }

    /// Writes `batch` in one transaction and commits it; each step's result is staged.
    /// Returns the steps put back for the next batch.
    fn write_batch(
        &self,
        conn: &mut pool::Taken<'_>,
        batch: &[Queued],
        sealer: Option<&crate::store::log::Sealer>,
    ) -> Vec<Queued> {
        let solo = batch.len() == 1;
        let mut deferred = Vec::new();
        let pool::Conn {
            client, statements, ..
        } = &mut **conn;
        let outcome = (|| -> Result<usize, PgError> {
            let mut tx = Tx {
                inner: Inner::Own(client.transaction()?),
                statements,
                nowait: false,
                head: None,
                sealer,
                covered: None,
            };
            let mut wrote = 0;
            // One savepoint, moved past each step that is kept: `RELEASE` and a new
            // `SAVEPOINT` in one round trip; `ROLLBACK TO` keeps it for the next step. The
            // last step's needs no release: `COMMIT` ends it.
            if !solo {
                tx.inner.batch_execute("SAVEPOINT rpr_step")?;
            }
            let last = batch.len() - 1;
            for (i, queued) in batch.iter().enumerate() {
                let Some(mut op) = queued.lock().op.take() else {
                    continue;
                };
                tx.nowait = i > 0;
                let head = tx.head.clone();
                let covered = tx.covered.clone();
                let result = op(&mut tx);
                let mut slot = queued.lock();
                let keep = matches!(result, Ok(_) | Err(StoreError::Fenced { .. }));
                if solo {
                    if !keep {
                        // Refused: the transaction (the step's own) rolls back as it drops.
                        slot.staged = Some(result);
                        return Ok(0);
                    }
                } else if keep {
                    if i < last {
                        tx.inner
                            .batch_execute("RELEASE SAVEPOINT rpr_step; SAVEPOINT rpr_step")?;
                    }
                } else {
                    tx.inner.batch_execute("ROLLBACK TO SAVEPOINT rpr_step")?;
                    tx.head = head;
                    tx.covered = covered;
                    if i > 0 && result.as_ref().is_err_and(row_locked) {
                        slot.op = Some(op);
                        drop(slot);
                        deferred.push(Arc::clone(queued));
                        continue;
                    }
                }
                wrote += usize::from(result.is_ok());
                slot.staged = Some(result);
            }
            tx.nowait = false;
            // The batch's events signed into the log, in the same transaction.
            let mut signed = None;
            if let (Some(sealer), Some(covered), Some((head, _))) =
                (sealer, tx.covered.clone(), tx.head.clone())
            {
                match sealer.seal(&mut super::log::PgLog(&mut tx), &covered, head) {
                    Ok(s) => signed = s,
                    Err(e) => {
                        // Nothing of the batch commits (the transaction rolls back as it
                        // drops): every kept step gets the refusal.
                        for queued in batch {
                            let mut slot = queued.lock();
                            if matches!(slot.staged, Some(Ok(_) | Err(StoreError::Fenced { .. }))) {
                                slot.staged = Some(Err(again_store(&e)));
                            }
                        }
                        return Ok(0);
                    }
                }
            }
            tx.inner.commit()?;
            if let (Some(sealer), Some(signed)) = (sealer, signed) {
                sealer.committed(signed);
            }
            Ok(wrote)
        })();
        match outcome {
            Ok(wrote) => {
                if wrote > 0 || !solo {
                    self.commits.fetch_add(1, Ordering::Relaxed);
                }
                self.steps.fetch_add(wrote as u64, Ordering::Relaxed);
                deferred
            }
            Err(e) => {
                conn.saw(&e);
                // Nothing of the batch was applied: every step gets the failure, those put
                // back included (their callers may take them again).
                for queued in batch {
                    queued.lock().staged = Some(Err(again(&e)));
                }
                Vec::new()
            }
        }
    }

    /// How many steps wait in the queue for a batch, and how many batches are being written
    /// (for tests that order a batch).
    #[cfg(test)]
    pub(super) fn waiting(&self) -> (usize, usize) {
        let queue = self.queue.lock();
        (queue.waiting.len(), queue.leading)
    }

    /// What was committed so far.
    pub(super) fn stats(&self) -> BatchStats {
        BatchStats {
            steps: self.steps.load(Ordering::Relaxed),
            commits: self.commits.load(Ordering::Relaxed),
            deferred: self.deferred.load(Ordering::Relaxed),
        }
    }
}
